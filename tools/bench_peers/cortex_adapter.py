"""The cortex adapter: every workload through cortex's public API, with feature detection.

``write_many`` / ``write`` / ``resolve_latest`` exist today; ``find`` / ``context`` and text
and vector search are detected, so a workload the store does not have yet is reported as
``n/a (not built yet)`` instead of being faked.
"""

from __future__ import annotations

import inspect
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import cortex
from bench_peers.dataset import DIM, Dataset
from bench_peers.harness import NotAvailable
from cortex import Cortex, NewMemory

NOT_BUILT = "not built yet"
_ENUMS: dict[tuple[str, str], Any] = {
    ("Preference", "polarity"): cortex.Polarity,
    ("Constraint", "polarity"): cortex.Polarity,
    ("Belief", "stance"): cortex.Stance,
    ("Event", "outcome"): cortex.Outcome,
    ("Goal", "status"): cortex.GoalStatus,
    ("Constraint", "strength"): cortex.Strength,
    ("Constraint", "source"): cortex.ConstraintSource,
}


def to_data(ds: Dataset, i: int) -> cortex.Data:
    """Record ``i`` as cortex's typed data struct (the same fields the peers store as JSON)."""
    rec = ds.record(i)
    t = rec["type"]
    fields = {
        k: (_ENUMS[(t, k)][v.upper()] if (t, k) in _ENUMS else v) for k, v in rec["data"].items()
    }
    cls: Any = getattr(cortex, t)
    return cls(**fields)  # type: ignore[no-any-return]


class PrecomputedEmbedder:
    """The embedder protocol over the data set's precomputed vectors (no model is run).

    Writes are matched to records in write order (checked against the record's text, which the
    rendered form contains); a query text maps to its precomputed query vector.
    """

    model_id = "bench-precomputed-384"
    dim = DIM

    def __init__(self, ds: Dataset) -> None:
        self.ds = ds
        self.next = 0
        self.queries: dict[str, np.ndarray] = {}
        self.asking: np.ndarray | None = None
        self.mismatched = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for ``texts``."""
        out = np.empty((len(texts), DIM), np.float32)
        for j, text in enumerate(texts):
            if self.asking is not None:
                out[j] = self.asking
                continue
            if text in self.queries:
                out[j] = self.queries[text]
                continue
            i = self.next
            if i < len(self.ds.texts) and self.ds.texts[i] not in text:
                self.mismatched += 1
            out[j] = self.ds.vectors[min(i, len(self.ds.vectors) - 1)]
            self.next += 1
        return out


# ------------------------------------------------------------------------------------------------
# HOOK: how precomputed vectors get into cortex. The write-side API for vectors is not settled;
# today the only door is the embedder passed to ``Cortex.open``, so this returns the extra
# ``open`` arguments (or None and the reason). Replace the body when cortex grows a direct way
# to write a vector with a memory (e.g. a ``vector=`` on ``NewMemory``).
# ------------------------------------------------------------------------------------------------
def vector_hook(ds: Dataset) -> tuple[dict[str, Any] | None, str]:
    params = {
        *inspect.signature(Cortex.open).parameters,
        *inspect.signature(Cortex.__init__).parameters,  # open passes its options through
    }
    if "embedder" not in params:
        return None, f"{NOT_BUILT}: Cortex.open takes no embedder"
    return {"embedder": PrecomputedEmbedder(ds)}, "vectors through a precomputed embedder"


class System:
    """The adapter the harness drives."""

    name = "cortex"

    def __init__(self, path: Path, ds: Dataset, log: Callable[[str], None]) -> None:
        self.path = path / "store"
        self.ds = ds
        self.notes: list[str] = []
        self.has_query = hasattr(cortex, "Query")
        self.vec_kwargs, why = vector_hook(ds)
        self.notes.append(f"vectors: {why}")
        self.embedder = (self.vec_kwargs or {}).get("embedder")
        self.mode = "vector" if self.vec_kwargs else "plain"
        self.cx = self._open(self.mode)
        self.ids: dict[Any, int] = {}
        self.by_n: list[Any] = []

    def _open(self, mode: str) -> Any:
        kw = self.vec_kwargs if mode == "vector" and self.vec_kwargs else {}
        return Cortex.open(self.path, actor="bench", map_size=1 << 30, **kw)

    def prepare(self, workload: str) -> None:
        """Get ready for a workload (untimed)."""
        # Text search is hybrid when the store has an embedder: measure it on a plain handle,
        # and vector and hybrid search on a handle with the embedder.
        want = (
            "vector"
            if workload in ("vector_top10", "vector_top10_type", "hybrid_top10")
            else ("plain")
        )
        if workload == "ingest_single":
            want = "vector" if self.vec_kwargs else "plain"
        if want != self.mode and self.vec_kwargs:
            self.cx.close()
            self.mode = want
            self.cx = self._open(want)

    def _item(self, i: int) -> NewMemory:
        return NewMemory(
            data=to_data(self.ds, i), tags=self.ds.tags[i], importance=self.ds.importance[i]
        )

    def ingest_batch(self, start: int, stop: int) -> None:
        """Write records ``start`` to ``stop`` in one durable transaction."""
        uris = self.cx.write_many([self._item(i) for i in range(start, stop)])
        for i, u in zip(range(start, stop), uris, strict=True):
            self.ids[u.id] = i
            self.by_n.append(u.id)

    def vector_bytes(self) -> int:
        """What the vectors cost on disk: this store's bytes less those of the same records without.

        The same records are written in the same batches into a second store with no vectors
        (untimed), so "disk per memory, without vectors" is a measurement, not an estimate.
        """
        if not self.vec_kwargs:
            return 0
        from bench_peers.harness import BATCH, dir_bytes

        side = self.path.parent / "store-without-vectors"
        try:
            with Cortex.open(side, actor="bench", map_size=1 << 30) as cx:
                n = len(self.by_n)
                for b in range(0, n, BATCH):
                    cx.write_many([self._item(i) for i in range(b, min(b + BATCH, n))])
            return max(0, dir_bytes(self.path) - dir_bytes(side))
        finally:
            shutil.rmtree(side, ignore_errors=True)

    def after_ingest(self) -> None:
        """Finish the bulk load (untimed)."""
        if self.embedder is not None and self.embedder.mismatched:
            self.notes.append(
                f"precomputed embedder: {self.embedder.mismatched} writes not matched in order"
            )

    def ingest_one(self, i: int) -> None:
        """Write record ``i`` in a durable transaction of its own."""
        it = self._item(i)
        u = self.cx.write(it.data, tags=it.tags, importance=it.importance)
        self.ids[u.id] = i

    def get(self, i: int) -> Any:
        """Read record ``i`` in full by its id."""
        return self.cx.resolve_latest(self.by_n[i])

    def _find(self, **kw: Any) -> list[int]:
        if not self.has_query or not hasattr(self.cx, "find"):
            raise NotAvailable(NOT_BUILT)
        try:
            res = self.cx.find(cortex.Query(**kw))  # type: ignore[attr-defined]
        except cortex.ValidationError as exc:
            # a search the store cannot plan yet (no lexical index, no embedder) says so
            if "text" in kw or "near_vector" in kw:
                raise NotAvailable(f"{NOT_BUILT}: {exc}") from exc
            raise
        return [self.ids.get(m.id, -1) for m in res.memories]

    def find(self, type_: str, tag: str, limit: int) -> list[int]:
        """Up to ``limit`` records of a type with a tag, newest first."""
        return self._find(types=(type_,), tags=(tag,), limit=limit)

    def text(self, q: str, k: int) -> list[int]:
        """Text search: the top ``k`` records for ``q``."""
        return self._find(text=q, limit=k)

    def _need_vectors(self) -> None:
        if not self.vec_kwargs:
            raise NotAvailable(f"{NOT_BUILT} (vector write-side API)")

    def vector(self, j: int, k: int, type_: str | None) -> list[int]:
        """Vector search for query vector ``j``, optionally within one type."""
        self._need_vectors()
        qv = self.ds.query_vectors[j]
        if type_ is None:
            return self._find(near_vector=qv, limit=k)
        return self._find(near_vector=qv, types=(type_,), limit=k)

    def hybrid(self, q: str, j: int, k: int) -> list[int]:
        """Text and vector search combined."""
        self._need_vectors()
        assert self.embedder is not None
        self.embedder.queries[q] = self.ds.query_vectors[j]
        # the store may embed the text without an entity name it names (``rerank.unnamed``):
        # during the query every text embedded is the query's
        self.embedder.asking = self.ds.query_vectors[j]
        try:
            return self._find(text=q, limit=k)
        finally:
            self.embedder.asking = None

    def context(self, q: str, j: int) -> Any:
        """The ``context`` bundle for a query (cortex only)."""
        if not hasattr(self.cx, "context"):
            raise NotAvailable(NOT_BUILT)
        # the records carry no frames, so the bundle comes from the recall tier (the query)
        try:
            return self.cx.context(verb="find", objects=(), budget_tokens=3000, query=q)
        except cortex.ValidationError as exc:
            raise NotAvailable(f"{NOT_BUILT}: {exc}") from exc

    def close(self) -> None:
        """Close the store."""
        self.cx.close()
