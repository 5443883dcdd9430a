"""The engine's records and the values its API returns.

Edge and format records with their codecs; ``Memory``, ``Edge``, ``NewMemory`` and the reports
of import and verify; ``decode_trusted`` for a sealed record whose checksum already proves it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

import cbor2
import msgspec

from cortex.errors import (
    IntegrityError,
)
from cortex.model.codec import (
    TIME_FIELD,
    IntField,
    Invalid,
    ListField,
    StructCodec,
    TextField,
    UnitField,
)
from cortex.model.enums import (
    EdgeType,
    Sensitivity,
    Visibility,
)
from cortex.model.ids import MemoryId, Uri
from cortex.model.records import (
    Data,
    Forms,
    FrameRef,
    Head,
    Provenance,
    Version,
)
from cortex.storage.keys import (
    show_key,
)
from cortex.storage.kv import unseal

SHORT_TEXT: Final = TextField(256)
"""A name or label field: at most 256 bytes of text."""
_short = SHORT_TEXT
_unseal = unseal
_show_key = show_key


class EdgeRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The value under both keys of an edge."""

    created_at: datetime
    created_by: str
    weight: float | None = None
    removed_at: datetime | None = None
    removed_by: str | None = None


class FormatRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``meta/format``: what wrote the store and how to read it."""

    format_version: int
    features: tuple[str, ...]
    created_by: str
    created_at: datetime
    owner: str


EDGE_CODEC: Final = StructCodec(
    EdgeRecord,
    [
        ("created_at", TIME_FIELD),
        ("created_by", _short),
        ("weight", UnitField()),
        ("removed_at", TIME_FIELD),
        ("removed_by", _short),
    ],
    schema_version=1,
)


FORMAT_CODEC: Final = StructCodec(
    FormatRecord,
    [
        ("format_version", IntField(1)),
        ("features", ListField(_short)),
        ("created_by", _short),
        ("created_at", TIME_FIELD),
        ("owner", _short),
    ],
    schema_version=1,
)


class Memory(msgspec.Struct, frozen=True, kw_only=True):
    """One version of a memory as read: its URI, the current head, the version and its data.

    ``data`` is ``None`` once the memory has been purged.
    """

    uri: Uri
    head: Head
    version: Version
    data: Data | None

    @property
    def id(self) -> MemoryId:
        """The memory's id."""
        return self.head.id

    @property
    def tombstoned(self) -> bool:
        """Whether the memory has been retired."""
        return self.head.tombstone is not None


class Edge(msgspec.Struct, frozen=True, kw_only=True):
    """A typed link between two memories."""

    src: MemoryId
    type: EdgeType
    dst: MemoryId
    created_at: datetime
    created_by: str
    weight: float | None = None
    removed_at: datetime | None = None
    removed_by: str | None = None

    @property
    def removed(self) -> bool:
        """Whether the edge has been (softly) removed."""
        return self.removed_at is not None


class NewMemory(msgspec.Struct, frozen=True, kw_only=True):
    """One memory for ``write_many``: the data and the same options ``write`` takes."""

    data: Data
    tags: Sequence[str] = ()
    frames: Sequence[FrameRef] = ()
    importance: int = 5
    visibility: Visibility | str = Visibility.PRIVATE
    created_by: str | None = None
    confidence: float = 1.0
    provenance: Provenance | None = None
    forms: Forms | None = None
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    expires_at: datetime | None = None
    id: MemoryId | None = None
    vector: Any = None
    """Its embedding, computed by the caller with the store's model (``cortex.index.embed``)."""
    supersede: bool | None = None
    """Temporal chains (``specs/claims.md`` §6): ``None`` applies the rules, ``True`` makes a
    Fact compete on subject and predicate whatever the predicate, ``False`` skips them."""
    sensitivity: Sensitivity | str | None = None
    """Its sensitivity (``specs/sensitivity.md``); ``None``: ``internal``. An update keeps the
    memory's level (``update_head(ref, sensitivity=...)`` changes it)."""


class ImportReport(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of ``import_records``: what was added and what was already there."""

    memories_added: int
    memories_unchanged: int
    versions_added: int
    edges_added: int
    edges_unchanged: int
    episodes_added: int = 0
    episodes_unchanged: int = 0
    aliases_added: int = 0
    aliases_unchanged: int = 0


class Problem(msgspec.Struct, frozen=True):
    """One thing ``verify`` found wrong: the record (key or name) and what is wrong with it."""

    record: str
    what: str


class VerifyReport(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of ``verify``: ``ok`` is true when ``problems`` is empty."""

    problems: tuple[Problem, ...]
    memories: int
    versions: int
    index_entries: int
    edges: int
    journal_entries: int
    lexical_documents: int = 0
    lexical_postings: int = 0
    episodes: int = 0

    @property
    def ok(self) -> bool:
        """True when nothing is wrong."""
        return not self.problems


def decode_trusted(codec: StructCodec[Any], key: bytes, value: bytes) -> Any:
    """Decode a sealed record whose checksum proves it is what we wrote."""
    payload = _unseal(key, value)
    try:
        return codec.decode_trusted(payload)
    except (Invalid, cbor2.CBORDecodeError, ValueError, TypeError) as exc:
        raise IntegrityError(f"record {_show_key(key)} does not decode: {exc}") from None
