"""Concurrent writers: 1, 2, 4 and 8 threads (and processes) each writing single durable memories.

    python tools/bench_concurrent.py [--sizes 10000,100000] [--seconds 2] [--repeat 3]
                                     [--writers 1,2,4,8] [--modes threads,processes] [--json OUT]
                                     [--trace]

For each store size a store is built once (``write_many`` in batches of 1,000, the data of
``tools/bench_store.py``); then, for each repeat, for each mode and each writer count (in that
order, so that the counts of one repeat share the machine's state), the writers each write
single memories with ``Cortex.write`` (durable: every write flushed before it returns) for
``--seconds``. Threads share one ``Cortex`` handle; processes (spawned) open their own.

Printed, per size, mode and writer count: the medians over the repeats of the throughput
(writes/s, all writers together), its ratio to one writer's throughput of the same repeat, and
the p50 and p95 latency of one write; the mean number of writes per commit (``last_txnid``
moves once per commit); and the CPU time per write (the writers' process CPU time over the
run, kernel time included: threads share one interpreter lock, so the Python part of it bounds
their throughput). The machine may be shared: the ratios measured in the same repeat are the
figures to read, not the absolute times.

``--trace`` (threads): each group's leader records its times (``_Commits.trace``), and a second
table gives, per writer count, the medians over the groups of the middle 80% of each run (then
over the repeats): the group's size; ``gather``, the leader's wait for the last groups' writers
to queue again; ``functions``, from then until its commit (the group's writes, run under the
interpreter lock); ``commit``, LMDB's commit (the data pages' flush included, under LMDB's writer
lock); and ``cycle``, from one group's start to the next one's.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing as mp
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(1, str(ROOT / "tools"))

from bench_store import make_item  # noqa: E402

from cortex import Cortex  # noqa: E402

MAP = 4 << 30


def _items(seed: int, n: int) -> list[Any]:
    rng = random.Random(seed)
    return [make_item(rng, 10_000_000 + seed * 100_000 + i) for i in range(n)]


def _write_for(cx: Cortex, items: list[Any], until: float) -> list[float]:
    """Write ``items`` one by one until ``until``; the latency of each write (seconds)."""
    lat = []
    for it in items:
        t0 = time.perf_counter()
        if t0 >= until:
            break
        cx.write(it.data, tags=it.tags, frames=it.frames, importance=it.importance)
        lat.append(time.perf_counter() - t0)
    return lat


def _kv_txnid(cx: Cortex) -> int:
    return int(cx._kv.last_txnid())


def run_threads(
    path: Path, k: int, seconds: float, seed: int, trace: list[Any] | None = None
) -> tuple[list[float], int, float]:
    pools = [_items(seed * 16 + w, int(seconds * 3000) + 100) for w in range(k)]
    with Cortex.open(path, actor="bench", map_size=MAP, check_pages=False) as cx:
        cx.write(pools[0][-1].data)  # warm: caches, the sidecar, the first commit
        cx._kv._shared.commits.trace = trace  # each group's times (``_Commits.trace``)
        start_txn = _kv_txnid(cx)
        barrier = threading.Barrier(k + 1)
        lats: list[list[float]] = [[] for _ in range(k)]
        until = [0.0]

        def worker(w: int) -> None:
            barrier.wait()
            lats[w] = _write_for(cx, pools[w][:-1], until[0])

        threads = [threading.Thread(target=worker, args=(w,)) for w in range(k)]
        for t in threads:
            t.start()
        until[0] = time.perf_counter() + seconds
        cpu = time.process_time()
        barrier.wait()
        for t in threads:
            t.join()
        cpu = time.process_time() - cpu
        commits = _kv_txnid(cx) - start_txn
        cx._kv._shared.commits.trace = None
    return [x for xs in lats for x in xs], commits, cpu


def group_times(trace: list[tuple[float, float, float, float, int]]) -> dict[str, float]:
    """Medians over a threads run's groups (``--trace``), in milliseconds but ``size``.

    ``gather``: the leader's wait for the last groups' writers; ``functions``: from then to its
    commit (the group's writes run, under the interpreter lock); ``commit``: LMDB's commit
    (its data flush included); ``cycle``: from one group's start to the next one's.
    """
    if len(trace) < 3:
        return {}
    t = trace[len(trace) // 10 : len(trace) - len(trace) // 10] or trace  # the steady middle
    med = statistics.median
    return {
        "groups": len(trace),
        "size": med(g[4] for g in t),
        "gather": med(g[1] - g[0] for g in t) * 1e3,
        "functions": med(g[2] - g[1] for g in t) * 1e3,
        "commit": med(g[3] - g[2] for g in t) * 1e3,
        "cycle": med(b[0] - a[0] for a, b in itertools.pairwise(t)) * 1e3,
    }


def _proc_main(path: str, seed: int, seconds: float, queues: tuple[Any, Any, Any]) -> None:
    ready, go, out = queues
    items = _items(seed, int(seconds * 3000) + 100)
    with Cortex.open(Path(path), actor="bench", map_size=MAP, check_pages=False) as cx:
        cx.write(items[-1].data)
        ready.put(os.getpid())
        until = go.get() + seconds
        cpu = time.process_time()
        lat = _write_for(cx, items[:-1], until)
        cpu = time.process_time() - cpu
    out.put((lat, cpu))


def run_processes(path: Path, k: int, seconds: float, seed: int) -> tuple[list[float], int, float]:
    ctx = mp.get_context("spawn")
    ready, go, out = ctx.Queue(), ctx.Queue(), ctx.Queue()
    procs = [
        ctx.Process(target=_proc_main, args=(str(path), seed * 16 + w, seconds, (ready, go, out)))
        for w in range(k)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get()
    with Cortex.open(path, actor="bench", map_size=MAP, check_pages=False) as cx:
        start_txn = _kv_txnid(cx)
        at = time.perf_counter() + 0.05  # perf_counter is system-wide (CLOCK_MONOTONIC)
        for _ in procs:
            go.put(at)
        got = [out.get() for _ in procs]
        for p in procs:
            p.join()
        commits = _kv_txnid(cx) - start_txn
    return [x for xs, _ in got for x in xs], commits, sum(c for _, c in got)


def build(path: Path, n: int) -> None:
    rng = random.Random(n)
    with Cortex.open(path, actor="bench", map_size=MAP, metasync=False) as cx:
        for b in range(0, n, 1000):
            cx.write_many([make_item(rng, i) for i in range(b, min(n, b + 1000))])
        cx._kv.sync()


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--writers", default="1,2,4,8")
    ap.add_argument("--modes", default="threads,processes")
    ap.add_argument("--json", type=Path)
    ap.add_argument(
        "--trace", action="store_true", help="threads: each group's gather, functions, commit"
    )
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    counts = [int(x) for x in args.writers.split(",")]
    modes = args.modes.split(",")
    runners = {"threads": run_threads, "processes": run_processes}
    print(f"cpus: {os.cpu_count()}, load: {os.getloadavg()[0]:.1f} (a shared machine: read ratios)")
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="cortex-bench-conc-") as tmp:
        for n in sizes:
            path = Path(tmp) / f"s{n}"
            t0 = time.perf_counter()
            build(path, n)
            print(f"\nN = {n:,} (built in {time.perf_counter() - t0:.0f} s)")
            rows: dict[tuple[str, int], list[dict[str, float]]] = {}
            traced: dict[int, list[dict[str, float]]] = {}
            for r in range(args.repeat):
                for mode in modes:
                    one = None
                    for k in counts:
                        seed = r * 100 + k
                        if mode == "threads" and args.trace:
                            trace: list[Any] = []
                            lat, commits, cpu = run_threads(path, k, args.seconds, seed, trace)
                            traced.setdefault(k, []).append(group_times(trace))
                        else:
                            lat, commits, cpu = runners[mode](path, k, args.seconds, seed)
                        rate = len(lat) / args.seconds
                        one = rate if k == counts[0] else one
                        rows.setdefault((mode, k), []).append(
                            {
                                "rate": rate,
                                "ratio": rate / one if one else float("nan"),
                                "p50": _pct(lat, 0.5),
                                "p95": _pct(lat, 0.95),
                                "per_commit": len(lat) / max(1, commits),
                                "cpu": cpu / max(1, len(lat)),
                            }
                        )
            print(
                f"{'mode':<10} {'writers':>7} {'writes/s':>9} {'x one':>6} "
                f"{'p50 ms':>7} {'p95 ms':>7} {'per commit':>10} {'CPU ms/write':>12}"
            )
            for (mode, k), rs in rows.items():
                med = {f: statistics.median(x[f] for x in rs) for f in rs[0]}
                print(
                    f"{mode:<10} {k:>7} {med['rate']:>9,.0f} {med['ratio']:>6.2f} "
                    f"{med['p50'] * 1e3:>7.2f} {med['p95'] * 1e3:>7.2f} "
                    f"{med['per_commit']:>10.2f} {med['cpu'] * 1e3:>12.2f}"
                )
                results.append({"n": n, "mode": mode, "writers": k, **med, "repeats": rs})
            if traced:
                print(
                    f"\n{'threads':>7} {'groups':>7} {'size':>5} {'gather ms':>9} "
                    f"{'functions ms':>12} {'commit ms':>9} {'cycle ms':>8}  (medians)"
                )
                for k, runs in traced.items():
                    ts = [t for t in runs if t]
                    if not ts:
                        continue
                    m = {f: statistics.median(x[f] for x in ts) for f in ts[0]}
                    print(
                        f"{k:>7} {m['groups']:>7,.0f} {m['size']:>5.1f} {m['gather']:>9.2f} "
                        f"{m['functions']:>12.2f} {m['commit']:>9.2f} {m['cycle']:>8.2f}"
                    )
                    results.append({"n": n, "mode": "threads-trace", "writers": k, **m})
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
