"""What a reader's clearance costs a find (issue 14 item 6, ``specs/sensitivity.md`` §3).

On a store of N Facts (half ``actor_public``, half ``scoped`` with the tag ``shared``), three
finds are timed — newest Facts (``types``, limit 10), a BM25 text query for one of 2,000
subjects (limit 10) and a tag (limit 50) — for three readers:

- ``owner``: the store's owner (no visibility check, no ``sens/`` read);
- ``helper``: another actor holding the scope ``shared``, clearance ``internal`` (the default):
  visibility on every candidate, and the clearance gate;
- ``helper, restricted``: the same cleared for every level (visibility only, no ``sens/``
  read: what a non-owner cost before labels existed).

Each on two stores built alike: ``unlabelled`` (no ``sens/`` entry: the gate looks once per
find and reads nothing more) and ``labelled`` (every 10th memory ``confidential``, every 20th
``public``: one ``sens/`` lookup per candidate that passes visibility). Blocks of each variant
are interleaved so the machine's load falls on all alike; medians of ``--repeat`` p50s, in µs.

With ``--baseline DIR`` (a checkout of the code before labels, e.g. ``git worktree add
/tmp/base 1b90822``) the owner and helper finds are also timed on that code, in a child
process on an unlabelled store built the same way.

    python tools/bench_sensitivity.py [--size 20000] [--repeat 3] [--baseline DIR]
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


def build(path: Path, n: int, labelled: bool) -> None:
    from cortex import Cortex, Fact, NewMemory

    items: list[Any] = []
    for i in range(n):
        options: dict[str, Any] = {
            "tags": ("shared",),
            "visibility": "actor_public" if i % 2 else "scoped",
        }
        if labelled and i % 10 == 0:
            options["sensitivity"] = "confidential"
        elif labelled and i % 20 == 5:
            options["sensitivity"] = "public"
        s = f"person{i % 2000}"
        fact = Fact(statement=f"{s} likes thing {i}", subject=s, predicate="likes", object=str(i))
        items.append(NewMemory(data=fact, **options))
    with Cortex.open(path, actor="owner") as cx:
        for k in range(0, n, 1000):
            cx.write_many(items[k : k + 1000])


QUERIES = ("types", "text", "tag")


def finders(cx: Any, clearance: bool) -> dict[str, Any]:
    """``{reader: find}`` for the readers this code knows."""
    from cortex import Reader, Scope

    shared = Scope(name="shared", tags=frozenset({"shared"}))
    out = {"owner": cx.find, "helper": cx.view(Reader(actor="helper", scopes=(shared,))).find}
    if clearance:
        rd = Reader(actor="helper", scopes=(shared,), clearance="restricted")
        out["helper, restricted"] = cx.view(rd).find
    return out


def query(name: str, i: int) -> Any:
    from cortex import Query

    if name == "types":
        return Query(types=["Fact"], limit=10)
    if name == "text":
        return Query(text=f"person{i % 2000}", limit=10)  # 10 memories hold each subject
    return Query(tags=["shared"], limit=50)


def measure(path: Path, blocks: int, per: int, clearance: bool) -> dict[str, float]:
    """p50 (µs) of each reader x query on the store at ``path``, blocks interleaved."""
    from cortex import Cortex

    times: dict[str, list[float]] = {}
    with Cortex.open(path, actor="owner") as cx:
        find = finders(cx, clearance)
        for fn in find.values():  # warm the caches once
            for q in QUERIES:
                fn(query(q, 0))
        for b in range(blocks):
            for who, fn in find.items():
                for q in QUERIES:
                    samples = times.setdefault(f"{who} / {q}", [])
                    for i in range(per):
                        qq = query(q, b * per + i)
                        t = time.perf_counter()
                        fn(qq)
                        samples.append(time.perf_counter() - t)
    return {k: statistics.median(v) * 1e6 for k, v in times.items()}


def child(args: argparse.Namespace) -> None:
    """Run inside the baseline checkout: build an unlabelled store, time it, print JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "s")
        build(path, args.size, labelled=False)
        print(json.dumps(measure(path, args.blocks, args.per, clearance=False)))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=20_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--blocks", type=int, default=6)
    p.add_argument("--per", type=int, default=30)
    p.add_argument("--baseline", metavar="DIR", help="a checkout of the code before labels")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
        return
    runs: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        stores = {}
        for kind in ("unlabelled", "labelled"):
            stores[kind] = Path(tmp, kind)
            build(stores[kind], args.size, labelled=kind == "labelled")
        for _ in range(args.repeat):
            for kind, path in stores.items():
                for k, v in measure(path, args.blocks, args.per, clearance=True).items():
                    runs.setdefault(f"{kind} / {k}", []).append(v)
            if args.baseline:
                env = {**os.environ, "PYTHONPATH": str(Path(args.baseline).resolve())}
                out = subprocess.run(
                    [sys.executable, __file__, "--child", "--size", str(args.size),
                     "--blocks", str(args.blocks), "--per", str(args.per)],
                    env=env, cwd=args.baseline, check=True, capture_output=True, text=True,
                )  # fmt: skip
                for k, v in json.loads(out.stdout.splitlines()[-1]).items():
                    runs.setdefault(f"baseline / {k}", []).append(v)
    print(f"find p50, µs (median of {args.repeat} runs), N = {args.size:,}")
    width = max(len(k) for k in runs)
    for k in sorted(runs):
        print(f"  {k:<{width}}  {statistics.median(runs[k]):9.1f}")


if __name__ == "__main__":
    main()
