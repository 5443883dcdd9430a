"""The mem0 peer: the open-source library with no LLM (``infer=False``) on local Qdrant.

mem0 needs an LLM unless ``add`` is called with ``infer=False``; then it stores each message
as a memory, embedding it with the configured embedder. Its embedder here is replaced by one
that returns the data set's precomputed vectors (the configured OpenAI embedder and LLM are
built with a dummy key and never called). The vector store is Qdrant's local on-disk mode,
which mem0 uses by default. mem0 has no batch write: a "batch" is 1,000 ``add`` calls.
Its search always mixes the semantic score with BM25 keyword scores, which need ``fastembed``
(whose BM25 model comes from a model hub, so it is not installed: search is semantic only)
and spaCy (not installed: no lemmatising or entity boosts). So only vector search is measured.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench_peers.dataset import DIM, Dataset
from bench_peers.harness import NotAvailable

USER = "bench"


class _Embedder:
    """mem0's embedder interface over precomputed vectors."""

    def __init__(self, ds: Dataset) -> None:
        self.ds = ds
        self.next = 0
        self.query: np.ndarray | None = None
        self.mismatched = 0

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        """The record's or the pending query's vector."""
        if memory_action == "search":
            assert self.query is not None
            return self.query.tolist()  # type: ignore[no-any-return]
        i = self.next
        self.next += 1
        if self.ds.texts[i] != text:
            self.mismatched += 1
        return self.ds.vectors[i].tolist()  # type: ignore[no-any-return]


class System:
    """The adapter the harness drives."""

    name = "mem0"

    def __init__(self, path: Path, ds: Dataset, log: Callable[[str], None]) -> None:
        path.mkdir(parents=True, exist_ok=True)
        os.environ["MEM0_DIR"] = str(path / "home")
        os.environ["MEM0_TELEMETRY"] = "False"
        try:
            import mem0
            from mem0 import Memory
        except ImportError as exc:
            raise NotAvailable(f"mem0ai not installed: {exc}") from exc
        self.ds = ds
        cfg = {
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "path": str(path / "qdrant"),
                    "on_disk": True,
                    "embedding_model_dims": DIM,
                    "collection_name": "bench",
                },
            },
            "embedder": {"provider": "openai", "config": {"api_key": "unused"}},
            "llm": {"provider": "openai", "config": {"api_key": "unused"}},
            "history_db_path": str(path / "history.db"),
        }
        self.m = Memory.from_config(cfg)
        self.emb = _Embedder(ds)
        self.m.embedding_model = self.emb
        self.uuids: dict[int, str] = {}
        self.notes = [
            f"mem0 {getattr(mem0, '__version__', '?')} (infer=False, local Qdrant on disk): "
            "no batch write (1,000 add calls); search is semantic only here (BM25 needs "
            "fastembed's hub-downloaded model; spaCy not installed)"
        ]

    def _meta(self, i: int) -> dict[str, Any]:
        rec = self.ds.record(i)
        meta: dict[str, Any] = {"n": i, "type": rec["type"], "importance": rec["importance"]}
        meta["record"] = json.dumps(rec)
        for t in rec["tags"]:
            meta[t.replace("-", "_")] = True
        return meta

    def ingest_one(self, i: int) -> None:
        """Write record ``i`` with one ``add`` (mem0 commits each)."""
        res = self.m.add(self.ds.texts[i], user_id=USER, metadata=self._meta(i), infer=False)
        self.uuids[i] = res["results"][0]["id"]

    def ingest_batch(self, start: int, stop: int) -> None:
        """Records ``start`` to ``stop``, one ``add`` each (there is no batch write)."""
        for i in range(start, stop):
            self.ingest_one(i)

    def after_ingest(self) -> None:
        """Note a mismatch between writes and precomputed vectors, if any."""
        if self.emb.mismatched:
            self.notes.append(f"mem0: {self.emb.mismatched} writes not matched to their vectors")

    def prepare(self, workload: str) -> None:
        """Nothing to prepare."""

    def _ns(self, results: list[dict[str, Any]]) -> list[int]:
        for r in results:
            json.loads(r["metadata"]["record"])
        return [int(r["metadata"]["n"]) for r in results]

    def get(self, i: int) -> Any:
        """Read record ``i`` in full by its id."""
        got = self.m.get(self.uuids[i])
        json.loads(got["metadata"]["record"])
        return got

    def find(self, type_: str, tag: str, limit: int) -> list[int]:
        """``get_all`` with a type and a tag filter."""
        filters = {"user_id": USER, "type": type_, tag.replace("-", "_"): True}
        return self._ns(self.m.get_all(filters=filters, top_k=limit)["results"])

    def text(self, q: str, k: int) -> list[int]:
        """Not available: mem0's keyword search needs fastembed's downloaded BM25 model."""
        raise NotAvailable("keyword (BM25) search needs fastembed's model from a hub")

    def vector(self, j: int, k: int, type_: str | None) -> list[int]:
        """``search`` with the query's precomputed vector (threshold 0: plain top-k)."""
        self.emb.query = self.ds.query_vectors[j]
        filters: dict[str, Any] = {"user_id": USER}
        if type_:
            filters["type"] = type_
        res = self.m.search(self.ds.text_queries[j], filters=filters, top_k=k, threshold=0.0)
        return self._ns(res["results"])

    def hybrid(self, q: str, j: int, k: int) -> list[int]:
        """Not available here: see ``text``."""
        raise NotAvailable("BM25 half needs fastembed's model from a hub")

    def context(self, q: str, j: int) -> Any:
        """The ``context`` bundle for a query (cortex only)."""
        raise NotAvailable("cortex only")

    def close(self) -> None:
        """Close the vector store client."""
        with contextlib.suppress(Exception):  # best effort
            self.m.vector_store.client.close()
