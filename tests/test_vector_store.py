"""Vectors in the store (issue 5 item 3): ``vec/`` records kept in the write transaction, the
store's one model (``meta/vectors``), re-embedding, pending embeddings, and ``verify``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cortex import (
    Cortex,
    JournalKind,
    MemoryId,
    NewMemory,
    Query,
    ValidationError,
    export_store,
    import_bundle,
)
from cortex.index.embed import HashingEmbedder
from cortex.storage.keys import vec_key

from .vsupport import (
    DIM,
    HALF,
    E,
    embedding_of_current,
    fact,
    open_store,
    put_raw_vec,
    raw_vec,
    sealed_vector,
    stored_vector,
    topic_fact,
    vec_ids,
    vec_record,
    vectors_meta,
)


@pytest.fixture
def cx(store_path: Any) -> Iterator[Cortex]:
    with open_store(store_path, embedder=E) as store:
        yield store


def _assert_current(cx: Cortex, mid: MemoryId) -> None:
    rec = vec_record(cx, mid)
    assert rec is not None
    head = cx.resolve_latest(mid).head
    assert (rec.model_id, rec.dim, rec.version) == (E.model_id, DIM, head.current_version)
    assert np.allclose(stored_vector(rec), embedding_of_current(cx, mid), atol=HALF)


# -- written in the write transaction ----------------------------------------------------------


def test_write_stores_the_vector_of_version_1(cx: Cortex) -> None:
    u = cx.write(fact("green tea in the morning"))
    _assert_current(cx, u.id)
    # unit length up to the float16 rounding of its values
    assert np.isclose(np.linalg.norm(stored_vector(vec_record(cx, u.id))), 1.0, atol=1e-3)  # type: ignore[arg-type]
    meta = vectors_meta(cx)
    assert meta is not None and (meta.model_id, meta.dim) == (E.model_id, DIM)
    # the write is one journal entry: no separate ``embed`` entry for a vector written with it
    kinds = [e.kind for e in cx.journal()]
    assert kinds.count(JournalKind.WRITE) == 1 and JournalKind.EMBED not in kinds
    assert cx.verify().ok


def test_write_many_stores_every_vector(cx: Cortex) -> None:
    uris = cx.write_many([topic_fact(i) for i in range(70)] + [NewMemory(data=fact("x y z"))])
    assert vec_ids(cx) == {u.id for u in uris}  # 71 > one embedding batch of 64
    for u in uris[::10] + uris[-2:]:
        _assert_current(cx, u.id)
    assert cx.verify().ok


def test_write_forms_override_is_what_gets_embedded(cx: Cortex) -> None:
    from cortex import Forms

    u = cx.write(fact("tea"), forms=Forms(short="s", medium="violin lessons on sunday"))
    rec = vec_record(cx, u.id)
    assert rec is not None
    assert np.allclose(stored_vector(rec), E.embed(["violin lessons on sunday"])[0], atol=HALF)


def test_update_replaces_the_vector_with_the_new_versions(cx: Cortex) -> None:
    u = cx.write(fact("green tea"))
    old = stored_vector(vec_record(cx, u.id))  # type: ignore[arg-type]
    u2 = cx.update(u, fact("mountain hiking"))
    rec = vec_record(cx, u.id)
    assert rec is not None and rec.version == u2.version == 2
    assert not np.array_equal(stored_vector(rec), old)
    _assert_current(cx, u.id)
    res = cx.find(Query(near="mountain hiking", limit=1))
    assert res.uris == [u2]
    stored = stored_vector(rec)  # the index searches the stored vector, scaled to unit length
    want = float(stored / np.linalg.norm(stored) @ E.embed(["mountain hiking"])[0])
    assert res.hits[0].scores["vector"] == pytest.approx(want, abs=1e-6)
    assert cx.verify().ok


def test_a_failed_write_leaves_no_vector(cx: Cortex) -> None:
    from cortex import ConflictError

    u = cx.write(fact("a"))
    with pytest.raises(ConflictError):
        cx.write(fact("b"), id=u.id)
    with pytest.raises(ConflictError):
        cx.update(u, fact("c"), expected_version=7)
    _assert_current(cx, u.id)
    assert stored_vector(vec_record(cx, u.id)) @ E.embed(  # type: ignore[arg-type]
        [cx.resolve_latest(u.id).version.forms.medium]  # type: ignore[union-attr]
    )[0] == pytest.approx(1.0, abs=1e-3)


@pytest.mark.parametrize("how", ["tombstone", "purge", "tombstone+purge"])
def test_tombstone_and_purge_remove_the_vector(cx: Cortex, how: str) -> None:
    keep = cx.write(fact("kept memory"))
    u = cx.write(fact("green tea"))
    assert cx.find(Query(near="green tea", limit=1)).uris == [u]  # the sidecar holds it
    if "tombstone" in how:
        cx.tombstone(u, "wrong")
    if "purge" in how:
        cx.purge(u, "erase")
    assert vec_record(cx, u.id) is None and vec_ids(cx) == {keep.id}
    assert cx.find(Query(near="green tea", limit=5)).uris == [keep]
    assert cx.verify().ok


# -- verify catches damage ---------------------------------------------------------------------


def _problems(cx: Cortex) -> list[str]:
    return [f"{p.record}: {p.what}" for p in cx.verify().problems]


def test_verify_catches_a_flipped_byte_in_a_vector(cx: Cortex) -> None:
    u = cx.write(fact("green tea"))
    raw = bytearray(raw_vec(cx, u.id))  # type: ignore[arg-type]
    raw[len(raw) // 2] ^= 0x01
    put_raw_vec(cx, u.id, bytes(raw))
    problems = _problems(cx)
    assert problems and all("vec/" in p or u.id.bytes.hex() in p for p in problems), problems


def test_verify_catches_the_vector_of_a_tombstoned_memory(cx: Cortex) -> None:
    u = cx.write(fact("green tea"))
    saved = raw_vec(cx, u.id)
    cx.tombstone(u, "x")
    assert cx.verify().ok
    put_raw_vec(cx, u.id, saved)  # type: ignore[arg-type]
    assert any("tombstoned" in p for p in _problems(cx))


def test_verify_catches_a_stale_version(cx: Cortex) -> None:
    u = cx.write(fact("green tea"))
    saved = raw_vec(cx, u.id)
    cx.update(u, fact("black coffee"))
    assert cx.verify().ok
    put_raw_vec(cx, u.id, saved)  # type: ignore[arg-type]
    assert any("version 1, not the current" in p for p in _problems(cx)), _problems(cx)


def test_verify_catches_a_vector_of_another_model(cx: Cortex) -> None:
    u = cx.write(fact("green tea"))
    other = HashingEmbedder(32)
    put_raw_vec(cx, u.id, sealed_vector(other.model_id, 32, 1, other.embed(["green tea"])[0]))
    assert any(other.model_id in p for p in _problems(cx)), _problems(cx)
    put_raw_vec(cx, u.id, sealed_vector("some-other-model", DIM, 1, E.embed(["green tea"])[0]))
    assert any("some-other-model" in p for p in _problems(cx)), _problems(cx)


def test_verify_catches_a_vector_of_no_memory(cx: Cortex) -> None:
    cx.write(fact("green tea"))
    ghost = sealed_vector(E.model_id, DIM, 1, E.embed(["ghost"])[0])
    cx._kv.write(lambda txn: txn.put(vec_key(999), ghost))  # a row no memory has
    assert any("vector of no memory" in p for p in _problems(cx)), _problems(cx)


def test_verify_catches_a_vector_of_the_wrong_length(cx: Cortex) -> None:
    u = cx.write(fact("green tea"))
    put_raw_vec(cx, u.id, sealed_vector(E.model_id, DIM, 1, np.ones(DIM - 1) / 7))
    assert _problems(cx)


# -- the store's model -------------------------------------------------------------------------


def test_the_store_records_its_model_and_refuses_another(place: Any) -> None:
    path = place("s")
    with open_store(path, embedder=E) as cx:
        u = cx.write(fact("green tea"))
    other = HashingEmbedder(32)
    with pytest.raises(ValidationError) as info:
        open_store(path, embedder=other)
    assert info.value.field == "embedder"
    assert E.model_id in str(info.value) and "reembed" in str(info.value)
    # the refused open changed nothing, and the store is still usable with its model
    with open_store(path, embedder=E) as cx:
        _assert_current(cx, u.id)
        assert cx.verify().ok
    # without an embedder the store opens fine (lexical only)
    with open_store(path) as cx:
        assert cx.vector_state() == "no embedder"
        assert cx.find(Query(text="tea", limit=3)).uris == [u]


@pytest.mark.lmdb_only  # the saved cache of the old model (a URL store keeps none)
def test_reembed_re_embeds_every_live_memory(place: Any) -> None:
    path = place("s")
    with open_store(path, embedder=E) as cx:
        uris = cx.write_many([topic_fact(i) for i in range(80)])
        gone = cx.write(fact("tombstoned one"))
        cx.tombstone(gone, "x")
        cx.update(uris[0], fact("updated first"))
        cx.find(Query(near="tea", limit=3))  # a sidecar of the old model gets saved
    other = HashingEmbedder(32)
    calls: list[tuple[int, int]] = []
    with open_store(
        path, embedder=other, reembed=True, progress=lambda d, t: calls.append((d, t))
    ) as cx:
        assert calls and calls[-1] == (80, 80) and all(t == 80 for _, t in calls)
        assert [d for d, _ in calls] == sorted(d for d, _ in calls)
        meta = vectors_meta(cx)
        assert meta is not None and (meta.model_id, meta.dim) == (other.model_id, 32)
        assert vec_ids(cx) == {u.id for u in uris}
        for u in uris[:3]:
            rec = vec_record(cx, u.id)
            assert rec is not None and rec.model_id == other.model_id and rec.dim == 32
            assert np.allclose(stored_vector(rec), embedding_of_current(cx, u.id, other), atol=HALF)
        assert cx.verify().ok, cx.verify().problems
        res = cx.find(Query(near="updated first", limit=1))
        assert res.uris == [cx.resolve_latest(uris[0].id).uri]
        assert "other_model" in cx.vector_state()
    # and now the old model is the one refused
    with pytest.raises(ValidationError) as info:
        open_store(path, embedder=E)
    assert info.value.field == "embedder"


def test_no_embedder_writes_no_vectors(place: Any) -> None:
    with open_store(place("s")) as cx:
        cx.write(fact("green tea"))
        assert vec_ids(cx) == set() and vectors_meta(cx) is None
        with pytest.raises(ValidationError) as info:
            cx.embed_pending()
        assert info.value.field == "embedder"


# -- pending: writes by handles without the embedder, imports -----------------------------------


def test_writes_without_the_embedder_get_vectors_on_the_next_open(place: Any) -> None:
    path = place("s")
    with open_store(path, embedder=E) as cx:
        a = cx.write(fact("green tea"))
        b = cx.write(fact("black coffee"))
    with open_store(path) as cx:  # no embedder
        c = cx.write(fact("mountain hiking"))
        cx.write_many([fact("reading novels")])
        b2 = cx.update(b, fact("black coffee with sugar"))
        assert vec_record(cx, b.id) is None  # the stale vector went with the update
        assert cx.verify().ok
    with open_store(path, embedder=E) as cx:
        assert len(vec_ids(cx)) == 4
        for mid in (a.id, b.id, c.id):
            _assert_current(cx, mid)
        assert vec_record(cx, b.id).version == b2.version  # type: ignore[union-attr]
        embeds = [e for e in cx.journal() if e.kind is JournalKind.EMBED]
        assert len(embeds) == 3  # b's new version, c, and the write_many one; a kept its vector
        assert cx.verify().ok
        assert cx.find(Query(near="mountain hiking", limit=1)).uris == [c]
    with open_store(path, embedder=E) as cx:  # nothing left to do: no more embed entries
        assert len([e for e in cx.journal() if e.kind is JournalKind.EMBED]) == 3


def test_embed_pending_takes_writes_of_handles_without_the_embedder(place: Any) -> None:
    from .vsupport import run_child

    path = place("s")
    with open_store(path, embedder=E) as cx:
        cx.write(fact("green tea"))
        assert cx.find(Query(near="violin", limit=5)).hits  # sidecar loaded
        [child_id] = run_child(path, [{"write": "learning the violin"}], embedder=False)
        mid = MemoryId.parse(child_id)
        assert vec_record(cx, mid) is None
        assert mid not in [h.memory.id for h in cx.find(Query(near="violin", limit=5))]
        assert cx.embed_pending() == 1
        _assert_current(cx, mid)
        assert cx.find(Query(near="learning the violin", limit=1)).hits[0].memory.id == mid
        assert cx.embed_pending() == 0
        assert cx.verify().ok


def test_imported_memories_get_vectors(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    with open_store(src) as cx:
        uris = [cx.write(topic_fact(i)) for i in range(5)]
        gone = cx.write(fact("tombstoned"))
        cx.tombstone(gone, "x")
        export_store(cx, tmp_path / "b.jsonl")
    with open_store(dst, embedder=E) as cx:
        import_bundle(cx, tmp_path / "b.jsonl")
        assert vec_ids(cx) == set()
        assert cx.verify().ok
        assert cx.embed_pending() == 5
        assert vec_ids(cx) == {u.id for u in uris}
        for u in uris:
            _assert_current(cx, u.id)
        assert cx.find(Query(near="mountain hiking trip in the alps number 2", limit=1)).uris == [
            uris[2]
        ]
        assert cx.verify().ok
    # the same by reopening
    dst2 = tmp_path / "dst2"
    with open_store(dst2) as cx:
        import_bundle(cx, tmp_path / "b.jsonl")
    with open_store(dst2, embedder=E) as cx:
        assert vec_ids(cx) == {u.id for u in uris}
        assert cx.verify().ok


# -- embedders that misbehave, and other handles ------------------------------------------------


class _Flaky:
    """An embedder that works until told to return garbage."""

    def __init__(self) -> None:
        self.model_id = E.model_id
        self.dim = DIM
        self.broken = False

    def embed(self, texts: list[str]) -> np.ndarray:
        out = E.embed(texts)
        return np.full_like(out, np.nan) if self.broken else out


def test_a_failing_embedder_fails_the_write_and_writes_nothing(place: Any) -> None:
    flaky = _Flaky()
    with open_store(place("s"), embedder=flaky) as cx:
        u = cx.write(fact("green tea"))
        head = next(cx.journal(reverse=True, start=2**62))
        flaky.broken = True
        for call in (
            lambda: cx.write(fact("black coffee")),
            lambda: cx.write_many([fact("a"), fact("b")]),
            lambda: cx.update(u, fact("mountain hiking")),
        ):
            with pytest.raises(ValidationError) as info:
                call()
            assert info.value.field == "embedder"
        assert next(cx.journal(reverse=True, start=2**62)) == head
        assert len(cx.find(Query(types=("Fact",), limit=10))) == 1
        _assert_current(cx, u.id)
        assert cx.verify().ok


def test_an_object_that_is_not_an_embedder_is_refused(place: Any) -> None:
    with pytest.raises(ValidationError) as info:
        open_store(place("s"), embedder=object())
    assert info.value.field == "embedder"


def test_update_head_keeps_the_vector(cx: Cortex) -> None:
    u = cx.write(fact("green tea"))
    before = raw_vec(cx, u.id)
    cx.update_head(u, tags=["drinks"])
    assert raw_vec(cx, u.id) == before
    assert cx.find(Query(near="green tea", tags=("drinks",), limit=1)).uris == [u]
    assert cx.verify().ok


def test_a_backup_has_the_vectors_and_rebuilds_its_index(tmp_path: Path, place: Any) -> None:
    with open_store(place("s"), embedder=E) as cx:
        uris = cx.write_many([topic_fact(i) for i in range(10)])
        cx.find(Query(near="x", limit=1))
        assert cx.backup(tmp_path / "bk").ok
    with open_store(tmp_path / "bk", embedder=E) as cx:
        assert vec_ids(cx) == {u.id for u in uris}
        assert cx.find(Query(near="baking sourdough bread number 5", limit=1)).uris == [uris[5]]
        assert cx.vector_state() == "rebuilt from the store (missing)"


def test_a_read_only_handle_searches_without_writing(place: Any) -> None:
    path = place("s")
    with open_store(path, embedder=E) as cx:
        uris = cx.write_many([topic_fact(i) for i in range(10)])
    with open_store(path, embedder=E, readonly=True) as cx:
        assert cx.find(Query(near="learning the violin number 7", limit=1)).uris == [uris[7]]
    if not isinstance(path, str):  # a URL store keeps no cache on disk at all
        assert not (path / "vectors").exists()  # a read-only handle saves no cache
    with pytest.raises(ValidationError):  # another model is refused read-only too
        open_store(path, embedder=HashingEmbedder(32), readonly=True)


def _damage_one_vector(path: Path) -> MemoryId:
    with open_store(path, embedder=E) as cx:
        u = cx.write(fact("green tea"))
        cx.write(fact("black coffee"))
        raw = bytearray(raw_vec(cx, u.id))  # type: ignore[arg-type]
        raw[len(raw) // 2] ^= 0x01
        put_raw_vec(cx, u.id, bytes(raw))
        assert not cx.verify().ok
    return u.id


def test_a_damaged_vector_is_reported_then_re_embedded(place: Any) -> None:
    path = place("s")
    mid = _damage_one_vector(path)
    with open_store(path) as cx:  # without the embedder the store still opens and reads
        assert len(cx.find(Query(text="tea", limit=5))) == 1
        assert not cx.verify().ok
    with open_store(path, embedder=E) as cx:  # the sweep treats it as missing: re-embedded
        assert cx.verify().ok
        _assert_current(cx, mid)


def test_reembed_with_the_same_model_repairs_a_damaged_vector(place: Any) -> None:
    path = place("s")
    mid = _damage_one_vector(path)
    with open_store(path, embedder=E, reembed=True) as cx:
        assert cx.verify().ok
        _assert_current(cx, mid)
        assert cx.find(Query(near="green tea", limit=1)).hits[0].memory.id == mid


def test_the_pending_sweep_on_open_reports_progress(place: Any) -> None:
    path = place("s")
    with open_store(path) as cx:
        uris = cx.write_many([topic_fact(i) for i in range(70)])
    calls: list[tuple[int, int]] = []
    with open_store(path, embedder=E, progress=lambda d, t: calls.append((d, t))) as cx:
        assert calls == [(64, 70), (70, 70)]
        assert vec_ids(cx) == {u.id for u in uris}
        assert cx.verify().ok
