"""The ordered KV layer (storage.kv.LmdbKV): reads, writes, scans, atomicity, growth, safety."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lmdb
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cortex.errors import CortexError
from cortex.storage.engines import open_kv
from cortex.storage.keys import DATABASE_PREFIX
from cortex.storage.kv import LmdbKV, WriteTxn

KEYS = [
    b"a",
    b"a\x00",
    b"a1",
    b"a2",
    b"a\xff",
    b"a\xff\xff",
    b"ab",
    b"b",
    b"b1",
    b"\xff",
    b"\xff\x01",
]


@pytest.fixture
def kv(store_path: Any) -> Iterator[LmdbKV]:
    """An engine: LMDB or PostgreSQL (tests/conftest.py); the contract is the same."""
    store = open_kv(store_path)
    yield store
    store.close()


@pytest.fixture
def filled(kv: LmdbKV) -> LmdbKV:
    def fill(txn: WriteTxn) -> None:
        for k in KEYS:
            txn.put(k, b"v:" + k)

    kv.write(fill)
    return kv


def expected(prefix: bytes, start: bytes | None = None, reverse: bool = False) -> list[bytes]:
    """The scan contract, computed from the sorted key list."""
    ks = sorted(k for k in KEYS if k.startswith(prefix))
    if start is not None:
        ks = [k for k in ks if (k <= start if reverse else k >= start)]
    return ks[::-1] if reverse else ks


# --- get / put / delete -----------------------------------------------------------------------


def test_get_put_delete(kv: LmdbKV) -> None:
    with kv.read() as r:
        assert r.get(b"k") is None
    assert kv.write(lambda t: t.put(b"k", b"v1")) is True
    with kv.read() as r:
        v = r.get(b"k")
        assert v == b"v1" and type(v) is bytes
    kv.write(lambda t: t.put(b"k", b"v2"))
    with kv.read() as r:
        assert r.get(b"k") == b"v2"
    assert kv.write(lambda t: t.delete(b"k")) is True
    assert kv.write(lambda t: t.delete(b"k")) is False
    with kv.read() as r:
        assert r.get(b"k") is None


def test_put_without_overwrite_keeps_the_old_value(kv: LmdbKV) -> None:
    assert kv.write(lambda t: t.put(b"k", b"old", overwrite=False)) is True
    assert kv.write(lambda t: t.put(b"k", b"new", overwrite=False)) is False
    with kv.read() as r:
        assert r.get(b"k") == b"old"


def test_empty_value_round_trips(kv: LmdbKV) -> None:
    kv.write(lambda t: t.put(b"k", b""))
    with kv.read() as r:
        assert r.get(b"k") == b""
        assert list(r.scan(b"k")) == [(b"k", b"")]


def test_write_sees_its_own_writes(kv: LmdbKV) -> None:
    def fn(t: WriteTxn) -> tuple[bytes | None, list[bytes]]:
        t.put(b"x1", b"1")
        t.put(b"x2", b"2")
        t.delete(b"x1")
        return t.get(b"x2"), list(t.keys(b"x"))

    assert kv.write(fn) == (b"2", [b"x2"])


# --- scans ------------------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", [b"", b"a", b"a\xff", b"a\xff\xff", b"b", b"\xff", b"c", b"zz"])
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_by_prefix(filled: LmdbKV, prefix: bytes, reverse: bool) -> None:
    with filled.read() as r:
        pairs = list(r.scan(prefix, reverse=reverse))
        ks = list(r.keys(prefix, reverse=reverse))
    assert [k for k, _ in pairs] == expected(prefix, reverse=reverse)
    assert all(v == b"v:" + k for k, v in pairs)
    assert ks == expected(prefix, reverse=reverse)


@pytest.mark.parametrize(
    "start",
    [
        b"",
        b"0",
        b"a",
        b"a0",
        b"a1",
        b"a15",
        b"a2",
        b"a\xff",
        b"a\xff\xff\xff",
        b"ab",
        b"ac",
        b"b",
        b"b0",
        b"zz",
        b"\xff",
        b"\xff\xff",
    ],
)
@pytest.mark.parametrize("prefix", [b"", b"a", b"a\xff", b"b", b"\xff"])
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_from_start_is_inclusive(
    filled: LmdbKV, prefix: bytes, start: bytes, reverse: bool
) -> None:
    with filled.read() as r:
        got = [k for k, _ in r.scan(prefix, start=start, reverse=reverse)]
        got_keys = list(r.keys(prefix, start=start, reverse=reverse))
    assert got == expected(prefix, start, reverse)
    assert got_keys == got


def test_scan_of_an_empty_store(kv: LmdbKV) -> None:
    with kv.read() as r:
        for reverse in (False, True):
            assert list(r.scan(b"", reverse=reverse)) == []
            assert list(r.scan(b"a", reverse=reverse)) == []
            assert list(r.scan(b"a", start=b"a5", reverse=reverse)) == []
            assert list(r.keys(b"\xff", reverse=reverse)) == []


def test_reverse_scan_at_the_very_end_of_the_keyspace(kv: LmdbKV) -> None:
    kv.write(lambda t: [t.put(k, b"") for k in (b"\xff\xff", b"\xff\xff\x00", b"\xff\xff\xff")])
    with kv.read() as r:
        assert list(r.keys(b"\xff\xff", reverse=True)) == [
            b"\xff\xff\xff",
            b"\xff\xff\x00",
            b"\xff\xff",
        ]
        assert list(r.keys(b"\xff\xff\xff", reverse=True)) == [b"\xff\xff\xff"]
        assert list(r.keys(b"\xff\xff", start=b"\xff\xff\x00", reverse=True)) == [
            b"\xff\xff\x00",
            b"\xff\xff",
        ]


# keys under ``\x01db/`` name LMDB's named databases in the main tree (format 17,
# ``keys.DATABASE_PREFIX``): reserved, never a key of the store's
keyset = st.lists(
    st.binary(min_size=1, max_size=4).filter(lambda k: not k.startswith(DATABASE_PREFIX)),
    min_size=0,
    max_size=25,
    unique=True,
)


@given(keyset, st.binary(max_size=2), st.none() | st.binary(max_size=4), st.booleans())
def test_scan_matches_the_model(
    tmp_path_factory: pytest.TempPathFactory,
    ks: list[bytes],
    prefix: bytes,
    start: bytes | None,
    reverse: bool,
) -> None:
    store = LmdbKV(tmp_path_factory.mktemp("scan"))
    try:
        store.write(lambda t: [t.put(k, k) for k in ks])
        want = sorted(k for k in ks if k.startswith(prefix))
        if start is not None:
            want = [k for k in want if (k <= start if reverse else k >= start)]
        if reverse:
            want.reverse()
        with store.read() as r:
            assert [k for k, _ in r.scan(prefix, start=start, reverse=reverse)] == want
            assert list(r.keys(prefix, start=start, reverse=reverse)) == want
    finally:
        store.close()


@given(keyset, st.sampled_from([b"", b"a", b"\x00", b"\xff", b"\xff\xff", b"a\xff", b"ab"]))
def test_last_is_the_reverse_scans_first_pair(
    tmp_path_factory: pytest.TempPathFactory, ks: list[bytes], prefix: bytes
) -> None:
    """``last`` (the journal tail's one positioning) is ``next(scan(reverse=True))``."""
    store = LmdbKV(tmp_path_factory.mktemp("last"))
    try:
        store.write(lambda t: [t.put(k, k + b"v") for k in ks])
        inside = sorted(k for k in ks if k.startswith(prefix))
        want = (inside[-1], inside[-1] + b"v") if inside else None
        with store.read() as r:
            assert r.last(prefix) == want == next(r.scan(prefix, reverse=True), None)
            r.around(prefix, prefix)  # the shared cursor moved elsewhere first
            assert r.last(prefix) == want
        # in a write, after puts of its own (the cursor sees them)
        extra = prefix + b"\xff\xff\xff\xff\xff"
        got = store.write(lambda t: (t.put(extra, b"x"), t.last(prefix))[1])
        assert got == (extra, b"x")
    finally:
        store.close()


@given(keyset, st.binary(max_size=2), st.binary(max_size=4))
def test_around_matches_the_model(
    tmp_path_factory: pytest.TempPathFactory, ks: list[bytes], prefix: bytes, key: bytes
) -> None:
    store = LmdbKV(tmp_path_factory.mktemp("around"))
    try:
        store.write(lambda t: [t.put(k, k + b"v") for k in ks])
        inside = sorted(k for k in ks if k.startswith(prefix))
        before = [k for k in inside if k <= key]
        after = [k for k in inside if k > key]
        want = (
            before[-1] if before else None,
            before[-1] + b"v" if before else None,
            after[0] if after else None,
        )
        # only the neighbours of ``key`` in the whole store count: a key of another prefix
        # between them hides what lies beyond it
        every = sorted(ks)
        at = [k for k in every if k <= key]
        nxt = [k for k in every if k > key]
        if at and not at[-1].startswith(prefix):
            want = (None, None, want[2])
        if nxt and not nxt[0].startswith(prefix):
            want = (want[0], want[1], None)
        with store.read() as r:
            assert r.around(prefix, key) == want
        store.write(lambda t: t.around(prefix, key) == want or pytest.fail("write view"))
    finally:
        store.close()


def test_a_scan_may_stop_early(filled: LmdbKV) -> None:
    with filled.read() as r:
        for k, _ in r.scan(b"a"):
            assert k == b"a"
            break  # the cursor is released; the snapshot stays usable
        assert r.get(b"b") == b"v:b"
        assert next(r.keys(b"a", reverse=True)) == b"a\xff\xff"


# --- transactions ------------------------------------------------------------------------------


def test_an_exception_in_write_leaves_nothing(kv: LmdbKV) -> None:
    kv.write(lambda t: t.put(b"keep", b"1"))

    class Boom(Exception):
        pass

    def fn(t: WriteTxn) -> None:
        t.put(b"new1", b"x")
        t.put(b"keep", b"changed")
        t.delete(b"keep")
        t.put(b"new2", b"x")
        raise Boom

    with pytest.raises(Boom):
        kv.write(fn)
    with kv.read() as r:
        assert list(r.scan(b"")) == [(b"keep", b"1")]
    # the store remains writable afterwards
    kv.write(lambda t: t.put(b"after", b"1"))
    with kv.read() as r:
        assert r.get(b"after") == b"1"


def test_write_returns_the_function_result(kv: LmdbKV) -> None:
    assert kv.write(lambda t: 42) == 42


@pytest.mark.lmdb_only
def test_lmdb_errors_are_wrapped(kv: LmdbKV) -> None:
    with pytest.raises(CortexError) as info:
        kv.write(lambda t: t.put(b"k" * 600, b"v"))  # over LMDB's key size limit
    assert isinstance(info.value.__cause__, lmdb.Error)
    with kv.read() as r:
        assert list(r.scan(b"")) == []


def test_a_read_snapshot_does_not_see_later_commits(kv: LmdbKV) -> None:
    """From its first read on (PostgreSQL takes the snapshot there; LMDB at ``read()``)."""
    kv.write(lambda t: t.put(b"k", b"before"))
    with kv.read() as r:
        assert r.get(b"nothing") is None
        kv.write(lambda t: (t.put(b"k", b"after"), t.put(b"k2", b"new")))
        assert r.get(b"k") == b"before"
        assert r.get(b"k2") is None
        assert list(r.keys(b"")) == [b"k"]
    with kv.read() as r:
        assert r.get(b"k") == b"after"
        assert r.get(b"k2") == b"new"


@pytest.mark.lmdb_only
def test_values_are_copies_that_outlive_the_transaction(filled: LmdbKV) -> None:
    with filled.read() as r:
        pairs = list(r.scan(b"a"))
        value = r.get(b"b")
    filled.write(lambda t: [t.delete(k) for k in KEYS])
    assert all(type(k) is bytes and type(v) is bytes for k, v in pairs)
    assert value == b"v:b"
    assert pairs[0] == (b"a", b"v:a")


# --- map growth -------------------------------------------------------------------------------

MIB = 1 << 20


@pytest.mark.lmdb_only
def test_map_grows_instead_of_failing_in_one_transaction(tmp_path: Path) -> None:
    store = LmdbKV(tmp_path / "kv", map_size=1)  # clamped to the 64 MiB minimum
    try:
        first = store.info()["map_size"]
        assert first == 64 * MIB
        blob = os.urandom(MIB)
        store.write(lambda t: [t.put(i.to_bytes(4, "big"), blob) for i in range(80)])
        assert store.info()["map_size"] > first
        with store.read() as r:
            assert sum(1 for _ in r.keys(b"")) == 80
            assert r.get((79).to_bytes(4, "big")) == blob
    finally:
        store.close()


@pytest.mark.lmdb_only
def test_map_grows_across_transactions_and_reopens(tmp_path: Path) -> None:
    path = tmp_path / "kv"
    store = LmdbKV(path, map_size=1)
    try:
        blob = b"\x5a" * MIB
        for batch in range(8):

            def put_batch(t: WriteTxn, b: int = batch) -> None:
                for i in range(10):
                    t.put((b * 10 + i).to_bytes(4, "big"), blob)

            store.write(put_batch)
        grown = store.info()["map_size"]
        assert grown > 64 * MIB
    finally:
        store.close()
    # a smaller request still maps at least the pages in use, and grows again when needed
    again = LmdbKV(path, map_size=1)
    try:
        assert again.info()["map_size"] >= 80 * MIB
        with again.read() as r:
            assert sum(1 for _ in r.keys(b"")) == 80
        again.write(lambda t: [t.put(b"more%d" % i, blob) for i in range(grown // MIB - 79)])
        assert again.info()["map_size"] >= grown
        with again.read() as r:
            assert r.get(b"more0") == blob
    finally:
        again.close()


def _until(cond: Any) -> None:
    """Wait (at most 10 s) for ``cond()`` to hold: the other threads reached a point."""
    for _ in range(10_000):
        if cond():
            return
        time.sleep(0.001)
    raise AssertionError("the other threads did not get there")


@pytest.mark.lmdb_only
def test_a_remap_waits_for_every_reader_and_new_readers_wait_for_it(tmp_path: Path) -> None:
    # the gate without a lock on a read's way in and out (_Gate): a remap waits for the
    # transactions of other threads, a thread that already holds one may begin another (the
    # remap waits for it anyway), and one that holds none waits until the remap is done
    store = LmdbKV(tmp_path / "kv")
    try:
        store.write(lambda t: t.put(b"k", b"v"))
        gate = store._gate
        events: list[str] = []
        holding, release = threading.Event(), threading.Event()

        def holder() -> None:
            with store.read():
                holding.set()
                release.wait(10)
                # nested, while the remap waits for this thread: no deadlock
                assert store.point_read([b"k"]) == ([b"v"], None)
                assert gate.held() == 1
                events.append("holder done")

        def remap() -> None:
            with gate.exclusive():
                assert not gate._mine  # no transaction runs while the map is remapped
                events.append("remap")

        def newcomer() -> None:
            assert store.point_read([b"k"]) == ([b"v"], None)
            events.append("newcomer read")

        threads = [threading.Thread(target=holder)]
        threads[0].start()
        assert holding.wait(10)
        threads.append(threading.Thread(target=remap))
        threads[1].start()
        _until(lambda: gate._remapping and len(gate._cond._waiters) == 1)  # type: ignore[attr-defined]
        threads.append(threading.Thread(target=newcomer))
        threads[2].start()
        _until(lambda: len(gate._cond._waiters) == 2)  # type: ignore[attr-defined]
        assert events == []
        release.set()
        for t in threads:
            t.join(10)
        assert events == ["holder done", "remap", "newcomer read"]
        assert gate._mine == {} and gate.held() == 0
        with (
            pytest.raises(CortexError, match="holds a transaction"),
            store.read(),
            gate.exclusive(),
        ):
            pass
        assert gate._mine == {}
    finally:
        store.close()


# --- process safety ---------------------------------------------------------------------------


@pytest.mark.lmdb_only
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)")
def test_an_environment_inherited_across_fork_is_refused(kv: LmdbKV) -> None:
    kv.write(lambda t: t.put(b"k", b"v"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork in a threaded process (3.12+)
        pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 1
        try:
            refused = 0
            try:
                with kv.read() as r:
                    r.get(b"k")
            except CortexError:
                refused += 1
            try:
                kv.write(lambda t: t.put(b"k", b"child"))
            except CortexError:
                refused += 1
            code = 0 if refused == 2 else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    with kv.read() as r:  # the parent's environment is untouched
        assert r.get(b"k") == b"v"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)")
@pytest.mark.xfail(
    strict=True,
    reason="py-lmdb refuses a second open in the child ('already open in this process') while "
    "the inherited environment is registered, and LmdbKV.close() does nothing in the child",
)
@pytest.mark.lmdb_only
def test_a_child_may_open_the_store_afresh_after_fork(kv: LmdbKV) -> None:
    kv.write(lambda t: t.put(b"k", b"v"))
    path = kv.path
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            mine = LmdbKV(path)
            with mine.read() as r:
                ok = r.get(b"k") == b"v"
            mine.write(lambda t: t.put(b"child", b"1"))
            mine.close()
            code = 0 if ok else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    with kv.read() as r:
        assert r.get(b"child") == b"1"


def test_readonly_rejects_writes(tmp_path: Path) -> None:
    path = tmp_path / "kv"
    rw = LmdbKV(path)
    rw.write(lambda t: t.put(b"k", b"v"))
    rw.close()
    ro = LmdbKV(path, readonly=True)
    try:
        with ro.read() as r:
            assert r.get(b"k") == b"v"
        with pytest.raises(CortexError, match="read-only"):
            ro.write(lambda t: t.put(b"k", b"x"))
        with ro.read() as r:
            assert r.get(b"k") == b"v"
    finally:
        ro.close()


def test_readonly_or_no_create_needs_an_existing_store(tmp_path: Path) -> None:
    with pytest.raises(CortexError, match="no store"):
        LmdbKV(tmp_path / "missing", readonly=True)
    with pytest.raises(CortexError, match="no store"):
        LmdbKV(tmp_path / "missing", create=False)
    assert not (tmp_path / "missing").exists()


class _SpyEnv:
    """Delegates to a real environment and records ``reader_check`` calls."""

    def __init__(self, env: Any, calls: list[str]) -> None:
        self._env = env
        self._calls = calls

    def reader_check(self) -> int:
        self._calls.append("reader_check")
        return int(self._env.reader_check())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)


@pytest.mark.lmdb_only
def test_reader_check_runs_on_a_writable_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real_open = lmdb.open
    monkeypatch.setattr(
        "cortex.storage.kv.lmdb.open", lambda *a, **kw: _SpyEnv(real_open(*a, **kw), calls)
    )
    store = LmdbKV(tmp_path / "kv")
    store.write(lambda t: t.put(b"k", b"v"))
    store.close()
    assert calls == ["reader_check"]


_HOLD_A_READER = """
import sys, time
from cortex.storage.kv import LmdbKV
kv = LmdbKV(sys.argv[1])
with kv.read() as r:
    r.get(b"k")
    print("reading", flush=True)
    time.sleep(120)
"""

_OPEN_AND_LIST_READERS = """
import sys
from cortex.storage.kv import LmdbKV
kv = LmdbKV(sys.argv[1])
print(kv._env.readers())
"""


@pytest.mark.lmdb_only
@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_opening_clears_reader_slots_of_killed_processes(kv: LmdbKV) -> None:
    kv.write(lambda t: t.put(b"k", b"v"))
    # this process keeps the environment open, so LMDB does not reset the lock file on the
    # next open and the dead reader's slot survives until someone calls reader_check
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLD_A_READER, str(kv.path)], stdout=subprocess.PIPE
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == b"reading"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    assert str(child.pid) in kv._env.readers()  # the stale slot, as the killed reader left it
    out = subprocess.run(
        [sys.executable, "-c", _OPEN_AND_LIST_READERS, str(kv.path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(child.pid) not in out
    assert str(child.pid) not in kv._env.readers()
    kv.write(lambda t: t.put(b"k", b"after"))
    with kv.read() as r:
        assert r.get(b"k") == b"after"


@pytest.mark.lmdb_only
def test_info_reports_sizes(filled: LmdbKV) -> None:
    info = filled.info()
    assert info["entries"] == len(KEYS)
    assert info["map_size"] >= 64 * MIB
    assert info["used_bytes"] > 0


def test_point_read_reads_keys_and_the_last_pair_of_a_prefix(kv: LmdbKV) -> None:
    """``point_read``: the values of some keys and the last pair under a prefix, from one
    snapshot (one statement on PostgreSQL); absent keys are None, an empty prefix gives None."""

    def fill(txn: WriteTxn) -> None:
        for k in (b"m/a", b"m/b", b"mv/a\x00\x01", b"mv/a\x00\x02", b"mv/a\xff", b"mv/b\x00"):
            txn.put(k, b"v:" + k)

    kv.write(fill)
    assert kv.point_read([b"m/a", b"m/zz", b"m/b"]) == ([b"v:m/a", None, b"v:m/b"], None)
    assert kv.point_read([b"m/a"], b"mv/a") == ([b"v:m/a"], (b"mv/a\xff", b"v:mv/a\xff"))
    assert kv.point_read([], b"mv/b\x00") == ([], (b"mv/b\x00", b"v:mv/b\x00"))
    assert kv.point_read([b"m/c"], b"mv/c") == ([None], None)
    assert kv.point_read([b"m/a", b"m/a"], b"\xff") == ([b"v:m/a", b"v:m/a"], None)


pairs_st = st.lists(
    st.tuples(st.binary(min_size=1, max_size=3), st.binary(max_size=3)), min_size=0, max_size=20
)


@given(keyset, pairs_st)
@example([b"a"], [(b"c", b"1"), (b"b", b"2")])  # both after the last key, descending
@example([b"a"], [(b"b", b"1"), (b"b", b"2")])  # one key twice after the last
@example([b"b"], [(b"c", b"1"), (b"a", b"2"), (b"d", b"3")])  # after, before, after
@example([], [(b"b", b"1"), (b"c", b"2")])  # an empty database
def test_put_many_matches_puts_one_by_one(
    tmp_path_factory: pytest.TempPathFactory, ks: list[bytes], pairs: list[tuple[bytes, bytes]]
) -> None:
    """``put_many`` appends the keys after the last stored one (LMDB's MDB_APPEND) and puts the
    rest: in any order, with repeats and keys on both sides of the last, it leaves what the
    same puts made one by one would (the last value of a repeated key wins)."""
    store = LmdbKV(tmp_path_factory.mktemp("putmany"))
    try:
        store.write(lambda t: [t.put(k, b"old") for k in ks])
        model = dict.fromkeys(ks, b"old")
        model.update(pairs)
        store.write(lambda t: t.put_many(pairs))
        with store.read() as r:
            assert list(r.scan(b"")) == sorted(model.items())
    finally:
        store.close()


@pytest.mark.lmdb_only
def test_an_append_lmdb_refuses_fails_the_write_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LMDB's MDB_APPEND skips a key that does not sort after the last one without raising;
    ``put_many`` counts what it added, so a wrong append decision fails the write (nothing of
    it stored) instead of dropping a key."""
    from cortex.storage import kv as kv_module

    store = LmdbKV(tmp_path / "s")
    try:
        store.write(lambda t: t.put(b"m", b"old"))
        monkeypatch.setattr(kv_module, "_append_from", lambda cur, pairs: 0)  # a wrong answer
        # put_many sorts the keys of a batch: a key given twice is the one out of order (more
        # pairs than ``_FEW_PUTS``, which are put one at a time)
        zs = [(b"z%03d" % i, b"3") for i in range(kv_module._FEW_PUTS)]
        batch = [(b"n", b"1"), *zs, (b"n", b"2")]
        with pytest.raises(CortexError, match="appended put was refused"):
            store.write(lambda t: t.put_many(batch))
        with store.read() as r:
            assert list(r.scan(b"")) == [(b"m", b"old")]
    finally:
        store.close()


@pytest.mark.lmdb_only
def test_put_many_leaves_appended_pages_full(tmp_path: Path) -> None:
    """Values of 1,600 bytes put in ascending key order after every stored key fill their pages
    two to a page (a plain put at the end leaves one a page: LMDB splits a full last page at its
    last node)."""
    store = LmdbKV(tmp_path / "s")
    try:
        store.write(lambda t: t.put(b"a", b"x"))
        for b in range(10):
            batch = [(b"v/" + (b * 20 + i).to_bytes(4, "big"), b"x" * 1600) for i in range(20)]
            store.write(lambda t, batch=batch: t.put_many(batch))
        leaves = store._env.stat()["leaf_pages"]
        assert leaves <= 101  # 200 values, two a page (and the first key's page)
        with store.read() as r:
            assert sum(1 for _ in r.keys(b"v/")) == 200
    finally:
        store.close()


@pytest.mark.lmdb_only
def test_put_many_routes_an_unsorted_batch_by_database(tmp_path: Path) -> None:
    """``put_many`` and ``add_many`` split a batch by the database holding each key (in key
    order, by two searches a database) whatever the order given: each key lands in its
    keyspace's database, a key given twice keeps its last value, and the caller's list is
    left as it was."""
    store = LmdbKV(tmp_path / "s")
    try:
        batch = [
            (b"vec/\x02", b"v2"),
            (b"m/\x01", b"h1"),
            (b"lex/d/\x01", b"d1"),
            (b"j/\x00\x01", b"j1"),
            (b"zz", b"last"),
            (b"lex/i/\x00", b"i0"),
            (b"m/\x01", b"h1 again"),
            (b"vec/\x01", b"v1"),
            (b"a", b"first"),
            (b"lex/e", b"between"),
        ]
        given = list(batch)
        store.write(lambda t: t.put_many(batch))
        assert batch == given
        added = store.write(lambda t: t.add_many([(b"vec/\x03", b"v3"), (b"m/\x00", b"h0")]))
        assert added == 2
        want = dict(batch) | {b"vec/\x03": b"v3", b"m/\x00": b"h0"}
        with store.read() as r:
            assert dict(r.scan(b"")) == want
            for key, value in want.items():
                assert r.get(key) == value
        routes = store._shared.routes
        with store._env.begin() as txn:
            for key, value in want.items():
                assert txn.get(key, db=routes.of(key)) == value
    finally:
        store.close()


def test_databases_of_duplicates_read_like_a_sorted_list(tmp_path: Path) -> None:
    """Format 20: the index keyspaces kept as (head, duplicate) read as the joined keys do.

    Scans both ways from any start, and seeks, under prefixes shorter than a head, a head, and
    longer (``idx/tag/``'s tag and type), against a sorted list; puts in and out of order
    (appended, or not), deletes, and an existing key put again.
    """
    import random

    from cortex.storage.keys import IDX_CLAIM, IDX_TAG, IDX_TYPE

    rnd = random.Random(5)
    keys = sorted(
        {
            IDX_TAG + bytes([rnd.randrange(3)]) * 8 + bytes([rnd.randrange(4)]) + rnd.randbytes(24)
            for _ in range(3000)
        }
        | {IDX_TYPE + bytes([rnd.randrange(3)]) + rnd.randbytes(24) for _ in range(500)}
        | {IDX_CLAIM + bytes([rnd.randrange(2)]) * 16 + rnd.randbytes(16) for _ in range(300)}
    )
    kv = LmdbKV(tmp_path / "kv")
    try:
        shuffled = keys[:]
        rnd.shuffle(shuffled)
        kv.write(lambda t: t.put_many([(k, b"") for k in shuffled[:2000]]))
        kv.write(lambda t: [t.put(k, b"") for k in shuffled[2000:]])
        assert kv.write(lambda t: t.add_many([(k, b"") for k in keys[:50]])) == 0
        assert kv.write(lambda t: t.put(keys[0], b"", overwrite=False)) is False
        gone = keys[10:20]
        assert all(kv.write(lambda t: [t.delete(k) for k in gone]))
        assert kv.write(lambda t: t.delete(gone[0])) is False
        keys = [k for k in keys if k not in gone]
        with kv.read() as txn:
            assert [k for k, _ in txn.scan(b"idx/")] == keys
            assert list(txn.keys(b"idx/", reverse=True)) == keys[::-1]
            assert txn.get(keys[5]) == b"" and txn.get(gone[0]) is None
            for _ in range(2000):
                base = rnd.choice(keys)
                prefix = base[: rnd.choice([4, 8, 9, 10, 16, 17, 18, 26, 27, 30])]
                start = base[: rnd.randrange(len(base) + 1)]
                if rnd.random() < 0.5:
                    start += rnd.randbytes(rnd.randrange(3))
                under = [k for k in keys if k.startswith(prefix)]
                for rev in (False, True):
                    if not rev:
                        want = next((k for k in under if k >= max(start, prefix)), None)
                    elif not start.startswith(prefix):
                        want = None if start < prefix or not under else under[-1]
                    else:
                        want = next((k for k in reversed(under) if k <= start), None)
                    assert txn.seek(prefix, start, reverse=rev) == want, (prefix, start, rev)
                    got = list(txn.keys(prefix, start=start, reverse=rev))
                    assert got[:1] == ([want] if want else []), (prefix, start, rev)
    finally:
        kv.close()


@pytest.mark.lmdb_only
def test_a_few_puts_store_what_the_split_puts_store(tmp_path: Path) -> None:
    """``put_many`` of a few pairs (``_put_few``, one put each) stores what the same pairs put
    through the split into databases (``_split``, a cursor each) do: in and out of order, a
    key given twice (the last put wins), an index entry stored already (kept), keys of the
    main database, of named ones and of databases of duplicates; a malformed index entry fails
    the write whole."""
    import random

    from cortex.storage import kv as kv_module
    from cortex.storage.keys import IDX_TAG, IDX_TYPE, JOURNAL, VEC

    rnd = random.Random(7)
    stores = [LmdbKV(tmp_path / "few"), LmdbKV(tmp_path / "split")]
    assert stores[0]._shared.routes.dup  # a new store: its named databases and of duplicates

    def split_puts(t: Any, pairs: list[tuple[bytes, bytes]]) -> None:
        for db, part in t._split(pairs):
            t._put_many(db, part)

    try:
        for n in range(40):
            pairs = [
                (IDX_TAG + bytes([rnd.randrange(3)]) * 8 + rnd.randbytes(25), b""),
                (IDX_TYPE + bytes([rnd.randrange(2)]) + rnd.randbytes(24), b""),
                (JOURNAL + n.to_bytes(8, "big"), rnd.randbytes(30)),
                (VEC + rnd.randbytes(4), rnd.randbytes(rnd.choice([8, 1600]))),
                (b"mv/" + rnd.randbytes(9), rnd.randbytes(20)),
                (b"meta/x", rnd.randbytes(5)),
                (b"meta/x", rnd.randbytes(6)),  # the last put of a key wins
            ]
            if n:
                pairs.append((IDX_TAG + b"\x01" * 8 + bytes(25), b""))  # stored already
            rnd.shuffle(pairs)
            assert len(pairs) <= kv_module._FEW_PUTS
            stores[0].write(lambda t, p=pairs: t.put_many(p))
            stores[1].write(lambda t, p=pairs: split_puts(t, p))
        bad = [(b"meta/y", b"1"), (IDX_TYPE + b"\x01", b"")]  # an index key of no duplicate
        with pytest.raises(CortexError, match="keyspace of index entries"):
            stores[0].write(lambda t: t.put_many(bad))
        got = []
        for store in stores:
            with store.read() as r:
                got.append(list(r.scan(b"")))
                assert r.get(b"meta/y") is None
        assert got[0] == got[1] and len(got[0]) > 200
    finally:
        for store in stores:
            store.close()
