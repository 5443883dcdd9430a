"""Shared helpers for the vector store, sidecar, hybrid, dedupe and recall tests (issue 5)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import numpy as np

from cortex import Cortex, Event, Fact, MemoryId, Preference, Query
from cortex.engine.heads import id_at, row_of
from cortex.engine.store import _seal
from cortex.engine.values import decode_trusted
from cortex.index import vectors
from cortex.index.embed import HashingEmbedder
from cortex.index.vectors import VECTOR_RECORD, VECTORS_META, VectorRecord, VectorsMeta
from cortex.storage.keys import VEC, meta_key, vec_key

ROOT = Path(__file__).resolve().parent.parent
DIM = 64
E = HashingEmbedder(DIM)
"""The embedder of these tests: fast and deterministic (``hashing-v1-64``)."""


def open_store(path: Path, **kw: Any) -> Cortex:
    kw.setdefault("actor", "agent")
    kw.setdefault("metasync", False)
    return Cortex.open(path, **kw)


def fact(statement: str, **kw: Any) -> Fact:
    kw.setdefault("subject", "user")
    kw.setdefault("predicate", "likes")
    return Fact(statement=statement, **kw)


def vec_record(cx: Cortex, mid: MemoryId) -> VectorRecord | None:
    """The ``vec/`` record of ``mid`` (checksum checked), or None."""
    with cx._kv.read() as txn:
        row = row_of(txn, mid)  # format 21: vec/ by the memory's row
        raw = None if row is None else txn.get(vec_key(row))
        if raw is None or row is None:
            return None
        rec: VectorRecord = decode_trusted(VECTOR_RECORD, vec_key(row), raw)
        return rec


def vec_ids(cx: Cortex) -> set[MemoryId]:
    with cx._kv.read() as txn:
        out = {id_at(txn, k[len(VEC) :]) for k in txn.keys(VEC)}
        return {m for m in out if m is not None}


def vectors_meta(cx: Cortex) -> VectorsMeta | None:
    with cx._kv.read() as txn:
        raw = txn.get(meta_key("vectors"))
        if raw is None:
            return None
        meta: VectorsMeta = decode_trusted(VECTORS_META, meta_key("vectors"), raw)
        return meta


def raw_vec(cx: Cortex, mid: MemoryId) -> bytes | None:
    with cx._kv.read() as txn:
        row = row_of(txn, mid)
        return None if row is None else txn.get(vec_key(row))


def put_raw_vec(cx: Cortex, mid: MemoryId, value: bytes) -> None:
    def fn(txn: Any) -> None:
        row = row_of(txn, mid)
        assert row is not None
        txn.put(vec_key(row), value)

    cx._kv.write(fn)


def sealed_vector(model_id: str, dim: int, version: int, vector: np.ndarray) -> bytes:
    rec = VectorRecord(
        model_id=model_id,
        dim=dim,
        version=version,
        vector=np.ascontiguousarray(vector, dtype="<f4").tobytes(),
    )
    return _seal(VECTOR_RECORD.encode(rec, "vector"))


def embedding_of_current(cx: Cortex, mid: MemoryId, embedder: Any = E) -> np.ndarray:
    """What the store should hold for ``mid``: the embedding of its current medium form."""
    m = cx.resolve_latest(mid)
    assert m.version.forms is not None
    out: np.ndarray = embedder.embed([m.version.forms.medium])[0]
    return out


def stored_vector(rec: VectorRecord) -> np.ndarray:
    """The record's vector widened to float32 (float16 or float32 as stored)."""
    return vectors.stored_vector(rec)


HALF: Final = 2.0**-11 + 1e-6
"""How far a stored float16 value may be from the unit float32 value it rounds: half a float16
ulp at 1 (format 13 stores vectors in float16 by default)."""


def half(v: np.ndarray) -> np.ndarray:
    """``v`` as a float16 store holds it: rounded to float16, widened to float32."""
    return np.asarray(v, dtype=np.float32).astype("<f2").astype(np.float32)


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


QUERIES = (
    "green tea in the morning",
    "black coffee",
    "mountain hiking trip",
    "reading novels",
    "user likes",
)


def snapshot(cx: Cortex, queries: tuple[str, ...] = QUERIES, limit: int = 8) -> list[Any]:
    """What vector searches answer: per query, the (uri, rounded cosine) of each hit."""
    out = []
    for q in queries:
        res = cx.find(Query(near=q, limit=limit))
        out.append([(str(h.uri), round(h.scores["vector"], 5)) for h in res.hits])
    return out


def fresh_snapshot(path: Path, queries: tuple[str, ...] = QUERIES, limit: int = 8) -> list[Any]:
    """``snapshot`` from an index rebuilt from ``vec/`` (the cache directory removed first)."""
    _remove_cache(path)
    with open_store(path, embedder=E) as cx:
        snap = snapshot(cx, queries, limit)
        assert cx.vector_state().startswith("rebuilt"), cx.vector_state()
    return snap


def _remove_cache(path: Path) -> None:
    cache = path / "vectors"
    if cache.exists():
        for p in cache.iterdir():
            p.unlink()
        cache.rmdir()


TOPICS = (
    "green tea in the morning",
    "black coffee with sugar",
    "mountain hiking trip in the alps",
    "reading long novels at night",
    "playing chess online",
    "baking sourdough bread",
    "swimming in the cold sea",
    "learning the violin",
)


def topic_fact(i: int) -> Fact:
    return fact(f"{TOPICS[i % len(TOPICS)]} number {i}")


def run_child(path: Any, ops: list[dict[str, Any]], *, embedder: bool = True) -> list[str]:
    """Run ``ops`` in a fresh interpreter on the store at ``path``; returns what it printed.

    Ops: ``{"write": statement}``, ``{"update": id, "statement": s}``, ``{"tombstone": id}``,
    ``{"search": text}`` (loads the sidecar, so the child saves it on close).
    """
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); from tests import vsupport; "
        "vsupport.child_main()"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", code, str(path), json.dumps(ops), "1" if embedder else "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def child_main() -> None:
    path, ops_json, with_embedder = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
    kw: dict[str, Any] = {"embedder": E} if with_embedder else {}
    with open_store(path if path.startswith("postgres") else Path(path), **kw) as cx:
        for op in json.loads(ops_json):
            if "write" in op:
                print(cx.write(fact(op["write"])).id)
            elif "update" in op:
                print(cx.update(op["update"], fact(op["statement"])).id)
            elif "tombstone" in op:
                cx.tombstone(op["tombstone"], "child")
                print(op["tombstone"])
            elif "search" in op:
                res = cx.find(Query(near=op["search"], limit=3))
                print(len(res.hits))
        sys.stdout.flush()


def mixed_types(texts: Iterable[str]) -> list[Any]:
    """One memory a text, in turn an Event, a Preference and a Fact (type-filter tests)."""
    when = datetime(2026, 11, 1, tzinfo=UTC)
    out: list[Any] = []
    for i, text in enumerate(texts):
        if i % 3 == 0:
            out.append(Event(kind="note", summary=text, occurred_at=when))
        elif i % 3 == 1:
            out.append(Preference(topic=text, polarity="prefer"))
        else:
            out.append(fact(text))
    return out
