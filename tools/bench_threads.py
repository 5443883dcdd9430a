"""Reads from several threads, and beside a thread running Python: the map's reads against LMDB's.

    python tools/bench_threads.py [--size 10000] [--seconds 1.0] [--repeat 3] [--threads 1,2,4]

py-lmdb releases the interpreter lock around every LMDB call; a reading thread then waits for
it back whenever another thread runs Python (up to the switch interval, 5 ms), and threads
reading together hand it to each other at every call. Read snapshots read the data file's map
in C holding the lock (``cortex._speedups.MapFile``, ``specs/storage.md`` "Reads from the
map"). This measures both ways in one process, alternating (``cortex.storage.kv._MAP_READS``),
on a store of ``--size`` memories built as ``make bench`` builds its own (``bench_store``):

- **get**: ``resolve_latest`` of random ids (a get by id: its row, head and version);
- **text**: ``find(Query(text=two words, limit=10))`` (BM25 over the lexical index, then
  accept);
- **type + tag**: ``find(Query(types=[Event], tags=[tag], limit=10))``;

each with 1, 2, 4 threads reading together (all of the threads' operations per second), and
with one reader beside a thread that runs a Python loop (the reader's operations per second);
and text finds from 8 asyncio tasks through ``AsyncCortex`` (its worker threads).
Printed: medians over ``--repeat`` rounds, and each map ÷ LMDB ratio of throughput.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "tools"))

from bench_store import TAGS, WORDS, make_item  # noqa: E402

from cortex import AsyncCortex, Cortex, MemoryType, Query  # noqa: E402
from cortex.storage import kv as kvmod  # noqa: E402


def _words(rng: random.Random) -> str:
    """A text query: two of the store's words (``bench_store.WORDS``)."""
    return f"{rng.choice(WORDS)} {rng.choice(WORDS)}"


def _build(path: Path, n: int) -> None:
    rng = random.Random(n)
    with Cortex.open(path, actor="bench", map_size=4 << 30, metasync=False) as cx:
        for b in range(0, n, 1000):
            cx.write_many([make_item(rng, i) for i in range(b, min(n, b + 1000))])


def _rate(op: Callable[[random.Random], Any], threads: int, seconds: float) -> float:
    """Operations per second of ``threads`` threads running ``op`` for ``seconds``."""
    counts = [0] * threads
    start = threading.Barrier(threads + 1)
    until = [0.0]

    def run(i: int) -> None:
        rng = random.Random(i)
        start.wait()
        n = 0
        while time.perf_counter() < until[0]:
            op(rng)
            n += 1
        counts[i] = n

    ts = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    until[0] = time.perf_counter() + seconds
    start.wait()
    for t in ts:
        t.join()
    return sum(counts) / seconds


def _beside_busy(op: Callable[[random.Random], Any], seconds: float) -> float:
    """One reader's operations per second while another thread runs a Python loop."""
    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            sum(range(1000))

    b = threading.Thread(target=busy)
    b.start()
    try:
        return _rate(op, 1, seconds)
    finally:
        stop.set()
        b.join()


def _async_rate(path: Path, tasks: int, seconds: float) -> float:
    """Text finds per second of ``tasks`` asyncio tasks through ``AsyncCortex``.

    Its pool of worker threads runs them: an MCP server's or an async agent's reads.
    """

    async def run() -> float:
        async with await AsyncCortex.open(path, actor="bench", check_pages=False) as acx:
            until = time.perf_counter() + seconds
            counts = [0] * tasks

            async def task(i: int) -> None:
                rng = random.Random(i)
                while time.perf_counter() < until:
                    await acx.find(Query(text=_words(rng), limit=10))
                    counts[i] += 1

            await asyncio.gather(*(task(i) for i in range(tasks)))
            return sum(counts) / seconds

    return asyncio.run(run())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", default="1,2,4")
    args = ap.parse_args()
    counts = [int(x) for x in args.threads.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "store"
        _build(path, args.size)
        with Cortex.open(path, actor="bench", map_size=4 << 30, check_pages=False) as cx:
            res = cx.find(Query(tags=[TAGS[0]], limit=1000))
            ids = [h.uri.id for h in res.hits]
            ops: dict[str, Callable[[random.Random], Any]] = {
                "get": lambda rng: cx.resolve_latest(rng.choice(ids)),
                "text": lambda rng: cx.find(Query(text=_words(rng), limit=10)),
                "type + tag": lambda rng: cx.find(
                    Query(types=[MemoryType.EVENT], tags=[rng.choice(TAGS)], limit=10)
                ),
            }
            rows: dict[tuple[str, str, bool], list[float]] = {}
            for _ in range(args.repeat):
                for name, op in ops.items():
                    for on in (True, False):
                        kvmod._MAP_READS = on
                        for k in counts:
                            rows.setdefault((name, f"{k} thread{'s' if k > 1 else ''}", on), [])
                            rows[(name, f"{k} thread{'s' if k > 1 else ''}", on)].append(
                                _rate(op, k, args.seconds)
                            )
                        rows.setdefault((name, "1 beside a busy thread", on), []).append(
                            _beside_busy(op, args.seconds)
                        )
                for on in (True, False):
                    kvmod._MAP_READS = on
                    rows.setdefault(("text", "8 AsyncCortex tasks", on), []).append(
                        _async_rate(path, 8, args.seconds)
                    )
            kvmod._MAP_READS = True
    print(f"N = {args.size:,}, medians of {args.repeat} rounds (operations per second)")
    print(f"{'workload':11} {'readers':24} {'map':>10} {'LMDB':>10} {'map/LMDB':>9}")
    for name, who, on in rows:
        if not on:
            continue
        m = statistics.median(rows[(name, who, True)])
        lm = statistics.median(rows[(name, who, False)])
        print(f"{name:11} {who:24} {m:10,.0f} {lm:10,.0f} {m / lm:8.2f}x")


if __name__ == "__main__":
    main()
