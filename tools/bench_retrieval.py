"""Retrieval benchmark on LoCoMo (../shared/bench/locomo/), following its README's protocol.

One store per conversation; each turn becomes one Event (kind ``interaction``, counterparty =
the speaker, summary = the text plus the image caption when there is one, occurred_at = the
session's date-time, tag = the session), written with ``write_many``. For every question of
categories 1-4 with evidence, each retriever returns its top k; recall@k of a question is the
share of its evidence turns among them. Reported: the mean over questions, overall and per
category, for k = 5 and 10, and the ingest rate.

Retrievers:

- ``lexical``: the store's BM25 index (``Store._lexical_search``), always;
- ``find(text)`` / ``hybrid``: ``cx.find(Query(text=q, limit=k))`` (lexical without an
  embedder; with one, lexical and vector fused by the store's default, convex fusion);
- ``hybrid (rrf)``: the same with reciprocal rank fusion (``cortex.Fusion("rrf")``, k = 60);
- ``vector``: ``cx.find(Query(near=q, limit=k))``, with ``--embedder`` only.

``--embedder module:factory`` names a callable returning an embedder (for example
``cortex.index.embed:HashingEmbedder``); stores are then opened with it and ingest is timed with it.

    python tools/bench_retrieval.py [--data ../shared/bench/locomo] [--embedder M:F] [--json out]
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import cortex  # noqa: E402
from cortex import Cortex, Event, MemoryId, NewMemory  # noqa: E402

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10)
Retriever = Callable[[Cortex, str, int], list[MemoryId]]


def _when(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` as an aware datetime (UTC: the dataset gives no zone)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def turns(conv: dict[str, Any]) -> list[tuple[str, str, Event]]:
    """``(dia_id, session, event)`` for every turn, in order."""
    out = []
    sessions = sorted(
        (k for k, v in conv.items() if re.fullmatch(r"session_\d+", k) and isinstance(v, list)),
        key=lambda k: int(k.split("_")[1]),
    )
    for s in sessions:
        when = _when(conv[f"{s}_date_time"])
        for t in conv[s]:
            text = t["text"]
            if t.get("blip_caption"):
                text = f"{text} {t['blip_caption']}"
            event = Event(
                kind="interaction", counterparty=t["speaker"], summary=text, occurred_at=when
            )
            out.append((t["dia_id"], s, event))
    return out


def _evidence(ids: list[str]) -> set[str]:
    # a few entries hold several ids ("D8:6; D9:17") or stray spaces
    return {p for e in ids for p in re.split(r"[;,\s]+", e) if p}


def lexical(cx: Cortex, q: str, k: int) -> list[MemoryId]:
    return [m for m, _ in cx._lexical_search(q, k)]


def _find(field: str) -> Retriever:
    """``cx.find(Query(<field>=q, limit=k))``: the lead's query API (``text`` or ``near``)."""

    def run(cx: Cortex, q: str, k: int) -> list[MemoryId]:
        query = cortex.Query(limit=k, **{field: q})
        return [h.memory.id for h in cx.find(query).hits]

    return run


def _rrf(cx: Cortex, q: str, k: int) -> list[MemoryId]:
    """The hybrid find with reciprocal rank fusion (k = 60) instead of the default fusion."""
    default = cx.fusion
    cx.fusion = cortex.Fusion("rrf")
    try:
        return _find("text")(cx, q, k)
    finally:
        cx.fusion = default


def _search(cx: Cortex, q: str, k: int) -> list[MemoryId]:
    """``cx.search(q, limit=k)``: the router picks the handler (``cortex.query.search``)."""
    return [h.memory.id for h in cx.search(q, limit=k).hits]


def retrievers(with_embedder: bool) -> dict[str, Retriever]:
    out: dict[str, Retriever] = {"lexical": lexical}
    out["hybrid" if with_embedder else "find(text)"] = _find("text")
    out["search (routed)"] = _search
    if with_embedder:
        out["hybrid (rrf)"] = _rrf
        out["vector"] = _find("near")
    return out


def run(data: Path, embedder_spec: str | None) -> dict[str, Any]:
    embedder = None
    if embedder_spec:
        module, _, factory = embedder_spec.partition(":")
        embedder = getattr(importlib.import_module(module), factory)()
    methods = retrievers(embedder is not None)
    recalls: dict[str, dict[int, dict[int, list[float]]]] = {
        m: {k: {c: [] for c in CATEGORIES} for k in KS} for m in methods
    }
    ingested, ingest_s, unknown = 0, 0.0, 0
    with tempfile.TemporaryDirectory(prefix="cortex-locomo-") as tmp:
        for path in sorted(data.glob("*.json")):
            conv = json.loads(path.read_text())
            rows = turns(conv)
            opts: dict[str, Any] = {"embedder": embedder} if embedder is not None else {}
            with Cortex.open(Path(tmp) / path.stem, actor="locomo", **opts) as cx:
                t0 = time.perf_counter()
                uris = cx.write_many(NewMemory(data=e, tags=[s]) for _, s, e in rows)
                ingest_s += time.perf_counter() - t0
                ingested += len(uris)
                dia = {u.id: d for u, (d, _, _) in zip(uris, rows, strict=True)}
                known = set(dia.values())
                for qa in conv["qa"]:
                    cat = qa.get("category")
                    evidence = _evidence(qa.get("evidence") or [])
                    if cat not in CATEGORIES or not evidence:
                        continue
                    unknown += len(evidence - known)
                    for name, fn in methods.items():
                        top = fn(cx, str(qa["question"]), max(KS))
                        for k in KS:
                            found = {dia[m] for m in top[:k]} & evidence
                            recalls[name][k][cat].append(len(found) / len(evidence))
    result: dict[str, Any] = {
        "conversations": len(list(data.glob("*.json"))),
        "memories": ingested,
        "ingest_per_s": ingested / ingest_s,
        "embedder": embedder_spec,
        "unknown_evidence_ids": unknown,
        "methods": {},
    }
    for name in methods:
        row: dict[str, Any] = {}
        for k in KS:
            every = [r for c in CATEGORIES for r in recalls[name][k][c]]
            row[f"recall@{k}"] = statistics.fmean(every)
            row[f"questions@{k}"] = len(every)
            for c, label in CATEGORIES.items():
                xs = recalls[name][k][c]
                row[f"recall@{k}/{label}"] = statistics.fmean(xs) if xs else float("nan")
                row[f"n/{label}"] = len(xs)
        result["methods"][name] = row
    return result


def table(result: dict[str, Any]) -> str:
    head = ["method", "k", "overall", *CATEGORIES.values()]
    lines = ["| " + " | ".join(head) + " |", "|---|---:|" + "---:|" * (len(head) - 2)]
    for name, row in result["methods"].items():
        for k in KS:
            cells = [name, str(k), f"{row[f'recall@{k}']:.3f}"]
            cells += [f"{row[f'recall@{k}/{c}']:.3f}" for c in CATEGORIES.values()]
            lines.append("| " + " | ".join(cells) + " |")
    first = next(iter(result["methods"].values()))
    counts = ", ".join(f"{c} {first[f'n/{c}']}" for c in CATEGORIES.values())
    lines.append("")
    lines.append(
        f"{result['conversations']} conversations, {result['memories']:,} memories, "
        f"{first['questions@10']} questions ({counts}); ingest {result['ingest_per_s']:,.0f} "
        f"memories/s (write_many"
        + (f", embedder {result['embedder']}" if result["embedder"] else "")
        + f"); {result['unknown_evidence_ids']} evidence ids name no turn"
    )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "bench" / "locomo"))
    ap.add_argument("--embedder", help="module:factory returning an embedder")
    ap.add_argument("--json")
    args = ap.parse_args()
    data = Path(args.data)
    if not data.is_dir():
        data = Path("/work/shared/bench/locomo")
    result = run(data, args.embedder)
    print(table(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
