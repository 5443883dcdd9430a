"""Ingest and routing benchmark (issue 13): episodes/s, MB/s and the router's latency.

- chat: 1,000 chat turns, each ``Cortex.ingest`` of one turn (one durable transaction each)
  with a scripted extractor that draws one Fact from every turn (so an embedder, when given,
  embeds one memory per turn), reported as episodes/s;
- document: one ~1 MB markdown document (headings, paragraphs, lists, code fences) in one
  ``ingest``: MB/s, chunks, and the chunk search that follows (``find(evidence=)`` p50);
- router: ``cortex.query.router.route`` p50 / p95 over the labelled questions of
  ``tests/data/router_queries.jsonl`` when present, else a built-in set.

Medians of ``--repeat`` runs, each on a fresh store in a temporary directory.

    python tools/bench_ingest.py [--turns 1000] [--mb 1] [--repeat 3] [--embedder M:F]
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cortex import Cortex, Fact, NewMemory, Query  # noqa: E402
from cortex.agent.extract import Context, Extracted, Extraction  # noqa: E402
from cortex.query.router import route  # noqa: E402

_VOCABULARY = (
    "harbour boat north south meeting budget flight paris lisbon tea coffee plan launch "
    "review design code test deploy sam ana bob alice project atlas quarterly report"
)
WORDS = _VOCABULARY.split(" ")


class OneFactPerTurn:
    """A scripted extractor: one Fact quoting the whole turn (stands in for an LLM)."""

    def extract(self, content: str, context: Context) -> Extraction:
        """One Fact per turn."""
        fact = Fact(statement=content[:200], subject="user", predicate="said")
        span = (0, len(content.encode()))
        return Extraction(items=(Extracted(memory=NewMemory(data=fact), quote=content, span=span),))


def turns(n: int) -> list[str]:
    out = []
    for i in range(n):
        w = [WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(12)]
        out.append(f"{'Sam' if i % 2 else 'Ana'}: turn {i} about the {' '.join(w)}.")
    return out


def document(mb: float) -> str:
    parts: list[str] = []
    size = 0
    i = 0
    while size < mb * 1_000_000:
        w = [WORDS[(i * 5 + k) % len(WORDS)] for k in range(40)]
        block = (
            f"## Section {i}\n\n"
            + " ".join(
                f"Sentence {j} of section {i} mentions {' '.join(w[j : j + 6])}." for j in range(8)
            )
            + "\n\n- item one\n- item two\n\n"
            + ("```python\nprint('hello')\n```\n\n" if i % 5 == 0 else "")
        )
        parts.append(block)
        size += len(block.encode())
        i += 1
    return "".join(parts)


def run_once(args: argparse.Namespace, embedder: Any) -> dict[str, float]:
    opts: dict[str, Any] = {"embedder": embedder} if embedder is not None else {}
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="cortex-ingest-") as tmp:
        with Cortex.open(Path(tmp) / "chat", actor="bench", **opts) as cx:
            ex = OneFactPerTurn()
            chat = turns(args.turns)
            t0 = time.perf_counter()
            for text in chat:
                cx.ingest(text, source="chat", extractor=ex)
            out["chat_episodes_per_s"] = len(chat) / (time.perf_counter() - t0)
        with Cortex.open(Path(tmp) / "doc", actor="bench", **opts) as cx:
            doc = document(args.mb)
            size = len(doc.encode())
            t0 = time.perf_counter()
            ep = cx.ingest(doc, source="upload", media_type="text/markdown").episode
            took = time.perf_counter() - t0
            out["doc_mb_per_s"] = size / 1e6 / took
            out["doc_chunks"] = len(ep.chunks)
            lat = []
            for q in ("budget review", "flight to paris", "harbour boat north", "atlas launch"):
                t0 = time.perf_counter()
                cx.find(Query(text=q, limit=1, evidence=5))
                lat.append(time.perf_counter() - t0)
            out["evidence_search_ms_p50"] = statistics.median(lat) * 1000
    return out


def router_latency() -> dict[str, float]:
    path = ROOT / "tests" / "data" / "router_queries.jsonl"
    if path.exists():
        qs = [json.loads(line)["q"] for line in path.read_text().splitlines() if line.strip()]
    else:
        qs = [
            "what happened last week",
            "who is Sarah Chen",
            "what's Ana's phone number",
            "what do I prefer for breakfast",
            "how do I know Priya",
            "anything about hiking?",
            "what topics came up this month",
            "between March and June 2024 which projects were busiest",
        ]
    times = []
    for _ in range(5):
        for q in qs:
            t0 = time.perf_counter()
            route(q, entities=["Sam", "Ana", "Sarah Chen"])
            times.append(time.perf_counter() - t0)
    times.sort()
    return {
        "router_questions": len(qs),
        "router_ms_p50": statistics.median(times) * 1000,
        "router_ms_p95": times[int(0.95 * (len(times) - 1))] * 1000,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--mb", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--embedder", help="module:factory of an embedder (e.g. cortex.index.embed:MiniLM)"
    )
    args = ap.parse_args()
    embedder = None
    if args.embedder:
        module, _, factory = args.embedder.partition(":")
        embedder = getattr(importlib.import_module(module), factory)()
    runs = [run_once(args, embedder) for _ in range(args.repeat)]
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    med |= router_latency()
    print(f"embedder: {args.embedder or 'none'}; medians of {args.repeat} runs")
    print("| measure | value |\n|---|---:|")
    for k, v in med.items():
        print(f"| {k} | {v:,.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
