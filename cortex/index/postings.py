"""Posting blocks: the postings of one term, in id order, stored in runs (``lexical.md`` §4).

A term's postings are kept in blocks of at most ``BLOCK_MAX``. A block's key is the term's
posting prefix and the id of its first posting (``lex/p/`` term ``0x00`` id16); its sealed
payload holds its postings, 24 bytes each: the id (16 bytes), the term frequency and the
document length (unsigned 32-bit, big-endian). Within a block the ids ascend strictly, and the
blocks of a term hold ascending, disjoint runs of ids.

Where the blocks split is a function of the term's ids alone, whatever the order of the writes
that made them: a posting begins a block when it is the term's first, when its id is a
*boundary* (``crc32(id) % SPREAD == 0``), or when the block before it is full. Boundaries depend
on the id only, so a change rewrites the blocks around it up to the next boundary and no
further; and a batch of new memories (ascending ids) appends to the last block of each of its
terms and adds blocks after it: about one put per ``SPREAD`` postings instead of one each.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Final

from cortex.errors import IntegrityError
from cortex.storage.keys import posting_prefix, show_key
from cortex.storage.kv import ReadTxn, WriteTxn, seal, unseal

try:
    from cortex import _speedups as _sp
except ImportError:  # pragma: no cover - installed without a C compiler
    _sp = None  # type: ignore[assignment]

_USE_SPEEDUPS: bool = _sp is not None and all(
    hasattr(_sp, name)
    for name in ("posting_run", "cut_blocks", "block_append", "append_runs", "merge_run")
)
"""Join and cut runs of postings in C (``cortex._speedups``) when it is built; tests switch
this off to compare with the Python paths."""

__all__ = [
    "BLOCK_MAX",
    "ENTRY",
    "SPREAD",
    "apply",
    "apply_many",
    "block_entries",
    "block_payload",
    "blocks",
    "entry_tail",
    "find",
    "fresh_changes",
    "is_boundary",
    "term_entries",
]

ENTRY: Final = 24
"""Bytes per posting: id16, tf (u32 BE), length (u32 BE)."""
BLOCK_MAX: Final = 64
"""Postings per block at most (64 x 24 = 1,536 bytes: a block stays on its LMDB page)."""
SPREAD: Final = 32
"""One id in ``SPREAD`` is a boundary: blocks hold ~24 postings on average (at most 64)."""
_U32: Final = 1 << 32
_TAIL: Final = struct.Struct(">II")

_TAILS: dict[tuple[int, int], bytes] = {}
_TAILS_MAX: Final = 1 << 16


def entry_tail(tf: int, length: int) -> bytes:
    """The 8 bytes after a posting's id: ``tf`` and ``length``, each u32 big-endian.

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


def block_payload(key: bytes, value: bytes) -> bytes:
    """A block's checked payload: its checksum, its size and its first id (the key's).

    Raises:
        IntegrityError: the block is damaged (naming its key).
    """
    p = unseal(key, value)
    n, rest = divmod(len(p), ENTRY)
    if rest or not 1 <= n <= BLOCK_MAX or p[:16] != key[-16:]:
        raise IntegrityError(
            f"record {show_key(key)} is not a posting block: {len(p)} bytes, or its first "
            "posting is not its key's"
        )
    return p


def block_entries(key: bytes, value: bytes) -> list[tuple[bytes, int, int]]:
    """Every posting of a block as ``(id16, tf, length)``, fully checked (for ``verify``).

    Raises:
        IntegrityError: the block is damaged or its postings are out of order or invalid.
    """
    p = block_payload(key, value)
    out = []
    last = b""
    for i in range(0, len(p), ENTRY):
        raw = p[i : i + 16]
        tf, length = _TAIL.unpack_from(p, i + 16)
        if raw <= last or not 1 <= tf <= length:
            raise IntegrityError(
                f"record {show_key(key)} holds a posting out of order or with tf={tf}, "
                f"length={length}"
            )
        last = raw
        out.append((raw, tf, length))
    return out


def _pairs(payload: bytes) -> Iterator[tuple[bytes, bytes]]:
    for i in range(0, len(payload), ENTRY):
        yield payload[i : i + 16], payload[i + 16 : i + ENTRY]


def term_entries(txn: ReadTxn, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
    """``(id16, tail)`` of every posting under a term's ``posting_prefix``, in id order.

    Each block is checked as it is read.
    """
    for key, value in txn.scan(prefix):
        yield from _pairs(block_payload(key, value))


def find(txn: ReadTxn, prefix: bytes, raw: bytes) -> bytes | None:
    """The tail of the posting of id ``raw`` under a term's ``prefix``, or None."""
    start = txn.seek(prefix, prefix + raw, reverse=True)
    if start is None:
        return None
    value = txn.get(start)
    if value is None:  # pragma: no cover - the key was just found
        return None
    p = block_payload(start, value)
    lo, hi = 0, len(p) // ENTRY
    while lo < hi:  # binary search: the ids ascend
        mid = (lo + hi) // 2
        here = p[mid * ENTRY : mid * ENTRY + 16]
        if here < raw:
            lo = mid + 1
        elif here > raw:
            hi = mid
        else:
            return p[mid * ENTRY + 16 : (mid + 1) * ENTRY]
    return None


def is_boundary(raw: bytes) -> bool:
    """Whether a posting of id ``raw`` always begins a block."""
    return zlib.crc32(raw) % SPREAD == 0


def blocks(run: bytes, held: int = 0) -> list[bytes]:
    """Cut a run of postings (24 bytes each, ascending ids) into block payloads.

    With ``held`` = 0 the run's first posting begins a block. Otherwise the run continues a
    block holding ``held`` postings: the result's first payload is what the run adds to it
    (empty when the run's first posting begins a block of its own).
    """
    if _USE_SPEEDUPS:
        return _sp.cut_blocks(run, held, BLOCK_MAX, SPREAD)
    return _blocks(run, held)


def _blocks(run: bytes, held: int) -> list[bytes]:
    out = []
    start = 0
    count = held - 1 if held else 0  # postings in the current block before the one at i
    for i in range(ENTRY if not held else 0, len(run), ENTRY):
        count += 1
        if count >= BLOCK_MAX or is_boundary(run[i : i + 16]):
            out.append(run[start:i])
            start, count = i, 0
    out.append(run[start:])
    return out


def _run(changes: Mapping[bytes, bytes | None]) -> bytes | None:
    """The postings ``changes`` sets, joined in id order; None when one is a removal."""
    if _USE_SPEEDUPS and type(changes) is dict:
        return _sp.posting_run(changes)
    if None in changes.values():
        return None
    return b"".join([raw + changes[raw] for raw in sorted(changes)])  # type: ignore[operator]


def _before(raw: bytes) -> bytes:
    """The id just below ``raw`` (ids are 16-byte unsigned integers), or ``raw`` for 0."""
    n = int.from_bytes(raw, "big")
    return (n - 1).to_bytes(16, "big") if n else raw


def apply(
    txn: WriteTxn,
    term: str,
    changes: Mapping[bytes, bytes | None],
    puts: list[tuple[bytes, bytes]] | None = None,
) -> int:
    """Make ``term``'s postings reflect ``changes``: id16 -> tail (set) or None (remove).

    Reads the blocks the change can move (from the block before the first changed id through
    the last block before the next boundary after the last changed id), cuts their postings
    again, and writes back the blocks that differ. New ids after every posting of the term (a
    batch of new memories) only read and extend its last block.

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
    run = _run(changes)  # None when a change removes a posting
    if run is not None:
        # the common case first: new ids after the term's last block begins
        lo, hi = run[:16], run[-ENTRY:-8]
        start, value, after = txn.around(prefix, prefix + lo)
        if (
            start is not None
            and value is not None
            and start[-16:] < lo
            and (after is None or (after[-16:] > hi and is_boundary(after[-16:])))
        ):
            if _USE_SPEEDUPS:
                changed = _sp.block_append(prefix, run, start, value, BLOCK_MAX, SPREAD)
                if changed is not None:  # else the checks below say what is wrong
                    if puts is None:
                        for key, block in changed:
                            txn.put(key, block)
                    else:
                        puts += changed
                    return len(changes)
            payload = block_payload(start, value)
            if payload[-ENTRY:-8] < lo:  # after its last posting: append
                cut = blocks(run, len(payload) // ENTRY)
                cut[0] = payload + cut[0]
                _write(txn, prefix, cut, {start: payload}, puts)
                return len(changes)
    ids = sorted(changes)
    lo, hi = ids[0], ids[-1]
    # the first block that may change: the one holding the id just before ``lo`` (its first
    # posting, before every change, stays where it is), else the term's first block
    start = txn.seek(prefix, prefix + _before(lo), reverse=True)
    if start is not None and start[-16:] >= lo:  # lo is id 0: nothing comes before it
        start = None
    old: dict[bytes, bytes] = {}  # key -> payload of the blocks read
    for key, value in txn.scan(prefix, start=start if start is not None else prefix):
        first = key[-16:]
        if first > hi and old and is_boundary(first):
            break  # from here on the blocks are as they were
        old[key] = block_payload(key, value)
    merged_c = (
        _sp.merge_run(list(old.values()), changes)
        if _USE_SPEEDUPS and type(changes) is dict
        else None
    )
    if merged_c is not None:
        merged, delta = merged_c
        _write(txn, prefix, blocks(merged) if merged else [], old, puts)
        return delta
    held: dict[bytes, bytes] = {}
    for payload in old.values():
        held.update(_pairs(payload))
    delta = 0
    for raw in ids:
        tail = changes[raw]
        if tail is None:
            if held.pop(raw, None) is None:
                raise IntegrityError(
                    f"the posting of {term!r} in {raw.hex()} is missing: run verify"
                )
            delta -= 1
        else:
            delta += raw not in held
            held[raw] = tail
    merged = b"".join([raw + held[raw] for raw in sorted(held)])
    _write(txn, prefix, blocks(merged) if merged else [], old, puts)
    return delta


def _write(
    txn: WriteTxn,
    prefix: bytes,
    cut: list[bytes],
    old: dict[bytes, bytes],
    puts: list[tuple[bytes, bytes]] | None,
) -> None:
    """Store the blocks ``cut`` in place of ``old`` (key -> payload): what differs only."""
    new = []
    for block in cut:
        key = prefix + block[:16]
        if old.pop(key, None) != block:
            new.append((key, seal(block)))
    for key in old:
        txn.delete(key)
    if puts is None:
        for key, value in new:
            txn.put(key, value)
    else:
        puts += new


def fresh_changes(records: bytes | bytearray) -> dict[bytes, bytes | None]:
    """New postings held as id16 + tail8 records, as ``apply``'s changes.

    ``Indexer.add_counted(new=True)`` holds a new memory's postings so.

    Raises:
        ValueError: the records are not whole, or an id repeats (a memory indexed twice).
    """
    out: dict[bytes, bytes | None] = {
        bytes(records[i : i + 16]): bytes(records[i + 16 : i + ENTRY])
        for i in range(0, len(records), ENTRY)
    }
    if len(records) % ENTRY or len(out) * ENTRY != len(records):
        raise ValueError("new postings that are not whole records, or an id given twice")
    return out


def _first_id(records: bytes | bytearray) -> bytes:
    """The smallest id of id16 + tail8 records."""
    return min(bytes(records[i : i + 16]) for i in range(0, len(records), ENTRY))


def apply_many(
    txn: WriteTxn,
    changes: Sequence[tuple[str, Mapping[bytes, bytes | None] | bytes | bytearray]],
    puts: list[tuple[bytes, bytes]],
) -> None:
    """``apply(txn, term, held, puts)`` for each ``(term, held)``, in term order.

    ``held`` is a mapping of changes, or new postings as id16 + tail8 records (in any order;
    ``fresh_changes``). With the C accelerator and an engine that lends its cursor, the common
    cases (appending after a term's last block, a term's first blocks) run in one call; the
    rest as ``apply``.
    """
    cursor = getattr(txn, "cursor", None)
    prefetch = getattr(txn, "prefetch_around", None)
    if prefetch is not None and cursor is None:
        # an engine across a network reads each term's first around() in one round trip
        prefetch(
            [
                (p, p + (min(held) if isinstance(held, Mapping) else _first_id(held)))
                for p, held in ((posting_prefix(t), h) for t, h in changes)
                if held
            ]
        )
    if _USE_SPEEDUPS and cursor is not None:
        items = [(posting_prefix(term), held) for term, held in changes]
        got, left = _sp.append_runs(cursor(), items, BLOCK_MAX, SPREAD)
        puts += got
        todo: Iterable[tuple[str, Mapping[bytes, bytes | None] | bytes | bytearray]] = (
            changes[i] for i in left
        )
    else:
        todo = changes
    for term, held in todo:
        apply(txn, term, held if isinstance(held, Mapping) else fresh_changes(held), puts)
