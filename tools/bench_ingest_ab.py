"""CPU per record of batched ingest (``write_many``) of two checkouts, in paired rounds.

    python tools/bench_ingest_ab.py CHECKOUT_A CHECKOUT_B [--size 50000] [--per-round 1]
        [--random-ids] [--no-vectors]

Each checkout (a directory holding ``cortex/`` with its C extension built, and ``tools/``) runs
in a process of its own that makes the bench suite's records (``tools/bench_peers``: the same
records and precomputed vectors as ``make bench``; with ``--random-ids`` each has a random
16-byte id given by the caller, as an import from another system brings), then waits. The two
then take turns writing ``--per-round`` durable batches of 1,000 each into their own store,
the first to go alternating from round to round, until each has written ``--size``; each turn
reports the CPU time (process time: user and kernel) and the wall time per record. Printed:
each checkout's median over the rounds, the median (and quartiles) of the per-round ratio B / A,
and each one's CPU in its first and last tenth of the load.

On a shared machine wall-clock figures of one run against another are noise; CPU time in turns
that follow each other sees the same load (``tools/bench_write_ab.py`` does the same for single
writes). Run A against A once to see the harness's own spread.
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

BATCH = 1000


def child(size: int, per_round: int, random_ids: bool, vectors: bool) -> None:
    """Make the records, say ``ready``, then per line read write a turn and print its times."""
    sys.path.insert(0, str(Path(os.environ["PYTHONPATH"]) / "tools"))
    from bench_peers import cortex_adapter as ca
    from bench_peers.dataset import make

    from cortex import Cortex, MemoryId, NewMemory

    ds = make(size)
    items = [
        NewMemory(
            data=ca.to_data(ds, i),
            tags=ds.tags[i],
            importance=ds.importance[i],
            id=MemoryId(os.urandom(16)) if random_ids else None,
        )
        for i in range(size)
    ]
    kw = {"embedder": ca.PrecomputedEmbedder(ds)} if vectors else {}
    cx = Cortex.open(Path(tempfile.mkdtemp()) / "s", actor="bench", map_size=1 << 32, **kw)
    at = 0
    print("ready", flush=True)
    for _ in sys.stdin:
        c, w = time.process_time(), time.perf_counter()
        n = 0
        for _ in range(per_round):
            if at >= size:
                break
            cx.write_many(items[at : at + BATCH])
            at += BATCH
            n += BATCH
        cpu = (time.process_time() - c) / max(n, 1) * 1e6
        wall = (time.perf_counter() - w) / max(n, 1) * 1e6
        print(f"{cpu:.2f} {wall:.2f} {at}", flush=True)
    cx.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--size", type=int, default=50_000)
    ap.add_argument("--per-round", type=int, default=1)
    ap.add_argument("--random-ids", action="store_true")
    ap.add_argument("--no-vectors", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.size, args.per_round, args.random_ids, not args.no_vectors)
        return
    procs = []
    for checkout in (args.a, args.b):
        env = {**os.environ, "PYTHONPATH": str(Path(checkout).resolve())}
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            args.a,
            args.b,
            "--child",
            f"--size={args.size}",
            f"--per-round={args.per_round}",
        ]
        cmd += ["--random-ids"] * args.random_ids + ["--no-vectors"] * args.no_vectors
        p = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(p)
    for p in procs:
        assert p.stdout is not None
        if p.stdout.readline().strip() != "ready":
            sys.exit("a child failed to start")
    cpu: list[list[float]] = [[], []]
    wall: list[list[float]] = [[], []]
    rounds = -(-args.size // (BATCH * args.per_round))
    for r in range(rounds):
        for j in (0, 1) if r % 2 == 0 else (1, 0):
            p = procs[j]
            assert p.stdin is not None and p.stdout is not None
            p.stdin.write("go\n")
            p.stdin.flush()
            c, w, _at = p.stdout.readline().split()
            cpu[j].append(float(c))
            wall[j].append(float(w))
    for p in procs:
        assert p.stdin is not None
        p.stdin.close()
        p.wait()
    ratios = sorted(b / a for a, b in zip(cpu[0], cpu[1], strict=True))
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    tenth = max(1, rounds // 10)
    kind = "random ids" if args.random_ids else "own ids"
    vec = "no vectors" if args.no_vectors else "vectors"
    print(f"write_many, batches of {BATCH}, {args.size:,} records, {kind}, {vec}, {rounds} rounds")
    for name, j in (("A", 0), ("B", 1)):
        first = statistics.mean(cpu[j][:tenth])
        last = statistics.mean(cpu[j][-tenth:])
        print(
            f"  {name}: CPU {statistics.median(cpu[j]):.1f} us/record (median), wall "
            f"{statistics.median(wall[j]):.1f}; first tenth {first:.1f}, last tenth {last:.1f} "
            f"({last / first:.2f}x)"
        )
    print(f"  B / A CPU per round: median {q[1]:.3f} (quartiles {q[0]:.3f}-{q[2]:.3f})")


if __name__ == "__main__":
    main()
