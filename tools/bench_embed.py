"""Benchmark the embedders: sentences per second for MiniLM (per batch size) and hashing.

Usage::

    python tools/bench_embed.py                       # 512 sentences, batch 32 and 64
    python tools/bench_embed.py --threads 1 --batch 16 32 64

The sentences are made up from a fixed word list, 8 to 24 words each (about 12 to 32 tokens,
the length of a memory's short or medium form). ``--threads`` sets the BLAS thread count before
numpy loads (0 leaves the default, every core). Figures are medians over ``--repeats`` runs,
after one warm-up batch that loads the model, per wall second and per CPU second of the process
(the latter is steadier on a machine shared with other work).
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
import random  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cortex.embed import HashingEmbedder, MiniLM  # noqa: E402

_TEXT = (
    "ada lives in london and works on the analytical engine with charles babbage she prefers "
    "tea over coffee the meeting moved to tuesday because the budget review ran late our agent "
    "booked a flight to paris for the conference next month it failed twice before the retry "
    "succeeded the user asked for a summary of the quarterly report with the key risks"
)
WORDS = _TEXT.split()


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--batch", type=int, nargs="+", default=[32, 64])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="BLAS threads (0: default)")
    args = ap.parse_args(argv)
    texts = sentences(args.n)
    print(f"{args.n} sentences, {args.threads or 'default'} BLAS threads\n")
    print("| embedder | batch | sentences/s (wall) | sentences per CPU-second |")
    print("|---|---|---|---|")
    for batch in args.batch:
        model = MiniLM(batch_size=batch)
        model.embed(texts[:batch])  # load the weights, warm the caches
        tokens = sum(model.token_counts(texts)) / len(texts)
        wall, cpu = rate(model, texts, args.repeats)
        print(
            f"| MiniLM ({tokens:.0f} tokens/sentence) | {batch} | {wall:,.0f} | {cpu:,.0f} |",
            flush=True,
        )
    wall, cpu = rate(HashingEmbedder(), texts, args.repeats)
    print(f"| hashing-v1-384 | - | {wall:,.0f} | {cpu:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
