"""Format 21's keys of a memory by its id, for tests that read or damage its records.

Every per-memory record is keyed by the memory's row (``specs/storage.md`` §2); ``id/`` id16
holds the row.
"""

from __future__ import annotations

from typing import Any

from cortex.engine.heads import row_of
from cortex.model.ids import MemoryId
from cortex.storage import keys


def row(txn: Any, mid: MemoryId) -> int:
    """The row of ``mid`` (it must have one)."""
    r = row_of(txn, mid)
    assert r is not None, f"memory {mid} has no row"
    return r


def head_key(txn: Any, mid: MemoryId) -> bytes:
    """``m/`` u32(row) of ``mid``."""
    return keys.head_key(row(txn, mid))


def version_key(txn: Any, mid: MemoryId, n: int) -> bytes:
    """``mv/`` u32(row) u64(n) of ``mid``."""
    return keys.version_key(row(txn, mid), n)


def version_prefix(txn: Any, mid: MemoryId) -> bytes:
    """``mv/`` u32(row) of ``mid``."""
    return keys.version_prefix(row(txn, mid))


def vec_key(txn: Any, mid: MemoryId) -> bytes:
    """``vec/`` u32(row) of ``mid``."""
    return keys.vec_key(row(txn, mid))


def salience_key(txn: Any, mid: MemoryId) -> bytes:
    """``sal/`` u32(row) of ``mid``."""
    return keys.salience_key(row(txn, mid))


def lex_doc_key(txn: Any, mid: MemoryId) -> bytes:
    """``lex/d/`` u32(row) of ``mid``."""
    return keys.lex_doc_key(row(txn, mid))


def of_kv(kv: Any, mid: MemoryId) -> int:
    """The row of ``mid`` in the store ``kv`` (a read of its own)."""
    with kv.read() as txn:
        return row(txn, mid)


def id_at_row(txn: Any, row4: bytes) -> bytes:
    """The id16 of the memory at ``row4`` (a key's 4 row bytes), from its head."""
    from cortex.engine.heads import id_at

    m = id_at(txn, row4)
    assert m is not None, f"no head at row {row4.hex()}"
    return m.bytes
