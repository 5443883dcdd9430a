"""Salience against hand-computed values (specs/query.md §2)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cortex import (
    Belief,
    Capability,
    Constraint,
    Cortex,
    DecayClass,
    Eq,
    Event,
    Goal,
    Identity,
    JournalKind,
    MemoryId,
    MemoryType,
    NotFoundError,
    Outcome,
    Pattern,
    Preference,
    Query,
    SalienceState,
    TombstonedError,
    ValidationError,
    Weights,
    new_id,
)
from cortex.rules.salience import salience as salience_fn

from .qsupport import DAY, T0, Clock, fact, forms, trace
from .strategies import heads

LN1001 = math.log(1001)


def expected(
    r: float,
    a: int = 0,
    c: int = 0,
    importance: int = 5,
    w: tuple[float, float, float, float] = (0.25, 0.15, 0.30, 0.20),
) -> float:
    """The spec's formula, by hand."""
    av = math.log(1 + min(a, 1000)) / LN1001
    cv = math.log(1 + min(c, 1000)) / LN1001
    d = importance / 10
    return (w[0] * r + w[1] * av + w[2] * cv + w[3] * d) / sum(w)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cx(tmp_path: Path, clock: Clock) -> Iterator[Cortex]:
    with Cortex.open(tmp_path / "store", actor="agent", clock=clock, metasync=False) as store:
        yield store


def sal(cx: Cortex, mid: MemoryId, **kw: Any) -> float:
    t = cx.resolve_latest(mid).head.type
    res = cx.find(Query(types=(t,), where=Eq("head.id", mid), limit=1, **kw))
    [hit] = res.hits
    return hit.salience


SLOW, FAST = 180.0, 21.0

DATA: list[tuple[Any, float | None]] = [
    (Identity(name="me"), None),
    (
        Constraint(statement="c", polarity="dont", strength="hard", source="user_declared"),
        None,
    ),
    (fact(1), SLOW),
    (Preference(topic="t", polarity="prefer"), SLOW),
    (Belief(statement="b", stance="believe"), SLOW),
    (Goal(statement="g", status="active"), SLOW),
    (Capability(subject="s", capability="c"), SLOW),
    (Pattern(statement="p"), SLOW),
    (Event(kind="e"), FAST),
]


@pytest.mark.parametrize(("data", "half_life"), DATA, ids=[type(d).__name__ for d, _ in DATA])
@pytest.mark.parametrize("days", [0, 21, 90, 180, 365])
def test_recency_by_default_decay_class(
    cx: Cortex, clock: Clock, data: Any, half_life: float | None, days: int
) -> None:
    mid = cx.write(data, importance=4).id
    clock.advance(days * DAY)
    r = 1.0 if half_life is None else 0.5 ** (days / half_life)
    assert sal(cx, mid) == pytest.approx(expected(r, importance=4), rel=1e-12)


def test_half_lives_exactly(cx: Cortex, clock: Clock) -> None:
    f = cx.write(fact(1), importance=0).id
    e = cx.write(Event(kind="e"), importance=0).id
    clock.advance(21 * DAY)
    assert sal(cx, e) == pytest.approx(0.25 * 0.5 / 0.9, rel=1e-12)
    clock.advance(21 * DAY)
    assert sal(cx, e) == pytest.approx(0.25 * 0.25 / 0.9, rel=1e-12)
    clock.advance(138 * DAY)  # 180 days
    assert sal(cx, f) == pytest.approx(0.25 * 0.5 / 0.9, rel=1e-12)


@pytest.mark.parametrize("importance", [0, 1, 5, 10])
def test_importance(cx: Cortex, importance: int) -> None:
    mid = cx.write(Identity(name="x"), importance=importance).id
    assert sal(cx, mid) == pytest.approx(expected(1.0, importance=importance), rel=1e-12)


def test_fresh_memory_at_default_importance(cx: Cortex) -> None:
    mid = cx.write(fact(1)).id  # R = 1, A = C = 0, D = 0.5
    assert sal(cx, mid) == pytest.approx((0.25 + 0.1) / 0.9, rel=1e-12)


def test_tombstoned_scores_zero(cx: Cortex) -> None:
    mid = cx.write(Identity(name="x"), importance=10).id
    cx.attest([mid])
    cx.tombstone(mid, "x")
    assert sal(cx, mid, include_tombstoned=True) == 0.0


def test_recorded_access_counts_and_refreshes_recency(cx: Cortex, clock: Clock) -> None:
    mid = cx.write(Event(kind="e")).id
    clock.advance(10 * DAY)
    before = trace(cx)
    res = cx.find(Query(types=("Event",), limit=5, record_access=True))
    assert [m.id for m in res.memories] == [mid]
    # access counting is not journalled
    assert trace(cx)[:2] == before[:2]
    st = cx.salience_state(mid)
    assert st.accesses == 1 and st.citations == 0 and st.last_used_at == T0 + 10 * DAY
    clock.advance(21 * DAY)
    assert sal(cx, mid) == pytest.approx(expected(0.5, a=1), rel=1e-12)
    cx.find(Query(types=("Event",), limit=5, record_access=True))
    cx.find(Query(types=("Event",), limit=5, record_access=True))
    assert cx.salience_state(mid).accesses == 3
    assert sal(cx, mid) == pytest.approx(expected(1.0, a=3), rel=1e-12)


def test_plain_find_records_nothing(cx: Cortex, clock: Clock) -> None:
    mid = cx.write(fact(1)).id
    before = trace(cx)
    for _ in range(3):
        cx.find(Query(types=("Fact",), limit=5))
    assert trace(cx) == before
    assert cx.salience_state(mid) == SalienceState()


def test_only_returned_hits_are_counted(cx: Cortex, clock: Clock) -> None:
    uris = []
    for i in range(4):
        uris.append(cx.write(fact(i), importance=i, forms=forms(10)))
        clock.tick()
    res = cx.find(Query(types=("Fact",), limit=3, budget_tokens=20, record_access=True))
    returned = {m.id for m in res.memories}
    assert returned == {uris[3].id, uris[2].id}
    assert {u.id for u in res.dropped} == {uris[1].id}
    for u in uris:
        assert cx.salience_state(u).accesses == (1 if u.id in returned else 0)


def test_attest_counts_citations(cx: Cortex, clock: Clock) -> None:
    a = cx.write(fact("a")).id
    b = cx.write(fact("b")).id
    n = sum(1 for _ in cx.journal())
    clock.advance(DAY)
    cx.attest([a, str(b)], "success")
    cx.attest([cx.resolve_latest(a).uri], Outcome.PARTIAL)
    assert cx.salience_state(a).citations == 2
    assert cx.salience_state(b).citations == 1
    entries = list(cx.journal())[n:]
    assert [e.kind for e in entries] == [JournalKind.ATTEST] * 3
    assert [e.id for e in entries] == [a, b, a]
    assert sal(cx, a) == pytest.approx(expected(1.0, c=2), rel=1e-12)
    clock.advance(180 * DAY)
    assert sal(cx, b) == pytest.approx(expected(0.5, c=1), rel=1e-12)


def test_attest_failure_is_counted_apart(cx: Cortex) -> None:
    a = cx.write(fact("a")).id
    cx.attest([a], "failure")
    st = cx.salience_state(a)
    assert st.failures == 1 and st.citations == 0


def test_attest_failure_does_not_raise_salience(cx: Cortex, clock: Clock) -> None:
    a = cx.write(fact("a")).id
    clock.advance(100 * DAY)
    s0 = sal(cx, a)
    cx.attest([a], "failure")
    assert sal(cx, a) <= s0


def test_attest_is_all_or_nothing(cx: Cortex) -> None:
    a = cx.write(fact("a")).id
    t = cx.write(fact("t")).id
    cx.tombstone(t, "x")
    before = trace(cx)
    with pytest.raises(NotFoundError):
        cx.attest([a, new_id()])
    with pytest.raises(TombstonedError):
        cx.attest([a, t])
    with pytest.raises(ValidationError):
        cx.attest([a], "meh")
    assert trace(cx) == before
    assert cx.salience_state(a) == SalienceState()


def test_recency_runs_from_the_later_of_update_and_use(cx: Cortex, clock: Clock) -> None:
    a = cx.write(fact("a")).id
    b = cx.write(fact("b")).id
    clock.at(T0 + 10 * DAY)
    cx.attest([a, b])
    clock.at(T0 + 50 * DAY)
    cx.update_head(b, importance=5)  # later than the use
    clock.at(T0 + 100 * DAY)
    assert sal(cx, a) == pytest.approx(expected(0.5 ** (90 / 180), c=1), rel=1e-12)
    assert sal(cx, b) == pytest.approx(expected(0.5 ** (50 / 180), c=1), rel=1e-12)
    cx.update(a, fact("a2"))  # a new version is an update too
    assert sal(cx, a) == pytest.approx(expected(1.0, c=1), rel=1e-12)


def test_salience_orders_results(cx: Cortex, clock: Clock) -> None:
    uris = cx.write_many([fact(i) for i in range(3)])
    cx.attest([uris[2]])
    cx.find(Query(types=("Fact",), where=Eq("head.id", uris[1].id), limit=1, record_access=True))
    res = cx.find(Query(types=("Fact",), limit=3, order_by="salience"))
    assert [m.uri for m in res.memories] == [uris[2], uris[1], uris[0]]
    assert [h.score for h in res.hits] == [h.salience for h in res.hits]


def test_decay_override_at_open(tmp_path: Path, clock: Clock) -> None:
    decay = {"Fact": "fast", MemoryType.EVENT: DecayClass.PERMANENT, "Identity": "slow"}
    with Cortex.open(tmp_path / "s", actor="a", clock=clock, metasync=False, decay=decay) as cx:
        f = cx.write(fact(1)).id
        e = cx.write(Event(kind="e")).id
        i = cx.write(Identity(name="me")).id
        g = cx.write(Goal(statement="g", status="active")).id
        clock.advance(42 * DAY)
        assert sal(cx, f) == pytest.approx(expected(0.25), rel=1e-12)
        assert sal(cx, e) == pytest.approx(expected(1.0), rel=1e-12)
        assert sal(cx, i) == pytest.approx(expected(0.5 ** (42 / 180)), rel=1e-12)
        assert sal(cx, g) == pytest.approx(expected(0.5 ** (42 / 180)), rel=1e-12)


def test_bad_decay_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValidationError):
        Cortex.open(tmp_path / "s", actor="a", decay={"Fact": "sometimes"})
    with pytest.raises(ValidationError):
        Cortex.open(tmp_path / "t", actor="a", decay={"Nope": "fast"})


@pytest.mark.parametrize(
    "w",
    [(1.0, 0.0, 0.0, 0.0), (0.5, 0.0, 0.0, 0.5), (0.1, 0.2, 0.3, 0.4), (0.25, 0.15, 0.3, 0.2)],
)
def test_weights_are_renormalised(tmp_path: Path, clock: Clock, w: tuple[float, ...]) -> None:
    weights = Weights(recency=w[0], access=w[1], citation=w[2], importance=w[3])
    with Cortex.open(tmp_path / "s", actor="a", clock=clock, metasync=False, weights=weights) as cx:
        mid = cx.write(fact(1), importance=8).id
        cx.attest([mid])
        cx.attest([mid])
        cx.find(Query(types=("Fact",), limit=1, record_access=True))
        clock.advance(90 * DAY)
        want = expected(0.5**0.5, a=1, c=2, importance=8, w=w)  # type: ignore[arg-type]
        assert sal(cx, mid) == pytest.approx(want, rel=1e-12)


def test_counts_are_capped_at_1000(cx: Cortex) -> None:
    mid = cx.write(Identity(name="x"), importance=10).id
    head = cx.resolve_latest(mid).head
    capped = SalienceState(accesses=1000, citations=1000)
    over = SalienceState(accesses=50_000, citations=7_000)
    s1 = salience_fn(head, capped, T0, decay=DecayClass.PERMANENT)
    s2 = salience_fn(head, over, T0, decay=DecayClass.PERMANENT)
    assert s1 == s2 == pytest.approx(1.0, rel=1e-12)
    half = SalienceState(accesses=10, citations=100)
    s3 = salience_fn(head, half, T0, decay=DecayClass.PERMANENT)
    assert s3 == pytest.approx(expected(1.0, a=10, c=100, importance=10), rel=1e-12)


def test_vector_factor_only_with_a_vector(cx: Cortex) -> None:
    mid = cx.write(Identity(name="x"), importance=5).id
    head = cx.resolve_latest(mid).head
    plain = salience_fn(head, None, T0, decay=DecayClass.PERMANENT)
    assert plain == pytest.approx(expected(1.0), rel=1e-12)
    v = salience_fn(head, None, T0, decay=DecayClass.PERMANENT, vector=0.5)
    assert v == pytest.approx((0.25 + 0.1 + 0.1 * 0.5) / 1.0, rel=1e-12)
    neg = salience_fn(head, None, T0, decay=DecayClass.PERMANENT, vector=-0.7)
    assert neg == pytest.approx((0.25 + 0.1) / 1.0, rel=1e-12)


def test_use_counters_are_not_hashed(cx: Cortex) -> None:
    mid = cx.write(fact(1)).id
    h = cx.resolve_latest(mid).version.hash
    cx.attest([mid])
    cx.find(Query(types=("Fact",), limit=1, record_access=True))
    assert cx.resolve_latest(mid).version.hash == h
    assert cx.verify().ok


def test_salience_state_of_a_missing_memory(cx: Cortex) -> None:
    with pytest.raises(NotFoundError):
        cx.salience_state(new_id())


# --- the weights and the counters' record, on their own ---------------------------------------

WEIGHT_NAMES = ("recency", "access", "citation", "importance", "vector")


@pytest.mark.parametrize("name", WEIGHT_NAMES)
@pytest.mark.parametrize("bad", [-0.01, 1.01, -1, 2, math.nan, math.inf, True, "0.5", None])
def test_a_weight_outside_0_1_is_refused(name: str, bad: Any) -> None:
    with pytest.raises(ValidationError) as err:
        Weights(**{name: bad})
    assert err.value.field == f"weights.{name}" and err.value.rule == "range"


@pytest.mark.parametrize("name", WEIGHT_NAMES)
def test_weights_at_the_bounds_are_accepted(name: str) -> None:
    assert getattr(Weights(**{name: 0}), name) == 0
    assert getattr(Weights(**{name: 1}), name) == 1
    assert getattr(Weights(**{name: 0.0}), name) == 0.0
    assert getattr(Weights(**{name: 1.0}), name) == 1.0


def test_the_non_vector_weights_must_not_all_be_zero() -> None:
    zero = {"recency": 0, "access": 0, "citation": 0, "importance": 0}
    for vector in (0.0, 1.0):
        with pytest.raises(ValidationError) as err:
            Weights(**zero, vector=vector)
        assert err.value.field == "weights" and err.value.rule == "range"
    for name in zero:  # any one of them is enough
        w = Weights(**{**zero, name: 0.01})
        assert getattr(w, name) == 0.01
    assert Weights() == Weights(recency=0.25, access=0.15, citation=0.30, importance=0.20)
    assert Weights().vector == 0.10


def test_the_counters_record_is_the_storage_spec_layout() -> None:
    """storage.md §2: a sealed SalienceState {0: 1, 1: accesses, 2: citations, 3: failures,
    4: last_used_at µs}; key 0 is the schema version 1."""
    import cbor2

    from cortex.errors import CodecError
    from cortex.rules.salience import SALIENCE_STATE

    st = SalienceState(accesses=3, citations=2, failures=1, last_used_at=T0, confirmations=4)
    raw = SALIENCE_STATE.encode(st, "sal")
    m = cbor2.loads(raw)
    assert m[0] == 1
    assert (m[1], m[2], m[3], m[4]) == (3, 2, 1, int(T0.timestamp()) * 1_000_000)
    assert raw == cbor2.dumps(m, canonical=True)
    assert SALIENCE_STATE.decode(raw, "sal") == st
    for version in (0, 2):
        with pytest.raises(CodecError):
            SALIENCE_STATE.decode(cbor2.dumps({**m, 0: version}, canonical=True), "sal")
    with pytest.raises(CodecError):
        SALIENCE_STATE.decode(cbor2.dumps({k: v for k, v in m.items() if k}), "sal")


def test_the_default_decay_classes() -> None:
    """specs/query.md §2: Identity and Constraint permanent, Event fast, all others slow."""
    from cortex.rules.salience import decay_table

    want = {t: DecayClass.SLOW for t in MemoryType}
    want |= {
        MemoryType.IDENTITY: DecayClass.PERMANENT,
        MemoryType.CONSTRAINT: DecayClass.PERMANENT,
        MemoryType.EVENT: DecayClass.FAST,
    }
    assert decay_table() == decay_table(None) == decay_table({}) == want
    assert decay_table({MemoryType.FACT: DecayClass.FAST}) == want | {
        MemoryType.FACT: DecayClass.FAST
    }


def test_a_memory_never_used_has_every_counter_at_zero(cx: Cortex) -> None:
    zero = SalienceState(accesses=0, citations=0, failures=0, last_used_at=None, confirmations=0)
    assert SalienceState() == zero
    mid = cx.write(fact(1)).id
    assert cx.salience_state(mid) == zero
    cx.attest([mid])
    assert cx.salience_state(mid).citations == 1
    assert cx.salience_state(mid).confirmations == 0


def test_recency_is_exactly_1_at_age_0_and_for_a_use_in_the_future() -> None:
    """R = 0.5 ** (age / half_life): 1 at age 0; a last use after now counts as age 0."""
    from datetime import timedelta

    from cortex.rules.salience import recency

    for decay in DecayClass:
        assert recency(decay, T0, T0) == 1.0
        assert recency(decay, T0 + timedelta(days=3), T0) == 1.0
    assert recency(DecayClass.FAST, T0, T0 + timedelta(days=21)) == 0.5


def test_salience_stays_within_0_1_when_a_cosine_rounds_above_1(cx: Cortex) -> None:
    """Salience is in [0, 1]; V = max(0, cosine) of a cosine in [-1, 1] (a float cosine of
    equal vectors can round a little above 1)."""
    mid = cx.write(Identity(name="x"), importance=10).id
    head = cx.resolve_latest(mid).head
    full = SalienceState(accesses=1000, citations=1000)
    for v in (1.0, 1.0 + 1e-9, 1.5):
        assert salience_fn(head, full, T0, decay=DecayClass.PERMANENT, vector=v) == 1.0


@settings(max_examples=300)
@given(
    st.sampled_from(list(DecayClass)),
    st.integers(-(10**15), 10**15),
    st.integers(0, 10**16),
)
def test_salience_at_recency_is_recency_us(decay: DecayClass, age_us: int, now_us: int) -> None:
    """``salience_at`` computes recency inline: exactly ``_recency_us`` (and ``recency``)."""
    from cortex.model.codec import from_micros
    from cortex.model.records import Head
    from cortex.rules.salience import _recency_us, recency, salience_at

    last_us = now_us - age_us
    assume(0 <= last_us <= 10**16)
    head = Head(
        id=new_id(),
        type=MemoryType.FACT,
        current_version=1,
        actor_scope="a",
        created_at=from_micros(last_us),
        last_updated_at=from_micros(last_us),
    )
    only = Weights(recency=1.0, access=0.0, citation=0.0, importance=0.0, vector=0.0)
    want = _recency_us(decay, last_us, now_us)
    assert salience_at(head, None, now_us, decay=decay, weights=only) == want
    assert recency(decay, head.last_updated_at, from_micros(now_us)) == want


_WEIGHT = st.one_of(
    st.sampled_from([0.0, 1.0, 0.25, 0.1, 1 / 3, 0, 1]),
    st.floats(min_value=0.0, max_value=1.0, allow_nan=False),
)


@settings(max_examples=400)
@given(
    heads(),
    st.one_of(st.integers(-(2**62), 2**62), st.integers(0, 4 * 10**17)),
    st.dictionaries(st.sampled_from(list(MemoryType)), st.sampled_from(list(DecayClass))),
    st.tuples(_WEIGHT, _WEIGHT, _WEIGHT, _WEIGHT).filter(lambda w: sum(w) > 0),
    st.booleans(),
)
def test_the_c_salience_is_salience_at(
    head: Any,
    now_us: int,
    overrides: dict[MemoryType, DecayClass],
    w: tuple[float, float, float, float],
    near_now: bool,
) -> None:
    """``cortex._speedups.salience`` (the find's candidates) is ``salience_at``, bit for bit."""
    import msgspec

    from cortex.model.codec import from_micros, to_micros
    from cortex.rules.salience import HALF_LIFE_DAYS, decay_table, salience_at

    sp = pytest.importorskip("cortex._speedups")
    if near_now:  # a head updated around now, in UTC as stored heads are
        when = from_micros(min(max(now_us, -(6 * 10**16)), 2 * 10**17) % (2 * 10**17))
        head = msgspec.structs.replace(head, last_updated_at=when, has_counters=False)
        now_us = to_micros(when) + abs(now_us) % (400 * 86_400 * 10**6)
    decay = decay_table(overrides)
    weights = Weights(recency=w[0], access=w[1], citation=w[2], importance=w[3], vector=0.5)
    got = sp.salience(head, now_us, decay, DecayClass.PERMANENT, HALF_LIFE_DAYS, w)
    from cortex.engine.heads import NEVER_USED

    if got is None:  # declined: counters to read, a time not in UTC, an age past 2**53 us
        utc = head.last_updated_at.tzinfo is UTC and type(head.last_updated_at) is datetime
        far = abs(now_us - to_micros(head.last_updated_at)) >= 2**53
        assert head.tombstone is None and (head.has_counters or not utc or far)
        return
    want = salience_at(head, NEVER_USED, now_us, decay=decay[head.type], weights=weights)
    assert type(got) is float and got == want
    if head.tombstone is None:
        assert not head.has_counters


def test_the_c_salience_refuses_bad_arguments() -> None:
    from cortex.rules.salience import HALF_LIFE_DAYS, decay_table

    sp = pytest.importorskip("cortex._speedups")
    decay = decay_table()
    w = (0.25, 0.15, 0.3, 0.2)
    for args in (
        (None, 0, decay, DecayClass.PERMANENT, HALF_LIFE_DAYS, w),
        (object(), 0, decay, DecayClass.PERMANENT, HALF_LIFE_DAYS, w),
    ):
        with pytest.raises(AttributeError):
            sp.salience(*args)
    for args in (
        (None, 0.5, decay, DecayClass.PERMANENT, HALF_LIFE_DAYS, w),
        (None, 0, list(decay.items()), DecayClass.PERMANENT, HALF_LIFE_DAYS, w),
        (None, 0, decay, DecayClass.PERMANENT, HALF_LIFE_DAYS, w[:3]),
        (None, 0, decay, DecayClass.PERMANENT, HALF_LIFE_DAYS, list(w)),
        (None, 0, decay, DecayClass.PERMANENT, HALF_LIFE_DAYS),
    ):
        with pytest.raises(TypeError):
            sp.salience(*args)
    # weights that are not plain numbers, a time past 64 bits: declined
    assert sp.salience(None, 2**70, decay, DecayClass.PERMANENT, HALF_LIFE_DAYS, w) is None
    assert (
        sp.salience(None, 0, decay, DecayClass.PERMANENT, HALF_LIFE_DAYS, (True, 0, 0, 0)) is None
    )
