"""Benchmark the embedders: MiniLM in each runtime (numpy, onnx), and hashing.

Usage::

    python tools/bench_embed.py                        # every runtime installed
    python tools/bench_embed.py --runtime numpy --threads 1 --batch 16 32 64

For each MiniLM runtime it reports:

- a single query embedded (one short text, as ``find(Query(text=...))`` does): p50 and p90 ms;
- sentences/s per batch size (``MiniLM.embed`` of ``--n`` sentences);
- ``write_many``: memories/s end to end into a fresh store opened with that embedder
  (``--memories`` Facts in calls of ``--per-call``, each call one durable transaction);
- ``ingest``: chat turns/s end to end, one ``Cortex.ingest`` per turn (one durable transaction
  each) with an extractor drawing one Fact from the turn, so each turn embeds its chunk and
  its memory (``tools/bench_ingest.py`` runs the same turns).

The sentences are made up from a fixed word list, 8 to 24 words each (about 12 to 32 tokens,
the length of a memory's short or medium form). ``--threads`` sets the BLAS thread count before
numpy loads and onnxruntime's intra-op threads (0 leaves the default, every usable core).
Figures are medians over ``--repeats`` runs, after a warm-up that loads the model; embedding
rates are given per wall second and per CPU second of the process (the latter is steadier on
a machine shared with other work).
"""

from __future__ import annotations

import os
import sys


def _threads_from_argv(argv: list[str]) -> None:
    # BLAS reads its thread count once, when numpy loads: set it before the import below
    if "--threads" in argv:
        n = argv[argv.index("--threads") + 1]
        if n != "0":
            for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
                os.environ[var] = n


_threads_from_argv(sys.argv)

import argparse  # noqa: E402
import inspect  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ingest import OneFactPerTurn, turns  # noqa: E402

from cortex import Cortex, Fact, NewMemory  # noqa: E402
from cortex.index.embed import HashingEmbedder, MiniLM  # noqa: E402

# a cortex from before the runtimes (for before/after runs) has numpy only
RUNTIMES = "runtime" in inspect.signature(MiniLM).parameters
if RUNTIMES:
    from cortex.index.embed_onnx import available as onnx_available
else:

    def onnx_available() -> bool:
        return False


_TEXT = (
    "ada lives in london and works on the analytical engine with charles babbage she prefers "
    "tea over coffee the meeting moved to tuesday because the budget review ran late our agent "
    "booked a flight to paris for the conference next month it failed twice before the retry "
    "succeeded the user asked for a summary of the quarterly report with the key risks"
)
WORDS = _TEXT.split()
QUERIES = (
    "where does ada live",
    "what did the user ask about the quarterly report",
    "flight to paris",
    "tea or coffee",
    "why was the meeting moved",
)


def sentences(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 24))).capitalize() + "."
        for _ in range(n)
    ]


def rate(embed: object, texts: list[str], repeats: int) -> tuple[float, float]:
    """Sentences per wall second and per CPU second of the process (all its threads)."""
    fn = embed.embed  # type: ignore[attr-defined]
    wall, cpu = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        fn(texts)
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return len(texts) / statistics.median(wall), len(texts) / statistics.median(cpu)


def single_query_ms(model: Any, rounds: int = 20) -> tuple[float, float, float]:
    """p50 and p90 wall milliseconds of embedding one short query, and p50 CPU milliseconds."""
    lat, cpu = [], []
    for _ in range(rounds):
        for q in QUERIES:
            t, c = time.perf_counter(), time.process_time()
            model.embed([q])
            lat.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
    lat.sort()
    return (
        statistics.median(lat) * 1000,
        lat[int(0.9 * (len(lat) - 1))] * 1000,
        statistics.median(cpu) * 1000,
    )


def write_many_rate(model: Any, texts: list[str], per_call: int) -> tuple[float, float]:
    """Memories per wall and per CPU second, ``write_many`` calls of ``per_call``, new store."""
    facts = [
        NewMemory(data=Fact(statement=t, subject=f"s{i % 97}", predicate="said"))
        for i, t in enumerate(texts)
    ]
    with (
        tempfile.TemporaryDirectory(prefix="cortex-embed-") as tmp,
        Cortex.open(Path(tmp) / "s", actor="bench", embedder=model) as cx,
    ):
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(0, len(facts), per_call):
            cx.write_many(facts[i : i + per_call])
        n = len(facts)
        return n / (time.perf_counter() - t0), n / (time.process_time() - c0)


def ingest_rate(model: Any, n: int) -> tuple[float, float]:
    """Chat turns per wall and CPU second, one ``ingest`` (episode + Fact) per turn, new store."""
    chat = turns(n)
    ex = OneFactPerTurn()
    with (
        tempfile.TemporaryDirectory(prefix="cortex-embed-") as tmp,
        Cortex.open(Path(tmp) / "s", actor="bench", embedder=model) as cx,
    ):
        t0, c0 = time.perf_counter(), time.process_time()
        for text in chat:
            cx.ingest(text, source="chat", extractor=ex)
        return n / (time.perf_counter() - t0), n / (time.process_time() - c0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--n", type=int, default=512, help="sentences per batch-rate run")
    ap.add_argument("--batch", type=int, nargs="+", default=[32, 64])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="BLAS / onnxruntime threads (0: all)")
    ap.add_argument("--runtime", nargs="+", choices=["numpy", "onnx"], default=None)
    ap.add_argument("--memories", type=int, default=1000, help="write_many memories per run")
    ap.add_argument("--per-call", type=int, default=100, help="memories per write_many call")
    ap.add_argument("--turns", type=int, default=300, help="ingest chat turns per run")
    args = ap.parse_args(argv)
    runtimes = args.runtime or (["numpy", "onnx"] if onnx_available() else ["numpy"])
    texts = sentences(args.n)
    print(f"{args.n} sentences, {args.threads or 'default'} threads, medians of {args.repeats}\n")
    rows: list[str] = []
    ends: list[str] = []
    for runtime in runtimes:
        if RUNTIMES:
            model = MiniLM(batch_size=32, runtime=runtime, threads=args.threads or None)
        else:
            model = MiniLM(batch_size=32)
        model.embed(texts[:32])  # load the weights, warm the caches
        tokens = sum(model.token_counts(texts)) / len(texts)
        p50, p90, p50_cpu = single_query_ms(model)
        for batch in args.batch:
            model.batch_size = batch
            wall, cpu = rate(model, texts, args.repeats)
            rows.append(
                f"| MiniLM {runtime} ({tokens:.0f} tokens/sentence) | {batch} | {wall:,.0f} "
                f"| {cpu:,.0f} |"
            )
        model.batch_size = 32
        wm = [
            write_many_rate(model, sentences(args.memories, seed=r), args.per_call)
            for r in range(args.repeats)
        ]
        ing = [ingest_rate(model, args.turns) for _ in range(args.repeats)]
        ends.append(
            f"| {runtime} | {p50:.1f} | {p90:.1f} | {p50_cpu:.1f} "
            f"| {statistics.median(w for w, _ in wm):,.0f} "
            f"| {statistics.median(c for _, c in wm):,.0f} "
            f"| {statistics.median(w for w, _ in ing):,.0f} "
            f"| {statistics.median(c for _, c in ing):,.0f} |"
        )
        print(f"MiniLM {runtime}: done", file=sys.stderr, flush=True)
    wall, cpu = rate(HashingEmbedder(), texts, args.repeats)
    rows.append(f"| hashing-v1-384 | - | {wall:,.0f} | {cpu:,.0f} |")
    print(
        "| MiniLM runtime | query p50 ms | query p90 ms | query p50 CPU ms "
        f"| write_many memories/s ({args.per_call} a call) | per CPU-second "
        "| ingest chat turns/s | per CPU-second |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(ends))
    print("\n| embedder | batch | sentences/s (wall) | sentences per CPU-second |")
    print("|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
