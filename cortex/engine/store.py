"""The store engine: immutable versions, mutable heads, indexes, edges and the journal on LMDB.

Every mutation is one write transaction that writes its records, their index entries and one
hash-chained journal entry. Every stored value is sealed with a CRC-32 so that a damaged record
raises ``IntegrityError`` on read instead of returning wrong data; version data is also checked
against its content hash by ``verify``, import, export and ``history`` (not by the hot reads:
``specs/storage.md`` §3, "What a read checks").
"""

from __future__ import annotations

import copy
import functools
import gc
import hashlib
import inspect
import itertools
import os
import shutil
import sys
import time
import unicodedata
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Final, Literal, NamedTuple, Self, TypeVar

import cbor2
import msgspec

from cortex import argcheck
from cortex._version import __version__
from cortex.engine import erasure, importer
from cortex.engine import hooks as _plain
from cortex.engine import purge as purging
from cortex.engine.erasure import (
    ErasureReport,
    ScrubReport,
)
from cortex.engine.heads import (
    FOREVER,
    check_tombstone,
    claim_hashes,
    decode_row,
    encode_row,
    head_from,
    head_row,
    index_keys_of,
    is_pinned,
    pin_key_of,
    row_of,
    set_pin,
    superseder,
)
from cortex.engine.hooks import EmbedPrepared, GuardChange, Hooks, Visible
from cortex.engine.journal import JOURNAL_CODEC, ZERO_HASH, JournalEntry, JournalKind, JournalWriter
from cortex.engine.purge import check_wait
from cortex.engine.values import (
    EDGE_CODEC,
    FORMAT_CODEC,
    SHORT_TEXT,
    Edge,
    EdgeRecord,
    FormatRecord,
    ImportReport,
    Memory,
    NewMemory,
    Problem,
    VerifyReport,
    decode_trusted,
)
from cortex.engine.verify import structural_report, verify_store
from cortex.errors import (
    CodecError,
    ConflictError,
    CortexError,
    FormatError,
    IntegrityError,
    MigrationRequiredError,
    NotFoundError,
    TombstonedError,
    ValidationError,
    WriteBudgetError,
)
from cortex.index import evidence, lexical
from cortex.index.lexical import Indexer
from cortex.model.codec import (
    DATA_CODECS,
    DEFAULT_PROVENANCE,
    FRAMES,
    HEAD,
    NEW_PAIR_PLAN,
    VERSION,
    Invalid,
    data_codec,
    decode_data_trusted,
    encode_new_pair,
    encode_tags,
    to_micros,
)
from cortex.model.enums import (
    CodedEnum,
    EdgeType,
    MemoryType,
    ObjKind,
    Sensitivity,
    Verb,
    Visibility,
)
from cortex.model.episode import check_episode, decode_episode, encode_episode
from cortex.model.forms import check_override, render_with_short
from cortex.model.hashing import content_hash
from cortex.model.ids import MemoryId, Uri, WriteOutcome, WriteResult, new_id, new_ids
from cortex.model.records import (
    Data,
    Episode,
    Forms,
    FrameRef,
    Head,
    Provenance,
    Tombstone,
    Version,
)
from cortex.rules import chains
from cortex.rules.aliases import (
    ALIAS_CODEC,
    ALIAS_PREFIX,
    AliasChange,
    AliasRecord,
    alias_hash,
    alias_key,
    plan_alias,
    read_aliases,
)
from cortex.rules.sensitivity import DEFAULT as DEFAULT_SENSITIVITY
from cortex.rules.sensitivity import coerce_level
from cortex.rules.sensitivity import stored as stored_level
from cortex.storage.engines import copy_kv, is_url, open_kv
from cortex.storage.keys import (
    EDGE_FROM,
    EDGE_TO,
    ID,
    IDX_PIN,
    INDEX_PLAN,
    JOURNAL,
    LEX_DOC,
    LEX_POSTING,
    LEX_SEGMENT,
    LEX_TERM,
    TASK_PREFIX,
    claim_index_key,
    claim_index_prefix,
    edge_from_key,
    edge_to_key,
    episode_key,
    episode_memory_key,
    head_key,
    id_key,
    journal_key,
    meta_key,
    parse_edge_key,
    parse_episode_key,
    parse_episode_memory_key,
    parse_head_key,
    parse_journal_key,
    prefix_end,
    show_key,
    vec_key,
    version_key,
    version_prefix,
)
from cortex.storage.keys import EPISODE as EPISODE_PREFIX
from cortex.storage.keys import EPISODE_MEMORY as EPISODE_MEMORY_PREFIX
from cortex.storage.keys import ERASURE as ERASURE_PREFIX
from cortex.storage.keys import HEAD as _HEAD_KEY_PREFIX
from cortex.storage.keys import VERSION as _VERSION_KEY_PREFIX
from cortex.storage.kv import (
    KV,
    LmdbKV,
    ReadTxn,
    Sharing,
    WriteTxn,
    seal,
    sort_by_key,
    unseal,
)
from cortex.storage.pages import damage_error

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


def _read_context() -> tuple[Any, ...] | None:
    """What ``cortex._speedups``' read functions build and check (``cbor_decode.c``), or None.

    None when the extension is not built, is older than them, or a record has no C plan: every
    read then takes the Python path (``_head_from``, ``_checked_version``, ``_memory``).
    """
    if _sp is None or not hasattr(_sp, "read_current"):
        return None
    plans = {t.value: DATA_CODECS[t]._plan for t in MemoryType}
    forms = next((f for _, _, n, f, _ in HEAD.fields if n == "forms"), None)
    forms_plan = getattr(forms, "_plan", None)  # the same codec as the version's forms
    if HEAD._plan is None or VERSION._plan is None or forms_plan is None:
        return None
    if None in plans.values():
        return None
    return (
        HEAD._plan,
        VERSION._plan,
        tuple(plans.get(code) for code in range(max(plans) + 1)),
        Memory,
        Uri,
        vars(Uri)["type"],
        vars(Uri)["id"],
        vars(Uri)["version"],
        vars(MemoryId)["_b"],
        _VERSION_KEY_PREFIX,
        ID,
        _HEAD_KEY_PREFIX,
        forms_plan,
    )


_READ: tuple[Any, ...] | None = _read_context()
"""The read path through the C accelerator (``Store.resolve_latest``, ``resolve``, the query
executor's rows): the same values as the Python path, or it declines and the Python path runs
(and raises what is wrong). Tests set it to None to compare the two."""

_READ_LATEST: Callable[..., Any] | None = getattr(_sp, "read_latest", None)
"""``resolve_latest``'s reads and ``read_memory`` in one C call on an LMDB snapshot
(``LmdbKV.point_call``), or None: ``point_read`` then ``read_memory``. Tests set it to None to
compare the two."""

__all__ = [
    "CLAIMS_CURRENT_FEATURE",
    "COUNTERS_HEADS_FEATURE",
    "COUNTER_IDS_FEATURE",
    "FORMAT_VERSION",
    "HALF_VECTORS_FEATURE",
    "HEAD_DATABASE_FEATURE",
    "INDEX_DUPLICATES_FEATURE",
    "KEYSPACE_DATABASES_FEATURE",
    "MEDIUM_REFS_FEATURE",
    "MEMORY_ROWS_FEATURE",
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

FORMAT_VERSION: Final = 21
"""The on-disk format this code reads and writes (separate from the package version).

Format 2 adds the lexical index (``specs/lexical.md``); format 3 the pinned index and frame
index keys in created order; format 4 tag index keys by type; format 5 stemmed lexical terms;
format 6 postings in blocks; format 7 episodes (``ep/``, ``prov/e/``, two journal kinds);
format 8 the claim index (``idx/claim/``, ``specs/claims.md`` §5), write budgets, sensitivity,
erasure records (``er/``, ``meta/scrub``) and entity aliases (``ent/a/``); format 9 sensitivity
levels in the sealed head and episode records (no more ``sens/``); format 10 lexical posting
segments (``lex/s/``, ``specs/lexical.md`` §4b); format 11 a head records that its memory has
use counters (``Head.has_counters``, ``specs/query.md`` §2); format 12 the claim index of current
memories only and use-counter records that name their memory; format 13 ``vec/`` records that say
their element type (float16 by default, ``specs/vector-index.md`` §3); format 14 lexical postings
keyed by per-store document numbers (``lex/i/``, ``specs/lexical.md`` §4); format 15 compact
forms in heads and versions (a short form that begins the medium form is stored as its length,
``specs/format.md``); format 16 ``lex/d/`` records without their terms (``specs/lexical.md`` §4);
format 17 the append-mostly keyspaces in LMDB named databases of their own
(``specs/storage.md`` §2); format 18 a version's medium form as a reference into its data where
a text of the data occurs in it (``specs/format.md`` Forms); format 19 the heads (``m/``) in an
LMDB named database of their own (``specs/storage.md`` §2); format 20 the index keyspaces
(``keys.DUP_DATABASES``) in LMDB databases of duplicates (``specs/storage.md`` §2); format
21 every per-memory record keyed by the memory's row number (``m/``, ``mv/``, ``vec/``, ``sal/``,
``lex/d/``), ``id/`` mapping ids to rows, no ``lex/i/`` (``specs/storage.md`` §2).
``cortex.transfer.migrate`` upgrades older formats.
"""
MEMORY_ROWS_FEATURE: Final = "memory-rows"
"""Format 21: every memory has a row number (u32, given at its creation in write order, kept
for its life, never given again; its lexical document number): ``m/``, ``mv/``, ``vec/``,
``sal/`` and ``lex/d/`` are keyed by it, so that they grow at their ends whatever the ids, and
``id/`` id16 holds the row (``specs/storage.md`` §2)."""
KEYSPACE_DATABASES_FEATURE: Final = "keyspace-databases"
"""Format 17: on LMDB, each keyspace of ``keys.DATABASES`` is kept in a named database of its
own, keys unchanged (``specs/storage.md`` §2); the PostgreSQL engine keeps one table."""
HEAD_DATABASE_FEATURE: Final = "head-database"
"""Format 19: on LMDB, the heads (``keys.HEAD``) are in a named database of their own, keys
unchanged, as format 17's keyspaces are (``specs/storage.md`` §2); PostgreSQL keeps one table."""
INDEX_DUPLICATES_FEATURE: Final = "index-duplicates"
"""Format 20: on LMDB, each index keyspace of ``keys.DUP_DATABASES`` is in a named database
opened ``MDB_DUPSORT | MDB_DUPFIXED``, a key split into its head (LMDB's key) and the rest (a
duplicate); the keys the store reads and writes are unchanged (``specs/storage.md`` §2), and
PostgreSQL keeps one table."""
COMPACT_FORMS_FEATURE: Final = "compact-forms"
"""Format 15: ``Forms`` in heads and versions hold a short form that begins the medium form as
its length in UTF-8 bytes (``codec.FormsCodec``, ``specs/format.md``)."""
MEDIUM_REFS_FEATURE: Final = "medium-references"
"""Format 18: a version's ``Forms`` hold the medium form as ``[prefix, at, suffix]`` around a
text item of the version's data where one occurs in it (``codec.VersionFormsCodec``,
``specs/format.md``)."""
ALIASES_FEATURE: Final = "entity-aliases"
"""Format 8: ``ent/a/`` entity alias records and the journal kind ``alias`` (``claims.md`` §10)."""
ERASURE_FEATURE: Final = "erasure-records"
"""Format 8: ``er/`` erasure records (what a purge erased, as needles), ``meta/scrub``, and the
content hash of the erased current version on ``purge`` journal entries."""
EPISODES_FEATURE: Final = "episodes"
"""Format 7: ``ep/`` episode records, the ``prov/e/`` index, journal kinds episode and
episode_purge (``specs/episodes.md``)."""
CLAIMS_FEATURE: Final = "claim-index"
"""Format 8: ``idx/claim/`` indexes every memory under the hashes of its claim keys."""
BUDGETS_FEATURE: Final = "write-budgets"
"""Format 8: ``task/`` write counts and the journal kind ``budget_drop``."""
SENSITIVITY_FEATURE: Final = "sensitivity"
"""Format 8: sensitivity levels of memories and episodes, the journal kinds ``episode_update``
and ``export`` (``specs/sensitivity.md``)."""
SENSITIVITY_HEADS_FEATURE: Final = "sensitivity-in-heads"
"""Format 9: a level other than ``internal`` is in the sealed head (``Head.sensitivity``) or
episode record, no longer under ``sens/`` (a damaged key there could lower a level)."""
COUNTERS_HEADS_FEATURE: Final = "counters-in-heads"
CLAIMS_CURRENT_FEATURE: Final = "claim-index-current"
"""Format 12: ``idx/claim/`` holds only memories no ``supersedes`` edge ends (``claims.md`` §5)."""
COUNTER_IDS_FEATURE: Final = "counters-name-their-memory"
"""Format 12: a ``sal/`` record starts with its memory's id16 (``heads.encode_counters``)."""
"""Format 11: a head says whether its memory has use counters (``Head.has_counters``): a read
of the counters then knows a ``sal/`` record must exist (a damaged key raises instead of reading
as never used), and a memory never used costs no read."""
HALF_VECTORS_FEATURE: Final = "vectors-float16"
"""Format 13: a ``vec/`` record says its element type (``VectorRecord.float16``) and new vectors
are float16 unless ``meta/vectors`` says the store keeps float32 (``specs/vector-index.md`` §3)."""
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
        lexical.SEGMENTS_FEATURE,
        lexical.DOCNO_FEATURE,
        lexical.LEAN_DOCS_FEATURE,
        EPISODES_FEATURE,
        CLAIMS_FEATURE,
        BUDGETS_FEATURE,
        SENSITIVITY_FEATURE,
        SENSITIVITY_HEADS_FEATURE,
        COUNTERS_HEADS_FEATURE,
        CLAIMS_CURRENT_FEATURE,
        COUNTER_IDS_FEATURE,
        HALF_VECTORS_FEATURE,
        COMPACT_FORMS_FEATURE,
        KEYSPACE_DATABASES_FEATURE,
        MEDIUM_REFS_FEATURE,
        HEAD_DATABASE_FEATURE,
        INDEX_DUPLICATES_FEATURE,
        MEMORY_ROWS_FEATURE,
        ERASURE_FEATURE,
        ALIASES_FEATURE,
    }
)
"""Format features this code understands; a store naming any other feature is refused."""

_sha256 = hashlib.sha256


# ---------------------------------------------------------------------------------------------
# Store-level records


_short = SHORT_TEXT


# ---------------------------------------------------------------------------------------------
# API value types


# ---------------------------------------------------------------------------------------------
# Sealing: every value is payload || crc32(payload), big-endian


_seal = seal
_unseal = unseal
_show_key = show_key


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_U64_MAX: Final = 2**64 - 1


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
    if type(frames) is not tuple:
        frames = argcheck.items(frames, "head.frames")
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
    except Invalid as exc:
        raise ValidationError("head.frames" + exc.where, exc.rule, exc.message) from None
    return tuple(
        FrameRef(
            verb=Verb.coerce(f.verb),  # type: ignore[arg-type]  # validated just above
            obj_kind=ObjKind.coerce(f.obj_kind),  # type: ignore[arg-type]
            obj_ref=unicodedata.normalize("NFC", f.obj_ref),
        )
        for f in frames
    )


def as_id(ref: Uri | MemoryId | str, field: str = "id") -> MemoryId:
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


class Prepared:
    """A validated new memory and its sealed records."""

    __slots__ = (
        "claims",
        "conf",
        "data",
        "force",
        "head",
        "head_bytes",
        "lookup",
        "pinned",
        "row",
        "sens",
        "terms",
        "type",
        "vector",
        "version",
        "version_bytes",
        "when",
    )

    def __init__(
        self, head: Head, version: Version, terms: tuple[list[str], list[int]], pinned: bool
    ) -> None:
        self.terms = terms  # what the lexical index holds for the version: ``count_terms``
        self.vector: bytes | None = None  # its embedding (float32 LE), when the store embeds
        self.claims: tuple[bytes, ...] = ()  # the claim hashes it is indexed under
        self.lookup: bytes | None = None  # the claim hash its competitors hold
        self.data: Data | None = None  # its data, when it has a lookup (aliases respell it)
        self.force = False  # the caller's supersede=True
        self.when = version.created_at  # when its claim starts being true
        self.conf = version.confidence
        self.pinned = pinned
        self.row = -1  # its row number, given in the write transaction (``_put_heads``)
        self.sens = DEFAULT_SENSITIVITY  # its sensitivity (also in the head, unless internal)
        self.head = head
        self.version = version
        self.type = head.type
        # both records sealed, in one call in the common case
        pair = _sp.encode_new_pair(head, version, NEW_PAIR_PLAN) if _USE_SPEEDUPS else None
        if pair is None:
            head_bytes, version_bytes = encode_new_pair(head, version)
            pair = _seal(head_bytes), _seal(version_bytes)
        self.head_bytes, self.version_bytes = pair


_CHAIN_PRELOAD: Final = 256
"""Claim entries of one lookup read with a write's first round trip (the memories current for
the claim: one, or a few open conflicts; more cost one more round trip per page)."""


@contextmanager
def _collector_held() -> Iterator[None]:
    """Hold Python's cyclic garbage collector off while a batch is prepared and written.

    A batch of new memories allocates tens of container objects a record that all live until
    its transaction ends; the collector would scan them (and the caller's whole heap, at each
    full collection) many times over for no garbage: measured, about a tenth of a batched
    ingest's CPU. The allocations still count, so the first collection after the batch runs as
    usual. Left as it is when the collector is off already (the caller's choice); another
    thread's writes in the meantime also run without it.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _prefetch_lookups(txn: WriteTxn, prepared: Sequence[Prepared]) -> None:
    """Name the chain rules' first reads to an engine with round trips (``prefetch_scan``).

    The aliases and each claim lookup of the batch then travel with the write's first round
    trip (on PostgreSQL; LMDB has no such method and reads them as it goes).
    """
    scan = getattr(txn, "prefetch_scan", None)
    if scan is None:
        return
    lookups = [claim_index_prefix(p.lookup) for p in prepared if p.lookup is not None]
    if lookups:
        scan([ALIAS_PREFIX])
        scan(lookups, _CHAIN_PRELOAD)


def _prefetch_competitors(txn: WriteTxn, mid: MemoryId, oids: Sequence[MemoryId]) -> None:
    """Name what ``_chain`` reads of each competitor, in one round trip (see above).

    Its head, its versions (the current one is among them), the ``supersedes`` edges to it
    (is it history already?) and the edges between it and the new memory either way.
    """
    scan = getattr(txn, "prefetch_scan", None)
    prefetch = getattr(txn, "prefetch", None)
    if scan is None or prefetch is None or not oids:
        return
    keys: list[bytes] = []
    prefixes: list[bytes] = []
    for o in oids:
        keys += (
            id_key(o),
            edge_from_key(mid, EdgeType.SUPERSEDES, o),
            edge_from_key(o, EdgeType.SUPERSEDES, mid),
            edge_from_key(mid, EdgeType.CONTRADICTS, o),
        )
        prefixes.append(EDGE_TO + o.bytes + bytes((EdgeType.SUPERSEDES,)))
    prefetch(keys)
    scan(prefixes)


def _mark_superseded(txn: WriteTxn, mid: MemoryId, claims: Iterable[bytes]) -> None:
    """Take ``mid`` out of the ``idx/claim/`` index (``Store._mark``, known answer).

    For a memory a live edge from a live memory supersedes as of now: the edge just put.
    """
    for c in claims:
        txn.delete(claim_index_key(c, mid))


def live_heads(txn: ReadTxn) -> list[Head]:
    """The heads of every memory that is not tombstoned, in row order (format 21)."""
    return [head for _, head in live_rows(txn)]


def live_rows(txn: ReadTxn) -> list[tuple[int, Head]]:
    """The rows and heads of every memory that is not tombstoned, in row order."""
    out = []
    for key, value in txn.scan(_HEAD_KEY_PREFIX):
        head: Head = decode_trusted(HEAD, key, value)
        if head.tombstone is None:
            out.append((parse_head_key(key), head))
    return out


def current_version_of(txn: ReadTxn, head: Head, row: int | None = None) -> Version:
    """The version ``head`` points at; an integrity error when it is missing.

    ``row``: the memory's row, when the caller knows it (else its ``id/`` record is read).
    """
    if row is None:
        row = head_row(txn, head)
    key = version_key(row, head.current_version)
    raw = txn.get(key)
    if raw is None:
        raise IntegrityError(
            f"version {head.current_version} of {head.id} is missing: run `cortex verify`"
        )
    version: Version = decode_trusted(VERSION, key, raw)
    return version


def index_live(txn: WriteTxn, tick: Callable[[int], None] | None = None) -> int:
    """Add every live memory to an empty lexical index; returns how many (reindex, migration).

    Each under its row (format 21: the rows are kept, ``lexical.md`` §4).
    """
    lex = Indexer(txn, fold=True)  # the main blocks, never a segment (lexical.md §5)
    n = 0
    for row, head in live_rows(txn):
        version = current_version_of(txn, head, row)
        if version.data is None:
            raise IntegrityError(f"memory {head.id} is live but holds no data: run `cortex verify`")
        data = decode_stored(head.type, version.data)
        lex.add(row, head.current_version, lexical.analyze(data, is_canonical=True))
        n += 1
        if tick is not None:
            tick(n)
    lex.flush()
    return n


def rebuild_lexical(txn: WriteTxn, tick: Callable[[int], None] | None = None) -> int:
    """Drop the whole lexical index and index every live memory again; returns how many.

    The rows stay (format 21): the next row to give is kept, and at least one past the
    highest row of a head.
    """
    try:
        keep = lexical.read_stats(txn).next_docno
    except IntegrityError:
        keep = 0
    last = next(txn.keys(_HEAD_KEY_PREFIX, reverse=True), None)
    if last is not None:
        keep = max(keep, parse_head_key(last) + 1)
    for prefix in (LEX_POSTING, LEX_DOC, LEX_TERM, LEX_SEGMENT):
        for key in list(txn.keys(prefix)):
            txn.delete(key)
    lexical.reset_stats(txn, keep)
    return index_live(txn, tick)


def decode_stored(mtype: MemoryType, data: bytes) -> Data:
    try:
        return decode_data_trusted(mtype, data)
    except CodecError as exc:
        raise IntegrityError(f"stored data of a {mtype.type_name} does not decode: {exc}") from None


_FUSED = True
"""Whether a single write without dedupe or chains takes ``_write_new``'s fused transaction:
the same bytes and errors as the general one (tests switch it off to compare the two)."""


class _GroupIndexer:
    """The lexical indexer a group commit's single writes of new memories share (``GroupShare``).

    They are the fused ones and those that apply the chain rules (without dedupe). Each write
    of the group stages its new memory's terms into it, in its own child transaction; the
    index is written once for the group, before its commit (one segment or fold, instead of
    one per write), as ``write_many`` writes it for its items.
    """

    @staticmethod
    def start(txn: WriteTxn) -> Indexer:
        return Indexer(txn)

    @staticmethod
    def finish(state: Indexer) -> None:
        state.flush()


_GROUP_INDEXER: Final = _GroupIndexer()


# what the C ``stage_new`` needs (``Store._stage_new``)
_STAGE_PLAN: Final = (
    _VERSION_KEY_PREFIX,
    b"",  # format 21: mv/ u32(row) u64(n)
    IDX_PIN,
    LEX_DOC,
    JOURNAL,
    INDEX_PLAN,
    MemoryId,
    MemoryType.EVENT,
)


class _BudgetSpent(Exception):
    """A write transaction found its task's budget spent (``Store._charge``)."""


class _Task(NamedTuple):
    hash: bytes  # sha256(task id)[:16]
    limit: int


_T = TypeVar("_T")
DEFAULT_WRITE_BUDGET: Final = 50
"""Seed 003: 50 writes per task."""


class _IdTaken(Exception):
    """A batch's head was not added: its id is taken or repeated (``Store._put_heads``)."""


# ---------------------------------------------------------------------------------------------
# The store


_MAX_MAP_SIZE: Final = 1 << 40  # the engine's own ceiling (kv._MAX_MAP)


def _options_of(cls: Callable[..., Any]) -> frozenset[str]:
    """The keyword options ``cls.__init__`` takes beyond the store's own."""
    params = inspect.signature(cls).parameters
    return frozenset(
        n
        for n, p in params.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and n not in ("clock", "hooks")
    )


class Store:
    """One actor's memory store: a directory holding one LMDB environment.

    Open it with ``Cortex.open(path, actor=...)``; use it as a context manager.
    """

    def __init__(
        self,
        kv: KV,
        actor: str | None,
        *,
        clock: Callable[[], datetime] | None = None,
        hooks: Hooks | None = None,
    ) -> None:
        self._kv = kv
        self._point_call: Callable[..., Any] | None = getattr(kv, "point_call", None)
        """``LmdbKV.point_call``: a get's reads and decoding in one C call (LMDB only)."""
        self._bind(hooks or Hooks())
        warm = getattr(kv, "warm_writes", None)
        if warm is not None:  # an engine with round trips reads these in a write's first one
            warm([lexical.STATS_KEY], [JOURNAL], absent=[LEX_TERM])
        self._task: ContextVar[_Task | None] = ContextVar(f"cortex-task-{id(self)}", default=None)
        self._acting = actor
        self.actor = actor or ""
        self._space: str | None = None
        """Whose new memories this handle writes (their ``actor_scope``); ``None``: its actor's.
        A ``ReaderView`` acts as its reader but writes into its handle's memories."""
        self._clock = clock or _now_utc
        self.format = self._check_format()
        if actor is None:
            self.actor = self.format.owner

    def _bind(self, hooks: Hooks) -> None:
        """Bind each hook once (``cortex.engine.hooks``; ``None``: the plain store's)."""
        self._embed_prepared: EmbedPrepared = hooks.embed_prepared or _plain.embed_prepared
        self._chunk_vectors: Callable[[Episode], list[bytes] | None] = (
            hooks.chunk_vectors or _plain.chunk_vectors
        )
        self._given_vector: Callable[[Any], bytes] = hooks.given_vector or _plain.given_vector
        self._vector_value: Callable[[int, bytes], bytes] = (
            hooks.vector_value or _plain.vector_value
        )
        self._writer_sees: Callable[[datetime], Visible | None] = (
            hooks.writer_sees or _plain.writer_sees
        )
        self._guard_change: GuardChange = hooks.guard_change or _plain.guard_change
        self._guard_see: Callable[[ReadTxn, MemoryId], None] = hooks.guard_see or _plain.guard_see
        self._after_scrub: Callable[[ScrubReport, datetime], ScrubReport] = (
            hooks.after_scrub or _plain.after_scrub
        )

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
        check_pages: bool = True,
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
            check_pages: check every page of the file before anything reads it, and refuse a
                structurally damaged file with ``IntegrityError`` (LMDB may crash the process
                reading a damaged page). On by default; the check is skipped when the file is
                in the state the last check, or a checked writer's close, recorded in
                ``pages.checked``. ``False`` opens without it (``verify``, ``stats``,
                ``export`` and ``backup`` check the pages they walk either way: open so to
                ``verify`` a damaged store). ``specs/storage.md`` §9 gives its cost.
            **options: further options of the handle class (``Cortex``: decay, weights, embedder).

        Raises:
            IntegrityError: ``data.mdb`` is truncated, a meta page is damaged, or (with
                ``check_pages``) a page is damaged.
            FormatError: the store's format is newer than this code or unknown.
            MigrationRequiredError: the store is older; run ``cortex migrate``.
            ValidationError: ``actor`` is empty or too long, or an argument is of the wrong
                type or out of range (an unknown option too).
            CortexError: the store cannot be opened (the message names the path and why).
        """
        return open_store(
            cls,
            path,
            actor=actor,
            create=create,
            readonly=readonly,
            metasync=metasync,
            map_size=map_size,
            clock=clock,
            check_pages=check_pages,
            options=options,
        )

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

    def now_us(self) -> int | None:
        """``to_micros(now())`` of the default clock, without making its datetime; else None.

        None where the store was opened with a clock of its own: the caller reads ``now()``.
        ``datetime.now(UTC)`` is the system clock floored to the microsecond, as this is.
        """
        if self._clock is _now_utc:
            return time.time_ns() // 1000
        return None

    # -- format ------------------------------------------------------------------------------

    def _check_format(self) -> FormatRecord:
        key = meta_key("format")
        # the pages on the way to meta/format (and the first key) are checked first: a damaged
        # one would make LMDB refuse the read or abort the process (``specs/storage.md`` §9)
        with self._kv.read_checked([(b"", b""), (key, key)]) as txn:
            if txn.damage:
                raise damage_error(self.path, txn.damage)
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
        except Invalid as exc:
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
            rec: FormatRecord = decode_trusted(FORMAT_CODEC, meta_key("format"), raw)
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
        JournalWriter(txn, now, self.actor).append(
            JournalKind.INIT, reason=f"format {FORMAT_VERSION}"
        )
        return record

    # -- preparing records -------------------------------------------------------------------

    def _prepare(self, spec: NewMemory, now: datetime, fresh: MemoryId | None = None) -> Prepared:
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
        level = DEFAULT_SENSITIVITY if spec.sensitivity is None else coerce_level(spec.sensitivity)
        head = Head(
            id=mid,
            type=mtype,
            current_version=1,
            actor_scope=self._space or self.actor,
            visibility=visibility
            if type(visibility) is Visibility
            else _coerce(Visibility, visibility, "visibility"),
            importance=spec.importance,
            tags=encode_tags(spec.tags),
            frames=_normalize_frames(spec.frames),
            created_at=now,
            last_updated_at=now,
            forms=the_forms,
            sensitivity=stored_level(level),  # in the sealed head (format 9)
        )
        # encodes both records (every field rule is checked)
        prepared = Prepared(
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
        prepared.sens = level
        keys = chains.claim_keys(decoded)
        if keys:
            prepared.claims = tuple(chains.claim_hash(k) for k in keys)
            if spec.supersede is not False:
                lk = chains.lookup_key(decoded, spec.supersede is True, keys)
                prepared.lookup = None if lk is None else chains.claim_hash(lk)
                prepared.data, prepared.force = decoded, spec.supersede is True
            prepared.when = chains.effective_time(decoded, valid_from, now)
            prepared.conf = chains.effective_confidence(decoded, spec.confidence)
        elif spec.supersede is True:
            raise ValidationError(
                "supersede",
                "type",
                f"a {mtype.type_name} has no claim key: only Facts and Preferences supersede",
            )
        elif spec.supersede is not None and not isinstance(spec.supersede, bool):
            raise ValidationError("supersede", "type", "must be True, False or None")
        return prepared

    def _put_new(self, p: Prepared, puts: list[tuple[bytes, bytes]]) -> None:
        """Hold in ``puts`` a new memory's version, index entries and pin."""
        h = p.head
        puts.append((version_key(p.row, 1), p.version_bytes))
        puts += [(k, b"") for k in index_keys_of(h)]
        if p.pinned:
            puts.append((pin_key_of(h), b""))

    def _stage_new(
        self,
        prepared: list[Prepared],
        puts: list[tuple[bytes, bytes]],
        journal: JournalWriter,
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
                lex.counted(documents, total, postings, lex._next)
                last = puts[-1] if puts else None
                if last is not None and last[0].startswith(JOURNAL):  # the last memory's entry
                    journal.staged(last[1])
                if i == n:
                    break
            p = prepared[i]
            self._put_new(p, puts)
            lex.add_counted(p.row, 1, *p.terms, new=True)
            puts.append(journal.write_entry(p.head.id, p.type, 1, p.version.hash))
            i += 1
        for p in prepared:
            for c in p.claims:
                puts.append((claim_index_key(c, p.head.id), b""))
        for p in prepared:  # last: a single write's vector is then appended (``put_many``)
            if p.vector is not None:
                puts.append((vec_key(p.row), self._vector_value(1, p.vector)))

    def _put_heads(
        self, txn: WriteTxn, prepared: Sequence[Prepared], one_by_one: bool, lex: Indexer
    ) -> None:
        """Give new memories their rows and put their ``id/`` records and heads.

        A taken or repeated id raises ``_IdTaken``: nothing is overwritten, and the count of
        ``id/`` records added tells whether an id was taken (or given twice). Which one is then
        named by running the transaction again with ``one_by_one`` (the error aborted this
        one): each is put on its own, and the first taken id is a ``ConflictError``, the same
        as for a single write. The rows are the next ones (``lex.take_row``, format 21), so
        the heads append to ``m/``.
        """
        for p in prepared:
            p.row = lex.take_row()
        if one_by_one:
            for p in prepared:
                if not txn.put(id_key(p.head.id), encode_row(p.row), overwrite=False):
                    raise ConflictError(f"a memory with id {p.head.id} already exists")
        elif txn.add_many([(ID + p.head.id.bytes, encode_row(p.row)) for p in prepared]) != len(
            prepared
        ):
            raise _IdTaken
        txn.put_many([(head_key(p.row), p.head_bytes) for p in prepared])

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
        supersede: bool | None = None,
        sensitivity: Sensitivity | str | None = None,
    ) -> WriteResult:
        """Write a new memory; the result is the URI of its version 1 and what happened.

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
            supersede: temporal chains (``specs/claims.md`` §6): by default a Fact or
                Preference that competes with a current one (same subject and predicate, or
                topic) supersedes it, is archived, or stays in open conflict; ``True`` makes
                any Fact compete on subject and predicate; ``False`` skips the rules.
            sensitivity: public, internal (default), confidential or restricted
                (``specs/sensitivity.md``); stored in the write's transaction.

        Returns:
            A ``WriteResult`` (a ``Uri``): ``outcome`` ``created``, ``superseded``,
            ``archived`` or ``conflict``, with the URIs involved.

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
            supersede=supersede,
            sensitivity=sensitivity,
        )
        return self._write_new(spec, now, None)

    def _write_new(
        self,
        spec: NewMemory,
        now: datetime,
        visible: Visible | None,
        duplicate: Callable[[WriteTxn], WriteResult | None] | None = None,
        p: Prepared | None = None,
    ) -> WriteResult:
        """Write one new memory; ``visible`` limits the memories it may compete with.

        ``duplicate``, run first in the write transaction, may confirm an existing memory
        instead (dedupe): its result is returned and nothing else is written. ``p`` is
        ``spec`` already prepared (and embedded) by the caller, at ``now``.
        """
        if p is None:
            p = self._prepare(spec, now)
        prepared = [p]
        self._embed_prepared(prepared)
        if _FUSED and duplicate is None and p.lookup is None:
            # the common case: ``txn_fn`` below without what it does not need (no dedupe, no
            # chain to resolve: nothing to prefetch, no competitor), in fewer calls
            id_key_of, head_bytes = ID + p.head.id.bytes, p.head_bytes

            def one(txn: WriteTxn) -> WriteResult:
                lexical.prefetch_new(txn, [(p.head.id, p.terms[0])], (id_key_of,))
                if self._task.get() is not None:
                    self._charge(txn, 1)
                grouped: Indexer | None = getattr(txn, "share", None)  # ``_GroupIndexer``'s
                lex = Indexer(txn) if grouped is None else grouped
                row = lex.take_row()
                if not txn.put(id_key_of, encode_row(row), overwrite=False):
                    raise ConflictError(f"a memory with id {p.head.id} already exists")
                p.row = row
                puts = [(head_key(row), head_bytes)]  # with the rest: one put_many
                self._stage_new(prepared, puts, JournalWriter(txn, now, self.actor), lex)
                if grouped is None:
                    lex.flush(puts)  # a segment's puts join the write's: one put_many
                txn.put_many(puts)
                return WriteResult.of(Uri._trusted(p.type, p.head.id, 1), "created")

            return self._budgeted(Sharing(one, _GROUP_INDEXER), now)

        def txn_fn(txn: WriteTxn) -> list[WriteResult]:
            _prefetch_lookups(txn, prepared)
            lexical.prefetch_new(
                txn,
                [(p.head.id, p.terms[0]) for p in prepared],
                [ID + p.head.id.bytes for p in prepared],
            )
            if duplicate is not None:
                confirmed = duplicate(txn)
                if confirmed is not None:
                    return [confirmed]
            self._charge(txn, 1)
            # in a group commit, the group's indexer (``_GroupIndexer``): the chain rules below
            # read claims, heads and edges, never the lexical index, so its terms may wait
            grouped: Indexer | None = getattr(txn, "share", None)
            lex = Indexer(txn) if grouped is None else grouped
            self._put_heads(txn, prepared, True, lex)
            puts: list[tuple[bytes, bytes]] = []
            journal = JournalWriter(txn, now, self.actor)
            self._stage_new(prepared, puts, journal, lex)
            txn.put_many(puts)
            if grouped is None:
                lex.flush()
            return self._resolve_chains(txn, prepared, journal, now, visible)

        if duplicate is None:  # a single write of a new memory: it may share (above)
            return self._budgeted(Sharing(txn_fn, _GROUP_INDEXER), now)[0]
        return self._budgeted(txn_fn, now)[0]

    def write_many(self, items: Iterable[NewMemory | Data]) -> list[WriteResult]:
        """Write many new memories in one transaction: all of them, or (on any error) none.

        Each result says what its write did (``write``); the temporal-chain rules apply in
        order, as if the items were written one by one.

        Raises:
            ValidationError: naming the item (``items[i].data.…``); nothing is written.
            ConflictError: an id is taken or repeated.
        """
        with _collector_held():
            return self._write_many(items)

    def _write_many(self, items: Iterable[NewMemory | Data]) -> list[WriteResult]:
        """``write_many``, with the collector held off by the caller."""
        now = self._now()
        prepared = []
        items = list(argcheck.items(items, "items"))
        fresh = new_ids(len(items))  # one draw for the batch (an item's own id leaves one unused)
        for i, item in enumerate(items):
            spec = item if isinstance(item, NewMemory) else NewMemory(data=item)
            try:
                prepared.append(self._prepare(spec, now, fresh[i]))
            except ValidationError as exc:
                raise ValidationError(f"items[{i}].{exc.field}", exc.rule, exc.message) from None
        self._embed_prepared(prepared)

        def txn_fn(txn: WriteTxn, one_by_one: bool = False) -> list[WriteResult]:
            _prefetch_lookups(txn, prepared)
            lexical.prefetch_new(
                txn,
                [(p.head.id, p.terms[0]) for p in prepared],
                [ID + p.head.id.bytes for p in prepared],
            )
            self._charge(txn, len(prepared))
            lex = Indexer(txn)
            self._put_heads(txn, prepared, one_by_one, lex)
            journal = JournalWriter(txn, now, self.actor)
            puts: list[tuple[bytes, bytes]] = []
            self._stage_new(prepared, puts, journal, lex)
            sort_by_key(puts)  # in key order, each put lands beside the last
            txn.put_many(puts)
            lex.flush()
            return self._resolve_chains(txn, prepared, journal, now, self._writer_sees(now))

        if not prepared:
            return []
        try:
            return self._budgeted(txn_fn, now)
        except _IdTaken:  # nothing was written: run it again to name the id
            return self._budgeted(lambda txn: txn_fn(txn, one_by_one=True), now)

    def _write_episode(
        self,
        ep: Episode,
        items: Sequence[NewMemory],
        chunk_vectors: Sequence[bytes] | None = None,
        sensitivity: Sensitivity = DEFAULT_SENSITIVITY,
        *,
        embed_chunks: bool = False,
    ) -> list[WriteResult]:
        """Write an episode and the memories drawn from it in one transaction: all or none.

        With ``embed_chunks`` (and no ``chunk_vectors``), the store's embedder embeds the
        episode's chunks together with the memories, in the same batches.

        Each memory is indexed under ``prov/e/`` (the episode, then the memory); the journal
        records the episode (its id and hash) before the memories' writes. The episode's
        ``sensitivity`` (unless ``internal``) is in its record (format 9).

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
        if embed_chunks and chunk_vectors is None and ep.content is not None:
            texts = [ep.content[a:b].decode("utf-8") for a, b in ep.chunks]
            chunk_vectors = self._embed_prepared(prepared, texts)
        else:
            self._embed_prepared(prepared)
        if ep.sensitivity is not stored_level(sensitivity):
            ep = msgspec.structs.replace(ep, sensitivity=stored_level(sensitivity))
        record = _seal(encode_episode(ep))

        def txn_fn(txn: WriteTxn, one_by_one: bool = False) -> list[WriteResult]:
            self._charge(txn, 1 + len(prepared))  # the episode is a write too
            if not txn.put(episode_key(ep.id), record, overwrite=False):
                raise ConflictError(f"episode {ep.id} exists: give another id")
            evidence.index_episode(txn, ep)
            if chunk_vectors is not None:
                evidence.put_vectors(txn, ep, chunk_vectors)
            journal = JournalWriter(txn, now, self.actor)
            journal.append(JournalKind.EPISODE, id=ep.id, hash=ep.hash)
            if not prepared:
                return []
            lex = Indexer(txn)
            self._put_heads(txn, prepared, one_by_one, lex)
            puts: list[tuple[bytes, bytes]] = []
            self._stage_new(prepared, puts, journal, lex)
            puts += [(episode_memory_key(ep.id, p.head.id), b"") for p in prepared]
            sort_by_key(puts)
            txn.put_many(puts)
            lex.flush()
            return self._resolve_chains(txn, prepared, journal, now, self._writer_sees(now))

        try:
            return self._budgeted(txn_fn, now)
        except _IdTaken:  # nothing was written: run it again to name the id
            return self._budgeted(lambda txn: txn_fn(txn, one_by_one=True), now)

    # -- write budgets (``specs/claims.md`` §9) ------------------------------------------------

    @contextmanager
    def task(self, task_id: str, *, limit: int = DEFAULT_WRITE_BUDGET) -> Iterator[None]:
        """Count the writes made inside this block against ``task_id``'s budget of ``limit``.

        The count is kept in the store (``task/`` sha256(task_id)[:16]), so every handle and
        process working on one task shares it. A write that would exceed it writes nothing,
        journals a ``budget_drop`` entry and raises ``WriteBudgetError``. Memories and episodes
        count (a batch as its size, an update as one, an ingest as its episode and memories);
        confirmations, head changes, edges and tombstones do not.

        Raises:
            ValidationError: an empty task id, or a limit that is not a positive integer.
        """
        _check_task_id(task_id)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 10**9:
            raise ValidationError("limit", "range", "must be an integer from 1 to 10**9")
        token = self._task.set(_Task(hashlib.sha256(task_id.encode("utf-8")).digest()[:16], limit))
        try:
            yield
        finally:
            self._task.reset(token)

    def task_usage(self, task_id: str) -> int:
        """How many writes ``task_id`` has made (0 for a task never seen).

        Raises:
            ValidationError: ``task_id`` is not non-empty text of valid Unicode (<= 256).
        """
        _check_task_id(task_id)
        key = TASK_PREFIX + hashlib.sha256(task_id.encode("utf-8")).digest()[:16]
        with self._kv.read() as txn:
            raw = txn.get(key)
        return 0 if raw is None else int.from_bytes(_unseal(key, raw), "big")

    def _charge(self, txn: WriteTxn, n: int) -> None:
        """Count ``n`` writes against the current task, or raise ``_BudgetSpent``."""
        task = self._task.get()
        if task is None or n == 0:
            return
        key = TASK_PREFIX + task.hash
        raw = txn.get(key)
        used = 0 if raw is None else int.from_bytes(_unseal(key, raw), "big")
        if used + n > task.limit:
            raise _BudgetSpent(
                f"task {task.hash.hex()}: its write budget of {task.limit} is spent ({used} "
                f"written); {n} write{'s' if n != 1 else ''} dropped"
            )
        txn.put(key, _seal((used + n).to_bytes(8, "big")))

    def _budgeted(self, txn_fn: Callable[[WriteTxn], _T], now: datetime) -> _T:
        """Run a write transaction, or journal a drop when the task's budget is spent.

        The drop is journalled in a transaction of its own (the write's was abandoned whole),
        then ``WriteBudgetError`` is raised.
        """
        try:
            return self._kv.write(txn_fn)
        except _BudgetSpent as spent:
            message = str(spent)
            self._kv.write(
                lambda txn: JournalWriter(txn, now, self.actor).append(
                    JournalKind.BUDGET_DROP, reason=message
                )
            )
            raise WriteBudgetError(message) from None

    # -- entity aliases (``specs/claims.md`` §10) ------------------------------------------

    def _alias(self, canonical_of: str, alias: str, given: str) -> AliasChange:
        """Record ``alias`` as another name of ``canonical_of``'s entity, journalled.

        Both are normalised; ``given`` is the alias as the caller wrote it. The journal entry
        (kind ``alias``) carries the alias's hash, never the name.
        """
        now = self._now()

        def txn_fn(txn: WriteTxn) -> AliasChange:
            names = read_aliases(txn)
            c, writes = plan_alias(names, canonical_of, alias)
            if not writes:
                return AliasChange(
                    outcome="unchanged", canonical=c, alias=alias, group=names.group(c)
                )
            journal = JournalWriter(txn, now, self.actor)
            for a, canon in writes:
                old = names.records.get(a)
                rec = AliasRecord(
                    canonical=canon,
                    name=given if a == alias else (old.name if old else a),
                    at=now if a == alias or old is None else old.at,
                    by=self.actor if a == alias or old is None else old.by,
                )
                txn.put(alias_key(a), _seal(ALIAS_CODEC.encode(rec, "alias")))
                journal.append(JournalKind.ALIAS, hash=alias_hash(a), reason="alias")
            after = read_aliases(txn)
            moved = tuple(a for a, _ in writes[1:])
            return AliasChange(
                outcome="moved" if moved else "added",
                canonical=c,
                alias=alias,
                moved=moved,
                group=after.group(c),
            )

        result: AliasChange = self._kv.write(txn_fn)
        return result

    def _unalias(self, alias: str) -> AliasChange:
        """Remove the alias ``alias`` (normalised), journalled (``alias``, reason ``unalias``)."""
        now = self._now()

        def txn_fn(txn: WriteTxn) -> AliasChange:
            names = read_aliases(txn)
            rec = names.records.get(alias)
            if rec is None:
                c = names.canonical(alias)
                return AliasChange(outcome="absent", canonical=c, alias=alias, group=names.group(c))
            txn.delete(alias_key(alias))
            JournalWriter(txn, now, self.actor).append(
                JournalKind.ALIAS, hash=alias_hash(alias), reason="unalias"
            )
            return AliasChange(
                outcome="removed",
                canonical=rec.canonical,
                alias=alias,
                group=read_aliases(txn).group(rec.canonical),
            )

        result: AliasChange = self._kv.write(txn_fn)
        return result

    # -- temporal chains (``specs/claims.md`` §6) ------------------------------------------

    def _claims_of(self, txn: ReadTxn, head: Head, row: int | None = None) -> tuple[bytes, ...]:
        """The claim hashes a memory is indexed under (its current version's data)."""
        v = self._version(txn, head.id, head.current_version, row)
        return () if v.data is None else claim_hashes(decode_stored(head.type, v.data))

    def _resolve_chains(
        self,
        txn: WriteTxn,
        prepared: Sequence[Prepared],
        journal: JournalWriter,
        now: datetime,
        visible: Visible | None,
    ) -> list[WriteResult]:
        """Apply the chain rules to new memories and say what each write did.

        In order: a later memory of the batch is not a competitor of an earlier one.
        """
        later = {p.head.id for p in prepared if p.lookup is not None}
        out = []
        for p in prepared:
            uri = Uri._trusted(p.type, p.head.id, 1)
            if p.lookup is None:
                out.append(WriteResult.of(uri, "created"))
                continue
            later.discard(p.head.id)
            sup, by, con = self._chain(
                txn, p, mid=p.head.id, skip=later, journal=journal, now=now, visible=visible
            )
            outcome: WriteOutcome = (
                "archived" if by else "conflict" if con else "superseded" if sup else "created"
            )
            out.append(
                WriteResult.of(uri, outcome, supersedes=sup, superseded_by=by, conflicts_with=con)
            )
        return out

    def _chain(
        self,
        txn: WriteTxn,
        p: Prepared,
        *,
        mid: MemoryId,
        skip: Collection[MemoryId],
        journal: JournalWriter,
        now: datetime,
        visible: Visible | None,
    ) -> tuple[tuple[Uri, ...], tuple[Uri, ...], tuple[Uri, ...]]:
        """Link ``mid`` (holding ``p``'s content) with its current competitors.

        Returns the URIs it supersedes, that supersede it and that it conflicts with.
        """
        if p.lookup is None:
            return (), (), ()
        now_us = to_micros(now)
        sup: list[Uri] = []
        by: list[Uri] = []
        con: list[Uri] = []
        seen: set[MemoryId] = set()
        oids = [MemoryId(key[-16:]) for key in self._competitors(txn, p)]
        oids = [o for o in dict.fromkeys(oids) if o != mid and o not in skip]
        _prefetch_competitors(txn, mid, oids)
        for oid in oids:
            if oid in seen:
                continue
            seen.add(oid)
            orow, head = self._row_head(txn, oid)
            if head.tombstone is not None or head.type is not p.type:
                continue
            if visible is not None and not visible(txn, head):
                continue  # a memory the writer may not see is no competitor of its write
            if self._superseder(txn, oid, now_us) is not None:
                continue  # history already
            v = self._version(txn, oid, head.current_version, orow)
            if v.data is None or (v.expires_at is not None and to_micros(v.expires_at) <= now_us):
                continue
            data = decode_stored(head.type, v.data)
            when = to_micros(chains.effective_time(data, v.valid_from, v.created_at))
            conf = chains.effective_confidence(data, v.confidence)
            other = Uri._trusted(head.type, oid, head.current_version)
            winner = chains.winner(to_micros(p.when), p.conf, when, conf)
            if winner == "new":
                if self._put_edge(txn, mid, EdgeType.SUPERSEDES, oid, journal=journal):
                    sup.append(other)
                    _mark_superseded(txn, oid, claim_hashes(data))
            elif winner == "old":
                if self._put_edge(txn, oid, EdgeType.SUPERSEDES, mid, journal=journal):
                    by.append(other)
                    _mark_superseded(txn, mid, p.claims)
            elif self._put_edge(txn, mid, EdgeType.CONTRADICTS, oid, journal=journal):
                con.append(other)
        return tuple(sup), tuple(by), tuple(con)

    def _competitors(self, txn: ReadTxn, p: Prepared) -> list[bytes]:
        """The ``idx/claim/`` keys under ``p``'s lookup, in every entity spelling.

        The spellings are those the store's aliases give (``specs/claims.md`` §10). The index
        holds only memories no other supersedes (format 12), so a chain's history costs
        nothing here however long it grows.
        """
        assert p.lookup is not None
        lookups: tuple[bytes, ...] = (p.lookup,)
        names = read_aliases(txn)
        if names and p.data is not None:
            keys = chains.lookup_keys(p.data, p.force, names.group)
            lookups = tuple(dict.fromkeys(chains.claim_hash(k) for k in keys))
        return [key for lk in lookups for key in txn.keys(claim_index_prefix(lk))]

    def _put_edge(
        self,
        txn: WriteTxn,
        s: MemoryId,
        et: EdgeType,
        d: MemoryId,
        *,
        journal: JournalWriter,
        reason: str | None = None,
    ) -> bool:
        """Add a live edge (both halves, journalled) unless it is live already."""
        fkey = edge_from_key(s, et, d)
        old = txn.get(fkey)
        if old is not None and decode_trusted(EDGE_CODEC, fkey, old).removed_at is None:
            return False
        record = EdgeRecord(created_at=journal.at, created_by=self.actor)
        payload = _seal(EDGE_CODEC.encode(record, "edge"))
        txn.put(fkey, payload)
        txn.put(edge_to_key(d, et, s), payload)
        journal.append(JournalKind.ADD_EDGE, id=s, edge=et, dst=d, reason=reason)
        return True

    def _superseder(self, txn: ReadTxn, mid: MemoryId, at_us: int) -> MemoryId | None:
        """The memory that supersedes ``mid`` at ``at_us``, if any (``superseder``)."""
        return superseder(txn, mid, at_us)

    def _mark(self, txn: WriteTxn, mid: MemoryId, claims: Iterable[bytes], now_us: int) -> None:
        """Index ``mid`` under its claims in ``idx/claim/`` unless it is superseded now."""
        # as the store stands, whatever the clocks of the processes that wrote it say
        if superseder(txn, mid, FOREVER) is not None:
            for c in claims:
                txn.delete(claim_index_key(c, mid))
        else:
            for c in claims:
                txn.put(claim_index_key(c, mid), b"")

    def _remark(self, txn: WriteTxn, mids: Iterable[MemoryId], now_us: int) -> None:
        """Mark again the claim entries of memories whose superseders may have changed."""
        for mid in mids:
            try:
                head = self._head(txn, mid)
            except NotFoundError:
                continue
            self._mark(txn, mid, self._claims_of(txn, head), now_us)

    def _losers(self, txn: ReadTxn, mid: MemoryId) -> list[MemoryId]:
        """The memories ``mid`` has a (live or removed) ``supersedes`` edge to."""
        prefix = EDGE_FROM + mid.bytes + bytes((EdgeType.SUPERSEDES,))
        return [MemoryId(key[-16:]) for key in txn.keys(prefix)]

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
        return purging.purge_episode(self, eid, reason, by, scrub=scrub, wait=wait)

    def _set_episode_sensitivity(self, eid: MemoryId, level: Sensitivity) -> Episode:
        """Store an episode's level and journal it (``episode_update``, field ``sensitivity``).

        Raises:
            NotFoundError: no such episode.
            ValidationError: the episode was purged (a purge removed its level; nothing is
                left to protect).
        """
        now = self._now()

        def txn_fn(txn: WriteTxn) -> Episode:
            ep = self._episode(txn, eid)
            if ep.content is None:
                raise ValidationError(
                    "episode", "purged", f"episode {eid} was purged: nothing is left to protect"
                )
            # the level is in the episode record (format 9); the old record is not checked
            # further than its read, and the new one replaces it whole
            ep = msgspec.structs.replace(ep, sensitivity=stored_level(level))
            txn.put(episode_key(eid), _seal(encode_episode(ep)))
            JournalWriter(txn, now, self.actor).append(
                JournalKind.EPISODE_UPDATE, id=eid, hash=ep.hash, fields=("sensitivity",)
            )
            return ep

        result: Episode = self._kv.write(txn_fn)
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
        supersede: bool | None = None,
        sensitivity: None = None,
    ) -> WriteResult:
        """Write a new version of a memory; the head moves to it. Old versions stay readable.

        The result's ``outcome`` is ``new_version``; when the new content competes with another
        current memory (``write``'s ``supersede``), ``supersedes``, ``superseded_by`` or
        ``conflicts_with`` name it.

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
            supersede: the temporal-chain rules for the new content (as ``write``).
            sensitivity: refused (a ``ValidationError``): an update keeps the memory's level;
                ``update_head(ref, sensitivity=...)`` changes it.

        Raises:
            NotFoundError: no such memory.
            ValidationError: the data or options break a rule, or the type differs.
            TombstonedError: the memory is tombstoned.
            ConflictError: ``expected_version`` is stale.
        """
        mid = as_id(ref, "uri")
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
            supersede=supersede,
            sensitivity=sensitivity,
        )
        return self._update(mid, spec, now, expected_version, None)

    def _update(
        self,
        mid: MemoryId,
        spec: NewMemory,
        now: datetime,
        expected_version: int | None,
        visible: Visible | None,
    ) -> WriteResult:
        if spec.sensitivity is not None:
            raise ValidationError(
                "sensitivity",
                "immutable",
                "an update keeps the memory's sensitivity: change it with "
                "update_head(ref, sensitivity=...)",
            )
        p = self._prepare(spec, now)  # its version is renumbered inside the transaction
        self._embed_prepared([p])

        def txn_fn(txn: WriteTxn) -> WriteResult:
            self._charge(txn, 1)
            row, head = self._row_head(txn, mid)
            self._check_change(mid, head)
            self._guard_change(txn, mid, head)
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
            old_claims = self._claims_of(txn, head, row)
            version = msgspec.structs.replace(p.version, version=n)
            new_head = msgspec.structs.replace(
                head, current_version=n, last_updated_at=now, forms=version.forms
            )
            if not txn.put(
                version_key(row, n), _seal(VERSION.encode(version, "version")), overwrite=False
            ):
                raise IntegrityError(f"version {n} of {mid} exists beyond the head")
            txn.put(head_key(row), _seal(HEAD.encode(new_head, "head")))
            set_pin(txn, new_head, p.pinned)  # a status or strength may change either way
            lex = Indexer(txn)
            lex.remove(row, head.current_version)
            lex.add_counted(row, n, *p.terms)
            lex.flush()
            if p.vector is not None:
                txn.put(vec_key(row), self._vector_value(n, p.vector))
            else:  # the old version's vector no longer fits; embedded later (sidecar sweep)
                txn.delete(vec_key(row))
            journal = JournalWriter(txn, now, self.actor)
            journal.append(JournalKind.UPDATE, id=mid, type=head.type, version=n, hash=version.hash)
            for c in set(old_claims) - set(p.claims):
                txn.delete(claim_index_key(c, mid))
            self._mark(txn, mid, p.claims, to_micros(now))
            links = self._chain(txn, p, mid=mid, skip=(), journal=journal, now=now, visible=visible)
            return WriteResult.of(
                Uri._trusted(head.type, mid, n),
                "new_version",
                supersedes=links[0],
                superseded_by=links[1],
                conflicts_with=links[2],
            )

        return self._budgeted(txn_fn, now)

    def update_head(
        self,
        ref: Uri | MemoryId | str,
        *,
        tags: Sequence[str] | None = None,
        frames: Sequence[FrameRef] | None = None,
        importance: int | None = None,
        visibility: Visibility | str | None = None,
        sensitivity: Sensitivity | str | None = None,
        **other: object,
    ) -> Head:
        """Change a memory's tags, frames, importance, visibility or sensitivity; no new version.

        Index entries are updated to match in the same transaction and the change is journalled
        (field names only: ``sensitivity`` names a level change, kept in the head: format 9).

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
                "only tags, frames, importance, visibility and sensitivity change through "
                "update_head; write a new version with update() for anything else",
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
        if sensitivity is not None:  # the level is in the head (``sensitivity.md`` §2)
            patch["sensitivity"] = stored_level(coerce_level(sensitivity))
        if not patch:
            raise ValidationError(
                "patch",
                "empty",
                "nothing to change: pass tags, frames, importance, visibility or sensitivity",
            )
        mid = as_id(ref, "uri")
        now = self._now()

        def txn_fn(txn: WriteTxn) -> Head:
            row, head = self._row_head(txn, mid)
            self._check_change(mid, head)
            self._guard_change(txn, mid, head)
            new_head = msgspec.structs.replace(head, last_updated_at=now, **patch)
            payload = HEAD.encode(new_head, "head")  # validates importance and the rest
            self._move_index(txn, head, new_head)
            txn.put(head_key(row), _seal(payload))
            JournalWriter(txn, now, self.actor).append(
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
        mid = as_id(ref, "uri")
        now = self._now()
        stone = Tombstone(reason=reason, at=now, by=by if by is not None else self.actor)
        check_tombstone(stone)

        def txn_fn(txn: WriteTxn) -> Tombstone:
            row, head = self._row_head(txn, mid)
            self._guard_change(txn, mid, head)
            if head.tombstone is not None:
                return head.tombstone
            new_head = msgspec.structs.replace(head, tombstone=stone, last_updated_at=now)
            txn.put(head_key(row), _seal(HEAD.encode(new_head, "head")))
            lex = Indexer(txn)
            lex.remove(row, head.current_version)  # a tombstoned memory leaves the index
            lex.flush()
            txn.delete(vec_key(row))  # and the vector index (the row stays the memory's)
            # what it superseded may be the truth again (``claims.md`` §6)
            self._remark(txn, self._losers(txn, mid), to_micros(now))
            JournalWriter(txn, now, self.actor).append(
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
        (``specs/storage.md`` §11). Without it the bytes stay in freed pages until the next
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
        return purging.purge(self, as_id(ref, "uri"), reason, by, scrub=scrub, wait=wait)

    def scrub(self, *, wait: float = 30.0) -> ScrubReport:
        """The erasure step: zero every byte of the store's files that no reader can read again.

        Commits ``meta/scrub`` (so that the pages the last commits released from the previous
        meta page's tree may be reused), waits up to ``wait`` seconds for read snapshots older
        than that, then, holding the writer lock (writers wait, readers go on), overwrites with
        zeros every free page LMDB may reuse, every page gap and the unused end of every large
        value (``cortex.storage.scrub``). A kill at any point leaves the store consistent.

        Returns:
            What it did; ``complete`` is False when a snapshot older than the step still held
            pages after ``wait`` seconds (run it again once the snapshot ends).

        Raises:
            ValidationError: ``wait`` is negative.
            CortexError: the store is read-only, the host is not 64-bit little-endian, or
                ``data.mdb`` does not parse as LMDB 0.9 (then nothing is written).
        """
        check_wait(wait)
        return self._scrub(wait, self._now())

    def _scrub(self, wait: float, now: datetime) -> ScrubReport:
        """The erasure step on the store's files, then its owner's part (``Hooks.after_scrub``)."""
        return self._after_scrub(erasure.scrub_files(self._kv, self.actor, wait, now), now)

    def verify_erasure(self) -> ErasureReport:
        """Audit every erasure: nothing a purge erased is left in a record or in any file.

        For each erasure record (``er/``): the memory's or episode's records hold no content
        (no data, forms, tags, frames or caller text in provenance; no lexical document,
        vector or use counters; an episode without text, chunks, evidence or chunk vectors).
        Then every file under the store directory is scanned, byte by byte, for the record's
        needles (``cortex.engine.erasure``); a match in ``data.mdb`` is placed in the page structure
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
        return purging.verify_erasure(self._kv, self.path)

    # -- import and backup -------------------------------------------------------------------

    def import_records(
        self,
        memories: Iterable[tuple[Head, Sequence[Version]]],
        edges: Iterable[Edge] = (),
        episodes: Iterable[Episode] = (),
        *,
        sensitivity: Mapping[MemoryId, Sensitivity] | None = None,
        episode_sensitivity: Mapping[MemoryId, Sensitivity] | None = None,
        aliases: Mapping[str, AliasRecord] | None = None,
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
            sensitivity: the level of imported memories that are not ``internal`` (by id).
            episode_sensitivity: the same for imported episodes. A memory or episode the
                store already holds must hold the same level (else a conflict).
            aliases: entity alias records by normalised alias (``claims.md`` §10); one the
                store holds with another record is a conflict, and no canonical name may be
                an alias once they are in.

        Returns:
            How many memories, versions, edges and episodes were added or already present.

        Raises:
            IntegrityError: a version's data does not match its hash.
            ValidationError: a record breaks a rule, or a memory or edge is given twice.
            CodecError: a version's data is not a canonical record of its type.
            ConflictError: the store holds a memory or edge of that name with other records.
            NotFoundError: an edge's endpoint is neither imported nor in the store.
        """
        return importer.import_records(
            self._kv,
            self.actor,
            self._now,
            self._chunk_vectors,
            self._remark,
            memories,
            edges,
            episodes,
            sensitivity=sensitivity,
            episode_sensitivity=episode_sensitivity,
            aliases=aliases,
        )

    def backup(self, dest: str | os.PathLike[str]) -> VerifyReport:
        """Write a consistent, compacted copy of the store to the new directory ``dest``.

        Writers may keep writing meanwhile: the copy is one read snapshot. The store's pages
        are checked first (a structurally damaged file is not copied: LMDB would crash
        copying it); the copy is then opened and verified, and removed when it does not
        verify, so ``dest`` only ever holds a good backup.

        Returns:
            The verify report of the copy (``ok``), or of what was wrong (``not ok``: no copy
            is left at ``dest``).

        Raises:
            CortexError: ``dest`` exists or cannot be written, or is a URL (a backup is an LMDB
                directory; ``cortex copy`` copies a store into PostgreSQL).
        """
        dest = argcheck.path(dest, "dest")
        if is_url(dest):  # Path() would fold "postgresql://" into a relative directory
            raise CortexError(
                "a backup goes into a new directory, not a URL: to put a copy of the store in "
                "PostgreSQL, use `cortex copy SRC URL`"
            )
        if os.path.lexists(dest):
            raise CortexError(f"{dest} exists; a backup goes into a new directory")
        with self._kv.read_checked() as txn:
            damage = txn.damage
        if damage:
            return structural_report(damage)
        try:
            if isinstance(self._kv, LmdbKV) and self._kv.compact_copy_safe:
                self._kv.copy(dest)
            else:  # another engine, or LMDB's databases of duplicates (format 20, which LMDB's
                # compacting copy crashes on): an LMDB copy of one read snapshot, record by record
                copy_kv(self._kv, dest)
        except FileExistsError:
            raise CortexError(f"{dest} exists; a backup goes into a new directory") from None
        except OSError as exc:
            raise CortexError(f"cannot write the backup to {dest}: {exc}") from exc
        try:
            with type(self).open(dest, actor=self.actor, create=False) as copy:
                report = copy.verify()
        except BaseException:
            shutil.rmtree(dest, ignore_errors=True)
            raise
        if not report.ok:
            shutil.rmtree(dest, ignore_errors=True)  # never leave a damaged copy behind
        return report

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
        s, d = as_id(src, "src"), as_id(dst, "dst")
        et: EdgeType = _coerce(EdgeType, type, "type")
        if s == d:
            raise ValidationError("dst", "self_edge", f"an edge from {s} to itself is not allowed")
        now = self._now()
        record = EdgeRecord(
            created_at=now, created_by=by if by is not None else self.actor, weight=weight
        )
        try:
            payload = _seal(EDGE_CODEC.enc(record))
        except Invalid as exc:
            raise ValidationError(exc.where.lstrip("."), exc.rule, exc.message) from None

        def txn_fn(txn: WriteTxn) -> Edge:
            for which, mid in (("src", s), ("dst", d)):
                if txn.get(id_key(mid)) is None:
                    raise NotFoundError(f"{which} memory {mid} does not exist")
            self._guard_change(txn, s)
            self._guard_see(txn, d)
            fkey = edge_from_key(s, et, d)
            old = txn.get(fkey)
            if old is not None:
                existing: EdgeRecord = decode_trusted(EDGE_CODEC, fkey, old)
                if existing.removed_at is None:
                    return edge_of(s, et, d, existing)
            txn.put(fkey, payload)
            txn.put(edge_to_key(d, et, s), payload)
            if et is EdgeType.SUPERSEDES:
                self._remark(txn, (d,), to_micros(now))
            JournalWriter(txn, now, self.actor).append(JournalKind.ADD_EDGE, id=s, edge=et, dst=d)
            return edge_of(s, et, d, record)

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
        s, d = as_id(src, "src"), as_id(dst, "dst")
        et: EdgeType = _coerce(EdgeType, type, "type")
        now = self._now()
        who = by if by is not None else self.actor

        def txn_fn(txn: WriteTxn) -> Edge:
            self._guard_change(txn, s)
            fkey = edge_from_key(s, et, d)
            old = txn.get(fkey)
            if old is None:
                raise NotFoundError(f"no {et.label} edge from {s} to {d}")
            rec: EdgeRecord = decode_trusted(EDGE_CODEC, fkey, old)
            if rec.removed_at is not None:
                return edge_of(s, et, d, rec)
            rec = msgspec.structs.replace(rec, removed_at=now, removed_by=who)
            payload = _seal(EDGE_CODEC.encode(rec, "edge"))
            txn.put(fkey, payload)
            txn.put(edge_to_key(d, et, s), payload)
            if et is EdgeType.SUPERSEDES:
                self._remark(txn, (d,), to_micros(now))
            JournalWriter(txn, now, self.actor).append(
                JournalKind.REMOVE_EDGE, id=s, edge=et, dst=d
            )
            return edge_of(s, et, d, rec)

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
        mid = as_id(ref)
        if direction not in ("out", "in", "both"):
            raise ValidationError("direction", "enum", "must be 'out', 'in' or 'both'")
        wanted = (
            None
            if types is None
            else {_coerce(EdgeType, t, "types") for t in argcheck.items(types, "types")}
        )
        out = []
        with self._kv.read() as txn:
            prefixes = []
            if direction in ("out", "both"):
                prefixes.append(EDGE_FROM + mid.bytes)
            if direction in ("in", "both"):
                prefixes.append(EDGE_TO + mid.bytes)
            for prefix in prefixes:
                check_edge_neighbours(txn, mid, prefix[: -len(mid.bytes)])
                for key, value in txn.scan(prefix):
                    s, et, d = parse_edge_key(key)
                    if wanted is not None and et not in wanted:
                        continue
                    rec: EdgeRecord = decode_trusted(EDGE_CODEC, key, value)
                    from_half = key.startswith(EDGE_FROM)
                    twin = edge_to_key(d, et, s) if from_half else edge_from_key(s, et, d)
                    if txn.get(twin) != value:
                        raise IntegrityError(
                            f"the two halves of edge {s} {et.label} {d} differ or one is "
                            "missing: the store is damaged"
                        )
                    if rec.removed_at is not None and not include_removed:
                        continue
                    out.append(edge_of(s, et, d, rec))
        return out

    # -- reads -------------------------------------------------------------------------------

    def _head(self, txn: ReadTxn, mid: MemoryId) -> Head:
        return self._row_head(txn, mid)[1]

    def _row_head(self, txn: ReadTxn, mid: MemoryId) -> tuple[int, Head]:
        """The row and head of ``mid`` (format 21: its ``id/`` record, then ``m/`` row).

        Raises:
            NotFoundError: no such memory.
            IntegrityError: a record is missing or damaged, or names another memory.
        """
        row = row_of(txn, mid)
        if row is None:
            raise NotFoundError(f"no memory {mid}")
        raw = txn.get(head_key(row))
        ctx = _READ
        if ctx is not None and raw is not None:
            head: Head | None = _sp.read_head(ctx, mid.bytes, raw)
            if head is not None:
                return row, head
        return row, self._head_from(mid, raw, row)

    def _row_read(
        self, mid: MemoryId, keys: list[tuple[bytes, bytes]], last: bytes | None = None
    ) -> tuple[int, list[bytes | None], tuple[bytes, bytes] | None]:
        """The row of ``mid`` and a point read of keys built of it, in one (one round trip).

        The engine follows the ``id/`` record to the row (``KV.point_read_row``: on
        PostgreSQL the server does): each of ``keys`` is ``(prefix, suffix)`` around the row,
        ``last`` a prefix the row ends. The values are used only when the ``id/`` value
        decodes (its checksum, 4 bytes): else they were read at a row that is not one.

        Raises:
            NotFoundError: no such memory.
            IntegrityError: its ``id/`` record is damaged.
        """
        key = id_key(mid)
        raw, values, tail = self._kv.point_read_row(key, keys, last)
        if raw is None:
            raise NotFoundError(f"no memory {mid}")
        return decode_row(key, raw), values, tail

    @staticmethod
    def _check_change(mid: MemoryId, head: Head) -> None:
        """Raise ``TombstonedError`` when ``head`` (of ``mid``) is tombstoned."""
        if head.tombstone is not None:
            raise TombstonedError(
                f"memory {mid} was tombstoned ({head.tombstone.reason}); it can be resolved for "
                "audit but not changed"
            )

    @staticmethod
    def _current_reader(
        txn: ReadTxn,
    ) -> Callable[[bytes], tuple[Head, Version] | None] | None:
        """A reader of a memory's head and the version it points at, one C call per id.

        For many ids of one snapshot: raw id -> ``(head, version)``, or None where the C path
        declines (anything missing, damaged or unusual: ``_head`` and ``_version`` say what).

        A C callable (no Python frame per call) over an engine that reads in place (LMDB's
        ``raw_get``); None without the C read path, or on an engine with round trips, where
        reading a version before the head's filters pass could cost one.
        """
        ctx = _READ
        raw_get = getattr(txn, "raw_get", None)
        if ctx is None or raw_get is None:
            return None
        return functools.partial(_sp.read_current, ctx, raw_get)

    @staticmethod
    def _rows_reader(
        txn: ReadTxn,
    ) -> Callable[[list[bytes]], list[tuple[Head, Version]] | None] | None:
        """A reader of the memories at document numbers (rows), one C call for all of them.

        Rows (4 bytes, big-endian: the lexical index's postings) -> each row's ``(head,
        version)`` as ``_current_reader`` reads them, the head's ``id/`` record naming the row
        back; None where the C path declines for any (``lexical._ids_of`` then reads and says
        what is wrong). None without the C read path or on an engine with round trips.
        """
        ctx = _READ
        raw_get = getattr(txn, "raw_get", None)
        rows: Any = getattr(_sp, "read_rows", None)
        if ctx is None or raw_get is None or rows is None:
            return None
        return functools.partial(rows, ctx, raw_get)

    @staticmethod
    def _accepted_reader(
        txn: ReadTxn, types: frozenset[MemoryType], tags: tuple[str, ...], superseded: bool
    ) -> Callable[[bytes], Any] | None:
        """``_current_reader`` with the first filters of a find of ``types`` and ``tags`` alone.

        Raw id -> False (the head's type or a tag does not match), ``(head, version, True)``
        (the row passes: no tombstone, no supersedes edge to it unless ``superseded``, no
        expiry), ``(head, version, False)`` (the query's filters decide), or None (the C read
        declines). ``cortex.query.planner.Executor._stream`` uses it for the store's owner;
        None without the C read, or on an engine without it (``_current_reader``).
        """
        accepted: Callable[..., Any] | None = getattr(_sp, "read_accepted", None)
        if accepted is None:
            return None
        args = Store._accepted_args(txn, types, tags, superseded)
        return None if args is None else functools.partial(accepted, *args)

    @staticmethod
    def _accepted_args(
        txn: ReadTxn,
        types: frozenset[MemoryType],
        tags: tuple[str, ...],
        superseded: bool,
        cursor: Any = None,
    ) -> tuple[Any, ...] | None:
        """The arguments ``read_accepted`` (and ``read_page``) take before the id, or None.

        ``(ctx, get, cursor, edge_to, into, types, tags)`` as ``_accepted_reader`` binds them;
        None without the C read, or on an engine without it. ``cursor``: the snapshot's cursor
        where the caller has one (each look positions it afresh), else a new one.
        """
        ctx = _READ
        raw_get = getattr(txn, "raw_get", None)
        make = getattr(txn, "cursor", None)
        if ctx is None or raw_get is None or make is None:
            return None
        return (
            ctx,
            raw_get,
            None if superseded else (cursor if cursor is not None else make()),
            EDGE_TO,
            bytes((EdgeType.SUPERSEDES,)),
            types,
            tags,
        )

    _head_from = staticmethod(head_from)
    """The head of ``mid`` at ``row`` from its stored value, checked (``heads.head_from``)."""

    def _version(self, txn: ReadTxn, mid: MemoryId, n: int, row: int | None = None) -> Version:
        """Version ``n`` of a memory whose head says it exists (``n <= current_version``).

        ``row``: the memory's row, when the caller read it (else its ``id/`` record is read).
        """
        if row is None:
            row = row_of(txn, mid)
            if row is None:
                raise NotFoundError(f"no memory {mid}")
        key = version_key(row, n)
        raw = txn.get(key)
        if raw is None:
            raise IntegrityError(
                f"version {n} of memory {mid} is missing although its head points at it: "
                "the store is damaged"
            )
        ctx = _READ
        if ctx is not None:
            v: Version | None = _sp.read_version(ctx, mid.bytes, n, raw)
            if v is not None:
                return v
        return self._checked_version(key, raw, mid, n)

    @staticmethod
    def _checked_version(
        key: bytes,
        raw: bytes,
        mid: MemoryId | None = None,
        n: int = 0,
        *,
        hashed: bool = False,
        owner: MemoryId | None = None,
    ) -> Version:
        """The version stored under ``key`` (version ``n`` of ``mid``, when the caller knows).

        A read checks the value's CRC and that it is the version its key names; ``hashed``
        also checks the data against its sha256 (``specs/storage.md`` §"What a read checks":
        ``verify``, import, export and ``history`` do, the hot reads do not).
        """
        v: Version = decode_trusted(VERSION, key, raw)
        if (
            (v.id != mid or v.version != n)
            if mid is not None
            else (owner is not None and v.id != owner)
            or key[len(_VERSION_KEY_PREFIX) + 4 :] != v.version.to_bytes(8, "big")
        ):
            raise IntegrityError(f"record {_show_key(key)} holds version {v.id}#{v.version}")
        if hashed and v.data is not None and content_hash(v.type, v.data) != v.hash:
            raise IntegrityError(f"version {_show_key(key)}: data does not match its hash")
        return v

    @staticmethod
    def _hashed_version(key: bytes, raw: bytes, owner: MemoryId | None = None) -> Version:
        """``_checked_version`` with the sha256 of the data checked (export's, history's).

        ``owner``: the memory the version must be of, when the caller knows it.
        """
        return Store._checked_version(key, raw, hashed=True, owner=owner)

    @staticmethod
    def _memory(head: Head, v: Version) -> Memory:
        ctx = _READ
        if ctx is not None:
            m: Memory | None = _sp.memory_of(ctx, head, v)
            if m is not None:
                return m
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
        nkey = version_key(0, u.version)[len(_VERSION_KEY_PREFIX) + 4 :]  # u64(version)
        row, (hraw, vraw), _ = self._row_read(
            u.id, [(_HEAD_KEY_PREFIX, b""), (_VERSION_KEY_PREFIX, nkey)]
        )
        vkey = version_key(row, u.version)
        ctx = _READ
        if ctx is not None:
            m: Memory | None = _sp.read_memory(ctx, u.id.bytes, hraw, vkey, vraw, u.version)
            if m is not None and m.head.type is u.type:
                return m
        head = self._head_from(u.id, hraw, row)
        if head.type is not u.type:
            raise NotFoundError(f"no {u.type.type_name} {u.id}")
        if u.version > head.current_version:
            raise NotFoundError(f"no version {u.version} of memory {u.id}")
        if vraw is None:
            raise IntegrityError(
                f"version {u.version} of memory {u.id} is missing although its head points at "
                "it: the store is damaged"
            )
        return self._memory(head, self._checked_version(vkey, vraw, u.id, u.version))

    def resolve_latest(self, ref: Uri | MemoryId | str) -> Memory:
        """The current version of a memory.

        Raises:
            NotFoundError: no such memory.
            IntegrityError: the head or the version is damaged or missing.
        """
        mid = ref if type(ref) is MemoryId else as_id(ref)
        ctx = _READ
        call = self._point_call
        if ctx is not None and call is not None and _READ_LATEST is not None:
            # the row, the head and the last version and read_memory in one C call (one
            # snapshot, the same checks; the Memory's ids are ``mid`` itself); where it
            # declines (missing, damaged, unusual), the Python path below reads again
            got = call(_READ_LATEST, ctx, mid)
            if got is not None:
                return got  # type: ignore[no-any-return]
        raw = mid.bytes
        # the row, the head and the last version key in one snapshot read (one round trip):
        # versions are 1..current, so the last key under the memory's prefix is normally the
        # one the head points at, which is what this returns (specs/storage.md, "What a read
        # checks": a stray version past it is verify's and history's to report)
        row, (hraw,), last = self._row_read(mid, [(_HEAD_KEY_PREFIX, b"")], _VERSION_KEY_PREFIX)
        if ctx is not None and last is not None:
            m: Memory | None = _sp.read_memory(ctx, raw, hraw, last[0], last[1], 0)
            if m is not None:
                return m
        head = self._head_from(mid, hraw, row)
        vkey = version_key(row, head.current_version)
        if last is not None and last[0] == vkey:
            vraw: bytes | None = last[1]
        else:  # not the last one stored: the head and its version by key, in one snapshot
            with self._kv.read() as txn:
                row, head = self._row_head(txn, mid)
                vkey = version_key(row, head.current_version)
                got = txn.get(vkey)
                vraw = None if got is None else bytes(got)
        if vraw is None:
            raise IntegrityError(
                f"version {head.current_version} of memory {mid} is missing although its head "
                "points at it: the store is damaged"
            )
        return self._memory(head, self._checked_version(vkey, vraw, mid, head.current_version))

    def history(self, ref: Uri | MemoryId | str) -> list[Memory]:
        """Every version of a memory, oldest first.

        Raises:
            NotFoundError: no such memory.
            IntegrityError: the head or a version is damaged, or a version is missing.
        """
        mid = as_id(ref)
        with self._kv.read() as txn:
            row, head = self._row_head(txn, mid)
            versions = [self._hashed_version(k, v, mid) for k, v in txn.scan(version_prefix(row))]
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
        mid = as_id(ref)
        t = to_micros(when)
        k = to_micros(known_at) if known_at is not None else t
        with self._kv.read() as txn:
            row, head = self._row_head(txn, mid)
            if head.tombstone is not None and to_micros(head.tombstone.at) <= k:
                raise NotFoundError(f"memory {mid} was tombstoned at {head.tombstone.at}")
            for key, raw in txn.scan(version_prefix(row), reverse=True):
                v = self._checked_version(key, raw, owner=mid)
                if to_micros(v.created_at) > k:
                    continue
                if v.valid_from is not None and to_micros(v.valid_from) > t:
                    continue
                if v.valid_until is not None and to_micros(v.valid_until) <= t:
                    continue
                return self._memory(head, v)
        raise NotFoundError(f"memory {mid} had no valid version at {when.isoformat()}")

    def journal(
        self, start: int | None = None, *, reverse: bool = False, limit: int | None = None
    ) -> Iterator[JournalEntry]:
        """Journal entries from sequence number ``start`` (or backwards from it), at most ``limit``.

        Without ``start`` a forward read begins at the first entry and a reverse one at the
        last, so ``journal(reverse=True, limit=3)`` is the newest three, newest first.

        Every link of the chain among the entries read, and to the entry before them, is
        checked, so an entry altered with a matching checksum is caught too (all but the last
        entry, which nothing after it vouches for).

        Args:
            start: a sequence number, 0..2**64-1 (entries count from 1).
            reverse: newest first, from ``start`` down.
            limit: at most this many entries (>= 0); ``None``: no limit.

        Raises:
            ValidationError: ``start`` or ``limit`` is not an integer in range, ``reverse``
                not a bool (checked when called, before anything is read).
            IntegrityError: an entry fails its checksum, does not decode, or breaks the chain.
        """
        if start is None:
            start = _U64_MAX if reverse else 1
        start = argcheck.integer(start, "start", 0, _U64_MAX)
        if limit is not None:  # more than the journal can hold is no limit
            limit = min(argcheck.integer(limit, "limit", 0), sys.maxsize)
        if type(reverse) is not bool:
            raise ValidationError("reverse", "type", "must be True or False")
        return iter(self._journal(start, reverse, limit))

    def _journal(self, start: int, reverse: bool, limit: int | None) -> list[JournalEntry]:
        with self._kv.read() as txn:
            scan = txn.scan(JOURNAL, start=journal_key(start), reverse=reverse)
            pairs = list(itertools.islice(scan, limit))
            if reverse:
                pairs.reverse()
            prev, seq = ZERO_HASH, 0
            if pairs and parse_journal_key(pairs[0][0]) > 1:
                seq = parse_journal_key(pairs[0][0]) - 1
                raw = txn.get(journal_key(seq))
                if raw is None:
                    raise IntegrityError(f"journal entry j/{seq} is missing: the store is damaged")
                prev = hashlib.sha256(_unseal(journal_key(seq), raw)).digest()
        entries: list[JournalEntry] = []
        for key, value in pairs:
            entry: JournalEntry = decode_trusted(JOURNAL_CODEC, key, value)
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
        return entries

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
            limit: how many ``(id, score)`` pairs at most, best first, ties by document number
                ascending (the memory indexed first: ``lexical.md`` §6).
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
        argcheck.callback(progress, "progress")

        def fn(txn: WriteTxn) -> int:
            total = len(live_heads(txn)) if progress is not None else 0
            tick = None if progress is None else (lambda done: progress(done, total))
            return rebuild_lexical(txn, tick)

        return self._kv.write(fn)

    def merge_lexical(self) -> int:
        """Fold every pending posting segment into the lexical index's main blocks.

        A small write stores its lexical changes as one segment (``specs/lexical.md`` §4b); a
        larger one, or one that would leave too many, folds them all. This folds them now, in
        one write transaction (readers are never blocked): afterwards the index's bytes are a
        function of the live memories only. Searches give the same results before and after.

        Returns:
            How many segments were folded (0 when there were none).
        """
        return self._kv.write(lexical.fold)

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
        before, after = set(index_keys_of(old)), set(index_keys_of(new))
        for k in before - after:
            txn.delete(k)
        for k in after - before:
            txn.put(k, b"")

    def stats(self) -> dict[str, Any]:
        """Counts (memories by type and state, versions, edges, journal) and sizes."""
        by_type = {t.type_name: 0 for t in MemoryType}
        live = tombstoned = purged = versions = edges = journal = 0
        ranges: list[tuple[bytes, bytes | None]] = [
            (_HEAD_KEY_PREFIX, prefix_end(_HEAD_KEY_PREFIX)),
            (EDGE_FROM, prefix_end(EDGE_FROM)),
            (prefix_end(JOURNAL), prefix_end(JOURNAL)),  # the last entry, read backwards
            (meta_key("lexical"), meta_key("lexical")),
        ]
        with self._kv.read_checked(ranges) as txn:
            if txn.damage:  # LMDB would abort on the damaged pages: refuse, naming them
                raise damage_error(self.path, txn.damage)
            for key, value in txn.scan(_HEAD_KEY_PREFIX):
                head: Head = decode_trusted(HEAD, key, value)
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

        Before anything is read the snapshot's pages are checked (``cortex.storage.pages``): LMDB
        has no page checksums and aborts the process on some damaged pages, so a file with
        structural damage is reported page by page (``data.mdb page N``) and not walked.

        Returns:
            The report; ``report.ok`` is true when nothing is wrong.
        """
        return verify_store(self._kv, progress)

    # -- the engine interface ----------------------------------------------------------------
    # What the layers above use of a store (``cortex.agent.api.Cortex`` composes one; the query
    # executor and transfer read through it). Each method is the engine's own function under its
    # public name (an alias, not a wrapper: no call layer on a hot path). None of them checks a
    # reader's visibility: that is the composing layer's part (``Hooks.guard_change`` and its
    # own reads).

    @property
    def kv(self) -> KV:
        """The key-value engine the store is on (LMDB or PostgreSQL)."""
        return self._kv

    @property
    def space(self) -> str | None:
        """Whose memories this engine's new memories are (``None``: its actor's)."""
        return self._space

    def acting(self, actor: str, space: str | None, hooks: Hooks) -> Store:
        """This engine acting for ``actor``: the same environment, clock and task budgets.

        Its changes are made and journalled by ``actor``; its new memories are ``space``'s
        (``None``: ``actor``'s); ``hooks`` are the acting handle's.
        """
        other = copy.copy(self)
        other.actor = actor
        other._acting = actor
        other._space = space
        other._bind(hooks)
        return other

    now = _now  # the store's clock, checked (aware, after 1970)
    head = _head  # (txn, mid) -> Head; NotFoundError, IntegrityError
    version = _version  # (txn, mid, n) -> Version, checked as a read checks (no sha256)
    current_reader = _current_reader  # (txn) -> (raw id -> (head, version) or None) | None
    rows_reader = _rows_reader  # (txn) -> (rows -> [(head, version)] or None) | None
    accepted_reader = _accepted_reader  # (txn, types, tags, superseded) -> raw id -> ... | None
    accepted_args = _accepted_args  # (txn, types, tags, superseded) -> read_accepted's | None
    checked_version = _checked_version  # (key, raw) -> Version, decoded and checked (no sha256)
    hashed_version = _hashed_version  # (key, raw) -> Version, its data's sha256 checked too
    memory = _memory  # (head, version) -> Memory
    superseder = _superseder  # (txn, mid, at_us) -> the memory that supersedes mid, or None
    episode_record = _episode  # (txn, eid) -> Episode, checked
    episode_records = _episodes  # (txn, reverse=True) -> every episode
    episode_memories = _memories_of_episode  # (txn, eid) -> the memories made from it
    prepare = _prepare  # (spec, now, fresh=None) -> Prepared: validated, rendered, tokenized
    write_new = _write_new  # one new memory, competing with what ``visible`` allows
    write_episode = _write_episode  # an episode and the memories made from it, one transaction
    update_version = _update  # a new version, competing with what ``visible`` allows
    put_edge = _put_edge  # an edge's two halves and its journal entry, inside a transaction
    remark = _remark  # index again the claims of memories whose superseders may have changed
    purge_episode = _purge_episode  # erase an episode (and with scrub, its bytes)
    set_episode_level = _set_episode_sensitivity  # an episode's sensitivity
    add_alias = _alias  # (canonical_of, alias, given) -> AliasChange
    drop_alias = _unalias  # (alias) -> AliasChange
    lexical_search = _lexical_search  # BM25 over live memories: (query, limit, allow=None)
    claims_of = _claims_of  # (txn, head) -> the claim hashes of its current data
    losers = _losers  # (txn, mid) -> the memories mid supersedes
    move_index = _move_index  # (txn, old, new): a head's index entries moved to its new state
    erasure_step = _scrub  # (wait, now) -> ScrubReport: the erasure step and its owner's part

    @property
    def guard_change(self) -> GuardChange:
        """The owner's check of a change, inside its write transaction (``Hooks.guard_change``)."""
        return self._guard_change


def open_store(
    cls: Callable[..., _T],
    path: str | os.PathLike[str],
    *,
    actor: str | None,
    create: bool,
    readonly: bool,
    metasync: bool,
    map_size: int,
    clock: Callable[[], datetime] | None,
    check_pages: bool,
    options: Mapping[str, Any],
) -> _T:
    """``Store.open`` for ``cls`` (``Store``, or a class that composes one, as ``Cortex``).

    ``cls(kv, actor, clock=clock, **options)`` makes the handle; its keyword-only parameters
    are the options it accepts.
    """
    where = argcheck.path(path, "path")
    if actor is not None:
        try:
            _short.enc(actor)
        except Invalid as exc:
            raise ValidationError("actor", exc.rule, exc.message) from None
    for name, flag in (
        ("create", create),
        ("readonly", readonly),
        ("metasync", metasync),
        ("check_pages", check_pages),
    ):
        argcheck.flag(flag, name)
    argcheck.integer(map_size, "map_size", 0, _MAX_MAP_SIZE)
    argcheck.callback(clock, "clock")
    accepted = _options_of(cls)
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise ValidationError(
            unknown[0],
            "unknown",
            f"is not an option of {getattr(cls, '__name__', 'Store')}.open; the options are "
            f"{', '.join(sorted(accepted))}",
        )
    try:
        kv = open_kv(
            where,
            readonly=readonly,
            metasync=metasync,
            map_size=map_size,
            create=create,
            check_pages=check_pages,
            epoch_prefix=ERASURE_PREFIX,  # an erasure renews every writer's page buffers
        )
    except OSError as exc:  # creating the directory: a file in the way, no permission, ...
        raise CortexError(f"cannot open the store at {where[:200]}: {exc.strerror or exc}") from exc
    try:
        return cls(kv, actor, clock=clock, **options)
    except BaseException:
        kv.close()
        raise


def edge_of(s: MemoryId, et: EdgeType, d: MemoryId, rec: EdgeRecord) -> Edge:
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


def _check_task_id(task_id: object) -> None:
    if not isinstance(task_id, str) or not task_id.strip() or len(task_id) > 256:
        raise ValidationError("task", "required", "a task id is non-empty text (<= 256)")
    argcheck.unicode(task_id, "task")


def check_edge_neighbours(txn: ReadTxn, mid: MemoryId, base: bytes) -> None:
    """Raise if an edge of ``mid`` lost its ``base`` half's key to damage (``e/from/``, ``e/to/``).

    Keys carry no checksum. A damaged id byte in ``e/from/<mid>...`` moves the edge out of
    ``mid``'s range: a scan of the range would silently miss it. Such a key stays where it was
    in cursor order (damage in a page does not re-sort it), right before ``mid``'s range or where
    the scan of the range stopped; and its twin in the other half still names ``mid``. So the
    key just before the range and the key the scan stops at are checked: one whose twin, with
    ``mid`` in place of its own id, holds the same record while ``mid``'s own key for that edge
    is missing is ``mid``'s edge, damaged. (``verify`` finds every damaged edge key.)

    Raises:
        IntegrityError: naming the edge.
    """
    prefix = base + mid.bytes
    keyspace = EDGE_FROM if base == EDGE_FROM else EDGE_TO
    stop = next((k for k in txn.keys(keyspace, start=prefix) if not k.startswith(prefix)), None)
    before = next(iter(txn.keys(keyspace, start=prefix, reverse=True)), None)
    for key in (stop, before):
        if key is None or len(key) != len(prefix) + 17:
            continue
        try:
            src, et, dst = parse_edge_key(key)
        except (CortexError, ValueError):
            continue
        if keyspace == EDGE_FROM:  # e/from/<src> et <dst>: the twin is e/to/<dst> et <mid>
            other, end = src, dst
            twin, own = edge_to_key(dst, et, mid), edge_from_key(mid, et, dst)
        else:  # e/to/<dst> et <src>: the twin is e/from/<src> et <mid>
            other, end = dst, src
            twin, own = edge_from_key(src, et, mid), edge_to_key(mid, et, src)
        if other == mid or txn.get(own) is not None:
            continue
        value = txn.get(key)
        if value is not None and txn.get(twin) == value:
            half = "e/from" if keyspace == EDGE_FROM else "e/to"
            raise IntegrityError(
                f"edge {mid if half == 'e/from' else end} {et.label} "
                f"{end if half == 'e/from' else mid}: its {half} key is damaged (it names "
                f"{other}); the store is damaged: run cortex verify and restore from a backup"
            )


# ---------------------------------------------------------------------------------------------
# Episodes (format 7; ``specs/episodes.md``)
