"""Where LoCoMo's evidence sits in each ranked list: the misses of ``find(text=)``, by category.

Builds the development split's stores (``tools/bench_retrieval.py``'s protocol, through
``tools/sweep_retrieval.py``'s ``build``; MiniLM by default) and, for every question of the
categories asked for, ranks each evidence turn in three lists read to ``--depth``: the BM25 index
(``Store._lexical_search``), the vector index (``find(Query(near=question))``) and the hybrid
``find(Query(text=question))`` itself (read to 100: past the fused lists' depth a memory has no
fused score). It prints, per category:

- how many evidence turns a question has, and over how many sessions they are spread;
- the rank buckets of every evidence turn in each list;
- for the evidence turns ``find`` misses at k = 10: where they sit in the lexical and vector
  lists (the better of the two), and whether the question names the turn's speaker, with the
  turn's rank among that speaker's turns only (what a list restricted to the named entity
  would give it).

    python tools/analyze_retrieval.py [--embedder cortex.index.embed:MiniLM | none] [--dir DIR]
        [--categories 1] [--depth 1000] [--json out]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import bench_retrieval as br  # noqa: E402
import sweep_retrieval as sw  # noqa: E402

from cortex import Cortex, Query  # noqa: E402

BUCKETS = (10, 32, 100, 200, 1000)


def bucket(rank: int | None) -> str:
    """``"<=10"``, ``"<=32"``, ... or ``"absent"`` (not in the list as read)."""
    if rank is None:
        return "absent"
    for b in BUCKETS:
        if rank <= b:
            return f"<={b}"
    return f">{BUCKETS[-1]}"


def rank_of(ranked: list[str], turn: str) -> int | None:
    """1-based rank of ``turn`` in ``ranked``, or None."""
    try:
        return ranked.index(turn) + 1
    except ValueError:
        return None


def collect(stores: list[Any], embedder: Any, depth: int) -> list[dict[str, Any]]:
    """One record per question: category, evidence, the three lists, and every turn's speaker."""
    out = []
    for name, store, dia, conv in stores:
        speaker = {
            t["dia_id"]: t["speaker"]
            for k, v in conv.items()
            if re.fullmatch(r"session_\d+", k) and isinstance(v, list)
            for t in v
        }
        opts: dict[str, Any] = {"embedder": embedder} if embedder is not None else {}
        with Cortex.open(store, actor="locomo", **opts) as cx:
            for qa in conv["qa"]:
                cat = qa.get("category")
                evidence = br._evidence(qa.get("evidence") or [])
                if cat not in br.CATEGORIES or not evidence:
                    continue
                q = str(qa["question"])
                rec: dict[str, Any] = {
                    "conv": name,
                    "cat": cat,
                    "question": q,
                    "evidence": sorted(evidence),
                    "lexical": [dia[str(m)] for m, _ in cx._lexical_search(q, depth)],
                    "find": [dia[str(h.memory.id)] for h in cx.find(Query(text=q, limit=100)).hits],
                    "speaker": speaker,
                }
                rec["vector"] = (
                    [dia[str(h.memory.id)] for h in cx.find(Query(near=q, limit=depth)).hits]
                    if embedder is not None
                    else []
                )
                out.append(rec)
    return out


def report(records: list[dict[str, Any]], categories: list[int]) -> str:
    lines = []
    for cat in categories:
        qs = [r for r in records if r["cat"] == cat]
        if not qs:
            continue
        label = br.CATEGORIES[cat]
        ev = [(r, e) for r in qs for e in r["evidence"]]
        lines.append(f"## {label}: {len(qs)} questions, {len(ev)} evidence turns")
        per_q = Counter(len(r["evidence"]) for r in qs)
        lines.append(
            "evidence turns per question: " + ", ".join(f"{k}: {per_q[k]}" for k in sorted(per_q))
        )
        sess = Counter(len({e.split(":")[0] for e in r["evidence"]}) for r in qs)
        lines.append("sessions per question: " + ", ".join(f"{k}: {sess[k]}" for k in sorted(sess)))
        r10 = [len(set(r["find"][:10]) & set(r["evidence"])) / len(r["evidence"]) for r in qs]
        dist = Counter(round(x, 2) for x in r10)
        lines.append(
            f"find recall@10 {sum(r10) / len(r10):.3f}; per question: "
            + ", ".join(f"{k}: {dist[k]}" for k in sorted(dist))
        )
        order = [*(f"<={b}" for b in BUCKETS), f">{BUCKETS[-1]}", "absent"]
        lines.append("")
        lines.append("| list | " + " | ".join(order) + " |")
        lines.append("|---|" + "---:|" * len(order))
        for lst in ("lexical", "vector", "find"):
            c = Counter(bucket(rank_of(r[lst], e)) for r, e in ev)
            lines.append(f"| {lst} | " + " | ".join(str(c[b]) for b in order) + " |")
        missed = [(r, e) for r, e in ev if e not in r["find"][:10]]

        def best(r: dict[str, Any], e: str) -> int | None:
            got = [x for x in (rank_of(r["lexical"], e), rank_of(r["vector"], e)) if x]
            return min(got) if got else None

        c = Counter(bucket(best(r, e)) for r, e in missed)
        lines.append(
            f"| missed by find@10 ({len(missed)}), better of lexical/vector | "
            + " | ".join(str(c[b]) for b in order)
            + " |"
        )
        named = []
        for r, e in missed:
            s = r["speaker"].get(e)
            if s and re.search(rf"\b{re.escape(s)}\b", r["question"]):
                named.append((r, e, s))
        own: Counter[str] = Counter()
        for r, e, s in named:
            ranks = [
                rank_of([t for t in r[lst] if r["speaker"].get(t) == s], e)
                for lst in ("lexical", "vector")
            ]
            got = [x for x in ranks if x]
            own[bucket(min(got) if got else None)] += 1
        lines.append(
            f"| missed and said by the speaker the question names ({len(named)}), "
            "better rank among that speaker's turns | "
            + " | ".join(str(own[b]) for b in order)
            + " |"
        )
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "bench" / "locomo"))
    ap.add_argument(
        "--embedder", default="cortex.index.embed:MiniLM", help='module:factory or "none"'
    )
    ap.add_argument("--dir", help="keep the built stores here (reused when present)")
    ap.add_argument(
        "--categories", default="1", help="comma-separated: 1 multi-hop .. 4 single-hop"
    )
    ap.add_argument("--depth", type=int, default=1000)
    ap.add_argument("--json")
    args = ap.parse_args()
    data, embedder = sw.inputs(args.data, args.embedder)
    with tempfile.TemporaryDirectory(prefix="cortex-analyze-") as tmp:
        where = Path(args.dir) if args.dir else Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        stores = sw.build(data, where, embedder)
        records = collect(stores, embedder, args.depth)
    print(report(records, [int(c) for c in args.categories.split(",")]))
    if args.json:
        Path(args.json).write_text(json.dumps(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
