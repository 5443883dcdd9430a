"""The two hot reads of the bench suite, get by id and find type + tag, beside SQLite and the floor.

A quick check of ``tools/bench_suite.py``'s ``get`` and ``find_type_tag`` workloads without its
other workloads: the same data set, the same adapters and the same calls, but the systems are
timed in alternating rounds in one process, so a loaded machine slows all of them alike and the
ratios (cortex ÷ SQLite, cortex ÷ floor; medians over rounds) stay comparable between runs.
Needs the bench environment (``make .venv-bench/.installed``)::

    .venv-bench/bin/python tools/bench_reads.py --n 10000 --rounds 7 [--clock cpu]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_peers import cortex_adapter, floor, sqlite_peer
from bench_peers.dataset import make
from bench_peers.harness import BATCH

import cortex


def _per_call(call: Callable[[Any], Any], items: list[Any], clock: Callable[[], float]) -> float:
    """Median seconds per call over ``items``."""
    times = []
    for x in items:
        t = clock()
        call(x)
        times.append(clock() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="cpu: this process's CPU time (steadier than wall time on a shared machine)",
    )
    args = ap.parse_args()
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    ds = make(args.n)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr)

    with tempfile.TemporaryDirectory() as d:
        systems: dict[str, Any] = {}
        for name, mod in (("cortex", cortex_adapter), ("floor", floor), ("sqlite", sqlite_peer)):
            path = Path(d) / name
            sys_ = mod.System(path, ds, log)  # type: ignore[attr-defined]
            for b in range(0, args.n, BATCH):
                sys_.ingest_batch(b, min(b + BATCH, args.n))
            sys_.after_ingest()
            systems[name] = sys_
            log(f"{name}: {args.n:,} ingested")
        work: dict[str, tuple[list[Any], Callable[[Any, Any], Any]]] = {
            "get": (ds.get_ids, lambda s, i: s.get(i)),
            "find_type_tag": (ds.filters, lambda s, f: s.find(f[0], f[1], 10)),
        }
        out: dict[str, Any] = {
            "cortex": cortex.__file__,
            "n": args.n,
            "rounds": args.rounds,
            "clock": args.clock,
        }
        for wname, (items, call) in work.items():
            per: dict[str, list[float]] = {s: [] for s in systems}
            for s in systems.values():
                s.prepare(wname)
                for x in items[:20]:
                    call(s, x)  # warm up
            for _ in range(args.rounds):
                for sname, s in systems.items():
                    per[sname].append(_per_call(lambda x, s=s, c=call: c(s, x), items, clock))
            med = {s: statistics.median(v) * 1e6 for s, v in per.items()}
            ratios = {
                "cortex/sqlite": [c / q for c, q in zip(per["cortex"], per["sqlite"], strict=True)],
                "cortex/floor": [c / f for c, f in zip(per["cortex"], per["floor"], strict=True)],
            }
            out[wname] = {
                "p50_us": {s: round(v, 2) for s, v in med.items()},
                "ratio": {k: round(statistics.median(v), 3) for k, v in ratios.items()},
                "ratio_range": {k: [round(min(v), 3), round(max(v), 3)] for k, v in ratios.items()},
            }
        for s in systems.values():
            s.close()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
