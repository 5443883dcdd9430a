"""Stored vectors: the ``vec/`` record of a memory and the store's ``meta/vectors`` record.

LMDB holds every vector (``vec/`` id16, written in the transaction that writes the version it
embeds); the hnswlib index beside the store is only a cache of them (``cortex.engine.sidecar``). See
``specs/vector-index.md`` §3.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
import numpy as np
import numpy.typing as npt

from cortex.errors import ValidationError
from cortex.model.codec import BytesField, IntField, StructCodec, TextField

__all__ = [
    "MAX_DIM",
    "VECTORS_META",
    "VECTOR_RECORD",
    "VectorRecord",
    "VectorsMeta",
    "check_vector",
    "from_bytes",
    "to_bytes",
]

MAX_DIM: Final = 4096
"""The longest vector a store holds."""


class VectorRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``vec/`` id16: the embedding of one version of a memory.

    ``vector`` is ``dim`` little-endian float32 values, unit length.
    """

    model_id: str
    dim: int
    version: int
    vector: bytes


class VectorsMeta(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``meta/vectors``: the one model whose vectors the store holds.

    ``synced`` is the journal sequence up to which every live memory has a vector of its
    current version.
    """

    model_id: str
    dim: int
    synced: int = 0


VECTOR_RECORD: Final = StructCodec(
    VectorRecord,
    [
        ("model_id", TextField(256)),
        ("dim", IntField(1, MAX_DIM)),
        ("version", IntField(1)),
        ("vector", BytesField(4 * MAX_DIM)),
    ],
    schema_version=1,
)
VECTORS_META: Final = StructCodec(
    VectorsMeta,
    [("model_id", TextField(256)), ("dim", IntField(1, MAX_DIM)), ("synced", IntField(0))],
    schema_version=1,
)


def to_bytes(vector: npt.NDArray[np.float32]) -> bytes:
    """A vector as stored: little-endian float32."""
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


def from_bytes(raw: bytes, dim: int) -> npt.NDArray[np.float32]:
    """The float32 vector of a stored record (a copy, independent of the buffer)."""
    out: npt.NDArray[np.float32] = np.frombuffer(raw, dtype="<f4", count=dim).astype(np.float32)
    return out


def check_vector(value: Any, dim: int, model_id: str, field: str) -> npt.NDArray[np.float32]:
    """A caller's vector, checked and scaled to unit length (float32).

    It must be a flat sequence (or array) of ``dim`` real numbers, finite and not all zero;
    any length is normalised, as the embedders' own output is.

    Raises:
        ValidationError: naming ``field`` and what is wrong (type, dimension, value).
    """
    if isinstance(value, str | bytes | bytearray | memoryview) or value is None:
        raise ValidationError(
            field, "type", f"must be a sequence of {dim} numbers, got {type(value).__name__}"
        )
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise ValidationError(
            field, "type", f"must be a sequence of {dim} numbers (a float array)"
        ) from None
    if arr.shape != (dim,):
        raise ValidationError(
            field,
            "shape",
            f"must have {dim} dimensions ({model_id}), got shape {arr.shape}",
        )
    if not np.all(np.isfinite(arr)):
        raise ValidationError(field, "value", "must be finite (no NaN or infinity)")
    top = float(np.max(np.abs(arr)))
    if top == 0.0:
        raise ValidationError(field, "value", "must not be all zero (it has no direction)")
    arr = arr / top  # first to [-1, 1], so neither the huge nor the tiny overflow the norm
    unit: npt.NDArray[np.float32] = (arr / np.linalg.norm(arr)).astype(np.float32)
    return unit
