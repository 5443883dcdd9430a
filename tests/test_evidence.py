"""Episode chunks found by text (issue 13 item 2): their own BM25 index, written with the
episode, checked by verify, gone with a purge, carried by export/import, hidden from readers
who may not see the episode, and never changing how memories rank."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cortex import Cortex, Fact, Query, Reader, ValidationError, export_store, import_bundle
from cortex.index.evidence import CHUNK_POSTING
from cortex.index.text import terms

from .bm25 import scores

DOC = "\n\n".join(
    f"## Section {i}\n\n"
    + " ".join(f"Paragraph {i}.{j} talks about the {w} harbour and its boats." for j in range(6))
    for i, w in enumerate(["northern", "southern", "eastern", "western"] * 3)
)


@pytest.fixture
def cx(tmp_path: Path) -> Any:
    with Cortex.open(tmp_path / "s", actor="agent") as store:
        yield store


def test_chunks_are_found_with_their_span(cx: Cortex) -> None:
    ep = cx.ingest(DOC, source="upload", media_type="text/markdown").episode
    assert len(ep.chunks) > 3
    res = cx.find(Query(text="southern harbour", limit=5, evidence=3))
    assert res.hits == () and len(res.evidence) == 3
    assert ep.content is not None
    for rank, e in enumerate(res.evidence, start=1):
        assert e.episode == ep.id and e.rank == rank
        assert ep.content[e.span[0] : e.span[1]].decode() == e.text
        assert (e.span[0], e.span[1]) == ep.chunks[e.chunk]
        assert "southern" in e.text
    # by hand: the reference BM25 over the chunks' terms
    docs = {
        i: terms(ep.content[a:b].decode()) for i, (a, b) in enumerate(ep.chunks)
    }  # fmt: skip
    want = scores(docs, "southern harbour")  # type: ignore[arg-type]
    best = sorted(want.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    assert [e.chunk for e in res.evidence] == [i for i, _ in best]
    for e, (_, s) in zip(res.evidence, best, strict=True):
        assert e.score == pytest.approx(s, abs=1e-6)
    assert cx.verify().ok


def test_memories_rank_as_if_there_were_no_episodes(cx: Cortex) -> None:
    for i in range(8):
        cx.write(Fact(statement=f"boat {i} left the harbour", subject="b", predicate="p"))
    before = [(h.memory.id, h.score) for h in cx.find(Query(text="harbour boat", limit=5))]
    cx.ingest(DOC)
    after = cx.find(Query(text="harbour boat", limit=5, evidence=2))
    assert [(h.memory.id, h.score) for h in after.hits] == before
    assert len(after.evidence) == 2


def test_purge_takes_chunks_out_of_the_index(cx: Cortex) -> None:
    ep = cx.ingest(DOC).episode
    other = cx.ingest("the southern harbour is closed on sundays").episode
    cx.purge_episode(ep.id, "erasure")
    found = cx.find(Query(text="southern harbour", limit=5, evidence=10)).evidence
    assert {e.episode for e in found} == {other.id}
    with cx._kv.read() as txn:
        assert not any(ep.id.bytes in k for k in txn.keys(CHUNK_POSTING))
    assert cx.verify().ok


def test_export_import_rebuilds_the_index(cx: Cortex, tmp_path: Path) -> None:
    ep = cx.ingest(DOC).episode
    export_store(cx, tmp_path / "b.jsonl")
    with Cortex.open(tmp_path / "copy", actor="agent") as other:
        import_bundle(other, tmp_path / "b.jsonl")
        a = cx.find(Query(text="western boats", limit=1, evidence=4)).evidence
        b = other.find(Query(text="western boats", limit=1, evidence=4)).evidence
        assert a == b and a[0].episode == ep.id
        assert other.verify().ok


def test_other_readers_get_no_evidence_from_private_episodes(cx: Cortex) -> None:
    cx.ingest("the northern harbour, privately")
    public = cx.ingest("the northern harbour, publicly", visibility="actor_public").episode
    guest = Reader(actor="guest")
    found = cx.find(Query(text="northern harbour", limit=1, evidence=5, reader=guest)).evidence
    assert [e.episode for e in found] == [public.id]
    assert len(cx.find(Query(text="northern harbour", limit=1, evidence=5)).evidence) == 2


def test_verify_finds_a_damaged_index(cx: Cortex) -> None:
    cx.ingest(DOC)
    with cx._kv.read() as txn:
        key = next(iter(txn.keys(CHUNK_POSTING)))
    cx._kv.write(lambda txn: txn.delete(key))
    report = cx.verify()
    assert not report.ok
    assert any("chunk posting" in p.what for p in report.problems)


@pytest.mark.parametrize("kw", [{"evidence": -1}, {"evidence": 101}, {"evidence": 1.5}])
def test_bad_evidence_arguments(cx: Cortex, kw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        cx.find(Query(text="x", limit=1, **kw))
    with pytest.raises(ValidationError, match="needs text"):
        cx.find(Query(types=("Fact",), limit=1, evidence=2))


def test_an_empty_index_finds_nothing(cx: Cortex) -> None:
    assert cx.find(Query(text="anything", limit=1, evidence=3)).evidence == ()


def test_the_context_bundle_carries_evidence_within_its_budget(cx: Cortex) -> None:
    cx.ingest(DOC)
    cx.write(Fact(statement="the southern harbour opens at six", subject="h", predicate="p"))
    bundle = cx.context("find", ["knowledge:harbour"], 1500, query="southern harbour", evidence=5)
    assert bundle.evidence and bundle.tokens <= bundle.budget == 1500
    assert all("southern" in e.text for e in bundle.evidence)
    text = bundle.render()
    assert "## evidence (episode text)" in text and "bytes " in text
    small = cx.context("find", ["knowledge:harbour"], 60, query="southern harbour", evidence=5)
    assert small.tokens <= 60 and len(small.evidence) < len(bundle.evidence)
    assert cx.context("find", ["x"], query="southern harbour").evidence == ()
    with pytest.raises(ValidationError):
        cx.context("find", ["x"], evidence=2)


def test_with_an_embedder_chunks_have_vectors_and_rank_fused(tmp_path: Path) -> None:
    from cortex.index.embed import HashingEmbedder
    from cortex.index.evidence import CHUNK_VECTOR

    e = HashingEmbedder(64)
    with Cortex.open(tmp_path / "s", actor="agent", embedder=e) as cx:
        ep = cx.ingest(DOC).episode
        with cx._kv.read() as txn:
            assert len(list(txn.keys(CHUNK_VECTOR))) == len(ep.chunks)
        found = cx.find(Query(text="southern harbour boats", limit=1, evidence=3)).evidence
        assert len(found) == 3 and all("southern" in x.text for x in found)
        assert 0 < found[0].score <= 1  # a fused score, as memories' are
        assert cx.verify().ok
        cx.purge_episode(ep.id, "gone")
        with cx._kv.read() as txn:
            assert list(txn.keys(CHUNK_VECTOR)) == []
        assert cx.verify().ok
    # the same store without the embedder still finds chunks by their words
    with Cortex.open(tmp_path / "t", actor="agent") as cx:
        cx.ingest(DOC)
        assert cx.find(Query(text="southern harbour", limit=1, evidence=2)).evidence


def test_imported_episodes_get_chunk_vectors_from_the_importing_store(tmp_path: Path) -> None:
    from cortex import export_store, import_bundle
    from cortex.index.embed import HashingEmbedder
    from cortex.index.evidence import CHUNK_VECTOR

    with Cortex.open(tmp_path / "plain", actor="agent") as cx:
        ep = cx.ingest(DOC).episode
        export_store(cx, tmp_path / "b.jsonl")
    with Cortex.open(tmp_path / "e", actor="agent", embedder=HashingEmbedder(64)) as cx:
        import_bundle(cx, tmp_path / "b.jsonl")
        with cx._kv.read() as txn:
            assert len(list(txn.keys(CHUNK_VECTOR))) == len(ep.chunks)
        found = cx.find(Query(text="southern harbour boats", limit=1, evidence=3)).evidence
        assert found and 0 < found[0].score <= 1
        assert cx.verify().ok


def test_verify_names_a_stray_chunk_vector(cx: Cortex) -> None:
    from cortex.index.evidence import CHUNK_VECTOR
    from cortex.model.ids import new_id
    from cortex.storage.kv import seal

    cx.ingest(DOC)
    stray = CHUNK_VECTOR + new_id().bytes + (0).to_bytes(4, "big")
    cx._kv.write(lambda txn: txn.put(stray, seal(b"\x00" * 16)))
    assert any("vector of no chunk" in p.what for p in cx.verify().problems)
