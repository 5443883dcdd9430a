"""The LMDB data file read directly: meta pages, B-tree page structure, and salvageable records.

LMDB trusts its file: its pages carry no checksum, a page reference into a truncated file is a
SIGBUS, and a damaged page met while a cursor walks aborts the process (``IS_LEAF(mp)``). This
module reads ``data.mdb`` with ``pread`` (never a mapping, so a short file is an error, not a
signal) and checks what LMDB would follow before it follows it: the meta pages against the
file's size before the file is mapped, and every page of a snapshot's tree before a whole-file
walk. It also reads records off whatever pages still parse, for ``cortex salvage``.
``specs/storage.md`` §9 lists the checks. Only LMDB's 0.9 data format (version 1) on a
little-endian 64-bit build is read: the one cortex writes.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Iterable, Iterator
from contextlib import suppress
from itertools import pairwise
from pathlib import Path
from types import TracebackType
from typing import Final, NamedTuple, Self

from cortex.errors import IntegrityError
from cortex.storage.keys import (
    DATABASE_PREFIX,
    DATABASES,
    DUP_DATABASES,
    DUP_TAILS,
    HEAD,
    prefix_end,
)

__all__ = [
    "CHECKED",
    "DataFile",
    "Found",
    "Meta",
    "PageProblem",
    "PageState",
    "Tree",
    "check_file",
    "check_snapshot",
    "checked_state",
    "damage_error",
    "read_checked_record",
    "read_records",
    "short_path",
    "write_checked_record",
]

PAGE_HEADER: Final = 16
"""``MDB_page``: pgno (u64), pad (u16), flags (u16), lower and upper (u16 each)."""
NODE_HEADER: Final = 8
"""``MDB_node``: lo, hi, flags, ksize (u16 each); key and data follow."""
P_BRANCH: Final = 0x01
P_LEAF: Final = 0x02
P_OVERFLOW: Final = 0x04
P_META: Final = 0x08
P_DIRTY: Final = 0x10
P_LEAF2: Final = 0x20
P_SUBP: Final = 0x40
F_BIGDATA: Final = 0x01
F_SUBDATA: Final = 0x02
F_DUPDATA: Final = 0x04
MDB_DUPSORT: Final = 0x04
MDB_DUPFIXED: Final = 0x10
DB_RECORD: Final = 48
"""The size of a named database's record in the main tree: an ``MDB_db``."""
MAGIC: Final = 0xBEEFC0DE
DATA_VERSION: Final = 1
P_INVALID: Final = 2**64 - 1
MAX_KEY: Final = 511
MAX_DEPTH: Final = 32  # LMDB's cursor stack
MAX_PROBLEMS: Final = 200

_META = struct.Struct("<QHHHHIIQQ")  # page header, magic, version, address, mapsize
_DB = struct.Struct("<IHHQQQQQ")  # MDB_db: pad (psize in the free DB), flags, depth, counts, root
_TAIL = struct.Struct("<QQ")  # last_pg, txnid
_HDR = struct.Struct("<QHHHH")
_NODE = struct.Struct("<HHHH")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_PAGE_SIZES: Final = (4096, 8192, 16384, 32768, 65536, 1024, 2048, 512)


class Tree(NamedTuple):
    """One ``MDB_db`` of a meta page: the free-page tree or the main tree."""

    depth: int
    branch_pages: int
    leaf_pages: int
    overflow_pages: int
    entries: int
    root: int
    dup: int = 0
    """A database of duplicates (``keys.DUP_DATABASES``, format 20): its head length (its
    keys), else 0."""
    tail: int = 0
    """A database of duplicates: the length of each duplicate (``keys.DUP_TAILS``)."""
    fixed: int = 0
    """A tree of one key's duplicates (a sub-database): their length (``P_LEAF2`` leaves)."""


class Meta(NamedTuple):
    """One meta page (``slot`` 0 or 1) that parses."""

    slot: int
    psize: int
    last_pg: int
    txnid: int
    free: Tree
    main: Tree

    @property
    def next_pgno(self) -> int:
        """One past the last page the snapshot may reference."""
        return self.last_pg + 1


class PageProblem(NamedTuple):
    """What is wrong with one page (``page`` -1: the file as a whole)."""

    page: int
    what: str

    def __str__(self) -> str:
        where = "data.mdb" if self.page < 0 else f"data.mdb page {self.page}"
        return f"{where}: {self.what}"


def damage_error(path: str | os.PathLike[str], damage: list[PageProblem]) -> IntegrityError:
    """The error of a whole-file walk refused because the snapshot's pages are damaged."""
    more = f" (and {len(damage) - 3} more)" if len(damage) > 3 else ""
    return IntegrityError(
        f"{short_path(path)} is structurally damaged: "
        + "; ".join(str(p) for p in damage[:3])
        + f"{more}. LMDB would crash walking it, so nothing was read. `cortex verify` lists "
        "the damage; `cortex salvage` copies what is intact into a new store"
    )


def short_path(path: str | os.PathLike[str], limit: int = 120) -> str:
    """A path for a message: in full when short, else its ends and its length."""
    text = os.fspath(path)
    if len(text) <= limit:
        return text
    return f"{text[:40]}…{text[-40:]} ({len(text)} characters)"


class DataFile:
    """``data.mdb`` open for ``pread``: reads past the end come back short, never as a signal."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._fd = os.open(self.path, os.O_RDONLY)
        self.psize = 4096
        self._size = os.fstat(self._fd).st_size

    @property
    def size(self) -> int:
        """The file's size now."""
        self._size = os.fstat(self._fd).st_size
        return self._size

    def read_at(self, offset: int, n: int) -> bytes:
        """Up to ``n`` bytes at ``offset`` (fewer at the end of the file)."""
        if offset < 0 or n < 0 or offset + n > 1 << 62:
            return b""  # a page number read off a damaged page: nothing lies there
        if offset + n > self._size:
            self._size = os.fstat(self._fd).st_size  # it may have grown since
        n = min(n, max(0, self._size - offset))  # never allocate for bytes the file lacks
        out = b""
        while len(out) < n:
            got = os.pread(self._fd, n - len(out), offset + len(out))
            if not got:
                break
            out += got
        return out

    def page(self, pgno: int, count: int = 1) -> bytes:
        """Pages ``pgno`` .. ``pgno + count - 1`` (short when the file ends first)."""
        return self.read_at(pgno * self.psize, count * self.psize)

    def close(self) -> None:
        """Close the file."""
        os.close(self._fd)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------
# Meta pages


def parse_meta(buf: bytes, slot: int) -> Meta | str:
    """The meta page in ``buf`` (at least its first 152 bytes), or why it is not one."""
    need = _META.size + 2 * _DB.size + _TAIL.size
    if len(buf) < need:
        return "is cut short"
    pgno, _pad, flags, _lo, _up, magic, version, _addr, _mapsize = _META.unpack_from(buf, 0)
    if not flags & P_META:
        return f"is not a meta page (flags {flags:#06x})"
    if magic != MAGIC:
        return f"has a wrong magic number ({magic:#010x})"
    if version != DATA_VERSION:
        return f"has LMDB data format {version}, not {DATA_VERSION}"
    dbs = []
    psize = 0
    for i in range(2):
        pad, _dflags, depth, branch, leaf, overflow, entries, root = _DB.unpack_from(
            buf, _META.size + i * _DB.size
        )
        if i == 0:
            psize = pad
        dbs.append(Tree(depth, branch, leaf, overflow, entries, root))
    last_pg, txnid = _TAIL.unpack_from(buf, _META.size + 2 * _DB.size)
    if psize not in _PAGE_SIZES:
        return f"names an impossible page size {psize}"
    if pgno != slot:
        return f"names itself page {pgno}"
    if last_pg < 1 or last_pg >= 2**48:
        return f"names an impossible last page {last_pg}"
    for name, tree in zip(("free", "main"), dbs, strict=True):
        if tree.root == P_INVALID:
            if tree.depth or tree.entries:
                return f"has an empty {name} tree with depth {tree.depth}"
            continue
        if not 2 <= tree.root <= last_pg or not 1 <= tree.depth <= MAX_DEPTH:
            return f"names an impossible {name} tree (root {tree.root}, depth {tree.depth})"
    return Meta(slot, psize, last_pg, txnid, dbs[0], dbs[1])


def read_metas(f: DataFile) -> tuple[Meta | str, Meta | str]:
    """Both meta pages, each parsed or the reason it does not parse.

    The second page lies one page size after the first; when the first cannot tell the page
    size, the usual sizes are tried.
    """
    head = f.read_at(0, 256)
    m0 = parse_meta(head, 0) if head else "is missing (the file is empty)"
    sizes = [m0.psize] if isinstance(m0, Meta) else list(_PAGE_SIZES)
    m1: Meta | str = "is missing (the file ends within page 0)"
    for psize in sizes:
        buf = f.read_at(psize, 256)
        if not buf:
            continue
        got = parse_meta(buf, 1)
        if isinstance(got, Meta) and got.psize != psize:
            got = f"names page size {got.psize} but lies at offset {psize}"
        m1 = got
        if isinstance(m1, Meta):
            break
    if isinstance(m0, Meta) and isinstance(m1, Meta) and m0.psize != m1.psize:
        m1 = f"names page size {m1.psize}, meta page 0 names {m0.psize}"
    return _txnids_agree(m0, m1)


def _txnids_agree(m0: Meta | str, m1: Meta | str) -> tuple[Meta | str, Meta | str]:
    """Both meta pages, a damaged transaction id refused.

    LMDB writes a commit's meta page into slot ``txnid % 2``, so the two pages hold
    consecutive transaction ids (0 and 1 in a new or copied file), each in its own parity;
    a file created but never committed to holds 0 in both.
    A flipped bit of a transaction id breaks that, and LMDB would silently pick the page with
    the larger id, an older state of the store (``specs/storage.md`` §9).
    """
    out = [m0, m1]
    for i, m in enumerate(out):
        # 0 is the id both pages hold in a file created but never committed to
        if isinstance(m, Meta) and m.txnid % 2 != i and m.txnid != 0:
            out[i] = (
                f"holds transaction id {m.txnid}, which meta page {i} never holds (a damaged byte)"
            )
    a, b = out
    if (
        isinstance(a, Meta)
        and isinstance(b, Meta)
        and abs(a.txnid - b.txnid) != 1
        and not a.txnid == b.txnid == 0
    ):
        ahead = a if a.txnid > b.txnid else b
        out[ahead.slot] = (
            f"holds transaction id {ahead.txnid}, {abs(a.txnid - b.txnid)} ahead of the other "
            "meta page's (they are consecutive): a damaged byte"
        )
    return out[0], out[1]


def newest(metas: Iterable[Meta | str]) -> Meta | None:
    """The meta page LMDB would use: the valid one with the larger transaction id."""
    good = [m for m in metas if isinstance(m, Meta)]
    return max(good, key=lambda m: m.txnid) if good else None


def _format_of(f: DataFile) -> int | None:
    """The LMDB data format the file's first meta page names (None: no magic found)."""
    buf = f.read_at(0, 64)
    for off in range(0, len(buf) - 7, 4):
        if _U32.unpack_from(buf, off)[0] == MAGIC:
            return int(_U32.unpack_from(buf, off + 4)[0])
    return None


# ---------------------------------------------------------------------------------------------
# The structure check


class _Check:
    """Walks a snapshot's trees from their roots, checking every page before descending."""

    def __init__(
        self,
        f: DataFile,
        meta: Meta,
        ranges: list[tuple[bytes, bytes | None]] | None,
        limit: int,
        lookup: bool = False,
    ) -> None:
        self.lookup = lookup
        """Only the pages a lookup of the ranges' keys reads: not the leaves beside them."""
        self.f = f
        self.meta = meta
        self.psize = meta.psize
        self.ranges = ranges
        self.limit = limit
        self.problems: list[PageProblem] = []
        self.seen: set[int] = set()
        self.counts = [0, 0, 0, 0]  # branch, leaf, overflow pages, entries
        self.file_pages = f.size // meta.psize
        self.named: list[tuple[bytes, Tree]] = []
        """The named databases the main tree's leaves hold (checked after it)."""
        self.subs: list[tuple[int, Tree]] = []
        """The trees of duplicates a database of duplicates' leaves hold (page, tree)."""
        self.in_main = False

    def add(self, page: int, what: str) -> None:
        if len(self.problems) < self.limit:
            self.problems.append(PageProblem(page, what))

    def full(self) -> bool:
        return len(self.problems) >= self.limit

    def wanted(self, lo: bytes | None, hi: bytes | None) -> bool:
        """Whether the key interval [lo, hi) meets a range [start, end] the caller will read."""
        if self.ranges is None:
            return True
        for start, end in self.ranges:
            if (hi is None or start < hi) and (end is None or lo is None or lo <= end):
                return True
        return False

    def claim(self, pgno: int, what: str, count: int = 1) -> bool:
        """Take pages ``pgno``.. as seen; False (with a problem) when they cannot be used."""
        if pgno + count > self.meta.next_pgno:
            self.add(
                pgno,
                f"{what} lies beyond the snapshot's last page {self.meta.last_pg}",
            )
            return False
        if pgno + count > self.file_pages:
            self.add(
                pgno,
                f"{what} lies beyond the end of the file ({self.file_pages} pages): "
                "the file is truncated",
            )
            return False
        if pgno < 2:
            self.add(pgno, f"{what} points at a meta page")
            return False
        for p in range(pgno, pgno + count):
            if p in self.seen:
                self.add(p, f"{what} is referenced twice (a cycle or a shared page)")
                return False
        self.seen.update(range(pgno, pgno + count))
        return True

    def tree(self, tree: Tree, name: str, integer_keys: bool) -> None:
        if tree.root == P_INVALID:
            return
        counts_before = list(self.counts)
        self.walk(tree, name, integer_keys)
        if tree.dup:
            # a database of duplicates: its trees of duplicates next (checked whole), which
            # its record counts with its own pages and entries
            subs, self.subs = self.subs, []
            kept, self.ranges = self.ranges, None
            for pgno, sub in subs:
                if self.full():
                    break
                self.tree(sub, f"duplicates on page {pgno} of the {name}", integer_keys=False)
            self.ranges = kept
        self.compare(tree, name, counts_before)

    def walk(self, tree: Tree, name: str, integer_keys: bool) -> None:
        """Check ``tree``'s pages depth-first (those the ranges need)."""
        # depth-first, in key order: (pgno, depth, lo, hi, parent, mode); mode 0 follows the
        # children the ranges need, 1 only the leftmost path, 2 only the rightmost: a cursor
        # leaving a range steps onto the neighbouring leaf, which must be checked too
        stack: list[tuple[int, int, bytes | None, bytes | None, int, int]] = [
            (tree.root, 1, None, None, -1, 0)
        ]
        while stack and not self.full():
            pgno, depth, lo, hi, parent, mode = stack.pop()
            where = f"the {name} tree's root" if parent < 0 else f"a child of page {parent}"
            if not self.claim(pgno, f"page {pgno} ({where})"):
                continue
            page = self.f.page(pgno)
            leaf = depth == tree.depth
            if leaf and tree.fixed:
                self.fixed_leaf(page, pgno, tree.fixed, lo, hi)
                continue
            children = self.page(
                page,
                pgno,
                leaf=leaf,
                lo=lo,
                hi=hi,
                integer_keys=integer_keys,
                dup=tree.dup,
                tail=tree.tail,
            )
            if not children:
                continue
            if mode == 1:
                picked = [(0, 1)]
            elif mode == 2:
                picked = [(len(children) - 1, 2)]
            else:
                hits = [i for i, (_c, clo, chi) in enumerate(children) if self.wanted(clo, chi)]
                picked = [(i, 0) for i in hits]
                if hits and self.ranges is not None and not self.lookup:
                    if hits[0] > 0:
                        picked.insert(0, (hits[0] - 1, 2))
                    if hits[-1] + 1 < len(children):
                        picked.append((hits[-1] + 1, 1))
            for i, how in reversed(picked):
                child, clo, chi = children[i]
                stack.append((child, depth + 1, clo, chi, pgno, how))

    def compare(self, tree: Tree, name: str, counts_before: list[int]) -> None:
        """Compare the pages and entries found since ``counts_before`` with ``tree``'s record."""
        if self.ranges is None and not self.problems:
            got = [a - b for a, b in zip(self.counts, counts_before, strict=True)]
            want = [tree.branch_pages, tree.leaf_pages, tree.overflow_pages, tree.entries]
            if got != want:
                self.add(
                    -1,
                    f"the {name} tree holds {got[0]} branch, {got[1]} leaf and {got[2]} "
                    f"overflow pages and {got[3]} entries; its meta page says {want[0]}, "
                    f"{want[1]}, {want[2]} and {want[3]}",
                )

    def page(
        self,
        page: bytes,
        pgno: int,
        *,
        leaf: bool,
        lo: bytes | None,
        hi: bytes | None,
        integer_keys: bool,
        dup: int = 0,
        tail: int = 0,
    ) -> list[tuple[int, bytes | None, bytes | None]] | None:
        """Check one branch or leaf page; its children (branch) or [] (leaf); None if damaged.

        ``dup``: the head length of a database of duplicates (format 20), whose leaves' nodes
        hold one duplicate, an inline page of them, or the record of a tree of them.
        """
        psize = self.psize
        hpgno, _pad, flags, lower, upper = _HDR.unpack_from(page, 0)
        kind = "leaf" if leaf else "branch"
        if hpgno != pgno:
            self.add(pgno, f"its header names page {hpgno} (expected a {kind} page)")
            return None
        if flags != (P_LEAF if leaf else P_BRANCH):
            self.add(pgno, f"is not a {kind} page (flags {flags:#06x})")
            return None
        if not PAGE_HEADER <= lower <= upper <= psize or lower % 2:
            self.add(pgno, f"has impossible bounds (lower {lower}, upper {upper})")
            return None
        n = (lower - PAGE_HEADER) >> 1
        if n < (1 if leaf else 2):
            self.add(pgno, f"a {kind} page with {n} keys")
            return None
        ptrs = struct.unpack_from(f"<{n}H", page, PAGE_HEADER)
        keys: list[bytes] = []
        children: list[int] = []
        big: list[tuple[int, int]] = []
        filled = 0  # the bytes the nodes take, for the packing check
        entries = 0
        for i, ptr in enumerate(ptrs):
            if ptr < upper or ptr + NODE_HEADER > psize or ptr % 2:
                self.add(pgno, f"node {i} lies outside the page's node area (offset {ptr})")
                return None
            nlo, nhi, nflags, ksize = _NODE.unpack_from(page, ptr)
            kend = ptr + NODE_HEADER + ksize
            if kend > psize or ksize > MAX_KEY or (ksize == 0 and (leaf or i > 0)):
                self.add(pgno, f"node {i} has an impossible key size {ksize}")
                return None
            keys.append(page[ptr + NODE_HEADER : kend])
            end = kend
            if leaf:
                dsize = nlo | nhi << 16
                entries += 1
                if dup:
                    why = self.dup_node(page, pgno, i, nflags, ksize, kend, dsize, dup, tail)
                    if isinstance(why, str):
                        self.add(pgno, f"node {i} {why}")
                        return None
                    entries += why - 1
                    end = kend + dsize
                elif nflags == F_BIGDATA:
                    if kend + 8 > psize:
                        self.add(pgno, f"node {i}'s overflow reference runs off the page")
                        return None
                    big.append((_U64.unpack_from(page, kend)[0], dsize))
                    end = kend + 8
                elif nflags == F_SUBDATA and self.in_main:
                    name = page[ptr + NODE_HEADER : kend]
                    tree = named_tree(name, page[kend : kend + dsize])
                    if tree is None:
                        self.add(pgno, f"node {i} is a damaged record of a named database")
                        return None
                    self.named.append((name, tree))
                    end = kend + dsize
                elif nflags:
                    self.add(pgno, f"node {i} has flags {nflags:#06x} cortex never writes")
                    return None
                elif kend + dsize > psize:
                    self.add(pgno, f"node {i}'s value ({dsize} bytes) runs off the page")
                    return None
                else:
                    end = kend + dsize
            else:
                children.append(nlo | nhi << 16 | nflags << 32)
            filled += (end - ptr + 1) & ~1
        # LMDB keeps a page's nodes packed from ``upper`` to the page's end (adding, deleting and
        # resizing a node move the others): a count in ``lower`` that lost or gained entries, or
        # a damaged ``upper``, leaves every remaining node plausible but their sizes off the area
        if filled != psize - upper:
            self.add(
                pgno,
                f"its {n} nodes take {filled} bytes of a node area of {psize - upper}: its "
                f"entry count (lower {lower}) or its upper bound ({upper}) is damaged",
            )
            return None
        # keys in order, inside the bounds the parent gave this page
        ordered = [int.from_bytes(k, "little") for k in keys] if integer_keys else keys
        first = 0 if leaf else 1
        for i in range(first + 1, n):
            if not ordered[i - 1] < ordered[i]:  # type: ignore[operator]
                self.add(pgno, f"keys {i - 1} and {i} are out of order")
                return None
        if not integer_keys and n > first:
            if lo is not None and keys[first] < lo:
                self.add(pgno, "its first key sorts before its parent's separator")
                return None
            if hi is not None and keys[-1] >= hi:
                self.add(pgno, "its last key sorts after the next separator of its parent")
                return None
        if leaf:
            self.counts[1] += 1
            self.counts[3] += entries
            for ovpg, dsize in big:
                if not self.overflow(pgno, ovpg, dsize):
                    return None
            return []
        self.counts[0] += 1
        out: list[tuple[int, bytes | None, bytes | None]] = []
        for i, child in enumerate(children):
            clo = lo if i == 0 else keys[i]
            chi = hi if i == n - 1 else keys[i + 1]
            if integer_keys:
                clo = chi = None
            out.append((child, clo, chi))
        return out

    def dup_node(  # noqa: PLR0917 - one node's parts, as page() unpacked them
        self,
        page: bytes,
        pgno: int,
        i: int,
        nflags: int,
        ksize: int,
        kend: int,
        dsize: int,
        dup: int,
        fixed: int,
    ) -> int | str:
        """Check node ``i`` of a leaf of a database of duplicates.

        Returns how many duplicates it holds, or why it is damaged. Its tree of duplicates, if
        any, is checked after the database's.
        """
        if ksize != dup:
            return f"has a {ksize}-byte key in a database of {dup}-byte heads"
        if kend + dsize > len(page):
            return f"has a value ({dsize} bytes) that runs off the page"
        data = page[kend : kend + dsize]
        if nflags == 0:
            return 1 if dsize == fixed else f"holds a {dsize}-byte duplicate ({fixed} expected)"
        if nflags == F_DUPDATA:
            got = dup_subpage(data, fixed)
            return got if isinstance(got, str) else len(got)
        if nflags == F_SUBDATA | F_DUPDATA:
            tree = dup_tree(data, fixed)
            if tree is None:
                return "is a damaged record of a tree of duplicates"
            self.subs.append((pgno, tree))
            return 0  # its tree's leaves count them
        return f"has flags {nflags:#06x} cortex never writes"

    def fixed_leaf(
        self, page: bytes, pgno: int, fixed: int, lo: bytes | None, hi: bytes | None
    ) -> None:
        """Check a ``P_LEAF2`` page of a tree of duplicates (``fixed`` bytes each)."""
        hpgno, pad, flags, lower, upper = _HDR.unpack_from(page, 0)
        if hpgno != pgno:
            self.add(pgno, f"its header names page {hpgno} (expected a leaf of duplicates)")
            return
        if flags != P_LEAF | P_LEAF2 or pad != fixed:
            self.add(pgno, f"is not a leaf of duplicates (flags {flags:#06x}, size {pad})")
            return
        n = (lower - PAGE_HEADER) >> 1
        if (
            lower % 2
            or not PAGE_HEADER <= lower <= upper <= self.psize
            or n < 1
            or lower + self.psize - upper != PAGE_HEADER + n * fixed
        ):
            self.add(pgno, f"a leaf of duplicates with impossible bounds ({lower}, {upper})")
            return
        keys = [page[PAGE_HEADER + j * fixed : PAGE_HEADER + (j + 1) * fixed] for j in range(n)]
        if any(a >= b for a, b in pairwise(keys)):
            self.add(pgno, "its duplicates are out of order")
            return
        if (lo is not None and keys[0] < lo) or (hi is not None and keys[-1] >= hi):
            self.add(pgno, "its duplicates lie outside its parent's separators")
            return
        self.counts[1] += 1
        self.counts[3] += n

    def overflow(self, parent: int, ovpg: int, dsize: int) -> bool:
        what = f"the overflow page {ovpg} of a value on page {parent}"
        if ovpg >= self.meta.next_pgno or ovpg >= self.file_pages:
            self.claim(ovpg, what)  # reports why
            return False
        hdr = self.f.page(ovpg)[:PAGE_HEADER]
        hpgno, _pad, flags, _lo, _up = _HDR.unpack_from(hdr, 0)
        npages = _U32.unpack_from(hdr, 12)[0]
        if hpgno != ovpg or flags != P_OVERFLOW:
            self.add(
                ovpg, f"is not an overflow page (its header names page {hpgno}, flags {flags:#06x})"
            )
            return False
        need = (PAGE_HEADER - 1 + dsize) // self.psize + 1
        if npages != need:
            self.add(ovpg, f"an overflow run of {npages} pages for a {dsize}-byte value")
            return False
        if not self.claim(ovpg, what, npages):
            return False
        self.counts[2] += npages
        return True


def _check(
    f: DataFile,
    meta: Meta,
    ranges: list[tuple[bytes, bytes | None]] | None = None,
    limit: int = MAX_PROBLEMS,
    lookup: bool = False,
) -> _Check:
    f.psize = meta.psize
    # the named databases' trees: all of them for a whole check, those holding keys of the
    # ranges for a check of ranges (their records' leaf too), none for a lookup's
    named = ranges is None or (not lookup and _in_databases(ranges))
    if ranges is not None and named:
        ranges = [*ranges, (DATABASE_PREFIX, prefix_end(DATABASE_PREFIX))]
    c = _Check(f, meta, ranges, limit, lookup)
    if meta.main.depth > MAX_DEPTH or meta.free.depth > MAX_DEPTH:
        c.add(-1, f"a tree {max(meta.main.depth, meta.free.depth)} levels deep")
        return c
    c.in_main = True
    c.tree(meta.main, "main", integer_keys=False)
    c.in_main = False
    for name, tree in c.named if named else []:
        if c.full():
            break
        if tree.depth > MAX_DEPTH:
            c.add(-1, f"the named database {name!r} is {tree.depth} levels deep")
            continue
        shown = name[len(DATABASE_PREFIX) :].decode("ascii", "replace")
        c.tree(tree, f"named database {shown}", integer_keys=False)
    if ranges is None:
        c.tree(meta.free, "free-page", integer_keys=True)
    return c


def _in_databases(ranges: list[tuple[bytes, bytes | None]]) -> bool:
    """Whether a key range meets a keyspace kept in a named database (``DATABASES``).

    Its end counts: a range at a keyspace's end (``prefix_end``) is where a reverse scan of
    the keyspace starts.
    """
    return any(
        start <= prefix_end(p) and (end is None or end >= p)
        for start, end in ranges
        for p in DATABASES
    )


def named_tree(name: bytes, record: bytes) -> Tree | None:
    """The tree of a named database from its record in the main tree.

    None when it is not one cortex writes: a name outside ``DATABASE_PREFIX``, another size,
    flags, or an impossible depth.
    """
    if not name.startswith(DATABASE_PREFIX) or len(record) != DB_RECORD:
        return None
    _pad, flags, depth, branch, leaf, overflow, entries, root = _DB.unpack(record)
    keyspace = name[len(DATABASE_PREFIX) :]
    dup = DUP_DATABASES.get(keyspace, 0)
    if flags != (MDB_DUPSORT | MDB_DUPFIXED if dup else 0):
        return None
    if depth > MAX_DEPTH or (root == P_INVALID) != (depth == 0):
        return None
    return Tree(depth, branch, leaf, overflow, entries, root, dup, DUP_TAILS.get(keyspace, 0))


def dup_tree(record: bytes, fixed: int) -> Tree | None:
    """The tree of one key's duplicates from its record (a node ``F_SUBDATA | F_DUPDATA``).

    None unless it is one LMDB writes for a database of duplicates of ``fixed`` bytes each:
    flags ``MDB_DUPFIXED``, that size, a plausible depth and root.
    """
    if len(record) != DB_RECORD:
        return None
    pad, flags, depth, branch, leaf, overflow, entries, root = _DB.unpack(record)
    if flags != MDB_DUPFIXED or pad != fixed or not 0 < depth <= MAX_DEPTH or root == P_INVALID:
        return None
    return Tree(depth, branch, leaf, overflow, entries, root, fixed=fixed)


def dup_subpage(data: bytes, fixed: int) -> list[bytes] | str:
    """The duplicates of an inline sub-page (the data of a node ``F_DUPDATA``), in order.

    A reason (str) when it is not one LMDB writes for duplicates of ``fixed`` bytes each: its
    header, bounds, size or order.
    """
    if len(data) < PAGE_HEADER:
        return "an inline page of duplicates shorter than its header"
    _pg, pad, flags, lower, upper = _HDR.unpack_from(data, 0)
    # LMDB leaves P_DIRTY (0x10) set on the inline pages it builds: it never clears it there
    if flags & ~P_DIRTY != P_LEAF | P_SUBP | P_LEAF2 or pad != fixed:
        return f"an inline page of duplicates with flags {flags:#06x} and size {pad}"
    n = (lower - PAGE_HEADER) >> 1
    if (
        lower % 2
        or not PAGE_HEADER <= lower <= upper <= len(data)
        or n < 1
        or PAGE_HEADER + n * fixed > len(data)
        or lower + len(data) - upper != PAGE_HEADER + n * fixed
    ):
        return f"an inline page of duplicates with impossible bounds ({lower}, {upper})"
    out = [data[PAGE_HEADER + i * fixed : PAGE_HEADER + (i + 1) * fixed] for i in range(n)]
    if any(a >= b for a, b in pairwise(out)):
        return "an inline page of duplicates out of order"
    return out


def check_snapshot(
    path: str | os.PathLike[str],
    txnid: int,
    ranges: list[tuple[bytes, bytes | None]] | None = None,
    *,
    lookup: bool = False,
) -> list[PageProblem] | None:
    """Check every page of the snapshot ``txnid`` (or those holding keys in ``ranges``).

    The caller holds a read transaction of that snapshot, so its pages cannot be reused
    meanwhile. ``ranges`` are ``[start, end)`` key intervals (``end`` None: to the last key);
    without them both trees are checked whole and their page counts compared with the meta
    page. With ``lookup`` (and ``ranges``), only the pages a point lookup of those keys in the
    main tree reads are checked: not the leaves beside them, nor the named databases' trees.

    Returns:
        The problems found (empty: LMDB can walk it safely), or None when neither meta page
        describes ``txnid`` any more (two commits happened since it began: retry).
    """
    with DataFile(os.path.join(path, "data.mdb")) as f:
        if _format_of(f) not in (None, DATA_VERSION):
            return []  # another LMDB data format: nothing here reads it
        for _ in range(3):
            m0, m1 = read_metas(f)
            meta = next((m for m in (m0, m1) if isinstance(m, Meta) and m.txnid == txnid), None)
            if meta is None:
                return None
            again = read_metas(f)[meta.slot]
            if again == meta:  # not torn by a commit writing that slot meanwhile
                return _check(f, meta, ranges, lookup=lookup).problems
        return None


def check_file(path: str | os.PathLike[str], *, settle: float = 1.0) -> None:
    """Refuse a ``data.mdb`` that LMDB would crash on or silently replace, before it is mapped.

    Checks both meta pages (LMDB refuses a file with either damaged) and that the file holds
    every page the newest one's trees reference: when it is shorter than the meta page's last
    page, the trees are walked to tell free pages at the end (a legitimate short file) from
    truncation. An empty file is refused: LMDB would silently start a new, empty store in it.
    A file that is empty or short while another process is creating the store settles within
    ``settle`` seconds.

    Raises:
        IntegrityError: the file is truncated or a meta page is damaged (naming which).
    """
    name = os.path.join(path, "data.mdb")
    shown = short_path(name)
    deadline = time.monotonic() + settle
    while True:
        with DataFile(name) as f:
            size = f.size
            fmt = _format_of(f)
            if size and fmt is not None and fmt != DATA_VERSION:
                return  # another LMDB data format (1.0): py-lmdb picks its engine
            m0, m1 = read_metas(f)
            meta = newest((m0, m1))
            bad = [(i, m) for i, m in enumerate((m0, m1)) if isinstance(m, str)]
            if not bad and meta is not None:
                if size >= meta.next_pgno * meta.psize:
                    return
                problems = _truncation(f, meta)
                if problems is None or not problems:
                    return  # unsettled (writers) or only free pages at the end: fine
                raise IntegrityError(
                    f"{shown} is truncated: it is {size} bytes ({size // meta.psize} pages) but "
                    f"the store's tree references pages up to {max(p.page for p in problems)}, "
                    "and LMDB would crash on it. Restore the store from a backup, or recover "
                    "what is left with `cortex salvage`"
                )
        if time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    if size == 0:
        raise IntegrityError(
            f"{shown} is empty (0 bytes): the store's file was truncated, and LMDB would start "
            "a new, empty store in it. Restore it from a backup; if the store never held "
            "anything, delete its directory"
        )
    which = "; ".join(f"meta page {i} {why}" for i, why in bad)
    raise IntegrityError(
        f"{shown} is damaged: {which}. LMDB cannot open it. Restore the store from a backup, "
        "or recover what is left with `cortex salvage`"
    )


def _truncation(f: DataFile, meta: Meta) -> list[PageProblem] | None:
    """Pages the trees need beyond the end of the file (None: writers keep changing it)."""
    for _ in range(3):
        c = _check(f, meta, limit=10**9)
        beyond = [p for p in c.problems if "beyond the end of the file" in p.what]
        now = newest(read_metas(f))
        if now is not None and now.txnid == meta.txnid:
            return beyond
        if now is None:
            return beyond
        meta = now
    return None


# ---------------------------------------------------------------------------------------------
# The record of the last check (``pages.checked``)

CHECKED: Final = "pages.checked"
"""The file in a store's directory recording the state of ``data.mdb`` a page check passed."""
_RECORD_TAG: Final = "cortex-pages-checked 1"


class PageState(NamedTuple):
    """One state of ``data.mdb``: its file's identity and its newest commit.

    Every commit changes the modification time and the transaction id.
    """

    dev: int
    ino: int
    size: int
    mtime_ns: int
    txnid: int


def checked_state(path: str | os.PathLike[str]) -> PageState | None:
    """The state of ``path``'s ``data.mdb`` now (None: unreadable, or changing meanwhile)."""
    name = os.path.join(path, "data.mdb")
    try:
        with DataFile(name) as f:
            before = os.fstat(f._fd)
            meta = newest(read_metas(f))
            after = os.fstat(f._fd)
    except OSError:
        return None
    if meta is None or (before.st_size, before.st_mtime_ns) != (after.st_size, after.st_mtime_ns):
        return None
    return PageState(after.st_dev, after.st_ino, after.st_size, after.st_mtime_ns, meta.txnid)


def read_checked_record(path: str | os.PathLike[str]) -> PageState | None:
    """The state ``pages.checked`` records (None: no record, or one that does not parse)."""
    try:
        with open(os.path.join(path, CHECKED), encoding="ascii") as f:
            text = f.read(200)
    except (OSError, ValueError):
        return None
    if not text.startswith(_RECORD_TAG + " "):
        return None
    try:
        return PageState(*(int(x) for x in text[len(_RECORD_TAG) :].split()))
    except (TypeError, ValueError):
        return None


def write_checked_record(path: str | os.PathLike[str], state: PageState | None) -> None:
    """Record ``state`` as checked (atomically), or remove the record (``None``).

    Raises:
        OSError: the directory cannot be written.
    """
    target = os.path.join(path, CHECKED)
    if state is None:
        with suppress(FileNotFoundError):
            os.unlink(target)
        return
    tmp = f"{target}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="ascii") as f:
        f.write(f"{_RECORD_TAG} {' '.join(str(x) for x in state)}\n")
    os.replace(tmp, target)


# ---------------------------------------------------------------------------------------------
# Salvage: records from every page that still parses


class Found(NamedTuple):
    """What a tolerant read of a damaged file found."""

    records: dict[bytes, bytes]
    """Key to value, each from a page that parses (values still need their checksum)."""
    problems: list[PageProblem]
    """The pages that do not parse, or could not be reached."""
    pages: int
    """Pages in the snapshot read (``last_pg + 1``), or in the file when no meta parses."""
    orphans_searched: bool
    """Whether pages cut off from the tree were searched for records."""
    ambiguous: list[bytes]
    """Keys found with different values on two cut-off pages (left out)."""
    suspect: list[tuple[bytes | None, bytes | None]]
    """Key ranges ``[lo, hi)`` (None: unbounded) of the live tree where records may have been
    lost without a trace: those of pages that could not be read, and of leaf pages that did
    not yield every node within their bounds. ``[(None, None)]`` when no tree could be read."""


def _dup_head(key: bytes) -> int:
    """The length of the duplicates under ``key`` if it is a head of ``DUP_DATABASES``, or 0.

    Such a head is a key of a database of duplicates (format 20). No key of the main
    database has that length under those prefixes (a store before format 20 holds the whole
    keys there).
    """
    for prefix, n in DUP_DATABASES.items():
        if len(key) == n and key.startswith(prefix):
            return DUP_TAILS[prefix]
    return 0


def _leaf_nodes(
    f: DataFile,
    page: bytes,
    psize: int,
    next_pgno: int,
    bounds: tuple[bytes | None, bytes | None] = (None, None),
    *,
    outside: bool = False,
) -> Iterator[tuple[bytes, bytes]]:
    """Every record of a leaf page whose bounds hold, overflow values read; damage skipped.

    Only keys inside ``bounds`` (the parent's separators), or with ``outside`` only those
    outside them: a damaged key or separator, or a page reached through a damaged pointer.
    A node of a database of duplicates gives the whole keys it holds (its head joined with
    each duplicate, inline), with empty values; one holding a tree of them gives none.
    """
    for records in _node_records(f, page, psize, next_pgno, bounds, outside=outside):
        yield from records


def _node_records(
    f: DataFile,
    page: bytes,
    psize: int,
    next_pgno: int,
    bounds: tuple[bytes | None, bytes | None] = (None, None),
    *,
    outside: bool = False,
    subs: list[tuple[bytes, bytes]] | None = None,
) -> Iterator[list[tuple[bytes, bytes]]]:
    """``_leaf_nodes``'s records, node by node.

    ``subs`` collects ``(head, record)`` of each node holding a tree of duplicates (for the
    caller to walk).
    """
    lo, hi = bounds
    _pg, _pad, _flags, lower, _upper = _HDR.unpack_from(page, 0)
    if not PAGE_HEADER <= lower <= psize:
        lower = psize  # a damaged bound: try every slot, the checksums decide
    n = min((lower - PAGE_HEADER) >> 1, (psize - PAGE_HEADER) >> 1)
    for (ptr,) in struct.iter_unpack("<H", page[PAGE_HEADER : PAGE_HEADER + 2 * n]):
        if ptr < PAGE_HEADER + 2 * n or ptr + NODE_HEADER > psize:
            continue
        nlo, nhi, nflags, ksize = _NODE.unpack_from(page, ptr)
        kend = ptr + NODE_HEADER + ksize
        if not 0 < ksize <= MAX_KEY or kend > psize:
            continue
        key = page[ptr + NODE_HEADER : kend]
        if ((lo is not None and key < lo) or (hi is not None and key >= hi)) != outside:
            continue
        dsize = nlo | nhi << 16
        fixed = _dup_head(key)
        if fixed:
            if kend + dsize > psize:
                continue
            data = page[kend : kend + dsize]
            if nflags == 0 and dsize == fixed:
                yield [(key + data, b"")]
            elif nflags == F_DUPDATA:
                got = dup_subpage(data, fixed)
                if not isinstance(got, str):
                    yield [(key + d, b"") for d in got]
            elif nflags == F_SUBDATA | F_DUPDATA and subs is not None:
                subs.append((key, data))
                yield []
            continue
        if nflags == F_BIGDATA:
            if kend + 8 > psize:
                continue
            ovpg = _U64.unpack_from(page, kend)[0]
            if not 2 <= ovpg < next_pgno or ovpg * psize + PAGE_HEADER + dsize > next_pgno * psize:
                continue
            value = f.read_at(ovpg * psize + PAGE_HEADER, dsize)
            if len(value) != dsize:
                continue
        elif nflags == 0 and kend + dsize <= psize:
            value = page[kend : kend + dsize]
        else:
            continue
        yield [(key, value)]


class _Walked(NamedTuple):
    reached: set[int]
    """Tree pages and the overflow runs of their values."""
    leaves: list[tuple[bytes, bytes | None, bytes | None]]
    """Each leaf page's bytes and the key bounds its parent gave it."""
    lost: list[tuple[bytes | None, bytes | None]]
    """The key bounds of the pages that could not be read (or were reached twice)."""


def _walk(
    f: DataFile,
    meta: Meta,
    tree: Tree,
    problems: list[PageProblem],
    *,
    skip: frozenset[int] = frozenset(),
    bounded: bool = True,
) -> _Walked:
    """Tolerantly walk a tree from its root, damage skipped page by page.

    Pages in ``skip`` (free pages) are never entered: a damaged pointer to one would bring back
    a stale copy of an older state. With ``bounded`` each child gets the key bounds of its
    parent's separators.
    """
    out = _Walked(set(), [], [])
    if tree.root == P_INVALID:
        return out
    psize = meta.psize

    def note(pgno: int, what: str) -> None:
        if len(problems) < MAX_PROBLEMS:
            problems.append(PageProblem(pgno, what))

    stack: list[tuple[int, int, bytes | None, bytes | None]] = [(tree.root, 1, None, None)]
    while stack:
        pgno, depth, lo, hi = stack.pop()
        if pgno in out.reached or not 2 <= pgno < meta.next_pgno:
            out.lost.append((lo, hi))  # a damaged pointer: the page it named is not reached
            continue
        if pgno in skip:
            note(pgno, "a branch page points at a free page")
            out.lost.append((lo, hi))
            continue
        page = f.page(pgno)
        if len(page) < psize:
            note(pgno, "lies beyond the end of the file")
            out.lost.append((lo, hi))
            continue
        out.reached.add(pgno)
        hpgno, _pad, flags, lower, _upper = _HDR.unpack_from(page, 0)
        leaf_flags = P_LEAF | P_LEAF2 if tree.fixed else P_LEAF
        if flags == leaf_flags or (depth == tree.depth and flags & P_LEAF):
            out.leaves.append((page, lo, hi))
            if hpgno != pgno or flags != leaf_flags or depth != tree.depth:
                note(pgno, "a leaf page with a damaged header")
            if tree.fixed:
                continue  # duplicates packed: no node, no large value
            for i in range(PAGE_HEADER, min(lower, psize), 2):
                ptr = struct.unpack_from("<H", page, i)[0]
                if ptr + NODE_HEADER > psize:
                    continue
                nlo, nhi, nflags, ksize = _NODE.unpack_from(page, ptr)
                at = ptr + NODE_HEADER + ksize
                if nflags == F_BIGDATA and at + 8 <= psize:
                    _run(f, _U64.unpack_from(page, at)[0], nlo | nhi << 16, meta, out.reached)
            continue
        if flags != P_BRANCH or hpgno != pgno or depth >= tree.depth or depth >= MAX_DEPTH:
            note(pgno, f"does not parse (flags {flags:#06x}, header page {hpgno})")
            out.lost.append((lo, hi))
            continue
        if not PAGE_HEADER <= lower <= psize:
            note(pgno, f"a branch page with bound {lower}")
            out.lost.append((lo, hi))
            continue
        nodes: list[tuple[int, bytes]] = []
        for i in range(PAGE_HEADER, lower, 2):
            ptr = struct.unpack_from("<H", page, i)[0]
            if ptr + NODE_HEADER > psize:
                continue
            nlo, nhi, nflags, ksize = _NODE.unpack_from(page, ptr)
            key = page[ptr + NODE_HEADER : min(psize, ptr + NODE_HEADER + ksize)]
            nodes.append((nlo | nhi << 16 | nflags << 32, key))
        for i, (child, key) in enumerate(nodes):
            clo = lo if i == 0 or not bounded else key
            chi = hi if i == len(nodes) - 1 or not bounded else nodes[i + 1][1]
            stack.append((child, depth + 1, clo, chi))
    return out


def _run(f: DataFile, ovpg: int, dsize: int, meta: Meta, into: set[int]) -> None:
    """Add the overflow run of a value starting at ``ovpg`` to ``into`` (when it checks)."""
    if not 2 <= ovpg < meta.next_pgno:
        return
    hdr = f.page(ovpg)[:PAGE_HEADER]
    if len(hdr) < PAGE_HEADER or _HDR.unpack_from(hdr, 0)[2] != P_OVERFLOW:
        return
    npages = (PAGE_HEADER - 1 + dsize) // meta.psize + 1
    into.update(range(ovpg, min(ovpg + npages, meta.next_pgno)))


def read_records(path: str | os.PathLike[str]) -> Found:
    """Read every record that still parses from a (possibly damaged) store directory.

    Walks the newest meta page's tree, tolerating damage page by page and never entering a
    page the free-page tree lists. When pages could not be reached (a damaged branch page, a
    truncated file) and the free-page tree is intact, every page that is neither reached nor
    free is a cut-off page of the live tree: its records are read too (a record reached
    through the tree wins over one on a cut-off page). Without an intact free-page tree,
    cut-off pages are not searched: they cannot be told from stale copies of older states.
    """
    problems: list[PageProblem] = []
    records: dict[bytes, bytes] = {}
    with DataFile(os.path.join(path, "data.mdb")) as f:
        metas = read_metas(f)
        for i, m in enumerate(metas):
            if isinstance(m, str):
                problems.append(PageProblem(i, f"meta page {i} {m}"))
        meta = newest(metas)
        if meta is None:
            return Found({}, problems, f.size // 4096, False, [], [(None, None)])
        f.psize = psize = meta.psize
        next_pgno = min(meta.next_pgno, -(-f.size // psize))
        # the free pages first: stale copies of older states, never read as records
        free_problems: list[PageProblem] = []
        free_tree = _walk(f, meta, meta.free, free_problems, bounded=False)
        free = set(free_tree.reached)
        for page, _lo, _hi in free_tree.leaves:
            for _key, value in _leaf_nodes(f, page, psize, next_pgno):
                count = _U64.unpack_from(value, 0)[0] if len(value) >= 8 else 0
                if 8 * (count + 1) <= len(value):
                    free.update(struct.unpack_from(f"<{count}Q", value, 8))
        free_ok = not free_problems
        before = len(problems)
        skip = frozenset(free) if free_ok else frozenset()
        main = _walk(f, meta, meta.main, problems, skip=skip)
        # the named databases (format 17) whose records the main tree's leaves still hold; a
        # lost record leaves its database's pages unreached: they are cut off (below)
        trees = [meta.main]
        named_found: set[bytes] = set()
        # the keyspaces of DATABASES with a key in the main tree: a store of a format before
        # the one that moved them (17: j/, lex/d/, lex/i/, vec/; 19: m/)
        in_main: set[bytes] = set()
        for page, _lo, _hi in list(main.leaves):
            if len(in_main) < len(DATABASES):
                for k, _v in _leaf_nodes(f, page, psize, next_pgno):
                    if k.startswith(DATABASES):
                        in_main.update(p for p in DATABASES if k.startswith(p))
            for name, record in _named_nodes(page, psize):
                named_found.add(name[len(DATABASE_PREFIX) :])
                tree = named_tree(name, record)
                if tree is None:
                    if len(problems) < MAX_PROBLEMS:
                        problems.append(PageProblem(-1, f"the record of {name!r} is damaged"))
                    continue
                trees.append(tree)
                sub = _walk(f, meta, tree, problems, skip=skip | frozenset(main.reached))
                main.reached.update(sub.reached)
                main.leaves.extend(sub.leaves)
                main.lost.extend(sub.lost)
        suspect = list(main.lost)
        subs: list[tuple[bytes, bytes]] = []
        for page, lo, hi in main.leaves:
            got = 0
            for node in _node_records(f, page, psize, next_pgno, (lo, hi), subs=subs):
                for key, value in node:
                    records.setdefault(key, value)
                got += 1
            if got != _node_count(page, psize) - _named_count(page, psize):
                suspect.append((lo, hi))  # a node dropped, or a key out of its bounds
        # the trees of duplicates of the databases of duplicates (format 20): each key its
        # head (the node's) joined with each duplicate of the tree's leaves
        for head, record in subs:
            fixed = _dup_head(head)
            sub_tree = dup_tree(record, fixed)
            if sub_tree is None:
                if len(problems) < MAX_PROBLEMS:
                    problems.append(
                        PageProblem(-1, f"the tree of duplicates of {head!r} is damaged")
                    )
                suspect.append((head, prefix_end(head)))
                continue
            sub = _walk(f, meta, sub_tree, problems, skip=skip | frozenset(main.reached))
            main.reached.update(sub.reached)
            if sub.lost:
                suspect.append((head, prefix_end(head)))
            for page, _lo, _hi in sub.leaves:
                for dup in _fixed_keys(page, psize, fixed):
                    records.setdefault(head + dup, b"")
        want = sum(t.branch_pages + t.leaf_pages + t.overflow_pages for t in trees)
        cut_off = (
            len(problems) > before
            or meta.next_pgno > -(-f.size // psize)
            or len(main.reached) != want
        )
        ambiguous: list[bytes] = []
        # a named database whose record is lost: its keyspace is only on cut-off pages. They
        # are searched for its keys even without an intact free-page tree, a key found with
        # two values left out (a stale copy of an older state, or the current one: which, the
        # pages cannot tell); a record that is stale whole (a purged memory's) is what the
        # journal's checks in salvage refuse
        missing = tuple(p for p in DATABASES if p not in named_found and p not in in_main)
        if in_main - {HEAD, *DUP_DATABASES}:  # a store before format 17 (it named none)
            missing = ()
        if cut_off and not free_ok:
            problems += free_problems[: MAX_PROBLEMS - len(problems)]
            only = ", ".join(p.decode() for p in missing)
            problems.append(
                PageProblem(
                    -1,
                    "the free-page tree is damaged too: pages cut off from the tree were not "
                    "searched (they cannot be told from stale copies of older states)"
                    if not missing
                    else "the free-page tree is damaged too: pages cut off from the tree were "
                    f"searched only for the keys of {only} (named databases whose records are "
                    "lost); a key found with two values was left out",
                )
            )
        searched = cut_off and (free_ok or bool(missing))
        if searched:
            orphan_records, ambiguous = _orphans(f, psize, next_pgno, main.reached | free)
            if not free_ok:
                orphan_records = {k: v for k, v in orphan_records.items() if k.startswith(missing)}
                ambiguous = [k for k in ambiguous if k.startswith(missing)]
            for key, value in orphan_records.items():
                records.setdefault(key, value)
        if free_ok:  # keys outside their separators, last: none of these pages is free
            for page, lo, hi in main.leaves:
                for key, value in _leaf_nodes(f, page, psize, next_pgno, (lo, hi), outside=True):
                    records.setdefault(key, value)
        return Found(records, problems, meta.next_pgno, searched, ambiguous, suspect)


def _fixed_keys(page: bytes, psize: int, fixed: int) -> list[bytes]:
    """The duplicates of a ``P_LEAF2`` page (``fixed`` bytes each), as far as its count holds."""
    lower = _HDR.unpack_from(page, 0)[3]
    n = max(0, min((lower - PAGE_HEADER) >> 1, (psize - PAGE_HEADER) // fixed))
    return [page[PAGE_HEADER + i * fixed : PAGE_HEADER + (i + 1) * fixed] for i in range(n)]


def _named_nodes(page: bytes, psize: int) -> Iterator[tuple[bytes, bytes]]:
    """``(name, record)`` of each node of a leaf page that is a named database's record."""
    lower = _HDR.unpack_from(page, 0)[3]
    if not PAGE_HEADER <= lower <= psize:
        return
    for i in range(PAGE_HEADER, lower, 2):
        ptr = struct.unpack_from("<H", page, i)[0]
        if ptr + NODE_HEADER > psize:
            continue
        nlo, nhi, nflags, ksize = _NODE.unpack_from(page, ptr)
        kend = ptr + NODE_HEADER + ksize
        dsize = nlo | nhi << 16
        if nflags == F_SUBDATA and 0 < ksize <= MAX_KEY and kend + dsize <= psize:
            name = page[ptr + NODE_HEADER : kend]
            if name.startswith(DATABASE_PREFIX):
                yield name, page[kend : kend + dsize]


def _named_count(page: bytes, psize: int) -> int:
    return sum(1 for _ in _named_nodes(page, psize))


def _node_count(page: bytes, psize: int) -> int:
    """How many nodes a page's header says it holds (-1: a damaged bound)."""
    lower = _HDR.unpack_from(page, 0)[3]
    return (lower - PAGE_HEADER) >> 1 if PAGE_HEADER <= lower <= psize else -1


def _orphans(
    f: DataFile, psize: int, next_pgno: int, taken: set[int]
) -> tuple[dict[bytes, bytes], list[bytes]]:
    """Records on leaf pages that are neither reached from the tree nor free."""
    candidates = [p for p in range(2, next_pgno) if p not in taken]
    covered: set[int] = set()
    pages: dict[int, bytes] = {}
    for pgno in candidates:
        page = f.page(pgno)
        if len(page) < psize:
            continue
        hpgno, _pad, flags, _lo, _up = _HDR.unpack_from(page, 0)
        if flags == P_OVERFLOW and hpgno == pgno:
            npages = _U32.unpack_from(page, 12)[0]
            covered.update(range(pgno + 1, min(pgno + npages, next_pgno)))
        elif flags == P_LEAF:
            pages[pgno] = page
    found: dict[bytes, bytes] = {}
    clash: set[bytes] = set()
    for pgno, page in pages.items():
        if pgno in covered:
            continue  # the middle of a value, which only looks like a leaf page
        for key, value in _leaf_nodes(f, page, psize, next_pgno):
            old = found.setdefault(key, value)
            if old != value:
                clash.add(key)
    for key in clash:
        del found[key]
    return found, sorted(clash)
