"""Independent tests of the PostgreSQL engine, written from specs/postgres.md and issue 16.

Each test names the section of ``specs/postgres.md`` it checks (§1 the URL, §2 the table, §3
reads, §4 writes, §5 copying, §6 purge) and runs against a real server: the session's private
cluster (``pg_server`` / ``pg_url`` of tests/conftest.py), or, for the tests that stop and
restart the server or read its statement log, a second private cluster of this module's own.
CORTEX_PG_REQUIRED=1 (or CI) makes them fail instead of skip.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cortex import ConflictError, Cortex, CortexError, Fact, JournalKind, NewMemory, Query
from cortex.cli.app import main
from cortex.storage.engines import copy_kv, open_kv
from tests import pgserver, workers

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parent.parent


# --- helpers ----------------------------------------------------------------------------------


def _conninfo(url: str) -> str:
    """The libpq connection string of a store URL (as tests/conftest.py reads it)."""
    from cortex.storage.pgkv import parse_url

    return parse_url(url).conninfo


def _store_of(url: str) -> str:
    m = re.search(r"[?&]store=([a-z0-9_]+)", url)
    assert m is not None
    return m.group(1)


def _sql(url: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    """Run one statement with plain psycopg (autocommit) on ``url``'s database."""
    import psycopg

    with psycopg.connect(_conninfo(url), autocommit=True) as conn:
        cur = conn.execute(query, params or None)
        return list(cur.fetchall()) if cur.description is not None else []


def _terminate(url: str, app: str) -> None:
    """End every server process of ``app``'s connections (not this one), then let it die."""
    _sql(
        url,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE application_name = %s AND pid <> pg_backend_pid()",
        app,
    )
    time.sleep(0.2)


def _with(url: str, **params: str) -> str:
    """``url`` with more query parameters."""
    extra = "&".join(f"{k}={v}" for k, v in params.items())
    return f"{url}&{extra}"


def _fact(i: int, tag: str = "t", size: int = 0) -> Fact:
    return Fact(
        statement=f"statement {tag} {i}",
        subject=f"s{i % 7}",
        predicate="p",
        object=("o" * size) or None,
    )


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _seqs(cx: Cortex) -> list[int]:
    return [e.seq for e in cx.journal()]


# --- a private cluster of this module's own (stopped and restarted by the crash tests) ---------


class _Own:
    def __init__(self, cluster: pgserver.PgCluster) -> None:
        self.cluster = cluster
        self.n = 0

    def url(self) -> str:
        self.n += 1
        return self.cluster.url(f"own{os.getpid()}_{self.n}")


@pytest.fixture(scope="module")
def own(pg_server: Any) -> Iterator[_Own]:
    """A second private cluster (unix socket only) with every statement logged."""
    bindir = pgserver.find_bin()
    if bindir is None:  # pragma: no cover - CORTEX_PG_URL without local binaries
        if pgserver.required():
            pytest.fail("these tests need PostgreSQL's server binaries to run their own cluster")
        pytest.skip("no PostgreSQL server binaries for a private cluster")
    cluster = pgserver.PgCluster(bindir).start()
    import psycopg

    with psycopg.connect(cluster.conninfo(), autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET log_statement = 'all'")
        conn.execute("ALTER SYSTEM SET log_line_prefix = '<%a> '")
        conn.execute("SELECT pg_reload_conf()")
    time.sleep(0.3)
    try:
        yield _Own(cluster)
    finally:
        cluster.stop()


def _logged(own: _Own, app: str) -> list[str]:
    """The statements the server logged for connections named ``app`` (application_name)."""
    time.sleep(0.05)
    text = own.cluster.log.read_text(errors="replace") if own.cluster.log.exists() else ""
    return [line for line in text.splitlines() if line.startswith(f"<{app}> LOG:  ")]


# === §1 The URL ================================================================================


def test_s1_url_opens_the_store_by_api_and_cli(pg_url: Callable[[], str]) -> None:
    """§1: ``Cortex.open("postgresql://...?store=NAME")`` and ``cortex --store URL`` name one
    store; ``postgres://`` is accepted too."""
    url = pg_url()
    assert main(["--store", url, "init"]) == 0
    with Cortex.open(url, actor="a") as cx:
        r = cx.write(_fact(1))
    assert main(["--store", url, "verify"]) == 0
    alias = url.replace("postgresql://", "postgres://", 1)
    assert alias.startswith("postgres:///")
    with Cortex.open(alias, actor="a", create=False) as cx:
        assert cx.resolve(r).data == _fact(1)
        assert cx.verify().ok
    table = f"cortex_{_store_of(url)}"
    assert _sql(url, "SELECT to_regclass(%s) IS NOT NULL", table) == [(True,)]


@pytest.mark.parametrize(
    "name",
    ["", "Agent", "1agent", "a-b", "a.b", "a%20b", "_a", "é", "a" * 49, "a;drop"],
)
def test_s1_bad_store_names_are_refused(pg_server: Any, name: str) -> None:
    """§1: ``store`` matches ``[a-z][a-z0-9_]{0,47}``; anything else is a CortexError naming
    the parameter, and no table is made."""
    url = pg_server.url(name)
    with pytest.raises(CortexError, match="store"):
        Cortex.open(url, actor="a")
    rows = _sql(
        pg_server.url("x"),
        "SELECT count(*) FROM pg_class WHERE relname = %s",
        f"cortex_{name}",
    )
    assert rows == [(0,)]


def test_s1_store_parameter_is_required(pg_server: Any) -> None:
    """§1: ``store`` is required."""
    base = pg_server.url("x").replace("&store=x", "")
    with pytest.raises(CortexError, match="store"):
        Cortex.open(base, actor="a")
    with pytest.raises(CortexError, match="store"):
        open_kv(base)


def test_s1_longest_store_name_is_accepted(pg_server: Any) -> None:
    """§1: up to 48 characters (``[a-z][a-z0-9_]{0,47}``), digits and ``_`` after the first."""
    name = "z" + "9_" * 23 + "q"
    assert len(name) == 48
    try:
        with Cortex.open(pg_server.url(name), actor="a") as cx:
            cx.write(_fact(1))
            assert cx.verify().ok
    finally:
        pg_server.drop(name)


@pytest.mark.parametrize("pool", ["0", "1001", "-1", "x", ""])
def test_s1_bad_pool_is_refused(pg_url: Callable[[], str], pool: str) -> None:
    """§1: ``pool`` is 1..1000."""
    with pytest.raises(CortexError, match="pool"):
        Cortex.open(_with(pg_url(), pool=pool), actor="a")


def test_s1_pool_of_one_serves_a_handle(pg_url: Callable[[], str]) -> None:
    """§1: ``pool=1`` caps the process's connections at one, and everything still works."""
    url = _with(pg_url(), pool="1", application_name="specpool1")
    with Cortex.open(url, actor="a") as cx:
        ids = [cx.write(_fact(i)).id for i in range(5)]
        assert len(cx.find(Query(types=("Fact",), limit=10)).hits) == 5
        assert [cx.resolve_latest(i).id for i in ids] == ids
        n = _sql(
            url,
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'specpool1' "
            "AND pid <> pg_backend_pid()",
        )
        assert n[0][0] <= 1


def test_s1_other_parameters_go_to_libpq(pg_url: Callable[[], str]) -> None:
    """§1: every other query parameter is passed to libpq unchanged (application_name)."""
    url = _with(pg_url(), application_name="cortexspec1")
    with Cortex.open(url, actor="a") as cx:
        cx.write(_fact(1))
        rows = _sql(
            url, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'cortexspec1'"
        )
        assert rows[0][0] >= 1


def test_s1_a_parameter_libpq_refuses_is_a_cortex_error(pg_url: Callable[[], str]) -> None:
    """§1 with the standards: a URL libpq rejects is a CortexError naming the parameter."""
    t0 = time.monotonic()
    with pytest.raises(CortexError, match="nosuchoption"):
        Cortex.open(_with(pg_url(), nosuchoption="1"), actor="a")
    assert time.monotonic() - t0 < 5


@pytest.mark.parametrize("param", ["connect_timeout=soon", "sslmode=bogus"])
def test_s1_a_bad_libpq_value_names_the_parameter(pg_url: Callable[[], str], param: str) -> None:
    """§1 "Every other query parameter is passed to libpq unchanged" with the standards (bad
    input gets a clear CortexError naming what to fix): refused at once, the parameter named,
    not blamed on the server."""
    name, value = param.split("=")
    t0 = time.monotonic()
    with pytest.raises(CortexError) as got:
        Cortex.open(_with(pg_url(), **{name: value}), actor="a")
    assert time.monotonic() - t0 < 5
    assert name in str(got.value)
    assert "unreachable" not in str(got.value)


def test_s1_password_is_never_shown(pg_server: Any, pg_url: Callable[[], str]) -> None:
    """§1: the password is never shown: ``Store.path`` and messages show ``:***@``."""
    url = pg_url().replace("postgresql:///", "postgresql://cortex:s3cretpw@/", 1)
    with Cortex.open(url, actor="a") as cx:
        assert "s3cretpw" not in str(cx.path)
        assert ":***@" in str(cx.path)
        assert "s3cretpw" not in repr(cx.engine.path)
    bad = url.replace("store=", "store=BAD", 1)
    with pytest.raises(CortexError) as got:
        Cortex.open(bad, actor="a")
    assert "s3cretpw" not in str(got.value)
    missing = url.replace("store=", "store=zz_missing_", 1)
    with pytest.raises(CortexError) as got:
        Cortex.open(missing, actor="a", create=False)
    assert "s3cretpw" not in str(got.value)


def test_s1_unreachable_server_is_a_cortex_error(tmp_path: Path) -> None:
    """§4 item 6 / issue: a refused connection gives a clear CortexError (never psycopg's)."""
    url = f"postgresql://cortex:pw@/postgres?host={tmp_path}&port=5999&store=nothere"
    t0 = time.monotonic()
    with pytest.raises(CortexError) as got:
        Cortex.open(url, actor="a")
    assert time.monotonic() - t0 < 60
    assert "pw@" not in str(got.value)
    assert type(got.value).__module__.startswith("cortex")


def test_s1_two_stores_in_one_database_are_independent(pg_url: Callable[[], str]) -> None:
    """§1: each store is its own table: writes, journals, finds and verify do not mix."""
    a, b = pg_url(), pg_url()
    with Cortex.open(a, actor="a") as ca, Cortex.open(b, actor="a") as cb:
        ids_a = [ca.write(_fact(i, "alpha")).id for i in range(4)]
        ids_b = [cb.write(_fact(i, "beta")).id for i in range(2)]
        hits_a = ca.find(Query(text="alpha", limit=10)).hits
        assert {h.memory.head.id for h in hits_a} == set(ids_a)
        assert cb.find(Query(text="alpha", limit=10)).hits == ()
        assert {h.memory.head.id for h in cb.find(Query(types=("Fact",), limit=10)).hits} == set(
            ids_b
        )
        assert len(_seqs(ca)) == 5 and len(_seqs(cb)) == 3  # init + writes
        assert ca.verify().ok and cb.verify().ok
        assert ca.stats()["memories"] == 4 and cb.stats()["memories"] == 2


def test_s1_missing_store_is_not_made_by_readonly_or_create_false(
    pg_url: Callable[[], str],
) -> None:
    """§2: a read-only open or ``create=False`` of a missing table fails with "no store at"."""
    url = pg_url()
    with pytest.raises(CortexError, match="no store at"):
        Cortex.open(url, actor="a", readonly=True)
    with pytest.raises(CortexError, match="no store at"):
        Cortex.open(url, actor="a", create=False)
    with pytest.raises(CortexError, match="no store at"):
        open_kv(url, create=False)
    assert _sql(url, "SELECT to_regclass(%s)", f"cortex_{_store_of(url)}") == [(None,)]


def test_s1_readonly_handle_refuses_writes(pg_url: Callable[[], str]) -> None:
    """README (replicas): a store opened ``readonly=True`` reads; writes fail with a clear
    CortexError and change nothing."""
    url = pg_url()
    with Cortex.open(url, actor="a") as cx:
        r = cx.write(_fact(1))
    with Cortex.open(url, actor="a", readonly=True) as ro:
        assert ro.resolve(r).data == _fact(1)
        with pytest.raises(CortexError):
            ro.write(_fact(2))
    with Cortex.open(url, actor="a") as cx:
        assert cx.stats()["memories"] == 1


# === §2 The table ==============================================================================


def test_s2_table_sequence_and_trigger(pg_url: Callable[[], str]) -> None:
    """§2: ``cortex_NAME (k bytea PRIMARY KEY, v bytea NOT NULL)``, a sequence ``cortex_NAME_v``
    owned by it starting in [1, 2^62), and a statement trigger ``cortex_NAME_v`` that bumps it
    on every change, whoever makes it; ``COLLATE`` does not apply to bytea."""
    url = pg_url()
    t = f"cortex_{_store_of(url)}"
    with Cortex.open(url, actor="a") as cx:
        cx.write(_fact(1))
    cols = _sql(
        url,
        "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
        "WHERE table_name = %s ORDER BY ordinal_position",
        t,
    )
    assert cols == [("k", "bytea", "NO"), ("v", "bytea", "NO")]
    pk = _sql(
        url,
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
        "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary",
        t,
    )
    assert pk == [("k",)]
    owned = _sql(
        url,
        "SELECT d.refobjid::regclass::text FROM pg_depend d "
        "WHERE d.objid = %s::regclass AND d.deptype = 'a'",
        f"{t}_v",
    )
    assert owned == [(t,)]
    start = _sql(url, "SELECT start_value FROM pg_sequences WHERE sequencename = %s", f"{t}_v")
    assert 1 <= start[0][0] < 2**62
    trig = _sql(
        url,
        "SELECT tgname, tgtype FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal",
        t,
    )
    assert [n for n, _ in trig] == [f"{t}_v"]
    tgtype = trig[0][1]
    assert tgtype & 1 == 0  # FOR EACH STATEMENT
    assert tgtype & 2  # BEFORE
    assert tgtype & (4 | 8 | 16 | 32) == 4 | 8 | 16 | 32  # INSERT, DELETE, UPDATE, TRUNCATE
    before = _sql(url, f'SELECT last_value FROM "{t}_v"')[0][0]
    _sql(url, f"UPDATE \"{t}\" SET v = v WHERE k = '\\x00'::bytea")  # changes no row
    after = _sql(url, f'SELECT last_value FROM "{t}_v"')[0][0]
    assert after > before  # every statement that may change the table bumps it
    import psycopg

    with pytest.raises(psycopg.Error):
        _sql(url, f'SELECT k COLLATE "C" FROM "{t}" LIMIT 1')


def _boundary_keys() -> list[bytes]:
    alphabet = [0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF]
    keys = {bytes([a]) for a in alphabet}
    keys |= {bytes([a, b]) for a in alphabet for b in alphabet}
    keys |= {bytes([a, b, c]) for a in alphabet for b in alphabet for c in alphabet}
    keys |= {
        bytes([a, b, c, d])
        for a in alphabet[::2]
        for b in alphabet
        for c in alphabet
        for d in alphabet[1::2]
    }
    keys |= {b"\xff" * 500, b"\xff" * 499 + b"\xfe", b"\x00" * 500, b"\x7f\x80" * 250}
    return sorted(keys)


def _walk(txn: Any, prefixes: list[bytes], probes: list[bytes]) -> list[Any]:
    """Everything a ReadTxn answers about ``prefixes`` and ``probes``, in one list."""
    out: list[Any] = []
    for p in prefixes:
        out.append(("scan", p, list(txn.scan(p))))
        out.append(("rscan", p, list(txn.scan(p, reverse=True))))
        out.append(("keys", p, list(txn.keys(p))))
        for s in probes:
            if not s.startswith(p):
                continue
            out.append(("from", p, s, list(txn.keys(p, start=s))[:20]))
            out.append(("rfrom", p, s, list(txn.keys(p, start=s, reverse=True))[:20]))
            out.append(("seek", p, s, txn.seek(p, s), txn.seek(p, s, reverse=True)))
            out.append(("around", p, s, txn.around(p, s)))
    for s in probes:
        out.append(("get", s, txn.get(s)))
    return out


def test_s2_bytea_orders_keys_exactly_as_lmdb(tmp_path: Path, pg_url: Callable[[], str]) -> None:
    """§2: bytea compares by memcmp then the shorter first, LMDB's order: scans forward and
    reverse, from a start, seeks and ``around`` return the same keys in the same order, over
    the 0x00/0x7F/0x80/0xFF boundaries, in prefixes that have no successor (all 0xFF), and
    across the keyset pages (8, 64, 512 rows) of §3."""
    keys = _boundary_keys()
    assert len(keys) > 8 + 64 + 512
    pairs = [(k, len(k).to_bytes(2, "big") + k[:3]) for k in keys]
    prefixes = [b"", b"\x00", b"\x7f", b"\x80", b"\xff", b"\xff\xff", b"\x7f\x80", b"\xfe\xff"]
    probes = [
        b"\x00",
        b"\x00\x00\x00\x00",
        b"\x7f",
        b"\x7f\xff",
        b"\x80",
        b"\x80\x00",
        b"\xfe\xff\xff\xff",
        b"\xff",
        b"\xff\xff",
        b"\xff\xff\xff",
        b"\xff" * 500,
        b"\xff" * 501,
        b"\x01\x02",
        b"\xff\x00",
    ]
    answers = []
    for target in (tmp_path / "lmdb", pg_url()):
        kv = open_kv(target)
        try:
            kv.write(lambda t: t.put_many(list(pairs)))

            def change(t: Any) -> list[Any]:  # a write sees its own changes, merged in order
                t.delete(b"\x7f\x80")
                t.delete(b"\xff\xff\xff")
                t.put(b"\x7f\x7f\x7f\x7f", b"new")
                t.put(b"\xff\xff\xff\xff", b"new")
                assert t.put(b"\x80", b"kept?", overwrite=False) is False
                return _walk(t, [b"\x7f", b"\xff"], [b"\x7f\x80", b"\xff\xff\xff"])

            inside = kv.write(change)
            with kv.read() as t:
                answers.append((inside, _walk(t, prefixes, probes)))
        finally:
            kv.close()
    assert answers[0][0] == answers[1][0]
    assert answers[0][1] == answers[1][1]
    with_all = answers[1][1][0]
    assert with_all[0] == "scan" and [k for k, _ in with_all[2]] == sorted(
        (set(keys) - {b"\x7f\x80", b"\xff\xff\xff"}) | {b"\x7f\x7f\x7f\x7f", b"\xff\xff\xff\xff"}
    )


def test_s2_journal_order_across_sequence_byte_boundaries(store_path: Any) -> None:
    """§2 through the public API: the journal's keys carry big-endian sequence numbers; 300
    entries cross the 0x7F/0x80 and 0xFF/0x100 byte boundaries and read back in order, forward,
    reverse and from a start, on both engines alike."""
    with Cortex.open(store_path, actor="a") as cx:
        cx.write_many([_fact(i) for i in range(150)])
        for i in range(150, 300):
            cx.write(_fact(i))
        seqs = _seqs(cx)
        assert seqs == list(range(1, 302))
        assert [e.seq for e in cx.journal(reverse=True)] == seqs[::-1]
        assert [e.seq for e in cx.journal(120, limit=20)] == list(range(120, 140))
        assert [e.seq for e in cx.journal(260, reverse=True, limit=10)] == list(range(260, 250, -1))
        assert [e.seq for e in cx.journal(255, limit=3)] == [255, 256, 257]
        assert [e.seq for e in cx.journal(129, reverse=True, limit=3)] == [129, 128, 127]
        assert cx.verify().ok


_TAGS = ["a", "z", "é", "\u0080", "\u07ff", "\u0800", "\uffef", "\U00010000", "ÿ", "Z", "~"]


def test_s2_same_bytes_same_answers_on_both_engines(
    tmp_path: Path, pg_url: Callable[[], str]
) -> None:
    """§2 / README ("every scan means the same"): a store copied LMDB → PostgreSQL answers
    journal, finds by type, tag (UTF-8 tags across byte boundaries) and text, history and the
    facets exactly alike."""
    src = tmp_path / "src"
    with Cortex.open(src, actor="a") as cx:
        for i in range(60):
            tags = sorted({_TAGS[i % len(_TAGS)], _TAGS[(i * 7) % len(_TAGS)]})
            r = cx.write(_fact(i, "word" + "xyz"[i % 3]), tags=tags, importance=1 + i % 9)
            if i % 10 == 0:
                cx.update(r, _fact(i + 1000))
    kv = open_kv(src, readonly=True)
    try:
        dest = pg_url()
        copy_kv(kv, dest)
    finally:
        kv.close()

    def answers(where: Any) -> list[Any]:
        out: list[Any] = []
        with Cortex.open(where, actor="a", create=False) as cx:
            out.append([(e.seq, e.kind, e.id, e.version) for e in cx.journal()])
            for tag in _TAGS:
                for order in ("created", "importance", "salience"):
                    q = Query(tags=(tag,), limit=7, order_by=order, record_access=False)
                    out.append([h.memory.uri for h in cx.find(q).hits])
            for text in ("wordx", "wordy statement", "statement"):
                q = Query(text=text, limit=9, record_access=False)
                out.append([(h.memory.uri, round(h.score, 9)) for h in cx.find(q).hits])
            q = Query(types=("Fact",), limit=100, record_access=False)
            hits = cx.find(q).hits
            out.append([h.memory.uri for h in hits])
            out.append([[m.uri for m in cx.history(h.memory.head.id)] for h in hits[:15]])
            out.append(cx.facets())
            assert cx.verify().ok
        return out

    assert answers(src) == answers(dest)


# === §3 Reads ==================================================================================


def test_s3_a_read_is_one_snapshot_across_pages(pg_url: Callable[[], str]) -> None:
    """§3: ``read()`` is one REPEATABLE READ snapshot: a scan paged 8, 64, 512 rows at a time
    and later gets in the same ``read()`` do not see a write committed in between."""
    url = pg_url()
    kv, other = open_kv(url), open_kv(url)
    try:
        kv.write(lambda t: t.put_many([(b"s/%04d" % i, b"old") for i in range(700)]))
        with kv.read() as t:
            it = t.scan(b"s/")
            first = [next(it) for _ in range(10)]  # past the first page
            other.write(
                lambda w: (
                    w.put_many([(b"s/%04d" % i, b"new") for i in range(700)]),
                    w.put(b"s/9999", b"new"),
                    w.delete(b"s/0500"),
                )
            )
            rest = list(it)
            assert [v for _, v in first + rest] == [b"old"] * 700
            assert t.get(b"s/0500") == b"old"
            assert t.get(b"s/9999") is None
            assert [k for k, _ in t.scan(b"s/", reverse=True)][:2] == [b"s/0699", b"s/0698"]
        with kv.read() as t:
            got = list(t.scan(b"s/"))
            assert len(got) == 700 and {v for _, v in got} == {b"new"}
    finally:
        kv.close()
        other.close()


def test_s3_the_snapshot_starts_at_the_first_read(pg_url: Callable[[], str]) -> None:
    """§3: the snapshot is taken at the first read, not at ``read()`` (a stated difference)."""
    url = pg_url()
    kv, other = open_kv(url), open_kv(url)
    try:
        kv.write(lambda t: t.put(b"x", b"1"))
        with kv.read() as t:
            other.write(lambda w: w.put(b"x", b"2"))
            assert t.get(b"x") == b"2"
            other.write(lambda w: w.put(b"x", b"3"))
            assert t.get(b"x") == b"2"
    finally:
        kv.close()
        other.close()


_UPDATER = """
import sys
from cortex import Cortex, Fact
url, mid, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with Cortex.open(url, actor="a") as cx:
    for i in range(2, n + 2):
        cx.update(mid, Fact(statement=f"v{i}", subject="s", predicate="p"))
print("done", flush=True)
"""


def test_s3_get_by_id_sees_head_and_version_of_one_snapshot(pg_url: Callable[[], str]) -> None:
    """§3: ``resolve`` / ``resolve_latest`` read the head and the version in one statement (one
    snapshot): while another process writes new versions, every read's head names the version
    it returns, and that version's content."""
    url = pg_url()
    with Cortex.open(url, actor="a") as cx:
        r = cx.write(Fact(statement="v1", subject="s", predicate="p"))
        proc = subprocess.Popen(
            [sys.executable, "-c", _UPDATER, url, str(r.id), "150"],
            env=_child_env(),
            stdout=subprocess.PIPE,
            text=True,
        )
        seen = set()
        try:
            while proc.poll() is None:
                m = cx.resolve_latest(r.id)
                assert m.head.current_version == m.version.version
                assert m.data == Fact(statement=f"v{m.version.version}", subject="s", predicate="p")
                seen.add(m.version.version)
        finally:
            out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0 and "done" in out
        assert len(seen) > 2  # the reads did overlap the writes
        assert cx.resolve_latest(r.id).version.version == 151


# === §4 Writes =================================================================================


def _write_skew(url: str, a: bytes, b: bytes) -> None:
    """A SERIALIZABLE transaction outside cortex: read ``b``, change ``a``, commit."""
    import psycopg

    t = f"cortex_{_store_of(url)}"
    with psycopg.connect(_conninfo(url)) as conn:
        conn.isolation_level = psycopg.IsolationLevel.SERIALIZABLE
        conn.execute(f'SELECT v FROM "{t}" WHERE k = %s', (b,)).fetchall()
        conn.execute(f'UPDATE "{t}" SET v = %s WHERE k = %s', (b"outside", a))
        conn.commit()


def test_s4_serialization_failure_is_retried(pg_url: Callable[[], str]) -> None:
    """§4 items 1, 5: writes are SERIALIZABLE; a serialization failure (here a write skew with
    a transaction outside cortex) rolls back and runs ``fn`` again from the start."""
    url = pg_url()
    kv = open_kv(url)
    try:
        kv.write(lambda t: t.put_many([(b"a", b"a0"), (b"b", b"b0")]))
        kv.close()
        kv = open_kv(url)  # a fresh handle: no write cache (§4 item 7) answers its reads
        calls: list[bytes | None] = []

        def fn(t: Any) -> int:
            calls.append(t.get(b"a"))
            if len(calls) == 1:
                _write_skew(url, b"a", b"b")
            t.put(b"b", b"from try %d" % len(calls))
            return len(calls)

        assert kv.write(fn) == 2
        assert calls == [b"a0", b"outside"]  # the second run has a new snapshot
        with kv.read() as t:
            assert t.get(b"a") == b"outside"
            assert t.get(b"b") == b"from try 2"
    finally:
        kv.close()


def test_s4_serialization_failures_end_in_conflict_error(pg_url: Callable[[], str]) -> None:
    """§4 item 5: 12 tries in all, then ``ConflictError``; nothing of ``fn`` is written."""
    url = pg_url()
    kv = open_kv(url)
    try:
        kv.write(lambda t: t.put_many([(b"a", b"a0"), (b"b", b"b0")]))
        kv.close()
        kv = open_kv(url)  # a fresh handle: no write cache (§4 item 7) answers its reads
        calls = 0

        def fn(t: Any) -> None:
            nonlocal calls
            calls += 1
            t.get(b"a")
            _write_skew(url, b"a", b"b")
            t.put(b"b", b"never")
            t.put(b"c", b"never")

        t0 = time.monotonic()
        with pytest.raises(ConflictError):
            kv.write(fn)
        assert calls == 12
        assert time.monotonic() - t0 < 30  # bounded: ~1 s of backoff in all
        with kv.read() as t:
            assert t.get(b"b") == b"b0" and t.get(b"c") is None
        kv.write(lambda t: t.put(b"c", b"later"))  # the store's lock was released
    finally:
        kv.close()


def test_s4_round_trips_do_not_grow_with_the_keys(own: _Own) -> None:
    """§4 item 3 / issue: a transaction's puts go in one statement at commit (up to 4,096
    rows), not one per key: the round trips and the statements the server runs for a write of
    1,000 keys are those of a write of one."""
    app = f"rtk{os.getpid()}"
    url = _with(own.url(), application_name=app, pool="1")
    kv = open_kv(url)
    try:
        kv.write(lambda t: t.put(b"warm", b"1"))
        counts = []
        for n in (1, 10, 1000):
            before_rt, before_log = kv.round_trips, len(_logged(own, app))
            kv.write(
                lambda t, n=n: t.put_many([(b"k/%d/%05d" % (n, i), b"v" * 30) for i in range(n)])
            )
            counts.append((kv.round_trips - before_rt, len(_logged(own, app)) - before_log))
        assert counts[0][0] == counts[1][0] == counts[2][0] <= 2, counts
        assert counts[2][1] <= counts[0][1] + 2, counts
        with kv.read() as t:
            assert len(list(t.keys(b"k/1000/"))) == 1000
    finally:
        kv.close()


class _Counted:
    """A store made by one handle, then opened by ``cx`` (and ``other``) with their
    application_name, so the server's statement log and ``PgKV.round_trips`` can be read."""

    def __init__(self, own: _Own, app: str) -> None:
        self.own, self.app = own, app
        self.url = _with(own.url(), application_name=app)
        Cortex.open(self.url, actor="a").close()  # cx's first write is then its first
        self.cx = Cortex.open(self.url, actor="a")
        self.kv: Any = self.cx._kv

    def rt(self, op: Callable[[], Any]) -> int:
        """The round trips ``op`` costs (``PgKV.round_trips``, which §4 names)."""
        before = self.kv.round_trips
        op()
        return int(self.kv.round_trips - before)

    def statements(self, op: Callable[[], Any]) -> list[str]:
        """The statements the server logged for ``op``."""
        before = len(_logged(self.own, self.app))
        op()
        return _logged(self.own, self.app)[before:]


@pytest.fixture
def counted(own: _Own) -> Iterator[_Counted]:
    c = _Counted(own, f"rt{os.getpid()}_{own.n}")
    try:
        yield c
    finally:
        c.cx.close()


def test_s4_round_trips_of_a_write_after_the_handles_own(counted: _Counted) -> None:
    """§4 table: a write of one memory after this handle's last write (text indexed, no
    competitor) is 1 round trip; so again once the handle writes on after another writer."""
    cx = counted.cx
    cx.write(_fact(0, "alpha"), tags=["x"])

    def one(i: int) -> Callable[[], Any]:
        return lambda: cx.write(_fact(i, "alpha"), tags=["x"])

    again = [counted.rt(one(i)) for i in range(1, 6)]
    assert again == [1] * 5
    with Cortex.open(counted.url, actor="a") as other:
        other.write(_fact(99, "beta"))
    for i in range(6, 9):  # the stale try, then the writes that skip the cache (item 7)
        cx.write(_fact(i, "alpha"), tags=["x"])
    assert counted.rt(lambda: cx.write(_fact(10, "alpha"), tags=["x"])) == 1


def test_s4_round_trips_of_a_write_after_another_writer(counted: _Counted) -> None:
    """§4 table: "`write` of one memory when another writer wrote since ... | 2 ...; the same
    when the version read sent ahead found its cache stale ..., 3 when a one-pipeline try
    without it did (the next writes skip the cache, item 7)"."""
    cx = counted.cx
    for i in range(3):
        cx.write(_fact(i, "alpha"))
    with Cortex.open(counted.url, actor="a") as other:
        other.write(_fact(99, "beta"))
    stale = counted.rt(lambda: cx.write(_fact(5, "alpha")))
    skipping = counted.rt(lambda: cx.write(_fact(6, "alpha")))
    assert stale in (2, 3) and skipping == 2, (stale, skipping)


def test_s4_round_trips_of_a_handles_first_write(counted: _Counted) -> None:
    """§4 table: "`write` of one memory when another writer wrote since, or the first of a
    handle | 2: lock + BEGIN + version + head + warm reads + term counts + postings around the
    new id + the chain lookup; changes + COMMIT + unlock + flush"."""
    assert counted.rt(lambda: counted.cx.write(_fact(0, "alpha"))) == 2


def test_s4_get_by_id_is_one_statement_outside_a_transaction(counted: _Counted) -> None:
    """§3 / §4 table: ``resolve`` and ``resolve_latest`` are 1 round trip, ONE statement
    outside any transaction (no BEGIN)."""
    cx = counted.cx
    rs = [cx.write(_fact(i)) for i in range(3)]
    cx.update(rs[1], _fact(10))
    for op in (lambda: cx.resolve(rs[0]), lambda: cx.resolve_latest(rs[1].id)):
        assert counted.rt(op) == 1
        stmts = counted.statements(op)
        assert len(stmts) == 1, stmts
        assert "BEGIN" not in stmts[0] and "COMMIT" not in stmts[0]


def test_s4_round_trips_of_find_by_type_and_tag(counted: _Counted) -> None:
    """§4 table: ``find(types=..., tags=..., limit=10)`` is 3-5 round trips, whatever the
    store's size."""
    cx = counted.cx
    q = Query(types=("Fact",), tags=("x",), limit=10)
    cx.write_many([NewMemory(data=_fact(i, "alpha"), tags=["x"]) for i in range(12)])
    small = counted.rt(lambda: cx.find(q))
    cx.write_many([NewMemory(data=_fact(i, "alpha"), tags=["x"]) for i in range(100, 500)])
    big = counted.rt(lambda: cx.find(q))
    assert 3 <= small <= 5 and 3 <= big <= 5, (small, big)


def test_s4_round_trips_of_find_by_text(counted: _Counted) -> None:
    """§4 table: "`find(text=..., limit=10)` (no allow filter) | 6, whatever the lists'
    lengths"."""
    cx = counted.cx
    q = Query(text="alpha", limit=10)
    cx.write_many([_fact(i, "alpha") for i in range(12)])
    small = counted.rt(lambda: cx.find(q))
    cx.write_many([_fact(i, "alpha") for i in range(100, 500)])
    big = counted.rt(lambda: cx.find(q))
    assert small == big == 6, (small, big)


def test_s4_round_trips_of_find_by_text_do_not_grow(counted: _Counted) -> None:
    """§4 table: a text find's round trips are fixed "whatever the lists' lengths"."""
    cx = counted.cx
    q = Query(text="alpha", limit=10)
    cx.write_many([_fact(i, "alpha") for i in range(12)])
    small = counted.rt(lambda: cx.find(q))
    cx.write_many([_fact(i, "alpha") for i in range(100, 700)])
    big = counted.rt(lambda: cx.find(q))
    assert small == big <= 6, (small, big)


def test_s4_one_writer_at_a_time_and_the_lock_outlives_no_session(
    pg_url: Callable[[], str],
) -> None:
    """§4 item 1: the write takes ``pg_advisory_lock(0x636F7278, h)`` (h the FNV-1a 32-bit hash
    of the table name, signed) before its snapshot; a holder of that lock outside cortex
    delays a cortex write until it lets go."""
    import psycopg

    url = pg_url()
    table = f"cortex_{_store_of(url)}"
    h = 0x811C9DC5
    for ch in table.encode():
        h = ((h ^ ch) * 0x01000193) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    kv = open_kv(url)
    try:
        kv.write(lambda t: t.put(b"x", b"0"))
        with psycopg.connect(_conninfo(url), autocommit=True) as conn:
            conn.execute("SELECT pg_advisory_lock(%s, %s)", (0x636F7278, h))
            done = threading.Event()

            def writer() -> None:
                kv.write(lambda t: t.put(b"x", b"1"))
                done.set()

            th = threading.Thread(target=writer)
            th.start()
            assert not done.wait(1.0)  # the cortex write waits for the lock
            conn.execute("SELECT pg_advisory_unlock(%s, %s)", (0x636F7278, h))
            assert done.wait(20)
            th.join()
        with kv.read() as t:
            assert t.get(b"x") == b"1"
    finally:
        kv.close()


# --- several processes, one store -------------------------------------------------------------


def _worker(url: str, wid: int, n: int, shared: str, acks: Any) -> None:
    """One 'machine': its own handle (its own pool); writes, updates a shared memory, searches."""
    with Cortex.open(url, actor="a") as cx:
        for i in range(n):
            token = f"tok{wid}x{i}q"
            r = cx.write(Fact(statement=f"{token} said", subject=f"w{wid}", predicate="p"))
            acks.put((wid, token, str(r.id)))
            if i % 3 == 0:
                cx.update(shared, Fact(statement=f"by w{wid} {i}", subject="s", predicate="p"))
            hits = cx.find(Query(text=f"tok{(wid + 1) % 4}x0q", limit=3)).hits
            assert len(hits) <= 1
    acks.put((wid, "done", ""))


def test_s4_many_processes_one_store(pg_url: Callable[[], str]) -> None:
    """Issue item 2 / §4: four processes, each its own pool, write, update one memory and
    search one store at once: ids unique, the journal's sequence and hash chain whole
    (``verify`` clean), the shared memory's versions 1..N without a gap, and a write
    acknowledged on one process found by the next search on another."""
    url = pg_url()
    with Cortex.open(url, actor="a") as cx:
        shared = str(cx.write(Fact(statement="by owner", subject="s", predicate="p")).id)
    ctx = multiprocessing.get_context("spawn")
    acks = ctx.Queue()
    n = 12
    procs = [ctx.Process(target=_worker, args=(url, w, n, shared, acks)) for w in range(4)]
    for p in procs:
        p.start()
    found_by_other = 0
    written: dict[str, str] = {}
    with Cortex.open(url, actor="a") as cx:
        done = 0
        while done < 4:
            _, token, mid = acks.get(timeout=120)
            if token == "done":
                done += 1
                continue
            written[mid] = token
            hits = cx.find(Query(text=token, limit=5)).hits  # the next search, another process
            assert [str(h.memory.head.id) for h in hits] == [mid], token
            found_by_other += 1
        for p in procs:
            p.join(60)
            assert p.exitcode == 0
        assert found_by_other == 4 * n == len(written)
        report = cx.verify()
        assert report.ok, report.problems
        entries = list(cx.journal())
        assert [e.seq for e in entries] == list(range(1, len(entries) + 1))
        writes = [e for e in entries if e.kind == JournalKind.WRITE]
        assert {str(e.id) for e in writes if str(e.id) != shared} == set(written)
        history = cx.history(shared)
        updates = 1 + 4 * len(range(0, n, 3))
        assert [m.version.version for m in history] == list(range(1, updates + 1))
        assert cx.resolve_latest(shared).head.current_version == updates
        assert cx.stats()["memories"] == 1 + 4 * n


# --- failures ---------------------------------------------------------------------------------

_WRITER = """
import json, sys
from cortex import Cortex, CortexError, Fact
url = sys.argv[1]
try:
    with Cortex.open(url, actor="a") as cx:
        for i in range(100000):
            obj = ("o" * (i % 5000)) or None
            r = cx.write(Fact(statement=f"ack {i}", subject="s", predicate="p", object=obj))
            print(json.dumps({"i": i, "id": str(r.id)}), flush=True)
except BaseException as exc:
    print(json.dumps({"error": type(exc).__module__ + "." + type(exc).__name__,
                      "cortex": isinstance(exc, CortexError), "msg": str(exc)}), flush=True)
"""


def _read_lines(proc: subprocess.Popen[str], into: list[dict[str, Any]], until: int) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        into.append(json.loads(line))
        if len(into) >= until:
            return


def test_s4_server_stopped_mid_writes_loses_no_acknowledged_write(own: _Own) -> None:
    """§4 items 3, 6 / issue item 3: ``pg_ctl stop -m immediate`` while a process writes: the
    writer gets a CortexError (never psycopg's), every acknowledged write is there whole after
    the restart, ``verify`` is clean; a handle open across the restart gets a CortexError while
    the server is down and writes again once it is back (its dead connections replaced)."""
    url = own.url()
    with Cortex.open(url, actor="a") as cx:
        cx.write(_fact(0))
    held = Cortex.open(url, actor="a")
    try:
        held.write(_fact(1))
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, url],
            env=_child_env(),
            stdout=subprocess.PIPE,
            text=True,
        )
        lines: list[dict[str, Any]] = []
        _read_lines(proc, lines, 40)
        own.cluster.stop_server("immediate")
        try:
            out = workers.rest_of_output(proc, 60)  # not communicate(): see its docstring
            lines += [json.loads(x) for x in out.splitlines() if x.strip()]
            with pytest.raises(CortexError) as got:
                held.write(_fact(2))
            assert type(got.value).__module__.startswith("cortex")
            with pytest.raises(CortexError):
                held.find(Query(types=("Fact",), limit=3))
        finally:
            own.cluster.start_server()
        errors = [x for x in lines if "error" in x]
        assert len(errors) == 1 and errors[0]["cortex"], errors
        acked = {x["i"]: x["id"] for x in lines if "id" in x}
        assert len(acked) >= 40, lines[:3]
        held.write(_fact(3))  # the handle's dead connections are replaced
        with Cortex.open(url, actor="a", create=False) as cx:
            for i, mid in acked.items():
                m = cx.resolve_latest(mid)
                assert m.data == Fact(
                    statement=f"ack {i}",
                    subject="s",
                    predicate="p",
                    object="o" * (i % 5000) or None,
                )
            report = cx.verify()
            assert report.ok, report.problems
            seqs = _seqs(cx)
            assert seqs == list(range(1, len(seqs) + 1))
            count = cx.stats()["memories"]
            if count not in (len(acked) + 3, len(acked) + 4):  # what is there, to say why
                hits = cx.find(Query(types=("Fact",), limit=1000)).hits
                said = sorted(h.memory.data.statement for h in hits)  # type: ignore[union-attr]
                extra = [x for x in said if x.startswith("ack ") and int(x[4:]) not in acked]
                raise AssertionError(
                    f"{count} memories, {len(acked)} acknowledged: unacknowledged {extra}, "
                    f"twice {sorted({x for x in said if said.count(x) > 1})}, lines {lines[-3:]}"
                )
    finally:
        held.close()


_BATCHER = """
import sys
from cortex import Cortex, Fact
url = sys.argv[1]
with Cortex.open(url, actor="a") as cx:
    for n in range(100000):
        cx.write_many([Fact(statement=f"b{n} {j}", subject="s", predicate="p", object="x" * 3000)
                       for j in range(40)])
        print(n, flush=True)
"""


@pytest.mark.parametrize("delay", [0.4, 1.1])
def test_s4_client_killed_mid_transaction_leaves_nothing_half_applied(
    pg_url: Callable[[], str], delay: float
) -> None:
    """§4 item 6 / issue item 3: SIGKILL of a client writing 40 memories (~120 KB, more than
    one pipeline) a transaction: each batch is there whole or not at all, ``verify`` clean,
    and the killed client's store lock is gone with its session."""
    url = pg_url()
    Cortex.open(url, actor="a").close()
    proc = subprocess.Popen(
        [sys.executable, "-c", _BATCHER, url], env=_child_env(), stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()  # one batch acknowledged: the writer is under way
    assert first.strip() == "0"
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    out = workers.rest_of_output(proc, 30)
    acked = 1 + len(out.split())
    with Cortex.open(url, actor="a", create=False) as cx:
        t0 = time.monotonic()
        cx.write(_fact(1))  # the lock died with the killed session
        assert time.monotonic() - t0 < 15
        report = cx.verify()
        assert report.ok, report.problems
        memories = cx.stats()["memories"] - 1
        assert memories % 40 == 0 and memories >= 40 * acked, (memories, acked)


_HOLDER = """
import sys, time
from cortex.storage.engines import open_kv
url, marker = sys.argv[1], sys.argv[2]
kv = open_kv(url)
def fn(t):
    t.get(b"x")
    t.put(b"x", b"half")
    open(marker, "w").close()
    time.sleep(120)
kv.write(fn)
"""


def test_s4_client_killed_holding_the_lock(pg_url: Callable[[], str], tmp_path: Path) -> None:
    """§4 item 1: a client that dies holding the store's lock (inside a write) loses its session
    and with it the lock: the next writer proceeds; nothing of the dead write is there."""
    url = pg_url()
    kv = open_kv(url)
    try:
        kv.write(lambda t: t.put(b"x", b"before"))
        marker = tmp_path / "holding"
        proc = subprocess.Popen([sys.executable, "-c", _HOLDER, url, str(marker)], env=_child_env())
        t0 = time.monotonic()
        while not marker.exists():
            assert time.monotonic() - t0 < 60 and proc.poll() is None
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        t0 = time.monotonic()
        kv.write(lambda t: t.put(b"y", b"after"))
        assert time.monotonic() - t0 < 15
        with kv.read() as t:
            assert t.get(b"x") == b"before" and t.get(b"y") == b"after"
    finally:
        kv.close()


def test_s4_connection_lost_is_a_cortex_error(pg_url: Callable[[], str]) -> None:
    """§4 item 6 / issue: a connection lost (terminated by the server) in a read snapshot is a
    CortexError, never psycopg's; the handle then works again (the dead connection replaced)."""
    app = f"lost{os.getpid()}"
    url = _with(pg_url(), application_name=app)
    with Cortex.open(url, actor="a") as cx:
        r = cx.write(_fact(1))
        kv = cx._kv
        with pytest.raises(CortexError) as got, kv.read() as t:
            t.get(b"x")
            _terminate(url, app)
            t.get(b"y")
        assert type(got.value).__module__.startswith("cortex")
        _terminate(url, app)
        for _ in range(3):  # a dead pooled connection is replaced (once per transaction)
            with contextlib.suppress(CortexError):
                cx.resolve(r)
        assert cx.resolve(r).data == _fact(1)
        cx.write(_fact(2))
        assert cx.verify().ok


# === §5 Copying between engines ================================================================


def test_s5_cortex_copy_both_directions_exports_identical(
    tmp_path: Path, pg_url: Callable[[], str], capsys: pytest.CaptureFixture[str]
) -> None:
    """§5: ``cortex copy SRC DST`` LMDB → PostgreSQL → LMDB; the export of each copy is
    byte-identical to the source's; a non-empty PostgreSQL store is refused."""
    src = tmp_path / "src"
    with Cortex.open(src, actor="a") as cx:
        rs = [
            cx.write(_fact(i, "copy", size=i * 40), tags=[_TAGS[i % len(_TAGS)]]) for i in range(30)
        ]
        cx.update(rs[0], _fact(500))
        cx.add_edge(rs[1], "references", rs[2])
        cx.tombstone(rs[3], "gone")
    pg, back = pg_url(), tmp_path / "back"
    assert main(["copy", str(src), pg]) == 0
    assert main(["copy", pg, str(back)]) == 0
    bundles: list[bytes] = []
    for where in (src, pg, back):
        f = tmp_path / f"b{len(bundles)}.jsonl"
        assert main(["--store", str(where), "export", str(f)]) == 0
        bundles.append(f.read_bytes())
    assert bundles[0] == bundles[1] == bundles[2]
    assert len(bundles[0]) > 1000
    capsys.readouterr()
    assert main(["copy", str(src), pg]) == 1  # holds records: refused
    err = capsys.readouterr().err
    assert "cortex:" in err and "Traceback" not in err
    with Cortex.open(pg, actor="a", create=False) as cx:
        assert cx.stats()["memories"] == 30 and cx.verify().ok


def test_s5_copy_kv_into_a_store_with_records_is_refused(
    tmp_path: Path, pg_url: Callable[[], str]
) -> None:
    """§5: a store holding records is refused, and left as it was."""
    src = tmp_path / "src"
    with Cortex.open(src, actor="a") as cx:
        cx.write(_fact(1))
    dest = pg_url()
    with Cortex.open(dest, actor="a") as cx:
        r = cx.write(_fact(2))
    kv = open_kv(src, readonly=True)
    try:
        with pytest.raises(CortexError):
            copy_kv(kv, dest)
    finally:
        kv.close()
    with Cortex.open(dest, actor="a", create=False) as cx:
        assert cx.resolve(r).data == _fact(2) and cx.stats()["memories"] == 1


# === §6 Purge ==================================================================================


def test_s6_purged_bytes_are_gone_from_the_table(pg_url: Callable[[], str]) -> None:
    """§6: a purge's erasure step is ``VACUUM`` of the store's table; afterwards no live row
    (key or value, TOAST included) holds the content, and ``verify_erasure`` is clean."""
    url = pg_url()
    t = f"cortex_{_store_of(url)}"
    secret = "Zanzibarquokka"
    big = "".join(chr(97 + (i * i * 7919) % 26) for i in range(16000))  # TOASTed
    with Cortex.open(url, actor="a") as cx:
        keep = cx.write(_fact(1, "kept"))
        r1 = cx.write(Fact(statement=f"{secret} lives here", subject=secret, predicate="p"))
        cx.update(r1, Fact(statement=f"{secret} moved", subject=secret, predicate="p"))
        r2 = cx.write(Fact(statement="long", subject="s", predicate="p", object=secret + big))
        needles = [secret.encode(), secret.lower().encode(), big[1000:1040].encode()]
        for n in needles:
            hit = _sql(url, f'SELECT count(*) FROM "{t}" WHERE position(%s in v) > 0', n)
            assert hit[0][0] > 0
        vac0 = _sql(url, "SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = %s", t)
        cx.purge(r1, "erase")
        cx.purge(r2, "erase")
        for n in needles:
            rows = _sql(
                url,
                f'SELECT count(*) FROM "{t}" WHERE position(%s in v) > 0 OR position(%s in k) > 0',
                n,
                n,
            )
            assert rows == [(0,)], n
        t0 = time.monotonic()
        while True:
            vac = _sql(url, "SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = %s", t)
            if vac[0][0] > vac0[0][0] or time.monotonic() - t0 > 5:
                break
            time.sleep(0.2)
        assert vac[0][0] > vac0[0][0]  # the erasure step vacuumed the table
        dead = _sql(url, "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = %s", t)
        assert dead[0][0] == 0
        report = cx.verify_erasure()
        assert report.ok
        assert cx.verify().ok
        assert cx.resolve(keep).data == _fact(1, "kept")


# === §1 vectors=DIR / issue item 2: each process's vector index is a cache ======================

_NEAR_WRITER = """
import sys
from cortex import Cortex, Fact
from cortex.index.embed import HashingEmbedder
with Cortex.open(sys.argv[1], actor="a", embedder=HashingEmbedder(64)) as cx:
    print(cx.write(Fact(statement=sys.argv[2], subject="music", predicate="likes")).id, flush=True)
"""


def test_s1_vectors_dir_and_a_write_found_by_the_next_vector_search(
    pg_url: Callable[[], str], tmp_path: Path
) -> None:
    """§1: with ``vectors=DIR`` the store's vector index cache is kept in
    ``DIR/cortex_NAME/vectors/``; issue item 2: the index is a cache caught up from the journal,
    so a write by another process is found by this one's next vector search."""
    from cortex.index.embed import HashingEmbedder

    vdir = tmp_path / "vec"
    url = _with(pg_url(), vectors=str(vdir))
    emb = HashingEmbedder(64)
    with Cortex.open(url, actor="a", embedder=emb) as cx:
        for i, text in enumerate(["green tea leaves", "black coffee beans", "red wine grapes"]):
            cx.write(Fact(statement=text, subject=f"s{i}", predicate="likes"))
        assert len(cx.find(Query(near="green tea", limit=1)).hits) == 1
        cx.save_vectors()
        where = vdir / f"cortex_{_store_of(url)}" / "vectors"
        assert where.is_dir() and any(where.iterdir())
        got = subprocess.run(
            [sys.executable, "-c", _NEAR_WRITER, url, "violin concerto in d minor"],
            env=_child_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert got.returncode == 0, got.stderr
        mid = got.stdout.strip()
        hits = cx.find(Query(near="violin concerto in d minor", limit=1)).hits
        assert [str(h.memory.head.id) for h in hits] == [mid]
    with Cortex.open(url, actor="a", embedder=emb) as cx:  # from the saved cache, caught up
        hits = cx.find(Query(near="violin concerto in d minor", limit=1)).hits
        assert [str(h.memory.head.id) for h in hits] == [mid]
        assert cx.verify().ok


# === §4 item 7: the write cache never answers for a changed table =============================


def _lock_key(table: str) -> int:
    """The store's advisory lock's second key: FNV-1a 32-bit of the table name, signed."""
    h = 0x811C9DC5
    for ch in table.encode():
        h = ((h ^ ch) * 0x01000193) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


@pytest.mark.parametrize("how", ["update", "delete", "truncate", "insert"])
def test_s4_the_write_cache_sees_sql_outside_cortex(pg_url: Callable[[], str], how: str) -> None:
    """§2 / §4 item 7: every statement that changes the table, whoever runs it, bumps the
    store's version, so a handle's next write reads the server, not its cache: SQL committed
    outside cortex (under the store's lock, as item 7 asks) is seen by the next write."""
    import psycopg

    url = pg_url()
    t = f"cortex_{_store_of(url)}"
    kv = open_kv(url)
    try:
        kv.write(lambda w: w.put_many([(b"x", b"1"), (b"n/1", b"a"), (b"n/2", b"b")]))
        kv.write(lambda w: (w.get(b"x"), w.get(b"y"), list(w.scan(b"n/")), w.put(b"z", b"0")))
        with psycopg.connect(_conninfo(url), autocommit=True) as conn:
            conn.execute("SELECT pg_advisory_lock(%s, %s)", (0x636F7278, _lock_key(t)))
            if how == "update":
                conn.execute(f"UPDATE \"{t}\" SET v = 'outside'::bytea WHERE k = 'x'::bytea")
            elif how == "delete":
                conn.execute(f"DELETE FROM \"{t}\" WHERE k = 'x'::bytea")
            elif how == "truncate":
                conn.execute(f'TRUNCATE "{t}"')
            else:
                conn.execute(f"INSERT INTO \"{t}\" VALUES ('y'::bytea, 'outside'::bytea)")
                conn.execute(f"INSERT INTO \"{t}\" VALUES ('n/3'::bytea, 'c'::bytea)")
            conn.execute("SELECT pg_advisory_unlock(%s, %s)", (0x636F7278, _lock_key(t)))

        def fn(w: Any) -> tuple[Any, ...]:
            seen = (w.get(b"x"), w.get(b"y"), [k for k, _ in w.scan(b"n/")])
            w.put(b"seen", repr(seen).encode())
            return seen

        seen = kv.write(fn)
        with kv.read() as r:
            truth = (r.get(b"x"), r.get(b"y"), [k for k, _ in r.scan(b"n/")])
        assert seen == truth
        expect = {
            "update": (b"outside", None, [b"n/1", b"n/2"]),
            "delete": (None, None, [b"n/1", b"n/2"]),
            "truncate": (None, None, []),
            "insert": (b"1", b"outside", [b"n/1", b"n/2", b"n/3"]),
        }[how]
        assert seen == expect
    finally:
        kv.close()


def test_s4_the_write_cache_under_another_process_writes(pg_url: Callable[[], str]) -> None:
    """§4 item 7 through the API: a handle that wrote last keeps a cache; another process then
    updates the same memory and writes more: this handle's next update gets the next version
    number and the journal stays whole."""
    url = pg_url()
    with Cortex.open(url, actor="a") as cx:
        r = cx.write(Fact(statement="v1", subject="s", predicate="p"))
        cx.update(r, Fact(statement="v2", subject="s", predicate="p"))
        got = subprocess.run(
            [sys.executable, "-c", _UPDATER, url, str(r.id), "3"],
            env=_child_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert got.returncode == 0, got.stderr
        u = cx.update(r, Fact(statement="mine", subject="s", predicate="p"))
        assert u.version == 6
        assert [m.version.version for m in cx.history(r.id)] == [1, 2, 3, 4, 5, 6]
        assert cx.resolve_latest(r.id).data == Fact(statement="mine", subject="s", predicate="p")
        assert cx.verify().ok


def test_s4_connection_lost_inside_a_write_writes_nothing(pg_url: Callable[[], str]) -> None:
    """§4 item 6: a connection lost before the commit was sent is an ``EngineError`` ("nothing
    was written"), and nothing of the write is there."""
    from cortex.errors import EngineError

    app = f"wlost{os.getpid()}"
    url = _with(pg_url(), application_name=app)
    kv = open_kv(url)
    try:
        kv.write(lambda w: w.put(b"a", b"0"))

        def fn(w: Any) -> None:
            w.get(b"never-read-before")
            _terminate(url, app)
            w.put(b"a", b"1")
            w.get(b"another-key")  # a round trip on the dead connection

        with pytest.raises(EngineError, match="nothing was written"):
            kv.write(fn)
        kv.write(lambda w: w.put(b"b", b"1"))
        with kv.read() as r:
            assert r.get(b"a") == b"0" and r.get(b"b") == b"1"
    finally:
        kv.close()


def test_s3_lmdb_options_are_accepted_and_ignored(pg_url: Callable[[], str]) -> None:
    """§3: ``check_pages=True`` is accepted and ignored, as ``metasync`` and ``map_size`` are;
    ``read_checked`` reports no damage."""
    url = pg_url()
    with Cortex.open(url, actor="a", check_pages=True, metasync=False, map_size=1 << 20) as cx:
        cx.write(_fact(1))
        assert cx.verify().ok
    kv = open_kv(url, check_pages=True, metasync=False, map_size=1 << 20)
    try:
        with kv.read_checked() as t:
            assert t.damage == []
            assert len(list(t.scan(b""))) > 3
    finally:
        kv.close()


# === roles: a non-owner, and a role without pg_logical_emit_message ==========================


def _role(own: _Own, url: str, name: str) -> str:
    """A login role ``name`` that may read and write the store's table (not its owner); the
    URL that connects as it."""
    t = f"cortex_{_store_of(url)}"
    with contextlib.suppress(Exception):
        _sql(url, f'CREATE ROLE "{name}" LOGIN')
    _sql(url, f'GRANT SELECT, INSERT, UPDATE, DELETE ON "{t}" TO "{name}"')
    with contextlib.suppress(Exception):
        _sql(url, f'GRANT USAGE, SELECT, UPDATE ON SEQUENCE "{t}_v" TO "{name}"')
    return url.replace("user=cortex", f"user={name}")


def test_s2_an_older_table_gets_its_version_on_the_owners_open(own: _Own) -> None:
    """§2: the sequence and trigger are made on the first writable open of a table without
    them (an older cortex's) by a role that may; a role that may not (not the owner) opens the
    store without them, and its writes keep no cache (each reads the server: 2+ round trips)."""
    url = own.url()
    t = f"cortex_{_store_of(url)}"
    with Cortex.open(url, actor="a") as cx:
        cx.write(_fact(0))
    _sql(url, f'DROP TRIGGER "{t}_v" ON "{t}"')
    _sql(url, f'DROP FUNCTION "{t}_v"()')
    _sql(url, f'DROP SEQUENCE "{t}_v"')
    other = _role(own, url, "spec_nonowner")
    with Cortex.open(other, actor="a") as cx:
        kv: Any = cx._kv
        trips = []
        for i in range(1, 5):
            before = kv.round_trips
            cx.write(_fact(i))
            trips.append(kv.round_trips - before)
        assert min(trips) >= 2, trips
        assert cx.verify().ok
    assert _sql(url, "SELECT to_regclass(%s)", f"{t}_v") == [(None,)]
    with Cortex.open(url, actor="a") as cx:
        cx.write(_fact(9))
        assert cx.stats()["memories"] == 6 and cx.verify().ok
    assert _sql(url, "SELECT to_regclass(%s)::text", f"{t}_v") == [(f"{t}_v",)]
    trig = _sql(url, "SELECT count(*) FROM pg_trigger WHERE tgname = %s", f"{t}_v")
    assert trig == [(1,)]


def _emits(logged: list[str]) -> int:
    """How many of the logged statements ran ``pg_logical_emit_message`` (alone or after the
    unlock in one statement; a prepared statement's log line quotes the whole string that
    prepared it: match by its name; the open's privilege probe names it in a string only)."""
    prepared = r"PREPARE (\w+) AS SELECT [^;\n]*pg_logical_emit_message\(true"
    names = set(re.findall(prepared, "\n".join(logged)))
    direct = [
        x
        for x in logged
        if re.search(r"(statement|execute [^:]*): SELECT [^;\n]*pg_logical_emit_message\(true", x)
    ]
    runs = [x for x in logged if any(f"execute {n}:" in x for n in names)]
    return len(direct) + len(runs)


def test_s4_a_role_without_emit_message_commits_synchronously(own: _Own) -> None:
    """§4 item 3: a role that may not execute ``pg_logical_emit_message`` (checked when the
    store opens) ends its writes with a synchronous COMMIT and the unlock instead: its writes
    land and verify; no emit-message statement runs for it."""
    url = own.url()
    with Cortex.open(url, actor="a") as cx:
        cx.write(_fact(0))
    fn = "pg_logical_emit_message(boolean, text, text)"
    control = f"emit{os.getpid()}"
    with Cortex.open(_with(url, application_name=control), actor="a") as cx:
        for i in range(3):
            cx.write(_fact(10 + i))
    assert _emits(_logged(own, control)) >= 3  # the control: the flush statement is seen
    app = f"noemit{os.getpid()}"
    plain = _with(_role(own, url, "spec_noemit"), application_name=app)
    _sql(url, f"REVOKE EXECUTE ON FUNCTION {fn} FROM PUBLIC")
    try:
        assert _sql(url, "SELECT has_function_privilege('spec_noemit', %s, 'execute')", fn) == [
            (False,)
        ]
        with Cortex.open(plain, actor="a") as cx:
            rs = [cx.write(_fact(i)) for i in range(1, 4)]
            assert [cx.resolve(r).data for r in rs] == [_fact(i) for i in range(1, 4)]
            assert cx.verify().ok
        logged = _logged(own, app)
        assert any("COMMIT" in line for line in logged)
        assert _emits(logged) == 0
    finally:
        _sql(url, f"GRANT EXECUTE ON FUNCTION {fn} TO PUBLIC")


# === §4 item 6: a server restart under an open handle ==========================================


@pytest.mark.parametrize(
    ("mode", "op"),
    [
        ("immediate", "write"),
        ("fast", "write"),
        ("immediate", "resolve"),
        ("fast", "resolve"),
        ("immediate", "find"),
        ("fast", "find"),
    ],
)
def test_s4_a_server_restart_is_transparent_to_an_open_handle(
    own: _Own, mode: str, op: str
) -> None:
    """§4 item 6: "A pooled connection found dead on a transaction's first round trip (a server
    restart) is replaced once, transparently"; §4 table, resolve: "on the connection kept out
    of the pool ...: a dead one is replaced and the statement sent again, once". A handle that
    wrote twice (its write cache warm, its kept connection in use) sees the server restart
    (``pg_ctl stop -m MODE``, start) between two operations: the next one just works."""
    url = own.url()
    with Cortex.open(url, actor="a") as cx:
        r = cx.write(_fact(1))
        cx.write(_fact(2))
        assert cx.resolve(r).data == _fact(1)
        own.cluster.stop_server(mode)
        own.cluster.start_server()
        if op == "write":
            w = cx.write(_fact(3))
            assert cx.resolve(w).data == _fact(3)
        elif op == "resolve":
            assert cx.resolve(r).data == _fact(1)
        else:
            assert len(cx.find(Query(types=("Fact",), limit=5)).hits) == 2
        assert cx.verify().ok


def test_s4_after_a_restart_a_failed_operation_is_the_last(own: _Own) -> None:
    """§4 item 6: whatever the first operation after a restart raises, it is a CortexError, it
    writes nothing, and the handle's next operations work (its dead connections replaced)."""
    url = own.url()
    with Cortex.open(url, actor="a") as cx:
        r = cx.write(_fact(1))
        cx.write(_fact(2))
        own.cluster.stop_server("immediate")
        own.cluster.start_server()
        with contextlib.suppress(CortexError):
            cx.write(_fact(3))
        with contextlib.suppress(CortexError):
            cx.resolve(r)
        w = cx.write(_fact(4))
        assert cx.resolve(w).data == _fact(4)
        assert cx.resolve(r).data == _fact(1)
        assert cx.stats()["memories"] in (3, 4)
        assert cx.verify().ok


# === §2 / §5 odds and ends =====================================================================


def test_s2_a_store_made_again_does_not_repeat_its_versions(pg_server: Any) -> None:
    """§2: the version sequence starts at a random value in [1, 2^62): a store dropped and made
    again does not repeat an old one's versions."""
    name = f"again{os.getpid()}"
    url = pg_server.url(name)
    starts = []
    try:
        for _ in range(2):
            Cortex.open(url, actor="a").close()
            got = _sql(
                url,
                "SELECT start_value FROM pg_sequences WHERE sequencename = %s",
                f"cortex_{name}_v",
            )
            starts.append(got[0][0])
            pg_server.drop(name)
        assert _sql(url, "SELECT to_regclass(%s)", f"cortex_{name}_v") == [(None,)]  # owned
    finally:
        pg_server.drop(name)
    assert starts[0] != starts[1]
    assert all(1 <= s < 2**62 for s in starts)


def test_s5_copy_into_an_empty_table_and_not_over_a_directory(
    tmp_path: Path, pg_url: Callable[[], str], capsys: pytest.CaptureFixture[str]
) -> None:
    """§5: the copy goes into an absent or EMPTY PostgreSQL store (the table made, no record),
    and into a new LMDB directory only (an existing one is refused)."""
    src = tmp_path / "src"
    with Cortex.open(src, actor="a") as cx:
        rs = [cx.write(_fact(i)) for i in range(5)]
    dest = pg_url()
    open_kv(dest).close()  # the table, empty
    assert _sql(dest, f'SELECT count(*) FROM "cortex_{_store_of(dest)}"') == [(0,)]
    assert main(["copy", str(src), dest]) == 0
    with Cortex.open(dest, actor="a", create=False) as cx:
        assert [cx.resolve(r).data for r in rs] == [_fact(i) for i in range(5)]
    taken = tmp_path / "taken"
    Cortex.open(taken, actor="a").close()
    capsys.readouterr()
    assert main(["copy", dest, str(taken)]) == 1
    assert "exists" in capsys.readouterr().err


def test_s3_scans_are_paged_8_64_512_2048(pg_url: Callable[[], str]) -> None:
    """§3: "Scans are keyset-paged: 8 rows, then 64, 512, 2048 per query": a scan of n keys
    costs the queries of those pages (the first with the BEGIN, the ROLLBACK one more), and a
    scan stopped early reads only the pages it reached."""
    url = pg_url()
    kv: Any = open_kv(url)
    try:
        kv.write(lambda t: t.put_many([(b"p/%05d" % i, b"v") for i in range(3000)]))

        def trips(limit: int | None = None) -> int:
            before = kv.round_trips
            with kv.read() as t:
                for got, _ in enumerate(t.scan(b"p/"), 1):
                    if got == limit:
                        break
            return int(kv.round_trips - before)

        # one round trip per page reached (the first with the BEGIN), and the ROLLBACK
        assert trips() == 5 + 1  # 8 + 64 + 512 + 2048 < 3000: five pages
        assert trips(8) in (1 + 1, 2 + 1)  # the first page (and, at most, the next)
        assert trips(9) == 2 + 1
        assert trips(8 + 64 + 1) == 3 + 1
    finally:
        kv.close()
