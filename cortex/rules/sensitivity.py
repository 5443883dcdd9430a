"""Sensitivity labels in the store (``sens/``) and what a reader's clearance lets through.

Every memory and every episode has a ``Sensitivity`` (seed 003): ``internal`` unless another
level was set. The store keeps only the other levels, one sealed byte under ``sens/m/`` id16
(a memory) or ``sens/e/`` id16 (an episode), written in the transaction of the write or the
change that sets it and removed by a purge (``specs/sensitivity.md``). The Head record is not
changed, so the owner's reads never touch these keys.

A reader other than the store's owner sees a memory or an episode only when its level is at or
below the reader's clearance (``Reader.clearance``, ``internal`` by default): a ``Gate``
answers that inside one read snapshot, and costs nothing while the store holds no label.
"""

from __future__ import annotations

from typing import Final

from cortex.errors import IntegrityError, ValidationError
from cortex.model.enums import Sensitivity
from cortex.model.ids import MemoryId
from cortex.rules.scope import Reader
from cortex.storage.keys import SENS_EPISODE, SENS_MEMORY, sens_key, show_key
from cortex.storage.kv import ReadTxn, WriteTxn, seal, unseal

__all__ = [
    "DEFAULT",
    "Gate",
    "coerce_level",
    "decode_level",
    "encode_level",
    "gate",
    "level_of",
    "put_level",
]

DEFAULT: Final = Sensitivity.INTERNAL
"""The level of a memory or an episode that has no ``sens/`` entry."""


def coerce_level(value: object, field: str = "sensitivity") -> Sensitivity:
    """The level a member, code or label names.

    Raises:
        ValidationError: ``value`` names no level.
    """
    level = Sensitivity.coerce(value)
    if level is None:
        raise ValidationError(
            field, "enum", f"must be one of {Sensitivity.labels()}, got {value!r}"
        )
    return level


def encode_level(level: Sensitivity) -> bytes:
    """The sealed ``sens/`` value of ``level``: its one-byte code and a CRC-32."""
    return seal(bytes((int(level),)))


def decode_level(key: bytes, raw: bytes) -> Sensitivity:
    """The level stored under ``key``.

    Raises:
        IntegrityError: the value fails its checksum or holds no level code.
    """
    payload = unseal(key, raw)
    level = Sensitivity.coerce(payload[0]) if len(payload) == 1 else None
    if level is None:
        raise IntegrityError(
            f"record {show_key(key)} holds no sensitivity level ({payload.hex()}): run "
            "`cortex verify`"
        )
    return level


def level_of(txn: ReadTxn, id_: MemoryId, *, episode: bool = False) -> Sensitivity:
    """The level of a memory (or, with ``episode``, an episode): ``internal`` when unset."""
    key = sens_key(id_, episode=episode)
    raw = txn.get(key)
    return DEFAULT if raw is None else decode_level(key, raw)


def put_level(txn: WriteTxn, id_: MemoryId, level: Sensitivity, *, episode: bool = False) -> None:
    """Store ``level`` for a memory (or an episode); ``internal`` deletes the entry.

    The old entry is not read, so setting a level also repairs a damaged one.
    """
    key = sens_key(id_, episode=episode)
    if level is DEFAULT:
        txn.delete(key)
    else:
        txn.put(key, encode_level(level))


class Gate:
    """What one reader's clearance lets through, inside one read snapshot.

    The first question of each kind looks once whether the store holds any label of that kind
    (one cursor seek); while it holds none, every memory (or episode) is ``internal`` and no
    record is read.
    """

    __slots__ = ("_episodes", "_memories", "clearance", "txn")

    def __init__(self, txn: ReadTxn, clearance: Sensitivity) -> None:
        self.txn = txn
        self.clearance = clearance
        self._memories: bool | None = None  # whether any sens/m/ entry exists (None: not known)
        self._episodes: bool | None = None

    def memory(self, mid: MemoryId) -> bool:
        """Whether the reader is cleared for the memory ``mid``."""
        if self._memories is None:
            self._memories = self.txn.seek(SENS_MEMORY, SENS_MEMORY) is not None
        if not self._memories:
            return self.clearance >= DEFAULT
        return level_of(self.txn, mid) <= self.clearance

    def episode(self, eid: MemoryId) -> bool:
        """Whether the reader is cleared for the episode ``eid``."""
        if self._episodes is None:
            self._episodes = self.txn.seek(SENS_EPISODE, SENS_EPISODE) is not None
        if not self._episodes:
            return self.clearance >= DEFAULT
        return level_of(self.txn, eid, episode=True) <= self.clearance


def gate(txn: ReadTxn, reader: Reader | None, owner: str) -> Gate | None:
    """The gate of ``reader`` in ``txn``; ``None`` when it is cleared for everything.

    The store's owner (and a reader without a ``Reader``: the owner) sees every level, and so
    does a reader cleared for ``restricted``.
    """
    if reader is None or reader.actor == owner or reader.clearance is Sensitivity.RESTRICTED:
        return None
    return Gate(txn, reader.clearance)
