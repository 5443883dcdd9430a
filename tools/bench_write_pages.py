"""Which B-trees a single durable write's commit rewrites, page by page, beside the bench's floor.

    python tools/bench_write_pages.py [--size 100000] [--writes 60] [--dir DIR]

Issue 18 asks for a single durable write within 1.3x the floor of ``make bench`` (raw LMDB
putting the same records' bytes into one tree, one durable commit each). A durable commit's
cost on a disk is mostly the pages it writes (LMDB copies every page it changes, and the whole
path from each changed leaf to its tree's root, to a new place), so this counts them.

It builds a store of ``--size`` memories as ``make bench`` does (``tools/bench_peers``: the same
records, tags, importance and precomputed vectors, ``write_many`` in durable batches of 1,000),
writes 100 single memories to warm it, then ``--writes`` more, one durable ``write`` each (the
bench's ``ingest_single``). For each commit it reads:

- **written**: the bytes the process handed the kernel to write (``wchar`` of
  ``/proc/self/io``: LMDB's ``pwrite`` and ``writev`` of the commit's pages and of its meta
  page), in 4 KiB pages, and the **write calls** that took them (``syscw``): LMDB writes each
  run of consecutive page numbers in one call, so the calls count the places in the file a
  commit writes to, which on a disk cost more than the pages themselves;
- **by tree**: the pages of the new snapshot that the one before did not have (LMDB never
  rewrites a page in place, so these are the commit's), each named by the tree that holds it,
  found by walking every tree of the snapshot from the meta page (``cortex.storage.pages``'s
  walker): the main tree, each named database, each tree of one key's duplicates ("dups of
  idx/tag/"), and LMDB's free-page tree.

Then the bench's floor (``tools/bench_peers/floor.py``) builds its store from the same records
and writes the same memories one durable commit each; its written pages are counted alike.

Printed: the written pages per commit (median, mean, 90th percentile, largest) of both; and
for cortex the pages of each tree in the median commit and their mean over the commits below
the 75th percentile (those without a fold of the lexical index's segments, which rewrites
hundreds of posting pages about once every 30 writes).
"""

from __future__ import annotations

import argparse
import collections
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(1, str(ROOT / "tools"))

from bench_peers import cortex_adapter, floor  # noqa: E402
from bench_peers.dataset import make  # noqa: E402
from bench_peers.harness import build  # noqa: E402

from cortex.storage import pages  # noqa: E402
from cortex.storage.keys import DATABASE_PREFIX  # noqa: E402

PAGE = 4096


def io_counts() -> tuple[int, int]:
    """Bytes this process has handed to write system calls so far, and how many calls."""
    got = {}
    with open("/proc/self/io", encoding="ascii") as f:
        for line in f:
            name, _, value = line.partition(":")
            got[name] = int(value)
    return got["wchar"], got["syscw"]


class _Owners(pages._Check):
    """The page checker's walk, noting which tree each page belongs to."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.owner: dict[int, str] = {}
        self.current = "?"

    def tree(self, tree: pages.Tree, name: str, integer_keys: bool) -> None:
        outer = self.current
        self.current = f"dups of {outer}" if name.startswith("duplicates") else name
        try:
            super().tree(tree, name, integer_keys)
        finally:
            self.current = outer

    def claim(self, pgno: int, what: str, count: int = 1) -> bool:
        ok = super().claim(pgno, what, count)
        for p in range(pgno, pgno + count):
            self.owner[p] = self.current
        return ok


def owners(store: Path) -> dict[int, str]:
    """Page number -> the tree holding it, for every page of the store's newest snapshot."""
    with pages.DataFile(store / "data.mdb") as f:
        meta = pages.newest(pages.read_metas(f))
        if meta is None:
            raise RuntimeError("no valid meta page")
        f.psize = meta.psize
        walk = _Owners(f, meta, None, 1 << 30)
        walk.in_main = True  # its leaves hold the named databases' records
        walk.tree(meta.main, "main", integer_keys=False)
        walk.in_main = False
        for name, tree in walk.named:
            shown = name[len(DATABASE_PREFIX) :].decode("ascii", "replace")
            walk.tree(tree, shown, integer_keys=False)
        walk.tree(meta.free, "free pages", integer_keys=True)
        if walk.problems:
            raise RuntimeError(f"the walk found problems: {walk.problems[:3]}")
        return walk.owner


def _summary(name: str, written: list[float], calls: list[int]) -> str:
    xs = sorted(written)
    return (
        f"{name:<8} written pages a commit: median {statistics.median(xs):.1f}, mean "
        f"{statistics.mean(xs):.1f}, p90 {xs[int(0.9 * (len(xs) - 1))]:.1f}, largest {xs[-1]:.1f};"
        f" write calls a commit: median {statistics.median(calls):.1f}, mean "
        f"{statistics.mean(calls):.1f}"
    )


def _measure(system: Any, extra: Any, n: int) -> tuple[list[float], list[int]]:
    """``n`` single writes: the pages each commit wrote, and the write calls it made."""
    written: list[float] = []
    calls: list[int] = []
    for _ in range(n):
        w0, c0 = io_counts()
        system.ingest_one(next(extra))
        w1, c1 = io_counts()
        written.append((w1 - w0) / PAGE)
        calls.append(c1 - c0)
    return written, calls


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--writes", type=int, default=60)
    ap.add_argument("--dir", type=Path, help="where the stores go (default: a temporary one)")
    args = ap.parse_args(argv)
    warm = 100
    ds = make(args.size, n_extra=warm + args.writes)
    tmp = Path(tempfile.mkdtemp(prefix="cortex-write-pages-", dir=args.dir))
    try:
        (tmp / "cortex").mkdir()
        cx = build(cortex_adapter.System(tmp / "cortex", ds, print), args.size)
        cx.prepare("ingest_single")
        extra = iter(ds.extra)
        for _ in range(warm):
            cx.ingest_one(next(extra))
        before = owners(cx.path)
        written: list[float] = []
        calls: list[int] = []
        commits: list[tuple[int, collections.Counter[str]]] = []
        for _ in range(args.writes):
            w, c = _measure(cx, extra, 1)
            written += w
            calls += c
            after = owners(cx.path)
            commits.append(
                (
                    sum(1 for p in after if p not in before),
                    collections.Counter(after[p] for p in after if p not in before),
                )
            )
            before = after
        cx.close()

        fl = build(floor.System(tmp / "floor", ds, print), args.size)
        extra = iter(ds.extra)
        for _ in range(warm):
            fl.ingest_one(next(extra))
        floor_written, floor_calls = _measure(fl, extra, args.writes)

        print(f"N = {args.size:,}, {args.writes} single durable writes each")
        print(_summary("cortex", written, calls))
        print(_summary("floor", floor_written, floor_calls))
        commits.sort(key=lambda c: c[0])
        median = commits[len(commits) // 2]
        usual = commits[: max(1, len(commits) * 3 // 4)]
        mean: collections.Counter[str] = collections.Counter()
        for _, c in usual:
            mean.update(c)
        print(f"cortex, new pages of the snapshot by tree (median commit: {median[0]} pages)")
        print(f"  {'tree':<22} {'median commit':>13} {'mean, lower 3/4':>15}")
        for tree, n in mean.most_common():
            print(f"  {tree:<22} {median[1].get(tree, 0):>13} {n / len(usual):>15.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
