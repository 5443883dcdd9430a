"""Where a store's disk bytes go: per key prefix, per LMDB page kind, per file.

Builds a store the way the benchmark suite does (``tools/bench_peers``: the same records, tags,
importance and precomputed 384-d vectors, written with ``write_many`` in durable batches of
1,000), once with the vectors and once without, then walks ``data.mdb`` page by page from the
newest meta page and reports, per keyspace of ``specs/storage.md`` §2:

- entries, key bytes and value bytes (the payload a perfect packing would need);
- the bytes the entries take on leaf pages (LMDB's 8-byte node header, 2-byte slot pointer and
  the key and inline value, or the 8-byte page number of an overflow value);
- leaf pages (each leaf page shared out among the keyspaces of its entries by the bytes each
  takes on it) and overflow pages (whole pages, each run holding one value);

then the tree's branch pages, the free pages (the free-page tree's lists and the pages it
takes), the file's pages past the last one used, and each file of the store directory
(``data.mdb``, ``lock.mdb``, the vector index cache in ``vectors/``) by allocated blocks, the
way the benchmark's ``dir_bytes`` counts them.

    python tools/disk_breakdown.py --sizes 10000,100000
    python tools/disk_breakdown.py --sizes 10000 --keep /tmp/stores --json out.json
    python tools/disk_breakdown.py --store PATH      # an existing store, nothing built

Everything is read with ``pread`` from the closed store; the numbers are the file's, not
estimates.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from cortex.storage.pages import (  # noqa: E402
    F_DUPDATA,
    F_SUBDATA,
    DataFile,
    _dup_head,
    named_tree,
    newest,
    read_metas,
)

# keyspaces of specs/storage.md §2, longest match first
PREFIXES = sorted(
    [
        b"m/",
        b"mv/",
        b"id/",
        b"idx/type/",
        b"idx/tag/",
        b"idx/frame/",
        b"idx/actor_obj/",
        b"idx/pin/",
        b"idx/claim/",
        b"task/",
        b"ent/a/",
        b"e/from/",
        b"e/to/",
        b"j/",
        b"vec/",
        b"sal/",
        b"lex/p/",
        b"lex/s/",
        b"lex/d/",
        b"lex/i/",
        b"lex/t/",
        b"ep/",
        b"er/",
        b"prov/e/",
        b"cx/p/",
        b"cx/d/",
        b"cx/t/",
        b"meta/",
    ],
    key=len,
    reverse=True,
)

_HDR = struct.Struct("<QHHHH")
_NODE = struct.Struct("<HHHH")
_PTR = struct.Struct("<H")
_U64 = struct.Struct("<Q")
PAGE_HEADER = 16
NODE_HEADER = 8
P_BRANCH, P_LEAF, P_OVERFLOW = 0x01, 0x02, 0x04
F_BIGDATA = 0x01


def keyspace(key: bytes) -> str:
    """The keyspace a key belongs to (its storage.md prefix), or ``other``."""
    for p in PREFIXES:
        if key.startswith(p):
            return p.decode()
    return "other"


class Space:
    """What one keyspace takes."""

    def __init__(self) -> None:
        self.entries = 0
        self.key_bytes = 0
        self.value_bytes = 0
        self.node_bytes = 0  # bytes on leaf pages: header, slot, key, inline value or pgno
        self.leaf_pages = 0.0  # leaf pages shared out by node bytes
        self.overflow_pages = 0
        self.overflow_values = 0
        self.fields: dict[int, int] = defaultdict(int)  # top-level CBOR map field -> bytes

    def as_dict(self) -> dict[str, Any]:
        """The figures as JSON-able values."""
        return {
            "entries": self.entries,
            "key_bytes": self.key_bytes,
            "value_bytes": self.value_bytes,
            "node_bytes": self.node_bytes,
            "leaf_pages": round(self.leaf_pages, 2),
            "overflow_pages": self.overflow_pages,
            "overflow_values": self.overflow_values,
            "fields": dict(sorted(self.fields.items())),
        }


# -- a minimal CBOR skipper: how many bytes each top-level map field takes ----------------------


def _head(buf: bytes, at: int) -> tuple[int, int, int]:
    """(major type, argument, offset after the head) of the CBOR item at ``at``."""
    ib = buf[at]
    major, info = ib >> 5, ib & 31
    at += 1
    if info < 24:
        return major, info, at
    n = {24: 1, 25: 2, 26: 4, 27: 8}[info]
    return major, int.from_bytes(buf[at : at + n], "big"), at + n


def _skip(buf: bytes, at: int) -> int:
    """The offset just past the CBOR item at ``at`` (definite lengths only, as cortex writes)."""
    major, arg, at = _head(buf, at)
    if major in (0, 1, 7):
        return at
    if major in (2, 3):
        return at + arg
    if major == 4:
        for _ in range(arg):
            at = _skip(buf, at)
        return at
    if major == 5:
        for _ in range(2 * arg):
            at = _skip(buf, at)
        return at
    return _skip(buf, at)  # 6: a tag and its item


def field_sizes(payload: bytes) -> dict[int, int]:
    """Bytes of each field (key and value) of a CBOR map with uint keys; {} if not one."""
    try:
        major, count, at = _head(payload, 0)
        if major != 5:
            return {}
        out: dict[int, int] = {}
        for _ in range(count):
            kmajor, key, vat = _head(payload, at)
            end = _skip(payload, vat)
            out[key if kmajor == 0 else -1] = end - at
            at = end
        return out
    except (IndexError, KeyError):
        return {}


# -- the page walk -------------------------------------------------------------------------------


def _nodes(page: bytes) -> list[tuple[int, int, int, int]]:
    """(ptr, dsize, flags, ksize) of every node of a page."""
    lower = _HDR.unpack_from(page, 0)[3]
    out = []
    for i in range(PAGE_HEADER, lower, 2):
        ptr = _PTR.unpack_from(page, i)[0]
        lo, hi, flags, ksize = _NODE.unpack_from(page, ptr)
        out.append((ptr, lo | hi << 16, flags, ksize))
    return out


def walk(
    path: Path, fields: frozenset[str] = frozenset({"m/", "mv/", "vec/", "j/"})
) -> dict[str, Any]:
    """The breakdown of ``path``/data.mdb (a closed store)."""
    spaces: dict[str, Space] = defaultdict(Space)
    with DataFile(path / "data.mdb") as f:
        meta = newest(read_metas(f))
        if meta is None:
            raise SystemExit(f"{path}: no valid meta page")
        psize = meta.psize
        f.psize = psize
        usable = psize - PAGE_HEADER
        branch_pages = 0
        leaf_pages = 0
        leaf_used = 0
        free_ids: set[int] = set()
        free_tree_pages = 0
        trees = [(meta.main, False), (meta.free, True)]
        for tree, is_free in trees:  # grows: the named databases (format 17) are walked too
            if tree.depth == 0:
                continue
            # (page, head): a page of a tree of duplicates (format 20) carries its key's head
            stack: list[tuple[int, bytes | None]] = [(tree.root, None)]
            while stack:
                pgno, head = stack.pop()
                page = f.page(pgno)
                flags = _HDR.unpack_from(page, 0)[2]
                if is_free:
                    free_tree_pages += 1
                if flags & P_BRANCH:
                    if not is_free:
                        branch_pages += 1
                    for _ptr, dsize, nflags, _k in _nodes(page):
                        stack.append((dsize | nflags << 32, head))
                    continue
                if head is not None:  # a P_LEAF2 page of duplicates, packed
                    fixed = _dup_head(head)
                    n = (_HDR.unpack_from(page, 0)[3] - PAGE_HEADER) // 2
                    leaf_pages += 1
                    sp = spaces[keyspace(head)]
                    sp.entries += n
                    sp.key_bytes += n * fixed
                    sp.node_bytes += n * fixed
                    sp.leaf_pages += 1
                    leaf_used += n * fixed
                    continue
                if not flags & P_LEAF:
                    raise SystemExit(f"page {pgno}: flags {flags:#x}")
                nodes = _nodes(page)
                if is_free:
                    for ptr, dsize, nflags, ksize in nodes:
                        at = ptr + NODE_HEADER + ksize
                        if nflags & F_BIGDATA:
                            ov = _U64.unpack_from(page, at)[0]
                            raw = f.read_at(ov * psize + PAGE_HEADER, dsize)
                            n_ov = (PAGE_HEADER + dsize + psize - 1) // psize
                            free_tree_pages += n_ov
                        else:
                            raw = page[at : at + dsize]
                        ids = struct.unpack_from(f"<{dsize // 8}Q", raw)
                        free_ids.update(ids[1 : 1 + ids[0]])
                    continue
                leaf_pages += 1
                on_page: dict[str, int] = defaultdict(int)
                for ptr, dsize, nflags, ksize in nodes:
                    key = page[ptr + NODE_HEADER : ptr + NODE_HEADER + ksize]
                    fixed = _dup_head(key)
                    if fixed:  # a head of a database of duplicates (format 20)
                        at = ptr + NODE_HEADER + ksize
                        sp = spaces[keyspace(key)]
                        node = NODE_HEADER + ksize + dsize
                        node += (node & 1) + 2
                        if nflags == F_SUBDATA | F_DUPDATA:
                            stack.append((_U64.unpack_from(page, at + 40)[0], key))
                        elif nflags == F_DUPDATA:
                            sub = _HDR.unpack_from(page, at)
                            sp.entries += (sub[3] - PAGE_HEADER) // 2
                        else:
                            sp.entries += 1
                        sp.key_bytes += ksize
                        sp.value_bytes += dsize
                        sp.node_bytes += node
                        on_page[keyspace(key)] += node
                        continue
                    if nflags & F_SUBDATA:
                        at = ptr + NODE_HEADER + ksize
                        sub = named_tree(key, page[at : at + dsize])
                        if sub is None:
                            raise SystemExit(f"page {pgno}: a damaged named database record")
                        trees.append((sub, False))
                    sp_name = keyspace(key)
                    sp = spaces[sp_name]
                    sp.entries += 1
                    sp.key_bytes += ksize
                    sp.value_bytes += dsize
                    at = ptr + NODE_HEADER + ksize
                    if nflags & F_BIGDATA:
                        ov = _U64.unpack_from(page, at)[0]
                        n_ov = (PAGE_HEADER + dsize + psize - 1) // psize
                        sp.overflow_pages += n_ov
                        sp.overflow_values += 1
                        node = NODE_HEADER + ksize + 8
                        value = (
                            f.read_at(ov * psize + PAGE_HEADER, dsize) if sp_name in fields else b""
                        )
                    else:
                        node = NODE_HEADER + ksize + dsize
                        node += node & 1  # LMDB keeps nodes 2-byte aligned
                        value = page[at : at + dsize] if sp_name in fields else b""
                    node += 2
                    sp.node_bytes += node
                    on_page[sp_name] += node
                    if value:
                        for k, n in field_sizes(value[:-4]).items():
                            sp.fields[k] += n
                total = sum(on_page.values())
                leaf_used += total
                for name, n in on_page.items():
                    spaces[name].leaf_pages += n / total if total else 0
        file_size = f.size
    file_pages = file_size // psize
    used_pages = meta.last_pg + 1
    return {
        "psize": psize,
        "file_size": file_size,
        "last_pg": meta.last_pg,
        "meta_pages": 2,
        "branch_pages": branch_pages,
        "leaf_pages": leaf_pages,
        "leaf_fill": leaf_used / (leaf_pages * usable) if leaf_pages else 0.0,
        "overflow_pages": sum(s.overflow_pages for s in spaces.values()),
        "free_pages": len(free_ids),
        "free_tree_pages": free_tree_pages,
        "pages_past_last": max(0, file_pages - used_pages),
        "tree": meta.main._asdict(),
        "spaces": {k: v.as_dict() for k, v in sorted(spaces.items())},
    }


def files(path: Path) -> dict[str, dict[str, int]]:
    """Each file under ``path``: its size and the bytes allocated to it."""
    out = {}
    for root, _dirs, names in os.walk(path):
        for name in names:
            p = Path(root) / name
            if p.is_symlink():
                continue
            st = p.stat()
            out[str(p.relative_to(path))] = {"size": st.st_size, "blocks": st.st_blocks * 512}
    return out


# -- building the store ---------------------------------------------------------------------------


def build(path: Path, n: int, vectors: bool, log: Any) -> float:
    """Write the bench's first ``n`` records into a new store at ``path``; seconds taken."""
    from bench_peers import dataset
    from bench_peers.cortex_adapter import PrecomputedEmbedder, to_data
    from bench_peers.harness import BATCH

    from cortex import Cortex, NewMemory

    ds = dataset.make(n, n_extra=0)
    kw: dict[str, Any] = {"embedder": PrecomputedEmbedder(ds)} if vectors else {}
    t0 = time.perf_counter()
    with Cortex.open(path, actor="bench", map_size=1 << 30, **kw) as cx:
        for b in range(0, n, BATCH):
            cx.write_many(
                [
                    NewMemory(data=to_data(ds, i), tags=ds.tags[i], importance=ds.importance[i])
                    for i in range(b, min(b + BATCH, n))
                ]
            )
            if (b // BATCH) % 20 == 19:
                log(f"    {b + BATCH:,}")
    return time.perf_counter() - t0


def save_cache(path: Path, n: int) -> None:
    """Open the store with its embedder, search once and close.

    The handle saves its vector index cache into ``vectors/`` (``specs/vector-index.md`` §3),
    as any handle that searched does when it closes.
    """
    from bench_peers import dataset
    from bench_peers.cortex_adapter import PrecomputedEmbedder

    import cortex

    ds = dataset.make(n, n_extra=0)
    with cortex.Cortex.open(path, actor="bench", embedder=PrecomputedEmbedder(ds)) as cx:
        cx.find(cortex.Query(near_vector=ds.query_vectors[0], limit=10))


# -- the report ------------------------------------------------------------------------------------


def _b(x: float) -> str:
    return f"{x:,.0f}"


def report(name: str, n: int, w: dict[str, Any], fl: dict[str, dict[str, int]]) -> str:
    psize = w["psize"]
    total_blocks = sum(v["blocks"] for v in fl.values())
    lines = [f"### {name}, N = {n:,}", ""]
    lines.append(
        f"Directory: {_b(total_blocks)} B allocated = **{total_blocks / n:,.0f} B per memory**; "
        + ", ".join(f"{k} {v['blocks'] / n:,.0f}" for k, v in sorted(fl.items()) if v["blocks"])
        + " B per memory."
    )
    lines.append("")
    lines.append(
        "| keyspace | entries | key B/mem | value B/mem | on leaf B/mem | leaf pages | "
        "overflow pages | page B/mem | share |"
    )
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    spaces = w["spaces"]
    page_total = (w["leaf_pages"] + w["overflow_pages"] + w["branch_pages"]) * psize
    rows = []
    for k, s in spaces.items():
        pages = s["leaf_pages"] + s["overflow_pages"]
        rows.append((pages, k, s))
    for pages, k, s in sorted(rows, key=lambda r: r[0], reverse=True):
        lines.append(
            f"| `{k}` | {s['entries']:,} | {s['key_bytes'] / n:,.1f} | "
            f"{s['value_bytes'] / n:,.1f} | "
            f"{s['node_bytes'] / n:,.1f} | {s['leaf_pages']:,.1f} | {s['overflow_pages']:,} | "
            f"{pages * psize / n:,.0f} | {100 * pages * psize / page_total:.1f}% |"
        )
    payload = sum(s["key_bytes"] + s["value_bytes"] for s in spaces.values())
    lines.append("")
    lines.append(
        f"Pages ({psize} B): {w['leaf_pages']:,} leaf (fill {100 * w['leaf_fill']:.1f}% of "
        f"their {psize - PAGE_HEADER} usable bytes), {w['overflow_pages']:,} overflow, "
        f"{w['branch_pages']:,} branch, {w['free_pages']:,} free (+{w['free_tree_pages']} "
        f"holding the free list), {w['pages_past_last']:,} past the last page used, 2 meta. "
        f"data.mdb {_b(w['file_size'])} B = {w['file_size'] / n:,.0f} B per memory; "
        f"payload (keys + values) {payload / n:,.0f} B per memory = "
        f"{100 * payload / max(1, w['file_size']):.1f}% of the file."
    )
    for k in ("mv/", "m/", "vec/", "j/"):
        fs = spaces.get(k, {}).get("fields")
        if fs:
            lines.append(
                f"`{k}` value fields (CBOR key: B per memory, key and value; +4 CRC each): "
                + ", ".join(f"{fk}: {v / n:,.1f}" for fk, v in fs.items())
            )
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="10000", help="comma-separated store sizes to build")
    ap.add_argument("--store", type=Path, help="break down an existing (closed) store instead")
    ap.add_argument("--keep", type=Path, help="build the stores here and keep them")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON")
    ap.add_argument("--no-plain", action="store_true", help="skip the store without vectors")
    ap.add_argument(
        "--cache",
        action="store_true",
        help="then search the store with vectors once and report it again with its saved "
        "vector index cache (vectors/)",
    )
    args = ap.parse_args()

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    results: list[dict[str, Any]] = []
    if args.store:
        w = walk(args.store)
        n = w["spaces"].get("m/", {}).get("entries", 1) or 1
        print(report(str(args.store), n, w, files(args.store)))
        results.append({"store": str(args.store), "n": n, "walk": w, "files": files(args.store)})
    else:
        base = args.keep or Path(tempfile.mkdtemp(prefix="disk-breakdown-"))
        base.mkdir(parents=True, exist_ok=True)
        try:
            for n in (int(x) for x in args.sizes.split(",")):
                for vectors in (True, False) if not args.no_plain else (True,):
                    name = "with vectors" if vectors else "without vectors"
                    path = base / f"store-{n}-{'vec' if vectors else 'plain'}"
                    shutil.rmtree(path, ignore_errors=True)
                    log(f"building {n:,} {name} at {path}")
                    secs = build(path, n, vectors, log)
                    w = walk(path)
                    fl = files(path)
                    print(report(name, n, w, fl), flush=True)
                    results.append(
                        {"n": n, "vectors": vectors, "build_s": secs, "walk": w, "files": fl}
                    )
                    if vectors and args.cache:
                        save_cache(path, n)
                        fl = files(path)
                        total = sum(v["blocks"] for v in fl.values())
                        print(
                            f"After one vector search and close: {total / n:,.0f} B per memory; "
                            + ", ".join(
                                f"{k} {v['blocks'] / n:,.0f}"
                                for k, v in sorted(fl.items())
                                if v["blocks"]
                            )
                            + " B per memory.\n",
                            flush=True,
                        )
                        results[-1]["files_with_cache"] = fl
        finally:
            if not args.keep:
                shutil.rmtree(base, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
