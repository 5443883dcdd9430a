"""Posting blocks: the postings of one term, in document number order (``lexical.md`` §4a).

Every memory in the lexical index has a **document number** (docno, ``lexical.md`` §4), given
in write order and kept for the memory's life. A term's postings are kept in blocks of at most
``BLOCK_MAX``, in ascending docno order. A block's key is the term's posting prefix and the
docno of its first posting (``lex/p/`` term ``0x00`` u32be); its sealed payload holds its
postings as varints (``block_encode``): the first ``tf``, ``dl``; each next ``delta``, ``tf``,
``dl``, where ``delta`` is its docno less the previous posting's (>= 1).

Inside the process a posting is a 12-byte record: the docno (u32 big-endian, so that bytes sort
as numbers) and its *tail*, ``tf`` and ``dl`` (u32 big-endian each). The writer's changes are
keyed by the 4 docno bytes. New memories take numbers past every other, so their postings
append to the last block of each term: ingest never rewrites the middle of a list.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import Final

from cortex.errors import IntegrityError
from cortex.storage.keys import posting_prefix, show_key
from cortex.storage.kv import ReadTxn, WriteTxn, seal, unseal

try:
    from cortex import _speedups as _sp
except ImportError:  # pragma: no cover - installed without a C compiler
    _sp = None  # type: ignore[assignment]

_USE_SPEEDUPS: bool = _sp is not None and all(
    hasattr(_sp, name) for name in ("block_encode", "block_decode", "append_fresh")
)
"""Encode, decode and append to posting blocks in C (``cortex._speedups``) when it is built;
tests switch this off to compare with the Python paths."""

__all__ = [
    "BLOCK_MAX",
    "DOCNO_LIMIT",
    "ENTRY",
    "apply",
    "apply_many",
    "block_encode",
    "block_entries",
    "block_records",
    "cut_runs",
    "decode_varint",
    "encode_varint",
    "entry_tail",
    "find",
    "fresh_changes",
    "term_entries",
]

ENTRY: Final = 12
"""Bytes per posting record in the process: docno (u32 BE), tf (u32 BE), length (u32 BE)."""
BLOCK_MAX: Final = 128
"""Postings per block at most."""
DOCNO_LIMIT: Final = 1 << 32
"""Document numbers are below this (u32): the index refuses to number more memories."""
_U32: Final = 1 << 32
_LAST: Final = b"\xff\xff\xff\xff"  # the largest docno: a term's last block is at or before it
_TAIL: Final = struct.Struct(">II")
_REC: Final = struct.Struct(">III")

_TAILS: dict[tuple[int, int], bytes] = {}
_TAILS_MAX: Final = 1 << 16


def entry_tail(tf: int, length: int) -> bytes:
    """The 8 bytes after a posting's docno: ``tf`` and ``length``, each u32 big-endian.

    Raises:
        ValueError: ``tf`` is below 1, above ``length``, or a count does not fit 32 bits.
    """
    tail = _TAILS.get((tf, length))
    if tail is None:
        if not 1 <= tf <= length < _U32:
            raise ValueError(f"a posting needs 1 <= tf <= length < 2**32, got {tf}, {length}")
        if len(_TAILS) >= _TAILS_MAX:
            _TAILS.clear()
        tail = _TAILS[tf, length] = _TAIL.pack(tf, length)
    return tail


def encode_varint(n: int, out: bytearray) -> None:
    """Append ``n`` (0 <= n < 2**64) as an unsigned LEB128 varint: 7 bits a byte, low first."""
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def decode_varint(p: bytes, i: int) -> tuple[int, int]:
    """The canonical varint at ``p[i]``: ``(value, next index)``.

    At most 5 bytes (values below 2**35; the callers check their own ranges); the shortest
    form only (a last byte of 0 after others is refused).

    Raises:
        ValueError: the varint is cut, longer than 5 bytes or not in its shortest form.
    """
    n = shift = 0
    for k in range(5):
        if i + k >= len(p):
            raise ValueError("a varint is cut")
        b = p[i + k]
        n |= (b & 0x7F) << shift
        if b < 0x80:
            if b == 0 and k:
                raise ValueError("a varint not in its shortest form")
            return n, i + k + 1
        shift += 7
    raise ValueError("a varint longer than 5 bytes")


def block_encode(records: bytes) -> bytes:
    """The payload of a block of postings given as 12-byte records (docnos strictly ascending).

    Raises:
        ValueError: no postings, docnos not ascending, or a bad ``tf``/``dl``.
    """
    if _USE_SPEEDUPS and type(records) is bytes:
        fast: bytes | None = _sp.block_encode(records, BLOCK_MAX)
        if fast is not None:  # else the checks below say what is wrong
            return fast
    n = len(records) // ENTRY
    if not 1 <= n <= BLOCK_MAX or len(records) % ENTRY:
        raise ValueError(f"a block holds 1 to {BLOCK_MAX} postings, got {len(records)} bytes")
    out = bytearray()
    last = -1
    for docno, tf, dl in _REC.iter_unpack(records):
        if not 1 <= tf <= dl:
            raise ValueError(f"a posting needs 1 <= tf <= length, got {tf}, {dl}")
        if last >= 0:
            if docno <= last:
                raise ValueError("docnos out of order or repeated")
            encode_varint(docno - last, out)
        last = docno
        encode_varint(tf, out)
        encode_varint(dl, out)
    return bytes(out)


def _decode_payload(first: int, p: bytes) -> bytes:
    """The 12-byte records of a block payload whose first docno is ``first``.

    Raises:
        ValueError: the payload is not the canonical encoding of 1 to ``BLOCK_MAX`` postings.
    """
    out = bytearray()
    i, n, docno, count = 0, len(p), first, 0
    pack = _REC.pack
    while i < n:
        if count:
            delta, i = decode_varint(p, i)
            if delta < 1:
                raise ValueError("a docno delta of 0")
            docno += delta
            if docno >= _U32:
                raise ValueError("a docno past 2**32 - 1")
        tf, i = decode_varint(p, i)
        dl, i = decode_varint(p, i)
        if not 1 <= tf <= dl < _U32:
            raise ValueError(f"a posting with tf={tf}, length={dl}")
        out += pack(docno, tf, dl)
        count += 1
        if count > BLOCK_MAX:
            raise ValueError(f"more than {BLOCK_MAX} postings")
    if not count:
        raise ValueError("an empty block")
    return bytes(out)


# decoded blocks by their sealed value and first docno: a block's bytes always hold the same
# postings, so a hit needs no checksum or decoding (searches read the same lists again)
_DECODED: dict[tuple[bytes, bytes], bytes] = {}
_DECODED_MAX: Final = 1 << 14


def block_records(key: bytes, value: bytes) -> bytes:
    """A block's postings as 12-byte records, checked (checksum, canonical payload).

    Raises:
        IntegrityError: the block is damaged (naming its key).
    """
    first = key[-4:]
    got = _DECODED.get((first, value))
    if got is not None:
        return got
    p = unseal(key, value)
    got = _sp.block_decode(int.from_bytes(first, "big"), p, BLOCK_MAX) if _USE_SPEEDUPS else None
    try:
        if got is None:  # the Python definition: it says what is wrong
            got = _decode_payload(int.from_bytes(first, "big"), p)
    except ValueError as exc:
        raise IntegrityError(f"record {show_key(key)} is not a posting block: {exc}") from None
    if len(_DECODED) >= _DECODED_MAX:
        _DECODED.clear()
    _DECODED[first, value] = got
    return got


def block_entries(key: bytes, value: bytes) -> list[tuple[int, int, int]]:
    """Every posting of a block as ``(docno, tf, length)``, fully checked (for ``verify``).

    Raises:
        IntegrityError: the block is damaged.
    """
    return list(_REC.iter_unpack(block_records(key, value)))


def _pairs(records: bytes) -> Iterator[tuple[bytes, bytes]]:
    for i in range(0, len(records), ENTRY):
        yield records[i : i + 4], records[i + 4 : i + ENTRY]


def term_entries(txn: ReadTxn, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
    """``(docno4, tail)`` of every posting under a term's ``posting_prefix``, in docno order.

    Each block is checked as it is read.
    """
    for key, value in txn.scan(prefix):
        yield from _pairs(block_records(key, value))


def find(txn: ReadTxn, prefix: bytes, raw: bytes) -> bytes | None:
    """The tail of the posting of docno ``raw`` (4 bytes) under a term's ``prefix``, or None."""
    start = txn.seek(prefix, prefix + raw, reverse=True)
    if start is None:
        return None
    value = txn.get(start)
    if value is None:  # pragma: no cover - the key was just found
        return None
    p = block_records(start, value)
    lo, hi = 0, len(p) // ENTRY
    while lo < hi:  # binary search: the docnos ascend
        mid = (lo + hi) // 2
        here = p[mid * ENTRY : mid * ENTRY + 4]
        if here < raw:
            lo = mid + 1
        elif here > raw:
            hi = mid
        else:
            return p[mid * ENTRY + 4 : (mid + 1) * ENTRY]
    return None


def cut_runs(records: bytes) -> list[bytes]:
    """Records cut into runs of ``BLOCK_MAX`` postings from the first (the last run shorter)."""
    step = BLOCK_MAX * ENTRY
    return [records[i : i + step] for i in range(0, len(records), step)]


def apply(
    txn: WriteTxn,
    term: str,
    changes: Mapping[bytes, bytes | None],
    puts: list[tuple[bytes, bytes]] | None = None,
) -> int:
    """Make ``term``'s postings reflect ``changes``: docno4 -> tail (set) or None (remove).

    Each change falls in the block whose first docno is the greatest at or below its docno
    (else the term's first block). Every block a change falls in is read, changed and cut again
    into runs of ``BLOCK_MAX`` from its first posting; the other blocks are not read. New
    docnos (past every other) fall in the term's last block: a batch of new memories reads and
    extends it, then adds blocks after it.

    Args:
        txn: the write transaction.
        term: the term.
        changes: what to set or remove.
        puts: where to leave the changed blocks for the caller to put, in key order (blocks
            it deletes are deleted at once); None to put them here.

    Returns:
        The change in the number of the term's postings.

    Raises:
        IntegrityError: a removed posting is not there, or a block read is damaged.
    """
    if not changes:
        return 0
    prefix = posting_prefix(term)
    ids = sorted(changes)
    delta = 0
    new: list[tuple[bytes, bytes]] = []
    i, n = 0, len(ids)
    while i < n:
        k0, v0, k1 = txn.around(prefix, prefix + ids[i])
        if k0 is None and k1 is not None:  # before the term's first block: that block
            k0, v0 = k1, txn.get(k1)
            k1 = txn.seek(prefix, prefix + (int.from_bytes(k1[-4:], "big") + 1).to_bytes(4, "big"))
        held: dict[bytes, bytes] = {}
        if k0 is not None:
            assert v0 is not None
            held = dict(_pairs(block_records(k0, v0)))
        end = k1[-4:] if k1 is not None else None
        j = i
        while j < n and (end is None or ids[j] < end):
            raw = ids[j]
            tail = changes[raw]
            if tail is None:
                if held.pop(raw, None) is None:
                    raise IntegrityError(
                        f"the posting of {term!r} in document {int.from_bytes(raw, 'big')} is "
                        "missing: run verify"
                    )
                delta -= 1
            else:
                delta += raw not in held
                held[raw] = tail
            j += 1
        i = j
        records = b"".join([raw + held[raw] for raw in sorted(held)])
        old = {k0: v0} if k0 is not None else {}
        for run in cut_runs(records):
            key = prefix + run[:4]
            payload = block_encode(run)
            was = old.pop(key, None)
            if was is None or unseal(key, was) != payload:
                new.append((key, seal(payload)))
        for key in old:
            txn.delete(key)
    if puts is None:
        for key, value in new:
            txn.put(key, value)
    else:
        puts += new
    return delta


def fresh_changes(records: bytes | bytearray) -> dict[bytes, bytes | None]:
    """New postings held as docno4 + tail8 records, as ``apply``'s changes.

    ``Indexer.add_counted(new=True)`` holds a new memory's postings so.

    Raises:
        ValueError: the records are not whole, or a docno repeats (a memory indexed twice).
    """
    out: dict[bytes, bytes | None] = {
        bytes(records[i : i + 4]): bytes(records[i + 4 : i + ENTRY])
        for i in range(0, len(records), ENTRY)
    }
    if len(records) % ENTRY or len(out) * ENTRY != len(records):
        raise ValueError("new postings that are not whole records, or a docno given twice")
    return out


_RECORDS: Final = (bytes, bytearray)
"""What new postings are held as (``apply_many``): a concrete-type check, not an ABC's."""


def apply_many(
    txn: WriteTxn,
    changes: Sequence[tuple[str, Mapping[bytes, bytes | None] | bytes | bytearray]],
    puts: list[tuple[bytes, bytes]],
) -> None:
    """``apply(txn, term, held, puts)`` for each ``(term, held)``, in term order.

    ``held`` is a mapping of changes, or new postings as docno4 + tail8 records (in any order;
    ``fresh_changes``).
    """
    cursor = getattr(txn, "cursor", None)
    prefetch = getattr(txn, "prefetch_around", None)
    if prefetch is not None and cursor is None:
        # an engine across a network reads each term's first around() in one round trip
        prefetch(
            [
                (p, p + _LAST if isinstance(held, _RECORDS) else p + min(held))
                for p, held in ((posting_prefix(t), h) for t, h in changes)
                if held
            ]
        )
    if _USE_SPEEDUPS and cursor is not None:
        # the appends of new postings (a batch of new memories; a fold's additions, held as a
        # dict) for every term in one call; C leaves the rest (removals, postings among the
        # stored ones) to the loop below
        got, left = _sp.append_fresh(
            cursor(),
            [(posting_prefix(term), held) for term, held in changes],
            BLOCK_MAX,
        )
        puts += got
        changes = [changes[j] for j in left]
    for term, held in changes:
        if not isinstance(held, _RECORDS):
            apply(txn, term, held, puts)
        elif _append(txn, posting_prefix(term), bytes(held), puts) is None:
            apply(txn, term, fresh_changes(held), puts)


def _append(
    txn: WriteTxn, prefix: bytes, records: bytes, puts: list[tuple[bytes, bytes]]
) -> int | None:
    """``apply``'s common case without a posting's worth of Python: new postings at the end.

    ``records``: 12-byte records in ascending docno order (as a batch of new memories holds
    them), after every posting of the term. Extends the term's last block and adds blocks
    after it; returns the change in the term's postings, or None (nothing done) when the
    records are not that case. ``cortex._speedups.append_fresh`` does it for many terms in C.
    """
    n = len(records)
    if not n or n % ENTRY:
        return None
    first = records[:4]
    # the term's last block (the key ``lexical.prefetch_new`` names: one round trip with it)
    k0, v0, k1 = txn.around(prefix, prefix + _LAST)
    if k1 is not None:  # pragma: no cover - no key of the term is past the largest docno
        return None
    old = b""
    if k0 is not None:
        assert v0 is not None
        old = block_records(k0, v0)
        if old[-ENTRY:-8] >= first:
            return None
    runs = cut_runs(old + records)
    new: list[tuple[bytes, bytes]] = []
    last = b""
    for i, run in enumerate(runs):
        if run[:4] <= last:
            return None  # not ascending across the runs (block_encode checks within each)
        last = run[-ENTRY:-8]
        if i == 0 and run == old:
            continue  # the stored block was full: it stays
        try:
            payload = block_encode(run)
        except ValueError:
            return None
        new.append((prefix + run[:4], seal(payload)))
    if k0 is not None and runs[0][:4] != k0[-4:]:  # pragma: no cover - the first run keeps it
        return None
    puts += new
    return n // ENTRY
