"""What the write rules of issue 14 cost on a single durable write.

With them on, against the same write with them off and against the code before them (another
checkout, same run).

On a store of N memories (a mix of Facts over 2,000 subjects and Events), one durable write per
transaction, in interleaved blocks so the machine's load falls on every variant alike:

- ``event``: an Event (no claim key: what any write paid before the rules);
- ``fact, rules off``: a Fact written with ``supersede=False`` (indexed, never compared);
- ``fact, new subject``: a Fact whose subject no memory holds (the lookup finds nothing);
- ``fact, supersedes``: a Fact of a subject and single-valued predicate already held: the rules
  run, link the two and end the older one's time;
- ``fact, supersedes a long chain``: the same, always for one subject (its chain grows by one
  with every write of the run);
- ``fact, dedupe``: the same with ``dedupe=True`` (the exact match re-checked in the write).

With ``--baseline DIR`` (a checkout of the code before the rules, e.g. ``git worktree add
/tmp/base 2a5fba8``) the ``event`` and plain ``fact`` writes are also timed on that code, in a
child process on a store built the same way, so the note can say what the rules cost over
yesterday's write. Medians of ``--repeat`` runs of p50s.

    python tools/bench_semantics.py [--size 10000] [--repeat 3] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def build(path: Path, n: int) -> None:
    from cortex import Cortex, Event, Fact, NewMemory

    items: list[Any] = []
    for i in range(n):
        if i % 2:
            items.append(NewMemory(data=Event(kind="note", summary=f"event {i} of the log")))
        else:
            s = f"person{i % 2000}"
            items.append(
                NewMemory(
                    data=Fact(
                        statement=f"{s} likes thing {i}",
                        subject=s,
                        predicate="likes",
                        object=f"thing {i}",
                    )
                )
            )
    with Cortex.open(path, actor="bench") as cx:
        for k in range(0, n, 1000):
            cx.write_many(items[k : k + 1000])


def timed(fn: Any, count: int) -> list[float]:
    out = []
    for i in range(count):
        t = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - t)
    return out


def run_variants(path: Path, blocks: int, per: int, new_api: bool) -> dict[str, float]:
    from cortex import Cortex, Event, Fact

    counter = [0]

    def fresh() -> int:
        counter[0] += 1
        return counter[0]

    variants: dict[str, Any] = {}
    with Cortex.open(path, actor="bench") as cx:
        variants["event"] = lambda i: cx.write(Event(kind="note", summary=f"timed {fresh()}"))
        if new_api:
            variants["fact, rules off"] = lambda i: cx.write(
                Fact(statement="x", subject=f"new{fresh()}", predicate="home_city"),
                supersede=False,
            )
            variants["fact, new subject"] = lambda i: cx.write(
                Fact(statement="x", subject=f"new{fresh()}", predicate="home_city")
            )
            cx.write_many(  # every subject has a home city to supersede
                [
                    Fact(statement="lives in A", subject=f"person{k}", predicate="home_city")
                    for k in range(2000)
                ]
            )
            variants["fact, supersedes"] = lambda i: cx.write(
                Fact(
                    statement=f"lives in {fresh()}",
                    subject=f"person{counter[0] % 2000}",
                    predicate="home_city",
                )
            )
            variants["fact, supersedes a long chain"] = lambda i: cx.write(
                Fact(statement=f"lives in {fresh()}", subject="person7", predicate="home_city")
            )
            variants["fact, dedupe"] = lambda i: cx.write(
                Fact(statement=f"lives in {fresh()}", subject="person8", predicate="home_city"),
                dedupe=True,
            )
        else:
            variants["fact"] = lambda i: cx.write(
                Fact(statement="x", subject=f"new{fresh()}", predicate="home_city")
            )
        samples: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(blocks):
            for name, fn in variants.items():
                samples[name] += timed(fn, per)
    return {k: statistics.median(v) for k, v in samples.items()}


def one_run(size: int, blocks: int, per: int, new_api: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="cortex-bench-sem-") as tmp:
        path = Path(tmp) / "s"
        build(path, size)
        return run_variants(path, blocks, per, new_api)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--blocks", type=int, default=6)
    p.add_argument("--per", type=int, default=25)
    p.add_argument("--baseline", help="a checkout of the code before the rules")
    p.add_argument("--child-old", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child_old:
        print(json.dumps(one_run(args.size, args.blocks, args.per, new_api=False)))
        return 0
    sys.path.insert(0, str(ROOT))
    runs: dict[str, list[float]] = {}
    for _ in range(args.repeat):
        for k, v in one_run(args.size, args.blocks, args.per, new_api=True).items():
            runs.setdefault(k, []).append(v)
        if args.baseline:
            env = {**os.environ, "PYTHONPATH": str(Path(args.baseline).resolve())}
            out = subprocess.run(
                [sys.executable, __file__, "--child-old", "--size", str(args.size),
                 "--blocks", str(args.blocks), "--per", str(args.per)],
                env=env, capture_output=True, text=True, check=True, cwd=args.baseline,
            )  # fmt: skip
            for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items():
                runs.setdefault(f"before the rules: {k}", []).append(v)
    med = {k: statistics.median(v) for k, v in runs.items()}
    base = med["event"]
    print(f"single durable write, p50 at {args.size:,} memories (median of {args.repeat} runs)")
    for k, v in med.items():
        print(f"  {k:<32} {v * 1e3:7.3f} ms   {v / base:5.2f}x event   {1 / v:8.0f}/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
