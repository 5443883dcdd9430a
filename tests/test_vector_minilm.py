"""The store with the real model (issue 5 items 3 and 5): MiniLM vectors, semantic near search,
and dedupe of a paraphrase. Small on purpose (MiniLM embeds ~100 sentences a second)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cortex import Query, ValidationError, render
from cortex.agent.api import DEDUPE_COSINE
from cortex.index.embed import MINILM_MODEL_ID, MiniLM

from .vsupport import E, fact, open_store, vec_record, vectors_meta

SENTENCES = (
    "The cat sleeps on the sofa",
    "Stock markets fell sharply today",
    "I bake bread every weekend",
    "My kitten naps on the couch",
)


@pytest.fixture(scope="module")
def minilm() -> MiniLM:
    model = MiniLM(batch_size=8)
    model.load()
    return model


def test_minilm_store_end_to_end(tmp_path: Path, minilm: MiniLM) -> None:
    def said(s: str):  # type: ignore[no-untyped-def]
        return fact(s, predicate="said")

    paraphrase, related = "The cat is sleeping on the sofa", SENTENCES[3]
    v = minilm.embed([render(said(s)).medium for s in (SENTENCES[0], paraphrase, related)])
    assert float(v[0] @ v[1]) >= DEDUPE_COSINE + 0.03
    assert float(v[0] @ v[2]) < DEDUPE_COSINE
    path = tmp_path / "s"
    with open_store(path, embedder=minilm) as cx:
        uris = [cx.write(said(s)) for s in SENTENCES[:3]]
        # the kitten sentence is close to the cat one but below the threshold: written anew
        uris.append(cx.write(said(related), dedupe=True))
        assert uris[3] not in uris[:3]
        meta = vectors_meta(cx)
        assert meta is not None and (meta.model_id, meta.dim) == (MINILM_MODEL_ID, 384)
        assert vec_record(cx, uris[0].id).dim == 384  # type: ignore[union-attr]
        res = cx.find(Query(near="a feline resting on furniture", limit=4))
        assert set(res.uris[:2]) == {uris[0], uris[3]}  # meaning, not words
        assert cx.write(said(paraphrase), dedupe=True) == uris[0]
        assert cx.salience_state(uris[0]).confirmations == 1
        hybrid = cx.find(Query(text="kitten", limit=4))
        assert hybrid.hits[0].memory.id == uris[3].id and "fused" in hybrid.hits[0].ranks
        assert cx.verify().ok
    with pytest.raises(ValidationError) as info:
        open_store(path, embedder=E)
    assert info.value.field == "embedder" and MINILM_MODEL_ID in str(info.value)
    with open_store(path, embedder=minilm) as cx:
        assert cx.find(Query(near="a feline resting on furniture", limit=1)).uris[0] in uris
        assert cx.vector_state() == "loaded"


# The pairs that dedupe=True confirmed instead of writing before the claim guard (issue 14):
# each second text contradicts the first, yet MiniLM puts most of them above the threshold.
CONTRADICTIONS = (
    ("Sam is not allergic to peanuts", "Sam is allergic to peanuts", "sam", "sam"),
    ("I fly to Paris on Tuesday", "I fly to Paris on Monday", "user", "user"),
    ("the budget is 4000 CHF", "the budget is 400 CHF", "budget", "budget"),
    ("the meeting is at 9pm", "the meeting is at 9am", "meeting", "meeting"),
    ("Bob dislikes tea", "Bob likes tea", "bob", "bob"),
    ("Bob likes tea", "Alice likes tea", "bob", "alice"),
)


def test_minilm_dedupe_never_merges_contradicting_facts(tmp_path: Path, minilm: MiniLM) -> None:
    with open_store(tmp_path / "s", embedder=minilm, dedupe=True) as cx:
        above = 0
        for first, second, s1, s2 in CONTRADICTIONS:
            a = fact(first, subject=s1, predicate="said")
            b = fact(second, subject=s2, predicate="said")
            va, vb = minilm.embed([render(a).medium, render(b).medium])
            above += float(va @ vb) >= DEDUPE_COSINE
            u1, u2 = cx.write(a), cx.write(b)
            assert u1 != u2, (first, second)
            assert cx.resolve(u2).data == b
        assert above >= 3  # the guard, not the threshold, keeps them apart
        assert cx.verify().ok


def test_minilm_finds_episode_text_by_meaning(tmp_path: Path, minilm: MiniLM) -> None:
    doc = (
        "## Pets\n\nMy kitten naps on the couch all afternoon.\n\n"
        "## Markets\n\nStock markets fell sharply today.\n"
    )
    with open_store(tmp_path / "s", embedder=minilm) as cx:
        cx.ingest(doc + "\n\n".join(f"Filler paragraph {i} about paperwork." for i in range(60)))
        found = cx.find(Query(text="a feline resting on furniture", limit=1, evidence=2)).evidence
        assert found and "kitten" in found[0].text
