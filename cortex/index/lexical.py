"""The lexical index: BM25 postings over each live memory's full form, kept in LMDB.

The store updates the index inside the write transaction of every write, update, tombstone
and purge (``Indexer``), so the index is never behind the records. ``search`` ranks by Okapi
BM25 and skips posting lists that cannot change the top ``limit`` (MaxScore pruning). The
layout and the scoring are normative: ``specs/lexical.md``.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from operator import itemgetter
from typing import Any, Final

import cbor2
import msgspec

from cortex.errors import CodecError, IntegrityError, StoreFullError
from cortex.index import segments as _segments
from cortex.index.postings import (
    DOCNO_LIMIT,
    ENTRY,
    apply_many,
    block_entries,
    block_records,
    entry_tail,
    find,
    fresh_changes,
    term_entries,
)
from cortex.index.text import STEMS, query_terms
from cortex.index.text import terms as doc_terms
from cortex.model.codec import (
    HEAD,
    VERSION,
    IntField,
    Invalid,
    ListField,
    StructCodec,
    TextField,
    decode_data_trusted,
    encode_uint,
)
from cortex.model.enums import MemoryType
from cortex.model.forms import FULL_LABELS, FULL_SPECS, render_full
from cortex.model.ids import MemoryId
from cortex.model.records import Data
from cortex.storage.keys import (
    HEAD as HEAD_PREFIX,
)
from cortex.storage.keys import (
    LEX_DOC,
    LEX_POSTING,
    LEX_SEGMENT,
    LEX_TERM,
    id_key,
    lex_doc_key,
    lex_term_key,
    meta_key,
    parse_lex_doc_key,
    parse_lex_term_key,
    parse_posting_key,
    posting_prefix,
    show_key,
    version_key,
)
from cortex.storage.kv import ReadTxn, WriteTxn, seal, unseal

try:
    from cortex import _speedups as _sp
except ImportError:  # pragma: no cover - installed without a C compiler
    _sp = None  # type: ignore[assignment]

# an extension built from an older _speedups.c lacks the functions: then the Python paths run
_USE_SPEEDUPS: bool = _sp is not None and all(
    hasattr(_sp, name)
    for name in (
        "count_terms",
        "add_postings",
        "ascii_term_counts",
        "StemTable",
        "index_doc",
        "index_new",
        "df_updates",
        "df_values",
        "full_term_counts",
    )
)
"""Count terms, index documents and hold postings in C (``cortex._speedups``) when it is built;
tests switch this off to compare with the Python paths."""

_USE_BM25: bool = _sp is not None and hasattr(_sp, "bm25_top")
"""Score text queries without an allow filter in C (``search_terms``) when ``_USE_SPEEDUPS`` is
on too; tests switch it off to compare with the Python loop."""

# what ascii_term_counts found in the stem cache (text.STEMS), by the token's bytes
_STEM_TABLE: Final[Any] = _sp.StemTable() if _USE_SPEEDUPS else None

__all__ = [
    "BLOCKS_FEATURE",
    "DOCNO_FEATURE",
    "FEATURE",
    "K1",
    "LEAN_DOCS_FEATURE",
    "SEGMENTS_FEATURE",
    "SEGMENT_MAX",
    "SEGMENT_POSTINGS",
    "STATS_KEY",
    "STEM_FEATURE",
    "B",
    "Indexer",
    "LexDoc",
    "LexStats",
    "analyze",
    "analyze_counts",
    "check",
    "count_terms",
    "document_frequencies",
    "fold",
    "idf",
    "logical",
    "read_stats",
    "reset_stats",
    "same_terms",
    "search",
    "search_terms",
]

K1: Final = 1.2
"""BM25 term-frequency saturation."""
B: Final = 0.75
"""BM25 length normalisation."""
FEATURE: Final = "lexical-bm25"
"""The format feature naming this index (format version 2)."""
STEM_FEATURE: Final = "lexical-stem-english"
"""The format feature of stemmed terms (format version 5): terms are ``text.terms``."""
BLOCKS_FEATURE: Final = "lexical-posting-blocks"
"""The format feature of postings kept in blocks (format version 6): ``cortex.index.postings``."""
STATS_KEY: Final = meta_key("lexical")
SEGMENTS_FEATURE: Final = "lexical-posting-segments"
"""The format feature of posting segments (format version 10): ``cortex.index.segments``."""
DOCNO_FEATURE: Final = "lexical-docnos"
"""The format feature of postings keyed by document number (format version 14): ``lex/i/``,
``LexDoc.docno``, ``LexStats.next_docno`` and varint posting blocks (``lexical.md`` §4, §4a)."""
LEAN_DOCS_FEATURE: Final = "lexical-lean-documents"
"""The format feature of ``lex/d/`` records without their terms (format version 16, ``LexDoc``
schema version 2): a removal renders the indexed version again (``indexed_terms``)."""
SEGMENT_MAX: Final = 32
"""Segments a commit may leave at most; one that would leave more folds them all (§5; an
implementation choice, not part of the format)."""
SEGMENT_POSTINGS: Final = 4096
"""Segment entries a commit may leave at most (and the largest change stored as a segment);
one that would leave more folds every segment into the main blocks. (A single write's segment
holds ~30 entries, so ``SEGMENT_MAX`` bounds single writes; a group commit's holds its writes'
together: 1,024 made 8 threads' groups fold every ~4 groups, 4,096 every ~17.)"""

# a bound on a term's contribution is idf * (K1 + 1); widened by this much so that rounding in
# the sums can never prune a document that belongs in the results
_SLACK: Final = 1e-9


class LexDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``lex/d/`` id16: the document number of an indexed memory and what was indexed.

    Its terms are not stored (format 16): removing the memory from the index renders the
    version it names again (``indexed_terms``).

    Attributes:
        version: the version of the memory that was indexed (its current version).
        length: the number of terms of its full form (with repeats).
        docno: its document number (format 14): what its postings are keyed by.
    """

    version: int
    length: int
    docno: int  # required: a record without it is damaged, never read as number 0


class LexDoc15(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A ``lex/d/`` record of formats 14 and 15 (schema version 1): with its distinct terms.

    Read only by the migration to format 16 (``0015-lean-documents``).
    """

    version: int
    length: int
    terms: tuple[str, ...] = ()
    docno: int


class LexStats(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``meta/lexical``: collection statistics.

    Attributes:
        documents: indexed memories (N).
        total_length: the sum of their lengths (for the average length).
        terms: distinct terms in the index (``lex/t/`` keys).
        postings: postings of the combined index.
        next_docno: the document number the next memory new to the index gets (format 14).
    """

    documents: int = 0
    total_length: int = 0
    terms: int = 0
    postings: int = 0
    next_docno: int  # required (format 14): never guessed as 0


DOC_CODEC: Final = StructCodec(
    LexDoc,
    [
        ("version", IntField(1)),
        ("length", IntField()),
        ("docno", IntField(0, DOCNO_LIMIT - 1)),
    ],
    schema_version=2,
)
DOC_CODEC_V15: Final = StructCodec(
    LexDoc15,
    [
        ("version", IntField(1)),
        ("length", IntField()),
        ("terms", ListField(TextField(256), max_items=2**32)),
        ("docno", IntField(0, DOCNO_LIMIT - 1)),
    ],
    schema_version=1,
)
STATS_CODEC: Final = StructCodec(
    LexStats,
    [
        ("documents", IntField()),
        ("total_length", IntField()),
        ("terms", IntField()),
        ("postings", IntField()),
        ("next_docno", IntField(0, DOCNO_LIMIT)),
    ],
    schema_version=1,
)


def analyze(data: Data, *, is_canonical: bool = False) -> list[str]:
    """The terms the index holds for typed data: ``terms(render_full(data))``.

    ``is_canonical``: ``data`` came from decoding (``forms.canonical``); skips re-normalising.
    """
    return doc_terms(render_full(data, is_canonical=is_canonical))


def analyze_counts(
    data: Data, *, is_canonical: bool = False, short: str | None = None
) -> tuple[list[str], list[int]]:
    """``count_terms(analyze(data))``: what ``Indexer.add_counted`` takes.

    ``short``: the text of ``data``'s short template, when the caller has it (``render_full``).
    """
    if _USE_SPEEDUPS and is_canonical and short is not None:
        # the full form's terms without its string, in one call (the common case: ASCII text,
        # values of plain types and enums, every token stemmed before)
        spec = FULL_SPECS.get(type(data))
        if spec is not None:
            head, getter, prefixes = spec
            counted = _sp.full_term_counts(
                head, short, prefixes, getter(data), FULL_LABELS, STEMS, _STEM_TABLE
            )
            if counted is not None:
                return counted
    full = render_full(data, is_canonical=is_canonical, short=short)
    if _USE_SPEEDUPS:
        # an ASCII text whose tokens were all stemmed before (the common case) in one call;
        # otherwise the Python path stems the new tokens into the cache
        counted = _sp.ascii_term_counts(full, STEMS, _STEM_TABLE)
        if counted is not None:
            return counted
    return count_terms(doc_terms(full))


def count_terms(terms: Iterable[str]) -> tuple[list[str], list[int]]:
    """The distinct terms in code point order (which is their UTF-8 byte order) and their counts.

    Raises:
        ValueError: a term is empty or contains U+0000 (it cannot be part of a key).
    """
    if _USE_SPEEDUPS and type(terms) is list:
        counted = _sp.count_terms(terms)
        if counted is not None:
            return counted
    tfs = Counter(terms)
    distinct = sorted(tfs)
    if "" in tfs or any("\x00" in t for t in distinct):
        raise ValueError(f"bad search terms in {tuple(distinct)!r}")
    return distinct, [tfs[t] for t in distinct]


def _add_postings(
    pending: dict[str, dict[bytes, bytes | None]],
    terms: list[str],
    values: list[bytes],
    raw: bytes,
) -> None:
    """Hold the postings of one memory (id16 ``raw``): ``pending[term][raw] = value``.

    ``cortex._speedups.add_postings`` does the same in C.
    """
    for term, value in zip(terms, values, strict=True):
        held = pending.get(term)
        if held is None:
            held = pending[term] = {}
        held[raw] = value


def _add_fresh(
    fresh: dict[str, bytearray], terms: list[str], values: list[bytes], raw: bytes
) -> None:
    """Append one new memory's postings (id16 ``raw``): ``fresh[term] += raw + value``.

    ``cortex._speedups.index_new`` does the same in C.
    """
    for term, value in zip(terms, values, strict=True):
        records = fresh.get(term)
        if records is None:
            records = fresh[term] = bytearray()
        records += raw
        records += value


def idf(n: int, df: int) -> float:
    """BM25 inverse document frequency: ``ln(1 + (N - df + 0.5) / (df + 0.5))`` (never < 0)."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


# ---------------------------------------------------------------------------------------------
# Values: postings hold tf and length in their blocks (``cortex.index.postings``); term entries hold
# df, as a canonical CBOR unsigned integer, sealed.


# the width of a CBOR unsigned integer after its head byte, and the least value it may hold in
# that width (a smaller one has a shorter, canonical form)
_UINT_WIDTHS: Final = {24: (1, 24), 25: (2, 0x100), 26: (4, 0x10000), 27: (8, 0x100000000)}


def _read_uint(p: bytes, i: int) -> tuple[int, int]:
    """A canonical CBOR unsigned integer at ``p[i]``: ``(value, next index)``."""
    h = p[i]
    if h < 24:
        return h, i + 1
    spec = _UINT_WIDTHS.get(h)
    if spec is None or i + 1 + spec[0] > len(p):
        raise ValueError("not an unsigned integer")
    end = i + 1 + spec[0]
    n = int.from_bytes(p[i + 1 : end], "big")
    if n < spec[1]:
        raise ValueError("integer not in its shortest form")
    return n, end


# Sealed df values seen or written, both ways: the same bytes always hold the same count, so a
# value found here needs no checksum or decoding (a write reads and writes ~20 of them).
_DF_OF: dict[bytes, int] = {}
_DF_VALUE: dict[int, bytes] = {}
_DF_MEMO_MAX: Final = 1 << 16


def _df_value(n: int) -> bytes:
    """The sealed ``lex/t/`` value of ``df = n``."""
    value = _DF_VALUE.get(n)
    if value is None:
        if len(_DF_VALUE) >= _DF_MEMO_MAX:
            _DF_VALUE.clear()
        value = _DF_VALUE[n] = seal(encode_uint(n))
    return value


def _df(key: bytes, value: bytes) -> int:
    n = _DF_OF.get(value)
    if n is not None:
        return n
    n = _df_checked(key, value)
    if len(_DF_OF) >= _DF_MEMO_MAX:
        _DF_OF.clear()
    _DF_OF[value] = n
    return n


def _df_checked(key: bytes, value: bytes) -> int:
    p = unseal(key, value)
    try:
        n, i = _read_uint(p, 0)
        if i != len(p) or n < 1:
            raise ValueError("malformed")
    except (ValueError, IndexError) as exc:
        raise IntegrityError(f"record {show_key(key)} does not decode: {exc}") from None
    return n


def _decode(codec: StructCodec[Any], key: bytes, value: bytes) -> Any:
    try:
        return codec.decode_trusted(unseal(key, value))
    except (Invalid, cbor2.CBORDecodeError, ValueError, TypeError) as exc:
        raise IntegrityError(f"record {show_key(key)} does not decode: {exc}") from None


_stats_memo: list[tuple[bytes, LexStats | None]] = [(b"", None)]
"""The last statistics record written or read (its sealed bytes) and what it holds: the next
write reads back the bytes the last one wrote (frozen; equal bytes decode alike)."""


def read_stats(txn: ReadTxn) -> LexStats:
    """The collection statistics (all zero when nothing was ever indexed).

    Raises:
        IntegrityError: the record is damaged, or missing while the store holds a memory: a
            store has it from its creation (``lexical.md`` §4), so a missing one is a damaged
            key, never an empty index (which would read every search as finding nothing, and
            give a write a row another memory has).
    """
    raw = txn.get(STATS_KEY)
    if raw is None:
        if next(iter(txn.keys(HEAD_PREFIX)), None) is None:
            return LexStats(next_docno=0)  # no memory: nothing was ever indexed
        raise IntegrityError(
            "the lexical statistics (meta/lexical) are missing: the store is damaged; run "
            "cortex verify (cortex reindex rebuilds them)"
        )
    memo = _stats_memo[0]  # one read: another thread may replace it meanwhile
    if memo[1] is not None and memo[0] == raw:
        return memo[1]
    stats: LexStats = _decode(STATS_CODEC, STATS_KEY, raw)
    _stats_memo[0] = (raw, stats)
    return stats


def reset_stats(txn: WriteTxn, next_docno: int) -> None:
    """Write empty statistics that give ``next_docno`` as the next document number (row).

    The start of a rebuild, after every other lexical record was deleted.
    """
    txn.put(STATS_KEY, seal(STATS_CODEC.encode(LexStats(next_docno=next_docno), "meta/lexical")))


# ---------------------------------------------------------------------------------------------
# Writing


class Indexer:
    """Adds and removes memories within one write transaction; ``flush`` before it commits.

    Document frequency changes and the statistics are kept in memory while the transaction
    runs, so a batch reads and writes each term entry once; new postings (and documents) are
    held back and written by ``flush``, each term's once: a batch of new memories appends to
    the last block of each of its terms (``cortex.index.postings``).
    """

    def __init__(self, txn: WriteTxn, *, fold: bool = False) -> None:
        self.txn = txn
        # fold every segment into the main blocks at flush, whatever the size of the change
        # (a purge: erased terms must leave the index's keys and values)
        self._fold = fold
        s = read_stats(txn)
        self._documents, self._total, self._terms, self._postings, self._next = (
            s.documents,
            s.total_length,
            s.terms,
            s.postings,
            s.next_docno,
        )
        # format 21: a memory's document number is its row (given at its creation by
        # ``take_row``, kept for its life): no lex/i/ map, an update re-indexes under it
        # postings not yet written: term -> {id16: tf and length (8 bytes), or None to remove a
        # stored one}; ids of one batch mostly arrive in ascending order (ULIDs), so new
        # postings mostly append, and an update's removal and addition meet in one rewrite
        self._pending: dict[str, dict[bytes, bytes | None]] = {}
        # the postings of memories new to the index in this transaction (``add_counted(new=
        # True)``): term -> their id16 + tail8 records in arrival order, appended without
        # hashing; merged into ``_pending`` only where something else touches the term
        self._fresh: dict[str, bytearray] = {}
        self._by_length: dict[int, dict[int, bytes]] = {}  # index_doc's tails: dl -> {tf: tail}
        # memories whose stored postings are to go (None in ``_pending``): id16 -> their terms
        self._gone: dict[bytes, frozenset[str]] = {}
        self._docs: dict[bytes, bytes] = {}  # new lex/d/ records not yet written: key -> value

    def take_row(self) -> int:
        """Give a new memory its row number (its document number: ``lexical.md`` §4).

        Raises:
            StoreFullError: every row (2**32) was given out; nothing is written.
        """
        row = self._next
        if row >= DOCNO_LIMIT:
            raise StoreFullError(
                "the store has given out every row number (2**32) to its memories: copy its "
                "memories into a new store (cortex export, cortex import)"
            )
        self._next = row + 1
        return row

    def add(self, row: int, version: int, terms: Iterable[str]) -> None:
        """Index the memory of ``row`` (which must not be indexed already) with its terms."""
        self.add_counted(row, version, *count_terms(terms))

    def add_counted(
        self,
        row: int,
        version: int,
        distinct: list[str],
        counts: list[int],
        *,
        new: bool = False,
    ) -> None:
        """Index the memory of ``row`` (not indexed already) with its counted terms.

        ``row``: the memory's row number, its document number (``take_row`` gave it).
        ``distinct`` and ``counts`` are what ``count_terms`` gives for its terms: the distinct
        terms in code point order and how often each occurs. ``new``: the memory is new to the
        store in this transaction (no posting of it is stored or held), as for a write.
        """
        docno = row
        if not 0 <= docno < self._next:
            raise IntegrityError(
                f"row {row} was never given (the next is {self._next}): run cortex verify"
            )
        raw = docno.to_bytes(4, "big")
        if _USE_SPEEDUPS:
            key = LEX_DOC + raw
            if new:
                n = _sp.index_new(
                    self._docs, key, self._fresh, self._by_length, raw, version, distinct,
                    counts, docno,
                )  # fmt: skip
            else:
                n = _sp.index_doc(
                    self._docs, key, self._pending, self._by_length, raw, version, distinct,
                    counts, docno,
                )  # fmt: skip
            if n is not None:
                self._documents += 1
                self._total += n
                self._postings += len(distinct)
                return
        length = sum(counts)
        doc = LexDoc(version=version, length=length, docno=docno)
        self._docs[lex_doc_key(row)] = seal(DOC_CODEC.encode(doc, "lex/d"))
        if not distinct:
            self._documents += 1
            return
        values = [entry_tail(tf, length) for tf in counts]  # (memoised there)
        if new:
            _add_fresh(self._fresh, distinct, values, raw)
        elif _USE_SPEEDUPS:
            _sp.add_postings(self._pending, distinct, values, raw)
        else:
            _add_postings(self._pending, distinct, values, raw)
        self._documents += 1
        self._total += length
        self._postings += len(distinct)

    def counted(self, documents: int, total_length: int, postings: int, next_docno: int) -> None:
        """Count in documents staged as ``add_counted`` does, numbered up to ``next_docno``.

        ``cortex.engine.store.Store._stage_new`` stages them through the C accelerator into
        ``_docs`` and ``_fresh``; ``next_docno`` is the next number (row) to give.
        """
        self._documents += documents
        self._total += total_length
        self._postings += postings
        self._next = next_docno

    def remove(
        self, row: int, version: int | None = None, *, terms: Sequence[str] | None = None
    ) -> bool:
        """Take the memory of ``row`` out of the index; False when it was not indexed.

        Its terms are those of the version its ``lex/d/`` record names, rendered again
        (``indexed_terms``): that version must still hold its data in the transaction (a purge
        removes the memory from the index before it erases its versions). ``version``: the
        version the caller expects indexed (its current one), so that an engine with round
        trips reads it with the document record. ``terms``: the distinct terms the memory was
        indexed with, in code point order, when the caller holds them (an index without
        memories, as in tests); then no version is read.

        Raises:
            IntegrityError: the document record, or the version it names, is missing or
                damaged (``cortex reindex`` rebuilds the index from the memories).
        """
        key = lex_doc_key(row)
        raw = self._docs.pop(key, None)
        held_doc = raw is not None
        if raw is None:
            if version is not None:
                prefetch = getattr(self.txn, "prefetch", None)
                if prefetch is not None:
                    prefetch([key, version_key(row, version)])
            raw = self.txn.get(key)
            if raw is None:
                return False
        doc: LexDoc = _decode(DOC_CODEC, key, raw)
        if doc.docno != row:
            raise IntegrityError(
                f"record {show_key(key)} holds document number {doc.docno}, not its row {row}: "
                "rebuild the index with `cortex reindex`"
            )
        if terms is None:
            terms = indexed_terms(self.txn, row, doc.version)
        raw = doc.docno.to_bytes(4, "big")
        pending, gone = self._pending, self._gone
        if held_doc:  # added in this transaction: its postings are held, not stored
            stored = gone.get(raw, frozenset())
            for term in terms:
                if term in self._fresh:
                    self._spill(term)
                group = pending[term]
                if term in stored:
                    group[raw] = None  # the removal of its stored posting stands
                else:
                    del group[raw]
        else:  # the stored postings go at flush, with any new ones of the same terms
            gone[raw] = frozenset(terms)
            for term in terms:
                pending.setdefault(term, {})[raw] = None
        if not held_doc:
            self.txn.delete(key)
        self._documents -= 1
        self._total -= doc.length
        self._postings -= len(terms)
        return True

    def _spill(self, term: str) -> None:
        """Move a term's new postings from ``_fresh`` into ``_pending``."""
        group = self._pending.setdefault(term, {})
        group.update(fresh_changes(self._fresh.pop(term)))

    def flush(self, puts: list[tuple[bytes, bytes]] | None = None) -> None:
        """Write the held-back postings, the changed document frequencies and the statistics.

        A commit changing at most ``SEGMENT_POSTINGS`` postings, while the segments stay within
        ``SEGMENT_MAX`` and ``SEGMENT_POSTINGS``, stores its changes as one new segment
        (``lexical.md`` §4b); any other folds every segment and its own changes into the main
        blocks and ``lex/t/`` entries, deleting the segments (§5).

        ``puts``: a list the caller writes with ``put_many`` after this call (a single write's
        records): a segment's puts (its documents, the segment, the statistics) are appended
        to it instead of written here, so the write makes one ``put_many``. A fold writes its
        own. The caller must write ``puts`` before anything reads the ``lex/`` keys again.
        """
        txn = self.txn
        pending, fresh, gone = self._pending, self._fresh, self._gone
        prefetch = getattr(txn, "prefetch", None)
        if prefetch is not None:  # an engine with round trips: the segments and the counts of
            # the terms changed, in one (none when ``prefetch_new`` named them already)
            prefetch([lex_term_key(t) for t in (*pending, *fresh)])
            scan = getattr(txn, "prefetch_scan", None)
            if scan is not None:
                scan([LEX_SEGMENT], SEGMENT_MAX)
        ov = _segments.overlay(txn)
        changed = sum(map(len, pending.values())) + sum(map(len, fresh.values())) // ENTRY
        if (
            changed
            and not self._fold
            and changed <= SEGMENT_POSTINGS
            and len(ov.keys) < SEGMENT_MAX
            and ov.postings + changed <= SEGMENT_POSTINGS
        ):
            self._write_segment(ov, changed, puts)
            return
        if not changed and not (self._fold and ov):
            ov = _segments.overlay_empty()
        additions = None if pending or gone or not ov else ov.added()
        seg_counts: Mapping[str, int]  # each term's document frequency change in the segments
        changes: list[tuple[str, dict[bytes, bytes | None] | bytearray]]
        changing: list[str] | None  # the terms whose counts readers saw change (None: all)
        delta: Counter[str]  # the document frequency changes
        if additions is not None:
            # the common fold: segments of new memories' postings only, and this transaction's
            # new memories; each term's records (ascending: appended after its last block,
            # ``apply_many``) and counts, without combining the segments entry by entry
            records, seg_counts = additions
            delta = Counter(seg_counts)
            for term, recs in fresh.items():
                have = records.get(term)
                records[term] = recs if have is None else have + recs
                delta[term] += len(recs) // ENTRY
            changing = list(fresh) if seg_counts else None
            changes = sorted(records.items(), key=itemgetter(0))
        else:
            folded = ov.folded()  # every term of the segments combined, in one pass
            for term in [t for t in fresh if t in pending or t in folded]:
                self._spill(term)
            # the changes to the main blocks, and their document frequency changes
            delta = Counter()
            changes_by_term: dict[str, dict[bytes, bytes | None]] = {}
            for term, group in pending.items():
                seen = folded.get(term)
                ovt = None if seen is None else seen[0]
                out: dict[bytes, bytes | None] = {}
                for raw, tail in group.items():
                    if ovt is not None and raw in ovt:
                        continue  # with the segments' entry, below
                    if tail is None:
                        out[raw] = None
                        delta[term] -= 1
                    else:
                        out[raw] = tail
                        below = gone.get(raw)
                        if below is None or term not in below:
                            delta[term] += 1
                if out:
                    changes_by_term[term] = out
            for term, (final, counted, in_main) in folded.items():
                own = pending.get(term)
                if own is None:  # the segments' final entries, and their count
                    out = final
                    if None in final.values():  # an id added and removed in the segments goes
                        main = in_main or ()
                        out = {raw: t for raw, t in final.items() if t is not None or raw in main}
                    if out:
                        changes_by_term[term] = out
                    delta[term] = counted  # (not touched above: the term is not pending)
                    continue
                main = in_main or ()
                out = changes_by_term.setdefault(term, {})
                d = 0
                for raw, last in final.items():
                    tail = own.get(raw, last)
                    if tail is not None:
                        out[raw] = tail
                        d += raw not in main
                    elif raw in main:
                        out[raw] = None
                        d -= 1
                delta[term] += d
                if not out:
                    del changes_by_term[term]
            if delta:
                for term, recs in fresh.items():
                    delta[term] += len(recs) // ENTRY
            else:  # new memories only (a batch's common case): one dict update, no per-term call
                delta.update({term: len(records) // ENTRY for term, records in fresh.items()})
            # the terms this transaction changes (the others' counts are the segments' already)
            changing = [t for t in delta if t in pending or t not in folded] if folded else None
            changes = list(changes_by_term.items())
            changes += fresh.items()
            changes.sort(key=itemgetter(0))
            seg_counts = {term: seen[1] for term, seen in folded.items()}
        self._put_docs()
        blocks: list[tuple[bytes, bytes]] = []
        prefetch = getattr(txn, "prefetch", None)
        if prefetch is not None and delta:  # an engine across a network sends these reads
            prefetch([lex_term_key(t) for t in delta])  # with the postings' (one round trip)
        apply_many(txn, changes, blocks)
        pending.clear()
        fresh.clear()
        gone.clear()
        if blocks:
            txn.put_many(blocks)
        for key in ov.keys:
            txn.delete(key)
        vocabulary = self._terms
        got = None
        cursor = getattr(txn, "cursor", None)
        if _USE_SPEEDUPS and cursor is not None and delta:
            # what readers counted of the terms this transaction changes (the other terms of
            # the segments keep theirs), read before anything is deleted
            befores = None if changing is None else _main_dfs(txn, changing)
            # every touched entry is read (and checked), even one whose count did not change
            got = _sp.df_updates(cursor(), [(lex_term_key(t), delta[t]) for t in sorted(delta)])
            if got is not None:  # else the loop below says what is wrong
                puts, deletes, added, removed = got
                if changing is None or befores is None:
                    vocabulary += added - removed
                else:
                    for term, before in zip(changing, befores, strict=True):
                        n = before + delta[term]
                        held = before + seg_counts.get(term, 0)  # what readers counted
                        vocabulary += (n > 0) - (held > 0)
                for key in deletes:
                    txn.delete(key)
        if got is None:
            puts = []
            for term in seg_counts:
                delta.setdefault(term, 0)
            terms = sorted(delta)
            # every entry read (and checked) first, in one call: the loop deletes only others
            for term, before in zip(terms, _main_dfs(txn, terms), strict=True):
                n = before + delta[term]
                held = before + seg_counts.get(term, 0)  # what readers counted
                vocabulary += (n > 0) - (held > 0)
                if n == before:
                    continue
                if n < 0:
                    raise IntegrityError(
                        f"term {term!r} would have a negative frequency: run verify"
                    )
                if n == 0:
                    txn.delete(lex_term_key(term))
                else:
                    puts.append((lex_term_key(term), _df_value(n)))
        if puts:
            txn.put_many(puts)
        delta.clear()
        self._terms = vocabulary
        self._put_stats()

    def segments(self) -> int:
        """How many posting segments the transaction's snapshot holds (``lexical.md`` §4b)."""
        return len(_segments.overlay(self.txn).keys)

    def _put_docs(self, out: list[tuple[bytes, bytes]] | None = None) -> None:
        """Write the held ``lex/d/`` records (``out``: append the puts to it instead)."""
        # new rows are past every stored one: their puts append (``put_many``)
        puts = list(self._docs.items()) if out is None else out
        if out is not None:
            puts += self._docs.items()
        if puts and out is None:
            self.txn.put_many(puts)
        self._docs.clear()

    def _put_stats(self, out: list[tuple[bytes, bytes]] | None = None) -> None:
        """Write the statistics record (``out``: append the put to it instead)."""
        stats = LexStats(
            documents=self._documents,
            total_length=self._total,
            terms=self._terms,
            postings=self._postings,
            next_docno=self._next,
        )
        value = seal(STATS_CODEC.encode(stats, "meta/lexical"))
        if out is None:
            self.txn.put(STATS_KEY, value)
        else:
            out.append((STATS_KEY, value))
        _stats_memo[0] = (value, stats)

    def _write_segment(
        self, ov: _segments.Overlay, changed: int, out: list[tuple[bytes, bytes]] | None
    ) -> None:
        """Store this transaction's posting changes as the next segment (``lexical.md`` §4b).

        ``changed``: the number of postings changed (held, and new: ``flush``). ``out``: as
        ``flush``'s ``puts``.
        """
        gone, fresh = self._gone, self._fresh
        groups: dict[str, dict[bytes, tuple[int, bytes | None]]] = {}
        delta: dict[str, int] = {}
        if not any(self._pending.values()):  # new memories only (the common write): every
            # entry an ADD, encoded straight from the held records
            payload, decoded = _segments.encode_fresh(fresh)
            if changed == len(fresh):  # one posting a term (a single write): each adds one
                delta = dict.fromkeys(fresh, 1)
            else:
                delta = {term: len(records) // ENTRY for term, records in fresh.items()}
            self._put_segment(ov, payload, decoded, delta, out, additions=True)
            return
        for term, group in self._pending.items():
            if not group:
                continue
            out_ = groups[term] = {}
            d = 0
            for raw, tail in group.items():
                below = gone.get(raw)
                if tail is None:
                    out_[raw] = (_segments.DEL, None)
                    d -= 1
                elif below is not None and term in below:
                    out_[raw] = (_segments.SET, tail)
                else:
                    out_[raw] = (_segments.ADD, tail)
                    d += 1
            delta[term] = d
        for term, records in fresh.items():
            out_ = groups.setdefault(term, {})
            for raw, tail in fresh_changes(records).items():
                out_[raw] = (_segments.ADD, tail)
            delta[term] = delta.get(term, 0) + len(records) // ENTRY
        payload, decoded = _segments.encode_groups(groups)
        self._put_segment(ov, payload, decoded, delta, out)

    def _put_segment(
        self,
        ov: _segments.Overlay,
        payload: bytes,
        decoded: _segments.Groups,
        delta: dict[str, int],
        out: list[tuple[bytes, bytes]] | None,
        *,
        additions: bool = False,
    ) -> None:
        """Put the segment ``payload`` (its groups ``decoded``) and the documents, statistics.

        ``delta``: the segment's document frequency change by term (ADDs less DELs). ``out``:
        append the puts to it instead of writing them (``flush``). ``additions``: every entry
        is an ADD (each change in ``delta`` is positive).
        """
        txn = self.txn
        puts: list[tuple[bytes, bytes]] = [] if out is None else out
        self._put_docs(puts)
        vocabulary = self._terms
        kept = ov.df_changes()
        if kept is None:
            changed = [term for term, d in delta.items() if d]
        elif additions:  # every change an addition (new memories): a term the segments add
            # to is held before and after (a stored count is never below 0): not read
            get = kept.get
            changed = [t for t in delta if get(t, 0) < 1]
        else:
            get = kept.get
            changed = [t for t, d in delta.items() if d < 0 or (d > 0 and get(t, 0) < 1)]
        if changed:
            limit = ov.postings
            for term, main in zip(changed, _main_dfs(txn, changed), strict=True):
                d = delta[term]
                if main - limit + min(d, 0) > 0:
                    continue  # held before and after whatever the segments say: no need to combine
                before = main + ov.df_change(term)
                after = before + d
                if after < 0:
                    raise IntegrityError(
                        f"term {term!r} would have a negative frequency: run verify"
                    )
                vocabulary += (after > 0) - (before > 0)
        value = seal(payload)
        puts.append((ov.next_key, value))
        _segments.remember(ov.next_key, value, decoded, ov, delta)
        self._pending.clear()
        self._fresh.clear()
        self._gone.clear()
        self._terms = vocabulary
        self._put_stats(puts)
        if out is None:
            txn.put_many(puts)


def fold(txn: WriteTxn) -> int:
    """Fold every posting segment into the main blocks and ``lex/t/`` entries (§5).

    Afterwards the index's bytes are those of an index written from scratch for the same live
    memories. Returns how many segments were folded.
    """
    n = len(_segments.overlay(txn).keys)
    if n:
        Indexer(txn, fold=True).flush()
    return n


RowsReader = Callable[[list[bytes]], "list[tuple[Any, Any]] | None"]
"""Rows -> each one's ``(head, version)``, or None (``Store.rows_reader``)."""


def search(
    txn: ReadTxn,
    query: str,
    *,
    limit: int,
    allow: Callable[[MemoryId], bool] | Collection[MemoryId] | None = None,
    rows: RowsReader | None = None,
    found: dict[bytes, tuple[Any, Any]] | None = None,
) -> list[tuple[MemoryId, float]]:
    """The ``limit`` best memories for ``query`` by BM25, best first, ties by document number.

    Each distinct query term counts once. Posting lists that cannot change the result are
    skipped or only probed (MaxScore), which gives exactly the ranking of a full evaluation.

    Args:
        txn: a read (or write) transaction of the store.
        query: free text; its ``query_terms`` (stemmed like the documents, function words
            left out) are searched.
        limit: how many results at most (>= 1).
        allow: only memories this accepts are ranked: a predicate, or a collection of ids.
        rows: the store's reader of the memories at rows (``Store.rows_reader``: one C call
            for the hits), or None: each hit's head and ``id/`` record read here.
        found: where ``rows`` read the hits, their ``(head, version)`` by raw id, for a
            caller that reads them next (``Executor.accept``).

    Returns:
        ``(id, score)`` pairs, at most ``limit``; empty when no term of the query is indexed.

    Raises:
        IntegrityError: an index record is damaged.
    """
    return search_terms(txn, query_terms(query), limit=limit, allow=allow, rows=rows, found=found)


def document_frequencies(txn: ReadTxn, terms: Iterable[str]) -> tuple[int, dict[str, int]]:
    """The number of indexed documents and each term's document frequency (0: not indexed).

    What BM25's ``idf`` takes, for a caller that weighs terms itself (query expansion:
    ``tools/sweep_multihop.py``).
    """
    stats = read_stats(txn)
    ov = _segments.overlay(txn)
    return stats.documents, {t: _combined_df(txn, t, ov) for t in dict.fromkeys(terms)}


def search_terms(
    txn: ReadTxn,
    terms: Iterable[str],
    *,
    limit: int,
    allow: Callable[[MemoryId], bool] | Collection[MemoryId] | None = None,
    rows: RowsReader | None = None,
    found: dict[bytes, tuple[Any, Any]] | None = None,
) -> list[tuple[MemoryId, float]]:
    """``search`` for terms already analysed (``query_terms``: folded, stemmed), each counted once.

    For terms that do not come from a text, such as an expansion's (``tools/sweep_multihop.py``);
    a term that is not indexed adds nothing.
    """
    if limit < 1:
        return []
    terms = list(dict.fromkeys(terms))
    load = getattr(txn, "preload", None)
    if load is not None:  # an engine with round trips: the stats, every term, the segments
        load([STATS_KEY, *(lex_term_key(t) for t in terms)], [LEX_SEGMENT], SEGMENT_MAX)
    stats = read_stats(txn)
    n = stats.documents
    if n == 0:
        return []
    ov = _segments.overlay(txn)
    avgdl = stats.total_length / n
    # (upper bound, term, idf, df) of every indexed query term, rarest first
    plan: list[tuple[float, str, float, int]] = []
    for term in terms:
        df = _combined_df(txn, term, ov)
        if df == 0:
            continue
        w = idf(n, df)
        plan.append((w * (K1 + 1.0) * (1.0 + _SLACK), term, w, df))
    if not plan:
        return []
    plan.sort(key=lambda p: (-p[0], p[1].encode("utf-8")))
    rest = [0.0] * (len(plan) + 1)
    for i in range(len(plan) - 1, -1, -1):
        rest[i] = rest[i + 1] + plan[i][0]

    k1, b = K1, B
    norm_a, norm_b = k1 * (1.0 - b), k1 * b / avgdl if avgdl else 0.0

    # A posting's tail (its 8 bytes after the id) is its tf and length, so its BM25 factor is
    # memoised by those bytes: the many postings sharing (tf, length) cost one dict lookup.
    memo: dict[bytes, float] = {}

    def factor(tail: bytes) -> float:
        f = memo.get(tail)
        if f is None:
            tf = int.from_bytes(tail[:4], "big")
            length = int.from_bytes(tail[4:], "big")
            f = memo[tail] = tf * (k1 + 1.0) / (tf + norm_a + norm_b * length)
        return f

    scores: dict[bytes, float] = {}
    allowed: Callable[[bytes], bool] | None = None
    verdicts: dict[bytes, bool] = {}  # an allow predicate's, by docno
    if allow is None:
        pass
    elif callable(allow):

        def allowed(raw: bytes) -> bool:
            v = verdicts.get(raw)
            if v is None:
                # unchecked: every hit returned is checked (``_ids_of``)
                v = verdicts[raw] = bool(allow(_head_id(txn, raw)))
            return v
    else:
        wanted = list(allow)
        load = getattr(txn, "preload", None)
        if load is not None:  # an engine with round trips: their documents in one
            load([id_key(m) for m in wanted])
        ids = {d for d in (_docno_of(txn, m) for m in wanted) if d is not None}
        if len(ids) * len(plan) < sum(p[3] for p in plan):
            # a small allow-list: probe its members instead of scanning the lists
            for raw in sorted(ids):
                total, hit = 0.0, False
                for _, term, w, _ in plan:
                    tail = _find(txn, term, raw, ov)
                    if tail is not None:
                        total += w * factor(tail)
                        hit = True
                if hit:
                    scores[raw] = total
            return _top(txn, scores, limit, rows, found)
        allowed = ids.__contains__

    if allowed is None and _USE_SPEEDUPS and _USE_BM25:
        # the loop below in C, every list read whole: on an engine with round trips all of
        # them in one query (a list has at most ``df`` blocks: kept whole), as the loop below
        # would read most of them anyway, a page of rows at a time, decoding each in Python
        if load is not None:
            load((), [posting_prefix(p[1]) for p in plan], max(p[3] for p in plan))
        lists = [
            (
                w,
                rest[i],
                df,
                [block_records(k, v) for k, v in txn.scan(posting_prefix(term))],
                ov.items(term) if term in ov else None,
            )
            for i, (_, term, w, df) in enumerate(plan)
        ]
        best = _sp.bm25_top(lists, limit, k1, norm_a, norm_b)
        if best is not None:
            hits = _ids_of(txn, [raw for raw, _ in best], rows, found)
            return [(mid, s) for mid, (_, s) in zip(hits, best, strict=True)]
    theta = -math.inf  # the limit-th best partial score: a lower bound of the final one
    for i, (_, term, w, df) in enumerate(plan):
        if rest[i] < theta:
            # no memory outside the candidates can reach the top any more: drop candidates that
            # cannot either, and only update the rest
            scores = {k: s for k, s in scores.items() if s + rest[i] >= theta}
            if len(scores) * 4 < df:
                for raw in list(scores):
                    tail = _find(txn, term, raw, ov)
                    if tail is not None:
                        scores[raw] += w * factor(tail)
            else:
                for raw, tail in _entries(txn, term, ov):
                    if raw in scores:
                        f = memo.get(tail)
                        scores[raw] += w * (f if f is not None else factor(tail))
        elif allowed is None:
            get = scores.get
            for raw, tail in _entries(txn, term, ov):
                f = memo.get(tail)
                scores[raw] = get(raw, 0.0) + w * (f if f is not None else factor(tail))
        else:
            postings = list(_entries(txn, term, ov))
            if callable(allow):  # the candidates' memories, read in one go where that matters
                _preload_numbers(
                    txn, [raw for raw, _ in postings if raw not in scores and raw not in verdicts]
                )
            for raw, tail in postings:
                s = scores.get(raw)
                if s is None:
                    if not allowed(raw):
                        continue
                    s = 0.0
                f = memo.get(tail)
                scores[raw] = s + w * (f if f is not None else factor(tail))
        if len(scores) >= limit:
            theta = heapq.nlargest(limit, scores.values())[-1]
    return _top(txn, scores, limit, rows, found)


def _main_df(txn: ReadTxn, term: str) -> int:
    """A term's document frequency in the main blocks (its ``lex/t/`` entry; 0 when none)."""
    key = lex_term_key(term)
    raw = txn.get(key)
    return 0 if raw is None else _df(key, raw)


def _main_dfs(txn: ReadTxn, terms: list[str]) -> list[int]:
    """``_main_df`` of each of ``terms`` (in C with one call when it is built)."""
    cursor = getattr(txn, "cursor", None)
    if _USE_SPEEDUPS and cursor is not None and terms:
        got: list[int] | None = _sp.df_values(cursor(), [lex_term_key(t) for t in terms])
        if got is not None:  # else the Python path says which entry is damaged
            return got
    return [_main_df(txn, t) for t in terms]


def _combined_df(txn: ReadTxn, term: str, ov: _segments.Overlay, main: int | None = None) -> int:
    """A term's document frequency: its main count plus the segments' change.

    ``main`` is the term's ``lex/t/`` count when the caller has read it already.
    """
    df = (_main_df(txn, term) if main is None else main) + ov.delta(term)
    if df < 0:
        raise IntegrityError(f"term {term!r} has a negative frequency: run verify")
    return df


def _entries(txn: ReadTxn, term: str, ov: _segments.Overlay) -> Iterator[tuple[bytes, bytes]]:
    """``(id16, tail)`` of a term's postings in id order: the main blocks' with the segments'."""
    main = term_entries(txn, posting_prefix(term))
    if term not in ov:
        yield from main
        return
    items = ov.items(term)
    j, n = 0, len(items)
    for raw, tail in main:
        while j < n and items[j][0] < raw:
            if items[j][1] is not None:
                yield items[j]  # type: ignore[misc]
            j += 1
        if j < n and items[j][0] == raw:
            if items[j][1] is not None:
                yield items[j]  # type: ignore[misc]
            j += 1
            continue
        yield raw, tail
    for k in range(j, n):
        if items[k][1] is not None:
            yield items[k]  # type: ignore[misc]


def _find(txn: ReadTxn, term: str, raw: bytes, ov: _segments.Overlay) -> bytes | None:
    """The tail of the posting of ``term`` in id ``raw``, with the segments', or None."""
    st = ov.term(term)
    if st is not None:
        got = st.get(raw)
        if got is not None:
            return got[0]
    return find(txn, posting_prefix(term), raw)


def _top(
    txn: ReadTxn,
    scores: dict[bytes, float],
    limit: int,
    rows: RowsReader | None = None,
    found: dict[bytes, tuple[Any, Any]] | None = None,
) -> list[tuple[MemoryId, float]]:
    """The ``limit`` best of ``scores`` (docno4 -> score): by score, ties by docno ascending."""
    best = heapq.nsmallest(limit, scores.items(), key=lambda kv: (-kv[1], kv[0]))
    ids = _ids_of(txn, [raw for raw, _ in best], rows, found)
    return [(mid, s) for mid, (_, s) in zip(ids, best, strict=True)]


def _preload_numbers(txn: ReadTxn, raws: Iterable[bytes]) -> None:
    """Name the heads about to be read: one round trip on an engine with them."""
    load = getattr(txn, "preload", None)
    if load is not None:
        load([HEAD_PREFIX + raw for raw in raws])


def _ids_of(
    txn: ReadTxn,
    raws: list[bytes],
    rows: RowsReader | None = None,
    found: dict[bytes, tuple[Any, Any]] | None = None,
) -> list[MemoryId]:
    """The memories document numbers (rows: 4 bytes, big-endian) name, from their heads.

    The head at a row names its memory; that memory's ``id/`` record must name the row back
    (``storage.md`` §2 Rows): a head of another row (a damaged key, a copied value) is an
    error here, never a second answer for that other memory. The heads, then the ``id/``
    records, are read in one round trip each on an engine with them. With ``rows`` (the C
    reader) all of it is one call, which reads each memory's current version too: kept in
    ``found`` (raw id -> ``(head, version)``) when given; where it declines, the reads below
    say what is wrong.

    Raises:
        IntegrityError: a row has no head, a head is damaged, or its memory's ``id/`` record
            names another row (or none).
    """
    if rows is not None and raws:
        pairs = rows(raws)
        if pairs is not None:
            if found is None:
                return [h.id for h, _ in pairs]
            out = []
            for pair in pairs:
                mid = pair[0].id
                found[mid.bytes] = pair
                out.append(mid)
            return out
    _preload_numbers(txn, raws)
    ids = [_head_id(txn, raw) for raw in raws]
    load = getattr(txn, "preload", None)
    if load is not None:
        load([id_key(m) for m in ids])
    for raw, mid in zip(raws, ids, strict=True):
        if _docno_of(txn, mid) != raw:
            raise IntegrityError(
                f"the head at row {int.from_bytes(raw, 'big')} names memory {mid}, whose id/ "
                "record names another row (or none): the store is damaged; run cortex verify"
            )
    return ids


def _head_id(txn: ReadTxn, raw: bytes) -> MemoryId:
    key = HEAD_PREFIX + raw
    value = txn.get(key)
    if value is None:
        raise IntegrityError(
            f"document number {int.from_bytes(raw, 'big')} of the lexical index names no "
            "memory (no head m/ at that row): run verify"
        )
    head = _decode(HEAD, key, value)
    mid: MemoryId = head.id
    return mid


def indexed_terms(txn: ReadTxn, row: int, version: int) -> list[str]:
    """The distinct terms version ``version`` of ``row``'s memory was indexed with, in UTF-8 order.

    What ``lex/d/`` held as its term list before format 16: the terms of the version's full
    form (``analyze``), which is immutable, so rendering it again gives them back.

    Raises:
        IntegrityError: the version is missing, damaged or erased.
    """
    key = version_key(row, version)
    mid = f"the memory of row {row}"
    value = txn.get(key)
    if value is None:
        raise IntegrityError(
            f"version {version} of {mid}, which the lexical index holds, is missing: "
            "rebuild the index with `cortex reindex`"
        )
    try:
        v = _decode(VERSION, key, value)
    except IntegrityError as exc:
        raise IntegrityError(
            f"{exc}; the lexical index holds version {version} of {mid} and cannot remove it "
            "without it: `cortex verify` lists the damage, `cortex salvage` copies what is "
            "intact, and `cortex reindex` rebuilds the index from the memories"
        ) from None
    if v.data is None:
        raise IntegrityError(
            f"version {version} of {mid}, which the lexical index holds, is erased: "
            "rebuild the index with `cortex reindex`"
        )
    try:
        data = decode_data_trusted(v.type, v.data)
    except CodecError as exc:
        raise IntegrityError(
            f"record {show_key(key)} does not decode: {exc}; the lexical index holds it: "
            "`cortex reindex` rebuilds the index from the memories"
        ) from None
    return count_terms(analyze(data, is_canonical=True))[0]


def _docno_of(txn: ReadTxn, mid: MemoryId) -> bytes | None:
    """A memory's document number (its row: 4 bytes, big-endian), or None when it has none."""
    key = id_key(mid)
    value = txn.get(key)
    if value is None:
        return None
    p = unseal(key, value)
    if len(p) != 4:
        raise IntegrityError(f"record {show_key(key)} does not hold a row number: run verify")
    return p


# ---------------------------------------------------------------------------------------------
# Verification


def check(
    txn: ReadTxn,
    live: dict[MemoryId, tuple[MemoryType, int, bytes]],
    numbers: dict[bytes, bytes],
) -> tuple[list[tuple[str, str]], LexStats]:
    """Compare the index with what the live memories imply, both ways, by memory id.

    The postings are keyed by document numbers, the memories' rows (format 21), so the
    comparison is logical: each posting's number is mapped to its memory through ``numbers``
    (every head's row and id, which the caller read: proportional to the memories). Memory
    otherwise stays proportional to the memories and the vocabulary, not to the postings: the
    postings are
    first compared by count and an order-independent digest, and only when those disagree are
    they diffed one by one (rendering every memory a second time) to name them.

    Args:
        txn: a read transaction.
        live: every live (not tombstoned) memory: its type, current version and data bytes.
        numbers: every head's row (4 bytes, big-endian) -> its id16.

    Returns:
        ``(problems, actual)``: ``(record, what is wrong)`` pairs and the statistics found.
    """
    problems: list[tuple[str, str]] = []
    add = problems.append
    want_df: Counter[str] = Counter()
    documents = total = postings = digest = 0
    rows = {mid: row for row, mid in numbers.items()}  # id16 -> row4
    named: dict[bytes, bytes] = {}  # docno4 -> id16 of the LexDoc naming it
    for mid, terms in _analyzed(live):
        tfs = Counter(terms)
        length = len(terms)
        documents += 1
        total += length
        postings += len(tfs)
        want_df.update(tfs.keys())
        raw = mid.bytes
        for term, tf in tfs.items():
            digest += hash((term, raw, tf, length))
        want = (live[mid][1], length)
        row = rows.get(raw)
        if row is None:
            continue  # no head has the id: verify reports it
        key = LEX_DOC + row
        value = txn.get(key)
        if value is None:
            add((show_key(key), "missing for a live memory"))
            continue
        try:
            doc: LexDoc = DOC_CODEC.decode(unseal(key, value), show_key(key))
        except (IntegrityError, CodecError) as exc:
            add((show_key(key), str(exc)))
            continue
        if (doc.version, doc.length) != want:
            add(
                (
                    show_key(key),
                    f"holds version {doc.version} and length {doc.length}, "
                    f"where the memory implies version {want[0]}, length {want[1]}",
                )
            )
        number = doc.docno.to_bytes(4, "big")
        if number != row:
            add((show_key(key), f"holds document number {doc.docno}, not its memory's row"))
        named[number] = raw
    for key in txn.keys(LEX_DOC):
        try:
            parse_lex_doc_key(key)
        except CodecError as exc:
            add((key.hex(), str(exc)))
            continue
        owner = numbers.get(key[len(LEX_DOC) :])
        if owner is None or MemoryId(owner) not in live:
            add((show_key(key), "indexes a memory that is missing or tombstoned"))
    want_stats = LexStats(
        documents=documents,
        total_length=total,
        terms=len(want_df),
        postings=postings,
        next_docno=0,  # not implied by the live memories: checked on its own below
    )
    ov, seg_problems = _check_segments(txn)
    problems += seg_problems
    main_df: Counter[str] = Counter()
    postings_ok = _posting_digest(txn, ov, main_df, numbers) == (postings, digest & _MASK64)
    if not postings_ok:
        problems.extend(_posting_problems(txn, live, ov, numbers))
    # lex/t/ counts the main blocks' postings; with the segments' change, the live memories'
    for term, d in ov.df_delta.items():
        want_df[term] -= d
    for key, value in txn.scan(LEX_TERM):
        name = show_key(key)
        try:
            term = parse_lex_term_key(key)
            df = _df(key, value)
        except (IntegrityError, CodecError) as exc:
            add((name, str(exc)))
            continue
        expected_df = want_df.pop(term, 0)
        if df != expected_df:
            add((name, f"document frequency {df}, expected {expected_df}"))
        elif postings_ok and df != main_df.get(term, 0):
            add((name, f"document frequency {df}, the blocks hold {main_df.get(term, 0)}"))
    for term in sorted(want_df, key=lambda t: t.encode("utf-8")):
        if want_df[term] > 0:
            add((f"lex/t/{term}", "missing"))
        elif want_df[term] < 0:
            add((f"lex/t/{term}", "the segments remove more postings than the blocks hold"))
    try:
        stats = read_stats(txn)
    except IntegrityError as exc:
        add(("meta/lexical", str(exc)))
        stats = LexStats(next_docno=0)
    else:
        # the next document number (row) is not implied by the live memories: it is past
        # every row given out (every head's, at least)
        highest = max((int.from_bytes(n, "big") for n in (*numbers, *named)), default=-1)
        if stats.next_docno <= highest:
            add(
                (
                    "meta/lexical",
                    f"next document number {stats.next_docno}, but {highest} is given out",
                )
            )
        want_stats = msgspec.structs.replace(want_stats, next_docno=stats.next_docno)
        if stats != want_stats:
            add(("meta/lexical", f"holds {stats}, the live memories imply {want_stats}"))
    return problems, stats


_MASK64: Final = (1 << 64) - 1


def row_ids(txn: ReadTxn) -> dict[bytes, bytes]:
    """Every head's row (4 bytes) -> its id16 (format 21); a damaged head is left out."""
    out: dict[bytes, bytes] = {}
    for key, value in txn.scan(HEAD_PREFIX):
        if len(key) != len(HEAD_PREFIX) + 4:
            continue
        try:
            head = _decode(HEAD, key, value)
        except IntegrityError:
            continue
        out[key[len(HEAD_PREFIX) :]] = head.id.bytes
    return out


def _analyzed(
    live: dict[MemoryId, tuple[MemoryType, int, bytes]],
) -> Iterable[tuple[MemoryId, list[str]]]:
    for mid, (mtype, _, data) in live.items():
        try:
            yield mid, analyze(decode_data_trusted(mtype, data), is_canonical=True)
        except CodecError:
            continue  # the store's own checks report undecodable data


def _blocks(
    txn: ReadTxn,
) -> Iterator[tuple[bytes, str | None, list[tuple[bytes, int, int]] | str]]:
    """Every posting block: ``(key, term, postings)``, or ``(key, term, what is wrong)``.

    Postings are ``(docno4, tf, length)``. Checks each block (``block_entries``) and the order
    of the blocks of a term: each begins after the previous one's last posting. ``term`` is
    None when the key is malformed.
    """
    last_term: str | None = None
    last_id = -1
    for key, value in txn.scan(LEX_POSTING):
        try:
            term = parse_posting_key(key)[0]
        except CodecError as exc:
            yield key, None, str(exc)
            continue
        try:
            entries = block_entries(key, value)
        except IntegrityError as exc:
            yield key, term, str(exc)
            continue
        if term == last_term and entries[0][0] <= last_id:
            yield key, term, "overlaps the block before it"
            continue
        last_term, last_id = term, entries[-1][0]
        yield key, term, [(d.to_bytes(4, "big"), tf, dl) for d, tf, dl in entries]


def _check_segments(txn: ReadTxn) -> tuple[_segments.Overlay, list[tuple[str, str]]]:
    """The segments combined, checked against each other and the main blocks (``lexical.md`` §7).

    A damaged segment is reported and left out of the combination.
    """
    problems: list[tuple[str, str]] = []
    good: list[tuple[bytes, _segments.Groups]] = []
    for key, value in txn.scan(LEX_SEGMENT):
        try:
            good.append((key, _segments.decode_value(key, value)))
        except IntegrityError as exc:
            problems.append((show_key(key) if len(key) == 14 else key.hex(), str(exc)))
    seqs = [int.from_bytes(k[len(LEX_SEGMENT) :], "big") for k, _ in good]
    for i, seq in enumerate(seqs):
        if seq != i:  # 0, 1, 2, ...: each segment the next after the last, none since a fold
            problems.append((f"lex/s/{seq}", f"sequence number {seq} where {i} belongs"))
            break
    ov = _segments.Overlay(good)
    try:
        ov.state  # noqa: B018 - combines every term, checking each entry against the older ones
    except IntegrityError as exc:
        problems.append(("lex/s/", str(exc)))
        return _segments.overlay_empty(), problems
    for term, st in ov.state.items():
        prefix = posting_prefix(term)
        for raw, (_, in_main) in st.items():
            try:
                held = find(txn, prefix, raw) is not None
            except IntegrityError:
                continue  # the damaged block is reported with the blocks
            if held != in_main:
                problems.append(
                    (
                        f"lex/s/{term}/{int.from_bytes(raw, 'big')}",
                        "a segment adds a posting the blocks hold"
                        if not in_main
                        else "a segment changes or removes a posting the blocks do not hold",
                    )
                )
    return ov, problems


def _combined(
    txn: ReadTxn, ov: _segments.Overlay
) -> Iterator[tuple[bytes, str | None, list[tuple[bytes, int, int]] | str]]:
    """``_blocks`` with the segments applied.

    Each block comes with the postings the segments leave of it, then (as a key-less group per
    term, ``b""``) come the postings only the segments hold.
    """
    for key, term, entries in _blocks(txn):
        if term is not None and not isinstance(entries, str) and term in ov.state:
            st = ov.state[term]
            yield (
                key,
                term,
                [
                    (raw, tf, length) if raw not in st else (raw, *_tail_of(st[raw][0]))
                    for raw, tf, length in entries
                    if raw not in st or st[raw][0] is not None
                ],
            )
        else:
            yield key, term, entries
    for term, st in ov.state.items():
        extra = [
            (raw, *_tail_of(tail))
            for raw, (tail, in_main) in sorted(st.items())
            if tail is not None and not in_main
        ]
        if extra:
            yield b"", term, extra


def _tail_of(tail: bytes | None) -> tuple[int, int]:
    assert tail is not None
    return int.from_bytes(tail[:4], "big"), int.from_bytes(tail[4:], "big")


def _posting_digest(
    txn: ReadTxn, ov: _segments.Overlay, main_df: Counter[str], numbers: dict[bytes, bytes]
) -> tuple[int, int] | None:
    """``(count, digest)`` of the postings with the segments', or ``None`` if a block is bad.

    Each posting counts under the memory its number names (``numbers``: docno4 -> id16);
    a number naming none counts under itself, so the digest cannot match. Counts each term's
    postings in the main blocks into ``main_df``.
    """
    count = digest = 0
    for _, term, entries in _blocks(txn):
        if isinstance(entries, str):
            return None
        main_df[term] += len(entries)  # type: ignore[index]
    get = numbers.get
    for _, term, entries in _combined(txn, ov):
        if isinstance(entries, str):  # pragma: no cover - caught above
            return None
        count += len(entries)
        for raw, tf, length in entries:
            digest += hash((term, get(raw, raw), tf, length))
    return count, digest & _MASK64


def _posting_problems(
    txn: ReadTxn,
    live: dict[MemoryId, tuple[MemoryType, int, bytes]],
    ov: _segments.Overlay,
    numbers: dict[bytes, bytes],
) -> list[tuple[str, str]]:
    """Every damaged block, and every posting missing, extra or wrong (the slow, exact diff).

    A posting is named ``lex/p/<term>/<id>`` (``lex/p/<term>/#<docno>`` when its number names
    no memory).
    """
    problems: list[tuple[str, str]] = []
    add = problems.append
    want: dict[tuple[str, bytes], tuple[int, int]] = {}
    for mid, terms in _analyzed(live):
        tfs = Counter(terms)
        for term, tf in tfs.items():
            want[term, mid.bytes] = (tf, len(terms))
    damaged: set[str] = set()
    rows = list(_combined(txn, ov))
    for key, block_term, entries in rows:
        if block_term is None or isinstance(entries, str):
            add((show_key(key) if block_term is not None else key.hex(), str(entries)))
            if block_term is not None:
                damaged.add(block_term)  # its postings are not named again one by one
    for _, block_term, entries in rows:
        if block_term is None or isinstance(entries, str):
            continue
        for raw, tf, length in entries:
            named = numbers.get(raw)
            if named is None:
                add(
                    (
                        f"lex/p/{block_term}/#{int.from_bytes(raw, 'big')}",
                        "posting of a document number that names no memory",
                    )
                )
                continue
            name = f"lex/p/{block_term}/{MemoryId(named)}"
            expected = want.pop((block_term, named), None)
            if expected is None:
                add((name, "posting of no live memory or of a term it does not hold"))
            elif (tf, length) != expected:
                add(
                    (
                        name,
                        f"holds tf={tf} length={length}, expected tf={expected[0]} "
                        f"length={expected[1]}",
                    )
                )
    for term, gone in sorted(want, key=lambda k: (k[0].encode("utf-8"), k[1])):
        if term not in damaged:
            add((f"lex/p/{term}/{MemoryId(gone)}", "posting missing"))
    return problems


def logical(txn: ReadTxn) -> dict[str, Any]:
    """The index as the live memories imply it, whatever the document numbers (format 14).

    Two stores indexing the same memories give equal results even when their numbers differ
    (they follow the order of the writes): ``postings`` maps ``(term, id16)`` to ``(tf, dl)``
    in the combined index (§4b), ``df`` each term to its combined frequency, ``docs`` each
    ``lex/d/`` id16 to ``(version, length)``, ``stats`` ``meta/lexical`` without its
    next document number. For tests and tools comparing stores; reads everything.

    Raises:
        IntegrityError: a record is damaged.
    """
    numbers = row_ids(txn)
    ov = _segments.overlay(txn)
    postings: dict[tuple[str, bytes], tuple[int, int]] = {}
    for _, term, entries in _combined(txn, ov):
        if term is None or isinstance(entries, str):
            raise IntegrityError(f"a damaged posting block of {term!r}: {entries}")
        for raw, tf, dl in entries:
            postings[term, numbers.get(raw, raw)] = (tf, dl)
    df: Counter[str] = Counter()
    for key, value in txn.scan(LEX_TERM):
        df[parse_lex_term_key(key)] += _df(key, value)
    for term, d in ov.df_delta.items():
        df[term] += d
    docs = {}
    for key, value in txn.scan(LEX_DOC):
        doc: LexDoc = _decode(DOC_CODEC, key, value)
        row = key[len(LEX_DOC) :]
        docs[numbers.get(row, row)] = (doc.version, doc.length)
    stats = msgspec.structs.replace(read_stats(txn), next_docno=0)
    return {
        "postings": postings,
        "df": {t: n for t, n in df.items() if n},
        "docs": docs,
        "stats": stats,
    }


def prefetch_new(
    txn: WriteTxn, docs: Iterable[tuple[MemoryId, Sequence[str]]], new: Sequence[bytes] = ()
) -> None:
    """Name what ``Indexer.flush`` will read for new documents, before the write's first read.

    ``new``: keys the write will put expecting them absent (the new memories' ``id/``
    records), named to the engine's ``expect_new`` so that they cost no round trip of their own.

    On an engine with round trips (PostgreSQL: ``prefetch``, ``prefetch_around(now=False)``)
    the terms' counts, the segments and, for a commit too large for a segment, the postings
    around each new id then travel with the transaction's first round trip instead of one of
    their own; LMDB has neither and reads as it goes. The pairs are those
    ``postings.apply_many`` asks for: a term's prefix and its smallest new id.
    """
    around = getattr(txn, "prefetch_around", None)
    prefetch = getattr(txn, "prefetch", None)
    if around is None or prefetch is None:
        return
    expect = getattr(txn, "expect_new", None)
    if new and expect is not None:
        expect(new)
    first: dict[str, bytes] = {}
    postings = 0
    last = b"\xff\xff\xff\xff"  # new document numbers follow every other: the last block
    for _, terms in docs:
        distinct = set(terms)
        postings += len(distinct)
        for t in distinct:
            first[t] = last
    if not first:
        return
    prefetch([lex_term_key(t) for t in first])
    scan = getattr(txn, "prefetch_scan", None)
    if scan is not None:  # the segments, read by every flush
        scan([LEX_SEGMENT], SEGMENT_MAX)
    if postings > SEGMENT_POSTINGS:  # folds for sure: the blocks around the new ids
        around([(posting_prefix(t), posting_prefix(t) + b) for t, b in first.items()], now=False)
    # else most likely a segment, which reads no block; a fold (one write in SEGMENT_MAX)
    # reads them in one round trip of its own (postings.apply_many)


def containing(
    txn: ReadTxn,
    groups: Sequence[Sequence[str]],
    *,
    rows: RowsReader | None = None,
    found: dict[bytes, tuple[Any, Any]] | None = None,
    most: int | None = None,
) -> list[MemoryId] | None:
    """Live memories whose indexed terms hold, for each group, one of the group's terms.

    In document-number order (write order). The group the fewest postings name is read first;
    each other group is then probed for those documents (a posting lookup each) where they are
    fewer than its postings, else read and intersected. ``rows`` and ``found`` as in ``search``.
    None, without reading the memories, where there are more than ``most``.

    Raises:
        IntegrityError: an index record is damaged.
    """
    if not groups:
        return []
    ov = _segments.overlay(txn)
    by_df = sorted(
        ((sum(_combined_df(txn, t, ov) for t in set(g)), sorted(set(g))) for g in groups),
        key=itemgetter(0),
    )
    if most is not None and len(by_df) == 1 and by_df[0][0] > most:
        return None  # one group: its postings' count bounds the memories from above
    docs: set[bytes] = set()
    for i, (df, group) in enumerate(by_df):
        if i == 0:
            docs = {raw for t in group for raw, _ in _entries(txn, t, ov)}
        elif len(docs) * len(group) < df:
            docs = {r for r in docs if any(_find(txn, t, r, ov) is not None for t in group)}
        else:
            docs &= {raw for t in group for raw, _ in _entries(txn, t, ov)}
        if not docs:
            return []
    if most is not None and len(docs) > most:
        return None
    return _ids_of(txn, sorted(docs), rows, found)


def documents(txn: ReadTxn) -> int:
    """How many live memories the index holds (its statistics' count)."""
    return read_stats(txn).documents


def same_terms(txn: ReadTxn, terms: Sequence[str]) -> list[MemoryId]:
    """Live memories indexed with exactly these terms (the candidates of an exact duplicate).

    Reads only the posting list of the rarest term, keeping the documents of the same length
    and the same count of that term; an exact duplicate is always among them.
    """
    if not terms:
        return []
    counts: dict[str, int] = {}
    for t in terms:
        counts[t] = counts.get(t, 0) + 1
    prefetch = getattr(txn, "prefetch", None)
    if prefetch is not None:  # an engine with round trips reads them all in one
        prefetch([lex_term_key(t) for t in counts])
        scan = getattr(txn, "prefetch_scan", None)
        if scan is not None:
            scan([LEX_SEGMENT], SEGMENT_MAX)
    ov = _segments.overlay(txn)
    rarest: tuple[int, str] | None = None
    for t in counts:
        # the rarest by the main blocks' count is as good as any (a duplicate holds every
        # term); combined only when the segments could make it 0
        df = _main_df(txn, t)
        if df <= ov.postings:
            df = _combined_df(txn, t, ov, df)
        if df == 0:
            return []  # a term no live memory holds: nothing is the same
        if rarest is None or df < rarest[0]:
            rarest = (df, t)
    assert rarest is not None
    term = rarest[1]
    want = entry_tail(counts[term], len(terms))
    same = [raw for raw, tail in _entries(txn, term, ov) if tail == want]
    return _ids_of(txn, same)
