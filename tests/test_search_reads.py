"""A search's reads in C and its early stop give what the reads one by one give.

A text or vector search reads each candidate's head and version: the lexical list's hits in one
C call (``read_rows``, kept for the executor: ``lexical.search``'s ``found``), the others by id
(``read_current``); salience with the vector's cosine in C (``salience`` with a vector); a list
whose order is final (one list, nothing to rerank) stops accepting once the limit passes
(``planner._STOP_AT_WANT``). Each is compared with its Python path on random stores and queries,
and ``MemoryId``'s hash and comparisons in C with the class's own methods.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cortex import (
    Constraint,
    Cortex,
    Event,
    Fact,
    Fusion,
    Goal,
    Identity,
    IntegrityError,
    MemoryId,
    Query,
    Reader,
)
from cortex.engine import store as store_mod
from cortex.engine.heads import NEVER_USED, row_of
from cortex.engine.store import Store
from cortex.index import lexical
from cortex.model.codec import to_micros
from cortex.model.enums import (
    ConstraintSource,
    DecayClass,
    GoalStatus,
    MemoryType,
    Polarity,
    Strength,
)
from cortex.query import planner
from cortex.rules.salience import HALF_LIFE_DAYS, Weights, salience_at
from cortex.storage.keys import head_key

from . import test_query_fused as fused
from .qsupport import Clock
from .vsupport import E

sp: Any
try:
    from cortex import _speedups as sp
except ImportError:  # pragma: no cover - built without a C compiler
    sp = None

needs_c = pytest.mark.skipif(sp is None, reason="the C accelerator is not built")

# -- MemoryId's hash and comparisons ------------------------------------------------------------

_RAW = st.binary(min_size=16, max_size=16)


@needs_c
@given(a=_RAW, b=_RAW)
def test_memory_id_hash_and_comparisons_are_its_methods(a: bytes, b: bytes) -> None:
    x, y = MemoryId(a), MemoryId(b)
    for p, q in ((x, y), (x, MemoryId(a)), (y, x)):
        assert hash(p) == MemoryId.__hash__(p) == hash(p.bytes)
        assert (p == q) is MemoryId.__eq__(p, q)
        assert (p != q) is (not MemoryId.__eq__(p, q))
        assert (p < q) is MemoryId.__lt__(p, q)
        assert (p <= q) is MemoryId.__le__(p, q)
        assert (p > q) is MemoryId.__lt__(q, p)
        assert (p >= q) is MemoryId.__le__(q, p)
    # an id equals nothing but an id, and does not order with anything else
    for other in (a, None, 3, "x"):
        assert x != other and (x == other) is False and other != x
        with pytest.raises(TypeError):
            _ = x < other  # type: ignore[operator]
        with pytest.raises(TypeError):
            _ = x >= other  # type: ignore[operator]
    assert len({x, MemoryId(a), y}) == (1 if a == b else 2)


@needs_c
def test_id_slots_takes_only_the_class_of_one_bytes_slot() -> None:
    class Other:
        __slots__ = ("_b",)

    with pytest.raises(TypeError):
        sp.id_slots(int)
    with pytest.raises(RuntimeError):  # given MemoryId already: no second class
        sp.id_slots(Other)
    sp.id_slots(MemoryId)  # the same class again: nothing changes
    assert MemoryId(b"\1" * 16) == MemoryId(b"\1" * 16)


# -- salience with a vector in C ----------------------------------------------------------------


@needs_c
@settings(max_examples=60)
@given(
    importance=st.lists(st.integers(0, 10), min_size=1, max_size=4),
    ages=st.lists(st.integers(0, 400 * 86400), min_size=1, max_size=4),
    vector=st.one_of(
        st.floats(allow_nan=False),
        st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, math.inf, -math.inf]),
    ),
    w=st.tuples(*(st.floats(0.0, 1.0) for _ in range(5))).filter(lambda t: sum(t[:4]) > 0),
)
def test_c_salience_with_a_vector_is_the_definition(
    importance: list[int], ages: list[int], vector: float, w: tuple[float, ...]
) -> None:
    weights = Weights(recency=w[0], access=w[1], citation=w[2], importance=w[3], vector=w[4])
    decay = dict.fromkeys(MemoryType, DecayClass.FAST)
    decay[MemoryType.EVENT] = DecayClass.SLOW
    decay[MemoryType.IDENTITY] = DecayClass.PERMANENT
    clock = Clock()
    with (
        tempfile.TemporaryDirectory() as d,
        Cortex.open(Path(d) / "s", actor="m", clock=clock, metasync=False) as cx,
    ):
        mids = [
            cx.write(Fact(statement=f"s {i}", subject="u", predicate="p"), importance=i).id
            for i in importance
        ]
        mids.append(cx.write(Event(kind="k", summary="e")).id)
        for age in ages:
            clock.tick(age)
            now_us = to_micros(clock.now)
            with cx._kv.read() as txn:
                for mid in mids:
                    head = cx.engine.head(txn, mid)
                    got = sp.salience(
                        head,
                        now_us,
                        decay,
                        DecayClass.PERMANENT,
                        HALF_LIFE_DAYS,
                        (weights.recency, weights.access, weights.citation, weights.importance),
                        weights.vector,
                        vector,
                    )
                    want = salience_at(
                        head,
                        NEVER_USED,
                        now_us,
                        decay=decay[head.type],
                        weights=weights,
                        vector=vector,
                    )
                    assert got == want  # the same float, bit for bit
    # a NaN, or a cosine that is not a float, is the definition's to decide
    assert (
        sp.salience(
            head,
            now_us,
            decay,
            DecayClass.PERMANENT,
            HALF_LIFE_DAYS,
            (1.0, 0.0, 0.0, 0.0),
            1.0,
            math.nan,
        )
        is None
    )
    assert (
        sp.salience(
            head, now_us, decay, DecayClass.PERMANENT, HALF_LIFE_DAYS, (1.0, 0.0, 0.0, 0.0), 1.0, 1
        )
        is None
    )


# -- the lexical hits read in one C call --------------------------------------------------------

PLAIN = Fusion(context_weight=0.0, entity_weight=0.0)
_WORDS = ("tea", "coffee", "paris", "rome", "hike", "swim", "book", "film")


@needs_c
def test_the_lexical_hits_read_in_c_are_the_reads_one_by_one(tmp_path: Path) -> None:
    with Cortex.open(tmp_path / "s", actor="m", metasync=False) as cx:
        for i in range(40):
            cx.write(
                Fact(
                    statement=f"{_WORDS[i % 8]} {_WORDS[i * 3 % 8]} {i}", subject="u", predicate="p"
                )
            )
        with cx._kv.read() as txn:
            rows = Store.rows_reader(txn)
            assert rows is not None
            for q in ("tea", "paris hike", "film book coffee", "nothing here"):
                found: dict[bytes, Any] = {}
                fast = lexical.search(txn, q, limit=12, rows=rows, found=found)
                assert fast == lexical.search(txn, q, limit=12)
                assert set(found) == {m.bytes for m, _ in fast}
                for mid, _ in fast:
                    head, version = found[mid.bytes]
                    assert head == cx.engine.head(txn, mid)
                    assert version == cx.engine.version(txn, mid, head.current_version)


@needs_c
def test_a_damaged_head_of_a_hit_is_the_python_paths_error(tmp_path: Path) -> None:
    """The C read declines a head that fails its checksum: the reads one by one raise."""
    with Cortex.open(tmp_path / "s", actor="m", metasync=False) as cx:
        mid = cx.write(Fact(statement="tea in paris", subject="u", predicate="p")).id
        cx.write(Fact(statement="coffee in rome", subject="u", predicate="p"))

        def damage(txn: Any) -> None:
            row = row_of(txn, mid)
            assert row is not None
            key = head_key(row)
            value = bytearray(txn.get(key))
            value[len(value) // 2] ^= 0x40
            txn.put(key, bytes(value))

        cx._kv.write(damage)
        with cx._kv.read() as txn:
            with pytest.raises(IntegrityError) as plain:
                lexical.search(txn, "tea", limit=5)
            with pytest.raises(IntegrityError) as fast:
                lexical.search(txn, "tea", limit=5, rows=Store.rows_reader(txn), found={})
            assert str(fast.value) == str(plain.value)
            assert sp.read_rows(store_mod._READ, txn.raw_get, [bytes(4)]) is None  # no head


# -- searches: every fast path against its Python path ------------------------------------------


def _seen(res: Any) -> tuple[Any, ...]:
    hits = tuple(
        (h.memory.uri, h.memory.data, h.salience, h.score, h.text, h.tokens, h.ranks, h.scores)
        for h in res.hits
    )
    return hits, res.tokens, res.dropped


@contextmanager
def _python_paths(stop: bool, rows: bool, salience: bool, accepted: bool = True) -> Iterator[None]:
    """``find`` with the early stop, the C reads of the lexical hits, C salience and the first
    filters in C (``accept_pair``/``read_accepted``) on or off."""
    saved = planner._STOP_AT_WANT, vars(Store)["rows_reader"], planner._SALIENCE
    was_accepted = planner._ACCEPTED
    planner._STOP_AT_WANT = stop
    planner._ACCEPTED = accepted
    if not rows:
        Store.rows_reader = staticmethod(lambda txn: None)  # type: ignore[method-assign]
    if not salience:
        planner._SALIENCE = None
    try:
        yield
    finally:
        planner._STOP_AT_WANT, planner._SALIENCE = saved[0], saved[2]
        planner._ACCEPTED = was_accepted
        Store.rows_reader = saved[1]  # type: ignore[method-assign]


item_st = st.tuples(
    st.sampled_from(["fact", "event", "event", "same"]),
    st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3),
    st.sampled_from([None, "ada", "bob"]),  # a subject or counterparty the query may name
    st.sampled_from(["none", "none", "none", "tomb", "update", "supersede", "expired", "public"]),
    st.integers(0, 10),  # importance
    st.sampled_from([0, 1, 60]),  # seconds to the next memory
)

query_st = st.fixed_dictionaries(
    {
        "words": st.lists(st.sampled_from((*_WORDS, "ada", "bob")), min_size=1, max_size=3),
        "how": st.sampled_from(["text", "near", "near_vector"]),
        "types": st.sampled_from([(), ("Event",), ("Fact",)]),
        "limit": st.integers(1, 8),
        "offset": st.sampled_from([0, 0, 2]),
        "include_superseded": st.booleans(),
        "include_expired": st.booleans(),
        "other_reader": st.booleans(),
    }
)


def _write_with(cx: Cortex, clock: Clock, data: Any, change: str, **kw: Any) -> MemoryId:
    """Write ``data``: expiring in a second (``expired``), public (``public``), or tombstoned
    once written (``tomb``); the other changes are the caller's."""
    if change == "expired":
        kw["expires_at"] = clock.now + timedelta(seconds=1)
    elif change == "public":
        kw["visibility"] = "actor_public"
    mid = cx.write(data, **kw).id
    if change == "tomb":
        cx.tombstone(mid, "x")
    return mid


def _fill(cx: Cortex, clock: Clock, items: list[tuple[Any, ...]]) -> None:
    mids: list[MemoryId] = []
    for i, (kind, words, name, change, imp, step) in enumerate(items):
        text = " ".join(words)
        if kind == "same":  # equal texts: equal scores, ties at the limit
            data: Any = Fact(statement="tea paris", subject=name or "u", predicate="p")
        elif kind == "fact":
            data = Fact(statement=f"{text} {i}", subject=name or "u", predicate="p")
        else:
            data = Event(kind="chat", summary=f"{text} {i}", counterparty=name)
        mid = _write_with(cx, clock, data, change, importance=imp)
        if change == "update":
            cx.update(
                mid,
                Fact(statement=f"{text} changed {i}", subject="u", predicate="p")
                if kind != "event"
                else Event(kind="chat", summary=f"{text} again {i}"),
            )
        elif change == "supersede" and mids:
            cx.add_edge(mid, "supersedes", mids[i % len(mids)])
        mids.append(mid)
        clock.tick(step)
    clock.tick(2)


@settings(max_examples=40)
@given(
    items=st.lists(item_st, max_size=24),
    queries=st.lists(query_st, min_size=1, max_size=4),
    embedder=st.booleans(),
    rerank=st.booleans(),
)
def test_searches_give_what_the_python_reads_give(
    items: list[tuple[Any, ...]], queries: list[dict[str, Any]], embedder: bool, rerank: bool
) -> None:
    clock = Clock()
    fusion = Fusion() if rerank else Fusion(context_weight=0.0, entity_weight=0.0)
    with (
        tempfile.TemporaryDirectory() as d,
        Cortex.open(
            Path(d) / "s",
            actor="m",
            clock=clock,
            metasync=False,
            embedder=E if embedder else None,
            fusion=fusion,
        ) as cx,
    ):
        _fill(cx, clock, items)
        for q in queries:
            text = " ".join(q["words"])
            kw: dict[str, Any] = {
                "types": q["types"],
                "limit": q["limit"],
                "offset": q["offset"],
                "include_superseded": q["include_superseded"],
                "include_expired": q["include_expired"],
            }
            if q["other_reader"]:
                kw["reader"] = Reader(actor="someone-else")
            if q["how"] == "text" or not embedder:
                kw["text"] = text
            elif q["how"] == "near":
                kw["near"] = text
            else:
                kw["near_vector"] = E.embed([text])[0]
            query = Query(**kw)
            fast = _seen(cx.find(query))
            for flags in (
                (False, True, True, True),
                (True, False, True, True),
                (True, True, False, True),
                (True, True, True, False),
                (False, False, False, False),
            ):
                with _python_paths(*flags):
                    assert _seen(cx.find(query)) == fast, (flags, kw)


def _count_accepts(monkeypatch: pytest.MonkeyPatch) -> list[MemoryId]:
    """The ids ``Executor.accept`` is asked for from now on (until the test ends)."""
    accepted: list[MemoryId] = []
    real = planner.Executor.accept

    def counting(self: planner.Executor, mid: MemoryId, *a: Any, **k: Any) -> Any:
        accepted.append(mid)
        return real(self, mid, *a, **k)

    monkeypatch.setattr(planner.Executor, "accept", counting)
    return accepted


def test_a_vector_search_accepts_only_what_its_limit_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One list, nothing to rerank: accepting stops once the limit passes (not 4 × limit)."""
    with Cortex.open(tmp_path / "s", actor="m", clock=Clock(), metasync=False, embedder=E) as cx:
        for i in range(60):
            cx.write(Fact(statement=f"{_WORDS[i % 8]} {i}", subject="u", predicate="p"))
        accepted = _count_accepts(monkeypatch)
        res = cx.find(Query(near="tea", limit=3))
        assert len(res.hits) == 3 and len(accepted) == 3
        accepted.clear()
        with _python_paths(False, True, True):
            assert _seen(cx.find(Query(near="tea", limit=3))) == _seen(res)
        assert len(accepted) == 32  # the list's depth: max(32, 4 × limit) fetched and read


class _Tied(Cortex):
    """A Cortex whose "lexical index" scores every memory alike, newest id first."""

    order: list[MemoryId]

    def _text_search(self, found: Any = None) -> Any:
        def search(txn: Any, text: str, n: int) -> list[tuple[MemoryId, float]]:
            return [(m, 1.0) for m in self.order[:n]]

        return search


def test_an_early_stop_goes_on_through_a_tie_at_the_limit(tmp_path: Path) -> None:
    """The lexical list breaks ties by document number, the hits by id: where the two orders
    differ (ids an import chose), accepting goes on through the tie, so the hits are the ones
    a full acceptance gives."""
    with _Tied.open(tmp_path / "s", actor="m", clock=Clock(), metasync=False, fusion=PLAIN) as cx:
        mids = [cx.write(Fact(statement=f"s {i}", subject="u", predicate="p")).id for i in range(6)]
        cx.order = sorted(mids, reverse=True)  # the list's order: against the ids'
        for limit in (1, 2, 5):
            fast = _seen(cx.find(Query(text="s", limit=limit)))
            assert [h[0].id for h in fast[0]] == sorted(mids)[:limit]
            with _python_paths(False, True, True):
                assert _seen(cx.find(Query(text="s", limit=limit))) == fast


# -- the first filters of a pair already read, and the arguments the C reads refuse -------------


@needs_c
@settings(max_examples=40)
@given(
    items=st.lists(fused.item_st, max_size=16),
    types=st.sets(st.sampled_from(fused._TYPES), min_size=1),
    tags=st.sampled_from([(), ("a",), ("a", "b")]),
    superseded=st.booleans(),
)
def test_accept_pair_is_read_accepted(
    items: list[tuple[Any, ...]], types: set[MemoryType], tags: tuple[str, ...], superseded: bool
) -> None:
    clock = Clock()
    with (
        tempfile.TemporaryDirectory() as d,
        Cortex.open(Path(d) / "s", actor="m", clock=clock, metasync=False) as cx,
    ):
        mids = fused._fill(cx, clock, items)
        with cx._kv.read() as txn:
            args = cx._engine.accepted_args(txn, frozenset(types), tags, superseded)
            current = cx._engine.current_reader(txn)
            assert args is not None and current is not None
            for mid in mids:
                pair = current(mid.bytes)
                want = sp.read_accepted(*args, mid.bytes)
                if pair is None:
                    assert want is None
                    continue
                assert sp.accept_pair(*args, mid.bytes, pair) == want


@needs_c
def test_accept_pair_and_read_rows_refuse_bad_arguments(tmp_path: Path) -> None:
    with Cortex.open(tmp_path / "s", actor="m", metasync=False) as cx:
        mid = cx.write(Fact(statement="tea", subject="u", predicate="p"), tags=["a"]).id
        with cx._kv.read() as txn:
            args = cx._engine.accepted_args(txn, frozenset(MemoryType), ("a",), False)
            pair = cx._engine.current_reader(txn)(mid.bytes)
            assert sp.accept_pair(*args, mid.bytes, pair)[2] is True
            for i, bad in (
                (0, None),
                (3, "e/to/"),
                (5, list(MemoryType)),
                (6, ["a"]),
                (7, mid.bytes[:15]),
                (8, list(pair)),
                (8, pair[:1]),
            ):
                call = [*args, mid.bytes, pair]
                call[i] = bad
                with pytest.raises(TypeError):
                    sp.accept_pair(*call)
            with pytest.raises(TypeError):
                sp.accept_pair(*args, mid.bytes)
            row = row_of(txn, mid)
            assert row is not None
            raw = row.to_bytes(4, "big")
            rows = Store.rows_reader(txn)
            assert rows is not None and rows([raw]) == [pair]
            assert sp.read_rows(store_mod._READ, txn.raw_get, []) == []
            for bad_rows in ((raw,), raw):
                with pytest.raises(TypeError):
                    sp.read_rows(store_mod._READ, txn.raw_get, bad_rows)
            with pytest.raises(TypeError):
                sp.read_rows(None, txn.raw_get, [raw])
            with pytest.raises(TypeError):
                sp.read_rows(store_mod._READ, txn.raw_get)
            # a row of another length, or one no head is at: declined
            assert sp.read_rows(store_mod._READ, txn.raw_get, [raw, raw[:3]]) is None
            assert sp.read_rows(store_mod._READ, txn.raw_get, [raw, b"\xff" * 4]) is None
            with pytest.raises(KeyError):  # get's error is raised, not declined
                sp.read_rows(store_mod._READ, {}.__getitem__, [raw])


# -- context: its tiers read with the same fast paths -------------------------------------------

pinned_st = st.tuples(
    st.sampled_from(["identity", "hard", "soft", "active", "paused", "event"]),
    st.sampled_from(["none", "none", "tomb", "update", "supersede", "expired", "public"]),
    st.sampled_from(_WORDS),
    st.sampled_from([0, 1, 60]),
)


@contextmanager
def _swapped(owner: Any, name: str, value: Any) -> Iterator[None]:
    """``owner.name`` is ``value`` inside the block (a path's switch, for a comparison)."""
    saved = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, saved)


def _newest_in_python() -> Any:
    return _swapped(planner, "_NEWEST", None)


@settings(max_examples=30)
@given(
    items=st.lists(pinned_st, max_size=30),
    budget=st.sampled_from([40, 200, 3000]),
    query=st.sampled_from([None, "tea", "paris hike"]),
    other_reader=st.booleans(),
)
def test_context_gives_what_the_python_reads_give(
    items: list[tuple[Any, ...]], budget: int, query: str | None, other_reader: bool
) -> None:
    clock = Clock()
    with (
        tempfile.TemporaryDirectory() as d,
        Cortex.open(Path(d) / "s", actor="m", clock=clock, metasync=False, embedder=E) as cx,
    ):
        mids: list[MemoryId] = []
        for i, (kind, change, word, step) in enumerate(items):
            data: Any
            if kind == "identity":
                data = Identity(name=f"{word} {i}")
            elif kind in ("hard", "soft"):
                data = Constraint(
                    statement=f"{word} rule {i}",
                    polarity=Polarity.AVOID,
                    strength=Strength.HARD if kind == "hard" else Strength.SOFT,
                    source=ConstraintSource.USER_DECLARED,
                )
            elif kind in ("active", "paused"):
                data = Goal(
                    statement=f"{word} goal {i}",
                    status=GoalStatus.ACTIVE if kind == "active" else GoalStatus.PAUSED,
                )
            else:
                data = Event(kind="chat", summary=f"{word} said {i}")
            mid = _write_with(cx, clock, data, change)
            if change == "update" and kind in ("active", "paused"):
                cx.update(mid, Goal(statement=f"{word} done {i}", status=GoalStatus.COMPLETED))
            elif change == "supersede" and mids:
                cx.add_edge(mid, "supersedes", mids[i % len(mids)])
            mids.append(mid)
            clock.tick(step)
        clock.tick(2)
        reader = Reader(actor="someone-else") if other_reader else None
        want = cx.context("find", budget_tokens=budget, query=query, reader=reader)
        for flags in ((True, True, True, False), (False, False, False, False)):
            with _python_paths(*flags):
                assert cx.context("find", budget_tokens=budget, query=query, reader=reader) == want
        with _newest_in_python():
            assert cx.context("find", budget_tokens=budget, query=query, reader=reader) == want


def test_the_pinned_tier_past_its_limit_reads_in_the_same_order(tmp_path: Path) -> None:
    """More pinned memories than the tier takes (64 of a type), some written in one batch (one
    created time: ties by id): the C pages give the ones ``created_scan`` gives."""
    clock = Clock()
    with Cortex.open(tmp_path / "s", actor="m", clock=clock, metasync=False) as cx:
        cx.write_many([Identity(name=f"batch {i}") for i in range(50)])
        clock.tick(5)
        for i in range(10):
            cx.write(Identity(name=f"single {i}"))
            clock.tick(1)
        cx.write_many([Identity(name=f"late {i}") for i in range(30)])
        clock.tick(5)
        want = cx.context("find", budget_tokens=4000)
        assert len(want.hits) == 64
        with _newest_in_python():
            assert cx.context("find", budget_tokens=4000) == want


# -- about: the memories naming the entity, found through the lexical index --------------------

_SPELLINGS = (
    "Sarah",
    "sarah",
    "@Sarah",
    " SARAH!",
    "Sarah Jane",
    "sarah  jane",
    "Kim",
    "Kım",
    "KIM",
    "O'Brien",
    "o'brien",
    "Zoë",
    "Sarahs",
    "Jane",
)

about_st = st.tuples(
    st.sampled_from(["fact", "belief", "event", "identity", "preference", "goal", "cap"]),
    st.sampled_from(_SPELLINGS),
    st.sampled_from(["lives_in", "Home City", "likes"]),
    st.sampled_from(["none", "none", "tomb", "update", "supersede", "expired", "public"]),
)


def _about_data(kind: str, name: str, attr: str, i: int) -> Any:
    from cortex import Belief, Capability, Preference

    if kind == "fact":
        return Fact(statement=f"says {i}", subject=name, predicate=attr)
    if kind == "belief":
        return Belief(statement=f"thinks {i}", subject=name, stance="believe", confidence=0.5)
    if kind == "event":
        return Event(kind="chat", summary=f"talked {i}", counterparty=name)
    if kind == "identity":
        return Identity(name=name)
    if kind == "preference":
        return Preference(topic=f"tea {i}", polarity=Polarity.PREFER, subject=name)
    if kind == "goal":
        return Goal(statement=f"run {i}", status=GoalStatus.ACTIVE, subject=name)
    return Capability(subject=name, capability=attr)


def _about_scans() -> Any:
    from cortex.agent import api

    return _swapped(api, "_name_terms", lambda name: None)


@settings(max_examples=40)
@given(
    items=st.lists(about_st, max_size=24),
    asks=st.lists(
        st.tuples(
            st.sampled_from(_SPELLINGS),
            st.sampled_from([None, "lives_in", "home_city"]),
            st.sampled_from([None, ("Fact",), ("Event", "Identity")]),
            st.sampled_from([1, 3, 100]),
            st.booleans(),
        ),
        min_size=1,
        max_size=4,
    ),
    alias=st.booleans(),
)
def test_about_finds_what_the_scan_finds(
    items: list[tuple[Any, ...]], asks: list[tuple[Any, ...]], alias: bool
) -> None:
    clock = Clock()
    with (
        tempfile.TemporaryDirectory() as d,
        Cortex.open(Path(d) / "s", actor="m", clock=clock, metasync=False) as cx,
    ):
        mids: list[MemoryId] = []
        for i, (kind, name, attr, change) in enumerate(items):
            if kind == "identity" and change == "update":
                change = "none"
            mid = _write_with(cx, clock, _about_data(kind, name, attr, i), change)
            if change == "update":
                cx.update(mid, _about_data(kind, "Jane", attr, i + 100))
            elif change == "supersede" and mids:
                cx.add_edge(mid, "supersedes", mids[i % len(mids)])
            mids.append(mid)
            clock.tick(1)
        if alias:
            cx.alias("Sarah", "Kim")
        clock.tick(2)
        for name, attribute, types, limit, other in asks:
            kw = {"attribute": attribute, "types": types, "limit": limit}
            if other:
                kw["reader"] = Reader(actor="someone-else")
            if attribute is not None and types == ("Event", "Identity"):
                kw["types"] = None
            got = cx.about(name, **kw)
            with _about_scans():
                want = cx.about(name, **kw)
            assert _seen(got) == _seen(want) and got.plan == want.plan, (name, kw)


def test_about_reads_only_the_memories_naming_the_entity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Cortex.open(tmp_path / "s", actor="m", clock=Clock(), metasync=False) as cx:
        for i in range(200):
            cx.write(Fact(statement=f"s {i}", subject=f"person {i}", predicate="likes"))
        cx.write(Fact(statement="tea", subject="Ada", predicate="likes"))
        accepted = _count_accepts(monkeypatch)
        assert [h.memory.data.subject for h in cx.about("ada").hits] == ["Ada"]
        assert len(accepted) == 1
        accepted.clear()
        with _about_scans():
            assert len(cx.about("ada").hits) == 1
        assert len(accepted) == 201


def test_about_a_name_meets_its_spellings_the_scan_meets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dotless ``ı`` matches an ``i`` case-insensitively (as the scan's pattern matches it),
    a name of two words needs both, punctuation and case aside."""
    with Cortex.open(tmp_path / "s", actor="m", clock=Clock(), metasync=False) as cx:
        for name in ("Kım", "KIM", "kim!", "Kimi", "Sarah Jane", "Jane", "Sarah", "@sarah  JANE"):
            cx.write(Fact(statement="x", subject=name, predicate="likes"))
        accepted = _count_accepts(monkeypatch)
        for name, subjects, reads in (
            ("Kim", {"Kım", "KIM", "kim!"}, 3),
            ("sarah jane", {"Sarah Jane", "@sarah  JANE"}, 2),
        ):
            accepted.clear()
            got = cx.about(name)
            assert {h.memory.data.subject for h in got.hits} == subjects
            assert len(accepted) == reads
            with _about_scans():
                assert _seen(cx.about(name)) == _seen(got)
