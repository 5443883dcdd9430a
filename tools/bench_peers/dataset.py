"""The one synthetic workload every system in the benchmark suite stores and queries.

Deterministic for a given size and seed: record ``i`` has one of the 9 memory types, 1–3 of
200 tags, a text of 10–40 Zipfian pseudo-words, and a 384-d embedding-like vector (a rank-32
signal plus 0.3 Gaussian noise, unit length). Vectors are precomputed, so no embedder is
measured. Queries (filters, texts, vectors) come from a separate seed, and the exact top-10 by
inner product is the ground truth for recall@10.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

DIM = 384
RANK = 32
NOISE = 0.3
VOCAB = 5000
TYPES = (
    "Identity",
    "Fact",
    "Preference",
    "Belief",
    "Event",
    "Goal",
    "Constraint",
    "Capability",
    "Pattern",
)
TAGS = tuple(f"tag-{i}" for i in range(200))
_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "so", "ta", "vi", "ze", "po", "da", "fu", "gi", "he")


def _pseudo_words(n: int, rng: np.random.Generator) -> list[str]:
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < n:
        k = int(rng.integers(2, 5))
        w = "".join(_SYLLABLES[int(j)] for j in rng.integers(0, len(_SYLLABLES), k))
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


def record_fields(type_: str, text: str, i: int) -> dict[str, Any]:
    """The typed fields of record ``i``: the text goes in the type's main text field."""
    if type_ == "Identity":
        return {"name": text}
    if type_ == "Fact":
        return {"statement": text, "subject": f"s{i % 997}", "predicate": "says"}
    if type_ == "Preference":
        return {"topic": text, "polarity": "prefer"}
    if type_ == "Belief":
        return {"statement": text, "stance": "believe", "confidence": 0.7}
    if type_ == "Event":
        return {"kind": "interaction", "outcome": "success", "summary": text}
    if type_ == "Goal":
        return {"statement": text, "status": "active"}
    if type_ == "Constraint":
        return {"statement": text, "polarity": "do", "strength": "soft", "source": "learned"}
    if type_ == "Capability":
        return {"subject": "agent", "capability": text}
    return {"statement": text, "coverage": i % 50}


@dataclass
class Dataset:
    """``n`` records and the query workload over them."""

    n: int
    types: list[str]
    tags: list[list[str]]
    texts: list[str]
    importance: list[int]
    vectors: np.ndarray  # (n, DIM) float32, unit rows
    # queries
    filters: list[tuple[str, str]] = field(default_factory=list)
    text_queries: list[str] = field(default_factory=list)
    query_vectors: np.ndarray = field(default_factory=lambda: np.zeros((0, DIM), np.float32))
    vector_type_filters: list[str] = field(default_factory=list)
    get_ids: list[int] = field(default_factory=list)
    extra: list[int] = field(default_factory=list)  # record numbers for single durable writes

    def record(self, i: int) -> dict[str, Any]:
        """Record ``i`` as the JSON-able dict the peers store."""
        t = self.types[i]
        return {
            "n": i,
            "type": t,
            "tags": self.tags[i],
            "importance": self.importance[i],
            "data": record_fields(t, self.texts[i], i),
        }

    def truth(self, k: int = 10, type_filter: bool = False) -> list[list[int]]:
        """Exact top-``k`` record numbers for each query vector (optionally type-filtered)."""
        out: list[list[int]] = []
        types = np.array([TYPES.index(t) for t in self.types[: self.n]])
        for q, (j, qv) in zip(self.vector_type_filters, enumerate(self.query_vectors), strict=True):
            del j
            scores = self.vectors[: self.n] @ qv
            if type_filter:
                scores = np.where(types == TYPES.index(q), scores, -np.inf)
            top = np.argpartition(-scores, k)[:k]
            out.append([int(x) for x in top[np.argsort(-scores[top])]])
        return out


def _vectors(n: int, basis: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    out = np.empty((n, DIM), np.float32)
    for s in range(0, n, 50_000):
        m = min(50_000, n - s)
        z = rng.standard_normal((m, RANK), dtype=np.float32)
        v = z @ basis + NOISE * rng.standard_normal((m, DIM), dtype=np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        out[s : s + m] = v
    return out


def make(
    n: int,
    *,
    seed: int = 7,
    n_extra: int = 1000,
    n_queries: int = 200,
    n_vector_queries: int = 100,
) -> Dataset:
    """Build the data set of ``n`` records plus ``n_extra`` more for the single-write test."""
    rng = np.random.default_rng(seed)
    total = n + n_extra
    vocab = _pseudo_words(VOCAB, rng)
    ranks = np.arange(1, VOCAB + 1, dtype=np.float64)
    p = 1.0 / ranks**1.07
    p /= p.sum()
    lengths = rng.integers(10, 41, total)
    word_ids = rng.choice(VOCAB, size=int(lengths.sum()), p=p)
    texts: list[str] = []
    at = 0
    for ln in lengths:
        texts.append(" ".join(vocab[w] for w in word_ids[at : at + ln]))
        at += ln
    type_ids = rng.integers(0, len(TYPES), total)
    types = [TYPES[t] for t in type_ids]
    ntags = rng.integers(1, 4, total)
    tag_ids = rng.integers(0, len(TAGS), (total, 3))
    tags = []
    for i in range(total):
        chosen = list(dict.fromkeys(int(t) for t in tag_ids[i, : ntags[i]]))
        tags.append([TAGS[t] for t in chosen])
    importance = [int(x) for x in rng.integers(0, 11, total)]
    basis = rng.standard_normal((RANK, DIM), dtype=np.float32) / np.sqrt(RANK)
    vectors = _vectors(total, basis, rng)

    ds = Dataset(n, types, tags, texts, importance, vectors)
    qrng = np.random.default_rng(seed + 1)
    # filtered find: a type and a tag that one stored record has (so most queries match)
    for i in qrng.integers(0, n, n_queries):
        ds.filters.append((types[i], tags[i][int(qrng.integers(0, len(tags[i])))]))
    # text: 2–3 words of a stored record, skipping the 30 most common words
    common = set(vocab[:30])
    for i in qrng.integers(0, n, n_queries):
        words = [w for w in texts[i].split() if w not in common] or texts[i].split()
        k = min(len(words), int(qrng.integers(2, 4)))
        ds.text_queries.append(" ".join(qrng.choice(words, k, replace=False).tolist()))
    ds.query_vectors = _vectors(n_vector_queries, basis, qrng)
    ds.vector_type_filters = [TYPES[int(t)] for t in qrng.integers(0, 9, n_vector_queries)]
    ds.get_ids = [int(x) for x in qrng.integers(0, n, 2000)]
    ds.extra = list(range(n, total))
    return ds
