"""The store engine: immutable versions, mutable heads, indexes, edges and the journal on LMDB.

Every mutation is one write transaction that writes its records, their index entries and one
hash-chained journal entry. Every stored value is sealed with a CRC-32 so that a damaged record
raises ``IntegrityError`` on read instead of returning wrong data; version data is also checked
against its content hash. See ``specs/storage.md``.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import time
import unicodedata
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal, Self

import cbor2
import msgspec

from cortex import erasure, evidence, lexical
from cortex._version import __version__
from cortex.ann import saved_region
from cortex.codec import (
    _NEW_PAIR_PLAN,
    DEFAULT_PROVENANCE,
    FRAMES,
    HEAD,
    TOMBSTONE,
    VERSION,
    StructCodec,
    _Bytes,
    _Enum,
    _Id,
    _Int,
    _Invalid,
    _List,
    _Text,
    _time,
    _uint,
    _Unit,
    data_codec,
    decode_data,
    decode_data_trusted,
    encode_new_pair,
    encode_tags,
    encode_version,
    to_micros,
)
from cortex.enums import (
    CodedEnum,
    EdgeType,
    GoalStatus,
    MemoryType,
    ObjKind,
    Strength,
    Verb,
    Visibility,
)
from cortex.episode import check_episode, decode_episode, encode_episode, purged
from cortex.erasure import (
    ERASURE_CODEC,
    KEYED_CONTENT,
    SCRUB_CODEC,
    ErasureKind,
    ErasureRecord,
    ErasureReport,
    Residue,
    ScrubMark,
    ScrubReport,
)
from cortex.errors import (
    CodecError,
    ConflictError,
    CortexError,
    ErasurePendingError,
    FormatError,
    IntegrityError,
    MigrationRequiredError,
    NotFoundError,
    TombstonedError,
    ValidationError,
)
from cortex.forms import check_override, render_with_short
from cortex.hashing import content_hash
from cortex.ids import MemoryId, Uri, new_id, new_ids
from cortex.keys import (
    _INDEX_PLAN,
    _V,
    EDGE_FROM,
    EDGE_TO,
    IDX_ACTOR_OBJ,
    IDX_FRAME,
    IDX_PIN,
    IDX_TAG,
    IDX_TYPE,
    JOURNAL,
    LEX_DOC,
    LEX_POSTING,
    LEX_TERM,
    SALIENCE,
    VEC,
    edge_from_key,
    edge_to_key,
    episode_key,
    episode_memory_key,
    erasure_key,
    head_key,
    index_keys,
    journal_key,
    lex_doc_key,
    meta_key,
    parse_edge_key,
    parse_episode_key,
    parse_episode_memory_key,
    parse_erasure_key,
    parse_journal_key,
    parse_version_key,
    pin_key,
    salience_key,
    show_key,
    vec_key,
    version_key,
    version_prefix,
)
from cortex.keys import EPISODE as EPISODE_PREFIX
from cortex.keys import EPISODE_MEMORY as EPISODE_MEMORY_PREFIX
from cortex.keys import ERASURE as ERASURE_PREFIX
from cortex.keys import HEAD as _HEAD_KEY_PREFIX
from cortex.keys import VERSION as _VERSION_KEY_PREFIX
from cortex.kv import LmdbKV, ReadTxn, WriteTxn, seal, sort_by_key, unseal
from cortex.lexical import Indexer
from cortex.records import (
    Constraint,
    Data,
    Episode,
    Forms,
    FrameRef,
    Goal,
    Head,
    Identity,
    Provenance,
    SourceRef,
    Tombstone,
    Version,
)
from cortex.salience import SALIENCE_STATE
from cortex.scrub import Layout, separators, unused_ranges
from cortex.validate import validate_memory
from cortex.vectors import VECTOR_RECORD, VECTORS_META

try:
    from cortex import _speedups as _sp
except ImportError:  # pragma: no cover - installed without a C compiler
    _sp = None  # type: ignore[assignment]

_USE_SPEEDUPS: bool = (
    _sp is not None
    and hasattr(_sp, "encode_new_pair")
    and hasattr(_sp, "journal_entry")
    and hasattr(_sp, "stage_new")
)
"""Encode and seal a new memory's records and its journal entry, and stage a batch's records
(``Store._stage_new``), through the C accelerator.

It returns the same bytes as the Python path or declines (an older build lacks it); tests switch
this off to compare the two.
"""

__all__ = [
    "FORMAT_VERSION",
    "Edge",
    "ImportReport",
    "JournalEntry",
    "JournalKind",
    "Memory",
    "NewMemory",
    "Problem",
    "Store",
    "VerifyReport",
]

FORMAT_VERSION: Final = 8
"""The on-disk format this code reads and writes (separate from the package version).

Format 2 adds the lexical index (``specs/lexical.md``); format 3 the pinned index and frame
index keys in created order; format 4 tag index keys by type; format 5 stemmed lexical terms;
format 6 postings in blocks; format 7 episodes (``ep/``, ``prov/e/``, two journal kinds);
format 8 erasure records (``er/``, ``meta/scrub``). ``cortex.migrate`` upgrades older formats.
"""
ERASURE_FEATURE: Final = "erasure-records"
"""Format 8: ``er/`` erasure records (what a purge erased, as needles), ``meta/scrub``, and the
content hash of the erased current version on ``purge`` journal entries."""
EPISODES_FEATURE: Final = "episodes"
"""Format 7: ``ep/`` episode records, the ``prov/e/`` index, journal kinds episode and
episode_purge (``specs/episodes.md``)."""
PINNED_FEATURE: Final = "pinned-index"
"""Format 3: ``idx/pin/`` holds every memory the context's pinned tier reads."""
FRAME_TIME_FEATURE: Final = "frame-index-by-time"
"""Format 3: ``idx/frame/`` keys carry the created time before the id."""
TAG_TYPE_FEATURE: Final = "tag-index-by-type"
"""Format 4: ``idx/tag/`` keys carry the memory's type after the tag hash."""
FEATURES: Final = frozenset(
    {
        "crc32-envelope",
        "journal-sha256-chain",
        lexical.FEATURE,
        PINNED_FEATURE,
        FRAME_TIME_FEATURE,
        TAG_TYPE_FEATURE,
        lexical.STEM_FEATURE,
        lexical.BLOCKS_FEATURE,
        EPISODES_FEATURE,
        ERASURE_FEATURE,
    }
)
"""Format features this code understands; a store naming any other feature is refused."""

_ZERO_HASH: Final = bytes(32)
_sha256 = hashlib.sha256
_Placed = tuple[int, bytes, str, bytes | None]  # offset, needle, region, live key
SCRUB_KEY: Final = b"meta/scrub"
"""The last erasure step (``erasure.ScrubMark``, format 8)."""


# ---------------------------------------------------------------------------------------------
# Store-level records


class JournalKind(CodedEnum):
    """What a journal entry records."""

    INIT = 0x01
    WRITE = 0x02
    UPDATE = 0x03
    UPDATE_HEAD = 0x04
    TOMBSTONE = 0x05
    PURGE = 0x06
    ADD_EDGE = 0x07
    REMOVE_EDGE = 0x08
    EMBED = 0x09
    MIGRATION = 0x0A
    IMPORT = 0x0B
    ATTEST = 0x0C
    CONFIRM = 0x0D
    EPISODE = 0x0E
    EPISODE_PURGE = 0x0F


class JournalEntry(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One mutation, chained to the previous entry by ``prev = sha256(previous entry bytes)``.

    Entries name what changed (ids, versions, content hashes, field names), never content, so a
    purge erases everything but the proof.
    """

    seq: int
    kind: JournalKind
    at: datetime
    by: str
    prev: bytes
    id: MemoryId | None = None
    type: MemoryType | None = None
    version: int | None = None
    hash: bytes | None = None
    fields: tuple[str, ...] = ()
    reason: str | None = None
    edge: EdgeType | None = None
    dst: MemoryId | None = None


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


_short = _Text(256)
JOURNAL_CODEC: Final = StructCodec(
    JournalEntry,
    [
        ("seq", _Int(1)),
        ("kind", _Enum(JournalKind)),
        ("at", _time),
        ("by", _short),
        ("prev", _Bytes(32, exact=32)),
        ("id", _Id()),
        ("type", _Enum(MemoryType)),
        ("version", _Int(1)),
        ("hash", _Bytes(32, exact=32)),
        ("fields", _List(_short, max_items=16)),
        ("reason", _Text()),
        ("edge", _Enum(EdgeType)),
        ("dst", _Id()),
    ],
    schema_version=1,
)
EDGE_CODEC: Final = StructCodec(
    EdgeRecord,
    [
        ("created_at", _time),
        ("created_by", _short),
        ("weight", _Unit()),
        ("removed_at", _time),
        ("removed_by", _short),
    ],
    schema_version=1,
)
FORMAT_CODEC: Final = StructCodec(
    FormatRecord,
    [
        ("format_version", _Int(1)),
        ("features", _List(_short)),
        ("created_by", _short),
        ("created_at", _time),
        ("owner", _short),
    ],
    schema_version=1,
)


# ---------------------------------------------------------------------------------------------
# API value types


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
    """Its embedding, computed by the caller with the store's model (``cortex.embed``)."""


class ImportReport(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of ``import_records``: what was added and what was already there."""

    memories_added: int
    memories_unchanged: int
    versions_added: int
    edges_added: int
    edges_unchanged: int
    episodes_added: int = 0
    episodes_unchanged: int = 0


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


# ---------------------------------------------------------------------------------------------
# Sealing: every value is payload || crc32(payload), big-endian


_seal = seal
_unseal = unseal
_show_key = show_key


def _trusted(codec: StructCodec[Any], key: bytes, value: bytes) -> Any:
    """Decode a sealed record whose checksum proves it is what we wrote."""
    payload = _unseal(key, value)
    try:
        return codec.decode_trusted(payload)
    except (_Invalid, cbor2.CBORDecodeError, ValueError, TypeError) as exc:
        raise IntegrityError(f"record {_show_key(key)} does not decode: {exc}") from None


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def _now_utc() -> datetime:
    return datetime.now(UTC)


def _coerce(cls: type[CodedEnum], value: object, field: str) -> Any:
    m = cls.coerce(value)
    if m is None:
        raise ValidationError(field, "enum", f"must be one of {cls.labels()}, got {value!r}")
    return m


_VERB_OF: Final[dict[object, Verb]] = {**{m: m for m in Verb}, **{m.label: m for m in Verb}}
_KIND_OF: Final[dict[object, ObjKind]] = {
    **{m: m for m in ObjKind},
    **{m.label: m for m in ObjKind},
}
_VERB_TYPES: Final = frozenset({Verb, str})
_KIND_TYPES: Final = frozenset({ObjKind, str})


def _normalize_frames(frames: Iterable[FrameRef]) -> tuple[FrameRef, ...]:
    """Return frames with enum members and NFC references (validating the unusual ones)."""
    frames = tuple(frames)
    # the common case: members or exact labels (``verb="find"``, coerced as FRAMES.enc would
    # check them) and ASCII references; the head's encoder checks the other rules, naming the
    # same fields
    verb_of, kind_of = _VERB_OF, _KIND_OF
    out = []
    for f in frames:
        if type(f) is not FrameRef:
            break
        v, k, ref = f.verb, f.obj_kind, f.obj_ref
        verb = verb_of.get(v) if type(v) in _VERB_TYPES else None
        kind = kind_of.get(k) if type(k) in _KIND_TYPES else None
        if verb is None or kind is None or type(ref) is not str or not ref.isascii():
            break
        out.append(
            f if verb is v and kind is k else FrameRef(verb=verb, obj_kind=kind, obj_ref=ref)
        )
    else:
        return tuple(out)
    try:
        FRAMES.enc(frames)
    except _Invalid as exc:
        raise ValidationError("head.frames" + exc.where, exc.rule, exc.message) from None
    return tuple(
        FrameRef(
            verb=Verb.coerce(f.verb),  # type: ignore[arg-type]  # validated just above
            obj_kind=ObjKind.coerce(f.obj_kind),  # type: ignore[arg-type]
            obj_ref=unicodedata.normalize("NFC", f.obj_ref),
        )
        for f in frames
    )


def _as_id(ref: Uri | MemoryId | str, field: str = "id") -> MemoryId:
    if isinstance(ref, MemoryId):
        return ref
    if isinstance(ref, Uri):
        return ref.id
    if isinstance(ref, str):
        if ref.startswith("cortex://"):
            return Uri.parse(ref).id
        return MemoryId.parse(ref)
    raise ValidationError(field, "type", f"must be a URI, a MemoryId or id text, got {ref!r}")


# ---------------------------------------------------------------------------------------------
# Prepared writes (all validation happens here, before any transaction)


class _Prepared:
    """A validated new memory and its sealed records."""

    __slots__ = (
        "head",
        "head_bytes",
        "pinned",
        "terms",
        "type",
        "vector",
        "version",
        "version_bytes",
    )

    def __init__(
        self, head: Head, version: Version, terms: tuple[list[str], list[int]], pinned: bool
    ) -> None:
        self.terms = terms  # what the lexical index holds for the version: ``count_terms``
        self.vector: bytes | None = None  # its embedding (float32 LE), when the store embeds
        self.pinned = pinned
        self.head = head
        self.version = version
        self.type = head.type
        # both records sealed, in one call in the common case
        pair = _sp.encode_new_pair(head, version, _NEW_PAIR_PLAN) if _USE_SPEEDUPS else None
        if pair is None:
            head_bytes, version_bytes = encode_new_pair(head, version)
            pair = _seal(head_bytes), _seal(version_bytes)
        self.head_bytes, self.version_bytes = pair


def _index_keys(head: Head) -> list[bytes]:
    """Every index key a head implies (DESIGN §5)."""
    return index_keys(
        head.type,
        to_micros(head.created_at),
        head.id,
        head.tags,
        head.frames,
        actor_obj=head.type is MemoryType.EVENT,
    )


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


def _pin_key(head: Head) -> bytes:
    return pin_key(head.type, to_micros(head.created_at), head.id)


def _set_pin(txn: WriteTxn, head: Head, pinned: bool) -> None:
    """Make the pinned index hold ``head`` exactly when ``pinned`` (its current data is)."""
    if pinned:
        txn.put(_pin_key(head), b"")
    else:
        txn.delete(_pin_key(head))


def _live_heads(txn: ReadTxn) -> list[Head]:
    """The heads of every memory that is not tombstoned, in id order."""
    heads = []
    for key, value in txn.scan(_HEAD_KEY_PREFIX):
        head: Head = _trusted(HEAD, key, value)
        if head.tombstone is None:
            heads.append(head)
    return heads


def _current_version(txn: ReadTxn, head: Head) -> Version:
    """The version ``head`` points at; an integrity error when it is missing."""
    key = version_key(head.id, head.current_version)
    raw = txn.get(key)
    if raw is None:
        raise IntegrityError(
            f"version {head.current_version} of {head.id} is missing: run `cortex verify`"
        )
    version: Version = _trusted(VERSION, key, raw)
    return version


def _index_live(txn: WriteTxn, tick: Callable[[int], None] | None = None) -> int:
    """Add every live memory to an empty lexical index; returns how many (reindex, migration)."""
    lex = Indexer(txn)
    n = 0
    for head in _live_heads(txn):
        version = _current_version(txn, head)
        if version.data is None:
            raise IntegrityError(f"memory {head.id} is live but holds no data: run `cortex verify`")
        data = _decoded(head.type, version.data)
        lex.add(head.id, head.current_version, lexical.analyze(data, is_canonical=True))
        n += 1
        if tick is not None:
            tick(n)
    lex.flush()
    return n


def _rebuild_lexical(txn: WriteTxn, tick: Callable[[int], None] | None = None) -> int:
    """Drop the whole lexical index and index every live memory again; returns how many."""
    for prefix in (LEX_POSTING, LEX_DOC, LEX_TERM):
        for key in list(txn.keys(prefix)):
            txn.delete(key)
    txn.delete(lexical.STATS_KEY)
    return _index_live(txn, tick)


def _decoded(mtype: MemoryType, data: bytes) -> Data:
    try:
        return decode_data_trusted(mtype, data)
    except CodecError as exc:
        raise IntegrityError(f"stored data of a {mtype.type_name} does not decode: {exc}") from None


# what the C ``stage_new`` needs (``Store._stage_new``)
_STAGE_PLAN: Final = (
    _VERSION_KEY_PREFIX,
    _V,
    IDX_PIN,
    LEX_DOC,
    JOURNAL,
    _INDEX_PLAN,
    MemoryId,
    MemoryType.EVENT,
)


class _Journal:
    """Appends chained entries within one write transaction."""

    def __init__(self, txn: WriteTxn, at: datetime, by: str) -> None:
        self.txn = txn
        self.at = at
        self.by = by
        self._write_shared: bytes | None = None
        last = next(txn.scan(JOURNAL, reverse=True), None)
        if last is None:
            self.seq, self.prev = 0, _ZERO_HASH
        else:
            self.seq = parse_journal_key(last[0])
            self.prev = hashlib.sha256(_unseal(last[0], last[1])).digest()

    def append(self, kind: JournalKind, **fields: Any) -> JournalEntry:
        self.seq += 1
        entry = JournalEntry(
            seq=self.seq, kind=kind, at=self.at, by=self.by, prev=self.prev, **fields
        )
        payload = JOURNAL_CODEC.encode(entry, "journal")
        self.txn.put(journal_key(self.seq), _seal(payload))
        self.prev = hashlib.sha256(payload).digest()
        return entry

    def write_shared(self) -> bytes | None:
        """The encoded parts every ``write`` entry of this transaction shares (kind, at, by).

        None when the journal codec has to check them (it then names the field and the rule).
        """
        shared = self._write_shared
        if shared is None:
            # checked by the journal codec's own field codecs (a single write's only entry is
            # its first: it takes this path too)
            try:
                shared = b"\x02\x02\x03" + _time.enc(self.at) + b"\x04" + _short.enc(self.by)
            except (_Invalid, TypeError, ValueError, AttributeError):
                return None
            self._write_shared = shared
        return shared

    def write_entry(
        self, mid: MemoryId, mtype: MemoryType, version: int, hash: bytes
    ) -> tuple[bytes, bytes]:
        """The next ``write`` entry's key and sealed value, for the caller to put.

        The same bytes as ``append(JournalKind.WRITE, id=..., type=..., version=..., hash=...)``
        (tests compare the two), built from the parts every entry of this transaction shares:
        the entry's map holds keys 0..9, in order, and only ``seq``, ``prev`` and the memory's
        fields vary.
        """
        shared = self.write_shared()
        seq = self.seq + 1
        if _USE_SPEEDUPS and shared is not None and type(mid) is MemoryId:
            # the C accelerator checks the rest as below (None: the code below runs)
            entry = _sp.journal_entry(
                JOURNAL, shared, seq, self.prev, mid.bytes, mtype, version, hash
            )
            if entry is not None:
                key, value, self.prev = entry
                self.seq = seq
                return key, value
        if (
            shared is None
            or type(mid) is not MemoryId
            or type(hash) is not bytes
            or len(hash) != 32
            or not 1 <= version < 1 << 63
            or seq >= 1 << 63
        ):
            # anything unusual: the codec checks (and names any error)
            key, value = (
                journal_key(seq),
                _seal(
                    JOURNAL_CODEC.encode(
                        JournalEntry(
                            seq=seq,
                            kind=JournalKind.WRITE,
                            at=self.at,
                            by=self.by,
                            prev=self.prev,
                            id=mid,
                            type=mtype,
                            version=version,
                            hash=hash,
                        ),
                        "journal",
                    )
                ),
            )
            self.seq, self.prev = seq, _sha256(value[:-4]).digest()
            return key, value
        self.seq = seq
        payload = b"".join(
            (
                b"\xaa\x00\x01\x01",
                _uint(seq),
                shared,
                b"\x05\x58\x20",
                self.prev,
                b"\x06\x50",
                mid.bytes,
                b"\x07",
                _uint(mtype.value),
                b"\x08",
                _uint(version),
                b"\x09\x58\x20",
                hash,
            )
        )
        self.prev = _sha256(payload).digest()
        return JOURNAL + seq.to_bytes(8, "big"), _seal(payload)


class _IdTaken(Exception):
    """A batch's head was not added: its id is taken or repeated (``Store._put_heads``)."""


class _Imported:
    """A validated memory brought in with its existing records (see ``import_records``)."""

    __slots__ = ("data", "head", "head_bytes", "version_bytes", "versions")

    def __init__(self, head: Head, versions: Sequence[Version]) -> None:
        self.head = head
        self.versions = tuple(versions)
        self.head_bytes = _seal(HEAD.encode(head, "head"))
        where = f"memory {head.id}"
        numbers = [v.version for v in self.versions]
        if numbers != list(range(1, head.current_version + 1)):
            raise ValidationError(
                "versions",
                "complete",
                f"{where} is at version {head.current_version} but versions {numbers} are given",
            )
        purged = head.tombstone is not None and head.tombstone.purged_at is not None
        self.data: Data | None = None  # the current version's decoded data
        for v in self.versions:
            name = f"{where} version {v.version}"
            if v.data is None:
                encode_version(v)
                if not purged:
                    raise ValidationError("version.data", "required", f"{name} has no data")
                if v.id != head.id or v.type is not head.type:
                    raise ValidationError("version.id", "match", f"{name} names {v.id}")
                continue
            if purged:
                raise ValidationError("version.data", "purged", f"{name} holds data")
            if content_hash(v.type, v.data) != v.hash:
                raise IntegrityError(
                    f"{name}: the data does not match its hash; nothing was imported"
                )
            self.data = decode_data(v.type, v.data)
            validate_memory(head, v, self.data)
        self.version_bytes = [_seal(VERSION.encode(v, "version")) for v in self.versions]

    def held_by(self, txn: ReadTxn) -> bool:
        """Whether the store holds exactly these records."""
        if txn.get(head_key(self.head.id)) != self.head_bytes:
            return False
        stored = [value for _, value in txn.scan(version_prefix(self.head.id))]
        return stored == self.version_bytes


# ---------------------------------------------------------------------------------------------
# The store


class Store:
    """One actor's memory store: a directory holding one LMDB environment.

    Open it with ``Cortex.open(path, actor=...)``; use it as a context manager.
    """

    def __init__(
        self,
        kv: LmdbKV,
        actor: str | None,
        *,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._kv = kv
        self._acting = actor
        self.actor = actor or ""
        self._clock = clock or _now_utc
        self.format = self._check_format()
        if actor is None:
            self.actor = self.format.owner

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        actor: str | None,
        create: bool = True,
        readonly: bool = False,
        metasync: bool = True,
        map_size: int = 64 << 20,
        clock: Callable[[], datetime] | None = None,
        **options: Any,
    ) -> Self:
        """Open (and with ``create``, initialise) the store at ``path``.

        Args:
            path: the store directory.
            actor: who is writing; the actor that creates a store owns it. ``None`` acts as
                the store's owner (an existing store only: tools that inspect a store).
            create: create the directory and initialise the store if it is new.
            readonly: open for reading only.
            metasync: ``False`` trades the durability of the last commits on an OS crash for
                write speed (the store stays consistent); see ``LmdbKV``.
            map_size: initial map size in bytes; it grows by doubling when full.
            clock: a function returning the current aware time (tests pass a fixed clock).
            **options: further options of a subclass (``Cortex``: decay, weights, embedder).

        Raises:
            FormatError: the store's format is newer than this code or unknown.
            MigrationRequiredError: the store is older; run ``cortex migrate``.
            ValidationError: ``actor`` is empty or too long.
        """
        if actor is not None:
            try:
                _short.enc(actor)
            except _Invalid as exc:
                raise ValidationError("actor", exc.rule, exc.message) from None
        kv = LmdbKV(
            path,
            readonly=readonly,
            metasync=metasync,
            map_size=map_size,
            create=create,
            epoch_prefix=ERASURE_PREFIX,  # an erasure renews every writer's page buffers
        )
        try:
            return cls(kv, actor, clock=clock, **options)
        except BaseException:
            kv.close()
            raise

    def close(self) -> None:
        """Close the store; reads and writes after this fail."""
        self._kv.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def path(self) -> str:
        """The store directory."""
        return str(self._kv.path)

    @property
    def owner(self) -> str:
        """The actor that owns the store."""
        return self.format.owner

    def _now(self) -> datetime:
        now = self._clock()
        if not isinstance(now, datetime) or now.tzinfo is None:
            raise CortexError("the store's clock must return aware datetimes")
        if now < _EPOCH:  # index keys hold created times as unsigned microseconds
            raise CortexError(f"the store's clock returned {now.isoformat()}, before 1970")
        return now

    # -- format ------------------------------------------------------------------------------

    def _check_format(self) -> FormatRecord:
        key = meta_key("format")
        with self._kv.read() as txn:
            raw = txn.get(key)
            empty = raw is None and next(txn.keys(b""), None) is None
        if raw is None:
            if not empty:
                raise FormatError(f"{self.path} holds data but no meta/format: not a cortex store")
            if self._kv.readonly:
                raise FormatError(f"{self.path} is empty; open it writable once to initialise it")
            return self._kv.write(self._init_format)
        payload = _unseal(key, raw)  # damage is IntegrityError, not an unknown format
        try:
            obj = cbor2.loads(payload)
        except (cbor2.CBORDecodeError, ValueError) as exc:
            raise FormatError(f"{self.path}: meta/format is unreadable ({exc})") from None
        version = obj.get(1) if isinstance(obj, dict) else None
        if not isinstance(version, int):
            raise FormatError(f"{self.path}: meta/format has no format version")
        if version > FORMAT_VERSION:
            raise FormatError(
                f"{self.path} has format {version}, newer than this cortex ({FORMAT_VERSION}); "
                "upgrade cortex to open it"
            )
        if version < FORMAT_VERSION:
            raise MigrationRequiredError(
                f"{self.path} has format {version}; this cortex needs {FORMAT_VERSION}: "
                f"run `cortex --store {self.path} migrate`"
            )
        try:
            record: FormatRecord = FORMAT_CODEC.dec(obj)
        except _Invalid as exc:
            raise FormatError(f"{self.path}: meta/format is invalid ({exc.message})") from None
        unknown = set(record.features) - FEATURES
        if unknown:
            raise FormatError(
                f"{self.path} uses features this cortex does not know: {sorted(unknown)}"
            )
        return record

    def _init_format(self, txn: WriteTxn) -> FormatRecord:
        if self._acting is None:
            raise ValidationError(
                "actor", "required", "a new store needs an actor (its owner): pass actor=…"
            )
        if txn.get(meta_key("format")) is not None:  # another process won the race
            raw = txn.get(meta_key("format"))
            assert raw is not None
            rec: FormatRecord = _trusted(FORMAT_CODEC, meta_key("format"), raw)
            return rec
        now = self._now()
        record = FormatRecord(
            format_version=FORMAT_VERSION,
            features=tuple(sorted(FEATURES)),
            created_by=f"cortex {__version__}",
            created_at=now,
            owner=self.actor,
        )
        txn.put(meta_key("format"), _seal(FORMAT_CODEC.encode(record, "meta/format")))
        Indexer(txn).flush()  # the (empty) collection statistics
        _Journal(txn, now, self.actor).append(JournalKind.INIT, reason=f"format {FORMAT_VERSION}")
        return record

    # -- preparing records -------------------------------------------------------------------

    def _prepare(self, spec: NewMemory, now: datetime, fresh: MemoryId | None = None) -> _Prepared:
        """Validate a new memory (or a new version: ``update``) and encode its records.

        Its id is ``spec.id``, else ``fresh``, else a new one. The terms are found here too,
        before the write transaction, so the writer lock is not held while rendering and
        tokenizing.

        Raises:
            ValidationError: naming the field and the rule it breaks.
        """
        data = spec.data
        codec = data_codec(data)
        data_bytes = codec.encode(data, "data")
        mtype = codec.cls.TYPE
        decoded = decode_data_trusted(mtype, data_bytes)
        short = None  # the filled short template, which the full form starts with
        if spec.forms is not None:
            the_forms, override = check_override(spec.forms), True
        else:
            the_forms, short = render_with_short(decoded, is_canonical=True)
            override = False
        mid = spec.id
        if mid is None:
            mid = fresh if fresh is not None else new_id()
        elif not isinstance(mid, MemoryId):
            raise ValidationError("id", "type", f"must be a MemoryId, got {type(mid).__name__}")
        visibility = spec.visibility
        created_by = spec.created_by
        provenance = spec.provenance
        valid_from, valid_until, expires_at = spec.valid_from, spec.valid_until, spec.expires_at
        ver = Version(
            id=mid,
            version=1,
            type=mtype,
            data=data_bytes,
            hash=content_hash(mtype, data_bytes),
            created_at=now,
            created_by=created_by if created_by is not None else self.actor,
            expires_at=expires_at,
            confidence=spec.confidence,
            provenance=provenance if provenance is not None else DEFAULT_PROVENANCE,
            forms=the_forms,
            forms_override=override,
            valid_from=valid_from,
            valid_until=valid_until,
        )
        head = Head(
            id=mid,
            type=mtype,
            current_version=1,
            actor_scope=self.actor,
            visibility=visibility
            if type(visibility) is Visibility
            else _coerce(Visibility, visibility, "visibility"),
            importance=spec.importance,
            tags=encode_tags(spec.tags),
            frames=_normalize_frames(spec.frames),
            created_at=now,
            last_updated_at=now,
            forms=the_forms,
        )
        # encodes both records (every field rule is checked)
        prepared = _Prepared(
            head,
            ver,
            lexical.analyze_counts(decoded, is_canonical=True, short=short),
            is_pinned(decoded),
        )
        if valid_from and valid_until and to_micros(valid_from) > to_micros(valid_until):
            raise ValidationError("valid_until", "order", "is before valid_from")
        if expires_at is not None and to_micros(expires_at) < to_micros(now):
            raise ValidationError("expires_at", "order", "is in the past")
        if spec.vector is not None:
            prepared.vector = self._given_vector(spec.vector)
        return prepared

    def _put_new(self, p: _Prepared, puts: list[tuple[bytes, bytes]]) -> None:
        """Hold in ``puts`` a new memory's version, index entries and pin."""
        h = p.head
        puts.append((version_key(h.id, 1), p.version_bytes))
        puts += [(k, b"") for k in _index_keys(h)]
        if p.pinned:
            puts.append((_pin_key(h), b""))

    def _stage_new(
        self,
        prepared: list[_Prepared],
        puts: list[tuple[bytes, bytes]],
        journal: _Journal,
        lex: Indexer,
    ) -> None:
        """Hold in ``puts`` every record of new memories but their heads (put already).

        Their versions, index entries, pins and journal entries, in that order for each, then
        their vectors; their terms go into ``lex``. The C accelerator does this (but the
        vectors) for the common case and stops at a memory it leaves to the code below
        (non-ASCII terms, ...).
        """
        i, n = 0, len(prepared)
        while i < n:
            shared = journal.write_shared() if _USE_SPEEDUPS else None
            if shared is not None:
                i, journal.seq, journal.prev, documents, total, postings = _sp.stage_new(
                    _STAGE_PLAN,
                    prepared,
                    i,
                    puts,
                    lex._docs,
                    lex._fresh,
                    lex._by_length,
                    shared,
                    journal.seq,
                    journal.prev,
                )
                lex.counted(documents, total, postings)
                if i == n:
                    break
            p = prepared[i]
            self._put_new(p, puts)
            lex.add_counted(p.head.id, 1, *p.terms, new=True)
            puts.append(journal.write_entry(p.head.id, p.type, 1, p.version.hash))
            i += 1
        for p in prepared:
            if p.vector is not None:
                puts.append((vec_key(p.head.id), self._vector_value(1, p.vector)))

    def _put_heads(self, txn: WriteTxn, prepared: Sequence[_Prepared], one_by_one: bool) -> None:
        """Put the heads of new memories in one call; a taken or repeated id raises ``_IdTaken``.

        Nothing is overwritten, and the count of heads added tells whether an id was taken (or
        given twice). Which one is then named by running the transaction again with
        ``one_by_one`` (the error aborted this one): each head is put on its own, and the first
        taken id is a ``ConflictError``, the same as for a single write.
        """
        if one_by_one:
            for p in prepared:
                if not txn.put(head_key(p.head.id), p.head_bytes, overwrite=False):
                    raise ConflictError(f"a memory with id {p.head.id} already exists")
        elif txn.add_many(
            [(_HEAD_KEY_PREFIX + p.head.id.bytes, p.head_bytes) for p in prepared]
        ) != len(prepared):
            raise _IdTaken

    # -- vectors (``cortex.api.Cortex`` embeds; the plain store writes none) -----------------

    def _embed_prepared(self, prepared: Sequence[_Prepared]) -> None:
        """Set ``p.vector`` for each prepared version, before its transaction (no-op here)."""

    def _given_vector(self, vector: Any) -> bytes:
        """A caller's vector for a new version, checked against the store's model."""
        raise ValidationError(
            "vector",
            "no_model",
            "this store declares no vector model: open it with embedder=… (or "
            "embedder=cortex.embed.External(model_id, dim) for vectors computed elsewhere)",
        )

    def _vector_value(self, version: int, vector: bytes) -> bytes:
        """The sealed ``vec/`` value of an embedding of ``version``."""
        raise CortexError("this store has no embedder")  # pragma: no cover - never reached

    # -- writes ------------------------------------------------------------------------------

    def write(
        self,
        data: Data,
        *,
        tags: Sequence[str] = (),
        frames: Sequence[FrameRef] = (),
        importance: int = 5,
        visibility: Visibility | str = Visibility.PRIVATE,
        created_by: str | None = None,
        confidence: float = 1.0,
        provenance: Provenance | None = None,
        forms: Forms | None = None,
        valid_from: datetime | None = None,
        valid_until: datetime | None = None,
        expires_at: datetime | None = None,
        id: MemoryId | None = None,
        vector: Any = None,
    ) -> Uri:
        """Write a new memory and return the URI of its version 1.

        Args:
            data: one of the nine typed data structs.
            tags: up to 16 tags of up to 64 bytes (order kept, duplicates rejected).
            frames: up to 16 ``FrameRef`` s.
            importance: declared importance, 0..10.
            visibility: private (default), scoped or actor_public.
            created_by: who made this version (default: the store's actor).
            confidence: 0..1.
            provenance: where the content came from (default: user input).
            forms: caller-rendered forms; stored verbatim, rejected if over budget.
            valid_from: when the content starts being true.
            valid_until: when it stops being true.
            expires_at: when the version should no longer be used.
            id: a caller-chosen id (default: a fresh ULID).
            vector: its embedding, computed by the caller with the store's model (checked for
                dimension and finiteness, scaled to unit length); by default the store's
                embedder computes it.

        Raises:
            ValidationError: any field breaks a rule; nothing is written.
            ConflictError: ``id`` is taken.
        """
        now = self._now()
        spec = NewMemory(
            data=data,
            tags=tags,
            frames=frames,
            importance=importance,
            visibility=visibility,
            created_by=created_by,
            confidence=confidence,
            provenance=provenance,
            forms=forms,
            valid_from=valid_from,
            valid_until=valid_until,
            expires_at=expires_at,
            id=id,
            vector=vector,
        )
        p = self._prepare(spec, now)
        prepared = [p]
        self._embed_prepared(prepared)

        def txn_fn(txn: WriteTxn) -> None:
            self._put_heads(txn, prepared, one_by_one=True)
            puts: list[tuple[bytes, bytes]] = []
            lex = Indexer(txn)
            self._stage_new(prepared, puts, _Journal(txn, now, self.actor), lex)
            txn.put_many(puts)
            lex.flush()

        self._kv.write(txn_fn)
        return Uri._trusted(p.type, p.head.id, 1)

    def write_many(self, items: Iterable[NewMemory | Data]) -> list[Uri]:
        """Write many new memories in one transaction: all of them, or (on any error) none.

        Raises:
            ValidationError: naming the item (``items[i].data.…``); nothing is written.
            ConflictError: an id is taken or repeated.
        """
        now = self._now()
        prepared = []
        items = list(items)
        fresh = new_ids(len(items))  # one draw for the batch (an item's own id leaves one unused)
        for i, item in enumerate(items):
            spec = item if isinstance(item, NewMemory) else NewMemory(data=item)
            try:
                prepared.append(self._prepare(spec, now, fresh[i]))
            except ValidationError as exc:
                raise ValidationError(f"items[{i}].{exc.field}", exc.rule, exc.message) from None
        self._embed_prepared(prepared)

        def txn_fn(txn: WriteTxn, one_by_one: bool = False) -> None:
            self._put_heads(txn, prepared, one_by_one)
            journal = _Journal(txn, now, self.actor)
            lex = Indexer(txn)
            puts: list[tuple[bytes, bytes]] = []
            self._stage_new(prepared, puts, journal, lex)
            sort_by_key(puts)  # in key order, each put lands beside the last
            txn.put_many(puts)
            lex.flush()

        if prepared:
            try:
                self._kv.write(txn_fn)
            except _IdTaken:  # nothing was written: run it again to name the id
                self._kv.write(lambda txn: txn_fn(txn, one_by_one=True))
        trusted = Uri._trusted
        return [trusted(p.type, p.head.id, 1) for p in prepared]

    def _write_episode(
        self,
        ep: Episode,
        items: Sequence[NewMemory],
        chunk_vectors: Sequence[bytes] | None = None,
    ) -> list[Uri]:
        """Write an episode and the memories drawn from it in one transaction: all or none.

        Each memory is indexed under ``prov/e/`` (the episode, then the memory); the journal
        records the episode (its id and hash) before the memories' writes.

        Raises:
            ValidationError: naming the item (``items[i].…``); nothing is written.
            ConflictError: the episode's id, or an item's id, is taken.
        """
        now = self._now()
        fresh = new_ids(len(items))
        prepared = []
        for i, spec in enumerate(items):
            try:
                prepared.append(self._prepare(spec, now, fresh[i]))
            except ValidationError as exc:
                raise ValidationError(f"items[{i}].{exc.field}", exc.rule, exc.message) from None
        self._embed_prepared(prepared)
        record = _seal(encode_episode(ep))

        def txn_fn(txn: WriteTxn, one_by_one: bool = False) -> None:
            if not txn.put(episode_key(ep.id), record, overwrite=False):
                raise ConflictError(f"episode {ep.id} exists: give another id")
            evidence.index_episode(txn, ep)
            if chunk_vectors is not None:
                evidence.put_vectors(txn, ep, chunk_vectors)
            journal = _Journal(txn, now, self.actor)
            journal.append(JournalKind.EPISODE, id=ep.id, hash=ep.hash)
            if not prepared:
                return
            self._put_heads(txn, prepared, one_by_one)
            lex = Indexer(txn)
            puts: list[tuple[bytes, bytes]] = []
            self._stage_new(prepared, puts, journal, lex)
            puts += [(episode_memory_key(ep.id, p.head.id), b"") for p in prepared]
            sort_by_key(puts)
            txn.put_many(puts)
            lex.flush()

        try:
            self._kv.write(txn_fn)
        except _IdTaken:  # nothing was written: run it again to name the id
            self._kv.write(lambda txn: txn_fn(txn, one_by_one=True))
        return [Uri._trusted(p.type, p.head.id, 1) for p in prepared]

    def _episode(self, txn: ReadTxn, eid: MemoryId) -> Episode:
        raw = txn.get(episode_key(eid))
        if raw is None:
            raise NotFoundError(f"no episode {eid}")
        key = episode_key(eid)
        try:
            ep = decode_episode(_unseal(key, raw))
        except CodecError as exc:
            raise IntegrityError(f"{_show_key(key)}: {exc}") from None
        check_episode(ep)
        if ep.id != eid:
            raise IntegrityError(f"{_show_key(key)} holds episode {ep.id}")
        return ep

    def _episodes(self, txn: ReadTxn, *, reverse: bool = True) -> Iterator[Episode]:
        """Every episode, newest id first (ULIDs order by time)."""
        for key, _ in txn.scan(EPISODE_PREFIX, reverse=reverse):
            yield self._episode(txn, parse_episode_key(key))

    def _memories_of_episode(self, txn: ReadTxn, eid: MemoryId) -> list[MemoryId]:
        prefix = EPISODE_MEMORY_PREFIX + eid.bytes
        return [parse_episode_memory_key(k)[1] for k in txn.keys(prefix)]

    def _purge_episode(
        self,
        eid: MemoryId,
        reason: str,
        by: str | None = None,
        *,
        scrub: bool = True,
        wait: float = 30.0,
    ) -> Episode:
        """Erase an episode's text and chunks; its hash, times and links stay. Idempotent.

        Writes an erasure record; with ``scrub`` runs the erasure step (as ``purge``).

        Raises:
            NotFoundError: no such episode.
            ValidationError: an empty reason, or a negative ``wait``.
            ErasurePendingError: as for ``purge``.
        """
        if not isinstance(reason, str) or not reason.strip():
            raise ValidationError("reason", "required", "say why the episode is erased")
        _check_wait(wait)
        now = self._now()
        who = by if by is not None else self.actor

        def txn_fn(txn: WriteTxn) -> Episode:
            ep = self._episode(txn, eid)
            if ep.content is None:
                return ep
            gone = purged(ep, now)
            rec = erasure.Recorder(txn)
            evidence.unindex_episode(rec, ep)
            rec.put(episode_key(eid), _seal(encode_episode(gone)))
            entry = _Journal(txn, now, who).append(
                JournalKind.EPISODE_PURGE, id=eid, hash=ep.hash, reason=reason
            )
            _put_erasure(txn, entry.seq, ErasureKind.EPISODE, eid, now, who, [ep.hash], rec)
            return gone

        result: Episode = self._kv.write(txn_fn)
        if scrub:
            self._erase_now(f"episode {eid}", wait, now)
        return result

    def update(
        self,
        ref: Uri | MemoryId | str,
        data: Data,
        *,
        expected_version: int | None = None,
        created_by: str | None = None,
        confidence: float = 1.0,
        provenance: Provenance | None = None,
        forms: Forms | None = None,
        valid_from: datetime | None = None,
        valid_until: datetime | None = None,
        expires_at: datetime | None = None,
        vector: Any = None,
    ) -> Uri:
        """Write a new version of a memory; the head moves to it. Old versions stay readable.

        Args:
            ref: the memory (a URI of any of its versions, its id, or id text).
            data: the new content, of the memory's type.
            expected_version: if given, the update happens only while this is the current
                version (compare-and-swap); otherwise ``ConflictError``.
            created_by: who made this version (default: the store's actor).
            confidence: 0..1.
            provenance: where the content came from (default: user input).
            forms: caller-rendered forms for this version.
            valid_from: when the content starts being true.
            valid_until: when it stops being true.
            expires_at: when the version should no longer be used.
            vector: the new version's embedding, computed by the caller (as ``write``).

        Raises:
            NotFoundError: no such memory.
            ValidationError: the data or options break a rule, or the type differs.
            TombstonedError: the memory is tombstoned.
            ConflictError: ``expected_version`` is stale.
        """
        mid = _as_id(ref, "uri")
        now = self._now()
        spec = NewMemory(
            data=data,
            created_by=created_by,
            confidence=confidence,
            provenance=provenance,
            forms=forms,
            valid_from=valid_from,
            valid_until=valid_until,
            expires_at=expires_at,
            id=mid,
            vector=vector,
        )
        p = self._prepare(spec, now)  # its version is renumbered inside the transaction
        self._embed_prepared([p])

        def txn_fn(txn: WriteTxn) -> Uri:
            head = self._head_for_change(txn, mid)
            if head.type is not p.type:
                raise ValidationError(
                    "data",
                    "type",
                    f"memory {mid} is a {head.type.type_name}; an update must be a "
                    f"{head.type.type_name} too, got {p.type.type_name}",
                )
            if expected_version is not None and expected_version != head.current_version:
                raise ConflictError(
                    f"memory {mid} is at version {head.current_version}, not {expected_version}: "
                    "re-read it and retry"
                )
            n = head.current_version + 1
            version = msgspec.structs.replace(p.version, version=n)
            new_head = msgspec.structs.replace(
                head, current_version=n, last_updated_at=now, forms=version.forms
            )
            if not txn.put(
                version_key(mid, n), _seal(VERSION.encode(version, "version")), overwrite=False
            ):
                raise IntegrityError(f"version {n} of {mid} exists beyond the head")
            txn.put(head_key(mid), _seal(HEAD.encode(new_head, "head")))
            _set_pin(txn, new_head, p.pinned)  # a status or strength may change either way
            lex = Indexer(txn)
            lex.remove(mid)
            lex.add_counted(mid, n, *p.terms)
            lex.flush()
            if p.vector is not None:
                txn.put(vec_key(mid), self._vector_value(n, p.vector))
            else:  # the old version's vector no longer fits; embedded later (sidecar sweep)
                txn.delete(vec_key(mid))
            _Journal(txn, now, self.actor).append(
                JournalKind.UPDATE, id=mid, type=head.type, version=n, hash=version.hash
            )
            return Uri._trusted(head.type, mid, n)

        return self._kv.write(txn_fn)

    def update_head(
        self,
        ref: Uri | MemoryId | str,
        *,
        tags: Sequence[str] | None = None,
        frames: Sequence[FrameRef] | None = None,
        importance: int | None = None,
        visibility: Visibility | str | None = None,
        **other: object,
    ) -> Head:
        """Change a memory's tags, frames, importance or visibility; no new version.

        Index entries are updated to match and the change is journalled (field names only).

        Raises:
            ValidationError: an empty patch, a field that is not patchable, or a bad value.
            NotFoundError: no such memory.
            TombstonedError: the memory is tombstoned.
        """
        if other:
            name = sorted(other)[0]
            raise ValidationError(
                name,
                "immutable",
                "only tags, frames, importance and visibility change through update_head; "
                "write a new version with update() for anything else",
            )
        patch: dict[str, Any] = {}
        if tags is not None:
            patch["tags"] = encode_tags(tags)
        if frames is not None:
            patch["frames"] = _normalize_frames(frames)
        if importance is not None:
            patch["importance"] = importance
        if visibility is not None:
            patch["visibility"] = _coerce(Visibility, visibility, "visibility")
        if not patch:
            raise ValidationError(
                "patch", "empty", "nothing to change: pass tags, frames, importance or visibility"
            )
        mid = _as_id(ref, "uri")
        now = self._now()

        def txn_fn(txn: WriteTxn) -> Head:
            head = self._head_for_change(txn, mid)
            new_head = msgspec.structs.replace(head, last_updated_at=now, **patch)
            payload = HEAD.encode(new_head, "head")  # validates importance and the rest
            self._move_index(txn, head, new_head)
            txn.put(head_key(mid), _seal(payload))
            _Journal(txn, now, self.actor).append(
                JournalKind.UPDATE_HEAD,
                id=mid,
                type=head.type,
                version=head.current_version,
                fields=tuple(sorted(patch)),
            )
            return new_head

        return self._kv.write(txn_fn)

    def tombstone(
        self,
        ref: Uri | MemoryId | str,
        reason: str,
        by: str | None = None,
        *,
        erase: bool = False,
        wait: float = 30.0,
    ) -> Tombstone:
        """Retire a memory: hidden from search, still resolvable for audit. Idempotent.

        With ``erase`` the memory is purged instead (``purge``, with its erasure step): its
        content leaves every record and every file of the store.

        Returns:
            The memory's tombstone (the existing one if it was already tombstoned).

        Raises:
            NotFoundError: no such memory.
            ValidationError: ``reason`` is empty.
            ErasurePendingError: with ``erase``, as for ``purge``.
        """
        if erase:
            return self.purge(ref, reason, by, scrub=True, wait=wait)
        mid = _as_id(ref, "uri")
        now = self._now()
        stone = Tombstone(reason=reason, at=now, by=by if by is not None else self.actor)
        _check_tombstone(stone)

        def txn_fn(txn: WriteTxn) -> Tombstone:
            head = self._head(txn, mid)
            if head.tombstone is not None:
                return head.tombstone
            new_head = msgspec.structs.replace(head, tombstone=stone, last_updated_at=now)
            txn.put(head_key(mid), _seal(HEAD.encode(new_head, "head")))
            lex = Indexer(txn)
            lex.remove(mid)  # a tombstoned memory leaves the lexical index
            lex.flush()
            txn.delete(vec_key(mid))  # and the vector index
            _Journal(txn, now, self.actor).append(
                JournalKind.TOMBSTONE,
                id=mid,
                type=head.type,
                version=head.current_version,
                reason=reason,
            )
            return stone

        return self._kv.write(txn_fn)

    def purge(
        self,
        ref: Uri | MemoryId | str,
        reason: str,
        by: str | None = None,
        *,
        scrub: bool = True,
        wait: float = 30.0,
    ) -> Tombstone:
        """Erase a memory's content: the data, forms, tags and frames of every version go.

        The hashes, the tombstone and the journal stay, so the store can still prove the
        memory existed and was erased; ``verify`` passes. Tombstones the memory if needed.
        Idempotent. Provenance keeps only its kind, the URIs it was derived from and the
        spans of episodes it was drawn from. An erasure record (``er/``) keeps fingerprints
        of every record the purge removed or rewrote, for ``verify_erasure``.

        With ``scrub`` (the default) the erasure step (``scrub``) runs before it returns: no
        byte of the erased content is then left in any file of the store directory
        (``specs/storage.md`` §9). Without it the bytes stay in freed pages until the next
        ``scrub``.

        Args:
            ref: the memory.
            reason: why (journalled).
            by: who asked (default: this handle's actor).
            scrub: run the erasure step now.
            wait: seconds the erasure step waits for read snapshots older than the purge.

        Raises:
            NotFoundError: no such memory.
            ValidationError: ``reason`` is empty, or ``wait`` is negative.
            ErasurePendingError: the memory is purged, but a snapshot opened before the purge
                still holds pages with its bytes after ``wait`` seconds (or the erasure step
                failed); run ``scrub`` once it ends.
        """
        mid = _as_id(ref, "uri")
        now = self._now()
        who = by if by is not None else self.actor
        _check_tombstone(Tombstone(reason=reason, at=now, by=who))
        _check_wait(wait)

        def txn_fn(txn: WriteTxn) -> Tombstone:
            head = self._head(txn, mid)
            if head.tombstone is not None and head.tombstone.purged_at is not None:
                return head.tombstone
            stone = head.tombstone or Tombstone(reason=reason, at=now, by=who)
            stone = msgspec.structs.replace(stone, purged_at=now)
            # the vector goes below, so the head must stop pointing at it
            new_head = msgspec.structs.replace(
                head,
                tombstone=stone,
                tags=(),
                frames=(),
                forms=None,
                embedding_ref=None,
                last_updated_at=now,
            )
            rec = erasure.Recorder(txn)
            hashes: list[bytes] = []
            current_hash: bytes | None = None
            for key, value in list(txn.scan(version_prefix(mid))):
                v: Version = _trusted(VERSION, key, value)
                hashes.append(v.hash)
                if v.version == head.current_version:
                    current_hash = v.hash
                erased = msgspec.structs.replace(
                    v, data=None, forms=None, provenance=_erased_provenance(v.provenance)
                )
                rec.put(key, _seal(VERSION.encode(erased, "version")))
            self._move_index(txn, head, new_head)
            _set_pin(txn, head, False)  # the data is erased
            lex = Indexer(rec)
            if lex.remove(mid):  # absent already when the memory was tombstoned first
                lex.flush()
            rec.delete(vec_key(mid))
            txn.delete(salience_key(mid))
            rec.put(head_key(mid), _seal(HEAD.encode(new_head, "head")))
            entry = _Journal(txn, now, self.actor).append(
                JournalKind.PURGE,
                id=mid,
                type=head.type,
                version=head.current_version,
                hash=current_hash,
                reason=reason,
            )
            _put_erasure(txn, entry.seq, ErasureKind.MEMORY, mid, now, who, hashes, rec)
            return stone

        stone: Tombstone = self._kv.write(txn_fn)
        if scrub:
            self._erase_now(f"memory {mid}", wait, now)
        return stone

    def scrub(self, *, wait: float = 30.0) -> ScrubReport:
        """The erasure step: zero every byte of the store's files that no reader can read again.

        Commits ``meta/scrub`` (so that the pages the last commits released from the previous
        meta page's tree may be reused), waits up to ``wait`` seconds for read snapshots older
        than that, then, holding the writer lock (writers wait, readers go on), overwrites with
        zeros every free page LMDB may reuse, every page gap and the unused end of every large
        value (``cortex.scrub``). A kill at any point leaves the store consistent.

        Returns:
            What it did; ``complete`` is False when a snapshot older than the step still held
            pages after ``wait`` seconds (run it again once the snapshot ends).

        Raises:
            ValidationError: ``wait`` is negative.
            CortexError: the store is read-only, the host is not 64-bit little-endian, or
                ``data.mdb`` does not parse as LMDB 0.9 (then nothing is written).
        """
        _check_wait(wait)
        return self._scrub(wait, self._now())

    def _scrub(self, wait: float, now: datetime) -> ScrubReport:
        started = time.perf_counter()

        def mark(txn: WriteTxn) -> int:
            raw = txn.get(SCRUB_KEY)
            count = 1 if raw is None else _trusted(SCRUB_CODEC, SCRUB_KEY, raw).count + 1
            record = ScrubMark(at=now, by=self.actor, count=count)
            txn.put(SCRUB_KEY, _seal(SCRUB_CODEC.encode(record, "meta/scrub")))
            return self._kv.refresh_separators(txn, erasure.KEYED_CONTENT)

        # the pages that held stale separators are freed by the commit that rewrote them: one
        # more commit lets them be zeroed (a few rounds at most: a rewrite makes new ones rarely)
        rewritten = 0
        for _ in range(4):
            found = self._kv.write(mark)
            rewritten += found
            if not found:
                break
        target = self._kv.last_txnid() - 1
        self._kv.wait_for_snapshots(target, wait)
        counts, snapshots = self._kv.zero_unused()
        holding = tuple(sorted((pid, t) for pid, t in snapshots if t <= target))
        return ScrubReport(
            complete=not holding,
            free_pages=counts.free_pages,
            free_pages_zeroed=counts.free_pages_zeroed,
            held_pages=counts.held_pages,
            gaps_zeroed=counts.gaps_zeroed,
            tails_zeroed=counts.tails_zeroed,
            beyond_pages_zeroed=counts.beyond_pages_zeroed,
            bytes_zeroed=counts.bytes_zeroed,
            holding=holding,
            separators=rewritten,
            seconds=time.perf_counter() - started,
        )

    def verify_erasure(self) -> ErasureReport:
        """Audit every erasure: nothing a purge erased is left in a record or in any file.

        For each erasure record (``er/``): the memory's or episode's records hold no content
        (no data, forms, tags, frames or caller text in provenance; no lexical document,
        vector or use counters; an episode without text, chunks, evidence or chunk vectors).
        Then every file under the store directory is scanned, byte by byte, for the record's
        needles (``cortex.erasure``); a match in ``data.mdb`` is placed in the page structure
        under the writer lock (writers wait for that part only). A match inside a live record
        (or a branch-page copy of a key that exists) is *shared*: the same bytes are live
        content. Anything else — free space, page gaps, a copy of a deleted key, another file —
        is a *residue*.

        Returns:
            The report; ``ok`` when there is no residue and no problem.

        Raises:
            CortexError: the store is read-only (the audit reads ``data.mdb`` under the writer
                lock) or a file cannot be read.
        """
        started = time.perf_counter()
        problems: list[tuple[str, str]] = []
        records: list[ErasureRecord] = []
        with self._kv.read() as txn:
            for key, value in txn.scan(ERASURE_PREFIX):
                try:
                    rec: ErasureRecord = ERASURE_CODEC.decode(_unseal(key, value), "erasure")
                except (IntegrityError, CodecError) as exc:
                    problems.append((_show_key(key), str(exc)))
                    continue
                records.append(rec)
                problems.extend(_leftovers(txn, rec))
        needles = erasure.Needles(records)
        root = Path(self.path)
        names: list[str] = []
        scanned = 0
        hits: dict[str, list[tuple[int, bytes]]] = {}
        for path in erasure.store_files(root):
            name = path.relative_to(root).as_posix()
            size, found = erasure.scan_file(path, needles)
            names.append(name)
            scanned += size
            if found:
                hits[name] = found
        data_hits = hits.pop("data.mdb", [])

        def place(buf: Any, layout: Layout) -> tuple[list[_Placed], int, int, list[bytes]]:
            placed = []
            for offset, needle in data_hits:
                if needles.match(bytes(buf[offset : offset + erasure.WINDOW])) != needle:
                    continue  # rewritten since the scan
                region = layout.region(buf, offset)
                key = layout.node_key(buf, offset) if region == "node" else None
                if region == "node" and layout.is_branch(offset):
                    region = "branch"  # a key's copy: live only if that key still exists
                placed.append((offset, needle, region, key))
            unused = sum(n for _, n, _ in unused_ranges(buf, layout))
            keyed = [k for k, _ in separators(buf, layout, KEYED_CONTENT)]
            return placed, unused, layout.held_count(), keyed

        placed, unscrubbed, held, keyed = self._kv.inspect(place)
        with self._kv.read() as txn:
            stale = sum(1 for k in keyed if txn.get(k) is None)
            placed = [
                (off, needle, ("node" if txn.get(key) is not None else "separator"), key)
                if region == "branch" and key is not None
                else (off, needle, region, key)
                for off, needle, region, key in placed
            ]
        live = {needle for _, needle, region, _ in placed if region in ("node", "overflow")}
        residues: list[Residue] = []
        shared: list[Residue] = []
        found_all: list[tuple[str, int, bytes, str, bytes | None]] = [
            ("data.mdb", off, needle, region, key) for off, needle, region, key in placed
        ]
        for name, found in hits.items():
            if name.endswith(".hnsw"):  # the vector index cache: placed like data.mdb
                regions = saved_region(root / name, [off for off, _ in found])
            else:
                regions = ["file"] * len(found)
            for (off, needle), region in zip(found, regions, strict=True):
                found_all.append((name, off, needle, region, None))
                if region == "vector":
                    live.add(needle)
        for name, offset, needle, region, live_key in found_all:
            for seq in needles.owner[needle]:
                rec = needles.records[seq]
                residue = Residue(
                    file=name,
                    offset=offset,
                    region=region,
                    seq=seq,
                    id=str(rec.id),
                    key=None if live_key is None else _show_key(live_key),
                )
                (shared if needle in live else residues).append(residue)
        return ErasureReport(
            ok=not residues and not problems,
            records=len(records),
            needles=len(needles),
            files=tuple(names),
            scanned=scanned,
            residues=tuple(residues),
            shared=tuple(shared),
            problems=tuple(problems),
            unscrubbed=unscrubbed,
            held_pages=held,
            stale_separators=stale,
            seconds=time.perf_counter() - started,
        )

    def _erase_now(self, what: str, wait: float, now: datetime) -> ScrubReport:
        """Run the erasure step after a purge; raise ``ErasurePendingError`` unless complete.

        The step is marked with the purge's time, so that a purge reads the clock once.
        """
        try:
            report = self._scrub(wait, now)
        except CortexError as exc:
            raise ErasurePendingError(
                f"{what} is purged (no read returns its content), but the erasure step failed: "
                f"{exc}; its bytes stay in freed pages until `cortex scrub` succeeds"
            ) from exc
        if not report.complete:
            pids = ", ".join(f"pid {pid} (txn {t})" for pid, t in report.holding)
            raise ErasurePendingError(
                f"{what} is purged (no read returns its content), but read snapshots opened "
                f"before the purge still hold pages with its bytes after {wait:g} s: {pids}; "
                "run `cortex scrub` (Store.scrub()) once they end, or purge again",
                report,
            )
        return report

    # -- import and backup -------------------------------------------------------------------

    def import_records(
        self,
        memories: Iterable[tuple[Head, Sequence[Version]]],
        edges: Iterable[Edge] = (),
        episodes: Iterable[Episode] = (),
    ) -> ImportReport:
        """Bring in memories with all their versions, and edges, exactly as they were.

        Ids, versions, hashes, times, heads and edge records are kept byte for byte. Every
        record is validated and every version's data checked against its hash before the one
        write transaction starts. A memory or edge the store already holds with identical
        records is left alone, so importing the same records again changes nothing; one it
        holds with different records is a conflict. Each memory and edge brought in gets one
        ``import`` journal entry. On any error nothing is written.

        Args:
            memories: ``(head, versions)`` pairs; ``versions`` are 1..``head.current_version``
                in order.
            edges: edges between imported or existing memories (removed ones too).
            episodes: episode records (purged ones too), checked (hash, chunks) and kept byte
                for byte; every imported memory whose versions name an episode is indexed
                under it (``prov/e/``).

        Returns:
            How many memories, versions, edges and episodes were added or already present.

        Raises:
            IntegrityError: a version's data does not match its hash.
            ValidationError: a record breaks a rule, or a memory or edge is given twice.
            CodecError: a version's data is not a canonical record of its type.
            ConflictError: the store holds a memory or edge of that name with other records.
            NotFoundError: an edge's endpoint is neither imported nor in the store.
        """
        items = [_Imported(head, versions) for head, versions in memories]
        if len({item.head.id for item in items}) != len(items):
            raise ValidationError("memories", "unique", "a memory is given more than once")
        eps: dict[MemoryId, bytes] = {}
        for ep in episodes:
            check_episode(ep)
            if ep.id in eps:
                raise ValidationError("episodes", "unique", f"episode {ep.id} is given twice")
            eps[ep.id] = _seal(encode_episode(ep))
        drawn = [
            (found[0], item.head.id)
            for item in items
            for found in {episode_source(v.provenance) for v in item.versions}
            if found is not None
        ]
        links: dict[bytes, tuple[MemoryId, EdgeType, MemoryId, bytes]] = {}
        for e in edges:
            if e.src == e.dst:
                raise ValidationError("edges", "self_edge", f"an edge from {e.src} to itself")
            rec = EdgeRecord(
                created_at=e.created_at,
                created_by=e.created_by,
                weight=e.weight,
                removed_at=e.removed_at,
                removed_by=e.removed_by,
            )
            key = edge_from_key(e.src, e.type, e.dst)
            if key in links:
                raise ValidationError(
                    "edges", "unique", f"edge {e.src} {e.type.label} {e.dst} twice"
                )
            links[key] = (e.src, e.type, e.dst, _seal(EDGE_CODEC.encode(rec, "edge")))
        now = self._now()

        def txn_fn(txn: WriteTxn) -> ImportReport:
            journal = _Journal(txn, now, self.actor)
            lex = Indexer(txn)
            added = same = versions = edges_added = edges_same = 0
            for item in items:
                if txn.get(head_key(item.head.id)) is not None:
                    if not item.held_by(txn):
                        raise ConflictError(
                            f"memory {item.head.id} already exists with other records (head or "
                            "versions differ); nothing was imported"
                        )
                    same += 1
                    continue
                self._put_imported(txn, item, lex)
                last = item.versions[-1]
                journal.append(
                    JournalKind.IMPORT,
                    id=last.id,
                    type=last.type,
                    version=last.version,
                    hash=last.hash,
                )
                added += 1
                versions += len(item.versions)
            for fkey, (s, et, d, payload) in links.items():
                for which, mid in (("src", s), ("dst", d)):
                    if txn.get(head_key(mid)) is None:
                        raise NotFoundError(
                            f"edge {s} {et.label} {d}: {which} {mid} does not exist"
                        )
                old = txn.get(fkey)
                if old is not None:
                    if old != payload:
                        raise ConflictError(
                            f"edge {s} {et.label} {d} already exists with another record; "
                            "nothing was imported"
                        )
                    edges_same += 1
                    continue
                txn.put(fkey, payload)
                txn.put(edge_to_key(d, et, s), payload)
                journal.append(JournalKind.IMPORT, id=s, edge=et, dst=d)
                edges_added += 1
            eps_added = eps_same = 0
            for eid, sealed in eps.items():
                old = txn.get(episode_key(eid))
                if old is not None:
                    if old != sealed:
                        raise ConflictError(
                            f"episode {eid} already exists with another record; nothing was "
                            "imported"
                        )
                    eps_same += 1
                    continue
                txn.put(episode_key(eid), sealed)
                imported = decode_episode(_unseal(episode_key(eid), sealed))
                evidence.index_episode(txn, imported)
                journal.append(JournalKind.EPISODE, id=eid, hash=imported.hash, reason="import")
                eps_added += 1
            for eid, mid in drawn:
                if txn.get(episode_key(eid)) is not None:
                    txn.put(episode_memory_key(eid, mid), b"")
            lex.flush()
            return ImportReport(
                memories_added=added,
                memories_unchanged=same,
                versions_added=versions,
                edges_added=edges_added,
                edges_unchanged=edges_same,
                episodes_added=eps_added,
                episodes_unchanged=eps_same,
            )

        return self._kv.write(txn_fn)

    def _put_imported(self, txn: WriteTxn, item: _Imported, lex: Indexer) -> None:
        """Write an imported memory's head, versions, index entries and lexical postings."""
        txn.put(head_key(item.head.id), item.head_bytes)
        for v, sealed in zip(item.versions, item.version_bytes, strict=True):
            if not txn.put(version_key(v.id, v.version), sealed, overwrite=False):
                raise IntegrityError(f"version {v.version} of {v.id} exists without its head")
        for k in _index_keys(item.head):
            txn.put(k, b"")
        if is_pinned(item.data):
            txn.put(_pin_key(item.head), b"")
        last = item.versions[-1]
        if item.head.tombstone is None and item.data is not None:
            lex.add(item.head.id, last.version, lexical.analyze(item.data))

    def backup(self, dest: str | os.PathLike[str]) -> VerifyReport:
        """Write a consistent, compacted copy of the store to the new directory ``dest``.

        Writers may keep writing meanwhile: the copy is one read snapshot. The copy is then
        opened and verified.

        Returns:
            The verify report of the copy.

        Raises:
            CortexError: ``dest`` exists or cannot be written.
        """
        try:
            self._kv.copy(dest)
        except FileExistsError:
            raise CortexError(f"{dest} exists; a backup goes into a new directory") from None
        except OSError as exc:
            raise CortexError(f"cannot write the backup to {dest}: {exc}") from exc
        with type(self).open(dest, actor=self.actor, create=False) as copy:
            return copy.verify()

    # -- edges -------------------------------------------------------------------------------

    def add_edge(
        self,
        src: Uri | MemoryId | str,
        type: EdgeType | str,
        dst: Uri | MemoryId | str,
        *,
        by: str | None = None,
        weight: float | None = None,
    ) -> Edge:
        """Link two memories. Adding a live edge again changes nothing; a removed one revives.

        Raises:
            ValidationError: a self-edge, an unknown edge type or a bad weight.
            NotFoundError: an endpoint does not exist.
        """
        s, d = _as_id(src, "src"), _as_id(dst, "dst")
        et: EdgeType = _coerce(EdgeType, type, "type")
        if s == d:
            raise ValidationError("dst", "self_edge", f"an edge from {s} to itself is not allowed")
        now = self._now()
        record = EdgeRecord(
            created_at=now, created_by=by if by is not None else self.actor, weight=weight
        )
        try:
            payload = _seal(EDGE_CODEC.enc(record))
        except _Invalid as exc:
            raise ValidationError(exc.where.lstrip("."), exc.rule, exc.message) from None

        def txn_fn(txn: WriteTxn) -> Edge:
            for which, mid in (("src", s), ("dst", d)):
                if txn.get(head_key(mid)) is None:
                    raise NotFoundError(f"{which} memory {mid} does not exist")
            fkey = edge_from_key(s, et, d)
            old = txn.get(fkey)
            if old is not None:
                existing: EdgeRecord = _trusted(EDGE_CODEC, fkey, old)
                if existing.removed_at is None:
                    return _edge(s, et, d, existing)
            txn.put(fkey, payload)
            txn.put(edge_to_key(d, et, s), payload)
            _Journal(txn, now, self.actor).append(JournalKind.ADD_EDGE, id=s, edge=et, dst=d)
            return _edge(s, et, d, record)

        return self._kv.write(txn_fn)

    def remove_edge(
        self,
        src: Uri | MemoryId | str,
        type: EdgeType | str,
        dst: Uri | MemoryId | str,
        *,
        by: str | None = None,
    ) -> Edge:
        """Softly remove an edge: it stays, marked removed. Removing it again changes nothing.

        Raises:
            NotFoundError: there is no such edge.
        """
        s, d = _as_id(src, "src"), _as_id(dst, "dst")
        et: EdgeType = _coerce(EdgeType, type, "type")
        now = self._now()
        who = by if by is not None else self.actor

        def txn_fn(txn: WriteTxn) -> Edge:
            fkey = edge_from_key(s, et, d)
            old = txn.get(fkey)
            if old is None:
                raise NotFoundError(f"no {et.label} edge from {s} to {d}")
            rec: EdgeRecord = _trusted(EDGE_CODEC, fkey, old)
            if rec.removed_at is not None:
                return _edge(s, et, d, rec)
            rec = msgspec.structs.replace(rec, removed_at=now, removed_by=who)
            payload = _seal(EDGE_CODEC.encode(rec, "edge"))
            txn.put(fkey, payload)
            txn.put(edge_to_key(d, et, s), payload)
            _Journal(txn, now, self.actor).append(JournalKind.REMOVE_EDGE, id=s, edge=et, dst=d)
            return _edge(s, et, d, rec)

        return self._kv.write(txn_fn)

    def edges(
        self,
        ref: Uri | MemoryId | str,
        *,
        direction: Literal["out", "in", "both"] = "out",
        types: Iterable[EdgeType | str] | None = None,
        include_removed: bool = False,
    ) -> list[Edge]:
        """Edges of a memory, outgoing (``out``), incoming (``in``) or both, in key order.

        Raises:
            IntegrityError: an edge record is damaged or its two halves disagree.
        """
        mid = _as_id(ref)
        if direction not in ("out", "in", "both"):
            raise ValidationError("direction", "enum", "must be 'out', 'in' or 'both'")
        wanted = None if types is None else {_coerce(EdgeType, t, "types") for t in types}
        out = []
        with self._kv.read() as txn:
            prefixes = []
            if direction in ("out", "both"):
                prefixes.append(EDGE_FROM + mid.bytes)
            if direction in ("in", "both"):
                prefixes.append(EDGE_TO + mid.bytes)
            for prefix in prefixes:
                for key, value in txn.scan(prefix):
                    s, et, d = parse_edge_key(key)
                    if wanted is not None and et not in wanted:
                        continue
                    rec: EdgeRecord = _trusted(EDGE_CODEC, key, value)
                    from_half = key.startswith(EDGE_FROM)
                    twin = edge_to_key(d, et, s) if from_half else edge_from_key(s, et, d)
                    if txn.get(twin) != value:
                        raise IntegrityError(
                            f"the two halves of edge {s} {et.label} {d} differ or one is "
                            "missing: the store is damaged"
                        )
                    if rec.removed_at is not None and not include_removed:
                        continue
                    out.append(_edge(s, et, d, rec))
        return out

    # -- reads -------------------------------------------------------------------------------

    def _head(self, txn: ReadTxn, mid: MemoryId) -> Head:
        key = head_key(mid)
        raw = txn.get(key)
        if raw is None:
            raise NotFoundError(f"no memory {mid}")
        head: Head = _trusted(HEAD, key, raw)
        if head.id != mid:  # keys carry no checksum: a damaged key can point at another record
            raise IntegrityError(f"record {_show_key(key)} holds the head of {head.id}")
        return head

    def _head_for_change(self, txn: ReadTxn, mid: MemoryId) -> Head:
        head = self._head(txn, mid)
        if head.tombstone is not None:
            raise TombstonedError(
                f"memory {mid} was tombstoned ({head.tombstone.reason}); it can be resolved for "
                "audit but not changed"
            )
        return head

    def _version(self, txn: ReadTxn, mid: MemoryId, n: int) -> Version:
        """Version ``n`` of a memory whose head says it exists (``n <= current_version``)."""
        key = version_key(mid, n)
        raw = txn.get(key)
        if raw is None:
            raise IntegrityError(
                f"version {n} of memory {mid} is missing although its head points at it: "
                "the store is damaged"
            )
        return self._checked_version(key, raw, mid, n)

    @staticmethod
    def _checked_version(
        key: bytes, raw: bytes, mid: MemoryId | None = None, n: int = 0
    ) -> Version:
        """The version stored under ``key`` (version ``n`` of ``mid``, when the caller knows)."""
        v: Version = _trusted(VERSION, key, raw)
        if (
            (v.id != mid or v.version != n)
            if mid is not None
            else version_key(v.id, v.version) != key
        ):
            raise IntegrityError(f"record {_show_key(key)} holds version {v.id}#{v.version}")
        if v.data is not None and content_hash(v.type, v.data) != v.hash:
            raise IntegrityError(f"version {_show_key(key)}: data does not match its hash")
        return v

    @staticmethod
    def _memory(head: Head, v: Version) -> Memory:
        data = None
        if v.data is not None:
            try:
                data = decode_data_trusted(v.type, v.data)
            except CodecError as exc:
                raise IntegrityError(f"version {v.id}#{v.version}: {exc}") from None
        return Memory(uri=Uri._trusted(v.type, v.id, v.version), head=head, version=v, data=data)

    def resolve(self, uri: Uri | str) -> Memory:
        """The exact version a URI names (tombstoned memories too, for audit).

        Raises:
            ValidationError: the URI is malformed (e.g. has no version or ``#latest``).
            NotFoundError: no such memory or version, or the URI's type is wrong.
            IntegrityError: the head or the version is damaged or missing.
        """
        u = Uri.parse(uri)
        with self._kv.read() as txn:
            head = self._head(txn, u.id)
            if head.type is not u.type:
                raise NotFoundError(f"no {u.type.type_name} {u.id}")
            if u.version > head.current_version:
                raise NotFoundError(f"no version {u.version} of memory {u.id}")
            v = self._version(txn, u.id, u.version)
        return self._memory(head, v)

    def resolve_latest(self, ref: Uri | MemoryId | str) -> Memory:
        """The current version of a memory.

        Raises:
            NotFoundError: no such memory.
            IntegrityError: the head or the version is damaged or missing.
        """
        mid = _as_id(ref)
        with self._kv.read() as txn:
            head = self._head(txn, mid)
            v = self._version(txn, mid, head.current_version)
        return self._memory(head, v)

    def history(self, ref: Uri | MemoryId | str) -> list[Memory]:
        """Every version of a memory, oldest first.

        Raises:
            NotFoundError: no such memory.
            IntegrityError: the head or a version is damaged, or a version is missing.
        """
        mid = _as_id(ref)
        with self._kv.read() as txn:
            head = self._head(txn, mid)
            versions = [self._checked_version(k, v) for k, v in txn.scan(version_prefix(mid))]
        if [(v.id, v.version) for v in versions] != [
            (mid, n) for n in range(1, head.current_version + 1)
        ]:
            raise IntegrityError(
                f"memory {mid} points at versions 1..{head.current_version} but the store holds "
                f"{[v.version for v in versions]}: the store is damaged"
            )
        return [self._memory(head, v) for v in versions]

    def resolve_as_of(
        self, ref: Uri | MemoryId | str, when: datetime, *, known_at: datetime | None = None
    ) -> Memory:
        """The version that was current at ``when``.

        Only versions the store held at ``known_at`` (default: ``when``) count; of those, the
        newest whose validity window ``[valid_from, valid_until)`` contains ``when`` wins. A
        memory tombstoned at or before ``known_at`` has no current version.

        Raises:
            NotFoundError: the memory did not exist then, was tombstoned, or no version was
                valid at ``when``.
        """
        mid = _as_id(ref)
        t = to_micros(when)
        k = to_micros(known_at) if known_at is not None else t
        with self._kv.read() as txn:
            head = self._head(txn, mid)
            if head.tombstone is not None and to_micros(head.tombstone.at) <= k:
                raise NotFoundError(f"memory {mid} was tombstoned at {head.tombstone.at}")
            for key, raw in txn.scan(version_prefix(mid), reverse=True):
                v = self._checked_version(key, raw)
                if to_micros(v.created_at) > k:
                    continue
                if v.valid_from is not None and to_micros(v.valid_from) > t:
                    continue
                if v.valid_until is not None and to_micros(v.valid_until) <= t:
                    continue
                return self._memory(head, v)
        raise NotFoundError(f"memory {mid} had no valid version at {when.isoformat()}")

    def journal(
        self, start: int = 1, *, reverse: bool = False, limit: int | None = None
    ) -> Iterator[JournalEntry]:
        """Journal entries from sequence number ``start`` (or backwards from it), at most ``limit``.

        Every link of the chain among the entries read, and to the entry before them, is
        checked, so an entry altered with a matching checksum is caught too (all but the last
        entry, which nothing after it vouches for).

        Raises:
            IntegrityError: an entry fails its checksum, does not decode, or breaks the chain.
        """
        with self._kv.read() as txn:
            scan = txn.scan(JOURNAL, start=journal_key(max(start, 0)), reverse=reverse)
            pairs = list(itertools.islice(scan, limit))
            if reverse:
                pairs.reverse()
            prev, seq = _ZERO_HASH, 0
            if pairs and parse_journal_key(pairs[0][0]) > 1:
                seq = parse_journal_key(pairs[0][0]) - 1
                raw = txn.get(journal_key(seq))
                if raw is None:
                    raise IntegrityError(f"journal entry j/{seq} is missing: the store is damaged")
                prev = hashlib.sha256(_unseal(journal_key(seq), raw)).digest()
        entries: list[JournalEntry] = []
        for key, value in pairs:
            entry: JournalEntry = _trusted(JOURNAL_CODEC, key, value)
            if entry.seq != seq + 1 or parse_journal_key(key) != entry.seq:
                raise IntegrityError(
                    f"journal entry {_show_key(key)} holds sequence {entry.seq} where {seq + 1} "
                    "was expected: the store is damaged"
                )
            if entry.prev != prev:
                raise IntegrityError(
                    f"journal entry {_show_key(key)} breaks the chain: it or the entry before it "
                    "was altered"
                )
            prev, seq = hashlib.sha256(_unseal(key, value)).digest(), entry.seq
            entries.append(entry)
        if reverse:
            entries.reverse()
        yield from entries

    # -- search ------------------------------------------------------------------------------

    def _lexical_search(
        self,
        query: str,
        limit: int,
        allow: Callable[[MemoryId], bool] | Collection[MemoryId] | None = None,
    ) -> list[tuple[MemoryId, float]]:
        """BM25 ranking of the live memories for ``query`` (for the query planner).

        Args:
            query: free text.
            limit: how many ``(id, score)`` pairs at most, best first, ties by id ascending.
            allow: only ids this predicate (or collection) accepts are ranked.

        Raises:
            IntegrityError: an index record is damaged.
        """
        with self._kv.read() as txn:
            return lexical.search(txn, query, limit=limit, allow=allow)

    def _reindex_lexical(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Rebuild the lexical index from the live memories, in one write transaction.

        The index is derived data: this repairs one that ``verify`` reports damaged (the
        ``cortex reindex`` command). Nothing else changes and nothing is journalled.

        Args:
            progress: called as ``progress(done, total)`` while memories are indexed.

        Returns:
            How many memories were indexed.
        """

        def fn(txn: WriteTxn) -> int:
            total = len(_live_heads(txn)) if progress is not None else 0
            tick = None if progress is None else (lambda done: progress(done, total))
            return _rebuild_lexical(txn, tick)

        return self._kv.write(fn)

    def reindex_lexical(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Rebuild the lexical (BM25) index from the live memories (``cortex reindex``).

        The index is derived data, kept in step with the records by every write; this repairs
        one that ``verify`` reports damaged, in one write transaction: the old postings,
        document and term records and ``meta/lexical`` are dropped and the current version of
        every live memory is indexed again, so the result is the index a store written from
        scratch would hold. No memory, edge or journal entry changes, and nothing is journalled
        (the journal records changes to memories; a rebuild changes none).

        Args:
            progress: called as ``progress(done, total)`` while memories are indexed.

        Returns:
            How many memories were indexed.

        Raises:
            ValidationError: ``progress`` is not callable.
            IntegrityError: a head or the version it points at is damaged (nothing is
                written): run ``cortex verify``.
            CortexError: the store is read-only or cannot be written.
        """
        if progress is not None and not callable(progress):
            raise ValidationError("progress", "type", "must be a callable or None")
        return self._reindex_lexical(progress)

    # -- housekeeping ------------------------------------------------------------------------

    def _move_index(self, txn: WriteTxn, old: Head, new: Head) -> None:
        before, after = set(_index_keys(old)), set(_index_keys(new))
        for k in before - after:
            txn.delete(k)
        for k in after - before:
            txn.put(k, b"")

    def stats(self) -> dict[str, Any]:
        """Counts (memories by type and state, versions, edges, journal) and sizes."""
        by_type = {t.type_name: 0 for t in MemoryType}
        live = tombstoned = purged = versions = edges = journal = 0
        with self._kv.read() as txn:
            for key, value in txn.scan(_HEAD_KEY_PREFIX):
                head: Head = _trusted(HEAD, key, value)
                by_type[head.type.type_name] += 1
                versions += head.current_version
                if head.tombstone is None:
                    live += 1
                elif head.tombstone.purged_at is None:
                    tombstoned += 1
                else:
                    purged += 1
            edges = sum(1 for _ in txn.keys(EDGE_FROM))
            last = next(txn.keys(JOURNAL, reverse=True), None)
            journal = parse_journal_key(last) if last is not None else 0
            lex = lexical.read_stats(txn)
        info = self._kv.info()
        return {
            "format_version": self.format.format_version,
            "owner": self.format.owner,
            "memories": live + tombstoned + purged,
            "live": live,
            "tombstoned": tombstoned,
            "purged": purged,
            "by_type": by_type,
            "versions": versions,
            "edges": edges,
            "journal_entries": journal,
            "lexical": {
                "documents": lex.documents,
                "terms": lex.terms,
                "postings": lex.postings,
                "average_length": lex.total_length / lex.documents if lex.documents else 0.0,
            },
            "map_size": info["map_size"],
            "used_bytes": info["used_bytes"],
        }

    def verify(self, progress: Callable[[int, int], None] | None = None) -> VerifyReport:
        """Check the whole store, reading it in one snapshot.

        Re-hashes every version, checks that every head points at exactly its versions, that
        every index entry matches a head and every head has its entries, that both halves of
        every edge agree and their endpoints exist, that the journal chain is unbroken, and
        that every record decodes strictly (canonical CBOR) and passes its checksum.

        Args:
            progress: called as ``progress(phase, 7)`` as each of the seven phases (heads,
                versions, indexes, edges, journal, vectors, lexical index) starts, and
                ``progress(7, 7)`` at the end.

        Returns:
            The report; ``report.ok`` is true when nothing is wrong.
        """
        problems: list[Problem] = []
        add = problems.append
        heads: dict[MemoryId, Head] = {}
        counts = {"versions": 0, "index": 0, "edges": 0, "journal": 0}
        current: dict[MemoryId, bytes] = {}  # the data of each memory's current version
        pinned: set[MemoryId] = set()  # memories whose current version's data is pinned

        def tick(phase: int) -> None:
            if progress is not None:
                progress(phase, 7)

        def strict(codec: StructCodec[Any], key: bytes, value: bytes) -> Any:
            try:
                return codec.decode(_unseal(key, value), _show_key(key))
            except (IntegrityError, CodecError) as exc:
                add(Problem(_show_key(key), str(exc)))
                return None

        with self._kv.read() as txn:
            fmt = txn.get(meta_key("format"))
            if fmt is None:
                add(Problem("meta/format", "missing"))
            else:
                strict(FORMAT_CODEC, meta_key("format"), fmt)
            tick(0)
            for key, value in txn.scan(_HEAD_KEY_PREFIX):
                head = strict(HEAD, key, value)
                if head is None:
                    continue
                if head_key(head.id) != key:
                    add(Problem(_show_key(key), f"holds the head of {head.id}"))
                    continue
                heads[head.id] = head
            seen_versions: dict[MemoryId, list[int]] = {}
            tick(1)
            for key, value in txn.scan(_VERSION_KEY_PREFIX):
                counts["versions"] += 1
                try:
                    mid, n = parse_version_key(key)
                except (CodecError, ValueError):
                    add(Problem(key.hex(), "malformed version key"))
                    continue
                seen_versions.setdefault(mid, []).append(n)
                v = strict(VERSION, key, value)
                if v is None:
                    continue
                name = _show_key(key)
                if v.id != mid or v.version != n:
                    add(Problem(name, f"holds version {v.id}#{v.version}"))
                head = heads.get(mid)
                if head is None:
                    add(Problem(name, "has no head"))
                    continue
                if v.type is not head.type:
                    add(Problem(name, f"type {v.type.type_name} differs from the head's"))
                purged = head.tombstone is not None and head.tombstone.purged_at is not None
                if v.data is None:
                    if not purged:
                        add(Problem(name, "has no data but the memory was not purged"))
                    continue
                if purged:
                    add(Problem(name, "still holds data although the memory was purged"))
                if content_hash(v.type, v.data) != v.hash:
                    add(Problem(name, "data does not match its hash"))
                    continue
                try:
                    data = decode_data(v.type, v.data)
                except CodecError as exc:
                    add(Problem(name, f"data: {exc}"))
                    continue
                if n == head.current_version:
                    current[mid] = v.data
                    if is_pinned(data):
                        pinned.add(mid)
            for mid, head in heads.items():
                ns = seen_versions.get(mid, [])
                if ns != list(range(1, head.current_version + 1)):
                    add(
                        Problem(
                            f"m/{mid}",
                            f"points at versions 1..{head.current_version} but the store holds "
                            f"{ns}",
                        )
                    )
            expected: set[bytes] = set()
            for head in heads.values():
                expected.update(_index_keys(head))
                if head.id in pinned:
                    expected.add(_pin_key(head))
            actual: set[bytes] = set()
            tick(2)
            for prefix in (IDX_TYPE, IDX_TAG, IDX_FRAME, IDX_ACTOR_OBJ, IDX_PIN):
                for key, value in txn.scan(prefix):
                    counts["index"] += 1
                    actual.add(key)
                    if value:
                        add(Problem(f"index {key.hex()}", "index entries hold no value"))
            for key in sorted(actual - expected):
                add(Problem(f"index {key.hex()}", "matches no head (stale index entry)"))
            for key in sorted(expected - actual):
                add(Problem(f"index {key.hex()}", "missing for its head"))
            tick(3)
            for key, value in txn.scan(EDGE_FROM):
                counts["edges"] += 1
                try:
                    s, et, d = parse_edge_key(key)
                except (CodecError, ValueError):
                    add(Problem(key.hex(), "malformed edge key"))
                    continue
                name = f"edge {s} {et.label} {d}"
                strict(EDGE_CODEC, key, value)
                if txn.get(edge_to_key(d, et, s)) != value:
                    add(Problem(name, "its e/to half is missing or differs"))
                for mid in (s, d):
                    if mid not in heads:
                        add(Problem(name, f"endpoint {mid} does not exist"))
            for key, _value in txn.scan(EDGE_TO):
                try:
                    s, et, d = parse_edge_key(key)
                except (CodecError, ValueError):
                    add(Problem(key.hex(), "malformed edge key"))
                    continue
                if txn.get(edge_from_key(s, et, d)) is None:
                    add(Problem(f"edge {s} {et.label} {d}", "its e/from half is missing"))
            prev: bytes | None = _ZERO_HASH
            expect_seq = 1
            erasures: dict[int, tuple[JournalKind, MemoryId | None]] = {}
            tick(4)
            for key, value in txn.scan(JOURNAL):
                counts["journal"] += 1
                name = _show_key(key)
                try:
                    payload = _unseal(key, value)
                    entry: JournalEntry = JOURNAL_CODEC.decode(payload, name)
                except (IntegrityError, CodecError) as exc:
                    add(Problem(name, str(exc)))
                    prev, expect_seq = None, expect_seq + 1  # the next link cannot be checked
                    continue
                if entry.seq != expect_seq or parse_journal_key(key) != entry.seq:
                    add(Problem(name, f"sequence {entry.seq} where {expect_seq} was expected"))
                if prev is not None and entry.prev != prev:
                    add(Problem(name, "chain broken: prev is not the hash of the previous entry"))
                if entry.kind in (JournalKind.PURGE, JournalKind.EPISODE_PURGE):
                    erasures[entry.seq] = (entry.kind, entry.id)
                prev, expect_seq = hashlib.sha256(payload).digest(), entry.seq + 1
            _verify_erasure_records(txn, erasures, add)
            raw_scrub = txn.get(SCRUB_KEY)
            if raw_scrub is not None:
                strict(SCRUB_CODEC, SCRUB_KEY, raw_scrub)
            for key, value in txn.scan(SALIENCE):
                if len(key) != len(SALIENCE) + 16 or MemoryId(key[len(SALIENCE) :]) not in heads:
                    add(Problem(key.hex(), "salience state of no memory"))
                    continue
                strict(SALIENCE_STATE, key, value)
            vmeta_raw = txn.get(meta_key("vectors"))
            vmeta = (
                None if vmeta_raw is None else strict(VECTORS_META, meta_key("vectors"), vmeta_raw)
            )
            tick(5)
            for key, value in txn.scan(VEC):
                if len(key) != len(VEC) + 16 or MemoryId(key[len(VEC) :]) not in heads:
                    add(Problem(key.hex(), "vector of no memory"))
                    continue
                vhead = heads[MemoryId(key[len(VEC) :])]
                rec = strict(VECTOR_RECORD, key, value)
                if rec is None:
                    continue
                name = f"vec/{vhead.id}"
                if vhead.tombstone is not None:
                    add(Problem(name, "a tombstoned memory still has a vector"))
                if rec.version != vhead.current_version:
                    add(Problem(name, f"embeds version {rec.version}, not the current one"))
                if vmeta is None or (rec.model_id, rec.dim) != (vmeta.model_id, vmeta.dim):
                    add(
                        Problem(
                            name, f"a {rec.model_id} vector the store's meta/vectors does not name"
                        )
                    )
                if len(rec.vector) != 4 * rec.dim:
                    add(Problem(name, f"holds {len(rec.vector)} bytes for {rec.dim} dimensions"))
            live = {
                mid: (head.type, head.current_version, current[mid])
                for mid, head in heads.items()
                if head.tombstone is None and mid in current
            }
            tick(6)
            lex_problems, lex = lexical.check(txn, live)
            problems.extend(Problem(record, what) for record, what in lex_problems)
            n_episodes = _verify_episodes(txn, heads, add)
        tick(7)
        return VerifyReport(
            problems=tuple(problems),
            memories=len(heads),
            versions=counts["versions"],
            index_entries=counts["index"],
            edges=counts["edges"],
            journal_entries=counts["journal"],
            lexical_documents=lex.documents,
            lexical_postings=lex.postings,
            episodes=n_episodes,
        )


def _edge(s: MemoryId, et: EdgeType, d: MemoryId, rec: EdgeRecord) -> Edge:
    return Edge(
        src=s,
        type=et,
        dst=d,
        created_at=rec.created_at,
        created_by=rec.created_by,
        weight=rec.weight,
        removed_at=rec.removed_at,
        removed_by=rec.removed_by,
    )


def _check_tombstone(stone: Tombstone) -> None:
    TOMBSTONE.encode(stone, "tombstone")


# ---------------------------------------------------------------------------------------------
# Episodes (format 7; ``specs/episodes.md``)


def _verify_episodes(txn: ReadTxn, heads: dict[MemoryId, Head], add: Callable[[Problem], None]
                     ) -> int:  # fmt: skip
    """Check every ``ep/`` record and ``prov/e/`` entry; returns how many episodes there are."""
    seen: set[MemoryId] = set()
    good: list[Episode] = []
    for key, value in txn.scan(EPISODE_PREFIX):
        name = _show_key(key)
        try:
            eid = parse_episode_key(key)
            ep = decode_episode(_unseal(key, value))
            check_episode(ep)
        except (CodecError, IntegrityError) as exc:
            add(Problem(name, str(exc)))
            continue
        if ep.id != eid:
            add(Problem(name, f"holds episode {ep.id}"))
        seen.add(eid)
        good.append(ep)
    for record, what in evidence.check(txn, good):
        add(Problem(record, what))
    for key, value in txn.scan(EPISODE_MEMORY_PREFIX):
        name = _show_key(key)
        try:
            eid, mid = parse_episode_memory_key(key)
        except CodecError as exc:
            add(Problem(name, str(exc)))
            continue
        if value:
            add(Problem(name, "an index entry holds a value"))
        if eid not in seen:
            add(Problem(name, "names an episode the store does not hold"))
        if mid not in heads:
            add(Problem(name, "names a memory the store does not hold"))
    return len(seen)


def episode_source(provenance: Provenance | None) -> tuple[MemoryId, tuple[int, int] | None] | None:
    """The episode a version's provenance names (``episode:<id>``) and the span, if any."""
    if provenance is None:
        return None
    for src in provenance.sources:
        if src.session_id.startswith(EPISODE_SESSION):
            try:
                return MemoryId.parse(src.session_id[len(EPISODE_SESSION) :]), src.span
            except ValidationError:
                return None
    return None


EPISODE_SESSION: Final = "episode:"
"""A ``SourceRef.session_id`` naming an episode: ``episode:<ULID>``."""


def _verify_erasure_records(
    txn: ReadTxn,
    purges: dict[int, tuple[JournalKind, MemoryId | None]],
    add: Callable[[Problem], None],
) -> None:
    """Every ``er/`` record decodes, is keyed by its seq and names a purge journalled there."""
    want = {JournalKind.PURGE: ErasureKind.MEMORY, JournalKind.EPISODE_PURGE: ErasureKind.EPISODE}
    for key, value in txn.scan(ERASURE_PREFIX):
        name = _show_key(key)
        try:
            seq = parse_erasure_key(key)
            rec: ErasureRecord = ERASURE_CODEC.decode(_unseal(key, value), name)
        except (IntegrityError, CodecError) as exc:
            add(Problem(name, str(exc)))
            continue
        if rec.seq != seq:
            add(Problem(name, f"holds the erasure record of journal entry {rec.seq}"))
            continue
        purge = purges.get(seq)
        if purge is None:
            add(Problem(name, "names no purge in the journal"))
        elif want[purge[0]] is not rec.kind or purge[1] != rec.id:
            add(Problem(name, f"does not match journal entry {seq} ({purge[0].label})"))
        if len(rec.needles or b"") % erasure.NEEDLE_SIZE:
            add(Problem(name, "its needles are not whole"))


def _leftovers(txn: ReadTxn, rec: ErasureRecord) -> list[tuple[str, str]]:
    """``(record, what)`` for every record of an erased memory or episode still holding content."""
    out: list[tuple[str, str]] = []
    mid = rec.id
    if rec.kind is ErasureKind.EPISODE:
        raw = txn.get(episode_key(mid))
        if raw is None:
            return [(f"ep/{mid}", "the erased episode is missing")]
        try:
            ep = decode_episode(_unseal(episode_key(mid), raw))
        except (IntegrityError, CodecError) as exc:
            return [(f"ep/{mid}", str(exc))]
        if ep.content is not None or ep.chunks:
            out.append((f"ep/{mid}", "still holds its text"))
        for prefix in (evidence.CHUNK_DOC, evidence.CHUNK_VECTOR):
            if next(txn.keys(prefix + mid.bytes), None) is not None:
                out.append((f"{prefix.decode()}{mid}", "the erased episode still has chunks here"))
        return out
    raw = txn.get(head_key(mid))
    if raw is None:
        return [(f"m/{mid}", "the erased memory is missing")]
    head: Head = _trusted(HEAD, head_key(mid), raw)
    if head.tombstone is None or head.tombstone.purged_at is None:
        out.append((f"m/{mid}", "is not purged"))
    if head.tags or head.frames or head.forms is not None:
        out.append((f"m/{mid}", "still holds tags, frames or forms"))
    for key, value in txn.scan(version_prefix(mid)):
        v: Version = _trusted(VERSION, key, value)
        if v.data is not None or v.forms is not None:
            out.append((_show_key(key), "still holds data or forms"))
        if v.provenance != _erased_provenance(v.provenance):
            out.append((_show_key(key), "its provenance still holds session or message ids"))
    for key, what in (
        (lex_doc_key(mid), "a lexical document"),
        (vec_key(mid), "a vector"),
        (salience_key(mid), "use counters"),
    ):
        if txn.get(key) is not None:
            out.append((_show_key(key), f"the erased memory still has {what}"))
    return out


def _check_wait(wait: object) -> None:
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not wait >= 0:
        raise ValidationError("wait", "range", f"must be a number of seconds >= 0, got {wait!r}")


def _erased_provenance(p: Provenance) -> Provenance:
    """A purged version's provenance: what of it is not caller text.

    Its kind, the URIs it was derived from and the episode spans it was drawn from (ids and
    offsets); session ids and message ids are caller text and go.
    """
    sources = tuple(
        SourceRef(session_id=src.session_id, span=src.span)
        for src in p.sources
        if episode_source(Provenance(source=p.source, sources=(src,))) is not None
    )
    return Provenance(source=p.source, derived_from=p.derived_from, sources=sources)


def _put_erasure(  # noqa: PLR0917 - private, one call site each for memories and episodes
    txn: WriteTxn,
    seq: int,
    kind: ErasureKind,
    mid: MemoryId,
    at: datetime,
    by: str,
    hashes: Sequence[bytes],
    recorded: erasure.Recorder,
) -> None:
    content = recorded.erased()
    record = ErasureRecord(
        seq=seq,
        kind=kind,
        id=mid,
        at=at,
        by=by,
        hashes=tuple(hashes),
        needles=erasure.needles_of(content) or None,
        records=sum(1 for v in recorded.before.values() if v is not None),
        size=sum(len(c) for c in content),
    )
    txn.put(erasure_key(seq), _seal(ERASURE_CODEC.encode(record, "erasure")))
