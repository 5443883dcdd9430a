"""Query benchmark: find by type, by tag, by frame (limit 10) and context, at several sizes.

For each size N (default 10k, 100k and 1M memories of all nine types in an agent-like mix —
40% events, 25% facts, 1% identities —, 1–3 of 200 tags, 0–2 frames over 10 verbs × 3 object
kinds × 5,000 references, and for 5% one of 20 hot frames), the store is built with
``write_many`` in batches of 1,000 (``metasync=False``: the build is not what is measured), then
each query kind runs ``--queries`` times with random arguments; the table gives the median over
``--repeat`` rounds of each round's p50 and p95 latency. The floor is a raw LMDB prefix scan
reading the same 10 index keys plus their 10 head values (what an index lookup costs before any
decoding), measured in the same run.

    python tools/bench_query.py [--sizes 10000,100000,1000000] [--queries 300] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cortex import (
    Belief,
    Capability,
    Constraint,
    Cortex,
    Event,
    Fact,
    FrameRef,
    Goal,
    Identity,
    NewMemory,
    Pattern,
    Preference,
    Query,
)
from cortex.model.enums import MemoryType, ObjKind, Verb
from cortex.model.records import Data
from cortex.storage.keys import IDX_TAG, IDX_TYPE, head_key, tag_hash

WORDS = [f"w{i}" for i in range(2000)]
TAGS = [f"tag-{i}" for i in range(200)]
VERBS = list(Verb)
KINDS = [ObjKind.KNOWLEDGE, ObjKind.SERVICE, ObjKind.AGENT]
REFS = [f"obj-{i}" for i in range(5000)]
# hot frames: 5% of memories carry one of 20, so each holds >= 10 memories at every size and
# "find frame, limit 10" returns 10 hits at 10k as at 1M (a fair flatness measure)
HOT = [FrameRef(verb=Verb.MONITOR, obj_kind=ObjKind.SERVICE, obj_ref=f"hot-{i}") for i in range(20)]


# an agent's store: mostly events and facts, few identities, hard constraints and active goals
MIX = [(0, 1), (1, 25), (2, 8), (3, 8), (4, 40), (5, 4), (6, 4), (7, 5), (8, 5)]
KINDS_BY_WEIGHT = [k for k, w in MIX for _ in range(w)]


def make_data(rng: random.Random, i: int) -> Data:
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 24)))
    k = rng.choice(KINDS_BY_WEIGHT)
    if k == 0:
        return Identity(name=f"agent {i}")
    if k == 1:
        return Fact(statement=words, subject=f"s{i % 997}", predicate="says")
    if k == 2:
        return Preference(topic=words[:60], polarity="prefer", strength=0.5)
    if k == 3:
        return Belief(statement=words, stance="believe", confidence=0.7)
    if k == 4:
        return Event(kind="call", outcome="success", counterparty=f"c{i % 50}", summary=words)
    if k == 5:
        return Goal(statement=words, status="active" if i % 4 == 0 else "completed")
    if k == 6:
        strength = "hard" if i % 5 == 0 else "soft"
        return Constraint(statement=words, polarity="avoid", strength=strength, source="learned")
    if k == 7:
        return Capability(subject=f"s{i % 997}", capability=words[:40])
    return Pattern(statement=words, strength=0.25, coverage=i % 50)


def make_item(rng: random.Random, i: int) -> NewMemory:
    frames = [
        FrameRef(verb=rng.choice(VERBS), obj_kind=rng.choice(KINDS), obj_ref=rng.choice(REFS))
        for _ in range(rng.randint(0, 2))
    ]
    if rng.random() < 0.05:
        frames.append(rng.choice(HOT))
    frames = list({(f.verb, f.obj_kind, f.obj_ref): f for f in frames}.values())
    return NewMemory(
        data=make_data(rng, i),
        tags=rng.sample(TAGS, rng.randint(1, 3)),
        frames=frames,
        importance=i % 11,
    )


def build(path: Path, n: int) -> list[NewMemory]:
    rng = random.Random(n)
    sample: list[NewMemory] = []
    with Cortex.open(path, actor="bench", metasync=False, map_size=1 << 30) as cx:
        for b in range(0, n, 1000):
            items = [make_item(rng, i) for i in range(b, min(n, b + 1000))]
            cx.write_many(items)
            sample.extend(items[:5])
    return sample


def timed(fn: Callable[[], Any], count: int) -> tuple[float, float]:
    xs = []
    for _ in range(count):
        t0 = time.perf_counter()
        fn()
        xs.append(time.perf_counter() - t0)
    xs.sort()
    return xs[len(xs) // 2] * 1e6, xs[int(len(xs) * 0.95)] * 1e6


def floor_scan(cx: Cortex, prefix: bytes) -> None:
    env = cx._kv._env  # the same environment: a raw scan of 10 keys and 10 head gets
    with env.begin() as txn, txn.cursor() as cur:
        end = prefix + b"\xff" * 40
        if not cur.set_range(end):
            cur.last()
        got = 0
        while got < 10 and cur.prev():
            k = bytes(cur.key())
            if not k.startswith(prefix):
                break
            bytes(txn.get(head_key_of(k)) or b"")
            got += 1


def head_key_of(index_key: bytes) -> bytes:
    from cortex.model.ids import MemoryId

    return head_key(MemoryId(index_key[-16:]))


def bench_size(n: int, queries: int, repeat: int, root: Path) -> list[dict[str, Any]]:
    path = root / f"q-{n}"
    t0 = time.perf_counter()
    sample = build(path, n)
    build_s = time.perf_counter() - t0
    rows: list[dict[str, Any]] = []
    with Cortex.open(path, actor="bench") as cx:
        rng = random.Random(7)
        framed = [f for it in sample for f in it.frames]

        def by_type() -> None:
            cx.find(Query(types=[rng.choice(list(MemoryType))], limit=10))

        def by_tag() -> None:
            cx.find(Query(tags=[rng.choice(TAGS)], limit=10))

        def by_type_tag() -> None:
            cx.find(Query(types=[rng.choice(list(MemoryType))], tags=[rng.choice(TAGS)], limit=10))

        def by_frame() -> None:
            f = rng.choice(framed)
            cx.find(Query(frames=[f], limit=10))

        def by_hot_frame() -> None:
            cx.find(Query(frames=[rng.choice(HOT)], limit=10))

        def context() -> None:
            f = rng.choice(framed)
            cx.context(f.verb, [f"{f.obj_kind.label}:{f.obj_ref}"], budget_tokens=3000)

        def floor_type() -> None:
            floor_scan(cx, IDX_TYPE + bytes((rng.choice(list(MemoryType)),)))

        def floor_tag() -> None:
            floor_scan(cx, IDX_TAG + tag_hash(rng.choice(TAGS)))

        kinds: list[tuple[str, Callable[[], None], int]] = [
            ("floor: raw scan 10 + 10 gets (type)", floor_type, queries),
            ("floor: raw scan 10 + 10 gets (tag)", floor_tag, queries),
            ("find type, limit 10", by_type, queries),
            ("find tag, limit 10", by_tag, queries),
            ("find type + tag, limit 10", by_type_tag, queries),
            ("find frame, limit 10", by_frame, queries),
            ("find hot frame (10+ hits), limit 10", by_hot_frame, queries),
            ("context, 3000 tokens", context, max(20, queries // 5)),
        ]
        for name, fn, count in kinds:
            for _ in range(min(20, count)):  # warm up
                fn()
            p50s, p95s = [], []
            for _ in range(repeat):
                p50, p95 = timed(fn, count)
                p50s.append(p50)
                p95s.append(p95)
            rows.append(
                {
                    "n": n,
                    "query": name,
                    "p50_us": statistics.median(p50s),
                    "p95_us": statistics.median(p95s),
                    "spread_p50": (max(p50s) - min(p50s)) / statistics.median(p50s),
                    "build_s": build_s,
                }
            )
    shutil.rmtree(path)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--dir")
    args = ap.parse_args()
    root = Path(args.dir or tempfile.mkdtemp(prefix="cortex-bench-query-"))
    rows: list[dict[str, Any]] = []
    for n in (int(s) for s in args.sizes.split(",")):
        rows.extend(bench_size(n, args.queries, args.repeat, root))
        print(f"N={n:,} done (build {rows[-1]['build_s']:.0f} s)", flush=True)
    sizes = sorted({r["n"] for r in rows})
    names = list(dict.fromkeys(r["query"] for r in rows))
    print("\n| query | " + " | ".join(f"N={n:,} p50 / p95 µs" for n in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    for name in names:
        cells = []
        for n in sizes:
            r = next(r for r in rows if r["n"] == n and r["query"] == name)
            cells.append(f"{r['p50_us']:.0f} / {r['p95_us']:.0f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    if len(sizes) > 1:
        print(f"\nflatness (p50 at N={sizes[-1]:,} / p50 at N={sizes[0]:,}):")
        for name in names:
            a = next(r for r in rows if r["n"] == sizes[0] and r["query"] == name)["p50_us"]
            b = next(r for r in rows if r["n"] == sizes[-1] and r["query"] == name)["p50_us"]
            print(f"- {name}: {b / a:.2f}×")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
