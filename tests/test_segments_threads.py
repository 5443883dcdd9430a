"""The module-level overlay caches of ``cortex.index.segments`` under threads.

Each test runs one call in a thread that stops at every line of the function under test in
turn (one run per line: ``sys.settrace``), and meanwhile does what another thread may do at
that moment (a reader of another snapshot, a search on the same shared overlay). Every
interleaving at line granularity is tried, so the tests are deterministic.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import CodeType
from typing import Any

from cortex import Belief, Cortex, Stance
from cortex.index import segments
from cortex.storage.keys import LEX_SEGMENT, lex_segment_key

_T = (1).to_bytes(4, "big") + (3).to_bytes(4, "big")  # tf 1, dl 3


def _belief(words: list[str]) -> Belief:
    return Belief(statement=" ".join(words), stance=Stance.SUSPECT)


def _stop_at(
    code: CodeType, stop: int, run: Callable[[], Any], meanwhile: Callable[[], None]
) -> tuple[Any, bool]:
    """``run()`` in a thread that waits at the ``stop``-th line event of ``code`` until
    ``meanwhile()`` (in this thread) is done: ``run``'s result (or exception), and whether
    the thread stopped there."""
    paused, go = threading.Event(), threading.Event()
    seen = [0]
    out: list[Any] = []

    def local(frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            if seen[0] == stop:
                paused.set()
                go.wait()
            seen[0] += 1
        return local

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        return local if frame.f_code is code else None

    def body() -> None:
        sys.settrace(tracer)
        try:
            out.append(run())
        except BaseException as exc:
            out.append(exc)
        finally:
            sys.settrace(None)

    t = threading.Thread(target=body)
    t.start()
    while not paused.wait(0.005) and t.is_alive():
        pass
    try:
        if paused.is_set():
            meanwhile()
    finally:
        go.set()
        t.join()
    return out[0], paused.is_set()


def _every_stop(code: CodeType, one: Callable[[int], bool]) -> int:
    """``one(stop)`` for stop = 0, 1, ... until it reports that the thread never paused."""
    stop = 0
    while one(stop):
        stop += 1
        assert stop < 200
    return stop


def test_a_terms_delta_while_another_thread_combines_it() -> None:
    """``Overlay.delta`` of a term another thread is combining (``term``) on the same shared
    overlay (``overlay``'s cache hands one object to every reader of a snapshot)."""
    seg = segments.Segment(segments.encode_groups({"t1": {bytes(4): (segments.ADD, _T)}})[1])

    def one(stop: int) -> bool:
        ov = segments.Overlay([(lex_segment_key(0), seg)])
        got: list[Any] = []

        def meanwhile() -> None:
            try:
                got.append(ov.delta("t1"))
            except Exception as exc:
                got.append(exc)

        _, paused = _stop_at(segments.Overlay.term.__code__, stop, lambda: ov.term("t1"), meanwhile)
        if paused:
            assert got == [1], f"stopped at line event {stop}"
        return paused

    assert _every_stop(segments.Overlay.term.__code__, one) > 5


def test_overlay_while_another_snapshot_is_cached(tmp_path: Path) -> None:
    """A reader's ``overlay`` is its snapshot's, whatever another thread's ``overlay`` of a
    newer snapshot caches meanwhile."""
    with Cortex.open(tmp_path / "s", actor="t") as cx:
        for i in range(2):
            cx.write(_belief(["tea", f"w{i}"]))
        n = [2]

        def run() -> tuple[list[bytes], list[bytes]]:
            with cx._kv.read() as txn:
                keys = [k for k, _ in txn.scan(LEX_SEGMENT)]
                return keys, list(segments.overlay(txn).keys)

        def meanwhile() -> None:  # a write, then a reader of the new snapshot
            cx.write(_belief(["tea", f"w{n[0]}"]))
            n[0] += 1
            with cx._kv.read() as txn:
                segments.overlay(txn)

        def one(stop: int) -> bool:
            with cx._kv.read() as txn:
                segments.overlay(txn)  # cached: the thread's snapshot, until meanwhile
            (keys, got), paused = _stop_at(segments.overlay.__code__, stop, run, meanwhile)
            assert got == keys, f"stopped at line event {stop}"
            return paused

        assert _every_stop(segments.overlay.__code__, one) > 2


def test_remember_while_another_snapshot_is_cached(tmp_path: Path) -> None:
    """What ``remember`` keeps for the next write is an overlay of exactly the pairs it is
    kept under, whatever another thread's ``overlay`` caches meanwhile."""
    with Cortex.open(tmp_path / "s", actor="t") as cx:
        for i in range(2):
            cx.write(_belief(["tea", f"w{i}"]))
        with cx._kv.read() as old:
            cx.write(_belief(["tea", "w2"]))
            payload, groups = segments.encode_fresh({"t9": bytes(4) + _T})

            def one(stop: int) -> bool:
                with cx._kv.read() as txn:
                    on = segments.overlay(txn)
                key = on.next_key

                def meanwhile() -> None:  # a reader of an older snapshot
                    segments.overlay(old)

                run = lambda: segments.remember(key, payload, groups, on)  # noqa: E731
                _, paused = _stop_at(segments.remember.__code__, stop, run, meanwhile)
                if segments._LAST:
                    pairs, kept = segments._LAST[0]
                    assert list(kept.keys) == [k for k, _ in pairs], f"line event {stop}"
                return paused

            assert _every_stop(segments.remember.__code__, one) > 3
