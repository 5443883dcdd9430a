"""The store's API semantics (cortex.engine.store via Cortex) with a fixed clock."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import cbor2
import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import cortex.engine.store
from cortex import (
    FORMAT_VERSION,
    ConflictError,
    Constraint,
    ConstraintSource,
    Cortex,
    CortexError,
    EdgeType,
    Event,
    Fact,
    FormatError,
    Forms,
    FrameRef,
    Goal,
    GoalStatus,
    Head,
    IntegrityError,
    JournalKind,
    MemoryId,
    MemoryType,
    MigrationRequiredError,
    NewMemory,
    NotFoundError,
    ObjKind,
    Outcome,
    Polarity,
    Preference,
    Strength,
    TombstonedError,
    Uri,
    ValidationError,
    VectorRef,
    Verb,
    Visibility,
    content_hash,
    new_id,
)
from cortex.engine.journal import JOURNAL_CODEC, JournalEntry
from cortex.engine.store import FEATURES, _seal, _unseal
from cortex.engine.values import FORMAT_CODEC, FormatRecord
from cortex.model.codec import HEAD, to_micros
from cortex.storage import keys as K
from cortex.storage.engines import open_kv
from tests import rows as R

T0 = datetime(2030, 1, 1, tzinfo=UTC)


class Clock:
    """A settable clock: it returns ``now`` until told otherwise."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def tick(self, seconds: float = 1.0) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now

    def at(self, when: datetime) -> datetime:
        self.now = when
        return when


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def path(store_path: Any) -> Any:
    """The store, on each engine (tests/conftest.py)."""
    return store_path


@pytest.fixture
def cx(path: Path, clock: Clock) -> Iterator[Cortex]:
    with Cortex.open(path, actor="agent-1", clock=clock) as store:
        yield store


def fact(i: int | str = 1, **kw: Any) -> Fact:
    return Fact(statement=f"statement {i}", subject="user", predicate="likes", **kw)


def frame(
    ref: str = "svc://a", verb: Verb = Verb.FIND, kind: ObjKind = ObjKind.SERVICE
) -> FrameRef:
    return FrameRef(verb=verb, obj_kind=kind, obj_ref=ref)


def snapshot(cx: Cortex) -> list[tuple[bytes, bytes]]:
    """Every key and value in the environment."""
    with cx._kv.read() as r:
        return list(r.scan(b""))


def index_keys(cx: Cortex, mid: MemoryId) -> dict[bytes, list[bytes]]:
    """Index entries of one memory, by index prefix."""
    out: dict[bytes, list[bytes]] = {}
    with cx._kv.read() as r:
        for prefix in (K.IDX_TYPE, K.IDX_TAG, K.IDX_FRAME, K.IDX_ACTOR_OBJ, K.IDX_PIN):
            out[prefix] = [k for k in r.keys(prefix) if k.endswith(mid.bytes)]
    return out


def journal_len(cx: Cortex) -> int:
    return sum(1 for _ in cx.journal())


# --- write and read ---------------------------------------------------------------------------


def test_write_returns_the_uri_of_version_one(cx: Cortex, clock: Clock) -> None:
    data = fact()
    uri = cx.write(data, tags=["a", "b"], frames=[frame()], importance=7, visibility="actor_public")
    assert isinstance(uri, Uri)
    assert uri.type is MemoryType.FACT and uri.version == 1
    assert str(uri) == f"cortex://Fact/{uri.id}#1"
    m = cx.resolve(uri)
    assert m.uri == uri and m.id == uri.id and not m.tombstoned
    assert m.data == data
    assert m.head.tags == ("a", "b")
    assert m.head.frames == (frame(),)
    assert m.head.importance == 7
    assert m.head.visibility is Visibility.ACTOR_PUBLIC
    assert m.head.current_version == 1
    assert m.head.actor_scope == "agent-1"
    assert m.head.created_at == clock.now == m.head.last_updated_at
    assert m.version.created_at == clock.now
    assert m.version.created_by == "agent-1"
    assert m.version.hash == content_hash(MemoryType.FACT, m.version.data or b"")
    assert m.version.forms == m.head.forms and m.version.forms is not None
    assert not m.version.forms_override
    assert cx.resolve(str(uri)) == m
    assert cx.resolve_latest(uri.id) == m
    assert cx.resolve_latest(str(uri.id)) == m
    assert cx.resolve_latest(str(uri)) == m


def test_defaults_of_a_written_memory(cx: Cortex) -> None:
    m = cx.resolve(cx.write(fact()))
    assert m.head.tags == () and m.head.frames == ()
    assert m.head.importance == 5
    assert m.head.visibility is Visibility.PRIVATE
    assert m.version.confidence == 1.0
    assert m.head.tombstone is None


def test_forms_override_is_stored_verbatim(cx: Cortex) -> None:
    forms = Forms(short="my short", medium="my medium form")
    m = cx.resolve(cx.write(fact(), forms=forms))
    assert m.version.forms == forms and m.head.forms == forms
    assert m.version.forms_override


def test_history_is_oldest_first(cx: Cortex, clock: Clock) -> None:
    uri = cx.write(fact(1))
    times = [clock.now]
    for i in range(2, 5):
        times.append(clock.tick())
        cx.update(uri, fact(i))
    hist = cx.history(uri.id)
    assert [m.version.version for m in hist] == [1, 2, 3, 4]
    assert [m.data for m in hist] == [fact(i) for i in range(1, 5)]
    assert [m.version.created_at for m in hist] == times
    assert all(m.head.current_version == 4 for m in hist)
    latest = cx.resolve_latest(uri.id)
    assert latest.version.version == 4 and latest.data == fact(4)
    assert latest.head.created_at == times[0]
    assert latest.head.last_updated_at == times[-1]


def test_unknown_memory_is_not_found(cx: Cortex) -> None:
    missing = new_id()
    with pytest.raises(NotFoundError):
        cx.resolve_latest(missing)
    with pytest.raises(NotFoundError):
        cx.history(missing)
    with pytest.raises(NotFoundError):
        cx.resolve(Uri(MemoryType.FACT, missing, 1))
    with pytest.raises(NotFoundError):
        cx.update(missing, fact())
    with pytest.raises(NotFoundError):
        cx.update_head(missing, importance=1)
    with pytest.raises(NotFoundError):
        cx.tombstone(missing, "x")
    with pytest.raises(NotFoundError):
        cx.purge(missing, "x")


# --- update -----------------------------------------------------------------------------------


def test_update_makes_the_next_version(cx: Cortex, clock: Clock) -> None:
    uri = cx.write(fact(1), tags=["keep"], importance=8)
    clock.tick()
    u2 = cx.update(uri, fact(2), confidence=0.5, created_by="someone")
    assert u2 == Uri(MemoryType.FACT, uri.id, 2)
    m = cx.resolve(u2)
    assert m.data == fact(2)
    assert m.version.confidence == 0.5 and m.version.created_by == "someone"
    # the head keeps its tags, importance and creation time
    assert m.head.tags == ("keep",) and m.head.importance == 8
    assert m.head.created_at == T0 and m.head.last_updated_at == clock.now
    assert m.head.forms == m.version.forms
    # the old version is still there, unchanged
    assert cx.resolve(uri).data == fact(1)
    # any version's URI, the id or the id text name the memory
    assert cx.update(uri, fact(3)).version == 3
    assert cx.update(str(uri.id), fact(4)).version == 4
    assert cx.update(u2, fact(5)).version == 5


def test_update_must_keep_the_type(cx: Cortex) -> None:
    uri = cx.write(fact())
    goal = Goal(statement="ship", status=GoalStatus.ACTIVE)
    with pytest.raises(ValidationError) as info:
        cx.update(uri, goal)
    assert info.value.field == "data" and info.value.rule == "type"
    assert cx.resolve_latest(uri.id).version.version == 1


def test_update_of_a_tombstoned_memory_fails(cx: Cortex) -> None:
    uri = cx.write(fact())
    cx.tombstone(uri, "wrong")
    with pytest.raises(TombstonedError):
        cx.update(uri, fact(2))
    with pytest.raises(TombstonedError):
        cx.update_head(uri, importance=1)


def test_update_with_expected_version(cx: Cortex) -> None:
    uri = cx.write(fact(1))
    assert cx.update(uri, fact(2), expected_version=1).version == 2
    with pytest.raises(ConflictError) as info:
        cx.update(uri, fact(3), expected_version=1)
    assert not isinstance(info.value, TombstonedError)
    assert "version 2" in str(info.value)
    with pytest.raises(ConflictError):
        cx.update(uri, fact(3), expected_version=3)
    assert cx.update(uri, fact(3), expected_version=2).version == 3
    assert [m.data for m in cx.history(uri.id)] == [fact(1), fact(2), fact(3)]


# --- update_head ------------------------------------------------------------------------------


def test_update_head_changes_only_the_patchable_fields(cx: Cortex, clock: Clock) -> None:
    uri = cx.write(fact(), tags=["a"], frames=[frame("x")], importance=3)
    before = cx.resolve_latest(uri.id)
    clock.tick()
    head = cx.update_head(uri, tags=["b", "c"])
    assert head.tags == ("b", "c")
    after = cx.resolve_latest(uri.id)
    assert after.head == head
    assert after.version == before.version  # no new version
    assert after.head.last_updated_at == clock.now
    unchanged = msgspec.structs.replace(before.head, tags=("b", "c"), last_updated_at=clock.now)
    assert after.head == unchanged
    cx.update_head(uri, frames=[frame("y"), frame("z", Verb.BUILD)])
    cx.update_head(uri, importance=10)
    cx.update_head(uri, visibility=Visibility.SCOPED)
    head = cx.resolve_latest(uri.id).head
    assert head.frames == (frame("y"), frame("z", Verb.BUILD))
    assert head.importance == 10 and head.visibility is Visibility.SCOPED
    assert head.tags == ("b", "c")
    assert head.current_version == 1
    head = cx.update_head(uri, tags=[], frames=[], importance=0, visibility="private")
    assert (head.tags, head.frames, head.importance, head.visibility) == (
        (),
        (),
        0,
        Visibility.PRIVATE,
    )
    assert cx.verify().ok


def test_update_head_rejects_an_empty_patch(cx: Cortex) -> None:
    uri = cx.write(fact())
    with pytest.raises(ValidationError) as info:
        cx.update_head(uri)
    assert info.value.rule == "empty"


@pytest.mark.parametrize(
    "name", ["type", "current_version", "tombstone", "created_at", "forms", "embedding_ref", "data"]
)
def test_update_head_rejects_other_fields(cx: Cortex, name: str) -> None:
    uri = cx.write(fact())
    extra: dict[str, Any] = {name: 1}
    with pytest.raises(ValidationError) as info:
        cx.update_head(uri, importance=3, **extra)
    assert info.value.field == name and info.value.rule == "immutable"
    assert cx.resolve_latest(uri.id).head.importance == 5


def test_update_head_moves_the_index_entries(cx: Cortex) -> None:
    uri = cx.write(
        Event(kind="purchase", outcome=Outcome.SUCCESS),
        tags=["t1", "t2"],
        frames=[frame("svc://a"), frame("svc://b", Verb.ACQUIRE, ObjKind.ASSET)],
    )
    mid, created = uri.id, to_micros(T0)
    idx = index_keys(cx, mid)
    assert idx[K.IDX_TYPE] == [K.type_key(MemoryType.EVENT, created, mid)]
    assert sorted(idx[K.IDX_TAG]) == sorted(
        K.tag_key(t, MemoryType.EVENT, created, mid) for t in ("t1", "t2")
    )
    assert sorted(idx[K.IDX_FRAME]) == sorted(
        [
            K.frame_key(Verb.FIND, ObjKind.SERVICE, "svc://a", created, mid),
            K.frame_key(Verb.ACQUIRE, ObjKind.ASSET, "svc://b", created, mid),
        ]
    )
    assert sorted(idx[K.IDX_ACTOR_OBJ]) == sorted(
        [
            K.actor_obj_key(Verb.FIND, "svc://a", created, mid),
            K.actor_obj_key(Verb.ACQUIRE, "svc://b", created, mid),
        ]
    )
    cx.update_head(uri, tags=["t2", "t3"], frames=[frame("svc://c", Verb.MONITOR)])
    idx = index_keys(cx, mid)
    assert idx[K.IDX_TYPE] == [K.type_key(MemoryType.EVENT, created, mid)]
    assert sorted(idx[K.IDX_TAG]) == sorted(
        K.tag_key(t, MemoryType.EVENT, created, mid) for t in ("t2", "t3")
    )
    assert idx[K.IDX_FRAME] == [K.frame_key(Verb.MONITOR, ObjKind.SERVICE, "svc://c", created, mid)]
    assert idx[K.IDX_ACTOR_OBJ] == [K.actor_obj_key(Verb.MONITOR, "svc://c", created, mid)]
    cx.update_head(uri, importance=9)  # no index change
    assert index_keys(cx, mid) == idx
    assert cx.verify().ok


def test_non_events_get_no_outcome_index(cx: Cortex) -> None:
    uri = cx.write(fact(), frames=[frame()])
    assert index_keys(cx, uri.id)[K.IDX_ACTOR_OBJ] == []
    assert len(index_keys(cx, uri.id)[K.IDX_FRAME]) == 1


def test_update_head_is_journalled_with_field_names(cx: Cortex) -> None:
    uri = cx.write(fact())
    cx.update_head(uri, visibility="scoped", tags=["x"])
    entry = next(iter(cx.journal(reverse=True, start=2**62)))
    assert entry.kind is JournalKind.UPDATE_HEAD
    assert entry.id == uri.id and entry.type is MemoryType.FACT and entry.version == 1
    assert entry.fields == ("tags", "visibility")
    assert entry.by == "agent-1"


# --- tombstone and purge ----------------------------------------------------------------------


def test_tombstone_is_idempotent_and_still_resolves(cx: Cortex, clock: Clock) -> None:
    uri = cx.write(fact(), tags=["t"])
    clock.tick()
    stone = cx.tombstone(uri, "obsolete")
    assert stone.reason == "obsolete" and stone.at == clock.now and stone.by == "agent-1"
    assert stone.purged_at is None
    n = journal_len(cx)
    clock.tick()
    assert cx.tombstone(uri, "again", by="other") == stone
    assert journal_len(cx) == n
    m = cx.resolve(uri)
    assert m.tombstoned and m.head.tombstone == stone
    assert m.data == fact()
    assert cx.resolve_latest(uri.id).head.tombstone == stone
    assert len(cx.history(uri.id)) == 1
    # tombstoning keeps the index entries (search filters them; audit finds them)
    assert len(index_keys(cx, uri.id)[K.IDX_TAG]) == 1
    assert cx.verify().ok


def test_tombstone_by_another_actor_and_reason_rules(cx: Cortex) -> None:
    uri = cx.write(fact())
    with pytest.raises(ValidationError):
        cx.tombstone(uri, "")
    stone = cx.tombstone(uri, "why", by="auditor")
    assert stone.by == "auditor"
    entry = next(iter(cx.journal(start=2**62, reverse=True)))
    assert entry.kind is JournalKind.TOMBSTONE and entry.reason == "why"
    assert entry.by == "agent-1"


def test_purge_erases_content_but_keeps_proof(cx: Cortex, clock: Clock) -> None:
    ev = Event(kind="call", outcome=Outcome.FAILURE, summary="secret")
    uri = cx.write(ev, tags=["secret-tag"], frames=[frame("svc://x")])
    other = cx.write(fact("other"), tags=["secret-tag"])
    clock.tick()
    cx.update(uri, Event(kind="call", outcome=Outcome.SUCCESS, summary="more secret"))
    cx.add_edge(uri, "references", other)
    hashes = [m.version.hash for m in cx.history(uri.id)]
    row = R.of_kv(cx._kv, uri.id)
    cx._kv.write(lambda t: t.put(K.vec_key(row), b"fake vector"))
    clock.tick()
    stone = cx.purge(uri, "gdpr request")
    assert stone.reason == "gdpr request" and stone.purged_at == clock.now
    assert stone.at == clock.now
    hist = cx.history(uri.id)
    assert [m.version.hash for m in hist] == hashes
    assert all(m.data is None and m.version.data is None for m in hist)
    assert all(m.version.forms is None for m in hist)
    head = hist[-1].head
    assert head.tags == () and head.frames == () and head.forms is None
    assert head.tombstone == stone and head.current_version == 2
    idx = index_keys(cx, uri.id)
    assert idx[K.IDX_TYPE] == [K.type_key(MemoryType.EVENT, to_micros(T0), uri.id)]
    assert idx[K.IDX_TAG] == idx[K.IDX_FRAME] == idx[K.IDX_ACTOR_OBJ] == []
    assert len(index_keys(cx, other.id)[K.IDX_TAG]) == 1  # the other memory keeps its tag
    with cx._kv.read() as r:
        assert r.get(K.vec_key(row)) is None
        raw = b"".join(k + v for k, v in r.scan(K.version_prefix(row)))
    assert b"secret" not in raw
    m = cx.resolve(uri)
    assert m.data is None and m.tombstoned
    assert cx.resolve_latest(uri.id).data is None
    assert cx.verify().ok
    # idempotent: same tombstone, no new journal entry
    n = journal_len(cx)
    clock.tick()
    assert cx.purge(uri, "again") == stone
    assert cx.tombstone(uri, "again") == stone
    assert journal_len(cx) == n
    entry = next(iter(cx.journal(start=n, reverse=True)))
    assert entry.kind is JournalKind.PURGE and entry.id == uri.id and entry.version == 2
    # the edge stays (it is part of the audit trail)
    assert len(cx.edges(uri, include_removed=True)) == 1
    with pytest.raises(TombstonedError):
        cx.update(uri, ev)


def test_purge_keeps_an_existing_tombstone(cx: Cortex, clock: Clock) -> None:
    uri = cx.write(fact())
    first = cx.tombstone(uri, "first reason")
    clock.tick()
    stone = cx.purge(uri, "second reason")
    assert stone.reason == "first reason" and stone.at == first.at
    assert stone.purged_at == clock.now
    assert cx.verify().ok


def test_purge_drops_the_embedding_reference_with_the_vector(cx: Cortex) -> None:
    uri = cx.write(fact())
    row = R.of_kv(cx._kv, uri.id)
    key = K.head_key(row)

    def embed(t: Any) -> None:  # what an embedder does: a vec/ record and the head's ref
        head: Head = HEAD.decode(_unseal(key, t.get(key)), "head")
        ref = VectorRef(model_id="hash-embedder", dim=4, version=1)
        t.put(key, _seal(HEAD.encode(msgspec.structs.replace(head, embedding_ref=ref), "head")))
        t.put(K.vec_key(row), b"vector")

    cx._kv.write(embed)
    assert cx.resolve_latest(uri.id).head.embedding_ref is not None
    cx.purge(uri, "erase")
    assert cx.resolve_latest(uri.id).head.embedding_ref is None
    with cx._kv.read() as r:
        assert r.get(K.vec_key(row)) is None
    assert cx.verify().ok


# --- resolve_as_of ----------------------------------------------------------------------------


def test_resolve_as_of_follows_updates(cx: Cortex, clock: Clock) -> None:
    t1 = clock.at(T0)
    uri = cx.write(fact(1))
    t2 = clock.at(T0 + timedelta(hours=1))
    cx.update(uri, fact(2))
    t3 = clock.at(T0 + timedelta(hours=2))
    cx.update(uri, fact(3))
    eps = timedelta(microseconds=1)
    with pytest.raises(NotFoundError):
        cx.resolve_as_of(uri.id, t1 - eps)
    assert cx.resolve_as_of(uri.id, t1).data == fact(1)
    assert cx.resolve_as_of(uri.id, t2 - eps).data == fact(1)
    assert cx.resolve_as_of(uri.id, t2).data == fact(2)
    assert cx.resolve_as_of(uri.id, t3 - eps).data == fact(2)
    assert cx.resolve_as_of(uri.id, t3).data == fact(3)
    assert cx.resolve_as_of(uri, t3 + timedelta(days=400)).version.version == 3


def test_resolve_as_of_respects_validity_windows(cx: Cortex, clock: Clock) -> None:
    d = timedelta(days=1)
    clock.at(T0)
    uri = cx.write(fact(1))  # always valid
    clock.at(T0 + d)
    cx.update(uri, fact(2), valid_from=T0 + 10 * d, valid_until=T0 + 20 * d)
    # v2 is known from T0+d but valid only in [T0+10d, T0+20d)
    assert cx.resolve_as_of(uri, T0 + 5 * d).data == fact(1)
    assert cx.resolve_as_of(uri, T0 + 10 * d).data == fact(2)
    assert cx.resolve_as_of(uri, T0 + 20 * d - timedelta(microseconds=1)).data == fact(2)
    assert cx.resolve_as_of(uri, T0 + 20 * d).data == fact(1)  # valid_until is exclusive


def test_resolve_as_of_with_known_at(cx: Cortex, clock: Clock) -> None:
    d = timedelta(days=1)
    clock.at(T0 + 10 * d)
    # written at T0+10d about a window that began at T0
    uri = cx.write(fact("late"), valid_from=T0, valid_until=T0 + 30 * d)
    with pytest.raises(NotFoundError):
        cx.resolve_as_of(uri, T0 + d)  # the store did not know it then
    assert cx.resolve_as_of(uri, T0 + d, known_at=T0 + 10 * d).data == fact("late")
    with pytest.raises(NotFoundError):
        cx.resolve_as_of(uri, T0 + d, known_at=T0 + 10 * d - timedelta(microseconds=1))
    with pytest.raises(NotFoundError):
        cx.resolve_as_of(uri, T0 + 30 * d, known_at=T0 + 40 * d)  # past its window
    # a window with no version at all
    clock.at(T0 + 11 * d)
    only = cx.write(fact("window"), valid_from=T0 + 50 * d)
    with pytest.raises(NotFoundError):
        cx.resolve_as_of(only, T0 + 12 * d)
    assert cx.resolve_as_of(only, T0 + 50 * d).data == fact("window")


def test_resolve_as_of_and_tombstones(cx: Cortex, clock: Clock) -> None:
    d = timedelta(days=1)
    clock.at(T0)
    uri = cx.write(fact(1))
    clock.at(T0 + d)
    cx.update(uri, fact(2))
    clock.at(T0 + 2 * d)
    cx.tombstone(uri, "retired")
    assert cx.resolve_as_of(uri, T0 + d).data == fact(2)
    assert cx.resolve_as_of(uri, T0 + 2 * d - timedelta(microseconds=1)).data == fact(2)
    with pytest.raises(NotFoundError):
        cx.resolve_as_of(uri, T0 + 2 * d)
    with pytest.raises(NotFoundError):
        cx.resolve_as_of(uri, T0 + 3 * d)
    # asking about the past with today's knowledge: the memory is tombstoned by now
    with pytest.raises(NotFoundError):
        cx.resolve_as_of(uri, T0 + d, known_at=T0 + 3 * d)


def test_resolve_as_of_rejects_naive_times(cx: Cortex) -> None:
    uri = cx.write(fact())
    with pytest.raises(ValidationError):
        cx.resolve_as_of(uri, datetime(2030, 1, 1))


# --- edges ------------------------------------------------------------------------------------


def test_edges_add_remove_revive(cx: Cortex, clock: Clock) -> None:
    a, b, c = (cx.write(fact(i)) for i in range(3))
    n = journal_len(cx)
    e = cx.add_edge(a, EdgeType.REFERENCES, b, weight=0.5)
    assert (e.src, e.type, e.dst) == (a.id, EdgeType.REFERENCES, b.id)
    assert e.created_at == clock.now and e.created_by == "agent-1" and e.weight == 0.5
    assert not e.removed
    assert journal_len(cx) == n + 1
    clock.tick()
    assert cx.add_edge(a, "references", b) == e  # a live edge: nothing changes
    assert journal_len(cx) == n + 1
    cx.add_edge(a, "supersedes", c)
    cx.add_edge(c, "derived_from", a, by="other")
    assert journal_len(cx) == n + 3

    assert [(x.dst, x.type) for x in cx.edges(a)] == sorted(
        [(b.id, EdgeType.REFERENCES), (c.id, EdgeType.SUPERSEDES)], key=lambda p: p[1]
    )
    assert [(x.src, x.type) for x in cx.edges(a, direction="in")] == [(c.id, EdgeType.DERIVED_FROM)]
    assert len(cx.edges(a, direction="both")) == 3
    assert [x.type for x in cx.edges(a, types=["supersedes"])] == [EdgeType.SUPERSEDES]
    assert cx.edges(a, types=[EdgeType.CONTRADICTS]) == []
    assert cx.edges(b) == [] and len(cx.edges(b, direction="in")) == 1
    assert cx.edges(c, direction="in")[0].created_by == "agent-1"
    assert cx.edges(c)[0].created_by == "other"

    clock.tick()
    removed = cx.remove_edge(a, "references", b, by="remover")
    assert removed.removed and removed.removed_at == clock.now
    assert removed.removed_by == "remover"
    assert journal_len(cx) == n + 4
    assert cx.remove_edge(a, "references", b) == removed  # again: nothing changes
    assert journal_len(cx) == n + 4
    assert [x.type for x in cx.edges(a)] == [EdgeType.SUPERSEDES]
    assert cx.edges(b, direction="in") == []
    assert cx.edges(a, types=["references"], include_removed=True) == [removed]
    assert cx.edges(b, direction="in", include_removed=True) == [removed]

    clock.tick()
    revived = cx.add_edge(a, "references", b)
    assert not revived.removed and revived.created_at == clock.now
    assert journal_len(cx) == n + 5
    assert cx.edges(b, direction="in") == [revived]
    kinds = [entry.kind for entry in cx.journal(start=n + 1)]
    assert kinds == [JournalKind.ADD_EDGE] * 3 + [JournalKind.REMOVE_EDGE, JournalKind.ADD_EDGE]
    assert cx.verify().ok


def test_edge_rules(cx: Cortex) -> None:
    a, b = cx.write(fact(1)), cx.write(fact(2))
    with pytest.raises(ValidationError) as info:
        cx.add_edge(a, "references", a)
    assert info.value.rule == "self_edge"
    with pytest.raises(ValidationError):
        cx.add_edge(a, "likes", b)
    with pytest.raises(ValidationError):
        cx.add_edge(a, 99, b)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        cx.add_edge(a, "references", b, weight=1.5)
    with pytest.raises(NotFoundError):
        cx.add_edge(a, "references", new_id())
    with pytest.raises(NotFoundError):
        cx.add_edge(new_id(), "references", b)
    with pytest.raises(NotFoundError):
        cx.remove_edge(a, "references", b)
    with pytest.raises(ValidationError):
        cx.edges(a, direction="sideways")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        cx.edges(a, types=["nope"])
    assert cx.edges(a, direction="both", include_removed=True) == []


def test_edges_to_tombstoned_memories_are_allowed(cx: Cortex) -> None:
    a, b = cx.write(fact(1)), cx.write(fact(2))
    cx.tombstone(b, "gone")
    cx.add_edge(a, "references", b)
    assert len(cx.edges(a)) == 1


# --- write_many -------------------------------------------------------------------------------


def test_write_many_writes_all_in_order(cx: Cortex) -> None:
    n = journal_len(cx)
    mine = new_id()
    uris = cx.write_many(
        [
            fact(1),
            NewMemory(data=fact(2), tags=["x"], importance=9),
            NewMemory(data=Preference(topic="tea", polarity=Polarity.PREFER), id=mine),
        ]
    )
    assert [u.version for u in uris] == [1, 1, 1]
    assert uris[2].id == mine and uris[2].type is MemoryType.PREFERENCE
    assert cx.resolve(uris[0]).data == fact(1)
    assert cx.resolve(uris[1]).head.tags == ("x",)
    assert cx.resolve(uris[1]).head.importance == 9
    entries = list(cx.journal(start=n + 1))
    assert [e.kind for e in entries] == [JournalKind.WRITE] * 3
    assert [e.id for e in entries] == [u.id for u in uris]
    assert cx.write_many([]) == []
    assert journal_len(cx) == n + 3


def test_write_many_with_one_invalid_item_writes_nothing(cx: Cortex) -> None:
    cx.write(fact(0))
    before = snapshot(cx)
    with pytest.raises(ValidationError) as info:
        cx.write_many([fact(1), fact(2), NewMemory(data=fact(3), importance=11), fact(4)])
    assert info.value.field.startswith("items[2]")
    with pytest.raises(ValidationError) as info:
        cx.write_many([fact(1), fact(2, confidence=7.0)])
    assert info.value.field == "items[1].data.confidence"
    with pytest.raises(ValidationError) as info:
        cx.write_many([fact(1), "not data"])  # type: ignore[list-item]
    assert info.value.field.startswith("items[1]")
    assert snapshot(cx) == before


def test_write_many_with_a_repeated_or_taken_id_writes_nothing(cx: Cortex) -> None:
    taken = cx.write(fact(0)).id
    before = snapshot(cx)
    dup = new_id()
    with pytest.raises(ConflictError, match=f"a memory with id {dup} already exists"):
        cx.write_many([NewMemory(data=fact(1), id=dup), fact(2), NewMemory(data=fact(3), id=dup)])
    with pytest.raises(ConflictError, match=f"a memory with id {taken} already exists"):
        cx.write_many([fact(1), NewMemory(data=fact(3), id=taken)])
    assert snapshot(cx) == before


def test_write_many_holds_the_collector_off_for_its_batch_only(
    cx: Cortex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cyclic collector is off while a batch is written, on again after it (also after a
    failed one), and left off when the caller had turned it off."""
    import gc

    seen: list[bool] = []
    real = cortex.engine.store.Store._write_many

    def spy(self: Any, items: Any) -> Any:
        seen.append(gc.isenabled())
        return real(self, items)

    monkeypatch.setattr(cortex.engine.store.Store, "_write_many", spy)
    assert gc.isenabled()
    cx.write_many([fact(1)])
    assert seen == [False] and gc.isenabled()
    with pytest.raises(ValidationError):
        cx.write_many([NewMemory(data=fact(2), importance=11)])
    assert seen == [False, False] and gc.isenabled()
    gc.disable()
    try:
        cx.write_many([fact(3)])
        assert seen == [False, False, False] and not gc.isenabled()
    finally:
        gc.enable()


def test_write_many_names_a_taken_id_whose_head_is_the_same(path: Path) -> None:
    """The same memory written again at the same instant: its head's bytes are the same."""
    at = datetime(2026, 1, 2, tzinfo=UTC)
    mid = new_id()
    with Cortex.open(path, actor="a", clock=lambda: at) as store:
        store.write_many([NewMemory(data=fact(1), id=mid)])
        before = snapshot(store)
        with pytest.raises(ConflictError, match=f"a memory with id {mid} already exists"):
            store.write_many([fact(2), NewMemory(data=fact(1), id=mid), fact(3)])
        assert snapshot(store) == before


# --- ids and URIs -----------------------------------------------------------------------------


def test_caller_supplied_id(cx: Cortex) -> None:
    mid = new_id()
    uri = cx.write(fact(), id=mid)
    assert uri.id == mid
    assert cx.resolve_latest(mid).data == fact()
    before = snapshot(cx)
    with pytest.raises(ConflictError):
        cx.write(fact(2), id=mid)
    with pytest.raises(ConflictError):
        cx.write(Goal(statement="g", status="active"), id=mid)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        cx.write(fact(2), id=str(new_id()))  # type: ignore[arg-type]
    assert snapshot(cx) == before


def test_uri_rules_on_resolve(cx: Cortex) -> None:
    uri = cx.write(fact())
    cx.update(uri, fact(2))
    with pytest.raises(ValidationError):
        cx.resolve(f"cortex://Fact/{uri.id}#latest")
    with pytest.raises(ValidationError):
        cx.resolve(f"cortex://Fact/{uri.id}")
    with pytest.raises(ValidationError):
        cx.resolve(f"cortex://Fact/{uri.id}#")
    with pytest.raises(ValidationError):
        cx.resolve(f"cortex://Fact/{uri.id}#0")
    with pytest.raises(ValidationError):
        cx.resolve(f"cortex://Nope/{uri.id}#1")
    with pytest.raises(NotFoundError):
        cx.resolve(f"cortex://Goal/{uri.id}#1")  # a real type, but not this memory's
    with pytest.raises(NotFoundError):
        cx.resolve(f"cortex://Fact/{uri.id}#3")  # beyond the head
    with pytest.raises(NotFoundError):
        cx.resolve(Uri(MemoryType.FACT, uri.id, 2**40))
    assert cx.resolve(f"cortex://Fact/{uri.id}#2").data == fact(2)


# --- the format record ------------------------------------------------------------------------


def test_a_fresh_store_records_its_format(cx: Cortex, path: Path) -> None:
    with cx._kv.read() as r:
        raw = r.get(K.meta_key("format"))
    assert raw is not None
    record = FORMAT_CODEC.decode(_unseal(b"meta/format", raw), "meta/format")
    assert record.format_version == FORMAT_VERSION == 21
    assert set(record.features) == FEATURES
    assert record.owner == "agent-1" == cx.owner
    assert record.created_at == T0
    assert cx.format == record
    first = next(cx.journal())
    assert first.seq == 1 and first.kind is JournalKind.INIT and first.prev == bytes(32)
    cx.close()
    with Cortex.open(path, actor="someone-else", as_owner=True) as again:
        assert again.owner == "agent-1" and again.actor == "someone-else"
        assert again.format == record
        assert journal_len(again) == 1


def _doctor_format(path: Path, **changes: Any) -> None:
    kv = open_kv(path)
    try:
        key = K.meta_key("format")

        def fn(t: Any) -> None:
            raw = t.get(key)
            record: FormatRecord = FORMAT_CODEC.decode(_unseal(key, raw), "meta/format")
            doctored = msgspec.structs.replace(record, **changes)
            t.put(key, _seal(FORMAT_CODEC.encode(doctored, "meta/format")))

        kv.write(fn)
    finally:
        kv.close()


def _put_format_map(path: Path, fields: dict[int, Any]) -> None:
    kv = open_kv(path)
    try:
        kv.write(lambda t: t.put(K.meta_key("format"), _seal(cbor2.dumps(fields, canonical=True))))
    finally:
        kv.close()


@pytest.fixture
def made(path: Path, clock: Clock) -> Path:
    with Cortex.open(path, actor="agent-1", clock=clock) as store:
        store.write(fact())
    return path


def test_a_newer_format_fails_closed(made: Path) -> None:
    _doctor_format(made, format_version=FORMAT_VERSION + 1)
    with pytest.raises(FormatError) as info:
        Cortex.open(made, actor="a")
    assert not isinstance(info.value, MigrationRequiredError)
    assert "newer" in str(info.value)
    with pytest.raises(FormatError):
        Cortex.open(made, actor="a", readonly=True)


def test_an_older_format_asks_for_migrate(made: Path) -> None:
    t = to_micros(T0)
    _put_format_map(made, {0: 1, 1: FORMAT_VERSION - 1, 2: [], 3: "old", 4: t, 5: "agent-1"})
    with pytest.raises(MigrationRequiredError) as info:
        Cortex.open(made, actor="a")
    assert "cortex" in str(info.value) and "migrate" in str(info.value)


def test_an_older_format_by_this_codes_reckoning(
    made: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cortex.engine.store, "FORMAT_VERSION", FORMAT_VERSION + 1)
    with pytest.raises(MigrationRequiredError, match=r"cortex .*migrate"):
        Cortex.open(made, actor="a")


def test_an_unknown_feature_fails_closed(made: Path) -> None:
    _doctor_format(made, features=(*sorted(FEATURES), "zstd-values"))
    with pytest.raises(FormatError, match="zstd-values"):
        Cortex.open(made, actor="a")


@pytest.mark.parametrize(
    "value",
    [b"garbage", _seal(b"\xff\xff"), _seal(cbor2.dumps([1, 2])), _seal(cbor2.dumps({0: 1}))],
)
def test_an_unreadable_format_record_fails_closed(made: Path, value: bytes) -> None:
    kv = open_kv(made)
    kv.write(lambda t: t.put(K.meta_key("format"), value))
    kv.close()
    # a failed checksum may be reported as damage rather than as an unknown format
    with pytest.raises((FormatError, IntegrityError)):
        Cortex.open(made, actor="a")


def test_a_store_without_format_but_with_data_is_refused(path: Path) -> None:
    kv = open_kv(path)
    kv.write(lambda t: t.put(b"something", b"else"))
    kv.close()
    with pytest.raises(FormatError, match="not a cortex store"):
        Cortex.open(path, actor="a")


def test_opening_readonly_needs_an_initialised_store(path: Path) -> None:
    with pytest.raises(CortexError):
        Cortex.open(path, actor="a", readonly=True)
    open_kv(path).close()  # an empty environment
    with pytest.raises(FormatError, match="empty"):
        Cortex.open(path, actor="a", readonly=True)


def test_readonly_store_reads_and_refuses_writes(made: Path) -> None:
    with Cortex.open(made, actor="reader", as_owner=True, readonly=True) as ro:
        assert ro.stats()["memories"] == 1
        with pytest.raises(CortexError):
            ro.write(fact(9))


def test_actor_is_validated(path: Path) -> None:
    with pytest.raises(ValidationError):
        Cortex.open(path, actor="")
    with pytest.raises(ValidationError):
        Cortex.open(path, actor="x" * 300)


def test_the_clock_must_be_aware(path: Path) -> None:
    with pytest.raises(CortexError):
        Cortex.open(path, actor="a", clock=lambda: datetime(2030, 1, 1))


def test_a_clock_before_1970_is_refused_with_a_clear_error(path: Path) -> None:
    now = [T0]
    with Cortex.open(path, actor="a", clock=lambda: now[0]) as store:
        uri = store.write(fact())
        now[0] = datetime(1969, 12, 31, 23, 59, tzinfo=UTC)
        with pytest.raises(CortexError, match="before 1970") as info:
            store.write(fact(2))
        assert type(info.value) is CortexError  # not a ValueError from building index keys
        now[0] = T0
        assert store.resolve_latest(uri.id).version.version == 1


def test_a_closed_store_refuses_work(path: Path, clock: Clock) -> None:
    store = Cortex.open(path, actor="a", clock=clock)
    uri = store.write(fact())
    store.close()
    store.close()  # closing twice is harmless
    with pytest.raises(CortexError):
        store.resolve_latest(uri.id)
    with pytest.raises(CortexError):
        store.write(fact(2))


# --- stats, journal, verify -------------------------------------------------------------------


def test_stats_counts(cx: Cortex) -> None:
    s = cx.stats()
    assert s["memories"] == s["live"] == s["versions"] == s["edges"] == 0
    assert s["journal_entries"] == 1  # init
    assert s["format_version"] == FORMAT_VERSION and s["owner"] == "agent-1"
    a = cx.write(fact(1))
    b = cx.write(fact(2))
    c = cx.write(Goal(statement="g", status=GoalStatus.ACTIVE))
    d = cx.write(
        Constraint(
            statement="no",
            polarity=Polarity.DONT,
            strength=Strength.HARD,
            source=ConstraintSource.USER_DECLARED,
        )
    )
    cx.update(a, fact(3))
    cx.update(a, fact(4))
    cx.tombstone(b, "x")
    cx.purge(c, "y")
    cx.add_edge(a, "references", d)
    cx.add_edge(d, "references", a)
    cx.remove_edge(d, "references", a)
    s = cx.stats()
    assert s["memories"] == 4
    assert (s["live"], s["tombstoned"], s["purged"]) == (2, 1, 1)
    assert s["versions"] == 6
    assert s["by_type"]["Fact"] == 2 and s["by_type"]["Goal"] == 1
    assert s["by_type"]["Constraint"] == 1 and s["by_type"]["Event"] == 0
    assert set(s["by_type"]) == {t.type_name for t in MemoryType}
    assert s["edges"] == 2  # removed edges are kept
    assert s["journal_entries"] == 1 + 4 + 2 + 1 + 1 + 3
    assert s["map_size"] > 0 and s["used_bytes"] > 0


def _mixed_workload(cx: Cortex, clock: Clock) -> list[Uri]:
    uris = [cx.write(fact(i), tags=[f"t{i % 3}"], frames=[frame(f"o{i}")]) for i in range(6)]
    uris += cx.write_many(
        [Event(kind="e", outcome=Outcome.SUCCESS), NewMemory(data=fact(9), tags=["z"])]
    )
    for i, u in enumerate(uris[:4]):
        clock.tick()
        cx.update(u, fact(100 + i))
    cx.update_head(uris[0], tags=["new"], importance=2)
    cx.update_head(uris[6], frames=[frame("o6"), frame("o7", Verb.DELIVER)])
    cx.tombstone(uris[1], "stale")
    cx.purge(uris[2], "erase")
    cx.purge(uris[1], "erase too")
    cx.add_edge(uris[0], "references", uris[3])
    cx.add_edge(uris[3], "corroborates", uris[0])
    cx.remove_edge(uris[0], "references", uris[3])
    cx.add_edge(uris[0], "references", uris[3])
    cx.add_edge(uris[4], "part_of", uris[2])
    return uris


def test_journal_is_one_chained_entry_per_mutation(cx: Cortex, clock: Clock) -> None:
    _mixed_workload(cx, clock)
    entries = list(cx.journal())
    assert [e.seq for e in entries] == list(range(1, len(entries) + 1))
    kinds = [e.kind for e in entries]
    assert kinds == (
        [JournalKind.INIT]
        + [JournalKind.WRITE] * 8
        + [JournalKind.UPDATE] * 4
        + [JournalKind.UPDATE_HEAD] * 2
        + [JournalKind.TOMBSTONE, JournalKind.PURGE, JournalKind.PURGE]
        + [JournalKind.ADD_EDGE] * 2
        + [JournalKind.REMOVE_EDGE]
        + [JournalKind.ADD_EDGE] * 2
    )
    with cx._kv.read() as r:
        raw = list(r.scan(K.JOURNAL))
    assert [K.parse_journal_key(k) for k, _ in raw] == [e.seq for e in entries]
    prev = bytes(32)
    for (key, value), entry in zip(raw, entries, strict=True):
        payload = _unseal(key, value)
        assert JOURNAL_CODEC.decode(payload, "journal") == entry
        assert entry.prev == prev
        prev = hashlib.sha256(payload).digest()
    # reading from a point, and backwards
    assert [e.seq for e in cx.journal(5)] == list(range(5, len(entries) + 1))
    assert [e.seq for e in cx.journal(5, reverse=True)] == [5, 4, 3, 2, 1]
    assert next(e.seq for e in cx.journal(10**6, reverse=True)) == len(entries)
    assert list(cx.journal(10**6)) == []
    # updates carry the content hash of the version they made
    upd = next(e for e in entries if e.kind is JournalKind.UPDATE)
    assert upd.id is not None and upd.version == 2
    assert upd.hash == cx.resolve(Uri(MemoryType.FACT, upd.id, 2)).version.hash


def test_verify_is_clean_after_a_mixed_workload(cx: Cortex, clock: Clock, path: Path) -> None:
    _mixed_workload(cx, clock)
    report = cx.verify()
    assert report.ok, report.problems
    assert report.memories == 8
    assert report.versions == 12
    assert report.edges == 3
    assert report.journal_entries == journal_len(cx)
    assert report.index_entries > 0
    cx.close()
    with Cortex.open(path, actor="agent-1") as again:
        assert again.verify().ok


# --- bad input leaves the store byte-for-byte unchanged -----------------------------------------


def _state(cx: Cortex) -> tuple[Any, ...]:
    stats = cx.stats()
    head = list(cx.journal(start=2**62, reverse=True))[:1]
    return snapshot(cx), head, stats


NAIVE = datetime(2030, 6, 1)

BAD_CALLS: list[tuple[str, Callable[[Cortex, dict[str, Uri]], object], type[Exception]]] = [
    ("bad data", lambda cx, u: cx.write(fact(confidence=1.5)), ValidationError),
    (
        "not data",
        lambda cx, u: cx.write({"statement": "x"}),  # type: ignore[arg-type]
        ValidationError,
    ),
    ("duplicate tags", lambda cx, u: cx.write(fact(), tags=["a", "a"]), ValidationError),
    ("long tag", lambda cx, u: cx.write(fact(), tags=["x" * 65]), ValidationError),
    ("17 tags", lambda cx, u: cx.write(fact(), tags=[f"t{i}" for i in range(17)]), ValidationError),
    (
        "17 frames",
        lambda cx, u: cx.write(fact(), frames=[frame(f"o{i}") for i in range(17)]),
        ValidationError,
    ),
    ("long obj_ref", lambda cx, u: cx.write(fact(), frames=[frame("o" * 257)]), ValidationError),
    ("importance 11", lambda cx, u: cx.write(fact(), importance=11), ValidationError),
    ("importance -1", lambda cx, u: cx.write(fact(), importance=-1), ValidationError),
    ("naive valid_from", lambda cx, u: cx.write(fact(), valid_from=NAIVE), ValidationError),
    ("naive expires_at", lambda cx, u: cx.write(fact(), expires_at=NAIVE), ValidationError),
    (
        "window reversed",
        lambda cx, u: cx.write(fact(), valid_from=T0, valid_until=T0 - timedelta(1)),
        ValidationError,
    ),
    ("expired", lambda cx, u: cx.write(fact(), expires_at=T0 - timedelta(1)), ValidationError),
    ("bad visibility", lambda cx, u: cx.write(fact(), visibility="public"), ValidationError),
    ("bad confidence", lambda cx, u: cx.write(fact(), confidence=2.0), ValidationError),
    (
        "forms over budget",
        lambda cx, u: cx.write(fact(), forms=Forms(short="x" * 201, medium="m")),
        ValidationError,
    ),
    (
        "empty forms",
        lambda cx, u: cx.write(fact(), forms=Forms(short="", medium="m")),
        ValidationError,
    ),
    ("long created_by", lambda cx, u: cx.write(fact(), created_by="c" * 300), ValidationError),
    ("taken id", lambda cx, u: cx.write(fact(), id=u["live"].id), ConflictError),
    (
        "update wrong type",
        lambda cx, u: cx.update(u["live"], Goal(statement="g", status=GoalStatus.ACTIVE)),
        ValidationError,
    ),
    ("update bad data", lambda cx, u: cx.update(u["live"], fact(confidence=-1.0)), ValidationError),
    ("update tombstoned", lambda cx, u: cx.update(u["dead"], fact(5)), TombstonedError),
    ("update purged", lambda cx, u: cx.update(u["purged"], fact(5)), TombstonedError),
    (
        "stale expected_version",
        lambda cx, u: cx.update(u["live"], fact(5), expected_version=1),
        ConflictError,
    ),
    ("update missing", lambda cx, u: cx.update(new_id(), fact(5)), NotFoundError),
    ("empty update_head", lambda cx, u: cx.update_head(u["live"]), ValidationError),
    ("update_head type", lambda cx, u: cx.update_head(u["live"], type="Goal"), ValidationError),
    (
        "update_head importance",
        lambda cx, u: cx.update_head(u["live"], importance=11),
        ValidationError,
    ),
    ("update_head tags", lambda cx, u: cx.update_head(u["live"], tags=["a", "a"]), ValidationError),
    (
        "update_head frames",
        lambda cx, u: cx.update_head(u["live"], frames=[frame(f"{i}") for i in range(17)]),
        ValidationError,
    ),
    (
        "update_head visibility",
        lambda cx, u: cx.update_head(u["live"], visibility="x"),
        ValidationError,
    ),
    (
        "update_head tombstoned",
        lambda cx, u: cx.update_head(u["dead"], importance=1),
        TombstonedError,
    ),
    ("tombstone no reason", lambda cx, u: cx.tombstone(u["live"], ""), ValidationError),
    ("purge no reason", lambda cx, u: cx.purge(u["live"], ""), ValidationError),
    (
        "edge to missing",
        lambda cx, u: cx.add_edge(u["live"], "references", new_id()),
        NotFoundError,
    ),
    ("self edge", lambda cx, u: cx.add_edge(u["live"], "references", u["live"]), ValidationError),
    ("edge bad type", lambda cx, u: cx.add_edge(u["live"], "knows", u["dead"]), ValidationError),
    (
        "remove missing edge",
        lambda cx, u: cx.remove_edge(u["live"], "contradicts", u["dead"]),
        NotFoundError,
    ),
    (
        "write_many one bad",
        lambda cx, u: cx.write_many([fact(7), NewMemory(data=fact(8), tags=["a"] * 2)]),
        ValidationError,
    ),
    (
        "write_many taken id",
        lambda cx, u: cx.write_many([fact(7), NewMemory(data=fact(8), id=u["dead"].id)]),
        ConflictError,
    ),
]


@pytest.fixture
def populated(cx: Cortex, clock: Clock) -> dict[str, Uri]:
    live = cx.write(fact(1), tags=["a"], frames=[frame()])
    clock.tick()
    cx.update(live, fact(2))
    dead = cx.write(fact(3))
    cx.tombstone(dead, "gone")
    purged = cx.write(fact(4), tags=["p"])
    cx.purge(purged, "erased")
    cx.add_edge(live, "references", dead)
    clock.tick()
    return {"live": live, "dead": dead, "purged": purged}


@pytest.mark.parametrize(
    ("call", "error"), [(c, e) for _, c, e in BAD_CALLS], ids=[n for n, _, _ in BAD_CALLS]
)
def test_bad_input_leaves_the_store_unchanged(
    cx: Cortex,
    populated: dict[str, Uri],
    call: Callable[[Cortex, dict[str, Uri]], object],
    error: type[Exception],
) -> None:
    before = _state(cx)
    with pytest.raises(error):
        call(cx, populated)
    assert _state(cx) == before
    assert cx.verify().ok


# -- the write path's journal entries, built from shared parts ---------------------------------


def test_a_write_leaves_its_journal_tail_remembered(cx: Cortex) -> None:
    """The next write takes the last entry's digest from the memo, not by hashing it again.

    ``Store._stage_new`` puts entries made in C (``JournalWriter.staged``): the memo holds the
    stored tail and its digest after a single write and after a batch.
    """
    for write in (lambda: cx.write(fact(1)), lambda: cx.write_many([fact(2), fact(3)])):
        write()
        with cx._kv.read() as r:
            key, value = next(r.scan(K.JOURNAL, reverse=True))
        memo = cortex.engine.journal._tail_memo[0]
        assert memo == (value, hashlib.sha256(_unseal(key, value)).digest())


def _journal_at(
    seq: int, prev: bytes, at: datetime, by: str
) -> cortex.engine.journal.JournalWriter:
    j = cortex.engine.journal.JournalWriter.__new__(cortex.engine.journal.JournalWriter)
    j.txn, j.at, j.by, j.seq, j.prev = None, at, by, seq - 1, prev  # type: ignore[assignment]
    j._write_shared = None
    return j


@settings(max_examples=200)
@given(
    seq=st.integers(1, 2**63 + 1),
    version=st.integers(1, 2**63 - 1),
    mtype=st.sampled_from(list(MemoryType)),
    digest=st.binary(min_size=32, max_size=32),
    prev=st.binary(min_size=32, max_size=32),
    micros=st.integers(-(2**40), 2**52),
    by=st.text(min_size=1, max_size=64),
    raw_id=st.binary(min_size=16, max_size=16),
)
@example(
    seq=1,
    version=1,
    mtype=MemoryType.FACT,
    digest=bytes(32),
    prev=bytes(32),
    micros=0,
    by="a",
    raw_id=bytes(16),
)
@example(
    seq=23,
    version=24,
    mtype=MemoryType.EVENT,
    digest=b"\xff" * 32,
    prev=bytes(32),
    micros=-1,
    by="é" * 128,
    raw_id=b"\xff" * 16,
)
@example(
    seq=255,
    version=256,
    mtype=MemoryType.IDENTITY,
    digest=bytes(32),
    prev=bytes(32),
    micros=2**32,
    by="x" * 256,
    raw_id=bytes(16),
)
@example(
    seq=65536,
    version=2**32,
    mtype=MemoryType.GOAL,
    digest=bytes(32),
    prev=bytes(32),
    micros=2**52,
    by="Ω",
    raw_id=bytes(16),
)
def test_write_entry_equals_the_codec(
    *,
    seq: int,
    version: int,
    mtype: MemoryType,
    digest: bytes,
    prev: bytes,
    micros: int,
    by: str,
    raw_id: bytes,
) -> None:
    """``JournalWriter.write_entry`` puts the bytes ``append(JournalKind.WRITE, ...)`` would."""
    at = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)
    mid = MemoryId(raw_id)
    try:
        want = JOURNAL_CODEC.encode(
            JournalEntry(
                seq=seq,
                kind=JournalKind.WRITE,
                at=at,
                by=by,
                prev=prev,
                id=mid,
                type=mtype,
                version=version,
                hash=digest,
            ),
            "journal",
        )
    except ValidationError as exc:
        with pytest.raises(ValidationError) as got:
            _journal_at(seq, prev, at, by).write_entry(mid, mtype, version, digest)
        assert (got.value.field, got.value.rule) == (exc.field, exc.rule)
        return
    j = _journal_at(seq, prev, at, by)
    key, value = j.write_entry(mid, mtype, version, digest)
    assert key == K.journal_key(seq)
    assert value == _seal(want)
    assert j.seq == seq and j.prev == hashlib.sha256(want).digest()
    # the next entry (built from the shared parts) chains on this one
    if seq + 1 < 2**63:
        key2, value2 = j.write_entry(mid, mtype, version, digest)
        want2 = JOURNAL_CODEC.encode(
            JournalEntry(
                seq=seq + 1,
                kind=JournalKind.WRITE,
                at=at,
                by=by,
                prev=hashlib.sha256(want).digest(),
                id=mid,
                type=mtype,
                version=version,
                hash=digest,
            ),
            "journal",
        )
        assert (key2, value2) == (K.journal_key(seq + 1), _seal(want2))
