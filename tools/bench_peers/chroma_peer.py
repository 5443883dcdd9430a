"""The Chroma peer: the embedded persistent client, the same records and precomputed vectors.

Each record is a document (its text) with metadata (type, importance, the JSON record, and one
``tag:<name>: true`` key per tag, since a filter needs scalar values). Chroma's ranked text
search raises "not implemented" for the local client, so text search is the only thing it has:
an unranked ``where_document`` ``$contains`` filter (any of the query's words). Hybrid is a
vector query restricted by that filter, not a ranked fusion. Telemetry is off.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_peers.dataset import Dataset
from bench_peers.harness import NotAvailable


class System:
    """The adapter the harness drives."""

    name = "chroma"

    def __init__(self, path: Path, ds: Dataset, log: Callable[[str], None]) -> None:
        try:
            import chromadb
            from chromadb.config import Settings
        except ImportError as exc:
            raise NotAvailable(f"chromadb not installed: {exc}") from exc
        self.ds = ds
        self.client = chromadb.PersistentClient(
            path=str(path), settings=Settings(anonymized_telemetry=False)
        )
        self.col = self.client.create_collection(
            "bench", embedding_function=None, metadata={"hnsw:space": "cosine"}
        )
        self.notes = [
            f"Chroma {chromadb.__version__}: HNSW (cosine, default search breadth); text search "
            "is an unranked $contains filter; hybrid = vector query within that filter"
        ]

    def _meta(self, i: int) -> dict[str, Any]:
        rec = self.ds.record(i)
        meta: dict[str, Any] = {
            "type": rec["type"],
            "importance": rec["importance"],
            "record": json.dumps(rec),
        }
        for t in rec["tags"]:
            meta[f"tag:{t}"] = True
        return meta

    def _add(self, rows: range) -> None:
        self.col.add(
            ids=[str(i) for i in rows],
            embeddings=self.ds.vectors[rows.start : rows.stop],
            documents=[self.ds.texts[i] for i in rows],
            metadatas=[self._meta(i) for i in rows],
        )

    def ingest_batch(self, start: int, stop: int) -> None:
        """Write records ``start`` to ``stop`` in one ``add``."""
        self._add(range(start, stop))

    def ingest_one(self, i: int) -> None:
        """Write record ``i`` in an ``add`` of its own."""
        self._add(range(i, i + 1))

    def after_ingest(self) -> None:
        """Nothing to finish."""

    def prepare(self, workload: str) -> None:
        """Nothing to prepare."""

    def _records(self, metas: list[Any]) -> None:
        for m in metas:
            json.loads(m["record"])

    def get(self, i: int) -> Any:
        """Read record ``i`` in full by its id."""
        got = self.col.get(ids=[str(i)], include=["documents", "metadatas"])
        self._records(got["metadatas"])
        return got

    def find(self, type_: str, tag: str, limit: int) -> list[int]:
        """Up to ``limit`` records of a type with a tag (Chroma has no order: any ``limit``)."""
        got = self.col.get(
            where={"$and": [{"type": type_}, {f"tag:{tag}": True}]},
            limit=limit,
            include=["documents", "metadatas"],
        )
        self._records(got["metadatas"])
        return [int(x) for x in got["ids"]]

    def _contains(self, q: str) -> dict[str, Any]:
        words = q.split()
        if len(words) == 1:
            return {"$contains": words[0]}
        return {"$or": [{"$contains": w} for w in words]}

    def text(self, q: str, k: int) -> list[int]:
        """Unranked: the first ``k`` documents containing any of the words."""
        got = self.col.get(
            where_document=self._contains(q), limit=k, include=["documents", "metadatas"]
        )
        self._records(got["metadatas"])
        return [int(x) for x in got["ids"]]

    def vector(self, j: int, k: int, type_: str | None) -> list[int]:
        """HNSW query, optionally with a metadata filter on the type."""
        got = self.col.query(
            query_embeddings=self.ds.query_vectors[j : j + 1],
            n_results=k,
            where={"type": type_} if type_ else None,
            include=["documents", "metadatas"],
        )
        self._records(got["metadatas"][0])
        return [int(x) for x in got["ids"][0]]

    def hybrid(self, q: str, j: int, k: int) -> list[int]:
        """A vector query restricted to documents containing a query word (not a fusion)."""
        got = self.col.query(
            query_embeddings=self.ds.query_vectors[j : j + 1],
            n_results=k,
            where_document=self._contains(q),
            include=["documents", "metadatas"],
        )
        self._records(got["metadatas"][0])
        return [int(x) for x in got["ids"][0]]

    def context(self, q: str, j: int) -> Any:
        """The ``context`` bundle for a query (cortex only)."""
        raise NotAvailable("cortex only")

    def close(self) -> None:
        """Let go of the client."""
        del self.col
        del self.client
