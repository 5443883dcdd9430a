"""The in-process access model: a handle reads and writes as its actor; views hold no handle.

Several handles of one store in one process share one LMDB environment.
"""

from __future__ import annotations

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
