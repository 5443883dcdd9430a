"""Tool-call latency of ``cortex serve`` (stdio and HTTP) against the same calls in-process.

A store of 10,000 memories (lexical index, no embedder) is built once; then search (the
router, ``memory_search``), find by text (``memory_find``), write (``memory_write``, one durable
commit each) and context (``memory_context``) are each called ``--calls`` times after a warm-up:
in-process on a ``Cortex`` handle, over stdio (``cortex serve`` as a subprocess) and over
streamable HTTP on loopback with a bearer token, both driven by the MCP SDK's client. Figures
are p50 / p95 in milliseconds. ``--async`` also measures the event loop's lag (a 1 ms sleep,
again and again) while 8 tasks write and search through ``AsyncCortex``, and the same work
done with blocking calls on the loop for contrast.

    python tools/bench_mcp.py [--memories 10000] [--calls 200] [--async]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from cortex import AsyncCortex, Cortex, Fact, NewMemory, Query

WORDS = [
    "ada",
    "bob",
    "zurich",
    "basel",
    "lisbon",
    "tea",
    "coffee",
    "flight",
    "hotel",
    "budget",
    "meeting",
    "report",
    "chess",
    "piano",
    "train",
    "museum",
    "river",
    "garden",
    "market",
    "invoice",
    "project",
    "deadline",
    "review",
    "email",
    "call",
]


def fact(i: int) -> Fact:
    w = [WORDS[(i * k + 3) % len(WORDS)] for k in (1, 7, 13, 19)]
    return Fact(
        statement=f"{w[0]} {w[1]} noted {w[2]} near {w[3]} #{i}", subject=w[0], predicate=w[1]
    )


def build(path: Path, n: int) -> None:
    with Cortex.open(path, actor="agent-1") as cx:
        for start in range(0, n, 1000):
            cx.write_many(
                [
                    NewMemory(data=fact(i), tags=[WORDS[i % 7]], importance=i % 10)
                    for i in range(start, min(n, start + 1000))
                ]
            )


def pct(xs: list[float]) -> tuple[float, float]:
    xs = sorted(xs)
    return xs[len(xs) // 2] * 1000, xs[min(len(xs) - 1, int(len(xs) * 0.95))] * 1000


OPS: list[tuple[str, str, Callable[[int], dict[str, Any]]]] = [
    ("search", "memory_search", lambda i: {"query": f"where is {WORDS[i % 20]}", "topK": 10}),
    ("find (text)", "memory_find", lambda i: {"text": f"{WORDS[i % 20]} {WORDS[(i + 5) % 20]}"}),
    (
        "write",
        "memory_write",
        lambda i: {
            "type": "Fact",
            "data": {"statement": f"bench note {i}", "subject": "bench", "predicate": "note"},
        },
    ),
    (
        "context",
        "memory_context",
        lambda i: {"verb": "find", "objects": [WORDS[i % 20]], "query": WORDS[(i + 3) % 20]},
    ),
]


def in_process(path: Path, calls: int, warm: int) -> dict[str, tuple[float, float]]:
    out = {}
    with Cortex.open(path, actor=None) as cx:
        fns: dict[str, Callable[[int], Any]] = {
            "search": lambda i: cx.search(f"where is {WORDS[i % 20]}", limit=10),
            "find (text)": lambda i: cx.find(
                Query(text=f"{WORDS[i % 20]} {WORDS[(i + 5) % 20]}", limit=10, budget_tokens=2000)
            ),
            "write": lambda i: cx.write(
                Fact(statement=f"bench note p{i}", subject="bench", predicate="note")
            ),
            "context": lambda i: cx.context(
                "find", [WORDS[i % 20]], 2000, query=WORDS[(i + 3) % 20]
            ),
        }
        for name, fn in fns.items():
            for i in range(warm):
                fn(i)
            times = []
            for i in range(calls):
                t = time.perf_counter()
                fn(warm + i)
                times.append(time.perf_counter() - t)
            out[name] = pct(times)
    return out


async def over(client: Client, calls: int, warm: int) -> dict[str, tuple[float, float]]:
    out = {}
    async with client as c:
        for name, tool, args in OPS:
            for i in range(warm):
                await c.call_tool(tool, args(i))
            times = []
            for i in range(calls):
                t = time.perf_counter()
                r = await c.call_tool(tool, args(10_000 + i))
                times.append(time.perf_counter() - t)
                if r.is_error:
                    raise RuntimeError(f"{tool}: {r.content}")
            out[name] = pct(times)
    return out


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}


def stdio(path: Path, calls: int, warm: int) -> dict[str, tuple[float, float]]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "cortex", "--store", str(path), "serve", "--write-budget", "none"],
        env=env(),
    )
    return anyio.run(over, Client(params), calls, warm)


def http(path: Path, calls: int, warm: int, tmp: Path) -> dict[str, tuple[float, float]]:
    tokens = tmp / "tokens.json"
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "cortex", "--store", str(path), "serve", "--http",
            "--port", "0", "--tokens", str(tokens), "--init-tokens", "--write-budget", "none",
        ],
        env=env(),
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    token = url = None
    while url is None:
        line = proc.stderr.readline()
        if not line:
            raise RuntimeError("the server did not start")
        if line.startswith("ctx_"):
            token = line.strip()
        if "serving" in line:
            url = line.split(" at ", 1)[1].split(" ", 1)[0]

    async def run() -> dict[str, tuple[float, float]]:
        async with httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, timeout=60
        ) as h:
            return await over(Client(streamable_http_client(url, http_client=h)), calls, warm)

    try:
        return anyio.run(run)
    finally:
        proc.terminate()
        proc.wait(30)
        proc.stderr.close()


async def loop_lag(path: Path, blocking: bool, rounds: int) -> dict[str, float]:
    lags: list[float] = []
    stop = asyncio.Event()

    async def probe() -> None:
        while not stop.is_set():
            t = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append(time.perf_counter() - t - 0.001)

    async with await AsyncCortex.open(path, actor=None) as cx:

        async def task(k: int) -> None:
            for i in range(rounds):
                data = Fact(statement=f"task {k} wrote {i}", subject=f"t{k}", predicate="n")
                q = Query(text=f"{WORDS[(k + i) % 20]} {WORDS[i % 20]}", limit=10)
                if blocking:  # the same calls made on the loop: what AsyncCortex avoids
                    cx.sync.write(data)
                    cx.sync.find(q)
                    await asyncio.sleep(0)
                else:
                    await cx.write(data)
                    await cx.find(q)

        p = asyncio.create_task(probe())
        t0 = time.perf_counter()
        work: list[Awaitable[None]] = [task(k) for k in range(8)]
        await asyncio.gather(*work)
        elapsed = time.perf_counter() - t0
        stop.set()
        await p
    lags.sort()
    return {
        "p50": lags[len(lags) // 2] * 1000,
        "p95": lags[int(len(lags) * 0.95)] * 1000,
        "p99": lags[int(len(lags) * 0.99)] * 1000,
        "max": lags[-1] * 1000,
        "ticks": len(lags),
        "seconds": elapsed,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--warm", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3, help="runs per transport; medians reported")
    ap.add_argument("--async", dest="aio", action="store_true", help="also the loop-lag probe")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-mcp-") as d:
        tmp = Path(d)
        path = tmp / "store.cortex"
        t = time.perf_counter()
        build(path, args.memories)
        took = time.perf_counter() - t
        print(f"built {args.memories} memories in {took:.1f} s; {args.calls} calls per operation,")
        print(f"median of {args.repeat} runs, p50 / p95 ms\n")
        runs: dict[str, list[dict[str, tuple[float, float]]]] = {
            "in-process": [], "stdio": [], "HTTP": []
        }  # fmt: skip
        for r in range(args.repeat):
            runs["in-process"].append(in_process(path, args.calls, args.warm))
            runs["stdio"].append(stdio(path, args.calls, args.warm))
            runs["HTTP"].append(http(path, args.calls, args.warm, tmp / f"h{r}"))
        print("| operation | in-process | stdio | HTTP (loopback, bearer token) |")
        print("|---|---:|---:|---:|")
        for name, _, _ in OPS:
            cells = []
            for where in ("in-process", "stdio", "HTTP"):
                p50 = statistics.median(run[name][0] for run in runs[where])
                p95 = statistics.median(run[name][1] for run in runs[where])
                cells.append(f"{p50:.2f} / {p95:.2f}")
            print(f"| {name} | {' | '.join(cells)} |")
        if args.aio:
            print("\nevent-loop lag (1 ms probe) while 8 tasks write and search, ms:")
            for blocking in (False, True):
                lag = asyncio.run(loop_lag(path, blocking, 40))
                how = "blocking calls on the loop" if blocking else "AsyncCortex"
                print(
                    f"  {how}: p50 {lag['p50']:.2f}, p95 {lag['p95']:.2f}, p99 {lag['p99']:.2f}, "
                    f"max {lag['max']:.1f} ({lag['ticks']} ticks in {lag['seconds']:.2f} s)"
                )


if __name__ == "__main__":
    main()
