"""MiniLM's encoder as an ONNX graph built from the loaded weights and run by onnxruntime.

``cortex.index.embed.MiniLM`` hands this module the weights it read from the installed package;
the graph is built in memory with the ``onnx`` helper API (nothing is downloaded or written to
disk) and run on the CPU by onnxruntime with one intra-op thread per usable core. The numpy
forward pass in ``cortex.index.embed`` is the definition: this graph computes the same function
(embeddings, layer norms, 12-head attention with padded keys masked, exact erf GELU) with
onnxruntime's fused kernels, and hands back the last hidden states, which ``cortex.index.embed``
pools and normalises as on the numpy path. Both packages are imported lazily, here only.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from cortex.errors import CortexError, MissingDependencyError

__all__ = ["OnnxEncoder", "available"]

_OPSET: Final = 17  # LayerNormalization is standard from 17
_MS_DOMAIN: Final = "com.microsoft"  # onnxruntime's contrib ops: Attention, SkipLN, BiasGelu


def available() -> bool:
    """Whether ``onnx`` and ``onnxruntime`` can be imported (the ``embed-fast`` extra)."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


def _graph(
    *,
    word: npt.NDArray[np.float32],
    position: npt.NDArray[np.float32],
    token_type: npt.NDArray[np.float32],
    emb_ln: tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]],
    layers: Sequence[dict[str, npt.NDArray[np.float32]]],
    heads: int,
    eps: float,
) -> tuple[bytes, dict[str, npt.NDArray[Any]]]:
    """The serialised ModelProto of the encoder, and the weights it names.

    Inputs ``input_ids`` (int64) and ``mask`` (int32, 1 for a token, 0 for padding), both
    ``(n, length)``; output ``hidden``, float32 ``(n, length, hidden)``. Every weight is an
    initializer marked as external data: the session is handed the numpy arrays themselves
    (``SessionOptions.add_external_initializers``), so the 90 MB of weights are neither copied
    into the protobuf nor serialised.
    """
    from onnx import TensorProto, helper

    inits: list[Any] = []
    weights: dict[str, npt.NDArray[Any]] = {}

    def const(name: str, value: npt.NDArray[Any]) -> str:
        arr = np.ascontiguousarray(value)
        t = TensorProto()
        t.name = name
        t.data_type = helper.np_dtype_to_tensor_dtype(arr.dtype)
        t.dims.extend(arr.shape)
        t.data_location = TensorProto.EXTERNAL
        for key, val in (("location", name), ("offset", "0"), ("length", str(arr.nbytes))):
            entry = t.external_data.add()
            entry.key, entry.value = key, val
        inits.append(t)
        weights[name] = arr
        return name

    node = helper.make_node
    nodes = [
        node("Gather", [const("word", word), "input_ids"], ["tok"]),
        node("Shape", ["input_ids"], ["length"], start=1, end=2),
        # rows 0..length-1 of the position table, with the (only) token type's row added
        node(
            "Slice",
            [
                const("position", position + token_type),
                const("zero", np.array([0], dtype=np.int64)),
                "length",
                const("axis0", np.array([0], dtype=np.int64)),
            ],
            ["pos"],
        ),
        node("Add", ["tok", "pos"], ["emb"]),
        node(
            "LayerNormalization",
            ["emb", const("emb_ln_w", emb_ln[0]), const("emb_ln_b", emb_ln[1])],
            ["x0"],
            axis=-1,
            epsilon=eps,
        ),
    ]
    x = "x0"
    for i, layer in enumerate(layers):
        p = f"l{i}_"
        nodes += [
            # q, k, v projection, scaled dot products over the unmasked keys, heads joined
            node(
                "Attention",
                [x, const(p + "qkv_w", layer["qkv_w"]), const(p + "qkv_b", layer["qkv_b"]), "mask"],
                [p + "ctx"],
                domain=_MS_DOMAIN,
                num_heads=heads,
            ),
            node("MatMul", [p + "ctx", const(p + "out_w", layer["out_w"])], [p + "att"]),
            # LayerNorm(att + out_b + x)
            node(
                "SkipLayerNormalization",
                [
                    p + "att",
                    x,
                    const(p + "ln1_w", layer["ln1_w"]),
                    const(p + "ln1_b", layer["ln1_b"]),
                    const(p + "out_b", layer["out_b"]),
                ],
                [p + "x1"],
                domain=_MS_DOMAIN,
                epsilon=eps,
            ),
            node("MatMul", [p + "x1", const(p + "in_w", layer["in_w"])], [p + "h"]),
            # gelu(h + in_b) with erf, as the numpy path (not the tanh approximation)
            node(
                "BiasGelu",
                [p + "h", const(p + "in_b", layer["in_b"])],
                [p + "g"],
                domain=_MS_DOMAIN,
            ),
            node("MatMul", [p + "g", const(p + "ff_w", layer["ff_w"])], [p + "f"]),
            node(
                "SkipLayerNormalization",
                [
                    p + "f",
                    p + "x1",
                    const(p + "ln2_w", layer["ln2_w"]),
                    const(p + "ln2_b", layer["ln2_b"]),
                    const(p + "ff_b", layer["ff_b"]),
                ],
                [p + "x2"],
                domain=_MS_DOMAIN,
                epsilon=eps,
            ),
        ]
        x = p + "x2"
    nodes.append(node("Identity", [x], ["hidden"]))
    hidden = int(word.shape[1])
    graph = helper.make_graph(
        nodes,
        "all-MiniLM-L6-v2",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["n", "length"]),
            helper.make_tensor_value_info("mask", TensorProto.INT32, ["n", "length"]),
        ],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["n", "length", hidden])],
        inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", _OPSET), helper.make_opsetid(_MS_DOMAIN, 1)],
        producer_name="cortex",
    )
    data: bytes = model.SerializeToString()
    return data, weights


class OnnxEncoder:
    """The encoder as an onnxruntime session (CPU), built from weights already in memory.

    Args:
        word, position, token_type, emb_ln, layers: the weights as ``cortex.index.embed`` holds them
            (dense weights as ``(in, out)``; q, k and v joined in one matrix).
        heads: attention heads.
        eps: the layer norms' epsilon.
        threads: intra-op threads (default: the usable cores).

    Raises:
        MissingDependencyError: ``onnx`` or ``onnxruntime`` is not installed.
        CortexError: onnxruntime refused the graph.
    """

    def __init__(
        self,
        *,
        word: npt.NDArray[np.float32],
        position: npt.NDArray[np.float32],
        token_type: npt.NDArray[np.float32],
        emb_ln: tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]],
        layers: Sequence[dict[str, npt.NDArray[np.float32]]],
        heads: int,
        eps: float,
        threads: int | None = None,
    ) -> None:
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise MissingDependencyError(
                "the onnx runtime of MiniLM needs the packages onnx and onnxruntime: "
                "pip install 'cortex-store[embed-fast]' (or use runtime='numpy')"
            ) from exc
        try:
            model, weights = _graph(
                word=word,
                position=position,
                token_type=token_type,
                emb_ln=emb_ln,
                layers=layers,
                heads=heads,
                eps=eps,
            )
        except ImportError as exc:
            raise MissingDependencyError(
                "the onnx runtime of MiniLM needs the package onnx: "
                "pip install 'cortex-store[embed-fast]' (or use runtime='numpy')"
            ) from exc
        except Exception as exc:  # onnx raises its own types (checker, protobuf)
            raise CortexError(
                f"cannot build MiniLM's onnx graph: {exc}; use runtime='numpy'"
            ) from exc
        self.threads = threads if threads is not None else usable_cores()
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self.threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3  # errors only: onnxruntime logs to stderr itself
        # idle pool threads sleep instead of spinning: on a few shared cores a spinning thread
        # takes CPU from the store's own work and from other processes (measured: both the
        # latency and the throughput per CPU-second are better without it here)
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # the arrays stay referenced here for the session's life (it reads them in place)
        self._weights = weights
        self._values = [ort.OrtValue.ortvalue_from_numpy(a) for a in weights.values()]
        try:
            opts.add_external_initializers(list(weights), self._values)
            self._session = ort.InferenceSession(
                model, sess_options=opts, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime's own exception types
            raise CortexError(
                f"onnxruntime {ort.__version__} cannot run MiniLM's graph: {exc}; "
                "use runtime='numpy'"
            ) from exc
        self.version = str(ort.__version__)

    def run(
        self, ids: npt.NDArray[np.int64], mask: npt.NDArray[np.float32]
    ) -> npt.NDArray[np.float32]:
        """The last hidden states ``(n, length, hidden)`` of a padded batch.

        Raises:
            CortexError: onnxruntime failed.
        """
        feed = {"input_ids": ids, "mask": mask.astype(np.int32)}
        try:
            out = self._session.run(["hidden"], feed)[0]
        except Exception as exc:  # onnxruntime's own exception types
            raise CortexError(f"onnxruntime failed to embed: {exc}; use runtime='numpy'") from exc
        return np.asarray(out, dtype=np.float32)
