"""``search`` right after a change: what keeping the router's entity names saves.

    python tools/bench_search_after.py [--size 20000] [--rounds 7] [--dir /dev/shm]

Builds a store of ``--size`` memories (``tools/bench_store.py``'s records, ``write_many`` in
batches of 1,000), times the handle's first ``search`` (the entity names read from every
memory), then ``--rounds`` times: a new memory, an update and a tombstone, each followed by a
timed ``search`` of the same question. Printed: the first search and the median of each
kind, in milliseconds of wall time. A ``search`` whose names are kept costs what the router
and its handler cost; one that reads every memory again costs that plus the read.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "tools"))

from bench_store import make_item  # noqa: E402

from cortex import Cortex, MemoryType, Query  # noqa: E402

QUESTION = "what did Ana say about the budget?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--dir", default=None, help="where to build the store (default: a temp dir)")
    args = ap.parse_args(argv)
    rng = random.Random(3)
    with (
        tempfile.TemporaryDirectory(dir=args.dir, prefix="cortex-search-after-") as tmp,
        Cortex.open(Path(tmp) / "s", actor="bench") as cx,
    ):
        for b in range(0, args.size, 1000):
            cx.write_many([make_item(rng, i) for i in range(b, min(args.size, b + 1000))])

        def timed() -> float:
            t = time.perf_counter()
            cx.search(QUESTION)
            return (time.perf_counter() - t) * 1e3

        first = timed()
        found = cx.find(Query(types=tuple(MemoryType), limit=2 * args.rounds)).memories
        ids = [m.uri.id for m in found]
        after: dict[str, list[float]] = {"a new memory": [], "an update": [], "a tombstone": []}
        for i in range(args.rounds):
            it = make_item(rng, args.size + i)
            cx.write(it.data, tags=it.tags)
            after["a new memory"].append(timed())
            cx.update(ids[i], cx.resolve_latest(ids[i]).data)
            after["an update"].append(timed())
            cx.tombstone(ids[args.rounds + i], reason="bench")
            after["a tombstone"].append(timed())
    print(f"{args.size:,} memories: the first search {first:.1f} ms")
    for what, ms in after.items():
        print(f"search after {what}: median {statistics.median(ms):.1f} ms (of {len(ms)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
