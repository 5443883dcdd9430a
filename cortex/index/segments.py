"""Posting segments: a small commit's lexical changes in one key (``lexical.md`` §4b).

Format 10; entries by document number since format 14.

A write transaction that changes few postings does not rewrite each term's posting block and
``lex/t/`` entry: it stores its changes as one **segment** under ``lex/s/`` seq (u64, the next
after the last segment). A segment lists, sorted by (term bytes, id), entries of three kinds:
``ADD`` (a posting where the index below held none), ``SET`` (a posting replacing the one below:
an update that keeps the term) and ``DEL`` (the posting below goes). "Below" is the main blocks
combined with every older segment. Readers combine them (``Overlay``); a larger commit folds
every segment into the main blocks (``lexical.Indexer``).

Payload (sealed like every value)::

    count u32                      the number of entries in all groups
    group+                         terms strictly ascending by their UTF-8 bytes
      term_len u16, term bytes     1..256 bytes, valid UTF-8, no 0x00
      n u32                        entries of the term (>= 1)
      entry{n}                     docnos strictly ascending
        kind u8, docno u32         1 ADD, 2 SET, 3 DEL
        tf u32, dl u32             ADD and SET only: 1 <= tf <= dl < 2**32

All integers big-endian. One encoding per content: anything else is refused on decoding.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import Any, Final

from cortex.errors import IntegrityError
from cortex.storage.keys import LEX_SEGMENT, lex_segment_key, parse_lex_segment_key, show_key
from cortex.storage.kv import ReadTxn, unseal

try:
    from cortex import _speedups as _sp
except ImportError:  # pragma: no cover - installed without a C compiler
    _sp = None  # type: ignore[assignment]

_USE_SPEEDUPS: bool = _sp is not None and all(
    hasattr(_sp, name) for name in ("segment_fresh", "segments_folded")
)
"""Encode a segment of new postings, and combine the segments for a fold, in C
(``cortex._speedups``) when it is built; tests switch this off to compare with the Python
paths."""
_HAS_ADDED: bool = _sp is not None and hasattr(_sp, "segments_added")
"""``Overlay.added`` in C (an extension built before it lacks it: then the Python path)."""
_HAS_DECODE: bool = _sp is not None and hasattr(_sp, "segment_decode")
"""``decode`` in C (an extension built before it lacks it: then the Python path)."""

__all__ = [
    "ADD",
    "DEL",
    "SET",
    "Overlay",
    "Segment",
    "decode",
    "encode",
    "encode_fresh",
    "encode_groups",
    "overlay",
    "overlay_empty",
    "remember",
]

ADD: Final = 1
"""A posting where the index below holds none for the (term, id)."""
SET: Final = 2
"""A posting replacing the one the index below holds for the (term, id)."""
DEL: Final = 3
"""The removal of the posting the index below holds for the (term, id)."""

_U16: Final = struct.Struct(">H")
_U32: Final = struct.Struct(">I")
_TAIL: Final = struct.Struct(">II")
_ADD_BYTE: Final = bytes((ADD,))
_KIND_DF: Final = (0, 1, 0, -1)  # an entry's document frequency change, by its kind

# (kind, docno4, tail8 or None) per term, terms in byte order
Groups = list[tuple[str, list[tuple[int, bytes, bytes | None]]]]


class Segment(dict[str, list[tuple[int, bytes, bytes | None]]]):
    """A decoded segment: term -> its entries, terms in byte order, with ``count`` entries."""

    __slots__ = ("count",)

    def __init__(self, groups: Iterable[tuple[str, list[tuple[int, bytes, bytes | None]]]]) -> None:
        super().__init__(groups)
        self.count = sum(map(len, self.values()))


_new_dict: Final = dict.__new__


def _segment(groups: Groups) -> Segment:
    """``Segment(groups)`` without running a Python ``__init__`` (a write's segment, each write)."""
    segment: Segment = _new_dict(Segment)
    segment.update(groups)
    segment.count = sum(map(len, segment.values()))
    return segment


class SegmentError(ValueError):
    """A segment payload that is not canonical (``decode``)."""


def encode(groups: Mapping[str, Mapping[bytes, tuple[int, bytes | None]]]) -> bytes:
    """The canonical payload of a segment: term -> {docno4: (kind, tail8 or None for DEL)}.

    Raises:
        ValueError: an entry is malformed (a kind, an id, a tail, an empty group).
    """
    return encode_groups(groups)[0]


def encode_groups(
    groups: Mapping[str, Mapping[bytes, tuple[int, bytes | None]]],
) -> tuple[bytes, Groups]:
    """``encode``, with the groups ``decode`` gives for the payload.

    Raises:
        ValueError: an entry is malformed (a kind, an id, a tail, an empty group).
    """
    out = bytearray(4)
    count = 0
    decoded: Groups = []
    for term in sorted(groups, key=lambda t: t.encode("utf-8")):
        entries = groups[term]
        tb = term.encode("utf-8")
        if not entries or not 1 <= len(tb) <= 256 or b"\x00" in tb:
            raise ValueError(f"bad segment group {term!r}")
        out += _U16.pack(len(tb))
        out += tb
        out += _U32.pack(len(entries))
        listed: list[tuple[int, bytes, bytes | None]] = []
        for raw in sorted(entries):
            kind, tail = entries[raw]
            if len(raw) != 4 or kind not in (ADD, SET, DEL) or (tail is None) != (kind == DEL):
                raise ValueError(f"bad segment entry {kind} {raw!r} {tail!r}")
            out.append(kind)
            out += raw
            if tail is not None:
                tf, dl = _TAIL.unpack(tail)
                if not 1 <= tf <= dl:
                    raise ValueError(f"bad posting tf={tf} dl={dl}")
                out += tail
            listed.append((kind, bytes(raw), None if tail is None else bytes(tail)))
            count += 1
        decoded.append((term, listed))
    if not count:
        raise ValueError("an empty segment")
    out[0:4] = _U32.pack(count)
    return bytes(out), decoded


def encode_fresh(fresh: Mapping[str, bytes | bytearray]) -> tuple[bytes, Groups]:
    """``encode_groups`` of new postings only: term -> docno4 + tail8 records, every one an ADD.

    The records of a term are in any order (``lexical.Indexer`` holds a new memory's postings
    so); the payload is the same canonical one ``encode`` gives for them.

    Raises:
        ValueError: a record is cut or malformed, an id repeats, a term is not allowed.
    """
    if _USE_SPEEDUPS:
        fast: tuple[bytes, Groups] | None = _sp.segment_fresh(fresh)
        if fast is not None:
            return fast
    parts: list[bytes] = [b""]
    count = 0
    decoded: Groups = []
    pack16, pack32, tail_of = _U16.pack, _U32.pack, _TAIL.unpack
    for tb, term in sorted((t.encode("utf-8"), t) for t in fresh):
        records = bytes(fresh[term])
        n, cut = divmod(len(records), 12)
        if not n or cut or not 1 <= len(tb) <= 256 or b"\x00" in tb:
            raise ValueError(f"bad segment group {term!r}")
        parts += (pack16(len(tb)), tb, pack32(n))
        if n == 1:
            rows = [(records[:4], records[4:])]
        else:
            rows = sorted(
                (records[i : i + 4], records[i + 4 : i + 12]) for i in range(0, n * 12, 12)
            )
        listed: list[tuple[int, bytes, bytes | None]] = []
        last = b""
        for raw, tail in rows:
            tf, dl = tail_of(tail)
            if raw <= last or not 1 <= tf <= dl:
                raise ValueError(f"bad segment entry {raw!r} {tail!r}")
            last = raw
            parts += (_ADD_BYTE, raw, tail)
            listed.append((ADD, raw, tail))
        count += n
        decoded.append((term, listed))
    if not count:
        raise ValueError("an empty segment")
    parts[0] = pack32(count)
    return b"".join(parts), decoded


def decode(payload: bytes) -> Groups:
    """The groups of a canonical segment payload.

    Raises:
        SegmentError: the payload is not the canonical encoding of a segment.
    """
    if _USE_SPEEDUPS and _HAS_DECODE:
        fast: Groups | None = _sp.segment_decode(payload)
        if fast is not None:  # else the loop below says what is wrong
            return fast
    n = len(payload)
    if n < 4:
        raise SegmentError("shorter than its count")
    (count,) = _U32.unpack_from(payload, 0)
    i = 4
    seen = 0
    groups: Groups = []
    last_term = b""
    while i < n:
        if i + 2 > n:
            raise SegmentError("a group header is cut")
        (tlen,) = _U16.unpack_from(payload, i)
        i += 2
        tb = payload[i : i + tlen]
        i += tlen
        if not 1 <= tlen <= 256 or len(tb) != tlen or b"\x00" in tb:
            raise SegmentError("a term is empty, cut, too long or holds 0x00")
        if groups and tb <= last_term:
            raise SegmentError("terms out of order or repeated")
        try:
            term = tb.decode("utf-8")
        except UnicodeDecodeError:
            raise SegmentError("a term is not UTF-8") from None
        last_term = tb
        if i + 4 > n:
            raise SegmentError("a group count is cut")
        (k,) = _U32.unpack_from(payload, i)
        i += 4
        if k < 1:
            raise SegmentError("an empty group")
        entries: list[tuple[int, bytes, bytes | None]] = []
        last_id = b""
        for _ in range(k):
            if i + 5 > n:
                raise SegmentError("an entry is cut")
            kind = payload[i]
            raw = payload[i + 1 : i + 5]
            i += 5
            if kind not in (ADD, SET, DEL):
                raise SegmentError(f"unknown entry kind {kind}")
            if entries and raw <= last_id:
                raise SegmentError("docnos out of order or repeated")
            last_id = raw
            tail: bytes | None = None
            if kind != DEL:
                if i + 8 > n:
                    raise SegmentError("a posting is cut")
                tail = payload[i : i + 8]
                i += 8
                tf, dl = _TAIL.unpack(tail)
                if not 1 <= tf <= dl:
                    raise SegmentError(f"a posting with tf={tf}, dl={dl}")
            entries.append((kind, raw, tail))
        seen += k
        groups.append((term, entries))
    if not groups:
        raise SegmentError("an empty segment")
    if seen != count:
        raise SegmentError(f"count {count} for {seen} entries")
    return groups


def decode_value(key: bytes, value: bytes) -> Groups:
    """A stored segment's groups, checked (checksum, key, canonical payload).

    Raises:
        IntegrityError: the segment is damaged (naming its key).
    """
    try:
        parse_lex_segment_key(key)
    except ValueError as exc:
        raise IntegrityError(f"record {key.hex()} is not a segment key: {exc}") from None
    try:
        return decode(unseal(key, value))
    except SegmentError as exc:
        raise IntegrityError(f"record {show_key(key)} is not a posting segment: {exc}") from None


class Overlay:
    """Every segment of a snapshot, combined oldest to newest, term by term when asked.

    ``term``, ``delta`` and ``items`` combine one term's entries (what a search or a small
    write needs: a lookup per segment, nothing read for the other terms); ``state`` and
    ``df_delta`` combine every term (a fold, ``verify``).

    Attributes:
        keys: the segment keys, ascending.
        postings: entries in all segments.
        next_key: the key of the next segment.
    """

    __slots__ = (
        "_by_term",
        "_df",
        "_dfs",
        "_full",
        "_segs",
        "_sorted",
        "_states",
        "keys",
        "next_key",
        "postings",
    )

    def __init__(self, segments: Iterable[tuple[bytes, Groups | Segment]]) -> None:
        self.keys: list[bytes] = []
        self.postings = 0
        # (segment key, term -> its entries of the term), oldest first
        self._segs: list[tuple[bytes, Mapping[str, list[tuple[int, bytes, bytes | None]]]]] = []
        # term -> [(segment key, its entries of the term)], oldest first: built when asked
        self._by_term: dict[str, list[tuple[bytes, list[tuple[int, bytes, bytes | None]]]]] = {}
        self._states: dict[str, dict[bytes, tuple[bytes | None, bool]]] = {}
        self._df: dict[str, int] = {}
        self._sorted: dict[str, list[tuple[bytes, bytes | None]]] = {}
        self._full = False
        # every term's document frequency change, kept from the overlay a write extended
        # (``extended``): None when this overlay was built from stored segments
        self._dfs: dict[str, int] | None = None
        for key, groups in segments:  # each key was checked when its segment was decoded
            self.keys.append(key)
            by_term = groups if isinstance(groups, Segment) else Segment(groups)
            self._segs.append((key, by_term))
            self.postings += by_term.count
        last = parse_lex_segment_key(self.keys[-1]) if self.keys else -1
        self.next_key = lex_segment_key(last + 1)

    def __bool__(self) -> bool:
        return bool(self.keys)

    def extended(
        self, key: bytes, segment: Segment, dfs: Mapping[str, int] | None = None
    ) -> Overlay:
        """This overlay with ``segment`` (stored under ``key``, after every other) on top.

        Nothing combined is carried over: a term is combined again when asked (copying what
        every earlier overlay was asked would cost more than combining a write's few terms).
        ``dfs``: the segment's document frequency change by term (ADDs less DELs; the writer
        counted them), which, on the counts this overlay kept, gives ``df_change`` without
        combining.
        """
        out = Overlay.__new__(Overlay)  # every slot set here: nothing of ``__init__`` to redo
        out.keys = [*self.keys, key]
        out.postings = self.postings + segment.count
        out._segs = [*self._segs, (key, segment)]
        out._by_term, out._states, out._df, out._sorted, out._full = {}, {}, {}, {}, False
        out.next_key = lex_segment_key(parse_lex_segment_key(key) + 1)
        base = {} if not self._segs else self._dfs
        out._dfs = None
        if base is not None and dfs is not None:
            if base:
                counts = base.copy()
                get = counts.get
                for term, d in dfs.items():
                    counts[term] = get(term, 0) + d
            else:
                counts = dict(dfs)
            out._dfs = counts
        return out

    def df_changes(self) -> Mapping[str, int] | None:
        """Every term's ``delta`` as kept when a write extended this overlay, or None.

        A term no segment names is absent. None: no counts were kept (an overlay built from
        the stored segments).
        """
        return self._dfs

    def df_change(self, term: str) -> int:
        """``delta``, from the counts kept when a write extended this overlay, else combined.

        The kept counts need no combining of the term's entries (nor check them against the
        older segments': ``term``, a search or a fold does).
        """
        dfs = self._dfs  # set before the overlay is shared, never changed
        if dfs is None:
            return self.delta(term)
        return dfs.get(term, 0)

    def __contains__(self, term: str) -> bool:
        return bool(self._parts(term))

    def _parts(self, term: str) -> list[tuple[bytes, list[tuple[int, bytes, bytes | None]]]]:
        """The segments' entries of ``term``, oldest first (empty when none names it)."""
        if not self._segs:
            return []  # nothing to remember (the empty overlay is shared by every snapshot)
        got = self._by_term.get(term)
        if got is None:
            got = self._by_term[term] = [(k, d[term]) for k, d in self._segs if term in d]
        return got

    def term(self, term: str) -> dict[bytes, tuple[bytes | None, bool]] | None:
        """A term's combined entries, or None when no segment names the term.

        docno4 -> (its tail, or None when removed; whether the main blocks hold it).

        Raises:
            IntegrityError: an entry contradicts an older segment's.
        """
        st = self._states.get(term)
        if st is not None:
            return st
        parts = self._parts(term)
        if not parts:
            return None
        st = {}
        d = 0
        for key, entries in parts:
            d += _combine(st, term, key, entries)
        self._df[term] = d  # first: a thread that finds the state (``delta``) finds its count
        self._states[term] = st
        return st

    def delta(self, term: str) -> int:
        """A term's document frequency minus the main blocks' (``lex/t/``)."""
        if term not in self._df and self.term(term) is None:
            return 0
        return self._df[term]

    def items(self, term: str) -> list[tuple[bytes, bytes | None]]:
        """``(docno4, tail or None)`` of a term's combined segment entries, in id order."""
        got = self._sorted.get(term)
        if got is None:
            st = self.term(term)
            if st is None:
                return []  # not cached: the term is in no segment
            got = self._sorted[term] = [(raw, st[raw][0]) for raw in sorted(st)]
        return got

    def _all(self) -> None:
        """Combine every term, in one pass over the segments (``term`` for each, at once)."""
        if self._full:
            return
        states: dict[str, dict[bytes, tuple[bytes | None, bool]]] = {}
        dfs: dict[str, int] = {}
        for key, segment in self._segs:
            for term, entries in segment.items():
                st = states.get(term)
                if st is None:  # ids are unique within a segment: nothing to check yet
                    states[term] = {raw: (tail, kind != ADD) for kind, raw, tail in entries}
                    dfs[term] = sum([_KIND_DF[e[0]] for e in entries])
                    continue
                dfs[term] += _combine(st, term, key, entries)
        # a term another thread combined meanwhile keeps its (equal) state; each count goes
        # in before its state, as ``term`` does
        have_df, have_state = self._df, self._states
        for term, st in states.items():
            if term not in have_state:
                have_df[term] = dfs[term]
                have_state.setdefault(term, st)
        self._full = True

    def folded(self) -> dict[str, tuple[dict[bytes, bytes | None], int, set[bytes] | None]]:
        """Every term's combined entries as a fold takes them, in one pass over the segments.

        term -> (docno4 -> its final tail, or None when removed; the term's document frequency
        change; the ids whose posting the main blocks hold, or None when there are none). An
        id added and removed again within the segments still has its None here. Nothing is
        kept (a fold runs once per overlay); the entries are checked as ``term`` checks them.

        Raises:
            IntegrityError: an entry contradicts an older segment's.
        """
        if _USE_SPEEDUPS:
            fast: dict[str, Any] | None = _sp.segments_folded([seg for _, seg in self._segs])
            if fast is not None:  # else the loop below says which entry contradicts
                return fast
        out: dict[str, list[Any]] = {}
        for key, segment in self._segs:
            for term, entries in segment.items():
                got = out.get(term)
                if got is None:  # ids are unique within a segment: nothing to check yet
                    if len(entries) == 1:  # (most terms of a small write)
                        kind, raw, tail = entries[0]
                        out[term] = [{raw: tail}, _KIND_DF[kind], None if kind == ADD else {raw}]
                        continue
                    d = sum([_KIND_DF[e[0]] for e in entries])
                    below = (
                        None
                        if d == len(entries)  # ADDs only: the main blocks hold none of them
                        else {raw for kind, raw, _ in entries if kind != ADD}
                    )
                    out[term] = [{raw: tail for _, raw, tail in entries}, d, below]
                    continue
                final, d, below = got
                for kind, raw, tail in entries:
                    if raw in final:
                        if (final[raw] is not None) == (kind == ADD):
                            raise IntegrityError(
                                f"segment {show_key(key)} "
                                f"{'adds' if kind == ADD else 'changes'} the posting of "
                                f"{term!r} in document {int.from_bytes(raw, 'big')}, which an "
                                f"older segment {'holds' if kind == ADD else 'removed'}: run "
                                "verify"
                            )
                    elif kind != ADD:  # the main blocks decide what is below
                        if below is None:
                            below = got[2] = set()
                        below.add(raw)
                    final[raw] = tail
                    d += _KIND_DF[kind]
                got[1] = d
        return {term: (final, d, below) for term, (final, d, below) in out.items()}

    def added(self) -> tuple[dict[str, bytearray], dict[str, int]] | None:
        """The segments' postings when each is an addition after its term's earlier ones.

        The common fold's segments (a run of writes of new memories): every entry an ADD, and
        each term's docnos ascending from segment to segment. Then ``(records, counts)``: term
        -> its postings as docno4 + tail8 records in docno order, and term -> how many (its
        document frequency change); ``folded`` combines them alike. None otherwise (a SET or
        DEL, a docno not after the term's earlier ones: ``folded`` then combines them, and
        names an entry that contradicts an older segment's).
        """
        if _USE_SPEEDUPS and _HAS_ADDED:
            return _sp.segments_added([seg for _, seg in self._segs])
        records: dict[str, bytearray] = {}
        for _, segment in self._segs:
            for term, entries in segment.items():
                out = records.get(term)
                if out is None:
                    out = records[term] = bytearray()
                for kind, raw, tail in entries:
                    if kind != ADD or tail is None or len(raw) != 4 or len(tail) != 8:
                        return None
                    if out[-12:-8] >= raw:  # (none before: b"" is below every docno)
                        return None
                    out += raw
                    out += tail
        return records, {term: len(out) // 12 for term, out in records.items()}

    @property
    def state(self) -> dict[str, dict[bytes, tuple[bytes | None, bool]]]:
        """Every term's combined entries (``term``)."""
        self._all()
        return self._states

    @property
    def df_delta(self) -> dict[str, int]:
        """Every term's document frequency change (``delta``), zero ones included."""
        self._all()
        return self._df


def _combine(
    st: dict[bytes, tuple[bytes | None, bool]],
    term: str,
    key: bytes,
    entries: list[tuple[int, bytes, bytes | None]],
) -> int:
    """Put the entries of ``term`` that the segment stored under ``key`` on top of ``st``.

    ``st`` is the term's combined entries of the older segments (``Overlay.term``). Returns
    the entries' document frequency change.

    Raises:
        IntegrityError: an entry contradicts an older segment's.
    """
    d = 0
    for kind, raw, tail in entries:
        prior = st.get(raw)
        if prior is None:  # the main blocks decide what is below
            in_main = kind != ADD
        else:
            in_main = prior[1]
            if (prior[0] is not None) == (kind == ADD):
                raise IntegrityError(
                    f"segment {show_key(key)} {'adds' if kind == ADD else 'changes'} "
                    f"the posting of {term!r} in document {int.from_bytes(raw, 'big')}, which an "
                    f"older segment {'holds' if kind == ADD else 'removed'}: run verify"
                )
        st[raw] = (tail, in_main)
        d += _KIND_DF[kind]
    return d


_EMPTY: Final = Overlay(())
# the last overlay built, by the (key, value) pairs it was built from: segments are immutable
# once written, and equal bytes decode alike, so a hit needs no checksum or decoding
_LAST: list[tuple[tuple[tuple[bytes, bytes], ...], Overlay]] = []
# decoded segments by key, with the value they came from
_DECODED: dict[bytes, tuple[bytes, Segment]] = {}
_DECODED_MAX: Final = 1024


def overlay(txn: ReadTxn) -> Overlay:
    """The combined segments of ``txn``'s snapshot (empty when there are none).

    Raises:
        IntegrityError: a segment is damaged, or contradicts an older one.
    """
    walk = getattr(txn, "pairs", None)  # LMDB's: the pairs in one walk
    pairs = walk(LEX_SEGMENT) if walk is not None else tuple(txn.scan(LEX_SEGMENT))
    if not pairs:
        return _EMPTY
    last = _LAST[0] if _LAST else None  # one read: another thread may replace it meanwhile
    if last is not None and last[0] == pairs:
        return last[1]
    segs = []
    for key, value in pairs:
        hit = _DECODED.get(key)
        if hit is not None and hit[0] == value:
            segs.append((key, hit[1]))
            continue
        groups = Segment(decode_value(key, value))
        if len(_DECODED) >= _DECODED_MAX:
            _DECODED.clear()
        _DECODED[key] = (value, groups)
        segs.append((key, groups))
    built = Overlay(segs)
    _LAST[:] = [(pairs, built)]
    return built


def remember(
    key: bytes, value: bytes, groups: Groups, on: Overlay, dfs: Mapping[str, int] | None = None
) -> None:
    """Keep the segment a write stores (``key``, its sealed ``value``) as decoded already.

    Its groups are those ``decode_value`` gives for the value (the writer encoded them), so
    the next overlay does not decode its own write. ``on`` is the overlay the write read; when
    it is ``overlay``'s last, the overlay with the segment on top is kept too: the next write's
    snapshot holds exactly those segments, and ``overlay`` hands it out without building it.
    A write that does not commit leaves harmless entries: a hit needs the same keys and the
    same bytes. ``dfs``: the segment's document frequency change by term (``extended``).
    """
    if len(_DECODED) >= _DECODED_MAX:
        _DECODED.clear()
    segment = _segment(groups)
    _DECODED[key] = (value, segment)
    last = _LAST[0] if _LAST else None  # one read: another thread may replace it meanwhile
    if on is _EMPTY:
        pairs: tuple[tuple[bytes, bytes], ...] = ()
    elif last is not None and last[1] is on:
        pairs = last[0]
    else:
        return
    _LAST[:] = [((*pairs, (key, value)), on.extended(key, segment, dfs))]


def overlay_empty() -> Overlay:
    """The overlay of a snapshot without segments."""
    return _EMPTY
