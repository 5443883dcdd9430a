"""Reads of a read snapshot from the data file's map (``cortex._speedups.MapFile``, mapread.c).

Every answer must be LMDB's own: gets and cursor operations are compared, operation by
operation, with py-lmdb's on the same snapshot (trees of several levels, values on overflow
pages, empty databases, keys at and past both ends, steps after failures); a snapshot read
from the map keeps its pages while later commits rewrite the tree; a meta page two commits
old is declined; damaged pages are declined (LMDB's reader answers), never followed. And the
point of it: a read no longer gives the interpreter lock away, so a thread running Python
beside a reader does not stall each of its gets.
"""

from __future__ import annotations

import random
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import lmdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cortex import Cortex, Fact, Query
from cortex.storage import kv as kvmod

sp = pytest.importorskip("cortex._speedups")
if not hasattr(sp, "MapFile"):
    pytest.skip("built without the map reader", allow_module_level=True)

MAP = 64 << 20

on_by_default = pytest.mark.skipif(
    not kvmod._MAP_READS, reason="a store reads from the map with py-lmdb 3.0 or later"
)


def _env(path: Path) -> lmdb.Environment:
    return lmdb.open(str(path), map_size=MAP, max_dbs=8, subdir=True)


def _fill(env: lmdb.Environment, db: Any, rng: random.Random, n: int, big: float = 0.02) -> None:
    with env.begin(write=True) as txn:
        for _ in range(n):
            k = bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))
            size = rng.randint(2500, 9000) if rng.random() < big else rng.randint(0, 120)
            txn.put(k, rng.randbytes(size), db=db)


def _mapped(env: lmdb.Environment, path: Path, names: dict[Any, bytes]) -> tuple[Any, Any]:
    txn = env.begin()
    mf = sp.MapFile(str(path / "data.mdb"), MAP)
    mt = mf.txn(txn, names)
    assert isinstance(mt, sp.MapTxn)
    return txn, mt


def _keys(txn: Any, db: Any) -> list[bytes]:
    with txn.cursor(db=db) as cur:
        return list(cur.iternext(values=False))


def _probes(keys: list[bytes], rng: random.Random) -> list[bytes]:
    """Keys present, absent between them, before the first, after the last, and prefixes."""
    out = [b"\x00", b"\xff" * 41, b"\x00\x00\x00"]
    for k in rng.sample(keys, min(60, len(keys))):
        out += [k, k + b"\x00", k[:-1] or b"\x01", k[:-1] + bytes([max(0, k[-1] - 1)])]
    return out


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("map")
    env = _env(path)
    rng = random.Random(7)
    a = env.open_db(b"a")
    b = env.open_db(b"b")
    env.open_db(b"empty")
    _fill(env, None, rng, 3000)
    _fill(env, a, rng, 400, big=0.2)
    _fill(env, b, rng, 5)
    yield env, path, {a: b"a", b: b"b", env.open_db(b"empty"): b"empty"}
    env.close()


def test_gets_are_lmdbs(store: Any) -> None:
    env, path, names = store
    txn, mt = _mapped(env, path, names)
    rng = random.Random(1)
    try:
        for db in [None, *names]:
            keys = _keys(txn, db)
            for k in [*_probes(keys, rng), *keys[:50]] if keys else [b"x", b"\x00"]:
                assert mt.get(k, None, db) == txn.get(k, None, db), (db, k)
                assert mt.get(k, b"dflt", db) == txn.get(k, b"dflt", db)
            assert mt.get(keys[0] if keys else b"x") == txn.get(keys[0] if keys else b"x")
    finally:
        mt.abort()


def test_a_value_on_overflow_pages_is_read(store: Any) -> None:
    env, path, names = store
    txn, mt = _mapped(env, path, names)
    db = next(d for d, n in names.items() if n == b"a")
    big = [k for k in _keys(txn, db) if len(txn.get(k, db=db)) > 2000]
    assert big
    for k in big:
        assert mt.get(k, None, db) == txn.get(k, None, db)
    mt.abort()


_OPS = st.lists(
    st.one_of(
        st.sampled_from(["first", "last", "next", "prev", "key", "value", "item"]),
        st.tuples(st.sampled_from(["set_range", "set_key"]), st.integers(0, 10**6)),
        st.tuples(st.sampled_from(["iternext", "iterprev"]), st.integers(0, 6)),
        st.sampled_from(["mkiter", "mkiterprev", "step"]),
    ),
    max_size=40,
)

_ITERS: dict[int, Any] = {}


def _kept_iterator(cur: Any, op: str) -> Any:
    """An iterator kept across operations (made by ``mkiter``, advanced by ``step``)."""
    if op == "mkiter":
        _ITERS[id(cur)] = cur.iternext()
        return None
    if op == "mkiterprev":
        _ITERS[id(cur)] = cur.iterprev()
        return None
    it = _ITERS.get(id(cur))
    return None if it is None else next(it, "end")


def _apply(cur: Any, op: Any, probes: list[bytes]) -> Any:
    if op in ("mkiter", "mkiterprev", "step"):
        return _kept_iterator(cur, op)
    if isinstance(op, str):
        return getattr(cur, op)()
    name, arg = op
    if name in ("set_range", "set_key"):
        return getattr(cur, name)(probes[arg % len(probes)])
    it = getattr(cur, name)()
    return [x for _, x in zip(range(arg), it, strict=False)]


@settings(max_examples=150)
@given(ops=_OPS, which=st.integers(0, 3), seed=st.integers(0, 1000))
def test_cursor_operations_are_lmdbs(store: Any, ops: list[Any], which: int, seed: int) -> None:
    env, path, names = store
    db = [None, *names][which]
    txn, mt = _mapped(env, path, names)
    try:
        probes = _probes(_keys(txn, db) or [b"k"], random.Random(seed))
        mine, theirs = mt.cursor(db=db), txn.cursor(db=db)
        assert isinstance(mine, sp.MapCursor)
        for op in ops:
            assert _apply(mine, op, probes) == _apply(theirs, op, probes), op
            assert mine.key() == theirs.key() and mine.value() == theirs.value(), op
    finally:
        _ITERS.clear()
        mt.abort()


@pytest.fixture(scope="module")
def dups(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A database of fixed-size duplicates as cortex's indexes are (``keys.DUP_DATABASES``):
    keys of one duplicate, of a few (an inline page) and of hundreds (their own tree)."""
    path = tmp_path_factory.mktemp("dups")
    env = _env(path)
    db = env.open_db(b"d", dupsort=True, dupfixed=True)
    rng = random.Random(13)
    with env.begin(write=True) as txn:
        for i in range(300):
            key = b"h%04d" % (i * 3)
            many = (
                1 if i % 3 == 0 else (rng.randint(2, 12) if i % 3 == 1 else rng.randint(200, 900))
            )
            for _ in range(many):
                txn.put(key, rng.randbytes(24), db=db, dupdata=True)
    yield env, path, {db: b"d"}, db
    env.close()


_DUP_OPS = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "first",
                "last",
                "next",
                "prev",
                "next_dup",
                "prev_dup",
                "next_nodup",
                "first_dup",
                "last_dup",
                "key",
                "value",
                "item",
            ]
        ),
        st.tuples(st.sampled_from(["set_range", "set_key"]), st.integers(0, 10**6)),
        st.tuples(
            st.sampled_from(["set_key_dup", "set_range_dup"]),
            st.integers(0, 10**6),
            st.integers(0, 10**6),
        ),
        st.tuples(st.sampled_from(["iternext", "iterprev"]), st.integers(0, 6)),
        st.sampled_from(["mkiter", "mkiterprev", "step"]),
    ),
    max_size=40,
)


def _apply_dup(cur: Any, op: Any, heads: list[bytes], values: list[bytes]) -> Any:
    try:
        if op in ("mkiter", "mkiterprev", "step"):
            return _kept_iterator(cur, op)
        if isinstance(op, str):
            return getattr(cur, op)()
        if op[0] in ("set_range", "set_key"):
            return getattr(cur, op[0])(heads[op[1] % len(heads)])
        if op[0] in ("set_key_dup", "set_range_dup"):
            return getattr(cur, op[0])(heads[op[1] % len(heads)], values[op[2] % len(values)])
        it = getattr(cur, op[0])()
        return [x for _, x in zip(range(op[1]), it, strict=False)]
    except lmdb.Error as exc:  # LMDB refuses some steps of an unset cursor: both must
        return type(exc)


@settings(max_examples=200)
@given(ops=_DUP_OPS)
def test_cursor_operations_on_duplicates_are_lmdbs(dups: Any, ops: list[Any]) -> None:
    env, path, names, db = dups
    txn, mt = _mapped(env, path, names)
    try:
        with txn.cursor(db=db) as cur:
            pairs = list(cur.iternext())
        heads = sorted({k for k, _ in pairs})
        heads += [b"h", b"h0001", b"h9999", b"a", b"z"]
        values = [v for _, v in pairs[::97]] + [
            b"\x00" * 24,
            b"\xff" * 24,
            pairs[5][1][:-1] + b"\x00",
        ]
        mine, theirs = mt.cursor(db=db), txn.cursor(db=db)
        assert isinstance(mine, sp.MapCursor)
        for op in ops:
            assert _apply_dup(mine, op, heads, values) == _apply_dup(theirs, op, heads, values), op
            assert mine.key() == theirs.key() and mine.value() == theirs.value(), op
    finally:
        _ITERS.clear()
        mt.abort()


def test_duplicates_scan_whole_both_ways(dups: Any) -> None:
    env, path, names, db = dups
    txn, mt = _mapped(env, path, names)
    with mt.cursor(db=db) as mine, txn.cursor(db=db) as theirs:
        assert list(mine.iternext()) == list(theirs.iternext())
    with mt.cursor(db=db) as mine, txn.cursor(db=db) as theirs:
        assert list(mine.iterprev()) == list(theirs.iterprev())
    # every key's duplicates by next_dup, from set_key, and back from last_dup
    with mt.cursor(db=db) as mine, txn.cursor(db=db) as theirs:
        for k in {k for k, _ in txn.cursor(db=db).iternext()}:
            assert mine.set_key(k) and theirs.set_key(k)
            a, b = [mine.value()], [theirs.value()]
            while mine.next_dup():
                a.append(mine.value())
            while theirs.next_dup():
                b.append(theirs.value())
            assert a == b
            assert mine.last_dup() == theirs.last_dup() and mine.value() == theirs.value()
    mt.abort()


def test_whole_scans_both_ways(store: Any) -> None:
    env, path, names = store
    txn, mt = _mapped(env, path, names)
    for db in [None, *names]:
        with mt.cursor(db=db) as mine, txn.cursor(db=db) as theirs:
            assert list(mine.iternext()) == list(theirs.iternext())
        with mt.cursor(db=db) as mine, txn.cursor(db=db) as theirs:
            assert list(mine.iterprev(values=False)) == list(theirs.iterprev(values=False))
        with mt.cursor(db=db) as mine, txn.cursor(db=db) as theirs:
            assert list(mine.iternext(keys=False)) == list(theirs.iternext(keys=False))
    mt.abort()


def test_a_snapshot_keeps_its_pages_while_commits_rewrite_the_tree(tmp_path: Path) -> None:
    env = _env(tmp_path)
    rng = random.Random(3)
    _fill(env, None, rng, 2000)
    txn, mt = _mapped(env, tmp_path, {})
    before = list(txn.cursor().iternext())
    for _ in range(5):  # rewrite and free most pages, several commits on
        with env.begin(write=True) as w:
            for k, _ in before[::3]:
                w.delete(k)
            for k, _ in before[1::3]:
                w.put(k, rng.randbytes(rng.randint(0, 300)))
            _ = [w.put(rng.randbytes(20), b"new") for _ in range(300)]
    assert list(mt.cursor().iternext()) == before
    assert all(mt.get(k) == v for k, v in before)
    mt.abort()
    env.close()


def test_a_meta_page_two_commits_old_is_declined(tmp_path: Path) -> None:
    env = _env(tmp_path)
    _fill(env, None, random.Random(4), 50)
    mf = sp.MapFile(str(tmp_path / "data.mdb"), MAP)
    old = env.begin()
    for i in range(2):
        with env.begin(write=True) as w:
            w.put(b"k%d" % i, b"v")
    assert mf.txn(old, {}) is None  # LMDB reads it
    new = env.begin()
    assert isinstance(mf.txn(new, {}), sp.MapTxn)
    new.abort()
    old.abort()
    env.close()


def test_a_short_mapping_asks_for_a_new_one(tmp_path: Path) -> None:
    env = _env(tmp_path)
    _fill(env, None, random.Random(5), 2000)
    txn = env.begin()
    assert sp.MapFile(str(tmp_path / "data.mdb"), 3 * 4096).txn(txn, {}) is False
    txn.abort()
    env.close()


def test_after_abort_the_map_is_not_read(store: Any) -> None:
    env, path, names = store
    _, mt = _mapped(env, path, names)
    cur = mt.cursor()
    assert cur.first()
    mt.abort()
    with pytest.raises(lmdb.Error):
        mt.get(b"x")
    with pytest.raises(lmdb.Error):
        cur.next()


def test_the_map_refuses_bad_arguments(store: Any, tmp_path: Path) -> None:
    env, path, names = store
    with pytest.raises(OSError):
        sp.MapFile(str(tmp_path / "absent.mdb"), MAP)
    with pytest.raises(OSError):
        sp.MapFile(str(tmp_path), MAP)  # a directory
    with pytest.raises(ValueError):
        sp.MapFile(str(path / "data.mdb"), 0)
    mf = sp.MapFile(str(path / "data.mdb"), MAP)
    txn = env.begin()
    with pytest.raises(TypeError):
        mf.txn(txn, [])
    mt = mf.txn(txn, names)
    # what the map does not read, LMDB answers (and refuses as LMDB refuses)
    with pytest.raises(TypeError):
        mt.get("a str")
    assert mt.get(b"x", db=None) == txn.get(b"x", db=None)  # keywords: LMDB's parsing
    assert mt.get(b"x" * 600) == txn.get(b"x" * 600)
    assert mt.id() == txn.id()  # the rest is LMDB's transaction's
    cur = mt.cursor()
    with pytest.raises(lmdb.Error):
        cur.set_key(b"")
    assert cur.set_range(b"") == txn.cursor().set_range(b"")
    mt.abort()


def test_a_closed_cursor_refuses_as_lmdbs_does(store: Any) -> None:
    env, path, names = store
    txn, mt = _mapped(env, path, names)
    mine, theirs = mt.cursor(), txn.cursor()
    assert list(iter(mine))[:5] == list(iter(theirs))[:5]  # iter(cursor) is iternext()
    mine.close()
    theirs.close()
    for op in ("first", "next", "key", "value", "item", "iternext"):
        with pytest.raises(lmdb.Error):
            getattr(theirs, op)()
        with pytest.raises(lmdb.Error):
            getattr(mine, op)()
    with pytest.raises(lmdb.Error):
        mine.set_range(b"a")
    mt.abort()


def test_a_committed_snapshot_is_not_read_from_the_map(store: Any) -> None:
    env, path, names = store
    _, mt = _mapped(env, path, names)
    cur = mt.cursor()
    mt.commit()  # py-lmdb ends a read transaction by commit too
    with pytest.raises(lmdb.Error):
        mt.get(b"x")
    with pytest.raises(lmdb.Error):
        cur.first()


class _Fallback:
    """A transaction whose every answer says it came from LMDB's side."""

    def __init__(self, txnid: int) -> None:
        self._id = txnid

    def id(self) -> int:
        return self._id

    def get(self, *args: Any, **kw: Any) -> str:
        return "lmdb"

    def cursor(self, *args: Any, **kw: Any) -> Any:
        return _FallbackCursor()


class _FallbackCursor:
    def __getattr__(self, name: str) -> Any:
        return lambda *a, **k: "lmdb"


def test_damaged_pages_are_declined_never_followed(tmp_path: Path) -> None:
    src = tmp_path / "src"
    env = _env(src)
    rng = random.Random(11)
    _fill(env, None, rng, 3000, big=0.05)
    with env.begin() as txn:
        pairs = dict(txn.cursor().iternext())
        txnid = txn.id()
    env.close()
    size = (src / "data.mdb").stat().st_size
    for trial in range(60):
        dst = tmp_path / f"d{trial}"
        dst.mkdir()
        shutil.copy(src / "data.mdb", dst / "data.mdb")
        with open(dst / "data.mdb", "r+b") as f:  # damage pages past the two meta pages
            for _ in range(rng.randint(1, 40)):
                at = rng.randrange(2 * 4096, size)
                f.seek(at)
                f.write(bytes([rng.randrange(256)]))
        mt = sp.MapFile(str(dst / "data.mdb"), MAP).txn(_Fallback(txnid), {})
        assert isinstance(mt, sp.MapTxn)
        for k in rng.sample(list(pairs), 200):
            got = mt.get(k)
            assert got in ("lmdb", None) or isinstance(got, bytes)
        cur = mt.cursor()
        for _ in range(300):
            op = rng.choice(["first", "last", "next", "prev", "key", "value", "item"])
            getattr(cur, op)()
        cur.set_range(rng.choice(list(pairs)))
        for _ in range(200):
            cur.next()
        shutil.rmtree(dst)


def _busy(stop: threading.Event) -> None:
    while not stop.is_set():
        sum(range(1000))


@on_by_default
def test_a_get_does_not_give_the_interpreter_lock_away(tmp_path: Path) -> None:
    with Cortex.open(tmp_path / "s", actor="test") as cx:
        uris = [
            cx.write(Fact(statement=f"s{i} is p", subject=f"s{i}", predicate="p"))
            for i in range(50)
        ]
        stop = threading.Event()
        busy = threading.Thread(target=_busy, args=(stop,))
        busy.start()
        try:
            t0 = time.perf_counter()
            for _ in range(20):
                for u in uris:
                    cx.resolve_latest(u.id)
            per_get = (time.perf_counter() - t0) / 1000
        finally:
            stop.set()
            busy.join()
    # each of a get's LMDB calls used to wait up to the switch interval (5 ms) beside a busy
    # thread; holding the lock, a get takes microseconds (the bound leaves room for a slow CI)
    assert per_get < sys_interval() / 4, per_get


def sys_interval() -> float:
    import sys

    return sys.getswitchinterval()


@on_by_default
def test_a_file_grown_past_the_mapping_is_mapped_again(tmp_path: Path) -> None:
    with Cortex.open(tmp_path / "s", actor="test") as cx:
        for i in range(40):
            cx.write(Fact(statement=f"s{i} is p", subject=f"s{i}", predicate="p"))
        shared = cx._kv._shared
        shared.view = sp.MapFile(str(shared.path / "data.mdb"), 3 * 4096)  # the file outgrew it
        with cx._kv.read() as txn:
            assert isinstance(txn._txn, sp.MapTxn)
        assert shared.view.length == int(shared.env.info()["map_size"])
        assert len(cx.find(Query(text="p", limit=50)).hits) == 40


class _Failing:
    def txn(self, *args: Any) -> Any:
        raise MemoryError


def test_a_map_that_fails_leaves_the_read_to_lmdb(tmp_path: Path) -> None:
    with Cortex.open(tmp_path / "s", actor="test") as cx:
        uri = cx.write(Fact(statement="a is p", subject="a", predicate="p"))
        cx._kv._shared.view = _Failing()
        with cx._kv.read() as txn:
            assert type(txn._txn).__name__ == "Transaction"
        assert cx.resolve_latest(uri.id).head.id == uri.id
        assert cx._kv._gate.held() == 0  # the transaction and the gate were released


def test_store_reads_agree_with_the_map_on_and_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Cortex.open(tmp_path / "s", actor="test") as cx:
        for i in range(300):
            cx.write(
                Fact(
                    statement=f"alice {i % 7} likes tea {i}",
                    subject=f"alice {i % 7}",
                    predicate="likes",
                ),
                supersede=False,
            )
        seen = []
        for on in (True, False):
            monkeypatch.setattr(kvmod, "_MAP_READS", on)
            with cx._kv.read() as t:
                assert (type(t._txn).__name__ == "MapTxn") == on
            res = cx.find(Query(text="alice tea", limit=20))
            ids = [h.uri.id for h in res.hits]
            seen.append((ids, [h.score for h in res.hits], [cx.resolve_latest(i) for i in ids]))
    assert seen[0] == seen[1] and len(seen[0][0]) == 20
