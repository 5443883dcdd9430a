"""find: predicates, validation, ordering, budgets, windows, as-of, walks (specs/query.md §1)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cortex import (
    And,
    Capability,
    Constraint,
    ConstraintSource,
    Cortex,
    Cost,
    EdgeType,
    Eq,
    Event,
    Fact,
    Follow,
    FrameMatch,
    Ge,
    Goal,
    GoalStatus,
    Gt,
    HasTag,
    In,
    Le,
    Lt,
    Matches,
    MemoryId,
    MemoryType,
    Ne,
    NewMemory,
    Not,
    NotFoundError,
    ObjKind,
    Or,
    Outcome,
    Pattern,
    Polarity,
    Preference,
    Provenance,
    Query,
    Reader,
    SourceKind,
    Strength,
    Uri,
    Verb,
    Window,
    count_tokens,
    field_names,
    new_id,
)

from .qsupport import DAY, T0, Clock, fact, forms, frame, rejects, trace


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cx(store_path: Any, clock: Clock) -> Iterator[Cortex]:
    with Cortex.open(store_path, actor="agent", clock=clock, metasync=False) as store:
        yield store


def ids(res: Any) -> set[MemoryId]:
    return {m.id for m in res.memories}


def order(res: Any) -> list[MemoryId]:
    return [m.id for m in res.memories]


DERIVED = "cortex://Fact/01ARZ3NDEKTSV4RRFFQ69G5FAV#1"

# --- predicates -------------------------------------------------------------------------------

ALL = ("Fact", "Event", "Goal", "Constraint", "Capability")


@pytest.fixture
def zoo(cx: Cortex, clock: Clock) -> dict[str, MemoryId]:
    """A store with values of every kind, some missing."""
    n: dict[str, MemoryId] = {}
    w = cx.write
    n["f1"] = w(
        Fact(
            statement="alpha one",
            subject="ada",
            predicate="likes",
            object="tea",
            source=SourceKind.OBSERVED,
            observed_at=T0 - 10 * DAY,
            confidence=0.9,
        ),
        tags=["a", "b"],
        importance=7,
        visibility="actor_public",
        provenance=Provenance(source=SourceKind.OBSERVED, derived_from=(DERIVED,)),
    ).id
    clock.tick()
    n["f2"] = w(
        Fact(statement="beta two", subject="bob", predicate="knows"),
        tags=["b"],
        importance=3,
        confidence=0.5,
        expires_at=T0 + 100 * DAY,
    ).id
    clock.tick()
    n["e1"] = w(
        Event(
            kind="purchase",
            outcome=Outcome.SUCCESS,
            counterparty="ada",
            cost=Cost(asset="USD", amount="10"),
            duration_us=500,
            occurred_at=T0 - 2 * DAY,
            artifacts=("r1", "r2"),
        ),
        tags=["a"],
    ).id
    clock.tick()
    n["e2"] = w(
        Event(
            kind="call",
            outcome=Outcome.FAILURE,
            counterparty="bob",
            cost=Cost(asset="EUR", amount="3"),
            duration_us=1500,
        ),
        importance=9,
    ).id
    clock.tick()
    n["e3"] = w(Event(kind="note")).id
    clock.tick()
    n["g1"] = w(
        Goal(
            statement="ship it",
            status=GoalStatus.ACTIVE,
            horizon=T0 + 30 * DAY,
            success_criteria=("tests pass", "docs"),
        )
    ).id
    clock.tick()
    n["c1"] = w(
        Constraint(
            statement="no spend",
            polarity=Polarity.DONT,
            strength=Strength.HARD,
            source=ConstraintSource.USER_DECLARED,
        )
    ).id
    clock.tick()
    n["cap1"] = w(
        Capability(subject="ada", capability="search", verified=True, last_observed=T0 - DAY)
    ).id
    clock.tick()
    return n


def where(cx: Cortex, pred: Any, types: tuple[str, ...] = ALL, **kw: Any) -> set[MemoryId]:
    return ids(cx.find(Query(types=types, where=pred, limit=100, **kw)))


E = ("Event",)
F = ("Fact",)

PREDICATE_CASES: list[tuple[str, Any, tuple[str, ...], set[str]]] = [
    # text
    ("eq text", Eq("data.subject", "ada"), ALL, {"f1", "cap1"}),
    (
        "ne text (missing is unequal)",
        Ne("data.subject", "ada"),
        ALL,
        {"f2", "e1", "e2", "e3", "g1", "c1"},
    ),
    ("ne text in one type", Ne("data.subject", "ada"), F, {"f2"}),
    ("lt text", Lt("data.subject", "b"), ALL, {"f1", "cap1"}),
    ("ge text", Ge("data.subject", "b"), ALL, {"f2"}),
    ("in text", In("data.counterparty", ("ada", "zed")), ALL, {"e1"}),
    ("matches text", Matches("data.statement", "^al"), ALL, {"f1"}),
    ("matches is search, not match", Matches("data.statement", "two$"), ALL, {"f2"}),
    # enums: by label, member and code
    ("enum by label", Eq("data.outcome", "success"), E, {"e1"}),
    ("enum by member", Eq("data.outcome", Outcome.FAILURE), E, {"e2"}),
    ("enum by code", Eq("data.outcome", 2), E, {"e2"}),
    ("enum ne (missing is unequal)", Ne("data.outcome", "success"), E, {"e2", "e3"}),
    ("enum in", In("data.outcome", ["success", Outcome.FAILURE]), E, {"e1", "e2"}),
    ("enum matches label", Matches("data.outcome", "^succ"), E, {"e1"}),
    ("head enum", Eq("head.visibility", "actor_public"), ALL, {"f1"}),
    ("head enum matches", Matches("head.visibility", "pub"), ALL, {"f1"}),
    ("head type", In("head.type", [MemoryType.GOAL, "constraint"]), ALL, {"g1", "c1"}),
    ("data enum strength", Eq("data.strength", "hard"), ("Constraint",), {"c1"}),
    ("data enum status", Eq("data.status", "active"), ("Goal",), {"g1"}),
    # ints
    ("lt int", Lt("data.duration_us", 1000), E, {"e1"}),
    ("le int", Le("data.duration_us", 1500), E, {"e1", "e2"}),
    ("gt int", Gt("data.duration_us", 500), E, {"e2"}),
    ("ge int", Ge("data.duration_us", 500), E, {"e1", "e2"}),
    ("eq int", Eq("data.duration_us", 1500), E, {"e2"}),
    ("ne int missing", Ne("data.duration_us", 1500), E, {"e1", "e3"}),
    ("head int", Ge("head.importance", 7), ALL, {"f1", "e2"}),
    ("head int eq", Eq("head.importance", 3), ALL, {"f2"}),
    ("int given as integral float", Eq("head.importance", 3.0), ALL, {"f2"}),
    # floats
    ("gt float", Gt("data.confidence", 0.5), F, {"f1"}),
    ("float against int", Lt("data.confidence", 1), F, {"f1"}),
    ("version float", Eq("version.confidence", 0.5), ALL, {"f2"}),
    # datetimes
    ("lt datetime", Lt("data.observed_at", T0), F, {"f1"}),
    ("ge datetime", Ge("data.occurred_at", T0 - 3 * DAY), E, {"e1"}),
    ("le datetime exact", Le("data.occurred_at", T0 - 2 * DAY), E, {"e1"}),
    ("lt datetime exact", Lt("data.occurred_at", T0 - 2 * DAY), E, set()),
    ("goal horizon", Gt("data.horizon", T0), ("Goal",), {"g1"}),
    (
        "head created",
        Ge("head.created_at", T0 + timedelta(seconds=2)),
        ALL,
        {"e1", "e2", "e3", "g1", "c1", "cap1"},
    ),
    ("version expires", Lt("version.expires_at", T0 + 101 * DAY), ALL, {"f2"}),
    ("version expires missing ne", Ne("version.expires_at", T0 + 100 * DAY), F, {"f1"}),
    # booleans
    ("bool eq", Eq("data.verified", True), ("Capability",), {"cap1"}),
    ("bool ne", Ne("data.verified", True), ("Capability",), set()),
    ("head.tombstoned", Eq("head.tombstoned", False), F, {"f1", "f2"}),
    # nested
    ("nested eq", Eq("data.cost.asset", "USD"), E, {"e1"}),
    ("nested ne (missing parent)", Ne("data.cost.asset", "USD"), E, {"e2", "e3"}),
    ("nested matches", Matches("data.cost.amount", r"^\d+$"), E, {"e1", "e2"}),
    ("nested in", In("data.cost.asset", ["EUR"]), E, {"e2"}),
    # list fields
    ("list eq some element", Eq("data.artifacts", "r2"), E, {"e1"}),
    ("list ne no element", Ne("data.artifacts", "r2"), E, {"e2", "e3"}),
    ("list in", In("data.artifacts", ["zz", "r1"]), E, {"e1"}),
    ("list matches", Matches("data.artifacts", "^r"), E, {"e1"}),
    ("goal criteria", Eq("data.success_criteria", "docs"), ("Goal",), {"g1"}),
    ("head tags eq", Eq("head.tags", "a"), ALL, {"f1", "e1"}),
    ("head tags ne", Ne("head.tags", "a"), ALL, {"f2", "e2", "e3", "g1", "c1", "cap1"}),
    ("provenance list", Eq("version.provenance.derived_from", DERIVED), ALL, {"f1"}),
    ("provenance enum", Eq("version.provenance.source", "observed"), ALL, {"f1"}),
    ("has_tag", HasTag("b"), ALL, {"f1", "f2"}),
    # version
    ("version number", Eq("version.version", 1), F, {"f1", "f2"}),
    ("version created_by", Eq("version.created_by", "agent"), F, {"f1", "f2"}),
    ("head actor", Eq("head.actor_scope", "nobody"), ALL, set()),
    # combinators
    ("and", And(Eq("data.subject", "ada"), Eq("head.type", "fact")), ALL, {"f1"}),
    ("and op", Eq("data.subject", "ada") & Eq("head.type", "capability"), ALL, {"cap1"}),
    ("or", Or(Eq("data.counterparty", "bob"), HasTag("b")), ALL, {"e2", "f1", "f2"}),
    ("or op", Eq("data.counterparty", "bob") | Eq("data.subject", "bob"), ALL, {"e2", "f2"}),
    ("not", Not(Lt("data.duration_us", 1000)), E, {"e2", "e3"}),
    ("not op", ~HasTag("a"), F, {"f2"}),
    (
        "nested combinators",
        (HasTag("a") | HasTag("b")) & ~Eq("head.type", "event"),
        ALL,
        {"f1", "f2"},
    ),
    ("and of three", And(HasTag("a"), HasTag("b"), Gt("head.importance", 5)), ALL, {"f1"}),
]


@pytest.mark.parametrize(
    ("pred", "types", "want"),
    [c[1:] for c in PREDICATE_CASES],
    ids=[c[0] for c in PREDICATE_CASES],
)
def test_predicate(
    cx: Cortex, zoo: dict[str, MemoryId], pred: Any, types: tuple[str, ...], want: set[str]
) -> None:
    assert where(cx, pred, types) == {zoo[n] for n in want}


def test_head_id_predicate_takes_id_text_id_and_uri(cx: Cortex, zoo: dict[str, MemoryId]) -> None:
    mid = zoo["f2"]
    for v in (mid, str(mid), Uri(MemoryType.FACT, mid, 1)):
        assert where(cx, Eq("head.id", v)) == {mid}
    assert where(cx, Ne("head.id", mid), F) == {zoo["f1"]}


def test_version_predicates_see_the_current_version(cx: Cortex, zoo: dict[str, MemoryId]) -> None:
    cx.update(zoo["f2"], Fact(statement="beta three", subject="bob", predicate="knows"))
    assert where(cx, Eq("version.version", 2), F) == {zoo["f2"]}
    assert where(cx, Matches("data.statement", "three"), F) == {zoo["f2"]}
    assert where(cx, Matches("data.statement", "two"), F) == set()


def test_head_tombstoned_predicate(cx: Cortex, zoo: dict[str, MemoryId]) -> None:
    cx.tombstone(zoo["f2"], "gone")
    got = where(cx, Eq("head.tombstoned", True), F, include_tombstoned=True)
    assert got == {zoo["f2"]}
    assert where(cx, Eq("head.tombstoned", True), F) == set()
    assert where(cx, Eq("head.tombstoned", False), F, include_tombstoned=True) == {zoo["f1"]}


def test_int_field_compares_numerically_with_a_float(cx: Cortex, zoo: dict[str, MemoryId]) -> None:
    assert where(cx, Gt("head.importance", 6.5)) == {zoo["f1"], zoo["e2"]}


def test_field_names_lists_head_version_and_data_fields() -> None:
    ev = field_names("Event")
    for f in (
        "head.tags",
        "head.importance",
        "head.tombstoned",
        "head.visibility",
        "version.created_by",
        "version.provenance.source",
        "data.cost.asset",
        "data.occurred_at",
        "data.artifacts",
    ):
        assert f in ev
    assert "data.statement" not in ev
    assert "data.statement" in field_names(MemoryType.FACT)
    assert "data.profile" not in field_names("Identity")  # free maps are not addressable
    assert "data.parameters" not in field_names("Capability")
    every = field_names()
    assert "data.statement" in every and "data.occurred_at" in every


BAD_WHERE: list[tuple[str, Any, tuple[str, ...]]] = [
    ("unknown data field", Eq("data.nope", 1), ALL),
    ("unknown head field", Eq("head.nope", 1), ALL),
    ("no root", Eq("nope", 1), ALL),
    ("field of another type", Eq("data.kind", "x"), F),
    ("free map", Eq("data.profile", "x"), ("Identity",)),
    ("free map param", Eq("data.parameters", "x"), ("Capability",)),
    ("text for int", Eq("head.importance", "high"), ALL),
    ("text for time", Eq("data.observed_at", "2030-01-01"), F),
    ("naive time", Lt("data.observed_at", datetime(2030, 1, 1)), F),
    ("unknown enum label", Eq("data.outcome", "great"), E),
    ("unknown enum code", Eq("data.outcome", 99), E),
    ("int for bool", Eq("data.verified", 1), ("Capability",)),
    ("text for int data", Eq("data.duration_us", "5"), E),
    ("bool for int", Eq("head.importance", True), ALL),
    ("in takes a list", In("data.subject", "ada"), F),
    ("in with a wrong kind", In("head.importance", [1, "x"]), ALL),
    ("bad regex", Matches("data.statement", "("), F),
    ("empty has_tag", HasTag(""), F),
    ("matches on an int", Matches("head.importance", "5"), ALL),
    ("matches on a time", Matches("data.observed_at", "2030"), F),
    ("order a list", Lt("head.tags", "a"), ALL),
    ("order a data list", Gt("data.artifacts", "x"), E),
    ("order a goal list", Ge("data.success_criteria", "a"), ("Goal",)),
    ("order a bool", Lt("data.verified", True), ("Capability",)),
    ("not a predicate", "data.subject == 'ada'", F),
    ("bad part of and", And(Eq("data.subject", "x"), Eq("data.nope", 1)), F),
    ("bad part of not", Not(Matches("data.statement", "[")), F),
    ("bad part of or", Eq("data.subject", "x") | Lt("head.tags", "a"), F),
]


@pytest.mark.parametrize(
    ("pred", "types"), [c[1:] for c in BAD_WHERE], ids=[c[0] for c in BAD_WHERE]
)
def test_bad_predicates_are_rejected_naming_where(
    cx: Cortex, zoo: dict[str, MemoryId], pred: Any, types: tuple[str, ...]
) -> None:
    before = trace(cx)
    rejects("where", cx.find, Query(types=types, where=pred, limit=5, record_access=True))
    assert trace(cx) == before


def test_bad_id_value_is_rejected_naming_where(cx: Cortex, zoo: dict[str, MemoryId]) -> None:
    rejects("where", cx.find, Query(types=F, where=Eq("head.id", "not-an-id"), limit=5))


# --- query validation: rejected queries leave no trace ----------------------------------------

BAD_QUERIES: list[tuple[str, dict[str, Any], str]] = [
    ("no limit or budget", {"types": F}, "limit"),
    ("limit 0", {"types": F, "limit": 0}, "limit"),
    ("limit too big", {"types": F, "limit": 100_001}, "limit"),
    ("limit not int", {"types": F, "limit": 2.0}, "limit"),
    ("limit bool", {"types": F, "limit": True}, "limit"),
    ("budget 0", {"types": F, "budget_tokens": 0}, "budget_tokens"),
    ("negative offset", {"types": F, "limit": 1, "offset": -1}, "offset"),
    ("no index", {"limit": 10}, "query"),
    ("no index with a where", {"limit": 10, "where": Eq("data.subject", "ada")}, "query"),
    ("unknown type", {"types": ("Nope",), "limit": 1}, "types"),
    ("frame ref without kind", {"frames": ("find::ada",), "limit": 1}, "frames"),
    (
        "frame ref without kind (match)",
        {"frames": (FrameMatch(verb="find", obj_ref="x"),), "limit": 1},
        "frames",
    ),
    ("follow without from_", {"types": F, "limit": 1, "follow": Follow()}, "from_"),
    ("hops over 6", {"from_": (new_id(),), "follow": Follow(max_hops=7), "limit": 1}, "follow"),
    ("negative hops", {"from_": (new_id(),), "follow": Follow(min_hops=-1), "limit": 1}, "follow"),
    (
        "min over max",
        {"from_": (new_id(),), "follow": Follow(min_hops=3, max_hops=2), "limit": 1},
        "follow",
    ),
    (
        "bad direction",
        {"from_": (new_id(),), "follow": Follow(direction="up"), "limit": 1},
        "follow",
    ),  # type: ignore[arg-type]
    (
        "bad edge type",
        {"from_": (new_id(),), "follow": Follow(types=("likes",)), "limit": 1},
        "follow",
    ),
    ("hop without walk", {"types": F, "limit": 1, "order_by": "hop"}, "order_by"),
    ("score without text", {"types": F, "limit": 1, "order_by": "score"}, "order_by"),
    ("unknown order", {"types": F, "limit": 1, "order_by": "size"}, "order_by"),
    ("empty window", {"types": F, "limit": 1, "window": Window.between(T0, T0)}, "window"),
    ("reversed window", {"types": F, "limit": 1, "window": Window.between(T0 + DAY, T0)}, "window"),
    (
        "naive window",
        {"types": F, "limit": 1, "window": Window.after(datetime(2030, 1, 1))},
        "window",
    ),
    ("days and start", {"types": F, "limit": 1, "window": Window(days=3, start=T0)}, "window"),
    ("zero days", {"types": F, "limit": 1, "window": Window.recent(0)}, "window"),
    ("naive as_of", {"types": F, "limit": 1, "as_of": datetime(2030, 1, 1)}, "as_of"),
    ("bad form", {"types": F, "limit": 1, "form": "long"}, "form"),
    ("bad reader", {"types": F, "limit": 1, "reader": "eve"}, "reader"),
]


@pytest.mark.parametrize(
    ("kw", "field"), [c[1:] for c in BAD_QUERIES], ids=[c[0] for c in BAD_QUERIES]
)
def test_bad_queries_are_rejected_and_leave_no_trace(
    cx: Cortex, zoo: dict[str, MemoryId], kw: dict[str, Any], field: str
) -> None:
    before = trace(cx)
    err = rejects(field, cx.find, Query(record_access=True, **kw))
    assert str(err)
    assert trace(cx) == before


def test_no_index_error_names_the_rule_and_what_to_add(cx: Cortex) -> None:
    err = rejects("query", cx.find, Query(limit=5))
    assert err.rule == "no_index"
    for word in ("types", "tags", "frames", "from_"):
        assert word in err.message
    err = rejects("limit", cx.find, Query(types=F))
    assert "limit" in err.message


def test_a_walk_from_a_missing_memory_leaves_no_trace(cx: Cortex, zoo: dict[str, MemoryId]) -> None:
    before = trace(cx)
    with pytest.raises(NotFoundError):
        cx.find(Query(from_=(new_id(),), limit=5, record_access=True))
    assert trace(cx) == before


def test_limits_at_the_edges_are_accepted(cx: Cortex, zoo: dict[str, MemoryId]) -> None:
    assert len(cx.find(Query(types=F, limit=100_000))) == 2
    assert len(cx.find(Query(types=F, budget_tokens=10_000))) == 2
    assert len(cx.find(Query(types=F, limit=1))) == 1


# --- tags and frames --------------------------------------------------------------------------


def test_tags_filter_requires_every_tag(cx: Cortex, zoo: dict[str, MemoryId]) -> None:
    assert ids(cx.find(Query(tags=("a",), limit=10))) == {zoo["f1"], zoo["e1"]}
    assert ids(cx.find(Query(tags=("a", "b"), limit=10))) == {zoo["f1"]}
    assert ids(cx.find(Query(tags=("b", "a"), limit=10))) == {zoo["f1"]}
    assert ids(cx.find(Query(tags=("a",), types=E, limit=10))) == {zoo["e1"]}
    assert ids(cx.find(Query(tags=("zz",), limit=10))) == set()


def test_tags_follow_update_head(cx: Cortex, zoo: dict[str, MemoryId]) -> None:
    cx.update_head(zoo["f1"], tags=["c"])
    assert ids(cx.find(Query(tags=("a",), limit=10))) == {zoo["e1"]}
    assert ids(cx.find(Query(tags=("c",), limit=10))) == {zoo["f1"]}


@pytest.fixture
def framed(cx: Cortex, clock: Clock) -> dict[str, MemoryId]:
    n = {}
    n["a"] = cx.write(fact("a"), frames=[frame("svc://a")]).id
    clock.tick()
    n["b"] = cx.write(fact("b"), frames=[frame("svc://b"), frame("ada", "analyze", "agent")]).id
    clock.tick()
    n["c"] = cx.write(fact("c"), frames=[frame("svc://a", "acquire")]).id
    clock.tick()
    n["d"] = cx.write(Event(kind="x"), frames=[frame("svc://a", kind="model")]).id
    clock.tick()
    n["none"] = cx.write(fact("none")).id
    return n


FRAME_CASES: list[tuple[tuple[Any, ...], set[str]]] = [
    (("find",), {"a", "b", "d"}),
    (("find:service",), {"a", "b"}),
    (("find:service:svc://a",), {"a"}),
    ((("find", "model", "svc://a"),), {"d"}),
    ((FrameMatch(verb="acquire", obj_kind="service", obj_ref="svc://a"),), {"c"}),
    ((frame("svc://b"),), {"b"}),
    (("find", "analyze:agent:ada"), {"b"}),
    (("find:service", "analyze"), {"b"}),
    (("delegate",), set()),
    (("find:service:svc://zz",), set()),
]


@pytest.mark.parametrize(("patterns", "want"), FRAME_CASES)
def test_frame_patterns(
    cx: Cortex, framed: dict[str, MemoryId], patterns: tuple[Any, ...], want: set[str]
) -> None:
    assert ids(cx.find(Query(frames=patterns, limit=10))) == {framed[n] for n in want}


def test_frame_filter_with_types(cx: Cortex, framed: dict[str, MemoryId]) -> None:
    assert ids(cx.find(Query(frames=("find",), types=F, limit=10))) == {framed["a"], framed["b"]}
    assert ids(cx.find(Query(frames=("find",), types=E, limit=10))) == {framed["d"]}


# --- ordering ---------------------------------------------------------------------------------


def _sorted_ids(pairs: list[tuple[Any, MemoryId]], descending: bool) -> list[MemoryId]:
    """Order by key in the given direction, ties by id ascending (bytewise)."""
    return [
        m for _, m in sorted(pairs, key=lambda p: ((-p[0] if descending else p[0]), p[1].bytes))
    ]


@pytest.fixture
def batch(cx: Cortex, clock: Clock) -> list[Uri]:
    """Twelve Facts: three write_many batches (same created time within a batch)."""
    uris: list[Uri] = []
    imp = [5, 3, 5, 7, 3, 5, 7, 7, 0, 10, 5, 3]
    for b in range(3):
        uris += cx.write_many(
            [NewMemory(data=fact(f"{b}-{i}"), importance=imp[4 * b + i]) for i in range(4)]
        )
        clock.tick(60)
    return uris


@pytest.mark.parametrize("descending", [True, False])
def test_order_by_created_ties_by_id_ascending(
    cx: Cortex, batch: list[Uri], descending: bool
) -> None:
    pairs = [(cx.resolve_latest(u).head.created_at.timestamp(), u.id) for u in batch]
    want = _sorted_ids(pairs, descending)
    got = order(cx.find(Query(types=F, limit=100, order_by="created", descending=descending)))
    assert got == want
    if descending:
        assert order(cx.find(Query(types=F, limit=100))) == want  # the default order


@pytest.mark.parametrize("key", ["importance", "salience", "updated", "created"])
@pytest.mark.parametrize("descending", [True, False])
def test_order_keys_and_tie_break(
    cx: Cortex, clock: Clock, batch: list[Uri], key: str, descending: bool
) -> None:
    # give some memories a later update so "updated" differs from "created"
    clock.tick(60)
    cx.update_head(batch[0], importance=5)
    clock.tick(60)
    cx.update_head(batch[5], importance=5)
    heads = {u.id: cx.resolve_latest(u).head for u in batch}
    res = cx.find(Query(types=F, limit=100, order_by=key, descending=descending))
    sal = {h.memory.id: h.salience for h in res.hits}

    def k(mid: MemoryId) -> Any:
        h = heads[mid]
        return {
            "importance": h.importance,
            "salience": sal[mid],
            "updated": h.last_updated_at.timestamp(),
            "created": h.created_at.timestamp(),
        }[key]

    assert order(res) == _sorted_ids([(k(m), m) for m in heads], descending)


def test_newest_first_across_long_runs_of_one_time(cx: Cortex, clock: Clock) -> None:
    """Runs of one created time shorter and longer than the scan buffers (64), newest first
    with ties by id ascending, from the type and the tag index, at any limit and offset."""
    uris: list[Uri] = []
    with_u: set[MemoryId] = set()
    for b, size in enumerate((150, 1, 64, 65, 2, 70)):
        batch = cx.write_many(
            [
                NewMemory(data=fact(f"{b}-{i}"), tags=["t", "u"] if i % 3 == 0 else ["t"])
                for i in range(size)
            ]
        )
        with_u.update(u.id for i, u in enumerate(batch) if i % 3 == 0)
        uris += batch
        clock.tick(60)
    created = {u.id: cx.resolve_latest(u).head.created_at.timestamp() for u in uris}
    want = _sorted_ids([(created[u.id], u.id) for u in uris], True)
    want_u = [m for m in want if m in with_u]
    for limit in (1, 10, 64, 65, 150, 151, 400):
        assert order(cx.find(Query(types=F, limit=limit))) == want[:limit]
        assert order(cx.find(Query(tags=("t",), limit=limit))) == want[:limit]
        got = order(cx.find(Query(types=F, tags=("t",), limit=limit, offset=3)))
        assert got == want[3 : 3 + limit]
        assert order(cx.find(Query(tags=("u",), types=F, limit=limit))) == want_u[:limit]


def test_order_on_a_tag_start(cx: Cortex, clock: Clock) -> None:
    uris = cx.write_many([NewMemory(data=fact(i), tags=["t"], importance=i % 3) for i in range(6)])
    pairs = [(cx.resolve_latest(u).head.importance, u.id) for u in uris]
    got = order(cx.find(Query(tags=("t",), limit=10, order_by="importance")))
    assert got == _sorted_ids(pairs, True)
    got = order(cx.find(Query(tags=("t",), limit=10, order_by="created", descending=False)))
    assert got == sorted((u.id for u in uris), key=lambda m: m.bytes)


@pytest.mark.parametrize("key", ["created", "importance"])
def test_offset_and_limit_slice_the_order(cx: Cortex, batch: list[Uri], key: str) -> None:
    full = order(cx.find(Query(types=F, limit=100, order_by=key)))
    assert len(full) == 12
    for offset in range(0, 14, 3):
        for limit in (1, 2, 5, 20):
            got = order(cx.find(Query(types=F, limit=limit, offset=offset, order_by=key)))
            assert got == full[offset : offset + limit], (offset, limit)


def test_newest_first_streams_across_types(cx: Cortex, clock: Clock) -> None:
    made: list[tuple[float, MemoryId]] = []
    datas = [fact(1), Event(kind="e1"), Goal(statement="g", status="active"), fact(2)]
    for i in range(12):
        u = cx.write(datas[i % 4], tags=["s"] if i % 2 else [])
        made.append((clock.now.timestamp(), u.id))
        if i % 3 != 2:  # some share a created time
            clock.tick(5)
    want = _sorted_ids(made, True)
    types = ("Fact", "Event", "Goal")
    for limit in (1, 3, 5, 12):
        assert order(cx.find(Query(types=types, limit=limit))) == want[:limit]
        assert order(cx.find(Query(types=types, limit=limit, offset=2))) == want[2 : 2 + limit]
    old_first = _sorted_ids(made, False)
    assert order(cx.find(Query(types=types, limit=5, descending=False))) == old_first[:5]
    tagged = [m for m in want if "s" in cx.resolve_latest(m).head.tags]
    assert order(cx.find(Query(tags=("s",), limit=4))) == tagged[:4]


def test_streaming_skips_filtered_candidates(cx: Cortex, clock: Clock) -> None:
    made = []
    for i in range(10):
        made.append(cx.write(fact(i), importance=i).id)
        clock.tick()
    got = order(cx.find(Query(types=F, where=Ge("head.importance", 5), limit=3)))
    assert got == [made[9], made[8], made[7]]
    got = order(cx.find(Query(types=F, where=Lt("head.importance", 5), limit=3)))
    assert got == [made[4], made[3], made[2]]


# --- budget -----------------------------------------------------------------------------------


@pytest.fixture
def tokened(cx: Cortex, clock: Clock) -> list[Uri]:
    """Five Facts of 10 tokens each; importance 1..5 (salience rises with it), newest last."""
    uris = []
    for i in range(5):
        uris.append(cx.write(fact(i), importance=i + 1, forms=forms(10)))
        clock.tick()
    return uris


def test_budget_drops_lowest_salience_first(cx: Cortex, tokened: list[Uri]) -> None:
    res = cx.find(Query(types=F, limit=10, budget_tokens=35))
    assert [h.uri for h in res.hits] == [tokened[4], tokened[3], tokened[2]]
    assert set(res.dropped) == {tokened[0], tokened[1]}
    assert res.trimmed == 2
    assert res.tokens == 30 == sum(h.tokens for h in res.hits)
    # the hits stay in the requested order, not salience order
    res = cx.find(Query(types=F, limit=10, budget_tokens=35, descending=False))
    assert [h.uri for h in res.hits] == [tokened[2], tokened[3], tokened[4]]


def test_budget_keeps_at_least_one(cx: Cortex, tokened: list[Uri]) -> None:
    res = cx.find(Query(types=F, budget_tokens=1))
    assert [h.uri for h in res.hits] == [tokened[4]]
    assert set(res.dropped) == set(tokened[:4])
    assert res.tokens == 10


def test_budget_that_fits_drops_nothing(cx: Cortex, tokened: list[Uri]) -> None:
    res = cx.find(Query(types=F, budget_tokens=50))
    assert len(res) == 5 and res.dropped == () and res.tokens == 50


def test_budget_ties_drop_the_latest_in_order(cx: Cortex) -> None:
    uris = cx.write_many([NewMemory(data=fact(i), forms=forms(10)) for i in range(4)])
    in_order = order(cx.find(Query(types=F, limit=10)))
    res = cx.find(Query(types=F, limit=10, budget_tokens=25))
    assert order(res) == in_order[:2]
    assert {u.id for u in res.dropped} == set(in_order[2:])
    assert len({h.salience for h in cx.find(Query(types=F, limit=10)).hits}) == 1
    assert len(uris) == 4


def test_budget_applies_after_offset_and_limit(cx: Cortex, tokened: list[Uri]) -> None:
    res = cx.find(Query(types=F, limit=2, offset=1, budget_tokens=10))
    assert [h.uri for h in res.hits] == [tokened[3]]
    assert res.dropped == (tokened[2],)


def test_budget_counts_the_chosen_form(cx: Cortex) -> None:
    from cortex import Forms

    for i in range(3):
        cx.write(fact(i), forms=Forms(short="s" * 20, medium="m" * 80))
    short = cx.find(Query(types=F, budget_tokens=16, form="short"))
    assert len(short) == 3 and short.tokens == 15
    medium = cx.find(Query(types=F, budget_tokens=45, form="medium"))
    assert len(medium) == 2 and medium.tokens == 40 and len(medium.dropped) == 1
    for h in medium.hits:
        assert h.text == "m" * 80 and h.tokens == count_tokens(h.text) == 20
    full = cx.find(Query(types=F, limit=3, form="full"))
    for h in full.hits:
        assert h.tokens == count_tokens(h.text) and "statement" in h.text


# --- windows ----------------------------------------------------------------------------------


@pytest.fixture
def timed(cx: Cortex, clock: Clock) -> dict[str, MemoryId]:
    """Memories whose own time differs from their created time; created at T0 + i days."""
    n = {}
    items: list[tuple[str, Any]] = [
        ("ev_old", Event(kind="k", occurred_at=T0 - 30 * DAY)),
        ("ev_new", Event(kind="k", occurred_at=T0 + 9 * DAY)),
        ("ev_none", Event(kind="k")),
        ("fact_obs", fact(1, observed_at=T0 - 5 * DAY)),
        ("goal", Goal(statement="g", status="active", horizon=T0 + 40 * DAY)),
        ("cap", Capability(subject="s", capability="c", last_observed=T0 - 100 * DAY)),
        ("pref", Preference(topic="tea", polarity="prefer")),
    ]
    for i, (name, data) in enumerate(items):
        clock.at(T0 + i * DAY)
        n[name] = cx.write(data).id
    clock.at(T0 + 10 * DAY)
    return n


TYPES_T = ("Event", "Fact", "Goal", "Capability", "Preference")


def _in(cx: Cortex, w: Window, **kw: Any) -> set[MemoryId]:
    return ids(cx.find(Query(types=TYPES_T, window=w, limit=100, **kw)))


def test_window_on_own_time(cx: Cortex, timed: dict[str, MemoryId]) -> None:
    # own times: ev_old T0-30, ev_new T0+9, ev_none created T0+2, fact T0-5, goal T0+40,
    # cap T0-100, pref created T0+6
    n = timed
    got = _in(cx, Window.recent(7))  # [T0+3, T0+10]
    assert got == {n["ev_new"], n["pref"]}
    got = _in(cx, Window.between(T0 - 5 * DAY, T0 + 6 * DAY))
    assert got == {n["fact_obs"], n["ev_none"]}  # start inclusive, end exclusive
    assert _in(cx, Window.before(T0 - 29 * DAY)) == {n["ev_old"], n["cap"]}
    assert _in(cx, Window.after(T0 + 9 * DAY)) == {n["ev_new"], n["goal"]}
    assert _in(cx, Window.all()) == set(n.values())


def test_window_on_created_and_updated(
    cx: Cortex, clock: Clock, timed: dict[str, MemoryId]
) -> None:
    n = timed
    got = _in(cx, Window.between(T0 + DAY, T0 + 3 * DAY, on="created"))
    assert got == {n["ev_new"], n["ev_none"]}
    got = _in(cx, Window.recent(4, on="created"))  # [T0+6, T0+10]
    assert got == {n["pref"]}
    cx.update_head(n["ev_old"], importance=1)  # last update at T0+10
    assert _in(cx, Window.recent(1, on="updated")) == {n["ev_old"]}
    assert _in(cx, Window.before(T0 + DAY, on="updated")) == set()  # ev_old moved out
    assert _in(cx, Window.before(T0 + 2 * DAY, on="updated")) == {n["ev_new"]}


def test_recent_window_is_closed_at_now(cx: Cortex, clock: Clock) -> None:
    clock.at(T0 - 7 * DAY - timedelta(microseconds=1))
    too_old = cx.write(Event(kind="x")).id
    clock.at(T0 - 7 * DAY)
    edge = cx.write(Event(kind="x")).id
    clock.at(T0)
    now = cx.write(Event(kind="x")).id
    got = ids(cx.find(Query(types=E, window=Window.recent(7, on="created"), limit=10)))
    assert got == {edge, now}
    assert too_old not in got


# --- as_of ------------------------------------------------------------------------------------


@pytest.fixture
def history(cx: Cortex, clock: Clock) -> dict[str, Any]:
    n: dict[str, Any] = {}
    n["f"] = cx.write(Fact(statement="x", subject="s", predicate="p")).id  # T0
    clock.at(T0 + 10 * DAY)
    cx.update(n["f"], Fact(statement="y", subject="s", predicate="p"))
    clock.at(T0 + 15 * DAY)
    n["late"] = cx.write(fact("late")).id
    clock.at(T0 + 20 * DAY)
    cx.tombstone(n["f"], "retired")
    clock.at(T0 + 30 * DAY)
    return n


def _as_of(cx: Cortex, when: datetime, **kw: Any) -> dict[MemoryId, int]:
    res = cx.find(Query(types=F, as_of=when, limit=10, **kw))
    return {m.id: m.version.version for m in res.memories}


def test_as_of_across_updates_and_tombstones(cx: Cortex, history: dict[str, Any]) -> None:
    f, late = history["f"], history["late"]
    assert _as_of(cx, T0 - DAY) == {}
    assert _as_of(cx, T0) == {f: 1}
    assert _as_of(cx, T0 + 5 * DAY) == {f: 1}
    assert _as_of(cx, T0 + 12 * DAY) == {f: 2}
    assert _as_of(cx, T0 + 16 * DAY) == {f: 2, late: 1}
    assert _as_of(cx, T0 + 20 * DAY) == {late: 1}  # tombstoned at as_of
    assert _as_of(cx, T0 + 19 * DAY) == {f: 2, late: 1}  # tombstoned later: still live
    assert _as_of(cx, T0 + 25 * DAY) == {late: 1}
    assert _as_of(cx, T0 + 25 * DAY, include_tombstoned=True) == {f: 2, late: 1}
    assert ids(cx.find(Query(types=F, limit=10))) == {late}


def test_as_of_returns_the_old_version_and_filters_on_it(
    cx: Cortex, history: dict[str, Any]
) -> None:
    f = history["f"]
    res = cx.find(Query(types=F, as_of=T0 + DAY, limit=10))
    [m] = res.memories
    assert m.uri == Uri(MemoryType.FACT, f, 1) and m.data.statement == "x"
    x = Eq("data.statement", "x")
    assert ids(cx.find(Query(types=F, as_of=T0 + DAY, where=x, limit=10))) == {f}
    assert ids(cx.find(Query(types=F, as_of=T0 + 12 * DAY, where=x, limit=10))) == set()
    # the tag and index paths agree with the type path
    assert order(cx.find(Query(types=F, as_of=T0 + 16 * DAY, limit=10))) == [history["late"], f]


def test_as_of_respects_validity_windows(cx: Cortex, clock: Clock) -> None:
    mid = cx.write(fact("v1")).id  # T0, always valid
    clock.at(T0 + DAY)
    cx.update(mid, fact("v2"), valid_from=T0 + 5 * DAY)
    clock.at(T0 + 2 * DAY)
    cx.update(mid, fact("v3"), valid_until=T0 + 3 * DAY)
    clock.at(T0 + 10 * DAY)
    assert _as_of(cx, T0 + 1.5 * DAY) == {mid: 1}  # v2 not yet valid
    assert _as_of(cx, T0 + 2.5 * DAY) == {mid: 3}
    assert _as_of(cx, T0 + 4 * DAY) == {mid: 1}  # v3 ended, v2 not begun
    assert _as_of(cx, T0 + 6 * DAY) == {mid: 2}


def test_expiry(cx: Cortex, clock: Clock) -> None:
    e = cx.write(fact("e"), expires_at=T0 + DAY).id
    keep = cx.write(fact("k")).id
    assert ids(cx.find(Query(types=F, limit=10))) == {e, keep}
    clock.at(T0 + DAY)  # expires_at <= now: expired
    assert ids(cx.find(Query(types=F, limit=10))) == {keep}
    assert ids(cx.find(Query(types=F, limit=10, include_expired=True))) == {e, keep}
    assert ids(cx.find(Query(types=F, limit=10, as_of=T0 + DAY / 2))) == {e, keep}
    assert ids(cx.find(Query(types=F, limit=10, as_of=T0 + DAY))) == {keep}


def test_include_tombstoned(cx: Cortex) -> None:
    a = cx.write(fact("a")).id
    b = cx.write(fact("b")).id
    cx.tombstone(a, "x")
    assert ids(cx.find(Query(types=F, limit=10))) == {b}
    res = cx.find(Query(types=F, limit=10, include_tombstoned=True))
    assert ids(res) == {a, b}
    sal = {h.memory.id: h.salience for h in res.hits}
    assert sal[a] == 0.0 and sal[b] > 0
    cx.purge(b, "gdpr")
    res = cx.find(Query(types=F, limit=10, include_tombstoned=True))
    assert ids(res) == {a, b}


# --- edge walks -------------------------------------------------------------------------------


@pytest.fixture
def graph(cx: Cortex, clock: Clock) -> dict[str, MemoryId]:
    """A→B→C→A (references, a cycle), B→D (derived_from), D→E, X→A (references)."""
    n = {k: cx.write(fact(k), visibility="actor_public").id for k in "ABCDEX"}
    ref = EdgeType.REFERENCES
    for s, d in ("AB", "BC", "CA", "DE", "XA"):
        cx.add_edge(n[s], ref, n[d])
    cx.add_edge(n["B"], "derived_from", n["D"])
    return n


def _walk(cx: Cortex, start: Any, **kw: Any) -> dict[MemoryId, int]:
    q: dict[str, Any] = {"limit": 100}
    q.update({k: kw.pop(k) for k in list(kw) if k in ("reader", "include_tombstoned", "as_of")})
    if "qtypes" in kw:
        q["types"] = kw.pop("qtypes")
    res = cx.find(Query(from_=tuple(start), follow=Follow(**kw), **q))
    return {h.memory.id: h.hop for h in res.hits}


def test_walk_hops_and_cycles(cx: Cortex, graph: dict[str, MemoryId]) -> None:
    g = graph
    assert _walk(cx, [g["A"]]) == {g["B"]: 1}
    assert _walk(cx, [g["A"]], max_hops=2) == {g["B"]: 1, g["C"]: 2, g["D"]: 2}
    assert _walk(cx, [g["A"]], max_hops=6) == {g["B"]: 1, g["C"]: 2, g["D"]: 2, g["E"]: 3}
    assert _walk(cx, [g["A"]], min_hops=0, max_hops=6) == {
        g["A"]: 0,
        g["B"]: 1,
        g["C"]: 2,
        g["D"]: 2,
        g["E"]: 3,
    }
    assert _walk(cx, [g["A"]], min_hops=2, max_hops=3) == {g["C"]: 2, g["D"]: 2, g["E"]: 3}
    assert _walk(cx, [g["A"]], min_hops=0, max_hops=0) == {g["A"]: 0}


def test_walk_direction(cx: Cortex, graph: dict[str, MemoryId]) -> None:
    g = graph
    assert _walk(cx, [g["A"]], direction="in") == {g["C"]: 1, g["X"]: 1}
    assert _walk(cx, [g["A"]], direction="both") == {g["B"]: 1, g["C"]: 1, g["X"]: 1}
    assert _walk(cx, [g["E"]], direction="in", max_hops=6) == {
        g["D"]: 1,
        g["B"]: 2,
        g["A"]: 3,
        g["C"]: 4,
        g["X"]: 4,
    }


def test_walk_edge_types(cx: Cortex, graph: dict[str, MemoryId]) -> None:
    g = graph
    assert _walk(cx, [g["B"]], types=("derived_from",)) == {g["D"]: 1}
    assert _walk(cx, [g["B"]], types=(EdgeType.REFERENCES,), max_hops=6) == {g["C"]: 1, g["A"]: 2}
    assert _walk(cx, [g["B"]], types=("references", "derived_from"), max_hops=2) == {
        g["C"]: 1,
        g["D"]: 1,
        g["A"]: 2,
        g["E"]: 2,
    }
    assert _walk(cx, [g["B"]], types=("contradicts",), max_hops=6) == {}


def test_walk_skips_removed_edges(cx: Cortex, graph: dict[str, MemoryId]) -> None:
    g = graph
    cx.remove_edge(g["B"], "derived_from", g["D"])
    assert _walk(cx, [g["A"]], max_hops=6) == {g["B"]: 1, g["C"]: 2}
    cx.add_edge(g["B"], "derived_from", g["D"])  # revived
    assert _walk(cx, [g["A"]], max_hops=6)[g["E"]] == 3


def test_walk_does_not_pass_tombstoned_or_hidden_memories(
    cx: Cortex, graph: dict[str, MemoryId]
) -> None:
    g = graph
    cx.tombstone(g["D"], "x")
    assert _walk(cx, [g["A"]], max_hops=6) == {g["B"]: 1, g["C"]: 2}
    assert _walk(cx, [g["A"]], max_hops=6, include_tombstoned=True) == {
        g["B"]: 1,
        g["C"]: 2,
        g["D"]: 2,
        g["E"]: 3,
    }
    eve = Reader(actor="eve")
    assert _walk(cx, [g["A"]], max_hops=6, reader=eve) == {g["B"]: 1, g["C"]: 2}
    cx.update_head(g["B"], visibility="private")
    assert _walk(cx, [g["A"]], max_hops=6, reader=eve) == {}
    assert _walk(cx, [g["A"]], max_hops=6, direction="in", reader=eve) == {g["C"]: 1, g["X"]: 1}


def test_walk_passes_through_memories_the_filters_reject(
    cx: Cortex, graph: dict[str, MemoryId]
) -> None:
    g = graph
    ev = cx.write(Event(kind="end")).id
    cx.add_edge(g["E"], "caused_by", ev)
    assert _walk(cx, [g["A"]], max_hops=6, qtypes=E) == {ev: 4}
    res = cx.find(Query(types=E, from_=(g["A"],), follow=Follow(max_hops=6), limit=10))
    assert [(h.memory.id, h.hop) for h in res.hits] == [(ev, 4)]


def test_walk_order_is_hop_then_id_and_limit(cx: Cortex, graph: dict[str, MemoryId]) -> None:
    g = graph
    res = cx.find(Query(from_=(g["A"],), follow=Follow(max_hops=6), limit=100))
    hops = [(h.hop, h.memory.id.bytes) for h in res.hits]
    assert hops == sorted(hops)
    two = cx.find(Query(from_=(g["A"],), follow=Follow(max_hops=6), limit=2))
    assert order(two) == order(res)[:2]
    desc = cx.find(Query(from_=(g["A"],), follow=Follow(max_hops=6), limit=100, descending=True))
    assert [h.hop for h in desc.hits] == sorted((h.hop for h in res.hits), reverse=True)
    by_created = cx.find(
        Query(from_=(g["A"],), follow=Follow(max_hops=6), limit=100, order_by="created")
    )
    assert ids(by_created) == ids(res)


def test_walk_from_several_starts_and_uri_forms(cx: Cortex, graph: dict[str, MemoryId]) -> None:
    g = graph
    got = _walk(cx, [g["A"], str(g["D"])], max_hops=1)
    assert got == {g["B"]: 1, g["E"]: 1}
    uri = str(Uri(MemoryType.FACT, g["D"], 1))
    assert _walk(cx, [uri]) == {g["E"]: 1}
    assert _walk(cx, [g["A"], g["B"]], min_hops=0) == {
        g["A"]: 0,
        g["B"]: 0,
        g["C"]: 1,
        g["D"]: 1,
    }


def test_walk_from_missing_or_hidden_start(cx: Cortex, graph: dict[str, MemoryId]) -> None:
    g = graph
    cx.update_head(g["A"], visibility="private")
    missing = new_id()
    with pytest.raises(NotFoundError) as a:
        cx.find(Query(from_=(missing,), limit=5))
    with pytest.raises(NotFoundError) as b:
        cx.find(Query(from_=(g["A"],), limit=5, reader=Reader(actor="eve")))
    assert str(a.value).replace(str(missing), "?") == str(b.value).replace(str(g["A"]), "?")


def test_walk_as_of_passes_memories_tombstoned_later(
    cx: Cortex, clock: Clock, graph: dict[str, MemoryId]
) -> None:
    g = graph
    clock.at(T0 + DAY)
    cx.tombstone(g["D"], "later")
    got = _walk(cx, [g["A"]], max_hops=6, as_of=T0 + DAY / 2)
    assert got == {g["B"]: 1, g["C"]: 2, g["D"]: 2, g["E"]: 3}


# --- the model: find agrees with a brute force over history / resolve_latest ---------------

_TYPES = [MemoryType.FACT, MemoryType.EVENT, MemoryType.GOAL]
_TAGS = ["a", "b", "c"]
_FRAMES = [
    ("find", "service", "svc://a"),
    ("find", "service", "svc://b"),
    ("monitor", "service", "svc://a"),
]
# patterns with a reference stream off the frame index (and join tags and types); the others
# read every candidate
_PATTERNS = [
    "find:service:svc://a",
    "find:service:svc://b",
    "monitor:service:svc://a",
    "find",
    "find:service",
]


def _data(t: MemoryType, i: int) -> Any:
    if t is MemoryType.FACT:
        return fact(i)
    if t is MemoryType.EVENT:
        return Event(kind=f"k{i}")
    return Goal(statement=f"g{i}", status="active")


item_st = st.tuples(
    st.sampled_from(_TYPES),
    st.lists(st.sampled_from(_TAGS), unique=True, max_size=3),
    st.integers(0, 10),
    st.sampled_from([0, 0, 1, 7]),  # seconds to advance after: 0 gives created-time ties
    st.sampled_from(["none", "none", "tomb", "update", "head", "frames"]),
    st.lists(st.sampled_from(_FRAMES), unique=True, max_size=2),
)

query_st = st.fixed_dictionaries(
    {
        "types": st.lists(st.sampled_from(_TYPES), unique=True, max_size=3),
        "tags": st.lists(st.sampled_from(_TAGS), unique=True, max_size=2),
        "frames": st.lists(st.sampled_from(_PATTERNS), unique=True, max_size=2),
        "limit": st.integers(1, 8),
        "offset": st.integers(0, 3),
        "order_by": st.sampled_from(["created", "importance", "updated", None]),
        "descending": st.sampled_from([None, True, False]),
        "include_tombstoned": st.booleans(),
    },
    optional={
        "as_of": st.integers(0, 120),  # seconds after T0
        "window": st.tuples(st.integers(0, 100), st.integers(1, 60)),  # created-time range
    },
)


def _parts(patterns: list[str]) -> list[tuple[str, ...]]:
    return [tuple(p.split(":", 2)) for p in patterns]


def _model(cx: Cortex, mids: list[MemoryId], q: dict[str, Any]) -> list[Any]:
    """The query answered from history() and resolve_latest() of every memory."""
    as_of = T0 + timedelta(seconds=q["as_of"]) if "as_of" in q else None
    rows = []
    for mid in mids:
        hist = cx.history(mid)
        latest = cx.resolve_latest(mid)
        assert latest.uri == hist[-1].uri
        h = latest.head
        if q["types"] and h.type not in q["types"]:
            continue
        if not all(t in h.tags for t in q["tags"]):
            continue
        frames = [(f.verb.label, f.obj_kind.label, f.obj_ref) for f in h.frames]
        if not all(any(f[: len(p)] == p for f in frames) for p in _parts(q["frames"])):
            continue
        if "window" in q:
            lo = T0 + timedelta(seconds=q["window"][0])
            if not lo <= h.created_at < lo + timedelta(seconds=q["window"][1]):
                continue
        dead_at = h.tombstone.at if h.tombstone is not None else None
        if as_of is None:
            if dead_at is not None and not q["include_tombstoned"]:
                continue
            rows.append(latest)
            continue
        if h.created_at > as_of:
            continue
        if dead_at is not None and dead_at <= as_of and not q["include_tombstoned"]:
            continue
        seen = [m for m in hist if m.version.created_at <= as_of]
        rows.append(seen[-1])
    key = q["order_by"] or "created"
    desc = True if q["descending"] is None else q["descending"]

    def k(m: Any) -> float:
        h = m.head
        if key == "created":
            return h.created_at.timestamp()
        if key == "updated":
            return h.last_updated_at.timestamp()
        return float(h.importance)

    rows.sort(key=lambda m: ((-k(m) if desc else k(m)), m.id.bytes))
    return rows[q["offset"] : q["offset"] + q["limit"]]


@settings(max_examples=60)
@given(items=st.lists(item_st, max_size=14), queries=st.lists(query_st, min_size=1, max_size=4))
def test_find_agrees_with_a_brute_force_model(
    items: list[tuple[Any, ...]], queries: list[dict[str, Any]]
) -> None:
    clock = Clock()
    with (
        tempfile.TemporaryDirectory() as d,
        Cortex.open(Path(d) / "s", actor="m", clock=clock, metasync=False) as cx,
    ):
        mids: list[MemoryId] = []
        for i, (t, tags, imp, step, change, frames) in enumerate(items):
            made = [frame(ref, verb, kind) for verb, kind, ref in frames]
            mid = cx.write(_data(t, i), tags=tags, importance=imp, frames=made).id
            mids.append(mid)
            if change == "tomb":
                clock.tick(2)
                cx.tombstone(mid, "x")
            elif change == "update":
                clock.tick(2)
                cx.update(mid, _data(t, i + 100))
            elif change == "head":
                clock.tick(3)
                cx.update_head(mid, importance=10 - imp)
            elif change == "frames":
                clock.tick(3)
                cx.update_head(
                    mid, frames=[frame(ref, verb, kind) for verb, kind, ref in _FRAMES[:2]]
                )
            clock.tick(step)
        clock.tick(1)
        for q in queries:
            if not q["types"] and not q["tags"] and not q["frames"]:
                q["types"] = [MemoryType.FACT]
            kw = {k: tuple(v) if isinstance(v, list) else v for k, v in q.items()}
            if "as_of" in q:
                kw["as_of"] = T0 + timedelta(seconds=q["as_of"])
            if "window" in q:
                lo = T0 + timedelta(seconds=q["window"][0])
                kw["window"] = Window.between(
                    lo, lo + timedelta(seconds=q["window"][1]), on="created"
                )
            res = cx.find(Query(**kw))
            want = _model(cx, mids, q)
            assert [m.uri for m in res.memories] == [m.uri for m in want], q
            assert [m.data for m in res.memories] == [m.data for m in want]


# --- fields shared by several types -----------------------------------------------------------


@pytest.fixture
def strengths(cx: Cortex) -> dict[str, MemoryId]:
    hard = Constraint(statement="x", polarity="dont", strength="hard", source="learned")
    return {
        "hard": cx.write(hard, tags=["t"]).id,
        "pref": cx.write(Preference(topic="x", polarity="prefer", strength=0.8), tags=["t"]).id,
        "pat": cx.write(Pattern(statement="p", strength=0.2), tags=["t"]).id,
    }


def test_a_shared_field_compares_within_its_type(
    cx: Cortex, strengths: dict[str, MemoryId]
) -> None:
    n = strengths
    got = ids(cx.find(Query(types=("Constraint",), where=Eq("data.strength", "hard"), limit=5)))
    assert got == {n["hard"]}
    both = ("Preference", "Pattern")
    got = ids(cx.find(Query(types=both, where=Gt("data.strength", 0.5), limit=5)))
    assert got == {n["pref"]}


@pytest.mark.parametrize(
    ("q", "want"),
    [
        ({"tags": ("t",), "where": Eq("data.strength", "hard")}, {"hard"}),
        ({"types": ("Constraint", "Preference"), "where": Eq("data.strength", "hard")}, {"hard"}),
        ({"tags": ("t",), "where": Gt("data.strength", 0.5)}, {"pref"}),
    ],
    ids=["enum label, tag start", "enum label, two types", "number, tag start"],
)
def test_a_shared_field_of_different_kinds_across_types(
    cx: Cortex, strengths: dict[str, MemoryId], q: dict[str, Any], want: set[str]
) -> None:
    assert ids(cx.find(Query(limit=5, **q))) == {strengths[k] for k in want}


def test_tags_and_frames_together(cx: Cortex) -> None:
    a = cx.write(fact("a"), tags=["t"], frames=[frame("svc://a")]).id
    cx.write(fact("b"), tags=["t"], frames=[frame("svc://b")])
    cx.write(fact("c"), frames=[frame("svc://a")])
    got = ids(cx.find(Query(tags=("t",), frames=("find:service:svc://a",), limit=5)))
    assert got == {a}


# --- index keys hold truncated hashes: filters compare the head itself -------------------------


def _plant(cx: Cortex, *keys: bytes) -> None:
    """Add index entries that a hash collision would produce."""

    def txn_fn(txn: Any) -> None:
        for k in keys:
            txn.put(k, b"")

    cx._kv.write(txn_fn)


def test_tag_and_frame_filters_compare_the_head(cx: Cortex) -> None:
    from cortex.model.codec import to_micros
    from cortex.storage import keys as K

    real = cx.write(fact("real"), tags=["t"], frames=[frame("svc://a")]).id
    impostor = cx.resolve_latest(cx.write(fact("impostor"), tags=["u"], frames=[frame("svc://b")]))
    h = impostor.head
    created = to_micros(h.created_at)
    _plant(
        cx,
        K.tag_key("t", h.type, created, h.id),
        K.frame_key(Verb.FIND, ObjKind.SERVICE, "svc://a", created, h.id),
    )
    assert ids(cx.find(Query(tags=("t",), limit=10))) == {real}
    assert ids(cx.find(Query(frames=("find:service:svc://a",), limit=10))) == {real}
    assert ids(cx.find(Query(frames=("find:service",), tags=("t",), limit=10))) == {real}


def test_walk_as_of_from_a_start_created_later(cx: Cortex, clock: Clock) -> None:
    a = cx.write(fact("a")).id
    clock.advance(DAY)
    late = cx.write(fact("late")).id
    cx.add_edge(late, "references", a)
    with pytest.raises(NotFoundError):
        cx.find(Query(from_=(late,), as_of=T0 + DAY / 2, limit=5))


def test_walk_as_of_leaves_out_memories_created_later(cx: Cortex, clock: Clock) -> None:
    a = cx.write(fact("a")).id
    b = cx.write(fact("b")).id
    cx.add_edge(a, "references", b)
    clock.advance(DAY)
    late = cx.write(fact("late")).id
    cx.add_edge(a, "references", late)
    got = _walk(cx, [a], as_of=T0 + DAY / 2)
    assert got == {b: 1}
    assert _walk(cx, [a]) == {b: 1, late: 1}


# --- frame patterns with a reference stream off the frame index (format 3) ------------------


@pytest.fixture
def on_a(cx: Cortex, clock: Clock) -> list[tuple[float, MemoryId]]:
    """Twelve memories framed find:service:svc://a; ids chosen against the created order.

    Ids descend as time goes on, and every third memory shares its time with the one before,
    so neither the ids nor the write order give the created order and ties are exercised.
    """
    made: list[tuple[float, MemoryId]] = []
    for i in range(12):
        mid = MemoryId(bytes(15) + bytes((200 - i,)))
        data = fact(i) if i % 2 else Event(kind=f"e{i}")
        cx.write(data, id=mid, frames=[frame("svc://a")], tags=["t"] if i % 3 else [])
        made.append((clock.now.timestamp(), mid))
        if i % 3 != 1:
            clock.tick(5)
    cx.write(fact("elsewhere"), frames=[frame("svc://b")], tags=["t"])
    return made


@pytest.mark.parametrize("descending", [True, False])
def test_a_frame_with_a_reference_streams_in_created_order(
    cx: Cortex, on_a: list[tuple[float, MemoryId]], descending: bool
) -> None:
    want = _sorted_ids(on_a, descending)
    for limit in (1, 2, 5, 12, 20):
        for offset in (0, 1, 4):
            q = Query(
                frames=("find:service:svc://a",), limit=limit, offset=offset, descending=descending
            )
            assert order(cx.find(q)) == want[offset : offset + limit], (limit, offset)
    # every other order reads all candidates and sorts; created order agrees with it
    res = cx.find(Query(frames=("find:service:svc://a",), limit=20, order_by="importance"))
    assert len(res) == 12


def test_a_frame_stream_stops_after_the_limit(
    cx: Cortex, on_a: list[tuple[float, MemoryId]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cortex.query.planner import Executor

    seen: list[MemoryId] = []
    original = Executor.accept

    def counting(self: Executor, mid: MemoryId, head: Any = None, **kw: Any) -> Any:
        seen.append(mid)
        return original(self, mid, head, **kw)

    monkeypatch.setattr(Executor, "accept", counting)
    res = cx.find(Query(frames=("find:service:svc://a",), limit=3))
    assert order(res) == _sorted_ids(on_a, True)[:3]
    assert seen == order(res)  # three reads, not twelve
    seen.clear()
    cx.find(Query(frames=("find",), limit=3))  # no reference: every candidate is read
    assert len(seen) == 13


def test_a_frame_joins_tags_and_types(cx: Cortex, on_a: list[tuple[float, MemoryId]]) -> None:
    tagged = {m for m in ids(cx.find(Query(tags=("t",), limit=100)))}
    facts = {m for m in ids(cx.find(Query(types=("Fact",), limit=100)))}
    want = _sorted_ids(on_a, True)
    pattern = ("find:service:svc://a",)
    got = order(cx.find(Query(frames=pattern, tags=("t",), limit=100)))
    assert got == [m for m in want if m in tagged]
    got = order(cx.find(Query(frames=pattern, types=("Fact",), limit=3)))
    assert got == [m for m in want if m in facts][:3]
    got = order(cx.find(Query(frames=pattern, types=("Fact",), tags=("t",), limit=100)))
    assert got == [m for m in want if m in facts and m in tagged]
    old_first = _sorted_ids(on_a, False)
    got = order(cx.find(Query(frames=pattern, tags=("t",), limit=3, descending=False)))
    assert got == [m for m in old_first if m in tagged][:3]
    # two full patterns intersect; a partial one beside a full one is a filter
    assert order(cx.find(Query(frames=(*pattern, "find:service:svc://b"), limit=100))) == []
    got = order(cx.find(Query(frames=(*pattern, "find:service"), limit=4)))
    assert got == want[:4]


def test_frame_streams_compare_the_heads_frames(cx: Cortex, clock: Clock) -> None:
    from cortex.model.codec import to_micros
    from cortex.storage import keys as K

    real = cx.write(fact("real"), frames=[frame("svc://a")]).id
    clock.tick()
    impostor = cx.resolve_latest(cx.write(fact("impostor"), frames=[frame("svc://b")])).head
    created = to_micros(impostor.created_at)
    _plant(cx, K.frame_key(Verb.FIND, ObjKind.SERVICE, "svc://a", created, impostor.id))
    assert order(cx.find(Query(frames=("find:service:svc://a",), limit=1))) == [real]


def test_frame_streams_honour_as_of_and_created_windows(cx: Cortex, clock: Clock) -> None:
    made = []
    for i in range(6):
        made.append(cx.write(fact(i), frames=[frame("svc://a")]).id)
        clock.advance(DAY)
    pattern = ("find:service:svc://a",)
    got = order(cx.find(Query(frames=pattern, as_of=T0 + 2 * DAY, limit=10)))
    assert got == [made[2], made[1], made[0]]
    window = Window.between(T0 + DAY, T0 + 4 * DAY, on="created")
    got = order(cx.find(Query(frames=pattern, window=window, limit=2)))
    assert got == [made[3], made[2]]
    got = order(cx.find(Query(frames=pattern, window=window, limit=10, descending=False)))
    assert got == [made[1], made[2], made[3]]
