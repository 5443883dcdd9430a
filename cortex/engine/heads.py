"""What a head implies beyond itself: its index keys, its pin, its claims, its superseder.

The engine writes these entries beside every head and ``verify`` recomputes them; one
definition serves both (``specs/storage.md``).
"""

from __future__ import annotations

from typing import Final

import cbor2
import msgspec

from cortex.engine.values import (
    EDGE_CODEC,
    EdgeRecord,
    decode_trusted,
)
from cortex.errors import CodecError, IntegrityError
from cortex.model.codec import (
    HEAD,
    TOMBSTONE,
    Invalid,
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
from cortex.rules.salience import SALIENCE_STATE, SalienceState
from cortex.storage.keys import (
    EDGE_TO,
    head_key,
    id_key,
    index_keys,
    pin_key,
    row_bytes,
    salience_key,
    show_key,
)
from cortex.storage.keys import HEAD as HEAD_PREFIX
from cortex.storage.kv import ReadTxn, WriteTxn, seal, unseal

FOREVER: Final = 2**63 - 1
"""The end of time in microseconds: an open validity, the instant every chain is judged at."""
SUPERSEDED: Final = b"s"
"""The value of an ``idx/claim/`` entry of a superseded memory (``claims.md`` §5): writes skip
it without reading the memory, so a long chain costs a write nothing."""


_INTO: Final = bytes((EdgeType.SUPERSEDES,))
NEVER_USED: Final = SalienceState()
"""The use counters of a memory never used (all zero)."""


def encode_row(row: int) -> bytes:
    """The sealed ``id/`` value of a memory's row number (u32 big-endian; format 21)."""
    return seal(row_bytes(row))


def decode_row(key: bytes, raw: bytes) -> int:
    """The row number an ``id/`` record holds.

    Raises:
        IntegrityError: the checksum fails or the value is not 4 bytes.
    """
    p = unseal(key, raw)
    if len(p) != 4:
        raise IntegrityError(
            f"record {show_key(key)} does not hold a row number: the store is damaged; run "
            "cortex verify and restore from a backup (or cortex salvage)"
        )
    return int.from_bytes(p, "big")


def row_of(txn: ReadTxn, mid: MemoryId) -> int | None:
    """The row number of the memory ``mid`` (its ``id/`` record), or None when it has none."""
    key = id_key(mid)
    raw = txn.get(key)
    return None if raw is None else decode_row(key, raw)


def head_from(mid: MemoryId, raw: bytes | None, row: int) -> Head:
    """The head of ``mid`` at ``row`` (the row its ``id/`` record names) from its stored value.

    Raises:
        IntegrityError: no head at the row (``raw`` None), or it is damaged or another
            memory's.
    """
    key = head_key(row)
    if raw is None:
        raise IntegrityError(
            f"memory {mid} has row {row} (id/) but no head there: the store is damaged; "
            "run cortex verify and restore from a backup (or cortex salvage)"
        )
    head: Head = decode_trusted(HEAD, key, raw)
    if head.id != mid:  # keys carry no checksum: a damaged key can point at another record
        raise IntegrityError(
            f"record id/{mid} names row {row}, whose head (m/{row}) is memory {head.id}: "
            "the store is damaged; run cortex verify and restore from a backup (or cortex "
            "salvage)"
        )
    return head


def read_head(txn: ReadTxn, mid: MemoryId) -> tuple[int, Head] | None:
    """The row and head of the memory ``mid``, or None when there is none.

    Raises:
        IntegrityError: the ``id/`` record names a row without a head, or one whose head is
            another memory's, or a record does not decode.
    """
    row = row_of(txn, mid)
    if row is None:
        return None
    return row, head_from(mid, txn.get(head_key(row)), row)


def id_at(txn: ReadTxn, row: bytes) -> MemoryId | None:
    """The id of the memory at ``row`` (4 bytes, as in a key), from its head; None: no head."""
    key = HEAD_PREFIX + row
    raw = txn.get(key)
    if raw is None:
        return None
    head: Head = decode_trusted(HEAD, key, raw)
    return head.id


def head_row(txn: ReadTxn, head: Head) -> int:
    """The row number of ``head``'s memory (which has one: its head was read).

    Raises:
        IntegrityError: its ``id/`` record is missing or damaged.
    """
    row = row_of(txn, head.id)
    if row is None:
        raise IntegrityError(
            f"memory {head.id} has a head but no row record id/{head.id}: the store is "
            "damaged; run cortex verify and restore from a backup (or cortex salvage)"
        )
    return row


def read_counters(txn: ReadTxn, head: Head, row: int | None = None) -> SalienceState:
    """The use counters of ``head``'s memory (``specs/query.md`` §2).

    A head without ``has_counters`` reads as never used without reading ``sal/`` (format 11); a
    stray ``sal/`` record beside such a head is not seen here (``verify`` reports it). A head
    with the flag whose record is missing raises: keys carry no checksum, and a damaged
    ``sal/`` key would otherwise read as "never used" and change rankings without an error.

    Raises:
        IntegrityError: the head says the memory has counters and its record is missing, or
            the record does not decode.
    """
    if not head.has_counters:
        return NEVER_USED
    key = salience_key(head_row(txn, head) if row is None else row)
    raw = txn.get(key)
    if raw is None:
        raise IntegrityError(
            f"memory {head.id} has use counters but their record sal/{head.id} is missing: "
            "its key is damaged; the store is damaged: run cortex verify and restore from a "
            "backup (or cortex salvage)"
        )
    return decode_counters(key, raw, head.id, trusted=True)


def encode_counters(mid: MemoryId, state: SalienceState) -> bytes:
    """The sealed ``sal/`` value of ``mid``'s counters: its id16, then the CBOR record.

    Format 12: the record names its memory, so a damaged key that lands on another used
    memory's key is an error on read, not counters that are not that memory's.
    """
    return seal(mid.bytes + SALIENCE_STATE.encode(state, "salience"))


def decode_counters(
    key: bytes, value: bytes, mid: MemoryId, *, trusted: bool = False
) -> SalienceState:
    """The counters a ``sal/`` record holds for ``mid`` (``encode_counters``).

    ``trusted`` decodes as the read path does (no canonical re-check); otherwise strictly.

    Raises:
        IntegrityError: the checksum fails, or the record names another memory (a damaged
            key), or the record does not decode.
    """
    payload = unseal(key, value)
    if payload[:16] != mid.bytes:
        raise IntegrityError(
            f"record {show_key(key)} holds the use counters of "
            f"{MemoryId(payload[:16]) if len(payload) >= 16 else 'no memory'}, not of {mid}: "
            "its key is damaged; run cortex verify and restore from a backup (or cortex salvage)"
        )
    try:
        if trusted:  # the checksum proves it is what we wrote
            st: SalienceState = SALIENCE_STATE.decode_trusted(payload[16:])
        else:
            st = SALIENCE_STATE.decode(payload[16:], show_key(key))
    except (CodecError, Invalid, cbor2.CBORDecodeError, ValueError, TypeError) as exc:
        raise IntegrityError(f"record {show_key(key)} does not decode: {exc}") from None
    return st


def put_counters(txn: WriteTxn, head: Head, state: SalienceState, row: int | None = None) -> Head:
    """Store ``state`` as the use counters of ``head``'s memory; returns the head as stored.

    The one way counters are written: the first write also rewrites the head with
    ``has_counters`` set, in the same transaction (the flag changes no index key, and the head
    keeps its ``last_updated_at``: a use is not a change of the memory).
    """
    if row is None:
        row = head_row(txn, head)
    txn.put(salience_key(row), encode_counters(head.id, state))
    if head.has_counters:
        return head
    head = msgspec.structs.replace(head, has_counters=True)
    txn.put(head_key(row), seal(HEAD.encode(head, "head")))
    return head


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
    prefix = EDGE_TO + mid.bytes + _INTO
    if txn.seek(prefix, prefix) is None:  # the common case: nothing ever superseded it
        return None
    for key, value in txn.scan(prefix):
        rec: EdgeRecord = decode_trusted(EDGE_CODEC, key, value)
        if to_micros(rec.created_at) > at_us:
            continue
        if rec.removed_at is not None and to_micros(rec.removed_at) <= at_us:
            continue
        got = read_head(txn, src := MemoryId(key[-16:]))
        if got is None:
            continue
        head = got[1]
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
