"""The unused bytes of an LMDB data file: found from its page structure, checked and zeroed.

LMDB is copy-on-write. A commit never changes a page in place: it writes changed pages to
free ones and lists the pages it replaced in the free database (dbi 0), keyed by its
transaction id, so the bytes of deleted and rewritten records stay in the file until LMDB
reuses those pages. A live page also keeps stale bytes between its node pointers and its nodes
(``lower``..``upper``): a deleted node's bytes are not cleared, and a writer builds its pages in
buffers it recycles, whose unused part still holds whatever page the buffer held before.

This module reads the file's structure (meta pages, the free database, every page header) and
tells which bytes no reader can ever read again:

- a free page LMDB itself may reuse: listed under a transaction id below both the last commit's
  and every open reader snapshot's (the pages of the previous meta's tree and of those
  snapshots are listed under newer ids);
- the gap of every branch and leaf page, live or still held by a snapshot: LMDB never reads it;
- the unused end of the last page of a large value's overflow run;
- every page past the last page the file uses.

``zero`` overwrites the ones that are not zero yet, with ``pwrite`` on the file, while the caller
holds LMDB's writer lock; nothing any tree, snapshot or crash recovery reads is touched, so a
kill at any point leaves a consistent file. The layout is LMDB 0.9's (data version 1) on a
64-bit little-endian host; anything else is refused before a byte is written
(``specs/storage.md`` §11).
"""

from __future__ import annotations

import bisect
import os
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from cortex.errors import CortexError, IntegrityError
from cortex.storage.keys import DATABASE_PREFIX, prefix_end

__all__ = [
    "Layout",
    "LayoutError",
    "ZeroCounts",
    "read_layout",
    "separators",
    "subtree_keys",
    "supported",
    "zero",
]

PAGEHDRSZ: Final = 16
NODESIZE: Final = 8
P_BRANCH: Final = 0x01
P_LEAF: Final = 0x02
P_OVERFLOW: Final = 0x04
P_META: Final = 0x08
P_LEAF2: Final = 0x20
P_SUBP: Final = 0x40
F_BIGDATA: Final = 0x01
F_SUBDATA: Final = 0x02
F_DUPDATA: Final = 0x04
MDB_DUPSORT: Final = 0x04
MAGIC: Final = 0xBEEFC0DE
DATA_VERSION: Final = 1
P_INVALID: Final = (1 << 64) - 1

_META: Final = struct.Struct("<IIQQ")  # magic, version, address, mapsize (at PAGEHDRSZ)
_DB: Final = struct.Struct("<IHHQQQQQ")  # pad (psize for dbi 0), flags, depth, pages..., root
_U16: Final = struct.Struct("<H")
_U32: Final = struct.Struct("<I")
_U64: Final = struct.Struct("<Q")
_ZERO_CHUNK: Final = 1 << 20
_ROWS: Final = 2048  # pages per numpy chunk when checking many pages (8 MiB at 4 KiB)


class LayoutError(IntegrityError):
    """The data file does not have the structure this module knows; nothing was written."""


def supported() -> str | None:
    """Why this host cannot read LMDB files page by page (None when it can)."""
    if sys.byteorder != "little" or struct.calcsize("P") != 8:
        return "page-level erasure needs a 64-bit little-endian host"
    return None


@dataclass(frozen=True)
class DbStat:
    """One ``MDB_db`` of a meta page."""

    flags: int
    depth: int
    branch: int
    leaf: int
    overflow: int
    entries: int
    root: int


@dataclass(frozen=True)
class Meta:
    """One meta page (0 or 1)."""

    page: int
    psize: int
    txnid: int
    last_pg: int
    free: DbStat
    main: DbStat


@dataclass
class ZeroCounts:
    """What one ``zero`` pass found and overwrote (bytes count what was written)."""

    free_pages: int = 0
    free_pages_zeroed: int = 0
    held_pages: int = 0
    gaps_zeroed: int = 0
    tails_zeroed: int = 0
    beyond_pages_zeroed: int = 0
    bytes_zeroed: int = 0


@dataclass
class Layout:
    """The structure of a data file at one moment (the caller holds the writer lock).

    Attributes:
        psize: the page size.
        meta: the newest meta page (the one LMDB opens).
        npages: whole pages in the file.
        size: the file's size in bytes.
        free: free page numbers by the id of the transaction that freed them.
        oldest: free pages listed under ids below this may be reused (and are zeroed).
        branch, leaf: live branch and leaf pages.
        runs: live overflow runs, ``(first page, pages)``.
        values: live large values, ``(first page, bytes)``: where each overflow run's data ends.
        held: free pages not yet reusable that parse as branch or leaf pages (gaps only).
    """

    psize: int
    meta: Meta
    npages: int
    size: int
    free: dict[int, list[int]]
    oldest: int
    branch: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    leaf: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    runs: list[tuple[int, int]] = field(default_factory=list)
    values: list[tuple[int, int]] = field(default_factory=list)
    held: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    _cache: Any = field(default=None, repr=False, compare=False)

    def reusable(self) -> npt.NDArray[np.int64]:
        """Free pages LMDB may reuse now (sorted)."""
        pages = [p for t, ps in self.free.items() if t < self.oldest for p in ps]
        return np.array(sorted(pages), dtype=np.int64)

    def held_count(self) -> int:
        """Free pages a snapshot or the previous meta page may still read."""
        return sum(len(ps) for t, ps in self.free.items() if t >= self.oldest)

    def _lookup(self) -> tuple[dict[int, int], list[int], dict[int, tuple[int, int]], set[int]]:
        cached: Any = self._cache
        if cached is None:
            free_of = {p: t for t, ps in self.free.items() for p in ps}
            starts = sorted(first for first, _ in self.runs)
            runs = {first: (n, -1) for first, n in self.runs}
            for first, nbytes in self.values:
                runs[first] = (runs[first][0], nbytes)
            cached = (free_of, starts, runs, set(self.leaf.tolist()) | set(self.branch.tolist()))
            self._cache = cached
        result: tuple[dict[int, int], list[int], dict[int, tuple[int, int]], set[int]] = cached
        return result

    def is_branch(self, offset: int) -> bool:
        """Whether the byte at ``offset`` is in a live branch page."""
        return bool(np.isin(offset // self.psize, self.branch))

    def region(self, buf: Any, offset: int) -> str:
        """What the byte at ``offset`` is.

        One of ``meta``, ``free``, ``held``, ``gap``, ``node``, ``overflow``, ``tail`` or
        ``beyond``. ``free`` bytes are in a page LMDB may reuse (a scrub zeroes it), ``held``
        ones in a free
        page a snapshot or the previous meta may still read, ``node`` and ``overflow`` ones
        belong to live records, ``gap`` and ``tail`` are unused parts of live pages.
        """
        page, at = divmod(offset, self.psize)
        if page < 2:
            return "meta"
        if page > self.meta.last_pg:
            return "beyond"
        free_of, starts, runs, _ = self._lookup()
        txnid = free_of.get(page)
        if txnid is not None:
            return "free" if txnid < self.oldest else "held"
        k = bisect.bisect_right(starts, page) - 1
        if k >= 0:
            first = starts[k]
            n, nbytes = runs[first]
            if page < first + n:
                end = first * self.psize + PAGEHDRSZ + nbytes
                return "tail" if nbytes >= 0 and offset >= end else "overflow"
        base = page * self.psize
        lower, upper = struct.unpack_from("<HH", buf, base + 12)
        return "gap" if lower <= at < upper else "node"

    def node_key(self, buf: Any, offset: int) -> bytes | None:
        """The key of the live node (leaf or branch) holding the byte at ``offset``."""
        page = offset // self.psize
        if page not in self._lookup()[3]:
            return None
        base = page * self.psize
        lower = _U16.unpack_from(buf, base + 12)[0]
        best = -1
        for i in range((lower - PAGEHDRSZ) // 2):
            node = base + _U16.unpack_from(buf, base + PAGEHDRSZ + 2 * i)[0]
            if best < node <= offset:
                best = node
        if best < 0:
            return None
        ksize = _U16.unpack_from(buf, best + 6)[0]
        return bytes(buf[best + NODESIZE : best + NODESIZE + ksize])


def _meta(buf: Any, page: int, psize: int) -> Meta | None:
    base = page * psize
    flags = _U16.unpack_from(buf, base + 10)[0]
    magic, version, _, _ = _META.unpack_from(buf, base + PAGEHDRSZ)
    if not flags & P_META or magic != MAGIC or version != DATA_VERSION:
        return None
    dbs = [_DB.unpack_from(buf, base + PAGEHDRSZ + _META.size + i * _DB.size) for i in (0, 1)]
    at = base + PAGEHDRSZ + _META.size + 2 * _DB.size
    last_pg, txnid = struct.unpack_from("<QQ", buf, at)
    stats = [DbStat(*d[1:]) for d in dbs]
    return Meta(page, dbs[0][0], txnid, last_pg, stats[0], stats[1])


def read_metas(buf: Any, psize: int) -> tuple[Meta, Meta]:
    """Both meta pages, newest first.

    Raises:
        LayoutError: a meta page is not an LMDB 0.9 meta page of this page size.
    """
    first, second = _meta(buf, 0, psize), _meta(buf, 1, psize)
    if first is None or second is None:
        raise LayoutError("the data file's meta pages are not LMDB 0.9 meta pages")
    for m in (first, second):
        if m.psize != psize:
            raise LayoutError(f"the data file's page size is {m.psize}, LMDB reports {psize}")
    return (first, second) if first.txnid > second.txnid else (second, first)


class _Pages:
    """Bounds-checked reads of one page's header and nodes."""

    def __init__(self, buf: Any, psize: int, last_pg: int) -> None:
        self.buf = buf
        self.psize = psize
        self.last_pg = last_pg

    def header(self, page: int) -> tuple[int, int, int]:
        if not 2 <= page <= self.last_pg:
            raise LayoutError(f"a tree names page {page}, outside 2..{self.last_pg}")
        base = page * self.psize
        flags, lower, upper = struct.unpack_from("<HHH", self.buf, base + 10)
        return flags, lower, upper

    def nodes(self, page: int) -> Iterator[int]:
        """Offsets of the page's nodes."""
        _, lower, upper = self.header(page)
        if not PAGEHDRSZ <= lower <= upper <= self.psize or (lower - PAGEHDRSZ) % 2:
            raise LayoutError(f"page {page} has impossible bounds {lower}..{upper}")
        base = page * self.psize
        for i in range((lower - PAGEHDRSZ) // 2):
            ptr = _U16.unpack_from(self.buf, base + PAGEHDRSZ + 2 * i)[0]
            if not upper <= ptr <= self.psize - NODESIZE:
                raise LayoutError(f"page {page} points at a node outside its bounds")
            yield base + ptr

    def run(self, page: int) -> int:
        """The pages of the overflow run starting at ``page``."""
        flags, _, _ = self.header(page)
        n = _U32.unpack_from(self.buf, page * self.psize + 12)[0]
        if not flags & P_OVERFLOW or n < 1 or page + n - 1 > self.last_pg:
            raise LayoutError(f"page {page} is not the start of an overflow run")
        return int(n)


def separators(
    buf: Any, layout: Layout, prefixes: tuple[bytes, ...] = (b"",)
) -> list[tuple[bytes, int]]:
    """``(key, child page)`` of every separator with one of ``prefixes`` in the branch pages.

    LMDB copies a leaf's first key into its parent when it splits the page, and does not
    change it when that key is later deleted: a deleted key can live on there, in a live page.
    The first node of a branch page has no key and is left out. (The free database's branch
    pages are included; their keys are 8-byte transaction ids.)
    """
    pages = layout.branch
    if not len(pages):
        return []
    psize = layout.psize
    flat = np.frombuffer(buf, dtype=np.uint8, count=(layout.meta.last_pg + 1) * psize)
    base = pages * psize
    nkeys = (_u16(flat, base + 12) - PAGEHDRSZ) // 2
    total = int(nkeys.sum())
    page_of = np.repeat(base, nkeys)
    index = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(nkeys) - nkeys, nkeys)
    node = page_of + _u16(flat, page_of + PAGEHDRSZ + 2 * index)
    ksize = _u16(flat, node + 6)
    key_at = node + NODESIZE
    match = np.zeros(total, dtype=bool)
    for prefix in prefixes:
        m = (index > 0) & (ksize >= len(prefix))
        for k, byte in enumerate(prefix):
            m &= flat[np.minimum(key_at + k, len(flat) - 1)] == byte
        match |= m
    child = _u16(flat, node) | (_u16(flat, node + 2) << 16) | (_u16(flat, node + 4) << 32)
    return [
        (bytes(buf[at : at + n]), int(c))
        for at, n, c in zip(
            key_at[match].tolist(), ksize[match].tolist(), child[match].tolist(), strict=True
        )
    ]


def subtree_keys(buf: Any, psize: int, page: int) -> list[bytes]:
    """Every key of the leaves under ``page`` (a page of the main tree), in order."""
    meta, _ = read_metas(buf, psize)
    pages = _Pages(buf, psize, meta.last_pg)
    out: list[bytes] = []
    stack = [page]
    while stack:
        pg = stack.pop()
        flags, _, _ = pages.header(pg)
        nodes = list(pages.nodes(pg))
        if flags & P_BRANCH:
            for node in reversed(nodes):
                lo, hi, top = struct.unpack_from("<HHH", buf, node)
                stack.append(lo | hi << 16 | top << 32)
        elif flags & P_LEAF and not flags & (P_LEAF2 | P_SUBP):
            for node in nodes:
                ksize = _U16.unpack_from(buf, node + 6)[0]
                out.append(bytes(buf[node + NODESIZE : node + NODESIZE + ksize]))
        else:
            raise LayoutError(f"page {pg} of the main tree is neither branch nor leaf")
    return out


def _free_db(pages: _Pages, root: int) -> dict[int, list[int]]:
    """The free database: ``{txnid: pages it freed}``.

    Its own pages are counted with the pages in use, against the meta page's totals.
    """
    free: dict[int, list[int]] = {}
    if root == P_INVALID:
        return free
    buf = pages.buf
    stack = [root]
    while stack:
        page = stack.pop()
        flags, _, _ = pages.header(page)
        if flags & P_BRANCH:
            for node in pages.nodes(page):
                lo, hi, top = struct.unpack_from("<HHH", buf, node)
                stack.append(lo | hi << 16 | top << 32)
            continue
        if not flags & P_LEAF or flags & (P_LEAF2 | P_SUBP):
            raise LayoutError(f"page {page} of the free database is neither branch nor leaf")
        for node in pages.nodes(page):
            lo, hi, nflags, ksize = struct.unpack_from("<HHHH", buf, node)
            size = lo | hi << 16
            if ksize != 8:
                raise LayoutError(f"a free database key on page {page} is not a txn id")
            txnid = _U64.unpack_from(buf, node + NODESIZE)[0]
            if nflags & F_BIGDATA:
                first = _U64.unpack_from(buf, node + NODESIZE + 8)[0]
                n = pages.run(first)
                start = first * pages.psize + PAGEHDRSZ
                if size > n * pages.psize - PAGEHDRSZ:
                    raise LayoutError(f"free list {txnid} is longer than its overflow pages")
            else:
                start = node + NODESIZE + ksize
            if size < 8 or size % 8:
                raise LayoutError(f"free list {txnid} has an impossible size {size}")
            ids = np.frombuffer(buf, dtype="<u8", count=size // 8, offset=start)
            count = int(ids[0])
            if count != size // 8 - 1:
                raise LayoutError(f"free list {txnid} holds {count} ids in {size} bytes")
            free[int(txnid)] = [int(p) for p in ids[1:]]
    return free


def named_dbs(pages: _Pages, root: int, depth: int) -> list[DbStat]:
    """The named databases whose records the main tree (``root``, ``depth``) holds.

    Their names sort first (``DATABASE_PREFIX``), so only the leftmost leaves are read.
    """
    out: list[DbStat] = []
    if root == P_INVALID:
        return out
    buf = pages.buf
    end = prefix_end(DATABASE_PREFIX)
    stack = [(root, 1)]
    while stack:
        page, level = stack.pop()
        if level > depth:
            raise LayoutError(f"page {page} lies deeper than the main tree's depth {depth}")
        flags, _, _ = pages.header(page)
        nodes = list(pages.nodes(page))
        if flags & P_BRANCH:
            wanted = []
            for i, node in enumerate(nodes):
                ksize = _U16.unpack_from(buf, node + 6)[0]
                key = bytes(buf[node + NODESIZE : node + NODESIZE + ksize])
                if i and key >= end:
                    break
                lo, hi, top = struct.unpack_from("<HHH", buf, node)
                wanted.append((lo | hi << 16 | top << 32, level + 1))
            stack.extend(reversed(wanted))
            continue
        if not flags & P_LEAF or flags & (P_LEAF2 | P_SUBP):
            raise LayoutError(f"page {page} of the main tree is neither branch nor leaf")
        for node in nodes:
            lo, hi, nflags, ksize = struct.unpack_from("<HHHH", buf, node)
            key = bytes(buf[node + NODESIZE : node + NODESIZE + ksize])
            if key >= end:
                return out
            if not nflags & F_SUBDATA:
                continue
            if not key.startswith(DATABASE_PREFIX) or (lo | hi << 16) != _DB.size:
                raise LayoutError(f"page {page} holds a named database record cortex never writes")
            rec = _DB.unpack_from(buf, node + NODESIZE + ksize)
            out.append(DbStat(*rec[1:]))
    return out


def dup_dbs(pages: _Pages, db: DbStat) -> list[DbStat]:
    """The trees of duplicates whose records the leaves of ``db`` hold.

    ``db`` is a database of duplicates (format 20); those trees' pages are counted by their
    records, not by ``db``'s.
    """
    out: list[DbStat] = []
    if db.root == P_INVALID:
        return out
    buf = pages.buf
    stack = [(db.root, 1)]
    while stack:
        page, level = stack.pop()
        if level > db.depth:
            raise LayoutError(f"page {page} lies deeper than its database's depth {db.depth}")
        flags, _, _ = pages.header(page)
        nodes = list(pages.nodes(page))
        if flags & P_BRANCH:
            for node in nodes:
                lo, hi, top = struct.unpack_from("<HHH", buf, node)
                stack.append((lo | hi << 16 | top << 32, level + 1))
            continue
        if not flags & P_LEAF or flags & (P_LEAF2 | P_SUBP):
            raise LayoutError(f"page {page} of a database of duplicates is not a leaf")
        for node in nodes:
            lo, hi, nflags, ksize = struct.unpack_from("<HHHH", buf, node)
            if nflags == F_SUBDATA | F_DUPDATA:
                if (lo | hi << 16) != _DB.size:
                    raise LayoutError(f"page {page} holds a record cortex never writes")
                rec = _DB.unpack_from(buf, node + NODESIZE + ksize)
                out.append(DbStat(*rec[1:]))
    return out


def read_layout(buf: Any, psize: int, size: int, oldest: int, *, details: bool = True) -> Layout:
    """Parse the data file in ``buf`` (the caller holds LMDB's writer lock).

    Args:
        buf: the file's bytes (an ``mmap`` of it).
        psize: LMDB's page size.
        size: the file's size.
        oldest: free pages listed under transaction ids below it may be reused: the smaller of
            the last committed transaction id and every open reader snapshot's.
        details: also find the large values' lengths and the held pages' gaps (what zeroing
            needs; a walk of the branch pages does not).

    Raises:
        LayoutError: anything does not parse, or the pages found do not add up to what the
            meta page counts (then nothing may be written).
    """
    why = supported()
    if why is not None:
        raise LayoutError(why)
    if size < 2 * psize:
        raise LayoutError("the data file is shorter than its two meta pages")
    meta, _ = read_metas(buf, psize)
    if meta.txnid < oldest:
        raise LayoutError(
            f"the newest meta page is of transaction {meta.txnid}, older than {oldest}: the file "
            "is not the one LMDB has open"
        )
    npages = size // psize
    last = meta.last_pg
    if last >= npages:
        raise LayoutError(f"the meta page names page {last}, the file has {npages}")
    pages = _Pages(buf, psize, last)
    free = _free_db(pages, meta.free.root)
    is_free = np.zeros(last + 1, dtype=bool)
    for ps in free.values():
        arr = np.array(ps, dtype=np.int64)
        if not arr.size:
            continue
        if arr.min() < 2 or arr.max() > last or is_free[arr].any() or len(set(ps)) != len(ps):
            raise LayoutError("the free list names a page twice or outside the file")
        is_free[arr] = True
    rows = np.frombuffer(buf, dtype=np.uint8, count=(last + 1) * psize).reshape(last + 1, psize)
    flags = rows[:, 10].astype(np.int64) | (rows[:, 11].astype(np.int64) << 8)
    used = ~is_free
    used[:2] = False
    # overflow runs: in page order, a run's later pages are raw data, whatever they look like
    continuation = np.zeros(last + 1, dtype=bool)
    runs: list[tuple[int, int]] = []
    for page in np.nonzero(used & ((flags & P_OVERFLOW) != 0))[0].tolist():
        if continuation[page]:
            continue
        n = pages.run(page)
        if not used[page : page + n].all():
            raise LayoutError(f"the overflow run at page {page} overlaps free pages")
        runs.append((page, n))
        continuation[page + 1 : page + n] = True
    plain = used & ~continuation & ((flags & P_OVERFLOW) == 0)
    kind = flags & (P_BRANCH | P_LEAF | P_META)
    if (plain & (kind != P_BRANCH) & (kind != P_LEAF)).any():
        bad = int(np.nonzero(plain & (kind != P_BRANCH) & (kind != P_LEAF))[0][0])
        raise LayoutError(f"page {bad} is in use but is neither branch, leaf nor overflow")
    branch = np.nonzero(plain & (kind == P_BRANCH))[0].astype(np.int64)
    leaf = np.nonzero(plain & (kind == P_LEAF))[0].astype(np.int64)
    overflow_pages = sum(n for _, n in runs)
    named = named_dbs(pages, meta.main.root, meta.main.depth)
    want = (
        meta.free.branch + meta.main.branch + sum(d.branch for d in named),
        meta.free.leaf + meta.main.leaf + sum(d.leaf for d in named),
        meta.free.overflow + meta.main.overflow + sum(d.overflow for d in named),
    )
    got = (len(branch), len(leaf), overflow_pages)
    if got != want:
        raise LayoutError(
            f"the pages in use (branch, leaf, overflow) are {got}, the meta page counts {want}"
        )
    layout = Layout(
        psize=psize,
        meta=meta,
        npages=npages,
        size=size,
        free=free,
        oldest=oldest,
        branch=branch,
        leaf=leaf,
        runs=runs,
    )
    if details:
        layout.values = _big_values(buf, layout, rows)
        layout.held = _held(buf, layout, flags)
    return layout


def _big_values(buf: Any, layout: Layout, rows: npt.NDArray[np.uint8]) -> list[tuple[int, int]]:
    """``(first page, bytes)`` of every large value a live leaf holds.

    Found without a Python loop over nodes: every leaf's node pointers, then each node's flags.
    """
    if not layout.runs or not len(layout.leaf):
        return []
    psize = layout.psize
    leaf = layout.leaf
    # a P_LEAF2 page holds duplicates, not nodes (format 20): no large value
    leaf = leaf[(rows[leaf, 10] & P_LEAF2) == 0]
    lower = rows[leaf, 12].astype(np.int64) | (rows[leaf, 13].astype(np.int64) << 8)
    nkeys = (lower - PAGEHDRSZ) // 2
    total = int(nkeys.sum())
    if total == 0:
        return []
    flat = np.frombuffer(buf, dtype=np.uint8, count=(layout.meta.last_pg + 1) * psize)
    page_of = np.repeat(leaf, nkeys)
    starts = np.repeat(np.cumsum(nkeys) - nkeys, nkeys)
    index = np.arange(total, dtype=np.int64) - starts
    ptr_at = page_of * psize + PAGEHDRSZ + 2 * index
    ptr = flat[ptr_at].astype(np.int64) | (flat[ptr_at + 1].astype(np.int64) << 8)
    node = page_of * psize + ptr
    nflags = flat[node + 4].astype(np.int64) | (flat[node + 5].astype(np.int64) << 8)
    big = np.nonzero(nflags & F_BIGDATA)[0]
    starts_of_runs = {first: n for first, n in layout.runs}
    out: list[tuple[int, int]] = []
    for at in node[big].tolist():
        lo, hi, _, ksize = struct.unpack_from("<HHHH", buf, at)
        first = _U64.unpack_from(buf, at + NODESIZE + ksize)[0]
        nbytes = lo | hi << 16
        n = starts_of_runs.get(first)
        if n is None or PAGEHDRSZ + nbytes > n * psize:
            raise LayoutError(f"a large value names page {first}, not a live overflow run")
        out.append((int(first), int(nbytes)))
    return out


def _held(buf: Any, layout: Layout, flags: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Free pages not yet reusable that are branch or leaf pages of some older tree.

    Their gaps may be zeroed (no reader reads a gap). Each freeing transaction's pages are
    walked in page order so that the raw later pages of an overflow run it freed are never
    taken for a page header.
    """
    out: list[int] = []
    psize = layout.psize
    for txnid, ps in layout.free.items():
        if txnid < layout.oldest:
            continue
        skip_to = -1
        for page in sorted(ps):
            if page < skip_to:
                continue
            f = int(flags[page])
            if f & P_OVERFLOW and not f & (P_BRANCH | P_LEAF | P_META):
                n = _U32.unpack_from(buf, page * psize + 12)[0]
                # a run is freed whole, by one transaction; a header that claims otherwise
                # is raw data or stale: whatever pages it claims are left alone too (not
                # zeroing is always safe)
                skip_to = page + max(1, n)
                continue
            kind = f & (P_BRANCH | P_LEAF | P_OVERFLOW | P_META | P_LEAF2 | P_SUBP)
            if kind not in (P_BRANCH, P_LEAF):
                continue
            _, lower, upper = struct.unpack_from("<HHH", buf, page * psize + 10)
            if PAGEHDRSZ <= lower <= upper <= psize and not (lower - PAGEHDRSZ) % 2:
                out.append(page)
    return np.array(sorted(out), dtype=np.int64)


def _nonzero_pages(rows: npt.NDArray[np.uint8], pages: npt.NDArray[np.int64]) -> list[int]:
    out: list[int] = []
    for i in range(0, len(pages), _ROWS):
        chunk = pages[i : i + _ROWS]
        out.extend(chunk[rows[chunk].any(axis=1)].tolist())
    return out


def _u16(flat: npt.NDArray[np.uint8], at: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    return flat[at].astype(np.int64) | (flat[at + 1].astype(np.int64) << 8)


def _dirty_gaps(
    flat: npt.NDArray[np.uint8], pages: npt.NDArray[np.int64], psize: int
) -> list[tuple[int, int, int]]:
    """``(page, lower, upper)`` of each page whose gap holds a non-zero byte (one pass)."""
    if not len(pages):
        return []
    pages = np.sort(pages)
    base = pages * psize
    lower, upper = _u16(flat, base + 12), _u16(flat, base + 14)
    # a P_LEAF2 page (duplicates of a fixed size, format 20) packs them from its header on:
    # ``lower`` counts them, and its gap is the page's end past them
    leaf2 = (_u16(flat, base + 10) & P_LEAF2) != 0
    lower, upper = (
        np.where(leaf2, lower + psize - upper, lower),
        np.where(leaf2, psize, upper),
    )
    keep = upper > lower
    pages, base, lower, upper = pages[keep], base[keep], lower[keep], upper[keep]
    if not len(pages):
        return []
    bounds = np.empty(2 * len(pages), dtype=np.int64)
    bounds[0::2] = base + lower
    bounds[1::2] = base + upper
    last_open = bounds[-1] >= len(flat)  # a gap reaching the end of the file
    ored = np.bitwise_or.reduceat(flat, bounds[:-1] if last_open else bounds)[0::2]
    if last_open:
        ored[-1] = np.bitwise_or.reduce(flat[bounds[-2] :])
    dirty = np.nonzero(ored)[0]
    return [(int(pages[k]), int(lower[k]), int(upper[k])) for k in dirty.tolist()]


def _subpage_rooms(
    buf: Any, flat: npt.NDArray[np.uint8], leaf: npt.NDArray[np.int64], psize: int
) -> list[tuple[int, int]]:
    """``(offset, bytes)`` of each inline page of duplicates' unused room holding a byte.

    The inline pages are the nodes ``F_DUPDATA`` of the live leaves (format 20).

    LMDB grows such a page with room for more duplicates past its last one, and does not clear
    that room: it holds whatever its page buffer held (``specs/storage.md`` §11).
    """
    if not len(leaf):
        return []
    base = leaf * psize
    nkeys = (_u16(flat, base + 12) - PAGEHDRSZ) // 2
    nkeys = np.where((_u16(flat, base + 10) & (P_LEAF2 | P_SUBP)) != 0, 0, np.maximum(nkeys, 0))
    total = int(nkeys.sum())
    if total == 0:
        return []
    page_of = np.repeat(base, nkeys)
    index = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(nkeys) - nkeys, nkeys)
    node = page_of + _u16(flat, page_of + PAGEHDRSZ + 2 * index)
    nflags = _u16(flat, node + 4)
    hits = np.nonzero(nflags == F_DUPDATA)[0]
    out: list[tuple[int, int]] = []
    for at in node[hits].tolist():
        lo, hi, _, ksize = struct.unpack_from("<HHHH", buf, at)
        sp = at + NODESIZE + ksize
        dsize = lo | hi << 16
        spad, sflags, slower, supper = struct.unpack_from("<HHHH", buf, sp + 8)
        if not sflags & P_LEAF2 or not PAGEHDRSZ <= slower <= supper <= dsize:
            continue  # not LMDB's inline page of fixed-size duplicates: left alone
        start = PAGEHDRSZ + (slower - PAGEHDRSZ) // 2 * spad
        if start < dsize and flat[sp + start : sp + dsize].any():
            out.append((sp + start, dsize - start))
    return out


def unused_ranges(buf: Any, layout: Layout) -> list[tuple[int, int, str]]:
    """``(offset, length, what)`` of every unused range that holds a non-zero byte.

    ``what`` is ``free`` (a reusable free page), ``gap`` (of a live or held page), ``tail``
    (after a large value) or ``beyond`` (past the last page).
    """
    psize = layout.psize
    last = layout.meta.last_pg
    flat = np.frombuffer(buf, dtype=np.uint8, count=(last + 1) * psize)
    rows = flat.reshape(last + 1, psize)
    out: list[tuple[int, int, str]] = []
    for page in _nonzero_pages(rows, layout.reusable()):
        out.append((page * psize, psize, "free"))
    gap_pages = np.concatenate([layout.branch, layout.leaf, layout.held])
    for page, lower, upper in _dirty_gaps(flat, gap_pages, psize):
        out.append((page * psize + lower, upper - lower, "gap"))
    for at, n in _subpage_rooms(buf, flat, layout.leaf, psize):
        out.append((at, n, "gap"))
    runs = dict(layout.runs)
    for first, nbytes in layout.values:
        start = first * psize + PAGEHDRSZ + nbytes
        end = (first + runs[first]) * psize
        if end > start and any(buf[start:end]):
            out.append((start, end - start, "tail"))
    beyond = (last + 1) * psize
    if layout.size > beyond:
        step = _ZERO_CHUNK
        for at in range(beyond, layout.size, step):
            n = min(step, layout.size - at)
            if any(bytes(buf[at : at + n])):
                out.append((at, n, "beyond"))
    return out


def zero(fd: int, buf: Any, layout: Layout) -> ZeroCounts:
    """Overwrite every unused range holding a non-zero byte with zeros, then ``fdatasync``.

    The caller holds LMDB's writer lock and passes the layout read under it.
    """
    counts = ZeroCounts(
        free_pages=sum(len(ps) for t, ps in layout.free.items() if t < layout.oldest),
        held_pages=layout.held_count(),
    )
    zeros = bytes(_ZERO_CHUNK)
    ranges = sorted(unused_ranges(buf, layout))
    for offset, length, what in _coalesced(ranges):
        at, left = offset, length
        while left:
            n = os.pwrite(fd, zeros[: min(left, _ZERO_CHUNK)], at)
            at += n
            left -= n
        counts.bytes_zeroed += length
        if what == "free":
            counts.free_pages_zeroed += length // layout.psize
        elif what == "gap":
            counts.gaps_zeroed += 1
        elif what == "tail":
            counts.tails_zeroed += 1
        else:
            counts.beyond_pages_zeroed += -(-length // layout.psize)
    if hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:  # macOS
        os.fsync(fd)
    return counts


def _coalesced(ranges: list[tuple[int, int, str]]) -> Iterator[tuple[int, int, str]]:
    """Adjacent ranges of one kind as one (fewer writes); gaps and tails stay one each."""
    cur: list[Any] | None = None
    for offset, length, what in ranges:
        joins = cur is not None and what in ("free", "beyond") and cur[2] == what
        if joins and cur is not None and cur[0] + cur[1] == offset:
            cur[1] += length
            continue
        if cur is not None:
            yield cur[0], cur[1], cur[2]
        cur = [offset, length, what]
    if cur is not None:
        yield cur[0], cur[1], cur[2]


def check_host() -> None:
    """Raise a clear error when this host cannot read LMDB pages."""
    why = supported()
    if why is not None:
        raise CortexError(f"{why}; this host cannot erase freed pages")
