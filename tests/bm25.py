"""A plain, unpruned BM25 over term lists: the reference the lexical index is checked against."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

from cortex.index.text import query_terms
from cortex.model.ids import MemoryId

K1 = 1.2
B = 0.75


def scores(docs: Mapping[MemoryId, Sequence[str]], query: str) -> dict[MemoryId, float]:
    """The BM25 score of every document holding at least one (distinct) query term."""
    n = len(docs)
    if not n:
        return {}
    avgdl = sum(len(t) for t in docs.values()) / n
    df = Counter(term for terms in docs.values() for term in set(terms))
    out: dict[MemoryId, float] = {}
    for mid, terms in docs.items():
        tf = Counter(terms)
        total, hit = 0.0, False
        for q in query_terms(query):
            if tf[q]:
                idf = math.log(1 + (n - df[q] + 0.5) / (df[q] + 0.5))
                norm = 1 - B + B * len(terms) / avgdl
                total += idf * tf[q] * (K1 + 1) / (tf[q] + K1 * norm)
                hit = True
        if hit:
            out[mid] = total
    return out


def check_ranking(
    got: Sequence[tuple[MemoryId, float]],
    reference: Mapping[MemoryId, float],
    limit: int,
) -> None:
    """``got`` is a correct top-``limit`` of ``reference`` (scores equal up to rounding)."""
    assert len(got) == min(limit, len(reference)), (got, reference)
    for mid, score in got:
        assert math.isclose(score, reference[mid], rel_tol=1e-9, abs_tol=1e-12), (mid, score)
    keys = [(-s, m.bytes) for m, s in got]
    assert keys == sorted(keys), "best first, ties by id"
    assert len({m for m, _ in got}) == len(got)
    if got:
        floor = got[-1][1]
        missing = [
            m for m, s in reference.items() if s > floor + 1e-9 and m not in {g for g, _ in got}
        ]
        assert not missing, f"better documents left out: {missing}"
