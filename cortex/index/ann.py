"""The vector index: nearest memories by cosine over hnswlib, saved as a verified cache.

The index is derived data. The store keeps every vector in ``vec/``; this module only answers
"which memories are nearest this vector" fast, and saves itself to a directory so that an
opened store need not rebuild it. A saved index is trusted only after its metadata, its
digests, the model id and the dimension all check out; anything else raises
``IndexCacheError`` with a ``reason`` and the caller rebuilds from ``vec/``.

Layout of a saved index (``specs/vector-index.md``): ``index.json`` (the metadata in a
checksummed envelope, replaced last, so it is the commit point), ``vectors-<16 hex>.hnsw``
(hnswlib's own file) and ``labels-<16 hex>.bin`` (the label map), both named by a prefix of
their SHA-256 so that a new save never overwrites the files the current metadata names.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import math
import mmap
import os
import re
import secrets
import struct
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import msgspec
import numpy as np
import numpy.typing as npt

from cortex.errors import CortexError, IndexCacheError, MissingDependencyError, ValidationError
from cortex.model.ids import MemoryId

__all__ = [
    "DEFAULT_EF",
    "DEFAULT_EF_CONSTRUCTION",
    "DEFAULT_M",
    "EXACT_BELOW",
    "INDEX_FORMAT",
    "UNTAGGED",
    "IndexFile",
    "IndexMeta",
    "VectorIndex",
    "erase_saved",
    "saved_region",
]

# Chosen with tools/bench_ann.py (100k x 384 embedding-like vectors, one thread; specs/
# vector-index.md §4): M=32 reaches recall@10 0.964 at ef=64 (0.952 at 56, ~10% faster), where
# M=16 needs ef~112 for 0.95 and is then slower per query; ef_construction 800 builds no better
# graph than 400 (the same recall at every ef).
DEFAULT_M: Final = 32
DEFAULT_EF_CONSTRUCTION: Final = 400
DEFAULT_EF: Final = 64
EXACT_BELOW: Final = 5000
"""Below this many vectors ``search`` is an exact numpy scan: as fast, and never misses."""
UNTAGGED: Final = 255
"""The tag of an id given none (``VectorIndex.set_tags``)."""

INDEX_FORMAT: Final = 1
SPACE: Final = "cosine"

_META_NAME: Final = "index.json"
_INDEX_RE: Final = re.compile(r"vectors-[0-9a-f]{16}\.hnsw")
_LABELS_RE: Final = re.compile(r"labels-[0-9a-f]{16}\.bin")
_TMP_PREFIX: Final = ".tmp-"
_LOCK_NAME: Final = ".lock"
_LABEL_RECORD: Final = struct.Struct(">Q16s")  # label, then the raw 16-byte id
# hnswlib's saved file: offsetLevel0, max_elements, cur_element_count, size_data_per_element,
# label_offset, offsetData (size_t), maxlevel (int), enterpoint (uint), maxM, maxM0, M
# (size_t), mult (double), ef_construction (size_t); then the level-0 block of every element:
# its link list (a 16-bit count, then a byte whose bit 0 marks the element deleted), its
# vector and its label
_HNSW_HEADER: Final = struct.Struct("<QQQQQQiIQQQdQ")
_DELETE_MARK: Final = 0x01
_CHUNK: Final = 4096
_TIE_SLACK: Final = 8


class IndexFile(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One data file of a saved index: its name in the directory, size and SHA-256 (hex)."""

    name: str
    size: int
    sha256: str


class IndexMeta(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The metadata of a saved index (``index.json``).

    Attributes:
        format: the layout version (``INDEX_FORMAT``).
        model_id: the embedder that made the vectors.
        dim: vector length.
        space: always ``"cosine"``.
        m: hnswlib's M (graph degree).
        ef_construction: hnswlib's build-time candidate list length.
        ef: the search-time candidate list length to re-set on load (hnswlib does not save it).
        count: live vectors.
        elements: hnswlib slots in use, deleted ones included.
        next_label: the next unused hnswlib label; labels are never reused.
        watermark: the journal sequence number the contents reflect; the caller replays the
            journal after it.
        index_file: the hnswlib file.
        labels_file: the label map.
        anchor: the caller's fingerprint of the state at ``watermark`` (the store: the digest
            of that journal entry), so a cache of another history is refused.
    """

    format: int
    model_id: str
    dim: int
    space: str
    m: int
    ef_construction: int
    ef: int
    count: int
    elements: int
    next_label: int
    watermark: int
    index_file: IndexFile
    labels_file: IndexFile
    anchor: str = ""


class _Envelope(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    meta: msgspec.Raw
    sha256: str


def _hnswlib() -> Any:
    try:
        import hnswlib
    except ImportError as exc:  # pragma: no cover - a dependency of record
        raise MissingDependencyError(
            "the vector index needs hnswlib: pip install 'cortex-store'"
        ) from exc
    return hnswlib


def _positive(name: str, value: object, low: int = 1) -> int:
    if type(value) is not int or value < low:
        raise ValidationError(name, "range", f"must be an int >= {low}, got {value!r}")
    return value


class VectorIndex:
    """Memories by cosine similarity of unit float32 vectors, keyed by ``MemoryId``.

    Each id holds one vector; ``add`` inserts or replaces, ``remove`` deletes. Every id gets an
    hnswlib integer label that is never reused; a removed id's slot is marked deleted and
    recycled by a later insert. Below ``exact_below`` live vectors, ``search`` is an exact scan
    with the same interface and results. A ``VectorIndex`` serialises its own calls with a lock.

    Args:
        dim: vector length.
        m: hnswlib's M (graph degree): more is slower to build, better recall.
        ef_construction: hnswlib's build-time candidate list length.
        ef: the default search-time candidate list length (at least ``k`` is used).
        exact_below: live-vector count under which ``search`` scans exactly.
        capacity: slots to allocate at first; the index grows by doubling.
        threads: threads for inserts (``-1``: all cores). Searches run on one thread.

    Raises:
        ValidationError: a parameter is out of range.
    """

    def __init__(
        self,
        dim: int,
        *,
        m: int = DEFAULT_M,
        ef_construction: int = DEFAULT_EF_CONSTRUCTION,
        ef: int = DEFAULT_EF,
        exact_below: int = EXACT_BELOW,
        capacity: int = 1024,
        threads: int = -1,
    ) -> None:
        self._configure(dim, m, ef_construction, ef, exact_below, threads)
        self._index.init_index(
            max_elements=_positive("capacity", capacity),
            M=self._m,
            ef_construction=self._ef_construction,
            random_seed=100,
            allow_replace_deleted=True,
        )
        self._index.set_ef(self._ef)

    def _configure(  # noqa: PLR0917 - private, called twice with every argument
        self, dim: int, m: int, ef_construction: int, ef: int, exact_below: int, threads: int
    ) -> None:
        """Check the parameters and make an hnswlib index that is not yet initialised."""
        self._dim = _positive("dim", dim)
        self._m = _positive("m", m, 2)
        self._ef_construction = _positive("ef_construction", ef_construction)
        self._ef = _positive("ef", ef)
        self._exact_below = _positive("exact_below", exact_below, 0)
        if type(threads) is not int or threads == 0 or threads < -1:
            raise ValidationError("threads", "range", f"must be -1 or an int >= 1, got {threads!r}")
        self._threads = threads
        self._lock = threading.RLock()
        self._labels: dict[MemoryId, int] = {}
        self._ids: dict[int, MemoryId] = {}
        self._next_label = 0
        self._tags = bytearray()
        """Each label's tag (``set_tags``; ``UNTAGGED`` when not given), by label."""
        self._tag_counts = [0] * (UNTAGGED + 1)
        """How many held ids carry each tag (``share``); a removed label counts in none."""
        self._exact: tuple[list[MemoryId], npt.NDArray[np.float32]] | None = None
        self._index = _hnswlib().Index(space=SPACE, dim=self._dim)

    # -- properties ---------------------------------------------------------------------------

    @property
    def dim(self) -> int:
        """Vector length."""
        return self._dim

    @property
    def m(self) -> int:
        """The graph degree M of hnswlib."""
        return self._m

    @property
    def ef_construction(self) -> int:
        """The build-time candidate list length of hnswlib."""
        return self._ef_construction

    @property
    def ef(self) -> int:
        """The default search-time candidate list length."""
        return self._ef

    @ef.setter
    def ef(self, value: int) -> None:
        self._ef = _positive("ef", value)

    @property
    def exact_below(self) -> int:
        """Live-vector count under which ``search`` scans exactly."""
        return self._exact_below

    def __len__(self) -> int:
        return len(self._labels)

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._labels

    def __repr__(self) -> str:
        return f"VectorIndex(dim={self._dim}, count={len(self)}, m={self._m}, ef={self._ef})"

    def ids(self) -> list[MemoryId]:
        """The ids held, in id order."""
        with self._lock:
            return sorted(self._labels)

    def vector(self, memory_id: MemoryId) -> npt.NDArray[np.float32] | None:
        """The (unit) vector held for ``memory_id``, or ``None``."""
        with self._lock:
            label = self._labels.get(memory_id)
            if label is None:
                return None
            return np.array(self._index.get_items([label])[0], dtype=np.float32)

    # -- changes ------------------------------------------------------------------------------

    def _unit_rows(
        self, vectors: object, rows: int, field: str = "vectors"
    ) -> npt.NDArray[np.float32]:
        try:
            arr = np.asarray(vectors, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise ValidationError(field, "type", f"not a numeric array: {exc}") from exc
        if arr.ndim == 1 and rows == 1:
            arr = arr[None, :]
        if arr.shape != (rows, self._dim):
            raise ValidationError(
                field, "shape", f"expected shape ({rows}, {self._dim}), got {arr.shape}"
            )
        if not np.isfinite(arr).all():
            raise ValidationError(field, "finite", "must not hold NaN or infinity")
        norms = np.linalg.norm(arr, axis=1)
        if rows and not (norms > 0).all():
            bad = int(np.flatnonzero(~(norms > 0))[0])
            raise ValidationError(f"{field}[{bad}]", "zero", "a zero vector has no direction")
        return np.ascontiguousarray(arr / norms[:, None], dtype=np.float32)

    def _unit_query(self, vector: object) -> npt.NDArray[np.float32]:
        """``_unit_rows`` for one vector, cheaper: it runs on every search."""
        q: npt.NDArray[np.float32] = (
            vector
            if type(vector) is np.ndarray and vector.dtype == np.float32
            else self._unit_rows(vector, 1, "vector")[0]
        )
        norm = math.sqrt(float(q @ q)) if q.shape == (self._dim,) else 0.0
        if not math.isfinite(norm) or norm == 0.0:  # NaN or infinity anywhere: a non-finite norm
            checked: npt.NDArray[np.float32] = self._unit_rows(vector, 1, "vector")[0]
            return checked  # not reached for bad input: _unit_rows raises the precise error
        return np.ascontiguousarray(q / np.float32(norm), dtype=np.float32)

    def add(self, ids: Sequence[MemoryId], vectors: npt.ArrayLike) -> None:
        """Insert vectors for new ids and replace those of ids already held.

        Replaying the same ``add`` twice leaves the same contents (journal catch-up may).

        Args:
            ids: distinct memory ids.
            vectors: array ``(len(ids), dim)``; rows are scaled to unit length.

        Raises:
            ValidationError: ids repeat or are not ``MemoryId``s, or the vectors have the wrong
                shape, are not finite, or are zero. Nothing changes.
        """
        ids = list(ids)
        for i, memory_id in enumerate(ids):
            if not isinstance(memory_id, MemoryId):
                raise ValidationError(f"ids[{i}]", "type", "expected a MemoryId")
        if len(set(ids)) != len(ids):
            raise ValidationError("ids", "unique", "an id appears twice in one add")
        rows = self._unit_rows(vectors, len(ids))
        if not ids:
            return
        with self._lock:
            old = [i for i, memory_id in enumerate(ids) if memory_id in self._labels]
            new = [i for i, memory_id in enumerate(ids) if memory_id not in self._labels]
            if old:
                # a live label is updated in place; never through replace_deleted, which would
                # move the label onto a recycled slot and leave the old slot behind
                labels = np.array([self._labels[ids[i]] for i in old], dtype=np.uint64)
                self._index.add_items(rows[old], labels, num_threads=self._threads)
            if new:
                free = self._index.get_current_count() - len(self._labels)
                need = self._index.get_current_count() + max(0, len(new) - free)
                capacity = self._index.get_max_elements()
                if need > capacity:
                    self._index.resize_index(max(need, 2 * capacity))
                labels = np.arange(self._next_label, self._next_label + len(new), dtype=np.uint64)
                self._index.add_items(
                    rows[new], labels, num_threads=self._threads, replace_deleted=True
                )
                # first: ``tags`` reads without the lock, a label found must have its byte
                self._tags += bytes([UNTAGGED]) * len(new)
                self._tag_counts[UNTAGGED] += len(new)
                for i, label in zip(new, labels.tolist(), strict=True):
                    self._labels[ids[i]] = label
                    self._ids[label] = ids[i]
                self._next_label += len(new)
            self._exact = None

    def remove(self, memory_id: MemoryId) -> bool:
        """Delete the vector of ``memory_id``.

        Returns:
            False when the id was not held (removing twice is harmless).
        """
        with self._lock:
            label = self._labels.pop(memory_id, None)
            if label is None:
                return False
            del self._ids[label]
            self._index.mark_deleted(label)
            self._tag_counts[self._tags[label]] -= 1
            self._tags[label] = UNTAGGED  # labels are never given again
            self._exact = None
            return True

    def set_tags(self, ids: Sequence[MemoryId], tags: Sequence[int]) -> None:
        """Tag held ids with a small int each (0 to 254: a memory's type, say).

        For callers that filter what ``search`` returns (``tags``). Ids not held are left
        out; an id keeps its tag until it is removed (``add`` again keeps it).

        Raises:
            ValidationError: a tag out of range, or not one tag for each id.
        """
        if len(ids) != len(tags):
            raise ValidationError("tags", "length", "one tag for each id")
        for i, t in enumerate(tags):
            if type(t) is not int or not 0 <= t < UNTAGGED:
                raise ValidationError(f"tags[{i}]", "range", f"must be an int 0-254, got {t!r}")
        with self._lock:
            for memory_id, t in zip(ids, tags, strict=True):
                self._tag(memory_id, t)

    def note_tag(self, memory_id: MemoryId, tag: int) -> None:
        """``set_tags`` of one id whose tag the caller knows to be in range (0 to 254)."""
        with self._lock:
            self._tag(memory_id, tag)

    def _tag(self, memory_id: MemoryId, tag: int) -> None:
        """Tag a held id (with the lock held), keeping the counts of ``share``."""
        label = self._labels.get(memory_id)
        if label is not None:
            counts, held = self._tag_counts, self._tags
            counts[held[label]] -= 1
            counts[tag] += 1
            held[label] = tag

    def tags(self, ids: Sequence[MemoryId]) -> list[int | None]:
        """The tags of ``ids``: None for an id not held or given no tag."""
        get, held = self._labels.get, self._tags  # dict reads: no lock needed
        out: list[int | None] = []
        for memory_id in ids:
            label = get(memory_id)
            t = UNTAGGED if label is None else held[label]
            out.append(None if t == UNTAGGED else t)
        return out

    def share(self, tags: Collection[int]) -> float | None:
        """The share of the held ids whose tag is one of ``tags``, among those with a tag.

        None when fewer than half the held ids have a tag (an index loaded from its cache
        knows none at first: ``set_tags``), or none is held.
        """
        counts, live = self._tag_counts, len(self._labels)  # reads only: no lock needed
        known = live - counts[UNTAGGED]
        if not live or known * 2 < live:
            return None
        return sum(counts[t] for t in set(tags) if type(t) is int and 0 <= t < UNTAGGED) / known

    # -- search -------------------------------------------------------------------------------

    def search(
        self,
        vector: npt.ArrayLike,
        k: int,
        *,
        ef: int | None = None,
        allow: Callable[[MemoryId], bool] | None = None,
    ) -> list[tuple[MemoryId, float]]:
        """The ``k`` held ids nearest ``vector`` by cosine, best first, ties by id ascending.

        Args:
            vector: the query, shape ``(dim,)``; it is scaled to unit length.
            k: how many to return (fewer when fewer are held or allowed).
            ef: the candidate list length for this search (default: the index's ``ef``; at
                least ``k`` is used). More is slower and misses less. Ignored when exact.
            allow: when given, only ids for which it returns True are returned. Restrictive
                filters cost time: the graph is walked past the rejected ids.

        Returns:
            ``(id, cosine)`` pairs.

        Raises:
            ValidationError: ``vector`` has the wrong shape, is not finite or is zero, or ``k``
                or ``ef`` is out of range.
        """
        q = self._unit_query(vector)
        _positive("k", k, 0)
        if ef is not None:
            _positive("ef", ef)
        with self._lock:
            if k == 0 or not self._labels:
                return []
            if len(self._labels) < self._exact_below:
                return self._exact_search(q, k, allow)
            return self._ann_search(q, k, ef, allow)

    def _ann_search(
        self,
        q: npt.NDArray[np.float32],
        k: int,
        ef: int | None,
        allow: Callable[[MemoryId], bool] | None,
    ) -> list[tuple[MemoryId, float]]:
        # a few more than k, so that ids tied at the cut (duplicate vectors) still come back
        # in id order rather than in graph order
        fetch = min(k + _TIE_SLACK, len(self._labels))
        by_label = self._ids
        flt = None if allow is None else (lambda label: bool(allow(by_label[label])))
        self._index.set_ef(max(ef if ef is not None else self._ef, fetch))
        try:
            labels, distances = self._index.knn_query(q, k=fetch, num_threads=1, filter=flt)
        except RuntimeError:
            # hnswlib found fewer than k allowed ids near the query (a restrictive filter):
            # answer by an exact scan rather than drop any
            return self._exact_search(q, k, allow)
        finally:
            self._index.set_ef(self._ef)
        hits = [
            (by_label[label], 1.0 - float(d))
            for label, d in zip(labels[0].tolist(), distances[0].tolist(), strict=True)
        ]
        hits.sort(key=lambda h: (-h[1], h[0]))  # ids compare only on tied scores
        return hits[:k]

    def _chunks(self) -> Iterator[tuple[list[MemoryId], npt.NDArray[np.float32]]]:
        """Live ids in id order with their vectors, in chunks (one cached chunk when small)."""
        if len(self._labels) < self._exact_below:
            if self._exact is None:
                ids = sorted(self._labels)
                matrix = np.asarray(
                    self._index.get_items([self._labels[i] for i in ids]), dtype=np.float32
                ).reshape(len(ids), self._dim)
                self._exact = (ids, matrix)
            yield self._exact
            return
        ids = sorted(self._labels)
        for start in range(0, len(ids), _CHUNK):
            part = ids[start : start + _CHUNK]
            items = self._index.get_items([self._labels[i] for i in part])
            yield part, np.asarray(items, dtype=np.float32).reshape(len(part), self._dim)

    def _exact_search(
        self, q: npt.NDArray[np.float32], k: int, allow: Callable[[MemoryId], bool] | None
    ) -> list[tuple[MemoryId, float]]:
        kept_ids: list[MemoryId] = []
        kept_scores: list[npt.NDArray[np.float32]] = []
        for chunk_ids, matrix in self._chunks():
            ids = chunk_ids
            scores = matrix @ q
            if allow is not None:
                mask = np.fromiter((bool(allow(i)) for i in ids), dtype=bool, count=len(ids))
                ids = [i for i, keep in zip(ids, mask.tolist(), strict=True) if keep]
                scores = scores[mask]
            if len(ids) > k:  # keep the chunk's best k, ties included, to bound the work
                cut = np.partition(scores, len(scores) - k)[len(scores) - k]
                keep = np.flatnonzero(scores >= cut)  # ascending: the ids stay in id order
                ids = [ids[j] for j in keep.tolist()]
                scores = scores[keep]
            kept_ids.extend(ids)
            kept_scores.append(scores)
        if not kept_ids:
            return []
        scores = np.concatenate(kept_scores)
        # ids arrive in id order, so a stable sort on the score alone breaks ties by id
        order = np.argsort(-scores, kind="stable")[:k]
        return [(kept_ids[i], float(scores[i])) for i in order.tolist()]

    # -- persistence --------------------------------------------------------------------------

    def save(
        self,
        directory: str | Path,
        *,
        model_id: str,
        watermark: int,
        anchor: str = "",
        prepare: Callable[[], tuple[int, str]] | None = None,
    ) -> IndexMeta:
        """Save the index into ``directory`` atomically, replacing any saved index there.

        Data files are written under temporary names, fsynced and renamed to names derived
        from their digests; then ``index.json`` is replaced the same way and the directory is
        fsynced. A crash or error at any point leaves the previous save (or none) in place,
        never a mix. One process saves into a directory at a time (a lock file enforces it).
        The saved file holds no vector of a removed element: hnswlib keeps a deleted
        element's vector, the copy on disk has zeros in its place.

        Args:
            directory: the cache directory (created if missing).
            model_id: the embedder that made the vectors.
            watermark: the journal sequence number the contents reflect.
            anchor: a fingerprint of the state at ``watermark`` (stored, returned by ``load``).
            prepare: called under the directory lock before anything is written; it may change
                the index (catch it up) and returns the ``(watermark, anchor)`` to save.

        Returns:
            The metadata written.

        Raises:
            ValidationError: ``watermark`` is negative or ``model_id`` is empty.
            CortexError: the files cannot be written (the previous save is intact).
        """
        _positive("watermark", watermark, 0)
        if not isinstance(model_id, str) or not model_id:
            raise ValidationError("model_id", "required", "name the model of the vectors")
        path = Path(directory)
        try:
            path.mkdir(parents=True, exist_ok=True)
            with _dir_lock(path), self._lock:
                if prepare is not None:
                    watermark, anchor = prepare()
                return self._save_locked(path, model_id, watermark, anchor)
        except OSError as exc:
            raise CortexError(f"cannot save the vector index in {path}: {exc}") from exc

    def _save_locked(self, path: Path, model_id: str, watermark: int, anchor: str) -> IndexMeta:
        tmp_index = path / f"{_TMP_PREFIX}{secrets.token_hex(8)}.hnsw"
        tmp_labels = tmp_index.with_suffix(".bin")
        tmp_meta = tmp_index.with_suffix(".json")
        created: list[Path] = [tmp_index, tmp_labels, tmp_meta]
        try:
            self._index.save_index(str(tmp_index))
            _zero_deleted(tmp_index, self._dim)
            index_digest, index_size = _fsync_and_digest(tmp_index)
            records = sorted(self._ids.items())
            labels_data = b"".join(_LABEL_RECORD.pack(lb, mid.bytes) for lb, mid in records)
            _write_synced(tmp_labels, labels_data)
            labels_digest = hashlib.sha256(labels_data).hexdigest()
            meta = IndexMeta(
                format=INDEX_FORMAT,
                model_id=model_id,
                dim=self._dim,
                space=SPACE,
                m=self._m,
                ef_construction=self._ef_construction,
                ef=self._ef,
                count=len(self._labels),
                elements=int(self._index.get_current_count()),
                next_label=self._next_label,
                watermark=watermark,
                anchor=anchor,
                index_file=IndexFile(
                    name=f"vectors-{index_digest[:16]}.hnsw", size=index_size, sha256=index_digest
                ),
                labels_file=IndexFile(
                    name=f"labels-{labels_digest[:16]}.bin",
                    size=len(labels_data),
                    sha256=labels_digest,
                ),
            )
            body = msgspec.json.encode(meta)
            envelope = msgspec.json.encode(
                {"meta": msgspec.Raw(body), "sha256": hashlib.sha256(body).hexdigest()}
            )
            _write_synced(tmp_meta, envelope + b"\n")
            os.replace(tmp_index, path / meta.index_file.name)
            created.append(path / meta.index_file.name)
            os.replace(tmp_labels, path / meta.labels_file.name)
            created.append(path / meta.labels_file.name)
            _fsync_dir(path)
            os.replace(tmp_meta, path / _META_NAME)  # the commit point
            _fsync_dir(path)
        except BaseException:
            current = _referenced(path)
            for p in created:
                if p.name not in current:
                    with contextlib.suppress(OSError):
                        p.unlink()
            raise
        _remove_unreferenced(path, {meta.index_file.name, meta.labels_file.name})
        return meta

    @classmethod
    def load(
        cls,
        directory: str | Path,
        *,
        model_id: str,
        dim: int,
        ef: int | None = None,
        exact_below: int = EXACT_BELOW,
        threads: int = -1,
    ) -> tuple[VectorIndex, IndexMeta]:
        """Load a saved index after checking everything about it.

        Args:
            directory: the cache directory given to ``save``.
            model_id: the embedder the caller uses now; another model's index is refused.
            dim: the vector length the caller uses now.
            ef: the search ``ef`` to set (default: the saved one).
            exact_below: as for the constructor.
            threads: as for the constructor.

        Returns:
            The index and its metadata (``meta.watermark`` tells where to resume the journal).

        Raises:
            IndexCacheError: the saved index is unusable; ``reason`` says why (``missing``,
                ``truncated``, ``corrupt``, ``wrong_dim``, ``other_model``, ``bad_metadata``,
                ``format``). Rebuild from the stored vectors.
        """
        path = Path(directory)
        meta = _read_meta(path)
        if meta.format != INDEX_FORMAT:
            raise IndexCacheError(
                "format", f"format {meta.format}, this cortex reads {INDEX_FORMAT}"
            )
        if meta.model_id != model_id:
            raise IndexCacheError(
                "other_model", f"saved for model {meta.model_id!r}, the store uses {model_id!r}"
            )
        if meta.dim != dim:
            raise IndexCacheError("wrong_dim", f"saved with dim {meta.dim}, the store uses {dim}")
        if (
            meta.space != SPACE
            or not _INDEX_RE.fullmatch(meta.index_file.name)
            or not _LABELS_RE.fullmatch(meta.labels_file.name)
            or min(meta.count, meta.elements, meta.next_label, meta.watermark) < 0
            or meta.count > meta.elements
            or meta.m < 2
            or meta.ef_construction < 1
            or meta.ef < 1
        ):
            raise IndexCacheError("bad_metadata", f"{path / _META_NAME} holds impossible values")
        _verify_file(path, meta.index_file)
        labels_data = _verify_file(path, meta.labels_file, keep=True)
        pairs = _parse_labels(labels_data, meta)
        self = cls.__new__(cls)
        self._configure(
            dim, meta.m, meta.ef_construction, meta.ef if ef is None else ef, exact_below, threads
        )
        try:
            self._index.load_index(
                str(path / meta.index_file.name), max_elements=0, allow_replace_deleted=True
            )
        except (RuntimeError, MemoryError, ValueError) as exc:
            raise IndexCacheError("corrupt", f"hnswlib cannot read the index: {exc}") from exc
        if (
            int(self._index.dim) != dim
            or int(self._index.get_current_count()) != meta.elements
            or int(self._index.M) != meta.m
            or int(self._index.ef_construction) != meta.ef_construction
        ):
            raise IndexCacheError("corrupt", "the hnswlib file disagrees with the metadata")
        present = set(self._index.get_ids_list())
        if any(label not in present for label, _ in pairs):
            raise IndexCacheError("corrupt", "the label map names labels the index lacks")
        self._labels = {mid: label for label, mid in pairs}
        self._ids = dict(pairs)
        self._next_label = meta.next_label
        self._tags = bytearray([UNTAGGED]) * meta.next_label  # tags are not saved
        self._tag_counts = [0] * (UNTAGGED + 1)
        self._tag_counts[UNTAGGED] = len(self._labels)
        self._index.set_ef(self._ef)
        return self, meta


# -- files ------------------------------------------------------------------------------------


@contextlib.contextmanager
def _dir_lock(path: Path) -> Iterator[None]:
    fd = os.open(path / _LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _write_synced(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_and_digest(path: Path) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    return h.hexdigest(), size


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _referenced(path: Path) -> set[str]:
    """Data files the current ``index.json`` names (none when it is missing or unreadable)."""
    try:
        meta = _read_meta(path)
    except IndexCacheError:
        return set()
    return {meta.index_file.name, meta.labels_file.name}


def _remove_unreferenced(path: Path, keep: set[str]) -> None:
    for p in path.iterdir():
        name = p.name
        stale = name.startswith(_TMP_PREFIX) or (
            (_INDEX_RE.fullmatch(name) or _LABELS_RE.fullmatch(name)) and name not in keep
        )
        if stale:
            with contextlib.suppress(OSError):
                p.unlink()


def _read_meta(path: Path) -> IndexMeta:
    meta_path = path / _META_NAME
    try:
        raw = meta_path.read_bytes()
    except FileNotFoundError as exc:
        raise IndexCacheError("missing", f"no saved index in {path}") from exc
    except OSError as exc:
        raise IndexCacheError("bad_metadata", f"cannot read {meta_path}: {exc}") from exc
    try:
        envelope = msgspec.json.decode(raw, type=_Envelope)
        body = bytes(envelope.meta)
        if hashlib.sha256(body).hexdigest() != envelope.sha256:
            raise IndexCacheError("bad_metadata", f"{meta_path} fails its checksum")
        return msgspec.json.decode(body, type=IndexMeta)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise IndexCacheError("bad_metadata", f"{meta_path} is not valid: {exc}") from exc


def _verify_file(path: Path, entry: IndexFile, *, keep: bool = False) -> bytes:
    """Check a data file's size and digest; return its bytes when ``keep``."""
    file_path = path / entry.name
    try:
        size = file_path.stat().st_size
    except FileNotFoundError as exc:
        raise IndexCacheError("missing", f"{file_path} is missing") from exc
    except OSError as exc:
        raise IndexCacheError("missing", f"cannot read {file_path}: {exc}") from exc
    if size < entry.size:
        raise IndexCacheError("truncated", f"{file_path} has {size} of {entry.size} bytes")
    if size > entry.size:
        raise IndexCacheError("corrupt", f"{file_path} has {size} bytes, expected {entry.size}")
    h = hashlib.sha256()
    parts: list[bytes] = []
    try:
        with file_path.open("rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
                if keep:
                    parts.append(chunk)
    except OSError as exc:
        raise IndexCacheError("missing", f"cannot read {file_path}: {exc}") from exc
    if h.hexdigest() != entry.sha256:
        raise IndexCacheError("corrupt", f"{file_path} fails its SHA-256 digest")
    return b"".join(parts)


def _parse_labels(data: bytes, meta: IndexMeta) -> list[tuple[int, MemoryId]]:
    size = _LABEL_RECORD.size
    if len(data) != meta.count * size:
        raise IndexCacheError(
            "bad_metadata",
            f"the label map holds {len(data) // size} ids, metadata says {meta.count}",
        )
    pairs = [(label, MemoryId(raw)) for label, raw in _LABEL_RECORD.iter_unpack(data)]
    labels = [label for label, _ in pairs]
    if (
        labels != sorted(set(labels))
        or len({mid for _, mid in pairs}) != len(pairs)
        or (labels and labels[-1] >= meta.next_label)
    ):
        raise IndexCacheError("corrupt", "the label map repeats or exceeds its labels")
    return pairs


def _elements(path: Path) -> tuple[int, int, int, int]:
    """``(elements, bytes per element, label offset, vector offset)`` of an hnswlib file.

    Raises:
        IndexCacheError: the header is not an hnswlib header this module knows.
    """
    with path.open("rb") as f:
        head = f.read(_HNSW_HEADER.size)
    if len(head) != _HNSW_HEADER.size:
        raise IndexCacheError("truncated", f"{path} is shorter than an hnswlib header")
    level0, _, count, size, label_at, data_at, *_ = _HNSW_HEADER.unpack(head)
    if level0 != 0 or not 0 < data_at < label_at <= size - 8:
        raise IndexCacheError("corrupt", f"{path} has an hnswlib header this cortex cannot read")
    return int(count), int(size), int(label_at), int(data_at)


def _plan(path: Path, dim: int, drop_labels: set[int]) -> tuple[dict[int, int], list[int]]:
    """What ``_apply`` changes in an hnswlib file, without changing it.

    Returns ``({element: new flag byte}, [elements whose vector to zero])``, so that the
    elements labelled ``drop_labels`` are deleted and no deleted element keeps its vector.

    Raises:
        IndexCacheError: the file is not an hnswlib file of ``dim`` floats.
    """
    count, size, label_at, data_at = _elements(path)
    width = 4 * dim
    if data_at + width > label_at:
        raise IndexCacheError("wrong_dim", f"{path} holds vectors shorter than {dim} floats")
    if count == 0:
        return {}, []
    total = _HNSW_HEADER.size + count * size
    with path.open("rb") as f:
        if os.fstat(f.fileno()).st_size < total:
            raise IndexCacheError("truncated", f"{path} is shorter than its elements")
        with mmap.mmap(f.fileno(), total, prot=mmap.PROT_READ) as buf:
            arr = np.frombuffer(buf, dtype=np.uint8, count=count * size, offset=_HNSW_HEADER.size)
            rows = arr.reshape(count, size)
            old = rows[:, 2].copy()
            flags = old.copy()
            if drop_labels:
                labels = rows[:, label_at : label_at + 8].copy().view("<u8")[:, 0]
                wanted = np.array(sorted(drop_labels), dtype=np.uint64)
                flags[np.isin(labels, wanted)] |= _DELETE_MARK
            deleted = np.nonzero(flags & _DELETE_MARK)[0]
            dirty = deleted[rows[deleted, data_at : data_at + width].any(axis=1)]
            del rows, arr
    marks = {int(i): int(flags[i]) for i in np.nonzero(flags != old)[0].tolist()}
    return marks, [int(i) for i in dirty.tolist()]


def _apply(path: Path, dim: int, marks: dict[int, int], dirty: list[int]) -> None:
    _, size, _, data_at = _elements(path)
    fd = os.open(path, os.O_RDWR)
    try:
        for i, flag in marks.items():
            os.pwrite(fd, bytes([flag]), _HNSW_HEADER.size + i * size + 2)
        zeros = bytes(4 * dim)
        for i in dirty:
            os.pwrite(fd, zeros, _HNSW_HEADER.size + i * size + data_at)
    finally:
        os.close(fd)


def _zero_deleted(path: Path, dim: int) -> None:
    try:
        marks, dirty = _plan(path, dim, set())
        _apply(path, dim, marks, dirty)
    except IndexCacheError as exc:  # a file hnswlib just wrote and we cannot read: refuse it
        raise CortexError(f"cannot clear deleted vectors from {path}: {exc}") from exc


def erase_saved(directory: str | Path, live: Callable[[MemoryId], bool]) -> int:
    """Rewrite a saved index without the vectors of memories ``live`` rejects.

    The erasure step of a store (``specs/vector-index.md`` §3b): every element whose memory
    has no stored vector any more is marked deleted and its vector zeroed, in new files that
    replace the old ones the way ``save`` does (the old ones are removed, as are temporary
    files a crashed save left). A saved index that cannot be read is removed: the next search
    rebuilds it. Runs under the directory lock, so no save interleaves.

    Returns:
        The files written or removed.

    Raises:
        CortexError: the directory cannot be written.
    """
    path = Path(directory)
    if not path.is_dir():
        return 0
    try:
        with _dir_lock(path):
            return _erase_locked(path, live)
    except OSError as exc:
        raise CortexError(f"cannot erase vectors from the index in {path}: {exc}") from exc


def _erase_locked(path: Path, live: Callable[[MemoryId], bool]) -> int:
    changed = 0
    for p in path.iterdir():  # a crashed save's leftovers
        if p.name.startswith(_TMP_PREFIX):
            p.unlink()
            changed += 1
    try:
        meta = _read_meta(path)
        _verify_file(path, meta.index_file)
        pairs = _parse_labels(_verify_file(path, meta.labels_file, keep=True), meta)
        drop = {label for label, mid in pairs if not live(mid)}
        marks, dirty = _plan(path / meta.index_file.name, meta.dim, drop)
    except IndexCacheError:
        for p in path.iterdir():  # unusable: the next search rebuilds it from the store
            if p.name != _LOCK_NAME:
                p.unlink()
                changed += 1
        return changed
    if not drop and not marks and not dirty:
        return changed
    # the vectors are zeroed in the file itself, where they are (a copy would leave them in the
    # blocks of the old file); it is then renamed after its new digest. A crash before the new
    # index.json leaves a file that fails its digest: the next search rebuilds the cache. A
    # reader loading it meanwhile gets deleted elements with zero vectors, which its journal
    # replay removes anyway.
    tmp_labels = path / f"{_TMP_PREFIX}{secrets.token_hex(8)}.bin"
    tmp_meta = tmp_labels.with_suffix(".json")
    created = [tmp_labels, tmp_meta]
    try:
        _apply(path / meta.index_file.name, meta.dim, marks, dirty)
        index_digest, index_size = _fsync_and_digest(path / meta.index_file.name)
        kept = [(label, mid) for label, mid in pairs if label not in drop]
        labels_data = b"".join(_LABEL_RECORD.pack(lb, mid.bytes) for lb, mid in kept)
        _write_synced(tmp_labels, labels_data)
        labels_digest = hashlib.sha256(labels_data).hexdigest()
        new = msgspec.structs.replace(
            meta,
            count=len(kept),
            index_file=IndexFile(
                name=f"vectors-{index_digest[:16]}.hnsw", size=index_size, sha256=index_digest
            ),
            labels_file=IndexFile(
                name=f"labels-{labels_digest[:16]}.bin", size=len(labels_data), sha256=labels_digest
            ),
        )
        body = msgspec.json.encode(new)
        envelope = msgspec.json.encode(
            {"meta": msgspec.Raw(body), "sha256": hashlib.sha256(body).hexdigest()}
        )
        _write_synced(tmp_meta, envelope + b"\n")
        os.replace(path / meta.index_file.name, path / new.index_file.name)
        os.replace(tmp_labels, path / new.labels_file.name)
        created.append(path / new.labels_file.name)
        _fsync_dir(path)
        os.replace(tmp_meta, path / _META_NAME)  # the commit point
        _fsync_dir(path)
    except BaseException:
        current = _referenced(path)
        for p in created:
            if p.name not in current:
                with contextlib.suppress(OSError):
                    p.unlink()
        raise
    keep = {new.index_file.name, new.labels_file.name}
    stale = [
        p.name
        for p in path.iterdir()
        if (_INDEX_RE.fullmatch(p.name) or _LABELS_RE.fullmatch(p.name)) and p.name not in keep
    ]
    _remove_unreferenced(path, keep)
    return changed + 3 + len(stale)


def saved_region(path: Path, offsets: Sequence[int]) -> list[str]:
    """What each byte offset of a saved hnswlib file is.

    ``vector`` (the vector of an element in use), ``deleted`` (where a deleted element's
    vector was) or ``file`` (anything else, or a file this module cannot read).
    """
    try:
        count, size, label_at, data_at = _elements(path)
        with path.open("rb") as f:
            data = f.read(_HNSW_HEADER.size + count * size)
    except (IndexCacheError, OSError):
        return ["file"] * len(offsets)
    out = []
    for offset in offsets:
        i, at = divmod(offset - _HNSW_HEADER.size, size)
        if offset < _HNSW_HEADER.size or i >= count or not data_at <= at < label_at:
            out.append("file")
        else:
            deleted = data[_HNSW_HEADER.size + i * size + 2] & _DELETE_MARK
            out.append("deleted" if deleted else "vector")
    return out
