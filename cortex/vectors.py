"""Stored vectors: the ``vec/`` record of a memory and the store's ``meta/vectors`` record.

LMDB holds every vector (``vec/`` id16, written in the transaction that writes the version it
embeds); the hnswlib index beside the store is only a cache of them (``cortex.sidecar``). See
``specs/vector-index.md`` §3.
"""

from __future__ import annotations

from typing import Final

import msgspec
import numpy as np
import numpy.typing as npt

from cortex.codec import StructCodec, _Bytes, _Int, _Text

__all__ = [
    "MAX_DIM",
    "VECTORS_META",
    "VECTOR_RECORD",
    "VectorRecord",
    "VectorsMeta",
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
        ("model_id", _Text(256)),
        ("dim", _Int(1, MAX_DIM)),
        ("version", _Int(1)),
        ("vector", _Bytes(4 * MAX_DIM)),
    ],
    schema_version=1,
)
VECTORS_META: Final = StructCodec(
    VectorsMeta,
    [("model_id", _Text(256)), ("dim", _Int(1, MAX_DIM)), ("synced", _Int(0))],
    schema_version=1,
)


def to_bytes(vector: npt.NDArray[np.float32]) -> bytes:
    """A vector as stored: little-endian float32."""
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


def from_bytes(raw: bytes, dim: int) -> npt.NDArray[np.float32]:
    """The float32 vector of a stored record (a copy, independent of the buffer)."""
    out: npt.NDArray[np.float32] = np.frombuffer(raw, dtype="<f4", count=dim).astype(np.float32)
    return out
