"""Sensitivity labels and what a reader's clearance lets through.

Every memory and every episode has a ``Sensitivity`` (seed 003): ``internal`` unless another
level was set. Since format 9 the level lives in the record a read already trusts: the
memory's head (``Head.sensitivity``) and the episode record (``Episode.sensitivity``), both
sealed with a CRC-32, ``None`` for ``internal`` (``specs/sensitivity.md`` §2). A damaged key
can therefore no longer make a labelled memory read as ``internal``: the head is found by the
memory's id, and a damaged head fails its checks.

Format 8 kept the other levels in a keyspace of their own (``sens/m/`` id16, ``sens/e/``
id16: one sealed code byte); ``decode_level`` reads those for the migration to format 9.

A reader other than the store's owner sees a memory or an episode only when its level is at or
below the reader's clearance (``Reader.clearance``, ``internal`` by default): a ``Gate``
answers that from the head or episode record the read holds, and reads nothing else.
"""

from __future__ import annotations

from typing import Final

from cortex.errors import IntegrityError, ValidationError
from cortex.model.enums import Sensitivity
from cortex.model.records import Episode, Head
from cortex.rules.scope import Reader
from cortex.storage.keys import show_key
from cortex.storage.kv import unseal

__all__ = [
    "DEFAULT",
    "Gate",
    "coerce_level",
    "decode_level",
    "gate",
    "level_of",
    "stored",
]

DEFAULT: Final = Sensitivity.INTERNAL
"""The level of a memory or an episode whose record holds none."""


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


def decode_level(key: bytes, raw: bytes) -> Sensitivity:
    """The level of a format-8 ``sens/`` entry (read only by the migration to format 9).

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


def level_of(record: Head | Episode) -> Sensitivity:
    """The level of a memory (its head) or an episode: ``internal`` when the record holds none."""
    level = record.sensitivity
    return DEFAULT if level is None else level


def stored(level: Sensitivity) -> Sensitivity | None:
    """What a head or episode record holds for ``level``: ``None`` for ``internal``."""
    return None if level is DEFAULT else level


class Gate:
    """What one reader's clearance lets through: answered from the records a read holds."""

    __slots__ = ("clearance",)

    def __init__(self, clearance: Sensitivity) -> None:
        self.clearance = clearance

    def memory(self, head: Head) -> bool:
        """Whether the reader is cleared for the memory of ``head``."""
        return level_of(head) <= self.clearance

    def episode(self, ep: Episode) -> bool:
        """Whether the reader is cleared for the episode ``ep``."""
        return level_of(ep) <= self.clearance


def gate(reader: Reader | None, owner: str) -> Gate | None:
    """The gate of ``reader``; ``None`` when it is cleared for everything.

    The store's owner (and a reader without a ``Reader``: the owner) sees every level, and so
    does a reader cleared for ``restricted``.
    """
    if reader is None or reader.actor == owner or reader.clearance is Sensitivity.RESTRICTED:
        return None
    return Gate(reader.clearance)
