"""Lexical search benchmark: BM25 top-k latency of the store beside SQLite FTS5, same corpus.

For each size N (default 10k and 100k memories) a synthetic corpus is generated with a Zipf
word distribution (a 30,000-word vocabulary, s = 1.1, 8 to 40 words a memory), written to a
cortex store with ``write_many`` and to an SQLite FTS5 table (the same full-form text, the
``unicode61 remove_diacritics 2`` tokenizer, ranked by its built-in ``bm25``; queried with the
words OR-ed, which is what cortex answers, and AND-ed, FTS5's default and a lower bound).
Queries take 2 to 5 words from a random memory, so they mix common and rare words as questions
do. Latency is per query (one read transaction each, as the query planner does), p50 and p95
over the queries.

With ``--pending K``, K single writes follow the bulk ingest, each leaving a posting segment
(``specs/lexical.md`` §4b): the queries run again with the segments pending, then folded.

    python tools/bench_lexical.py [--sizes 10000,100000] [--queries 400] [--limit 10]
        [--pending 31]
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cortex import Cortex, Fact, NewMemory, render_full  # noqa: E402

VOCAB = 30_000
ZIPF_S = 1.1


def _syllables(rng: random.Random) -> list[str]:
    cons, vows = "bcdfghjklmnprstvwz", "aeiou"
    seen: set[str] = set()
    words: list[str] = []
    while len(words) < VOCAB:
        w = "".join(rng.choice(cons) + rng.choice(vows) for _ in range(rng.randint(1, 4)))
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


def corpus(n: int, seed: int = 7) -> list[str]:
    """``n`` texts of 8..40 Zipf-distributed words."""
    rng = random.Random(seed)
    words = _syllables(rng)
    weights = [1.0 / (r + 1) ** ZIPF_S for r in range(VOCAB)]
    out = []
    for _ in range(n):
        k = rng.randint(8, 40)
        out.append(" ".join(rng.choices(words, weights=weights, k=k)))
    return out


def queries(texts: list[str], count: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        words = rng.choice(texts).split()
        out.append(" ".join(rng.sample(words, min(len(words), rng.randint(2, 5)))))
    return out


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def bench_size(n: int, nq: int, limit: int, root: Path, pending: int = 0) -> dict[str, Any]:
    texts = corpus(n)
    data = [Fact(statement=t, subject=f"s{i % 997}", predicate="says") for i, t in enumerate(texts)]
    qs = queries(texts, nq)
    row: dict[str, Any] = {"n": n, "queries": nq, "limit": limit}
    with Cortex.open(root / f"cx-{n}", actor="bench", metasync=False) as cx:
        t0 = time.perf_counter()
        for i in range(0, n, 1000):
            cx.write_many(NewMemory(data=d) for d in data[i : i + 1000])
        row["cortex_ingest_per_s"] = n / (time.perf_counter() - t0)
        for q in qs[:50]:  # warm the page cache
            cx._lexical_search(q, limit)
        lat = []
        for q in qs:
            t = time.perf_counter()
            cx._lexical_search(q, limit)
            lat.append(time.perf_counter() - t)
        row["cortex_p50_ms"] = statistics.median(lat) * 1e3
        row["cortex_p95_ms"] = _pct(lat, 0.95) * 1e3
        if pending:
            # single writes leave posting segments (specs/lexical.md §4b): the same queries with
            # them pending, then folded again (each the same ranking)
            extra = corpus(pending, seed=8)
            for t in extra:
                cx.write(Fact(statement=t, subject="pending", predicate="says"))
            for label in ("pending", "folded"):
                for q in qs[:50]:
                    cx._lexical_search(q, limit)
                lat = []
                for q in qs:
                    t0 = time.perf_counter()
                    cx._lexical_search(q, limit)
                    lat.append(time.perf_counter() - t0)
                row[f"cortex_{label}_p50_ms"] = statistics.median(lat) * 1e3
                row[f"cortex_{label}_p95_ms"] = _pct(lat, 0.95) * 1e3
                if label == "pending":
                    row["segments"] = cx.merge_lexical()
        row["lexical"] = cx.stats()["lexical"]
    db = sqlite3.connect(root / f"fts-{n}.db")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='unicode61 remove_diacritics 2')")
    t0 = time.perf_counter()
    with db:
        db.executemany("INSERT INTO t(body) VALUES (?)", ((render_full(d),) for d in data))
    row["fts5_ingest_per_s"] = n / (time.perf_counter() - t0)

    def fts(q: str, op: str) -> list[Any]:
        match = f" {op} ".join(f'"{w}"' for w in q.split())
        sql = "SELECT rowid, bm25(t) FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT ?"
        return db.execute(sql, (match, limit)).fetchall()

    # OR ranks every memory holding any query word, as cortex does; AND (FTS5's default)
    # only those holding all of them, far fewer: a lower bound, not the same question
    for op in ("OR", "AND"):
        for q in qs[:50]:
            fts(q, op)
        lat = []
        for q in qs:
            t = time.perf_counter()
            fts(q, op)
            lat.append(time.perf_counter() - t)
        row[f"fts5_{op.lower()}_p50_ms"] = statistics.median(lat) * 1e3
        row[f"fts5_{op.lower()}_p95_ms"] = _pct(lat, 0.95) * 1e3
    db.close()
    return row


def table(rows: list[dict[str, Any]]) -> str:
    out = [
        "| N | cortex p50 | cortex p95 | FTS5 OR p50 | FTS5 OR p95 | FTS5 AND p50 | "
        "FTS5 AND p95 | cortex ingest | FTS5 ingest |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r['n']:,} | {r['cortex_p50_ms']:.2f} ms | {r['cortex_p95_ms']:.2f} ms | "
            f"{r['fts5_or_p50_ms']:.2f} ms | {r['fts5_or_p95_ms']:.2f} ms | "
            f"{r['fts5_and_p50_ms']:.2f} ms | {r['fts5_and_p95_ms']:.2f} ms | "
            f"{r['cortex_ingest_per_s']:,.0f} /s | {r['fts5_ingest_per_s']:,.0f} /s |"
        )
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--pending", type=int, default=0, help="single writes left as segments")
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="cortex-bench-lex-") as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            rows.append(bench_size(n, args.queries, args.limit, Path(tmp), args.pending))
            print(f"N={n:,} done", file=sys.stderr)
    print(table(rows))
    for r in rows:
        if "cortex_pending_p50_ms" in r:
            print(
                f"N={r['n']:,}: {r['segments']} segments pending: p50 "
                f"{r['cortex_pending_p50_ms']:.2f} ms (p95 {r['cortex_pending_p95_ms']:.2f}); "
                f"folded {r['cortex_folded_p50_ms']:.2f} ms (p95 {r['cortex_folded_p95_ms']:.2f})"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
