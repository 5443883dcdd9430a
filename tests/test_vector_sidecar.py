"""The vector index cache beside the store (issue 5 item 3): load or rebuild, saved on close,
damaged files detected and rebuilt, caught up from the journal (other processes too), and
equal to a fresh build after crash-like states."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cortex import MemoryId, MemoryType, Query, Uri, ValidationError
from cortex.engine.sidecar import embed_checked
from cortex.index.ann import DEFAULT_EF, VectorIndex
from cortex.index.embed import HashingEmbedder

from .vsupport import (
    DIM,
    TOPICS,
    E,
    fact,
    fresh_snapshot,
    mixed_types,
    open_store,
    run_child,
    snapshot,
    topic_fact,
)


def _store(path: Path, n: int = 24) -> list[str]:
    with open_store(path, embedder=E) as cx:
        return [str(u) for u in cx.write_many([topic_fact(i) for i in range(n)])]


def _cache(path: Path) -> Path:
    return path / "vectors"


def _meta(path: Path) -> dict:  # type: ignore[type-arg]
    doc = json.loads((_cache(path) / "index.json").read_text())
    return doc["meta"]  # type: ignore[no-any-return]


def test_first_search_rebuilds_close_saves_reopen_loads(tmp_path: Path) -> None:
    path = tmp_path / "s"
    _store(path)
    assert not _cache(path).exists()  # writing alone builds no index
    with open_store(path, embedder=E) as cx:
        assert cx.vector_state() == "not loaded"
        first = snapshot(cx)
        assert cx.vector_state() == "rebuilt from the store (missing)"
    meta = _meta(path)
    assert (meta["model_id"], meta["dim"], meta["count"]) == (E.model_id, DIM, 24)
    with open_store(path, embedder=E) as cx:
        assert snapshot(cx) == first
        assert cx.vector_state() == "loaded"
        u = cx.write(fact("a brand new memory about violins"))
        assert cx.find(Query(near="violins", limit=1)).uris == [u]  # caught up in the handle
    assert _meta(path)["count"] == 25
    with open_store(path, embedder=E) as cx:
        assert cx.find(Query(near="violins", limit=1)).uris == [u]
        assert cx.vector_state() == "loaded"
        loaded = snapshot(cx)
    assert fresh_snapshot(path) == loaded


def test_save_vectors_saves_without_closing(tmp_path: Path) -> None:
    path = tmp_path / "s"
    _store(path)
    with open_store(path, embedder=E) as cx:
        cx.find(Query(near="tea", limit=1))
        cx.save_vectors()
        assert _meta(path)["count"] == 24
        mtime = (_cache(path) / "index.json").stat().st_mtime_ns
        cx.save_vectors()  # nothing changed: nothing written
        assert (_cache(path) / "index.json").stat().st_mtime_ns == mtime


def test_a_handle_that_never_searched_leaves_the_cache_alone(tmp_path: Path) -> None:
    path = tmp_path / "s"
    _store(path)
    with open_store(path, embedder=E) as cx:
        cx.find(Query(near="tea", limit=1))
    before = _meta(path)
    with open_store(path, embedder=E) as cx:
        cx.write(fact("one more"))
    assert _meta(path) == before  # stale is fine: the next search catches up
    with open_store(path, embedder=E) as cx:
        assert (
            cx.find(Query(near="one more", limit=1))
            .hits[0]
            .memory.version.forms.medium.endswith(  # type: ignore[union-attr]
                "one more"
            )
        )
        assert cx.vector_state() == "loaded"


def _data_file(path: Path, kind: str) -> Path:
    return _cache(path) / _meta(path)["index_file" if kind == "index" else "labels_file"]["name"]


def _truncate(path: Path, kind: str) -> None:
    f = _data_file(path, kind)
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def _flip(path: Path, kind: str) -> None:
    f = _data_file(path, kind)
    b = bytearray(f.read_bytes())
    b[len(b) * 2 // 3] ^= 0x10
    f.write_bytes(bytes(b))


def _delete(path: Path, kind: str) -> None:
    _data_file(path, kind).unlink()


def _delete_meta(path: Path, kind: str) -> None:
    (_cache(path) / "index.json").unlink()


def _wrong_dim(path: Path, kind: str) -> None:
    """An index of the same model name but another dimension, saved properly."""
    other = VectorIndex(DIM // 2)
    other.add([MemoryId(bytes(16))], HashingEmbedder(DIM // 2).embed(["x"]))
    shutil.rmtree(_cache(path))
    other.save(_cache(path), model_id=E.model_id, watermark=10**6)


def _other_model(path: Path, kind: str) -> None:
    index, _ = VectorIndex.load(_cache(path), model_id=E.model_id, dim=DIM)
    index.save(_cache(path), model_id="some-other-model", watermark=10**6)


def _meta_garbage(path: Path, kind: str) -> None:
    (_cache(path) / "index.json").write_text("{not json")


DAMAGE: dict[str, tuple[Callable[[Path, str], None], str, str]] = {
    "truncated-index": (_truncate, "index", "truncated"),
    "truncated-labels": (_truncate, "labels", "truncated"),
    "flipped-index": (_flip, "index", "corrupt"),
    "flipped-labels": (_flip, "labels", "corrupt"),
    "deleted-index": (_delete, "index", "missing"),
    "deleted-labels": (_delete, "labels", "missing"),
    "deleted-metadata": (_delete_meta, "", "missing"),
    "garbage-metadata": (_meta_garbage, "", "bad_metadata"),
    "wrong-dim": (_wrong_dim, "", "wrong_dim"),
    "other-model": (_other_model, "", "other_model"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_cache_is_detected_and_rebuilt(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "s"
    _store(path)
    with open_store(path, embedder=E) as cx:
        cx.write(fact("written before the save"))
        good = snapshot(cx)
    fn, kind, reason = DAMAGE[damage]
    fn(path, kind)
    with open_store(path, embedder=E) as cx:
        assert snapshot(cx) == good
        assert cx.vector_state() == f"rebuilt from the store ({reason})"
    # the rebuild was saved over the damage
    with open_store(path, embedder=E) as cx:
        assert snapshot(cx) == good
        assert cx.vector_state() == "loaded"
    assert fresh_snapshot(path) == good


# -- catch-up ------------------------------------------------------------------------------------


def test_catch_up_sees_another_processes_writes_updates_and_tombstones(tmp_path: Path) -> None:
    path = tmp_path / "s"
    uris = _store(path, 16)
    ids = [u.split("/")[-1].split("#")[0] for u in uris]
    with open_store(path, embedder=E) as cx:
        assert cx.find(Query(near="violin", limit=3)).hits
        assert cx.vector_state().startswith("rebuilt")
        out = run_child(
            path,
            [
                {"write": "an accordion concert downtown"},
                {"update": ids[0], "statement": "quantum physics lecture"},
                {"tombstone": ids[1]},
            ],
        )
        new = MemoryId.parse(out[0])
        res = cx.find(Query(near="an accordion concert downtown", limit=1))
        assert res.hits[0].memory.id == new
        res = cx.find(Query(near="quantum physics lecture", limit=1))
        assert res.hits[0].memory.id == MemoryId.parse(ids[0]) and res.hits[0].uri.version == 2
        res = cx.find(Query(near=TOPIC1, limit=16))
        assert MemoryId.parse(ids[1]) not in [h.memory.id for h in res]
        live = snapshot(cx)
        assert cx.vector_state().startswith("rebuilt")  # caught up, not rebuilt again
    assert fresh_snapshot(path) == live


TOPIC1 = "black coffee with sugar number 1"


def test_catch_up_after_the_cache_was_saved(tmp_path: Path) -> None:
    """The index is saved; another process writes; the next open loads it and catches up."""
    path = tmp_path / "s"
    uris = _store(path, 16)
    ids = [u.split("/")[-1].split("#")[0] for u in uris]
    with open_store(path, embedder=E) as cx:
        cx.find(Query(near="x", limit=1))
    saved = _meta(path)["watermark"]
    run_child(
        path,
        [
            {"write": "an accordion concert downtown"},
            {"update": ids[2], "statement": "quantum physics lecture"},
            {"tombstone": ids[3]},
        ],
    )
    with open_store(path, embedder=E) as cx:
        live = snapshot(cx)
        assert cx.vector_state() == "loaded"
        assert cx.find(Query(near="quantum physics lecture", limit=1)).hits[0].uri.version == 2
    assert _meta(path)["watermark"] > saved
    assert fresh_snapshot(path) == live


def test_two_processes_saving_the_cache(tmp_path: Path) -> None:
    path = tmp_path / "s"
    _store(path, 12)
    with open_store(path, embedder=E) as cx:
        cx.find(Query(near="x", limit=1))
        # a child loads the cache, writes, searches and saves it on close
        run_child(path, [{"write": "an accordion concert"}, {"search": "accordion"}])
        cx.write(fact("a harpsichord recital"))
        live = snapshot(cx, ("accordion concert", "harpsichord recital"))
    with open_store(path, embedder=E) as cx:
        assert snapshot(cx, ("accordion concert", "harpsichord recital")) == live
        assert cx.vector_state() == "loaded"
    assert fresh_snapshot(path, ("accordion concert", "harpsichord recital")) == live


def test_crash_like_state_saved_then_more_writes_unsaved(tmp_path: Path) -> None:
    """Index saved; more writes, updates, tombstones by a handle that dies without saving."""
    path = tmp_path / "s"
    uris = _store(path, 16)
    with open_store(path, embedder=E) as cx:
        snapshot(cx)
    with open_store(path, embedder=E) as cx:
        cx.find(Query(near="x", limit=1))  # loaded
        cx.write(fact("an accordion concert downtown"))
        cx.update(uris[4], fact("quantum physics lecture"))
        cx.tombstone(uris[5], "x")
        cx.purge(uris[6], "x")
        # a crash: the LMDB commits stay, the in-memory index is lost unsaved
        cx._sidecar = None
    with open_store(path, embedder=E) as cx:
        live = snapshot(cx)
        assert cx.vector_state() == "loaded"
    assert fresh_snapshot(path) == live


def test_a_cache_newer_than_the_store_is_not_trusted(tmp_path: Path) -> None:
    path = tmp_path / "s"
    _store(path, 8)
    with open_store(path, embedder=E) as cx:
        snapshot(cx)
    shutil.copy(path / "data.mdb", tmp_path / "older.mdb")
    with open_store(path, embedder=E) as cx:
        cx.write(fact("lost write one"))
        cx.write(fact("lost write two"))
        snapshot(cx)  # the cache now reflects the two writes the store is about to lose
    shutil.copy(tmp_path / "older.mdb", path / "data.mdb")
    with open_store(path, embedder=E) as cx:
        u = cx.write(fact("an accordion concert downtown"))
        assert cx.find(Query(near="an accordion concert downtown", limit=1)).uris == [u]


def test_hnsw_path_matches_the_exact_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not reachable through the public API (Cortex has no exact_below option): the defaults
    of VectorIndex are patched so the sidecar answers from the hnswlib graph."""
    path = tmp_path / "s"
    _store(path, 40)
    exact = fresh_snapshot(path)
    init_kw = dict(VectorIndex.__init__.__kwdefaults__)  # type: ignore[arg-type]
    load_kw = dict(VectorIndex.load.__func__.__kwdefaults__)  # type: ignore[attr-defined]
    monkeypatch.setattr(VectorIndex.__init__, "__kwdefaults__", {**init_kw, "exact_below": 0})
    monkeypatch.setattr(
        VectorIndex.load.__func__,  # type: ignore[attr-defined]
        "__kwdefaults__",
        {**load_kw, "exact_below": 0},
    )
    assert fresh_snapshot(path) == exact
    with open_store(path, embedder=E) as cx:  # loaded, then caught up through the graph
        assert cx._sidecar is not None
        cx.write(fact("an accordion concert downtown"))
        assert (
            cx.find(Query(near="accordion concert", limit=1))
            .hits[0]
            .memory.version.forms.medium.endswith(  # type: ignore[union-attr]
                "downtown"
            )
        )
        assert cx._sidecar.index is not None and cx._sidecar.index.exact_below == 0


def test_an_older_save_put_back_is_caught_up(tmp_path: Path) -> None:
    """A cache older than the store (an earlier save restored, a crash mid-save) catches up."""
    path = tmp_path / "s"
    uris = _store(path, 12)
    with open_store(path, embedder=E) as cx:
        snapshot(cx)
    shutil.copytree(_cache(path), tmp_path / "old-cache")
    with open_store(path, embedder=E) as cx:
        cx.write(fact("an accordion concert downtown"))
        cx.update(uris[1], fact("quantum physics lecture"))
        cx.tombstone(uris[2], "x")
        snapshot(cx)
    # a crash between writing the new data files and replacing index.json leaves both
    for p in (tmp_path / "old-cache").iterdir():
        shutil.copy(p, _cache(path) / p.name)
    (_cache(path) / ".tmp-0123456789abcdef.hnsw").write_bytes(b"half a save")
    with open_store(path, embedder=E) as cx:
        live = snapshot(cx)
        assert cx.vector_state() == "loaded"
    names = sorted(p.name for p in _cache(path).iterdir())
    meta = _meta(path)
    assert names == sorted(
        [".lock", "index.json", meta["index_file"]["name"], meta["labels_file"]["name"]]
    )  # the stray temp file and the superseded data files are gone after the save
    assert fresh_snapshot(path) == live


def test_a_cache_that_cannot_be_saved_is_harmless(tmp_path: Path) -> None:
    path = tmp_path / "s"
    uris = _store(path, 6)
    (path / "vectors").write_bytes(b"not a directory")
    with open_store(path, embedder=E) as cx:
        res = cx.find(Query(near="baking sourdough bread number 5", limit=1))
        assert res.uris == [Uri.parse(uris[5])]
        cx.save_vectors()  # swallowed: the next open rebuilds
    with open_store(path, embedder=E) as cx:
        cx.find(Query(near="x", limit=1))
        assert cx.vector_state().startswith("rebuilt")


def test_an_update_without_the_embedder_drops_the_stale_vector_from_the_index(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s"
    uris = _store(path, 8)
    old_text = "reading long novels at night number 3"
    target = MemoryId.parse(uris[3].split("/")[-1].split("#")[0])
    with open_store(path, embedder=E) as cx:
        assert cx.find(Query(near=old_text, limit=1)).hits[0].memory.id == target
        run_child(path, [{"update": str(target), "statement": "quantum physics"}], embedder=False)
        res = cx.find(Query(near=old_text, limit=8))
        assert target not in [h.memory.id for h in res]  # no vector until it is embedded
        assert cx.embed_pending() == 1
        res = cx.find(Query(near="quantum physics", limit=1))
        assert res.hits[0].memory.id == target and res.hits[0].uri.version == 2


def test_vector_ef_sets_the_index_search_depth(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with open_store(path, embedder=E) as cx:
        cx.write(fact("green tea"))
        cx.find(Query(near="tea", limit=1))
        assert cx._sidecar is not None and cx._sidecar.index is not None
        assert cx._sidecar.index.ef == DEFAULT_EF == 64
    with open_store(path, embedder=E, vector_ef=200) as cx:  # loaded from the saved cache
        cx.find(Query(near="tea", limit=1))
        assert cx._sidecar is not None and cx._sidecar.index is not None
        assert cx._sidecar.index.ef == 200
    shutil.rmtree(path / "vectors")
    with open_store(path, embedder=E, vector_ef=48) as cx:  # rebuilt from the store
        cx.find(Query(near="tea", limit=1))
        assert cx._sidecar is not None and cx._sidecar.index is not None
        assert cx._sidecar.index.ef == 48
    for bad in (0, -1, 2.5, "64"):
        with pytest.raises(ValidationError) as info:
            open_store(path, embedder=E, vector_ef=bad)
        assert info.value.field == "vector_ef"


class _Fixed:
    """An embedder returning the given rows (float32 or float64), whatever the texts."""

    def __init__(self, rows: np.ndarray) -> None:
        self.rows = rows
        self.dim = rows.shape[1]
        self.model_id = "fixed"

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.rows


_rows = st.integers(1, 4).flatmap(
    lambda n: st.integers(1, 24).flatmap(
        lambda d: st.lists(
            st.lists(
                st.floats(-(2.0**60), 2.0**60, width=32) | st.sampled_from([0.0, -0.0, 1e-30]),
                min_size=d,
                max_size=d,
            ),
            min_size=n,
            max_size=n,
        )
    )
)


@given(_rows, st.booleans())
def test_embed_checked_scales_as_numpy_linalg_norm(rows: list[list[float]], wide: bool) -> None:
    """The unit rows are numpy.linalg.norm's (``embed_checked`` inlines its arithmetic).

    The same bytes: a vector's stored bytes never depend on which of the two computed them.
    """
    out = np.asarray(rows, dtype=np.float64 if wide else np.float32)
    given = out.copy()
    got = embed_checked(_Fixed(out), ["t"] * len(rows))  # type: ignore[arg-type]
    ref = np.asarray(out, dtype=np.float32)
    if np.all(np.isfinite(ref)):
        norms = np.linalg.norm(ref, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        want = (ref / norms).astype(np.float32)
        assert got.dtype == np.float32 and got.shape == want.shape
        assert got.tobytes() == want.tobytes()
    assert np.array_equal(out, given)  # the embedder's array is left as it was


def test_embed_checked_refuses_a_bad_shape_or_non_finite_values() -> None:
    for bad in (np.zeros((2, 3), np.float32), np.array([[1.0, np.inf, 0.0]], np.float32)):
        with pytest.raises(ValidationError, match="returned shape"):
            embed_checked(_Fixed(bad), ["t"])  # type: ignore[arg-type]
    for bad in (
        np.array([[1.0, np.nan, 0.0]], np.float32),
        np.array([[-np.inf, 1.0]], np.float32),
        np.array([[1.0, 2.0], [np.nan, 1.0]], np.float32),  # one row of several
    ):
        with pytest.raises(ValidationError, match="non-finite"):
            embed_checked(_Fixed(bad), ["t"] * len(bad))  # type: ignore[arg-type]


def test_embed_checked_keeps_finite_rows_whose_norm_overflows() -> None:
    """A finite row whose squares overflow float32 is accepted (its norm is infinite), as
    numpy.linalg.norm's arithmetic gives; a zero row is left as it is."""
    rows = np.array([[3e20, 1.0, -2.0], [0.0, 0.0, 0.0]], np.float32)
    for take in (rows[:1], rows[1:], rows):
        with np.errstate(over="ignore"):
            got = embed_checked(_Fixed(take.copy()), ["t"] * len(take))  # type: ignore[arg-type]
            norms = np.linalg.norm(take, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        assert got.tobytes() == (take / norms).astype(np.float32).tobytes()


def _typed(cx: Any, text: str, types: tuple[str, ...], limit: int = 5) -> list[str]:
    return [str(u) for u in cx.find(Query(near=text, types=types, limit=limit)).uris]


def test_a_type_filter_sized_by_the_types_share_fetches_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A vector search with a type filter fetches its list first deep enough for twice its
    limit of memories of those types at the share the index holds them in (one round where
    they are spread as that share says), and answers as the rounds that widen four times from
    the depth do (the share not known)."""
    from cortex.engine import sidecar as sidecar_mod

    fetched: list[int] = []
    real = sidecar_mod.VectorSidecar.search

    def counted(self: Any, txn: Any, query: Any, n: int) -> Any:
        fetched.append(n)
        return real(self, txn, query, n)

    monkeypatch.setattr(sidecar_mod.VectorSidecar, "search", counted)
    items = mixed_types(f"{TOPICS[i % len(TOPICS)]} number {i}" for i in range(90))
    questions = [f"{t} number" for t in TOPICS[:6]]
    with open_store(tmp_path / "s", embedder=E) as cx:
        cx.write_many(items)

        def answers() -> list[list[str]]:
            return [_typed(cx, q, ("event",), 10) for q in questions] + [
                _typed(cx, q, ("fact", "preference"), 4) for q in questions
            ]

        with monkeypatch.context() as m:
            m.setattr(sidecar_mod.VectorSidecar, "type_share", lambda self, types: None)
            expected = answers()
        rounds = len(fetched)
        fetched.clear()
        assert cx._sidecar is not None
        share = cx._sidecar.type_share([int(MemoryType.EVENT)])
        assert share is not None and 0 < share < 1
        assert answers() == expected
        assert len(fetched) < rounds, (fetched, rounds)  # fewer rounds, most of them one
        assert fetched[0] == max(40, math.ceil(2 * 10 / share))
        # in another order the rounds decide which candidates are ranked: as before
        fetched.clear()
        q = Query(near=questions[0], types=("event",), limit=10, order_by="created")
        cx.find(q)
        assert fetched[0] == 40


def test_a_type_filter_leaves_out_candidates_of_other_types_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vector index keeps each memory's type (read when the index is built or caught up,
    or noted when a query reads the memory; a loaded cache knows none at first): a vector
    search with a type filter leaves out candidates of another type without reading them, and
    returns what it returns without the types known, on a rebuilt, a caught-up and a loaded
    index, after a tombstone and a purge."""
    from cortex import Event, MemoryType
    from cortex.engine import sidecar as sidecar_mod
    from cortex.query import planner

    accepted: list[Any] = []
    real_accept = planner.Executor.accept

    def counted(self: Any, mid: Any) -> Any:
        accepted.append(mid)
        return real_accept(self, mid)

    monkeypatch.setattr(planner.Executor, "accept", counted)
    path = tmp_path / "s"
    when = datetime(2026, 11, 1, tzinfo=UTC)
    items = mixed_types(f"{TOPICS[i % len(TOPICS)]} number {i}" for i in range(60))
    questions = [f"{t} number" for t in TOPICS[:6]]

    def answers(cx: Any) -> list[list[str]]:
        hybrid = [  # text and vector, fused: the same filter on the fused list
            [str(u) for u in cx.find(Query(text=q, types=("event",), limit=5)).uris]
            for q in questions
        ]
        return (
            [_typed(cx, q, ("event",)) for q in questions]
            + [_typed(cx, q, ("fact", "preference"), 8) for q in questions]
            + hybrid
        )

    def unhinted(cx: Any) -> list[list[str]]:
        with monkeypatch.context() as m:
            m.setattr(sidecar_mod.VectorSidecar, "types_of", lambda self, ids: [None] * len(ids))
            m.setattr(sidecar_mod.VectorSidecar, "note_type", lambda self, mid, kind: None)
            return answers(cx)

    with open_store(path, embedder=E) as cx:
        uris = cx.write_many(items)
        expected = unhinted(cx)  # the index is built here: every type known
        accepted.clear()
        assert answers(cx) == expected
        hinted = len(accepted)
        accepted.clear()
        unhinted(cx)
        assert hinted < len(accepted) / 2, (hinted, len(accepted))
        # caught up: a new Event is found as one, a tombstoned one is gone
        new = cx.write(Event(kind="note", summary=f"{TOPICS[0]} number 999", occurred_at=when))
        cx.tombstone(uris[0], reason="gone")
        expected = unhinted(cx)
        assert answers(cx) == expected and str(new) in expected[0]
        assert all(str(uris[0]) not in xs for xs in expected)
    with open_store(path, embedder=E) as cx:  # loaded from the cache: no type known yet
        assert answers(cx) == expected
        assert cx.vector_state() == "loaded"
        accepted.clear()
        assert answers(cx) == expected  # the first queries noted the types they read
        assert len(accepted) < hinted * 2
        assert cx._sidecar is not None
        kinds = cx._sidecar.types_of([u.id for u in uris[:3]])
        assert kinds[1:] == [int(MemoryType.PREFERENCE), int(MemoryType.FACT)]
        # a purge: out of the index and its types (an id is never given again: the type a
        # held id is tagged with cannot change)
        target = uris[3]  # an Event
        cx.purge(target.id, reason="erase")
        assert cx._sidecar.types_of([target.id]) == [None] or answers(cx)
        expected = unhinted(cx)
        assert answers(cx) == expected
        assert cx._sidecar.types_of([target.id]) == [None]
        assert all(str(target) not in xs for xs in expected)
