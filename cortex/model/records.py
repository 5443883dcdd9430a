"""The record types: nine typed data structs, and the Head, Version and parts they share.

Every record is a frozen ``msgspec.Struct``; change one with ``msgspec.structs.replace``. The
CBOR key of each field is its position in ``FIELD_KEYS`` (see ``specs/format.md``).
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar, TypeAlias

import msgspec

from cortex.model.enums import (
    ConstraintSource,
    GoalStatus,
    MemoryType,
    ObjKind,
    Outcome,
    Polarity,
    Sensitivity,
    SourceKind,
    Stance,
    Strength,
    Verb,
    Visibility,
)
from cortex.model.ids import MemoryId

__all__ = [
    "Belief",
    "Capability",
    "Constraint",
    "Cost",
    "Data",
    "Episode",
    "Event",
    "Fact",
    "Forms",
    "FrameRef",
    "Goal",
    "Head",
    "Identity",
    "Pattern",
    "Preference",
    "Provenance",
    "SourceRef",
    "Tombstone",
    "VectorRef",
    "Version",
]


class _Record(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False):
    """Base of every record.

    ``gc=False``: records are not tracked by the cycle collector. They hold text, numbers,
    bytes, times, enums, tuples, string maps and other records, so they cannot form a cycle of
    their own; a batch of 1,000 new memories makes ~10,000 of them, and tracking them made the
    collector run (and walk every live record) often enough to cost 10-20% of ``write_many``.
    (A cycle built on purpose through a record's mutable map would be leaked, not collected.)
    """


class _TypedData(_Record, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the nine typed data structs; ``TYPE`` is the memory type they encode."""

    TYPE: ClassVar[MemoryType]


class Identity(_TypedData, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Who the actor is."""

    TYPE: ClassVar[MemoryType] = MemoryType.IDENTITY
    name: str
    did: str | None = None
    roles: tuple[str, ...] = ()
    profile: dict[str, str] = msgspec.field(default_factory=dict)
    public_keys: tuple[bytes, ...] = ()


class Fact(_TypedData, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Something stated, believed or observed to be true: ``predicate(subject) = statement``."""

    TYPE: ClassVar[MemoryType] = MemoryType.FACT
    statement: str
    subject: str
    predicate: str
    object: str | None = None
    source: SourceKind | None = None
    observed_at: datetime | None = None
    confidence: float | None = None


class Preference(_TypedData, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A like or dislike."""

    TYPE: ClassVar[MemoryType] = MemoryType.PREFERENCE
    topic: str
    polarity: Polarity
    strength: float | None = None
    rationale: str | None = None
    subject: str | None = None
    """Whose preference it is (``None``: the user's); store format 8."""


class Belief(_TypedData, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An uncertain claim, with URIs of the versions that support or undercut it."""

    TYPE: ClassVar[MemoryType] = MemoryType.BELIEF
    statement: str
    subject: str | None = None
    stance: Stance
    confidence: float | None = None
    evidence_for: tuple[str, ...] = ()
    evidence_against: tuple[str, ...] = ()


class Cost(_Record, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What an event cost: an asset code and a decimal amount kept as text (no float rounding)."""

    asset: str
    amount: str


class Event(_TypedData, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Something that happened."""

    TYPE: ClassVar[MemoryType] = MemoryType.EVENT
    kind: str
    outcome: Outcome | None = None
    counterparty: str | None = None
    cost: Cost | None = None
    duration_us: int | None = None
    occurred_at: datetime | None = None
    summary: str | None = None
    intent_ref: str | None = None
    artifacts: tuple[str, ...] = ()


class Goal(_TypedData, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An objective to pursue."""

    TYPE: ClassVar[MemoryType] = MemoryType.GOAL
    statement: str
    status: GoalStatus
    horizon: datetime | None = None
    success_criteria: tuple[str, ...] = ()
    subgoals: tuple[str, ...] = ()
    subject: str | None = None
    """Whose goal it is (``None``: the user's); store format 8."""


class Constraint(_TypedData, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A standing rule or guardrail."""

    TYPE: ClassVar[MemoryType] = MemoryType.CONSTRAINT
    statement: str
    polarity: Polarity
    strength: Strength
    source: ConstraintSource
    trigger: str | None = None


class Capability(_TypedData, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Something the subject can do, declared or verified."""

    TYPE: ClassVar[MemoryType] = MemoryType.CAPABILITY
    subject: str
    capability: str
    verified: bool = False
    parameters: dict[str, str] = msgspec.field(default_factory=dict)
    last_observed: datetime | None = None


class Pattern(_TypedData, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A reusable how-to; ``statement`` may be ``"neo.pattern.v1:" + JSON`` or plain text."""

    TYPE: ClassVar[MemoryType] = MemoryType.PATTERN
    statement: str
    strength: float | None = None
    coverage: int | None = None
    derived_from: tuple[str, ...] = ()


Data: TypeAlias = (
    Identity | Fact | Preference | Belief | Event | Goal | Constraint | Capability | Pattern
)
"""Any of the nine typed data structs."""

DATA_TYPES: dict[MemoryType, type[Data]] = {
    cls.TYPE: cls
    for cls in (Identity, Fact, Preference, Belief, Event, Goal, Constraint, Capability, Pattern)
}


class Forms(_Record, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Rendered text of a memory: short (<= 50 tokens) and medium (<= 200 tokens)."""

    short: str
    medium: str


class FrameRef(_Record, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Binds a memory to what an agent does (verb) to which object (kind and reference)."""

    verb: Verb
    obj_kind: ObjKind
    obj_ref: str


class Tombstone(_Record, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Why, when and by whom a memory was retired; ``purged_at`` is set once its data is erased."""

    reason: str
    at: datetime
    by: str
    purged_at: datetime | None = None


class SourceRef(_Record, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A conversation span the content came from."""

    session_id: str
    message_ids: tuple[str, ...] = ()
    span: tuple[int, int] | None = None


class Provenance(_Record, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Where a version's content came from."""

    source: SourceKind
    derived_from: tuple[str, ...] = ()
    sources: tuple[SourceRef, ...] = ()


class VectorRef(_Record, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Which embedding of the memory the vector store holds."""

    model_id: str
    dim: int
    version: int


class Head(_Record, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The mutable record of a memory (``m/<id>``).

    Only ``tags``, ``frames``, ``importance``, ``visibility`` and ``sensitivity`` change through
    ``update_head``; the store manages the rest. ``sensitivity`` is ``None`` for ``internal``
    (format 9: the level lives in the sealed head, ``specs/sensitivity.md`` §2).
    ``has_counters`` is the store's too (format 11).
    """

    id: MemoryId
    type: MemoryType
    current_version: int
    actor_scope: str
    visibility: Visibility = Visibility.PRIVATE
    importance: int = 5
    tags: tuple[str, ...] = ()
    frames: tuple[FrameRef, ...] = ()
    tombstone: Tombstone | None = None
    created_at: datetime
    last_updated_at: datetime
    embedding_ref: VectorRef | None = None
    forms: Forms | None = None
    sensitivity: Sensitivity | None = None
    has_counters: bool = False
    """Whether the memory has use counters (a ``sal/`` record); format 11. The store sets it
    with the first use and clears it when the counters go (a purge): a read of the counters
    then knows whether a record must exist (``specs/query.md`` §2)."""


class Version(_Record, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One immutable version of a memory (``mv/<id>/v/<n>``).

    ``data`` is the canonical CBOR of the typed data exactly as hashed; after a purge ``data`` and
    ``forms`` are ``None`` and ``hash`` remains as proof of what was erased.
    """

    id: MemoryId
    version: int
    type: MemoryType
    data: bytes | None = None
    hash: bytes
    created_at: datetime
    created_by: str
    expires_at: datetime | None = None
    confidence: float = 1.0
    provenance: Provenance
    forms: Forms | None = None
    forms_override: bool = False
    valid_from: datetime | None = None
    valid_until: datetime | None = None


class Episode(_Record, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The verbatim source of memories (``ep/<id>``): a chat turn, a document, a tool result.

    ``content`` is the text's UTF-8 bytes exactly as given (never normalised); ``hash`` is
    ``sha256("matrix.cortex.episode.v1" || content)``. ``chunks`` are the ``[start, end)`` byte
    spans of its search chunks (``specs/chunking.md``, version ``chunker``). After a purge
    ``content`` is ``None`` and ``chunks`` empty; ``hash`` remains as proof of what was erased.
    """

    id: MemoryId
    content: bytes | None = None
    hash: bytes
    occurred_at: datetime
    created_at: datetime
    created_by: str
    source: str
    channel: str | None = None
    labels: tuple[str, ...] = ()
    visibility: Visibility = Visibility.PRIVATE
    media_type: str | None = None
    chunks: tuple[tuple[int, int], ...] = ()
    chunker: int = 1
    purged_at: datetime | None = None
    sensitivity: Sensitivity | None = None
