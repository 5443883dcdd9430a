"""MiniLM's two runtimes (numpy, the definition; onnxruntime, the fast one) and how the write
and query paths call an embedder: in batches, and a query's text once."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cortex import Fact, NewMemory, Query
from cortex.agent.extract import Context, Extracted, Extraction
from cortex.errors import CortexError, MissingDependencyError
from cortex.index.embed import MINILM_MODEL_ID, HashingEmbedder, MiniLM, embedder_for
from cortex.index.embed_onnx import OnnxEncoder, available

from .vsupport import open_store, vectors_meta

REFERENCE = Path(__file__).parent / "data" / "minilm_reference.json"

TEXTS = [
    "Ada Lovelace lives in London.",
    "where does ada live",
    "",
    "東京は日本の首都です。",
    "a somewhat longer sentence about a cat that sleeps on a mat all afternoon " * 3,
    "x " * 400,  # past the 256-token window
]


@pytest.fixture(scope="module")
def numpy_model() -> MiniLM:
    model = MiniLM(runtime="numpy")
    model.load()
    return model


@pytest.fixture(scope="module")
def onnx_model() -> MiniLM:
    model = MiniLM(runtime="onnx")
    model.load()
    return model


def test_the_dev_install_has_the_fast_runtime_and_auto_picks_it() -> None:
    assert available()
    assert MiniLM().active_runtime == "onnx"
    assert embedder_for("minilm").active_runtime == "onnx"  # type: ignore[attr-defined]
    assert embedder_for("minilm-numpy").active_runtime == "numpy"  # type: ignore[attr-defined]
    assert embedder_for("minilm-onnx").active_runtime == "onnx"  # type: ignore[attr-defined]
    for name in ("minilm", "minilm-numpy", "minilm-onnx"):
        e = embedder_for(name)
        assert (e.model_id, e.dim) == (MINILM_MODEL_ID, 384)


def test_onnx_matches_the_reference_for_every_sentence(onnx_model: MiniLM) -> None:
    cases = json.loads(REFERENCE.read_text(encoding="utf-8"))["cases"]
    got = onnx_model.embed([c["text"] for c in cases])
    for row, case in zip(got, cases, strict=True):
        ref = np.asarray(case["vector"], dtype=np.float32)
        cos = float(row @ ref / np.linalg.norm(ref))
        assert cos >= 0.999, f"{case['text'][:40]!r}: cosine {cos:.6f}"


def test_the_runtimes_agree(numpy_model: MiniLM, onnx_model: MiniLM) -> None:
    a = numpy_model.embed(TEXTS)
    b = onnx_model.embed(TEXTS)
    assert a.dtype == b.dtype == np.float32 and a.shape == b.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    cos = (a * b).sum(axis=1)
    assert float(cos.min()) >= 0.9999, cos
    # batching, padding and repeats change nothing in the onnx runtime either
    one = np.vstack([onnx_model.embed([t]) for t in TEXTS])
    assert np.allclose(one, b, atol=1e-5)
    twice = onnx_model.embed([TEXTS[0], TEXTS[1], TEXTS[0]])
    assert np.array_equal(twice[0], twice[2])
    assert onnx_model.embed([]).shape == (0, 384)


def test_onnx_embeds_from_several_threads(onnx_model: MiniLM) -> None:
    want = onnx_model.embed(TEXTS[:4])
    got: list[np.ndarray] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            for _ in range(3):
                got.append(onnx_model.embed(TEXTS[:4]))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(got) == 12
    assert all(np.allclose(g, want, atol=1e-6) for g in got)


def test_without_onnxruntime_auto_falls_back_to_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    # what a user without the embed-fast extra has: `import onnxruntime` fails
    monkeypatch.setitem(__import__("sys").modules, "onnxruntime", None)
    assert not available()
    model = MiniLM()
    assert model.active_runtime == "numpy"
    assert model.embed(["Ada Lovelace lives in London."]).shape == (1, 384)
    with pytest.raises(MissingDependencyError, match=r"cortex-store\[embed-fast\]"):
        MiniLM(runtime="onnx").load()


def test_onnxruntime_failures_are_cortex_errors(onnx_model: MiniLM) -> None:
    model = onnx_model._loaded()
    assert model.onnx is not None
    ids = np.array([[101, 10**7, 102]], dtype=np.int64)  # a token id past the vocabulary
    with pytest.raises(CortexError, match="onnxruntime failed to embed"):
        model.onnx.run(ids, np.ones(ids.shape, dtype=np.float32))
    numpy_side = MiniLM(runtime="numpy")._loaded()
    bad = [dict(layer) for layer in numpy_side.layers]
    bad[0]["qkv_w"] = bad[0]["qkv_w"][:, :100]  # not a 3 x 384 projection
    with pytest.raises(CortexError, match="MiniLM's graph") as info:
        OnnxEncoder(
            word=numpy_side.word,
            position=numpy_side.position,
            token_type=numpy_side.token_type,
            emb_ln=numpy_side.emb_ln,
            layers=bad,
            heads=12,
            eps=1e-12,
        )
    assert "runtime='numpy'" in str(info.value)


def test_vectors_of_one_runtime_serve_the_other(
    tmp_path: Path, numpy_model: MiniLM, onnx_model: MiniLM
) -> None:
    path = tmp_path / "s"
    facts = ["The cat sleeps on the sofa", "Stock markets fell sharply today", "I bake bread"]
    with open_store(path, embedder=numpy_model) as cx:
        uris = cx.write_many([Fact(statement=s, subject="u", predicate="said") for s in facts])
    with open_store(path, embedder=onnx_model) as cx:  # same model id: no re-embedding
        assert cx.reembedded is None
        meta = vectors_meta(cx)
        assert meta is not None and meta.model_id == MINILM_MODEL_ID
        hits = cx.find(Query(near="my kitten naps on the couch", limit=1)).hits
        assert [h.uri for h in hits] == [uris[0]]


# -- how the store calls its embedder ---------------------------------------------------------


class Counting(HashingEmbedder):
    """A real embedder that records every call (how many texts each)."""

    def __init__(self) -> None:
        super().__init__(64)
        self.calls: list[int] = []

    def embed(self, texts: Any) -> np.ndarray:
        self.calls.append(len(texts))
        return super().embed(texts)


class TwoFacts:
    def extract(self, content: str, context: Context) -> Extraction:
        return Extraction(
            items=tuple(
                Extracted(
                    memory=NewMemory(
                        data=Fact(statement=f"{content} ({i})", subject="u", predicate="said")
                    ),
                    quote=content,
                    span=(0, len(content.encode())),
                )
                for i in range(2)
            )
        )


def test_write_many_embeds_in_batches(tmp_path: Path) -> None:
    e = Counting()
    with open_store(tmp_path / "s", embedder=e) as cx:
        e.calls.clear()
        cx.write_many(
            [Fact(statement=f"fact number {i}", subject="u", predicate="said") for i in range(100)]
        )
        assert e.calls == [64, 36]


def test_ingest_embeds_chunks_and_memories_together(tmp_path: Path) -> None:
    e = Counting()
    with open_store(tmp_path / "s", embedder=e) as cx:
        e.calls.clear()
        res = cx.ingest("Ana: the launch moved to Tuesday.", source="chat", extractor=TwoFacts())
        assert len(res.memories) == 2 and len(res.episode.chunks) == 1
        assert e.calls == [3]  # two memories and one chunk, one call
        hit = cx.find(Query(text="launch tuesday", limit=1, evidence=1))
        assert hit.evidence and hit.evidence[0].episode == res.episode.id


def test_a_dedupe_write_embeds_once(tmp_path: Path) -> None:
    e = Counting()
    with open_store(tmp_path / "s", embedder=e, dedupe=True) as cx:
        e.calls.clear()
        cx.write(Fact(statement="Ada lives in London", subject="ada", predicate="lives_in"))
        assert e.calls == [1]


def test_a_query_embeds_its_text_once(tmp_path: Path) -> None:
    e = Counting()
    with open_store(tmp_path / "s", embedder=e) as cx:
        cx.ingest("Ana: the budget review ran late.", source="chat", extractor=TwoFacts())
        e.calls.clear()
        q = Query(text="budget review", limit=3, evidence=2)
        first = cx.find(q)
        assert e.calls == [1]  # hybrid ranking and episode evidence share the vector
        assert first.hits and first.evidence
        again = cx.find(q)
        assert [h.uri for h in again.hits] == [h.uri for h in first.hits]
        assert again.evidence == first.evidence
        assert e.calls == [1]  # kept for the next query of that text
