"""Bulk ingest with the store's own ids against caller-chosen random 16-byte ids.

An import from another system brings its own ids, in no order. This tool writes the bench
suite's records (``tools/bench_peers/dataset.py``, no vectors) in durable batches of 1,000
twice, into fresh stores: once with the ids cortex makes (time-ordered), once with random
16-byte ids given by the caller (``NewMemory(id=...)``), and prints the records per second per
tenth of the load, how much slower the last tenth is than the first, and the disk per memory.

    python tools/bench_random_ids.py [--size 50000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_peers.cortex_adapter import to_data
from bench_peers.dataset import make

from cortex import Cortex, MemoryId, NewMemory

BATCH = 1000


def run(n: int, random_ids: bool) -> None:
    ds = make(n)
    items = [
        NewMemory(
            data=to_data(ds, i),
            tags=ds.tags[i],
            importance=ds.importance[i],
            id=MemoryId(os.urandom(16)) if random_ids else None,
        )
        for i in range(n)
    ]
    tmp = Path(tempfile.mkdtemp(prefix="cortex-random-ids-"))
    try:
        tenth = max(BATCH, n // 10 // BATCH * BATCH)
        rates: list[float] = []
        with Cortex.open(tmp / "s", actor="bench", map_size=1 << 30) as cx:
            start = time.perf_counter()
            mark = start
            for lo in range(0, n, BATCH):
                cx.write_many(items[lo : lo + BATCH])
                if (lo + BATCH) % tenth == 0:
                    now = time.perf_counter()
                    rates.append(tenth / (now - mark))
                    mark = now
            total = time.perf_counter() - start
        size = sum(f.stat().st_size for f in (tmp / "s").rglob("*") if f.is_file())
        name = "caller's random ids" if random_ids else "the store's ids"
        print(
            f"{name:20s} {n / total:7,.0f} records/s; per tenth: "
            + " ".join(f"{r:,.0f}" for r in rates)
            + f"; the last tenth {rates[0] / rates[-1]:.2f}x slower than the first; "
            f"{size / n:,.0f} B per memory"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--size", type=int, default=50_000)
    args = ap.parse_args()
    for random_ids in (False, True):
        run(args.size, random_ids)


if __name__ == "__main__":
    main()
