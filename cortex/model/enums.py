"""Closed vocabularies with stable one-byte codes and stable string labels.

Codes are never renumbered or reused; new members are appended. On disk a member is its code
(an unsigned integer); in JSON, the CLI and forms it is its label.
"""

from __future__ import annotations

import enum
from typing import Any, Self

__all__ = [
    "ConstraintSource",
    "DecayClass",
    "EdgeType",
    "GoalStatus",
    "MemoryType",
    "ObjKind",
    "Outcome",
    "Polarity",
    "Sensitivity",
    "SourceKind",
    "Stance",
    "Strength",
    "Verb",
    "Visibility",
]


# each enum's members by label, built on first use (the classes are fixed)
_BY_LABEL: dict[type[Any], dict[str, Any]] = {}


class CodedEnum(enum.IntEnum):
    """An enum whose value is its on-disk byte and whose ``label`` is its lower-case name."""

    @property
    def label(self) -> str:
        """The stable string form, e.g. ``"user_input"``."""
        return self.name.lower()

    @classmethod
    def coerce(cls, value: object) -> Self | None:
        """Return the member for a member, its code or its label; ``None`` when there is none."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            # only the exact label is accepted (not "ſoft", though "ſoft".upper() == "SOFT")
            by_label = _BY_LABEL.get(cls)
            if by_label is None:
                by_label = _BY_LABEL[cls] = {m.label: m for m in cls}
            m: Self | None = by_label.get(value)
            return m
        if type(value) is int:
            try:
                return cls(value)
            except ValueError:
                return None
        return None

    @classmethod
    def labels(cls) -> str:
        """All labels, comma-separated, for error messages."""
        return ", ".join(m.label for m in cls)


class MemoryType(CodedEnum):
    """The nine memory types."""

    IDENTITY = 0x01
    FACT = 0x02
    PREFERENCE = 0x03
    BELIEF = 0x04
    EVENT = 0x05
    GOAL = 0x06
    CONSTRAINT = 0x07
    CAPABILITY = 0x08
    PATTERN = 0x09

    @property
    def type_name(self) -> str:
        """The name used in URIs and records, e.g. ``"Fact"``."""
        return self.name.capitalize()

    @classmethod
    def from_name(cls, name: str) -> MemoryType | None:
        """The type for an exact type name (``"Fact"``), or ``None``."""
        return _TYPE_BY_NAME.get(name)


_TYPE_BY_NAME = {t.type_name: t for t in MemoryType}


class Visibility(CodedEnum):
    """Who may read a memory."""

    PRIVATE = 0x01
    SCOPED = 0x02
    ACTOR_PUBLIC = 0x03


class Sensitivity(CodedEnum):
    """How sensitive a memory or an episode is (seed 003), in order: each level is more so.

    ``public`` (no restrictions), ``internal`` (the default), ``confidential`` (needs a reader
    cleared for it, and an explicit flag to leave in an export), ``restricted`` (never leaves
    in a bulk export). Readers see a level at or below their clearance (``specs/sensitivity.md``).
    """

    PUBLIC = 0x01
    INTERNAL = 0x02
    CONFIDENTIAL = 0x03
    RESTRICTED = 0x04


class SourceKind(CodedEnum):
    """Where a fact or a version's content came from."""

    USER_INPUT = 0x01
    DERIVED = 0x02
    OBSERVED = 0x03
    IMPORTED = 0x04


class Polarity(CodedEnum):
    """Direction of a preference or constraint."""

    PREFER = 0x01
    AVOID = 0x02
    NEUTRAL = 0x03
    DO = 0x04
    DONT = 0x05


class Stance(CodedEnum):
    """How firmly a belief is held."""

    BELIEVE = 0x01
    DOUBT = 0x02
    SUSPECT = 0x03


class Outcome(CodedEnum):
    """How an event ended."""

    SUCCESS = 0x01
    FAILURE = 0x02
    PARTIAL = 0x03


class GoalStatus(CodedEnum):
    """Where a goal stands."""

    ACTIVE = 0x01
    PAUSED = 0x02
    COMPLETED = 0x03
    ABANDONED = 0x04


class Strength(CodedEnum):
    """How binding a constraint is."""

    SOFT = 0x01
    FIRM = 0x02
    HARD = 0x03


class ConstraintSource(CodedEnum):
    """Who set a constraint."""

    USER_DECLARED = 0x01
    LEARNED = 0x02
    INFERRED = 0x03


class Verb(CodedEnum):
    """What an agent is doing, the first half of a frame."""

    FIND = 0x01
    ACQUIRE = 0x02
    BUILD = 0x03
    MODIFY = 0x04
    DELIVER = 0x05
    ANALYZE = 0x06
    NEGOTIATE = 0x07
    SCHEDULE = 0x08
    MONITOR = 0x09
    DELEGATE = 0x0A


class ObjKind(CodedEnum):
    """What kind of object a frame is about."""

    SERVICE = 0x01
    MODEL = 0x02
    AGENT = 0x03
    KNOWLEDGE = 0x04
    INTENT = 0x05
    ASSET = 0x06
    PLAN = 0x07
    CAPABILITY = 0x08


class EdgeType(CodedEnum):
    """Typed links between memories."""

    DERIVED_FROM = 0x01
    SUPERSEDES = 0x02
    REFERENCES = 0x03
    CONTRADICTS = 0x04
    CORROBORATES = 0x05
    CONSENTS_TO = 0x06
    DISPATCHED_TO = 0x07
    ATTESTED_BY = 0x08
    CITED_IN = 0x09
    TOMBSTONES = 0x0A
    PART_OF = 0x0B
    INSTANCE_OF = 0x0C
    CAUSED_BY = 0x0D
    OBSERVED_BY = 0x0E


class DecayClass(CodedEnum):
    """How fast a memory's recency fades: never, half-life 180 days, half-life 21 days."""

    PERMANENT = 0x01
    SLOW = 0x02
    FAST = 0x03
