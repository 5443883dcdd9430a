"""The single write's short paths leave the store, and raise, exactly as the general ones.

``Store._write_new`` takes a fused transaction for one new memory without dedupe or a chain to
resolve (``store._FUSED``), and ``Cortex._embed_prepared`` a short path for one memory
(``api._ONE``). A random sequence of single writes (valid and invalid, taken ids, claims that
compete, a spent write budget) is run with both switched on and both off, on stores with a
fixed clock: every stored key and value, every result and every error must be the same.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortex import Belief, Cortex, CortexError, Event, Fact, Goal, MemoryId, Preference
from cortex.agent import api
from cortex.engine import store
from cortex.index.embed import HashingEmbedder
from tests.test_write_paths import FIXTURE


@contextmanager
def short_paths(on: bool) -> Iterator[None]:
    saved = store._FUSED, api._ONE
    store._FUSED = api._ONE = on
    try:
        yield
    finally:
        store._FUSED, api._ONE = saved


def _data(kind: int, n: int) -> Any:
    words = f"word{n % 7} café{n % 3} the {['quick', 'lazy', 'Zoë'][n % 3]} item {n}"
    return [
        lambda: Event(kind="interaction", outcome="success", counterparty="bob", summary=words),
        lambda: Belief(statement=words, stance="believe", confidence=0.5),
        lambda: Goal(statement=words, status="active"),
        lambda: Fact(statement=words, subject=f"s{n % 2}", predicate="says"),  # competes
        lambda: Preference(topic=f"topic {n % 2}", polarity="prefer", strength=0.5),
        lambda: Event(kind="", outcome="success", counterparty="bob", summary=words),  # invalid
    ][kind]()


op = st.tuples(
    st.integers(0, 5),  # what
    st.integers(0, 30),  # its words
    st.integers(0, 6),  # its id: one of a few (a taken id conflicts), or a fresh one (6)
    st.sampled_from([(), ("a",), ("a", "b"), ("a", "a"), ("x" * 65,)]),  # tags (some invalid)
    st.sampled_from([5, 0, 10, 11]),  # importance (11 is invalid)
    st.sampled_from([None, -1, 1]),  # expires in the past (invalid), or later
    st.booleans(),  # inside a task whose budget (3 writes) runs out
)


def _run(path: Any, ops: list[tuple[Any, ...]], on: bool, embed: bool) -> tuple[Any, ...]:
    clock = FIXTURE.FixedClock()
    outcomes: list[Any] = []
    kw: dict[str, Any] = {"metasync": False} if isinstance(path, Path) else {}
    with (
        short_paths(on),
        Cortex.open(
            path,
            actor="agent",
            clock=clock,
            embedder=HashingEmbedder(16) if embed else None,
            **kw,
        ) as cx,
    ):
        for i, (kind, n, which, tags, importance, expires, budgeted) in enumerate(ops):
            mid = MemoryId(bytes(15) + bytes((which,))) if which < 6 else None
            kw: dict[str, Any] = {"tags": list(tags), "importance": importance}
            if mid is not None:
                kw["id"] = mid
            else:  # a fresh id: the same in both runs
                kw["id"] = MemoryId(bytes(14) + i.to_bytes(2, "big"))
            if expires is not None:
                kw["expires_at"] = FIXTURE.START + timedelta(days=expires)
            with cx.task("t", limit=3) if budgeted else nullcontext():
                try:
                    r = cx.write(_data(kind, n), **kw)
                    outcomes.append(
                        (str(r), r.outcome, r.supersedes, r.superseded_by, r.conflicts_with)
                    )
                except CortexError as exc:
                    outcomes.append((type(exc).__name__, str(exc)))
        assert cx.verify().ok
        with cx._kv.read() as txn:
            dump = list(txn.scan(b""))
    return outcomes, dump


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(op, min_size=1, max_size=14), st.booleans())
def test_the_short_paths_write_and_raise_as_the_general_ones(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[Any, ...]], embed: bool
) -> None:
    d = tmp_path_factory.mktemp("fused")
    fast = _run(d / "fast", ops, True, embed)
    general = _run(d / "general", ops, False, embed)
    assert fast[0] == general[0]
    assert len(fast[1]) == len(general[1])
    for (kf, vf), (kg, vg) in zip(fast[1], general[1], strict=True):
        assert kf == kg
        assert vf == vg, kf


def test_the_short_paths_on_each_engine(place: Callable[[str], Any]) -> None:
    """A fixed sequence (LMDB, and PostgreSQL whose transaction reads the journal's tail by a
    scan): the same bytes, results and errors with the short paths as without."""
    rng = random.Random(11)
    ops = [
        (
            rng.randrange(6),
            rng.randrange(31),
            rng.randrange(7),
            rng.choice([(), ("a",), ("a", "b"), ("a", "a")]),
            rng.choice([5, 0, 11]),
            rng.choice([None, -1, 1]),
            rng.random() < 0.3,
        )
        for _ in range(30)
    ]
    for embed in (False, True):
        fast = _run(place(f"fast{embed}"), ops, True, embed)
        general = _run(place(f"general{embed}"), ops, False, embed)
        assert fast == general


def test_a_taken_id_is_a_conflict_and_writes_nothing(tmp_path: Path) -> None:
    for on in (True, False):
        with short_paths(on), Cortex.open(tmp_path / f"s{on}", actor="a") as cx:
            u = cx.write(Goal(statement="g", status="active"))
            with cx._kv.read() as txn:
                before = list(txn.scan(b""))
            with pytest.raises(CortexError, match=f"a memory with id {u.id} already exists"):
                cx.write(Goal(statement="h", status="active"), id=u.id)
            with cx._kv.read() as txn:
                assert list(txn.scan(b"")) == before


def test_journal_entries_name_each_writer_and_chain(tmp_path: Path) -> None:
    """Handles of different actors writing in turn: each entry names its own writer (the
    journal writer remembers the last name it encoded), and the chain holds (the tail read in
    one positioning)."""
    path = tmp_path / "s"
    with Cortex.open(path, actor="owner") as a:
        a.write(Goal(statement="first", status="active"))
    handles = [Cortex.open(path, actor=name) for name in ("owner", "bob", "Zoë", "bob")]
    try:
        for i in range(12):
            handles[i % 4].write(Goal(statement=f"g{i}", status="active"))
        entries = list(handles[0].journal())
        assert [e.by for e in entries[-12:]] == [
            ["owner", "bob", "Zoë", "bob"][i % 4] for i in range(12)
        ]
        assert handles[0].verify().ok
    finally:
        for h in handles:
            h.close()
