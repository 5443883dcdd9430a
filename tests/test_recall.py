"""The recall tier of ``context(..., query=...)`` with an embedder (issue 5 item 6): hybrid hits
for the query, deduplicated against the other tiers, inside the same budget."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cortex import Cortex, FrameRef, Identity, MemoryId, Query, Reader

from .qsupport import trace
from .vsupport import E, fact, open_store

A = FrameRef(verb="find", obj_kind="service", obj_ref="svc://a")  # type: ignore[arg-type]


@pytest.fixture
def cx(tmp_path: Path) -> Iterator[Cortex]:
    with open_store(tmp_path / "store", embedder=E) as store:
        yield store


@pytest.fixture
def scene(cx: Cortex) -> dict[str, MemoryId]:
    n = {
        "pinned": cx.write(Identity(name="green tea lover")).id,
        "framed": cx.write(fact("green tea at the service"), frames=[A]).id,
        "loose": cx.write(fact("green tea every morning")).id,
        "vector_only": cx.write(fact("greenish teapots")).id,  # no lexical match for the query
        "public": cx.write(fact("green tea in public"), visibility="actor_public").id,
    }
    for i in range(8):
        n[f"other{i}"] = cx.write(fact(f"mountain hiking trip {i}")).id
    return n


def _ids(hits: list) -> list[MemoryId]:  # type: ignore[type-arg]
    return [h.memory.id for h in hits]


def test_recall_is_hybrid_and_deduplicated_against_the_other_tiers(
    cx: Cortex, scene: dict[str, MemoryId]
) -> None:
    b = cx.context("find", ["svc://a"], query="green tea", recall_limit=6)
    assert _ids(b.tier("pinned")) == [scene["pinned"]]
    assert _ids(b.tier("frame")) == [scene["framed"]]
    recall = b.tier("recall")
    ids = _ids(recall)
    assert scene["pinned"] not in ids and scene["framed"] not in ids
    assert len(ids) == len(set(ids))
    assert scene["loose"] in ids and scene["vector_only"] in ids
    assert all({"vector", "fused"} <= set(h.ranks) for h in recall)
    assert "lexical" not in next(h for h in recall if h.memory.id == scene["vector_only"]).ranks
    # the tier is the hybrid find for the query, less what the earlier tiers hold
    found = cx.find(Query(text="green tea", limit=6, form="medium"))
    assert all("fused" in h.ranks for h in found.hits)
    assert ids == [m for m in _ids(list(found.hits)) if m not in (scene["pinned"], scene["framed"])]
    assert len(ids) <= 6
    assert b.tokens <= b.budget and not b.dropped
    assert [h.tier for h in b.hits] == sorted(
        (h.tier for h in b.hits), key=("pinned", "outcomes", "frame", "recall").index
    )


def test_recall_shares_the_budget(cx: Cortex, scene: dict[str, MemoryId]) -> None:
    full = cx.context("find", ["svc://a"], query="green tea", recall_limit=10)
    assert not full.dropped and full.tier("recall")
    budget = full.tokens - 1
    small = cx.context(
        "find", ["svc://a"], budget_tokens=budget, query="green tea", recall_limit=10
    )
    assert small.tokens <= budget and small.budget == budget
    assert small.dropped
    kept = {h.memory.uri for h in small.hits}
    assert kept | set(small.dropped) == {h.memory.uri for h in full.hits}
    assert not kept & set(small.dropped)
    # what goes first is the lowest salience, and the pinned memory (floored) stays
    assert scene["pinned"] in _ids(list(small.hits))
    lowest = min(full.hits, key=lambda h: (h.salience, -int.from_bytes(h.memory.id.bytes, "big")))
    assert lowest.memory.uri in small.dropped
    tiny = cx.context("find", ["svc://a"], budget_tokens=1, query="green tea")
    assert len(tiny.hits) == 1  # at least one is kept


def test_recall_respects_the_reader(cx: Cortex, scene: dict[str, MemoryId]) -> None:
    b = cx.context("find", ["svc://a"], query="green tea", reader=Reader(actor="eve"))
    assert _ids(b.hits) == [scene["public"]]
    assert b.tier("recall")[0].memory.id == scene["public"]


def test_recall_is_a_pure_read_and_absent_without_a_query(
    cx: Cortex, scene: dict[str, MemoryId]
) -> None:
    cx.context("find", ["svc://a"], query="green tea")  # loads the sidecar first
    before = trace(cx)
    cx.context("find", ["svc://a"], query="green tea")
    assert trace(cx) == before
    assert cx.context("find", ["svc://a"]).tier("recall") == []


def test_recall_without_an_embedder_is_lexical(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with open_store(path, embedder=E) as cx:
        vec_only = cx.write(fact("greenish teapots")).id
        lex = cx.write(fact("green tea every morning")).id
    with open_store(path) as cx:
        hits = cx.context("find", ["svc://a"], query="green tea").tier("recall")
        assert _ids(hits) == [lex]
        assert vec_only not in _ids(hits)
