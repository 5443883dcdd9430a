"""What a head implies beyond itself: its index keys, its pin, its claims, its superseder.

The engine writes these entries beside every head and ``verify`` recomputes them; one
definition serves both (``specs/storage.md``).
"""

from __future__ import annotations

from typing import Final

from cortex.engine.values import (
    EDGE_CODEC,
    EdgeRecord,
    decode_trusted,
)
from cortex.model.codec import (
    HEAD,
    TOMBSTONE,
    to_micros,
)
from cortex.model.enums import (
    EdgeType,
    GoalStatus,
    MemoryType,
    Strength,
)
from cortex.model.ids import MemoryId
from cortex.model.records import (
    Constraint,
    Data,
    Goal,
    Head,
    Identity,
    Tombstone,
)
from cortex.rules import chains
from cortex.storage.keys import (
    EDGE_TO,
    head_key,
    index_keys,
    pin_key,
)
from cortex.storage.kv import ReadTxn, WriteTxn

FOREVER: Final = 2**63 - 1
"""The end of time in microseconds: an open validity, the instant every chain is judged at."""
SUPERSEDED: Final = b"s"
"""The value of an ``idx/claim/`` entry of a superseded memory (``claims.md`` §5): writes skip
it without reading the memory, so a long chain costs a write nothing."""


def claim_hashes(data: Data | None) -> tuple[bytes, ...]:
    """The ``idx/claim/`` hashes of a memory's current data (``specs/claims.md`` §5)."""
    return tuple(chains.claim_hash(k) for k in chains.claim_keys(data))


def index_keys_of(head: Head) -> list[bytes]:
    """Every index key a head implies (DESIGN §5)."""
    return index_keys(
        head.type,
        to_micros(head.created_at),
        head.id,
        head.tags,
        head.frames,
        actor_obj=head.type is MemoryType.EVENT,
    )


def pin_key_of(head: Head) -> bytes:
    """The ``idx/pin/`` key of a pinned head."""
    return pin_key(head.type, to_micros(head.created_at), head.id)


def is_pinned(data: Data | None) -> bool:
    """Whether a version's data puts its memory in the pinned index (``storage.md`` §2).

    Every Identity, Constraints of strength ``hard`` and Goals with status ``active``; purged
    data (``None``) never.
    """
    if isinstance(data, Identity):
        return True
    if isinstance(data, Constraint):
        return data.strength is Strength.HARD
    if isinstance(data, Goal):
        return data.status is GoalStatus.ACTIVE
    return False


def superseder(txn: ReadTxn, mid: MemoryId, at_us: int) -> MemoryId | None:
    """The memory that supersedes ``mid`` at ``at_us``, if any (``claims.md`` §6).

    That is a live ``supersedes`` edge to it then, from a memory that existed and was not
    tombstoned then.
    """
    prefix = EDGE_TO + mid.bytes + bytes((EdgeType.SUPERSEDES,))
    for key, value in txn.scan(prefix):
        rec: EdgeRecord = decode_trusted(EDGE_CODEC, key, value)
        if to_micros(rec.created_at) > at_us:
            continue
        if rec.removed_at is not None and to_micros(rec.removed_at) <= at_us:
            continue
        raw = txn.get(head_key(src := MemoryId(key[-16:])))
        if raw is None:
            continue
        head: Head = decode_trusted(HEAD, head_key(src), raw)
        if to_micros(head.created_at) > at_us:
            continue
        if head.tombstone is not None and to_micros(head.tombstone.at) <= at_us:
            continue
        return src
    return None


def set_pin(txn: WriteTxn, head: Head, pinned: bool) -> None:
    """Make the pinned index hold ``head`` exactly when ``pinned`` (its current data is)."""
    if pinned:
        txn.put(pin_key_of(head), b"")
    else:
        txn.delete(pin_key_of(head))


def check_tombstone(stone: Tombstone) -> None:
    """Raise ``ValidationError`` for a tombstone that breaks a rule (an empty reason, ...)."""
    TOMBSTONE.encode(stone, "tombstone")
