"""Recall@10 of the vector index when the stored vectors are rounded to float16 (a prototype).

The bench's data set (``tools/bench_peers/dataset.py``: 384-d unit vectors, 100 query vectors)
is indexed twice by ``cortex.index.ann.VectorIndex`` with its default parameters: once from the
float32 vectors and once from the same vectors rounded to float16 and scaled back to unit
length, as a store keeping ``vec/`` in float16 would rebuild its index. Both are scored against
exact float32 search (the issue's bar: recall@10 >= 0.95), and so is an exact search over the
rounded vectors (the precision loss alone).

    python tools/vector_precision.py --size 100000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_peers import dataset

from cortex.index.ann import VectorIndex
from cortex.model.ids import new_ids


def recall(vecs: np.ndarray, ds: dataset.Dataset, truth: list[list[int]]) -> tuple[float, float]:
    """(hnsw recall@10, exact-search recall@10) of ``vecs`` against ``truth``."""
    n = len(vecs)
    ids = new_ids(n)
    index = VectorIndex(vecs.shape[1], capacity=n)
    index.add(ids, vecs)
    pos = {m: i for i, m in enumerate(ids)}
    ann, exact = [], []
    for j, q in enumerate(ds.query_vectors):
        got = {pos[m] for m, _ in index.search(q, 10)}
        ann.append(len(got & set(truth[j])) / 10)
        top = np.argpartition(-(vecs @ q), 10)[:10]
        exact.append(len(set(top.tolist()) & set(truth[j])) / 10)
    return float(np.mean(ann)), float(np.mean(exact))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--size", type=int, default=10_000)
    args = ap.parse_args()
    ds = dataset.make(args.size, n_extra=0)
    v32 = ds.vectors[: args.size].astype(np.float32)
    truth = ds.truth()
    v16 = v32.astype(np.float16).astype(np.float32)
    v16 /= np.linalg.norm(v16, axis=1, keepdims=True)
    for name, vecs in (("float32", v32), ("float16", v16)):
        ann, exact = recall(vecs, ds, truth)
        print(f"{name}: hnsw recall@10 {ann:.4f}, exact search over them {exact:.4f}", flush=True)


if __name__ == "__main__":
    main()
