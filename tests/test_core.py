"""Core memory (issue 14 item 4, seed 004): the user and agent blocks, one call per change,
versioned with history and as-of, atomic under concurrent writers, pinned in the context."""

from __future__ import annotations

import multiprocessing as mp
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from cortex import (
    Cortex,
    Identity,
    NotFoundError,
    Query,
    TombstonedError,
    ValidationError,
)
from cortex.agent.core import core_id, core_yaml

from .qsupport import Clock


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cx(tmp_path: Path, clock: Clock) -> Any:
    with Cortex.open(tmp_path / "s", actor="agent", clock=clock) as store:
        yield store


def test_update_get_delete(cx: Cortex) -> None:
    assert cx.core_get() == {"user": {}, "agent": {}}
    u1 = cx.core_update("user", "name", "Ada")
    u2 = cx.core_update("user", "timezone", "Europe/Zurich")
    cx.core_update("agent", "tone", "concise")
    assert u1.id == u2.id == core_id("user") and (u1.version, u2.version) == (1, 2)
    assert cx.core_get("user") == {"name": "Ada", "timezone": "Europe/Zurich"}
    assert cx.core_get() == {
        "user": {"name": "Ada", "timezone": "Europe/Zurich"},
        "agent": {"tone": "concise"},
    }
    assert cx.core_update("user", "name", "Ada") == u2  # no change, no version
    u3 = cx.core_delete("user", "timezone")
    assert u3.version == 3 and cx.core_get("user") == {"name": "Ada"}
    with pytest.raises(NotFoundError):
        cx.core_delete("user", "timezone")
    with pytest.raises(NotFoundError):
        cx.core_delete("agent", "missing")
    m = cx.resolve_latest(core_id("user"))
    assert isinstance(m.data, Identity) and m.data.name == "core:user"
    assert m.head.importance == 10 and m.head.tags == ("core",)
    assert cx.verify().ok


def test_history_and_as_of(cx: Cortex, clock: Clock) -> None:
    t0 = clock.now
    cx.core_update("user", "city", "Zurich")
    clock.advance(timedelta(days=10))
    t1 = clock.now
    cx.core_update("user", "diet", "vegetarian")
    clock.advance(timedelta(days=10))
    cx.core_update("user", "city", "Basel")
    clock.advance(timedelta(days=10))
    cx.core_delete("user", "city")
    changes = cx.core_history("user", "city")
    assert [c.value for c in changes] == ["Zurich", "Basel", None]
    assert [c.uri.version for c in changes] == [1, 3, 4]
    assert changes[0].at == t0 and changes[0].by == "agent"
    assert cx.core_get("user", as_of=t1) == {"city": "Zurich", "diet": "vegetarian"}
    assert cx.core_get("user", as_of=t0 - timedelta(days=1)) == {}
    assert cx.core_history("agent", "tone") == []
    assert len(cx.history(core_id("user"))) == 4


def test_yaml(cx: Cortex) -> None:
    cx.core_update("user", "name", "Ada Lovelace")
    cx.core_update("user", "likes", "tea: green, no sugar")
    cx.core_update("user", "kids", "2")
    cx.core_update("agent", "verbose", "no")
    assert cx.core_yaml() == (
        "user:\n"
        '  kids: "2"\n'
        '  likes: "tea: green, no sugar"\n'
        "  name: Ada Lovelace\n"
        "agent:\n"
        '  verbose: "no"\n'
    )
    assert core_yaml({"user": {}}) == "user: {}\n"
    assert core_yaml({}) == ""


def test_in_the_pinned_tier_of_every_context(cx: Cortex) -> None:
    cx.core_update("user", "name", "Ada")
    bundle = cx.context("find", ["knowledge:anything"], budget_tokens=200)
    assert [h.memory.id for h in bundle.tier("pinned")] == [core_id("user")]
    assert "name=Ada" in bundle.render()


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("users", "k", "v"), "section"),
        (("user", "", "v"), "key"),
        (("user", "   ", "v"), "key"),
        (("user", "k" * 300, "v"), "key"),
        (("user", 5, "v"), "key"),
        (("user", "k", 5), "value"),
        (("user", "k", None), "value"),
        (("user", "k", "v" * 20_000), "value"),
        (("user", "k", "\ud800"), "data.profile"),
    ],
)
def test_bad_arguments_change_nothing(cx: Cortex, args: tuple[Any, ...], field: str) -> None:
    cx.core_update("user", "name", "Ada")
    with pytest.raises(ValidationError) as info:
        cx.core_update(*args)
    assert info.value.field.startswith(field)
    assert cx.core_get("user") == {"name": "Ada"}
    assert len(cx.history(core_id("user"))) == 1


def test_a_retired_section_says_so(cx: Cortex) -> None:
    uri = cx.core_update("user", "name", "Ada")
    cx.tombstone(uri, "start over")
    assert cx.core_get("user") == {}
    with pytest.raises(TombstonedError):
        cx.core_update("user", "name", "Bea")


def test_core_memory_is_found_like_any_memory(cx: Cortex) -> None:
    cx.core_update("user", "allergy", "peanuts")
    hits = cx.find(Query(text="peanuts", limit=5)).hits
    assert hits[0].memory.id == core_id("user")


def _writer(path: str, worker: int, n: int) -> None:
    with Cortex.open(path, actor=f"w{worker}", as_owner=True) as cx:
        for i in range(n):
            cx.core_update("user", f"k{worker}-{i}", f"v{i}")


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    Cortex.open(path, actor="setup").close()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, w, 15)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    with Cortex.open(path, actor="check", as_owner=True) as cx:
        block = cx.core_get("user")
        assert block == {f"k{w}-{i}": f"v{i}" for w in range(4) for i in range(15)}
        assert len(cx.history(core_id("user"))) == 60
        assert cx.verify().ok
