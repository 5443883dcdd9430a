"""AsyncCortex: every call awaitable, the event loop never blocked, cancellation all or nothing."""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cortex import (
    AsyncCortex,
    AsyncReaderView,
    Cortex,
    Fact,
    NewMemory,
    NotFoundError,
    Query,
    Reader,
    ReaderView,
    Scope,
    ValidationError,
)

# Cortex calls with no awaitable twin, and why
NOT_ASYNC = {
    "open": "AsyncCortex.open",
    "close": "AsyncCortex.close",
    "view": "AsyncCortex.view returns an AsyncReaderView at once (it does no I/O)",
    "backup": "whole-store administration: use the sync handle in a thread",
    "import_records": "whole-store administration",
    "merge_lexical": "whole-store administration",
    "reindex_lexical": "whole-store administration",
    "reindex_vectors": "whole-store administration",
    "save_vectors": "close saves the index",
    "vector_info": "administration",
    "vector_state": "administration",
    "task": "AsyncCortex.task is the same plain with-block (it only sets the caller's context)",
}


def fact(i: int, k: int = 0) -> Fact:
    return Fact(statement=f"worker {k} noted item {i} about zurich", subject=f"w{k}", predicate="n")


def test_every_public_call_has_an_awaitable_twin() -> None:
    public = {
        n
        for n, v in inspect.getmembers(Cortex)
        if not n.startswith("_") and callable(v) and not isinstance(v, property)
    }
    missing = sorted(public - set(NOT_ASYNC) - set(dir(AsyncCortex)))
    assert not missing, f"AsyncCortex lacks {missing}"
    for name in sorted(public - set(NOT_ASYNC)):
        assert inspect.iscoroutinefunction(getattr(AsyncCortex, name)), name
    for name in ("find", "context", "search", "about", "resolve", "history", "write", "update"):
        assert hasattr(ReaderView, name)
        assert inspect.iscoroutinefunction(getattr(AsyncReaderView, name)), name


def test_the_calls_work(tmp_path: Path) -> None:
    async def main() -> None:
        async with await AsyncCortex.open(tmp_path / "s", actor="owner") as cx:
            uri = await cx.write(fact(1), tags=["shared"], visibility="scoped")
            assert (await cx.resolve(uri)).data == fact(1)
            u2 = await cx.update(uri, fact(2))
            assert [m.version.version for m in await cx.history(uri.id)] == [1, 2]
            res = await cx.find(Query(text="zurich", limit=5))
            assert res.uris == [u2]
            await cx.core_update("user", "tz", "UTC")
            assert await cx.core_get("user") == {"tz": "UTC"}
            view = cx.view(Reader(actor="helper", scopes=(Scope(tags=frozenset({"shared"})),)))
            assert (await view.find(Query(types=["Fact"], limit=5))).uris == [u2]
            with pytest.raises(NotFoundError):
                await view.resolve_latest((await cx.write(fact(3))).id)  # private
            await cx.tombstone(u2, "done")
            assert (await cx.verify()).ok
            assert len(await cx.journal()) >= 4

    asyncio.run(main())


async def _probe(stop: asyncio.Event, lags: list[float]) -> None:
    """Sleep 1 ms again and again; record how late each wake-up was (the loop's lag)."""
    while not stop.is_set():
        t = time.perf_counter()
        await asyncio.sleep(0.001)
        lags.append(time.perf_counter() - t - 0.001)


def test_a_waiting_write_does_not_block_the_loop(tmp_path: Path) -> None:
    """While another thread holds the store's writer lock, a pending write leaves the loop free.

    A blocking call would stall the loop for the whole 300 ms the lock is held; the probe must
    instead wake up many times during it.
    """

    async def main() -> None:
        async with await AsyncCortex.open(tmp_path / "s", actor="owner") as cx:
            held, release = threading.Event(), threading.Event()

            def hold(txn: Any) -> None:
                held.set()
                release.wait(10)

            holder = threading.Thread(target=cx.sync._kv.write, args=(hold,))
            holder.start()
            held.wait(10)
            stop, lags = asyncio.Event(), []
            probe = asyncio.create_task(_probe(stop, lags))
            write = asyncio.create_task(cx.write(fact(1)))
            await asyncio.sleep(0.3)
            ticks_while_held = len(lags)
            assert not write.done()  # it waits for the lock, in its thread
            release.set()
            uri = await write
            stop.set()
            await probe
            holder.join()
            assert ticks_while_held >= 30, ticks_while_held
            assert (await cx.resolve(uri)).data == fact(1)

    asyncio.run(main())


def test_eight_tasks_write_and_search_with_the_loop_free(tmp_path: Path) -> None:
    async def worker(cx: AsyncCortex, k: int) -> list[Any]:
        uris = []
        for i in range(15):
            uris.append(await cx.write(fact(i, k)))
            await cx.find(Query(text=f"worker {k} item", limit=5))
        return uris

    async def main() -> None:
        async with await AsyncCortex.open(tmp_path / "s", actor="owner", metasync=False) as cx:
            stop, lags = asyncio.Event(), []
            probe = asyncio.create_task(_probe(stop, lags))
            results = await asyncio.gather(*(worker(cx, k) for k in range(8)))
            stop.set()
            await probe
            uris = [u for r in results for u in r]
            assert len(set(uris)) == 8 * 15
            for u in uris:
                await cx.resolve(u)
            assert (await cx.verify()).ok
            # the loop kept turning while the work ran (figures: tools/bench_mcp.py --async);
            # how many ticks depends on how long the work took, so only that there were some
            # and that none waited long
            assert len(lags) >= 8
            assert max(lags) < 2.0

    asyncio.run(main())


def test_a_cancelled_write_is_all_or_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        async with await AsyncCortex.open(tmp_path / "s", actor="owner", metasync=False) as cx:
            batches = []
            for b, delay in enumerate([0.0, 0.0005, 0.002, 0.005, 0.01, 0.02, 0.05, 0.2]):
                items = [NewMemory(data=fact(i, b), tags=[f"batch{b}"]) for i in range(100)]
                task = asyncio.create_task(cx.write_many(items))
                await asyncio.sleep(delay)
                task.cancel()
                try:
                    await task
                    outcome = "done"
                except asyncio.CancelledError:
                    outcome = "cancelled"
                # when the cancellation lands, the transaction has ended: all or none is there
                res = await cx.find(Query(tags=[f"batch{b}"], limit=200))
                assert len(res.hits) in (0, 100), (b, delay, len(res.hits))
                if outcome == "done":
                    assert len(res.hits) == 100
                batches.append((outcome, len(res.hits)))
            assert (await cx.verify()).ok
            assert any(o == "cancelled" for o, _ in batches)

    asyncio.run(main())


def test_a_cancelled_read_is_abandoned_and_errors_pass_through(tmp_path: Path) -> None:
    async def main() -> None:
        async with await AsyncCortex.open(tmp_path / "s", actor="owner") as cx:
            with pytest.raises(ValidationError):
                await cx.find(Query(types=["Fact"]))  # no limit
            task = asyncio.create_task(cx.find(Query(types=["Fact"], limit=5)))
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(main())
