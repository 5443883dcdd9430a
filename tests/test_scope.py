"""Visibility, readers and scopes on every read path, and writes through a view (§3)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from cortex import (
    Cortex,
    CortexError,
    Event,
    Follow,
    Goal,
    MemoryId,
    MemoryType,
    NotFoundError,
    Query,
    Reader,
    Scope,
    Uri,
    ValidationError,
    Visibility,
    new_id,
)
from cortex.model.enums import ObjKind, Verb
from cortex.model.records import FrameRef, Head
from cortex.rules.scope import FrameMatch

from .qsupport import DAY, T0, Clock, fact, forms, frame, trace

F = ("Fact",)


@pytest.fixture
def clock() -> Clock:
    return Clock()


# --- the matrix -------------------------------------------------------------------------------

VIS = {
    "priv": "private",
    "scop": "scoped",
    "pub": "actor_public",
    "scop_out": "scoped",
    "pub_out": "actor_public",
}


@pytest.fixture
def world(tmp_path: Path, clock: Clock) -> Iterator[tuple[Cortex, dict[str, Uri]]]:
    """A store owned by "owner" with every visibility, plus a private memory of "bob"."""
    path = tmp_path / "store"
    n: dict[str, Uri] = {}
    with Cortex.open(path, actor="owner", clock=clock, metasync=False) as cx:
        for name, vis in VIS.items():
            tags = [] if name.endswith("_out") else ["shared"]
            n[name] = cx.write(fact(name), tags=tags, frames=[frame("svc://v")], visibility=vis)
    with Cortex.open(path, actor="bob", clock=clock, metasync=False) as cx:
        assert cx.owner == "owner"
        n["bob_priv"] = cx.write(
            fact("bob"), tags=["shared"], frames=[frame("svc://v")], visibility="private"
        )
    with Cortex.open(path, actor="owner", clock=clock, metasync=False) as cx:
        yield cx, n


READERS: dict[str, Reader | None] = {
    "default": None,
    "owner": Reader(actor="owner"),
    "bob": Reader(actor="bob"),
    "eve": Reader(actor="eve"),
    "sam": Reader(actor="sam", scopes=(Scope(tags=frozenset({"shared"})),)),
    # the owner sees everything, whatever scopes it holds
    "owner_scoped": Reader(actor="owner", scopes=(Scope(tags=frozenset({"zzz"})),)),
}

SEES: dict[str, set[str]] = {
    "default": {*VIS, "bob_priv"},
    "owner": {*VIS, "bob_priv"},
    "bob": {"bob_priv", "pub", "pub_out"},  # his own memory, and what is public
    "eve": {"pub", "pub_out"},
    "sam": {"scop", "pub"},  # scoped and public, when the scope selects them
    "owner_scoped": {*VIS, "bob_priv"},
}


def _found(fn: Callable[[], Any]) -> NotFoundError | None:
    try:
        fn()
    except NotFoundError as exc:
        assert type(exc) is NotFoundError
        return exc
    return None


def _norm(exc: BaseException, mid: MemoryId) -> str:
    return str(exc).replace(str(mid), "<id>")


@pytest.mark.parametrize("who", list(READERS))
def test_find_matrix(world: tuple[Cortex, dict[str, Uri]], who: str) -> None:
    cx, n = world
    rd = READERS[who]
    want = {n[k].id for k in SEES[who]}
    for q in (
        Query(types=F, limit=100),
        Query(tags=("shared",), limit=100),
        Query(frames=("find:service:svc://v",), limit=100),
        Query(frames=("find",), limit=100, order_by="salience"),
    ):
        res = cx.find(msgspec_replace(q, reader=rd))
        assert {m.id for m in res.memories} <= want
        if not q.tags:
            assert {m.id for m in res.memories} == want, q
        else:
            assert {m.id for m in res.memories} == want & {
                n[k].id for k in ("priv", "scop", "pub", "bob_priv")
            }
    if rd is not None:
        res = cx.view(rd).find(Query(types=F, limit=100))
        assert {m.id for m in res.memories} == want


def msgspec_replace(q: Query, **kw: Any) -> Query:
    import msgspec

    return msgspec.structs.replace(q, **kw)


@pytest.mark.parametrize("who", list(READERS))
def test_context_matrix(world: tuple[Cortex, dict[str, Uri]], who: str) -> None:
    cx, n = world
    rd = READERS[who]
    b = cx.context("find", ["svc://v"], reader=rd)
    assert {m.id for m in b.memories} == {n[k].id for k in SEES[who]}
    if rd is not None:
        b = cx.view(rd).context("find", ["service:svc://v"])
        assert {m.id for m in b.memories} == {n[k].id for k in SEES[who]}


@pytest.mark.parametrize("who", [w for w in READERS if w != "default"])
@pytest.mark.parametrize("name", [*VIS, "bob_priv"])
def test_resolve_matrix(world: tuple[Cortex, dict[str, Uri]], who: str, name: str) -> None:
    """Every reader-aware read: visible works, hidden raises exactly what missing raises."""
    cx, n = world
    rd = READERS[who]
    assert rd is not None
    uri = n[name]
    ghost = Uri(MemoryType.FACT, new_id(), 1)
    view = cx.view(rd)
    paths: list[Callable[[Uri], Any]] = [
        lambda u: cx.resolve(u, reader=rd),
        lambda u: cx.resolve(str(u), reader=rd),
        lambda u: cx.resolve_latest(u.id, reader=rd),
        lambda u: cx.history(u, reader=rd),
        lambda u: cx.resolve_as_of(u.id, T0, reader=rd),
        view.resolve,
        lambda u: view.resolve_latest(str(u.id)),
        view.history,
    ]
    for i, path in enumerate(paths):
        err = _found(lambda path=path: path(uri))
        if name in SEES[who]:
            assert err is None, (i, who, name)
        else:
            assert err is not None, (i, who, name)
            missing = _found(lambda path=path: path(ghost))
            assert missing is not None
            assert _norm(err, uri.id) == _norm(missing, ghost.id), i


def test_resolve_without_reader_sees_everything(world: tuple[Cortex, dict[str, Uri]]) -> None:
    cx, n = world
    for uri in n.values():
        assert cx.resolve(uri).uri == uri


def test_hidden_walk_start_looks_missing(world: tuple[Cortex, dict[str, Uri]]) -> None:
    cx, n = world
    ghost = new_id()
    with pytest.raises(NotFoundError) as hidden:
        cx.find(Query(from_=(n["priv"],), follow=Follow(), limit=5, reader=READERS["sam"]))
    with pytest.raises(NotFoundError) as missing:
        cx.find(Query(from_=(ghost,), follow=Follow(), limit=5, reader=READERS["sam"]))
    assert _norm(hidden.value, n["priv"].id) == _norm(missing.value, ghost)


def test_facets_and_about_are_filtered(world: tuple[Cortex, dict[str, Uri]]) -> None:
    cx, n = world
    assert cx.facets(by="type", reader=READERS["eve"]) == {"Fact": 2}
    assert cx.facets(by="type", reader=READERS["sam"]) == {"Fact": 2}
    assert cx.facets(by="type") == {"Fact": 6}
    got = {m.id for m in cx.about("user", reader=READERS["eve"]).memories}
    assert got == {n["pub"].id, n["pub_out"].id}


# --- scope selectors --------------------------------------------------------------------------


@pytest.fixture
def sel(tmp_path: Path, clock: Clock) -> Iterator[tuple[Cortex, dict[str, MemoryId]]]:
    with Cortex.open(tmp_path / "s", actor="owner", clock=clock, metasync=False) as cx:
        n = {
            "m1": cx.write(fact(1), tags=["a"], frames=[frame("x")], visibility="scoped").id,
            "m2": cx.write(
                Event(kind="k"),
                tags=["a", "secret"],
                frames=[frame("y")],
                visibility="scoped",
            ).id,
            "m3": cx.write(
                fact(3),
                tags=["b"],
                frames=[frame("z", "analyze", "agent")],
                visibility="actor_public",
            ).id,
            "m4": cx.write(Goal(statement="g", status="active"), visibility="scoped").id,
            "m5": cx.write(fact(5), tags=["a"], visibility="private").id,
        }
        yield cx, n


ALLT = ("Fact", "Event", "Goal")


def _seen(cx: Cortex, *scopes: Scope) -> set[MemoryId]:
    rd = Reader(actor="sam", scopes=scopes)
    return {m.id for m in cx.find(Query(types=ALLT, limit=100, reader=rd)).memories}


def test_scope_selectors(sel: tuple[Cortex, dict[str, MemoryId]]) -> None:
    cx, n = sel

    def want(*names: str) -> set[MemoryId]:
        return {n[k] for k in names}

    assert _seen(cx, Scope()) == want("m1", "m2", "m3", "m4")  # no include list: everything
    assert _seen(cx, Scope(types=frozenset({"Fact"}))) == want("m1", "m3")
    assert _seen(cx, Scope(types=frozenset({MemoryType.GOAL}))) == want("m4")
    assert _seen(cx, Scope(tags=frozenset({"a"}))) == want("m1", "m2")
    assert _seen(cx, Scope(tags=frozenset({"a", "b"}))) == want("m1", "m2", "m3")
    assert _seen(cx, Scope(ids=frozenset({n["m4"]}))) == want("m4")
    assert _seen(cx, Scope(ids=frozenset({str(n["m4"]), n["m5"]}))) == want("m4")
    assert _seen(cx, Scope(frames=("find",))) == want("m1", "m2")
    assert _seen(cx, Scope(frames=("find:service:y",))) == want("m2")
    assert _seen(cx, Scope(frames=(frame("z", "analyze", "agent"),))) == want("m3")
    # every non-empty include list must match
    assert _seen(cx, Scope(types=frozenset({"Fact"}), tags=frozenset({"a"}))) == want("m1")
    assert _seen(cx, Scope(types=frozenset({"Goal"}), tags=frozenset({"a"}))) == set()
    # exclusion wins
    assert _seen(cx, Scope(tags=frozenset({"a"}), exclude_tags=frozenset({"secret"}))) == want("m1")
    both = Scope(types=frozenset({"Fact", "Event"}), exclude_types=frozenset({"Event"}))
    assert _seen(cx, both) == want("m1", "m3")
    ids_ = Scope(ids=frozenset({n["m1"], n["m2"]}), exclude_ids=frozenset({n["m1"]}))
    assert _seen(cx, ids_) == want("m2")
    assert _seen(cx, Scope(frames=("find",), exclude_frames=("find:service:x",))) == want("m2")
    assert _seen(cx, Scope(ids=frozenset({n["m1"]}), exclude_tags=frozenset({"a"}))) == set()
    # several scopes: any of them
    assert _seen(cx, Scope(ids=frozenset({n["m4"]})), Scope(tags=frozenset({"b"}))) == want(
        "m3", "m4"
    )
    # an exclusion in one scope does not hide what another scope selects
    two = (
        Scope(tags=frozenset({"a"}), exclude_tags=frozenset({"secret"})),
        Scope(types=frozenset({"Event"})),
    )
    assert _seen(cx, *two) == want("m1", "m2")


def test_private_is_never_granted_by_a_scope(sel: tuple[Cortex, dict[str, MemoryId]]) -> None:
    cx, n = sel
    rd = Reader(actor="sam", scopes=(Scope(ids=frozenset({n["m5"]})),))
    assert _seen(cx, *rd.scopes) == set()
    with pytest.raises(NotFoundError):
        cx.resolve_latest(n["m5"], reader=rd)


def test_scope_expiry(sel: tuple[Cortex, dict[str, MemoryId]], clock: Clock) -> None:
    cx, n = sel
    soon = Scope(tags=frozenset({"a"}), expires_at=T0 + DAY)
    later = Scope(types=frozenset({"Goal"}), expires_at=T0 + 2 * DAY)
    assert _seen(cx, soon, later) == {n["m1"], n["m2"], n["m4"]}
    clock.at(T0 + DAY - DAY / 86_400_000_000)
    assert _seen(cx, soon) == {n["m1"], n["m2"]}
    clock.at(T0 + DAY)  # a scope grants nothing once expires_at <= now
    assert _seen(cx, soon) == set()
    assert _seen(cx, soon, later) == {n["m4"]}
    rd = Reader(actor="sam", scopes=(soon,))
    with pytest.raises(NotFoundError):
        cx.resolve_latest(n["m1"], reader=rd)
    assert cx.context("find", ["x"], reader=rd).memories == []
    clock.at(T0 + 3 * DAY)
    # a reader holding only expired scopes is still a scoped reader: public memories are
    # visible only when a scope selects them (see the report: ambiguous)
    assert _seen(cx, soon, later) == set()


def test_reader_and_scope_validation() -> None:
    with pytest.raises(ValidationError):
        Reader(actor="")
    with pytest.raises(ValidationError):
        Scope(types=frozenset({"Nope"}))
    with pytest.raises(ValidationError):
        Scope(token_budget=0)
    with pytest.raises(ValidationError):
        Scope(expires_at=T0.replace(tzinfo=None))
    with pytest.raises(ValidationError):
        Scope(frames=("nope",))


# --- token caps -------------------------------------------------------------------------------


@pytest.fixture
def ten(tmp_path: Path, clock: Clock) -> Iterator[tuple[Cortex, list[Uri]]]:
    with Cortex.open(tmp_path / "s", actor="owner", clock=clock, metasync=False) as cx:
        uris = []
        for i in range(5):
            uris.append(
                cx.write(
                    fact(i),
                    importance=i,
                    forms=forms(10),
                    visibility="scoped",
                    frames=[frame("svc://t")],
                )
            )
            clock.tick()
        yield cx, uris


def _cap(cx: Cortex, *scopes: Scope, **kw: Any) -> Any:
    rd = Reader(actor="sam", scopes=scopes)
    return cx.find(Query(types=F, limit=100, reader=rd, **kw))


def test_scope_token_cap(ten: tuple[Cortex, list[Uri]], clock: Clock) -> None:
    cx, uris = ten
    res = _cap(cx, Scope(token_budget=20))
    assert res.tokens == 20 and len(res.dropped) == 3
    assert [h.uri for h in res.hits] == [uris[4], uris[3]]  # the most salient kept
    assert _cap(cx, Scope(token_budget=20), budget_tokens=100).tokens == 20
    assert _cap(cx, Scope(token_budget=20), budget_tokens=10).tokens == 10
    # the largest cap among active scopes
    assert _cap(cx, Scope(token_budget=20), Scope(token_budget=30)).tokens == 30
    # none if any active scope is uncapped
    assert _cap(cx, Scope(token_budget=20), Scope()).tokens == 50
    # an expired scope's cap does not count
    gone = Scope(expires_at=T0 + DAY)
    assert _cap(cx, Scope(token_budget=20), gone).tokens == 50
    clock.at(T0 + 2 * DAY)
    assert _cap(cx, Scope(token_budget=20), gone).tokens == 20
    # the cap sets a budget on a find that names none: the keep-one rule holds
    res = _cap(cx, Scope(token_budget=1))
    assert len(res) == 1


def test_scope_token_cap_on_context(ten: tuple[Cortex, list[Uri]]) -> None:
    cx, _ = ten
    rd = Reader(actor="sam", scopes=(Scope(token_budget=25),))
    b = cx.context("find", ["svc://t"], reader=rd)
    assert b.tokens <= 25 and len(b.hits) == 2 and len(b.dropped) == 3
    b = cx.context("find", ["svc://t"], budget_tokens=15, reader=rd)
    assert len(b.hits) == 1
    b = cx.view(rd).context("find", ["svc://t"], budget_tokens=4000)
    assert b.tokens <= 25


# --- writes through a view --------------------------------------------------------------------


@pytest.fixture
def writable(world: tuple[Cortex, dict[str, Uri]]) -> tuple[Cortex, dict[str, Uri]]:
    return world


W = Reader(actor="sam", scopes=(Scope(tags=frozenset({"shared"}), writable=True),))
RO = Reader(actor="sam", scopes=(Scope(tags=frozenset({"shared"})),))


def test_write_through_a_writable_scope(world: tuple[Cortex, dict[str, Uri]]) -> None:
    cx, n = world
    view = cx.view(W)
    uri = view.write(fact("new"), tags=["shared"])
    m = view.resolve(uri)
    assert m.version.created_by == "sam"
    assert m.head.visibility is Visibility.SCOPED
    u2 = view.update(n["scop"], fact("scop2"))
    assert u2.version == 2 and cx.resolve(u2).version.created_by == "sam"
    view.tombstone(uri, "done")
    assert cx.resolve_latest(uri).tombstoned


def test_write_outside_the_scope_is_refused(world: tuple[Cortex, dict[str, Uri]]) -> None:
    cx, n = world
    before = trace(cx)
    with pytest.raises(ValidationError):
        cx.view(W).write(fact("x"), tags=["other"])
    with pytest.raises(ValidationError):
        cx.view(W).write(fact("x"))
    with pytest.raises(ValidationError):
        cx.view(RO).write(fact("x"), tags=["shared"])
    with pytest.raises(ValidationError):
        cx.view(Reader(actor="eve")).write(fact("x"))
    with pytest.raises(CortexError):
        cx.view(RO).update(n["scop"], fact("y"))
    with pytest.raises(CortexError):
        cx.view(RO).tombstone(n["scop"], "y")
    # the public memory is visible to W but its scope does not select it
    with pytest.raises(CortexError):
        cx.view(W).update(n["pub_out"], fact("y"))
    assert trace(cx) == before


def test_write_through_an_expired_scope_is_refused(
    world: tuple[Cortex, dict[str, Uri]], clock: Clock
) -> None:
    cx, n = world
    rd = Reader(
        actor="sam",
        scopes=(Scope(tags=frozenset({"shared"}), writable=True, expires_at=T0 + DAY),),
    )
    clock.at(T0 + DAY)
    before = trace(cx)
    with pytest.raises(CortexError):
        cx.view(rd).write(fact("x"), tags=["shared"])
    with pytest.raises(CortexError):
        cx.view(rd).update(n["scop"], fact("y"))
    assert trace(cx) == before


def test_writes_to_hidden_or_missing_memories_look_the_same(
    world: tuple[Cortex, dict[str, Uri]],
) -> None:
    cx, n = world
    view = cx.view(W)
    ghost = new_id()
    before = trace(cx)
    with pytest.raises(NotFoundError) as missing:
        view.update(ghost, fact("y"))
    with pytest.raises(NotFoundError) as hidden:
        view.update(n["scop_out"], fact("y"))  # scoped, but no scope of W selects it
    assert _norm(hidden.value, n["scop_out"].id) == _norm(missing.value, ghost)
    with pytest.raises(NotFoundError):
        view.tombstone(n["scop_out"], "y")
    assert trace(cx) == before


def test_a_writable_scope_cannot_write_a_private_memory(
    world: tuple[Cortex, dict[str, Uri]],
) -> None:
    cx, n = world
    before = trace(cx)
    with pytest.raises(NotFoundError):
        cx.view(W).update(n["priv"], fact("y"))
    with pytest.raises(NotFoundError):
        cx.view(W).tombstone(n["priv"], "y")
    assert trace(cx) == before


def test_owner_view_writes_anything(world: tuple[Cortex, dict[str, Uri]]) -> None:
    cx, n = world
    view = cx.view(Reader(actor="owner"))
    uri = view.write(fact("o"))
    view.update(n["priv"], fact("p2"))
    view.tombstone(n["pub_out"], "x")
    assert cx.resolve_latest(uri).version.created_by == "owner"


def test_view_find_overrides_the_query_reader(world: tuple[Cortex, dict[str, Uri]]) -> None:
    cx, n = world
    res = cx.view(Reader(actor="eve")).find(Query(types=F, limit=100, reader=Reader(actor="owner")))
    assert {m.id for m in res.memories} == {n["pub"].id, n["pub_out"].id}


def test_the_memorys_actor_writes_through_its_own_view(tmp_path: Path, clock: Clock) -> None:
    path = tmp_path / "s"
    with Cortex.open(path, actor="owner", clock=clock, metasync=False):
        pass
    with Cortex.open(path, actor="bob", clock=clock, metasync=False) as cx:
        view = cx.view(Reader(actor="bob"))
        uri = cx.write(fact(1))
        view.update(uri, fact(2))  # allowed: bob is the memory's actor
        new = view.write(fact(3))
        assert cx.resolve_latest(new).head.actor_scope == "bob"


# --- the rules on their own (cortex.rules.scope, specs/query.md §3)
# ---------------------------------


def _head(vis: str, *, actor: str = "owner", **kw: Any) -> Head:
    kw.setdefault("type", MemoryType.FACT)
    return Head(
        id=kw.pop("id", new_id()),
        current_version=1,
        actor_scope=actor,
        visibility=Visibility.coerce(vis),
        created_at=T0,
        last_updated_at=T0,
        **kw,
    )


def _ref(verb: str = "find", kind: str = "service", ref: str = "svc://a") -> FrameRef:
    return FrameRef(verb=Verb.coerce(verb), obj_kind=ObjKind.coerce(kind), obj_ref=ref)


PRIVATE, SCOPED, PUBLIC = "private", "scoped", "actor_public"
ALL_VIS = (PRIVATE, SCOPED, PUBLIC)


@pytest.mark.parametrize("vis", ALL_VIS)
def test_owners_see_and_write_everything(vis: str) -> None:
    h = _head(vis, actor="bob")
    for actor in ("owner", "bob"):  # the store's owner, the memory's actor
        rd = Reader(actor=actor, scopes=(Scope(tags=frozenset({"zzz"})),))
        assert rd.is_owner(h, "owner")
        assert rd.can_see(h, "owner", T0)
        assert rd.can_write(h, "owner", T0)
    assert not Reader(actor="eve").is_owner(h, "owner")


def test_an_unscoped_reader_sees_only_public_memories_and_writes_none() -> None:
    rd = Reader(actor="eve")
    assert [rd.can_see(_head(v), "owner", T0) for v in ALL_VIS] == [False, False, True]
    assert not any(rd.can_write(_head(v), "owner", T0) for v in ALL_VIS)


def test_a_scoped_reader_sees_what_a_scope_selects_but_never_private() -> None:
    rd = Reader(actor="sam", scopes=(Scope(tags=frozenset({"a"})),))
    assert [rd.can_see(_head(v, tags=("a",)), "owner", T0) for v in ALL_VIS] == [
        False,
        True,
        True,
    ]
    # a scoped reader is restricted to its scopes, for public memories too
    assert not rd.can_see(_head(PUBLIC, tags=("b",)), "owner", T0)
    assert not rd.can_see(_head(SCOPED), "owner", T0)


def test_a_writable_scope_never_grants_a_private_memory() -> None:
    rd = Reader(actor="sam", scopes=(Scope(tags=frozenset({"a"}), writable=True),))
    priv = _head(PRIVATE, tags=("a",))
    assert rd.scopes[0].active(T0) and rd.scopes[0].selects(priv)
    assert not rd.can_see(priv, "owner", T0)
    assert not rd.can_write(priv, "owner", T0)
    assert rd.can_write(_head(SCOPED, tags=("a",)), "owner", T0)
    assert rd.can_write(_head(PUBLIC, tags=("a",)), "owner", T0)


def test_writing_needs_a_writable_active_scope_that_selects_the_memory() -> None:
    h = _head(SCOPED, tags=("a",))
    ro = Scope(tags=frozenset({"a"}))
    rw = Scope(tags=frozenset({"a"}), writable=True)
    rw_other = Scope(tags=frozenset({"b"}), writable=True)
    rw_expired = Scope(tags=frozenset({"a"}), writable=True, expires_at=T0)
    assert not Reader(actor="sam", scopes=(ro,)).can_write(h, "owner", T0)
    assert not Reader(actor="sam", scopes=(ro, rw_other)).can_write(h, "owner", T0)
    assert not Reader(actor="sam", scopes=(ro, rw_expired)).can_write(h, "owner", T0)
    assert Reader(actor="sam", scopes=(ro, rw_expired)).can_write(h, "owner", T0 - DAY)
    assert Reader(actor="sam", scopes=(rw_other, rw)).can_write(h, "owner", T0)
    # visible through a read-only scope, selected by a writable one: allowed
    both = Reader(actor="sam", scopes=(Scope(ids=frozenset({h.id})), rw))
    assert both.can_write(h, "owner", T0)


def test_a_writable_view_cannot_create_a_private_memory(
    world: tuple[Cortex, dict[str, Uri]],
) -> None:
    cx, _ = world
    before = trace(cx)
    with pytest.raises(ValidationError):
        cx.view(W).write(fact("x"), tags=["shared"], visibility="private")
    assert trace(cx) == before
    # the owner's view may
    assert cx.view(Reader(actor="owner")).write(fact("x"), visibility="private")


def test_scope_activity_ends_at_expires_at() -> None:
    assert Scope().active(T0)
    s = Scope(expires_at=T0)
    assert s.active(T0 - DAY / 86_400_000_000)
    assert not s.active(T0)
    assert not s.active(T0 + DAY)


def test_selectors_one_by_one() -> None:
    fr = _ref("find", "service", "svc://x")
    h = _head(SCOPED, tags=("a", "b"), frames=(fr,))
    assert Scope().selects(h)
    assert Scope(types=frozenset({"Fact"})).selects(h)
    assert not Scope(types=frozenset({"Goal"})).selects(h)
    assert Scope(ids=frozenset({h.id})).selects(h)
    assert not Scope(ids=frozenset({new_id()})).selects(h)
    assert Scope(tags=frozenset({"b", "z"})).selects(h)
    assert not Scope(tags=frozenset({"z"})).selects(h)
    assert Scope(frames=("find",)).selects(h)
    assert Scope(frames=("find:service",)).selects(h)
    assert Scope(frames=("find:service:svc://x",)).selects(h)
    assert not Scope(frames=("find:service:svc://y",)).selects(h)
    assert not Scope(frames=("find:model",)).selects(h)
    assert not Scope(frames=("build",)).selects(h)
    assert not Scope(frames=("find",)).selects(_head(SCOPED))  # no frames at all
    # every exclude list wins over every include list
    assert not Scope(exclude_types=frozenset({"Fact"})).selects(h)
    assert not Scope(exclude_ids=frozenset({h.id})).selects(h)
    assert not Scope(exclude_tags=frozenset({"b"})).selects(h)
    assert not Scope(exclude_frames=("find:service:svc://x",)).selects(h)
    assert Scope(exclude_types=frozenset({"Goal"})).selects(h)
    assert Scope(exclude_ids=frozenset({new_id()})).selects(h)
    assert Scope(exclude_tags=frozenset({"z"})).selects(h)
    assert Scope(exclude_frames=("build",)).selects(h)
    assert Scope(exclude_tags=frozenset({"z"})).selects(_head(SCOPED))


def test_frame_match_kinds_must_be_valid() -> None:
    with pytest.raises(ValidationError) as bad:
        FrameMatch(verb=Verb.FIND, obj_kind="spaceship")  # type: ignore[arg-type]
    assert bad.value.field == "frame.obj_kind"
    with pytest.raises(ValidationError) as bad:
        Scope(frames=(("find", "spaceship"),))
    assert bad.value.field == "frame.obj_kind"
    with pytest.raises(ValidationError) as bad:
        FrameMatch(verb="fly")  # type: ignore[arg-type]
    assert bad.value.field == "frame.verb"
    m = FrameMatch(verb="find", obj_kind="model")  # type: ignore[arg-type]
    assert m.verb is Verb.FIND and m.obj_kind is ObjKind.MODEL


@pytest.mark.parametrize("ref", ["", 5, b"svc://a", ("svc://a",)])
def test_frame_match_refs_must_be_non_empty_text(ref: Any) -> None:
    with pytest.raises(ValidationError) as bad:
        FrameMatch(verb=Verb.FIND, obj_kind=ObjKind.SERVICE, obj_ref=ref)
    assert bad.value.field == "frame.obj_ref"


def test_frame_match_refs_are_nfc() -> None:
    m = FrameMatch(verb=Verb.FIND, obj_kind=ObjKind.SERVICE, obj_ref="cafe\u0301")
    assert m.obj_ref == "caf\u00e9"
    assert m.matches(_ref(ref="caf\u00e9"))


def test_frame_match_of_every_form() -> None:
    full = FrameMatch(verb=Verb.FIND, obj_kind=ObjKind.SERVICE, obj_ref="svc://a:b")
    assert FrameMatch.of(full) is full
    assert FrameMatch.of(_ref(ref="svc://a:b")) == full
    assert FrameMatch.of("find:service:svc://a:b") == full  # the ref keeps its colons
    assert FrameMatch.of(("find", "service", "svc://a:b")) == full
    assert FrameMatch.of(["find"]) == FrameMatch(verb=Verb.FIND)
    assert FrameMatch.of("find::") == FrameMatch(verb=Verb.FIND)  # empty parts: no restriction
    for bad in ((), ("find", "service", "x", "y"), 7, None):
        with pytest.raises(ValidationError) as err:
            FrameMatch.of(bad)  # type: ignore[arg-type]
        assert err.value.field == "frames"


def test_frame_match_matches() -> None:
    fr = _ref("find", "service", "svc://a")
    assert FrameMatch(verb=Verb.FIND).matches(fr)
    assert not FrameMatch(verb=Verb.BUILD).matches(fr)
    assert FrameMatch(verb=Verb.FIND, obj_kind=ObjKind.SERVICE).matches(fr)
    assert not FrameMatch(verb=Verb.FIND, obj_kind=ObjKind.MODEL).matches(fr)
    ref = FrameMatch(verb=Verb.FIND, obj_kind=ObjKind.SERVICE, obj_ref="svc://a")
    assert ref.matches(fr)
    assert not ref.matches(_ref("find", "service", "svc://b"))
    assert not ref.matches(_ref("build", "service", "svc://a"))


def test_scope_fields_are_normalised() -> None:
    mid = new_id()
    s = Scope(
        types=["Fact", MemoryType.GOAL],  # type: ignore[arg-type]
        exclude_types=["Event"],  # type: ignore[arg-type]
        tags=["cafe\u0301"],  # type: ignore[arg-type]
        exclude_tags=["nai\u0308ve"],  # type: ignore[arg-type]
        ids=[str(mid)],  # type: ignore[arg-type]
        exclude_ids=[str(mid)],  # type: ignore[arg-type]
        frames=["find"],  # type: ignore[arg-type]
        exclude_frames=[("build", "model")],  # type: ignore[arg-type]
    )
    assert s.types == frozenset({MemoryType.FACT, MemoryType.GOAL})
    assert s.exclude_types == frozenset({MemoryType.EVENT})
    assert s.tags == frozenset({"caf\u00e9"}) and s.exclude_tags == frozenset({"na\u00efve"})
    assert s.ids == s.exclude_ids == frozenset({mid})
    assert s.frames == (FrameMatch(verb=Verb.FIND),)
    assert s.exclude_frames == (FrameMatch(verb=Verb.BUILD, obj_kind=ObjKind.MODEL),)
    with pytest.raises(ValidationError) as bad:
        Scope(exclude_types=frozenset({"Nope"}))
    assert bad.value.field == "scope.exclude_types"
    assert Scope(token_budget=1).token_budget == 1
    for budget in (0, -3, 2.5, "10"):
        with pytest.raises(ValidationError) as bad:
            Scope(token_budget=budget)  # type: ignore[arg-type]
        assert bad.value.field == "scope.token_budget"
    assert Scope(expires_at=T0).expires_at == T0


def test_reader_validation() -> None:
    for actor in ("", None, 5):
        with pytest.raises(ValidationError) as bad:
            Reader(actor=actor)  # type: ignore[arg-type]
        assert bad.value.field == "reader.actor"
    s = Scope()
    assert Reader(actor="a", scopes=[s]).scopes == (s,)  # type: ignore[arg-type]


def test_token_cap_rules() -> None:
    capped, wide = Scope(token_budget=20), Scope(token_budget=30)
    gone = Scope(token_budget=5, expires_at=T0)
    assert Reader(actor="a").token_cap(T0) is None
    assert Reader(actor="a", scopes=(capped,)).token_cap(T0) == 20
    assert Reader(actor="a", scopes=(capped, wide)).token_cap(T0) == 30
    assert Reader(actor="a", scopes=(wide, capped)).token_cap(T0) == 30
    assert Reader(actor="a", scopes=(capped, Scope())).token_cap(T0) is None
    assert Reader(actor="a", scopes=(capped, gone)).token_cap(T0) == 20
    assert Reader(actor="a", scopes=(capped, gone)).token_cap(T0 - DAY) == 20
    assert Reader(actor="a", scopes=(gone,)).token_cap(T0) is None


# ---------------------------------------------------------------------------------------------
# what a Scope and a Reader accept (the fields a refusal names: specs/query.md §3, §6)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"types": ["Recipe"]}, "scope.types"),
        ({"exclude_types": ["Recipe"]}, "scope.exclude_types"),
        ({"name": ""}, "scope.name"),
        ({"name": "a\ud800"}, "scope.name"),
        ({"tags": ["a\ud800"]}, "scope.tags[0]"),
        ({"ids": [5]}, "scope.ids"),
        ({"exclude_ids": [b"x" * 16]}, "scope.exclude_ids"),
        ({"frames": 5}, "scope.frames"),
        ({"expires_at": datetime(2030, 1, 1)}, "scope.expires_at"),  # naive: ambiguous
        ({"writable": 1}, "scope.writable"),
        ({"writable": "yes"}, "scope.writable"),
        ({"token_budget": 0}, "scope.token_budget"),
    ],
)
def test_a_scope_refuses_a_bad_field_and_names_it(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        Scope(**kwargs)
    assert info.value.field == field


def test_a_scope_takes_ids_as_text_or_memory_ids() -> None:
    a, b = new_id(), new_id()
    s = Scope(ids=[str(a), b], exclude_ids=(str(b),), writable=False)
    assert s.ids == frozenset({a, b}) and s.exclude_ids == frozenset({b})


@pytest.mark.parametrize(
    ("kwargs", "field", "rule"),
    [
        ({"actor": ""}, "reader.actor", "required"),
        ({"actor": 5}, "reader.actor", "required"),
        ({"actor": "a\ud800"}, "reader.actor", "utf8"),
        ({"actor": "a", "scopes": 5}, "reader.scopes", "type"),
        ({"actor": "a", "scopes": [Scope(), "shared"]}, "reader.scopes[1]", "type"),
        ({"actor": "a", "clearance": "secret"}, "reader.clearance", "enum"),
        ({"actor": "a", "clearance": None}, "reader.clearance", "enum"),
        ({"actor": "a", "clearance": 9}, "reader.clearance", "enum"),
    ],
)
def test_a_reader_refuses_a_bad_field_and_names_it(
    kwargs: dict[str, Any], field: str, rule: str
) -> None:
    with pytest.raises(ValidationError) as info:
        Reader(**kwargs)
    assert (info.value.field, info.value.rule) == (field, rule)


def test_a_reader_s_clearance_is_a_level_and_clears_up_to_it() -> None:
    """``specs/sensitivity.md`` §3–4: a level at or below the clearance; the owner any level."""
    from cortex import Sensitivity

    levels = list(Sensitivity)
    assert Reader(actor="a").clearance is Sensitivity.INTERNAL
    for given, level in (("public", levels[0]), (3, levels[2]), (levels[3], levels[3])):
        rd = Reader(actor="a", scopes=[Scope()], clearance=given)  # type: ignore[arg-type]
        assert rd.clearance is level and rd.scopes == (Scope(),)
        assert [rd.clears(lv, "owner") for lv in levels] == [lv <= level for lv in levels]
        owner = Reader(actor="owner", clearance=given)  # type: ignore[arg-type]
        assert all(owner.clears(lv, "owner") for lv in levels)
