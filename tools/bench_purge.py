"""Purge benchmark: what erasing a memory from the disk costs, at each store size.

For each size N (default 10k and 100k memories: Facts with tags, frames and a few words of
text, a second version for one in ten; with ``--vectors`` each has a 64-d hashing-embedder
vector and the hnswlib cache is saved beside the store):

- ``purge``: ``purge(ref, reason)`` of one random live memory, with its erasure step (the
  default): the purge transaction, the ``meta/scrub`` commit, reading every page of
  ``data.mdb`` under the writer lock and zeroing what no reader can read again, and (with
  vectors) rewriting the saved vector index without it. This is the time per purge.
- ``purge --no-scrub``: the purge transaction alone (content gone from every record, bytes
  still in freed pages).
- ``scrub``: the erasure step alone, right after one ``--no-scrub`` purge (what ``cortex
  scrub`` costs after a batch of purges: it does not grow with the batch).
- ``verify --erasure``: the audit, once per size, after the purges (every erasure record's
  needles searched for at every byte offset of every file).

Times are medians over ``--repeat`` purges; the store is built once per size (untimed) and
its size on disk is reported.

    python tools/bench_purge.py [--sizes 10000,100000] [--repeat 15] [--vectors] [--json out]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cortex import Cortex, Fact, FrameRef, NewMemory, Query
from cortex.index.embed import HashingEmbedder

WORDS = [f"w{i}" for i in range(500)]


def build(path: Path, n: int, vectors: bool) -> list[Any]:
    rng = random.Random(n)
    kw: dict[str, Any] = {"embedder": HashingEmbedder(64)} if vectors else {}
    ids: list[Any] = []
    with Cortex.open(path, actor="bench", metasync=False, **kw) as cx:
        for start in range(0, n, 1000):
            uris = cx.write_many(
                NewMemory(
                    data=Fact(
                        statement=" ".join(rng.choice(WORDS) for _ in range(12)) + f" item {i}",
                        subject=f"s{i % 97}",
                        predicate="p",
                    ),
                    tags=[f"t{i % 50}"],
                    frames=[FrameRef(verb="find", obj_kind="knowledge", obj_ref=f"o{i % 31}")],
                )
                for i in range(start, min(n, start + 1000))
            )
            ids += [u.id for u in uris]
        for mid in ids[::10]:
            second = Fact(statement="second " + rng.choice(WORDS), subject="s", predicate="p")
            cx.update(mid, second)
        if vectors:
            cx.find(Query(near="w1 w2", limit=1))  # build the cache; saved on close
        cx.scrub()  # start from a scrubbed store: the first timed step does no catch-up
    return ids


def timed(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def bench_size(n: int, repeat: int, root: Path, vectors: bool) -> dict[str, Any]:
    path = root / f"n{n}"
    if path.exists():
        shutil.rmtree(path)
    t0 = time.perf_counter()
    ids = build(path, n, vectors)
    built = time.perf_counter() - t0
    rng = random.Random(7)
    victims = rng.sample(ids, 3 * repeat)
    purge, quick, scrub = [], [], []
    with Cortex.open(path, actor="bench") as cx:
        for i in range(repeat):
            a, b, c = victims[3 * i : 3 * i + 3]
            purge.append(timed(lambda a=a: cx.purge(a, "bench")))
            quick.append(timed(lambda b=b: cx.purge(b, "bench", scrub=False)))
            scrub.append(timed(cx.scrub))
            cx.purge(c, "bench", scrub=False)
        cx.scrub()
        audit_t = time.perf_counter()
        audit = cx.verify_erasure()
        audit_s = time.perf_counter() - audit_t
        size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        assert audit.ok, audit.residues[:5]
    return {
        "n": n,
        "vectors": vectors,
        "store_bytes": size,
        "build_s": built,
        "purge_ms": statistics.median(purge) * 1e3,
        "purge_no_scrub_ms": statistics.median(quick) * 1e3,
        "scrub_ms": statistics.median(scrub) * 1e3,
        "verify_erasure_s": audit_s,
        "erasure_records": audit.records,
        "needles": audit.needles,
        "scanned_bytes": audit.scanned,
    }


def table(rows: list[dict[str, Any]]) -> str:
    out = [
        "| N | vectors | store | purge (with erasure step) | purge --no-scrub | scrub | "
        "verify --erasure |",
        "|---:|:---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r['n']:,} | {'yes' if r['vectors'] else 'no'} | "
            f"{r['store_bytes'] / 2**20:.0f} MiB | {r['purge_ms']:.0f} ms | "
            f"{r['purge_no_scrub_ms']:.1f} ms | {r['scrub_ms']:.0f} ms | "
            f"{r['verify_erasure_s']:.2f} s |"
        )
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--vectors", action="store_true", help="with vectors and their cache")
    ap.add_argument("--json")
    ap.add_argument("--dir", help="scratch directory (default: a temporary one)")
    args = ap.parse_args()
    root = Path(args.dir or tempfile.mkdtemp(prefix="cortex-bench-purge-"))
    rows = []
    try:
        for n in (int(x) for x in args.sizes.split(",")):
            rows.append(bench_size(n, args.repeat, root, args.vectors))
            print(f"N={n:,} done", file=sys.stderr, flush=True)
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
