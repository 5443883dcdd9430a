"""BM25 top-k in C (``cortex._speedups.bm25_top``) against its Python definition, the loop of
``cortex.index.lexical.search_terms``: the same memories in the same order with the same scores
(equal doubles), over main blocks, pending segments (additions, updates, removals), several
blocks per term, and the pruned path that probes candidates instead of reading a list."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortex import Belief, Cortex, MemoryId, NewMemory, Stance
from cortex.index import lexical
from tests.test_segments import _needs_c, _segments

# a skewed vocabulary: a few words in most memories, many in a handful
_COMMON = ["tea", "garden", "plan", "river"]
_RARE = [f"w{i}" for i in range(60)]


def _text(rng: random.Random) -> str:
    words = rng.sample(_COMMON, rng.randint(1, 3)) + rng.sample(_RARE, rng.randint(0, 3))
    words += [rng.choice(_COMMON) for _ in range(rng.randint(0, 3))]  # term frequencies > 1
    rng.shuffle(words)
    return " ".join(words)


def _belief(text: str) -> Belief:
    return Belief(statement=text, stance=Stance.SUSPECT)


def _both(cx: Cortex, query: str, limit: int) -> tuple[Any, Any]:
    with cx._kv.read() as txn:
        old = lexical._USE_BM25
        try:
            lexical._USE_BM25 = True
            c = lexical.search(txn, query, limit=limit)
            lexical._USE_BM25 = False
            py = lexical.search(txn, query, limit=limit)
        finally:
            lexical._USE_BM25 = old
    return c, py


def _queries(rng: random.Random) -> list[str]:
    out = [" ".join(rng.sample(_COMMON + _RARE, rng.randint(1, 5))) for _ in range(60)]
    # a rare word first, then common ones: the candidates of the rare word are few, so the
    # common words' lists are probed (len(scores) * 4 < df) instead of read
    out += [f"{rng.choice(_RARE)} {' '.join(_COMMON)}" for _ in range(20)]
    return [*out, "nothing-indexed", "tea tea garden"]


def _check(cx: Cortex, rng: random.Random) -> int:
    compared = 0
    for q in _queries(rng):
        for limit in (1, 2, 5, 10, 1000):
            c, py = _both(cx, q, limit)
            assert c == py, (q, limit)
            compared += bool(py)
    return compared


def test_bm25_top_is_search_terms_over_blocks_and_segments(tmp_path: Path) -> None:
    """700 memories (the common words' postings span several blocks of 128), then single
    writes, updates and tombstones left as segments: every ranking is the Python one."""
    _needs_c()
    assert lexical._USE_BM25
    rng = random.Random(7)
    with Cortex.open(tmp_path / "s", actor="t") as cx:
        ids: list[MemoryId] = []
        for _ in range(7):
            ids += [
                u.id
                for u in cx.write_many([NewMemory(data=_belief(_text(rng))) for _ in range(100)])
            ]
        assert _check(cx, rng) > 300  # folded: main blocks only
        for _ in range(10):
            ids.append(cx.write(_belief(_text(rng))).id)
        for m in rng.sample(ids, 6):
            cx.update(m, _belief(_text(rng)))
        for m in rng.sample(ids[:700], 4):
            cx.tombstone(m, "gone")
            ids.remove(m)
        assert _segments(cx) > 0  # pending: the overlay merges in
        assert _check(cx, rng) > 300
        cx.merge_lexical()
        assert _check(cx, rng) > 300


_OP = st.one_of(
    st.tuples(st.just("write"), st.integers(0, 2**16)),
    st.tuples(st.just("write_many"), st.integers(1, 30), st.integers(0, 2**16)),
    st.tuples(st.just("update"), st.integers(0, 10**6), st.integers(0, 2**16)),
    st.tuples(st.just("tombstone"), st.integers(0, 10**6)),
    st.tuples(st.just("merge")),
)


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(_OP, min_size=1, max_size=12))
def test_bm25_top_is_search_terms_after_any_writes(
    tmp_path_factory: pytest.TempPathFactory, ops: list[Any]
) -> None:
    _needs_c()
    with Cortex.open(tmp_path_factory.mktemp("bm25") / "s", actor="t") as cx:
        live: list[MemoryId] = []
        for op in ops:
            if op[0] == "write":
                live.append(cx.write(_belief(_text(random.Random(op[1])))).id)
            elif op[0] == "write_many":
                rng = random.Random(op[2])
                items = [NewMemory(data=_belief(_text(rng))) for _ in range(op[1])]
                live += [u.id for u in cx.write_many(items)]
            elif op[0] == "merge":
                cx.merge_lexical()
            elif live:
                target = live[op[1] % len(live)]
                if op[0] == "update":
                    cx.update(target, _belief(_text(random.Random(op[2]))))
                else:
                    cx.tombstone(target, "t")
                    live.remove(target)
        _check(cx, random.Random(len(ops)))


def test_bm25_top_declines_what_it_does_not_expect() -> None:
    """None (the Python loop runs) for any argument not of the expected shapes."""
    _needs_c()
    sp = lexical._sp
    rec = (1).to_bytes(4, "big") + (1).to_bytes(4, "big") + (3).to_bytes(4, "big")
    good = [(1.5, 1.5, 1, [rec], None)]
    assert sp.bm25_top(good, 10, 1.2, 0.3, 0.3) == [((1).to_bytes(4, "big"), pytest.approx(1.5))]
    bad_plans: list[Any] = [
        [(1.5, 1.5, 1, [rec[:11]], None)],  # a record cut short
        [(1.5, 1.5, 1, [rec + rec], None)],  # docnos not ascending
        [(1.5, 1.5, 1, [rec], [(b"\x00\x00\x00\x02", b"short")])],  # a tail not 8 bytes
        [(1.5, 1.5, 1, [rec], [(b"\x00\x00\x00\x02", None), (b"\x00\x00\x00\x01", None)])],
        [(1, 1.5, 1, [rec], None)],  # an int weight
        [(1.5, 1.5, 1, (rec,), None)],  # blocks not a list
        [(1.5, 1.5, 1, [bytearray(rec)], None)],
        [(1.5, 1.5, 1, [rec])],  # four fields
        "not a list",
    ]
    for plan in bad_plans:
        assert sp.bm25_top(plan, 10, 1.2, 0.3, 0.3) is None, plan
    assert sp.bm25_top(good, 0, 1.2, 0.3, 0.3) is None
    assert sp.bm25_top(good, 10, 1, 0.3, 0.3) is None
    assert sp.bm25_top(good, 10) is None
