"""Write budgets (issue 14 item 7, seed 003: 50 writes per task; ``specs/claims.md`` §9).

Inside ``with cx.task(id, limit=n)`` the writes count against the task, in the store, so every
handle and process of one task shares the count. A write past the budget stores nothing,
journals a ``budget_drop`` entry and raises ``WriteBudgetError``; outside a task nothing is
counted.
"""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path
from typing import Any

import pytest

from cortex import (
    Cortex,
    Event,
    Fact,
    JournalKind,
    NewMemory,
    Query,
    ValidationError,
    WriteBudgetError,
)


def dump(cx: Cortex) -> dict[bytes, bytes]:
    with cx._kv.read() as txn:
        return dict(txn.scan(b""))


@pytest.fixture
def cx(tmp_path: Path) -> Any:
    with Cortex.open(tmp_path / "s", actor="agent") as store:
        yield store


def note(i: int) -> Event:
    return Event(kind="note", summary=f"note {i}")


def test_writes_past_the_budget_are_dropped_and_journalled(cx: Cortex) -> None:
    with cx.task("t-17", limit=3):
        for i in range(3):
            cx.write(note(i))
        before = dump(cx)
        with pytest.raises(WriteBudgetError, match="budget of 3 is spent"):
            cx.write(note(3))
        # nothing of the write was stored; only the journal says it was dropped
        after = dump(cx)
        changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
        assert all(k.startswith(b"j/") for k in changed) and len(changed) == 1
        last = list(cx.journal())[-1]
        assert last.kind is JournalKind.BUDGET_DROP and "1 write dropped" in (last.reason or "")
        assert "t-17" not in (last.reason or "")  # the task is named by its hash only
    assert cx.task_usage("t-17") == 3
    cx.write(note(4))  # outside the task: not counted
    assert cx.task_usage("t-17") == 3
    assert len(cx.find(Query(types=("Event",), limit=10)).hits) == 4
    assert cx.verify().ok


def test_batches_updates_and_confirmations(cx: Cortex) -> None:
    u = cx.write(Fact(statement="Sam likes tea", subject="Sam", predicate="likes"))
    with cx.task("t", limit=4):
        cx.write_many([note(1), NewMemory(data=note(2))])
        cx.update(u, Fact(statement="Sam likes green tea", subject="Sam", predicate="likes"))
        assert cx.task_usage("t") == 3
        with pytest.raises(WriteBudgetError):
            cx.write_many([note(3), note(4)])  # all or nothing: two would exceed
        assert cx.task_usage("t") == 3
        # a confirmation writes no memory and costs nothing
        cx.write(note(1), dedupe=True)
        assert cx.task_usage("t") == 3
        cx.write(note(5))
        with pytest.raises(WriteBudgetError):
            cx.update(u, Fact(statement="Sam likes tea", subject="Sam", predicate="likes"))
    assert cx.verify().ok


def test_tasks_are_separate_and_nest(cx: Cortex) -> None:
    with cx.task("a", limit=1):
        cx.write(note(1))
        with cx.task("b", limit=1):
            cx.write(note(2))
        with pytest.raises(WriteBudgetError):
            cx.write(note(3))
    assert (cx.task_usage("a"), cx.task_usage("b"), cx.task_usage("c")) == (1, 1, 0)


def test_bad_tasks(cx: Cortex) -> None:
    for bad in ("", "  ", "x" * 300, 5, "a\ud800"):
        with pytest.raises(ValidationError), cx.task(bad):  # type: ignore[arg-type]
            pass
        with pytest.raises(ValidationError, match="task"):  # the usage of no task id
            cx.task_usage(bad)  # type: ignore[arg-type]
    for limit in (0, -1, True, 1.5):
        with pytest.raises(ValidationError), cx.task("t", limit=limit):  # type: ignore[arg-type]
            pass


def _worker(path: str, n: int, out: Any) -> None:
    ok = dropped = 0
    with Cortex.open(path, actor="agent") as cx, cx.task("shared", limit=50):
        for i in range(n):
            try:
                cx.write(Event(kind="note", summary=f"{i}"))
                ok += 1
            except WriteBudgetError:
                dropped += 1
    out.put((ok, dropped))


def test_one_budget_across_processes(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with Cortex.open(path, actor="agent"):
        pass
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(str(path), 30, out)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    results = [out.get(timeout=5) for _ in procs]
    assert sum(ok for ok, _ in results) == 50 and sum(d for _, d in results) == 40
    with Cortex.open(path, actor="agent") as cx:
        assert cx.task_usage("shared") == 50
        assert len(cx.find(Query(types=("Event",), limit=200)).hits) == 50
        drops = [e for e in cx.journal() if e.kind is JournalKind.BUDGET_DROP]
        assert len(drops) == 40
        assert cx.verify().ok


def test_an_asyncio_task_carries_its_budget(tmp_path: Path) -> None:
    import asyncio

    from cortex import AsyncCortex

    async def main() -> tuple[int, int]:
        async with await AsyncCortex.open(tmp_path / "a", actor="agent") as cx:

            async def agent(name: str) -> int:
                dropped = 0
                with cx.task(name, limit=2):
                    for i in range(3):
                        try:
                            await cx.write(Event(kind="note", summary=f"{name} {i}"))
                        except WriteBudgetError:
                            dropped += 1
                return dropped

            drops = await asyncio.gather(agent("a"), agent("b"))
            return sum(drops), await cx.task_usage("a")

    assert asyncio.run(main()) == (2, 2)


def test_the_count_is_kept_as_storage_md_says(cx: Cortex) -> None:
    """``task/`` sha256(task id)[:16] holds the count, sealed, u64 big-endian (storage.md §2)."""
    import hashlib

    from cortex.storage.kv import unseal

    task = "naïve task ✓"  # the id's UTF-8 bytes are hashed
    key = b"task/" + hashlib.sha256(task.encode("utf-8")).digest()[:16]
    with cx.task(task, limit=10**9):  # the largest limit
        cx.write_many([note(i) for i in range(3)])
    with cx._kv.read() as txn:
        raw = txn.get(key)
        assert raw is not None
        payload = unseal(key, raw)
        assert payload == (3).to_bytes(8, "big")
        assert [k for k, _ in txn.scan(b"task/")] == [key]
    assert cx.task_usage(task) == 3
    with cx.task(task, limit=4):  # the same task, read from the store: one write is left
        cx.write(note(4))
        with pytest.raises(WriteBudgetError, match="budget of 4 is spent \\(4 written\\)"):
            cx.write(note(5))
    assert cx.task_usage(task) == 4


def test_the_limits_of_a_limit(cx: Cortex) -> None:
    with cx.task("one", limit=1):
        cx.write(note(1))
        with pytest.raises(WriteBudgetError, match="2 writes dropped"):
            cx.write_many([note(2), note(3)])
    for bad in (10**9 + 1, 10**10):
        with pytest.raises(ValidationError, match="1 to 10\\*\\*9"), cx.task("t", limit=bad):
            pass
    with cx.task("t", limit=10**9 - 1):
        cx.write(note(4))
    assert (cx.task_usage("one"), cx.task_usage("t")) == (1, 1)
