"""Vector and hybrid find (issue 5 items 3 and 4): ``near`` / ``near_vector`` ranked by cosine,
filters by over-fetching, ``text`` fused with the vector list by RRF (k=60) and blended with
salience; without an embedder ``text`` is lexical only."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cortex import Cortex, Eq, Event, Fusion, MemoryId, Query, ValidationError
from cortex.query.language import fuse

from .vsupport import DIM, E, fact, open_store, stored_vector, topic_fact, vec_record


@pytest.fixture
def cx(store_path: Any) -> Iterator[Cortex]:
    with open_store(store_path, embedder=E) as store:
        yield store


def _by_hand(
    cx: Cortex, query_vec: np.ndarray, ids: list[MemoryId]
) -> list[tuple[MemoryId, float]]:
    """Exact cosine ranking of ``ids`` against ``query_vec``, ties by id ascending."""
    q = query_vec / np.linalg.norm(query_vec)
    scored = []
    for mid in ids:
        rec = vec_record(cx, mid)  # the stored vector (float16), as the index holds it
        assert rec is not None
        v = stored_vector(rec)
        scored.append((mid, float(q @ (v / np.linalg.norm(v)))))
    scored.sort(key=lambda p: (-round(p[1], 6), p[0].bytes))
    return scored


def _same_ranking(res: Any, want: list[tuple[MemoryId, float]]) -> None:
    """The hits are the best of ``want`` in order (ids of near-equal cosines may swap)."""
    got = [(h.memory.id, h.scores["vector"]) for h in res.hits]
    by_hand = dict(want)
    for (m, a), (_, b) in zip(got, want, strict=False):
        assert a == pytest.approx(b, abs=1e-5)  # the i-th best cosine
        assert by_hand[m] == pytest.approx(a, abs=1e-5)  # and it is this memory's
    assert len({m for m, _ in got}) == len(got)


# -- near / near_vector ------------------------------------------------------------------------


def test_near_ranks_by_cosine(cx: Cortex) -> None:
    ids = [u.id for u in cx.write_many([topic_fact(i) for i in range(20)])]
    res = cx.find(Query(near="green tea in the morning", limit=7))
    assert len(res.hits) == 7
    _same_ranking(res, _by_hand(cx, E.embed(["green tea in the morning"])[0], ids))
    for i, h in enumerate(res.hits, start=1):
        assert h.ranks == {"vector": i}
        assert set(h.scores) == {"vector"}
        assert h.score == h.scores["vector"]  # one list: the cosine itself, not blended
    assert res.plan.startswith("vector index")


def test_near_vector_equals_near_and_is_scaled_to_unit(cx: Cortex) -> None:
    cx.write_many([topic_fact(i) for i in range(12)])
    v = E.embed(["baking sourdough bread"])[0]
    by_text = cx.find(Query(near="baking sourdough bread", limit=5))
    by_vec = cx.find(Query(near_vector=v, limit=5))
    by_big = cx.find(Query(near_vector=(7.5 * v).tolist(), limit=5))
    assert by_text.uris == by_vec.uris == by_big.uris
    for a, b in zip(by_vec.hits, by_big.hits, strict=True):
        assert a.scores["vector"] == pytest.approx(b.scores["vector"], abs=1e-6)


@pytest.mark.parametrize("shape", [(DIM - 1,), (DIM + 1,), (1, DIM), (2, DIM), ()])
def test_near_vector_of_the_wrong_shape_is_rejected(cx: Cortex, shape: tuple[int, ...]) -> None:
    cx.write(fact("tea"))
    with pytest.raises(ValidationError) as info:
        cx.find(Query(near_vector=np.ones(shape, dtype=np.float32), limit=3))
    assert info.value.field == "near_vector"
    assert str(DIM) in str(info.value)


@pytest.mark.parametrize("bad", ["nan", "zero"])
def test_near_vector_nan_or_zero_names_near_vector(cx: Cortex, bad: str) -> None:
    cx.write(fact("tea"))
    v = np.full(DIM, np.nan) if bad == "nan" else np.zeros(DIM)
    with pytest.raises(ValidationError) as info:
        cx.find(Query(near_vector=v, limit=3))
    assert info.value.field == "near_vector"


@pytest.mark.parametrize("bad", ["tea", ["a"] * DIM, {"a": 1}])
def test_near_vector_non_numeric_is_a_validation_error(cx: Cortex, bad: Any) -> None:
    cx.write(fact("tea"))
    with pytest.raises(ValidationError) as info:
        cx.find(Query(near_vector=bad, limit=3))
    assert info.value.field == "near_vector"


def test_near_without_an_embedder_is_refused(place: Any) -> None:
    with open_store(place("s")) as cx:
        cx.write(fact("tea"))
        for q in (Query(near="tea", limit=1), Query(near_vector=[1.0] * DIM, limit=1)):
            with pytest.raises(ValidationError) as info:
                cx.find(q)
            assert info.value.field == "near" and "embedder" in str(info.value)


def test_near_skips_tombstoned_and_respects_as_of_visibility(cx: Cortex) -> None:
    a = cx.write(fact("green tea in the morning"))
    b = cx.write(fact("green tea in the evening"))
    cx.tombstone(a, "x")
    res = cx.find(Query(near="green tea in the morning", limit=5))
    assert a not in res.uris and b in res.uris


# -- filters by over-fetching ------------------------------------------------------------------


@pytest.fixture
def crowded(cx: Cortex) -> dict[str, list[MemoryId]]:
    """100 tea facts near the query, and 6 of each filtered kind far from it."""
    near = cx.write_many([fact(f"green tea in the morning cup {i}") for i in range(100)])
    tagged = [cx.write(fact(f"quantum lattice {i}"), tags=["rare"]).id for i in range(6)]
    zed = [cx.write(fact(f"volcanic basalt {i}", subject="zed")).id for i in range(6)]
    events = [cx.write(Event(kind=f"harbour ferry {i}")).id for i in range(6)]
    everything = cx.find(Query(near="green tea in the morning", limit=1000))
    order = [h.memory.id for h in everything]
    assert len(order) == 118
    for group in (tagged, zed, events):  # the precondition: all far past the first fetch (32)
        assert min(order.index(m) for m in group) >= 100
    return {"near": [u.id for u in near], "tagged": tagged, "zed": zed, "events": events}


@pytest.mark.parametrize(
    ("group", "query"),
    [
        ("tagged", {"tags": ("rare",)}),
        ("zed", {"where": Eq("data.subject", "zed")}),
        ("events", {"types": ("Event",)}),
    ],
)
def test_filters_narrow_a_vector_query_and_still_fill_the_limit(
    cx: Cortex, crowded: dict[str, list[MemoryId]], group: str, query: dict[str, Any]
) -> None:
    q = E.embed(["green tea in the morning"])[0]
    res = cx.find(Query(near="green tea in the morning", limit=5, **query))
    assert len(res.hits) == 5
    _same_ranking(res, _by_hand(cx, q, crowded[group]))
    res = cx.find(Query(near_vector=q, limit=50, **query))
    assert sorted(h.memory.id for h in res.hits) == sorted(crowded[group])


def test_filters_narrow_a_hybrid_query_and_still_fill_the_limit(
    cx: Cortex, crowded: dict[str, list[MemoryId]]
) -> None:
    res = cx.find(Query(text="green tea morning", limit=4, tags=("rare",)))
    assert len(res.hits) == 4
    assert {h.memory.id for h in res.hits} <= set(crowded["tagged"])
    for h in res.hits:  # only the vector list reaches them
        assert set(h.ranks) == {"vector", "fused"}


def test_offset_pages_through_the_vector_ranking(
    cx: Cortex, crowded: dict[str, list[MemoryId]]
) -> None:
    full = cx.find(Query(near="quantum lattice", limit=60)).uris
    page = cx.find(Query(near="quantum lattice", limit=20, offset=40)).uris
    assert page == full[40:60]


# -- hybrid: convex fusion and RRF (k=60) by hand -----------------------------------------

TINY = (
    "green tea every morning",
    "green tea",
    "black coffee",
    "tea ceremony in kyoto",
    "greenish teapots",  # no lexical match for "green tea" (stems greenish, teapot); close
    # by character trigrams
    "mountain hiking",
)


def _tiny(path: Path, **kw: Any) -> list[MemoryId]:
    with open_store(path, embedder=E) as cx:
        return [cx.write(fact(t)).id for t in TINY]


def _lists(
    path: Path, text: str
) -> tuple[list[tuple[MemoryId, float]], list[tuple[MemoryId, float]]]:
    """The lexical list (from a handle without an embedder) and the vector list by hand."""
    with open_store(path) as cx:
        lex = cx.find(Query(text=text, limit=100))
        assert all(set(h.ranks) == {"lexical"} for h in lex.hits)  # lexical only
        assert all(h.score == h.scores["lexical"] for h in lex.hits)
        lexical = [(h.memory.id, h.scores["lexical"]) for h in lex.hits]
        ids = [m for m, _ in _ids_of(cx)]
        vector = _by_hand(cx, E.embed([text])[0], ids)
    return lexical, vector


def _ids_of(cx: Cortex) -> list[tuple[MemoryId, int]]:
    res = cx.find(Query(types=("Fact",), limit=1000))
    return [(h.memory.id, h.memory.version.version) for h in res.hits]


def _fused_by_hand(
    lexical: list[tuple[MemoryId, float]], vector: list[tuple[MemoryId, float]], method: str
) -> dict[MemoryId, float]:
    """The fused score of every memory, in [0, 1], computed from the two lists by hand."""
    if method == "rrf":  # sum of 1 / (60 + rank), over the best possible (rank 1 in both)
        lrank = {m: i for i, (m, _) in enumerate(lexical, start=1)}
        vrank = {m: i for i, (m, _) in enumerate(vector, start=1)}
        raw = {
            m: (1 / (60 + lrank[m]) if m in lrank else 0.0) + 1 / (60 + v) for m, v in vrank.items()
        }
        return {m: s / (2 / 61) for m, s in raw.items()}

    # convex: each list min-max normalised over what it returned, weights 1/2 each
    def norm(xs: list[tuple[MemoryId, float]]) -> dict[MemoryId, float]:
        lo, hi = min(s for _, s in xs), max(s for _, s in xs)
        return {m: (s - lo) / (hi - lo) for m, s in xs}

    ln, vn = norm(lexical), norm(vector)
    return {m: 0.5 * ln.get(m, 0.0) + 0.5 * vn[m] for m in vn}


@pytest.mark.parametrize("method", ["convex", "rrf"])
@pytest.mark.parametrize("blend", [0.0, 0.2, 0.5])
def test_hybrid_fuses_and_blends_salience(place: Any, blend: float, method: str) -> None:
    path = place("s")
    _tiny(path)
    text = "green tea"
    lexical, vector = _lists(path, text)
    assert len(lexical) == 3 and len(vector) == len(TINY)
    lrank = {m: i for i, (m, _) in enumerate(lexical, start=1)}
    vrank = {m: i for i, (m, _) in enumerate(vector, start=1)}
    fused = _fused_by_hand(lexical, vector, method)
    with open_store(path, embedder=E, salience_blend=blend, fusion=method) as cx:
        res = cx.find(Query(text=text, limit=10))
        assert len(res.hits) == len(TINY)
        for h in res.hits:
            m = h.memory.id
            assert h.ranks.get("lexical") == lrank.get(m)
            assert h.ranks["vector"] == vrank[m]
            # the vector list's cosines are float32 in the store, float64 by hand
            assert h.scores["fused"] == pytest.approx(fused[m], abs=1e-5)
            assert h.scores["vector"] == pytest.approx(dict(vector)[m], abs=1e-5)
            if m in lrank:
                assert h.scores["lexical"] == pytest.approx(dict(lexical)[m], rel=1e-9)
            # relevance: the fused score (in [0, 1]) blended with salience
            want = (1 - blend) * h.scores["fused"] + blend * h.salience
            assert h.score == pytest.approx(want, rel=1e-9, abs=1e-12)
        assert [h.ranks["fused"] for h in res.hits] == list(range(1, len(TINY) + 1))
        assert [h.score for h in res.hits] == sorted((h.score for h in res.hits), reverse=True)
        if blend == 0.0:
            want_order = sorted(fused, key=lambda m: (-fused[m], m.bytes))
            assert [h.memory.id for h in res.hits] == want_order
        # the ``fuse`` helper does the same arithmetic
        helper = {
            m: s for m, s, _, _ in fuse({"lexical": lexical, "vector": vector}, Fusion(method))
        }
        assert helper == pytest.approx(fused, rel=1e-12)


def test_hybrid_brings_in_what_only_the_vector_list_finds(place: Any) -> None:
    path = place("s")
    ids = _tiny(path)
    with open_store(path) as cx:
        assert ids[4] not in [h.memory.id for h in cx.find(Query(text="green tea", limit=10))]
    with open_store(path, embedder=E) as cx:
        res = cx.find(Query(text="green tea", limit=10))
        hit = next(h for h in res.hits if h.memory.id == ids[4])
        assert "lexical" not in hit.ranks and set(hit.ranks) == {"vector", "fused"}
        assert set(hit.scores) == {"vector", "fused"}


def test_rrf_by_hand_on_two_lists() -> None:
    a, b, c = (MemoryId(bytes([i]) * 16) for i in (1, 2, 3))
    rrf = Fusion("rrf")
    out = fuse({"lexical": [(a, 9.0), (b, 5.0)], "vector": [(c, 0.9), (b, 0.8), (a, 0.1)]}, rrf)
    best = 2 / 61
    want = {a: (1 / 61 + 1 / 63) / best, b: (1 / 62 + 1 / 62) / best, c: (1 / 61) / best}
    assert [m for m, *_ in out] == [a, b, c]  # 1/61 + 1/63 > 2/62 > 1/61
    assert want[a] > want[b] > want[c]
    for m, s, *_ in out:
        assert s == pytest.approx(want[m], rel=1e-15)
    assert out[1][2] == {"lexical": 2, "vector": 2} and out[1][3] == {"lexical": 5.0, "vector": 0.8}
    assert out[2][2] == {"vector": 1}
    # ties by id ascending
    tie = fuse({"lexical": [(b, 1.0)], "vector": [(a, 1.0)]}, rrf)
    assert [m for m, *_ in tie] == [a, b]


def test_convex_fusion_by_hand_on_two_lists() -> None:
    a, b, c, d = (MemoryId(bytes([i]) * 16) for i in (1, 2, 3, 4))
    lists = {
        "lexical": [(a, 9.0), (b, 5.0), (d, 1.0)],  # normalised: a 1, b 0.5, d 0
        "vector": [(c, 0.9), (b, 0.8), (a, 0.4)],  # normalised: c 1, b 0.8, a 0
    }
    out = fuse(lists)  # the default: convex, equal weights
    want = {a: 0.5, b: 0.5 * 0.5 + 0.5 * 0.8, c: 0.5, d: 0.0}
    assert [m for m, *_ in out] == [b, a, c, d]  # 0.65, then the 0.5 tie by id, then 0
    for m, s, *_ in out:
        assert s == pytest.approx(want[m], abs=1e-12)
    assert out[0][2] == {"lexical": 2, "vector": 2} and out[0][3] == {"lexical": 5.0, "vector": 0.8}
    # the weight moves the balance: lexical 0.8 puts a (lexical best) first
    out = fuse(lists, Fusion(lexical_weight=0.8))
    assert [m for m, *_ in out][:2] == [a, b]
    assert dict((m, s) for m, s, *_ in out)[a] == pytest.approx(0.8)
    # a list whose scores are all equal gives each of its results 1 (times its weight)
    flat = fuse({"lexical": [(a, 2.0), (b, 2.0)], "vector": [(b, 0.3)]})
    assert [(m, s) for m, s, *_ in flat] == [(b, pytest.approx(1.0)), (a, pytest.approx(0.5))]
    # one list alone still scores in [0, 1]
    assert [s for _, s, *_ in fuse({"vector": [(a, 0.9), (b, 0.1)]})] == [1.0, 0.0]


def test_fusion_is_validated(place: Any) -> None:
    for bad in ("borda", 3, None):
        with pytest.raises(ValidationError) as info:
            open_store(place("s"), embedder=E, fusion=bad)
        assert info.value.field == "fusion"
    for kw in ({"lexical_weight": 1.5}, {"lexical_weight": "x"}, {"k": 0}, {"method": "x"}):
        with pytest.raises(ValidationError, match=r"method|weight|k must"):
            Fusion(**kw)  # type: ignore[arg-type]
    assert Fusion.coerce("rrf") == Fusion(method="rrf")


def test_salience_blend_is_validated(place: Any) -> None:
    for bad in (-0.1, 1.5, "x"):
        with pytest.raises(ValidationError) as info:
            open_store(place("s"), embedder=E, salience_blend=bad)
        assert info.value.field == "salience_blend"


def test_text_without_an_embedder_is_lexical_only(place: Any) -> None:
    path = place("s")
    _tiny(path)  # the store holds vectors, but this handle has no embedder
    with open_store(path) as cx:
        res = cx.find(Query(text="green tea", limit=10))
        assert len(res.hits) == 3
        for i, h in enumerate(res.hits, start=1):
            assert h.ranks == {"lexical": i} and set(h.scores) == {"lexical"}
        assert cx.vector_state() == "no embedder"


def test_text_and_near_together_rank_the_vector_list_by_near(place: Any) -> None:
    path = place("s")
    ids = _tiny(path)
    with open_store(path, embedder=E) as cx:
        res = cx.find(Query(text="green tea", near="mountain hiking", limit=10))
        by_vec = {h.memory.id: h.ranks["vector"] for h in res.hits}
        assert by_vec[ids[5]] == 1  # "mountain hiking" leads the vector list
        lexical = {h.memory.id: h.ranks.get("lexical") for h in res.hits}
        assert lexical[ids[5]] is None and lexical[ids[1]] is not None


def test_depth_caps_what_each_list_contributes() -> None:
    ids = [MemoryId(bytes([i]) * 16) for i in range(1, 41)]
    lexical = [(m, 40.0 - i) for i, m in enumerate(ids)]  # 40 results, scores 40 .. 1
    vector = [(m, 1.0 - i / 100) for i, m in enumerate(reversed(ids))]
    for method in ("convex", "rrf"):
        f = Fusion(method, depth=8)  # type: ignore[arg-type]
        deep = {m: s for m, s, *_ in fuse({"lexical": lexical, "vector": vector}, f)}
        shallow = {m: s for m, s, *_ in fuse({"lexical": lexical[:8], "vector": vector[:8]}, f)}
        # the first 8 of each list score the same however deep the lists go; the rest get 0
        assert {m: deep[m] for m in shallow} == pytest.approx(shallow)
        assert all(deep[m] == 0.0 for m in deep if m not in shallow)
    # convex: the first of a list gets 1, its depth-th 0
    out = {m: s for m, s, *_ in fuse({"lexical": lexical}, Fusion(depth=8))}
    assert out[ids[0]] == 1.0 and out[ids[7]] == 0.0 and out[ids[3]] == pytest.approx(4 / 7)


def test_pages_of_a_hybrid_query_agree(place: Any) -> None:
    rng = random.Random(7)
    words = ["green", "tea", "coffee", "kyoto", "hiking", "morning", "garden", "river", "cup"]
    with open_store(place("s"), embedder=E) as cx:
        for i in range(150):
            text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 6)))
            cx.write(fact(f"{text} {i}"), tags=["third"] if i % 3 == 0 else [])
        query = "green tea in the morning"
        first = cx.find(Query(text=query, limit=30)).uris
        pages = [
            u for off in (0, 10, 20) for u in cx.find(Query(text=query, limit=10, offset=off)).uris
        ]
        assert pages == first
        assert cx.find(Query(text=query, limit=100)).uris[:30] == first
        # a filter that makes the planner fetch deeper does not reorder what passes it
        everything = cx.find(Query(text=query, limit=150)).hits
        passing = [h.memory.uri for h in everything if "third" in h.memory.head.tags]
        assert cx.find(Query(text=query, tags=["third"], limit=8)).uris == passing[:8]


@pytest.mark.parametrize("method", ["convex", "rrf"])
def test_a_depth_beyond_the_fetch_is_fetched(place: Any, method: str) -> None:
    # each list counts its first ``depth`` (§1.8): a small limit fetches at least that deep,
    # so its hits and scores are those of a larger limit's first results
    rng = random.Random(11)
    words = ["green", "tea", "coffee", "kyoto", "hiking", "morning", "garden", "river", "cup"]
    fusion = Fusion(method, depth=64)  # type: ignore[arg-type]
    with open_store(place("s"), embedder=E, fusion=fusion, salience_blend=0.0) as cx:
        for i in range(150):
            text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 6)))
            cx.write(fact(f"{text} {i}"))
        query = "green tea in the morning"
        deep = cx.find(Query(text=query, limit=60)).hits
        for limit in (1, 5, 10):
            hits = cx.find(Query(text=query, limit=limit)).hits
            assert [h.memory.id for h in hits] == [h.memory.id for h in deep[:limit]]
            for h, d in zip(hits, deep, strict=False):
                assert h.scores["fused"] == pytest.approx(d.scores["fused"], abs=1e-12)
