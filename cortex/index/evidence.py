"""The evidence index: episode chunks searched by BM25, beside the memories (format 7).

An episode's chunks (``specs/chunking.md``) are indexed in the episode's own write transaction,
so a committed episode is searchable at once, and leave the index when the episode is purged.
The index has the lexical index's analyzer (``cortex.index.text``: the same folding, stemming and
stop words) and scoring (BM25, k1 = 1.2, b = 0.75, ``lexical.idf``), and statistics of its own,
so chunks never change how memories rank. A hit is *evidence*: the episode, the chunk, its byte
span and text — never mistaken for a memory. ``specs/episodes.md`` §4 lists the keys.

Keys (every value sealed with its CRC, as every value of the store):

- ``cx/p/`` term ``0x00`` episode16 chunk_u32 → tf (u32);
- ``cx/d/`` episode16 chunk_u32 → dl (u32, the chunk's term count);
- ``cx/t/`` term → df (u32, how many chunks hold the term);
- ``meta/chunks`` → chunks (u64) and total dl (u64).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Final

import msgspec
import numpy as np
import numpy.typing as npt

from cortex.errors import IntegrityError
from cortex.index.lexical import K1, B, idf
from cortex.index.text import query_terms, terms
from cortex.model.ids import MemoryId
from cortex.model.records import Episode
from cortex.storage.keys import meta_key
from cortex.storage.kv import ReadTxn, WriteTxn, seal, unseal

__all__ = [
    "CHUNK_DOC",
    "CHUNK_POSTING",
    "CHUNK_STATS",
    "CHUNK_TERM",
    "CHUNK_VECTOR",
    "Evidence",
    "check",
    "index_episode",
    "put_vectors",
    "search",
    "unindex_episode",
]

CHUNK_POSTING: Final = b"cx/p/"
CHUNK_DOC: Final = b"cx/d/"
CHUNK_TERM: Final = b"cx/t/"
CHUNK_STATS: Final = meta_key("chunks")
CHUNK_VECTOR: Final = b"cv/"
"""``cv/`` episode16 chunk_u32 → the chunk's unit float32 vector (little-endian), by the
store's model (``meta/vectors``), when the episode was ingested by a handle with an embedder."""
FUSION_DEPTH: Final = 32
"""How many results of each list count in the convex fusion of lexical and vector rankings."""


class Evidence(msgspec.Struct, frozen=True, kw_only=True):
    """A chunk of an episode that matched a text search: episode evidence, not a memory.

    ``span`` is the ``[start, end)`` UTF-8 byte span of ``text`` in the episode's content.
    """

    episode: MemoryId
    chunk: int
    span: tuple[int, int]
    text: str
    score: float
    rank: int = 0


def _doc(eid: MemoryId, chunk: int) -> bytes:
    return eid.bytes + chunk.to_bytes(4, "big")


def _u32(key: bytes, raw: bytes | None) -> int:
    if raw is None:
        return 0
    payload = unseal(key, raw)
    if len(payload) != 4:
        raise IntegrityError(f"{key!r}: a count of {len(payload)} bytes, not 4")
    return int.from_bytes(payload, "big")


def _put_u32(txn: WriteTxn, key: bytes, n: int) -> None:
    if n:
        txn.put(key, seal(n.to_bytes(4, "big")))
    else:
        txn.delete(key)


def _stats(txn: ReadTxn) -> tuple[int, int]:
    raw = txn.get(CHUNK_STATS)
    if raw is None:
        return 0, 0
    payload = unseal(CHUNK_STATS, raw)
    if len(payload) != 16:
        raise IntegrityError("meta/chunks is damaged: not 16 bytes")
    return int.from_bytes(payload[:8], "big"), int.from_bytes(payload[8:], "big")


def _put_stats(txn: WriteTxn, n: int, total: int) -> None:
    txn.put(CHUNK_STATS, seal(n.to_bytes(8, "big") + total.to_bytes(8, "big")))


def _chunk_counts(ep: Episode) -> list[Counter[str]]:
    assert ep.content is not None
    return [Counter(terms(ep.content[a:b].decode("utf-8"))) for a, b in ep.chunks]


def _apply(txn: WriteTxn, ep: Episode, sign: int) -> None:
    n, total = _stats(txn)
    df: Counter[str] = Counter()
    for i, counts in enumerate(_chunk_counts(ep)):
        doc = _doc(ep.id, i)
        dl = sum(counts.values())
        if sign > 0:
            txn.put(CHUNK_DOC + doc, seal(dl.to_bytes(4, "big")))
        else:
            txn.delete(CHUNK_DOC + doc)
        n += sign
        total += sign * dl
        for term, tf in counts.items():
            key = CHUNK_POSTING + term.encode("utf-8") + b"\x00" + doc
            if sign > 0:
                txn.put(key, seal(tf.to_bytes(4, "big")))
            else:
                txn.delete(key)
            df[term] += 1
    for term, count in sorted(df.items()):
        key = CHUNK_TERM + term.encode("utf-8")
        _put_u32(txn, key, _u32(key, txn.get(key)) + sign * count)
    if n < 0 or total < 0:
        raise IntegrityError("meta/chunks would go below zero: the evidence index is damaged")
    _put_stats(txn, n, total)


def index_episode(txn: WriteTxn, ep: Episode) -> None:
    """Index every chunk of ``ep`` (a new episode with content) in ``txn``."""
    if ep.content is not None and ep.chunks:
        _apply(txn, ep, +1)


def unindex_episode(txn: WriteTxn, ep: Episode) -> None:
    """Remove ``ep``'s chunks (and their vectors) from the index, before its content goes."""
    if ep.content is not None and ep.chunks:
        _apply(txn, ep, -1)
    for key in list(txn.keys(CHUNK_VECTOR + ep.id.bytes)):
        txn.delete(key)


def put_vectors(txn: WriteTxn, ep: Episode, vectors: Sequence[bytes]) -> None:
    """Store one vector per chunk of ``ep`` (float32 little-endian, unit length)."""
    if len(vectors) != len(ep.chunks):
        raise IntegrityError(f"{len(vectors)} vectors for {len(ep.chunks)} chunks")
    for i, vec in enumerate(vectors):
        txn.put(CHUNK_VECTOR + _doc(ep.id, i), seal(vec))


def _vector_ranking(
    txn: ReadTxn, query: npt.NDArray[np.float32], n: int
) -> list[tuple[bytes, float]]:
    """The ``n`` chunks nearest ``query`` by cosine (exact: every stored chunk vector)."""
    docs: list[bytes] = []
    rows: list[bytes] = []
    width = 4 * len(query)
    for key, raw in txn.scan(CHUNK_VECTOR):
        vec = unseal(key, raw)
        if len(vec) != width:
            continue  # another model's vector (verify names it)
        docs.append(key[len(CHUNK_VECTOR) :])
        rows.append(vec)
    if not docs:
        return []
    matrix = np.frombuffer(b"".join(rows), dtype="<f4").reshape(len(docs), len(query))
    cos = matrix @ query.astype(np.float32)
    best = np.argsort(-cos, kind="stable")[:n]
    return [(docs[i], float(cos[i])) for i in best]


def search(
    txn: ReadTxn,
    query: str,
    limit: int,
    episode: Callable[[MemoryId], Episode | None],
    query_vector: npt.NDArray[np.float32] | None = None,
) -> list[Evidence]:
    """The ``limit`` best chunks for ``query``, best first, ties by episode and chunk.

    By BM25 alone, or — given the query's vector — BM25 and cosine fused as memories are
    (convex, half each, over each list's first ``FUSION_DEPTH``). ``episode(id)`` returns the
    episode a hit belongs to when the reader may see it (``None`` hides the hit).
    """
    lexical = _bm25(txn, query)
    if query_vector is not None:
        vector = _vector_ranking(txn, query_vector, max(FUSION_DEPTH, 4 * limit))
        ranked = _fuse(lexical, vector)
    else:
        ranked = lexical
    out: list[Evidence] = []
    cache: dict[bytes, Episode | None] = {}
    for doc, score in ranked:
        raw_id, chunk = doc[:16], int.from_bytes(doc[16:], "big")
        if raw_id not in cache:
            cache[raw_id] = episode(MemoryId(raw_id))
        ep = cache[raw_id]
        if ep is None or ep.content is None or chunk >= len(ep.chunks):
            continue
        a, b = ep.chunks[chunk]
        out.append(
            Evidence(
                episode=ep.id,
                chunk=chunk,
                span=(a, b),
                text=ep.content[a:b].decode("utf-8"),
                score=round(score, 9),
                rank=len(out) + 1,
            )
        )
        if len(out) >= limit:
            break
    return out


def _fuse(
    lexical: list[tuple[bytes, float]], vector: list[tuple[bytes, float]]
) -> list[tuple[bytes, float]]:
    """Convex fusion of two rankings (each best first), half each, like ``Fusion``."""
    fused: dict[bytes, float] = {}
    for items in (lexical, vector):
        counted = items[:FUSION_DEPTH]
        if not counted:
            continue
        hi, lo = counted[0][1], counted[-1][1]
        span = hi - lo
        for doc, s in counted:
            part = 0.5 * ((max(0.0, s - lo) / span) if span > 0 else 1.0)
            fused[doc] = fused.get(doc, 0.0) + part
        for doc, _ in items[FUSION_DEPTH:]:
            fused.setdefault(doc, 0.0)
    return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))


def _bm25(txn: ReadTxn, query: str) -> list[tuple[bytes, float]]:
    """Every chunk holding a query term with its BM25 score, best first, ties by key."""
    n, total = _stats(txn)
    if n == 0:
        return []
    avgdl = total / n if n else 1.0
    scores: dict[bytes, float] = {}
    for term in query_terms(query):
        tkey = CHUNK_TERM + term.encode("utf-8")
        df = _u32(tkey, txn.get(tkey))
        if df == 0:
            continue
        w = idf(n, df)
        prefix = CHUNK_POSTING + term.encode("utf-8") + b"\x00"
        for key, raw in txn.scan(prefix):
            doc = key[len(prefix) :]
            tf = _u32(key, raw)
            dl = _u32(CHUNK_DOC + doc, txn.get(CHUNK_DOC + doc))
            norm = tf + K1 * (1 - B + B * dl / avgdl) if avgdl else tf + K1
            scores[doc] = scores.get(doc, 0.0) + w * tf * (K1 + 1) / norm
    return heapq.nsmallest(len(scores), scores.items(), key=lambda kv: (-kv[1], kv[0]))


def check(txn: ReadTxn, episodes: Iterable[Episode]) -> list[tuple[str, str]]:
    """``(record, what)`` for every way the index differs from the episodes it should hold."""
    want_post: dict[bytes, int] = {}
    want_doc: dict[bytes, int] = {}
    want_df: Counter[str] = Counter()
    n = total = 0
    for ep in episodes:
        if ep.content is None:
            continue
        for i, counts in enumerate(_chunk_counts(ep)):
            doc = _doc(ep.id, i)
            dl = sum(counts.values())
            want_doc[doc] = dl
            n += 1
            total += dl
            for term, tf in counts.items():
                want_post[term.encode("utf-8") + b"\x00" + doc] = tf
                want_df[term] += 1
    problems: list[tuple[str, str]] = []

    def compare(prefix: bytes, want: dict[bytes, int], what: str) -> None:
        seen = 0
        for key, raw in txn.scan(prefix):
            rest = key[len(prefix) :]
            try:
                got = _u32(key, raw)
            except IntegrityError as exc:
                problems.append((key.hex(), str(exc)))
                continue
            if want.get(rest) != got:
                problems.append(
                    (key.hex(), f"{what}: holds {got}, the episodes say {want.get(rest)}")
                )
            seen += 1
        if seen != len(want):
            problems.append(
                (prefix.decode(), f"{what}: {seen} entries, the episodes need {len(want)}")
            )

    for key, raw in txn.scan(CHUNK_VECTOR):
        doc = key[len(CHUNK_VECTOR) :]
        if doc not in want_doc:
            problems.append((key.hex(), "a vector of no chunk of a live episode"))
            continue
        try:
            vec = unseal(key, raw)
        except IntegrityError as exc:
            problems.append((key.hex(), str(exc)))
            continue
        if not vec or len(vec) % 4:
            problems.append((key.hex(), f"a vector of {len(vec)} bytes"))
    compare(CHUNK_POSTING, want_post, "chunk posting")
    compare(CHUNK_DOC, want_doc, "chunk length")
    compare(CHUNK_TERM, {t.encode("utf-8"): c for t, c in want_df.items()}, "chunk term")
    try:
        stats = _stats(txn)
    except IntegrityError as exc:
        problems.append(("meta/chunks", str(exc)))
    else:
        if stats != (n, total) and (n or txn.get(CHUNK_STATS) is not None):
            problems.append(("meta/chunks", f"holds {stats}, the episodes say {(n, total)}"))
    return problems
