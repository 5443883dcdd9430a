"""Format migrations: named, ordered, recorded upgrades of a store's on-disk format.

Each migration takes a store from one format version to the next in ONE write transaction that
also rewrites ``meta/format``, appends to ``meta/migrations`` and journals a ``migration``
entry, so a store is always wholly at the old version or wholly at the new one. Stores are
never migrated implicitly: opening an older store raises ``MigrationRequiredError`` and
``migrate`` (the ``cortex migrate`` command) upgrades it. See ``specs/storage.md`` §5.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Final

import msgspec

from cortex import argcheck
from cortex.engine.heads import (
    SUPERSEDED,
    claim_hashes,
    encode_counters,
    encode_row,
    index_keys_of,
    is_pinned,
    pin_key_of,
)
from cortex.engine.journal import JournalKind, JournalWriter
from cortex.engine.store import (
    ALIASES_FEATURE,
    BUDGETS_FEATURE,
    CLAIMS_CURRENT_FEATURE,
    CLAIMS_FEATURE,
    COMPACT_FORMS_FEATURE,
    COUNTER_IDS_FEATURE,
    COUNTERS_HEADS_FEATURE,
    EPISODES_FEATURE,
    ERASURE_FEATURE,
    FORMAT_VERSION,
    FRAME_TIME_FEATURE,
    HALF_VECTORS_FEATURE,
    HEAD_DATABASE_FEATURE,
    INDEX_DUPLICATES_FEATURE,
    KEYSPACE_DATABASES_FEATURE,
    MEDIUM_REFS_FEATURE,
    MEMORY_ROWS_FEATURE,
    PINNED_FEATURE,
    SENSITIVITY_FEATURE,
    SENSITIVITY_HEADS_FEATURE,
    TAG_TYPE_FEATURE,
    decode_stored,
    index_live,
)
from cortex.engine.values import (
    EDGE_CODEC,
    FORMAT_CODEC,
    EdgeRecord,
    FormatRecord,
    decode_trusted,
)
from cortex.errors import (
    CodecError,
    CortexError,
    FormatError,
    IntegrityError,
    StoreFullError,
    ValidationError,
)
from cortex.index.lexical import (
    BLOCKS_FEATURE,
    DOC_CODEC,
    DOC_CODEC_V15,
    SEGMENTS_FEATURE,
    STATS_CODEC,
    STATS_KEY,
    STEM_FEATURE,
    LexDoc,
    LexDoc15,
    LexStats,
    read_stats,
    reset_stats,
)
from cortex.index.lexical import DOCNO_FEATURE as LEXICAL_DOCNO_FEATURE
from cortex.index.lexical import FEATURE as LEXICAL_FEATURE
from cortex.index.lexical import LEAN_DOCS_FEATURE as LEXICAL_LEAN_DOCS_FEATURE
from cortex.model.codec import EPISODE as EPISODE_CODEC
from cortex.model.codec import HEAD as HEAD_CODEC
from cortex.model.codec import HEAD_V14 as HEAD_CODEC_V14
from cortex.model.codec import TIME_FIELD, IntField, ListField, StructCodec, TextField
from cortex.model.codec import VERSION as VERSION_CODEC
from cortex.model.codec import VERSION_V17 as VERSION_CODEC_V17
from cortex.model.enums import EdgeType
from cortex.model.ids import MemoryId
from cortex.model.records import Episode, Head, Version
from cortex.rules.salience import SALIENCE_STATE
from cortex.rules.sensitivity import decode_level
from cortex.rules.sensitivity import stored as stored_level
from cortex.storage.engines import open_kv
from cortex.storage.keys import (
    DUP_DATABASES,
    EDGE_TO,
    HEAD,
    ID,
    IDX_CLAIM,
    IDX_FRAME,
    IDX_TAG,
    JOURNAL,
    LEX_DOC,
    LEX_DOCNO,
    LEX_POSTING,
    LEX_SEGMENT,
    LEX_TERM,
    ROW_LIMIT,
    SALIENCE,
    SENS,
    VEC,
    VERSION,
    VERSION_INFIX,
    claim_index_key,
    episode_key,
    head_key,
    id_key,
    meta_key,
    parse_sens_key,
    salience_key,
    show_key,
    vec_key,
    version_key,
)
from cortex.storage.keys import (
    MIGRATIONS_KEY as _MIGRATIONS_KEY,
)
from cortex.storage.kv import KV, ReadTxn, WriteTxn, seal

__all__ = [
    "MIGRATIONS_KEY",
    "Applied",
    "Progress",
    "Report",
    "Step",
    "StepReport",
    "applied",
    "known",
    "migrate",
    "plan",
]

MIGRATIONS_KEY: Final = _MIGRATIONS_KEY

Progress = Callable[[str, int, int], None]
"""``progress(step name, records done, records in all)``, called as a migration runs."""


class Step(msgspec.Struct, frozen=True, kw_only=True):
    """One migration a store needs.

    Attributes:
        name: the migration's name, e.g. ``0001-lexical-index`` (ordered by its number).
        from_version: the format it starts from.
        to_version: the format it leaves the store at.
        description: what it does, in one line.
    """

    name: str
    from_version: int
    to_version: int
    description: str


class StepReport(msgspec.Struct, frozen=True, kw_only=True):
    """What one step did (or, in a dry run, would do).

    Attributes:
        step: the migration.
        records: how many records it rewrote or built (memories indexed: the live ones for
            0001, all of them for 0002).
        applied: whether it was committed (``False`` in a dry run).
    """

    step: Step
    records: int
    applied: bool


class Report(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of ``migrate``.

    Attributes:
        path: the store.
        from_version: the store's format before.
        to_version: its format after (the one it would reach, in a dry run).
        dry_run: whether nothing was written.
        steps: the steps, in order; empty when the store was already there.
    """

    path: str
    from_version: int
    to_version: int
    dry_run: bool
    steps: tuple[StepReport, ...]


class Applied(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of ``meta/migrations``: a migration the store went through."""

    name: str
    from_version: int
    to_version: int
    at: datetime
    by: str
    records: int


class _Migrations(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    applied: tuple[Applied, ...] = ()


APPLIED_CODEC: Final = StructCodec(
    Applied,
    [
        ("name", TextField(256)),
        ("from_version", IntField(1)),
        ("to_version", IntField(1)),
        ("at", TIME_FIELD),
        ("by", TextField(256)),
        ("records", IntField()),
    ],
)
MIGRATIONS_CODEC: Final = StructCodec(
    _Migrations, [("applied", ListField(APPLIED_CODEC, max_items=2**16))], schema_version=1
)


# ---------------------------------------------------------------------------------------------
# The migrations


class _Migration:
    """A migration: its step, how many records it touches, and the work itself."""

    def __init__(
        self,
        step: Step,
        features: frozenset[str],
        count: Callable[[ReadTxn], int],
        run: Callable[[WriteTxn, Callable[[int], None]], int],
    ) -> None:
        self.step = step
        self.features = features  # the format features of the version it leaves
        self.count = count
        self.run = run


# Formats 1-20 key every per-memory record by the memory's id; the engine's functions read and
# write format 21's keys (by row). The steps before 0020 read and write the old keys with these.


def _old_head_key(mid: MemoryId) -> bytes:
    """``m/`` id16: a head's key before format 21."""
    return HEAD + mid.bytes


def _old_version_prefix(mid: MemoryId) -> bytes:
    """``mv/`` id16 ``/v/``: a memory's versions before format 21."""
    return VERSION + mid.bytes + VERSION_INFIX


def _old_current_version(txn: ReadTxn, head: Head) -> Version:
    """The version ``head`` points at, in a store before format 21."""
    key = _old_version_prefix(head.id) + head.current_version.to_bytes(8, "big")
    raw = txn.get(key)
    if raw is None:
        raise IntegrityError(
            f"version {head.current_version} of {head.id} is missing: run `cortex verify` with "
            "the cortex of the store's format; nothing was migrated"
        )
    version: Version = decode_trusted(VERSION_CODEC_V17, key, raw)
    return version


def _old_superseder(txn: ReadTxn, mid: MemoryId) -> bool:
    """Whether a live ``supersedes`` edge from a live memory ends ``mid`` (before format 21)."""
    prefix = EDGE_TO + mid.bytes + bytes((EdgeType.SUPERSEDES,))
    for key, value in txn.scan(prefix):
        rec: EdgeRecord = decode_trusted(EDGE_CODEC, key, value)
        if rec.removed_at is not None:
            continue
        raw = txn.get(_old_head_key(MemoryId(key[-16:])))
        if raw is None:
            continue
        head: Head = decode_trusted(HEAD_CODEC, _old_head_key(MemoryId(key[-16:])), raw)
        if head.tombstone is None:
            return True
    return False


def _old_live_heads(txn: ReadTxn) -> list[Head]:
    return [h for h in _all_heads(txn) if h.tombstone is None]


def _count_live(txn: ReadTxn) -> int:
    return len(_old_live_heads(txn))


def _drop_lexical(txn: WriteTxn, tick: Callable[[int], None]) -> int:
    """The lexical rebuilds of formats before 21 (0001, 0004, 0005, 0013): the index goes.

    Each of them rebuilt the whole index from the memories; ``0020-memory-rows`` rebuilds it
    under the memories' rows, so a store that goes through one of them (it is then before
    format 20) is left without postings until that last step (``cortex`` reads no format
    between). Returns how many live memories the rebuild will index.
    """
    for prefix in (LEX_POSTING, LEX_DOC, LEX_TERM, LEX_SEGMENT, LEX_DOCNO):
        for key in list(txn.keys(prefix)):
            txn.delete(key)
    txn.put(STATS_KEY, seal(STATS_CODEC.encode(LexStats(next_docno=0), "meta/lexical")))
    n = _count_live(txn)
    for done in range(1, n + 1):  # (progress as the rebuild gave it: one a live memory)
        tick(done)
    return n


def _build_lexical(txn: WriteTxn, tick: Callable[[int], None]) -> int:
    """0001: the lexical index (built by ``0020-memory-rows``, under the rows)."""
    return _drop_lexical(txn, tick)


def _all_heads(txn: ReadTxn) -> list[Head]:
    heads = []
    for key, value in txn.scan(HEAD):
        head: Head = decode_trusted(HEAD_CODEC, key, value)
        heads.append(head)
    return heads


def _count_heads(txn: ReadTxn) -> int:
    return sum(1 for _ in txn.keys(HEAD))


def _rewrite_index(
    txn: WriteTxn,
    prefix: bytes,
    tick: Callable[[int], None],
    also: Callable[[Head], None] | None = None,
) -> int:
    """Delete every key under ``prefix`` and write the entries every head implies there now.

    Every memory is re-indexed (tombstoned ones too: they keep their entries, ``storage.md``
    §2), ``also`` run on each; returns how many.
    """
    for key in list(txn.keys(prefix)):  # the old layout
        txn.delete(key)
    done = 0
    for head in _all_heads(txn):
        for key in index_keys_of(head):
            if key.startswith(prefix):
                txn.put(key, b"")
        if also is not None:
            also(head)
        done += 1
        tick(done)
    return done


def _frames_by_time_and_pins(txn: WriteTxn, tick: Callable[[int], None]) -> int:
    """0002: rewrite every frame index entry with its created time; build the pinned index."""

    def pin(head: Head) -> None:
        version = _old_current_version(txn, head)
        if version.data is not None and is_pinned(decode_stored(head.type, version.data)):
            txn.put(pin_key_of(head), b"")

    return _rewrite_index(txn, IDX_FRAME, tick, pin)


def _tags_by_type(txn: WriteTxn, tick: Callable[[int], None]) -> int:
    """0003: rewrite every tag index entry with the memory's type after the tag hash."""
    return _rewrite_index(txn, IDX_TAG, tick)


def _stemmed_terms(txn: WriteTxn, tick: Callable[[int], None]) -> int:
    """0004: rebuild the lexical index with stemmed terms (``lexical.md`` §2, step 4)."""
    return _drop_lexical(txn, tick)


def _posting_blocks(txn: WriteTxn, tick: Callable[[int], None]) -> int:
    """0005: rebuild the lexical index with its postings in blocks (``lexical.md`` §4)."""
    return _drop_lexical(txn, tick)


def _posting_docnos(txn: WriteTxn, tick: Callable[[int], None]) -> int:
    """0013: rebuild the lexical index with its postings keyed by document number (§4, §4a).

    Drops every ``lex/`` record of format 13 (blocks by id, segments, documents, counts) and
    ``meta/lexical``; ``0020-memory-rows`` numbers and indexes the live memories (by row).
    """
    return _drop_lexical(txn, tick)


def _count_memory_records(txn: ReadTxn) -> int:
    return sum(1 for _ in txn.keys(HEAD)) + sum(1 for _ in txn.keys(VERSION))


def _compact_forms(txn: WriteTxn, tick: Callable[[int], None]) -> int:
    """0014: rewrite every head and version with its forms in the compact encoding.

    Each record is decoded (the wide ``{1: short, 2: medium}`` forms of formats 1-14 read as
    the same value) and encoded again; only the forms' bytes change (a short form that begins
    the medium form becomes its length, ``specs/format.md``), and a record whose bytes are
    already those is left alone. A record that does not decode stops the migration with
    ``IntegrityError`` and nothing written (``decode_trusted``).
    """
    done = 0
    codecs = ((HEAD, HEAD_CODEC, "head"), (VERSION, VERSION_CODEC_V17, "version"))  # as 15-17
    for prefix, codec, what in codecs:
        for key, value in list(txn.scan(prefix)):
            record = decode_trusted(codec, key, value)
            payload = codec.encode(record, what)
            if seal(payload) != value:
                txn.put(key, seal(payload))
            done += 1
            tick(done)
    return done


_LEAN_BATCH: Final = 4096
"""``lex/d/`` records read at a time by ``_lean_documents``: memory stays bounded."""


def _is_lean(key: bytes, value: bytes) -> bool:
    """A ``lex/d/`` record already of schema version 2 (as a rebuild in 0013 writes it)."""
    try:
        decode_trusted(DOC_CODEC, key, value)
    except IntegrityError:
        return False
    return True


def _lean_documents(txn: WriteTxn, tick: Callable[[int], None]) -> int:
    """0015: rewrite every ``lex/d/`` record without its terms (``LexDoc`` schema version 2).

    A record of schema version 1 (formats 14 and 15) is decoded and encoded again with its
    version, length and document number (one of version 2, which the rebuild of an earlier
    step writes, is left alone); the postings, ``lex/i/`` and the statistics do not
    change. Reads the records in batches (memory stays bounded on a large store); a record
    that does not decode stops the migration with ``IntegrityError`` and nothing written.
    """
    done = 0
    start: bytes | None = None
    while True:
        batch = []
        for key, value in txn.scan(LEX_DOC, start=start):
            if key == start:
                continue
            batch.append((key, value))
            if len(batch) == _LEAN_BATCH:
                break
        if not batch:
            # the count is the live memories' (one record each, specs/storage.md §5), also
            # where an earlier step left the index to 0020-memory-rows (then none is here)
            return max(done, _count_live(txn))
        for key, value in batch:
            if _is_lean(key, value):  # written by an earlier step's rebuild of the index
                done += 1
                tick(done)
                continue
            old: LexDoc15 = decode_trusted(DOC_CODEC_V15, key, value)
            doc = LexDoc(version=old.version, length=old.length, docno=old.docno)
            txn.put(key, seal(DOC_CODEC.encode(doc, "lex/d")))
            done += 1
            tick(done)
        start = batch[-1][0]


KEYSPACE_DATABASES_FORMAT: Final = 17
"""The format whose LMDB layout keeps ``keys.DATABASES`` in named databases (its migration's
name says the format it leaves)."""
KEYSPACE_DATABASES_MIGRATION: Final = "0016-keyspace-databases"
FORMAT17_DATABASES: Final = (JOURNAL, LEX_DOC, LEX_DOCNO, VEC)
"""The keyspaces format 17 moved into named databases (``keys.DATABASES`` then)."""


def _count_records_of(prefixes: tuple[bytes, ...]) -> Callable[[ReadTxn], int]:
    def count(txn: ReadTxn) -> int:
        return sum(1 for prefix in prefixes for _ in txn.keys(prefix))

    return count


def _split_keyspaces(
    prefixes: tuple[bytes, ...],
) -> Callable[[WriteTxn, Callable[[int], None]], int]:
    """A migration moving the keyspaces ``prefixes`` into their LMDB named databases.

    ``LmdbKV``'s transaction moves the records itself, streaming (``split_keyspaces``): a store
    of any size migrates in the memory of LMDB's dirty pages. Keys and values do not change.
    An engine without named databases (PostgreSQL's one table) has nothing to move.
    """

    def move(txn: WriteTxn, tick: Callable[[int], None]) -> int:
        split = getattr(txn, "split_keyspaces", None)
        if split is None:
            return 0
        return int(split(tick, prefixes))

    return move


HEAD_DATABASE_STEP: Final = 18
"""The format ``0018-head-database`` starts from: it moves the heads (``m/``) into their named
database (``keys.DATABASES``), as ``0016-keyspace-databases`` moved format 17's keyspaces."""


INDEX_DUPLICATES_STEP: Final = 19
"""The format ``0019-index-duplicates`` starts from: it moves the index keyspaces of
``keys.DUP_DATABASES`` into LMDB databases of duplicates (each key split into its head and the
rest), as ``0018-head-database`` moved the heads."""
INDEX_DUPLICATES: Final = tuple(DUP_DATABASES)
"""The keyspaces ``0019-index-duplicates`` moves."""


MEDIUM_REFS_STEP: Final = 17
"""The format ``0017-medium-references`` starts from (one number to change: the name, the
fixture ``tools/make_fixture_v17.py`` and ``MIGRATIONS`` follow it)."""
_REFS_BATCH: Final = 2048
"""Versions read at a time by ``_medium_references``: memory stays bounded."""


def _count_versions(txn: ReadTxn) -> int:
    return sum(1 for _ in txn.keys(VERSION))


def _medium_references(txn: WriteTxn, tick: Callable[[int], None]) -> int:
    """0017: rewrite every version with its medium form a reference into its data.

    Each version is decoded as formats 15-17 encode it (the medium form text) and encoded
    again; only the forms' bytes change (a medium form holding a text of the data of at least
    12 bytes becomes ``[prefix, at, suffix]``, ``specs/format.md``), and a version whose bytes
    are already those (no such text, or purged) is left alone. Reads the versions in batches
    (memory stays bounded on a large store); a version that does not decode stops the
    migration with ``IntegrityError`` and nothing written (``decode_trusted``).
    """
    done = 0
    start: bytes | None = None
    while True:
        batch = []
        for key, value in txn.scan(VERSION, start=start):
            if key == start:
                continue
            batch.append((key, value))
            if len(batch) == _REFS_BATCH:
                break
        if not batch:
            return done
        for key, value in batch:
            record = decode_trusted(VERSION_CODEC_V17, key, value)
            payload = seal(VERSION_CODEC.encode(record, "version"))
            if payload != value:
                txn.put(key, payload)
            done += 1
            tick(done)
        start = batch[-1][0]


_FORMAT1_FEATURES: Final = frozenset({"crc32-envelope", "journal-sha256-chain"})
_FORMAT2_FEATURES: Final = _FORMAT1_FEATURES | {LEXICAL_FEATURE}


def _no_records(txn: ReadTxn) -> int:
    return 0


def _nothing(txn: WriteTxn, tick: Callable[[int], None]) -> int:
    """Formats 7 and 8 add keyspaces that start empty: nothing to rewrite."""
    return 0


def _claim_index(txn: WriteTxn, tick: Callable[[int], None]) -> int:
    """0007: index every memory with content under its claim keys (``claims.md`` §5).

    Tombstoned memories keep their entries (as their other index entries); purged ones have no
    content. Memories that already compete stay as they are: no chain is inferred from the past.
    """
    for key in list(txn.keys(IDX_CLAIM)):
        txn.delete(key)
    done = 0
    for head in _all_heads(txn):
        version = _old_current_version(txn, head)
        if version.data is not None:
            # a supersedes edge added by hand before format 8 already ends a memory's time
            mark = SUPERSEDED if _old_superseder(txn, head.id) else b""
            for c in claim_hashes(decode_stored(head.type, version.data)):
                txn.put(claim_index_key(c, head.id), mark)
        done += 1
        tick(done)
    return done


def _count_levels(txn: ReadTxn) -> int:
    return sum(1 for _ in txn.keys(SENS))


def _levels_into_heads(txn: WriteTxn, tick: Callable[[int], None]) -> int:
    """0008: move every format-8 ``sens/`` level into its head or episode record.

    Each entry's memory head (``sens/m/``) or episode record (``sens/e/``) is rewritten with the
    level (``internal`` is written as nothing) and the entry deleted; no other record changes.
    An entry that does not read (a damaged key or value), names no record, or labels a purged
    one stops the migration with ``IntegrityError`` and nothing written: guessing would put a
    level on the wrong record, or drop one (``cortex verify`` names the entry; repair it with
    the format-8 cortex, or ``cortex salvage``).
    """
    done = 0
    for key, value in list(txn.scan(SENS)):
        try:
            episode, rid = parse_sens_key(key)
        except CodecError:
            raise IntegrityError(
                f"record {show_key(key)} is not a sensitivity entry (a damaged key): run "
                "`cortex verify` with the format-8 cortex; nothing was migrated"
            ) from None
        level = stored_level(decode_level(key, value))
        where = episode_key(rid) if episode else _old_head_key(rid)
        raw = txn.get(where)
        if raw is None:
            raise IntegrityError(
                f"record {show_key(key)} labels no {'episode' if episode else 'memory'} (a "
                "damaged key, or the record is lost): run `cortex verify` with the format-8 "
                "cortex; nothing was migrated"
            )
        if episode:
            ep: Episode = decode_trusted(EPISODE_CODEC, where, raw)
            gone = ep.content is None
            if not gone:
                ep = msgspec.structs.replace(ep, sensitivity=level)
                txn.put(where, seal(EPISODE_CODEC.encode(ep, "episode")))
        else:
            head: Head = decode_trusted(HEAD_CODEC, where, raw)
            gone = head.tombstone is not None and head.tombstone.purged_at is not None
            if not gone:
                head = msgspec.structs.replace(head, sensitivity=level)
                txn.put(where, seal(HEAD_CODEC_V14.encode(head, "head")))  # forms wide until 15
        if gone and level is not None:
            raise IntegrityError(
                f"record {show_key(key)} labels a purged record (a purge deletes its level): "
                "run `cortex verify` with the format-8 cortex; nothing was migrated"
            )
        txn.delete(key)
        done += 1
        tick(done)
    return done


def _count_counters(txn: ReadTxn) -> int:
    return sum(1 for _ in txn.keys(SALIENCE))


def _counters_into_heads(txn: WriteTxn, tick: Callable[[int], None]) -> int:
    """0010: set ``has_counters`` on the head of every memory with a ``sal/`` record.

    No other record changes (the heads keep their ``last_updated_at``). A record whose key
    does not name a memory with a head (a damaged key) stops the migration with
    ``IntegrityError`` and nothing written: setting the flag on a guess would make another
    memory read counters that are not its own (``cortex verify`` names the record; repair
    it with the format-10 cortex, or ``cortex salvage``).
    """
    done = 0
    for key, value in list(txn.scan(SALIENCE)):
        mid = MemoryId(key[len(SALIENCE) :]) if len(key) == len(SALIENCE) + 16 else None
        raw = None if mid is None else txn.get(_old_head_key(mid))
        if mid is None or raw is None:
            raise IntegrityError(
                f"record {show_key(key)} holds use counters of no memory (a damaged key, or "
                "the head is lost): run `cortex verify` with the format-10 cortex; nothing "
                "was migrated"
            )
        decode_trusted(SALIENCE_STATE, key, value)  # a damaged record stops it too
        head: Head = decode_trusted(HEAD_CODEC, _old_head_key(mid), raw)
        if head.id != mid:
            raise IntegrityError(
                f"record m/{mid} holds the head of {head.id} (a damaged key): run `cortex "
                "verify` with the format-10 cortex; nothing was migrated"
            )
        if not head.has_counters:
            head = msgspec.structs.replace(head, has_counters=True)
            txn.put(_old_head_key(mid), seal(HEAD_CODEC_V14.encode(head, "head")))  # wide until 15
        done += 1
        tick(done)
    return done


def _count_claims_and_counters(txn: ReadTxn) -> int:
    superseded = sum(1 for _, v in txn.scan(IDX_CLAIM) if v == SUPERSEDED)
    return superseded + sum(1 for _ in txn.keys(SALIENCE))


def _claims_current_counters_named(txn: WriteTxn, tick: Callable[[int], None]) -> int:
    """0011: keep only current memories in the claim index; name the memory in each counter.

    Every ``idx/claim/`` entry marked superseded (``s``) is deleted, and every ``sal/`` record
    is prefixed with its memory's id. Format 11 kept a superseded memory's entries with the
    mark, so a write scanned a chain's whole history; format 12 keeps only the current ones. A
    format-12 use-counter record names its memory (``heads.encode_counters``), so a damaged
    key that lands on another used memory's key is an error on read. A counter record that
    does not check (CRC, decoding) stops it (``IntegrityError``, nothing written). No other
    record changes.
    """
    done = 0
    for key, value in list(txn.scan(IDX_CLAIM)):
        if value == SUPERSEDED:
            txn.delete(key)
            done += 1
            tick(done)
    for key, value in list(txn.scan(SALIENCE)):
        if len(key) != len(SALIENCE) + 16:
            raise IntegrityError(
                f"record {show_key(key)} is not a use-counter key (a damaged key): run `cortex "
                "verify` with the format-11 cortex; nothing was migrated"
            )
        mid = MemoryId(key[len(SALIENCE) :])
        state = decode_trusted(SALIENCE_STATE, key, value)  # a damaged record stops it
        txn.put(key, encode_counters(mid, state))
        done += 1
        tick(done)
    return done


_FORMAT3_FEATURES: Final = _FORMAT2_FEATURES | {PINNED_FEATURE, FRAME_TIME_FEATURE}
_FORMAT4_FEATURES: Final = _FORMAT3_FEATURES | {TAG_TYPE_FEATURE}
_FORMAT5_FEATURES: Final = _FORMAT4_FEATURES | {STEM_FEATURE}
_FORMAT6_FEATURES: Final = _FORMAT5_FEATURES | {BLOCKS_FEATURE}
_FORMAT7_FEATURES: Final = _FORMAT6_FEATURES | {EPISODES_FEATURE}
_FORMAT8_FEATURES: Final = _FORMAT7_FEATURES | {
    CLAIMS_FEATURE,
    BUDGETS_FEATURE,
    SENSITIVITY_FEATURE,
    ERASURE_FEATURE,
    ALIASES_FEATURE,
}
_FORMAT9_FEATURES: Final = _FORMAT8_FEATURES | {SENSITIVITY_HEADS_FEATURE}
_FORMAT10_FEATURES: Final = _FORMAT9_FEATURES | {SEGMENTS_FEATURE}
_FORMAT11_FEATURES: Final = _FORMAT10_FEATURES | {COUNTERS_HEADS_FEATURE}
_FORMAT12_FEATURES: Final = _FORMAT11_FEATURES | {CLAIMS_CURRENT_FEATURE, COUNTER_IDS_FEATURE}
_FORMAT13_FEATURES: Final = _FORMAT12_FEATURES | {HALF_VECTORS_FEATURE}
_FORMAT14_FEATURES: Final = _FORMAT13_FEATURES | {LEXICAL_DOCNO_FEATURE}
_FORMAT15_FEATURES: Final = _FORMAT14_FEATURES | {COMPACT_FORMS_FEATURE}
_FORMAT16_FEATURES: Final = _FORMAT15_FEATURES | {LEXICAL_LEAN_DOCS_FEATURE}
_FORMAT17_FEATURES: Final = _FORMAT16_FEATURES | {KEYSPACE_DATABASES_FEATURE}
_FORMAT18_FEATURES: Final = _FORMAT17_FEATURES | {MEDIUM_REFS_FEATURE}
_FORMAT19_FEATURES: Final = _FORMAT18_FEATURES | {HEAD_DATABASE_FEATURE}
_FORMAT20_FEATURES: Final = _FORMAT19_FEATURES | {INDEX_DUPLICATES_FEATURE}
_FORMAT21_FEATURES: Final = _FORMAT20_FEATURES | {MEMORY_ROWS_FEATURE}
"""The features of each format: every one those of the format before and its own."""


MEMORY_ROWS_STEP: Final = 20
"""The format ``0020-memory-rows`` starts from."""


def _count_memories(txn: ReadTxn) -> int:
    return sum(1 for _ in txn.keys(HEAD))


def _memory_rows(txn: WriteTxn, tick: Callable[[int], None]) -> int:
    """0020: key every per-memory record by the memory's row number; ``id/``; no ``lex/i/``.

    Every memory gets a row (``specs/storage.md`` §2, ``lexical.md`` §4): a memory the lexical
    index holds keeps its document number as its row; every other (tombstoned, purged, or
    left out by an earlier step's rebuild) takes the next number from ``next_docno`` up, in id
    order. Its head (``m/``), versions (``mv/``), vector (``vec/``), use counters (``sal/``)
    and lexical document (``lex/d/``) move to keys by row, values unchanged, and ``id/`` id16
    records the row; ``lex/i/`` is deleted (with its LMDB named database), and the postings
    are rebuilt under the rows (the same numbers for the memories indexed before). On LMDB
    ``id/`` gets its named database first. One transaction: a store is wholly at format 20 or
    wholly at 21. Returns how many memories.

    Raises:
        StoreFullError: the memories would need a row past 2**32 (nothing is written).
        IntegrityError: a record it reads is damaged (nothing is written).
    """
    split = getattr(txn, "split_keyspaces", None)
    if split is not None:
        split(lambda _: None, (ID,))
    try:
        next_row = read_stats(txn).next_docno
    except IntegrityError:
        next_row = 0
    indexed: dict[bytes, int] = {}  # id16 -> its document number
    for key, value in txn.scan(LEX_DOC):
        if len(key) != len(LEX_DOC) + 16:
            raise IntegrityError(
                f"record {show_key(key)} is not a lexical document of format 20 (a damaged "
                "key): run `cortex verify` with the format-20 cortex; nothing was migrated"
            )
        doc: LexDoc = decode_trusted(DOC_CODEC, key, value)
        indexed[key[len(LEX_DOC) :]] = doc.docno
    heads = list(txn.scan(HEAD))
    rows: dict[bytes, int] = {}
    taken: set[int] = set()
    for key, _ in heads:
        if len(key) != len(HEAD) + 16:
            raise IntegrityError(
                f"record {key.hex()} is not a head key of format 20 (a damaged key): run "
                "`cortex verify` with the format-20 cortex; nothing was migrated"
            )
        row = indexed.get(key[len(HEAD) :])
        if row is not None and row not in taken and row < next_row:
            rows[key[len(HEAD) :]] = row
            taken.add(row)
    for key, _ in heads:
        mid = key[len(HEAD) :]
        if mid not in rows:
            rows[mid] = next_row
            next_row += 1
    if next_row > ROW_LIMIT:
        raise StoreFullError(
            f"the store's {len(heads)} memories would need row numbers past 2**32 (the next "
            "is given after every document number the lexical index gave out): export the "
            "store and import it into a new one; nothing was migrated"
        )
    # the index is rebuilt under the rows (below): its records go first
    for prefix in (LEX_POSTING, LEX_DOC, LEX_TERM, LEX_SEGMENT):
        for key in list(txn.keys(prefix)):
            txn.delete(key)
    drop = getattr(txn, "drop_keyspace", None)
    if drop is not None:
        drop(LEX_DOCNO)
    else:
        for key in list(txn.keys(LEX_DOCNO)):
            txn.delete(key)
    done = 0
    for key, value in heads:
        memory = MemoryId(key[len(HEAD) :])
        row = rows[memory.bytes]
        txn.delete(key)
        txn.put(head_key(row), value)
        txn.put(id_key(memory), encode_row(row))
        for vkey, vvalue in list(txn.scan(_old_version_prefix(memory))):
            txn.delete(vkey)
            txn.put(version_key(row, int.from_bytes(vkey[-8:], "big")), vvalue)
        moves = ((VEC, vec_key(row)), (SALIENCE, salience_key(row)))
        for prefix, new in moves:
            old = prefix + memory.bytes
            raw = txn.get(old)
            if raw is not None:
                txn.delete(old)
                txn.put(new, raw)
        done += 1
        tick(done)
    reset_stats(txn, next_row)
    index_live(txn)
    return done


MIGRATIONS: Final = (
    _Migration(
        Step(
            name="0001-lexical-index",
            from_version=1,
            to_version=2,
            description="build the lexical (BM25) index for every live memory",
        ),
        _FORMAT2_FEATURES,
        _count_live,
        _build_lexical,
    ),
    _Migration(
        Step(
            name="0002-pinned-and-frame-time",
            from_version=2,
            to_version=3,
            description="rewrite frame index keys in created order; build the pinned index",
        ),
        _FORMAT3_FEATURES,
        _count_heads,
        _frames_by_time_and_pins,
    ),
    _Migration(
        Step(
            name="0003-tag-index-by-type",
            from_version=3,
            to_version=4,
            description="rewrite tag index keys with the type after the tag",
        ),
        _FORMAT4_FEATURES,
        _count_heads,
        _tags_by_type,
    ),
    _Migration(
        Step(
            name="0004-lexical-stemming",
            from_version=4,
            to_version=5,
            description="rebuild the lexical index with stemmed (Snowball English) terms",
        ),
        _FORMAT5_FEATURES,
        _count_live,
        _stemmed_terms,
    ),
    _Migration(
        Step(
            name="0005-posting-blocks",
            from_version=5,
            to_version=6,
            description="rebuild the lexical index with its postings in blocks",
        ),
        _FORMAT6_FEATURES,
        _count_live,
        _posting_blocks,
    ),
    _Migration(
        Step(
            name="0006-episodes",
            from_version=6,
            to_version=7,
            description="allow episodes (ep/, prov/e/); no record changes",
        ),
        _FORMAT7_FEATURES,
        _no_records,
        _nothing,
    ),
    _Migration(
        Step(
            name="0007-claim-index",
            from_version=7,
            to_version=8,
            description="index Facts and Preferences under their claim keys (temporal chains); "
            "allow write budgets, sensitivity levels, erasure records and aliases",
        ),
        _FORMAT8_FEATURES,
        _count_heads,
        _claim_index,
    ),
    _Migration(
        Step(
            name="0008-sensitivity-in-heads",
            from_version=8,
            to_version=9,
            description="move sensitivity levels from sens/ into the sealed head and episode "
            "records (a damaged key can no longer lower a level)",
        ),
        _FORMAT9_FEATURES,
        _count_levels,
        _levels_into_heads,
    ),
    _Migration(
        Step(
            name="0009-posting-segments",
            from_version=9,
            to_version=10,
            description="allow lexical posting segments (lex/s/); a format-9 store is a "
            "format-10 store without segments: no record changes",
        ),
        _FORMAT10_FEATURES,
        _no_records,
        _nothing,
    ),
    _Migration(
        Step(
            name="0010-counters-in-heads",
            from_version=10,
            to_version=11,
            description="record in each head whether its memory has use counters (sal/): a "
            "damaged sal/ key raises instead of reading as never used",
        ),
        _FORMAT11_FEATURES,
        _count_counters,
        _counters_into_heads,
    ),
    _Migration(
        Step(
            name="0011-current-claims-named-counters",
            from_version=11,
            to_version=12,
            description="keep only current memories in the claim index (idx/claim/), and name "
            "its memory in each use-counter record (sal/)",
        ),
        _FORMAT12_FEATURES,
        _count_claims_and_counters,
        _claims_current_counters_named,
    ),
    _Migration(
        Step(
            name="0012-half-vectors",
            from_version=12,
            to_version=13,
            description="allow vec/ records in float16 (the default for new vectors); every "
            "float32 record stays as it is and is read as before: no record changes",
        ),
        _FORMAT13_FEATURES,
        _no_records,
        _nothing,
    ),
    _Migration(
        Step(
            name="0013-posting-docnos",
            from_version=13,
            to_version=14,
            description="rebuild the lexical index with its postings keyed by per-store "
            "document numbers (lex/i/) in varint blocks",
        ),
        _FORMAT14_FEATURES,
        _count_live,
        _posting_docnos,
    ),
    _Migration(
        Step(
            name="0014-compact-forms",
            from_version=14,
            to_version=15,
            description="rewrite every head and version with its forms compact: a short form "
            "that begins the medium form is stored as its length",
        ),
        _FORMAT15_FEATURES,
        _count_memory_records,
        _compact_forms,
    ),
    _Migration(
        Step(
            name="0015-lean-lexical-documents",
            from_version=15,
            to_version=16,
            description="rewrite every lex/d/ record without its terms (a removal renders "
            "the indexed version again)",
        ),
        _FORMAT16_FEATURES,
        _count_live,  # one lex/d/ record each (so a dry run before 0001 counts them too)
        _lean_documents,
    ),
    _Migration(
        Step(
            name=KEYSPACE_DATABASES_MIGRATION,
            from_version=KEYSPACE_DATABASES_FORMAT - 1,
            to_version=KEYSPACE_DATABASES_FORMAT,
            description="move each append-mostly keyspace (j/, lex/d/, lex/i/, vec/) into an "
            "LMDB named database of its own, keys unchanged (PostgreSQL: nothing)",
        ),
        _FORMAT17_FEATURES,
        _count_records_of(FORMAT17_DATABASES),
        _split_keyspaces(FORMAT17_DATABASES),
    ),
    _Migration(
        Step(
            name=f"{MEDIUM_REFS_STEP:04d}-medium-references",
            from_version=MEDIUM_REFS_STEP,
            to_version=MEDIUM_REFS_STEP + 1,
            description="rewrite every version with its medium form a reference into its "
            "data where a text of the data occurs in it",
        ),
        _FORMAT18_FEATURES,
        _count_versions,
        _medium_references,
    ),
    _Migration(
        Step(
            name=f"{HEAD_DATABASE_STEP:04d}-head-database",
            from_version=HEAD_DATABASE_STEP,
            to_version=HEAD_DATABASE_STEP + 1,
            description="move the heads (m/) into an LMDB named database of their own, keys "
            "unchanged (PostgreSQL: nothing)",
        ),
        _FORMAT19_FEATURES,
        _count_records_of((HEAD,)),
        _split_keyspaces((HEAD,)),
    ),
    _Migration(
        Step(
            name=f"{INDEX_DUPLICATES_STEP:04d}-index-duplicates",
            from_version=INDEX_DUPLICATES_STEP,
            to_version=INDEX_DUPLICATES_STEP + 1,
            description="move the index keyspaces (idx/, prov/e/) into LMDB databases of "
            "duplicates, keys unchanged (PostgreSQL: nothing)",
        ),
        _FORMAT20_FEATURES,
        _count_records_of(INDEX_DUPLICATES),
        _split_keyspaces(INDEX_DUPLICATES),
    ),
    _Migration(
        Step(
            name=f"{MEMORY_ROWS_STEP:04d}-memory-rows",
            from_version=MEMORY_ROWS_STEP,
            to_version=MEMORY_ROWS_STEP + 1,
            description="key every memory's head, versions, vector, use counters and lexical "
            "document by its row number (id/ maps ids to rows; lex/i/ goes; the postings are "
            "rebuilt under the rows)",
        ),
        _FORMAT21_FEATURES,
        _count_memories,
        _memory_rows,
    ),
)
"""Every migration, in order; migration ``i`` takes format ``i + 1`` to ``i + 2``."""

# ---------------------------------------------------------------------------------------------
# Reading the format without the store's check


def _read_format(txn: ReadTxn, path: str) -> FormatRecord:
    key = meta_key("format")
    raw = txn.get(key)
    if raw is None:
        raise FormatError(f"{path} holds no meta/format: not a cortex store")
    record: FormatRecord = decode_trusted(FORMAT_CODEC, key, raw)
    if record.format_version > FORMAT_VERSION:
        raise FormatError(
            f"{path} has format {record.format_version}, newer than this cortex "
            f"({FORMAT_VERSION}): upgrade cortex; there is nothing to migrate"
        )
    return record


def _steps(current: int, to: int | None, path: str) -> list[_Migration]:
    target = FORMAT_VERSION if to is None else to
    if isinstance(target, bool) or not isinstance(target, int):
        raise ValidationError("to", "type", f"must be a format version (an integer), got {to!r}")
    if target > FORMAT_VERSION:
        raise ValidationError(
            "to",
            "range",
            f"format {target} is unknown: this cortex knows formats up to {FORMAT_VERSION}",
        )
    if target < current:
        raise ValidationError(
            "to",
            "range",
            f"{path} is at format {current}; migrations only go forward (to {current} or later)",
        )
    return [m for m in MIGRATIONS if current <= m.step.from_version < target]


def _open(path: str | os.PathLike[str], readonly: bool) -> KV:
    where = argcheck.path(path, "path")
    try:
        kv: KV = open_kv(where, readonly=readonly, create=False)
    except OSError as exc:  # the path itself: too long, not a directory, no permission
        raise CortexError(f"cannot open the store at {where[:200]}: {exc.strerror or exc}") from exc
    return kv


def plan(path: str | os.PathLike[str], to: int | None = None) -> list[Step]:
    """The migrations that would take the store at ``path`` to format ``to``.

    Args:
        path: the store directory.
        to: the target format version (default: the newest this cortex writes).

    Returns:
        The steps, in order; empty when the store is at ``to`` already.

    Raises:
        FormatError: not a store, or its format is newer than this cortex.
        ValidationError: ``to`` is unknown or older than the store's format.
        CortexError: the store cannot be opened.
    """
    kv = _open(path, readonly=True)
    try:
        with kv.read() as txn:
            current = _read_format(txn, str(path)).format_version
    finally:
        kv.close()
    return [m.step for m in _steps(current, to, str(path))]


def known() -> list[Step]:
    """Every migration this cortex knows, in order (``cortex migrate --list``)."""
    return [m.step for m in MIGRATIONS]


def applied(path: str | os.PathLike[str]) -> list[Applied]:
    """The migrations recorded in the store's ``meta/migrations``, oldest first.

    Raises:
        IntegrityError: the record is damaged.
        CortexError: the store cannot be opened.
    """
    kv = _open(path, readonly=True)
    try:
        with kv.read() as txn:
            return list(_read_applied(txn))
    finally:
        kv.close()


def _read_applied(txn: ReadTxn) -> tuple[Applied, ...]:
    raw = txn.get(MIGRATIONS_KEY)
    if raw is None:
        return ()
    record: _Migrations = decode_trusted(MIGRATIONS_CODEC, MIGRATIONS_KEY, raw)
    return record.applied


def migrate(
    path: str | os.PathLike[str],
    *,
    to: int | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
    actor: str = "cortex-migrate",
) -> Report:
    """Upgrade the store at ``path`` to format ``to``, one transaction per migration.

    The store is opened directly (the format check that makes ``Cortex.open`` refuse an older
    store is what this function exists to resolve). Running it on a store that is already at
    ``to`` changes nothing. If a migration fails, its transaction is rolled back: the store
    stays at the format the previous migration left, exactly as it was. Run it while nothing
    else uses the store: a process that opened it with an older cortex would go on writing the
    old format after the migration; and this process must not hold it open (LMDB allows one
    environment per process and path).

    Args:
        path: the store directory (it must exist).
        to: the target format version (default: the newest this cortex writes).
        dry_run: write nothing; report what would be done and how many records it touches.
        progress: called as ``progress(step name, done, total)`` while a step runs.
        actor: who the journal and ``meta/migrations`` name as having migrated the store.

    Returns:
        The report: the versions before and after and one entry per step.

    Raises:
        FormatError: not a store, or its format is newer than this cortex.
        ValidationError: ``to`` is unknown or older than the store's format.
        IntegrityError: a record the migration reads is damaged (nothing is written).
        CortexError: the store cannot be opened or written.
    """
    where = str(path)
    kv = _open(path, readonly=dry_run)
    try:
        with kv.read() as txn:
            start = _read_format(txn, where).format_version
        todo = _steps(start, to, where)
        reports: list[StepReport] = []
        for m in todo:
            if dry_run:
                with kv.read() as txn:
                    reports.append(StepReport(step=m.step, records=m.count(txn), applied=False))
                continue
            run = partial(_apply, m=m, where=where, actor=actor, progress=progress)
            records = kv.write(run)
            reports.append(StepReport(step=m.step, records=records, applied=True))
    finally:
        kv.close()
    return Report(
        path=where,
        from_version=start,
        to_version=todo[-1].step.to_version if todo else start,
        dry_run=dry_run,
        steps=tuple(reports),
    )


def _apply(
    txn: WriteTxn, *, m: _Migration, where: str, actor: str, progress: Progress | None
) -> int:
    record = _read_format(txn, where)
    if record.format_version != m.step.from_version:  # another process raced us
        raise CortexError(
            f"{where} changed to format {record.format_version} while migrating; run it again"
        )
    total = m.count(txn) if progress is not None else 0

    def tick(done: int) -> None:
        if progress is not None:
            progress(m.step.name, done, total)

    records = m.run(txn, tick)
    now = datetime.now(UTC)
    new_format = msgspec.structs.replace(
        record, format_version=m.step.to_version, features=tuple(sorted(m.features))
    )
    txn.put(meta_key("format"), seal(FORMAT_CODEC.encode(new_format, "meta/format")))
    entry = Applied(
        name=m.step.name,
        from_version=m.step.from_version,
        to_version=m.step.to_version,
        at=now,
        by=actor,
        records=records,
    )
    history = _Migrations(applied=(*_read_applied(txn), entry))
    txn.put(MIGRATIONS_KEY, seal(MIGRATIONS_CODEC.encode(history, "meta/migrations")))
    JournalWriter(txn, now, actor).append(
        JournalKind.MIGRATION,
        reason=f"{m.step.name}: format {m.step.from_version} -> {m.step.to_version}",
    )
    return records
