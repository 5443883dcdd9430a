"""Group commit: concurrent writes of one process's threads share one commit (``LmdbKV.write``).

A write whose function blocks holds the leadership, so the writes started meanwhile queue up
and commit together in the next group: the tests make groups deterministically so, then check
that each write's outcome (result or error) is its own and that the store is whole. A writer
process with many threads is killed with SIGKILL while it commits groups: every write it
reported as returned is in the store, and the store verifies.
"""

from __future__ import annotations

import contextlib
import contextvars
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import lmdb
import pytest

from cortex import (
    ConflictError,
    Cortex,
    CortexError,
    Fact,
    JournalKind,
    NewMemory,
    Polarity,
    Preference,
    WriteBudgetError,
)
from cortex.storage.kv import LmdbKV
from tests import workers
from tests.test_crash import Child, _check_reports, _check_whole_store

pytestmark = pytest.mark.lmdb_only


def _queued(kv: LmdbKV) -> int:
    return len(kv._shared.commits.queue)


class _Held:
    """A write that holds the leadership until ``release``: the writes started meanwhile queue."""

    def __init__(self, kv: LmdbKV) -> None:
        self.kv = kv
        self.inside = threading.Event()
        self.go = threading.Event()
        self.thread = threading.Thread(target=kv.write, args=(self._fn,))
        self.thread.start()
        assert self.inside.wait(30)

    def _fn(self, txn: Any) -> None:
        txn.put(b"held", b"1")
        self.inside.set()
        assert self.go.wait(30)

    def release_when_queued(self, n: int) -> None:
        deadline = time.monotonic() + 30
        while _queued(self.kv) < n:
            assert time.monotonic() < deadline, f"{_queued(self.kv)} of {n} writes queued"
            time.sleep(0.002)
        self.go.set()
        self.thread.join(30)
        assert not self.thread.is_alive()


def _run_all(calls: list[Callable[[], Any]]) -> tuple[list[threading.Thread], list[Any]]:
    """Start one thread per call; each outcome is its result or the exception it raised."""
    out: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            out[i] = calls[i]()
        except BaseException as exc:
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    return threads, out


def _join(threads: list[threading.Thread]) -> None:
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)


class Boom(Exception):
    pass


def test_queued_writes_commit_once_and_fail_alone(tmp_path: Path) -> None:
    kv = LmdbKV(tmp_path / "kv")
    try:
        kv.write(lambda t: t.put(b"base", b"0"))
        before = kv.last_txnid()
        var: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")

        def put(i: int) -> Callable[[], Any]:
            def call() -> Any:
                var.set(f"caller {i}")

                def fn(txn: Any) -> tuple[str, int]:
                    txn.put(b"k%d" % i, b"v%d" % i)
                    return var.get(), threading.get_ident()

                return kv.write(fn)

            return call

        def boom(txn: Any) -> None:
            txn.put(b"boom", b"x")
            raise Boom

        def too_long(txn: Any) -> None:
            txn.put(b"long", b"x")
            txn.put(b"k" * 600, b"v")  # over LMDB's key size limit

        def separators(txn: Any) -> int:  # must see the file as its transaction does: alone
            txn.put(b"sep", b"1")
            return kv.refresh_separators(txn, (b"zz",))

        held = _Held(kv)
        calls = [put(i) for i in range(5)]
        calls += [lambda: kv.write(boom), lambda: kv.write(too_long)]
        calls += [lambda: kv.write(separators)]
        threads, out = _run_all(calls)
        held.release_when_queued(len(calls))
        _join(threads)

        leader = {ident for _, ident in out[:5]}
        assert [who for who, _ in out[:5]] == [f"caller {i}" for i in range(5)]
        assert len(leader) == 1  # one thread ran the group's functions, in each caller's context
        assert isinstance(out[5], Boom)
        assert isinstance(out[6], CortexError) and isinstance(out[6].__cause__, lmdb.Error)
        assert out[7] == 0
        # the held write, the group, and the separators' write alone when it ran after another
        # write of the group; whichever queued thread wakes first leads, and when that is the
        # separators' own thread its write runs first in the group (it then sees the file as
        # its transaction does) and needs no commit of its own
        assert kv.last_txnid() - before in (2, 3)
        with kv.read() as r:
            assert dict(r.scan(b"")) == {
                b"base": b"0",
                b"held": b"1",
                b"sep": b"1",
                **{b"k%d" % i: b"v%d" % i for i in range(5)},
            }
    finally:
        kv.close()


def test_a_full_map_grows_and_runs_the_whole_group_again(tmp_path: Path) -> None:
    kv = LmdbKV(tmp_path / "kv", map_size=0)
    try:
        first = kv.info()["map_size"]
        before = kv.last_txnid()
        runs = [0, 0, 0]

        def small(i: int) -> Callable[[Any], int]:
            def fn(txn: Any) -> int:
                runs[i] += 1
                txn.put(b"s%d" % i, b"x")
                return i

            return fn

        def big(txn: Any) -> int:
            runs[2] += 1
            for j in range(80):  # 80 MiB: more than the first map holds
                txn.put(b"b%03d" % j, bytes(1 << 20))
            return 2

        held = _Held(kv)
        threads, out = _run_all([lambda: kv.write(small(0)), lambda: kv.write(small(1))])
        threads += _run_all([lambda: kv.write(big)])[0]
        held.release_when_queued(3)
        _join(threads)
        assert out == [0, 1]
        assert kv.info()["map_size"] > first
        # the group ran again, whole, in the grown map (whichever of its writes ran before the
        # big one ran twice) and committed once after the held write
        assert runs[2] == 2 and min(runs) >= 1
        assert kv.last_txnid() == before + 2
        with kv.read() as r:
            assert r.get(b"s0") == b"x" and r.get(b"s1") == b"x"
            assert len(list(r.keys(b"b0"))) == 80
    finally:
        kv.close()


def test_writes_after_an_erasure_wait_for_the_next_group(tmp_path: Path) -> None:
    """A write that changes the epoch ends its group: the rest run after the renewal."""
    kv = LmdbKV(tmp_path / "kv", epoch_prefix=b"e/")
    try:
        kv.write(lambda t: t.put(b"e/1", b""))
        kv.write(lambda t: t.put(b"x", b""))  # the epoch as this environment saw it
        env = kv._shared.env
        ran: list[tuple[str, int]] = []

        def fn(name: str) -> Callable[[Any], None]:
            def run(txn: Any) -> None:
                if name == "erase":
                    txn.put(b"e/2", b"")
                else:
                    txn.put(name.encode(), b"")
                ran.append((name, txn._txn.id()))

            return run

        held = _Held(kv)
        names = ["a", "erase", "b", "c"]
        threads, out = _run_all([lambda n=n: kv.write(fn(n)) for n in names])
        held.release_when_queued(len(names))
        _join(threads)
        assert out == [None] * 4
        at = dict(ran)
        erased = at["erase"]
        after = [n for n, _ in ran[[n for n, _ in ran].index("erase") + 1 :]]
        assert all(at[n] > erased for n in after)
        assert kv._shared.env is not env  # renewed before the writes that followed the erasure
        with kv.read() as r:
            assert {k for k, _ in r.scan(b"")} == {
                b"e/1",
                b"e/2",
                b"x",
                b"held",
                *(n.encode() for n in ("a", "b", "c")),
            }
    finally:
        kv.close()


class Stop(BaseException):
    """Like KeyboardInterrupt: not an Exception."""


def test_an_interrupt_fails_its_own_write_only(tmp_path: Path) -> None:
    """Raised by a follower's function it reaches that follower; by the leader's, it stops the
    group and the others run in the next one (whichever thread leads, each outcome is its own)."""
    kv = LmdbKV(tmp_path / "kv")
    try:

        def stop(txn: Any) -> None:
            txn.put(b"stop", b"")
            raise Stop

        held = _Held(kv)
        calls = [lambda: kv.write(stop)]
        calls += [lambda n=n: kv.write(lambda t: t.put(n, b"")) for n in (b"a", b"b", b"c")]
        threads, out = _run_all(calls)
        held.release_when_queued(len(calls))
        _join(threads)
        assert isinstance(out[0], Stop)
        assert out[1:] == [True] * 3
        with kv.read() as r:
            assert {k for k, _ in r.scan(b"")} == {b"held", b"a", b"b", b"c"}
    finally:
        kv.close()


class _Signal(BaseException):
    pass


def test_an_interrupt_while_queued_withdraws_the_write(tmp_path: Path) -> None:
    """A signal that interrupts a writer waiting in the queue (not yet taken by a leader)
    takes its write out of the queue: it is never committed by a later group."""
    kv = LmdbKV(tmp_path / "kv")

    def raise_signal(signum: int, frame: Any) -> None:
        raise _Signal

    old = signal.signal(signal.SIGUSR1, raise_signal)
    try:
        held = _Held(kv)
        main = threading.get_ident()

        def interrupt_when_queued() -> None:
            deadline = time.monotonic() + 30
            while _queued(kv) < 1:
                assert time.monotonic() < deadline
                time.sleep(0.002)
            signal.pthread_kill(main, signal.SIGUSR1)

        t = threading.Thread(target=interrupt_when_queued)
        t.start()
        with pytest.raises(_Signal):
            kv.write(lambda txn: txn.put(b"withdrawn", b"1"))
        t.join(30)
        assert _queued(kv) == 0
        held.go.set()
        held.thread.join(30)
        kv.write(lambda txn: txn.put(b"after", b"1"))
        with kv.read() as r:
            assert {k for k, _ in r.scan(b"")} == {b"held", b"after"}
    finally:
        signal.signal(signal.SIGUSR1, old)
        kv.close()


class _Stop(BaseException):
    pass


@pytest.mark.parametrize("behind_another", [False, True], ids=["alone", "behind_another"])
def test_an_interrupted_writer_taken_then_put_back_withdraws(
    tmp_path: Path, behind_another: bool
) -> None:
    """A writer interrupted after a leader took it waits for its group; when the leader puts
    it back in the queue unwritten (the leader itself interrupted), it withdraws then: it
    neither waits for a later writer to lead nor has its write committed by one. With another
    writer put back before it (``behind_another``), that one leads the next group, which does
    not take the interrupted writer's write."""
    kv = LmdbKV(tmp_path / "kv")
    main = threading.get_ident()
    interrupted = threading.Event()
    commits = kv._shared.commits

    def raise_signal(signum: int, frame: Any) -> None:
        interrupted.set()
        raise _Signal

    def alone(go: threading.Event, inside: threading.Event) -> None:
        with kv.read():  # inside a snapshot: a write of its own, holding LMDB's writer lock
            kv.write(lambda txn: (inside.set(), go.wait(30), txn.put(b"alone", b"1")))

    def leader_fn(txn: Any) -> None:  # runs with the main thread's write taken into its group
        txn.put(b"leader", b"1")
        signal.pthread_kill(main, signal.SIGUSR1)
        assert interrupted.wait(30)
        time.sleep(0.2)  # the main thread waits for the group's outcome now
        raise _Stop  # the leader interrupted: the others go back to the queue, unwritten

    def leader() -> None:
        with pytest.raises(_Stop):
            kv.write(leader_fn)

    def rescue() -> None:  # without the fix, only a later writer ends the main thread's wait
        if not done.wait(10):
            kv.write(lambda txn: txn.put(b"rescue", b"1"))

    def other() -> None:
        kv.write(lambda txn: txn.put(b"other", b"1"))

    old = signal.signal(signal.SIGUSR1, raise_signal)
    go, inside, done = threading.Event(), threading.Event(), threading.Event()
    threads = [threading.Thread(target=alone, args=(go, inside))]
    try:
        threads[0].start()
        assert inside.wait(30)
        threads.append(threading.Thread(target=leader))
        threads[1].start()
        deadline = time.monotonic() + 30
        while not commits.leading:  # the leader waits for LMDB's writer lock
            assert time.monotonic() < deadline
            time.sleep(0.002)
        if behind_another:
            threads.append(threading.Thread(target=other))
            threads[-1].start()
            while _queued(kv) < 1:  # the other writer queues first
                assert time.monotonic() < deadline
                time.sleep(0.002)
        queued = 1 + behind_another

        def release_when_queued() -> None:
            while _queued(kv) < queued:
                assert time.monotonic() < deadline
                time.sleep(0.002)
            go.set()

        more = [threading.Thread(target=release_when_queued), threading.Thread(target=rescue)]
        threads += more
        for t in more:
            t.start()
        started = time.monotonic()
        with pytest.raises(_Signal) as raised:
            kv.write(lambda txn: txn.put(b"main", b"1"))
        notes = getattr(raised.value, "__notes__", [])
        assert not any("IS committed" in n for n in notes), notes
        elapsed = time.monotonic() - started
        done.set()
        for t in threads:
            t.join(30)
        assert elapsed < 8
        assert _queued(kv) == 0
        with kv.read() as r:
            assert r.get(b"main") is None and r.get(b"leader") is None
            assert r.get(b"alone") == b"1"
            assert r.get(b"other") == (b"1" if behind_another else None)
    finally:
        signal.signal(signal.SIGUSR1, old)
        go.set()
        done.set()
        kv.close()


def test_an_interrupt_before_the_leader_starts_frees_the_leadership(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signal's exception between taking the leadership and ``_lead``'s own cleanup (here:
    raised as ``_lead`` is entered) must not leave the queue led for ever."""
    kv = LmdbKV(tmp_path / "kv")
    try:
        real = LmdbKV._lead

        def interrupted(self: LmdbKV, c: Any, me: Any) -> None:
            raise Stop

        monkeypatch.setattr(LmdbKV, "_lead", interrupted)
        with pytest.raises(Stop):
            kv.write(lambda txn: txn.put(b"lost", b"1"))
        monkeypatch.setattr(LmdbKV, "_lead", real)
        threads, out = _run_all([lambda: kv.write(lambda txn: txn.put(b"next", b"1"))])
        _join(threads)  # hung for ever before: the queue still had a leader
        assert out == [True]
        with kv.read() as r:
            assert {k for k, _ in r.scan(b"")} == {b"next"}
    finally:
        kv.close()


def test_a_thread_inside_a_read_snapshot_writes_alone(tmp_path: Path) -> None:
    kv = LmdbKV(tmp_path / "kv")
    try:
        with kv.read() as r:
            assert kv.write(lambda t: t.put(b"a", b"1")) is True
            assert r.get(b"a") is None
        with kv.read() as r:
            assert r.get(b"a") == b"1"
    finally:
        kv.close()


def test_engine_writes_in_one_group_fail_alone(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with Cortex.open(path, actor="agent") as cx:
        taken = cx.write(Fact(statement="taken", subject="s", predicate="p")).id
        with cx.task("spent", limit=1):
            cx.write(Fact(statement="spends the budget", subject="s", predicate="p"))
        kv = LmdbKV(path)  # another handle of the store in this process: the same queue
        try:

            def in_task() -> Any:
                with cx.task("spent", limit=1):
                    return cx.write(Fact(statement="over budget", subject="s", predicate="p"))

            def fact(i: int) -> Callable[[], Any]:
                return lambda: cx.write(Fact(statement=f"ok {i}", subject="s", predicate="p"))

            calls = [fact(i) for i in range(4)]
            calls += [
                in_task,
                lambda: cx.write(Fact(statement="clash", subject="s", predicate="p"), id=taken),
                lambda: cx.write_many(
                    [
                        NewMemory(data=Fact(statement="many 1", subject="s", predicate="p")),
                        NewMemory(
                            data=Fact(statement="many 2", subject="s", predicate="p"), id=taken
                        ),
                    ]
                ),
                lambda: cx.update(
                    taken, Fact(statement="stale", subject="s", predicate="p"), expected_version=7
                ),
            ]
            held = _Held(kv)
            threads, out = _run_all(calls)
            held.release_when_queued(len(calls))
            _join(threads)
        finally:
            kv.close()
        for i, uri in enumerate(out[:4]):
            assert cx.resolve(uri).data == Fact(statement=f"ok {i}", subject="s", predicate="p")
        assert isinstance(out[4], WriteBudgetError)
        assert all(isinstance(x, ConflictError) for x in out[5:]), out[5:]
        assert cx.stats()["memories"] == 2 + 4
        assert cx.task_usage("spent") == 1
        kinds = [e.kind for e in cx.journal()]
        assert kinds.count(JournalKind.BUDGET_DROP) == 1
        assert kinds.count(JournalKind.WRITE) == 6
        assert JournalKind.UPDATE not in kinds
        report = cx.verify()
        assert report.ok, report.problems[:5]


def test_threads_writing_at_once_all_land(tmp_path: Path) -> None:
    writers, each = 8, 25
    with Cortex.open(tmp_path / "store", actor="agent") as cx:
        before = cx._kv.last_txnid()
        barrier = threading.Barrier(writers)

        def run(k: int) -> list[Any]:
            barrier.wait(30)
            return [
                cx.write(Fact(statement=f"w{k} {i}", subject=f"w{k}", predicate="p"))
                for i in range(each)
            ]

        threads, out = _run_all([lambda k=k: run(k) for k in range(writers)])
        _join(threads)
        for k, uris in enumerate(out):
            assert not isinstance(uris, BaseException), uris
            for i, uri in enumerate(uris):
                assert cx.resolve(uri).data.statement == f"w{k} {i}"
        assert cx.stats()["memories"] == writers * each
        assert cx._kv.last_txnid() - before <= writers * each
        _check_whole_store(cx)


def test_sigkill_while_threads_commit_in_groups_loses_nothing_returned(store_path: Any) -> None:
    rng = random.Random(20261127)
    Cortex.open(store_path, actor="owner").close()
    total = 0
    for seed in range(6):
        with Child(workers.command("group_writer", store_path, seed, 8)) as child:
            child.wait_for("ready")
            time.sleep(rng.uniform(0.05, 0.4))
            reports = child.kill()
            assert child.proc.returncode == -signal.SIGKILL, child.stderr()
        with Cortex.open(store_path, actor="checker", as_owner=True) as cx:
            total += _check_reports(cx, seed, reports)
            _check_whole_store(cx)
    assert total > 0


def _queue_in_order(kv: LmdbKV, calls: list[Callable[[], Any]]) -> tuple[list[Any], list[Any]]:
    """Start one thread per call, each after the one before has queued: the group's order."""
    threads: list[Any] = []
    out: list[Any] = []
    for i, call in enumerate(calls):
        ts, o = _run_all([call])
        threads += ts
        out.append(o)
        deadline = time.monotonic() + 30
        while _queued(kv) < i + 1:
            assert time.monotonic() < deadline, f"{_queued(kv)} of {i + 1} writes queued"
            time.sleep(0.002)
    return threads, out


def _note(word: str) -> Fact:
    # no temporal chain (supersede=False below): the fused single write, which shares
    return Fact(statement=f"note {word}", subject="s", predicate="p")


def _index_writes(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The group indexers written from now on (``_GroupIndexer.finish``), in a list."""
    from cortex.engine import store as engine_store

    finished: list[Any] = []
    real = engine_store._GroupIndexer.finish

    def counted(state: Any) -> None:
        finished.append(state)
        real(state)

    monkeypatch.setattr(engine_store._GroupIndexer, "finish", staticmethod(counted))
    return finished


def test_fused_writes_of_a_group_index_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fused single writes of one group stage their terms into one indexer, written once
    for the group, and each memory is searchable at once."""
    finished = _index_writes(monkeypatch)
    words = ["alpha", "bravo", "charlie", "delta", "echo"]
    with Cortex.open(tmp_path / "store", actor="agent") as cx:
        held = _Held(cx._kv)
        threads, out = _run_all([lambda w=w: cx.write(_note(w), supersede=False) for w in words])
        held.release_when_queued(len(words))
        _join(threads)
        assert len(finished) == 1  # the five writes: one group, one index write
        for w, uri in zip(words, out, strict=True):
            assert cx.resolve(uri).data == _note(w)
            assert [m for m, _ in cx._engine._lexical_search(w, 5)] == [uri.id]
        _check_whole_store(cx)


def test_a_failing_sharing_write_fails_alone(tmp_path: Path) -> None:
    """A sharing write that fails (a taken id, a spent budget) fails alone: the group runs
    again without sharing, the others commit and are indexed, the store verifies."""
    with Cortex.open(tmp_path / "store", actor="agent") as cx:
        taken = cx.write(_note("taken"), supersede=False).id
        with cx.task("spent", limit=1):
            cx.write(_note("spends"), supersede=False)

        def in_task() -> Any:
            with cx.task("spent", limit=1):
                return cx.write(_note("over"), supersede=False)

        calls = [
            lambda: cx.write(_note("first"), supersede=False),
            lambda: cx.write(_note("clash"), supersede=False, id=taken),
            lambda: cx.write(_note("second"), supersede=False),
            in_task,
            lambda: cx.write(_note("third"), supersede=False),
        ]
        held = _Held(cx._kv)
        threads, outs = _queue_in_order(cx._kv, calls)
        held.go.set()
        held.thread.join(30)
        _join(threads)
        out = [o[0] for o in outs]
        assert isinstance(out[1], ConflictError), out[1]
        assert isinstance(out[3], WriteBudgetError), out[3]
        for i, w in ((0, "first"), (2, "second"), (4, "third")):
            assert cx.resolve(out[i]).data == _note(w)
            assert [m for m, _ in cx._engine._lexical_search(w, 5)] == [out[i].id]
        assert cx._engine._lexical_search("clash", 5) == []
        assert cx._engine._lexical_search("over", 5) == []
        assert cx.stats()["memories"] == 2 + 3
        report = cx.verify()
        assert report.ok, report.problems[:5]


def test_sharing_writes_around_other_writes_of_the_group(tmp_path: Path) -> None:
    """The sharing writes of a group run first, their indexer written before the writes that
    index on their own (an update, a write with a temporal chain) run: the lexical index and
    its statistics stay whole."""
    with Cortex.open(tmp_path / "store", actor="agent") as cx:
        old = cx.write(_note("old"), supersede=False)
        gone = cx.write(_note("gone"), supersede=False)
        calls = [
            lambda: cx.write(_note("one"), supersede=False),
            lambda: cx.write(_note("two"), supersede=False),
            lambda: cx.update(old.id, _note("renewed"), supersede=False),
            lambda: cx.write(_note("three"), supersede=False),
            lambda: cx.update(gone.id, _note("replaced"), supersede=False),
            lambda: cx.write(Fact(statement="chained", subject="s", predicate="p")),
            lambda: cx.write(_note("four"), supersede=False),
        ]
        held = _Held(cx._kv)
        threads, outs = _queue_in_order(cx._kv, calls)
        held.go.set()
        held.thread.join(30)
        _join(threads)
        out = [o[0] for o in outs]
        assert not any(isinstance(x, BaseException) for x in out), out
        for w in ("one", "two", "renewed", "three", "replaced", "four", "chained"):
            assert len(cx._engine._lexical_search(w, 5)) == 1, w
        assert cx._engine._lexical_search("gone", 5) == []
        assert cx._engine._lexical_search("old", 5) == []
        _check_whole_store(cx)


def test_an_interrupt_as_the_leadership_is_handed_over_passes_it_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer interrupted as the leadership reaches it (the signal's exception raised as
    its wait ends) withdraws its write and hands the leadership to the next writer queued:
    that one commits, and the queue is not left led for ever."""
    from cortex.storage import kv as kv_module

    kv = LmdbKV(tmp_path / "kv")
    main = threading.get_ident()

    class _Wake:
        """The main thread's wait lock: its wait ends with an interrupt."""

        def __init__(self) -> None:
            self.lock = threading.Lock()

        def acquire(self) -> bool:
            self.lock.acquire()
            if threading.get_ident() == main:
                raise _Signal
            return True

        def release(self) -> None:
            self.lock.release()

        def locked(self) -> bool:
            return self.lock.locked()

    real = kv_module._Member.__init__

    def init(self: Any, *args: Any) -> None:
        real(self, *args)
        if threading.get_ident() == main:
            wake = _Wake()
            wake.lock.acquire()
            self.wake = wake

    monkeypatch.setattr(kv_module._Member, "__init__", init)
    try:
        held = _Held(kv)
        t = threading.Thread(
            target=lambda: (held.release_when_queued(2), None)  # the main write, then next
        )

        def next_write() -> Any:
            deadline = time.monotonic() + 30
            while _queued(kv) < 1:  # after the main thread's
                assert time.monotonic() < deadline
                time.sleep(0.002)
            return kv.write(lambda txn: txn.put(b"next", b"1"))

        threads, out = _run_all([next_write])
        t.start()
        with pytest.raises(_Signal) as raised:
            kv.write(lambda txn: txn.put(b"main", b"1"))
        assert not any("IS committed" in n for n in getattr(raised.value, "__notes__", []))
        t.join(30)
        _join(threads)
        assert out == [True]
        assert _queued(kv) == 0 and not kv._shared.commits.leading
        with kv.read() as r:
            assert {k for k, _ in r.scan(b"")} == {b"held", b"next"}
    finally:
        kv.close()


class _Pair:
    """Two threads A and B whose first writes commit in one group of two, then each waits.

    ``second(i)`` lets thread ``i`` make its second write (``b"a2"``, ``b"b2"``; the first
    are ``b"a1"``, ``b"b1"``), ``end(i)`` lets it end without one.
    """

    def __init__(self, kv: LmdbKV) -> None:
        self.go = [threading.Event(), threading.Event()]
        self.write = [True, True]
        held = _Held(kv)

        def writer(i: int, name: bytes) -> None:
            kv.write(lambda t: t.put(name + b"1", b"1"))
            if self.go[i].wait(30) and self.write[i]:
                kv.write(lambda t: t.put(name + b"2", b"2"))

        self.threads = [
            threading.Thread(target=writer, args=(i, n)) for i, n in enumerate((b"a", b"b"))
        ]
        for t in self.threads:
            t.start()
        held.release_when_queued(2)
        c = kv._shared.commits
        deadline = time.monotonic() + 30
        while len(c.back) < 2:  # the group of two is done: both expected back
            assert time.monotonic() < deadline
            time.sleep(0.002)

    def second(self, i: int) -> None:
        self.go[i].set()

    def end(self, i: int) -> None:
        self.write[i] = False
        self.go[i].set()

    def join(self) -> None:
        for i in (0, 1):
            if not self.go[i].is_set():
                self.end(i)
        _join(self.threads)


@contextlib.contextmanager
def _paired(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, group_wait: float
) -> Iterator[tuple[LmdbKV, _Pair]]:
    """A store with a ``_Pair`` of threads done with their group, ``_GROUP_WAIT`` set so."""
    from cortex.storage import kv as kv_module

    monkeypatch.setattr(kv_module, "_GROUP_WAIT", group_wait)
    kv = LmdbKV(tmp_path / "kv")
    pair = None
    try:
        pair = _Pair(kv)
        yield kv, pair
    finally:
        if pair is not None:
            pair.join()
        kv.close()


def _second_of_a(pair: _Pair) -> float:
    """Let thread A (alone) make its second write; how long it took to return (seconds)."""
    started = time.monotonic()
    pair.second(0)
    pair.threads[0].join(30)
    assert not pair.threads[0].is_alive()
    return time.monotonic() - started


def test_a_leader_waits_for_the_writers_of_the_last_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _paired(tmp_path, monkeypatch, 30.0) as (kv, pair):
        a, b = pair.threads
        c = kv._shared.commits
        assert c.flushing == 0 and set(c.back) == {a.ident, b.ident}
        c.commit_time = 30.0  # the wait's bound is the last commit's time: not the test's
        before = kv.last_txnid()
        pair.second(0)  # A writes again and leads: B, of its last group, is expected back
        time.sleep(0.2)
        assert a.is_alive() and kv.last_txnid() == before  # A waits, nothing committed
        pair.second(1)
        pair.join()
        assert kv.last_txnid() == before + 1  # A's and B's second writes in one commit
        with kv.read() as r:
            assert r.get(b"a2") == b"2" and r.get(b"b2") == b"2"
        assert set(c.back) == {a.ident, b.ident}  # a group of two again


def test_a_leader_stops_waiting_for_writers_that_do_not_come(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _paired(tmp_path, monkeypatch, 0.3) as (kv, pair):
        c = kv._shared.commits
        c.commit_time = 0.3
        # A writes again, B does not: A waited for B, for the bound (a slow machine: slack)
        assert 0.2 <= _second_of_a(pair) < 10
        assert c.back == {}  # B is no longer expected: the next leader does not wait for it
        with kv.read() as r:
            assert r.get(b"a2") == b"2" and r.get(b"b2") is None
        c.commit_time = 30.0
        started = time.monotonic()
        kv.write(lambda t: t.put(b"c", b"1"))
        assert time.monotonic() - started < 10  # not the 30 s a wait would take


def test_a_lone_writer_is_never_waited_for(tmp_path: Path) -> None:
    kv = LmdbKV(tmp_path / "kv")
    try:
        c = kv._shared.commits
        for i in range(20):
            kv.write(lambda t, i=i: t.put(b"k%d" % i, b"v"))
            # a group of one is no sign of concurrent writers: nobody is expected back
            assert c.flushing == 0 and c.back == {}
    finally:
        kv.close()


def test_a_wait_for_the_last_group_ends_at_the_commit_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _paired(tmp_path, monkeypatch, 30.0) as (kv, pair):
        # the bound: a wait never costs more than the commit it may save
        kv._shared.commits.commit_time = 0.2
        assert 0.15 <= _second_of_a(pair) < 10  # 0.2 s, not the 30 s of _GROUP_WAIT


def test_a_trace_gets_each_groups_times(tmp_path: Path) -> None:
    kv = LmdbKV(tmp_path / "kv")
    try:
        c = kv._shared.commits
        c.trace = []
        kv.write(lambda t: t.put(b"a", b"1"))
        held = _Held(kv)  # its group (of one) is traced as it ends
        threads, _ = _run_all(
            [lambda i=i: kv.write(lambda t: t.put(b"k%d" % i, b"v")) for i in range(3)]
        )
        held.release_when_queued(3)
        _join(threads)
        assert [g[4] for g in c.trace] == [1, 1, 3]
        for led, gathered, began, ended, _ in c.trace:
            assert led <= gathered <= began <= ended
        c.trace = None
        kv.write(lambda t: t.put(b"b", b"1"))
    finally:
        kv.close()


def test_an_interrupt_while_the_leader_gathers_frees_the_leadership(tmp_path: Path) -> None:
    kv = LmdbKV(tmp_path / "kv")
    try:
        c = kv._shared.commits
        real = c.arrived

        class Interrupted:
            def wait(self, timeout: float) -> bool:
                raise Stop

        c.back[-1] = time.perf_counter() + 3600  # a writer expected back (for an hour)
        c.commit_time = 3600.0
        c.arrived = Interrupted()  # type: ignore[assignment]
        with pytest.raises(Stop):
            kv.write(lambda txn: txn.put(b"lost", b"1"))
        c.arrived = real
        c.back.clear()
        assert not c.leading and not c.gathering
        threads, out = _run_all([lambda: kv.write(lambda txn: txn.put(b"next", b"1"))])
        _join(threads)
        assert out == [True]
        with kv.read() as r:
            assert {k for k, _ in r.scan(b"")} == {b"next"}
    finally:
        kv.close()


def test_chain_writes_of_a_group_share_its_indexer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Single writes that apply the chain rules (a claim: supersede not False) share the group's
    indexer too: one index write for the group, the same outcomes as one by one, each memory
    searchable at once."""
    finished = _index_writes(monkeypatch)
    words = ["alpha", "bravo", "charlie", "delta"]

    def pref(word: str) -> Preference:  # one topic: each later one supersedes the one before
        return Preference(topic="editor", polarity=Polarity.PREFER, rationale=f"because {word}")

    with Cortex.open(tmp_path / "store", actor="agent") as cx:
        held = _Held(cx._kv)
        threads, out = _run_all([lambda w=w: cx.write(pref(w)) for w in words])
        held.release_when_queued(len(words))
        _join(threads)
        assert len(finished) == 1  # the four writes: one group, one index write
        assert all(not isinstance(r, BaseException) for r in out), out
        # the group ran them in some order: the first created, each later one superseding the
        # one before it (the chain rules saw each earlier write of the group)
        assert sorted(r.outcome for r in out) == ["created"] + ["superseded"] * 3
        by_id = {r.id: r for r in out}
        first = next(r for r in out if r.outcome == "created")
        chain = [first]
        while len(chain) < len(out):
            chain.append(next(r for r in out if r.supersedes == (chain[-1],)))
        assert {r.id for r in chain} == set(by_id)
        for w, uri in zip(words, out, strict=True):
            assert cx.resolve(uri).data == pref(w)
            assert [m for m, _ in cx._engine._lexical_search(w, 5)] == [uri.id]
        _check_whole_store(cx)
