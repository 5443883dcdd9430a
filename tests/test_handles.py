"""The in-process access model: a handle reads and writes as its actor; views hold no handle.

Several handles of one store in one process share one LMDB environment.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from cortex import (
    Cortex,
    CortexError,
    Fact,
    NotFoundError,
    Query,
    Reader,
    Scope,
    Sensitivity,
    ValidationError,
)

OWNER = "agent-1"
SHARED_W = Scope(name="shared", tags=frozenset({"shared"}), writable=True)
OTHER_RO = Scope(name="other", tags=frozenset({"other"}))
F = ["Fact"]


def fact(s: str) -> Fact:
    return Fact(statement=s, subject="ada", predicate="note")


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, dict[str, object]]:
    path = tmp_path / "s"
    with Cortex.open(path, actor=OWNER, metasync=False) as cx:
        n = {
            "priv": cx.write(fact("private note")),
            "shared": cx.write(fact("shared note"), tags=["shared"], visibility="scoped"),
            "other": cx.write(fact("other note"), tags=["other"], visibility="scoped"),
            "pub": cx.write(fact("public note"), visibility="actor_public"),
        }
        cx.add_edge(n["shared"], "references", n["priv"])
        cx.add_edge(n["shared"], "references", n["pub"])
        cx.add_edge(n["shared"], "references", n["other"])
        cx.core_update("user", "tz", "UTC")
    return path, n


def test_a_handle_of_another_actor_reads_as_it(world: tuple[Path, dict[str, object]]) -> None:
    path, n = world
    with Cortex.open(path, actor="helper", scopes=[SHARED_W, OTHER_RO]) as h:
        seen = {str(m.uri) for m in h.find(Query(types=F, limit=10)).memories}
        assert seen == {str(n["shared"]), str(n["other"])}  # a scoped reader: its scopes only
        with pytest.raises(NotFoundError):
            h.resolve(n["priv"])  # type: ignore[arg-type]
        with pytest.raises(NotFoundError):
            h.history(n["pub"].id)  # type: ignore[attr-defined]
        assert h.core_get() == {"user": {}, "agent": {}}
        assert {e.dst for e in h.edges(n["shared"])} == {n["other"].id}  # type: ignore[attr-defined]
        ids = {e.id for e in h.journal() if e.id is not None}
        assert n["priv"].id not in ids and n["shared"].id in ids  # type: ignore[attr-defined]
        found = {str(hit.uri) for hit in h.search("private note").hits}
        assert found and str(n["priv"]) not in found and str(n["pub"]) not in found
    with Cortex.open(path, actor="helper") as plain:  # no scope: actor_public only
        assert [str(u) for u in plain.find(Query(types=F, limit=10)).uris] == [str(n["pub"])]


def test_a_restricted_handle_changes_only_what_it_may_write(
    world: tuple[Path, dict[str, object]],
) -> None:
    path, n = world
    with Cortex.open(path, actor="helper", scopes=[SHARED_W, OTHER_RO]) as h:
        with pytest.raises(NotFoundError):
            h.update(n["priv"], fact("x"))  # type: ignore[arg-type]
        with pytest.raises(NotFoundError):
            h.tombstone(n["pub"], "x")  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="may not change"):
            h.update(n["other"], fact("x"))  # type: ignore[arg-type]  # visible, read-only
        with pytest.raises(NotFoundError, match="core memory"):
            h.core_update("user", "tz", "CET")
        with pytest.raises(ValidationError):
            h.purge_episode("01K0000000000000000000000X", "x")
        with pytest.raises(ValidationError, match="another reader"):
            h.view(Reader(actor=OWNER))
        assert h.update(n["shared"], fact("shared, changed")).version == 2  # type: ignore[arg-type]
        mine = h.write(fact("the helper's own"))  # its own memory, private to it
        assert h.resolve(mine).head.actor_scope == "helper"
    with Cortex.open(path, actor=None) as cx:
        changed = cx.resolve_latest(n["shared"].id)  # type: ignore[attr-defined]
        assert changed.version.created_by == "helper"
        assert [e.by for e in cx.journal()][-2:] == ["helper", "helper"]
        assert cx.verify().ok


def test_as_owner_and_the_owner_see_everything(world: tuple[Path, dict[str, object]]) -> None:
    path, _ = world
    with Cortex.open(path, actor="ops", as_owner=True) as cx:
        assert len(cx.find(Query(types=F, limit=10))) == 4
    with Cortex.open(path, actor=OWNER) as cx:
        assert len(cx.find(Query(types=F, limit=10))) == 4
    with pytest.raises(ValidationError, match="scopes"):
        Cortex.open(path, actor="ops", as_owner=True, scopes=[SHARED_W])


def test_a_view_holds_no_handle_and_journals_its_reader(
    world: tuple[Path, dict[str, object]],
) -> None:
    path, _ = world
    with Cortex.open(path, actor=OWNER) as cx:
        view = cx.view(Reader(actor="helper", scopes=(SHARED_W,)))
        assert not hasattr(view, "cx")
        uri = view.write(fact("via the view"), tags=["shared"])
        view.update(uri, fact("via the view, again"))
        view.tombstone(uri, "done")
        last = list(cx.journal())[-3:]
        assert [e.by for e in last] == ["helper"] * 3
        m = cx.resolve_latest(uri.id)
        assert m.head.actor_scope == OWNER and m.head.tombstone.by == "helper"  # type: ignore[union-attr]
        assert view.core_get() == {"user": {}, "agent": {}}
        with pytest.raises(NotFoundError, match="core memory"):
            view.core_update("user", "tz", "CET")


def test_the_owner_s_view_is_the_owner(tmp_path: Path) -> None:
    """A view for the store's owner reads and changes as the owner (``specs/query.md`` §3).

    Only the owner creates core memory's blocks (another actor never does), sets any level and
    writes any memory: its view does too.
    """
    with Cortex.open(tmp_path / "s", actor=OWNER) as cx:
        view = cx.view(Reader(actor=OWNER, clearance="public"))
        view.core_update("user", "tz", "CET")  # a new block: the owner's to create
        assert view.core_get()["user"] == {"tz": "CET"}
        uri = view.write(fact("the owner's secret"), sensitivity="restricted")
        assert view.resolve(uri).uri == uri  # its clearance binds no owner
        assert cx.sensitivity(uri) is Sensitivity.RESTRICTED
        view.update(uri, fact("the owner's secret, again"))
        view.tombstone(uri, "done")
        assert [e.by for e in list(cx.journal())[-2:]] == [OWNER, OWNER]
        # the owner's writes meet every competitor (claims.md §6): a new home ends the old one
        home = Fact(statement="Ada lives in Rome", subject="ada", predicate="home_city")
        cx.write(home)
        moved = Fact(statement="Ada lives in Oslo", subject="ada", predicate="home_city")
        assert cx.write(moved).outcome == "superseded"
        again = Fact(statement="Ada lives in Bern", subject="ada", predicate="home_city")
        assert view.write(again).outcome == "superseded"


def test_handles_of_one_store_share_one_environment(tmp_path: Path) -> None:
    path = tmp_path / "s"
    a = Cortex.open(path, actor=OWNER)
    b = Cortex.open(path, actor="helper")  # before: "already open in this process"
    c = Cortex.open(path, actor=None, readonly=True)
    try:
        assert a._kv._env is b._kv._env is c._kv._env
        uri = b.write(fact("b's"))
        assert a.resolve(uri).version.created_by == "helper"
        with pytest.raises(CortexError, match="read-only"):
            c.write(fact("no"))
        b.close()
        b.close()  # harmless
        with pytest.raises(CortexError, match="closed"):
            b.resolve(uri)
        assert a.resolve(uri).data == fact("b's")  # the others keep working
    finally:
        a.close()
        c.close()
    with Cortex.open(path, actor=None) as again:  # the environment was closed with the last
        assert again.verify().ok


@pytest.mark.parametrize("change", ["update", "update_head", "tombstone", "purge", "add_edge"])
def test_the_permission_check_is_made_again_inside_the_change(
    world: tuple[Path, dict[str, object]], change: str
) -> None:
    """The owner takes the memory out of the helper's writable scope after the helper's first
    check and before its transaction: the change is refused in the transaction, nothing is
    written. The helper's clock is the hook: it is read between the check and the write."""
    path, n = world
    target = n["shared"]
    owner = Cortex.open(path, actor=OWNER)
    calls = {"n": 0, "hit": False}

    def clock() -> datetime:
        calls["n"] += 1
        if calls["n"] == trigger and not calls["hit"]:
            calls["hit"] = True  # the owner's change lands between check and write
            owner.update_head(target, tags=["elsewhere"])  # type: ignore[arg-type]
        return datetime.now(UTC)

    trigger = 2  # _may_change reads the clock first; the next read precedes the transaction
    before = owner.resolve(target).head  # type: ignore[arg-type]
    with Cortex.open(path, actor="helper", scopes=[SHARED_W, OTHER_RO], clock=clock) as h:
        act = {
            "update": lambda: h.update(target, fact("rewritten by helper")),  # type: ignore[arg-type]
            "update_head": lambda: h.update_head(target, importance=0.9),  # type: ignore[arg-type]
            "tombstone": lambda: h.tombstone(target, "helper retires it"),  # type: ignore[arg-type]
            "purge": lambda: h.purge(target, "helper erases it"),  # type: ignore[arg-type]
            "add_edge": lambda: h.add_edge(target, "corroborates", n["other"]),  # type: ignore[arg-type]
        }[change]
        with pytest.raises(NotFoundError):  # now hidden from the helper: exactly as missing
            act()
    assert calls["hit"]
    after = owner.resolve(target)  # type: ignore[arg-type]
    assert after.head.tags == ("elsewhere",) and after.head.tombstone is None
    assert after.head.current_version == before.current_version
    assert after.head.importance == before.importance
    assert after.data == fact("shared note")
    assert {e.dst for e in owner.edges(target)} == {  # type: ignore[arg-type]
        n["priv"].id,
        n["pub"].id,
        n["other"].id,  # type: ignore[attr-defined]
    }
    assert all(e.by != "helper" for e in owner.journal())
    owner.close()


def test_a_memory_the_reader_may_not_write_is_refused_in_any_state(
    world: tuple[Path, dict[str, object]],
) -> None:
    """Visible but not writable is ``read_only`` (``query.md`` §3), tombstoned or not; hidden is
    missing, tombstoned or not."""
    path, n = world
    with Cortex.open(path, actor=OWNER) as owner:
        owner.tombstone(n["other"], "retired")  # type: ignore[arg-type]
        owner.tombstone(n["priv"], "retired")  # type: ignore[arg-type]
    with Cortex.open(path, actor="helper", scopes=[SHARED_W, OTHER_RO]) as h:
        changes = {
            "update": lambda m: h.update(m, fact("x")),
            "update_head": lambda m: h.update_head(m, importance=0.1),
            "tombstone": lambda m: h.tombstone(m, "x"),
            "purge": lambda m: h.purge(m, "x"),
            "add_edge": lambda m: h.add_edge(m, "references", n["shared"]),
        }
        for name, change in changes.items():
            with pytest.raises(ValidationError) as info:
                change(n["other"])
            assert info.value.rule == "read_only", name
            with pytest.raises(NotFoundError, match="no memory"):
                change(n["priv"])
    with Cortex.open(path, actor=OWNER) as owner:
        assert all(e.by == OWNER for e in owner.journal())


def test_a_restricted_journal_has_the_episodes_its_reader_sees(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with Cortex.open(path, actor=OWNER) as cx:
        seen = cx.ingest("a public note", visibility="actor_public").episode.id
        cx.ingest("a private note", visibility="private")
        above = cx.ingest("a board note", visibility="actor_public", sensitivity="confidential")
        cx.set_episode_sensitivity(seen, "public")  # an episode_update entry
    for clearance, want in (("internal", {seen}), ("confidential", {seen, above.episode.id})):
        with Cortex.open(path, actor="helper", clearance=clearance) as h:
            kinds = [(e.kind.label, e.id) for e in h.journal()]
            assert {i for _, i in kinds} == want
            assert ("episode", seen) in kinds and ("episode_update", seen) in kinds


def _owner_lands_at(owner: Cortex, trigger: int, change: object) -> object:
    """A clock for the helper's handle that runs the owner's ``change`` at its ``trigger``-th
    reading: the owner's change lands between the helper's first check and its transaction."""
    calls = {"n": 0, "hit": False}

    def clock() -> datetime:
        calls["n"] += 1
        if calls["n"] == trigger and not calls["hit"]:
            calls["hit"] = True
            change()  # type: ignore[operator]
        return datetime.now(UTC)

    clock.calls = calls  # type: ignore[attr-defined]
    return clock


@pytest.mark.parametrize(
    "change", ["update", "update_head", "tombstone", "purge", "add_edge", "resolve_conflict"]
)
def test_a_memory_left_visible_but_not_writable_is_refused_inside_the_change(
    world: tuple[Path, dict[str, object]], change: str
) -> None:
    """The owner moves the memory from the helper's writable scope to its read-only one between
    the helper's check and its transaction: the helper still sees it, may not change it, and
    the change is refused as read-only (``query.md`` §3) with nothing written."""
    path, n = world
    target = n["shared"]
    with Cortex.open(path, actor=OWNER) as owner:
        second = owner.write(fact("shared too"), tags=["shared"], visibility="scoped")
        before = owner.resolve(target).head  # type: ignore[arg-type]
        journal = len(list(owner.journal()))
        moved = lambda: owner.update_head(target, tags=["other"])  # type: ignore[arg-type]  # noqa: E731
        clock = _owner_lands_at(owner, 2, moved)
        with Cortex.open(path, actor="helper", scopes=[SHARED_W, OTHER_RO], clock=clock) as h:  # type: ignore[arg-type]
            act = {
                "update": lambda: h.update(target, fact("rewritten by helper")),  # type: ignore[arg-type]
                "update_head": lambda: h.update_head(target, importance=0.9),  # type: ignore[arg-type]
                "tombstone": lambda: h.tombstone(target, "helper retires it"),  # type: ignore[arg-type]
                "purge": lambda: h.purge(target, "helper erases it"),  # type: ignore[arg-type]
                "add_edge": lambda: h.add_edge(target, "corroborates", n["other"]),  # type: ignore[arg-type]
                "resolve_conflict": lambda: h.resolve_conflict(target, second, reason="x"),
            }[change]
            with pytest.raises(ValidationError) as info:
                act()
            assert info.value.rule == "read_only"
            assert h.resolve(target).head.tags == ("other",)  # type: ignore[arg-type]  # still seen
        assert clock.calls["hit"]  # type: ignore[attr-defined]
        after = owner.resolve(target).head  # type: ignore[arg-type]
        assert after.current_version == before.current_version and after.tombstone is None
        assert after.importance == before.importance
        assert len(list(owner.journal())) == journal + 1  # the owner's change only
        assert not owner.edges(second, types=["supersedes"], direction="both")


def test_an_edge_target_hidden_before_the_transaction_is_refused_as_missing(
    world: tuple[Path, dict[str, object]],
) -> None:
    """A restricted handle links only to memories its reader sees, checked inside the change:
    the target hidden between the helper's check and its transaction is missing."""
    path, n = world
    with Cortex.open(path, actor=OWNER) as owner:
        hidden = lambda: owner.update_head(n["other"], tags=["elsewhere"])  # type: ignore[arg-type]  # noqa: E731
        clock = _owner_lands_at(owner, 3, hidden)
        helper = Cortex.open(path, actor="helper", scopes=[SHARED_W, OTHER_RO], clock=clock)  # type: ignore[arg-type]
        with helper as h, pytest.raises(NotFoundError, match="no memory"):
            h.add_edge(n["shared"], "corroborates", n["other"])  # type: ignore[arg-type]
        assert clock.calls["hit"]  # type: ignore[attr-defined]
        assert not owner.edges(n["shared"], types=["corroborates"])  # type: ignore[arg-type]


def test_a_restricted_handle_resolves_conflicts_only_between_memories_it_may_write(
    world: tuple[Path, dict[str, object]],
) -> None:
    path, n = world
    with Cortex.open(path, actor="helper", scopes=[SHARED_W, OTHER_RO]) as h:
        for loser, error in ((n["other"], ValidationError), (n["priv"], NotFoundError)):
            with pytest.raises(error):  # read-only, then hidden
                h.resolve_conflict(n["shared"], loser, reason="x")  # type: ignore[arg-type]
            with pytest.raises(error):
                h.resolve_conflict(loser, n["shared"], reason="x")  # type: ignore[arg-type]
        with pytest.raises(ValidationError) as info:  # a ref of no ref's type: named as the owner's
            h.update(5, fact("x"))  # type: ignore[arg-type]
        assert info.value.field == "uri"
    with Cortex.open(path, actor=OWNER) as owner:
        assert not owner.edges(n["shared"], types=["supersedes"], direction="both")  # type: ignore[arg-type]
        with pytest.raises(ValidationError) as info:
            owner.update(5, fact("x"))  # type: ignore[arg-type]
        assert info.value.field == "uri"


@pytest.mark.parametrize("reverse", [False, True])
def test_a_restricted_journal_limit_counts_what_the_reader_gets(
    tmp_path: Path, reverse: bool
) -> None:
    """``journal(limit=n)`` on a restricted handle returns n entries the reader may see when
    the journal holds that many, however many hidden ones lie between them."""
    path = tmp_path / "s"
    with Cortex.open(path, actor=OWNER, metasync=False) as cx:
        shared = []
        for i in range(150):
            cx.write(fact(f"private {i}"))
            if i % 30 == 0:
                shared.append(cx.write(fact(f"shared {i}"), tags=["shared"], visibility="scoped"))
        everything = list(cx.journal(reverse=reverse))
    with Cortex.open(path, actor="helper", scopes=[SHARED_W]) as h:
        seen = list(h.journal(reverse=reverse))
        assert {e.id for e in seen} == {u.id for u in shared}  # type: ignore[attr-defined]
        assert len(seen) == 5
        for n in (0, 1, 3, 5, 9):
            got = list(h.journal(reverse=reverse, limit=n))
            assert got == seen[:n]
        start = everything[len(everything) // 2].seq
        got = list(h.journal(start, reverse=reverse, limit=2))
        expect = [e for e in seen if (e.seq <= start if reverse else e.seq >= start)][:2]
        assert got == expect and len(got) == 2


def test_a_taken_id_is_refused_alike_whether_hidden_or_visible(
    world: tuple[Path, dict[str, object]],
) -> None:
    """The one fact about a hidden memory a restricted handle learns (``query.md`` §3): that
    an id it already knows is taken. The refusal says no more for a hidden memory."""
    path, n = world
    with Cortex.open(path, actor="helper", scopes=[SHARED_W]) as h:
        mine = h.write(fact("helper's own"))
        messages = []
        for mid in (n["priv"].id, mine.id):  # type: ignore[attr-defined]
            with pytest.raises(CortexError) as caught:
                h.write(fact("taken"), id=mid)
            messages.append((type(caught.value), str(caught.value).replace(str(mid), "ID")))
        assert messages[0] == messages[1]
