"""The write path's CPU cost: ``write_many`` and single writes, in CPU time per memory.

    python tools/bench_write_path.py [--size 5000] [--singles 300] [--repeat 7] [--json OUT]

Each repeat builds a fresh store: ``--size`` memories with ``write_many`` in batches of 1,000
(the data, tags and frames of ``tools/bench_store.py``), then ``--singles`` more with ``write``,
one transaction each. The figures are the process's CPU time (``time.process_time``) over the
calls, not wall-clock time: the disk's flushes and other work on a shared machine count less
(the store is opened with ``metasync=False``). Ids come from a counter (``store_digest``'s), the
clock is fixed and the data comes from a seeded generator, so every repeat does the same work.

Printed: the median CPU microseconds per memory of each phase over the repeats, and the spread
(min..max). To compare two builds of cortex, run the tool with each on ``PYTHONPATH``,
alternating, and compare the medians. For an instruction count instead of a time, run one
repeat under callgrind (it prints "Collected : N", the instructions) and subtract a run of
``--size 0 --singles 0`` (start-up and imports):

    valgrind --tool=callgrind python tools/bench_write_path.py --size 2000 --singles 0 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(1, str(ROOT / "tools"))

from bench_store import make_item  # noqa: E402
from store_digest import FixedClock, fixed_ids  # noqa: E402

from cortex import Cortex  # noqa: E402

BATCH = 1000


def one_run(size: int, singles: int) -> tuple[float, float]:
    """CPU seconds of the batched writes and of the single writes of one fresh store."""
    rng = random.Random(17)
    items = [make_item(rng, i) for i in range(size + singles)]
    batched = single = 0.0
    with (
        tempfile.TemporaryDirectory(prefix="cortex-bench-write-") as tmp,
        fixed_ids(),
        Cortex.open(Path(tmp) / "s", actor="bench", clock=FixedClock(), metasync=False) as cx,
    ):
        for start in range(0, size, BATCH):
            part = items[start : start + BATCH]
            t0 = time.process_time()
            cx.write_many(part)
            batched += time.process_time() - t0
        for item in items[size:]:
            t0 = time.process_time()
            cx.write(item.data, tags=item.tags, frames=item.frames, importance=item.importance)
            single += time.process_time() - t0
    return batched, single


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=5000)
    ap.add_argument("--singles", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    batched: list[float] = []
    single: list[float] = []
    for _ in range(args.repeat):
        b, s = one_run(args.size, args.singles)
        if args.size:
            batched.append(b / args.size * 1e6)
        if args.singles:
            single.append(s / args.singles * 1e6)
    out: dict[str, Any] = {"size": args.size, "singles": args.singles, "repeat": args.repeat}
    for name, xs in (("write_many", batched), ("write", single)):
        if xs:
            out[name] = {"median_us": statistics.median(xs), "min_us": min(xs), "max_us": max(xs)}
            print(
                f"{name:<10} {statistics.median(xs):8.2f} µs CPU a memory "
                f"(median of {len(xs)}; {min(xs):.2f}..{max(xs):.2f})"
            )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
