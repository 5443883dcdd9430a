"""Drive one system through every workload and return the measurements as a dict.

Every workload runs the same records and the same queries. A method of ``System`` that raises
``NotAvailable`` is reported as ``n/a`` with its reason; any other exception as ``error``.
"""

from __future__ import annotations

import os
import resource
import statistics
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench_peers import dataset


class NotAvailable(Exception):
    """This system cannot run this workload (the message says why)."""


BATCH = 1000


def rss_mib() -> float:
    """Peak resident memory of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _status_mib(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def reset_peak() -> float:
    """Reset the kernel's peak-RSS mark (Linux ``clear_refs``) and return the RSS now, in MiB.

    The data set's generation leaves a high mark; after this, the peak measures the system.
    """
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return _status_mib("VmRSS")
    except OSError:
        return rss_mib()


def dir_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            if not os.path.islink(p):
                total += os.stat(p).st_blocks * 512
    return total


def _pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q))


def _stats(runs: list[list[float]]) -> dict[str, Any]:
    """p50/p95 over every timed call; spread = range of the per-repeat medians / their median."""
    pooled = [x for r in runs for x in r]
    meds = [statistics.median(r) for r in runs]
    med = statistics.median(meds)
    return {
        "p50_us": _pct(pooled, 50) * 1e6,
        "p95_us": _pct(pooled, 95) * 1e6,
        "ops_per_s": 1.0 / statistics.median([sum(r) / len(r) for r in runs]),
        "spread": (max(meds) - min(meds)) / med if med > 0 and len(meds) > 1 else 0.0,
        "calls": len(pooled),
        "repeats": len(runs),
    }


def _recall(got: list[list[int]], truth: list[list[int]]) -> float:
    hits = sum(len(set(g[:10]) & set(t[:10])) for g, t in zip(got, truth, strict=False))
    return hits / (10 * len(got)) if got else 0.0


def run(
    system_cls: Callable[..., Any],
    n: int,
    path: Path,
    *,
    repeat: int,
    singles: int,
    budget_s: float,
    log: Callable[[str], None],
) -> dict[str, Any]:
    t_gen = time.perf_counter()
    ds = dataset.make(n)
    out: dict[str, Any] = {"n": n, "workloads": {}, "notes": []}
    out["dataset_s"] = time.perf_counter() - t_gen
    w = out["workloads"]
    rss0 = reset_peak()

    try:
        system = system_cls(path, ds, log)
    except NotAvailable as exc:
        out["unavailable"] = str(exc)
        return out
    except Exception as exc:
        out["unavailable"] = f"error: {type(exc).__name__}: {exc}"
        out["traceback"] = traceback.format_exc()
        return out
    rss0 = getattr(system, "rss_baseline", rss0)  # after an adapter's untimed set-up

    # -- ingest, durable batches of 1,000 --------------------------------------------------------
    lat: list[float] = []
    t0 = time.perf_counter()
    try:
        for b in range(0, n, BATCH):
            t = time.perf_counter()
            system.ingest_batch(b, min(b + BATCH, n))
            lat.append(time.perf_counter() - t)
            if len(lat) % 20 == 0:
                log(f"  ingested {b + BATCH:,}")
    except Exception as exc:
        out["unavailable"] = f"ingest failed: {type(exc).__name__}: {exc}"
        out["traceback"] = traceback.format_exc()
        return out
    total = time.perf_counter() - t0
    w["ingest_batch"] = {
        "rec_per_s": n / total,
        "p50_us": _pct(lat, 50) * 1e6,
        "p95_us": _pct(lat, 95) * 1e6,
        "calls": len(lat),
        "repeats": 1,
        "spread": None,
    }
    system.after_ingest()
    # a store in a server (cortex on PostgreSQL) says what it holds; the others are their files
    out["disk_bytes"] = system.disk_bytes() if hasattr(system, "disk_bytes") else dir_bytes(path)
    out["disk_bytes_per_memory"] = out["disk_bytes"] / n
    if hasattr(system, "vector_bytes"):
        out["disk_bytes_vectors"] = system.vector_bytes()
    log(f"  ingest {n / total:,.0f} rec/s, {out['disk_bytes_per_memory']:,.0f} B/memory")

    # -- reads ---------------------------------------------------------------------------------
    q_filters = ds.filters
    q_text = ds.text_queries
    q_vec = list(range(len(ds.query_vectors)))
    truth = ds.truth()
    truth_typed = ds.truth(type_filter=True)

    def workload(
        name: str,
        items: list[Any],
        call: Callable[[Any], Any],
        score: Callable[..., Any] | None = None,
    ) -> None:
        try:
            system.prepare(name)
            res0 = [call(x) for x in items[:3]]  # warm up, and the cost of one call
            del res0
            t = time.perf_counter()
            for x in items[3:8]:
                call(x)
            per = max((time.perf_counter() - t) / 5, 1e-7)
            count = min(len(items), max(10, int(budget_s / repeat / per)))
            sample = items[:count]
            runs = []
            results: list[Any] = []
            for r in range(repeat):
                times = []
                for x in sample:
                    t = time.perf_counter()
                    got = call(x)
                    times.append(time.perf_counter() - t)
                    if r == 0:
                        results.append(got)
                runs.append(times)
            st = _stats(runs)
            if count < len(items):
                st["sampled"] = f"{count} of {len(items)} queries (time budget)"
            if score is not None:
                st["recall_at_10"] = score(results, count)
            w[name] = st
            log(f"  {name}: p50 {st['p50_us']:,.1f} µs, p95 {st['p95_us']:,.1f} µs")
        except NotAvailable as exc:
            w[name] = {"na": str(exc)}
            log(f"  {name}: n/a ({exc})")
        except Exception as exc:
            w[name] = {"error": f"{type(exc).__name__}: {exc}"}
            log(f"  {name}: error {type(exc).__name__}: {exc}")
            out["notes"].append(traceback.format_exc())

    workload("get", ds.get_ids, system.get)
    workload("find_type_tag", q_filters, lambda f: system.find(f[0], f[1], 10))
    workload("text_top10", q_text, lambda q: system.text(q, 10))
    workload(
        "vector_top10",
        q_vec,
        lambda j: system.vector(j, 10, None),
        lambda res, c: _recall(res, truth[:c]),
    )
    workload(
        "vector_top10_type",
        q_vec,
        lambda j: system.vector(j, 10, ds.vector_type_filters[j]),
        lambda res, c: _recall(res, truth_typed[:c]),
    )
    workload(
        "hybrid_top10",
        q_vec,
        lambda j: system.hybrid(q_text[j], j, 10),
    )
    workload("context", q_vec, lambda j: system.context(q_text[j], j))

    # -- durable single writes on top of the store of size N -------------------------------------
    try:
        system.prepare("ingest_single")
        extra = ds.extra[:singles]
        lat = []
        for i in extra:
            t = time.perf_counter()
            system.ingest_one(i)
            lat.append(time.perf_counter() - t)
        w["ingest_single"] = {
            "rec_per_s": len(lat) / sum(lat),
            "p50_us": _pct(lat, 50) * 1e6,
            "p95_us": _pct(lat, 95) * 1e6,
            "calls": len(lat),
            "repeats": 1,
            "spread": None,
        }
        log(f"  ingest_single: p50 {w['ingest_single']['p50_us']:,.0f} µs")
    except NotAvailable as exc:
        w["ingest_single"] = {"na": str(exc)}
    except Exception as exc:
        w["ingest_single"] = {"error": f"{type(exc).__name__}: {exc}"}
        out["notes"].append(traceback.format_exc())

    out["notes"].extend(system.notes)
    # what the RSS is made of before closing: heap (anon) and mapped files (LMDB maps its file)
    out["rss_anon_mib_end"] = _status_mib("RssAnon")
    out["rss_file_mib_end"] = _status_mib("RssFile")
    system.close()
    out["peak_rss_mib"] = rss_mib()  # ru_maxrss: after the reset, the peak since the data set
    out["rss_after_dataset_mib"] = rss0
    out["peak_rss_above_dataset_mib"] = max(0.0, rss_mib() - rss0)
    return out


def build(system: Any, n: int) -> Any:
    """``system`` (a peer's ``System``) with the data set's first ``n`` records.

    As ``run`` ingests them (durable batches of ``BATCH``), untimed. Returns ``system``.
    """
    for start in range(0, n, BATCH):
        system.ingest_batch(start, min(start + BATCH, n))
    return system
