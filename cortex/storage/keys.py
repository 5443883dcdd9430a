"""The LMDB key layout: build and parse functions for every keyspace (DESIGN §5).

Integers are fixed-width big-endian, ids are their raw 16 bytes, variable-length parts are
hashed, so byte order equals logical order and no key of one keyspace is a prefix of a key of
another.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from functools import lru_cache
from typing import Final, NamedTuple, TypeVar

from cortex.errors import CodecError
from cortex.model.enums import EdgeType, MemoryType, ObjKind, Verb
from cortex.model.ids import MemoryId
from cortex.model.records import FrameRef

try:
    from cortex import _speedups as _sp
except ImportError:  # pragma: no cover - installed without a C compiler
    _sp = None  # type: ignore[assignment]

_USE_SPEEDUPS: bool = _sp is not None and hasattr(_sp, "index_keys")
"""Build ``index_keys`` through the C accelerator (an older build lacks it: the Python path)."""

__all__ = [
    "DATABASES",
    "DATABASE_PREFIX",
    "DUP_DATABASES",
    "DUP_TAILS",
    "EDGE_FROM",
    "EDGE_TO",
    "ENTITY_ALIAS",
    "EPISODE",
    "EPISODE_MEMORY",
    "ERASURE",
    "HEAD",
    "ID",
    "IDX_ACTOR_OBJ",
    "IDX_CLAIM",
    "IDX_FRAME",
    "IDX_PIN",
    "IDX_TAG",
    "IDX_TYPE",
    "JOURNAL",
    "LEX_DOC",
    "LEX_DOCNO",
    "LEX_POSTING",
    "LEX_SEGMENT",
    "LEX_TERM",
    "META",
    "META_RECORDS",
    "MIGRATIONS_KEY",
    "SALIENCE",
    "SENS",
    "SENS_EPISODE",
    "SENS_MEMORY",
    "VEC",
    "VERSION",
    "TagEntry",
    "actor_obj_key",
    "claim_index_key",
    "claim_index_prefix",
    "edge_from_key",
    "edge_to_key",
    "episode_key",
    "episode_memory_key",
    "erasure_key",
    "frame_key",
    "frame_prefix",
    "head_key",
    "id_key",
    "index_keys",
    "journal_key",
    "lex_doc_key",
    "lex_docno_key",
    "lex_segment_key",
    "lex_term_key",
    "meta_key",
    "obj_hash",
    "parse_claim_index_key",
    "parse_episode_key",
    "parse_episode_memory_key",
    "parse_erasure_key",
    "parse_head_key",
    "parse_id_key",
    "parse_lex_doc_key",
    "parse_lex_docno_key",
    "parse_lex_segment_key",
    "parse_lex_term_key",
    "parse_posting_key",
    "parse_row_key",
    "parse_sens_key",
    "pin_key",
    "posting_key",
    "posting_prefix",
    "prefix_end",
    "row_bytes",
    "salience_key",
    "sens_key",
    "show_key",
    "tag_hash",
    "tag_key",
    "tag_prefix",
    "type_key",
    "vec_key",
    "version_key",
    "version_prefix",
]

HEAD: Final = b"m/"
"""``m/`` u32(row): a memory's head, by its row number (format 21; formats 1-20: ``m/`` id16)."""
VERSION: Final = b"mv/"
"""``mv/`` u32(row) u64(n): a memory's versions (format 21; 1-20: ``mv/`` id16 ``/v/`` u64)."""
ID: Final = b"id/"
"""``id/`` id16: the sealed u32 row number of the memory of that id (format 21): the one
per-memory keyspace ordered by id; every other is keyed by the row, given in write order."""
IDX_TYPE: Final = b"idx/type/"
IDX_TAG: Final = b"idx/tag/"
IDX_FRAME: Final = b"idx/frame/"
IDX_ACTOR_OBJ: Final = b"idx/actor_obj/"
IDX_PIN: Final = b"idx/pin/"
IDX_CLAIM: Final = b"idx/claim/"
"""``idx/claim/`` claim hash16 + id16: a memory holding a claim key (``claims.md`` §5, format 8)."""
EDGE_FROM: Final = b"e/from/"
EDGE_TO: Final = b"e/to/"
JOURNAL: Final = b"j/"
VEC: Final = b"vec/"
SALIENCE: Final = b"sal/"
LEX_POSTING: Final = b"lex/p/"
LEX_DOC: Final = b"lex/d/"
LEX_TERM: Final = b"lex/t/"
LEX_SEGMENT: Final = b"lex/s/"
"""``lex/s/`` seq (u64 big-endian): a posting segment (``lexical.md`` §4b, format 10)."""
LEX_DOCNO: Final = b"lex/i/"
"""``lex/i/`` docno (u32 big-endian): the id16 a document number named (formats 14-20; format
21 numbers documents by the memory's row, whose head names its id: the keyspace is gone)."""
META: Final = b"meta/"
EPISODE: Final = b"ep/"
"""``ep/`` id16: an episode record (``specs/episodes.md``, format 7)."""
EPISODE_MEMORY: Final = b"prov/e/"
"""``prov/e/`` episode id16 + memory id16: a memory drawn from the episode (format 7)."""
SENS: Final = b"sens/"
"""``sens/``: format 8's sensitivity entries (of memories and episodes not ``internal``).

Format 9 keeps the level in the head and episode records; the migration to it empties this
keyspace, and ``verify`` reports any key left under it."""
SENS_MEMORY: Final = b"sens/m/"
"""``sens/m/`` id16: a memory's sensitivity, one sealed byte (absent: ``internal``)."""
SENS_EPISODE: Final = b"sens/e/"
"""``sens/e/`` id16: an episode's sensitivity, one sealed byte (absent: ``internal``)."""
ENTITY_ALIAS: Final = b"ent/a/"
"""``ent/a/`` normalised alias (UTF-8): an entity alias record (format 8, ``claims.md`` §10)."""
ERASURE: Final = b"er/"
"""``er/`` u64(seq): the erasure record of the purge journalled at seq (format 8)."""

DATABASE_PREFIX: Final = b"\x01db/"
"""The name of an LMDB named database is this and its keyspace's prefix (``\\x01db/j/``).

The main database holds those names as keys (LMDB's records of the named databases); no key of
a keyspace begins with a control byte, so the two never collide (``specs/storage.md`` §2)."""
DUP_DATABASES: Final = {
    IDX_TYPE: len(IDX_TYPE) + 1,
    IDX_TAG: len(IDX_TAG) + 8,
    IDX_FRAME: len(IDX_FRAME) + 2 + 16,
    IDX_ACTOR_OBJ: len(IDX_ACTOR_OBJ) + 1 + 16,
    IDX_PIN: len(IDX_PIN) + 1,
    IDX_CLAIM: len(IDX_CLAIM) + 16,
    EPISODE_MEMORY: len(EPISODE_MEMORY) + 16,
}
"""Keyspace prefix -> head length: the keyspaces of empty values and fixed-length keys that
LMDB keeps in a named database opened ``MDB_DUPSORT | MDB_DUPFIXED`` (format 20).

A key is split at its head length: the head (prefix included) is LMDB's key, the rest its
duplicate value, all of one length within a keyspace (``DUP_TAILS``), so LMDB packs them
without a node header on ``P_LEAF2`` pages and appends a keyspace's newest entries at the end
of their head's range with ``MDB_APPENDDUP`` (``specs/storage.md`` §2). The key-value layer
presents the same keys (head and duplicate joined) with empty values.
``idx/tag/``'s head is the tag's hash without the type byte that follows it: ~200 heads of
~1,000 entries at 100,000 memories instead of ~1,800 small ones, so that a commit touches fewer
pages (measured, the tag index alone replayed in commits of 1,000 memories: 212 B of file per
memory, 299 with the type byte in the head)."""
DUP_TAILS: Final = {
    p: 16 if p in (IDX_CLAIM, EPISODE_MEMORY) else 1 + 8 + 16 if p == IDX_TAG else 8 + 16
    for p in DUP_DATABASES
}
"""Keyspace of ``DUP_DATABASES`` -> the length of its duplicates (``u64 created || id16``,
``type || u64 created || id16`` for ``idx/tag/``, or ``id16``): a key of the keyspace is its
head and one of these."""
DATABASES: Final = (HEAD, ID, JOURNAL, LEX_DOC, VEC, *DUP_DATABASES)
"""The keyspaces each kept in an LMDB named database of their own (format 17; ``m/`` format 19).

Their keys are stored whole (prefix included), as in the main database: a named database only
changes which B-tree holds them, so that each one's newest keys fill its own last page instead
of interleaving with the other keyspaces' (``specs/storage.md`` §2). The append-mostly ones
(``j/``, ``lex/d/``, ``lex/i/``, ``vec/``) moved in format 17. Heads (``m/``, keys in created
order) moved in format 19: in the main tree their newest keys landed in the middle of it (before
``mv/``), and LMDB splits such pages in half (measured: 547 bytes of pages a head for 320 on
leaf; 365 in their own tree); a get then looks up the heads' database record in the main tree
once per read transaction. Versions (``mv/``) stay in the main database: they sort last there
and are appended as they are. The index keyspaces of ``DUP_DATABASES`` moved in format 20 (into
databases of duplicates). ``id/`` is format 21's (``lex/i/`` was in one from format 17 to 20).
The PostgreSQL engine keeps one table."""


E = TypeVar("E", MemoryType, EdgeType, Verb, ObjKind)

VERSION_INFIX: Final = b"/v/"
"""Formats 1-20's infix of a version key (``mv/`` id16 ``/v/`` u64(n))."""
_U64_MAX: Final = 2**64 - 1
ROW_LIMIT: Final = 2**32
"""Rows are u32: a write that would need row ``ROW_LIMIT`` fails (``StoreFullError``)."""


def _u64(n: int) -> bytes:
    if not 0 <= n <= _U64_MAX:
        raise ValueError(f"{n} does not fit in an unsigned 64-bit key part")
    return n.to_bytes(8, "big")


# Tags and object references recur across memories: their hashes are remembered (pure
# functions of the text, bounded caches).
@lru_cache(maxsize=4096)
def tag_hash(tag: str) -> bytes:
    """First 8 bytes of sha256 of the NFC tag's UTF-8."""
    return hashlib.sha256(tag.encode("utf-8")).digest()[:8]


@lru_cache(maxsize=4096)
def obj_hash(obj_ref: str) -> bytes:
    """First 16 bytes of sha256 of a frame's object reference."""
    return hashlib.sha256(obj_ref.encode("utf-8")).digest()[:16]


def prefix_end(prefix: bytes) -> bytes:
    """The smallest key greater than every key starting with ``prefix``."""
    p = bytearray(prefix)
    while p and p[-1] == 0xFF:
        p.pop()
    if not p:
        raise ValueError("a prefix of only 0xff bytes has no end")
    p[-1] += 1
    return bytes(p)


def row_bytes(row: int) -> bytes:
    """A row number as its 4 key bytes (u32 big-endian)."""
    if not 0 <= row < ROW_LIMIT:
        raise ValueError(f"{row} is not a row number (0 <= row < 2**32)")
    return row.to_bytes(4, "big")


# --- id/ id16 -> row --------------------------------------------------------------------------


def id_key(id_: MemoryId) -> bytes:
    """``id/`` id16: the row number of the memory of that id (format 21)."""
    return ID + id_.bytes


def parse_id_key(key: bytes) -> MemoryId:
    """The id of an ``id/`` key."""
    _expect(key, ID, 16)
    return MemoryId(key[len(ID) :])


# --- m/ u32(row) ------------------------------------------------------------------------------


def head_key(row: int) -> bytes:
    """``m/`` u32(row) (format 21)."""
    return HEAD + row_bytes(row)


def parse_head_key(key: bytes) -> int:
    """The row of a head key."""
    _expect(key, HEAD, 4)
    return int.from_bytes(key[2:], "big")


# --- mv/ u32(row) u64(n) ----------------------------------------------------------------------


def version_prefix(row: int) -> bytes:
    """``mv/`` u32(row): every version of one memory."""
    return VERSION + row_bytes(row)


def version_key(row: int, n: int) -> bytes:
    """``mv/`` u32(row) u64(n)."""
    return VERSION + row_bytes(row) + _u64(n)


def parse_version_key(key: bytes) -> tuple[int, int]:
    """The row and version number of a version key."""
    _expect(key, VERSION, 4 + 8)
    return int.from_bytes(key[3:7], "big"), int.from_bytes(key[7:], "big")


# --- indexes ----------------------------------------------------------------------------------


def type_key(type_: MemoryType, created_us: int, id_: MemoryId) -> bytes:
    """``idx/type/`` t1 u64(created_us) id16."""
    return IDX_TYPE + bytes((type_,)) + _u64(created_us) + id_.bytes


def index_keys(
    type_: MemoryType,
    created_us: int,
    id_: MemoryId,
    tags: Iterable[str],
    frames: Iterable[FrameRef],
    *,
    actor_obj: bool,
) -> list[bytes]:
    """Every index key of one memory (the store's ``_index_keys``).

    The same keys as ``type_key``, ``tag_key``, ``frame_key`` and (with ``actor_obj``)
    ``actor_obj_key``, built around the tail ``u64(created_us) id16`` they share.
    """
    if _USE_SPEEDUPS and type(id_) is MemoryId:
        fast: list[bytes] | None = _sp.index_keys(
            INDEX_PLAN, type_, created_us, id_.bytes, tags, frames, actor_obj
        )
        if fast is not None:
            return fast
    tail = _u64(created_us) + id_.bytes
    t = _TYPE_BYTE[type_]
    keys = [IDX_TYPE + t + tail]
    keys += [IDX_TAG + tag_hash(tag) + t + tail for tag in tags]
    for f in frames:
        h = obj_hash(f.obj_ref)
        keys.append(IDX_FRAME + bytes((f.verb, f.obj_kind)) + h + tail)
        if actor_obj:
            keys.append(IDX_ACTOR_OBJ + bytes((f.verb,)) + h + tail)
    return keys


_TYPE_BYTE: Final = {t: bytes((t,)) for t in MemoryType}
# what the C ``index_keys`` needs (it returns None where it is not sure: then the code above runs)
INDEX_PLAN: Final = (
    IDX_TYPE,
    IDX_TAG,
    IDX_FRAME,
    IDX_ACTOR_OBJ,
    _TYPE_BYTE,
    FrameRef,
    tag_hash,
    obj_hash,
)


class TypeEntry(NamedTuple):
    """A parsed ``idx/type`` key."""

    type: MemoryType
    created_us: int
    id: MemoryId


def parse_type_key(key: bytes) -> TypeEntry:
    """Parse an ``idx/type`` key."""
    _expect(key, IDX_TYPE, 1 + 8 + 16)
    p = len(IDX_TYPE)
    return TypeEntry(
        _code(MemoryType, key, p),
        int.from_bytes(key[p + 1 : p + 9], "big"),
        MemoryId(key[p + 9 :]),
    )


def tag_key(tag: str, type_: MemoryType, created_us: int, id_: MemoryId) -> bytes:
    """``idx/tag/`` sha256(tag)[:8] t1 u64(created_us) id16 (format 4: the type after the tag)."""
    return IDX_TAG + tag_hash(tag) + bytes((type_,)) + _u64(created_us) + id_.bytes


def tag_prefix(tag: str, type_: MemoryType | None = None) -> bytes:
    """``idx/tag/`` sha256(tag)[:8] [t1]: a tag's entries, or its entries of one type by time."""
    prefix = IDX_TAG + tag_hash(tag)
    return prefix if type_ is None else prefix + bytes((type_,))


class TagEntry(NamedTuple):
    """A parsed ``idx/tag`` key."""

    tag_hash: bytes
    type: MemoryType
    created_us: int
    id: MemoryId


def parse_tag_key(key: bytes) -> TagEntry:
    """The tag hash, type, created time and id of an ``idx/tag`` key."""
    _expect(key, IDX_TAG, 8 + 1 + 8 + 16)
    p = len(IDX_TAG)
    return TagEntry(
        key[p : p + 8],
        _code(MemoryType, key, p + 8),
        int.from_bytes(key[p + 9 : p + 17], "big"),
        MemoryId(key[p + 17 :]),
    )


def frame_prefix(verb: Verb, kind: ObjKind, obj_ref: str) -> bytes:
    """``idx/frame/`` verb1 kind1 sha256(obj_ref)[:16]: one frame's entries, by created time."""
    return IDX_FRAME + bytes((verb, kind)) + obj_hash(obj_ref)


def frame_key(verb: Verb, kind: ObjKind, obj_ref: str, created_us: int, id_: MemoryId) -> bytes:
    """``idx/frame/`` verb1 kind1 sha256(obj_ref)[:16] u64(created_us) id16 (format >= 3)."""
    return frame_prefix(verb, kind, obj_ref) + _u64(created_us) + id_.bytes


class FrameEntry(NamedTuple):
    """A parsed ``idx/frame`` key."""

    verb: Verb
    obj_kind: ObjKind
    obj_hash: bytes
    created_us: int
    id: MemoryId


def parse_frame_key(key: bytes) -> FrameEntry:
    """Parse an ``idx/frame`` key (format >= 3)."""
    _expect(key, IDX_FRAME, 2 + 16 + 8 + 16)
    p = len(IDX_FRAME)
    return FrameEntry(
        _code(Verb, key, p),
        _code(ObjKind, key, p + 1),
        key[p + 2 : p + 18],
        int.from_bytes(key[p + 18 : p + 26], "big"),
        MemoryId(key[p + 26 :]),
    )


def pin_key(type_: MemoryType, created_us: int, id_: MemoryId) -> bytes:
    """``idx/pin/`` t1 u64(created_us) id16: a memory the context's pinned tier holds."""
    return IDX_PIN + bytes((type_,)) + _u64(created_us) + id_.bytes


def parse_pin_key(key: bytes) -> TypeEntry:
    """Parse an ``idx/pin`` key (the same parts as an ``idx/type`` key)."""
    _expect(key, IDX_PIN, 1 + 8 + 16)
    p = len(IDX_PIN)
    return TypeEntry(
        _code(MemoryType, key, p),
        int.from_bytes(key[p + 1 : p + 9], "big"),
        MemoryId(key[p + 9 :]),
    )


def claim_index_prefix(claim: bytes) -> bytes:
    """``idx/claim/`` hash16: the memories holding one claim key (``chains.claim_hash``)."""
    if len(claim) != 16:
        raise ValueError("a claim hash is 16 bytes")
    return IDX_CLAIM + claim


def claim_index_key(claim: bytes, id_: MemoryId) -> bytes:
    """``idx/claim/`` hash16 id16."""
    return claim_index_prefix(claim) + id_.bytes


def parse_claim_index_key(key: bytes) -> tuple[bytes, MemoryId]:
    """The claim hash and memory id of an ``idx/claim`` key."""
    _expect(key, IDX_CLAIM, 16 + 16)
    p = len(IDX_CLAIM)
    return key[p : p + 16], MemoryId(key[p + 16 :])


def actor_obj_key(verb: Verb, obj_ref: str, created_us: int, id_: MemoryId) -> bytes:
    """``idx/actor_obj/`` verb1 sha256(obj_ref)[:16] u64(created_us) id16 (Events only)."""
    return IDX_ACTOR_OBJ + bytes((verb,)) + obj_hash(obj_ref) + _u64(created_us) + id_.bytes


def parse_actor_obj_key(key: bytes) -> tuple[Verb, bytes, int, MemoryId]:
    """The verb, object hash, created time and id of an ``idx/actor_obj`` key."""
    _expect(key, IDX_ACTOR_OBJ, 1 + 16 + 8 + 16)
    p = len(IDX_ACTOR_OBJ)
    return (
        _code(Verb, key, p),
        key[p + 1 : p + 17],
        int.from_bytes(key[p + 17 : p + 25], "big"),
        MemoryId(key[p + 25 :]),
    )


# --- edges ------------------------------------------------------------------------------------


def edge_from_key(src: MemoryId, type_: EdgeType, dst: MemoryId) -> bytes:
    """``e/from/`` src16 edge1 dst16."""
    return EDGE_FROM + src.bytes + bytes((type_,)) + dst.bytes


def edge_to_key(dst: MemoryId, type_: EdgeType, src: MemoryId) -> bytes:
    """``e/to/`` dst16 edge1 src16."""
    return EDGE_TO + dst.bytes + bytes((type_,)) + src.bytes


def parse_edge_key(key: bytes) -> tuple[MemoryId, EdgeType, MemoryId]:
    """``(src, type, dst)`` of either edge key."""
    if key.startswith(EDGE_FROM):
        _expect(key, EDGE_FROM, 33)
        p = len(EDGE_FROM)
        return MemoryId(key[p : p + 16]), _code(EdgeType, key, p + 16), MemoryId(key[p + 17 :])
    _expect(key, EDGE_TO, 33)
    p = len(EDGE_TO)
    return MemoryId(key[p + 17 :]), _code(EdgeType, key, p + 16), MemoryId(key[p : p + 16])


# --- journal, vectors, meta -------------------------------------------------------------------


def journal_key(seq: int) -> bytes:
    """``j/`` u64(seq)."""
    return JOURNAL + _u64(seq)


def parse_journal_key(key: bytes) -> int:
    """The sequence number of a journal key."""
    _expect(key, JOURNAL, 8)
    return int.from_bytes(key[2:], "big")


def erasure_key(seq: int) -> bytes:
    """``er/`` u64(seq): the erasure record of the purge journalled at ``seq``."""
    return ERASURE + _u64(seq)


def parse_erasure_key(key: bytes) -> int:
    """The journal sequence number of an erasure record's key."""
    _expect(key, ERASURE, 8)
    return int.from_bytes(key[len(ERASURE) :], "big")


def vec_key(row: int) -> bytes:
    """``vec/`` u32(row) (format 21)."""
    return VEC + row_bytes(row)


def parse_row_key(key: bytes, prefix: bytes) -> int:
    """The row of a key ``prefix`` u32(row) (``vec/``, ``sal/``, ``lex/d/``, ``m/``)."""
    _expect(key, prefix, 4)
    return int.from_bytes(key[len(prefix) :], "big")


def salience_key(row: int) -> bytes:
    """``sal/`` u32(row): a memory's use counters (derived data, not hashed; format 21)."""
    return SALIENCE + row_bytes(row)


def meta_key(name: str) -> bytes:
    """``meta/`` name (ASCII, a fixed vocabulary: ``META_RECORDS``)."""
    if not name.isascii() or not name or "/" in name:
        raise ValueError(f"bad meta key name {name!r}")
    return META + name.encode("ascii")


MIGRATIONS_KEY: Final = meta_key("migrations")
"""``meta/migrations``: the migrations applied (``cortex.transfer.migrate``; absent when none)."""
META_RECORDS: Final = frozenset(
    meta_key(n) for n in ("format", "lexical", "vectors", "chunks", "scrub", "migrations")
)
"""Every ``meta/`` record a store may hold (``storage.md``); ``verify`` reports any other key."""


# --- lexical index: lex/p/ term 0x00 id16, lex/d/ id16, lex/t/ term ------------------------------
# Terms are non-empty UTF-8 without NUL (the tokenizer yields letters and digits only), so the
# NUL after a term ends it: the prefix of "ab" never matches the postings of "abc".


def _term(term: str) -> bytes:
    b = term.encode("utf-8")
    if not b or 0 in b:  # (the byte as an int: a bytes operand costs a failed int conversion)
        raise ValueError(f"bad search term {term!r}")
    return b


@lru_cache(maxsize=8192)
def posting_prefix(term: str) -> bytes:
    """``lex/p/`` term ``0x00``: every posting of one term (memoised: a hot path)."""
    return LEX_POSTING + _term(term) + b"\x00"


def posting_key(term: str, docno: int) -> bytes:
    """``lex/p/`` term ``0x00`` docno (u32 big-endian): a posting block's key (format 14)."""
    return LEX_POSTING + _term(term) + b"\x00" + docno.to_bytes(4, "big")


def parse_posting_key(key: bytes) -> tuple[str, int]:
    """The term and first document number of a posting block key."""
    p = len(LEX_POSTING)
    if not key.startswith(LEX_POSTING) or len(key) < p + 6 or key[-5] != 0:
        raise CodecError(f"malformed posting key {key!r}")
    raw = key[p:-5]
    if b"\x00" in raw:
        raise CodecError(f"malformed posting key {key!r}")
    try:
        term = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CodecError(f"malformed posting key {key!r}: the term is not UTF-8") from None
    return term, int.from_bytes(key[-4:], "big")


def lex_docno_key(docno: int) -> bytes:
    """``lex/i/`` docno (u32 big-endian): which memory a document number names."""
    return LEX_DOCNO + docno.to_bytes(4, "big")


def parse_lex_docno_key(key: bytes) -> int:
    """The document number of a ``lex/i/`` key."""
    _expect(key, LEX_DOCNO, 4)
    return int.from_bytes(key[len(LEX_DOCNO) :], "big")


def lex_doc_key(row: int) -> bytes:
    """``lex/d/`` u32(row): what the lexical index holds for one memory (format 21)."""
    return LEX_DOC + row_bytes(row)


def parse_lex_doc_key(key: bytes) -> int:
    """The row (document number) of a ``lex/d/`` key."""
    _expect(key, LEX_DOC, 4)
    return int.from_bytes(key[len(LEX_DOC) :], "big")


@lru_cache(maxsize=8192)
def lex_term_key(term: str) -> bytes:
    """``lex/t/`` term: the document frequency of one term (memoised: a hot path)."""
    return LEX_TERM + _term(term)


def parse_lex_term_key(key: bytes) -> str:
    """The term of a ``lex/t/`` key."""
    raw = key[len(LEX_TERM) :]
    if not key.startswith(LEX_TERM) or not raw or b"\x00" in raw:
        raise CodecError(f"malformed term key {key!r}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CodecError(f"malformed term key {key!r}: the term is not UTF-8") from None


def episode_key(eid: MemoryId) -> bytes:
    """``ep/`` id16."""
    return EPISODE + eid.bytes


def parse_episode_key(key: bytes) -> MemoryId:
    """The episode id of an ``ep/`` key.

    Raises:
        CodecError: not an episode key.
    """
    _expect(key, EPISODE, 16)
    return MemoryId(key[len(EPISODE) :])


def episode_memory_key(eid: MemoryId, mid: MemoryId) -> bytes:
    """``prov/e/`` episode id16 + memory id16."""
    return EPISODE_MEMORY + eid.bytes + mid.bytes


def parse_episode_memory_key(key: bytes) -> tuple[MemoryId, MemoryId]:
    """``(episode id, memory id)`` of a ``prov/e/`` key.

    Raises:
        CodecError: not such a key.
    """
    _expect(key, EPISODE_MEMORY, 32)
    at = len(EPISODE_MEMORY)
    return MemoryId(key[at : at + 16]), MemoryId(key[at + 16 :])


def sens_key(id_: MemoryId, *, episode: bool = False) -> bytes:
    """``sens/m/`` id16 (a memory's), or ``sens/e/`` id16 (an episode's: ``episode=True``).

    Memory and episode ids are separate namespaces (a caller may give both the same ULID), so
    each has its own prefix.
    """
    return (SENS_EPISODE if episode else SENS_MEMORY) + id_.bytes


def parse_sens_key(key: bytes) -> tuple[bool, MemoryId]:
    """``(is_episode, id)`` of a ``sens/`` key.

    Raises:
        CodecError: not such a key.
    """
    episode = key.startswith(SENS_EPISODE)
    _expect(key, SENS_EPISODE if episode else SENS_MEMORY, 16)
    return episode, MemoryId(key[len(SENS_MEMORY) :])


def show_key(key: bytes) -> str:
    """A key as people read it in messages (``m/<id>``, ``lex/p/<term>/<id>``, ...), else hex."""
    try:
        if key.startswith(HEAD):
            return f"m/{parse_head_key(key)}"
        if key.startswith(ID):
            return f"id/{parse_id_key(key)}"
        if key.startswith(VERSION):
            row, n = parse_version_key(key)
            return f"mv/{row}/{n}"
        if key.startswith(VEC):
            return f"vec/{parse_row_key(key, VEC)}"
        if key.startswith(SALIENCE):
            return f"sal/{parse_row_key(key, SALIENCE)}"
        if key.startswith(JOURNAL):
            return f"j/{parse_journal_key(key)}"
        if key.startswith(LEX_POSTING):
            term, docno = parse_posting_key(key)
            return f"lex/p/{term}/{docno}"
        if key.startswith(LEX_DOC):
            return f"lex/d/{parse_lex_doc_key(key)}"
        if key.startswith(LEX_TERM):
            return f"lex/t/{parse_lex_term_key(key)}"
        if key.startswith(LEX_SEGMENT):
            return f"lex/s/{parse_lex_segment_key(key)}"
        if key.startswith(LEX_DOCNO):
            return f"lex/i/{parse_lex_docno_key(key)}"
        if key.startswith(EPISODE):
            return f"ep/{parse_episode_key(key)}"
        if key.startswith(EPISODE_MEMORY):
            e, m = parse_episode_memory_key(key)
            return f"prov/e/{e}/{m}"
        if key.startswith(IDX_CLAIM):
            c, m = parse_claim_index_key(key)
            return f"idx/claim/{c.hex()}/{m}"
        if key.startswith(SENS):
            episode, i = parse_sens_key(key)
            return f"sens/{'e' if episode else 'm'}/{i}"
        if key.startswith(ERASURE):
            return f"er/{parse_erasure_key(key)}"
        if key.startswith(ENTITY_ALIAS):
            return "ent/a/" + key[len(ENTITY_ALIAS) :].decode("utf-8")
        if key.startswith(META):
            return key.decode("ascii")
    except (CodecError, ValueError, UnicodeDecodeError):
        pass
    return key.hex()


def lex_segment_key(seq: int) -> bytes:
    """``lex/s/`` seq: the posting segment of sequence number ``seq`` (u64 big-endian)."""
    return LEX_SEGMENT + seq.to_bytes(8, "big")


def parse_lex_segment_key(key: bytes) -> int:
    """The sequence number of a ``lex/s/`` key."""
    _expect(key, LEX_SEGMENT, 8)
    return int.from_bytes(key[len(LEX_SEGMENT) :], "big")


def _expect(key: bytes, prefix: bytes, rest: int) -> None:
    if not key.startswith(prefix) or len(key) != len(prefix) + rest:
        raise CodecError(f"malformed key {key!r}: expected {prefix!r} and {rest} more bytes")


def _code(cls: type[E], key: bytes, at: int) -> E:
    # a bad code byte is a malformed key, not a caller's ValueError
    try:
        return cls(key[at])
    except ValueError:
        raise CodecError(f"malformed key {key!r}: no {cls.__name__} with code {key[at]}") from None


TASK_PREFIX: Final = b"task/"
"""``task/`` sha256(task id)[:16]: the sealed count of a task's writes (8 bytes, big-endian)."""
