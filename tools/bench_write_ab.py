"""CPU per single durable write of two checkouts, in paired rounds: a load-tolerant A/B.

    python tools/bench_write_ab.py CHECKOUT_A CHECKOUT_B [--size 10000] [--per-round 50]
        [--rounds 100] [--no-lexical-flush]

Each checkout (a directory holding ``cortex/`` with its C extension built, and ``tools/``) runs
in a process of its own that builds a store of ``--size`` memories as ``make bench`` does
(``tools/bench_peers``: the same records and precomputed vectors, ``write_many`` in batches of
1,000), then waits. The two then take turns, ``--per-round`` single durable writes each (the
bench's ``ingest_single``), the first to go alternating from round to round, and each reports
the CPU time (process time: user and kernel) and the wall time per write of its turn. Printed,
for each: each checkout's median over the rounds and the median (and quartiles) of the
per-round ratio B / A.

On a shared machine wall-clock figures of one run against another are noise; CPU time in turns
that follow each other sees the same load. Run A against A once to see the harness's own
spread (A/A medians of 0.96 and 1.05 were seen on the loaded 2-core machine).

``--no-lexical-flush`` replaces ``Indexer.flush`` with a no-op in both (a measurement of the
rest of the write only: the stores are then wrong) to magnify what changed outside it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def child(size: int, per_round: int, rounds: int, no_flush: bool) -> None:
    """Build the store, say ``ready``, then per line read run a turn and print its CPU."""
    sys.path.insert(0, str(Path(os.environ["PYTHONPATH"]) / "tools"))
    from bench_peers import cortex_adapter as ca
    from bench_peers.dataset import make

    ds = make(size + 200 + per_round * rounds)
    s = ca.System(Path(tempfile.mkdtemp()), ds, lambda *a: None)
    for b in range(0, size, 1000):
        s.ingest_batch(b, min(b + 1000, size))
    i = size
    for _ in range(200):  # warm: the caches and the first pages
        s.ingest_one(i)
        i += 1
    if no_flush:
        from cortex.index import lexical

        lexical.Indexer.flush = lambda self, *puts: None  # type: ignore[method-assign]
    print("ready", flush=True)
    for _ in sys.stdin:
        c, w = time.process_time(), time.perf_counter()
        for _ in range(per_round):
            s.ingest_one(i)
            i += 1
        cpu = (time.process_time() - c) / per_round * 1e6
        wall = (time.perf_counter() - w) / per_round * 1e6
        print(f"{cpu:.1f} {wall:.1f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--size", type=int, default=10_000)
    ap.add_argument("--per-round", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--no-lexical-flush", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.size, args.per_round, args.rounds, args.no_lexical_flush)
        return
    trees = [str(Path(args.a).resolve()), str(Path(args.b).resolve())]
    procs = []
    for t in trees:
        cmd = [sys.executable, str(Path(__file__).resolve()), t, t, "--child"]
        cmd += [f"--size={args.size}", f"--per-round={args.per_round}", f"--rounds={args.rounds}"]
        if args.no_lexical_flush:
            cmd.append("--no-lexical-flush")
        env = dict(os.environ, PYTHONPATH=t)
        procs.append(
            subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd="/"
            )
        )
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    cpu: list[list[float]] = [[], []]
    wall: list[list[float]] = [[], []]
    for r in range(args.rounds):
        for j in (0, 1) if r % 2 == 0 else (1, 0):
            p = procs[j]
            assert p.stdin is not None and p.stdout is not None
            p.stdin.write("go\n")
            p.stdin.flush()
            c, w = p.stdout.readline().split()
            cpu[j].append(float(c))
            wall[j].append(float(w))
    for p in procs:
        assert p.stdin is not None
        p.stdin.close()
        p.wait()
    print(
        f"N = {args.size:,}, {args.rounds} rounds of {args.per_round} single durable writes each"
        + (", lexical flush left out" if args.no_lexical_flush else "")
    )
    for what, xs in (("CPU", cpu), ("wall time", wall)):
        for name, t, ys in (("A", trees[0], xs[0]), ("B", trees[1], xs[1])):
            print(f"{name} {t}: {what} {statistics.median(ys):,.0f} µs a write (median of rounds)")
        ratios = [b / a for a, b in zip(xs[0], xs[1], strict=True)]
        q = statistics.quantiles(ratios, n=4)
        med = statistics.median(ratios)
        print(f"{what} B / A: median {med:.3f}, quartiles {q[0]:.3f}..{q[2]:.3f}")


if __name__ == "__main__":
    main()
