"""The vector index: exact and HNSW search agree, changes apply, the saved cache is verified."""

from __future__ import annotations

import json
import os
from pathlib import Path

import msgspec
import numpy as np
import pytest

from cortex.errors import CortexError, IndexCacheError, ValidationError
from cortex.index import ann
from cortex.index.ann import EXACT_BELOW, IndexMeta, VectorIndex
from cortex.model.ids import MemoryId

DIM = 24
MODEL = "hashing-v1-24"


def _ids(n: int, start: int = 0) -> list[MemoryId]:
    return [MemoryId((start + i).to_bytes(16, "big")) for i in range(n)]


def _unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _brute(ids: list[MemoryId], x: np.ndarray, q: np.ndarray, k: int) -> list[MemoryId]:
    scores = x @ (q / np.linalg.norm(q))
    order = sorted(range(len(ids)), key=lambda i: (-scores[i], ids[i].bytes))
    return [ids[i] for i in order[:k]]


@pytest.fixture
def data() -> tuple[list[MemoryId], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    return _ids(400), _unit(rng, 400), _unit(rng, 20)


def _both(ids: list[MemoryId], x: np.ndarray) -> tuple[VectorIndex, VectorIndex]:
    exact = VectorIndex(DIM)
    hnsw = VectorIndex(DIM, exact_below=0, capacity=8, threads=1)
    exact.add(ids, x)
    hnsw.add(ids, x)
    return exact, hnsw


def test_exact_search_is_brute_force(data: tuple[list[MemoryId], np.ndarray, np.ndarray]) -> None:
    ids, x, queries = data
    exact, _ = _both(ids, x)
    for q in queries:
        hits = exact.search(q, 10)
        assert [h[0] for h in hits] == _brute(ids, x, q, 10)
        assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
        assert hits[0][1] == pytest.approx(float(x[ids.index(hits[0][0])] @ q), abs=1e-5)


def test_hnsw_equals_exact_on_a_small_set(
    data: tuple[list[MemoryId], np.ndarray, np.ndarray],
) -> None:
    ids, x, queries = data
    exact, hnsw = _both(ids, x)
    assert len(exact) == len(hnsw) == 400
    for q in queries:
        a, b = exact.search(q, 10), hnsw.search(q, 10, ef=400)
        assert [i for i, _ in a] == [i for i, _ in b]
        assert np.allclose([s for _, s in a], [s for _, s in b], atol=1e-5)


def test_ties_break_by_id_and_k_larger_than_the_index() -> None:
    v = np.zeros((4, DIM), dtype=np.float32)
    v[:, 0] = 1.0
    ids = _ids(4)
    for index in (VectorIndex(DIM), VectorIndex(DIM, exact_below=0)):
        index.add(list(reversed(ids)), v)
        hits = index.search(v[0], 10)
        assert [i for i, _ in hits] == ids
        assert all(s == pytest.approx(1.0, abs=1e-6) for _, s in hits)
        assert index.search(v[0], 0) == []


def test_empty_index_and_query_validation() -> None:
    index = VectorIndex(DIM)
    assert index.search(np.ones(DIM), 5) == []
    with pytest.raises(ValidationError, match="shape"):
        index.search(np.ones(DIM + 1), 5)
    with pytest.raises(ValidationError, match="zero"):
        index.search(np.zeros(DIM), 5)
    with pytest.raises(ValidationError, match="NaN"):
        index.search(np.full(DIM, np.nan), 5)
    with pytest.raises(ValidationError):
        index.search(np.ones(DIM), -1)
    with pytest.raises(ValidationError):
        index.search(np.ones(DIM), 3, ef=0)


def test_add_validates_before_changing_anything() -> None:
    index = VectorIndex(DIM)
    ids = _ids(3)
    good = _unit(np.random.default_rng(1), 3)
    index.add(ids[:1], good[:1])
    bad = good.copy()
    bad[2] = 0.0
    for args, match in [
        ((ids, bad), "zero"),
        ((ids, good[:2]), "shape"),
        (([ids[0], ids[0], ids[1]], good), "twice"),
        ((["not an id", *ids[1:]], good), "MemoryId"),
        ((ids, np.where(good > 0, np.inf, good)), "NaN"),
    ]:
        with pytest.raises(ValidationError, match=match):
            index.add(*args)
    assert index.ids() == ids[:1]
    index.add([], np.zeros((0, DIM)))
    assert len(index) == 1


@pytest.mark.parametrize("exact_below", [EXACT_BELOW, 0])
def test_remove_and_replace(exact_below: int) -> None:
    rng = np.random.default_rng(3)
    ids, x = _ids(50), _unit(rng, 50)
    index = VectorIndex(DIM, exact_below=exact_below, capacity=4)
    index.add(ids, x)
    assert index.remove(ids[0]) and not index.remove(ids[0])
    assert ids[0] not in index and len(index) == 49
    assert all(h[0] != ids[0] for h in index.search(x[0], 50, ef=100))
    # replace: ids[1] takes ids[2]'s vector
    index.add([ids[1]], x[2:3])
    top = index.search(x[2], 2, ef=100)
    assert {i for i, _ in top} == {ids[1], ids[2]}
    assert np.allclose(index.vector(ids[1]), x[2], atol=1e-6)
    # a removed id comes back, on a recycled slot
    index.add([ids[0]], x[0:1])
    assert index.search(x[0], 1, ef=100)[0][0] == ids[0] and len(index) == 50
    assert index.vector(MemoryId(b"\xff" * 16)) is None
    # replaying the same add is harmless
    index.add(ids, x)
    index.add(ids, x)
    assert len(index) == 50 and index.ids() == sorted(ids)


def test_capacity_grows() -> None:
    rng = np.random.default_rng(4)
    index = VectorIndex(DIM, capacity=2, exact_below=0)
    for start in range(0, 300, 37):
        n = min(37, 300 - start)
        index.add(_ids(n, start), _unit(rng, n))
    assert len(index) == 300


@pytest.mark.parametrize("exact_below", [EXACT_BELOW, 0])
def test_allow_filters_results(exact_below: int) -> None:
    rng = np.random.default_rng(5)
    ids, x = _ids(300), _unit(rng, 300)
    index = VectorIndex(DIM, exact_below=exact_below)
    index.add(ids, x)
    even = {i for n, i in enumerate(ids) if n % 2 == 0}
    q = x[1]
    hits = index.search(q, 5, ef=300, allow=even.__contains__)
    allowed = [ids[n] for n in range(0, 300, 2)]
    assert [i for i, _ in hits] == _brute(allowed, x[::2], q, 5)
    # a filter that allows fewer ids than k returns just those
    few = set(ids[:3])
    assert {i for i, _ in index.search(q, 10, allow=few.__contains__)} == few
    assert index.search(q, 10, allow=lambda _: False) == []


def test_parameters_are_checked() -> None:
    for kwargs in ({"m": 1}, {"ef": 0}, {"threads": 0}, {"capacity": 0}, {"exact_below": -1}):
        with pytest.raises(ValidationError):
            VectorIndex(DIM, **kwargs)  # type: ignore[arg-type]
    index = VectorIndex(DIM, m=8, ef_construction=50, ef=20)
    assert (index.dim, index.m, index.ef_construction, index.ef) == (DIM, 8, 50, 20)
    index.ef = 40
    assert index.ef == 40
    assert "count=0" in repr(index)


# -- persistence -------------------------------------------------------------------------------


def _saved(tmp_path: Path, n: int = 120) -> tuple[Path, VectorIndex, list[MemoryId], np.ndarray]:
    rng = np.random.default_rng(9)
    ids, x = _ids(n), _unit(rng, n)
    index = VectorIndex(DIM, exact_below=0, ef=33, threads=1)
    index.add(ids, x)
    index.remove(ids[3])
    directory = tmp_path / "vec"
    index.save(directory, model_id=MODEL, watermark=41)
    return directory, index, ids, x


def test_save_load_round_trip(tmp_path: Path) -> None:
    directory, index, ids, x = _saved(tmp_path)
    loaded, meta = VectorIndex.load(directory, model_id=MODEL, dim=DIM, exact_below=0)
    assert isinstance(meta, IndexMeta)
    assert (meta.watermark, meta.count, meta.elements, meta.model_id) == (41, 119, 120, MODEL)
    assert (meta.space, meta.m, meta.ef_construction, meta.format) == (
        "cosine",
        ann.DEFAULT_M,
        ann.DEFAULT_EF_CONSTRUCTION,
        1,
    )
    assert loaded.ef == 33 and loaded.ids() == index.ids()
    for q in x[:10]:
        assert loaded.search(q, 5) == index.search(q, 5)
    # the loaded index keeps working: new labels never collide with saved ones
    new = _ids(5, 1000)
    loaded.add(new, x[:5])
    loaded.add([ids[3]], x[3:4])
    assert len(loaded) == 125 and loaded.search(x[3], 1)[0][0] == ids[3]
    assert VectorIndex.load(directory, model_id=MODEL, dim=DIM, ef=7)[0].ef == 7
    names = sorted(p.name for p in directory.iterdir())
    assert names[0] == ".lock" and names[1] == "index.json" and len(names) == 4


def test_save_replaces_and_cleans_up(tmp_path: Path) -> None:
    directory, index, ids, _ = _saved(tmp_path)
    before = {p.name for p in directory.iterdir()}
    index.remove(ids[0])
    index.save(directory, model_id=MODEL, watermark=42)
    after = {p.name for p in directory.iterdir()}
    assert len(after) == 4 and after != before
    loaded, meta = VectorIndex.load(directory, model_id=MODEL, dim=DIM)
    assert meta.watermark == 42 and ids[0] not in loaded and len(loaded) == 118


def test_empty_index_round_trip(tmp_path: Path) -> None:
    VectorIndex(DIM).save(tmp_path, model_id=MODEL, watermark=0)
    loaded, meta = VectorIndex.load(tmp_path, model_id=MODEL, dim=DIM)
    assert len(loaded) == 0 and meta.count == 0 and loaded.search(np.ones(DIM), 3) == []


def _meta(directory: Path) -> dict[str, object]:
    doc: dict[str, object] = json.loads((directory / "index.json").read_bytes())
    return doc


def _data_file(directory: Path, which: str) -> Path:
    meta = _meta(directory)["meta"]
    assert isinstance(meta, dict)
    return directory / meta[which]["name"]


def _reason(directory: Path, *, model_id: str = MODEL, dim: int = DIM) -> str:
    with pytest.raises(IndexCacheError) as info:
        VectorIndex.load(directory, model_id=model_id, dim=dim)
    assert info.value.reason in str(info.value)
    return info.value.reason


def test_missing(tmp_path: Path) -> None:
    assert _reason(tmp_path / "nothing") == "missing"
    directory, *_ = _saved(tmp_path)
    _data_file(directory, "index_file").unlink()
    assert _reason(directory) == "missing"
    directory, *_ = _saved(tmp_path / "2")
    _data_file(directory, "labels_file").unlink()
    assert _reason(directory) == "missing"
    directory, *_ = _saved(tmp_path / "3")
    (directory / "index.json").unlink()
    assert _reason(directory) == "missing"


@pytest.mark.parametrize("which", ["index_file", "labels_file"])
def test_truncated(tmp_path: Path, which: str) -> None:
    directory, *_ = _saved(tmp_path)
    path = _data_file(directory, which)
    path.write_bytes(path.read_bytes()[:-1])
    assert _reason(directory) == "truncated"
    path.write_bytes(b"")
    assert _reason(directory) == "truncated"


@pytest.mark.parametrize("which", ["index_file", "labels_file"])
@pytest.mark.parametrize("where", [0, 0.5, -1])
def test_one_flipped_byte(tmp_path: Path, which: str, where: float) -> None:
    directory, *_ = _saved(tmp_path)
    path = _data_file(directory, which)
    data = bytearray(path.read_bytes())
    pos = int(len(data) * where) if where >= 0 else len(data) - 1
    data[pos] ^= 0x01
    path.write_bytes(bytes(data))
    assert _reason(directory) == "corrupt"


def test_appended_bytes(tmp_path: Path) -> None:
    directory, *_ = _saved(tmp_path)
    path = _data_file(directory, "index_file")
    path.write_bytes(path.read_bytes() + b"\0")
    assert _reason(directory) == "corrupt"


def test_wrong_dim_and_other_model(tmp_path: Path) -> None:
    directory, *_ = _saved(tmp_path)
    assert _reason(directory, dim=DIM + 1) == "wrong_dim"
    assert _reason(directory, model_id="sentence-transformers/all-MiniLM-L6-v2") == "other_model"


@pytest.mark.parametrize(
    "garbage",
    [
        b"",
        b"not json",
        b"[]",
        b'{"meta": {}, "sha256": "00"}',
        b"\xff\xfe\x00",
    ],
)
def test_garbage_metadata(tmp_path: Path, garbage: bytes) -> None:
    directory, *_ = _saved(tmp_path)
    (directory / "index.json").write_bytes(garbage)
    assert _reason(directory) == "bad_metadata"


def test_flipped_metadata_byte_fails_the_checksum(tmp_path: Path) -> None:
    directory, *_ = _saved(tmp_path)
    raw = (directory / "index.json").read_bytes()
    # "watermark":41 -> "watermark":51: still valid JSON, still a valid IndexMeta
    tampered = raw.replace(b'"watermark":41', b'"watermark":51')
    assert tampered != raw
    (directory / "index.json").write_bytes(tampered)
    assert _reason(directory) == "bad_metadata"


def _rewrite_meta(directory: Path, **changes: object) -> None:
    raw = (directory / "index.json").read_bytes()
    doc = msgspec.json.decode(raw)
    meta = {**doc["meta"], **changes}
    body = msgspec.json.encode(meta)
    import hashlib

    env = {"meta": msgspec.Raw(body), "sha256": hashlib.sha256(body).hexdigest()}
    (directory / "index.json").write_bytes(msgspec.json.encode(env))


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"format": 2}, "format"),
        ({"space": "l2"}, "bad_metadata"),
        ({"count": 5}, "bad_metadata"),
        ({"elements": 5}, "bad_metadata"),
        ({"m": 8}, "corrupt"),
        ({"ef_construction": 50}, "corrupt"),
        ({"next_label": 10}, "corrupt"),
        ({"extra": 1}, "bad_metadata"),
        ({"dim": "24"}, "bad_metadata"),
    ],
)
def test_consistent_but_wrong_metadata(
    tmp_path: Path, changes: dict[str, object], reason: str
) -> None:
    directory, *_ = _saved(tmp_path)
    _rewrite_meta(directory, **changes)
    assert _reason(directory) == reason


def test_path_traversal_in_metadata_is_refused(tmp_path: Path) -> None:
    directory, *_ = _saved(tmp_path)
    meta = _meta(directory)["meta"]
    assert isinstance(meta, dict)
    _rewrite_meta(directory, index_file={**meta["index_file"], "name": "../../etc/passwd"})
    assert _reason(directory) == "bad_metadata"


@pytest.mark.parametrize("fail_at", [1, 2, 3])
def test_a_failed_save_leaves_the_previous_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_at: int
) -> None:
    directory, index, _, x = _saved(tmp_path)
    before = {p.name: p.read_bytes() for p in directory.iterdir()}
    index.add(_ids(10, 5000), x[:10])
    calls = {"n": 0}
    real_replace = os.replace

    def failing_replace(src: object, dst: object) -> None:
        calls["n"] += 1
        if calls["n"] == fail_at:  # 1: index file, 2: labels, 3: index.json (the commit)
            raise OSError(28, "No space left on device")
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(ann.os, "replace", failing_replace)
    with pytest.raises(CortexError, match="cannot save the vector index"):
        index.save(directory, model_id=MODEL, watermark=99)
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in directory.iterdir()} == before
    loaded, meta = VectorIndex.load(directory, model_id=MODEL, dim=DIM)
    assert meta.watermark == 41 and len(loaded) == 119


def test_a_failed_first_save_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = VectorIndex(DIM)
    index.add(_ids(3), _unit(np.random.default_rng(0), 3))

    def fail(*_: object) -> None:
        raise OSError(5, "I/O error")

    monkeypatch.setattr(ann, "_fsync_dir", fail)
    with pytest.raises(CortexError):
        index.save(tmp_path, model_id=MODEL, watermark=1)
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock"]
    assert _reason(tmp_path) == "missing"


def test_save_validates_its_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValidationError):
        VectorIndex(DIM).save(tmp_path, model_id="", watermark=0)
    with pytest.raises(ValidationError):
        VectorIndex(DIM).save(tmp_path, model_id=MODEL, watermark=-1)


def test_share_of_tags_among_the_tagged() -> None:
    """``share``: the held ids tagged one of the tags, over those tagged; None until half the
    held ids have a tag (an index loaded from its cache), and a removed id counts no more."""
    rng = np.random.default_rng(6)
    ids = _ids(8)
    idx = VectorIndex(DIM)
    assert idx.share([1]) is None  # nothing held
    idx.add(ids, _unit(rng, 8))
    assert idx.share([1]) is None  # none tagged
    idx.set_tags(ids[:3], [1, 2, 2])
    assert idx.share([2]) is None  # 3 of 8 tagged
    idx.set_tags(ids[3:4], [1])
    assert idx.share([2]) == 0.5 and idx.share([1]) == 0.5  # 4 of 8 tagged: of those
    assert idx.share([1, 2, 2]) == 1.0 and idx.share([7]) == 0.0 and idx.share([]) == 0.0
    idx.set_tags(ids[4:], [3, 3, 3, 3])
    assert idx.share([3]) == 0.5 and idx.share([1, 3]) == 0.75
    assert idx.remove(ids[4]) and idx.remove(ids[0])
    assert idx.share([3]) == 0.5 and idx.share([1]) == 1 / 6


def test_tags_by_id_kept_until_removed_not_saved(tmp_path: Path) -> None:
    """``set_tags``/``tags``: a small int per held id (a memory's type for the sidecar), None
    where not held or not given; kept over a second ``add``, gone with ``remove``, not saved."""
    rng = np.random.default_rng(5)
    ids = _ids(6)
    idx = VectorIndex(DIM)
    idx.add(ids, _unit(rng, 6))
    assert idx.tags(ids) == [None] * 6
    idx.set_tags(ids[:3], [1, 2, 254])
    idx.set_tags([MemoryId(b"\xee" * 16)], [3])  # not held: left out
    idx.note_tag(ids[3], 9)
    assert idx.tags([*ids, MemoryId(b"\xee" * 16)]) == [1, 2, 254, 9, None, None, None]
    idx.add(ids[:1], _unit(rng, 1))  # a new vector for a held id keeps its tag
    assert idx.tags(ids[:1]) == [1]
    assert idx.remove(ids[1])
    assert idx.tags(ids[1:2]) == [None]
    idx.add(ids[1:2], _unit(rng, 1))  # back, as a new label: untagged until tagged again
    assert idx.tags(ids[1:2]) == [None]
    for bad in ([255], [-1], ["1"], [1.0]):
        with pytest.raises(ValidationError):
            idx.set_tags(ids[:1], bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        idx.set_tags(ids[:2], [1])
    idx.save(tmp_path, model_id=MODEL, watermark=0)
    loaded, _ = VectorIndex.load(tmp_path, model_id=MODEL, dim=DIM)
    assert loaded.tags(ids) == [None] * 6  # tags are not saved: the sidecar reads them again
