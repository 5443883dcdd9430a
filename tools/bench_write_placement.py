"""Where a commit's pages land, and what that costs a single durable write: the same store twice.

    python tools/bench_write_placement.py [--size 100000] [--rounds 10] [--per-round 100]

LMDB never rewrites a page in place: a commit writes every page it changes to a free page
(from the oldest records of its free list, lowest page number first) or past the end of the
file, and writes each run of consecutive page numbers in one system call. So what a durable
commit costs on a disk depends on how the store's free pages lie, not only on how many pages
it changes.

This builds a store of ``--size`` memories as ``make bench`` does (``tools/bench_peers``:
``write_many`` in durable batches of 1,000, the same records and precomputed vectors), copies
it, and in the copy deletes and puts back, unchanged and in one commit, the heads, versions,
lexical documents and vectors (``m/``, ``mv/``, ``lex/d/``, ``vec/``: the same keys and bytes
in the same databases; ``bench_write_replay.py``'s rewrite, with ``row_major`` off). The copy
then holds the same memories in the same layout, with long runs of free pages where those
keyspaces' pages were. Both stores then take turns, ``--per-round`` single durable writes each
(the bench's ``ingest_single``, alternating which goes first), for ``--rounds`` rounds.

Printed, for each store: the p50, mean and p90 of a write, the write system calls a commit
made (``syscw`` of ``/proc/self/io``: one per run of consecutive pages), and the p50 of each
round (the free runs are used up as the writes go on).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(1, str(ROOT / "tools"))

from bench_peers import cortex_adapter  # noqa: E402
from bench_peers.dataset import make  # noqa: E402
from bench_peers.harness import build  # noqa: E402
from bench_write_pages import io_counts  # noqa: E402
from bench_write_replay import rewrite_records  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--per-round", type=int, default=100)
    ap.add_argument("--dir", type=Path, help="where the stores go (default: a temporary one)")
    args = ap.parse_args(argv)
    warm = 100
    per_store = warm + args.rounds * args.per_round
    ds = make(args.size, n_extra=2 * per_store)
    tmp = Path(tempfile.mkdtemp(prefix="cortex-write-placement-", dir=args.dir))
    try:
        (tmp / "as built").mkdir()
        build(cortex_adapter.System(tmp / "as built", ds, print), args.size).close()
        shutil.copytree(tmp / "as built", tmp / "rewritten")
        rewrite_records(tmp / "rewritten" / "store", row_major=False)
        names = ("as built", "rewritten")
        systems = {}
        extra = {}
        for k, name in enumerate(names):
            s = cortex_adapter.System(tmp / name, ds, print)
            s.prepare("ingest_single")
            systems[name] = s
            extra[name] = iter(ds.extra[k * per_store : (k + 1) * per_store])
            for _ in range(warm):
                s.ingest_one(next(extra[name]))
        lat: dict[str, list[float]] = {n: [] for n in names}
        calls: dict[str, list[int]] = {n: [] for n in names}
        for r in range(args.rounds):
            for name in names if r % 2 == 0 else names[::-1]:
                s, it = systems[name], extra[name]
                for _ in range(args.per_round):
                    c0 = io_counts()[1]
                    t0 = time.perf_counter()
                    s.ingest_one(next(it))
                    lat[name].append((time.perf_counter() - t0) * 1e6)
                    calls[name].append(io_counts()[1] - c0)
        for s in systems.values():
            s.close()
        print(
            f"N = {args.size:,}, {args.rounds} rounds of {args.per_round} single durable writes"
            " into each store, taking turns"
        )
        for name in names:
            xs = lat[name]
            rounds = [
                statistics.median(xs[i : i + args.per_round])
                for i in range(0, len(xs), args.per_round)
            ]
            print(
                f"{name:<10} p50 {statistics.median(xs):6,.0f} µs, "
                f"mean {statistics.mean(xs):6,.0f},"
                f" p90 {statistics.quantiles(xs, n=10)[8]:6,.0f}; write calls a commit: median "
                f"{statistics.median(calls[name]):.0f}, mean {statistics.mean(calls[name]):.1f};"
                f" p50 by round: {' '.join(f'{x:,.0f}' for x in rounds)}"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
