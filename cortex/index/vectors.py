"""Stored vectors: the ``vec/`` record of a memory and the store's ``meta/vectors`` record.

LMDB holds every vector (``vec/`` id16, written in the transaction that writes the version it
embeds); the hnswlib index beside the store is only a cache of them (``cortex.engine.sidecar``). See
``specs/vector-index.md`` §3.

Format 13: a record says its element type. A store stores new vectors as IEEE float16 (half the
bytes; recall@10 of the index stays >= 0.95) unless it was created to keep float32
(``meta/vectors`` ``float32``); records of either type are read, widened to float32.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
import numpy as np
import numpy.typing as npt

from cortex.errors import ValidationError
from cortex.model.codec import BytesField, IntField, StructCodec, TextField, TrueOnlyField

try:
    from cortex import _speedups as _sp
except ImportError:  # pragma: no cover - installed without a C compiler
    _sp = None  # type: ignore[assignment]

_USE_SPEEDUPS: bool = _sp is not None and hasattr(_sp, "float16")
"""Round a vector to float16 in C (``cortex._speedups.float16``, numpy's bytes) when it is
built; tests switch this off to compare with numpy's path."""

__all__ = [
    "MAX_DIM",
    "PRECISIONS",
    "VECTORS_META",
    "VECTOR_RECORD",
    "VectorRecord",
    "VectorsMeta",
    "check_vector",
    "from_bytes",
    "precision_of",
    "stored_vector",
    "to_bytes",
    "vector_record",
]

PRECISIONS: Final = ("float16", "float32")
"""The element types a store can keep its vectors in (``Cortex.open(vector_precision=...)``)."""

MAX_DIM: Final = 4096
"""The longest vector a store holds."""


class VectorRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``vec/`` id16: the embedding of one version of a memory.

    ``vector`` is ``dim`` little-endian values, unit length: IEEE float16 (``<f2``) when
    ``float16`` is set (format 13), else float32 (``<f4``). ``stored_vector`` reads either,
    widened to float32.
    """

    model_id: str
    dim: int
    version: int
    vector: bytes
    float16: bool = False


class VectorsMeta(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``meta/vectors``: the one model whose vectors the store holds.

    ``synced`` is the journal sequence up to which every live memory has a vector of its
    current version. ``float32`` (format 13): the store keeps its new vectors in float32, chosen
    when the store first recorded its model (``Cortex.open(..., vector_precision="float32")``);
    absent, it stores them in float16.
    """

    model_id: str
    dim: int
    synced: int = 0
    float32: bool = False


VECTOR_RECORD: Final = StructCodec(
    VectorRecord,
    [
        ("model_id", TextField(256)),
        ("dim", IntField(1, MAX_DIM)),
        ("version", IntField(1)),
        ("vector", BytesField(4 * MAX_DIM)),
        ("float16", TrueOnlyField()),
    ],
    schema_version=1,
)
VECTORS_META: Final = StructCodec(
    VectorsMeta,
    [
        ("model_id", TextField(256)),
        ("dim", IntField(1, MAX_DIM)),
        ("synced", IntField(0)),
        ("float32", TrueOnlyField()),
    ],
    schema_version=1,
)


def to_bytes(vector: npt.NDArray[np.float32]) -> bytes:
    """A vector as stored: little-endian float32."""
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


def from_bytes(raw: bytes, dim: int) -> npt.NDArray[np.float32]:
    """The float32 vector of ``to_bytes`` bytes (a copy, independent of the buffer)."""
    out: npt.NDArray[np.float32] = np.frombuffer(raw, dtype="<f4", count=dim).astype(np.float32)
    return out


def vector_record(
    model_id: str, dim: int, version: int, vector: bytes, *, float16: bool
) -> VectorRecord:
    """The ``vec/`` record of ``vector`` (``to_bytes`` bytes: unit float32).

    With ``float16`` the values are rounded to float16 (round to nearest even).

    A unit vector cannot overflow float16 (every value is within [-1, 1]) and keeps a value of
    at least ``1 / sqrt(dim)`` in magnitude, far above float16's smallest normal value, so the
    rounded vector is finite and never all zero; values below ``2**-24`` round to zero.
    """
    if float16:
        half = _sp.float16(vector) if _USE_SPEEDUPS else None  # (None: numpy's path)
        if half is None:
            half = np.frombuffer(vector, dtype="<f4").astype("<f2").tobytes()
        vector = half
    return VectorRecord(model_id=model_id, dim=dim, version=version, vector=vector, float16=float16)


def stored_vector(rec: VectorRecord) -> npt.NDArray[np.float32]:
    """The vector of a ``vec/`` record, widened to float32 (a copy, independent of the buffer).

    Raises:
        ValueError: the record holds fewer bytes than ``dim`` values (verify names it).
    """
    dtype = "<f2" if rec.float16 else "<f4"
    out: npt.NDArray[np.float32] = np.frombuffer(rec.vector, dtype=dtype, count=rec.dim).astype(
        np.float32
    )
    return out


def precision_of(rec: VectorRecord) -> str:
    """``float16`` or ``float32``: the element type of a ``vec/`` record."""
    return "float16" if rec.float16 else "float32"


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
