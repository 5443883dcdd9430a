"""The ordered key-value layer under the store, and its LMDB implementation.

The store speaks only this interface (get, put, delete, ordered scans, atomic write
transactions, read snapshots), so another engine with bytewise-ordered keys can replace LMDB
without touching the layers above. Every stored value wears the same envelope (``seal``):
its payload and a CRC-32, so damage raises ``IntegrityError`` on read (``specs/storage.md`` §3).
"""

from __future__ import annotations

import contextvars
import errno
import functools
import heapq
import mmap
import os
import resource
import shutil
import sys
import threading
import time
import zlib
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from itertools import islice, takewhile
from operator import itemgetter, le
from pathlib import Path
from threading import get_ident
from types import TracebackType
from typing import Any, ClassVar, Final, Generic, Protocol, TypeVar, cast

import lmdb

from cortex.errors import CortexError, IntegrityError, StoreFullError
from cortex.storage import scrub as _scrub
from cortex.storage.keys import (
    DATABASE_PREFIX,
    DATABASES,
    DUP_DATABASES,
    HEAD,
    ID,
    LEX_DOCNO,
    VERSION,
    prefix_end,
    show_key,
)
from cortex.storage.pages import (
    PageProblem,
    PageState,
    check_file,
    check_snapshot,
    checked_state,
    damage_error,
    read_checked_record,
    short_path,
    write_checked_record,
)

__all__ = ["KV", "LmdbKV", "ReadTxn", "WriteTxn", "seal", "unseal"]

try:
    from cortex import _speedups as _sp
except ImportError:  # pragma: no cover - installed without a C compiler
    _sp = None  # type: ignore[assignment]

_USE_SPEEDUPS: bool = _sp is not None and all(
    hasattr(_sp, name) for name in ("seal", "unseal", "sort_pairs")
)
"""Seal, unseal and sort pairs through the C accelerator (the same CRC-32, the same order; an
older build lacks them: zlib and list.sort here)."""

T = TypeVar("T")

_MIN_MAP: int = 64 << 20
_MAX_MAP: int = 1 << 40  # 1 TiB of address space; LMDB only reserves it
_NEVER: Any = object()  # no write through this environment yet

_FORKS: list[int] = [0]
"""How many forks lie between this process and the first of its line (``os.fork`` adds one in
the child): a handle opened at another count was opened before a fork (``_check_fork``), told
without a ``getpid`` system call on every transaction."""
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _FORKS.__setitem__(0, _FORKS[0] + 1))

_GIL: Final[bool] = bool(getattr(sys, "_is_gil_enabled", lambda: True)())
"""Whether the GIL orders every thread's dict and attribute operations (``_Gate``): False on a
free-threaded build running without it, where the gate's checks take its lock."""

_MAP_READS: bool = (
    _GIL
    and _sp is not None
    and hasattr(_sp, "MapFile")
    and int(getattr(lmdb, "__version__", "0").split(".")[0]) >= 3
)
"""Whether read snapshots get from the data file's map in C, holding the interpreter lock
(``cortex._speedups.MapFile``; ``specs/storage.md`` "Reads from the map"): py-lmdb gives the
lock away at every call, which a thread running Python beside a reader then holds for up to
the switch interval. py-lmdb 3 or later: the cursor's answers are compared with its own (an
earlier one shows a failed ``set_range_dup``'s position). Tests switch it off to compare."""


def seal(payload: bytes) -> bytes:
    """The stored form of a value: ``payload || crc32(payload)`` (4 bytes, big-endian)."""
    if _USE_SPEEDUPS and type(payload) is bytes:
        sealed: bytes = _sp.seal(payload)
        return sealed
    return payload + zlib.crc32(payload).to_bytes(4, "big")


def unseal(key: bytes, value: bytes) -> bytes:
    """The payload of a sealed value, checked.

    Raises:
        IntegrityError: the value fails its checksum (naming ``key``).
    """
    if _USE_SPEEDUPS and type(value) is bytes:
        checked: bytes | None = _sp.unseal(value)
        if checked is not None:
            return checked
    else:
        payload = value[:-4]
        if len(value) >= 5 and zlib.crc32(payload).to_bytes(4, "big") == value[-4:]:
            return payload
    raise IntegrityError(f"record {show_key(key)} fails its checksum: the store is damaged")


def sort_by_key(pairs: list[tuple[bytes, Any]]) -> None:
    """Sort ``(key, value)`` pairs in place by key, stably.

    ``WriteTxn.put_many`` is fastest so: each put lands beside the last, without a search from
    the root of the tree.
    """
    if _USE_SPEEDUPS:
        _sp.sort_pairs(pairs)
    else:
        pairs.sort(key=itemgetter(0))


class ReadTxn(Protocol):
    """A consistent snapshot of the store."""

    def get(self, key: bytes) -> bytes | None:
        """The value under ``key`` or ``None``."""

    def scan(
        self, prefix: bytes, *, start: bytes | None = None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        """Pairs whose key starts with ``prefix``, in key order (or reverse).

        ``start`` (a full key, inclusive) skips ahead: forward scans begin at the first key
        >= start, reverse scans at the last key <= start.
        """

    def keys(
        self, prefix: bytes, *, start: bytes | None = None, reverse: bool = False
    ) -> Iterator[bytes]:
        """Keys starting with ``prefix``, like ``scan`` without reading values."""

    def seek(self, prefix: bytes, start: bytes, *, reverse: bool = False) -> bytes | None:
        """The first key ``scan(prefix, start=start, reverse=reverse)`` would yield, or None.

        Cheaper than ``next(keys(...))`` for many point seeks (index joins): the
        implementation may reuse one cursor.
        """

    def around(self, prefix: bytes, key: bytes) -> tuple[bytes | None, bytes | None, bytes | None]:
        """``(k0, v0, k1)``: the last pair at or before ``key`` and the first key after it.

        ``key`` starts with ``prefix``; each is None where there is no such key within
        ``prefix``. One positioning, for a writer that reads the block a key falls in and
        needs to know what follows it.
        """


class WriteTxn(ReadTxn, Protocol):
    """A write transaction: all of it commits, or none of it."""

    def put(self, key: bytes, value: bytes, *, overwrite: bool = True) -> bool:
        """Store ``value``; with ``overwrite=False`` keep an existing value and return False."""

    def delete(self, key: bytes) -> bool:
        """Remove ``key``; False when it was absent."""

    def put_many(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        """Store every ``(key, value)`` pair, overwriting; fastest when the keys are sorted."""

    def add_many(self, items: Iterable[tuple[bytes, bytes]]) -> int:
        """Store each pair whose key is absent (an existing value is kept); how many were added.

        A key given twice is added once. Fastest when the keys are sorted.
        """


class KV(Protocol):
    """An ordered key-value engine (``LmdbKV``; ``cortex.storage.pgkv.PgKV``)."""

    path: Any
    """Where the store is: a directory, or a URL without its password."""
    readonly: bool

    def read(self) -> Any:
        """A context manager giving a ``ReadTxn`` snapshot."""

    def read_checked(self, ranges: list[tuple[bytes, bytes | None]] | None = None) -> Any:
        """``read()`` for a whole-store walk, its pages checked first.

        The transaction's ``damage`` lists the damaged pages (LMDB: ``cortex.storage.pages``; an
        engine that checks its own pages: always empty).
        """

    def point_read(
        self, keys: list[bytes], last: bytes | None = None
    ) -> tuple[list[bytes | None], tuple[bytes, bytes] | None]:
        """The values of ``keys`` (None: absent) and the last pair under the prefix ``last``.

        Read from one snapshot: for reads of a few known keys, which an engine with round trips
        serves in one.
        """

    def point_read_row(
        self, ptr: bytes, keys: list[tuple[bytes, bytes]], last: bytes | None = None
    ) -> tuple[bytes | None, list[bytes | None], tuple[bytes, bytes] | None]:
        """``point_read`` through a row pointer: ``ptr``'s value, then keys built of its row.

        The row is the first 4 bytes of ``ptr``'s value (unchecked: the caller checks the
        value before it trusts the rest); each of ``keys`` is ``(prefix, suffix)``, read as
        ``prefix || row || suffix``; ``last``, a prefix, gives the last pair under
        ``last || row``. Absent ``ptr``: ``(None, [None, ...], None)``. One snapshot; an engine
        with round trips serves it in one (the server follows the pointer).
        """

    def write(self, fn: Callable[[WriteTxn], T]) -> T:
        """Run ``fn`` in one write transaction and commit; ``fn`` may be run again on retry.

        ``fn`` may run on another thread of the process (LMDB's group commit), in the caller's
        ``contextvars`` context; it must not rely on thread-local state.
        """

    def info(self) -> dict[str, int]:
        """Sizes: at least ``map_size``, ``used_bytes`` and ``entries``."""

    def close(self) -> None:
        """Release the engine."""


_DUP_PLANS_KEPT: Final = 4096
"""How many prefixes ``_Routes.dup_plans`` keeps (all dropped when it is full)."""


class _Routes:
    """Which LMDB database holds each key: a named one per keyspace of ``DATABASES``, or main.

    Only the named databases the file holds are routed to (a store of a format before 17 has
    none: every key is in the main database, as it was written). The databases' handles belong
    to the environment that opened them.
    """

    __slots__ = (
        "by_start",
        "damage",
        "dbs",
        "dup",
        "dup_plans",
        "heads",
        "ids",
        "longest",
        "memories_in_main",
        "names",
        "pairs_plans",
        "put_routes",
        "ranges",
        "whole",
    )

    def __init__(self, dbs: dict[bytes, Any], damage: list[PageProblem] | None = None) -> None:
        self.damage = damage or []
        """The damaged pages on the way to the named databases' records (none opened)."""
        self.dbs = dbs
        """Keyspace prefix -> its named database."""
        self.dup: dict[Any, int] = {dbs[p]: n for p, n in DUP_DATABASES.items() if p in dbs}
        """A database of duplicates (``keys.DUP_DATABASES``, format 20) -> its head length: a
        key is stored as the head (LMDB's key) and the rest (its duplicate value)."""
        self.by_start: dict[bytes, tuple[tuple[bytes, Any], ...]] = {}
        """The first two bytes of a prefix -> ``(prefix, database)`` starting so (every prefix
        of ``DATABASES`` has at least two bytes)."""
        grouped: dict[bytes, list[tuple[bytes, Any]]] = {}
        for prefix, db in sorted(dbs.items()):
            grouped.setdefault(prefix[:2], []).append((prefix, db))
        self.by_start = {k: tuple(v) for k, v in grouped.items()}
        self.put_routes: dict[bytes, tuple[tuple[bytes, Any, int], ...]] = {
            k: tuple((p, db, self.dup.get(db, 0)) for p, db in v) for k, v in grouped.items()
        }
        """``by_start`` with each database's head length of duplicates (0: not of them)."""
        self.names = tuple(sorted(dbs))
        self.pairs_plans: dict[bytes, tuple[Any, bytes] | None] = {}
        self.dup_plans: dict[bytes, tuple[Any, int] | None] = {}
        """``_LmdbTxn.dup_cursor``'s routing by prefix, kept (at most ``_DUP_PLANS_KEPT``): the
        database of duplicates and its head length, or None."""
        """``_LmdbTxn.pairs``'s routing by prefix, kept (the routes never change): the
        database and the prefix's end for one walk, or None to ``scan``."""
        self.ranges = tuple((p, prefix_end(p), dbs[p]) for p in self.names)
        """Each named database's keys as a range ``[prefix, prefix_end)``, in key order (no
        prefix of ``DATABASES`` starts another, so the ranges do not overlap)."""
        self.whole: dict[bytes, Any] = {p: db for p, db in dbs.items() if p not in DUP_DATABASES}
        """A keyspace prefix -> its named database, which holds its keys and nothing else (not
        of duplicates: their keys are split)."""
        self.longest = max(map(len, dbs), default=0)
        """A prefix longer than this lies in one database (``spanned``'s quick answer)."""
        self.memories_in_main = self.of(HEAD) is None and self.of(VERSION) is None
        """Heads and versions are in the main database: LMDB's own ``get`` reads them."""
        self.heads = self.of(HEAD) if self.of(VERSION) is None else None
        """The named database of the heads while the versions are in the main database (format
        19's layout; None otherwise): the C readers read heads there, versions in main."""
        self.ids = self.of(ID)
        """The named database of the rows (``id/``, format 21; None: the main database), kept:
        ``LmdbKV.point_call`` passes it on every get without routing the prefix again."""

    def dup_plan(self, prefix: bytes) -> tuple[Any, int] | None:
        """The database of duplicates holding ``prefix`` and its head length, or None.

        ``_LmdbTxn.dup_cursor``'s routing, once per prefix (a find's index prefix: every
        find; ``dup_plans``).
        """
        plans = self.dup_plans
        if prefix in plans:
            return plans[prefix]
        db = self.of(prefix)
        n = self.dup.get(db, 0) if db is not None else 0
        plan = (db, n) if n and len(prefix) >= n else None
        if len(plans) >= _DUP_PLANS_KEPT:
            plans.clear()
        plans[prefix] = plan
        return plan

    def raw_get(self, txn: lmdb.Transaction, routed: Callable[[bytes], Any] | None) -> Any:
        """The ``get`` of rows, heads and versions for the C readers (``_LmdbTxn.raw_get``).

        Format 21: ``(get, heads, ids)``, the rows (``id/``) in their named database too.
        """
        if self.memories_in_main:
            return txn.get
        if self.heads is not None:
            ids = self.ids
            return (txn.get, self.heads) if ids is None else (txn.get, self.heads, ids)
        return routed

    def of(self, key: bytes) -> Any:
        """The named database holding ``key``, or None: the main database."""
        candidates = self.by_start.get(key[:2])
        if candidates is not None:
            for prefix, db in candidates:
                if key.startswith(prefix):
                    return db
        return None

    def spanned(self, prefix: bytes) -> list[Any]:
        """The databases holding keys starting with ``prefix`` (None: main)."""
        db = self.of(prefix)
        if db is not None or len(prefix) > self.longest:
            return [db]
        return [None, *(self.dbs[p] for p in self.names if p.startswith(prefix))]


_NO_ROUTES: Final = _Routes({})

_FORMER_DATABASES: Final = (LEX_DOCNO,)
"""Keyspaces an older format kept in a named database and format 21 has no more (``lex/i/``,
formats 17-20): opened when the file holds one, so that its migration finds the records."""


_DB_RANGE: Final[list[tuple[bytes, bytes | None]]] = [
    (DATABASE_PREFIX, prefix_end(DATABASE_PREFIX))
]


def _open_routes(env: lmdb.Environment, path: Path, *, create: bool) -> _Routes:
    """Open the named databases ``env``'s file holds; with ``create``, make every one first.

    ``create`` is for a new, empty store (the caller checked): its keyspaces start in their
    named databases. A store written before format 17 holds none and is left as it is (its
    migration, ``LmdbKV.split_keyspaces``, makes them). LMDB finds a database's record in the
    main tree: the pages on the way there are checked first (``check_snapshot``), and when they
    are damaged no named database is opened (the page check of the open, or verify's, reports
    them: LMDB would abort the process on some). Opening one takes LMDB's writer lock once
    (py-lmdb opens it in a write transaction of its own on a writable environment).
    """
    dbs: dict[bytes, Any] = {}
    if create:
        with env.begin(write=True) as txn:
            for prefix in DATABASES:
                dbs[prefix] = _open_db(env, prefix, txn=txn, create=True)
        return _Routes(dbs)
    for _ in range(20):
        with env.begin() as txn:
            try:
                damage = check_snapshot(path, int(txn.id()), _DB_RANGE, lookup=True)
            except OSError:
                return _NO_ROUTES
            if damage:
                return _Routes({}, damage)
            if damage is None:  # two commits since the snapshot began: take a newer one
                continue
            names = [
                p
                for p in (*DATABASES, *_FORMER_DATABASES)
                if txn.get(DATABASE_PREFIX + p) is not None
            ]
        for prefix in names:
            dbs[prefix] = _open_db(env, prefix, create=False)
        return _Routes(dbs)
    raise CortexError("the store changes too fast to open its databases; retry")


def _open_db(
    env: lmdb.Environment, prefix: bytes, *, txn: lmdb.Transaction | None = None, create: bool
) -> Any:
    """The named database of the keyspace ``prefix``; of duplicates for ``DUP_DATABASES``."""
    dup = prefix in DUP_DATABASES
    return env.open_db(DATABASE_PREFIX + prefix, txn=txn, create=create, dupsort=dup, dupfixed=dup)


def _meets_records(prefix: bytes) -> bool:
    """Whether keys under ``prefix`` may be LMDB's records of the named databases.

    Those are keys of the main database under ``DATABASE_PREFIX``; a scan of the whole store
    (or of a prefix of theirs) would otherwise meet them.
    """
    return DATABASE_PREFIX.startswith(prefix) or prefix.startswith(DATABASE_PREFIX)


def _main_only(keys: Iterator[Any], prefix: bytes, at: Callable[[Any], bytes]) -> Iterator[Any]:
    """``keys`` of the main database without LMDB's records of the named databases."""
    if not _meets_records(prefix):
        return keys
    return (x for x in keys if not at(x).startswith(DATABASE_PREFIX))


def _first_key(pair: tuple[bytes, bytes]) -> bytes:
    return pair[0]


def _same(key: bytes) -> bytes:
    return key


class _LmdbTxn:
    """Wraps an lmdb.Transaction; copies every buffer to ``bytes`` at the boundary.

    Each key is read and written in the database its keyspace lives in (``_Routes``); a scan
    whose prefix spans several databases merges theirs in key order.
    """

    __slots__ = (
        "_cur",
        "_curs",
        "_routes",
        "_shared",
        "_txn",
        "damage",
        "grouped",
        "raw_get",
        "share",
    )

    def __init__(
        self,
        txn: lmdb.Transaction,
        routes: _Routes = _NO_ROUTES,
        grouped: bool = False,
        shared: _Shared | None = None,
    ) -> None:
        self._txn = txn
        self._routes = routes
        self._shared = shared
        """The environment's record, for a top-level write transaction (``split_keyspaces``)."""
        self.raw_get: Any = routes.raw_get(txn, self.get)
        """A ``get`` of heads and versions for a caller in C that takes bytes only and declines
        anything else (``cortex._speedups.read_current``): LMDB's own (no Python frame) while
        they are in the main database; the pair ``(LMDB's get, the heads' database)`` while
        the heads are in a named database of their own and the versions in main (format 19:
        the C reader passes the database with a head's key); else the routing ``get``."""
        self._cur: lmdb.Cursor | None = None
        self._curs: dict[Any, lmdb.Cursor] = {}
        self.damage: list[PageProblem] = []
        """Structural problems of the snapshot's pages (``LmdbKV.read_checked`` only)."""
        self.grouped = grouped
        """A write of a group commit run after another write of the group (``LmdbKV.write``)."""
        self.share: Any = None
        """The state of the ``GroupShare`` its write function offers, in a group commit."""

    def _cursor_of(self, prefix: bytes) -> lmdb.Cursor | None:
        """The transaction's cursor of the one database holding ``prefix``'s keys.

        None when they span several: the caller merges.
        """
        routes = self._routes
        if not routes.dbs:
            cur = self._cur
            if cur is None:
                cur = self._cur = self._txn.cursor()
            return cur
        dbs = routes.spanned(prefix)
        if len(dbs) > 1 or (dbs[0] is None and _meets_records(prefix)):
            return None
        db = dbs[0]
        if db is None:
            cur = self._cur
            if cur is None:
                cur = self._cur = self._txn.cursor()
            return cur
        if db in routes.dup:  # a database of duplicates: through the scans (composite keys)
            return None
        cur = self._curs.get(db)
        if cur is None:
            cur = self._curs[db] = self._txn.cursor(db=db)
        return cur

    def seek(self, prefix: bytes, start: bytes, *, reverse: bool = False) -> bytes | None:
        cur = self._cursor_of(prefix)
        if cur is None:
            got = self.dup_cursor(prefix)
            if got is not None:
                # a database of duplicates (the index joins' seeks): its cursor, kept
                dcur, n = got
                if not self._position(dcur, prefix, start, reverse, n):
                    return None
                k = bytes(dcur.key()) + bytes(dcur.value())
                return k if k.startswith(prefix) else None
            return next(self.keys(prefix, start=start, reverse=reverse), None)
        if not self._position(cur, prefix, start, reverse):
            return None
        k = bytes(cur.key())
        return k if k.startswith(prefix) else None

    def cursor(self) -> lmdb.Cursor:
        """The transaction's cursor of the main database (set_range, key, value, next, prev, last).

        For the C accelerator's batch walks (``cortex.index.postings.apply_many``) over
        keyspaces of the main database (none of ``DATABASES``); an engine without such a
        cursor has no ``cursor`` method.
        """
        cur = self._cur
        if cur is None:
            cur = self._cur = self._txn.cursor()
        return cur

    def around(self, prefix: bytes, key: bytes) -> tuple[bytes | None, bytes | None, bytes | None]:
        cur = self._cursor_of(prefix)
        if cur is None:  # several databases: through the merged scans
            at = next(self.scan(prefix, start=key, reverse=True), None)
            after = next(self.keys(prefix, start=key + b"\x00"), None)
            return (at[0], at[1], after) if at is not None else (None, None, after)
        k0 = v0 = k1 = None
        if cur.set_range(key):
            if cur.key() == key:
                k0, v0 = key, bytes(cur.value())
                if cur.next():
                    k1 = bytes(cur.key())
            else:
                k1 = bytes(cur.key())
                if cur.prev():
                    k0, v0 = bytes(cur.key()), bytes(cur.value())
        elif cur.last():
            k0, v0 = bytes(cur.key()), bytes(cur.value())
        if k0 is not None and not k0.startswith(prefix):
            k0 = v0 = None
        if k1 is not None and not k1.startswith(prefix):
            k1 = None
        return k0, v0, k1

    def get(self, key: bytes) -> bytes | None:
        routes = self._routes
        db = routes.of(key)
        if db is not None and db in routes.dup:
            n = routes.dup[db]
            if len(key) <= n:
                return None
            with self._txn.cursor(db=db) as cur:
                return b"" if cur.set_key_dup(key[:n], key[n:]) else None
        v = self._txn.get(key, None, db)
        return None if v is None else bytes(v)

    def dup_cursor(self, prefix: bytes) -> tuple[lmdb.Cursor, int] | None:
        """A cursor of the database of duplicates holding ``prefix``, and its head length.

        For the C accelerator's newest-first index scans (``cortex._speedups.newest_ids`` with
        its head argument): ``prefix`` begins with a whole head of a keyspace of
        ``DUP_DATABASES`` (format 20), whose duplicates are the rest of each key. None
        otherwise (the keyspace is in the main database: ``cursor``). LMDB's only.
        """
        plan = self._routes.dup_plan(prefix)
        if plan is None:
            return None
        db, n = plan
        cur = self._curs.get(db)
        if cur is None:
            cur = self._curs[db] = self._txn.cursor(db=db)
        return cur, n

    def last(self, prefix: bytes) -> tuple[bytes, bytes] | None:
        """The last pair under ``prefix`` (``next(scan(prefix, reverse=True), None)``).

        One positioning of the transaction's cursor, without a generator: a write's journal
        tail (``cortex.engine.journal.JournalWriter``). LMDB's only; a caller falls back to
        ``scan`` on an engine without it.
        """
        db = self._routes.whole.get(prefix)
        if db is not None:  # the database holds this prefix's keys only: its last is the one
            cur = self._curs.get(db)
            if cur is None:
                cur = self._curs[db] = self._txn.cursor(db=db)
            if not cur.last():
                return None
        else:
            cur = self._cursor_of(prefix)
            if cur is None:
                return next(self.scan(prefix, reverse=True), None)
            if not self._position(cur, prefix, None, True):
                return None
        k = bytes(cur.key())
        return (k, bytes(cur.value())) if k.startswith(prefix) else None

    def scan(
        self, prefix: bytes, *, start: bytes | None = None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        return self._routed(self._scan, _first_key, prefix, start, reverse)

    def pairs(self, prefix: bytes) -> tuple[tuple[bytes, bytes], ...]:
        """Every pair under ``prefix`` in key order (``tuple(scan(prefix))``).

        One walk of LMDB's iterator, bounded by the prefix's end in C (no Python frame a
        pair): a write's posting segments (``cortex.index.segments.overlay``). LMDB's only; a
        caller falls back to ``scan`` on an engine without it.
        """
        plans = self._routes.pairs_plans
        if prefix in plans:
            plan = plans[prefix]
        else:  # routed once per prefix (a write's segments: every write)
            dbs = self._routes.spanned(prefix)
            end = prefix_end(prefix)
            plan = plans[prefix] = (
                None
                if len(dbs) > 1
                or end is None
                or (dbs[0] is None and _meets_records(prefix))
                or dbs[0] in self._routes.dup
                else (dbs[0], end)
            )
        if plan is None:
            return tuple(self.scan(prefix))
        db, end = plan
        with self._txn.cursor(db=db) as cur:
            if not cur.set_range(prefix):
                return ()
            # a pair sorts below ``(end,)`` exactly when its key is below ``end``
            pairs = cast(Iterator[tuple[bytes, bytes]], cur.iternext())  # bytes: copies
            return tuple(takewhile((end,).__gt__, pairs))

    def keys(
        self, prefix: bytes, *, start: bytes | None = None, reverse: bool = False
    ) -> Iterator[bytes]:
        return self._routed(self._keys, _same, prefix, start, reverse)

    def _routed(
        self,
        part: Callable[[Any, bytes, bytes | None, bool], Iterator[T]],
        key_of: Callable[[T], bytes],
        prefix: bytes,
        start: bytes | None,
        reverse: bool,
    ) -> Iterator[T]:
        """``part`` (``_scan`` or ``_keys``) of each database ``prefix`` spans, merged."""
        routes = self._routes
        if not routes.dbs:
            return part(None, prefix, start, reverse)
        dbs = routes.spanned(prefix)
        if len(dbs) == 1 and (dbs[0] is not None or not _meets_records(prefix)):
            return part(dbs[0], prefix, start, reverse)
        # each keyspace lies whole in one database: the merge interleaves ranges, not keys
        parts = [
            part(db, prefix, start, reverse)
            if db is not None
            else _main_only(part(None, prefix, start, reverse), prefix, key_of)
            for db in dbs
        ]
        return heapq.merge(*parts, key=None if key_of is _same else key_of, reverse=reverse)

    def _scan(
        self, db: Any, prefix: bytes, start: bytes | None, reverse: bool
    ) -> Iterator[tuple[bytes, bytes]]:
        if db is not None and db in self._routes.dup:
            for k in self._dup_keys(db, prefix, start, reverse):
                yield k, b""
            return
        with self._txn.cursor(db=db) as cur:
            if not self._position(cur, prefix, start, reverse):
                return
            # the iterators yield the current pair first; they run in C, and without
            # ``buffers=True`` they yield bytes (copies), so nothing outlives the transaction
            pairs = cast(
                Iterator[tuple[bytes, bytes]], cur.iterprev() if reverse else cur.iternext()
            )
            for k, v in pairs:
                if not k.startswith(prefix):
                    return
                yield k, v

    def _keys(self, db: Any, prefix: bytes, start: bytes | None, reverse: bool) -> Iterator[bytes]:
        if db is not None and db in self._routes.dup:
            yield from self._dup_keys(db, prefix, start, reverse)
            return
        with self._txn.cursor(db=db) as cur:
            if not self._position(cur, prefix, start, reverse):
                return
            keys = cast(
                Iterator[bytes],
                cur.iterprev(values=False) if reverse else cur.iternext(values=False),
            )
            for k in keys:
                if not k.startswith(prefix):
                    return
                yield k

    def _dup_keys(
        self, db: Any, prefix: bytes, start: bytes | None, reverse: bool
    ) -> Iterator[bytes]:
        """``_keys`` of a database of duplicates: each key its head and duplicate joined."""
        n = self._routes.dup[db]
        with self._txn.cursor(db=db) as cur:
            if not self._position(cur, prefix, start, reverse, n):
                return
            pairs = cast(
                Iterator[tuple[bytes, bytes]], cur.iterprev() if reverse else cur.iternext()
            )
            if len(prefix) == n:  # one head: its duplicates, then stop
                for k, v in pairs:
                    if k != prefix:
                        return
                    yield k + v
                return
            for k, v in pairs:
                key = k + v
                if not key.startswith(prefix):
                    return
                yield key

    @staticmethod
    def _position(
        cur: lmdb.Cursor, prefix: bytes, start: bytes | None, reverse: bool, n: int = 0
    ) -> bool:
        """Put ``cur`` on a scan's first key (False: the scan is empty).

        ``n`` is a database of duplicates' head length (its joined keys are scanned:
        ``_dup_seek``), 0 for any other database.
        """

        def seek(key: bytes) -> bool:
            return _dup_seek(cur, n, key) if n else bool(cur.set_range(key))

        if not reverse:
            return seek(start if start is not None and start > prefix else prefix)
        # reverse: land on the last key <= bound
        bound = start
        if bound is not None and not bound.startswith(prefix):
            # a start outside the prefix lies wholly before or after its keys; landing on the
            # last key <= start would stop at a key of some other prefix in between
            if bound < prefix:
                return False
            bound = None
        if bound is None:
            end = prefix_end(prefix) if prefix.strip(b"\xff") else None
            if end is None or not seek(end):
                return bool(cur.last())
            return bool(cur.prev())
        if seek(bound):
            if (bytes(cur.key()) + bytes(cur.value()) if n else cur.key()) == bound:
                return True
            return bool(cur.prev())
        return bool(cur.last())

    def put(self, key: bytes, value: bytes, *, overwrite: bool = True) -> bool:
        routes = self._routes
        db = routes.of(key)
        if db is not None and db in routes.dup:
            n = _dup_split(routes.dup[db], key, value)
            txn = self._txn
            # last in its head's range: appended (MDB_APPENDDUP), else a plain put; a key
            # stored already is kept (its value is empty either way)
            added = bool(txn.put(key[:n], key[n:], append=True, db=db)) or bool(
                txn.put(key[:n], key[n:], dupdata=False, db=db)
            )
            return added or overwrite
        return bool(self._txn.put(key, value, overwrite=overwrite, db=db))

    def delete(self, key: bytes) -> bool:
        routes = self._routes
        db = routes.of(key)
        if db is not None and db in routes.dup:
            n = routes.dup[db]
            if len(key) <= n:
                return False
            return bool(self._txn.delete(key[:n], key[n:], db=db))
        return bool(self._txn.delete(key, db=db))

    def _split(
        self, pairs: list[tuple[bytes, bytes]]
    ) -> list[tuple[Any, list[tuple[bytes, bytes]]]]:
        """``pairs`` by the database holding each key, each part in key order (stably).

        The keys of a named database form one range of the sorted keys: two searches find it,
        instead of a route per key (``_Routes.of``). Sorted, each put of a part lands beside the
        last (LMDB's cursor stays on its page); pairs of one key keep their order, the last put
        wins as before.
        """
        keys = [pair[0] for pair in pairs]
        if not all(map(le, keys, islice(keys, 1, None))):
            pairs = pairs.copy()  # the caller's list is left as it is
            sort_by_key(pairs)
            keys = [pair[0] for pair in pairs]
        parts: list[tuple[Any, list[tuple[bytes, bytes]]]] = []
        main: list[tuple[bytes, bytes]] = []
        at, n = 0, len(keys)
        for prefix, end, db in self._routes.ranges:
            lo = bisect_left(keys, prefix, at)
            hi = bisect_left(keys, end, lo)
            if lo > at:
                main += pairs[at:lo]
            if hi > lo:
                parts.append((db, pairs[lo:hi]))
            at = hi
        if at == 0:
            main = pairs
        elif at < n:
            main += pairs[at:]
        if main:
            parts.append((None, main))
        return parts

    def put_many(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        # one call into the engine per database; in key order LMDB's inserts stay local
        pairs = items if isinstance(items, list) else list(items)
        if not self._routes.dbs:
            self._put_many(None, pairs)
            return
        if len(pairs) <= _FEW_PUTS:
            self._put_few(pairs)
            return
        for db, part in self._split(pairs):
            self._put_many(db, part)

    def _put_few(self, pairs: list[tuple[bytes, bytes]]) -> None:
        """``put_many`` of a few pairs (a single write's): each routed and put on its own.

        The same puts as ``_put_many`` part by part, in key order (stably: the last put of a
        key wins), each appended when it sorts past every key of its database (at the end of
        its head's range, in a database of duplicates, where a key stored already is kept),
        else a plain put; without a split into lists, a cursor or a frame a database.
        """
        if not all(map(le, map(_first_key, pairs), map(_first_key, islice(pairs, 1, None)))):
            pairs = pairs.copy()
            sort_by_key(pairs)
        by_start, put = self._routes.put_routes, self._txn.put
        for key, value in pairs:
            db, n = None, 0  # ``_Routes.of``, inline, and the head length of duplicates
            for prefix, d, m in by_start.get(key[:2], ()):
                if key.startswith(prefix):
                    db, n = d, m
                    break
            if n:
                _dup_split(n, key, value)
                head, rest = key[:n], key[n:]
                if not put(head, rest, append=True, db=db):
                    put(head, rest, dupdata=False, db=db)
            elif not put(key, value, append=True, db=db):
                put(key, value, db=db)

    def _put_many(self, db: Any, pairs: list[tuple[bytes, bytes]]) -> None:
        if db is not None and db in self._routes.dup:
            self._add_dups(db, pairs)
            return
        if len(pairs) == 1:  # a single write's part: appended when past every key (LMDB
            # refuses MDB_APPEND otherwise, changing nothing), else a plain put, as below
            key, value = pairs[0]
            txn = self._txn
            if not txn.put(key, value, append=True, db=db):
                txn.put(key, value, db=db)
            return
        with self._txn.cursor(db=db) as cur:
            at = _append_from(cur, pairs)
            if at:
                cur.putmulti(pairs[:at] if at < len(pairs) else pairs)
            if at < len(pairs):
                # the keys that sort after every stored key are appended (``_append_from``),
                # unless one put just before went past the first of them
                append = not cur.last() or bytes(cur.key()) < pairs[at][0]
                consumed, added = cur.putmulti(pairs[at:], append=append)
                if append and consumed != added:  # LMDB refused a key out of order: never
                    # drop it silently (the write fails whole and stores nothing)
                    raise CortexError(
                        "internal error: an appended put was refused (a key out of order); "
                        "nothing was written"
                    )

    def split_keyspaces(
        self, tick: Callable[[int], None], prefixes: tuple[bytes, ...] = DATABASES
    ) -> int:
        """Move the keyspaces ``prefixes`` (of ``DATABASES``) into their named databases.

        For the migrations ``0016-keyspace-databases`` (format 17's keyspaces) and
        ``0018-head-database`` (``m/``), in their write transaction: each named database is
        made, then the keyspace's records are moved from the main database one at a time with
        two cursors (appended in key order to the empty named database, deleted from the main
        one), so no more than LMDB's dirty pages are held, and the rest of the transaction
        reads and writes the new layout. The named databases the store holds already stay as
        they are. The routes of the environment change when the transaction commits. LMDB's
        only. Returns how many records moved.

        Raises:
            CortexError: one of ``prefixes`` is in a named database already (the store is not
                of an older format), is not of ``DATABASES``, or the transaction is one of a
                group commit's (it then runs alone).
        """
        shared = self._shared
        if shared is None:
            raise _Alone("split_keyspaces runs in a transaction of its own")
        for prefix in prefixes:
            if prefix not in DATABASES and prefix not in _FORMER_DATABASES:
                raise CortexError(f"internal error: {prefix.decode()} is not of DATABASES")
            if prefix in self._routes.dbs:
                raise CortexError(
                    f"the store's keyspace {prefix.decode()} is in its named database "
                    "already: nothing to move"
                )
        env = shared.env
        txn = self._txn
        dbs: dict[bytes, Any] = dict(self._routes.dbs)
        moved = 0
        for prefix in prefixes:
            name = DATABASE_PREFIX + prefix
            if txn.get(name) is not None:
                raise CortexError(
                    f"the store holds a key {show_key(name)} where a named database would be: "
                    "it is damaged or not a cortex store"
                )
            db = dbs[prefix] = _open_db(env, prefix, txn=txn, create=True)
            n = DUP_DATABASES.get(prefix, 0)
            with txn.cursor() as src, txn.cursor(db=db) as dst:
                found = src.set_range(prefix)
                while found:
                    key: bytes = src.key()  # type: ignore[assignment]
                    if not key.startswith(prefix):
                        break
                    if n:  # a database of duplicates: the head, and the rest as its duplicate
                        value: bytes = src.value()  # type: ignore[assignment]
                        if value or len(key) <= n:
                            raise CortexError(
                                f"the store's index entry {show_key(key)} holds a value or a "
                                "key of another length: it is damaged (run cortex verify); "
                                "nothing was written"
                            )
                        put = dst.put(key[:n], key[n:], append=True)
                    else:
                        put = dst.put(key, src.value(), append=True)
                    if not put:
                        raise CortexError(  # never: the keys come in order, once each
                            f"internal error: {show_key(key)} could not be moved; nothing "
                            "was written"
                        )
                    found = src.delete() and bool(src.key())
                    moved += 1
                    tick(moved)
        routes = _Routes(dbs)
        self._routes = routes
        self._cur = None
        self._curs = {}
        self.raw_get = routes.raw_get(txn, self.get)
        shared.pending = routes
        return moved

    def drop_keyspace(self, prefix: bytes) -> int:
        """Delete every record under ``prefix``, and its named database if it has one.

        For the migration ``0020-memory-rows`` (``lex/i/`` goes), in its write transaction:
        the named database is emptied and deleted (LMDB's ``mdb_drop``), so the file holds no
        record of it; the routes change when the transaction commits. Returns how many records
        went.

        Raises:
            CortexError: the transaction is one of a group commit's (it then runs alone).
        """
        shared = self._shared
        if shared is None:
            raise _Alone("drop_keyspace runs in a transaction of its own")
        n = sum(1 for _ in self.keys(prefix))
        db = self._routes.dbs.get(prefix)
        if db is None:
            for key in list(self.keys(prefix)):
                self.delete(key)
            return n
        self._txn.drop(db, delete=True)
        dbs = {p: d for p, d in self._routes.dbs.items() if p != prefix}
        routes = _Routes(dbs)
        self._routes = routes
        self._cur = None
        self._curs = {}
        self.raw_get = routes.raw_get(self._txn, self.get)
        shared.pending = routes
        return n

    def add_many(self, items: Iterable[tuple[bytes, bytes]]) -> int:
        if not self._routes.dbs:
            with self._txn.cursor() as cur:
                return int(cur.putmulti(items, overwrite=False)[1])
        added = 0
        dup = self._routes.dup
        for db, part in self._split(items if isinstance(items, list) else list(items)):
            if db is not None and db in dup:
                added += self._add_dups(db, part)
                continue
            with self._txn.cursor(db=db) as cur:
                added += int(cur.putmulti(part, overwrite=False)[1])
        return added

    def _add_dups(self, db: Any, pairs: list[tuple[bytes, bytes]]) -> int:
        """Put ``pairs`` (in key order) into a database of duplicates; how many were new.

        Each is appended at the end of its head's range (MDB_APPENDDUP: a full page is left
        full) when it sorts after every key there; the rest, refused so (a caller-chosen id, an
        import), are put plainly; a key stored already is kept as it is.
        """
        n = self._routes.dup[db]
        split = []
        for k, v in pairs:
            _dup_split(n, k, v)
            split.append((k[:n], k[n:]))
        with self._txn.cursor(db=db) as cur:
            _, added = cur.putmulti(split, dupdata=False, append=True)
            if added == len(split):
                return int(added)
            # the refused ones: put plainly (those appended, or stored before, are refused)
            return int(added) + int(cur.putmulti(split, dupdata=False)[1])


def _dup_split(n: int, key: bytes, value: bytes) -> int:
    """``n``, where ``key`` of a database of duplicates splits into its head and duplicate.

    Raises:
        CortexError: ``value`` is not empty, or ``key`` is not longer than its head: the
            keyspace's entries hold keys only (an engine invariant; nothing was written).
    """
    if value or len(key) <= n:
        raise CortexError(
            f"internal error: {show_key(key)} is of a keyspace of index entries (keys of more "
            f"than {n} bytes and empty values); this one has a {len(key)}-byte key and a "
            f"{len(value)}-byte value; nothing was written"
        )
    return n


def _dup_seek(cur: lmdb.Cursor, n: int, key: bytes) -> bool:
    """Position ``cur`` on the first joined key >= ``key``; False when there is none.

    ``cur`` is of a database of duplicates whose heads are ``n`` bytes long.
    """
    if len(key) <= n:
        return bool(cur.set_range(key))
    head = key[:n]
    if cur.set_range_dup(head, key[n:]):
        return True
    if not cur.set_range(head):
        return False
    if cur.key() == head:
        return bool(cur.next_nodup())
    return True


def _append_from(cur: lmdb.Cursor, pairs: list[tuple[bytes, bytes]]) -> int:
    """Where the run of ``pairs`` starts whose keys ascend past every key of the database.

    Those are put with LMDB's MDB_APPEND: a page that fills is then left full and the next key
    starts a new page. A plain put splits a full last page at its last node, so a page that
    holds two values of 1,600 bytes (a ``vec/`` record of a 384-d float32 vector) keeps one
    and the file grows a page per vector; appended, it keeps two. Only the keyspace that
    sorts last gains (``vec/``, ids ascending as they are made); the bytes stored are the same.
    """
    at = len(pairs)
    if not at or not cur.last():
        return at  # an empty database: every put is plain (the first page is not full)
    last = bytes(cur.key())
    nxt = None
    while at:
        key = pairs[at - 1][0]
        if key <= last or (nxt is not None and key >= nxt):
            break
        nxt = key
        at -= 1
    return at


_FEW_PUTS: Final = 24
"""``put_many`` of at most this many pairs puts each on its own (``_put_few``): a single
write's ten or so records land in as many databases, where a cursor and a list a database cost
more than the puts."""

_epoch_end: Final = functools.lru_cache(maxsize=4)(prefix_end)
"""``prefix_end`` of an ``epoch_prefix`` (read at every write), kept."""

_GROUP_MAX: Final = 64
"""Writes committed together at most (``LmdbKV.write``)."""

_GROUP_WAIT: Final = 0.001
"""Seconds a group's leader waits at most for the writers of the groups before it to queue
again (``_Commits.gather``), and no longer than the last commit took."""


class _Alone(CortexError):
    """Raised inside a grouped write that must run in a transaction of its own.

    ``LmdbKV.write`` catches it and runs the write again alone; it never reaches a caller.
    """


class GroupShare(Protocol):
    """State the writes of one group commit share, made and finished in the group's transaction.

    A write function offering one (``Sharing``) finds the state as its transaction's
    ``share`` when it runs in a group (``LmdbKV.write``): the leader makes it (``start``) in
    the group's transaction before the first such write's child transaction, and finishes it
    there (``finish``) after the last of consecutive such writes, before any other write of
    the group runs and before the commit. Alone (or on an engine without groups) ``share`` is
    absent and the function does the work itself. If a sharing write raises, or ``finish``
    does, the group's transaction is abandoned and the group runs again without sharing, so
    each write's outcome stays its own.
    """

    def start(self, txn: WriteTxn) -> Any: ...

    def finish(self, state: Any) -> None: ...


class Sharing(Generic[T]):
    """A write function whose runs in one group commit share a ``GroupShare``'s state."""

    __slots__ = ("fn", "share")

    def __init__(self, fn: Callable[[WriteTxn], T], share: GroupShare) -> None:
        self.fn = fn
        self.share = share

    def __call__(self, txn: WriteTxn) -> T:
        return self.fn(txn)


class _Redo(Exception):
    """A sharing write of a group failed: the group runs again without sharing.

    Its transaction is abandoned first (``GroupShare``); it never reaches a caller.
    """


def _not_sharing(m: _Member) -> bool:
    return getattr(m.fn, "share", None) is None


def _finish_share(pending: tuple[GroupShare, Any]) -> None:
    """Finish a ``GroupShare``'s state in the group's transaction; a failure redoes the group."""
    try:
        pending[0].finish(pending[1])
    except lmdb.MapFullError:
        raise
    except Exception as exc:
        raise _Redo from exc


class _Member:
    """One write waiting in the commit queue: its function, its caller's context, its outcome."""

    __slots__ = (
        "ctx",
        "done",
        "durable",
        "error",
        "fn",
        "lead",
        "result",
        "taken",
        "thread",
        "wake",
        "withdrawing",
    )

    def __init__(self, fn: Callable[[WriteTxn], Any], ctx: contextvars.Context, durable: bool):
        self.thread = get_ident()
        self.fn = fn
        self.ctx = ctx
        self.durable = durable
        """Its handle asked for durable commits (``metasync``): the leader flushes."""
        self.taken = False
        """A leader took it into its group."""
        self.lead = False
        """The leadership was handed to it while it waited (``_Commits.hand_over``)."""
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None
        self.wake = threading.Lock()
        """Held from the start; released (``signal``) to end its wait: when it is handed the
        leadership, when its group's outcome is known (``done``), or, interrupted
        (``withdrawing``), when it is put back in the queue unwritten."""
        self.wake.acquire()
        self.withdrawing = False
        """Interrupted while it waits: it re-checks its state at each wake (``_withdraw``)."""

    def signal(self) -> None:
        """End its wait (with ``_Commits.lock`` held).

        A wake not yet taken is not repeated: the waiter reads its state under the lock.
        """
        if self.wake.locked():
            self.wake.release()


class _Commits:
    """The commit queue of one environment: the writes waiting for the current group's commit.

    Each waiting writer sleeps on a lock of its own (``_Member.wake``), released by the thread
    that decides its fate: a leader handing it the leadership, or the leader of its group once
    the group's outcome is known (or, for an interrupted writer, putting it back unwritten).
    So a group's end wakes its own writers and the next leader, not every writer waiting.

    A leader first waits, briefly, for the writers of the groups before it (``gather``): writers
    that commit together come back together, and a leader that starts while they are still on
    their way (in the last group's flush, or preparing their next write) would commit a group
    of half of them, the other half the next, each paying a commit and a flush.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.queue: list[_Member] = []
        self.leading = False
        """A leader holds (or is waiting for) LMDB's writer lock for its group."""
        self.arrived = threading.Condition(self.lock)
        """Notified, while a leader gathers, when a writer queues or a group's writers are done."""
        self.gathering = False
        self.flushing = 0
        """Writes of groups of more than one that are committed, their group not yet done."""
        self.back: dict[int, float] = {}
        """The threads of those groups once done (``perf_counter`` then), until each writes
        again or ``_GROUP_WAIT`` has passed: the writers a leader waits for."""
        self.commit_time = 0.0
        """How long the last group's commit took (seconds)."""
        self.trace: list[tuple[float, float, float, float, int]] | None = None
        """When a list (a benchmark's: ``tools/bench_concurrent.py --trace``), each group's
        leader appends its times (``perf_counter``): it began to lead, its gathering ended, its
        commit began, its commit ended; and its size."""

    def gather(self) -> None:
        """Wait until the writers of the groups before have queued again (``lock`` held).

        Only writers of groups of more than one are waited for (concurrent writers), each for
        ``_GROUP_WAIT`` at most after its group was done, and the wait ends after
        ``min(_GROUP_WAIT, commit_time)``: no longer than the commit it may save. Writers that
        did not come back by then are not waited for again.
        """
        if not (self.flushing or self.back):
            return
        now = time.perf_counter()
        end = now + min(_GROUP_WAIT, self.commit_time)
        back = self.back
        self.gathering = True
        try:
            while True:
                for t in [t for t, at in back.items() if now - at > _GROUP_WAIT]:
                    del back[t]
                if not (self.flushing or back) or len(self.queue) >= _GROUP_MAX - 1:
                    return
                if now >= end:
                    back.clear()
                    return
                self.arrived.wait(end - now)
                now = time.perf_counter()
        finally:
            self.gathering = False

    def hand_over(self) -> None:
        """Give the leadership to the first queued writer, or end it if none waits.

        With ``lock`` held.
        """
        for i, m in enumerate(self.queue):
            if not m.withdrawing:  # an interrupted writer leaves the queue (``_withdraw``)
                del self.queue[i]
                m.taken = m.lead = True
                m.signal()
                return
        self.leading = False

    def finish(self, members: list[_Member], leader: _Member | None, flushed: bool) -> None:
        """Their outcome is known: each returns (``lock`` held; ``leader`` ends no wait).

        ``flushed``: they are a group of more than one, committed (counted in ``flushing``).
        """
        if flushed:
            self.flushing -= len(members)
            now = time.perf_counter()
            for m in members:
                self.back[m.thread] = now
            if self.gathering:
                self.arrived.notify()
        for m in members:
            m.done = True
            if m is not leader:
                m.signal()


class _Gate:
    """Counts this process's live transactions so that a remap of the map waits for none.

    LMDB's ``mdb_env_set_mapsize`` unmaps and remaps the file: any transaction of this process
    still running (another thread's reader, or a writer that took the lock meanwhile) would then
    read unmapped memory. py-lmdb leaves that check to the caller.

    ``_mine`` maps each thread that holds transactions to how many (no entry: none), so a
    transaction enters and leaves without a lock: with the GIL, a dict's item assignment and
    deletion are atomic and every thread sees them in one order, and a thread registers before
    it reads ``_remapping`` while ``exclusive`` sets ``_remapping`` before it reads ``_mine``:
    either the thread sees the remap and withdraws (``admit``), or the remap sees the thread
    and waits for it (``wake``). Without the GIL (a free-threaded build) every check takes the
    lock (``_GIL``).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()  # a plain lock: its with-statement costs no Python call
        self._cond = threading.Condition(self._lock)
        self._remapping = False
        self._mine: dict[int, int] = {}

    def held(self) -> int:
        """How many transactions of this gate the calling thread holds."""
        return self._mine.get(get_ident(), 0)

    def enter(self) -> None:
        me = get_ident()
        mine = self._mine
        mine[me] = mine.get(me, 0) + 1
        if self._remapping or not _GIL:
            self.admit(me)

    def admit(self, me: int) -> None:
        """After thread ``me`` registered: wait out a remap under way (``enter``'s slow path)."""
        mine = self._mine
        with self._lock:
            if not self._remapping or mine[me] > 1:
                return  # none, or it waits for this thread's earlier transaction anyway
            del mine[me]  # withdraw while the remap runs
            if not mine:
                self._cond.notify_all()
            try:
                while self._remapping:
                    self._cond.wait()
            finally:  # under the lock: no remap starts before the entry is back
                mine[me] = mine.get(me, 0) + 1

    def leave(self) -> None:
        me = get_ident()
        mine = self._mine
        n = mine[me] - 1
        if n:
            mine[me] = n
        else:
            del mine[me]
        if self._remapping or not _GIL:
            self.wake()

    def wake(self) -> None:
        """After a thread left: wake a remap waiting for the last transaction."""
        with self._lock:
            if self._remapping and not self._mine:
                self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        if self.held():
            raise CortexError(
                "the map must be resized while this thread holds a transaction of the same "
                "store; end the transaction first"
            )
        with self._cond:
            while self._remapping:
                self._cond.wait()
            self._remapping = True
            while self._mine:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._remapping = False
                self._cond.notify_all()


_NEXT_BYTE: Final = tuple(bytes((i + 1,)) for i in range(255))
"""``bytes((b + 1,))`` for every byte but 0xff: a prefix's end when its last byte is not 0xff."""


class _Read:
    """``LmdbKV.read()``: begins a read transaction on entry, ends it on exit."""

    __slots__ = ("_kv", "_txn")

    def __init__(self, kv: LmdbKV) -> None:
        self._kv = kv
        self._txn: lmdb.Transaction | None = None

    def __enter__(self) -> _LmdbTxn:
        kv = self._kv
        # ``_check_fork`` and ``_begin`` (``_Gate.enter``), inline where no remap is under way,
        # as ``LmdbKV.point_read`` does: every query begins here
        if kv._closed or _FORKS[0] != kv._forks:
            kv._check_fork()  # raises
        gate = kv._gate
        mine = gate._mine
        me = get_ident()
        mine[me] = mine.get(me, 0) + 1  # _Gate.enter, inline
        txn: lmdb.Transaction
        try:
            if gate._remapping or not _GIL:
                gate.admit(me)
            txn = kv._shared.env.begin()
        except lmdb.Error:  # a map another process grew, say: the general path adopts it
            gate.leave()
            txn = kv._begin(write=False)
        except BaseException:
            gate.leave()
            raise
        txn = kv._shared.mapped(txn)
        self._txn = txn
        return _LmdbTxn(txn, kv._shared.routes)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        txn, self._txn = self._txn, None
        try:
            if exc is not None and isinstance(exc, lmdb.Error):  # a damaged page met, say
                raise _wrap(exc, self._kv.path) from exc
        finally:
            if txn is not None:
                txn.abort()
                self._kv._gate.leave()


class _CheckedRead(_Read):
    """``LmdbKV.read_checked()``: a read snapshot whose pages were checked before LMDB walks them.

    The transaction it yields carries ``damage``: the structural problems of the snapshot's
    pages (``cortex.storage.pages``), empty when LMDB may walk them. A caller that finds damage
    must not walk the damaged key ranges through LMDB (it would abort the process).
    """

    __slots__ = ("_ranges",)

    def __init__(self, kv: LmdbKV, ranges: list[tuple[bytes, bytes | None]] | None) -> None:
        super().__init__(kv)
        self._ranges = ranges

    def __enter__(self) -> _LmdbTxn:
        kv = self._kv
        kv._check_fork()
        for _ in range(20):
            txn = kv._begin(write=False)
            try:
                damage = check_snapshot(kv.path, txn.id(), self._ranges)
            except OSError as exc:
                txn.abort()
                kv._gate.leave()
                raise CortexError(f"cannot read {short_path(kv.path)}: {exc.strerror}") from exc
            except BaseException:
                txn.abort()
                kv._gate.leave()
                raise
            if damage is not None:
                self._txn = txn
                wrapped = _LmdbTxn(txn, kv._shared.routes)
                wrapped.damage = damage
                return wrapped
            # two commits overwrote the snapshot's meta page before it was read: take a newer one
            txn.abort()
            kv._gate.leave()
        raise CortexError("the store changes too fast to check its pages; retry")


class LmdbKV:
    """LMDB as the ordered KV engine.

    Durable by default: every commit is fsynced (data and meta pages) before ``write`` returns.
    The environment is opened with LMDB's MDB_NOMETASYNC (the data pages are flushed inside the
    commit, under the writer lock; the meta page is written there and flushed after it, outside
    the lock, so that concurrent writers' flushes overlap: LMDB keeps the file's integrity so).
    Concurrent writes of one process's threads commit together (``write``: group commit).
    ``metasync=False`` skips the flush of the meta page: a commit is then at risk until the next
    durable commit, and an operating-system crash (not a process crash) may roll back the last
    transaction(s), but the store is never corrupted. The map grows by doubling when full,
    without failing the write. Several threads and processes may use one store; an environment
    inherited across ``fork()`` must not be used: the child reopens the store. Keys under
    ``keys.DATABASE_PREFIX`` (byte 1, then ``db/``) are reserved: LMDB's records of the named
    databases (format 17) live there in the main tree, and scans leave them out.

    LMDB trusts its file; this class does not: ``data.mdb`` is checked before it is mapped
    (``cortex.storage.pages.check_file``: a truncated file or a damaged meta page is an
    ``IntegrityError``, not a SIGBUS), ``read_checked`` checks a snapshot's pages before a
    whole-file walk, and ``check_pages`` (the default) checks every page at open, unless the
    file is in the state the last check (or a checked handle's close) recorded in
    ``pages.checked`` (``specs/storage.md`` §9).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        readonly: bool = False,
        metasync: bool = True,
        map_size: int = _MIN_MAP,
        create: bool = True,
        check_pages: bool = True,
        epoch_prefix: bytes | None = None,
    ) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self.metasync = metasync
        shown = short_path(self.path)
        try:
            if self.path.exists() and not self.path.is_dir():
                raise CortexError(
                    f"cannot open the store at {shown}: it is a file, not a directory"
                )
            if not readonly and create:
                self.path.mkdir(parents=True, exist_ok=True)
            elif not (self.path / "data.mdb").exists():
                raise CortexError(f"no store at {shown} (data.mdb missing)")
        except OSError as exc:
            raise CortexError(_os_message(shown, exc, readonly)) from exc
        self._pid = os.getpid()
        self._forks = _FORKS[0]
        self._closed = False
        self._shared = _Shared.acquire(self.path, readonly, metasync, map_size, create)
        if epoch_prefix is not None:
            self._shared.epoch_prefix = epoch_prefix
        self._gate = self._shared.gate
        self._vouched: PageState | None = None
        """The file state this handle checked, or found recorded, at open (``_check_pages``)."""
        if check_pages:
            try:
                if self._shared.routes.damage:  # reads would miss the named databases' keys
                    raise damage_error(self.path, self._shared.routes.damage)
                self._check_pages()
            except BaseException:
                self.close()
                raise

    def _check_pages(self) -> None:
        """Check every page of the file, unless ``pages.checked`` records its state now.

        A clean check records the state it checked (when no commit came meanwhile), so the next
        open of the unchanged file skips it; a checked handle records the state at its close
        (``_record_checked``): LMDB's own commits keep a checked file's pages sound.
        """
        state = checked_state(self.path)
        if state is None or state != read_checked_record(self.path):
            with self.read_checked() as txn:
                if txn.damage:
                    with suppress(OSError):  # no closing handle may vouch for it again
                        write_checked_record(self.path, None)
                    raise damage_error(self.path, txn.damage)
                tid = int(txn._txn.id())
            if state is not None and state.txnid == tid and checked_state(self.path) == state:
                with suppress(OSError):  # a read-only directory: the next open checks again
                    write_checked_record(self.path, state)
            else:
                state = None
        self._vouched = state

    def _record_checked(self) -> None:
        """At the close of a checked handle: record the file's state as checked.

        Only while the record still holds what this handle checked or found at open: another
        handle's check that found damage removes it, and another checked handle's close moves
        it on (this one then leaves it).
        """
        if self._vouched is None or read_checked_record(self.path) != self._vouched:
            return
        state = checked_state(self.path)
        if state is not None and state != self._vouched:
            write_checked_record(self.path, state)

    @property
    def _env(self) -> lmdb.Environment:
        # read through the shared record at every use: a failed remap replaces the environment
        # for every handle of the store in this process (``_Shared.reopen``)
        return self._shared.env

    @property
    def locked(self) -> bool:
        """False when a read-only open fell back to reading without the lock file."""
        return self._shared.locked

    # -- transactions ------------------------------------------------------------------------

    def _check_fork(self) -> None:
        if self._closed:
            raise CortexError(f"the store at {self.path} is closed; open it again to use it")
        if _FORKS[0] != self._forks:
            raise CortexError(
                "this store was opened before fork(); an LMDB environment must not cross a fork: "
                "open the store in a process started with spawn (multiprocessing) or after exec"
            )

    def read(self) -> _Read:
        """A read snapshot, as a context manager (keep it short: it pins pages until it ends)."""
        return _Read(self)

    def read_checked(self, ranges: list[tuple[bytes, bytes | None]] | None = None) -> _Read:
        """A read snapshot whose pages are checked first: its transaction's ``damage``.

        ``ranges`` (``[start, end]`` key intervals, ``end`` None for no end) limits the check
        to the pages holding those keys and the leaves beside them; without it every page of
        both trees is checked. For whole-file walks (verify, stats, export, backup), which LMDB
        would abort on a damaged page.
        """
        return _CheckedRead(self, ranges)

    def point_read(
        self, keys: list[bytes], last: bytes | None = None
    ) -> tuple[list[bytes | None], tuple[bytes, bytes] | None]:
        """The values of ``keys`` and the last pair under the prefix ``last`` (``KV``)."""
        # straight on LMDB's transaction and cursor (no wrapper objects, no Python frame of
        # the gate's or the fork check's, no typing.cast): the hot path of a get
        if self._closed or _FORKS[0] != self._forks:
            self._check_fork()  # raises
        gate = self._gate
        mine = gate._mine
        me = get_ident()
        mine[me] = mine.get(me, 0) + 1  # _Gate.enter, inline
        txn: lmdb.Transaction
        try:
            if gate._remapping or not _GIL:
                gate.admit(me)
            txn = self._shared.env.begin()
        except lmdb.Error:  # a map another process grew, say: the general path adopts it
            gate.leave()
            txn = self._begin(write=False)
        except BaseException:
            gate.leave()
            raise
        txn = self._shared.mapped(txn)
        try:
            # bytes, not buffers (the transaction is not begun with buffers=True): nothing
            # outlives the transaction; map and the one-byte step of the end: no Python frame
            routes = self._shared.routes
            values: list[bytes | None]
            if len(keys) == 1 and keys[0].startswith(HEAD):  # a get's head
                values = [txn.get(keys[0], None, routes.of(keys[0]))]  # type: ignore[list-item]
            elif routes.dbs:
                of = routes.of
                values = [txn.get(k, None, of(k)) for k in keys]  # type: ignore[misc]
            else:
                values = list(map(txn.get, keys))  # type: ignore[arg-type]
            tail: tuple[bytes, bytes] | None = None
            if last is None:
                pass
            elif not routes.dbs or (len(last) > routes.longest and not _meets_records(last)):
                cur = txn.cursor(db=routes.of(last)) if routes.dbs else txn.cursor()
                b = last[-1] if last else 0xFF
                end = (
                    last[:-1] + _NEXT_BYTE[b]
                    if b != 0xFF
                    else (prefix_end(last) if last.strip(b"\xff") else None)
                )
                found = cur.prev() if end is not None and cur.set_range(end) else cur.last()
                if found:
                    k: bytes = cur.key()  # type: ignore[assignment]
                    if k.startswith(last):
                        tail = (k, cur.value())  # type: ignore[assignment]
            else:  # a short prefix: it may span databases
                tail = _LmdbTxn(txn, routes).last(last)
        except lmdb.Error as exc:  # e.g. a damaged page met while reading
            raise _wrap(exc, self.path) from exc
        finally:
            txn.abort()
            n = mine[me] - 1  # _Gate.leave, inline
            if n:
                mine[me] = n
            else:
                del mine[me]
            if gate._remapping or not _GIL:
                gate.wake()
        return values, tail

    def point_read_row(
        self, ptr: bytes, keys: list[tuple[bytes, bytes]], last: bytes | None = None
    ) -> tuple[bytes | None, list[bytes | None], tuple[bytes, bytes] | None]:
        """``point_read`` through a row pointer, in one snapshot (``KV.point_read_row``)."""
        with self.read() as txn:
            pv = txn.get(ptr)
            if pv is None:
                return None, [None] * len(keys), None
            pv = bytes(pv)
            r = pv[:4]
            values = [txn.get(p + r + x) for p, x in keys]
            tail = None
            if last is not None:
                for k, v in txn.scan(last + r, reverse=True):
                    tail = (bytes(k), bytes(v))
                    break
        return pv, [None if v is None else bytes(v) for v in values], tail

    def read_newest(self, prefix: bytes, fn: Callable[..., T], arg: Any) -> T:
        """``fn(get, cursor, icur, head, snapshot, arg)`` in a read snapshot.

        For a one-shot find newest first over the index ``prefix`` read by the C reader
        (``cortex._speedups.read_newest``, ``Cortex.find``): ``get`` is the snapshot's
        ``_LmdbTxn.raw_get``, ``cursor`` its main database's cursor, ``(icur, head)`` its
        ``dup_cursor(prefix)`` (``(cursor, 0)`` where ``prefix`` is in the main database), and
        ``snapshot()`` the snapshot as a ``ReadTxn`` (a new one each call, with cursors of its
        own), for whatever ``fn`` reads otherwise. The same snapshot, gate and error wrapping
        as ``read``, without its context manager's Python frames or a ``_LmdbTxn`` unless
        ``fn`` asks for one (``point_call``'s). ``fn`` must not keep anything of the snapshot.
        LMDB only.
        """
        if self._closed or _FORKS[0] != self._forks:
            self._check_fork()  # raises
        gate = self._gate
        mine = gate._mine
        me = get_ident()
        mine[me] = mine.get(me, 0) + 1  # _Gate.enter, inline
        txn: lmdb.Transaction
        try:
            if gate._remapping or not _GIL:
                gate.admit(me)
            txn = self._shared.env.begin()
        except lmdb.Error:
            gate.leave()
            txn = self._begin(write=False)
        except BaseException:
            gate.leave()
            raise
        txn = self._shared.mapped(txn)
        try:
            routes = self._shared.routes
            snapshot = functools.partial(_LmdbTxn, txn, routes)
            get = routes.raw_get(txn, None)
            if get is None:  # rows, heads or versions routed in Python
                get = snapshot().raw_get
            cur = txn.cursor()
            plan = routes.dup_plan(prefix)
            if plan is None:
                return fn(get, cur, cur, 0, snapshot, arg)
            return fn(get, cur, txn.cursor(db=plan[0]), plan[1], snapshot, arg)
        except lmdb.Error as exc:
            raise _wrap(exc, self.path) from exc
        finally:
            txn.abort()
            n = mine[me] - 1  # _Gate.leave, inline
            if n:
                mine[me] = n
            else:
                del mine[me]
            if gate._remapping or not _GIL:
                gate.wake()

    def point_call(
        self, fn: Callable[[Any, lmdb.Transaction, Any, Any, Any], T], ctx: Any, arg: Any
    ) -> T:
        """``fn(ctx, txn, arg, heads, ids)`` in a read snapshot of LMDB's own transaction.

        For a C reader that makes ``point_read``'s reads itself (``cortex._speedups.read_latest``):
        the same snapshot, gate and error wrapping as ``point_read``, without its Python work.
        ``txn`` is begun without buffers, so every value ``fn`` reads is ``bytes``; it must not
        keep ``txn`` or a cursor of it beyond the call. ``heads`` is the named database of the
        heads (``keys.HEAD``, format 19), None where they are in the main database, ``ids``
        that of the rows (``keys.ID``, format 21); versions are in the main database
        (``keys.DATABASES`` never holds ``VERSION``). LMDB only.
        """
        # point_read's gate, inline (see there: the hot path of a get)
        if self._closed or _FORKS[0] != self._forks:
            self._check_fork()  # raises
        gate = self._gate
        mine = gate._mine
        me = get_ident()
        mine[me] = mine.get(me, 0) + 1  # _Gate.enter, inline
        txn: lmdb.Transaction
        try:
            if gate._remapping or not _GIL:
                gate.admit(me)
            txn = self._shared.env.begin()
        except lmdb.Error:
            gate.leave()
            txn = self._begin(write=False)
        except BaseException:
            gate.leave()
            raise
        txn = self._shared.mapped(txn)
        try:
            routes = self._shared.routes
            return fn(ctx, txn, arg, routes.heads, routes.ids)
        except lmdb.Error as exc:
            raise _wrap(exc, self.path) from exc
        finally:
            txn.abort()
            n = mine[me] - 1  # _Gate.leave, inline
            if n:
                mine[me] = n
            else:
                del mine[me]
            if gate._remapping or not _GIL:
                gate.wake()

    def write(self, fn: Callable[[WriteTxn], T]) -> T:
        """Run ``fn`` in one write transaction; grow the map and re-run it on ``MapFullError``.

        Concurrent writes of this process's threads commit together (group commit): the first
        becomes the leader, opens one transaction and runs its own ``fn`` and those queued
        meanwhile, each in a child transaction of its own (an exception aborts only that
        child, and is raised only to its caller), then commits once and flushes once. No write
        returns before the commit holding it is on disk. Each ``fn`` runs in its caller's
        context (``contextvars``), on the leader's thread. A thread holding a transaction of
        this store (a read snapshot) writes alone, as before. A writer interrupted while it
        waits (a signal's exception) withdraws its write if no leader has taken it yet;
        once taken, the interrupt waits for that group's outcome and notes it
        (``BaseException.add_note``). Each waiting writer sleeps on a lock of its own
        (``_Commits``). The writes of a group whose functions offer a ``GroupShare``
        (``Sharing``) run first and share its state. A leader first waits for the writers of
        the last groups of more than one to queue again (``_Commits.gather``: at most as long as
        the last commit took, and ``_GROUP_WAIT``), so that writers that commit together go on
        committing together.

        With an ``epoch_prefix``, a change of the last key under it since this environment's
        last write (an erasure: ``specs/storage.md`` §11) first renews the environment, so that
        no page buffer of an earlier write carries erased bytes into the pages this one writes.
        """
        if self._closed or _FORKS[0] != self._forks:
            self._check_fork()  # raises
        if self.readonly:
            raise CortexError("the store is open read-only")
        if self._gate.held():
            return self._write_alone(fn)
        me = _Member(fn, contextvars.copy_context(), self.metasync)
        c = self._shared.commits
        with c.lock:
            if c.back:  # back, if its last group's leader waits for it (``_Commits.gather``)
                c.back.pop(me.thread, None)
            lead = not c.leading
            if lead:
                c.leading = me.taken = me.lead = True
            else:
                c.queue.append(me)
                if c.gathering:
                    c.arrived.notify()
        try:
            if not lead:
                me.wake.acquire()  # released once: handed the leadership, or its group done
            if me.lead:
                self._lead(c, me)
        except BaseException as exc:  # an interrupt while queued, or before ``_lead``'s cleanup
            if not me.done:
                self._withdraw(c, me, exc)
            raise
        if me.error is not None:
            if isinstance(me.error, _Alone):  # it must see the file as its transaction does
                return self._write_alone(fn)
            error, me.error = me.error, None
            raise error
        return cast(T, me.result)

    def _lead(self, c: _Commits, me: _Member) -> None:
        """Commit ``me`` and the writes queued meanwhile in one transaction (``write``)."""
        batch = [me]
        shared = self._shared
        holding = True  # the leadership: given up once the commit is made, before its flush
        committed = flushed = False  # ``flushed``: a group of more than one, committed
        sharing = True  # the writes of a ``GroupShare`` share its state (``_Redo``: not)
        trace = c.trace
        led = time.perf_counter() if trace is not None else 0.0
        try:
            if c.flushing or c.back:  # concurrent writers: the last groups' first
                with c.lock:
                    c.gather()
            gathered = time.perf_counter() if trace is not None else 0.0

            def attempt(txn: lmdb.Transaction, epoch: bytes | None) -> None:
                nonlocal committed, flushed
                if len(batch) == 1:  # the writes that queued while this one waited
                    with c.lock:
                        more: list[_Member] = []
                        rest: list[_Member] = []
                        for m in c.queue:  # not those interrupted: they leave (``_withdraw``)
                            if m.withdrawing or len(more) == _GROUP_MAX - 1:
                                rest.append(m)
                            else:
                                m.taken = True
                                more.append(m)
                        c.queue[:] = rest
                    batch.extend(more)
                    if more and sharing:  # the sharing writes first, in one run (``GroupShare``):
                        # concurrent writes have no order of their own
                        batch.sort(key=_not_sharing)
                if len(batch) == 1:  # alone: no child (an exception aborts all)
                    me.result, me.error = me.fn(_LmdbTxn(txn, shared.routes, False, shared)), None
                env = shared.env
                pending: tuple[GroupShare, Any] | None = None  # a share and its state
                for i, m in enumerate(batch if len(batch) > 1 else ()):
                    share = getattr(m.fn, "share", None) if sharing else None
                    if pending is not None and share is not pending[0]:
                        _finish_share(pending)  # before a write that does not share it
                        pending = None
                    if share is not None and pending is None:
                        pending = (share, share.start(_LmdbTxn(txn, shared.routes, i > 0, shared)))
                    child = env.begin(write=True, parent=txn)
                    try:
                        w = _LmdbTxn(child, shared.routes, i > 0)
                        if share is not None:
                            w.share = pending[1]  # type: ignore[index]
                        m.result = m.fn(w) if m is me else m.ctx.run(m.fn, w)
                        child.commit()
                        m.error = None
                    except lmdb.MapFullError:
                        child.abort()
                        raise
                    except lmdb.Error as exc:
                        child.abort()
                        if share is not None:
                            raise _Redo from exc
                        wrapped = _wrap(exc, self.path)
                        wrapped.__cause__ = exc
                        m.result, m.error = None, wrapped
                    except BaseException as exc:
                        child.abort()
                        if m is me and not isinstance(exc, Exception):
                            raise  # an interrupt of this thread: the group stops
                        if share is not None:  # the shared state may hold part of it
                            raise _Redo from exc
                        m.result, m.error = None, exc
                    if (
                        shared.epoch_prefix is not None
                        and m.error is None
                        and i + 1 < len(batch)
                        and self._epoch(txn) != epoch
                    ):
                        # an erasure: the rest waits for the next group, which renews
                        # the environment first (no erased byte in its page buffers)
                        self._requeue(c, batch[i + 1 :])
                        del batch[i + 1 :]
                        break
                if pending is not None:
                    _finish_share(pending)
                began = time.perf_counter()
                txn.commit()
                committed = True
                c.commit_time = time.perf_counter() - began
                if trace is not None:
                    trace.append((led, gathered, began, began + c.commit_time, len(batch)))
                if len(batch) > 1:
                    with c.lock:
                        c.flushing += len(batch)
                    flushed = True
                if shared.epoch_prefix is not None and self._gate.held() == 1:
                    shared.epoch_seen = epoch

            while True:
                try:
                    self._attempts(attempt, alone=False)
                    break
                except _Redo:  # a sharing write failed: the group again, each on its own
                    sharing = False
            with c.lock:  # the next group may start while this one's flush runs
                holding = False
                c.hand_over()
            durable = me.durable if len(batch) == 1 else any(m.durable for m in batch)
            if durable and not shared.metasync:
                try:
                    shared.env.sync(True)
                except lmdb.Error as exc:
                    raise _wrap(exc, self.path) from exc
        except Exception as exc:
            for m in batch:
                m.result, m.error = None, exc
        except BaseException:  # an interrupt: the others go back to the queue, unwritten
            if not committed:
                batch.remove(me)
                self._requeue(c, batch)
                batch = [me]
            else:  # committed, its flush interrupted: the others must not count on it
                lost = CortexError(
                    "the write was committed but its flush to disk was interrupted: an "
                    "operating-system crash may lose it; call sync() to be sure"
                )
                for m in batch:
                    m.result, m.error = None, lost
            raise
        finally:
            with c.lock:
                if holding:
                    c.hand_over()
                c.finish(batch, me, flushed)

    @staticmethod
    def _withdraw(c: _Commits, me: _Member, exc: BaseException) -> None:
        """A writer interrupted while it waits in the queue (or as it starts to lead).

        Still queued: it leaves the queue and nothing of it runs. Holding the leadership
        (handed it meanwhile, or interrupted before ``_lead`` took its group): it passes the
        leadership on, unwritten. Taken by a leader: that group's
        outcome is not the caller's to cancel, so the interrupt waits for it and says what
        became of the write (a note on the exception); put back in the queue unwritten
        meanwhile (``_requeue``: its leader interrupted, or an erasure), it leaves the queue
        then, rather than wait for a later writer to lead and commit it.
        """
        while True:
            with c.lock:
                me.withdrawing = True
                if me.done:
                    break
                if not me.taken:
                    c.queue.remove(me)
                    return
                if me.lead:
                    me.taken = me.lead = False
                    c.hand_over()
                    return
            with suppress(BaseException):  # a second interrupt: keep waiting for the outcome
                me.wake.acquire()
        if me.error is None:
            exc.add_note("cortex: the write had been taken into a group commit and IS committed")
        else:
            exc.add_note(f"cortex: the write was not committed ({me.error})")

    @staticmethod
    def _requeue(c: _Commits, members: list[_Member]) -> None:
        """Put ``members`` back at the head of the queue, unwritten, for the next group."""
        with c.lock:
            for m in members:
                m.taken = False
                m.result = m.error = None
                if m.withdrawing:  # it leaves the queue now (``_withdraw``)
                    m.signal()
            c.queue[:0] = members

    def _write_alone(self, fn: Callable[[WriteTxn], T]) -> T:
        """``write`` in a transaction of its own (under LMDB's writer lock, not the queue)."""

        def attempt(txn: lmdb.Transaction, epoch: bytes | None) -> T:
            result = fn(_LmdbTxn(txn, self._shared.routes, False, self._shared))
            txn.commit()
            shared = self._shared
            if self.metasync and not shared.metasync:
                # the environment skips the meta flush; this handle asked for it
                self._env.sync(True)
            if shared.epoch_prefix is not None and self._gate.held() == 1:
                shared.epoch_seen = epoch
            return result

        return self._attempts(attempt, alone=True)

    def _attempts(
        self, attempt: Callable[[lmdb.Transaction, bytes | None], T], *, alone: bool
    ) -> T:
        """``attempt(txn, epoch)`` in a write transaction, until it returns.

        ``attempt`` commits ``txn`` itself. The map full, the transaction is aborted, the map
        grown and ``attempt`` run again in a new one; after an erasure (``epoch_prefix``'s last
        key changed since this environment's last write) the environment is renewed first, so
        that no page buffer of an earlier write carries erased bytes into this one's pages. An
        LMDB error is raised as a ``CortexError``.
        """
        shared = self._shared
        while True:
            txn = self._begin(write=True)
            renew = False
            try:
                epoch = None
                if shared.epoch_prefix is not None:
                    epoch = self._epoch(txn)
                    renew = shared.epoch_seen is not _NEVER and epoch != shared.epoch_seen
                    # alone, only this write may hold a transaction of this thread to renew (a
                    # thread inside a read snapshot renews at a later write instead)
                    renew = renew and (not alone or self._gate.held() == 1)
                if renew:
                    txn.abort()
                else:
                    result = attempt(txn, epoch)
                    if shared.pending is not None:  # committed: its new databases are open
                        shared.routes, shared.pending = shared.pending, None
                    return result
            except lmdb.MapFullError:
                shared.pending = None
                txn.abort()
                full_at = int(self._env.info()["map_size"])
            except lmdb.Error as exc:
                shared.pending = None
                txn.abort()
                raise _wrap(exc, self.path) from exc
            except BaseException:
                shared.pending = None
                txn.abort()
                raise
            finally:
                self._gate.leave()
            if renew:
                self._renew()
            else:
                self._grow(full_at)

    def _epoch(self, txn: lmdb.Transaction) -> bytes | None:
        prefix = self._shared.epoch_prefix
        assert prefix is not None
        with txn.cursor(db=self._shared.routes.of(prefix)) as cur:
            end = _epoch_end(prefix)
            found = cur.set_range(end) if end is not None else False
            moved = cur.prev() if found else cur.last()
            if not moved:
                return None
            key = bytes(cur.key())
            return key if key.startswith(prefix) else None

    def _renew(self) -> None:
        """Close and reopen the environment: LMDB frees the page buffers it recycles.

        A writer builds each page it writes in a buffer kept from earlier writes, and the
        unused part of the page is written as the buffer left it. After an erasure those
        buffers may hold erased bytes; a fresh environment's buffers start zeroed. Waits for
        this process's other transactions.
        """
        if self._gate.held():
            return  # this thread holds a transaction: it renews at a later write instead
        with self._gate.exclusive():
            size = int(self._env.info()["map_size"])
            self._shared.reopen(size)
            self._shared.epoch_seen = _NEVER

    def _begin(self, *, write: bool) -> lmdb.Transaction:
        """Begin a transaction; the caller ends it, then calls ``self._gate.leave()``."""
        for _ in range(3):
            self._gate.enter()
            try:
                return self._shared.env.begin(write=write)
            except lmdb.MapResizedError:
                self._gate.leave()
            except lmdb.Error as exc:
                self._gate.leave()
                raise _wrap(exc, self.path) from exc
            except BaseException:
                self._gate.leave()
                raise
            # another process grew the map: adopt its size and try again
            with self._gate.exclusive():
                size = int(self._env.info()["map_size"])
                try:
                    self._env.set_mapsize(0)
                except lmdb.Error as exc:
                    self._reopen(size)
                    raise StoreFullError(
                        f"another process grew the store beyond what this process can map "
                        f"({exc}); free memory or raise the address-space limit (ulimit -v)"
                    ) from exc
        raise CortexError("the store's map keeps changing size under us; retry")

    def _grow(self, full_at: int) -> None:
        with self._gate.exclusive():
            size = int(self._env.info()["map_size"])
            if size > full_at:  # another thread grew it meanwhile
                return
            if size >= _MAX_MAP:
                raise StoreFullError(f"the store reached its size limit of {_MAX_MAP} bytes")
            try:
                self._env.set_mapsize(min(size * 2, _MAX_MAP))
            except lmdb.Error as exc:
                # py-lmdb invalidates an environment whose remap failed: open it again at the
                # size that worked, so this handle keeps reading (and writes once space exists)
                self._reopen(size)
                raise StoreFullError(
                    f"the store is full: its map cannot grow beyond {size} bytes because the "
                    f"process cannot reserve more address space ({exc.args[0]}); free memory "
                    "or raise the address-space limit (ulimit -v), then retry. Nothing was "
                    "written; reads still work"
                ) from exc

    def _reopen(self, map_size: int) -> None:
        """Replace an environment a failed remap left unusable (under the exclusive gate)."""
        self._shared.reopen(map_size)

    # -- housekeeping ------------------------------------------------------------------------

    def info(self) -> dict[str, int]:
        """Map size, pages in use and reader counts."""
        routes = self._shared.routes
        try:
            # in a read through the gate: it adopts a map another process has grown
            txn = self._begin(write=False)
            try:
                info = self._env.info()
                stat = self._env.stat()
                subs = [txn.stat(db) for db in routes.dbs.values()]
            finally:
                txn.abort()
                self._gate.leave()
        except lmdb.Error as exc:  # e.g. the environment a failed remap is replacing
            raise _wrap(exc, self.path) from exc
        pages = 2  # the two meta pages
        entries = int(stat["entries"]) - len(subs)  # the named databases' records are not data
        for st in (stat, *subs):
            pages += int(st["branch_pages"]) + int(st["leaf_pages"]) + int(st["overflow_pages"])
        entries += sum(int(st["entries"]) for st in subs)
        return {
            "map_size": int(info["map_size"]),
            "last_txnid": int(info["last_txnid"]),
            "readers": int(info["num_readers"]),
            "entries": entries,
            "used_bytes": int(stat["psize"]) * pages,
        }

    def snapshots(self) -> list[tuple[int, int]]:
        """``(pid, txn id)`` of every open read snapshot of the store, in any process."""
        self._check_fork()

        def listing(env: lmdb.Environment) -> str:
            if not self.readonly:
                env.reader_check()  # slots of processes that died hold nothing
            return str(env.readers())

        readers = self._env_call(listing)
        out: list[tuple[int, int]] = []
        for line in readers.splitlines()[1:]:
            parts = line.split()
            if len(parts) == 3 and parts[0].isdigit() and parts[2].isdigit():
                out.append((int(parts[0]), int(parts[2])))
        return out

    def last_txnid(self) -> int:
        """The id of the last committed write transaction."""
        return self._env_call(lambda env: int(env.info()["last_txnid"]))

    def _env_call(self, fn: Callable[[lmdb.Environment], T]) -> T:
        """``fn(environment)`` while no other thread can renew it (``_renew`` closes it).

        A thread that holds a transaction is inside the gate already (a renewal waits for
        it); any other enters it for the call.
        """
        if self._gate.held():
            inside = True
        else:
            self._gate.enter()
            inside = False
        try:
            return fn(self._env)
        except lmdb.Error as exc:
            raise _wrap(exc) from exc
        finally:
            if not inside:
                self._gate.leave()

    def wait_for_snapshots(self, newer_than: int, timeout: float) -> list[tuple[int, int]]:
        """Wait until no read snapshot is at ``newer_than`` or older; those left at the end.

        Snapshots are short (a read, a search); one that stays open longer than ``timeout``
        seconds is returned instead of waited for.
        """
        deadline = time.monotonic() + max(0.0, timeout)
        delay = 0.001
        while True:
            old = [(pid, t) for pid, t in self.snapshots() if t <= newer_than]
            if not old or time.monotonic() >= deadline:
                return old
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    @contextmanager
    def _file_under_lock(self) -> Iterator[tuple[int, Any, int, int, list[tuple[int, int]]]]:
        """``data.mdb`` under LMDB's writer lock: ``(fd, mmap, page size, oldest, snapshots)``.

        The lock is held by an empty write transaction: no commit changes the file meanwhile.

        ``oldest`` is LMDB's own bound for reusing a free page: the smaller of the last
        committed transaction id and every open read snapshot's.
        """
        self._check_fork()
        if self.readonly:
            raise CortexError("the store is open read-only: open it writable to erase")
        _scrub.check_host()
        txn = self._begin(write=True)
        fd = -1
        buf: mmap.mmap | None = None
        try:
            last = self.last_txnid()
            snapshots = self.snapshots()
            oldest = min([last, *(t for _, t in snapshots)])
            psize = int(self._env.stat()["psize"])
            fd = os.open(self.path / "data.mdb", os.O_RDWR)
            size = os.fstat(fd).st_size
            buf = mmap.mmap(fd, size, prot=mmap.PROT_READ)
            yield fd, buf, psize, oldest, snapshots
        except lmdb.Error as exc:
            raise _wrap(exc) from exc
        except OSError as exc:
            raise CortexError(f"cannot erase in {self.path / 'data.mdb'}: {exc}") from exc
        finally:
            if buf is not None:
                with suppress(BufferError):  # a view still held (an error on its way out):
                    buf.close()  # the map closes when the view goes
            if fd >= 0:
                os.close(fd)
            txn.abort()
            self._gate.leave()

    def zero_unused(self) -> tuple[_scrub.ZeroCounts, list[tuple[int, int]]]:
        """Zero every byte of ``data.mdb`` no reader can read again (``cortex.storage.scrub``).

        Holds the writer lock while it runs (writers wait; readers go on). Free pages a read
        snapshot or the previous meta page may still read are left (only their gaps are
        zeroed): the counts say how many. Returns the counts and ``(pid, txn id)`` of every
        read snapshot open at the time.

        Raises:
            LayoutError: the file does not parse as LMDB 0.9 (nothing is written).
            CortexError: the store is read-only or the file cannot be written.
        """
        with self._file_under_lock() as (fd, buf, psize, oldest, snapshots):
            layout = _scrub.read_layout(buf, psize, len(buf), oldest)
            counts = _scrub.zero(fd, buf, layout)
        return counts, snapshots

    def refresh_separators(self, txn: WriteTxn, prefixes: tuple[bytes, ...]) -> int:
        """Rewrite the subtrees under separators that name deleted keys with ``prefixes``.

        Call it inside ``write(fn)`` (``txn`` is that transaction; nothing else is committed
        meanwhile, so the file holds the tree ``txn`` started from). A separator is a copy of a
        key in a branch page (``cortex.storage.scrub.separators``); when the key was deleted the
        copy stays. Deleting every key under it and putting them back with the same values makes
        LMDB merge or rebalance those pages, which drops the stale copy; the store's contents
        do not change. Returns how many stale separators were found.
        """
        if getattr(txn, "grouped", False):  # the file lacks the group's earlier writes
            raise _Alone("refresh_separators runs in a transaction of its own")
        psize = int(self._env.stat()["psize"])
        try:
            with (self.path / "data.mdb").open("rb") as f:
                size = os.fstat(f.fileno()).st_size
                with mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ) as buf:
                    layout = _scrub.read_layout(buf, psize, size, 0, details=False)
                    stale = [
                        (key, child)
                        for key, child in _scrub.separators(buf, layout, prefixes)
                        if txn.get(key) is None
                    ]
                    keys: dict[bytes, None] = {}
                    for _, child in stale:
                        keys.update(dict.fromkeys(_scrub.subtree_keys(buf, psize, child)))
        except OSError as exc:
            raise CortexError(f"cannot read {self.path / 'data.mdb'}: {exc}") from exc
        pairs = [(k, v) for k in keys if (v := txn.get(k)) is not None]
        for key, _ in pairs:
            txn.delete(key)
        txn.put_many(pairs)
        return len(stale)

    def inspect(self, fn: Callable[[Any, _scrub.Layout], T]) -> T:
        """Run ``fn(buffer, layout)`` on ``data.mdb`` under the writer lock (for an audit).

        ``buffer`` is a read-only map of the file, valid only during the call.
        """
        with self._file_under_lock() as (_, buf, psize, oldest, _snapshots):
            return fn(buf, _scrub.read_layout(buf, psize, len(buf), oldest))

    @property
    def compact_copy_safe(self) -> bool:
        """Whether LMDB's own compacting copy (``copy``) may copy this store.

        Not from format 20: LMDB 0.9's compacting copy (``mdb_env_cwalk``) reads the leaves of
        a tree of duplicates of fixed size (``P_LEAF2`` pages) as if they held nodes, and
        crashes the process (measured: a segfault with one key of 100 duplicates of 24 bytes,
        LMDB 0.9.36). Such a store is copied record by record (``engines.copy_kv``).
        """
        return not self._shared.routes.dup

    def copy(self, dest: str | os.PathLike[str]) -> None:
        """Write a consistent, compacted copy to the directory ``dest`` (writers may continue).

        Raises:
            CortexError: the store holds databases of duplicates (``compact_copy_safe``).
        """
        self._check_fork()
        if not self.compact_copy_safe:
            raise CortexError(
                "internal error: LMDB's compacting copy cannot copy a store with databases of "
                "duplicates (format 20); copy it record by record (engines.copy_kv)"
            )
        Path(dest).mkdir(parents=True, exist_ok=False)
        self._gate.enter()  # the copy runs its own read transaction
        try:
            self._env.copy(str(dest), compact=True)
        except lmdb.Error as exc:
            shutil.rmtree(dest, ignore_errors=True)  # we made it: leave no half copy behind
            raise _wrap(exc, Path(dest)) from exc
        finally:
            self._gate.leave()

    def sync(self) -> None:
        """Flush to disk (needed only after commits made with ``metasync=False``)."""
        try:
            self._env.sync(True)
        except lmdb.Error as exc:
            raise _wrap(exc, self.path) from exc

    def close(self) -> None:
        """Close this handle; the environment closes with the last handle of this process.

        Closing twice is harmless; in a child process after ``fork()`` it does nothing.
        """
        if self._closed:
            return
        self._closed = True
        if os.getpid() == self._pid:
            if self._vouched is not None and not self.readonly:
                with suppress(CortexError, OSError):
                    self._record_checked()
            self._shared.release()


class _Shared:
    """One LMDB environment of this process, shared by every ``LmdbKV`` of the same path.

    LMDB allows one environment per file and process (py-lmdb refuses a second open, and
    closing a second one would drop the first one's locks), so several handles of one store in
    one process (one per agent of a runtime) share it, and its transaction gate: a remap of
    the map waits for the transactions of every handle, and its commit queue (``commits``:
    their writes commit in groups). The environment never flushes the meta page in a commit
    (MDB_NOMETASYNC); a handle asking for durable commits (``metasync``) flushes after each of
    its commits, outside the writer lock. A read-only environment cannot be shared by a
    writable handle.

    Every open checks ``data.mdb`` first (``cortex.storage.pages.check_file``: a truncated file or a
    damaged meta page is an ``IntegrityError``, not a SIGBUS), also when the environment is
    already open: the file may have been damaged since. A read-only first open that may not
    write ``lock.mdb`` reads without the lock (``locked`` False). A remap that fails replaces
    the environment (``reopen``), and every handle reads ``env`` from here at each use.
    """

    _open: ClassVar[dict[tuple[int, str], _Shared]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        key: tuple[int, str],
        path: Path,
        env: lmdb.Environment,
        *,
        readonly: bool,
        metasync: bool,
        locked: bool,
    ) -> None:
        self.key = key
        self.path = path
        self.env = env
        self.gate = _Gate()
        self.commits = _Commits()
        self.readonly = readonly
        self.metasync = metasync
        self.locked = locked
        self.users = 1
        self.epoch_prefix: bytes | None = None
        """The keyspace whose last key changes at each erasure (``LmdbKV.write``)."""
        self.epoch_seen: Any = _NEVER
        """That key as this environment's last write saw it."""
        self.routes = _NO_ROUTES
        """The named databases of the environment (``_Routes``)."""
        self.pending: _Routes | None = None
        """The routes a write transaction made (``LmdbKV.split_keyspaces``): ``routes`` once it
        commits."""
        self.view: Any = None
        """The data file mapped read-only for the read snapshots' gets and cursors
        (``_MAP_READS``), made at the first read (``mapped``); None while not made, False where
        it cannot be."""
        self.view_names: dict[Any, bytes] = {}
        """Each named database of ``view_routes`` -> its name in the main tree."""
        self.view_routes: _Routes | None = None

    def mapped(self, txn: lmdb.Transaction) -> Any:
        """``txn``, a read snapshot, as a ``MapTxn`` whose gets and cursors read the map.

        ``txn`` itself where LMDB reads. The file is mapped at the first call, and again when a
        snapshot's pages lie past the mapping (the file grew); where it cannot be mapped (a
        read-only open without the lock file: no reader slot pins the pages), LMDB reads.
        """
        if not _MAP_READS:
            return txn
        # never raises: the caller holds the transaction and the gate (LMDB reads on failure)
        try:
            view = self.view
            if view is None:
                view = self._map()
            if view is False:
                return txn
            routes = self.routes
            if self.view_routes is not routes:
                self.view_names = {db: DATABASE_PREFIX + p for p, db in routes.dbs.items()}
                self.view_routes = routes
            got = view.txn(txn, self.view_names)
            if got is False:  # the file outgrew the mapping
                view = self._map()
                got = view.txn(txn, self.view_names) if view is not False else None
        except Exception:  # LMDB reads it, and says what is wrong if anything is
            return txn
        return got or txn

    def _map(self) -> Any:
        """Map ``data.mdb`` as long as the environment's map (``view``; False if it cannot)."""
        view: Any = False
        if self.locked:
            try:
                view = _sp.MapFile(str(self.path / "data.mdb"), int(self.env.info()["map_size"]))
            except (OSError, ValueError, lmdb.Error):
                view = False
        self.view = view
        return view

    @classmethod
    def acquire(
        cls, path: Path, readonly: bool, metasync: bool, map_size: int, create: bool
    ) -> _Shared:
        shown = short_path(path)
        try:
            if (path / "data.mdb").exists():
                check_file(path)  # before LMDB maps it: a truncated file is a SIGBUS
            key = (os.getpid(), os.path.realpath(path))
        except OSError as exc:
            raise CortexError(_os_message(shown, exc, readonly)) from exc
        with cls._lock:
            shared = cls._open.get(key)
            if shared is not None:
                if shared.readonly and not readonly:
                    raise CortexError(
                        f"the store at {shown} is open read-only in this process: close those "
                        "handles before opening it for writing"
                    )
                shared.users += 1
                return shared
            # never the meta flush inside the commit (under the writer lock): each durable
            # write flushes after it (``LmdbKV.write``), so that the flushes of concurrent
            # writers overlap; LMDB's MDB_NOMETASYNC keeps the file's integrity
            env, locked = _open_env(path, max(map_size, _MIN_MAP), readonly, False, create)
            try:
                if not readonly:
                    env.reader_check()  # clear reader slots of processes that died
            except lmdb.Error as exc:
                env.close()
                raise _wrap(exc, path) from exc
            try:
                routes = _routes_at_open(env, path, readonly)
            except lmdb.Error as exc:
                env.close()
                raise _wrap(exc, path) from exc
            shared = cls._open[key] = cls(
                key, path, env, readonly=readonly, metasync=False, locked=locked
            )
            shared.routes = routes
            return shared

    def reopen(self, map_size: int) -> None:
        """Open the environment again at ``map_size`` (the caller holds the exclusive gate).

        py-lmdb invalidates an environment whose remap failed; every handle of this store in
        this process reads ``env`` at each use, so all of them move to the new one.
        """
        with suppress(lmdb.Error):
            self.env.close()
        self.env, _locked = _open_env(
            self.path, map_size, self.readonly, self.metasync, False, lock=self.locked
        )
        # a database handle belongs to the environment that opened it
        self.routes = _routes_at_open(self.env, self.path, self.readonly)
        self.view = None

    def release(self) -> None:
        with self._lock:
            self.users -= 1
            if self.users > 0:
                return
            if self._open.get(self.key) is self:
                del self._open[self.key]
        self.env.close()


def _routes_at_open(env: lmdb.Environment, path: Path, readonly: bool) -> _Routes:
    """The named databases of a just-opened environment; made first in a new, empty store."""
    empty = not readonly and int(env.stat()["entries"]) == 0
    return _open_routes(env, path, create=empty)


def _open_env(
    path: Path,
    map_size: int,
    readonly: bool,
    metasync: bool,
    create: bool,
    *,
    lock: bool = True,
) -> tuple[lmdb.Environment, bool]:
    """LMDB's environment of ``path``, and whether it holds the lock file.

    A read-only open that may not write ``lock.mdb`` (EACCES, EPERM) reads without the lock:
    a snapshot read (``specs/storage.md`` §9).
    """
    shown = short_path(path)
    options: dict[str, Any] = {
        "map_size": map_size,
        "subdir": True,
        "readonly": readonly,
        "metasync": metasync,
        "sync": True,
        "max_dbs": 2 * len(DATABASES),
        "max_readers": 256,
        "create": create and not readonly,
        "max_spare_txns": 4,
    }
    try:
        return lmdb.open(str(path), lock=lock, **options), lock
    except lmdb.Error as exc:
        if lock and readonly and getattr(exc, "code", None) in (errno.EACCES, errno.EPERM):
            try:
                return lmdb.open(str(path), lock=False, **options), False
            except lmdb.Error as again:
                raise CortexError(f"cannot open the store at {shown}: {again}") from again
        raise CortexError(_lmdb_open_message(shown, exc, readonly)) from exc
    except OSError as exc:
        raise CortexError(_os_message(shown, exc, readonly)) from exc


_FULL_BELOW: Final = 1 << 20
"""Free bytes below which a failed write is taken for a full disk (LMDB reports a short
write as EIO)."""


def _disk_full(path: Path) -> str | None:
    """Why writing under ``path`` fails for lack of space, or None when there is space."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    free = st.f_bavail * st.f_frsize
    if free < _FULL_BELOW:
        return f"the disk holding {short_path(path)} is full ({free} bytes free)"
    soft, _hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft != resource.RLIM_INFINITY:
        try:
            size = (path / "data.mdb").stat().st_size if path.is_dir() else 0
        except OSError:
            size = 0
        if size + _FULL_BELOW >= soft:
            return f"the store's file reached the process's file size limit ({soft} bytes)"
    return None


def _wrap(exc: lmdb.Error, path: Path | None = None) -> CortexError:
    code = getattr(exc, "code", None)
    if isinstance(exc, lmdb.MapFullError):
        return StoreFullError(f"the store cannot grow: {exc}")
    full = None
    if code in (errno.ENOSPC, errno.EDQUOT) or isinstance(exc, lmdb.DiskError):
        full = (_disk_full(path) if path is not None else None) or "the disk is full"
    elif code == errno.EFBIG:
        full = "the store's file reached the process's file size limit (ulimit -f)"
    elif code == errno.EIO and path is not None:
        full = _disk_full(path)  # LMDB reports a short write (a disk that filled) as EIO
    if full is not None:
        return StoreFullError(
            f"{full}: the write failed and nothing was written; free space (or raise the "
            "limit), then retry"
        )
    if isinstance(exc, lmdb.CorruptedError | lmdb.PageNotFoundError | lmdb.InvalidError):
        return IntegrityError(f"LMDB reports damage: {exc}; restore from a backup")
    return CortexError(f"storage engine error: {exc}")


def _os_message(shown: str, exc: OSError, readonly: bool) -> str:
    """What an ``OSError`` met opening the store at ``shown`` means, and what to do."""
    reasons = {
        errno.ENOTDIR: "a part of the path is a file, not a directory",
        errno.EEXIST: "it is a file, not a directory",
        errno.ENAMETOOLONG: "the name is too long for the file system",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
        errno.EROFS: "the file system is read-only"
        + ("" if readonly else " (open it with readonly=True to read it)"),
        errno.ENOSPC: "the disk is full",
        errno.ELOOP: "too many symbolic links",
    }
    why = reasons.get(exc.errno or 0) or exc.strerror or str(exc)
    return f"cannot open the store at {shown}: {why}"


def _lmdb_open_message(shown: str, exc: lmdb.Error, readonly: bool) -> str:
    code = getattr(exc, "code", None)
    if code == errno.EROFS and not readonly:
        return (
            f"cannot open the store at {shown} for writing: the file system is read-only "
            "(open it with readonly=True to read it)"
        )
    if code in (errno.EACCES, errno.EPERM):
        hint = "" if readonly else " (open it with readonly=True to read a store you may only read)"
        return f"cannot open the store at {shown}: permission denied{hint}"
    if code in (errno.ENOSPC, errno.EDQUOT):
        return f"cannot open the store at {shown}: the disk is full"
    return f"cannot open the store at {shown}: {exc}"
