"""A stateful test: a Cortex driven side by side with a plain-dict model of what it should hold."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
)

from cortex import (
    ConflictError,
    Cortex,
    Data,
    EdgeType,
    FrameRef,
    MemoryId,
    MemoryType,
    NewMemory,
    NotFoundError,
    TombstonedError,
    ValidationError,
    Visibility,
)
from cortex.index.lexical import analyze
from tests.bm25 import check_ranking, scores
from tests.strategies import any_data, data_of_type, frames, memory_types, tags

EdgeKey = tuple[MemoryId, EdgeType, MemoryId]


@dataclass
class Model:
    """What the store should say about one memory."""

    type: MemoryType
    versions: list[Data]
    tags: tuple[str, ...] = ()
    frames: tuple[FrameRef, ...] = ()
    importance: int = 5
    visibility: Visibility = Visibility.PRIVATE
    tombstoned: bool = False
    purged: bool = False
    tombstone_reason: str | None = None
    notes: list[str] = field(default_factory=list)


class TickingClock:
    """Each call is one millisecond after the last: distinct, ordered, reproducible times."""

    def __init__(self) -> None:
        self.now = datetime(2031, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


small_tags = tags(max_size=3)
small_frames = frames(max_size=3)
importances = st.integers(0, 10)
visibilities = st.sampled_from(list(Visibility))
edge_types = st.sampled_from(list(EdgeType))
reasons = st.sampled_from(["obsolete", "wrong", "user asked"])


class StoreMachine(RuleBasedStateMachine):
    """Every rule calls the store and updates the model; the invariants compare the two."""

    mems = Bundle("mems")

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="cortex-model-"))
        self.clock = TickingClock()
        self.cx = Cortex.open(self.dir / "s", actor="model", clock=self.clock)
        self.model: dict[MemoryId, Model] = {}
        self.edges: dict[EdgeKey, bool] = {}  # -> removed
        self.steps = 0

    def teardown(self) -> None:
        try:
            report = self.cx.verify()
            assert report.ok, report.problems
            self.check_everything()
        finally:
            self.cx.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- rules -------------------------------------------------------------------------------

    @initialize(target=mems, data=any_data())
    def first(self, data: Data) -> MemoryId:
        uri = self.cx.write(data)
        self.model[uri.id] = Model(type=data.TYPE, versions=[data])
        return uri.id

    @rule(
        target=mems,
        data=any_data(),
        tags_=small_tags,
        frames_=small_frames,
        importance=importances,
        visibility=visibilities,
    )
    def write(
        self,
        data: Data,
        tags_: tuple[str, ...],
        frames_: tuple[FrameRef, ...],
        importance: int,
        visibility: Visibility,
    ) -> MemoryId:
        uri = self.cx.write(
            data, tags=tags_, frames=frames_, importance=importance, visibility=visibility
        )
        assert uri.version == 1 and uri.type is data.TYPE
        assert uri.id not in self.model
        self.model[uri.id] = Model(
            type=data.TYPE,
            versions=[data],
            tags=tags_,
            frames=frames_,
            importance=importance,
            visibility=visibility,
        )
        return uri.id

    @rule(target=mems, items=st.lists(any_data(), min_size=1, max_size=3), bad=st.booleans())
    def write_many(self, items: list[Data], bad: bool) -> object:
        specs = [NewMemory(data=d) for d in items]
        if bad:
            specs.append(NewMemory(data=items[0], importance=11))
            with pytest.raises(ValidationError):
                self.cx.write_many(specs)
            return multiple()
        uris = self.cx.write_many(specs)
        for uri, d in zip(uris, items, strict=True):
            self.model[uri.id] = Model(type=d.TYPE, versions=[d])
        return multiple(*(u.id for u in uris))

    @rule(mid=mems, taken=st.booleans(), data=any_data())
    def write_with_caller_id(self, mid: MemoryId, taken: bool, data: Data) -> None:
        if taken:
            with pytest.raises(ConflictError):
                self.cx.write(data, id=mid)
            return
        fresh = MemoryId(bytes(16 - len(mid.bytes[:15])) + mid.bytes[:15])
        if fresh in self.model:
            return
        uri = self.cx.write(data, id=fresh)
        assert uri.id == fresh
        self.model[fresh] = Model(type=data.TYPE, versions=[data])

    @rule(
        mid=mems,
        draw=st.data(),
        how=st.sampled_from(["plain", "plain", "cas", "cas", "stale", "other_type"]),
    )
    def update(self, mid: MemoryId, draw: st.DataObject, how: str) -> None:
        m = self.model[mid]
        current = len(m.versions)
        if how == "other_type":
            other = draw.draw(memory_types().filter(lambda t: t is not m.type), label="type")
            data = draw.draw(data_of_type(other), label="data")
            with pytest.raises(TombstonedError if m.tombstoned else ValidationError):
                self.cx.update(mid, data)
            return
        data = draw.draw(data_of_type(m.type), label="data")
        expected = {"plain": None, "cas": current, "stale": current - 1}[how]
        if m.tombstoned:
            with pytest.raises(TombstonedError):
                self.cx.update(mid, data, expected_version=expected)
            return
        if how == "stale":
            with pytest.raises(ConflictError) as info:
                self.cx.update(mid, data, expected_version=expected)
            assert not isinstance(info.value, TombstonedError)
            return
        uri = self.cx.update(mid, data, expected_version=expected)
        assert uri.version == current + 1
        m.versions.append(data)

    @rule(
        mid=mems,
        tags_=st.none() | small_tags,
        frames_=st.none() | small_frames,
        importance=st.none() | importances,
        visibility=st.none() | visibilities,
    )
    def update_head(
        self,
        mid: MemoryId,
        tags_: tuple[str, ...] | None,
        frames_: tuple[FrameRef, ...] | None,
        importance: int | None,
        visibility: Visibility | None,
    ) -> None:
        m = self.model[mid]
        call = dict(tags=tags_, frames=frames_, importance=importance, visibility=visibility)
        if all(v is None for v in call.values()):
            with pytest.raises(ValidationError):
                self.cx.update_head(mid, **call)  # type: ignore[arg-type]
            return
        if m.tombstoned:
            with pytest.raises(TombstonedError):
                self.cx.update_head(mid, **call)  # type: ignore[arg-type]
            return
        head = self.cx.update_head(mid, **call)  # type: ignore[arg-type]
        if tags_ is not None:
            m.tags = tags_
        if frames_ is not None:
            m.frames = frames_
        if importance is not None:
            m.importance = importance
        if visibility is not None:
            m.visibility = visibility
        assert (head.tags, head.frames, head.importance, head.visibility) == (
            m.tags,
            m.frames,
            m.importance,
            m.visibility,
        )

    @rule(mid=mems, reason=reasons, purge=st.booleans())
    def retire(self, mid: MemoryId, reason: str, purge: bool) -> None:
        m = self.model[mid]
        stone = self.cx.purge(mid, reason) if purge else self.cx.tombstone(mid, reason)
        if not m.tombstoned:
            m.tombstoned, m.tombstone_reason = True, reason
        if purge:
            m.purged = True
            m.tags, m.frames = (), ()
        assert stone.reason == m.tombstone_reason
        assert (stone.purged_at is not None) == m.purged

    @rule(src=mems, dst=mems, et=edge_types)
    def add_edge(self, src: MemoryId, dst: MemoryId, et: EdgeType) -> None:
        if src == dst:
            with pytest.raises(ValidationError):
                self.cx.add_edge(src, et, dst)
            return
        edge = self.cx.add_edge(src, et, dst)
        assert (edge.src, edge.type, edge.dst, edge.removed) == (src, et, dst, False)
        self.edges[(src, et, dst)] = False

    @rule(src=mems, dst=mems, et=edge_types, draw=st.data())
    def remove_edge(self, src: MemoryId, dst: MemoryId, et: EdgeType, draw: st.DataObject) -> None:
        key = (src, et, dst)
        pick_known: bool = draw.draw(st.booleans(), label="a known edge")
        if pick_known and self.edges:
            known = sorted(self.edges, key=lambda k: (k[0].bytes, k[1], k[2].bytes))
            key = draw.draw(st.sampled_from(known), label="edge")
        if key not in self.edges:
            with pytest.raises(NotFoundError):
                self.cx.remove_edge(*key)
            return
        edge = self.cx.remove_edge(*key)
        assert edge.removed and (edge.src, edge.type, edge.dst) == key
        self.edges[key] = True

    @rule(draw=st.data(), limit=st.integers(1, 8))
    def lexical_search(self, draw: st.DataObject, limit: int) -> None:
        """Search for words of a live memory: the ranking is BM25 over exactly the live ones."""
        docs = self.live_terms()
        words = sorted({t for terms in docs.values() for t in terms})
        if not words:
            return
        query = " ".join(draw.draw(st.lists(st.sampled_from(words), min_size=1, max_size=3)))
        check_ranking(self.cx._lexical_search(query, limit), scores(docs, query), limit)

    @rule()
    def reopen(self) -> None:
        self.cx.close()
        self.cx = Cortex.open(self.dir / "s", actor="model", clock=self.clock)

    # -- invariants --------------------------------------------------------------------------

    @invariant()
    def store_agrees_with_model(self) -> None:
        self.steps += 1
        self.check_everything()
        if self.steps % 10 == 0:
            report = self.cx.verify()
            assert report.ok, report.problems

    def live_terms(self) -> dict[MemoryId, list[str]]:
        return {mid: analyze(m.versions[-1]) for mid, m in self.model.items() if not m.tombstoned}

    def check_everything(self) -> None:
        cx = self.cx
        for mid, m in self.model.items():
            latest = cx.resolve_latest(mid)
            head = latest.head
            n = len(m.versions)
            assert head.type is m.type
            assert head.current_version == n and latest.version.version == n
            assert latest.uri.version == n and latest.uri.type is m.type
            assert (head.tags, head.frames) == (m.tags, m.frames)
            assert (head.importance, head.visibility) == (m.importance, m.visibility)
            assert latest.tombstoned == m.tombstoned
            purged = head.tombstone is not None and head.tombstone.purged_at is not None
            assert purged == m.purged
            if m.tombstoned:
                assert head.tombstone is not None
                assert head.tombstone.reason == m.tombstone_reason
            hist = cx.history(mid)
            assert [h.version.version for h in hist] == list(range(1, n + 1))
            if m.purged:
                assert latest.data is None and head.forms is None
                assert all(h.data is None and h.version.data is None for h in hist)
            else:
                assert latest.data == m.versions[-1]
                assert [h.data for h in hist] == m.versions
            got = {
                (e.src, e.type, e.dst, e.removed)
                for e in cx.edges(mid, direction="both", include_removed=True)
            }
            want = {(s, t, d, r) for (s, t, d), r in self.edges.items() if mid in (s, d)}
            assert got == want
            live = {(e.src, e.type, e.dst) for e in cx.edges(mid, direction="out")}
            assert live == {(s, t, d) for (s, t, d), r in self.edges.items() if s == mid and not r}
        stats = cx.stats()
        models = list(self.model.values())
        assert stats["memories"] == len(models)
        assert stats["live"] == sum(not m.tombstoned for m in models)
        assert stats["tombstoned"] == sum(m.tombstoned and not m.purged for m in models)
        assert stats["purged"] == sum(m.purged for m in models)
        assert stats["versions"] == sum(len(m.versions) for m in models)
        assert stats["edges"] == len(self.edges)
        for t in MemoryType:
            assert stats["by_type"][t.type_name] == sum(m.type is t for m in models)
        docs = self.live_terms()
        lex = stats["lexical"]
        assert lex["documents"] == len(docs)
        assert lex["postings"] == sum(len(set(terms)) for terms in docs.values())
        assert lex["terms"] == len({t for terms in docs.values() for t in terms})


StoreMachine.TestCase.settings = settings(max_examples=50, stateful_step_count=30, deadline=None)
TestStoreModel = StoreMachine.TestCase
