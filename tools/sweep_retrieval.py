"""Sweep the text-query ranking constants on LoCoMo, with leave-one-conversation-out.

Builds the development split's stores once (``tools/bench_retrieval.py``'s protocol, MiniLM by
default), then for every combination of ``Fusion(context=, context_weight=, entity_weight=)``
runs ``find(Query(text=question, limit=10))`` and prints recall@5 and recall@10, overall and per
category, for every configuration (the whole table), then, for each conversation held out, the
configuration that scores best (recall@10) on the other two and what it scores on the held-out
one, pooled over the three. An ``entity_weight`` above 0 also cuts the names it counts from the
vector query (``cortex.query.rerank.unnamed``), so 0 is the ranking without both.

    python tools/sweep_retrieval.py [--embedder cortex.index.embed:MiniLM | none] [--dir DIR]
        [--context 1,2,3] [--context-weight 0.2,0.3,0.4] [--entity-weight 0,0.1,0.2,0.3,0.4]
        [--json out]
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import bench_retrieval as br  # noqa: E402

from cortex import Cortex, Fusion, NewMemory, Query  # noqa: E402

Rows = list[tuple[int, float, float]]  # (category, recall@5, recall@10) per question


def build(data: Path, where: Path, embedder: Any) -> list[tuple[str, Path, dict[Any, str], Any]]:
    """Each conversation's store (built once): ``(name, path, id -> dia_id, conversation)``."""
    out = []
    for path in sorted(data.glob("*.json")):
        conv = json.loads(path.read_text())
        rows = br.turns(conv)
        store = where / path.stem
        ids_file = where / f"{path.stem}.ids"
        if not ids_file.exists():
            opts: dict[str, Any] = {"embedder": embedder} if embedder is not None else {}
            with Cortex.open(store, actor="locomo", **opts) as cx:
                uris = cx.write_many(NewMemory(data=e, tags=[s]) for _, s, e in rows)
            ids_file.write_text("\n".join(str(u.id) for u in uris))
        ids_text = ids_file.read_text().split()
        dia = {i: d for i, (d, _, _) in zip(ids_text, rows, strict=True)}
        out.append((path.stem, store, dia, conv))
    return out


def measure(
    stores: list[tuple[str, Path, dict[Any, str], Any]], embedder: Any, f: Fusion
) -> dict[str, Rows]:
    res: dict[str, Rows] = {}
    for name, store, dia, conv in stores:
        opts: dict[str, Any] = {"embedder": embedder} if embedder is not None else {}
        rows: Rows = []
        with Cortex.open(store, actor="locomo", fusion=f, **opts) as cx:
            for qa in conv["qa"]:
                cat = qa.get("category")
                evidence = br._evidence(qa.get("evidence") or [])
                if cat not in br.CATEGORIES or not evidence:
                    continue
                hits = cx.find(Query(text=str(qa["question"]), limit=10)).hits
                top = [dia[str(h.memory.id)] for h in hits]
                r5 = len(set(top[:5]) & evidence) / len(evidence)
                r10 = len(set(top[:10]) & evidence) / len(evidence)
                rows.append((cat, r5, r10))
        res[name] = rows
    return res


def mean(rows: Rows, k: int = 10, cat: int | None = None) -> float:
    xs = [r[1 if k == 5 else 2] for r in rows if cat is None or r[0] == cat]
    return statistics.fmean(xs) if xs else float("nan")


def report(grid: dict[str, dict[str, Rows]]) -> str:
    cats = br.CATEGORIES
    lines = ["| configuration | r@10 | r@5 | " + " | ".join(cats.values()) + " |"]
    lines.append("|---|---:|---:|" + "---:|" * len(cats))
    pooled = {cfg: [r for rows in by.values() for r in rows] for cfg, by in grid.items()}
    for cfg in sorted(grid, key=lambda c: (-mean(pooled[c]), c)):
        rows = pooled[cfg]
        cells = [f"{mean(rows):.3f}", f"{mean(rows, 5):.3f}"]
        cells += [f"{mean(rows, 10, c):.3f}" for c in cats]
        lines.append(f"| {cfg} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Leave one conversation out (chosen by recall@10 on the other two):")
    names = sorted(next(iter(grid.values())))
    held: Rows = []
    for name in names:
        train = [n for n in names if n != name]

        def on(cfg: str, train: list[str] = train) -> float:
            return mean([r for n in train for r in grid[cfg][n]])

        best = max(sorted(grid), key=on)
        rows = grid[best][name]
        held += rows
        lines.append(
            f"- {name} held out: chose `{best}` ({on(best):.3f} on the other two); "
            f"recall@10 on {name} {mean(rows):.3f}"
        )
    per = ", ".join(f"{cats[c]} {mean(held, 10, c):.3f}" for c in cats)
    lines.append(
        f"- pooled held-out recall@10 {mean(held):.3f}, recall@5 {mean(held, 5):.3f}; {per}"
    )
    return "\n".join(lines)


class Memo:
    """An embedder that remembers what it embedded: each question is embedded once per sweep."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_id: str = inner.model_id
        self.dim: int = inner.dim
        self.seen: dict[str, Any] = {}

    def embed(self, texts: Any) -> Any:
        """The inner embedder's vectors, each text embedded once."""
        import numpy as np

        todo = [t for t in dict.fromkeys(texts) if t not in self.seen]
        if todo:
            self.seen.update(zip(todo, self.inner.embed(todo), strict=True))
        return np.stack([self.seen[t] for t in texts]) if texts else self.inner.embed([])


def inputs(data: str, embedder: str) -> tuple[Path, Memo | None]:
    """The LoCoMo directory and the embedder to measure with.

    The shared copy of LoCoMo when ``data`` is missing; the embedder ``module:factory`` names,
    memoised (None for "none").
    """
    where = Path(data)
    if not where.is_dir():
        where = Path("/work/shared/bench/locomo")
    if embedder == "none":
        return where, None
    module, _, factory = embedder.partition(":")
    return where, Memo(getattr(importlib.import_module(module), factory)())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "bench" / "locomo"))
    ap.add_argument(
        "--embedder", default="cortex.index.embed:MiniLM", help='module:factory or "none"'
    )
    ap.add_argument("--dir", help="keep the built stores here (reused when present)")
    ap.add_argument("--context", default="1,2,3")
    ap.add_argument("--context-weight", default="0.2,0.3,0.4")
    ap.add_argument("--entity-weight", default="0,0.1,0.2,0.3,0.4")
    ap.add_argument("--json")
    args = ap.parse_args()
    data, embedder = inputs(args.data, args.embedder)
    grid: dict[str, dict[str, Rows]] = {}
    with tempfile.TemporaryDirectory(prefix="cortex-sweep-") as tmp:
        where = Path(args.dir) if args.dir else Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        stores = build(data, where, embedder)
        windows = [int(x) for x in args.context.split(",")]
        cws = [float(x) for x in args.context_weight.split(",")]
        ews = [float(x) for x in args.entity_weight.split(",")]
        for w, cw, ew in itertools.product(windows, cws, ews):
            if cw == 0 and w != windows[0]:
                continue  # the window does not matter without its weight
            cfg = f"context={w if cw else 0} context_weight={cw} entity_weight={ew}"
            grid[cfg] = measure(
                stores, embedder, Fusion(context=w, context_weight=cw, entity_weight=ew)
            )
            print(cfg, f"{mean([r for rows in grid[cfg].values() for r in rows]):.3f}", flush=True)
    print()
    print(report(grid))
    if args.json:
        Path(args.json).write_text(json.dumps(grid))
    return 0


if __name__ == "__main__":
    sys.exit(main())
