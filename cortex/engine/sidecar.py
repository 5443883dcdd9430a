"""The vector index sidecar: an hnswlib cache of the store's ``vec/`` records beside the store.

LMDB is the truth; the index in ``<store>/vectors/`` is a cache. It is loaded (everything about
it verified), or rebuilt from ``vec/`` when anything disagrees, and caught up from the journal
before every search, so writes by other handles and processes are seen. See
``specs/vector-index.md`` §3.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from cortex.engine.heads import row_of
from cortex.engine.journal import JOURNAL_CODEC, JournalEntry, JournalKind
from cortex.engine.values import decode_trusted
from cortex.errors import CortexError, IndexCacheError, ValidationError
from cortex.index.ann import DEFAULT_EF, VectorIndex
from cortex.index.embed import Embedder
from cortex.index.vectors import VECTOR_RECORD, VectorRecord, check_vector, stored_vector
from cortex.model.codec import HEAD
from cortex.model.enums import MemoryType
from cortex.model.ids import MemoryId
from cortex.model.records import Head
from cortex.storage.keys import HEAD as HEAD_PREFIX
from cortex.storage.keys import (
    JOURNAL,
    VEC,
    head_key,
    id_key,
    journal_key,
    parse_journal_key,
    vec_key,
)
from cortex.storage.kv import ReadTxn

__all__ = ["DIRECTORY", "VectorSidecar", "embed_checked", "journal_head"]

DIRECTORY: Final = "vectors"
"""The sidecar's directory inside the store directory."""

QUERY_CACHE: Final = 32
"""How many recent query texts keep their vectors (``VectorSidecar.query_vector``)."""

_CHANGES_VECTORS: Final = frozenset(
    {
        JournalKind.WRITE,
        JournalKind.UPDATE,
        JournalKind.TOMBSTONE,
        JournalKind.PURGE,
        JournalKind.EMBED,
        JournalKind.IMPORT,
    }
)
_BATCH: Final = 4096
_isfinite = np.isfinite
_isfinite_float = math.isfinite
_all = np.logical_and.reduce  # ndarray.all without its Python frame
_sqrt = np.sqrt
_add_reduce = np.add.reduce


def journal_head(txn: ReadTxn) -> int:
    """The sequence number of the newest journal entry (0 for none)."""
    last = next(txn.keys(JOURNAL, reverse=True), None)
    return 0 if last is None else parse_journal_key(last)


class VectorSidecar:
    """The vector index of one open store, for one embedder.

    Args:
        store_path: the directory the cache lives in (``vectors/`` inside it); None keeps the
            index in memory only (a PostgreSQL store without ``vectors=``).
        embedder: the store's embedder (its model id and dim name the index).
        read: opens a read snapshot of the store.
        ef: the index's search-time candidate list length (``VectorIndex.ef``).
    """

    def __init__(
        self,
        store_path: str | Path | None,
        embedder: Embedder,
        read: Callable[[], Any],
        *,
        ef: int = DEFAULT_EF,
        epoch: Callable[[], object] | None = None,
    ) -> None:
        self._anchor_txn = read  # a read snapshot of the store (for the anchor when saving)
        self._epoch = epoch
        """The server's history epoch (``PgKV.epoch``: its start, changed by a restart after
        a crash), or None (LMDB: the process ends with a crash of the machine)."""
        self._seen_epoch: object = None if epoch is None else epoch()
        self._digest = ""
        """``_anchor`` of ``watermark`` as caught up (compared after an epoch change)."""
        self.directory = None if store_path is None else Path(store_path) / DIRECTORY
        self.embedder = embedder
        self.ef = ef
        self.index: VectorIndex | None = None
        self.watermark = 0
        self.state = "not loaded"
        self._dirty = False
        self._lock = threading.RLock()
        self._queries: OrderedDict[str, npt.NDArray[np.float32]] = OrderedDict()
        self._queries_lock = threading.Lock()

    # -- keeping the cache right ----------------------------------------------------------

    def ready(self, txn: ReadTxn) -> VectorIndex:
        """The index, loaded or rebuilt on first use and caught up to ``txn``'s journal.

        On PostgreSQL a write is visible to other sessions up to one WAL flush before it is
        durable (``specs/postgres.md`` §4), so a server crash can take away writes this index
        already holds, and the journal positions they had are then given to other writes. A
        restart of the server changes its epoch: the first catch-up after it compares the
        digest of the journal entry at the watermark with the one caught up to, and rebuilds
        the index from the store when they differ (``specs/vector-index.md`` §3).
        """
        with self._lock:
            head = None
            if self.index is not None and self._epoch is not None:
                # the snapshot's first read: after it, the epoch is that of the server it reads
                head = journal_head(txn)
                epoch = self._epoch()
                if epoch != self._seen_epoch:
                    if _anchor(txn, self.watermark) != self._digest:
                        self.index = self._rebuild(txn)
                        self.state = "rebuilt from the store (the server lost writes it held)"
                    self._seen_epoch = epoch
            if self.index is None:
                try:
                    if self.directory is None:
                        raise IndexCacheError("missing", "the store keeps no index cache on disk")
                    index, meta = VectorIndex.load(
                        self.directory,
                        model_id=self.embedder.model_id,
                        dim=self.embedder.dim,
                        ef=self.ef,
                    )
                except IndexCacheError as exc:
                    self.index = self._rebuild(txn)
                    self.state = f"rebuilt from the store ({exc.reason})"
                else:
                    if meta.watermark > journal_head(txn) or meta.anchor != _anchor(
                        txn, meta.watermark
                    ):
                        # the cache reflects another history (a restored older copy, commits
                        # lost with metasync=False): its watermark does not name our journal
                        self.index = self._rebuild(txn)
                        self.state = "rebuilt from the store (another history)"
                    else:
                        self.index, self.watermark = index, meta.watermark
                        self._digest = meta.anchor
                        self.state = "loaded"
            self._catch_up(txn, self.index, head)
            return self.index

    def _rebuild(self, txn: ReadTxn) -> VectorIndex:
        index = VectorIndex(self.embedder.dim, ef=self.ef)
        ids: list[MemoryId] = []
        kinds: list[int] = []
        rows: list[npt.NDArray[np.float32]] = []
        for key, value in _heads_preloaded(txn, txn.scan(VEC)):
            rec = _record(key, value)
            if rec.model_id != self.embedder.model_id or rec.dim != self.embedder.dim:
                continue  # verify names it; the index holds one model
            hkey = HEAD_PREFIX + key[len(VEC) :]  # format 21: keyed by row; the head names it
            hraw = txn.get(hkey)
            if hraw is None:
                continue  # a vector of no memory: verify names it
            head: Head = decode_trusted(HEAD, hkey, hraw)
            ids.append(head.id)
            kinds.append(int(head.type))
            rows.append(stored_vector(rec))
            if len(ids) >= _BATCH:
                index.add(ids, np.stack(rows))
                index.set_tags(ids, kinds)
                ids, kinds, rows = [], [], []
        if ids:
            index.add(ids, np.stack(rows))
            index.set_tags(ids, kinds)
        self.watermark = journal_head(txn)
        self._digest = _anchor(txn, self.watermark)
        self._dirty = True
        return index

    def _catch_up(self, txn: ReadTxn, index: VectorIndex, head: int | None = None) -> None:
        if head is None:
            head = journal_head(txn)
        if head <= self.watermark:
            return  # already there (or another thread saw a newer snapshot)
        touched: dict[MemoryId, None] = {}
        last = None
        for key, value in txn.scan(JOURNAL, start=journal_key(self.watermark + 1)):
            entry: JournalEntry = decode_trusted(JOURNAL_CODEC, key, value)
            if entry.seq > head:
                break
            last = value
            if entry.id is not None and entry.kind in _CHANGES_VECTORS and entry.edge is None:
                touched[entry.id] = None
        load = getattr(txn, "preload", None)
        if load is not None and touched:
            # where a read is a round trip (PostgreSQL): every touched memory's row and vector
            # in one query (the server follows each id/ record), not two reads a memory
            ids = [id_key(m) for m in touched]
            for i in range(0, len(ids), _BATCH):
                chunk = ids[i : i + _BATCH]
                load(chunk, via=(chunk, HEAD_PREFIX, VEC))  # VEC || row: one key
        for mid in touched:
            row = row_of(txn, mid)  # format 21: the vector is under the memory's row
            raw = None if row is None else txn.get(vec_key(row))
            rec = None if raw is None or row is None else _record(vec_key(row), raw)
            if (
                rec is not None
                and row is not None
                and (rec.model_id, rec.dim)
                == (
                    self.embedder.model_id,
                    self.embedder.dim,
                )
            ):
                index.add([mid], stored_vector(rec)[None, :])
                kind = _type_at(txn, row)
                if kind is not None:  # a memory's type is fixed for its life
                    index.set_tags([mid], [int(kind)])
            else:
                index.remove(mid)
        self.watermark = head
        # the digest _anchor gives (the entry at ``head`` is the last one scanned)
        self._digest = "" if last is None else hashlib.sha256(last).hexdigest()
        self._dirty = True

    def search(self, txn: ReadTxn, query: Any, n: int) -> list[tuple[MemoryId, float]]:
        """The ``n`` memories nearest ``query`` (text to embed, or a vector), best first.

        Raises:
            ValidationError: a query vector of the wrong shape.
        """
        if isinstance(query, str):
            vector = self.query_vector(query)
        else:
            vector = check_vector(query, self.embedder.dim, self.embedder.model_id, "near_vector")
        index = self.ready(txn)
        return index.search(vector, n)

    def types_of(self, ids: list[MemoryId]) -> list[int | None]:
        """The types (``int(MemoryType)``) of memories the index holds, None where not known.

        Known for the memories the index was built with or caught up on, and those noted
        (``note_type``); an index loaded from its cache knows none at first. A vector search
        with a type filter leaves out candidates of another type without reading them
        (``Executor``'s ``types_of``).
        """
        index = self.index
        if index is None:
            return [None] * len(ids)
        return index.tags(ids)

    def type_share(self, types: list[int]) -> float | None:
        """The share of the indexed memories of one of ``types``, among those of a known type.

        None where not known (``VectorIndex.share``): a vector search with a type filter then
        widens round by round (``Executor``'s ``type_share``).
        """
        index = self.index
        return None if index is None else index.share(types)

    def note_type(self, mid: MemoryId, kind: MemoryType) -> None:
        """Keep the type of a memory the index holds (read by a query that accepted it)."""
        index = self.index
        if index is not None:
            index.note_tag(mid, int(kind))

    def query_vector(self, text: str) -> npt.NDArray[np.float32]:
        """``text`` embedded as a query (read-only).

        The vectors of the last ``QUERY_CACHE`` texts are kept, so a query that ranks by
        vector and also searches episode evidence, or widens its vector search, or a question
        ``search`` sends to several handlers, embeds its text once.
        """
        with self._queries_lock:
            hit = self._queries.get(text)
            if hit is not None:
                self._queries.move_to_end(text)
                return hit
        vector: npt.NDArray[np.float32] = embed_checked(self.embedder, [text])[0]
        vector.setflags(write=False)
        with self._queries_lock:
            self._queries[text] = vector
            while len(self._queries) > QUERY_CACHE:
                self._queries.popitem(last=False)
        return vector

    def save(self) -> None:
        """Save the cache if it changed (a failure is harmless: the next open rebuilds)."""
        with self._lock:
            if self.index is None or not self._dirty or self.directory is None:
                return
            index = self.index

            def prepare() -> tuple[int, str]:
                # caught up under the directory lock: a purge committed before this save is in
                # it, so the file never brings back a vector an erasure step removed
                with self._anchor_txn() as txn:
                    self._catch_up(txn, index)
                    return self.watermark, _anchor(txn, self.watermark)

            try:
                index.save(
                    self.directory,
                    model_id=self.embedder.model_id,
                    watermark=self.watermark,
                    prepare=prepare,
                )
            except (OSError, CortexError):
                return
            self._dirty = False

    def drop(self) -> None:
        """Forget the in-memory index (the next search loads or rebuilds it)."""
        with self._lock:
            self.index = None
            self.watermark = 0
            self.state = "not loaded"


def _anchor(txn: ReadTxn, seq: int) -> str:
    """The digest of journal entry ``seq`` (empty for 0 or a missing entry)."""
    if seq == 0:
        return ""
    raw = txn.get(journal_key(seq))
    return "" if raw is None else hashlib.sha256(raw).hexdigest()


def _heads_preloaded(
    txn: ReadTxn, pairs: Iterable[tuple[bytes, bytes]]
) -> Iterator[tuple[bytes, bytes]]:
    """The ``vec/`` pairs of ``pairs`` in order, the heads at their rows preloaded first.

    Where a read is a round trip (PostgreSQL's ``preload``), a chunk of heads is one query, not
    one a vector, when a process builds its index from the stored vectors; on LMDB the pairs
    are given as they are.
    """
    load = getattr(txn, "preload", None)
    if load is None:
        yield from pairs
        return
    it = iter(pairs)
    while chunk := list(itertools.islice(it, _BATCH)):
        load([HEAD_PREFIX + k[len(VEC) :] for k, _ in chunk])
        yield from chunk


def _type_at(txn: ReadTxn, row: int) -> MemoryType | None:
    """The type of the memory at ``row`` (its head's), or None when it has no head."""
    key = head_key(row)
    raw = txn.get(key)
    if raw is None:
        return None
    head: Head = decode_trusted(HEAD, key, raw)
    return head.type


def _record(key: bytes, value: bytes) -> VectorRecord:
    rec: VectorRecord = decode_trusted(VECTOR_RECORD, key, value)
    return rec


def _bad_output(embedder: Embedder, out: npt.NDArray[Any], n: int) -> ValidationError:
    return ValidationError(
        "embedder",
        "output",
        f"{embedder.model_id} returned shape {out.shape} for {n} texts of dim "
        f"{embedder.dim} (or non-finite values)",
    )


def embed_checked(embedder: Embedder, texts: Sequence[str]) -> npt.NDArray[np.float32]:
    """``embedder.embed(texts)``, checked: shape ``(len(texts), dim)``, finite, float32.

    Raises:
        ValidationError: the embedder returned something else.
    """
    out = np.asarray(embedder.embed(list(texts)), dtype=np.float32)
    if out.shape != (len(texts), embedder.dim):
        raise _bad_output(embedder, out, len(texts))
    # numpy.linalg.norm(out, axis=1, keepdims=True)'s own arithmetic (the same float32 ufuncs,
    # the same bytes: a test compares them), without its Python frames and dispatch
    norms = _sqrt(_add_reduce(out * out, axis=1, keepdims=True))
    # finite, non-zero norms: every value is finite (an infinity or a NaN makes its row's norm
    # one); else the values are checked, and a zero norm leaves its row as it is
    if len(texts) == 1:
        n = norms.item()  # one row: a Python float, without two reductions
        usual = n != 0.0 and _isfinite_float(n)
    else:
        usual = bool(_all(_isfinite(norms), axis=None)) and bool(_all(norms, axis=None))
    if not usual:
        if not _all(_isfinite(out), axis=None):
            raise _bad_output(embedder, out, len(texts))
        norms[norms == 0] = 1.0
    unit: npt.NDArray[np.float32] = np.divide(out, norms, dtype=np.float32)
    return unit
