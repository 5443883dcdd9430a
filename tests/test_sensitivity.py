"""Sensitivity (issue 14 item 6, seed 003; ``specs/sensitivity.md``).

The store holds one Fact for every sensitivity x visibility x tag, and one episode for every
sensitivity x visibility. Nine readers (the owner; another actor without scopes and with the
scope "shared", at each clearance) read it through every read path, and each path must show
exactly what the rule of ``specs/sensitivity.md`` §3 allows (``expected``), hidden looking
exactly like missing. Then: export policy, changes (update_head, episodes, views, restricted
handles), verify and purge, the owner's zero-read path, the CLI and the MCP tokens.
"""

from __future__ import annotations

import itertools
import json
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from cortex import (
    CodecError,
    Cortex,
    EdgeType,
    Fact,
    Follow,
    FrameRef,
    IntegrityError,
    JournalKind,
    NewMemory,
    NotFoundError,
    ObjKind,
    Query,
    Reader,
    Scope,
    Sensitivity,
    TombstonedError,
    Uri,
    ValidationError,
    Verb,
    export_digest,
    export_store,
    import_bundle,
    parse_where,
)
from cortex.agent.extract import Context, Extracted, Extraction
from cortex.cli import main
from cortex.engine.store import FEATURES
from cortex.model.codec import EPISODE as EPISODE_CODEC
from cortex.model.codec import HEAD as HEAD_CODEC
from cortex.model.ids import MemoryId
from cortex.rules.sensitivity import DEFAULT, Gate, gate, level_of
from cortex.storage.keys import SENS, episode_key, head_key, sens_key
from cortex.storage.kv import seal
from cortex.transfer.bundle import read_bundle
from cortex.transfer.migrate import migrate
from tests import rows as R
from tests.test_serve import http, store  # noqa: F401 - fixtures: a served store and its tokens

OWNER = "owner"
HELPER = "helper"
SHARED = Scope(name="shared", tags=frozenset({"shared"}), writable=True)
LEVELS = tuple(Sensitivity)
VISIBILITIES = ("private", "scoped", "actor_public")
TAGS = ("shared", "other")
FRAME = FrameRef(verb=Verb.FIND, obj_kind=ObjKind.KNOWLEDGE, obj_ref="sens")
PUBLIC, INTERNAL, CONFIDENTIAL, RESTRICTED = LEVELS


@dataclass(frozen=True)
class Item:
    uri: Uri
    level: Sensitivity
    visibility: str
    tag: str


@dataclass(frozen=True)
class Ep:
    id: MemoryId
    level: Sensitivity
    visibility: str
    memory: Uri  # the (internal, actor_public, shared) memory drawn from it


@dataclass(frozen=True)
class World:
    path: Path
    items: tuple[Item, ...]
    episodes: tuple[Ep, ...]


class _OneFact:
    """An extractor: each episode yields one memory anyone with a scope or none may see."""

    def extract(self, content: str, context: Context) -> Extraction:
        fact = Fact(statement=f"drawn: {content}", subject="drawn", predicate="from")
        memory = NewMemory(data=fact, tags=("shared",), visibility="actor_public")
        return Extraction(items=(Extracted(memory=memory, quote=content, span=(0, 4)),))


def _build(path: Path) -> World:
    items = []
    episodes = []
    with Cortex.open(path, actor=OWNER) as cx:
        for i, (level, vis, tag) in enumerate(itertools.product(LEVELS, VISIBILITIES, TAGS)):
            uri = cx.write(
                Fact(
                    statement=f"Sam sensmark {level.label} {vis} {tag}",
                    subject="sam",
                    predicate=f"p{i}",
                ),
                tags=[tag],
                frames=[FRAME],
                visibility=vis,
                sensitivity=level,
            )
            items.append(Item(uri, level, vis, tag))
        for a, b in itertools.pairwise(items):  # a ring of references, for walks and edges
            cx.add_edge(a.uri, EdgeType.REFERENCES, b.uri)
        cx.add_edge(items[-1].uri, EdgeType.REFERENCES, items[0].uri)
        for level, vis in itertools.product(LEVELS, ("private", "actor_public")):
            res = cx.ingest(
                f"note sensmark episode {level.label} {vis}",
                visibility=vis,
                sensitivity=level,
                extractor=_OneFact(),
            )
            episodes.append(Ep(res.episode.id, level, vis, res.memories[0]))
        assert cx.verify().ok
    return World(path, tuple(items), tuple(episodes))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return _build(tmp_path_factory.mktemp("sens") / "s.cortex")


READERS = {
    "owner": Reader(actor=OWNER),
    **{f"plain-{lv.label}": Reader(actor=HELPER, clearance=lv) for lv in LEVELS},
    **{f"scoped-{lv.label}": Reader(actor=HELPER, scopes=(SHARED,), clearance=lv) for lv in LEVELS},
}


def expected(rd: Reader, item: Item) -> bool:
    """The golden rule (``specs/sensitivity.md`` §3): visibility and scopes, then clearance."""
    if rd.actor == OWNER:
        return True
    if item.visibility == "private":
        return False
    seen = item.tag == "shared" if rd.scopes else item.visibility == "actor_public"
    return seen and item.level <= rd.clearance


def expected_episode(rd: Reader, ep: Ep) -> bool:
    if rd.actor == OWNER:
        return True
    return ep.visibility == "actor_public" and ep.level <= rd.clearance


def test_the_golden_matrix_counts() -> None:
    """What each reader sees of the 24 memories, as documented in ``sensitivity.md`` §3."""
    items = [
        Item(Uri.parse(f"cortex://Fact/{MemoryId.parse('01' + '0' * 24)}#1"), lv, v, t)
        for lv, v, t in itertools.product(LEVELS, VISIBILITIES, TAGS)
    ]
    counts = {name: sum(expected(rd, it) for it in items) for name, rd in READERS.items()}
    assert counts == {
        "owner": 24,
        "plain-public": 2,  # actor_public (both tags) at public
        "plain-internal": 4,
        "plain-confidential": 6,
        "plain-restricted": 8,
        "scoped-public": 2,  # scoped and actor_public with the tag "shared", at public
        "scoped-internal": 4,
        "scoped-confidential": 6,
        "scoped-restricted": 8,
    }


# ---------------------------------------------------------------------------------------------
# Every read path


def _try(fn: Callable[[], Any]) -> bool:
    try:
        fn()
    except NotFoundError as exc:
        assert "no memory" in str(exc) or "no episode" in str(exc) or "tombstoned" in str(exc)
        return False
    return True


def _paths(cx: Cortex, rd: Reader, world: World) -> dict[str, set[str]]:
    """What ``rd`` sees of the 24 facts, path by path (URIs)."""
    view = cx.view(rd)
    mine = {str(i.uri) for i in world.items}

    def uris(memories: Any) -> set[str]:
        return {str(m.uri) for m in memories} & mine

    out = {
        "find types": uris(view.find(Query(types=["Fact"], limit=200)).memories),
        "find text": uris(view.find(Query(text="sensmark", limit=200)).memories),
        "find tags": uris(view.find(Query(tags=["shared"], limit=200)).memories)
        | uris(view.find(Query(tags=["other"], limit=200)).memories),
        "find frames": uris(view.find(Query(frames=["find:knowledge:sens"], limit=200)).memories),
        "find where": uris(
            view.find(
                Query(types=["Fact"], where=parse_where("data.subject = sam"), limit=200)
            ).memories
        ),
        "context": uris(view.context("find", ["knowledge:sens"], budget_tokens=4000).memories),
        "context recall": uris(
            view.context(
                "analyze", ["nothing"], budget_tokens=4000, query="sensmark", recall_limit=50
            ).memories
        ),
        "about": uris(view.about("sam", limit=200).memories),
        "chain": set(),
    }
    for it in world.items:
        u = it.uri
        checks: dict[str, Callable[[], Any]] = {
            "resolve": lambda u=u: view.resolve(u),
            "resolve_latest": lambda u=u: view.resolve_latest(u.id),
            "history": lambda u=u: view.history(u.id),
            "resolve_as_of": lambda u=u: view.resolve_as_of(u.id, cx._now()),
            "chain": lambda u=u: cx.chain(u, reader=rd),
            "sensitivity": lambda u=u: cx.sensitivity(u, reader=rd),
            "walk start": lambda u=u: view.find(
                Query(from_=(u.id,), follow=Follow(min_hops=0, max_hops=0), limit=5)
            ),
        }
        for name, fn in checks.items():
            if _try(fn):
                out.setdefault(name, set()).add(str(u))
            else:
                out.setdefault(name, set())
    walked: set[str] = set()
    for it in world.items:  # a walk never steps onto what the reader may not see
        try:
            res = view.find(
                Query(from_=(it.uri.id,), follow=Follow(types=("references",)), limit=5)
            )
        except NotFoundError:
            continue
        walked |= uris(res.memories)
    out["walk"] = walked
    return out


@pytest.mark.parametrize("name", list(READERS))
def test_every_read_path_shows_exactly_what_the_rule_allows(world: World, name: str) -> None:
    rd = READERS[name]
    want = {str(i.uri) for i in world.items if expected(rd, i)}
    with Cortex.open(world.path, actor=OWNER) as cx:
        seen = _paths(cx, rd, world)
        for path, got in seen.items():
            if path == "walk":
                assert got <= want, path
            else:
                assert got == want, (name, path, sorted(got ^ want))
        # facets and search count and return only what the reader sees
        drawn = [Item(ep.memory, INTERNAL, "actor_public", "shared") for ep in world.episodes]
        tags = Counter(i.tag for i in (*world.items, *drawn) if expected(rd, i))
        facets = cx.view(rd).facets(by="tag")
        assert {t: facets.get(t, 0) for t in TAGS} == {t: tags.get(t, 0) for t in TAGS}
        found = {str(h.uri) for h in cx.view(rd).search("what is sam sensmark", limit=50).hits}
        mine = {str(i.uri) for i in world.items}
        assert found & mine <= want
        # the levels read back are the levels written
        for it in world.items:
            if expected(rd, it):
                assert cx.sensitivity(it.uri, reader=rd) is it.level


@pytest.mark.parametrize("name", list(READERS))
def test_episodes_on_every_path(world: World, name: str) -> None:
    rd = READERS[name]
    want = {ep.id for ep in world.episodes if expected_episode(rd, ep)}
    with Cortex.open(world.path, actor=OWNER) as cx:
        view = cx.view(rd)
        assert {ep.id for ep in cx.episodes(reader=rd)} == want
        got = {ep.id for ep in world.episodes if _try(lambda ep=ep: view.episode(ep.id))}
        assert got == want
        for ep in world.episodes:
            seen = ep.id in want
            assert _try(lambda ep=ep: cx.memories_from(ep.id, reader=rd)) is seen
            assert _try(lambda ep=ep: cx.episode_sensitivity(ep.id, reader=rd)) is seen
            # the memory drawn from it is internal and actor_public: its episode link shows
            # only when the episode does
            if rd.clearance >= INTERNAL or rd.actor == OWNER:
                assert _try(lambda ep=ep: cx.episode_of(ep.memory, reader=rd)) is seen
        res = view.find(Query(text="sensmark episode", limit=5, evidence=50))
        assert {e.episode for e in res.evidence} == want
        bundle = view.context(
            "analyze", ["x"], budget_tokens=4000, query="note sensmark episode", evidence=50
        )
        assert {e.episode for e in bundle.evidence} == want
        # memories filtered by episode: only through the episodes the reader sees
        for ep in world.episodes:
            drawn = view.find(Query(types=["Fact"], episode=ep.id, limit=5)).memories
            assert bool(drawn) is (
                (ep.id in want and rd.clearance >= INTERNAL) or rd.actor == OWNER
            )


@pytest.mark.parametrize("clearance", LEVELS)
@pytest.mark.parametrize("scoped", [False, True])
def test_a_restricted_handle_applies_its_clearance(
    world: World, clearance: Sensitivity, scoped: bool
) -> None:
    rd = Reader(actor=HELPER, scopes=(SHARED,) if scoped else (), clearance=clearance)
    want = {i.uri.id for i in world.items if expected(rd, i)}
    with Cortex.open(
        world.path, actor=HELPER, scopes=rd.scopes, clearance=clearance.label
    ) as handle:
        got = {m.id for m in handle.find(Query(types=["Fact"], limit=200)).memories}
        assert got & {i.uri.id for i in world.items} == want
        for it in world.items:
            seen = it.uri.id in want
            assert _try(lambda it=it: handle.resolve(it.uri)) is seen
            assert _try(lambda it=it: handle.edges(it.uri, direction="both")) is seen
            assert _try(lambda it=it: handle.salience_state(it.uri)) is seen
            if seen:  # an edge shows only when both ends do
                for e in handle.edges(it.uri, direction="both"):
                    assert e.src in want and e.dst in want
        visible_eps = {ep.id for ep in world.episodes if expected_episode(rd, ep)}
        for entry in handle.journal():
            assert entry.id is not None  # store-wide entries are left out
            if entry.kind in (JournalKind.EPISODE, JournalKind.EPISODE_UPDATE):
                assert entry.id in visible_eps
            elif entry.edge is not None:
                assert entry.id in want | _drawn(world) and entry.dst in want | _drawn(world)
            else:
                assert entry.id in want | _drawn(world)


def _drawn(world: World) -> set[MemoryId]:
    return {ep.memory.id for ep in world.episodes}


def test_a_damaged_key_cannot_lower_a_level(tmp_path: Path) -> None:
    """Format 9: the level is in the sealed head. A ``sens/`` key (format 8's, e.g. left by a
    damaged key) changes nothing a reader sees and verify reports it; a damaged head fails
    for every reader, the owner too, instead of reading as ``internal``."""
    path = tmp_path / "s.cortex"
    with Cortex.open(path, actor=OWNER) as cx:
        a = cx.write(Fact(statement="a secret plan", subject="x", predicate="y"), tags=["shared"],
                     visibility="actor_public", sensitivity="confidential")  # fmt: skip
        b = cx.write(Fact(statement="a plain plan", subject="x", predicate="z"), tags=["shared"],
                     visibility="actor_public")  # fmt: skip
        helper = cx.view(Reader(actor=HELPER))
        assert {m.id for m in helper.find(Query(types=["Fact"], limit=10)).memories} == {b.id}
        # a planted sens/ entry saying internal (what a damaged format-8 key did) is ignored
        cx._kv.write(lambda txn: txn.put(sens_key(a.id), seal(b"\x02")))
        assert {m.id for m in helper.find(Query(types=["Fact"], limit=10)).memories} == {b.id}
        with pytest.raises(NotFoundError):
            helper.resolve(a)
        report = cx.verify()
        assert not report.ok and any("sens/m/" in p.record for p in report.problems)
        cx._kv.write(lambda txn: txn.delete(sens_key(a.id)))
        assert cx.verify().ok
        # the level byte of the head flipped (confidential -> internal): the seal catches it
        with cx._kv.read() as txn:
            hkey = R.head_key(txn, a.id)
            raw = txn.get(hkey)
        assert raw is not None
        payload = HEAD_CODEC.encode(_head(cx, a.id), "h")
        assert payload.endswith(b"\x0e\x03")
        flipped = bytearray(raw)
        flipped[len(payload) - 1] = 0x02
        cx._kv.write(lambda txn: txn.put(hkey, bytes(flipped)))
        with pytest.raises(IntegrityError):
            cx.resolve(a)
        with pytest.raises(IntegrityError):
            helper.resolve(a)
        assert not cx.verify().ok


def _head(cx: Cortex, mid: MemoryId) -> Any:
    with cx._kv.read() as txn:
        return cx.engine.head(txn, mid)


def _levelled(
    cx: Cortex, episodes: bool, memories: bool
) -> tuple[dict[Sensitivity, MemoryId], ...]:
    """One memory and one episode of each level (labels only of the kinds asked for)."""
    mems, eps = {}, {}
    for lv in LEVELS:
        level = lv if memories else None
        uri = cx.write(Fact(statement=f"gate {lv.label}", subject="g", predicate=lv.label),
                       visibility="actor_public", sensitivity=level)  # fmt: skip
        mems[lv] = uri.id
        ep = cx.ingest(f"gate episode {lv.label}", visibility="actor_public",
                       sensitivity=lv if episodes else None)  # fmt: skip
        eps[lv] = ep.episode.id
    return mems, eps


@pytest.mark.parametrize(("memories", "episodes"), [(True, True), (True, False), (False, True)])
def test_the_gate_admits_exactly_the_levels_at_or_below_the_clearance(
    tmp_path: Path, memories: bool, episodes: bool
) -> None:
    """``Gate`` (§3): a level at or below the clearance passes, and an unset one is internal.

    The gate decides from the head or episode record alone (format 9): it holds no snapshot.
    """
    with Cortex.open(tmp_path / "s", actor=OWNER) as cx:
        mems, eps = _levelled(cx, episodes=episodes, memories=memories)
        with cx._kv.read() as txn:
            heads = {lv: cx.engine.head(txn, mid) for lv, mid in mems.items()}
            records = {lv: cx.engine.episode_record(txn, eid) for lv, eid in eps.items()}
        for clearance in LEVELS:
            g = Gate(clearance)
            for lv in LEVELS:
                m_level = lv if memories else DEFAULT
                e_level = lv if episodes else DEFAULT
                assert level_of(heads[lv]) is m_level and level_of(records[lv]) is e_level
                assert g.memory(heads[lv]) is (m_level <= clearance), (clearance, lv)
                assert g.episode(records[lv]) is (e_level <= clearance), (clearance, lv)
        # internal is the field's absence: the records hold None, and encode without key 14
        assert heads[INTERNAL].sensitivity is None and records[INTERNAL].sensitivity is None
        if memories:
            assert heads[PUBLIC].sensitivity is PUBLIC
            assert HEAD_CODEC.encode(heads[PUBLIC], "h").endswith(b"\x0e\x01")
        if episodes:
            assert EPISODE_CODEC.encode(records[RESTRICTED], "e").endswith(b"\x0f\x04")


def test_internal_is_never_written_as_a_code(tmp_path: Path) -> None:
    """A head or episode record holding code 2 (internal) is refused: one value, one encoding."""
    with Cortex.open(tmp_path / "s", actor=OWNER) as cx:
        uri = cx.write(Fact(statement="x", subject="s", predicate="p"), sensitivity="public")
        head = _head(cx, uri.id)
    with pytest.raises(ValidationError, match="absence"):
        HEAD_CODEC.encode(replace(head, sensitivity=INTERNAL), "head")
    good = HEAD_CODEC.encode(head, "head")
    with pytest.raises(CodecError, match="absence"):
        HEAD_CODEC.decode(good[:-1] + b"\x02", "head")


def test_who_gets_a_gate() -> None:
    """The owner, no reader (the owner) and a reader cleared for restricted pass everything."""
    assert gate(None, OWNER) is None
    assert gate(Reader(actor=OWNER, clearance=PUBLIC), OWNER) is None
    assert gate(Reader(actor=HELPER, clearance=RESTRICTED), OWNER) is None
    for lv in (PUBLIC, INTERNAL, CONFIDENTIAL):
        g = gate(Reader(actor=HELPER, clearance=lv), OWNER)
        assert g is not None and g.clearance is lv


# ---------------------------------------------------------------------------------------------
# Writes and changes


def test_update_head_changes_the_level_and_journals_the_field(tmp_path: Path) -> None:
    with Cortex.open(tmp_path / "s", actor=OWNER) as cx:
        uri = cx.write(Fact(statement="Sam earns 100", subject="sam", predicate="pay"),
                       visibility="actor_public")  # fmt: skip
        helper = Reader(actor=HELPER)
        assert cx.sensitivity(uri) is INTERNAL and cx.view(helper).resolve(uri)
        head = cx.update_head(uri, sensitivity="confidential")
        assert head.current_version == 1 and cx.sensitivity(uri) is CONFIDENTIAL
        entry = list(cx.journal())[-1]
        assert (entry.kind, entry.id, entry.fields) == (
            JournalKind.UPDATE_HEAD, uri.id, ("sensitivity",)
        )  # fmt: skip
        with pytest.raises(NotFoundError, match="no memory"):
            cx.view(helper).resolve(uri)
        cx.update_head(uri, sensitivity=Sensitivity.PUBLIC, tags=["t"])
        assert list(cx.journal())[-1].fields == ("sensitivity", "tags")
        assert _head(cx, uri.id).sensitivity is PUBLIC  # in the head (format 9)
        cx.update_head(uri, sensitivity="internal")  # the default: the field is absent
        assert _head(cx, uri.id).sensitivity is None
        with cx._kv.read() as txn:
            assert next(txn.keys(SENS), None) is None
        with pytest.raises(ValidationError) as bad:
            cx.update_head(uri, sensitivity="secret")
        assert (bad.value.field, bad.value.rule) == ("sensitivity", "enum")
        with pytest.raises(ValidationError, match="update_head"):  # an update keeps the level
            cx.update(uri, Fact(statement="Sam earns 200", subject="sam", predicate="pay"),
                      sensitivity="public")  # fmt: skip
        # the new version keeps the level
        cx.update_head(uri, sensitivity="restricted")
        v2 = cx.update(uri, Fact(statement="Sam earns 200", subject="sam", predicate="pay"))
        assert cx.sensitivity(v2) is RESTRICTED
        cx.tombstone(uri, "gone")
        with pytest.raises(TombstonedError):
            cx.update_head(uri, sensitivity="public")
        assert cx.verify().ok


def test_write_many_and_levels_in_one_transaction(tmp_path: Path) -> None:
    with Cortex.open(tmp_path / "s", actor=OWNER) as cx:
        a, b = cx.write_many([
            NewMemory(data=Fact(statement="a", subject="s", predicate="a"), sensitivity="public"),
            NewMemory(data=Fact(statement="b", subject="s", predicate="b")),
        ])  # fmt: skip
        assert (cx.sensitivity(a), cx.sensitivity(b)) == (PUBLIC, INTERNAL)
        with pytest.raises(ValidationError) as bad:  # a bad level writes nothing
            cx.write_many([
                NewMemory(data=Fact(statement="c", subject="s", predicate="c")),
                NewMemory(data=Fact(statement="d", subject="s", predicate="d"), sensitivity="x"),
            ])  # fmt: skip
        assert bad.value.field == "items[1].sensitivity"
        assert cx.stats()["memories"] == 2


def test_views_write_only_up_to_their_clearance(world: World, tmp_path: Path) -> None:
    path = tmp_path / "s.cortex"
    with Cortex.open(path, actor=OWNER) as cx:
        secret = cx.write(
            Fact(statement="Ada lives in Zurich", subject="ada", predicate="home_city"),
            tags=["shared"], visibility="scoped", sensitivity="confidential",
        )  # fmt: skip
        view = cx.view(Reader(actor=HELPER, scopes=(SHARED,)))  # internal
        fact = Fact(statement="Ada plays chess", subject="ada", predicate="hobby")
        for level in ("confidential", "restricted"):
            with pytest.raises(ValidationError) as bad:
                view.write(fact, tags=["shared"], sensitivity=level)
            assert (bad.value.field, bad.value.rule) == ("sensitivity", "clearance")
        ok = view.write(fact, tags=["shared"], sensitivity="public")
        assert cx.sensitivity(ok) is PUBLIC
        # what it cannot see it cannot change, exactly as if it were missing
        for change in (
            lambda: view.update(secret, Fact(statement="x", subject="ada", predicate="home_city")),
            lambda: view.tombstone(secret, "x"),
        ):
            with pytest.raises(NotFoundError, match="no memory"):
                change()
        # a hidden memory is no duplicate and no competitor of its writes
        again = view.write(
            Fact(statement="Ada lives in Zurich", subject="ada", predicate="home_city"),
            tags=["shared"], dedupe=True,
        )  # fmt: skip
        assert again.outcome == "created" and again.id != secret.id
        assert not again.supersedes and not again.superseded_by and not again.conflicts_with
        assert cx.resolve_latest(secret).head.tombstone is None
        # ingest through a view: the episode and each drawn memory up to the clearance
        with pytest.raises(ValidationError, match="clearance"):
            view.ingest("a confidential note", sensitivity="confidential")
        with pytest.raises(ValidationError) as bad:
            view.ingest("a note", extractor=_Levelled("restricted"))
        assert bad.value.field == "items[0].sensitivity"
        assert len(cx.episodes()) == 0
        # a view cleared for confidential sees the memory, writes at that level
        high = cx.view(Reader(actor=HELPER, scopes=(SHARED,), clearance="confidential"))
        assert high.resolve(secret).data == Fact(
            statement="Ada lives in Zurich", subject="ada", predicate="home_city"
        )
        assert cx.sensitivity(high.write(fact, tags=["shared"], sensitivity="confidential")) is (
            CONFIDENTIAL
        )
        assert cx.verify().ok


class _Levelled:
    def __init__(self, level: str) -> None:
        self.level = level

    def extract(self, content: str, context: Context) -> Extraction:
        fact = Fact(statement="drawn", subject="d", predicate="p")
        memory = NewMemory(data=fact, tags=("shared",), sensitivity=self.level)
        return Extraction(items=(Extracted(memory=memory),))


def test_restricted_handles_change_only_up_to_their_clearance(tmp_path: Path) -> None:
    path = tmp_path / "s.cortex"
    with Cortex.open(path, actor=OWNER) as cx:
        shared = cx.write(Fact(statement="shared note", subject="n", predicate="a"),
                          tags=["shared"], visibility="scoped")  # fmt: skip
        hidden = cx.write(Fact(statement="hidden note", subject="n", predicate="b"),
                          tags=["shared"], visibility="scoped",
                          sensitivity="restricted")  # fmt: skip
        with Cortex.open(path, actor=HELPER, scopes=[SHARED]) as h:
            with pytest.raises(ValidationError, match="clearance"):
                h.update_head(shared, sensitivity="confidential")
            h.update_head(shared, sensitivity="public")
            assert cx.sensitivity(shared) is PUBLIC
            for change in (
                lambda: h.update_head(hidden, tags=["shared", "x"]),
                lambda: h.tombstone(hidden, "x"),
                lambda: h.add_edge(shared, "references", hidden),
                lambda: h.attest([hidden]),
                lambda: h.resolve_conflict(shared, hidden, reason="x"),
            ):
                with pytest.raises(NotFoundError, match="no memory"):
                    change()
            with pytest.raises(ValidationError, match="clearance"):
                h.write(Fact(statement="x", subject="n", predicate="c"), sensitivity="restricted")
            with pytest.raises(ValidationError) as bad:
                h.write_many([NewMemory(data=Fact(statement="y", subject="n", predicate="d"),
                                        sensitivity="confidential")])  # fmt: skip
            assert bad.value.field == "items[0].sensitivity"
            with pytest.raises(ValidationError, match="owner"):
                h.set_episode_sensitivity(MemoryId.parse("01" + "0" * 24), "public")
        with pytest.raises(ValidationError, match="clearance"):  # the owner's handle takes none
            Cortex.open(path, actor=OWNER, clearance="public")
        with pytest.raises(ValidationError, match="clearance"):
            Cortex.open(path, actor=HELPER, clearance="secret")


def test_a_batch_by_a_restricted_handle_never_competes_with_a_hidden_memory(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.cortex"
    with Cortex.open(path, actor=OWNER) as cx:
        old = cx.write(Fact(statement="Sam lives in Bern", subject="sam", predicate="home_city"),
                       visibility="actor_public", sensitivity="confidential")  # fmt: skip
        with Cortex.open(path, actor=HELPER) as h:
            [new] = h.write_many(
                [Fact(statement="Sam lives in Basel", subject="sam", predicate="home_city")]
            )
            assert new.outcome == "created" and not new.supersedes
            res = h.ingest("Sam moved", extractor=_Moved())
        assert [link.memory.id for link in cx.chain(old)] == [old.id]  # untouched
        # the ingested memory supersedes the helper's own Basel, never the hidden Bern
        assert [u.id for u in res.memories[0].supersedes] == [new.id]


def test_a_batch_competes_with_what_it_wrote_at_the_writer_s_clearance(tmp_path: Path) -> None:
    """A batch applies the chain rules in order (``claims.md`` §6): a later item meets an
    earlier one the writer sees — at a public clearance, the public memory it just wrote (its
    level is read in the batch's own transaction, where the memory exists)."""
    path = tmp_path / "s.cortex"
    with Cortex.open(path, actor=OWNER):
        pass
    with Cortex.open(path, actor=HELPER, clearance="public") as h:
        first, second = h.write_many(
            [
                NewMemory(data=Fact(statement="Sam lives in Bern", subject="sam",
                                    predicate="home_city", confidence=0.5),
                          sensitivity="public"),
                NewMemory(data=Fact(statement="Sam lives in Basel", subject="sam",
                                    predicate="home_city", confidence=0.9),
                          sensitivity="public"),
            ]
        )  # fmt: skip
        assert first.outcome == "created"
        assert second.outcome == "superseded" and [u.id for u in second.supersedes] == [first.id]


class _Moved:
    def extract(self, content: str, context: Context) -> Extraction:
        fact = Fact(statement="Sam lives in Genf", subject="sam", predicate="home_city")
        return Extraction(items=(Extracted(memory=NewMemory(data=fact)),))


def test_episode_levels(tmp_path: Path) -> None:
    with Cortex.open(tmp_path / "s", actor=OWNER) as cx:
        ep = cx.ingest("the board minutes", visibility="actor_public", sensitivity="confidential")
        eid = ep.episode.id
        helper = Reader(actor=HELPER)
        assert cx.episode_sensitivity(eid) is CONFIDENTIAL
        with pytest.raises(NotFoundError, match="no episode"):
            cx.episode(eid, reader=helper)
        cx.set_episode_sensitivity(eid, "internal")
        assert cx.episode(eid, reader=helper).id == eid
        entry = list(cx.journal())[-1]
        assert (entry.kind, entry.id, entry.fields) == (
            JournalKind.EPISODE_UPDATE, eid, ("sensitivity",)
        )  # fmt: skip
        assert entry.hash == ep.episode.hash
        cx.set_episode_sensitivity(eid, "restricted")
        cx.purge_episode(eid, "erasure")
        with cx._kv.read() as txn:  # the purge removes the level: nothing is left to protect
            assert cx.engine.episode_record(txn, eid).sensitivity is None
        with pytest.raises(ValidationError, match="purged"):
            cx.set_episode_sensitivity(eid, "restricted")
        with pytest.raises(NotFoundError):
            cx.set_episode_sensitivity(MemoryId.parse("01" + "0" * 24), "public")
        with pytest.raises(ValidationError, match="must be one of public"):
            cx.ingest("x", sensitivity="nope")
        assert cx.verify().ok


def test_purge_removes_the_level(tmp_path: Path) -> None:
    with Cortex.open(tmp_path / "s", actor=OWNER) as cx:
        uri = cx.write(Fact(statement="x", subject="s", predicate="p"), sensitivity="restricted")
        cx.purge(uri, "erasure")
        assert _head(cx, uri.id).sensitivity is None
        assert cx.sensitivity(uri) is INTERNAL
        assert cx.verify().ok


def test_on_both_engines(store_path: Any, place: Callable[[str], Any], tmp_path: Path) -> None:
    """The levels, the gate, a change, a purge, verify, export and import, on LMDB and PG."""
    helper = Reader(actor=HELPER, scopes=(SHARED,))
    with Cortex.open(store_path, actor=OWNER) as cx:
        plain = [
            cx.write(
                Fact(statement=f"note {i}", subject="n", predicate=f"p{i}"),
                tags=["shared"],
                visibility="scoped",
            )
            for i in range(3)
        ]
        view = cx.view(helper)
        assert len(view.find(Query(types=["Fact"], limit=10)).memories) == 3  # no label yet
        secret = cx.write(
            Fact(statement="note secret", subject="n", predicate="s"),
            tags=["shared"],
            visibility="scoped",
            sensitivity="confidential",
        )
        ep = cx.ingest("minutes", visibility="actor_public", sensitivity="restricted").episode
        assert {m.id for m in view.find(Query(types=["Fact"], limit=10)).memories} == {
            u.id for u in plain
        }
        assert cx.episodes(reader=helper) == []
        cx.update_head(plain[0], sensitivity="restricted")
        assert len(view.find(Query(text="note", limit=10)).memories) == 2
        cx.purge(plain[0], "erasure")
        assert cx.verify().ok
        report = export_store(cx, tmp_path / "b.jsonl", include_confidential=True)
        assert (report.memories, report.confidential, report.withheld) == (4, 1, 1)
        assert list(cx.journal())[-1].kind is JournalKind.EXPORT
    with Cortex.open(place("copy"), actor=OWNER) as dst:
        import_bundle(dst, tmp_path / "b.jsonl")
        assert dst.sensitivity(secret) is CONFIDENTIAL
        with pytest.raises(NotFoundError):
            dst.episode(ep.id)
        assert dst.verify().ok


# ---------------------------------------------------------------------------------------------
# verify


@pytest.mark.parametrize(
    ("name", "what"),
    [
        ("sens entry", "format-8 sensitivity entry"),
        ("sens episode entry", "format-8 sensitivity entry"),
        ("malformed sens key", "format-8 sensitivity entry"),
        ("purged memory", "purged memory holds a level"),
        ("purged episode", "purged episode holds a level"),
    ],
)
def test_verify_catches_a_bad_level(tmp_path: Path, name: str, what: str) -> None:
    with Cortex.open(tmp_path / "s", actor=OWNER) as cx:
        uri = cx.write(Fact(statement="x", subject="s", predicate="p"), sensitivity="public")
        gone = cx.write(Fact(statement="y", subject="s", predicate="q"))
        cx.purge(gone, "erasure")
        ep = cx.ingest("text").episode
        cx.purge_episode(ep.id, "erasure")
        assert cx.verify().ok
        with cx._kv.read() as txn:
            gone_head = cx.engine.head(txn, gone.id)
            gone_key = R.head_key(txn, gone.id)
            gone_ep = cx.engine.episode_record(txn, ep.id)
        key, value = {
            "sens entry": (sens_key(uri.id), seal(b"\x03")),
            "sens episode entry": (sens_key(ep.id, episode=True), seal(b"\x03")),
            "malformed sens key": (SENS + b"m/" + b"\x01" * 3, seal(b"\x03")),
            "purged memory": (
                gone_key,
                seal(HEAD_CODEC.encode(replace(gone_head, sensitivity=PUBLIC), "h")),
            ),
            "purged episode": (
                episode_key(ep.id),
                seal(EPISODE_CODEC.encode(replace(gone_ep, sensitivity=PUBLIC), "e")),
            ),
        }[name]
        cx._kv.write(lambda txn: txn.put(key, value))
        report = cx.verify()
        assert not report.ok
        assert any(what in p.what for p in report.problems), report.problems


# ---------------------------------------------------------------------------------------------
# Export and import


def _bundle_ids(path: Path) -> tuple[set[MemoryId], set[MemoryId], int]:
    b = read_bundle(path.read_bytes())
    return {h.id for h, _ in b.memories}, {e.id for e in b.episodes}, len(b.edges)


@pytest.mark.parametrize("encoding", ["jsonl", "cbor"])
@pytest.mark.parametrize("include", [False, True])
def test_export_policy(world: World, tmp_path: Path, encoding: str, include: bool) -> None:
    out = tmp_path / f"b.{encoding}"
    allowed = {PUBLIC, INTERNAL} | ({CONFIDENTIAL} if include else set())
    with Cortex.open(world.path, actor=OWNER) as cx:
        before = len(list(cx.journal()))
        report = export_store(cx, out, encoding=encoding, include_confidential=include)  # type: ignore[arg-type]
        entries = list(cx.journal(before + 1))
    mems, eps, n_edges = _bundle_ids(out)
    facts = {i.uri.id for i in world.items if i.level in allowed}
    assert mems - _drawn(world) == facts
    assert eps == {ep.id for ep in world.episodes if ep.level in allowed}
    withheld = [i for i in world.items if i.level not in allowed]
    withheld_eps = [e for e in world.episodes if e.level not in allowed]
    assert report.withheld == len(withheld) + len(withheld_eps)
    assert report.confidential == (6 + 2 if include else 0)
    # an edge leaves only with both its ends (the ring loses the edges at each withheld fact)
    ring = list(itertools.pairwise([*world.items, world.items[0]]))
    assert n_edges == sum(a.level in allowed and b.level in allowed for a, b in ring)
    if include:  # journalled, without content: how many, the encoding and the digest
        [entry] = entries
        assert entry.kind is JournalKind.EXPORT and entry.id is None
        assert entry.reason is not None and "8 confidential" in entry.reason
        assert report.sha256 in entry.reason and "Sam" not in entry.reason
    else:
        assert entries == []
    # the bundle carries the levels; an import keeps them
    with Cortex.open(tmp_path / "copy", actor=OWNER) as dst:
        imported = import_bundle(dst, out)
        assert imported.memories_added == len(mems)
        for it in world.items:
            if it.level in allowed:
                assert dst.sensitivity(it.uri) is it.level
        for ep in world.episodes:
            if ep.level in allowed:
                assert dst.episode_sensitivity(ep.id) is ep.level
        assert dst.verify().ok
        again = import_bundle(dst, out)  # the same bundle again changes nothing
        assert again.memories_added == 0 and again.episodes_added == 0
        rd = Reader(actor=HELPER, scopes=(SHARED,), clearance="public")
        visible = {m.id for m in dst.view(rd).find(Query(types=["Fact"], limit=100)).memories}
        assert visible - _drawn(world) == {
            i.uri.id for i in world.items if expected(rd, i) and i.level in allowed
        }


def test_a_restricted_handle_exports_only_what_it_sees(world: World, tmp_path: Path) -> None:
    rd = Reader(actor=HELPER, scopes=(SHARED,), clearance=CONFIDENTIAL)
    with Cortex.open(world.path, actor=HELPER, scopes=[SHARED], clearance="confidential") as h:
        report = export_store(h, tmp_path / "b.jsonl", include_confidential=True)
    mems, eps, _ = _bundle_ids(tmp_path / "b.jsonl")
    assert mems - _drawn(world) == {i.uri.id for i in world.items if expected(rd, i)}
    assert eps == {ep.id for ep in world.episodes if expected_episode(rd, ep)}
    assert report.withheld == 0  # it sees nothing restricted: nothing of its view stays behind


def test_bundles_without_labels_keep_their_version(tmp_path: Path) -> None:
    with Cortex.open(tmp_path / "s", actor=OWNER) as cx:
        cx.write(Fact(statement="x", subject="s", predicate="p"))
        export_store(cx, tmp_path / "v1.jsonl")
        cx.ingest("an episode")
        export_store(cx, tmp_path / "v2.jsonl")
        restricted = cx.write(Fact(statement="y", subject="s", predicate="q"),
                              sensitivity="restricted")  # fmt: skip
        export_store(cx, tmp_path / "v2b.jsonl")  # the only label stays home: still version 2
        cx.update_head(restricted, sensitivity="public")
        export_store(cx, tmp_path / "v3.jsonl")
        export_store(cx, tmp_path / "v3.cbor", encoding="cbor")
    names = ("v1.jsonl", "v2.jsonl", "v2b.jsonl", "v3.jsonl")
    header = [json.loads((tmp_path / n).read_text().splitlines()[0])["version"] for n in names]
    assert header == [1, 2, 2, 3]
    assert read_bundle((tmp_path / "v3.cbor").read_bytes()).sensitivity == {restricted.id: PUBLIC}
    # a level in a bundle of version 1 or 2 is refused
    lines = (tmp_path / "v2.jsonl").read_text().splitlines()
    item = json.loads(lines[1])
    item["sensitivity"] = "public"
    lines[1] = json.dumps(item, separators=(",", ":"))
    (tmp_path / "bad.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(IntegrityError, match="sensitivity in a bundle of version 1 or 2"):
        read_bundle((tmp_path / "bad.jsonl").read_bytes())


def test_export_with_confidential_needs_a_writable_store(tmp_path: Path) -> None:
    from cortex import CortexError

    path = tmp_path / "s"
    with Cortex.open(path, actor=OWNER) as cx:
        cx.write(Fact(statement="x", subject="s", predicate="p"), sensitivity="confidential")
    with Cortex.open(path, actor=OWNER, readonly=True) as ro:
        export_store(ro, tmp_path / "ok.jsonl")  # nothing confidential: nothing to journal
        with pytest.raises(CortexError, match="journal"):
            export_store(ro, tmp_path / "no.jsonl", include_confidential=True)
    assert not (tmp_path / "no.jsonl").exists()
    with pytest.raises(ValidationError), Cortex.open(path, actor=OWNER) as cx:
        export_store(cx, tmp_path / "x.jsonl", include_confidential="yes")  # type: ignore[arg-type]


def test_export_digest_covers_every_level(world: World, tmp_path: Path) -> None:
    with Cortex.open(world.path, actor=OWNER) as cx:
        whole = export_digest(cx)
        assert whole != export_store(cx, tmp_path / "b.jsonl").sha256
        before = len(list(cx.journal()))
        assert export_digest(cx) == whole  # nothing written, nothing journalled
        assert len(list(cx.journal())) == before


# ---------------------------------------------------------------------------------------------
# Format: the feature, the migration, golden vectors


def test_format_9_names_the_feature(tmp_path: Path) -> None:
    """Format 9 keeps levels in the records; a format-7 store migrates through 8 to 9."""
    import shutil

    assert {"sensitivity", "sensitivity-in-heads"} <= FEATURES
    src = Path(__file__).parent / "data" / "format7.cortex"
    path = tmp_path / "f7"
    shutil.copytree(src, path)
    migrate(path)
    with Cortex.open(path, actor=None) as cx:
        assert {"sensitivity", "sensitivity-in-heads"} <= set(cx.format.features)
        with cx._kv.read() as txn:  # every existing memory is internal: no entry written
            assert next(txn.keys(SENS), None) is None
        assert cx.verify().ok


def test_golden_vectors() -> None:
    """specs/vectors/sensitivity.json both ways: records -> bytes -> records, and the level's
    bytes recomputed by hand (key 14 or 15 and the code after the internal record's map)."""
    import sys

    tools = str(Path(__file__).resolve().parent.parent / "tools")
    if tools not in sys.path:
        sys.path.insert(0, tools)
    import gen_vectors

    doc = json.loads(
        (Path(__file__).parents[1] / "specs" / "vectors" / "sensitivity.json").read_text()
    )
    assert doc["head"] == gen_vectors.SENSITIVITY_HEAD
    plain = {
        v["record"]: bytes.fromhex(v["cbor_hex"])
        for v in doc["vectors"]
        if v["level"] == "internal"
    }
    for v in doc["vectors"]:
        head_vector = v["record"] == "head"
        codec, key_of, field = (
            (HEAD_CODEC, lambda _: head_key(gen_vectors.VECTOR_ROW), 14)  # format 21: by row
            if head_vector
            else (EPISODE_CODEC, episode_key, 15)
        )
        raw = bytes.fromhex(v["cbor_hex"])
        rec = codec.decode(raw, v["name"])  # bytes -> record
        assert codec.encode(rec, v["name"]) == raw  # and back
        level = Sensitivity.coerce(v["level"])
        assert level is not None and level_of(rec) is level
        head, ep = gen_vectors.sensitivity_records(v["level"])  # input -> bytes
        assert codec.encode(head if v["record"] == "head" else ep, v["name"]) == raw
        assert key_of(rec.id).hex() == v["key"]
        assert (raw + zlib.crc32(raw).to_bytes(4, "big")).hex() == v["value"]
        assert seal(raw).hex() == v["value"]
        base = plain[v["record"]]
        if level is INTERNAL:
            continue
        # by hand: one more map entry, then the key and the code
        assert raw == bytes((base[0] + 1,)) + base[1:] + bytes((field, int(level)))
    for v in doc["negative"]:
        with pytest.raises(CodecError):
            HEAD_CODEC.decode(bytes.fromhex(v["cbor_hex"]), v["name"])


# ---------------------------------------------------------------------------------------------
# CLI


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = ["--store", str(tmp_path / "s"), "--actor", OWNER]
    assert _run(capsys, *s, "init")[0] == 0
    rc, out, _ = _run(
        capsys, *s, "write", "Fact", '{"statement": "x", "subject": "s", "predicate": "p"}',
        "--sensitivity", "confidential",
    )  # fmt: skip
    assert rc == 0
    uri = out.strip()
    rc, out, _ = _run(capsys, *s, "show", uri)
    assert "sensitivity confidential" in out
    rc, out, _ = _run(capsys, *s, "--json", "head", uri, "--sensitivity", "public")
    assert json.loads(out)["sensitivity"] == "public"
    assert _run(capsys, *s, "head", uri, "--sensitivity", "bogus")[0] == 2
    (tmp_path / "n.md").write_text("# minutes\n\nsecret numbers")
    rc, out, _ = _run(capsys, *s, "--json", "ingest", str(tmp_path / "n.md"),
                      "--sensitivity", "restricted")  # fmt: skip
    eid = json.loads(out)["id"]
    rc, out, _ = _run(capsys, *s, "episodes", eid)
    assert "sensitivity restricted" in out
    rc, out, _ = _run(capsys, *s, "--json", "episodes", eid, "--set-sensitivity", "confidential")
    assert json.loads(out)["sensitivity"] == "confidential"
    assert _run(capsys, *s, "episodes", "--set-sensitivity", "public")[0] == 1  # needs ID
    rc, out, _ = _run(capsys, *s, "export", str(tmp_path / "b.jsonl"))
    assert rc == 0 and "withheld 1 restricted or confidential" in out
    rc, out, _ = _run(capsys, *s, "--json", "export", str(tmp_path / "c.jsonl"),
                      "--include-confidential")  # fmt: skip
    assert json.loads(out)["confidential"] == 1
    rc, out, _ = _run(capsys, *s, "--json", "log", "-n", "1")
    assert json.loads(out.splitlines()[-1])["kind"] == "export"
    rc, out, _ = _run(capsys, *s, "tokens", "add", "h", "--for", HELPER, "--clearance", "public",
                      "--tokens", str(tmp_path / "t.json"))  # fmt: skip
    assert rc == 0
    rc, out, _ = _run(capsys, *s, "--json", "tokens", "--tokens", str(tmp_path / "t.json"))
    assert json.loads(out)[0]["clearance"] == "public"
    rc, _, err = _run(capsys, *s, "serve", "--http", "--clearance", "public")
    assert rc == 2 and "stdio" in err
    rc, out, _ = _run(capsys, *s, "copy", str(tmp_path / "s"), str(tmp_path / "copy"))
    assert rc == 0 and "exports identical" in out
    assert _run(capsys, *s, "verify")[0] == 0


# ---------------------------------------------------------------------------------------------
# MCP: a token's clearance is its reader's


def test_token_file_clearance(tmp_path: Path) -> None:
    from cortex.serve.tokens import TokenFile

    tokens = TokenFile(tmp_path / "t.json")
    tokens.add("a", HELPER, clearance="confidential")
    tokens.add("b", HELPER)
    body = json.loads(tokens.path.read_text())
    assert [t["clearance"] for t in body["tokens"]] == ["confidential", "internal"]
    body["tokens"][1]["clearance"] = None  # a file written before labels: internal
    tokens.path.write_text(json.dumps(body))
    assert [e.clearance for e in tokens.entries()] == [CONFIDENTIAL, INTERNAL]
    with pytest.raises(ValidationError, match="clearance"):
        tokens.add("c", HELPER, clearance="secret")


def _label(path: Path) -> dict[str, Sensitivity]:
    """Give test_serve's store levels: returns each labelled statement's level."""
    levels = {
        "Ada speaks Italian": CONFIDENTIAL,
        "Ada works at Acme": PUBLIC,
        "green tea": RESTRICTED,
    }
    with Cortex.open(path, actor=None) as cx:
        for m in cx.find(Query(types=["Fact", "Preference"], limit=100)).memories:
            text = m.version.forms.medium if m.version.forms else ""
            for needle, level in levels.items():
                if needle in text:
                    cx.update_head(m.uri, sensitivity=level)
    return levels


def test_http_tokens_read_at_their_clearance(http: Any, store: Path) -> None:  # noqa: F811
    import anyio

    _label(store)
    tokens = {
        "public": http.tokens.add("p", HELPER, scopes=[SHARED], clearance="public"),
        "internal": http.helper,
        "confidential": http.tokens.add("c", HELPER, scopes=[SHARED], clearance="confidential"),
    }
    want = {}
    with Cortex.open(store, actor=None) as cx:
        for label in tokens:
            rd = Reader(actor=HELPER, scopes=(SHARED,), clearance=label)
            view = cx.view(rd)
            want[label] = {
                str(m.uri)
                for m in view.find(Query(types=["Fact", "Preference"], limit=50)).memories
            }
        everything = cx.find(Query(types=["Fact", "Preference"], limit=50)).memories
    assert [len(want[k]) for k in tokens] == [1, 1, 2]

    async def main() -> None:
        for label, token in tokens.items():
            http_client, client = http.client(token)
            async with http_client, client as c:
                st = (await c.call_tool("memory_status", {})).structured_content
                assert st["clearance"] == label
                r = await c.call_tool("memory_find", {"types": ["Fact", "Preference"]})
                assert {h["uri"] for h in r.structured_content["hits"]} == want[label]
                for m in everything:
                    if str(m.uri) in want[label]:
                        continue
                    got = await c.call_tool("memory_get", {"ref": str(m.uri)})
                    assert got.is_error and "no memory" in got.content[0].text
        for label, token in tokens.items():  # then writes, up to the clearance
            http_client, client = http.client(token)
            async with http_client, client as c:
                fact = {"statement": f"note by {label}", "subject": "x", "predicate": label}
                high = await c.call_tool(
                    "memory_write",
                    {"type": "Fact", "data": fact, "tags": ["shared"], "sensitivity": "restricted"},
                )
                assert high.is_error and "clearance" in high.content[0].text
                ok = await c.call_tool(
                    "memory_write",
                    {"type": "Fact", "data": fact, "tags": ["shared"], "sensitivity": label},
                )
                assert not ok.is_error, ok.content
        http_client, client = http.client(http.owner)
        async with http_client, client as c:  # the owner sees every level
            st = (await c.call_tool("memory_status", {})).structured_content
            assert st["clearance"] == "restricted" and st["owner_access"]
            r = await c.call_tool("memory_find", {"types": ["Fact", "Preference"], "limit": 50})
            assert {str(m.uri) for m in everything} <= {
                h["uri"] for h in r.structured_content["hits"]
            }

    anyio.run(main)


def test_stdio_clearance(store: Path) -> None:  # noqa: F811
    import anyio

    from tests.test_serve import _stdio

    _label(store)
    scope = json.dumps({"name": "shared", "tags": ["shared"], "writable": True})

    async def main() -> None:
        for clearance, n in (("public", 1), ("confidential", 2), ("restricted", 3)):
            args = ("--scope", scope, "--clearance", clearance)
            async with _stdio(store, *args, actor=HELPER) as c:
                st = (await c.call_tool("memory_status", {})).structured_content
                assert st["clearance"] == clearance
                r = await c.call_tool("memory_find", {"types": ["Fact", "Preference"]})
                assert len(r.structured_content["hits"]) == n, (clearance, r.structured_content)

    anyio.run(main)


def test_decode_level_reads_a_format_8_entry_and_refuses_anything_else() -> None:
    """``decode_level`` (the migration to format 9, salvage of a format-8 store): one sealed code
    byte is a level; a value of another length, or a byte that names no level, is damage."""
    from cortex.errors import IntegrityError
    from cortex.rules.sensitivity import decode_level
    from cortex.storage.kv import seal

    key = sens_key(MemoryId(bytes(16)))
    for level in Sensitivity:
        assert decode_level(key, seal(bytes([int(level)]))) is level
    for payload in (bytes([3, 3]), bytes([0]), bytes([9])):
        with pytest.raises(IntegrityError, match="holds no sensitivity level"):
            decode_level(key, seal(payload))
