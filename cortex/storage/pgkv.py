"""PostgreSQL as the ordered KV engine: one table of ``bytea`` keys and values per store.

``bytea`` compares bytewise (memcmp, then length), exactly as LMDB orders its keys, so every scan
of the store means the same on both engines. A URL names the server and the store::

    postgresql://[user[:password]@][host][:port]/dbname?store=NAME[&pool=N][&vectors=DIR]

``store`` names the table (``cortex_NAME``); ``pool`` caps this process's connections (default
8); ``vectors`` is a directory for the vector index cache (default: none, the index is rebuilt
from the stored vectors on first search). Every other parameter goes to libpq unchanged
(``host=/run/postgresql`` for a unix socket, ``sslmode``, ...).

Reads run in REPEATABLE READ READ ONLY snapshots; writes in SERIALIZABLE transactions, one
writer of a store at a time (a session advisory lock taken before the snapshot, as LMDB's
writer mutex), re-run on a serialization failure up to a bounded budget. A write transaction
keeps its puts and deletes in memory (reads see them) and sends them at commit as one DELETE and
one INSERT ... ON CONFLICT (per few thousand rows), in one round trip with the COMMIT when
they are small. The COMMIT is asynchronous and the lock released right after it; a statement
whose own synchronous commit flushes the WAL past it follows in the same round trip, so a write
returns durable while the next writer already runs, and the flushes of writers in a row are
shared (``_PgWrite._ending``). See ``specs/postgres.md``.
"""

from __future__ import annotations

import bisect
import itertools
import os
import random
import re
import select
import struct
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import TracebackType
from typing import Any, Final, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from cortex.errors import (
    ConflictError,
    CortexError,
    EngineError,
    MissingDependencyError,
    StoreFullError,
)
from cortex.storage.keys import prefix_end

__all__ = ["PgKV", "PgUrl", "is_url", "parse_url"]

T = TypeVar("T")

SCHEMES: Final = ("postgresql://", "postgres://")
_STORE_NAME: Final = re.compile(r"[a-z][a-z0-9_]{0,47}")
_OURS: Final = frozenset({"store", "pool", "vectors"})
RETRIES: Final = 12
"""How many times a write is tried when the server reports a serialization failure."""
_PAGE_FIRST: Final = 8
"""Rows in a scan's first page of keys and values (a seek reads one page); pages grow 8-fold."""
_PAGE_FIRST_KEYS: Final = 32
"""Rows in a scan's first page of keys only: an index scan's (``find`` type + tag, limit 10,
reads its ten keys and a few it skips in one round trip; keys are at most ~60 bytes)."""
_PAGE_MAX: Final = 2048
_PRELOAD_SCAN: Final = 8
"""``preload`` keeps a prefix when it holds at most this many pairs (edges of a memory)."""
_BATCH_ROWS: Final = 4096  # rows per INSERT ... unnest statement at commit
_BATCH_BYTES: Final = 16 << 20
_BEGIN_READ: Final = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
_AGAIN_BEGIN: Final = "ROLLBACK; COMMIT; BEGIN ISOLATION LEVEL SERIALIZABLE"
"""A write's BEGIN on a connection that holds the lock in a failed transaction (``_Again``)."""
_SMALL: Final = 1 << 20  # changes up to this many bytes commit in one round trip
_UPSERT_ROWS: Final = 16
"""Most rows a commit's INSERT sends as rows of parameters (``_Scan.upsert_rows``); more go
as two arrays (``unnest``). A write of one memory puts about a dozen."""
_ASYNC: Final = "SET LOCAL synchronous_commit TO off"
_FLUSH: Final = "SELECT pg_logical_emit_message(true, 'cortex', '')"
"""A statement whose transaction writes WAL (a message that logical decoding, when used, passes
on under the prefix ``cortex``), so its synchronous commit flushes the WAL up to its commit
record, and with it every commit made before (``PgKV.write``: the lock is released before the
flush)."""


def _unlock_flush(lock: str) -> str:
    """The unlock of ``lock`` (``(a, b)``) and ``_FLUSH`` as one statement, in that order.

    Its implicit transaction is the flush's, as when they are two statements: the unlock is
    not transactional (a session lock), so the lock is released before the message is
    written and the WAL flushed. A role without the right to run the flush fails the
    statement before the unlock runs; the write's error handling then releases every lock
    of the session (``_Conn.release``).
    """
    return f"SELECT pg_advisory_unlock{lock}, {_FLUSH.removeprefix('SELECT ')}"


_CAN_FLUSH: Final = (
    "coalesce(has_function_privilege("
    "to_regprocedure('pg_logical_emit_message(boolean,text,text)'), 'execute'), false)"
)


def is_url(target: object) -> bool:
    """Whether ``target`` names a PostgreSQL store (a ``postgresql://`` URL)."""
    return isinstance(target, str) and target.startswith(SCHEMES)


class PgUrl:
    """A parsed store URL: the libpq part, the store's name and cortex's options."""

    def __init__(self, conninfo: str, store: str, pool: int, vectors: str | None, shown: str):
        self.conninfo = conninfo
        self.store = store
        self.pool = pool
        self.vectors = vectors
        self.shown = shown


def parse_url(url: str) -> PgUrl:
    """Split a store URL into libpq's URL and cortex's parameters.

    Raises:
        CortexError: no ``store=``, a bad store name or a bad ``pool``.
    """
    parts = urlsplit(url)
    params = parse_qsl(parts.query, keep_blank_values=True)
    ours = {k: v for k, v in params if k in _OURS}
    rest = [(k, v) for k, v in params if k not in _OURS]
    store = ours.get("store")
    if not store:
        raise CortexError(
            f"{_hide(url)} names no store: add ?store=NAME (lower-case letters, digits, _)"
        )
    if not _STORE_NAME.fullmatch(store):
        raise CortexError(
            f"store name {store!r} is not allowed: 1 to 48 lower-case letters, digits and _, "
            "starting with a letter"
        )
    try:
        pool = int(ours.get("pool", "8"))
    except ValueError:
        pool = 0
    if not 1 <= pool <= 1000:
        raise CortexError(f"pool={ours.get('pool')!r}: give a number of connections, 1 to 1000")
    # built by hand: urlunsplit drops the // of an empty host (a unix socket given as host=)
    query = urlencode(rest)
    conninfo = f"{parts.scheme}://{parts.netloc}{parts.path}" + (f"?{query}" if query else "")
    return PgUrl(conninfo, store, pool, ours.get("vectors") or None, _hide(url))


def _hide(url: str) -> str:
    """The URL without its password (for messages and ``Store.path``)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _psycopg() -> tuple[Any, Any]:
    """The modules ``psycopg`` and ``psycopg_pool``, imported on first use, then kept."""
    if _MODULES:
        return _MODULES[0]
    try:
        import psycopg
        import psycopg_pool
    except ImportError:
        raise MissingDependencyError(
            "a postgresql:// store needs psycopg 3 and psycopg_pool: "
            "pip install 'cortex-store[postgres]'"
        ) from None
    _MODULES[:] = [(psycopg, psycopg_pool)]
    return psycopg, psycopg_pool


_MODULES: list[tuple[Any, Any]] = []


_BAD_OPTION: Final = re.compile(
    r"invalid \w+ value|for connection option|invalid port number|bad value for \w+"
)
"""What libpq and psycopg say of a connection option's value they refuse (``sslmode=bogus``,
``connect_timeout=soon``): the URL's fault, not the server's."""


def _wrap(exc: BaseException, what: str) -> CortexError:
    """A psycopg error as a CortexError naming what to do."""
    psycopg, _ = _psycopg()
    errors = psycopg.errors
    state = getattr(exc, "sqlstate", None) or ""
    if isinstance(exc, errors.DiskFull | errors.OutOfMemory) or state.startswith("53"):
        return StoreFullError(
            f"the PostgreSQL server is out of resources ({exc}); nothing was written: free disk "
            "space or memory on the server and retry"
        )
    if isinstance(exc, errors.UndefinedTable):
        return CortexError(f"{what}: the store's table is gone ({exc}); was the store dropped?")
    if isinstance(exc, errors.InsufficientPrivilege):
        return CortexError(f"{what}: the database role lacks a privilege ({exc})")
    if isinstance(exc, errors.ReadOnlySqlTransaction):
        return CortexError(f"{what}: the server is read-only (a replica?): {exc}")
    if not state and _BAD_OPTION.search(str(exc)):  # libpq's or psycopg's, before connecting
        return CortexError(f"{what}: the URL has a value libpq refuses ({exc}); fix it in the URL")
    if isinstance(exc, psycopg.OperationalError) or state.startswith(("08", "57")):
        return EngineError(
            f"{what}: the PostgreSQL server is unreachable or went away ({exc}); nothing was "
            "written; retry when it is back"
        )
    return EngineError(f"{what}: PostgreSQL error: {exc}")


def _quiet(conn: Any) -> bool:
    """Whether an idle connection is open with nothing waiting on its socket.

    An idle connection has nothing to read: bytes there (the server's FATAL goodbye at a
    shutdown) or the end of the stream mean the server is gone from it. One ``poll`` without
    waiting (~1 us).
    """
    if conn.closed or conn.broken:
        return False
    try:
        p = select.poll()
        p.register(conn.fileno(), select.POLLIN | select.POLLPRI)
        return not p.poll(0)
    except (OSError, ValueError, TypeError):
        return False


class _Scan:
    """The SQL of one engine's table, composed once."""

    def __init__(self, table: str) -> None:
        t = f'"{table}"'
        self.get = f"SELECT v FROM {t} WHERE k = %s"
        self.get_any = f"SELECT k, v FROM {t} WHERE k = ANY(%s::bytea[])"
        cols = {"kv": "k, v", "k": "k"}
        self.fwd: dict[tuple[str, bool], str] = {}
        self.rev: dict[tuple[str, bool, bool], str] = {}
        for name, c in cols.items():
            # forward: lo <= k (< hi), or lo < k when paging on
            self.fwd[(name, True)] = (
                f"SELECT {c} FROM {t} WHERE k >= %s AND k < %s ORDER BY k LIMIT %s"
            )
            self.fwd[(name, False)] = f"SELECT {c} FROM {t} WHERE k >= %s ORDER BY k LIMIT %s"
            for incl in (True, False):
                op = "<=" if incl else "<"
                self.rev[(name, incl, True)] = (
                    f"SELECT {c} FROM {t} WHERE k {op} %s AND k >= %s ORDER BY k DESC LIMIT %s"
                )
                self.rev[(name, incl, False)] = (
                    f"SELECT {c} FROM {t} WHERE k {op} %s ORDER BY k DESC LIMIT %s"
                )
        self.rev_end = {
            (name, True): f"SELECT {c} FROM {t} WHERE k >= %s ORDER BY k DESC LIMIT %s"
            for name, c in cols.items()
        } | {
            (name, False): f"SELECT {c} FROM {t} ORDER BY k DESC LIMIT %s"
            for name, c in cols.items()
        }
        self.fwd_after = {
            name: f"SELECT {c} FROM {t} WHERE k > %s AND k < %s ORDER BY k LIMIT %s"
            for name, c in cols.items()
        }
        self.fwd_after_open = {
            name: f"SELECT {c} FROM {t} WHERE k > %s ORDER BY k LIMIT %s"
            for name, c in cols.items()
        }
        self.around = (
            f"(SELECT k, v FROM {t} WHERE k <= %s AND k >= %s ORDER BY k DESC LIMIT 1) "
            f"UNION ALL (SELECT k, NULL FROM {t} WHERE k > %s ORDER BY k LIMIT 1)"
        )
        self.around_many = (
            "SELECT q.i, a.k, a.v, b.k FROM unnest(%s::bytea[], %s::bytea[]) "
            "WITH ORDINALITY AS q(p, key, i) "
            f"LEFT JOIN LATERAL (SELECT k, v FROM {t} WHERE k <= q.key AND k >= q.p "
            "ORDER BY k DESC LIMIT 1) a ON true "
            f"LEFT JOIN LATERAL (SELECT k FROM {t} WHERE k > q.key ORDER BY k LIMIT 1) b ON true"
        )
        self.point = (
            f"SELECT 0, k, v FROM {t} WHERE k = ANY(%s::bytea[]) UNION ALL "
            f"(SELECT 1, k, v FROM {t} WHERE k >= %s AND k < %s ORDER BY k DESC LIMIT 1)"
        )
        # a get by id (``PgKV.point_read``) as ONE row: a column per key (NULL: no such key),
        # then the last pair under a prefix (NULLs: none); binary parameters and results, no
        # array or hexadecimal to parse on either side, no key sent back, one row to decode.
        # Each key is its own primary-key lookup (an IN list is an array scan: ~2x the server's
        # time; a UNION ALL sends a row, and its keys, per key)
        one = f"(SELECT v FROM {t} WHERE k = %s)"
        self.point_vals = {1: f"SELECT {one}", 2: f"SELECT {one}, {one}"}
        self.point_last = (
            f"SELECT {one}, l.k, l.v FROM (VALUES (0)) AS o LEFT JOIN LATERAL "
            f"(SELECT k, v FROM {t} WHERE k >= %s AND k < %s ORDER BY k DESC LIMIT 1) l ON true"
        )
        # a get by id under format 21 (``PgKV.point_read_row``) as ONE row: the pointer's value
        # (the ``id/`` record), then per key the value under prefix || its first 4 bytes (the
        # row) || suffix, then the last pair under a prefix || the row: the server follows the
        # pointer, so a get is one round trip again. Where the pointer is absent its row is
        # NULL and so is every key built of it (NULL columns); the client checks the pointer
        # (its CRC and length) before it trusts a column. ``OFFSET 0`` keeps the pointer's
        # subquery whole: pulled up, the server looked the pointer up once per use (4 index
        # scans of ``id/`` instead of 1, ``EXPLAIN ANALYZE``)
        ptr = (
            f"FROM (SELECT (SELECT v FROM {t} WHERE k = %s) AS pv OFFSET 0) AS p "
            "CROSS JOIN LATERAL (SELECT substring(p.pv from 1 for 4) AS r) AS x"
        )
        at = f"(SELECT v FROM {t} WHERE k = %s || x.r || %s)"
        tail = (
            f"LEFT JOIN LATERAL (SELECT k, v FROM {t} WHERE k >= %s || x.r "
            "AND k < %s || x.r || %s ORDER BY k DESC LIMIT 1) l ON true"
        )
        self.point_row = {
            (n, last): "SELECT p.pv"
            + "".join(f", {at}" for _ in range(n))
            + (", l.k, l.v " if last else " ")
            + ptr
            + (f" {tail}" if last else "")
            for n in (1, 2)
            for last in (False, True)
        }
        self.preload = (
            f"SELECT 0, NULL::bigint, k, v FROM {t} WHERE k = ANY(%s::bytea[]) UNION ALL "
            "SELECT 1, q.i, a.k, a.v FROM unnest(%s::bytea[], %s::bytea[]) "
            "WITH ORDINALITY AS q(p, e, i) "
            f"JOIN LATERAL (SELECT k, v FROM {t} WHERE k >= q.p AND k < q.e "
            "ORDER BY k LIMIT %s) a ON true"
        )
        # and each of some prefixes' last pair (a find's memories' last versions, read with
        # their heads: ``_PgRead.preload``'s ``tails``)
        self.preload_tails = (
            f"{self.preload} UNION ALL "
            "SELECT 2, q.i, a.k, a.v FROM unnest(%s::bytea[], %s::bytea[]) "
            "WITH ORDINALITY AS q(p, e, i) "
            f"JOIN LATERAL (SELECT k, v FROM {t} WHERE k >= q.p AND k < q.e "
            "ORDER BY k DESC LIMIT 1) a ON true"
        )
        # and values at the rows some pointers hold (format 21: a find's hits' heads and last
        # versions by id, through ``id/``, in the same statement as their ``id/`` records:
        # ``_PgRead.preload``'s ``via``): prefix || the pointer value's first 4 bytes, and the
        # last pair under another prefix || those bytes; rows of the pairs as stored. Each
        # lookup is a LATERAL with LIMIT (kept whole: a plain join was hashed against a
        # sequential scan of the table, ``EXPLAIN ANALYZE``)
        row = "substring(i.v from 1 for 4)"
        self.preload_via = (
            f"{self.preload_tails} UNION ALL "
            f"SELECT 3, NULL::bigint, h.k, h.v FROM {t} i JOIN LATERAL (SELECT k, v FROM {t} "
            f"WHERE k = %s || {row} LIMIT 1) h ON true WHERE i.k = ANY(%s::bytea[]) UNION ALL "
            f"SELECT 3, NULL::bigint, a.k, a.v FROM {t} i JOIN LATERAL (SELECT k, v FROM {t} "
            f"WHERE k >= %s || {row} AND k < %s || {row} || %s ORDER BY k DESC LIMIT 1) a "
            "ON true WHERE i.k = ANY(%s::bytea[])"
        )
        self.tail = f"SELECT k, v FROM {t} WHERE k >= %s AND k < %s ORDER BY k DESC LIMIT 1"
        self.delete = f"DELETE FROM {t} WHERE k = ANY(%s::bytea[])"
        self.upsert = (
            f"INSERT INTO {t} (k, v) SELECT * FROM unnest(%s::bytea[], %s::bytea[]) "
            "ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v"
        )
        # a few rows as a list of their own parameters, one statement per count: nothing to
        # pack into arrays on the client, or to take apart on the server (``_PgWrite.commit``)
        self.upsert_rows = {
            n: f"INSERT INTO {t} (k, v) VALUES {', '.join(['(%s, %s)'] * n)} "
            "ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v"
            for n in range(1, _UPSERT_ROWS + 1)
        }
        # the same with binary parameters (server-side binding: a large commit's arrays are
        # sent as bytes, not escaped to text, ~100x less CPU to build)
        self.delete_b = self.delete.replace("%s", "%b")
        self.upsert_b = self.upsert.replace("%s", "%b")
        self.create = f"CREATE TABLE IF NOT EXISTS {t} (k bytea PRIMARY KEY, v bytea NOT NULL)"
        self.size = f"SELECT pg_total_relation_size('{t}'), count(*) FROM {t}"
        self._t = t
        # every statement above, prepared once per pooled connection (``PgKV._configure``) and
        # sent as EXECUTE: the server plans none of them again (~50-110 µs each, measured)
        texts = [
            self.get,
            self.get_any,
            *self.fwd.values(),
            *self.rev.values(),
            *self.rev_end.values(),
            *self.fwd_after.values(),
            *self.fwd_after_open.values(),
            self.around,
            self.around_many,
            self.point,
            *self.point_vals.values(),
            self.point_last,
            *self.point_row.values(),
            self.preload,
            self.preload_tails,
            self.preload_via,
            self.tail,
            self.delete,
            self.upsert,
            *self.upsert_rows.values(),
        ]
        # and the statements without parameters around a write (its lock, the ending's,
        # ``_PgWrite._ending``): a pipeline sends them by name (``_fixed_steps``), so the server
        # parses, analyses and plans none of them per write. ``SET LOCAL`` cannot be prepared:
        # ``set_config(..., true)`` is the same setting as a statement that can
        a, b = _lock_key(table)
        self.fixed = {
            f"SELECT pg_advisory_lock({a}, {b})": f"SELECT pg_advisory_lock({a}, {b})",
            f"SELECT pg_advisory_unlock({a}, {b})": f"SELECT pg_advisory_unlock({a}, {b})",
            _ASYNC: "SELECT set_config('synchronous_commit', 'off', true)",
            _FLUSH: _FLUSH,
            _unlock_flush(f"({a}, {b})"): _unlock_flush(f"({a}, {b})"),
        }
        texts += self.fixed.values()
        self.prepared = {q: f"cortex_q{i}" for i, q in enumerate(dict.fromkeys(texts))}
        self.fixed_names = {sql: self.prepared[q].encode() for sql, q in self.fixed.items()}
        self.prepare = "; ".join(
            f"PREPARE {name} AS {_numbered(q)}" for q, name in self.prepared.items()
        )
        # and the parameter types the server gave them (with the PREPAREs, one round trip): a
        # round trip of prepared statements binds its parameters in binary (``_binary_steps``)
        self.prepare_typed = (
            f"{self.prepare}; SELECT name, parameter_types::oid[] FROM pg_prepared_statements "
            "WHERE name LIKE 'cortex\\_q%'"
        )
        # each of them planned once per connection: a custom plan per execution (the server's
        # default while a generic plan does not look cheaper, which it never did for these)
        # was ~10% of the server's CPU per write; every generic plan is an index scan
        self.generic = "SET plan_cache_mode TO force_generic_plan"
        # the store's version (``_Known``): a sequence a statement trigger bumps on every
        # change of the table, whoever makes it; prepared only where it exists
        # (``PgKV._versioning``), by names of their own
        seq = f'"{table}_v"'
        self.seq = seq
        self.probe = f"SELECT last_value FROM {seq}"
        self.vcheck = f"SELECT 1 / (last_value = %s)::int FROM {seq}"
        self.currval = f"SELECT currval('{seq}'::regclass)"
        self.absent = f"SELECT 1 / (NOT EXISTS (SELECT FROM {t} WHERE k = ANY(%s::bytea[])))::int"
        # the new version and the commit's asynchronous setting (``_ASYNC``) in one statement:
        # a commit's pipeline sends one statement fewer
        self.currval_async = (
            f"SELECT currval('{seq}'::regclass), "
            "set_config('synchronous_commit', 'off', true) = 'off'"
        )
        self.versioned = {
            q: f"cortex_v{i}"
            for i, q in enumerate(
                (self.probe, self.vcheck, self.currval, self.absent, self.currval_async)
            )
        }
        self.prepare_typed_v = (
            f"{self.prepare}; "
            + "; ".join(f"PREPARE {n} AS {_numbered(q)}" for q, n in self.versioned.items())
            + "; SELECT name, parameter_types::oid[] FROM pg_prepared_statements "
            "WHERE name LIKE 'cortex\\_q%' OR name LIKE 'cortex\\_v%'"
        )
        self.version_setup = (
            f"CREATE SEQUENCE IF NOT EXISTS {seq} START WITH %s OWNED BY {t}.k; "
            f"CREATE OR REPLACE FUNCTION {seq}() RETURNS trigger LANGUAGE plpgsql AS "
            f"$f$BEGIN PERFORM nextval('{seq}'::regclass); RETURN NULL; END$f$; "
            f"DROP TRIGGER IF EXISTS {seq} ON {t}; "
            f"CREATE TRIGGER {seq} BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON {t} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {seq}()"
        )
        self.version_ready = (
            f"SELECT to_regclass('{seq}') IS NOT NULL AND EXISTS (SELECT FROM pg_trigger "
            f"WHERE tgrelid = to_regclass('{t}') AND tgname = '{table}_v' AND tgenabled = 'O')"
        )

    def keys_in(self, keys: list[bytes], last: bool = False) -> tuple[str, tuple[Any, ...]]:
        """The query of ``keys`` and its parameters (one array).

        With ``last``, the query also reads the last pair of a prefix, whose two bounds the
        caller appends.
        """
        return (self.point if last else self.get_any), (keys,)


def _upsert(q: _Scan, keys: list[bytes], values: list[bytes]) -> tuple[str, tuple[Any, ...]]:
    """The INSERT ... ON CONFLICT of these pairs: their own parameters, or two arrays."""
    n = len(keys)
    if n > _UPSERT_ROWS:
        return q.upsert, (keys, values)
    flat: list[bytes] = [b""] * (2 * n)
    flat[0::2] = keys
    flat[1::2] = values
    return q.upsert_rows[n], tuple(flat)


def _numbered(query: str) -> str:
    """``query`` with its ``%s`` placeholders numbered ``$1``, ``$2``, ... (for PREPARE)."""
    pieces = query.split("%s")
    return "".join(p + (f"${i}" if i < len(pieces) else "") for i, p in enumerate(pieces, 1))


class _Conn:
    """A pooled connection for one transaction, begun lazily.

    The transaction's first statement travels with its BEGIN (and a writer's lock) in one
    simple-protocol query string, so a transaction costs no round trip of its own to start.
    """

    __slots__ = ("_begin", "begun", "conn", "early", "kv", "locked", "q", "sent")

    def __init__(self, kv: PgKV, begin: str, conn: Any = None) -> None:
        self.kv = kv
        self.conn: Any = kv._getconn() if conn is None else conn
        self.q = kv._sql
        self._begin = begin
        self.begun = False
        self.locked = conn is not None
        """The connection came holding the writer's lock (``_Again``: ``begin`` rolls back)."""
        self.early: list[_Step] | None = None
        """The steps of a round trip sent and not yet answered (``send_early``)."""
        self.sent = (0.0, 0.0)
        """When they were sent: the wall clock and this thread's CPU time."""

    def send_early(self) -> bool:
        """Send a writer's lock, BEGIN and the store's version read now; read the answers later.

        One pipeline of prepared statements (``PgKV._ahead``), whose answers ``collect``
        reads: the server runs it while the client works (a write's ``fn``), and the client
        reads its answers, there by then, without waiting. False (nothing sent) where the
        statements are not prepared on this connection.
        """
        steps = self.kv._ahead(self.conn)
        if self.begun or steps is None:
            return False
        psycopg, _ = _psycopg()
        try:
            _pipeline_send(self.conn.pgconn, steps)
        except BaseException as exc:
            self.conn.close()
            if not isinstance(exc, psycopg.OperationalError):
                raise
            # a dead pooled connection (a server restart): another; nothing goes ahead
            self.kv._putconn(self.conn)
            self.conn = None
            self.conn = self.kv._getconn()
            return False
        self.kv.overlapped += 1
        self.early = steps
        self.begun = True
        self.sent = (time.perf_counter(), time.thread_time())
        return True

    def collect(self) -> list[list[Any]]:
        """The rows of ``send_early``'s statements (the lock's and BEGIN's are not returned)."""
        steps, self.early = self.early, None
        assert steps is not None
        return _pipeline_answers(self.conn, steps)

    def inline(self, stmts: list[str | tuple[str, tuple[Any, ...]]]) -> str:
        """``_inline`` with this connection's prepared statements."""
        return _inline(stmts, self.kv._names(self.conn))

    def _trip(self, stmts: list[tuple[str, tuple[Any, ...]]], *, begin: bool) -> list[list[Any]]:
        """``stmts`` (after the BEGIN when ``begin``) in one round trip; the rows of each.

        Prepared statements whose parameters all bind in binary go as one pipeline, their
        results in binary too (``_pipeline``: no hexadecimal to write, or for the server to
        parse, print and the client to parse again); anything else as one simple-protocol
        query string (``_send_all``).
        """
        steps = self.kv._binary_steps(self.conn, stmts)
        if steps is None:
            if begin:
                return _send_all(self.conn, self.inline([self._begin, *stmts]), keep=len(stmts))
            return _send_all(self.conn, self.inline(list(stmts)))
        if begin:
            steps = [*_begin_steps(self._begin, self.kv._fixed(self.conn)), *steps]
        return _pipeline(self.conn, steps)

    def _first(self, stmts: list[tuple[str, tuple[Any, ...]]]) -> list[list[Any]]:
        self.kv.round_trips += 1
        sets = self._trip(stmts, begin=True)
        self.begun = True
        return sets

    def start(self) -> None:
        """Begin now (a transaction that writes without reading first)."""
        if not self.begun:
            self.kv.round_trips += 1
            _send_all(self.conn, self._begin, keep=0)
            self.begun = True

    def execute(self, query: str, params: Any = None) -> None:
        """One statement whose result is not wanted (one round trip)."""
        self.kv.round_trips += 1
        self.conn.execute(query, params)

    def rows(self, query: str, params: tuple[Any, ...]) -> list[Any]:
        """Run ``query`` (one round trip; the transaction's BEGIN goes with the first)."""
        return self.run([(query, params)])[0]

    def run(self, stmts: list[tuple[str, tuple[Any, ...]]]) -> list[list[Any]]:
        """Run ``stmts`` in ONE round trip; the rows of each.

        The transaction's first round trip carries its BEGIN (and a writer's lock) in one
        simple-protocol query string, and so do later ones (their keys inlined as hexadecimal
        literals). A pooled connection found dead on the first round trip (the server restarted
        since it was last used) is replaced once: nothing of the transaction has run yet.
        """
        if not self.begun:
            psycopg, _ = _psycopg()
            try:
                return self._first(stmts)
            except psycopg.OperationalError:
                if not (self.conn.broken or self.conn.closed):
                    raise
                self.begun = False
                self.kv._putconn(self.conn)
                self.conn = None
                self.conn = self.kv._getconn()
                if self.locked:  # the lock went with the session: take it again
                    self.locked = False
                    self._begin = self.kv._lock_begin
                return self._first(stmts)
        self.kv.round_trips += 1
        return self._trip(stmts, begin=False)

    def release(self, *, failed: bool) -> None:
        """Return the connection to the pool.

        After a failure, roll back and drop the writer lock first; a connection that cannot is
        closed (its session, and the lock, end with it).
        """
        conn, self.conn = self.conn, None
        if conn is None:
            return
        if self.early is not None:  # answers never read: the session goes, and its lock
            self.early = None
            conn.close()
            self.kv._putconn(conn)
            return
        if failed and not conn.closed:
            psycopg, _ = _psycopg()
            try:
                self.kv.round_trips += 1
                conn.execute("ROLLBACK")
                if self.begun or self.locked:
                    self.kv.round_trips += 1
                    conn.execute("SELECT pg_advisory_unlock_all()")
            except psycopg.Error:
                conn.close()
            self.kv._putconn(conn)
            return
        self.kv._reuse(conn)


_ITEM: Final = (
    '","\\\\\\\\x'  # between two array items: quote, comma, quote, then \\x (escaped twice)
)


def _literal(v: Any) -> str:
    """``v`` as an SQL literal: bytes (hex), an int, None, or a list of bytes (an array).

    Escape-string syntax (``E'...'``), so the text means the same whatever the server's
    ``standard_conforming_strings``.
    """
    if isinstance(v, bytes):
        return f"E'\\\\x{v.hex()}'::bytea"
    if isinstance(v, int) and not isinstance(v, bool):
        return str(int(v))
    if v is None:
        return "NULL"
    if isinstance(v, list | tuple):
        if not v:
            return "E'{}'::bytea[]"
        try:
            return "E'{\"\\\\\\\\x" + _ITEM.join([b.hex() for b in v]) + "\"}'::bytea[]"
        except AttributeError:
            pass  # not bytes
    raise TypeError(f"no SQL literal for {type(v).__name__}")


def _inline(
    stmts: list[str | tuple[str, tuple[Any, ...]]], names: dict[str, str] | None = None
) -> str:
    """Statements joined into one simple-protocol query, their ``%s`` replaced by literals.

    The first round trip of a transaction carries its BEGIN (and a writer's lock) with its
    reads in one query string, which the simple protocol runs without parameters. Keys and
    values go as hexadecimal (``bytes.hex``: nothing to escape, and no per-value quoting in
    Python as a client-side binding cursor does). A statement ``names`` maps to the name it
    was prepared under goes as ``EXECUTE name(literals)``.
    """
    out = []
    for st in stmts:
        if isinstance(st, str):
            out.append(st)
            continue
        query, params = st
        name = names.get(query) if names is not None else None
        if name is not None:
            if query.count("%s") != len(params):
                raise ValueError(f"{len(params)} parameters for {query.count('%s')} placeholders")
            out.append(f"EXECUTE {name}({', '.join(map(_literal, params))})")
            continue
        pieces = query.split("%s")
        if len(pieces) != len(params) + 1:
            raise ValueError(f"{len(params)} parameters for {len(pieces) - 1} placeholders")
        parts = [pieces[0]]
        for v, piece in zip(params, pieces[1:], strict=True):
            parts.append(_literal(v))
            parts.append(piece)
        out.append("".join(parts))
    return "; ".join(out)


def _send_all(conn: Any, query: str, keep: int | None = None) -> list[list[Any]]:
    """Run ``query`` (statements in the simple protocol) in one round trip; their rows.

    The rows of each statement that returns rows (of the last ``keep`` of them only, when
    given; ``keep`` 1 is for a point read: one statement, sent with ``PQexec``).
    Straight through libpq (``conn.pgconn``): psycopg's cursor and pipeline layers cost
    60-260 µs of CPU a round trip on this path, libpq's own calls ~20 µs; the rows are loaded
    by psycopg's own loaders, as a cursor would. The wait for the answer is a ``poll`` (the
    GIL is released). The server stops at the first statement that fails; its error is raised
    as psycopg would raise it (``psycopg.errors``), a lost connection as ``OperationalError``.
    """
    psycopg, _ = _psycopg()
    pq = psycopg.pq
    pgconn = conn.pgconn
    if keep == 1:  # a point read: PQexec, one C call without the GIL (it cannot be
        # interrupted, so a COMMIT, which may wait on a synchronous replica, never goes this way)
        res = pgconn.exec_(query.encode())
        status = res.status
        if status == pq.ExecStatus.FATAL_ERROR:
            _raise_for(conn, res)
        if status != pq.ExecStatus.TUPLES_OK:
            return []
        rows = psycopg.adapt.Transformer(conn)
        rows.set_pgresult(res)
        return [rows.load_rows(0, res.ntuples, tuple)]
    pgconn.send_query(query.encode())
    while pgconn.flush():  # a large query on a non-blocking connection: wait to send the rest
        _wait(pgconn.socket, write=True)
    found: list[Any] = []
    failed = None
    while True:
        while pgconn.is_busy():
            _wait(pgconn.socket)
            pgconn.consume_input()
        res = pgconn.get_result()
        if res is None:
            break
        status = res.status
        if status == pq.ExecStatus.TUPLES_OK:
            found.append(res)
        elif status == pq.ExecStatus.FATAL_ERROR and failed is None:
            failed = res
    if failed is not None:
        _raise_for(conn, failed)
    if keep is not None:
        found = found[len(found) - keep :] if keep else []
    if not found:
        return []
    rows = psycopg.adapt.Transformer(conn)
    sets = []
    for res in found:
        rows.set_pgresult(res)
        sets.append(rows.load_rows(0, res.ntuples, tuple))
    return sets


_Step = str | bytes | tuple[bytes, list[bytes | None]] | None
"""A pipeline's step: SQL without parameters (text results), the name of a prepared statement
without parameters (``_Scan.fixed``), a prepared statement's name and its parameters in binary
(binary results), or None: a Sync (the server commits an implicit transaction there, and
resumes there after an error). Only the last kind's rows are returned."""

_ARRAY: Final = struct.Struct(">iiIii")  # a binary array's header: 1 dimension, no NULL
_EMPTY_ARRAY: Final = struct.pack(">iiI", 0, 0, 17)  # an empty bytea[]
_BYTEA: Final = 17
_BYTEA_ARRAY: Final = 1001
_INT8: Final = 20
_INT4: Final = 23


def _binary(oid: int, v: Any) -> bytes | None:
    """``v`` in the binary form of the parameter type ``oid`` (bytea, bytea[], int8, int4).

    Raises:
        TypeError: ``v`` does not fit the type, or the type is none of these.
    """
    if v is None:
        return None
    if oid == _BYTEA and isinstance(v, bytes):
        return v
    if oid == _BYTEA_ARRAY and isinstance(v, list | tuple):
        if not v:
            return _EMPTY_ARRAY
        parts = [_ARRAY.pack(1, 0, _BYTEA, len(v), 1)]
        for b in v:
            if not isinstance(b, bytes):
                raise TypeError(f"a bytea[] item is {type(b).__name__}, not bytes")
            parts.append(len(b).to_bytes(4, "big"))
            parts.append(b)
        return b"".join(parts)
    if oid in (_INT8, _INT4) and isinstance(v, int) and not isinstance(v, bool):
        return v.to_bytes(8 if oid == _INT8 else 4, "big", signed=True)
    raise TypeError(f"no binary form of {type(v).__name__} for the type oid {oid}")


def _begin_steps(begin: str, fixed: dict[str, bytes] | None = None) -> list[_Step]:
    """A transaction's BEGIN (``_Conn._begin``) as pipeline steps.

    Its COMMIT, which ends the writer's lock statement's own transaction, becomes a Sync: the
    BEGIN's transaction starts after it, so a writer's snapshot is still taken once the lock is
    held. A statement ``fixed`` names (the lock) goes by its prepared name.
    """
    return _fixed_steps([None if part == "COMMIT" else part for part in begin.split("; ")], fixed)


def _fixed_steps(steps: list[_Step], fixed: dict[str, bytes] | None) -> list[_Step]:
    """``steps`` with each SQL string ``fixed`` names (``_Scan.fixed_names``) as that name."""
    if not fixed:
        return steps
    return [fixed.get(st, st) if isinstance(st, str) else st for st in steps]


_TUPLES_OK: Final = 2
"""libpq's ``PGRES_TUPLES_OK`` (``psycopg.pq.ExecStatus.TUPLES_OK``), as a plain int: a get
compares it once."""
_FATAL_ERROR: Final = 7  # ``PGRES_FATAL_ERROR``
_PIPELINE_SYNC: Final = 10  # ``PGRES_PIPELINE_SYNC``
_FORMATS: Final = ((), (1,), (1, 1), (1, 1, 1))  # binary parameters, by their number


def _pipeline(
    conn: Any,
    steps: list[_Step],
    report: list[Any] | None = None,
    then: tuple[int, Callable[[Any, list[Any]], None]] | None = None,
) -> list[list[Any]]:
    """Run ``steps`` (``_Step``) in ONE round trip; the rows of each prepared query.

    With ``report``, a failure puts in it the failed step and the rows of the prepared
    queries answered before it (a write's version and absence checks, ``_PgWrite.commit``).
    With ``then`` (a step's index and a function), the function gets the connection and the
    results (libpq's, undecoded: ``_load_binary`` reads one) of the prepared steps answered so
    far as soon as that step is answered, every step before it having succeeded, while the
    server still works on the rest (a write's commit: its cache is updated during the WAL
    flush); the rows are then the function's to read, and none are returned. The step is found
    by identity: the object at that index must appear only there.

    libpq's pipeline mode, straight through libpq as ``_send_all``: every step is sent, then
    every answer read. The server's first error is raised once every answer is read (as
    psycopg would raise it; a lost connection as ``OperationalError``). An exception before
    then (a lost connection, an interrupt) closes the connection: it is left in the middle of a
    pipeline, and the server rolls back what it had begun.
    """
    try:
        _pipeline_send(conn.pgconn, steps)
    except BaseException:
        conn.close()
        raise
    return _pipeline_answers(conn, steps, report, then)


def _pipeline_send(pgconn: Any, steps: list[_Step]) -> None:
    """Send ``steps`` as one pipeline, ended by a Sync (``_pipeline``'s first half)."""
    pgconn.enter_pipeline_mode()
    send_prepared = pgconn.send_query_prepared
    for st in steps:
        if isinstance(st, tuple):
            name, params = st
            n = len(params)
            send_prepared(name, params, _FORMATS[n] if n < 4 else (1,) * n, 1)
        elif st is None:
            pgconn.pipeline_sync()
        elif isinstance(st, bytes):
            send_prepared(st, None)
        else:
            pgconn.send_query_params(st.encode(), None)
    if steps[-1] is not None:
        pgconn.pipeline_sync()
    while pgconn.flush():
        _wait(pgconn.socket, write=True)


_NO_STEP: Final[Any] = object()  # a step no pipeline holds


def _pipeline_answers(
    conn: Any,
    steps: list[_Step],
    report: list[Any] | None = None,
    then: tuple[int, Callable[[Any, list[Any]], None]] | None = None,
) -> list[list[Any]]:
    """Read the answers of the pipeline ``_pipeline_send`` sent of ``steps``: as ``_pipeline``."""
    pgconn = conn.pgconn
    ran = False  # ``then``'s function ran: the rows are its to read
    fn = None if then is None else then[1]
    try:
        found: list[Any] = []
        failed = None
        before = 0  # the answers found before the failure
        is_busy = pgconn.is_busy
        get_result = pgconn.get_result
        mark = _NO_STEP if then is None else steps[then[0]]  # ``then`` after its answer
        for st in [*steps, None] if steps[-1] is not None else steps:
            while is_busy():
                _wait(pgconn.socket)
                pgconn.consume_input()
            res = get_result()
            if res is None:
                psycopg, _ = _psycopg()
                raise psycopg.OperationalError(
                    f"the server's answers ended early: {pgconn.get_error_message()}"
                )
            status = res.status
            if st is None:  # a Sync's answer: no end-of-results marker follows it
                if status != _PIPELINE_SYNC:
                    psycopg, _ = _psycopg()
                    raise psycopg.OperationalError(f"a pipeline out of step: {status}")
                continue
            if status == _TUPLES_OK:
                if isinstance(st, tuple):
                    found.append(res)
            elif status == _FATAL_ERROR and failed is None:
                failed = res
                before = len(found)
                if report is not None:
                    report.append(st)
            while is_busy():
                _wait(pgconn.socket)
                pgconn.consume_input()
            if get_result() is not None:
                psycopg, _ = _psycopg()
                raise psycopg.OperationalError("a statement of a pipeline answered twice")
            if st is mark and failed is None and fn is not None:
                ran = True
                fn(conn, found)
        pgconn.exit_pipeline_mode()
    except BaseException:
        conn.close()
        raise
    if failed is None:
        return [] if ran else [_load_binary(conn, res) for res in found]
    if report is not None:
        report.append([_load_binary(conn, res) for res in found[:before]])
    _raise_for(conn, failed)
    raise AssertionError("unreachable")  # pragma: no cover - _raise_for raises


def _int(b: bytes) -> int:
    return int.from_bytes(b, "big", signed=True)


_DECODE: Final[dict[int, Callable[[bytes], Any] | None]] = {
    _BYTEA: None,  # as it comes
    _INT8: _int,
    _INT4: _int,
    21: _int,  # int2
    16: lambda b: b != b"\x00",  # bool
}
"""The binary result columns a pipeline decodes itself, by type oid: what its statements
answer (keys, values, versions, counts, flags); psycopg's loaders do the rest."""


def _load_binary(conn: Any, res: Any) -> list[tuple[Any, ...]]:
    """The rows of a result in binary (a prepared statement's in a pipeline).

    The engine's own column types are decoded here (``_DECODE``: a tuple per row, as
    psycopg's ``Transformer`` gives them, without building one per result); any other by
    psycopg's loaders.
    """
    nt = res.ntuples
    if not nt:
        return []
    nf = res.nfields
    if nt == 1 and nf == 1 and res.fformat(0) == 1:  # a check's or a version's answer
        dec = _DECODE.get(res.ftype(0), _decode_other)
        if dec is not _decode_other:
            v = res.get_value(0, 0)
            return [(v if dec is None or v is None else dec(v),)]
    decode = []
    for c in range(nf):
        dec = _DECODE.get(res.ftype(c), _decode_other) if res.fformat(c) == 1 else _decode_other
        if dec is _decode_other:
            psycopg, _ = _psycopg()
            rows = psycopg.adapt.Transformer(conn)
            rows.set_pgresult(res)
            return list(rows.load_rows(0, nt, tuple))
        decode.append(dec)
    get = res.get_value
    if nf == 1:
        dec = decode[0]
        if dec is None:
            return [(get(r, 0),) for r in range(nt)]
        return [(None if (v := get(r, 0)) is None else dec(v),) for r in range(nt)]
    out = []
    for r in range(nt):
        row = []
        for c, dec in enumerate(decode):
            v = get(r, c)
            row.append(v if dec is None or v is None else dec(v))
        out.append(tuple(row))
    return out


def _decode_other(b: bytes) -> Any:  # pragma: no cover - a marker, never called
    raise AssertionError("decoded by psycopg")


def _exec_row(conn: Any, name: bytes, params: list[bytes]) -> list[bytes | None]:
    """The one row of the prepared statement ``name`` with bytea ``params``: its columns.

    ``name`` is one of ``_Scan.point_vals``, ``_Scan.point_last`` and ``_Scan.point_row``
    (bytea columns, None for a NULL). One ``PQexecPrepared`` with binary parameters and
    results: the server parses no literal and the client decodes no hexadecimal. Errors as
    ``_send_all`` raises them.
    """
    n = len(params)
    res = conn.pgconn.exec_prepared(name, params, _FORMATS[n] if n < 4 else (1,) * n, 1)
    if res.status != _TUPLES_OK:
        psycopg, _ = _psycopg()
        if res.status == psycopg.pq.ExecStatus.FATAL_ERROR:
            _raise_for(conn, res)
        raise psycopg.OperationalError(
            f"a point read answered {psycopg.pq.ExecStatus(res.status).name}: "
            f"{res.get_error_message()}"
        )
    if res.ntuples != 1:
        psycopg, _ = _psycopg()
        raise psycopg.DataError(f"a point read answered {res.ntuples} rows, not one")
    get = res.get_value
    return [get(0, c) for c in range(res.nfields)]


def _wait(fd: int, *, write: bool = False) -> None:
    """Wait (the GIL released) until ``fd`` can be read, or written.

    ``poll`` where there is one: ``select.select`` refuses a descriptor numbered 1024 or more
    (a ValueError), which a process with many files open (a server) gives its connections.
    """
    if _HAS_POLL:
        p = select.poll()
        p.register(fd, select.POLLOUT if write else select.POLLIN)
        p.poll()  # also returns on an error or a hang-up: libpq's next call reports it
    else:  # pragma: no cover - platforms without poll (Windows)
        select.select([] if write else [fd], [fd] if write else [], [])


_HAS_POLL: Final = hasattr(select, "poll")


def _raise_for(conn: Any, failed: Any) -> None:
    """Raise the error of a failed result as psycopg would (a lost connection: Operational)."""
    psycopg, _ = _psycopg()
    if conn.pgconn.status == psycopg.pq.ConnStatus.BAD:
        raise psycopg.OperationalError(failed.get_error_message())
    raise psycopg.errors.error_from_result(failed, encoding=conn.info.encoding)


_ABOVE: Final = b"\xff" * 512
"""A suffix that puts a prefix above every key under it (keys are shorter than 512 bytes)."""


_HI: dict[bytes, bytes | None] = {}


def _hi(prefix: bytes) -> bytes | None:
    """``prefix_end(prefix)``, None for a prefix of only 0xff bytes (none), remembered.

    A write asks it of the same few prefixes every time (its segments', its journal's).
    """
    try:
        return _HI[prefix]
    except KeyError:
        pass
    hi = prefix_end(prefix) if prefix.strip(b"\xff") else None
    if len(_HI) >= 4096:
        _HI.clear()
    _HI[prefix] = hi
    return hi


def _end(prefix: bytes) -> bytes:
    """An exclusive upper bound of the keys under ``prefix`` (above any key when it has none)."""
    end = _hi(prefix)
    return end if end is not None else b"\xff" * 512


def _fwd_bounds(prefix: bytes, start: bytes | None) -> tuple[bytes, bytes | None]:
    lo = start if start is not None and start > prefix else prefix
    hi = _hi(prefix)
    return lo, hi


def _rev_bounds(prefix: bytes, start: bytes | None) -> tuple[bytes | None, bool] | None:
    """The upper bound of a reverse scan and whether it is inclusive (None: nothing to scan)."""
    if start is not None and start.startswith(prefix):
        return start, True
    if start is not None and start < prefix:
        return None
    hi = _hi(prefix)
    return hi, False


class _PgRead:
    """The reads of one transaction, straight from the server (no overlay).

    ``preload`` reads many keys and short prefixes in one round trip for the reads that follow
    (the snapshot does not change, so what it read stays true).
    """

    def __init__(self, c: _Conn) -> None:
        self._c = c
        self.damage: list[Any] = []
        """Always empty: the server checks its own pages (``PgKV.read_checked``)."""
        self._loaded: dict[bytes, bytes | None] = {}  # preloaded values (None: absent)
        self._loaded_scans: dict[bytes, list[tuple[bytes, bytes]]] = {}  # whole short prefixes
        self._loaded_tails: set[bytes] = set()  # prefixes whose last pair is in _loaded

    def _rows(self, query: str, params: tuple[Any, ...]) -> list[Any]:
        return self._c.rows(query, params)

    def get(self, key: bytes) -> bytes | None:
        if key in self._loaded:
            return self._loaded[key]
        rows = self._rows(self._c.q.get, (key,))
        return bytes(rows[0][0]) if rows else None

    def preload(
        self,
        keys: Iterable[bytes],
        prefixes: Iterable[bytes] = (),
        limit: int = _PRELOAD_SCAN,
        *,
        tails: Iterable[bytes] = (),
        via: tuple[Sequence[bytes], bytes, bytes | None] | None = None,
    ) -> None:
        """Read ``keys``, short prefixes and the last pair of ``tails`` in one query.

        A prefix is kept whole when it holds at most ``limit`` pairs; ``get`` and ``scan`` (of a
        kept prefix, from its start) then need no query. A tail's last pair is kept as a key
        read (a ``get`` of that key needs no query), and a later preload of that tail reads
        nothing. ``via`` ``(pointers, prefix, tail)``: also the pair under ``prefix || row``
        and the last pair under ``tail || row`` (None: none), ``row`` being the first 4 bytes
        of each pointer's value (format 21's ``id/`` records: a find's heads and last versions
        by id, in the same query as the ``id/`` records, which the pointers should be among the
        keys of). Every pair read is kept as read (true of the snapshot, whatever a damaged
        pointer holds: the caller checks the pointer before it asks for a key built of it).
        """
        want = [k for k in dict.fromkeys(keys) if k not in self._loaded]
        pre = [
            p for p in dict.fromkeys(prefixes) if p not in self._loaded_scans and p.strip(b"\xff")
        ]
        last = [p for p in dict.fromkeys(tails) if p not in self._loaded_tails and p.strip(b"\xff")]
        ptrs = list(dict.fromkeys(via[0])) if via is not None else []
        if not want and not pre and not last and not ptrs:
            return
        params: tuple[Any, ...] = (want, pre, [prefix_end(p) for p in pre], limit + 1)
        if via is not None and ptrs:
            _, hp, tp = via
            rows = self._rows(
                self._c.q.preload_via,
                (
                    *params,
                    last,
                    [prefix_end(p) for p in last],
                    hp,
                    ptrs,
                    tp or b"",
                    tp or b"",
                    _ABOVE,
                    ptrs if tp is not None else [],
                ),
            )
            n = len(tp) + 4 if tp is not None else 0
            for w, _, rk, v in rows:
                if w == 3:
                    k = bytes(rk)
                    self._loaded[k] = bytes(v)
                    if tp is not None and k.startswith(tp) and len(k) > n:
                        self._loaded_tails.add(k[:n])
        elif last:
            rows = self._rows(
                self._c.q.preload_tails, (*params, last, [prefix_end(p) for p in last])
            )
        else:
            rows = self._rows(self._c.q.preload, params)
        found = {bytes(k): bytes(v) for w, _, k, v in rows if w == 0}
        for k in want:
            self._loaded[k] = found.get(k)
        for w, _, k, v in rows:
            if w == 2:
                self._loaded[bytes(k)] = bytes(v)
        self._loaded_tails.update(last)
        self._keep_scans(pre, rows, limit)

    def _keep_scans(
        self, prefixes: list[bytes], rows: list[Any], limit: int
    ) -> dict[bytes, list[tuple[bytes, bytes]]]:
        """Keep the prefixes a ``preload`` query read whole (at most ``limit`` pairs each).

        ``rows`` are the query's ``(0, _, k, v)`` key rows, ``(1, i, k, v)`` prefix rows
        (``i`` counts ``prefixes`` from 1) and ``(2, i, k, v)`` tail rows (passed over).
        Returns the kept prefixes and their pairs, in order.
        """
        found: dict[int, list[tuple[bytes, bytes]]] = {}
        for w, i, k, v in rows:
            if w == 1:
                found.setdefault(int(i), []).append((bytes(k), bytes(v)))
        kept: dict[bytes, list[tuple[bytes, bytes]]] = {}
        for i, p in enumerate(prefixes, start=1):
            pairs = found.get(i, [])
            if len(pairs) <= limit:  # the whole prefix: a scan of it needs no query
                pairs.sort()
                self._loaded_scans[p] = kept[p] = pairs
        return kept

    def _whole(self, prefix: bytes, start: bytes | None, reverse: bool) -> Iterator[Any] | None:
        """The pairs of ``prefix`` from ``start``, when a preload read it whole (else None).

        A scan or a seek of such a prefix needs no query.
        """
        pairs = self._loaded_scans.get(prefix)
        if pairs is None:
            return None
        if start is None or (not reverse and start <= prefix):
            return reversed(pairs) if reverse else iter(pairs)
        if reverse:
            if not start.startswith(prefix):
                return reversed(pairs) if start > prefix else iter(())
            return (kv for kv in reversed(pairs) if kv[0] <= start)
        return (kv for kv in pairs if kv[0] >= start)

    def _pages(self, prefix: bytes, start: bytes | None, reverse: bool, cols: str) -> Iterator[Any]:
        loaded = self._whole(prefix, start, reverse)
        if loaded is not None:
            yield from (loaded if cols == "kv" else ((k,) for k, _ in loaded))
            return
        q = self._c.q
        n = _PAGE_FIRST_KEYS if cols == "k" else _PAGE_FIRST
        if not reverse:
            lo, hi = _fwd_bounds(prefix, start)
            if hi is not None and lo >= hi:
                return
            rows = self._rows(
                q.fwd[(cols, hi is not None)], (lo, hi, n) if hi is not None else (lo, n)
            )
            while True:
                yield from rows
                if len(rows) < n:
                    return
                last = bytes(rows[-1][0])
                n = min(n * 8, _PAGE_MAX)
                if hi is not None:
                    rows = self._rows(q.fwd_after[cols], (last, hi, n))
                else:
                    rows = self._rows(q.fwd_after_open[cols], (last, n))
        else:
            bound = _rev_bounds(prefix, start)
            if bound is None:
                return
            top, incl = bound
            has_lo = bool(prefix)
            while True:
                params: tuple[Any, ...]
                if top is None:  # from the very end of the keyspace
                    params = (prefix, n) if has_lo else (n,)
                    rows = self._rows(q.rev_end[(cols, has_lo)], params)
                else:
                    params = (top, prefix, n) if has_lo else (top, n)
                    rows = self._rows(q.rev[(cols, incl, has_lo)], params)
                yield from rows
                if len(rows) < n:
                    return
                top, incl = bytes(rows[-1][0]), False
                n = min(n * 8, _PAGE_MAX)

    def scan(
        self, prefix: bytes, *, start: bytes | None = None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        for k, v in self._pages(prefix, start, reverse, "kv"):
            yield bytes(k), bytes(v)

    def keys(
        self, prefix: bytes, *, start: bytes | None = None, reverse: bool = False
    ) -> Iterator[bytes]:
        for (k,) in self._pages(prefix, start, reverse, "k"):
            yield bytes(k)

    def seek(self, prefix: bytes, start: bytes, *, reverse: bool = False) -> bytes | None:
        return next(self.keys(prefix, start=start, reverse=reverse), None)

    def around(self, prefix: bytes, key: bytes) -> tuple[bytes | None, bytes | None, bytes | None]:
        return self._server_around(prefix, key)

    def _server_around(
        self, prefix: bytes, key: bytes
    ) -> tuple[bytes | None, bytes | None, bytes | None]:
        k0 = v0 = k1 = None
        for k, v in self._rows(self._c.q.around, (key, prefix, key)):
            if v is not None and bytes(k) <= key:
                k0, v0 = bytes(k), bytes(v)
            else:
                k1 = bytes(k)
        if k1 is not None and not k1.startswith(prefix):
            k1 = None
        return k0, v0, k1


_KNOWN_KEYS: Final = 16384
"""Most keys a handle's ``_Known`` holds; past it, it keeps only the last write's."""
_KNOWN_WHOLE: Final = 256
"""Longest prefix a ``_Known`` keeps whole."""
_SKIP_MAX: Final = 64
"""Most writes a handle skips its cache for after a miss."""
_GUESS_WEIGHT: Final = 1 / 8
"""The weight of a write's outcome in a handle's rate of wrong guesses (a moving average)."""
_GUESS_MAX_RATE: Final = 0.125
"""The rate of wrong guesses of absence below which a handle's writes guess.

A right guess saves a write its first round trip; a wrong one costs a run of ``fn`` and a
failed pipeline, several times a round trip's CPU."""


class _Stale(Exception):
    """A write's first round trip found the store changed since the cache it read from."""


class _Again(Exception):
    """A one-pipeline write's check failed: run ``fn`` again (nothing was written).

    ``conn`` holds the store's lock in an aborted transaction (the next try rolls it back);
    ``known`` is the cache to read from then (None: none, it was stale).
    """

    def __init__(self, conn: Any, known: _Known | None) -> None:
        super().__init__("the write's checks failed; nothing was written")
        self.conn = conn
        self.known = known


def _under(keys: list[bytes], prefix: bytes) -> list[bytes]:
    """The keys of the sorted ``keys`` that start with ``prefix``, in order (two bisects)."""
    i = bisect.bisect_left(keys, prefix)
    end = _hi(prefix)
    j = len(keys) if end is None else bisect.bisect_left(keys, end, i)
    return keys[i:j]


class _Known:
    """What a handle knows of the server's rows as of its last write (``specs/postgres.md`` §4).

    ``version`` is the store's version sequence as this handle's last write left it (every
    change of the table, by anyone, bumps it: a trigger). While the sequence still holds it,
    nobody has changed the table since, and the server's rows are those this handle read or
    wrote: ``points`` (value, None: absent), ``wholes`` (every pair under a prefix, in order)
    and ``tails`` (a prefix's last pair, None: the prefix is empty).

    A key's prefixes in ``wholes`` and ``tails`` are found by their lengths (``_lens``: one
    dict lookup per distinct length, a handful), not by a comparison with every prefix kept.
    """

    __slots__ = ("_lens", "points", "tails", "version", "wholes")

    def __init__(self, version: int) -> None:
        self.version = version
        self.points: dict[bytes, bytes | None] = {}
        self.wholes: dict[bytes, list[tuple[bytes, bytes]]] = {}
        self.tails: dict[bytes, tuple[bytes, bytes] | None] = {}
        # the lengths of the prefixes of wholes and tails, in order (and perhaps of some
        # dropped since: a lookup more)
        self._lens: tuple[int, ...] = ()

    def get(self, key: bytes) -> tuple[bool, bytes | None]:
        """Whether the value of ``key`` is known, and the value (None: absent)."""
        points = self.points
        if key in points:
            return True, points[key]
        wholes = self.wholes
        tails = self.tails
        n = len(key)
        for m in self._lens:
            if m > n:
                break
            p = key[:m]
            rows = wholes.get(p)
            if rows is not None:
                i = bisect.bisect_left(rows, (key,))
                if i < len(rows) and rows[i][0] == key:
                    return True, rows[i][1]
                return True, None
            if p in tails:
                t = tails[p]
                if t is None or key > t[0]:
                    return True, None
                if key == t[0]:
                    return True, t[1]
        return False, None

    def absorb(self, txn: _PgWrite, version: int) -> None:
        """Add what ``txn`` read, then apply what it wrote (committed at ``version``)."""
        self.version = version
        points = self.points
        wholes = self.wholes
        tails = self.tails
        if len(points) > _KNOWN_KEYS:
            points.clear()
            wholes.clear()
            tails.clear()
            self._lens = ()
        points.update(txn._known)
        cached = txn._cached
        for p, rows in txn._loaded_scans.items():
            if len(rows) <= _KNOWN_WHOLE and (p not in cached or p not in wholes):
                wholes[p] = [(bytes(k), bytes(v)) for k, v in rows]
        tails.update(txn._tails)
        lens = {len(p) for p in txn._loaded_scans} | {len(p) for p in txn._tails}
        if not lens.issubset(self._lens):  # a superset of the kept prefixes' lengths
            self._lens = tuple(sorted(lens.union(self._lens)))
        buf = txn._buf
        points.update(buf)
        written = txn._sorted
        if not written or not (wholes or tails):
            return
        # the kept prefixes a written key is under: by the keys' prefixes of the kept lengths
        # (a small write), or by a look at each kept prefix (a write of more keys than the
        # cache keeps prefixes: a fold); the cache keeps hundreds of them after a while
        if len(written) * len(self._lens) <= len(wholes) + len(tails):
            under_w: dict[bytes, None] = {}
            under_t: dict[bytes, None] = {}
            for k in written:
                n = len(k)
                for m in self._lens:
                    if m > n:
                        break
                    q = k[:m]
                    if q in wholes:
                        under_w[q] = None
                    if q in tails:
                        under_t[q] = None
            touched_w: Iterable[bytes] = under_w
            touched_t: Iterable[bytes] = under_t
        else:
            lo, hi = written[0], written[-1]
            touched_w = [p for p in wholes if p <= hi and (lo < p or lo.startswith(p))]
            touched_t = [p for p in tails if lo.startswith(p) or lo < p <= hi]
        for p in touched_w:
            rows = wholes[p]
            for k in _under(written, p):
                v = buf[k]
                i = bisect.bisect_left(rows, (k,))
                hit = i < len(rows) and rows[i][0] == k
                if v is None:
                    if hit:
                        del rows[i]
                elif hit:
                    rows[i] = (k, v)
                else:
                    rows.insert(i, (k, v))
            if len(rows) > _KNOWN_WHOLE:
                del wholes[p]
        for p in touched_t:
            for k in _under(written, p):
                if p not in tails:
                    break  # dropped: which is last now is not known
                v = buf[k]
                t = tails[p]
                if v is not None and (t is None or k >= t[0]):
                    tails[p] = (k, v)
                elif v is None and t is not None and k == t[0]:
                    del tails[p]  # the last pair went: which is last now is not known


def _keep_first(loaded: dict[bytes, bytes | None], rows: Iterable[tuple[bytes, bytes]]) -> None:
    """Add the pairs ``rows`` to ``loaded`` where it has no value yet (``setdefault`` each).

    In C: the rows as a dict, the keys both hold (usually none) keeping ``loaded``'s value.
    """
    fresh: dict[bytes, bytes | None] = dict(rows)
    both = fresh.keys() & loaded.keys()
    for k in both:
        fresh[k] = loaded[k]
    loaded.update(fresh)


class _PgWrite(_PgRead):
    """A write transaction: the server's state under an overlay of this transaction's changes.

    Puts and deletes land in ``_buf`` (None marks a delete); reads merge it over the server's
    rows, so the transaction sees its own writes; ``commit`` sends the overlay in a few
    statements.

    Round trips: reads the engine was told of in advance (``PgKV.warm_writes``: keys and the
    last pair of prefixes every write reads) and ``prefetch`` es are *pending*: they travel with
    the transaction's next round trip (its first carries the lock and BEGIN too). The snapshot
    does not change within the transaction, so what a round trip read stays true: a prefix
    found empty (an ``around`` with nothing on either side, a last pair that is absent) needs
    no further query.
    """

    def __init__(
        self,
        c: _Conn,
        lock_key: tuple[int, int],
        warm: tuple[tuple[bytes, ...], tuple[bytes, ...]] = ((), ()),
        known: _Known | None = None,
        guess: tuple[bytes, ...] = (),
    ) -> None:
        super().__init__(c)
        self._lock_key = lock_key
        # the handle's cache (``_Known``): reads it answers need no query; the write's first
        # round trip reads the store's version (``_probe``), or, when every read was answered
        # here, its one pipeline checks it (``commit``)
        self._cache = known
        self._used = False  # the cache answered a read (or a guess was made)
        self._valid = False  # the server's version was found to be the cache's
        self._guess = guess  # prefixes whose keys, unknown, are guessed absent
        self._guessed: dict[bytes, None] = {}  # keys guessed absent: checked at commit
        self._would: bool | None = None  # not guessing: whether guesses would have been wrong
        self._new: set[bytes] = set()  # keys a put(overwrite=False) expects absent
        self._cached: set[bytes] = set()  # prefixes whose whole read was the cache's
        self._buf: dict[bytes, bytes | None] = {}
        self._sorted: list[bytes] = []  # the keys of _buf, in order
        self._known: dict[bytes, bytes | None] = {}  # server values read in this transaction
        self._arounds: dict[tuple[bytes, bytes], tuple[Any, Any, Any]] = {}  # server arounds
        self._want: dict[bytes, None] = dict.fromkeys(warm[0])  # pending gets
        self._want_tails: dict[bytes, None] = dict.fromkeys(warm[1])  # ``warm_writes``
        self._want_scans: dict[bytes, int] = {}  # pending whole reads of short prefixes (limit)
        self._want_arounds: dict[tuple[bytes, bytes], None] = {}  # pending arounds
        self._tails: dict[bytes, tuple[bytes, bytes] | None] = {}  # server's last pair of a prefix
        self._empty: set[bytes] = set()  # prefixes holding no server row
        self._empty_lens: set[int] = set()  # the lengths of those prefixes

    # -- round trips -------------------------------------------------------------------------

    def _rows(self, query: str, params: tuple[Any, ...]) -> list[Any]:
        """Run ``query`` with the pending reads, in one round trip."""
        return self._send([(query, params)])[0]

    def _from_cache(self) -> None:
        """Answer the pending reads the cache knows (no query for them)."""
        cache = self._cache
        assert cache is not None
        known = self._known
        want = self._want
        if want:
            # as set operations (dozens of keys a write: a new memory's terms)
            pending = want.keys() - self._buf.keys() - known.keys()
            points = cache.points
            hits = pending & points.keys()
            if hits:
                known.update({k: points[k] for k in hits})
                self._used = True
            left: dict[bytes, None] = {}
            for k in pending - hits if len(hits) < len(pending) else ():
                hit, v = cache.get(k)  # under a prefix kept whole, or a tail's
                if hit:
                    known[k] = v
                    self._used = True
                else:
                    left[k] = None
            want.clear()
            want.update(left)
        for p in list(self._want_tails):
            if p in self._tails or p not in cache.tails:
                continue
            t = cache.tails[p]
            self._tails[p] = t
            del self._want_tails[p]
            self._used = True
            if t is None:
                self._note_empty(p)
            else:
                self._loaded.setdefault(t[0], t[1])
        for p in list(self._want_scans):
            rows = cache.wholes.get(p)
            if rows is None or p in self._loaded_scans:
                continue
            del self._want_scans[p]
            self._used = True
            self._loaded_scans[p] = list(rows)
            self._cached.add(p)
            if not rows:
                self._note_empty(p)
                continue
            _keep_first(self._loaded, rows)

    def _guessable(self, key: bytes) -> bool:
        """Whether ``key``, unknown to the cache, is guessed absent (checked at commit)."""
        return key in self._new or (bool(self._guess) and key.startswith(self._guess))

    def _send(self, stmts: list[tuple[str, tuple[Any, ...]]]) -> list[list[Any]]:
        q = self._c.q
        if self._cache is not None:
            self._from_cache()
            if (
                not stmts
                and not self._want_tails
                and not self._want_scans
                and not self._want_arounds
                and all(self._guessable(k) for k in self._want)
            ):
                return []  # guesses, when read (``get``)
        want = [k for k in self._want if k not in self._buf and k not in self._known]
        tails = [p for p in self._want_tails if p not in self._tails]
        scans: dict[int, list[bytes]] = {}  # by limit: one statement each
        for p, n in self._want_scans.items():
            if p not in self._loaded_scans:
                scans.setdefault(n, []).append(p)
        self._want.clear()
        self._want_tails.clear()
        self._want_scans.clear()
        pre: list[tuple[str, tuple[Any, ...]]] = []
        if want:
            pre.append(q.keys_in(want))
        pre += [(q.tail, (p, _end(p))) for p in tails]
        for n, ps in scans.items():
            if len(ps) == 1:  # one prefix: a plain range read (half the server's CPU of a LATERAL)
                pre.append((q.fwd[("kv", True)], (ps[0], _end(ps[0]), n + 1)))
            else:
                pre.append((q.preload, ([], ps, [_end(p) for p in ps], n + 1)))
        arounds = [pk for pk in self._want_arounds if pk not in self._arounds]
        self._want_arounds.clear()
        if arounds:
            pre.append((q.around_many, ([p for p, _ in arounds], [k for _, k in arounds])))
        if not pre and not stmts:
            return []  # every pending read was answered meanwhile
        first = self._c.early is not None  # the version went ahead (``PgKV.write``)
        if first:
            self._collect()
        probe = self._cache is not None and not self._c.begun
        if first or probe:  # a write with the cache that needs a read round trip
            self._c.kv._ahead_note(True)
        if probe:  # the first round trip: is the cache still the server's state?
            pre.insert(0, (q.probe, ()))
        # a write that does not guess but could have (this round trip reads only keys it
        # would have guessed absent) learns whether its guesses would have been right
        would = (
            (probe or (first and self._cache is not None))
            and not self._guess
            and not stmts
            and len(pre) == 1 + probe
            and bool(want)
            and self._c.kv._could_guess(self._new, want)
        )
        got = self._c.run(pre + stmts)
        if probe:
            self._probed(got[0])
            got = got[1:]
        if want:
            found = {bytes(k): bytes(v) for k, v in got[0]}
            for k in want:
                self._known[k] = found.get(k)
            got = got[1:]
            if would and self._cache is not None:
                self._would = bool(found)
        for p, rows in zip(tails, got, strict=False):
            if rows:
                k, v = bytes(rows[0][0]), bytes(rows[0][1])
                self._tails[p] = (k, v)
                self._loaded.setdefault(k, v)  # a server value: a get of it needs no query
            else:
                self._tails[p] = None
                self._note_empty(p)
        got = got[len(tails) :]
        for n, ps in scans.items():
            if len(ps) == 1:
                self._note_scan(ps[0], got[0], n)
            else:
                self._note_scans(ps, got[0], n)
            got = got[1:]
        if arounds:
            self._note_arounds(arounds, got[0])
            got = got[1:]
        return got

    def _collect(self) -> None:
        """Read the answer of the round trip sent ahead (``PgKV.write``): the store's version.

        Before any other round trip of the transaction. A pooled connection found dead by it
        (a server restart) is replaced, nothing having run on the server: the next round trip
        carries the lock, BEGIN and the version read as when nothing went ahead.

        Raises:
            _Stale: as ``_probed``.
        """
        c = self._c
        psycopg, _ = _psycopg()
        try:
            sets = c.collect()
        except psycopg.OperationalError:
            if not (c.conn.broken or c.conn.closed) or c.locked:
                raise
            c.kv._putconn(c.conn)
            c.conn = None
            c.conn = c.kv._getconn()
            c.begun = False
            return
        self._probed(sets[0])

    def _probed(self, rows: list[Any]) -> None:
        """The store's version, read by the first round trip: the cache holds, or is dropped.

        Raises:
            _Stale: it is not the cache's and the cache answered reads already: ``fn`` runs
                again in this transaction, without the cache (``PgKV.write``).
        """
        cache = self._cache
        assert cache is not None
        if rows and rows[0][0] == cache.version:
            self._valid = True
            return
        self._cache = None
        self._c.kv._stale()
        if self._used:
            raise _Stale

    def _note_scan(self, prefix: bytes, rows: list[Any], limit: int) -> None:
        """``_note_scans`` of one prefix read by a plain range read.

        ``rows`` are its first ``limit + 1`` pairs in key order, kept as they came.
        """
        if len(rows) > limit:
            return
        self._loaded_scans[prefix] = rows
        _keep_first(self._loaded, rows)
        if not rows:
            self._note_empty(prefix)

    def _note_scans(self, scans: list[bytes], rows: list[Any], limit: int) -> None:
        """``_keep_scans``; a kept pair also answers ``get``, an empty prefix is known empty."""
        loaded = self._loaded
        for p, pairs in self._keep_scans(scans, rows, limit).items():
            for k, v in pairs:
                loaded.setdefault(k, v)
            if not pairs:
                self._note_empty(p)

    def _flush(self) -> None:
        """Send the pending reads now (a read needs one of them)."""
        if self._want or self._want_tails or self._want_scans or self._want_arounds:
            self._send([])

    def _note_empty(self, prefix: bytes) -> None:
        self._empty.add(prefix)
        self._empty_lens.add(len(prefix))

    def _is_empty(self, prefix: bytes) -> bool:
        """Whether a prefix of ``prefix`` is known to hold no server row.

        One set lookup per distinct length of the known-empty prefixes (a handful), not one
        comparison per prefix: a large write notes thousands of them.
        """
        empty = self._empty
        n = len(prefix)
        return any(k <= n and prefix[:k] in empty for k in self._empty_lens)

    def _pages(self, prefix: bytes, start: bytes | None, reverse: bool, cols: str) -> Iterator[Any]:
        if self._empty and self._is_empty(prefix):
            return
        if start is None and prefix in self._want_scans:
            self._flush()
        loaded = self._whole(prefix, start, reverse)
        if loaded is not None:  # read whole by a prefetch: no query
            yield from (loaded if cols == "kv" else ((k,) for k, _ in loaded))
            return
        if reverse and start is None and (prefix in self._tails or prefix in self._want_tails):
            if prefix not in self._tails:
                self._flush()
            tail = self._tails[prefix]
            if tail is None:
                return
            yield tail if cols == "kv" else (tail[0],)
            for row in super()._pages(prefix, tail[0], True, cols):
                if bytes(row[0]) != tail[0]:
                    yield row
            return
        yield from super()._pages(prefix, start, reverse, cols)

    # -- reads over the overlay --------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        buf = self._buf
        if key in buf:
            return buf[key]
        known = self._known
        if key in known:
            return known[key]
        if key in self._loaded:
            return self._loaded[key]
        cache = self._cache
        if cache is not None and not (self._want_tails or self._want_scans or self._want_arounds):
            # what ``_send`` would do for this key (other pending keys wait for their reads)
            hit, v = cache.get(key)
            if hit or self._guessable(key):
                self._want.pop(key, None)
                if not hit:
                    self._guessed[key] = None
                known[key] = v
                self._used = True
                return v
        self._want[key] = None
        self._flush()
        if key in known:
            return known[key]
        # left pending by ``_send``: guessed absent, which the commit checks
        del self._want[key]
        self._guessed[key] = None
        self._used = True
        known[key] = None
        return None

    def _overlay(self, prefix: bytes, start: bytes | None, reverse: bool) -> list[bytes]:
        s = self._sorted
        if not s:
            return []
        if not reverse:
            lo, hi = _fwd_bounds(prefix, start)
            i = bisect.bisect_left(s, lo)
            j = len(s) if hi is None else bisect.bisect_left(s, hi)
            return s[i:j]
        bound = _rev_bounds(prefix, start)
        if bound is None:
            return []
        top, incl = bound
        i = bisect.bisect_left(s, prefix)
        if top is None:
            j = len(s)
        else:
            j = bisect.bisect_right(s, top) if incl else bisect.bisect_left(s, top)
        return s[i:j][::-1]

    def _merged(
        self, prefix: bytes, start: bytes | None, reverse: bool, cols: str
    ) -> Iterator[tuple[bytes, bytes | None]]:
        """Pairs (value None when only keys were asked) of server and overlay, in order."""
        mine = self._overlay(prefix, start, reverse)
        server = self._pages(prefix, start, reverse, cols)
        if not mine:
            for row in server:
                yield bytes(row[0]), (bytes(row[1]) if cols == "kv" else None)
            return
        buf = self._buf
        i = 0
        n = len(mine)
        for row in server:
            k = bytes(row[0])
            while i < n and (mine[i] > k if reverse else mine[i] < k):
                m = mine[i]
                i += 1
                if buf.get(m) is not None:
                    yield m, buf[m]
            if i < n and mine[i] == k:
                i += 1
                if buf.get(k) is not None:
                    yield k, buf[k]
                continue
            if k in buf:  # the overlay gained this key after the scan began
                if buf[k] is not None:
                    yield k, buf[k]
                continue
            yield k, (bytes(row[1]) if cols == "kv" else None)
        for m in mine[i:]:
            if buf.get(m) is not None:
                yield m, buf[m]

    def scan(
        self, prefix: bytes, *, start: bytes | None = None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        for k, v in self._merged(prefix, start, reverse, "kv"):
            assert v is not None
            yield k, v

    def keys(
        self, prefix: bytes, *, start: bytes | None = None, reverse: bool = False
    ) -> Iterator[bytes]:
        for k, _ in self._merged(prefix, start, reverse, "k"):
            yield k

    def last(self, prefix: bytes) -> tuple[bytes, bytes] | None:
        """The last pair under ``prefix`` (``next(scan(prefix, reverse=True), None)``).

        Without a generator where the prefix's last pair was read (a ``warm_writes`` tail: the
        journal's, answered by the cache or with the transaction's first round trip) and this
        transaction wrote nothing under it: a write's journal tail
        (``cortex.engine.journal.JournalWriter``).
        """
        tails = self._tails
        if prefix not in tails and prefix in self._want_tails:
            self._flush()
        if prefix in tails and not self._overlay(prefix, None, True):
            return tails[prefix]
        return next(self.scan(prefix, reverse=True), None)

    def pairs(self, prefix: bytes) -> tuple[tuple[bytes, bytes], ...]:
        """Every pair under ``prefix`` in key order (``tuple(scan(prefix))``).

        Without a generator frame a pair when the prefix was read whole (``prefetch_scan``, or
        the cache's) and this transaction changed nothing under it: a write's posting
        segments (``cortex.index.segments.overlay``), read by every write.
        """
        if prefix in self._want_scans:
            self._flush()
        rows = self._loaded_scans.get(prefix)
        if rows is None or self._overlay(prefix, None, False):
            return tuple(self.scan(prefix))
        return tuple(rows)  # pairs of bytes, as a result's or the cache's rows are

    def around(self, prefix: bytes, key: bytes) -> tuple[bytes | None, bytes | None, bytes | None]:
        if (prefix, key) in self._want_arounds:
            self._flush()
        got = self._arounds.get((prefix, key))
        if got is None:
            got = self._server_around(prefix, key)
            self._note_around(prefix, key, got)
        k0, v0, k1 = got
        s = self._sorted
        if not s:
            return got
        buf = self._buf
        if (k0 is not None and k0 in buf) or (k1 is not None and k1 in buf and buf[k1] is None):
            # the overlay changed a pair the server named: merge the long way
            pair = next(self._merged(prefix, key, True, "kv"), None)
            m0, mv = pair if pair is not None else (None, None)
            return m0, mv, next(self.keys(prefix, start=key + b"\x00"), None)
        # the overlay's nearest live keys on either side, within the prefix
        i = bisect.bisect_right(s, key)
        j = i - 1
        while j >= 0 and s[j] >= prefix and buf[s[j]] is None:
            j -= 1
        if j >= 0 and s[j].startswith(prefix) and (k0 is None or s[j] > k0):
            k0, v0 = s[j], buf[s[j]]
        while i < len(s) and buf[s[i]] is None:
            i += 1
        if i < len(s) and s[i].startswith(prefix) and (k1 is None or s[i] < k1):
            k1 = s[i]
        return k0, v0, k1

    def _note_around(self, prefix: bytes, key: bytes, got: tuple[Any, Any, Any]) -> None:
        self._arounds[(prefix, key)] = got
        if got[0] is None and got[2] is None and key.startswith(prefix) and prefix:
            self._note_empty(prefix)  # nothing at or before key, nothing after it: no row

    def prefetch(self, keys: Iterable[bytes]) -> None:
        """Read ``keys`` with the next round trip, for the ``get`` calls that follow."""
        self._want.update(dict.fromkeys(set(keys) - self._buf.keys() - self._known.keys()))

    def expect_new(self, keys: Iterable[bytes]) -> None:
        """Keys a ``put(overwrite=False)`` of this write will expect absent.

        A new memory's ``id/`` record: guessed absent with the write cache, as that put
        guesses them (checked at commit), else read with the next round trip instead of one
        of their own.
        """
        if self._cache is not None:
            self._new.update(keys)
        else:
            self.prefetch(keys)

    def prefetch_scan(self, prefixes: Iterable[bytes], limit: int = _PRELOAD_SCAN) -> None:
        """Read short prefixes whole with the next round trip, for the scans that follow.

        A prefix holding at most ``limit`` pairs is kept (a scan of it from its start, and a
        get of one of its keys, then need no query; an empty one is known empty); a longer one
        is scanned from the server as before. For reads the engine can name before it needs
        them (a write's chain lookups, its competitors' edges and versions).
        """
        for p in prefixes:
            if p.strip(b"\xff") and p not in self._loaded_scans:
                self._want_scans[p] = max(limit, self._want_scans.get(p, 0))

    def prefetch_around(self, pairs: Iterable[tuple[bytes, bytes]], *, now: bool = True) -> None:
        """``around(prefix, key)`` of the server for every pair, in one query.

        With ``now=False`` the pairs join the pending reads instead (the transaction's next
        round trip carries them): for a write that can name them before its first read.
        """
        want = [(p, k) for p, k in pairs if (p, k) not in self._arounds]
        if not now:
            self._want_arounds.update(dict.fromkeys(want))
            return
        if any(pk in self._want_arounds for pk in want):
            self._flush()  # they travel with the pending reads
            want = [pk for pk in want if pk not in self._arounds]
        if not want:
            return
        self._note_arounds(
            want, self._rows(self._c.q.around_many, ([p for p, _ in want], [k for _, k in want]))
        )

    def _note_arounds(self, want: list[tuple[bytes, bytes]], rows: list[Any]) -> None:
        for i, k0, v0, k1 in rows:
            prefix, key = want[int(i) - 1]
            b1 = None if k1 is None else bytes(k1)
            self._note_around(
                prefix,
                key,
                (
                    None if k0 is None else bytes(k0),
                    None if v0 is None else bytes(v0),
                    b1 if b1 is not None and b1.startswith(prefix) else None,
                ),
            )

    # -- writes ------------------------------------------------------------------------------

    def _set(self, key: bytes, value: bytes | None) -> None:
        buf = self._buf
        if key not in buf:
            bisect.insort(self._sorted, key)
        buf[key] = value

    def put(self, key: bytes, value: bytes, *, overwrite: bool = True) -> bool:
        if not overwrite:
            if self._cache is not None:
                self._new.add(key)  # a new key (a new memory's head): guessed absent
            if self.get(key) is not None:
                return False
        self._set(bytes(key), bytes(value))
        return True

    def delete(self, key: bytes) -> bool:
        existed = self.get(key) is not None
        if existed:
            self._set(bytes(key), None)
        return existed

    def put_many(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        buf = self._buf
        insort = bisect.insort
        s = self._sorted
        for key, v in items:
            k = bytes(key)
            if k not in buf:
                insort(s, k)
            buf[k] = bytes(v)

    def add_many(self, items: Iterable[tuple[bytes, bytes]]) -> int:
        pairs = [(bytes(k), bytes(v)) for k, v in items]
        self.prefetch(k for k, _ in pairs)
        self._flush()
        added = 0
        for k, v in pairs:
            if self.get(k) is None:
                self._set(k, v)
                added += 1
        return added

    # -- commit ------------------------------------------------------------------------------

    def commit(self) -> None:
        """Send the overlay, COMMIT and the unlock (small changes: in one query string)."""
        c = self._c
        if c.early is not None:  # nothing read from the server: the commit collects it
            # did the server run them beside fn (their answers are in), and was this thread
            # on its CPU meanwhile? Not on a busy machine: the server's wake-up costs the
            # client and its work does not overlap fn
            off = time.perf_counter() - c.sent[0] - (time.thread_time() - c.sent[1])
            late = off > 25e-6
            if not late:
                psycopg, _ = _psycopg()
                try:
                    c.conn.pgconn.consume_input()
                    late = bool(c.conn.pgconn.is_busy())
                except psycopg.OperationalError:  # ``_collect`` finds it too
                    late = True
            c.kv._ahead_note(False, late=late)
            self._collect()
        elif not c.begun and self._cache is not None:
            self._c.kv._ahead_note(False)
        conn = c.conn
        puts_k: list[bytes] = []
        puts_v: list[bytes] = []
        dels: list[bytes] = []
        buf = self._buf
        for k in self._sorted:
            v = buf[k]
            if v is None:
                if self._known.get(k, b"") is not None:
                    dels.append(k)
            else:
                puts_k.append(k)
                puts_v.append(v)
        if not puts_k and not dels and not self._confirm():
            raise _Stale  # nothing to write, but what fn returns came from a stale cache
        if not c.begun and not puts_k and not dels:
            return  # nothing read from the server, nothing written: no transaction at all
        size = sum(map(len, puts_k)) + sum(map(len, puts_v)) + sum(map(len, dels))
        if size <= _SMALL:
            # one round trip: (the lock and BEGIN when nothing was read,) the changes, COMMIT
            # and the unlock; the server stops at a failed statement. The changes as prepared
            # statements with binary arrays in a pipeline where the connection has them
            # prepared, else one query string of hexadecimal literals.
            changes: list[tuple[str, tuple[Any, ...]]] = []
            if dels:
                changes.append((c.q.delete, (dels,)))
            if puts_k:
                changes.append(_upsert(c.q, puts_k, puts_v))
            steps = c.kv._binary_steps(conn, changes) if changes else []
            if not c.kv._pipelines:
                steps = None
            if steps is not None:
                fixed = c.kv._fixed(conn)
                begin = [] if c.begun else _begin_steps(c._begin, fixed)
                a, b = self._lock_key
                checks, after = self._checks(bool(changes))
                more = c.kv._binary_steps(conn, checks + after) if checks or after else []
                if more is None:  # pragma: no cover - the cache is only used where they are
                    raise AssertionError("the version statements are not prepared")
                c.kv.round_trips += 1
                c.begun = True
                report: list[Any] = []
                # the ending's steps are the same for every write of the handle: made once
                key = (not after, fixed is not None, c.kv._flushes, _FLUSH)
                ending = c.kv._endings.get(key)
                if ending is None:
                    ending = _fixed_steps(self._ending(f"({a}, {b})", set_async=not after), fixed)
                    c.kv._endings[key] = ending
                pipe = [*begin, *more[: len(checks)], *steps, *more[len(checks) :], *ending]

                def committed(conn: Any, results: list[Any]) -> None:
                    self._committed(_load_binary(conn, results[-1])[0][0] if after else None)

                # the cache learns the write once the COMMIT is answered, while the server
                # flushes the WAL (the statement after it)
                at = len(pipe) - len(ending) + ending.index("COMMIT")
                try:
                    _pipeline(conn, pipe, report, (at, committed))
                except Exception as exc:
                    self._failed_check(report, exc)
                    raise
                return
            parts: list[str | tuple[str, tuple[Any, ...]]] = [] if c.begun else [c._begin]
            if dels:
                parts.append((c.q.delete, (dels,)))
            if puts_k:
                parts.append(_upsert(c.q, puts_k, puts_v))
            parts += self._ending(self._lock_key)
            c.kv.round_trips += 1
            c.begun = True
            _send_all(conn, c.inline(parts), keep=0)
            return
        if not self._confirm():  # no one pipeline for this much: the cache checked first
            raise _Stale  # fn again in this transaction, without what was wrong
        if not self._valid:
            self._cache = None  # not found current: the next cache is this write's alone
        c.start()
        if dels:
            c.execute(c.q.delete_b, (dels,))
        i = 0
        while i < len(puts_k):
            j, got = i, 0
            while j < len(puts_k) and j - i < _BATCH_ROWS and got < _BATCH_BYTES:
                got += len(puts_k[j]) + len(puts_v[j])
                j += 1
            c.execute(c.q.upsert_b, (puts_k[i:j], puts_v[i:j]))
            i = j
        c.kv.round_trips += 1
        if not c.kv._versioned:
            _send_all(conn, c.inline(self._ending(self._lock_key)), keep=0)
            return
        # the new version with the ending: the cache goes on past a large commit (a fold of
        # the posting segments, every few dozen writes) as past a small one
        sets = _send_all(conn, c.inline([(c.q.currval, ()), *self._ending(self._lock_key)]))
        self._committed(sets[0][0][0])

    def _confirm(self) -> bool:
        """Whether what this write read from the cache and guessed absent is the server's.

        Free when nothing was (or the first round trip found the cache current and nothing
        was guessed); else one round trip: the version (with the lock and BEGIN when none was
        sent yet) and the guessed keys. For a write that ends without the one pipeline that
        checks them: an exception ``fn`` raised, or nothing to write.
        """
        if self._c.early is not None:
            try:
                self._collect()
            except _Stale:  # what fn read from the cache was stale
                return False
        cache = self._cache
        if cache is None or not self._used or (self._valid and not self._guessed):
            return True
        c = self._c
        q = c.q
        probe = not c.begun
        stmts: list[tuple[str, tuple[Any, ...]]] = [(q.probe, ())] if probe else []
        if self._guessed:
            stmts.append((q.get_any, (list(self._guessed),)))
        got = c.run(stmts)
        if probe:
            if not got[0] or got[0][0][0] != cache.version:
                self._cache = None
                c.kv._stale()
                return False
            self._valid = True
            got = got[1:]
        if self._guessed:
            if got[0]:  # a guess was wrong: the cache (current) learns the guessed keys
                found = {bytes(k): bytes(v) for k, v in got[0]}
                for k in self._guessed:
                    cache.points[k] = found.get(k)
                c.kv._guess_missed()
                return False
            self._guessed.clear()  # confirmed: no check at commit
        return True

    def again(self) -> _PgWrite:
        """A new try of this write in the same transaction.

        With the cache where it was found current (it and the snapshot agree), no guesses.
        """
        c = self._c
        known = self._cache if self._valid else None
        txn = _PgWrite(c, self._lock_key, c.kv._warm, known)
        txn._valid = known is not None
        return txn

    def _checks(self, changes: bool) -> tuple[list[Any], list[Any]]:
        """The statements a commit's pipeline checks the cache with, and reads the version by.

        Before the changes: the version check (when no round trip has read the version yet:
        every read was answered by the cache) and the absence check of the guessed keys; after
        them, the store's new version. The guessed keys are not read before their check: under
        SERIALIZABLE every read takes predicate locks, and that read cost ~30 us of the
        server's CPU a write for a failure the guess rate keeps rare (the failed write reads
        them in its next try, which does not guess).
        """
        q = self._c.q
        checks: list[Any] = []
        cache = self._cache
        if cache is not None:
            if not self._c.begun:
                checks.append((q.vcheck, (cache.version,)))
            if self._guessed:
                checks.append((q.absent, (list(self._guessed),)))
        kv = self._c.kv
        after = (
            [(q.currval_async if kv._flushes else q.currval, ())]
            if changes and kv._versioned
            else []
        )
        return checks, after

    def _failed_check(self, report: list[Any], exc: BaseException) -> None:
        """A commit's pipeline failed: when a cache check did, raise ``_Again``.

        Nothing was written (the server skipped the rest of the pipeline); the connection
        holds the lock in an aborted transaction. A failed version check: the cache was stale.
        A failed absence check: a guessed key exists; the cache (which the version check, or
        the first round trip, found current) is kept, and the next try, which does not guess
        (one wrong guess puts the handle's rate at its limit), reads the keys it lacks.
        """
        import psycopg

        cache = self._cache
        c = self._c
        if (
            cache is None
            or not isinstance(exc, psycopg.Error)
            or not report
            or not isinstance(report[0], tuple)
            or c.conn is None
            or c.conn.closed
        ):
            return
        names = c.kv._sql.versioned
        name = report[0][0]
        if name == names[c.q.vcheck].encode():
            c.kv._stale()
            raise _Again(c.conn, None) from exc
        if name == names[c.q.absent].encode():
            c.kv._guess_missed()
            raise _Again(c.conn, cache) from exc

    def _committed(self, version: int | None) -> None:
        """The commit went through: the handle's cache is what this write read and wrote.

        ``version`` is the store's version after it (None: no change, not read). The old cache
        is kept under it when this write found it current.
        """
        kv = self._c.kv
        cache = self._cache
        if (
            cache is not None
            and self._guess
            and any(map(bytes.startswith, self._guessed, itertools.repeat(self._guess)))
        ):
            kv._guessed_right()  # the rate counts guesses under the prefixes (a new head's
            # guess, ``put(..., overwrite=False)``, is nearly always right)
        elif cache is not None and self._would is not None:
            kv._guess_seen(self._would)
        if version is None:
            if cache is None:
                return
            version = cache.version
        elif cache is not None:
            kv._fresh()
        new = cache if cache is not None else _Known(version)
        new.absorb(self, version)
        kv._keep(new)

    def _ending(self, lock: Any, *, set_async: bool = True) -> list[Any]:
        """The statements that end a write: COMMIT, the unlock, the flush.

        The COMMIT is asynchronous and the unlock follows it at once: the next writer's
        snapshot sees this write, and its work overlaps this write's WAL flush. ``_FLUSH``
        then commits synchronously (its transaction writes WAL), which flushes the WAL past
        this write's commit record: the write is durable when the round trip is answered, as
        with a synchronous COMMIT, and writers in a row share their flushes. Without the
        privilege to run ``_FLUSH`` (``PgKV._flushes``): a synchronous COMMIT, then the unlock.

        ``lock`` is the unlock's parameters: a string ``(a, b)`` (pipeline steps: SQL without
        parameters) or the lock key's tuple (``_inline`` parts). Without ``set_async`` the
        asynchronous setting is not sent here: the statement that read the new version set it
        (``_Scan.currval_async``).
        """
        unlock: Any = (
            f"SELECT pg_advisory_unlock{lock}"
            if isinstance(lock, str)
            else ("SELECT pg_advisory_unlock(%s, %s)", lock)
        )
        if not self._c.kv._flushes:
            return ["COMMIT", unlock]
        if isinstance(lock, str) and _FLUSH.startswith("SELECT "):
            # the unlock and the flush as one statement (its items run in order: the lock is
            # released, then the message written): one statement fewer for the server
            ending: list[Any] = ["COMMIT", _unlock_flush(lock)]
        else:
            ending = ["COMMIT", unlock, _FLUSH]
        return [_ASYNC, *ending] if set_async else ending


class _ReadCtx:
    """``PgKV.read()``: a REPEATABLE READ READ ONLY snapshot on a pooled connection."""

    __slots__ = ("_c", "_kv")

    def __init__(self, kv: PgKV) -> None:
        self._kv = kv
        self._c: _Conn | None = None

    def __enter__(self) -> _PgRead:
        kv = self._kv
        kv._check_fork()
        self._c = _Conn(kv, _BEGIN_READ)
        return _PgRead(self._c)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        c, self._c = self._c, None
        psycopg, _ = _psycopg()
        if c is not None:
            conn = c.conn
            if c.begun and conn is not None and not conn.closed:
                try:
                    self._kv.round_trips += 1
                    conn.execute("ROLLBACK")
                except psycopg.Error:
                    conn.close()  # the pool discards it
            c.release(failed=False)
        if isinstance(exc, psycopg.Error):
            raise _wrap(exc, f"reading {self._kv.path}") from exc


class PgKV:
    """A store in a PostgreSQL table (see the module docstring)."""

    def __init__(self, url: str, *, readonly: bool = False, create: bool = True) -> None:
        psycopg, psycopg_pool = _psycopg()
        self.url = parse_url(url)
        self.path = self.url.shown
        self.readonly = readonly
        self.table = f"cortex_{self.url.store}"
        self._sql = _Scan(self.table)
        self._pid = os.getpid()
        # one advisory lock per store: writers take it before their snapshot (LMDB's writer
        # mutex); two int4 keys: a constant for cortex and a hash of the table name
        self._lock_key = _lock_key(self.table)
        self._closed = False
        # one connection kept out of the pool (``_getconn`` takes it first, ``_reuse`` gives
        # back to it): a get, a read or a write in a loop skips the pool's bookkeeping
        self._hot: list[Any] = []
        self._lock = threading.Lock()
        self._warm: tuple[tuple[bytes, ...], tuple[bytes, ...]] = ((), ())
        self.round_trips = 0
        """Round trips to the server so far (statements, or pipelines of them, sent and
        answered): the figure ``tools/bench_pg.py`` reports per operation."""
        self._ahead_steps: list[_Step] | None = None  # ``_ahead``
        self._endings: dict[tuple[Any, ...], list[_Step]] = {}  # ``_PgWrite.commit``'s
        # how often a write with the cache needed a read round trip (a moving average, weight
        # 1/8 a write): the lock, BEGIN and version read go ahead of fn while it is below 1/2
        self._ahead_rate = 0.0
        self._ahead_late = 0.0  # how often a write sent ahead found its thread descheduled
        self._ahead_tick = 0
        self.overlapped = 0
        """Round trips sent ahead of the work that needs their answers, answered while the
        client works (a write's lock, BEGIN and version read, sent before ``fn`` runs:
        ``_Conn.send_early``); not in ``round_trips``, which counts the waits."""
        self.conflicts = 0
        """Write transactions re-run after a serialization failure or a deadlock so far."""
        self._started: object = None  # ``epoch``: set by each new connection (``_configure``)
        try:
            # the URL's own connect_timeout where it gives one (libpq checks its value)
            given = re.search(r"[?&]connect_timeout=", self.url.conninfo)
            timeout = {} if given else {"connect_timeout": 10}
            with psycopg.connect(self.url.conninfo, autocommit=True, **timeout) as conn:
                exists, flush = conn.execute(
                    f"SELECT to_regclass(%s) IS NOT NULL, {_CAN_FLUSH}", (f'"{self.table}"',)
                ).fetchone()
                self._flushes = bool(flush)
                """Whether a write can end with ``_FLUSH`` (else it commits synchronously)."""
                if not exists:
                    if readonly or not create:
                        raise CortexError(
                            f"no store at {self.path} (no table {self.table}); create it with "
                            f"`cortex --store '{self.path}' init`"
                        )
                    conn.execute("SELECT pg_advisory_lock(%s, %s)", self._lock_key)
                    try:
                        conn.execute(self._sql.create)
                    finally:
                        conn.execute("SELECT pg_advisory_unlock(%s, %s)", self._lock_key)
                # the write cache (``_Known``, ``specs/postgres.md`` §4 item 7): the store's
                # version sequence and its trigger, made where missing (an older cortex's)
                self._versioned = not readonly and self._versioning(conn)
                """Whether the store has its version sequence (else writes keep no cache)."""
        except psycopg.Error as exc:
            raise _wrap(exc, f"cannot open the store {self.path}") from exc
        a, b = self._lock_key
        self._lock_begin = (
            f"SELECT pg_advisory_lock({a}, {b}); COMMIT; BEGIN ISOLATION LEVEL SERIALIZABLE"
        )
        self._cache: _Known | None = None
        self._guess: tuple[bytes, ...] = ()  # ``warm_writes``' ``absent``
        self._skip = self._misses = 0  # writes left without the cache; stale caches in a row
        self._grate = 0.0  # how often a write's guesses of absence would be wrong (average)
        self.cache_misses = 0
        """Writes whose cache was found stale (another writer wrote since) so far."""
        # the connections with the SQL prepared, by id (a set lookup: every statement of a
        # write asks), each id dropped when its connection is collected
        self._ready: set[int] = set()
        self._types: dict[str, tuple[int, ...]] = {}  # their parameters' type oids, by name
        # a statement's prepared name and parameter types, by its text (``_binary_steps``)
        self._shapes: dict[str, tuple[bytes | None, tuple[int, ...], bool]] = {}
        # a get's statements by their prepared names (``point_read``)
        named = self._sql.prepared
        self._point_vals = {n: named[q].encode() for n, q in self._sql.point_vals.items()}
        self._point_last = named[self._sql.point_last].encode()
        self._point_row = {nl: named[q].encode() for nl, q in self._sql.point_row.items()}
        # libpq's pipeline mode (libpq 14 and later): else every round trip is a query string
        self._pipelines = bool(psycopg.Pipeline.is_supported())
        self._pool = psycopg_pool.ConnectionPool(
            self.url.conninfo,
            min_size=1,
            max_size=self.url.pool,
            # psycopg prepares nothing itself: it would DEALLOCATE ALL at a ROLLBACK, ours too
            kwargs={"autocommit": True, "prepare_threshold": None},
            configure=self._configure,
            open=False,
            timeout=15.0,
            reconnect_timeout=15.0,
            name=f"cortex-{self.url.store}",
        )
        try:
            self._pool.open(wait=True, timeout=15.0)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            self._pool.close()
            raise _wrap(exc, f"cannot open the store {self.path}") from exc

    # -- connections -------------------------------------------------------------------------

    def _configure(self, conn: Any) -> None:
        """A new pooled connection: prepare the engine's statements on it (one round trip).

        A table dropped meanwhile leaves the connection unprepared: its statements go as text,
        and fail as the missing table's.
        """
        psycopg, _ = _psycopg()
        # the server's start: a restart (after a crash, say) gives a new epoch (``epoch``)
        (started,) = conn.execute("SELECT pg_postmaster_start_time()").fetchone()
        if self._started is not None and started != self._started:
            self._cache = None  # a restarted server (a crash, a restore): start over
        self._started = started
        # generic plans need PostgreSQL 12 (plan_cache_mode); an older server plans as before
        generic = f"{self._sql.generic}; " if conn.info.server_version >= 120000 else ""
        prepare = self._sql.prepare_typed_v if self._versioned else self._sql.prepare_typed
        try:
            (types,) = _send_all(conn, generic + prepare, keep=1)
        except psycopg.errors.UndefinedTable:
            return
        self._types = {str(name): tuple(oids) for name, oids in types}
        self._shapes = {}
        if id(conn) not in self._ready:
            self._ready.add(id(conn))
            weakref.finalize(conn, self._ready.discard, id(conn))

    def epoch(self) -> object:
        """The server's history epoch: the start of the server the newest connection reached.

        It changes when the server restarts, so a cache of the store's contents kept beside it
        (the vector index) checks what it holds then: writes it saw may have been lost with a
        crash before their WAL flush (``specs/postgres.md`` §4).
        """
        return self._started

    def _ahead_note(self, missed: bool, *, late: bool | None = None) -> None:
        """Count a write with the cache: it needed a read round trip (``missed``) or not.

        ``late``: for a write that sent ahead and needed no read, whether its thread was off
        the CPU for much of ``fn`` (``_ahead_late``).
        """
        self._ahead_rate += (float(missed) - self._ahead_rate) / 8
        if late is not None:
            self._ahead_late += (float(late) - self._ahead_late) / 8

    def _sends_ahead(self) -> bool:
        """Whether a write with the cache sends its lock, BEGIN and version read ahead of fn.

        While most such writes need no read round trip (``_ahead_rate``), and their client
        was not off the CPU while the server ran them (``_ahead_late``: on a busy machine the
        server cannot run beside the client, its wake-up costs the client, and a write in a
        single round trip was measured ~10% faster); every 16th write sends ahead anyway, to
        see whether that still holds.
        """
        if self._ahead_rate >= 0.5:
            return False
        self._ahead_tick = (self._ahead_tick + 1) % 16
        return self._ahead_late < 0.5 or not self._ahead_tick

    def _ahead(self, conn: Any) -> list[_Step] | None:
        """A write's round trip sent ahead on ``conn`` (``_Conn.send_early``), as steps.

        The lock, a Sync, BEGIN and the version read (all prepared: the same steps for every
        ready connection, built once). None where they are not prepared on ``conn``.
        """
        if id(conn) not in self._ready:
            return None
        steps = self._ahead_steps
        if steps is None:
            probe = self._binary_steps(conn, [(self._sql.probe, ())])
            if probe is None:
                return None
            steps = [*_begin_steps(self._lock_begin, self._sql.fixed_names), *probe]
            self._ahead_steps = steps
        return steps

    def _names(self, conn: Any) -> dict[str, str] | None:
        """The statements prepared on ``conn`` (None: none)."""
        return self._sql.prepared if id(conn) in self._ready else None

    def _fixed(self, conn: Any) -> dict[str, bytes] | None:
        """The prepared names of the parameterless ``_Scan.fixed`` on ``conn`` (None: none)."""
        return self._sql.fixed_names if id(conn) in self._ready else None

    def _binary_steps(
        self, conn: Any, stmts: list[tuple[str, tuple[Any, ...]]]
    ) -> list[_Step] | None:
        """``stmts`` as pipeline steps: prepared on ``conn``, their parameters in binary.

        None when one of them is not prepared there, or has a parameter with no binary form.
        """
        if not stmts or not self._pipelines or id(conn) not in self._ready:
            return None
        shapes = self._shapes
        steps: list[_Step] = []
        packed: dict[int, bytes | None] = {}  # an array given twice is packed once (by id)
        for query, params in stmts:
            shape = shapes.get(query)
            if shape is None:
                shape = shapes[query] = self._shape(query)
            name, oids, flat = shape
            if name is None or len(oids) != len(params):
                return None
            if flat and set(map(type, params)) == {bytes}:
                steps.append((name, list(params)))  # ``_binary`` of bytea: the bytes
                continue
            values: list[bytes | None] = []
            try:
                for oid, v in zip(oids, params, strict=True):
                    if oid == _BYTEA_ARRAY:
                        b = packed.get(id(v))
                        if b is None:
                            b = packed[id(v)] = _binary(oid, v)
                        values.append(b)
                    else:
                        values.append(_binary(oid, v))
            except TypeError:
                return None
            steps.append((name, values))
        return steps

    def _shape(self, query: str) -> tuple[bytes | None, tuple[int, ...], bool]:
        """The prepared name of ``query`` (None: not prepared) and its parameters' types.

        The types: their oids, and whether they are all ``bytea`` (sent as they are). Kept
        per handle (``_shapes``) until a new connection reads the types again.
        """
        name = self._sql.prepared.get(query) or self._sql.versioned.get(query)
        oids = self._types.get(name) if name is not None else None
        if name is None or oids is None:
            return None, (), False
        return name.encode(), oids, bool(oids) and all(o == _BYTEA for o in oids)

    def _versioning(self, conn: Any) -> bool:
        """Make the store's version sequence and its trigger where missing; whether they are.

        The sequence ``cortex_NAME_v`` starts at a random value (a store dropped and made again
        never repeats an old store's versions) and belongs to the table; a ``BEFORE ... FOR
        EACH STATEMENT`` trigger of the table bumps it on every insert, update, delete and
        truncate, whoever runs them. A role that may not make them (not the table's owner)
        leaves the store without: its writes keep no cache.
        """
        psycopg, _ = _psycopg()
        (ready,) = conn.execute(self._sql.version_ready).fetchone()
        if ready:
            return True
        try:
            conn.execute("SELECT pg_advisory_lock(%s, %s)", self._lock_key)
            try:
                with conn.transaction():
                    (ready,) = conn.execute(self._sql.version_ready).fetchone()
                    if not ready:
                        start = random.randrange(1, 1 << 62)
                        conn.execute(self._sql.version_setup.replace("%s", str(start)))
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s, %s)", self._lock_key)
        except psycopg.errors.InsufficientPrivilege:
            return False
        return True

    def _claim(self) -> _Known | None:
        """The handle's write cache, taken by one write at a time (None: none, or skipped)."""
        if not self._versioned:
            return None
        with self._lock:
            if self._skip:
                self._skip -= 1
                self._cache = None
                return None
            known, self._cache = self._cache, None
        return known

    def _keep(self, known: _Known) -> None:
        """A committed write's cache becomes the handle's (the newest, with threads)."""
        with self._lock:
            if self._cache is None or self._cache.version <= known.version:
                self._cache = known

    def _stale(self) -> None:
        """A cache was found stale: skip the cache for 1, 2, 4 ... 64 writes."""
        self.cache_misses += 1
        with self._lock:
            self._misses = min(max(1, 2 * self._misses), _SKIP_MAX)
            self._skip = self._misses

    def _fresh(self) -> None:
        self._misses = 0

    def _guess_missed(self) -> None:
        """A guessed-absent key existed (the write runs again)."""
        self._guess_seen(True)

    def _guessed_right(self) -> None:
        self._guess_seen(False)

    def _could_guess(self, new: set[bytes], keys: list[bytes]) -> bool:
        """Whether a write guessing absent keys would have guessed all of ``keys``."""
        g = self._guess
        return (
            bool(g)
            and any(k.startswith(g) for k in keys)
            and all(k in new or k.startswith(g) for k in keys)
        )

    def _guess_seen(self, wrong: bool) -> None:
        """One write's guesses were (or, had it guessed, would have been) wrong, or right."""
        with self._lock:
            self._grate += _GUESS_WEIGHT * (wrong - self._grate)

    def _guesses(self) -> tuple[bytes, ...]:
        """The prefixes a write may guess absent keys under (none while they go wrong).

        ``_grate``: a write that does not guess still learns whether it would have been
        right, from its first round trip.
        """
        return self._guess if self._grate < _GUESS_MAX_RATE else ()

    def _check_fork(self) -> None:
        if os.getpid() != self._pid:
            raise CortexError(
                "this store was opened before fork(); its connections must not cross a fork: "
                "open the store again in the child"
            )
        if self._closed:
            raise CortexError(f"the store {self.path} is closed")

    def _getconn(self) -> Any:
        """An idle connection for one transaction: the kept one first, else the pool's.

        One the server closed while it sat idle (a restart: the server's goodbye, or the end
        of the stream, is waiting on its socket) is dropped for the pool to replace before
        anything is sent on it (``_quiet``), so that a transaction never starts on it:
        otherwise a write whose first round trip is its commit could not tell a connection
        dead before it sent from one lost while committing.
        """
        psycopg, psycopg_pool = _psycopg()
        last = self.url.pool + 1
        for attempt in range(last + 1):
            try:  # the connection a get by id kept for the next one: the pool may have no other
                conn = self._hot.pop()
            except IndexError:
                try:
                    conn = self._pool.getconn()
                except (psycopg.Error, psycopg_pool.PoolTimeout, psycopg_pool.PoolClosed) as exc:
                    raise EngineError(
                        f"no connection to the PostgreSQL server of {self.path} ({exc}); "
                        "nothing was read or written: check that the server is up and retry"
                    ) from exc
            if attempt == last or _quiet(conn):
                return conn  # the last unchecked: the transaction's first round trip says why
            conn.close()
            self._putconn(conn)  # the pool replaces a closed connection
        raise AssertionError("unreachable")  # pragma: no cover

    def _reuse(self, conn: Any) -> None:
        """A transaction's connection, ended well: kept for the next one when it is idle.

        The kept connection (``_hot``, taken first by ``_getconn`` and ``point_read``) skips
        the pool's bookkeeping on both sides of a transaction (~15-30 µs of the client's CPU a
        write); any other goes back to the pool, which checks it.
        """
        if self._hot or self._closed or conn.closed or conn.pgconn.transaction_status != 0:
            self._putconn(conn)  # 0: PQTRANS_IDLE (a lost connection is UNKNOWN)
        else:
            self._hot.append(conn)

    def _putconn(self, conn: Any) -> None:
        if conn is None:
            return
        try:
            self._pool.putconn(conn)
        except Exception:
            conn.close()

    # -- transactions ------------------------------------------------------------------------

    def read(self) -> _ReadCtx:
        """A read snapshot (REPEATABLE READ, READ ONLY), as a context manager."""
        return _ReadCtx(self)

    def read_checked(self, ranges: list[tuple[bytes, bytes | None]] | None = None) -> _ReadCtx:
        """``read()``; its transaction's ``damage`` is always empty.

        The LMDB engine checks a snapshot's pages before a whole-store walk (LMDB would crash
        on a damaged page); PostgreSQL checks its own pages and reports a damaged one as an
        error of the query that meets it, so there is nothing to check here. ``ranges`` is
        accepted for the same interface and ignored.
        """
        return _ReadCtx(self)

    def warm_writes(
        self, keys: Iterable[bytes], tails: Iterable[bytes] = (), absent: Iterable[bytes] = ()
    ) -> None:
        """Keys, and prefixes whose last pair, (nearly) every write transaction reads.

        Each write reads them in its first round trip (with the lock, BEGIN and its first
        read) instead of one round trip each when it first needs them. Keys under an
        ``absent`` prefix that the write cache does not know are guessed absent (checked by
        the commit, ``specs/postgres.md`` §4 item 7): keys that are new more often than not.
        """
        # a tail of every key (b"" or all 0xff: no prefix of its own) is not a warm tail
        self._warm = (
            tuple(dict.fromkeys(keys)),
            tuple(p for p in dict.fromkeys(tails) if p.strip(b"\xff")),
        )
        self._guess = tuple(p for p in dict.fromkeys(absent) if p)

    def _on_kept(self, run: Callable[[Any], T]) -> T:
        """``run(conn)`` on the kept connection (a point read's), one round trip.

        The kept connection goes without the pool's bookkeeping (~10-25 us a get); one the
        server dropped is replaced and ``run`` tried once more; errors become CortexErrors;
        an interrupt closes the connection (its state unknown) for the pool to replace.
        """
        psycopg, _ = _psycopg()
        for attempt in (0, 1):
            conn = self._getconn()
            self.round_trips += 1
            try:
                got = run(conn)
            except psycopg.OperationalError as exc:
                dead = conn.broken or conn.closed
                self._putconn(conn)
                if dead and attempt == 0:
                    continue  # a pooled connection the server dropped: once more, fresh
                raise _wrap(exc, f"reading {self.path}") from exc
            except psycopg.Error as exc:
                self._putconn(conn)
                raise _wrap(exc, f"reading {self.path}") from exc
            except BaseException:  # an interrupt (a signal's exception): in an unknown state
                conn.close()
                self._putconn(conn)  # the pool replaces it
                raise
            if self._hot or self._closed:
                self._putconn(conn)
            else:
                self._hot.append(conn)
            return got
        raise AssertionError("unreachable")  # pragma: no cover

    def point_read(
        self, keys: list[bytes], last: bytes | None = None
    ) -> tuple[list[bytes | None], tuple[bytes, bytes] | None]:
        """The values of ``keys`` and the last pair under the prefix ``last``, in ONE statement.

        One round trip and one snapshot (a statement sees one), no transaction to begin or
        end: for reads of a few known keys (get by id). One or two keys, or one key and a
        prefix, go as one prepared statement answering one row in binary (``_exec_row``); more
        keys as a query string.
        """
        self._check_fork()
        lo = hi = b""
        n = len(keys)
        if last is not None:
            end = _hi(last)
            lo, hi = last, end if end is not None else b"\xff" * 512  # above any key
            name = self._point_last if n == 1 else None
        else:
            name = self._point_vals.get(n)

        def run(conn: Any) -> tuple[Any, Any]:
            if name is not None and id(conn) in self._ready:
                return _exec_row(conn, name, keys if last is None else [keys[0], lo, hi]), None
            if last is None:
                query, params = self._sql.keys_in(keys)
                (got,) = _send_all(conn, _inline([(query, params)], self._names(conn)), keep=1)
                return None, [(0, k, v) for k, v in got]
            query, params = self._sql.keys_in(keys, last=True)
            sql = _inline([(query, (*params, lo, hi))], self._names(conn))
            (rows,) = _send_all(conn, sql, keep=1)
            return None, rows

        row, rows = self._on_kept(run)
        if rows is None:
            if last is None:
                return row, None
            lk, lv = row[1], row[2]
            return row[:1], None if lk is None or lv is None else (lk, lv)
        found = {}
        tail = None
        for w, k, v in rows:
            if w == 0:
                found[bytes(k)] = bytes(v)
            elif tail is None:
                tail = (bytes(k), bytes(v))
        return [found.get(k) for k in keys], tail

    def point_read_row(
        self, ptr: bytes, keys: list[tuple[bytes, bytes]], last: bytes | None = None
    ) -> tuple[bytes | None, list[bytes | None], tuple[bytes, bytes] | None]:
        """A point read that follows a row pointer, in ONE statement (``KV.point_read_row``).

        The server reads ``ptr``'s value, takes its first 4 bytes (the row) and reads each
        ``prefix || row || suffix`` of ``keys`` and the last pair under ``last || row``: a get
        by id through ``id/`` in one round trip. One or two keys go as one prepared statement
        answering one row in binary (``_exec_row``); more keys as two point reads.
        """
        name = self._point_row.get((len(keys), last is not None))
        if name is None:  # not a get's shape: the pointer, then the keys
            (pv,), _ = self.point_read([ptr])
            if pv is None:
                return None, [None] * len(keys), None
            r = pv[:4]
            vals, tail = self.point_read(
                [p + r + x for p, x in keys], None if last is None else last + r
            )
            return pv, vals, tail
        self._check_fork()
        params: list[bytes] = []  # in the statement's order: the keys', the pointer, the tail's
        for p, x in keys:
            params += (p, x)
        params.append(ptr)
        if last is not None:
            params += (last, last, _ABOVE)

        def run(conn: Any) -> Any:
            if id(conn) in self._ready:
                return _exec_row(conn, name, params)
            query = self._sql.point_row[(len(keys), last is not None)]
            (got,) = _send_all(conn, _inline([(query, tuple(params))], None), keep=1)
            return [None if c is None else bytes(c) for c in got[0]]

        row = self._on_kept(run)
        n = 1 + len(keys)
        if last is None:
            return row[0], row[1:n], None
        lk, lv = row[n], row[n + 1]
        return row[0], row[1:n], None if lk is None or lv is None else (lk, lv)

    def write(self, fn: Callable[[Any], T]) -> T:
        """Run ``fn`` in one SERIALIZABLE transaction and commit; re-run on conflict.

        ``fn`` may run more than once: after a serialization failure or a deadlock reported by
        the server, and once after a connection lost before the commit was sent.

        Raises:
            ConflictError: still conflicting after ``RETRIES`` tries.
            EngineError: the server went away (before or during the commit: a commit whose
                answer was lost is named so; PostgreSQL applied it whole or not at all).
            StoreFullError: the server is out of disk or memory.
        """
        self._check_fork()
        if self.readonly:
            raise CortexError("the store is open read-only")
        psycopg, _ = _psycopg()
        errors = psycopg.errors
        # the lock first, in a transaction of its own, then the snapshot: a writer's snapshot
        # is taken only once the previous writer has committed
        begin = self._lock_begin
        known = self._claim()
        held = None  # a connection holding the lock in an aborted transaction (``_Again``)
        again = 0
        attempt = 0
        while True:
            if held is not None:  # roll the failed try back; the lock stays held
                c = _Conn(self, _AGAIN_BEGIN, conn=held)
                held = None
            else:
                c = _Conn(self, begin)
            txn = self._txn(c, known, guess=again == 0)
            known = None
            committing = False
            try:
                if txn._cache is not None and not c.locked and self._sends_ahead():
                    # the lock, BEGIN and the version read go now: the server runs them
                    # while fn runs, and the commit's round trip finds their answers there
                    # (while most writes need no read of their own: else the read's round
                    # trip carries them, as when nothing goes ahead)
                    c.send_early()
                while True:
                    try:
                        result = fn(txn)
                        committing = True
                        txn.commit()
                        break
                    except _Stale:  # the cache was stale: again in this transaction, without
                        committing = False
                        txn = txn.again()
                    except Exception as exc:
                        # fn's error may come of a stale cache or a wrong guess: raised only
                        # once they are confirmed, else fn runs again without them (the
                        # server's and the connection's own errors go on as they are)
                        conn = c.conn
                        if (
                            committing
                            or isinstance(exc, psycopg.Error | EngineError)
                            or conn is None
                            or conn.closed
                            or conn.broken
                            or txn._confirm()
                        ):
                            raise
                        txn = txn.again()
            except _Again as exc:  # nothing written; the lock is held: again at once
                c.conn = None
                held = exc.conn
                again += 1
                known = exc.known if again < 3 else None
                continue
            except (errors.SerializationFailure, errors.DeadlockDetected) as exc:
                c.release(failed=True)
                self.conflicts += 1
                attempt += 1
                if attempt == RETRIES:
                    raise ConflictError(
                        f"the write to {self.path} kept conflicting with concurrent writers "
                        f"({RETRIES} tries; last: {exc.sqlstate}); nothing was written: retry "
                        "later"
                    ) from exc
                time.sleep(min(0.001 * 2 ** (attempt - 1), 0.2) * (0.5 + random.random()))
                continue
            except errors.InsufficientPrivilege as exc:
                c.release(failed=True)
                if not (committing and self._flushes and "pg_logical_emit_message" in str(exc)):
                    raise _wrap(exc, f"writing {self.path}") from exc
                # the flush is the ending's last statement: the COMMIT went through (the
                # right to run it was taken away since the store opened); the unlock too, or,
                # in the same statement as the flush, it was refused with it and ``release``
                # dropped the lock
                self._flushes = False
                self._flush_wal(exc)
                return result
            except psycopg.Error as exc:
                gone = c.conn is None or c.conn.broken or c.conn.closed
                c.release(failed=True)
                if gone and committing:
                    raise EngineError(
                        f"the connection to the server of {self.path} was lost while committing "
                        f"({exc}): PostgreSQL applied the write whole or not at all; read the "
                        "store to see which"
                    ) from exc
                raise _wrap(exc, f"writing {self.path}") from exc
            except BaseException as exc:
                if committing:  # an interrupt while the COMMIT was being sent or answered
                    exc.add_note(
                        f"cortex: the write to {self.path} was interrupted while committing: "
                        "PostgreSQL applied it whole or not at all; read the store to see which"
                    )
                c.release(failed=True)
                raise
            c.release(failed=False)
            return result

    def _txn(self, c: _Conn, known: _Known | None, *, guess: bool = True) -> _PgWrite:
        """A write transaction on ``c``, reading from the cache ``known`` where it can.

        It guesses absent keys (``warm_writes``' ``absent``) only when ``guess`` (not after a
        failed try) and while the handle's guesses are mostly right (``_guesses``).
        """
        if known is not None and not (self._pipelines and id(c.conn) in self._ready):
            known = None  # no prepared version statements on this connection
        prefixes = self._guesses() if known is not None and guess else ()
        return _PgWrite(c, self._lock_key, self._warm, known, prefixes)

    def _flush_wal(self, cause: BaseException) -> None:
        """Make a write committed asynchronously durable without ``_FLUSH``.

        A transaction that writes WAL under a transaction id commits synchronously at the
        server's setting, so its commit flushes the WAL past every commit made before it: here
        one that makes a temporary table (its catalog rows are WAL-logged; ``ON COMMIT DROP``
        leaves nothing). A transaction that only takes an id writes no WAL and commits
        asynchronously (measured: ``SELECT pg_current_xact_id()`` left the flush behind an
        asynchronous commit made before it 199 times of 200). The WAL's flush position is then
        checked against its insert position read before: past it, the write is durable.

        Raises:
            EngineError: the server could not be reached, or refused: the write was committed,
                its flush is not confirmed.
        """
        psycopg, _ = _psycopg()
        conn = None
        try:
            conn = self._getconn()
            self.round_trips += 2
            (rows,) = _send_all(conn, "SELECT pg_current_wal_insert_lsn()::text", keep=1)
            lsn = rows[0][0]
            if not re.fullmatch(r"[0-9A-F]{1,8}/[0-9A-F]{1,8}", str(lsn)):
                raise EngineError(f"the server gave {lsn!r} for a WAL position")
            # not by PQexec (``keep=1``): a COMMIT may wait on a synchronous replica
            (rows,) = _send_all(
                conn,
                "BEGIN; CREATE TEMPORARY TABLE cortex_flush (x int) ON COMMIT DROP; COMMIT; "
                f"SELECT pg_current_wal_flush_lsn() >= '{lsn}'::pg_lsn",
            )
            if not rows[0][0]:
                raise EngineError(f"the WAL's flush position is still before {lsn}")
        except (psycopg.Error, EngineError) as exc:
            if conn is not None and not conn.closed:
                try:  # a failed transaction of the flush's: leave the connection idle
                    conn.execute("ROLLBACK")
                except psycopg.Error:
                    conn.close()
            raise EngineError(
                f"the write to {self.path} was committed, but its WAL flush could not be "
                f"confirmed ({cause}; then {exc}): it is durable unless the server crashes "
                "before its own WAL writer flushes it (within wal_writer_delay); read the store "
                "after a crash to see whether it is there"
            ) from exc
        finally:
            self._putconn(conn)

    # -- housekeeping ------------------------------------------------------------------------

    def info(self) -> dict[str, int]:
        """The table's size on the server (with its index and TOAST) and its row count."""
        psycopg, _ = _psycopg()
        conn = self._getconn()
        try:
            size, rows = conn.execute(self._sql.size).fetchone()
        except psycopg.Error as exc:
            raise _wrap(exc, f"reading {self.path}") from exc
        finally:
            self._putconn(conn)
        return {"map_size": int(size), "used_bytes": int(size), "entries": int(rows)}

    def load(self, pairs: Iterable[tuple[bytes, bytes]]) -> tuple[int, int]:
        """Fill the empty store with ``pairs`` (in key order) in one transaction, by COPY.

        Returns:
            How many pairs and bytes were loaded.

        Raises:
            CortexError: the store already holds records (nothing is written).
        """
        psycopg, _ = _psycopg()
        self._check_fork()
        a, b = self._lock_key
        c = _Conn(
            self, f"SELECT pg_advisory_lock({a}, {b}); COMMIT; BEGIN ISOLATION LEVEL SERIALIZABLE"
        )
        conn = c.conn
        n = size = 0
        try:
            c.start()
            if conn.execute(f'SELECT 1 FROM "{self.table}" LIMIT 1').fetchone() is not None:
                raise CortexError(f"{self.path} holds records; a copy goes into an empty store")
            with (
                conn.cursor() as cur,
                cur.copy(f'COPY "{self.table}" (k, v) FROM STDIN (FORMAT BINARY)') as cp,
            ):
                cp.set_types(["bytea", "bytea"])
                for k, v in pairs:
                    cp.write_row((k, v))
                    n += 1
                    size += len(k) + len(v)
            conn.execute("COMMIT")
            conn.execute("SELECT pg_advisory_unlock(%s, %s)", self._lock_key)
        except psycopg.Error as exc:
            c.release(failed=True)
            raise _wrap(exc, f"loading {self.path}") from exc
        except BaseException:
            c.release(failed=True)
            raise
        c.release(failed=False)
        return n, size

    def drop(self) -> None:
        """Remove the store's table (all its data)."""
        psycopg, _ = _psycopg()
        conn = self._getconn()
        try:
            conn.execute(f'DROP TABLE IF EXISTS "{self.table}"')  # its sequence goes with it
            conn.execute(f'DROP FUNCTION IF EXISTS "{self.table}_v"()')
            self._cache = None
        except psycopg.Error as exc:
            raise _wrap(exc, f"dropping {self.path}") from exc
        finally:
            self._putconn(conn)

    def vacuum(self, wait: float) -> list[tuple[int, int]]:
        """The erasure step's part on PostgreSQL (``specs/storage.md`` §11): ``VACUUM``.

        Runs ``VACUUM`` on the store's table (and so its TOAST table and indexes), which
        removes the dead row versions a purge left from every row and index entry. A
        transaction whose snapshot began before the purge keeps them: the step waits up to
        ``wait`` seconds for such transactions (other than this connection's) to end, vacuums
        again, and returns ``(pid, age of its xmin)`` of those still open. ``VACUUM`` does not
        overwrite the bytes of what it removes; the files are the operator's part.
        """
        psycopg, _ = _psycopg()
        held = """
            SELECT pid, age(backend_xmin) FROM pg_stat_activity
            WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid()
              AND datname = current_database()
              AND age(backend_xmin) >= age(%s::text::xid)
            ORDER BY pid"""
        conn = self._getconn()
        try:
            # the oldest transaction that may still see a dead row of the purge: one older
            # than every transaction committed so far
            (now_xid,) = conn.execute("SELECT txid_current()::text").fetchone()
            now_xid = str(int(now_xid) & 0xFFFFFFFF)
            deadline = time.monotonic() + wait
            while True:
                conn.execute(f'VACUUM "{self.table}"')
                holding = [(int(p), int(a)) for p, a in conn.execute(held, (now_xid,))]
                if not holding or time.monotonic() >= deadline:
                    return holding
                time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        except psycopg.Error as exc:
            raise _wrap(exc, f"vacuuming {self.path}") from exc
        finally:
            self._putconn(conn)

    def close(self) -> None:
        """Close the pool (only in the process that opened it)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if os.getpid() == self._pid:
            while self._hot:
                self._putconn(self._hot.pop())
            self._pool.close()


def _lock_key(table: str) -> tuple[int, int]:
    """The advisory lock of a store's table: a constant for cortex and a hash of its name."""
    return 0x636F7278, _hash32(table)


def _hash32(text: str) -> int:
    """A stable signed 32-bit hash (FNV-1a) of ``text``, for an advisory lock key."""
    h = 0x811C9DC5
    for b in text.encode():
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h
