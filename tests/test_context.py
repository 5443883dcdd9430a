"""context tiers, dedup, objects and budget (§4); facets and about (§5)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cortex import (
    Belief,
    Bundle,
    Capability,
    Constraint,
    Cortex,
    Event,
    Fact,
    FrameMatch,
    FrameRef,
    Goal,
    Identity,
    MemoryId,
    ObjKind,
    Preference,
    Query,
    Reader,
    Verb,
    Weights,
    Window,
)

from .qsupport import DAY, T0, Clock, fact, forms, frame, rejects, trace


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cx(store_path: Any, clock: Clock) -> Iterator[Cortex]:
    # on both engines (conftest's ``store_path``): the context's tiers read their candidates
    # in preloaded chunks where a read costs a round trip
    with Cortex.open(store_path, actor="agent", clock=clock, metasync=False) as store:
        yield store


def hard(statement: str = "never") -> Constraint:
    return Constraint(statement=statement, polarity="dont", strength="hard", source="user_declared")


A = frame("svc://a")  # find:service:svc://a


@pytest.fixture
def scene(cx: Cortex, clock: Clock) -> dict[str, MemoryId]:
    n: dict[str, MemoryId] = {}

    def w(name: str, data: Any, **kw: Any) -> None:
        n[name] = cx.write(data, **kw).id
        clock.tick(60)

    w("ident", Identity(name="me"))
    w("hard", hard())
    w(
        "soft",
        Constraint(statement="s", polarity="do", strength="soft", source="learned"),
        frames=[A],
    )
    w("goal", Goal(statement="g", status="active"), frames=[A])
    w("paused", Goal(statement="p", status="paused"))
    w("ev_model", Event(kind="m"), frames=[frame("svc://a", kind="model")])
    for i in range(1, 6):
        w(f"ev{i}", Event(kind=f"e{i}"), frames=[A])
    w("fact", fact("a"), frames=[A])
    w("other_verb", fact("v"), frames=[frame("svc://a", "acquire")])
    w("other_obj", fact("b"), frames=[frame("svc://b")])
    w("ev_b", Event(kind="b"), frames=[frame("svc://b")])
    w("gone", Identity(name="old me"))
    cx.tombstone(n["gone"], "x")
    w("gone_ev", Event(kind="gone"), frames=[A])
    cx.tombstone(n["gone_ev"], "x")
    return n


def tier(b: Bundle, name: str) -> list[MemoryId]:
    return [h.memory.id for h in b.tier(name)]


def test_tiers_in_order_with_dedup(cx: Cortex, scene: dict[str, MemoryId]) -> None:
    n = scene
    b = cx.context("find", ["service:svc://a"])
    assert set(tier(b, "pinned")) == {n["ident"], n["hard"], n["goal"]}
    assert tier(b, "outcomes") == [n["ev5"], n["ev4"], n["ev3"]]  # latest first
    assert set(tier(b, "frame")) == {n["soft"], n["fact"], n["ev1"], n["ev2"]}
    assert tier(b, "recall") == []
    # tier order, each memory once
    names = [h.tier for h in b.hits]
    assert names == sorted(names, key=["pinned", "outcomes", "frame"].index)
    mids = [m.id for m in b.memories]
    assert len(mids) == len(set(mids))
    assert b.verb is Verb.FIND and b.dropped == ()
    assert b.tokens == sum(h.tokens for h in b.hits) and b.budget == 3000


def test_frame_tier_is_ordered_by_salience(cx: Cortex, scene: dict[str, MemoryId]) -> None:
    b = cx.context("find", ["service:svc://a"])
    for name in ("pinned", "frame"):
        hits = b.tier(name)
        keys = [(-h.salience, h.memory.id.bytes) for h in hits]
        assert keys == sorted(keys)


def test_outcomes_per_object(cx: Cortex, scene: dict[str, MemoryId]) -> None:
    n = scene
    b = cx.context("find", ["service:svc://a"], outcomes_per_object=1)
    assert tier(b, "outcomes") == [n["ev5"]]
    assert {n["ev4"], n["ev3"], n["ev2"], n["ev1"]} <= set(tier(b, "frame"))
    b = cx.context("find", ["service:svc://a"], outcomes_per_object=0)
    assert tier(b, "outcomes") == []
    b = cx.context("find", ["service:svc://a"], outcomes_per_object=10)
    assert tier(b, "outcomes") == [n[f"ev{i}"] for i in range(5, 0, -1)]
    rejects("outcomes_per_object", cx.context, "find", ["svc://a"], outcomes_per_object=-1)


def test_any_kind_object(cx: Cortex, scene: dict[str, MemoryId]) -> None:
    n = scene
    b = cx.context("find", ["svc://a"], outcomes_per_object=10)
    # a bare reference matches every object kind
    assert tier(b, "outcomes") == [n[f"ev{i}"] for i in range(5, 0, -1)] + [n["ev_model"]]
    b = cx.context("find", ["service:svc://a"], outcomes_per_object=10)
    assert n["ev_model"] not in {m.id for m in b.memories}
    b = cx.context("find", ["model:svc://a"], outcomes_per_object=10)
    assert tier(b, "outcomes") == [n["ev_model"]]
    assert tier(b, "frame") == []


OBJECT_FORMS: list[Any] = [
    "service:svc://a",
    ["service:svc://a"],
    [("service", "svc://a")],
    [(ObjKind.SERVICE, "svc://a")],
    [FrameRef(verb=Verb.DELEGATE, obj_kind=ObjKind.SERVICE, obj_ref="svc://a")],
    [FrameMatch(verb="monitor", obj_kind="service", obj_ref="svc://a")],
    ("service:svc://a",),
]


@pytest.mark.parametrize("objects", OBJECT_FORMS)
def test_object_syntaxes_agree(cx: Cortex, scene: dict[str, MemoryId], objects: Any) -> None:
    want = cx.context("find", ["service:svc://a"])
    got = cx.context(Verb.FIND, objects)
    assert [(h.tier, h.memory.uri) for h in got.hits] == [(h.tier, h.memory.uri) for h in want.hits]


def test_several_objects(cx: Cortex, scene: dict[str, MemoryId]) -> None:
    n = scene
    b = cx.context("find", ["service:svc://a", "svc://b"])
    assert tier(b, "outcomes") == [n["ev5"], n["ev4"], n["ev3"], n["ev_b"]]
    assert {n["other_obj"], n["fact"]} <= set(tier(b, "frame"))
    assert n["other_verb"] not in {m.id for m in b.memories}


def test_verb_selects_the_frames(cx: Cortex, scene: dict[str, MemoryId]) -> None:
    n = scene
    b = cx.context("acquire", ["svc://a"])
    assert tier(b, "frame") == [n["other_verb"]]
    assert tier(b, "outcomes") == []
    assert set(tier(b, "pinned")) == {n["ident"], n["hard"], n["goal"]}


def test_no_objects_gives_the_pinned_tier(cx: Cortex, scene: dict[str, MemoryId]) -> None:
    n = scene
    b = cx.context("find")
    assert {m.id for m in b.memories} == {n["ident"], n["hard"], n["goal"]}


def test_tombstoned_and_expired_are_left_out(
    cx: Cortex, clock: Clock, scene: dict[str, MemoryId]
) -> None:
    n = scene
    b = cx.context("find", ["svc://a"], outcomes_per_object=100)
    got = {m.id for m in b.memories}
    assert n["gone"] not in got and n["gone_ev"] not in got
    e = cx.write(hard("soon"), expires_at=clock.now + DAY).id
    assert e in {m.id for m in cx.context("find", ["svc://a"]).memories}
    clock.advance(2 * DAY)
    assert e not in {m.id for m in cx.context("find", ["svc://a"]).memories}


def test_pinned_salience_floor(cx: Cortex, clock: Clock) -> None:
    i = cx.write(Identity(name="me"), importance=0).id
    g = cx.write(Goal(statement="g", status="active"), importance=10).id
    clock.advance(3650 * DAY)
    b = cx.context("find", ["x"])
    sal = {h.memory.id: h.salience for h in b.hits}
    assert sal[i] == pytest.approx(0.7)  # 0.25 / 0.9 < 0.7
    assert sal[g] == pytest.approx(0.7)  # recency long gone: 0.2 / 0.9 + tiny < 0.7
    assert all(h.salience >= 0.7 for h in b.tier("pinned"))


def test_pinned_salience_above_the_floor_counts(tmp_path: Path, clock: Clock) -> None:
    w = Weights(recency=1, access=0, citation=0, importance=1)
    with Cortex.open(tmp_path / "w", actor="a", clock=clock, metasync=False, weights=w) as cx:
        g = cx.write(Goal(statement="g", status="active"), importance=9).id
        i = cx.write(Identity(name="me"), importance=0).id
        b = cx.context("find", ["x"])
        sal = {h.memory.id: h.salience for h in b.hits}
        assert sal[g] == pytest.approx(0.95)
        assert sal[i] == pytest.approx(0.7)
        assert [h.memory.id for h in b.hits] == [g, i]


def test_budget_across_tiers(cx: Cortex, clock: Clock) -> None:
    ident = cx.write(Identity(name="me"), importance=0, forms=forms(10)).id  # pinned: 0.7
    facts = [
        cx.write(fact(i), importance=imp, frames=[A], forms=forms(10)).id
        for i, imp in enumerate((2, 9, 6))
    ]
    ev = cx.write(Event(kind="e"), importance=5, frames=[A], forms=forms(10)).id
    # saliences now: facts (0.25 + 0.02 * imp) / 0.9 -> 0.32, 0.48, 0.41; event 0.39
    b = cx.context("find", ["svc://a"], budget_tokens=25)
    assert [m.id for m in b.memories] == [ident, facts[1]]
    assert {u.id for u in b.dropped} == {facts[0], facts[2], ev}
    assert b.tokens == 20 and b.budget == 25
    b = cx.context("find", ["svc://a"], budget_tokens=35)
    assert [m.id for m in b.memories] == [ident, facts[1], facts[2]]
    b = cx.context("find", ["svc://a"], budget_tokens=1)  # at least one is kept
    assert [m.id for m in b.memories] == [ident]
    assert len(b.dropped) == 4
    b = cx.context("find", ["svc://a"], budget_tokens=4000)
    assert len(b.hits) == 5 and b.dropped == ()


@pytest.mark.parametrize("budget", [0, -5, 4001, 2.5, True, "100"])
def test_budget_bounds(cx: Cortex, budget: Any) -> None:
    before = trace(cx)
    rejects("budget_tokens", cx.context, "find", ["svc://a"], budget_tokens=budget)
    assert trace(cx) == before


def test_bad_verb_and_objects(cx: Cortex) -> None:
    rejects("verb", cx.context, "fly", ["svc://a"])
    rejects("objects", cx.context, "find", [42])
    rejects("objects", cx.context, "find", [""])


def test_context_is_a_pure_read(cx: Cortex, scene: dict[str, MemoryId]) -> None:
    before = trace(cx)
    for form in ("short", "medium", "full"):
        cx.context("find", ["svc://a", "svc://b"], budget_tokens=50, form=form)
    assert trace(cx) == before


def test_context_forms(cx: Cortex, scene: dict[str, MemoryId]) -> None:
    for form in ("short", "medium", "full"):
        b = cx.context("find", ["svc://a"], form=form)
        for h in b.hits:
            assert h.text and h.tokens == -(-len(h.text.encode()) // 4)


def test_render_has_a_section_per_tier(cx: Cortex, scene: dict[str, MemoryId]) -> None:
    b = cx.context("find", ["svc://a"], budget_tokens=60)
    text = b.render()
    assert text.index("## pinned") < text.index("## outcomes") < text.index("## frame")
    for u in b.dropped:
        assert str(u) in text
    for h in b.hits:
        assert str(h.memory.uri) in text


# --- facets -----------------------------------------------------------------------------------


@pytest.fixture
def facet_store(cx: Cortex, clock: Clock) -> dict[str, MemoryId]:
    n = {}
    n["f1"] = cx.write(fact(1, subject="ada"), tags=["x", "y"]).id
    n["f2"] = cx.write(fact(2, subject="ada"), tags=["x"]).id
    n["f3"] = cx.write(fact(3, subject="bob", observed_at=T0 - 30 * DAY), tags=["y"]).id
    n["b1"] = cx.write(Belief(statement="b", stance="doubt", subject="bob")).id
    n["b2"] = cx.write(Belief(statement="b", stance="doubt")).id  # no subject
    n["e1"] = cx.write(Event(kind="k", counterparty="cyd"), tags=["x"]).id
    n["e2"] = cx.write(Event(kind="k", counterparty="cyd", occurred_at=T0 - 10 * DAY)).id
    n["e3"] = cx.write(Event(kind="k", counterparty="ada")).id
    n["dead"] = cx.write(fact(9, subject="ada"), tags=["x"]).id
    cx.tombstone(n["dead"], "x")
    clock.advance(DAY)
    return n


def test_facets_by_type(cx: Cortex, facet_store: dict[str, MemoryId]) -> None:
    got = cx.facets(by="type")
    assert list(got.items()) == [("Event", 3), ("Fact", 3), ("Belief", 2)]
    assert cx.facets() == got


def test_facets_by_tag_subject_counterparty(cx: Cortex, facet_store: dict[str, MemoryId]) -> None:
    assert list(cx.facets(by="tag").items()) == [("x", 3), ("y", 2)]
    assert list(cx.facets(by="subject").items()) == [("ada", 2), ("bob", 2)]
    assert list(cx.facets(by="counterparty").items()) == [("cyd", 2), ("ada", 1)]


def test_facets_in_a_window(cx: Cortex, facet_store: dict[str, MemoryId]) -> None:
    # own time: f3 observed T0-30d, e2 occurred T0-10d; the rest at T0
    assert cx.facets(Window.recent(7)) == {"Fact": 2, "Belief": 2, "Event": 2}
    assert cx.facets(Window.before(T0)) == {"Fact": 1, "Event": 1}
    assert cx.facets(Window.recent(7, on="created")) == {"Event": 3, "Fact": 3, "Belief": 2}
    assert cx.facets(Window.between(T0 - 20 * DAY, T0), by="counterparty") == {"cyd": 1}


def test_facets_types_and_validation(cx: Cortex, facet_store: dict[str, MemoryId]) -> None:
    assert cx.facets(by="tag", types=["Fact"]) == {"x": 2, "y": 2}
    before = trace(cx)
    rejects("by", cx.facets, by="colour")
    cx.facets(by="tag")
    assert trace(cx) == before


# --- about ------------------------------------------------------------------------------------


def test_about(cx: Cortex, clock: Clock) -> None:
    n = {}

    def w(name: str, data: Any) -> None:
        n[name] = cx.write(data).id
        clock.tick()

    w("ident", Identity(name="ada"))
    w("likes", Fact(statement="tea", subject="ada", predicate="likes"))
    w("age", Fact(statement="36", subject="ada", predicate="age"))
    w("belief", Belief(statement="b", stance="believe", subject="ada"))
    w("cap", Capability(subject="ada", capability="search"))
    w("event", Event(kind="k", counterparty="ada"))
    w("bob", Fact(statement="x", subject="bob", predicate="age"))
    w("pref", Preference(topic="ada", polarity="prefer"))
    w("other_ident", Identity(name="bob"))
    w("dead", Fact(statement="old", subject="ada", predicate="age"))
    cx.tombstone(n["dead"], "x")
    res = cx.about("ada")
    want = ["event", "cap", "belief", "age", "likes", "ident"]  # newest first
    assert [m.id for m in res.memories] == [n[k] for k in want]
    assert [m.id for m in cx.about("ada", "age").memories] == [n["age"]]
    assert [m.id for m in cx.about("ada", "search").memories] == [n["cap"]]
    assert cx.about("ada", "height").memories == []
    assert [m.id for m in cx.about("bob").memories] == [n["other_ident"], n["bob"]]
    rejects("subject", cx.about, "")


def test_about_as_of(cx: Cortex, clock: Clock) -> None:
    mid = cx.write(Fact(statement="36", subject="ada", predicate="age")).id
    clock.advance(DAY)
    cx.update(mid, Fact(statement="37", subject="ada", predicate="age"))
    [m] = cx.about("ada", "age", as_of=T0 + DAY / 2).memories
    assert isinstance(m.data, Fact) and m.data.statement == "36"
    [m] = cx.about("ada", "age").memories
    assert isinstance(m.data, Fact) and m.data.statement == "37"


def test_hidden_memories_leave_every_tier(cx: Cortex, clock: Clock) -> None:
    from cortex import Reader

    pub = {"visibility": "actor_public"}
    ident = cx.write(Identity(name="me"), **pub).id
    cx.write(Identity(name="secret me"))  # private
    cx.write(hard("private rule"))
    old = []
    for i in range(3):
        old.append(cx.write(Event(kind=f"old{i}"), frames=[A], **pub).id)
        clock.tick()
    for i in range(3):  # the latest events are private
        cx.write(Event(kind=f"new{i}"), frames=[A])
        clock.tick()
    eve = Reader(actor="eve")
    b = cx.context("find", ["svc://a"], reader=eve)
    assert tier(b, "pinned") == [ident]
    # hidden events do not use up the per-object quota
    assert tier(b, "outcomes") == old[::-1]
    assert tier(b, "frame") == []
    owner = cx.context("find", ["svc://a"])
    assert len(owner.tier("pinned")) == 3 and len(owner.tier("outcomes")) == 3


def test_outcome_ties_break_by_id_ascending(cx: Cortex) -> None:
    from cortex import NewMemory

    uris = cx.write_many([NewMemory(data=Event(kind=f"e{i}"), frames=[A]) for i in range(5)])
    by_id = sorted((u.id for u in uris), key=lambda m: m.bytes)
    newest_first = [m.id for m in cx.find(Query(types=("Event",), limit=3)).memories]
    assert newest_first == by_id[:3]
    b = cx.context("find", ["svc://a"])
    assert tier(b, "outcomes") == newest_first


# --- the recall seam: a stand-in lexical index ------------------------------------------------


class _Lexical(Cortex):
    """A Cortex whose "lexical index" scores a memory by how often the text occurs in it."""

    docs: dict[MemoryId, str]

    def _text_search(self, found: Any = None) -> Any:
        def search(txn: Any, text: str, n: int) -> list[tuple[MemoryId, float]]:
            scored = [(mid, float(doc.count(text))) for mid, doc in self.docs.items()]
            scored = [p for p in scored if p[1] > 0]
            scored.sort(key=lambda p: (-p[1], p[0].bytes))
            return scored[:n]

        return search


@pytest.fixture
def lex(tmp_path: Path, clock: Clock) -> Iterator[_Lexical]:
    with _Lexical.open(tmp_path / "lex", actor="agent", clock=clock, metasync=False) as store:
        store.docs = {}
        yield store


def _doc(cx: _Lexical, text: str, **kw: Any) -> MemoryId:
    mid = cx.write(Fact(statement=text, subject="s", predicate="p"), **kw).id
    cx.docs[mid] = text
    return mid


def test_text_find_orders_by_score(lex: _Lexical) -> None:
    one = _doc(lex, "tea")
    three = _doc(lex, "tea tea tea", visibility="actor_public")
    two = _doc(lex, "tea tea")
    _doc(lex, "coffee")
    res = lex.find(Query(text="tea", limit=10))
    assert [m.id for m in res.memories] == [three, two, one]
    assert [h.score for h in res.hits] == [3.0, 2.0, 1.0]
    assert [h.ranks["lexical"] for h in res.hits] == [1, 2, 3]
    res = lex.find(Query(text="tea", limit=10, order_by="score", descending=False))
    assert [m.id for m in res.memories] == [one, two, three]
    res = lex.find(Query(text="tea", limit=10, reader=Reader(actor="eve")))
    assert [m.id for m in res.memories] == [three]


def test_recall_tier_comes_last_and_dedups(lex: _Lexical) -> None:
    framed = _doc(lex, "tea framed", frames=[A])
    pinned = lex.write(Identity(name="tea lover")).id
    lex.docs[pinned] = "tea lover"
    loose = _doc(lex, "tea tea loose")
    b = lex.context("find", ["svc://a"], query="tea")
    assert tier(b, "pinned") == [pinned]
    assert tier(b, "frame") == [framed]
    assert tier(b, "recall") == [loose]
    assert [h.tier for h in b.hits] == ["pinned", "frame", "recall"]
    before = trace(lex)
    lex.context("find", ["svc://a"], query="tea")
    assert trace(lex) == before


# --- the pinned index (format 3): maintained by every write path, read by the pinned tier ----


def pins(cx: Cortex) -> list[MemoryId]:
    """The ids in ``idx/pin``, in key order (type, created time, id)."""
    from cortex.storage import keys as K

    with cx._kv.read() as txn:
        return [K.parse_pin_key(k).id for k in txn.keys(K.IDX_PIN)]


def goal(status: str) -> Goal:
    return Goal(statement=f"a {status} goal", status=status)  # type: ignore[arg-type]


def soft(statement: str = "maybe") -> Constraint:
    return Constraint(statement=statement, polarity="do", strength="soft", source="learned")


def test_writes_pin_identities_hard_constraints_and_active_goals(cx: Cortex, clock: Clock) -> None:
    from cortex import NewMemory

    ident = cx.write(Identity(name="me")).id
    clock.tick()
    made = cx.write_many(
        [
            NewMemory(data=hard()),
            NewMemory(data=soft()),
            NewMemory(data=goal("active")),
            NewMemory(data=goal("paused")),
            NewMemory(data=fact("f")),
        ]
    )
    assert set(pins(cx)) == {ident, made[0].id, made[2].id}
    assert cx.verify().ok


def test_update_pins_and_unpins(cx: Cortex, clock: Clock) -> None:
    g = cx.write(goal("paused")).id
    c = cx.write(soft()).id
    assert pins(cx) == []
    clock.tick()
    cx.update(g, goal("active"))
    cx.update(c, hard())
    assert set(pins(cx)) == {g, c}
    assert set(tier(cx.context("find"), "pinned")) == {g, c}
    clock.tick()
    cx.update(g, goal("completed"))
    assert pins(cx) == [c]
    cx.update(c, hard("still hard"))  # stays pinned, once
    assert pins(cx) == [c]
    cx.update(c, soft())
    assert pins(cx) == []
    assert tier(cx.context("find"), "pinned") == []
    assert cx.verify().ok


def test_update_head_and_tombstone_keep_the_pin_purge_removes_it(cx: Cortex, clock: Clock) -> None:
    a = cx.write(hard("a")).id
    b = cx.write(Identity(name="b")).id
    cx.update_head(a, tags=["x"], importance=9)
    assert set(pins(cx)) == {a, b}
    cx.tombstone(a, "retired")  # readers filter by the head, like the other indexes
    assert set(pins(cx)) == {a, b}
    assert tier(cx.context("find"), "pinned") == [b]
    cx.purge(a, "erase")  # the data is gone: so is the entry
    cx.purge(b, "erase")
    assert pins(cx) == []
    assert tier(cx.context("find"), "pinned") == []
    assert cx.verify().ok


def test_import_pins_from_the_current_version(tmp_path: Path, cx: Cortex, clock: Clock) -> None:
    src_path = tmp_path / "src"
    with Cortex.open(src_path, actor="agent", clock=clock, metasync=False) as src:
        kept = src.write(goal("paused")).id
        src.update(kept, goal("active"))  # pinned now, not at version 1
        dropped = src.write(hard()).id
        src.update(dropped, soft())  # pinned at version 1, not now
        gone = src.write(Identity(name="gone")).id
        src.tombstone(gone, "retired")  # tombstoned but not purged: pinned
        erased = src.write(Identity(name="erased")).id
        src.purge(erased, "erase")
        records = [
            (hist[-1].head, [m.version for m in hist])
            for hist in (src.history(m) for m in (kept, dropped, gone, erased))
        ]
        want = set(pins(src))
    assert want == {kept, gone}
    cx.import_records(records)
    assert set(pins(cx)) == want
    assert cx.verify().ok
    assert tier(cx.context("find"), "pinned") == [kept]


def test_the_pinned_tier_reads_the_pinned_index(cx: Cortex, clock: Clock) -> None:
    from cortex.model.codec import to_micros
    from cortex.storage import keys as K

    a = cx.write(hard("a")).id
    s = cx.resolve_latest(cx.write(soft("s"))).head
    # without its entry a pinned memory is not in the tier: the tier does not scan the types
    key = K.pin_key(s.type, to_micros(cx.resolve_latest(a).head.created_at), a)
    cx._kv.write(lambda txn: txn.delete(key))
    assert tier(cx.context("find"), "pinned") == []
    # a stale entry is filtered by the version's own data
    cx._kv.write(lambda txn: txn.put(K.pin_key(s.type, to_micros(s.created_at), s.id), b""))
    assert tier(cx.context("find"), "pinned") == []
    assert not cx.verify().ok


def test_the_pinned_tier_is_bounded_newest_first_per_type(
    cx: Cortex, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    import functools

    import cortex.agent.api
    from cortex.query.context import assemble

    made: dict[str, list[MemoryId]] = {"ident": [], "hard": [], "goal": []}
    for i in range(5):
        made["ident"].append(cx.write(Identity(name=f"me{i}")).id)
        made["hard"].append(cx.write(hard(f"h{i}")).id)
        made["goal"].append(cx.write(goal("active")).id)
        clock.tick()
    cx.tombstone(made["hard"][4], "retired")  # skipped: the limit counts the kept ones
    b = cx.context("find")
    assert set(tier(b, "pinned")) == {m for ms in made.values() for m in ms} - {made["hard"][4]}
    monkeypatch.setattr(cortex.agent.api, "assemble", functools.partial(assemble, tier_limit=2))
    b = cx.context("find")
    want = {*made["ident"][3:], *made["hard"][2:4], *made["goal"][3:]}
    assert set(tier(b, "pinned")) == want
