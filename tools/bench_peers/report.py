"""The Markdown table of a suite run: ratios against the floor and the peers first."""

from __future__ import annotations

import statistics
from typing import Any

NAMES = {
    "cortex": "cortex",
    "floor": "raw LMDB floor",
    "cortex-pg": "cortex on PostgreSQL",
    "sqlite": "SQLite WAL+FTS5+sqlite-vec",
    "chroma": "Chroma (embedded)",
    "mem0": "mem0 OSS (infer=False)",
}
SHORT = {
    "floor": "floor",
    "cortex-pg": "PostgreSQL",
    "sqlite": "SQLite",
    "chroma": "Chroma",
    "mem0": "mem0",
}
ROWS = (
    ("ingest_batch", "ingest, durable batches of 1,000"),
    ("ingest_single", "ingest, one durable commit each"),
    ("get", "get by id"),
    ("find_type_tag", "find type + tag, limit 10"),
    ("text_top10", "text top-10"),
    ("vector_top10", "vector top-10"),
    ("vector_top10_type", "vector top-10 + type filter"),
    ("hybrid_top10", "hybrid top-10"),
    ("context", "context (budget 3,000 tokens)"),
)
INGEST = ("ingest_batch", "ingest_single")


def _us(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:.2f} s"
    if x >= 1e3:
        return f"{x / 1e3:.2f} ms" if x < 1e4 else f"{x / 1e3:.0f} ms"
    return f"{x:.1f} µs" if x < 100 else f"{x:.0f} µs"


def _cell(w: dict[str, Any] | None, key: str) -> str:
    if w is None:
        return "—"
    if "na" in w:
        return "n/a"
    if "error" in w:
        return "error"
    if key == "ingest_batch":
        return f"{w['rec_per_s']:,.0f} rec/s"
    if key == "ingest_single":
        return f"{_us(w['p50_us'])} / {_us(w['p95_us'])}"
    s = f"{_us(w['p50_us'])} / {_us(w['p95_us'])}"
    if "recall_at_10" in w:
        s += f" (r@10 {w['recall_at_10']:.3f})"
    return s


def _cost(w: dict[str, Any] | None, key: str) -> float | None:
    """Seconds per operation (lower is better), for ratios."""
    if not w or "na" in w or "error" in w:
        return None
    if key == "ingest_batch":
        return 1.0 / w["rec_per_s"]
    return w["p50_us"]


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "—"
    r = a / b
    return f"{r:.2f}×" if r >= 0.1 else f"{r:.3f}×"


def _minus(per: float | None, vec: int | None, n: int) -> float | None:
    if per is None:
        return None
    return per - (vec or 0) / n


def markdown(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    target = "bench-full" if doc["mode"] == "full" else "bench"
    out = [
        f"Benchmark suite, {doc['mode']} mode: `make {target}` ({doc['elapsed_s'] / 60:.1f} min).",
        f"Machine: {m['nproc']} × {m['cpu']}, {m['memory']}, Python {m['python']}, "
        f"{m['platform']}; load average {m['loadavg_at_start'][0]:.1f} at start, "
        f"{m['loadavg_at_end'][0]:.1f} at end.",
        "",
        "Cells are p50 / p95 latency per call (ingest in batches: records per second). Ratios "
        "are cortex's time per operation over the other system's (p50; > 1 means cortex is "
        "slower). r@10 is recall@10 against exact search. Each system runs in its own process "
        "(one BLAS thread); peak memory is the process's peak RSS after the data set is built.",
    ]
    by: dict[int, dict[str, dict[str, Any]]] = {}
    for r in doc["results"]:
        by.setdefault(r["n"], {})[r["system"]] = r
    reasons: dict[str, str] = {}
    sampled: dict[str, list[str]] = {}
    spreads: list[tuple[float, str]] = []
    for n in sorted(by):
        res = by[n]
        peers = [s for s in ("floor", "cortex-pg", "sqlite", "chroma", "mem0") if s in res]
        systems = [s for s in ("cortex", *peers) if s in res]
        out += ["", f"### N = {n:,}", ""]
        head = ["operation"] + [f"cortex ÷ {SHORT[p]}" for p in peers]
        head += [NAMES[s] for s in systems]
        out.append("| " + " | ".join(head) + " |")
        out.append("|---" + "|---:" * (len(head) - 1) + "|")
        cx = res.get("cortex", {}).get("workloads", {})
        for key, label in ROWS:
            ws = {s: res[s].get("workloads", {}).get(key) for s in systems}
            if all(w is None or "na" in w for w in ws.values()) and key != "context":
                continue
            row = [label]
            row += [_ratio(_cost(cx.get(key), key), _cost(ws[p], key)) for p in peers]
            row += [_cell(ws[s], key) for s in systems]
            out.append("| " + " | ".join(row) + " |")
            for s, w in ws.items():
                if w and "na" in w and w["na"] != "cortex only":
                    reasons[f"{NAMES[s]}, {label}"] = w["na"]
                if w and "error" in w:
                    reasons[f"{NAMES[s]}, {label} at {n:,}"] = "error: " + w["error"]
                if w and w.get("spread"):
                    spreads.append((w["spread"], f"{s} {key} at {n:,}"))
                if w and "sampled" in w:
                    got = w["sampled"].split(" (")[0]
                    sampled.setdefault(NAMES[s], []).append(f"{key} at {n:,}: {got}")
        disk = [res[s].get("disk_bytes_per_memory") for s in systems]
        rss = [res[s].get("peak_rss_above_dataset_mib") for s in systems]
        cd, cr = res.get("cortex", {}).get("disk_bytes_per_memory"), None
        cr = res.get("cortex", {}).get("peak_rss_above_dataset_mib")
        row = ["disk per memory"] + [_ratio(cd, res[p].get("disk_bytes_per_memory")) for p in peers]
        row += [f"{d:,.0f} B" if d else "—" for d in disk]
        out.append("| " + " | ".join(row) + " |")
        vb = {s: res[s].get("disk_bytes_vectors") for s in systems}
        if any(vb.values()):
            row = ["disk per memory, without vectors"]
            cw = _minus(cd, vb.get("cortex"), n)  # cortex's own figure without vectors
            row += [
                _ratio(cw, _minus(res[p].get("disk_bytes_per_memory"), vb[p], n)) for p in peers
            ]
            row += [
                f"{x:,.0f} B"
                if (x := _minus(res[s].get("disk_bytes_per_memory"), vb[s], n))
                else "—"
                for s in systems
            ]
            out.append("| " + " | ".join(row) + " |")
        row = ["peak memory above the data set"] + [
            _ratio(cr, res[p].get("peak_rss_above_dataset_mib")) for p in peers
        ]
        row += [f"{x:,.0f} MiB" if x is not None else "—" for x in rss]
        out.append("| " + " | ".join(row) + " |")
        row = ["RSS at the end: heap + mapped files"] + ["" for _ in peers]
        for s in systems:
            a, f = res[s].get("rss_anon_mib_end"), res[s].get("rss_file_mib_end")
            row.append(f"{a:,.0f} + {f:,.0f} MiB" if a is not None and f is not None else "—")
        out.append("| " + " | ".join(row) + " |")
        for s in systems:
            if "unavailable" in res[s]:
                reasons[f"{NAMES[s]} at {n:,}"] = res[s]["unavailable"]
    if spreads:
        vals = [s for s, _ in spreads]
        worst = max(spreads)
        out += [
            "",
            f"Noise: the p50s of the {doc['repeat']} repeats of a read workload differ by a median "
            f"of {statistics.median(vals) * 100:.0f}% of their median (worst "
            f"{worst[0] * 100:.0f}%, {worst[1]}); ingest ran once per size.",
        ]
    notes = sorted({n for r in doc["results"] for n in r.get("notes", []) if len(n) < 300})
    if reasons or notes or sampled:
        out += ["", "Not measured (n/a), sampled, and notes (context is cortex's own):", ""]
        out += [f"- {k}: n/a, {v}" for k, v in reasons.items()]
        out += [
            f"- {k}: fewer queries within the time budget ({'; '.join(v)})"
            for k, v in sampled.items()
        ]
        out += [f"- {n}" for n in notes]
    return "\n".join(out) + "\n"
