"""Benchmark cortex.index.ann.VectorIndex: build time, recall@10 and one-thread queries/s per ef.

Data: ``--n`` vectors of ``--dim`` dimensions that look like sentence embeddings, not i.i.d.
Gaussian noise: a rank-``--rank`` signal (random coefficients times a fixed random basis) plus
``--noise`` relative Gaussian noise, each row scaled to unit length. Queries come from the same
distribution (fresh coefficients and noise, same basis). Ground truth is an exact numpy search.

Usage (the figures in specs/vector-index.md)::

    python tools/bench_ann.py                      # 100k x 384, 1,000 queries, M=16
    python tools/bench_ann.py --m 12 16 24 --repeats 3

Every number is a median over ``--repeats`` runs. Queries/s is for one query at a time on one
thread (``VectorIndex.search``, wrapper included, and raw hnswlib ``knn_query`` with
``num_threads=1``); the exact numpy scan on one thread is the floor. Queries/s divides by the
querying thread's CPU time (``time.thread_time``), so other processes sharing the cores do not
distort it; build time is wall time (all cores).
"""

from __future__ import annotations

import os

# one BLAS thread, so the exact floor is single-threaded like the index queries (tools may set
# the environment; the library never reads it)
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402 - after the thread settings, which must precede numpy
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cortex.index.ann import VectorIndex  # noqa: E402
from cortex.model.ids import MemoryId  # noqa: E402


def embedding_like(rng: np.random.Generator, basis: np.ndarray, n: int, noise: float) -> np.ndarray:
    rank, dim = basis.shape
    signal = rng.standard_normal((n, rank)).astype(np.float32) @ basis
    signal /= np.linalg.norm(signal, axis=1, keepdims=True)
    eps = rng.standard_normal((n, dim)).astype(np.float32) / np.float32(np.sqrt(dim))
    x = signal + np.float32(noise) * eps
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32)


def exact_top(data: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    out = np.empty((len(queries), k), dtype=np.int64)
    for start in range(0, len(queries), 100):
        scores = queries[start : start + 100] @ data.T
        top = np.argpartition(-scores, k, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1)
        out[start : start + 100] = np.take_along_axis(top, order, axis=1)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--rank", type=int, default=32)
    ap.add_argument("--noise", type=float, default=0.3)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--m", type=int, nargs="+", default=[16])
    ap.add_argument("--ef-construction", type=int, default=200)
    ap.add_argument("--ef", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=-1, help="build threads (-1: all cores)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    basis = rng.standard_normal((args.rank, args.dim)).astype(np.float32)
    data = embedding_like(rng, basis, args.n, args.noise)
    queries = embedding_like(rng, basis, args.queries, args.noise)
    ids = [MemoryId(i.to_bytes(16, "big")) for i in range(args.n)]
    position = {mid: i for i, mid in enumerate(ids)}
    t = time.perf_counter()
    truth = exact_top(data, queries, args.k)
    print(
        f"data: {args.n:,} x {args.dim}, rank {args.rank} + noise {args.noise}, "
        f"{args.queries:,} queries, k={args.k}; ground truth in {time.perf_counter() - t:.1f} s"
    )
    nn_cos = float(np.median(np.sum(data[truth[:, 0]] * queries, axis=1)))
    tenth = float(np.median(np.sum(data[truth[:, -1]] * queries, axis=1)))
    print(f"median cosine of the 1st / {args.k}th true neighbour: {nn_cos:.3f} / {tenth:.3f}")

    rates = []
    for _ in range(args.repeats):
        sample = queries[: min(200, args.queries)]
        t = time.thread_time()
        for q in sample:
            np.argpartition(-(data @ q), args.k)[: args.k]
        rates.append(len(sample) / (time.thread_time() - t))
    print(f"exact numpy scan, one thread: {statistics.median(rates):,.0f} q/s\n")

    print("| M | ef_construction | build s | ef | recall@10 | q/s search() | q/s raw hnswlib |")
    print("|---|---|---|---|---|---|---|")
    for m in args.m:
        t = time.perf_counter()
        index = VectorIndex(
            args.dim,
            m=m,
            ef_construction=args.ef_construction,
            exact_below=0,
            capacity=args.n,
            threads=args.threads,
        )
        index.add(ids, data)
        build = time.perf_counter() - t
        raw = index._index  # the benchmark also times hnswlib alone, without the wrapper
        raw.set_num_threads(1)
        for ef in args.ef:
            recalls, qps, raw_qps = [], [], []
            for _ in range(args.repeats):
                found = 0
                t = time.thread_time()
                results = [index.search(q, args.k, ef=ef) for q in queries]
                qps.append(len(queries) / (time.thread_time() - t))
                for row, hits in enumerate(results):
                    got = {position[mid] for mid, _ in hits}
                    found += len(got & set(truth[row].tolist()))
                recalls.append(found / (len(queries) * args.k))
                raw.set_ef(max(ef, args.k))
                t = time.thread_time()
                for q in queries:
                    raw.knn_query(q, k=args.k, num_threads=1)
                raw_qps.append(len(queries) / (time.thread_time() - t))
                raw.set_ef(index.ef)
            print(
                f"| {m} | {args.ef_construction} | {build:.1f} | {ef} | "
                f"{statistics.median(recalls):.4f} | {statistics.median(qps):,.0f} | "
                f"{statistics.median(raw_qps):,.0f} |",
                flush=True,
            )
        del index, raw
    return 0


if __name__ == "__main__":
    sys.exit(main())
