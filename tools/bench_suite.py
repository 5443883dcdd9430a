"""Benchmark suite: cortex beside the raw-LMDB floor and the peers users would pick instead.

Every system gets the same records and the same queries (``tools/bench_peers/dataset.py``) and
runs in a subprocess of its own, so imports and peak memory do not interfere. Writes a JSON
file and a Markdown table (ratios against the floor and the peers first, absolute numbers
beside them).

    python tools/bench_suite.py            # quick: 1k, 10k, 100k (slow peers at the small sizes)
    python tools/bench_suite.py --full     # 10k, 100k, 1M (1M: cortex, the floor and SQLite)
    python tools/bench_suite.py --systems cortex,floor --sizes 10000

Peers (chromadb, sqlite-vec, mem0ai) come from ``tools/bench-requirements.txt``; ``make bench``
installs them into ``.venv-bench``. A missing peer is reported, not fatal. ``cortex-pg`` is cortex
itself on PostgreSQL (a private cluster of Debian's server binaries per size, at 10k and 100k):
the same workloads as the LMDB store's, its column's ratios are LMDB's time over PostgreSQL's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_peers import SYSTEMS  # noqa: E402
from bench_peers.report import markdown  # noqa: E402

# sizes each system runs at in each mode (the slow peers would take most of the time budget)
# (mem0 writes ~25-50 memories/s here and Chroma ~1,000/s, so they stop at smaller sizes; every
# size a slow peer runs at also runs cortex and the floor, so each peer has ratios.)
QUICK = {
    "cortex": (1_000, 10_000, 100_000),
    "floor": (1_000, 10_000, 100_000),
    "cortex-pg": (10_000, 100_000),  # the PostgreSQL issue's sizes
    "sqlite": (1_000, 10_000, 100_000),
    "chroma": (1_000, 10_000),
    "mem0": (1_000,),
}
FULL = {
    "cortex": (10_000, 100_000, 1_000_000),
    "floor": (10_000, 100_000, 1_000_000),
    "cortex-pg": (10_000, 100_000),
    "sqlite": (10_000, 100_000, 1_000_000),
    "chroma": (10_000, 100_000),
    "mem0": (10_000,),
}


def machine() -> dict[str, Any]:
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kb / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory": mem,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg_at_start": os.getloadavg(),
    }


def worker(args: argparse.Namespace) -> int:
    import importlib

    from bench_peers import harness

    modname = {"cortex": "cortex_adapter", "sqlite": "sqlite_peer"}.get(args.worker, args.worker)
    modname = {"chroma": "chroma_peer", "mem0": "mem0_peer", "cortex-pg": "cortex_pg"}.get(
        args.worker, modname
    )

    def log(msg: str) -> None:
        print(f"[{args.worker} {args.n:,}] {msg}", file=sys.stderr, flush=True)

    try:
        mod = importlib.import_module(f"bench_peers.{modname}")
    except ImportError as exc:
        out: dict[str, Any] = {"n": args.n, "unavailable": f"not installed: {exc}"}
    else:
        out = harness.run(
            mod.System,
            args.n,
            Path(args.dir),
            repeat=args.repeat,
            singles=args.singles,
            budget_s=args.budget,
            log=log,
        )
    out["system"] = args.worker
    Path(args.out).write_text(json.dumps(out, indent=2, default=str))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="all sizes, 1M for cortex and the floor")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--sizes", help="comma-separated sizes for every chosen system")
    ap.add_argument("--repeat", type=int, help="timed passes over each query set")
    ap.add_argument("--singles", type=int, help="durable one-per-transaction writes")
    ap.add_argument("--budget", type=float, help="seconds of timed calls per workload")
    ap.add_argument("--out", default="bench-results/latest", help="path without extension")
    ap.add_argument("--dir", help="scratch directory (default: a temporary one, removed)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.repeat is None:
        args.repeat = 5 if args.full else 3
    if args.singles is None:
        args.singles = 1000 if args.full else 300
    if args.budget is None:
        args.budget = 10.0 if args.full else 3.0
    if args.worker:
        return worker(args)

    plan = FULL if args.full else QUICK
    systems = [s for s in args.systems.split(",") if s]
    sizes = sorted(
        {int(x) for x in args.sizes.split(",")}
        if args.sizes
        else {n for s in systems for n in plan[s]}
    )
    root = Path(args.dir or tempfile.mkdtemp(prefix="cortex-suite-"))
    results: list[dict[str, Any]] = []
    started = time.time()
    info = machine()
    try:
        for n in sizes:
            for s in systems:
                if not args.sizes and n not in plan[s]:
                    continue
                wdir = root / str(n) / s
                wdir.mkdir(parents=True, exist_ok=True)
                out = root / f"{s}-{n}.json"
                cmd = [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    "--worker", s, "--n", str(n), "--dir", str(wdir), "--out", str(out),
                    "--repeat", str(args.repeat), "--singles", str(args.singles),
                    "--budget", str(args.budget),
                ]  # fmt: skip
                print(f"== {s} at {n:,}", file=sys.stderr, flush=True)
                t0 = time.time()
                proc = subprocess.run(cmd, check=False, env={**os.environ, **_peer_env()})
                if out.exists():
                    res = json.loads(out.read_text())
                else:
                    res = {"system": s, "n": n, "unavailable": f"worker exited {proc.returncode}"}
                res["wall_s"] = time.time() - t0
                results.append(res)
                if s != "cortex":  # the floor reads cortex's store; drop peers' stores now
                    shutil.rmtree(wdir, ignore_errors=True)
            shutil.rmtree(root / str(n), ignore_errors=True)
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    info["loadavg_at_end"] = os.getloadavg()
    doc = {
        "mode": "full" if args.full else "quick",
        "machine": info,
        "elapsed_s": time.time() - started,
        "repeat": args.repeat,
        "singles": args.singles,
        "results": results,
    }
    base = Path(args.out)
    base.parent.mkdir(parents=True, exist_ok=True)
    base.with_suffix(".json").write_text(json.dumps(doc, indent=2, default=str))
    md = markdown(doc)
    base.with_suffix(".md").write_text(md)
    print(md)
    print(f"\nwrote {base.with_suffix('.json')} and {base.with_suffix('.md')}", file=sys.stderr)
    return 0


def _peer_env() -> dict[str, str]:
    """Keep the peers offline and quiet (no telemetry, no model downloads); one BLAS thread.

    numpy's OpenBLAS would start a thread per core for every matrix-vector product, which on 2
    shared cores is slower (and far noisier) than one thread; SQLite and the others scan on one.
    """
    return {
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "ANONYMIZED_TELEMETRY": "False",
        "MEM0_TELEMETRY": "False",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }


if __name__ == "__main__":
    sys.exit(main())
