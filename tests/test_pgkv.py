"""The PostgreSQL engine's own rules: bytewise order, the write overlay, retries, failures of the
server, several processes on one store, and copying between engines.

The KV contract and the store's behaviour are tested once for both engines (test_kv,
test_store, ...); this module holds what only a server can do.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortex import Constraint, Cortex, CortexError, Event, Fact, Identity, NewMemory, Query
from cortex.errors import ConflictError, EngineError, StoreFullError
from cortex.index import lexical
from cortex.storage.engines import copy_kv, exists, open_kv
from cortex.storage.pgkv import (
    RETRIES,
    PgKV,
    _binary,
    _Conn,
    _inline,
    _load_binary,
    _PgRead,
    _pipeline,
    _send_all,
    parse_url,
)

from . import workers
from .test_crash import Child

pytestmark = pytest.mark.postgres


@pytest.fixture
def url(pg_url: Callable[[], str]) -> str:
    return pg_url()


@pytest.fixture
def kv(url: str) -> Iterator[PgKV]:
    store = PgKV(url)
    yield store
    store.close()


def _raw(url: str) -> Any:
    import psycopg

    return psycopg.connect(parse_url(url).conninfo, autocommit=True)


# --- order and URLs ---------------------------------------------------------------------------


keys = st.binary(min_size=1, max_size=12)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(keys, min_size=1, max_size=60, unique=True))
def test_bytea_orders_keys_bytewise_as_python_and_lmdb_do(pg_url: Any, ks: list[bytes]) -> None:
    kv = PgKV(pg_url())
    try:
        kv.write(lambda t: t.put_many((k, b"") for k in ks))
        with kv.read() as r:
            assert list(r.keys(b"")) == sorted(ks)
            assert list(r.keys(b"", reverse=True)) == sorted(ks, reverse=True)
        kv.drop()
    finally:
        kv.close()


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    one=st.binary(max_size=64),
    many=st.lists(st.binary(max_size=24), max_size=6),
    n=st.integers(-(2**63), 2**63 - 1),
)
def test_inlined_literals_read_back_as_the_values(
    url: str, one: bytes, many: list[bytes], n: int
) -> None:
    """The first round trip inlines keys as hex literals (``_inline``): the server reads them
    back byte for byte, whatever ``standard_conforming_strings`` says."""
    import psycopg

    sql = _inline([("SELECT %s, %s, %s", (one, many, n))])
    for conforming in ("on", "off"):
        with _raw(url) as conn, psycopg.ClientCursor(conn) as cur:
            cur.execute(f"SET standard_conforming_strings = {conforming}")
            cur.execute(sql)
            got = cur.fetchone()
            assert got is not None
            assert (bytes(got[0]), [bytes(b) for b in got[1]], got[2]) == (one, many, n)


def test_inline_refuses_what_it_cannot_write() -> None:
    with pytest.raises(ValueError, match="placeholders"):
        _inline([("SELECT %s", ())])
    with pytest.raises(TypeError, match="no SQL literal"):
        _inline([("SELECT %s", ("text",))])


@pytest.mark.parametrize("output", ["hex", "escape"])
def test_send_all_loads_rows_as_a_cursor_does(url: str, output: str) -> None:
    """``_send_all`` (libpq directly, one round trip): every statement's rows, or the last
    ``keep`` sets; bytea in either output format, integers, NULL and booleans load as psycopg's
    cursor loads them."""
    import psycopg

    many = [b"\x00\xff'\"\\", b"", bytes(range(256))]
    sql = _inline(
        [
            f"SET bytea_output = {output}",
            ("SELECT %s, %s::bigint, NULL::bytea, true", (many[0], 7)),
            "SELECT 1 WHERE false",
            ("SELECT k, i FROM unnest(%s::bytea[]) WITH ORDINALITY AS q(k, i)", (many,)),
        ]
    )
    with _raw(url) as conn:
        with psycopg.ClientCursor(conn) as cur:
            cur.execute(sql)
            want = []
            while True:
                if cur.pgresult is not None and cur.pgresult.status == 2:  # TUPLES_OK
                    want.append(cur.fetchall())
                if not cur.nextset():
                    break
        got = _send_all(conn, sql)
        assert got == want
        assert got[0] == [(many[0], 7, None, True)]
        assert got[1] == []
        assert got[2] == [(b, i) for i, b in enumerate(many, 1)]
        assert _send_all(conn, sql, keep=2) == want[1:]
        assert _send_all(conn, sql, keep=0) == []
        one = _inline([("SELECT %s", (many[2],))])
        assert _send_all(conn, one, keep=1) == [[(many[2],)]]


def test_send_all_raises_the_server_error_and_stops_there(url: str) -> None:
    """The first failing statement's error, typed as psycopg types it; a connection the server
    dropped raises ``OperationalError``."""
    import psycopg

    with _raw(url) as conn:
        conn.execute("CREATE TEMP TABLE sa (x int PRIMARY KEY)")
        with pytest.raises(psycopg.errors.UniqueViolation):
            _send_all(conn, "INSERT INTO sa VALUES (1); INSERT INTO sa VALUES (1); SELECT 1")
        # one query string outside a transaction block is one implicit transaction: all undone
        assert conn.execute("SELECT count(*) FROM sa").fetchone() == (0,)
        with pytest.raises(psycopg.errors.SyntaxError):
            _send_all(conn, "SELEC 1", keep=1)
        with pytest.raises(psycopg.errors.DivisionByZero):
            _send_all(conn, "SELECT 1; SELECT 1 / 0; SELECT 2", keep=0)
        pid = conn.info.backend_pid
        with _raw(url) as other:
            other.execute("SELECT pg_terminate_backend(%s)", (pid,))
        for keep in (None, 1):
            with pytest.raises(psycopg.OperationalError):
                _send_all(conn, "SELECT 1", keep=keep)
        assert conn.broken


_point_keys = st.lists(
    st.binary(min_size=1, max_size=6).map(lambda b: b"p/" + b), min_size=0, max_size=12
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(_point_keys, st.binary(min_size=1, max_size=7), st.sampled_from([b"p/", b"p/\xff", b"\xff"]))
def test_point_read_of_one_key_binary_is_the_text_path(
    url: str, stored: list[bytes], key: bytes, prefix: bytes
) -> None:
    """A get by id's point read (one key and a prefix's last pair; or one or two keys) goes as a
    prepared statement with binary parameters and results, one row (``_exec_row``); it answers
    as the general text path does, for keys present or not, repeated, and prefixes with pairs,
    without, and at the key space's end."""
    kv = PgKV(url)
    try:
        kv.write(lambda txn: [txn.delete(k) for k, _ in list(txn.scan(b""))])
        kv.write(lambda txn: [txn.put(k, b"v" + k) for k in stored])
        want_key = b"p/" + key
        got = kv.point_read([want_key], prefix)
        text = kv.point_read([want_key, want_key], prefix)  # two keys: the text path
        assert got == ([text[0][0]], text[1])
        assert got[0] == [b"v" + want_key if want_key in stored else None]
        under = sorted(k for k in set(stored) if k.startswith(prefix))
        assert got[1] == ((under[-1], b"v" + under[-1]) if under else None)
        # one and two keys without a prefix (a head; a head and a version) go binary too
        other = stored[0] if stored else b"p/none"
        three = kv.point_read([want_key, other, want_key])  # three keys: the text path
        assert kv.point_read([want_key]) == ([three[0][0]], None)
        assert kv.point_read([want_key, other]) == (three[0][:2], None)
        assert kv.point_read([want_key, want_key]) == ([three[0][0]] * 2, None)
    finally:
        kv.close()


_scan_keys = st.lists(st.binary(max_size=5).map(lambda b: b"s/" + b), max_size=10, unique=True)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    _scan_keys,
    st.lists(st.binary(max_size=8), max_size=6),
    st.sampled_from([b"s/", b"s/\x00", b"s/\xff", b"t/"]),
    st.integers(0, 12),
)
def test_a_pipeline_of_prepared_reads_answers_as_the_query_string(
    url: str, stored: list[bytes], want: list[bytes], prefix: bytes, n: int
) -> None:
    """A round trip of prepared statements goes as one pipeline, parameters and rows in binary
    (``_Conn._trip``); it answers as the same statements in one query string of hexadecimal
    literals: keys present or not, empty arrays and values, NULL columns, integers."""
    kv = PgKV(url)
    try:
        kv.write(lambda txn: [txn.delete(k) for k, _ in list(txn.scan(b""))])
        kv.write(lambda txn: [txn.put(k, k[2:] * 3) for k in stored])
        q = kv._sql
        end = prefix[:-1] + bytes([prefix[-1] + 1]) if prefix[-1] < 255 else b"\xff" * 9
        keys = [b"s/" + k for k in want]
        stmts: list[tuple[str, tuple[Any, ...]]] = [
            q.keys_in(keys),
            (q.tail, (prefix, end)),
            (q.fwd[("kv", True)], (prefix, end, n)),
            (q.preload, (keys, [prefix, b"s/"], [end, b"s0"], n)),
            (q.around_many, ([prefix, b"s/"], [prefix + b"\x80", b"s/\x00"])),
            (q.get, (keys[0] if keys else b"s/",)),
        ]
        c = _Conn(kv, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        try:
            steps = kv._binary_steps(c.conn, stmts)
            assert steps is not None and len(steps) == len(stmts)
            piped = c.run(stmts)
            texted = _send_all(c.conn, c.inline(stmts))
            assert piped == texted
            assert [len(rows) for rows in piped] == [len(rows) for rows in texted]
        finally:
            c.release(failed=False)
    finally:
        kv.close()


def test_binary_parameters_refuse_what_they_cannot_write() -> None:
    """``_binary`` writes bytea, bytea[], int8 and int4 (NULL as None) and refuses anything
    else with TypeError, which sends the round trip as a query string instead."""
    assert _binary(17, b"ab") == b"ab"
    assert _binary(17, None) is None
    assert _binary(20, -2) == (-2).to_bytes(8, "big", signed=True)
    assert _binary(23, 7) == (7).to_bytes(4, "big")
    assert _binary(1001, []) == bytes.fromhex("00000000 00000000 00000011")
    assert _binary(1001, [b"x", b""]) == bytes.fromhex(
        "00000001 00000000 00000011 00000002 00000001 00000001 78 00000000"
    )
    for oid, v in ((17, "text"), (1001, [b"a", "b"]), (20, True), (20, b"1"), (25, b"a")):
        with pytest.raises(TypeError):
            _binary(oid, v)


def test_a_pipeline_hands_the_rows_answered_so_far_to_then_mid_pipeline(url: str) -> None:
    """``_pipeline(..., then=(i, f))`` calls ``f`` once, with the connection and the results
    of the prepared steps answered up to step ``i`` (the commit's cache update while the server
    flushes), before the steps after it are read; the rows are then ``f``'s to read. A failure
    at or before step ``i`` never calls ``f``; one after it has called it already."""
    import psycopg

    kv = PgKV(url)
    try:
        with _raw(url) as conn:
            conn.execute(kv._sql.prepare)
            get = kv._sql.prepared[kv._sql.get].encode()
            conn.execute("CREATE TEMP TABLE th (x int)")
            calls: list[Any] = []

            def then(c: Any, results: list[Any]) -> None:
                # the steps after the marked one are not read yet
                rows = [_load_binary(c, r) for r in results]
                calls.append((rows, c.pgconn.pipeline_status))

            steps: list[Any] = ["BEGIN", (get, [b"a"]), "COMMIT", (get, [b"b"]), "SELECT 1"]
            assert _pipeline(conn, steps, None, (2, then)) == []
            assert calls == [([[]], 1)]  # PQ_PIPELINE_ON
            assert _pipeline(conn, steps) == [[], []]
            calls.clear()
            with pytest.raises(psycopg.errors.DivisionByZero):
                _pipeline(conn, ["SELECT 1 / 0", "INSERT INTO th VALUES (1)"], None, (1, then))
            assert calls == []
            with pytest.raises(psycopg.errors.DivisionByZero):
                _pipeline(conn, [(get, [b"a"]), "COMMIT", "SELECT 1 / 0"], None, (1, then))
            assert calls == [([[]], 1)]
            assert conn.pgconn.pipeline_status == 0
    finally:
        kv.close()


def test_a_pipeline_raises_the_first_error_once_every_answer_is_read(url: str) -> None:
    """The server's first error, typed as psycopg types it, after every answer is read: the
    connection is out of pipeline mode and usable; the statements after a Sync ran; a
    connection the server dropped raises ``OperationalError`` and is closed."""
    import psycopg

    kv = PgKV(url)
    try:
        with _raw(url) as conn:
            conn.execute("CREATE TEMP TABLE pl (x int PRIMARY KEY)")
            with pytest.raises(psycopg.errors.DivisionByZero):
                _pipeline(
                    conn,
                    [
                        "SELECT 1 / 0",
                        "INSERT INTO pl VALUES (1)",
                        None,
                        "INSERT INTO pl VALUES (2)",
                    ],
                )
            assert conn.pgconn.pipeline_status == 0
            assert conn.execute("SELECT x FROM pl").fetchall() == [(2,)]
            conn.execute(kv._sql.prepare)
            name = kv._sql.prepared[kv._sql.get].encode()
            assert _pipeline(conn, ["BEGIN", (name, [b"none"]), "COMMIT"]) == [[]]
            with _raw(url) as other:
                other.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
            time.sleep(0.2)
            with pytest.raises(psycopg.OperationalError):
                _pipeline(conn, ["SELECT 1"])
            assert conn.closed
    finally:
        kv.close()


def test_a_connection_without_prepared_statements_reads_and_writes_as_text(url: str) -> None:
    """A pooled connection opened while the table was missing has no prepared statements: its
    round trips go as query strings (``_binary_steps`` gives None), with the same answers."""
    kv = PgKV(url)
    try:
        kv.write(lambda txn: txn.put_many([(b"a", b"1"), (b"b", b"2")]))
        kv._ready.clear()  # as if none of the pool's connections had the statements prepared
        c = _Conn(kv, "BEGIN")
        try:
            assert kv._binary_steps(c.conn, [kv._sql.keys_in([b"a"])]) is None
        finally:
            c.release(failed=False)

        def write(txn: Any) -> None:
            assert txn.get(b"a") == b"1"
            txn.put(b"c", b"3")
            txn.delete(b"b")

        kv.write(write)
        assert kv.point_read([b"a", b"b", b"c"]) == ([b"1", None, b"3"], None)
    finally:
        kv.close()


def test_point_read_row_follows_the_pointer_in_one_statement_binary_or_text(url: str) -> None:
    """``point_read_row`` (format 21's get by id): the pointer's value, the keys built of its
    first 4 bytes and the last pair under a prefix + those bytes, in ONE round trip; the same
    answers on a connection without the prepared statements (a query string), after a dropped
    kept connection, and for an absent pointer (Nones) or one shorter than 4 bytes."""
    kv = PgKV(url + "&pool=1")
    try:
        r = b"\x00\x00\x00\x07"
        kv.write(
            lambda t: t.put_many(
                [(b"p/x", r + b"crc!"), (b"p/s", b"\x07"), (b"h/" + r, b"H")]
                + [(b"v/" + r + bytes([0, n]), b"V%d" % n) for n in (1, 2, 3)]
                + [(b"v/\x00\x00\x00\x08\x00\x01", b"other")]
            )
        )
        want = {
            (1, False): (r + b"crc!", [b"H"], None),
            (1, True): (r + b"crc!", [b"H"], (b"v/" + r + b"\x00\x03", b"V3")),
            (2, False): (r + b"crc!", [b"H", b"V2"], None),
            (2, True): (r + b"crc!", [b"H", b"V2"], (b"v/" + r + b"\x00\x03", b"V3")),
        }
        shapes = {1: [(b"h/", b"")], 2: [(b"h/", b""), (b"v/", b"\x00\x02")]}
        for text in (False, True):
            if text:
                kv._ready.clear()  # as if the kept connection had no prepared statements
            for (n, last), answer in want.items():
                before = kv.round_trips
                assert kv.point_read_row(b"p/x", shapes[n], b"v/" if last else None) == answer
                assert kv.round_trips - before == 1
                assert kv.point_read_row(b"p/none", shapes[n], b"v/" if last else None) == (
                    None,
                    [None] * n,
                    None,
                )
                assert kv.point_read_row(b"p/s", shapes[n], b"v/" if last else None) == (
                    b"\x07",
                    [None] * n,
                    None,
                )
        (conn,) = kv._hot
        with _raw(url) as other:
            other.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        time.sleep(0.2)
        assert kv.point_read_row(b"p/x", shapes[2], b"v/") == want[(2, True)]
    finally:
        kv.close()


def test_point_read_of_one_key_survives_a_dropped_connection(url: str) -> None:
    """The binary point read's errors are the text path's: a kept connection the server
    dropped is replaced once, and the read answers."""
    kv = PgKV(url + "&pool=1")
    try:
        kv.write(lambda txn: txn.put(b"a", b"1"))
        assert kv.point_read([b"a"], b"a") == ([b"1"], (b"a", b"1"))
        (conn,) = kv._hot
        with _raw(url) as other:
            other.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        time.sleep(0.2)
        assert kv.point_read([b"a"], b"a") == ([b"1"], (b"a", b"1"))
    finally:
        kv.close()


def test_a_point_read_refused_by_the_server_raises_a_cortex_error(url: str) -> None:
    """A server error in a get's one-row statement (its table dropped under an open store) is a
    CortexError saying so, no psycopg exception; the read's connection goes back to the
    pool, and the status the fast path compares is libpq's."""
    import psycopg

    from cortex.storage.pgkv import _TUPLES_OK

    assert psycopg.pq.ExecStatus.TUPLES_OK == _TUPLES_OK
    kv = PgKV(url + "&pool=1")
    try:
        kv.write(lambda txn: txn.put_many([(b"a", b"1"), (b"b/1", b"2")]))
        assert kv.point_read([b"a", b"b/1"]) == ([b"1", b"2"], None)
        assert kv.point_read([b"a"], b"b/") == ([b"1"], (b"b/1", b"2"))
        assert kv.point_read([b"x"], b"c/") == ([None], None)
        with _raw(url) as other:
            other.execute(f'DROP TABLE "{kv.table}"')
        for keys, last in (([b"a", b"b/1"], None), ([b"a"], b"b/"), ([b"a"], None)):
            with pytest.raises(CortexError, match="table is gone") as info:
                kv.point_read(keys, last)
            assert not isinstance(info.value, psycopg.Error)
        assert kv._pool.get_stats()["pool_available"] == 1  # given back, not leaked
    finally:
        kv.close()


def test_send_all_waits_on_a_socket_numbered_above_1023(url: str) -> None:
    """A connection whose socket's descriptor is 1024 or more (a process with many files open,
    a server): the wait for the answer works there too (``select.select`` refuses such
    descriptors with a ValueError, which no caller turns into a CortexError)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    fill: list[int] = []
    try:
        while not fill or fill[-1] < 1100:  # every lower descriptor taken: the socket's is high
            fill.append(os.open(os.devnull, os.O_RDONLY))
        with _raw(url) as conn:
            assert conn.pgconn.socket > 1100
            assert _send_all(conn, "SELECT 1; SELECT 2") == [[(1,)], [(2,)]]
            with Cortex.open(url, actor="a", create=True) as cx:
                u = cx.write(Fact(statement="high", subject="s", predicate="p")).uri
                assert cx.resolve(u).data.statement == "high"
    finally:
        for fd in fill:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


class _Interrupt(Exception):
    """What the test's signal handler raises (as Ctrl-C raises KeyboardInterrupt)."""


def test_an_interrupted_point_read_gives_its_connection_back(url: str) -> None:
    """A signal's exception raised in a point read (a get by id) leaves no connection checked
    out: with a pool of one, the next read works at once instead of waiting for the pool's
    timeout and failing."""
    import signal
    import threading

    kv = PgKV(url + "&pool=1")
    try:
        kv.write(lambda txn: txn.put(b"a", b"1"))
        assert kv.point_read([b"a"]) == ([b"1"], None)
        locker = _raw(url)
        locker.execute("BEGIN")
        locker.execute(f'LOCK TABLE "{kv.table}" IN ACCESS EXCLUSIVE MODE')  # reads wait

        def interrupt(signum: int, frame: Any) -> None:
            raise _Interrupt

        old = signal.signal(signal.SIGALRM, interrupt)
        release = threading.Timer(0.5, locker.execute, ("COMMIT",))
        try:
            release.start()
            signal.setitimer(signal.ITIMER_REAL, 0.1)  # raised once the read's C call returns
            with pytest.raises(_Interrupt):
                kv.point_read([b"a"])
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
            release.join()
            locker.close()
        started = time.monotonic()
        assert kv.point_read([b"a"]) == ([b"1"], None)
        assert time.monotonic() - started < 5.0
    finally:
        kv.close()


def test_a_pool_of_one_serves_a_write_after_a_get(url: str) -> None:
    """``pool=1``: the connection a get by id keeps for the next one serves the next write too
    (the pool itself has none left: the write waited for the pool's timeout and failed)."""
    kv = PgKV(url + "&pool=1")
    try:
        started = time.monotonic()
        kv.write(lambda txn: txn.put(b"a", b"1"))
        assert kv.point_read([b"a"]) == ([b"1"], None)
        kv.write(lambda txn: txn.put(b"b", b"2"))
        with kv.read() as txn:
            assert txn.get(b"b") == b"2"
        assert kv.point_read([b"a", b"b"]) == ([b"1", b"2"], None)
        assert time.monotonic() - started < 5.0
    finally:
        kv.close()


def test_pooled_connections_keep_their_prepared_statements(url: str) -> None:
    """Each pooled connection prepares the engine's statements once (``_configure``); a failed
    write's ROLLBACK does not drop them (psycopg, left to prepare its own, would send
    DEALLOCATE ALL), and the next write runs on them."""

    class Boom(Exception):
        pass

    def fail(txn: Any) -> None:
        txn.get(b"a")
        raise Boom

    kv = PgKV(url)
    try:
        kv.write(lambda txn: txn.put(b"a", b"1"))
        with pytest.raises(Boom):
            kv.write(fail)
        kv.write(lambda txn: txn.put(b"b", b"2"))
        with kv._pool.connection() as conn:
            assert kv._names(conn) is kv._sql.prepared
            rows = conn.execute("SELECT name FROM pg_prepared_statements").fetchall()
            assert set(kv._sql.prepared.values()) <= {name for (name,) in rows}
        assert kv.point_read([b"a", b"b"]) == ([b"1", b"2"], None)
    finally:
        kv.close()


def test_a_write_plans_nothing_and_parses_only_its_begin_and_commit(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pooled connections plan the engine's prepared statements once (a generic plan, not a
    custom plan per execution); a write's lock, unlock, asynchronous setting and flush go by
    their prepared names, so BEGIN and COMMIT are its only statements sent as text."""
    from cortex.storage import pgkv

    sent: list[Any] = []
    real = pgkv._pipeline_send

    def spy(pgconn: Any, steps: list[Any]) -> None:
        sent.append(steps)
        real(pgconn, steps)

    kv = PgKV(url)
    try:
        kv.write(lambda txn: txn.put(b"a", b"1"))
        monkeypatch.setattr(pgkv, "_pipeline_send", spy)
        ahead = kv.overlapped
        for i in range(8):
            before = kv.round_trips
            kv.write(lambda txn, i=i: txn.put(b"b", b"%d" % i) if txn.get(b"a") else None)
            # one round trip waited for: the key read is the write cache's
            # (``specs/postgres.md`` §4 item 7)
            assert kv.round_trips - before == 1
        texts = [st for steps in sent for st in steps if isinstance(st, str)]
        assert set(texts) == {"BEGIN ISOLATION LEVEL SERIALIZABLE", "COMMIT"}
        # two pipelines each where the lock, BEGIN and the version read went ahead (before
        # fn), then the commit's; one where they went with it (a busy machine)
        assert len(sent) == 8 + kv.overlapped - ahead
        assert all(st is None or st for steps in sent for st in steps)
        conn = kv._getconn()  # the connection the writes ran on (kept out of the pool)
        try:
            assert conn.execute("SHOW plan_cache_mode").fetchone() == ("force_generic_plan",)
            generic, custom = conn.execute(
                "SELECT sum(generic_plans), sum(custom_plans) FROM pg_prepared_statements "
                "WHERE name LIKE 'cortex%%'"
            ).fetchone()
            assert generic >= 8 * 4 and custom == 0  # the writes ran on this connection
        finally:
            kv._putconn(conn)
        with kv.read() as r:
            assert (r.get(b"a"), r.get(b"b")) == (b"1", b"7")
    finally:
        kv.close()


def test_a_preloaded_prefix_answers_seeks_and_started_scans_as_the_server_does(url: str) -> None:
    """A prefix a preload read whole serves scans and seeks from any start, forward and
    reverse, without a query, and exactly as the server's own scan answers them."""
    keys = [b"e/a/", b"e/a/\x00", b"e/a/1", b"e/a/2", b"e/a/2\xff", b"e/a/3"]
    kv = PgKV(url)
    try:
        kv.write(lambda txn: txn.put_many([(k, b"v" + k) for k in [b"e/", *keys, b"e/b"]]))
        starts = [
            None,
            b"e/",
            b"e/a",
            b"e/a/",
            b"e/a/0",
            b"e/a/2",
            b"e/a/2\x00",
            b"e/a/9",
            b"e/a0",
            b"e/b",
            b"a",
            b"z",
        ]
        with kv.read() as plain:
            plain.get(b"e/")
            want = {
                (st, r): list(plain.scan(b"e/a/", start=st, reverse=r))
                for st in starts
                for r in (False, True)
            }
        with kv.read() as txn:
            txn.get(b"e/")
            txn.preload([], [b"e/a/"])
            before = kv.round_trips
            for (st, r), pairs in want.items():
                assert list(txn.scan(b"e/a/", start=st, reverse=r)) == pairs, (st, r)
                assert [k for k in txn.keys(b"e/a/", start=st, reverse=r)] == [k for k, _ in pairs]
                if st is not None:
                    first = pairs[0][0] if pairs else None
                    assert txn.seek(b"e/a/", st, reverse=r) == first, (st, r)
            assert kv.round_trips == before
    finally:
        kv.close()


def test_collation_does_not_apply_to_bytea(url: str) -> None:
    import psycopg

    with _raw(url) as conn, pytest.raises(psycopg.errors.DatatypeMismatch):
        conn.execute("SELECT '\\x61'::bytea COLLATE \"C\"")


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("postgresql:///db", "names no store"),
        ("postgresql:///db?store=Bad-Name", "not allowed"),
        ("postgresql:///db?store=a&pool=0", "pool"),
    ],
)
def test_bad_urls_are_refused(bad: str, says: str) -> None:
    with pytest.raises(CortexError, match=says):
        parse_url(bad)


def test_the_password_never_shows() -> None:
    u = parse_url("postgresql://me:secret@db.example/x?store=a&sslmode=require")
    assert "secret" not in u.shown and ":***@" in u.shown
    assert "store=" not in u.conninfo and "sslmode=require" in u.conninfo


def test_a_missing_store_is_not_created_without_create(url: str) -> None:
    assert not exists(url)
    with pytest.raises(CortexError, match="no store"):
        PgKV(url, create=False)
    with pytest.raises(CortexError, match="no store"):
        Cortex.open(url, actor="a", readonly=True)


def test_lmdb_page_checks_are_accepted_and_check_nothing(url: str) -> None:
    # check_pages and read_checked are LMDB's file checks (storage.md §9): the server checks
    # its own pages, so the options are accepted and the walks find no damage to report
    with Cortex.open(url, actor="a", check_pages=True) as cx:
        cx.write(Fact(statement="one", subject="s", predicate="p"))
        with cx._kv.read_checked() as txn:
            assert txn.damage == [] and next(txn.keys(b""), None) is not None
        assert cx.verify().ok and cx.stats()["memories"] == 1


def test_an_unreachable_server_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="unreachable"):
        PgKV(f"postgresql:///x?host={tmp_path}&store=a")


# --- the write overlay against a model --------------------------------------------------------

ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("put"),
            st.sampled_from([b"a", b"a1", b"a2", b"ab", b"b", b"b\xff"]),
            st.binary(max_size=3),
        ),
        st.tuples(
            st.just("del"), st.sampled_from([b"a", b"a1", b"a2", b"ab", b"b", b"c"]), st.just(b"")
        ),
        st.tuples(st.just("add"), st.sampled_from([b"a1", b"a3", b"c"]), st.just(b"n")),
    ),
    max_size=12,
)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ops, st.sampled_from([b"", b"a", b"a1", b"b"]), st.sampled_from([None, b"a1", b"a2\x00", b"b"])
)
def test_a_write_transaction_reads_its_own_changes_like_the_model(
    pg_url: Any, script: list[tuple[str, bytes, bytes]], prefix: bytes, start: bytes | None
) -> None:
    kv = PgKV(pg_url())
    # reads every write makes in its first round trip: a key, and the last pair of prefixes
    kv.warm_writes([b"a2", b"zz"], [b"a", b"b", b"d"])
    base = {b"a": b"0", b"a2": b"0", b"b": b"0", b"c": b"0"}
    try:
        kv.write(lambda t: t.put_many(base.items()))
        model = dict(base)

        def fn(t: Any) -> list[Any]:
            seen: list[Any] = []
            for op, k, v in script:
                if op == "put":
                    t.put(k, v)
                    model[k] = v
                elif op == "del":
                    assert t.delete(k) == (k in model)
                    model.pop(k, None)
                else:
                    assert t.add_many([(k, v)]) == (k not in model)
                    model.setdefault(k, v)
                ks = sorted(x for x in model if x.startswith(prefix))
                fwd = [x for x in ks if start is None or x >= start]
                rev = [
                    x
                    for x in ks[::-1]
                    if start is None or not start.startswith(prefix) or x <= start
                ]
                if start is not None and not start.startswith(prefix) and start < prefix:
                    rev = []
                assert list(t.keys(prefix, start=start)) == fwd
                assert [k2 for k2, _ in t.scan(prefix, start=start, reverse=True)] == rev
                assert t.last(prefix) == ((ks[-1], model[ks[-1]]) if ks else None)
                probe = prefix + b"1"
                before = [x for x in ks if x <= probe]
                after = [x for x in ks if x > probe]
                k0, v0, k1 = t.around(prefix, probe)
                assert (k0, k1) == (before[-1] if before else None, after[0] if after else None)
                assert v0 == (model[k0] if k0 is not None else None)
                seen.append(t.get(k))
            return seen

        kv.write(fn)
        with kv.read() as r:
            assert dict(r.scan(b"")) == model
    finally:
        kv.drop()
        kv.close()


# --- retries and failures ---------------------------------------------------------------------


def test_a_serialization_failure_is_retried(
    url: str, kv: PgKV, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transaction outside cortex's lock makes the first try fail; the second commits."""
    monkeypatch.setattr(kv, "_versioned", False)  # no write cache: every read is the server's
    kv.write(lambda t: t.put_many([(b"x", b"0"), (b"y", b"0")]))
    tries = []

    def fn(t: Any) -> None:
        tries.append(1)
        t.get(b"x")  # reads x; writes y
        if len(tries) == 1:
            with _raw(url) as other:  # reads y, writes x, commits first: a cycle
                other.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
                other.execute(f'SELECT v FROM "{kv.table}" WHERE k = %s', (b"y",))
                other.execute(f'UPDATE "{kv.table}" SET v = %s WHERE k = %s', (b"o", b"x"))
                other.execute("COMMIT")
        t.put(b"y", b"1")

    kv.write(fn)
    assert len(tries) == 2 and kv.conflicts == 1
    with kv.read() as r:
        assert (r.get(b"x"), r.get(b"y")) == (b"o", b"1")


def test_endless_conflicts_end_in_a_conflict_error_with_nothing_written(
    url: str, kv: PgKV, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(time, "sleep", lambda s: None)
    monkeypatch.setattr(kv, "_versioned", False)  # no write cache: every read is the server's
    kv.write(lambda t: t.put_many([(b"x", b"0"), (b"y", b"0")]))
    tries = []

    def fn(t: Any) -> None:
        tries.append(1)
        t.get(b"x")
        with _raw(url) as other:
            other.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
            other.execute(f'SELECT v FROM "{kv.table}" WHERE k = %s', (b"y",))
            other.execute(
                f'UPDATE "{kv.table}" SET v = %s WHERE k = %s', (b"%d" % len(tries), b"x")
            )
            other.execute("COMMIT")
        t.put(b"y", b"mine")

    with pytest.raises(ConflictError, match=f"{RETRIES} tries"):
        kv.write(fn)
    assert len(tries) == RETRIES
    with kv.read() as r:
        assert r.get(b"y") == b"0"
    kv.write(lambda t: t.put(b"z", b"1"))  # the lock was released


def test_a_full_disk_is_a_store_full_error_and_writes_nothing(url: str, kv: PgKV) -> None:
    """The server's disk-full error (raised here by a trigger: the same SQLSTATE 53100)."""
    kv.write(lambda t: t.put(b"a", b"1"))
    with _raw(url) as conn:
        conn.execute(
            "CREATE FUNCTION cortex_full() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF NEW.k = '\\x7a'::bytea THEN RAISE EXCEPTION 'could not extend file' "
            "USING ERRCODE = 'disk_full'; END IF; RETURN NEW; END $$"
        )
        conn.execute(
            f'CREATE TRIGGER full_disk BEFORE INSERT OR UPDATE ON "{kv.table}" '
            "FOR EACH ROW EXECUTE FUNCTION cortex_full()"
        )
    try:
        with pytest.raises(StoreFullError, match="out of resources"):
            kv.write(lambda t: t.put_many([(b"b", b"2"), (b"z", b"3")]))
        with kv.read() as r:
            assert dict(r.scan(b"")) == {b"a": b"1"}
        kv.write(lambda t: t.put(b"c", b"4"))  # the writer lock was released
    finally:
        with _raw(url) as conn:
            conn.execute(f'DROP TRIGGER full_disk ON "{kv.table}"')
            conn.execute("DROP FUNCTION cortex_full()")


def test_a_serialization_failure_mid_pipeline_is_retried_whole(url: str, kv: PgKV) -> None:
    """Two reads sent in one round trip (a pipeline); the server cancels the transaction on the
    first of them (SSI: it read a row written by a committed pivot). The whole write is run
    again; nothing of the first try lands."""
    setup = PgKV(url)  # another handle: ``kv`` has no write cache, its reads go to the server
    setup.write(lambda t: t.put_many([(b"h", b"0"), (b"x", b"0"), (b"b", b"0"), (b"p/5", b"0")]))
    setup.close()
    tries: list[int] = []
    reached: list[int] = []

    def fn(t: Any) -> None:
        tries.append(1)
        t.get(b"h")  # the first round trip: the lock, the snapshot, h
        t.put(b"mine", b"%d" % len(tries))
        if len(tries) == 1:
            with _raw(url) as t2, _raw(url) as t3:
                t2.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
                t2.execute(f'SELECT v FROM "{kv.table}" WHERE k = %s', (b"b",))
                t3.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
                t3.execute(f'UPDATE "{kv.table}" SET v = %s WHERE k = %s', (b"3", b"b"))
                t3.execute("COMMIT")  # t2 -> t3, t3 committed first
                t2.execute(f'UPDATE "{kv.table}" SET v = %s WHERE k = %s', (b"2", b"x"))
                t2.execute("COMMIT")  # t2: a committed pivot, writer of x
        before = kv.round_trips
        t.prefetch([b"x"])  # pending: it goes with the next read
        t.around(b"p/", b"p/1")  # reads x (the cancelled statement) and the around, together
        assert kv.round_trips == before + 1
        reached.append(1)

    kv.write(fn)
    assert len(tries) == 2 and len(reached) == 1
    with kv.read() as r:
        assert (r.get(b"mine"), r.get(b"x"), r.get(b"b")) == (b"2", b"2", b"3")


def test_a_write_makes_one_round_trip_in_a_row_and_a_get_one(url: str) -> None:
    """A durable write of one memory after this handle's last: ONE pipeline (the lock, BEGIN,
    the version check, the new head's and new terms' absence check, the changes, COMMIT, the
    new version, the unlock and the flush): everything it reads (the lexical statistics, the
    journal's last entry, the terms' counts, the segments) is the write cache's. Get by id:
    one statement."""
    with Cortex.open(url, actor="a") as cx:
        kv = cx._kv
        assert isinstance(kv, PgKV)
        uris = [
            cx.write(Fact(statement=f"user {i} likes green tea", subject="u", predicate="likes"))
            for i in range(5)
        ]
        for i in range(3):
            before = kv.round_trips
            cx.write(Fact(statement=f"user {i} drinks tea", subject="u", predicate="drinks"))
            assert kv.round_trips - before == 1
        before = kv.round_trips
        assert cx.resolve(uris[2]).data.statement == "user 2 likes green tea"  # type: ignore[union-attr]
        # format 21: one statement, the server following id/ to the row (``point_read_row``)
        assert kv.round_trips - before == 1
        before = kv.round_trips
        assert cx.resolve_latest(uris[3].id).data.statement == "user 3 likes green tea"  # type: ignore[union-attr]
        assert kv.round_trips - before == 1
        assert cx.verify().ok


def test_resolve_latest_returns_the_heads_version_past_a_stray_one(url: str) -> None:
    """A version stored past the one its head points at (``specs/storage.md`` §3, "What a read
    checks"): ``resolve_latest`` returns the head's version as on LMDB (its one statement
    answers the last pair under the row; a second snapshot reads the head's by its key),
    ``history`` refuses it and ``verify`` reports it."""
    from cortex.engine.store import _READ
    from cortex.errors import IntegrityError
    from tests import rows as R

    with Cortex.open(url, actor="a") as cx:
        u = cx.write(Fact(statement="one", subject="u", predicate="p"))
        cx.update(u.id, Fact(statement="two", subject="u", predicate="p"))
        with cx._kv.read() as txn:
            key2 = R.version_key(txn, u.id, 2)
            v2 = bytes(txn.get(key2))
        cx._kv.write(lambda txn: txn.put(key2[:-8] + (3).to_bytes(8, "big"), v2))
        assert _READ is not None
        m = cx.resolve_latest(u.id)
        assert m.version.version == 2 and m.data.statement == "two"  # type: ignore[union-attr]
        with pytest.raises(IntegrityError):
            cx.history(u.id)
        assert not cx.verify().ok


def test_a_small_commit_sends_rows_and_a_larger_one_arrays_and_both_land(
    url: str, kv: PgKV, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Up to 16 puts go as one INSERT of rows of parameters (prepared per count), more as the
    two arrays of ``unnest``; either way every pair lands and an overwrite replaces its value.
    The write's connection is kept for the next transaction (out of the pool) and is idle."""
    from cortex.storage import pgkv

    sent: list[Any] = []
    real = pgkv._pipeline

    def spy(conn: Any, steps: list[Any], *rest: Any) -> list[list[Any]]:
        sent.append(steps)
        return real(conn, steps, *rest)

    monkeypatch.setattr(pgkv, "_pipeline", spy)
    sql = _sql_of(kv)
    for n in (1, 16, 17):
        pairs = [(b"r%02d/%03d" % (n, i), b"v%d" % i) for i in range(n)]
        kv.write(lambda t, pairs=pairs: t.put_many(pairs))
        steps = [sql(st) for st in sent[-1]]
        if n <= 16:
            assert kv._sql.upsert_rows[n] in steps and kv._sql.upsert not in steps
        else:
            assert kv._sql.upsert in steps
    kv.write(lambda t: t.put_many([(b"r16/000", b"new"), (b"r17/016", b"new")]))
    with kv.read() as r:
        assert len(list(r.scan(b"r16/"))) == 16 and len(list(r.scan(b"r17/"))) == 17
        assert (r.get(b"r01/000"), r.get(b"r16/000"), r.get(b"r17/016")) == (
            b"v0",
            b"new",
            b"new",
        )
    assert len(kv._hot) == 1 and kv._hot[0].pgconn.transaction_status == 0  # idle


# --- the write cache (``specs/postgres.md`` §4 item 7) ---------------------------------------


def test_another_writer_makes_the_cache_stale_and_the_next_write_reads_the_server(url: str) -> None:
    """A handle's write reads from its cache only while the store's version is the one its
    last write left: a write by another handle (a process of its own) changes it, so the next
    write's one pipeline fails its version check, writes nothing, and the write runs again
    reading the server: it sees the other handle's value."""
    a, b = PgKV(url), PgKV(url)
    try:
        a.write(lambda t: t.put_many([(b"n", b"1"), (b"j/1", b"x")]))
        before = a.round_trips
        a.write(lambda t: t.put(b"m", b"%d" % (int(t.get(b"n")) + 1)))
        assert a.round_trips - before == 1  # n was the cache's
        b.write(lambda t: t.put(b"n", b"5"))
        tries: list[bytes | None] = []

        def bump(t: Any) -> None:
            n = t.get(b"n")
            tries.append(n)
            t.put(b"m", b"%d" % (int(n) + 1))
            t.put(b"only-once-%d" % len(tries), b"")

        before = a.round_trips
        a.write(bump)
        assert tries == [b"1", b"5"] and a.cache_misses == 1
        # the version read sent ahead found the cache stale (at the commit): fn again in the
        # same transaction, then the read and the commit
        assert a.round_trips - before == 2
        with a.read() as r:
            assert dict(r.scan(b"")) == {
                b"j/1": b"x",
                b"m": b"6",
                b"n": b"5",
                b"only-once-2": b"",  # the failed pipeline wrote nothing
            }
        # the next write in a row skips the cache once (it was stale), then uses it again
        for expect in (2, 1):
            before = a.round_trips
            a.write(lambda t: t.put(b"m", b"%d" % (int(t.get(b"n")) + 1)))
            assert a.round_trips - before == expect
    finally:
        a.close()
        b.close()


def test_a_stale_cache_found_by_a_first_round_trip_reruns_the_write_in_its_transaction(
    url: str,
) -> None:
    """A write that reads a key the cache does not know goes to the server for it (with the
    version): when that shows the cache stale, the write runs again in the same transaction,
    reading the server (the first try's reads from the cache are dropped)."""
    a, b = PgKV(url), PgKV(url)
    try:
        a.write(lambda t: t.put_many([(b"n", b"1"), (b"o", b"1")]))
        b.write(lambda t: t.put(b"n", b"7"))
        b.write(lambda t: t.put(b"z", b"9"))  # not in a's cache
        seen: list[tuple[Any, Any]] = []

        def fn(t: Any) -> None:
            n = t.get(b"n")  # the cache's (stale) value first
            z = t.get(b"z")  # unknown: a round trip, which finds the version changed
            seen.append((n, z))
            t.put(b"s", n + z)

        before = a.round_trips
        a.write(fn)
        # the first try stopped at its read of z (the round trip that found the cache stale)
        assert seen == [(b"7", b"9")] and a.cache_misses == 1
        # the version read sent ahead found it (read with z's round trip), then as without a
        # cache: a read each (nothing prefetched), the commit
        assert a.round_trips - before == 3
        with a.read() as r:
            assert r.get(b"s") == b"79"
    finally:
        a.close()
        b.close()


def test_a_wrong_guess_of_absence_writes_nothing_and_the_write_runs_again(url: str) -> None:
    """Keys under an ``absent`` prefix the cache does not know are guessed absent; the one
    pipeline checks it before any change: a key that exists fails the check, nothing is
    written, and the write runs again without guessing: it reads the keys its cache lacks
    (here one round trip each, as ``fn`` reads them one by one), then commits."""
    setup = PgKV(url)
    setup.write(lambda t: t.put(b"g/old", b"here"))
    setup.close()
    kv = PgKV(url)
    try:
        kv.warm_writes([], [], absent=[b"g/"])
        kv.write(lambda t: t.put(b"x", b"1"))
        seen: list[Any] = []

        def fn(t: Any) -> None:
            seen.append((t.get(b"g/new"), t.get(b"g/old")))
            t.put(b"y", b"%d" % len(seen))

        before = kv.round_trips
        kv.write(fn)
        assert seen == [(None, None), (None, b"here")]
        assert kv.round_trips - before == 4  # the failed pipeline, two reads, the commit
        with kv.read() as r:
            assert dict(r.scan(b"")) == {b"g/old": b"here", b"x": b"1", b"y": b"2"}
        # a new head, put with overwrite=False, is guessed absent too: an existing one refuses
        assert kv.write(lambda t: t.put(b"g/old", b"again", overwrite=False)) is False
        assert kv.write(lambda t: t.put(b"g/3", b"new", overwrite=False)) is True
    finally:
        kv.close()


def test_the_cache_goes_on_past_a_large_commit(url: str) -> None:
    """A commit of ~100 KiB (a fold of the posting segments) goes in the one pipeline, and
    one past 1 MiB as statements of its own, then the ending with the new version: either
    way the cache goes on, so the next write that reads what they wrote needs no read."""
    kv = PgKV(url)
    try:
        kv.write(lambda t: t.put(b"n", b"0"))
        for size, trips in ((100, 1), (1500, 3)):  # KiB; the large one: BEGIN, INSERT, end
            pairs = [(b"big/%04d/%d" % (i, size), b"x" * 1024) for i in range(size)]
            before, ahead = kv.round_trips, kv.overlapped
            kv.write(lambda t, pairs=pairs: t.put_many(pairs))
            if size > 1024:  # the BEGIN went ahead, unless the machine was busy
                trips -= kv.overlapped - ahead
            assert kv.round_trips - before == trips
            before = kv.round_trips
            kv.write(lambda t, k=pairs[-1][0]: t.put(b"n", b"%d" % len(t.get(k))))
            assert kv.round_trips - before == 1  # the key read is the cache's
        with kv.read() as r:
            assert r.get(b"n") == b"1024" and len(list(r.keys(b"big/"))) == 1600
    finally:
        kv.close()


def test_a_stale_cache_and_a_wrong_guess_together_count_as_stale(url: str) -> None:
    """When another writer changed the store and also made a guessed key exist, the write
    runs again without the cache (the version read sent ahead finds it stale before any guess
    is checked) and sees the other writer's key; its first try wrote nothing."""
    a, b = PgKV(url), PgKV(url)
    try:
        a.warm_writes([], [], absent=[b"g/"])
        a.write(lambda t: t.put(b"x", b"1"))
        b.write(lambda t: t.put(b"g/old", b"here"))
        seen: list[Any] = []

        def fn(t: Any) -> None:
            seen.append(t.get(b"g/old"))
            t.put(b"y", b"%d" % len(seen))

        a.write(fn)
        assert seen == [None, b"here"] and a.cache_misses == 1
        with a.read() as r:
            assert dict(r.scan(b"")) == {b"g/old": b"here", b"x": b"1", b"y": b"2"}
    finally:
        a.close()
        b.close()


def test_guesses_that_go_wrong_stop_and_come_back_once_they_would_be_right(url: str) -> None:
    """A handle guesses absent keys only while its guesses are mostly right (issue 16): after
    a wrong one its writes read such keys in their first round trip instead (no re-run of
    ``fn``), and learn from it whether a guess would have been right; once guesses would be
    right again, writes guess again (one round trip each)."""
    setup = PgKV(url)
    setup.write(lambda t: t.put_many([(b"g/%02d" % i, b"old%d" % i) for i in range(20)]))
    setup.close()
    kv = PgKV(url)
    try:
        kv.warm_writes([], [], absent=[b"g/"])
        kv.write(lambda t: t.put(b"x", b"1"))
        runs = 0

        def copy(key: bytes) -> Callable[[Any], None]:
            def fn(t: Any) -> None:
                nonlocal runs
                runs += 1
                t.put(b"y/" + key, t.get(key) or b"none")

            return fn

        before = kv.round_trips
        for i in range(20):  # each reads a key that exists and that the cache does not know
            kv.write(copy(b"g/%02d" % i))
        assert runs == 21  # the first guess was wrong (and ran fn again), no other guess
        assert kv.round_trips - before == 41  # a read and a commit each; the wrong guess 3
        with kv.read() as r:
            assert [r.get(b"y/g/%02d" % i) for i in range(20)] == [b"old%d" % i for i in range(20)]
        runs = 0
        trips = []
        for i in range(40):  # new keys: read, found absent (a guess would have been right)
            before = kv.round_trips
            kv.write(copy(b"g/new%02d" % i))
            trips.append(kv.round_trips - before)
        assert runs == 40 and trips[0] == 2 and trips[-10:] == [1] * 10
        with kv.read() as r:
            assert r.get(b"y/g/new39") == b"none" and r.get(b"g/new39") is None
    finally:
        kv.close()


def test_a_write_of_terms_another_handle_wrote_runs_once_and_counts_them(url: str) -> None:
    """Single writes whose terms exist but are not in the handle's cache (a realistic
    vocabulary: issue 16) run ``fn`` once each but for the first wrong guess, and that wrong
    guess commits nothing stale: every term's count includes both memories."""
    words = ["kestrel", "heron", "osprey", "plover", "curlew", "dunlin", "gannet", "merlin"]
    with Cortex.open(url, actor="a") as b:  # another handle
        b.write_many([Fact(statement=f"the {w} flew", subject="s", predicate="p") for w in words])
    with Cortex.open(url, actor="a") as a:
        a.write(Fact(statement="the first flew", subject="s", predicate="p"))  # a cache
        kv = a._engine._kv
        runs = 0
        write = kv.write

        def counted(fn: Callable[[Any], Any]) -> Any:
            def run(t: Any) -> Any:
                nonlocal runs
                runs += 1
                return fn(t)

            return write(run)

        kv.write = counted  # type: ignore[method-assign]
        for w in words:
            a.write(Fact(statement=f"a {w} again", subject="s", predicate="p"))
        assert runs <= len(words) + 1
        for w in words:
            assert len(a.find(Query(text=w, limit=10)).hits) == 2
        report = a.verify()
        assert report.ok, report.problems


def test_an_error_of_a_write_is_raised_only_once_its_cache_and_guesses_are_confirmed(
    url: str,
) -> None:
    """``fn`` may raise because of a stale cache or a wrong guess (the lexical index found a
    negative count): the error is raised only after one round trip confirms what ``fn`` read;
    else ``fn`` runs again in that transaction, knowing better, and the write goes through."""
    setup = PgKV(url)
    setup.write(lambda t: t.put(b"g/old", b"here"))
    setup.close()
    a, b = PgKV(url), PgKV(url)
    try:
        a.warm_writes([], [], absent=[b"g/"])
        a.write(lambda t: t.put(b"n", b"1"))

        def needs_old(t: Any) -> None:
            if t.get(b"g/old") is None:
                raise ValueError("no g/old")
            t.put(b"y", b"1")

        before = a.round_trips
        a.write(needs_old)  # guessed absent, confirmed present: the second try writes
        assert a.round_trips - before == 2

        def needs_two(t: Any) -> None:
            if t.get(b"n") != b"2":
                raise ValueError("n is not 2")
            t.put(b"z", b"1")

        b.write(lambda t: t.put(b"n", b"2"))
        a.write(needs_two)  # the cache's n=1 was stale: the second try reads 2
        with pytest.raises(ValueError, match="n is not 2"):
            b.write(lambda t: t.put(b"n", b"3"))
            a.write(lambda t: t.put(b"w", b"1"))  # a's cache is current again
            a.write(needs_two)  # a true error, confirmed: raised, nothing written
        with a.read() as r:
            assert (r.get(b"y"), r.get(b"z"), r.get(b"n")) == (b"1", b"1", b"3")
    finally:
        a.close()
        b.close()


def test_sql_outside_cortex_bumps_the_version_and_a_store_without_the_trigger_gets_it(
    url: str,
) -> None:
    """The version is a sequence a statement trigger of the table bumps, whoever changes the
    table: an UPDATE by plain SQL makes the handle's cache stale. A table made without it (by
    an older cortex) gets it when a writable handle opens."""
    kv = PgKV(url)
    table = kv.table
    try:
        kv.write(lambda t: t.put(b"n", b"1"))
        with _raw(url) as conn:
            conn.execute(f'UPDATE "{table}" SET v = %s WHERE k = %s', (b"2", b"n"))
        kv.write(lambda t: t.put(b"m", t.get(b"n")))
        with kv.read() as r:
            assert r.get(b"m") == b"2"
    finally:
        kv.close()
    with _raw(url) as conn:
        conn.execute(f'DROP TRIGGER "{table}_v" ON "{table}"')
        conn.execute(f'DROP SEQUENCE "{table}_v"')
    kv = PgKV(url)
    try:
        assert kv._versioned
        with _raw(url) as conn:
            (n,) = conn.execute(
                "SELECT count(*) FROM pg_trigger WHERE tgname = %s", (f"{table}_v",)
            ).fetchone()
            assert n == 1
        kv.write(lambda t: t.put(b"a", b"1"))
        before = kv.round_trips
        kv.write(lambda t: t.put(b"b", t.get(b"a")))
        assert kv.round_trips - before == 1
    finally:
        kv.close()


def test_without_the_version_a_write_reads_the_server_in_two_round_trips(url: str) -> None:
    """A role that may not make the sequence and its trigger (not the table's owner) keeps no
    write cache: a write is today's two round trips, and right."""
    kv = PgKV(url)
    try:
        kv._versioned = False
        kv.write(lambda t: t.put(b"n", b"1"))
        before = kv.round_trips
        kv.write(lambda t: t.put(b"m", t.get(b"n")))
        assert kv.round_trips - before == 2
    finally:
        kv.close()


def test_interleaved_writers_keep_the_journal_and_counts_right(url: str) -> None:
    """Two handles (a process each, in effect) writing in turns, each one's cache stale at
    every other write: the journal is one chain and ``verify`` (the lexical counts and the
    journal's hashes among its checks) is clean."""
    with Cortex.open(url, actor="a") as a, Cortex.open(url, actor="b") as b:
        for i in range(12):
            for cx in (a, b) if i % 3 else (a, a, b):
                cx.write(Fact(statement=f"user {i} likes tea {i % 4}", subject="u", predicate="p"))
        assert a._kv.cache_misses > 0 and b._kv.cache_misses > 0
    with Cortex.open(url, actor="checker", as_owner=True) as cx:
        seqs = [e.seq for e in cx.journal()]
        assert seqs == list(range(1, len(seqs) + 1))
        report = cx.verify()
        assert report.ok, report.problems
        assert cx.stats()["memories"] == 12 * 2 + 4


def _sql_of(kv: PgKV) -> Any:
    """A pipeline step as SQL: a prepared statement's name as the statement it names."""
    named = {**kv._sql.prepared, **kv._sql.versioned}
    names = {name.encode(): sql for sql, name in named.items()}

    def sql(step: Any) -> Any:
        if isinstance(step, tuple):  # a prepared statement with parameters: its SQL
            return names.get(step[0], step[0])
        return names.get(step, step) if isinstance(step, bytes) else step

    return sql


def test_a_write_releases_the_lock_before_its_flush_and_returns_after_it(
    url: str, kv: PgKV, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ending of a write: an asynchronous COMMIT, then the unlock and a statement whose
    synchronous commit flushes the WAL past the write, in one statement (here the flush also
    records, in a table of its own, whether any writer's lock is held when it runs: none is,
    the unlock ran first)."""
    from cortex.storage import pgkv

    with _raw(url) as conn:
        conn.execute("CREATE TABLE cortex_probe (held int NOT NULL, lsn pg_lsn NOT NULL)")
        conn.execute(
            "CREATE FUNCTION cortex_probe() RETURNS void LANGUAGE sql AS $$ INSERT INTO "
            "cortex_probe SELECT count(*), pg_current_wal_insert_lsn() FROM pg_locks "
            "WHERE locktype = 'advisory' AND granted $$"
        )
    try:
        assert kv._flushes
        probe = "SELECT cortex_probe()"
        monkeypatch.setattr(pgkv, "_FLUSH", probe)
        sent: list[Any] = []
        real = pgkv._pipeline

        def spy(conn: Any, steps: list[Any], *rest: Any) -> list[list[Any]]:
            sent.append(steps)
            return real(conn, steps, *rest)

        monkeypatch.setattr(pgkv, "_pipeline", spy)
        kv.write(lambda t: t.put(b"a", b"1"))
        # the statements without parameters go by their prepared names; the asynchronous
        # setting goes with the read of the new version, in the statement before the COMMIT
        *_, set_async, commit, ending = map(_sql_of(kv), sent[-1])
        assert (set_async, commit) == (kv._sql.currval_async, "COMMIT")
        assert "set_config('synchronous_commit', 'off', true)" in set_async
        assert ending.startswith("SELECT pg_advisory_unlock(")
        assert ending.endswith("), cortex_probe()")
        with _raw(url) as conn:
            held, lsn = conn.execute("SELECT held, lsn FROM cortex_probe").fetchone()
            assert held == 0
            # flushed past the probe's own record when the write returned
            assert conn.execute("SELECT pg_current_wal_flush_lsn() >= %s", (lsn,)).fetchone()[0]
        with kv.read() as r:
            assert r.get(b"a") == b"1"
    finally:
        with _raw(url) as conn:
            conn.execute("DROP FUNCTION cortex_probe()")
            conn.execute("DROP TABLE cortex_probe")


def test_a_write_ends_with_the_unlock_and_the_flush_in_one_statement(url: str, kv: PgKV) -> None:
    """With the flush a SELECT (as it is), the unlock and the flush go as one prepared
    statement after the COMMIT: once the write returns no lock is held and it is there."""
    from cortex.storage import pgkv

    sent: list[Any] = []
    real = pgkv._pipeline

    def spy(conn: Any, steps: list[Any], *rest: Any) -> list[list[Any]]:
        sent.append(steps)
        return real(conn, steps, *rest)

    pgkv._pipeline = spy
    try:
        kv.write(lambda t: t.put(b"a", b"1"))
        kv.write(lambda t: t.put(b"b", b"2"))
    finally:
        pgkv._pipeline = real
    for steps in sent[-2:]:
        *_, commit, ending = map(_sql_of(kv), steps)
        assert commit == "COMMIT"
        assert ending.startswith("SELECT pg_advisory_unlock(")
        assert ending.endswith(", pg_logical_emit_message(true, 'cortex', '')")
        assert isinstance(steps[-1], bytes)  # prepared: sent by its name
    with _raw(url) as conn:
        assert conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
        ).fetchone() == (0,)
    with kv.read() as r:
        assert (r.get(b"a"), r.get(b"b")) == (b"1", b"2")


def test_a_role_that_cannot_flush_commits_synchronously(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the privilege to run the flush statement, a write ends as before: a
    synchronous COMMIT, then the unlock; still two round trips."""
    from cortex.storage import pgkv

    monkeypatch.setattr(pgkv, "_CAN_FLUSH", "false")
    sent: list[Any] = []
    real = pgkv._pipeline

    def spy(conn: Any, steps: list[Any], *rest: Any) -> list[list[Any]]:
        sent.append(steps)
        return real(conn, steps, *rest)

    monkeypatch.setattr(pgkv, "_pipeline", spy)
    kv = PgKV(url)
    try:
        assert not kv._flushes
        kv.write(lambda t: t.put(b"a", b"1"))
        before = kv.round_trips
        kv.write(lambda t: t.put(b"b", b"2") if t.get(b"a") == b"1" else None)
        assert kv.round_trips - before == 1  # the read is the write cache's
        *_, commit, unlock = steps = list(map(_sql_of(kv), sent[-1]))
        assert commit == "COMMIT" and unlock.startswith("SELECT pg_advisory_unlock(")
        assert kv._sql.fixed[pgkv._ASYNC] not in steps and pgkv._FLUSH not in steps
        assert kv._sql.currval_async not in steps and kv._sql.currval in steps
        with kv.read() as r:
            assert (r.get(b"a"), r.get(b"b")) == (b"1", b"2")
    finally:
        kv.close()


def test_a_flush_refused_after_open_still_returns_the_durable_write(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The right to run the flush statement is taken away after the store opened: the write's
    COMMIT and unlock went through, so the write returns (made durable by a transaction of its
    own, whose synchronous commit flushes the WAL), and later writes commit synchronously."""
    from cortex.storage import pgkv

    denied = (
        "DO $$BEGIN RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege', "
        "MESSAGE = 'permission denied for function pg_logical_emit_message'; END$$"
    )
    kv = PgKV(url)
    real = kv._flush_wal
    behind: list[Any] = []

    def flush_wal(cause: BaseException) -> None:
        # the WAL written so far holds the write's commit record (its COMMIT went through):
        # the fallback's flush must pass it (a transaction that only takes an id does not)
        with _raw(url) as conn:
            (lsn,) = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()
        real(cause)
        with _raw(url) as conn:
            behind.append(
                conn.execute("SELECT pg_current_wal_flush_lsn() < %s", (lsn,)).fetchone()[0]
            )

    monkeypatch.setattr(kv, "_flush_wal", flush_wal)
    try:
        assert kv._flushes
        monkeypatch.setattr(pgkv, "_FLUSH", denied)
        kv.write(lambda t: t.put(b"a", b"1"))
        assert not kv._flushes
        assert behind == [False]
        with _raw(url) as conn:  # nothing waits: no lock held, no transaction open
            assert conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
            ).fetchone() == (0,)
        kv.write(lambda t: t.put(b"b", b"2"))
        with kv.read() as r:
            assert (r.get(b"a"), r.get(b"b")) == (b"1", b"2")
    finally:
        kv.close()


def test_an_interrupt_while_committing_says_the_outcome_is_unknown(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An interrupt (a signal's exception) that arrives while the commit is in flight says on
    the exception that PostgreSQL applied the write whole or not at all; the next write works."""
    from cortex.storage import pgkv

    class Interrupt(BaseException):
        pass

    real = pgkv._send_all
    real_pipeline = pgkv._pipeline

    def commit_then_interrupt(conn: Any, query: str, keep: int | None = None) -> Any:
        got = real(conn, query, keep)
        if "COMMIT" in query and "BEGIN" not in query:
            raise Interrupt  # the answer arrived, but the caller never sees it
        return got

    def pipeline_then_interrupt(conn: Any, steps: list[Any], *rest: Any) -> Any:
        got = real_pipeline(conn, steps, *rest)
        if "COMMIT" in steps:  # (with its BEGIN too when the write cache answered every read)
            raise Interrupt
        return got

    kv = PgKV(url)
    try:
        kv.write(lambda txn: txn.put(b"a", b"1"))
        monkeypatch.setattr(pgkv, "_send_all", commit_then_interrupt)
        monkeypatch.setattr(pgkv, "_pipeline", pipeline_then_interrupt)

        def write(txn: Any) -> None:
            txn.get(b"a")
            txn.put(b"b", b"2")

        with pytest.raises(Interrupt) as info:
            kv.write(write)
        assert any("whole or not at all" in n for n in getattr(info.value, "__notes__", []))
        monkeypatch.setattr(pgkv, "_send_all", real)
        monkeypatch.setattr(pgkv, "_pipeline", real_pipeline)
        kv.write(lambda txn: txn.put(b"c", b"3"))
        assert kv.point_read([b"a", b"b", b"c"]) == ([b"1", b"2", b"3"], None)
    finally:
        kv.close()


def test_a_find_makes_a_fixed_number_of_round_trips_not_one_per_hit(url: str) -> None:
    """Find type + tag (limit 10) and a text search: the hits' heads, versions and supersedes
    edges are preloaded together (``Executor.preload``), so the round trips do not grow with
    the hits (here type + tag 5: an index scan's first page of keys holds 32, and the hits'
    last versions come with their heads; text 5, its lists read whole in one preload; the
    superseder check once sent one seek per hit)."""
    with Cortex.open(url, actor="a") as cx:
        kv = cx._kv
        assert isinstance(kv, PgKV)
        cx.write_many(
            NewMemory(
                data=Fact(statement=f"user {i} likes green tea", subject="u", predicate="p"),
                tags=(f"t{i % 3}",),
            )
            for i in range(300)
        )
        for query, most in (
            # format 21: the hits' rows (id/) with their heads and versions, the server
            # following id/ (``_PgRead.preload``'s ``via``): no round trip more than before
            (Query(types=["Fact"], tags=["t1"], limit=10), 5),
            # text: its lists in one preload, the hits' heads in one, their id/ records in
            # one (a head at a row must be that row's memory: ``lexical._ids_of``), then the
            # planner's: 6 (folding that check into the planner's own id/ read would save one)
            (Query(text="user 5 green tea", limit=10), 6),
        ):
            before = kv.round_trips
            assert len(cx.find(query).hits) == 10
            assert kv.round_trips - before <= most, query


def test_a_context_reads_its_candidates_in_chunks_not_one_by_one(url: str) -> None:
    """``context``'s tiers accept their index's candidates in preloaded chunks (8, 32, 128,
    ...), so its round trips grow with the logarithm of the candidates it reads, not with
    them: 60 identities and 60 hard constraints in the pinned tier cost over 600 round trips
    (five per candidate: its row, head, superseder and version, one by one), now fewer than
    30."""
    with Cortex.open(url, actor="a") as cx:
        kv = cx._kv
        assert isinstance(kv, PgKV)
        pinned = {u.id for u in cx.write_many(Identity(name=f"agent {i}") for i in range(60))}
        pinned |= {
            u.id
            for u in cx.write_many(
                Constraint(
                    statement=f"never {i}", polarity="dont", strength="hard", source="user_declared"
                )
                for i in range(60)
            )
        }
        before = kv.round_trips
        bundle = cx.context(verb="find", objects=(), budget_tokens=4000)
        assert kv.round_trips - before < 30
    assert {h.uri.id for h in bundle.hits if h.tier == "pinned"} == pinned


def test_a_text_querys_context_term_reads_each_neighbourhood_together(url: str) -> None:
    """The context term reads the turns around each of a text query's best Events (``planner.
    _neighbours``): on PostgreSQL a side's first turns are preloaded together, not read one by
    one (a head, its row, its superseder and its version, each a round trip)."""
    from datetime import UTC, datetime, timedelta

    from .qsupport import Clock

    clock = Clock(datetime(2024, 5, 8, 13, 56, tzinfo=UTC))
    with Cortex.open(url, actor="a", clock=clock) as cx:
        kv = cx._kv
        assert isinstance(kv, PgKV)
        for i in range(40):
            word = "kayak" if i % 10 == 5 else f"filler{i}"
            cx.write(Event(kind="chat", summary=f"turn {i} about {word}"))
            clock.advance(timedelta(minutes=1))

        def trips(q: str) -> tuple[int, Any]:
            before = kv.round_trips
            res = cx.find(Query(text=q, limit=12))
            return kv.round_trips - before, res

        n, res = trips("kayak")
        assert sum("context" in h.scores for h in res.hits) >= 4  # the neighbours came in
        # the lists and the hits' reads (8), and per best Event two sides of keys and their
        # memories: 4 Events x 2 sides x 2 (22 here; 94 when each turn was read on its own)
        assert n <= 8 + 4 * 2 * 2, n


def test_facets_and_a_hybrid_search_read_their_memories_in_chunks(url: str) -> None:
    """``facets`` reads every memory of its types (the router's entity names come from two of
    them) and a hybrid search checks the lexical list's first 32 for entity names: both read
    their candidates in preloaded chunks on PostgreSQL (``Executor.preloaded`` and
    ``preload``), not five round trips a memory (``search`` over 2,000 memories made 20,185
    round trips and took 4.3 s; a hybrid find 71); the vector index catches up on the
    written memories' vectors in one query."""
    from cortex.index.embed import HashingEmbedder

    with Cortex.open(url, actor="a", embedder=HashingEmbedder(64)) as cx:
        kv = cx._kv
        assert isinstance(kv, PgKV)
        cx.write_many(
            Fact(statement=f"{n} likes tea number {i}", subject=n, predicate="likes")
            for i in range(300)
            for n in (f"person{i % 7}",)
        )
        before = kv.round_trips
        counts = cx.facets(by="subject")
        assert kv.round_trips - before < 60  # was over 1,500
        assert sum(counts.values()) == 300 and len(counts) == 7
        # the first search catches the vector index up from the journal: the written memories'
        # rows and vectors in one query (``sidecar._catch_up``), not two reads a memory
        before = kv.round_trips
        assert len(cx.find(Query(text="person1 likes tea", limit=10)).hits) == 10
        assert kv.round_trips - before <= 20  # was 273
        before = kv.round_trips
        hits = cx.find(Query(text="person3 likes tea", limit=10)).hits
        assert kv.round_trips - before <= 10 and len(hits) == 10  # was 70
    # another process's index is built from the stored vectors: the heads at their rows a
    # chunk at a time (``sidecar._rebuild``), not a read a vector
    with Cortex.open(url, actor="a", embedder=HashingEmbedder(64)) as cx:
        kv = cx._kv
        assert isinstance(kv, PgKV)
        before = kv.round_trips
        assert len(cx.find(Query(text="person2 likes tea", limit=10)).hits) == 10
        assert kv.round_trips - before <= 20  # was 309


def test_a_search_after_a_change_counts_again_only_what_changed(url: str) -> None:
    """``search``'s entity names after an update or a tombstone read the changed memories
    (one preloaded chunk), not every memory again (at 2,000 memories that was 257 round trips
    on PostgreSQL, 310 ms at 20k on LMDB); they stay ``known_entities``'."""
    from cortex.query.search import known_entities

    with Cortex.open(url, actor="a") as cx:
        kv = cx._kv
        assert isinstance(kv, PgKV)
        uris = cx.write_many(
            Fact(statement=f"{n} likes tea number {i}", subject=n, predicate=f"likes{i}")
            for i in range(600)
            for n in (f"person{i % 7}",)
        )
        before = kv.round_trips
        cx.search("what does person1 like?")
        first = kv.round_trips - before
        assert cx._entities is not None and cx._entities.names == known_entities(cx)
        cx.update(uris[1], Fact(statement="Mo likes tea", subject="Mo", predicate="likes1"))
        cx.tombstone(uris[2], reason="gone")
        before = kv.round_trips
        cx.search("what does person1 like?")
        again = kv.round_trips - before
        assert cx._entities.names == known_entities(cx) and "Mo" in cx._entities.names
        before = kv.round_trips
        cx.search("what does person1 like?")  # nothing changed: the names as kept
        plain = kv.round_trips - before
        # the journal's new entries and the two memories: a few round trips (a read of every
        # memory is one a chunk: ``first``)
        assert again - plain <= 4 < first - plain, (first, again, plain)


def test_a_vector_search_with_a_type_filter_preloads_only_that_type(url: str) -> None:
    """The vector index knows each memory's type (``VectorSidecar.types_of``): a vector search
    with a type filter preloads only the candidates of that type (and of types not known),
    not every candidate of the list, and finds what a search without the types known finds."""
    from cortex.engine import sidecar as sidecar_mod
    from cortex.index.embed import HashingEmbedder

    from .vsupport import mixed_types

    with Cortex.open(url, actor="a", embedder=HashingEmbedder(64)) as cx:
        kv = cx._kv
        assert isinstance(kv, PgKV)
        cx.write_many(mixed_types(f"topic{i % 9} tea number {i}" for i in range(300)))
        query = Query(near="topic4 tea number", types=("event",), limit=10)
        first = cx.find(query).uris  # the index built: every type known
        loaded: list[int] = []
        real = _PgRead.preload

        def counted(self: Any, keys: Any, *a: Any, **k: Any) -> Any:
            keys = list(keys)
            loaded.append(len(keys))
            return real(self, keys, *a, **k)

        _PgRead.preload = counted  # type: ignore[method-assign]
        try:
            assert cx.find(query).uris == first
            hinted = sum(loaded)
            loaded.clear()
            real_types = sidecar_mod.VectorSidecar.types_of
            sidecar_mod.VectorSidecar.types_of = (  # type: ignore[method-assign]
                lambda self, ids: [None] * len(ids)
            )
            try:
                assert cx.find(query).uris == first
            finally:
                sidecar_mod.VectorSidecar.types_of = real_types  # type: ignore[method-assign]
            unhinted = sum(loaded)
        finally:
            _PgRead.preload = real  # type: ignore[method-assign]
        assert len(first) == 10 and hinted * 2 < unhinted, (hinted, unhinted)


def test_a_text_search_reads_its_lists_in_one_query_and_scores_them_in_c(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The query terms' posting lists come whole in one preload after the one that reads their
    counts (a list has at most ``df`` blocks), so a text search's round trips do not grow with
    its lists (here 1,500 memories: the common terms' lists are 12 blocks, more than a page of
    a scan; the rare term's one), and the C scorer ranks them exactly as the Python loop does
    (scores to the last bit)."""
    with Cortex.open(url, actor="a") as cx:
        kv = cx._kv
        assert isinstance(kv, PgKV)
        cx.write_many(
            NewMemory(
                data=Fact(
                    statement=f"user {i} likes green tea {'often' if i % 7 else 'rarely'}",
                    subject="u",
                    predicate="p",
                ),
            )
            for i in range(1500)
        )
        trips = set()
        for text in ("user 5 green tea", "rarely tea", "often", "rarely"):
            before = kv.round_trips
            in_c = [(h.memory.id, h.score) for h in cx.find(Query(text=text, limit=10)).hits]
            trips.add(kv.round_trips - before)
            with monkeypatch.context() as m:
                m.setattr(lexical, "_USE_BM25", False)
                in_python = [
                    (h.memory.id, h.score) for h in cx.find(Query(text=text, limit=10)).hits
                ]
            assert len(in_c) == 10
            assert in_c == in_python, text
        assert len(trips) == 1 and trips.pop() <= 6  # the hits' id/ check: one (above)


def test_the_chain_rules_add_one_round_trip_only_when_they_find_a_competitor(url: str) -> None:
    """A Fact with a claim key (``specs/claims.md``): its lookup (and the store's aliases) travel
    with the write's first round trip, so a Fact that competes with nothing costs 2 (the lookup
    of a new claim is not the write cache's); one that supersedes reads what it needs of its
    competitors (head, versions, superseders, the edges between the two) in ONE more, whatever
    the chain's length, and its lookup, read by the write before, is the cache's: 2 too."""
    with Cortex.open(url, actor="a") as cx:
        kv = cx._kv
        assert isinstance(kv, PgKV)

        def trips(fact: Fact) -> tuple[int, str]:
            before = kv.round_trips
            res = cx.write(fact)
            return kv.round_trips - before, res.outcome

        for i in range(3):
            new = Fact(statement="lives in A", subject=f"p{i}", predicate="home_city")
            assert trips(new) == (2, "created")
        for i in range(12):  # a chain that grows past one preloaded page of its claim entries
            moved = Fact(statement=f"lives in B{i}", subject="p0", predicate="home_city")
            assert trips(moved) == (2, "superseded")
        current = [h.memory.data for h in cx.about("p0", "home_city").hits]
        assert [f.statement for f in current] == ["lives in B11"]  # type: ignore[union-attr]
        assert cx.verify().ok


def test_about_a_rare_name_reads_its_memories_not_the_store(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``about`` through the lexical index on PostgreSQL: the scan's hits, in fewer round
    trips than the scan of every memory of its types."""
    from cortex.agent import api

    with Cortex.open(url, actor="a") as cx:
        kv = cx._kv
        assert isinstance(kv, PgKV)
        cx.write_many(
            [Fact(statement=f"s {i}", subject=f"p{i}", predicate="likes") for i in range(300)]
        )
        for i in range(3):
            cx.write(Fact(statement=f"tea {i}", subject="Ada", predicate="likes"))
        before = kv.round_trips
        got = cx.about("ada")
        fast = kv.round_trips - before
        monkeypatch.setattr(api, "_name_terms", lambda name: None)
        before = kv.round_trips
        want = cx.about("ada")
        slow = kv.round_trips - before
        assert got.uris == want.uris and len(got.hits) == 3
        assert fast < slow, (fast, slow)


def _cluster(pg_server: Any) -> Any:
    if pg_server.cluster is None:
        pytest.skip("CORTEX_PG_URL names an outside server: it is not ours to stop")
    return pg_server.cluster


def test_a_server_restart_is_survived_by_an_open_store(pg_server: Any, url: str) -> None:
    cluster = _cluster(pg_server)
    with Cortex.open(url, actor="a") as cx:
        first = cx.write(Fact(statement="before", subject="s", predicate="p"))
        assert cx.resolve(first).data.statement == "before"  # type: ignore[union-attr]
        assert len(cx._kv._hot) == 1  # a get keeps its connection for the next one
        cluster.stop_server("fast")
        with pytest.raises(EngineError):
            cx.write(Fact(statement="while down", subject="s", predicate="p"))
        with pytest.raises(EngineError):
            cx.resolve(first)
        cluster.start_server()
        # the pooled connections are dead: each is replaced on its first query
        assert cx.resolve(first).data.statement == "before"  # type: ignore[union-attr]
        cx.write(Fact(statement="after", subject="s", predicate="p"))
        assert cx.stats()["memories"] == 2
        assert cx.verify().ok


def test_a_write_sends_ahead_only_while_that_pays(url: str) -> None:
    """A write with the cache sends its lock, BEGIN and version read ahead of fn while most
    such writes need no read round trip, and while their answers came in beside fn; where
    they did not (a busy machine), one write in 16 still does, to see whether they do again."""
    kv = PgKV(url)
    try:
        assert kv._sends_ahead()
        for _ in range(16):
            kv._ahead_note(False, late=True)
        assert sum(kv._sends_ahead() for _ in range(64)) == 4
        for _ in range(16):
            kv._ahead_note(False, late=False)
        assert kv._sends_ahead()
        for _ in range(16):
            kv._ahead_note(True)  # reads of their own: the first read carries the lock
        assert not any(kv._sends_ahead() for _ in range(64))
    finally:
        kv.close()


def test_a_write_sending_ahead_on_a_connection_a_restart_killed_is_retried(
    pg_server: Any, url: str
) -> None:
    """A write that sends its lock, BEGIN and version read ahead (its handle has a cache) on a
    pooled connection the server's restart killed: the connection is replaced and the write
    goes through as if nothing had gone ahead."""
    cluster = _cluster(pg_server)
    kv = PgKV(url)
    try:
        kv.write(lambda t: t.put(b"a", b"1"))
        kv.write(lambda t: t.put(b"b", t.get(b"a")))  # the cache answers: sent ahead
        assert kv.overlapped == 1
        cluster.stop_server("fast")
        cluster.start_server()
        kv.write(lambda t: t.put(b"c", t.get(b"b")))
        with kv.read() as r:
            assert dict(r.scan(b"")) == {b"a": b"1", b"b": b"1", b"c": b"1"}
        assert not any(c.closed for c in kv._hot)
    finally:
        kv.close()


def test_a_vector_index_drops_writes_the_server_lost(pg_server: Any, url: str) -> None:
    """A write is visible before its WAL flush (specs/postgres.md §4): a crash of the server in
    between loses it, and its journal position goes to a later write. A handle whose vector
    index already held the lost write checks the journal at its watermark after the server's
    restart and rebuilds: the lost memory is not found, the one written in its place is.

    The lost write is made by restoring the table as it was before it (what recovery leaves),
    then the server is stopped as if it crashed and started again."""
    from cortex.index.embed import HashingEmbedder

    cluster = _cluster(pg_server)
    table = PgKV(url)
    name = table.table
    table.close()
    with Cortex.open(url, actor="a", embedder=HashingEmbedder()) as cx:
        cx.write(Fact(statement="the first kite is red", subject="s", predicate="p"))
        assert len(cx.find(Query(near="red kite", limit=5)).hits) == 1
        with _raw(url) as conn:
            conn.execute(f'CREATE TABLE snap AS SELECT * FROM "{name}"')
        lost = cx.write(Fact(statement="a lost write about zebras", subject="s", predicate="p")).uri
        hits = cx.find(Query(near="lost write about zebras", limit=5)).hits
        assert lost in [h.uri for h in hits]  # the index holds it now
        with _raw(url) as conn:  # what recovery leaves after a crash before its flush
            conn.execute(f'DELETE FROM "{name}"')
            conn.execute(f'INSERT INTO "{name}" SELECT * FROM snap')
            conn.execute("DROP TABLE snap")
        with Cortex.open(url, actor="a", embedder=HashingEmbedder()) as other:
            later = other.write(
                Fact(statement="a later write about zebras", subject="s", predicate="p")
            ).uri
        cluster.stop_server("immediate")
        cluster.start_server()
        hits = cx.find(Query(near="a write about zebras", limit=5)).hits
        uris = [h.uri for h in hits]
        assert lost not in uris and later in uris
        assert cx._sidecar is not None and "lost writes" in cx._sidecar.state


def test_an_immediate_stop_mid_writes_keeps_every_acknowledged_write(
    pg_server: Any, url: str
) -> None:
    """``pg_ctl stop -m immediate`` (a crash of the server) under a writer; after recovery
    every acknowledged write is there, whole, and verify is clean."""
    cluster = _cluster(pg_server)
    Cortex.open(url, actor="init").close()
    all_acked: set[str] = set()
    for round_ in range(3):
        with Child(workers.command("steady_pg_writer", url)) as child:
            child.wait_for("ready")
            time.sleep(0.3 + 0.2 * round_)
            cluster.stop_server("immediate")
            deadline = time.monotonic() + 60
            while child.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            reports = child.kill()
        cluster.start_server()
        errors = [r for r in reports if r["op"] == "error"]
        assert len(errors) == 1 and errors[0]["kind"] == "EngineError", child.stderr()
        acked = [r for r in reports if r["op"] == "write"]
        assert acked, "the writer wrote nothing before the stop"
        all_acked.update(r["uri"] for r in acked)
        # the checker audits every writer's memories: it opens as the owner (query.md §3)
        with Cortex.open(url, actor="checker", as_owner=True) as cx:
            for r in acked:
                m = cx.resolve(r["uri"])
                assert m.data == workers.fact_for(7, r["i"], 0)
                assert f"s{r['i']}" in m.head.tags
            # at most the one write in flight may have landed unacknowledged
            assert 0 <= cx.stats()["memories"] - len(all_acked) <= round_ + 1
            report = cx.verify()
            assert report.ok, report.problems


def test_a_server_stop_after_a_writes_reads_leaves_nothing_of_it(pg_server: Any, url: str) -> None:
    """The server stops (immediate: a crash) after the write's reads, before its commit: the
    write fails with an EngineError and none of it is there after recovery."""
    cluster = _cluster(pg_server)
    kv = PgKV(url)
    try:
        kv.write(lambda t: t.put_many([(b"a", b"0"), (b"j/1", b"e1")]))
        kv.warm_writes([b"a"], [b"j/"])

        def fn(t: Any) -> None:
            assert t.get(b"a") == b"0"
            assert next(t.scan(b"j/", reverse=True)) == (b"j/1", b"e1")
            t.put_many([(b"a", b"1"), (b"j/2", b"e2"), (b"z", b"9")])
            cluster.stop_server("immediate")

        with pytest.raises(EngineError):
            kv.write(fn)
        cluster.start_server()
        with kv.read() as r:
            assert dict(r.scan(b"")) == {b"a": b"0", b"j/1": b"e1"}
        kv.write(lambda t: t.put(b"j/2", b"e2"))  # the lock went with the lost session
        with kv.read() as r:
            assert r.get(b"j/2") == b"e2"
    finally:
        kv.close()


# --- many processes, one store ----------------------------------------------------------------


def test_several_processes_write_and_search_one_store(url: str) -> None:
    Cortex.open(url, actor="owner").close()
    names = [f"p{i}" for i in range(4)]
    procs = [
        subprocess.Popen(
            workers.command("shared_writer", url, name, 25),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for name in names
    ]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()
        outs.append([json.loads(line) for line in out.decode().splitlines()])
    uris = [r["uri"] for out in outs for r in out if r["op"] == "write"]
    assert len(uris) == 100 and len({u.split("#")[0] for u in uris}) == 100
    from cortex.index.embed import HashingEmbedder

    with Cortex.open(url, actor="checker", as_owner=True, embedder=HashingEmbedder(64)) as cx:
        assert cx.stats()["memories"] == 100
        assert all(u.endswith("#1") for u in uris)
        seqs = [e.seq for e in cx.journal()]
        assert seqs == list(range(1, len(seqs) + 1))  # one chain, no gaps, no forks
        report = cx.verify()
        assert report.ok, report.problems
        # each process's writes are found by a search here (the index caught up from the journal)
        for name in names:
            hits = cx.find(Query(near=f"{name} wrote note 3 about kites", limit=1))
            assert hits.memories[0].head.tags == (name,)


def test_a_write_in_one_process_is_found_by_the_next_search_in_another(url: str) -> None:
    from cortex.index.embed import HashingEmbedder

    with Cortex.open(url, actor="reader", embedder=HashingEmbedder(64)) as cx:
        cx.write(Fact(statement="green tea in the morning", subject="u", predicate="likes"))
        assert cx.find(Query(near="green tea", limit=1)).hits  # the index is built here
        out = subprocess.run(
            workers.command("shared_writer", url, "other", 1),
            capture_output=True,
            timeout=120,
            check=True,
        )
        uri = [json.loads(x) for x in out.stdout.decode().splitlines()][1]["uri"]
        got = cx.find(Query(near="other wrote note 0 about kites", limit=1))
        assert str(got.uris[0]) == uri


# --- copying between engines ------------------------------------------------------------------


def _fill(where: Any) -> None:
    with Cortex.open(where, actor="agent") as cx:
        uris = cx.write_many(
            Fact(statement=f"fact {i} about rivers", subject="s", predicate="p") for i in range(30)
        )
        cx.update(uris[0], Fact(statement="fact 0 changed", subject="s", predicate="p"))
        cx.tombstone(uris[1], "gone")
        cx.add_edge(uris[2], "references", uris[3])


def _all(where: Any) -> dict[bytes, bytes]:
    kv = open_kv(where, create=False)
    try:
        with kv.read() as r:
            return dict(r.scan(b""))
    finally:
        kv.close()


def test_cortex_copy_lmdb_to_postgres_and_back(tmp_path: Path, url: str, pg_url: Any) -> None:
    src = tmp_path / "src"
    _fill(src)
    cli = [workers.sys.executable, "-m", "cortex"]
    out = subprocess.run(
        [*cli, "--json", "copy", str(src), url], capture_output=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr.decode()
    assert json.loads(out.stdout)["records"] == len(_all(src))
    back = tmp_path / "back"
    out = subprocess.run(
        [*cli, "copy", url, str(back)], capture_output=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr.decode()
    assert b"exports identical" in out.stdout
    assert _all(src) == _all(url) == _all(back)
    # a copy into a store that holds records is refused, and changes nothing
    again = subprocess.run(
        [*cli, "copy", str(src), url], capture_output=True, timeout=120, check=False
    )
    assert again.returncode != 0 and b"holds records" in again.stderr
    assert _all(url) == _all(src)
    with Cortex.open(url, actor="checker", as_owner=True) as cx:
        assert cx.verify().ok


def test_a_failed_copy_into_postgres_leaves_nothing(tmp_path: Path, url: str) -> None:
    src = tmp_path / "src"
    _fill(src)
    kv = open_kv(src, readonly=True, create=False)
    real = kv.read

    class Boom(Exception):
        pass

    def broken() -> Any:
        ctx = real()

        class Ctx:
            def __enter__(self) -> Any:
                txn = ctx.__enter__()

                class T:
                    def keys(self, p: bytes) -> Any:
                        return txn.keys(p)

                    def scan(self, p: bytes) -> Any:
                        for i, pair in enumerate(txn.scan(p)):
                            if i == 50:
                                raise Boom
                            yield pair

                return T()

            def __exit__(self, *a: Any) -> None:
                ctx.__exit__(*a)

        return Ctx()

    kv.read = broken  # type: ignore[method-assign]
    try:
        with pytest.raises(Boom):
            copy_kv(kv, url)
    finally:
        kv.close()
    assert _all(url) == {}


def test_backup_of_a_postgres_store_is_an_lmdb_copy(tmp_path: Path, url: str) -> None:
    _fill(url)
    with Cortex.open(url, actor="a") as cx:
        assert cx.backup(tmp_path / "b").ok
    assert _all(tmp_path / "b") == _all(url)


def test_preload_serves_gets_and_short_prefixes_without_queries(url: str) -> None:
    """``preload`` (read snapshots of the PostgreSQL engine): keys and prefixes of at most 8
    pairs in one query; the reads that follow need none; a longer prefix still scans right."""
    kv = PgKV(url)
    try:
        kv.write(
            lambda txn: txn.put_many(
                [(b"h/%d" % i, b"v%d" % i) for i in range(5)]
                + [(b"e/a/%d" % i, b"x") for i in range(3)]
                + [(b"e/b/%02d" % i, b"y") for i in range(12)]
            )
        )
        with kv.read() as txn:
            assert txn.get(b"h/0") == b"v0"  # begins the snapshot
            before = kv.round_trips
            txn.preload([b"h/1", b"h/2", b"h/9"], [b"e/a/", b"e/b/", b"e/c/"])
            assert kv.round_trips - before == 1
            assert [txn.get(k) for k in (b"h/1", b"h/2", b"h/9")] == [b"v1", b"v2", None]
            assert [k for k, _ in txn.scan(b"e/a/")] == [b"e/a/0", b"e/a/1", b"e/a/2"]
            assert list(txn.scan(b"e/c/")) == []
            assert next(k for k, _ in txn.scan(b"e/a/", reverse=True)) == b"e/a/2"
            assert kv.round_trips - before == 1  # all of it from the preload
            assert len(list(txn.scan(b"e/b/"))) == 12  # longer than 8: read again
            assert kv.round_trips - before > 1
    finally:
        kv.close()
