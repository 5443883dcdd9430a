"""Bulk ingest with the store's own ids against caller-chosen random 16-byte ids.

An import from another system brings its own ids, in no order. This tool writes the bench
suite's records (``tools/bench_peers/dataset.py``, no vectors) in durable batches of 1,000
twice, into fresh stores: once with the ids cortex makes (time-ordered), once with random
16-byte ids given by the caller (``NewMemory(id=...)``), and prints the records per second per
tenth of the load, how much slower the last tenth is than the first, the CPU time (user and
kernel) per record and the disk per memory.

With ``--vectors`` each record has the data set's precomputed vector (as in ``make bench``:
cortex through an embedder that hands them out). With ``--sqlite`` the same records go into
SQLite too, in the same run, as the bench suite's SQLite peer stores them (WAL,
synchronous=FULL, a tag table, contentless FTS5, a sqlite-vec table with ``--vectors``) plus the
caller's 16-byte id in a ``unique`` column: time-ordered ids (as cortex makes them) and random
ones. Run it with the bench venv (its SQLite has FTS5's ``contentless_delete``, and sqlite-vec):

    python tools/bench_random_ids.py [--size 50000] [--vectors] [--sqlite]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_peers.cortex_adapter import PrecomputedEmbedder, to_data
from bench_peers.dataset import make

from cortex import Cortex, MemoryId, NewMemory

BATCH = 1000


def run(n: int, random_ids: bool, vectors: bool) -> None:
    ds = make(n)
    items = [
        NewMemory(
            data=to_data(ds, i),
            tags=ds.tags[i],
            importance=ds.importance[i],
            id=MemoryId(os.urandom(16)) if random_ids else None,
        )
        for i in range(n)
    ]
    tmp = Path(tempfile.mkdtemp(prefix="cortex-random-ids-"))
    try:
        tenth = max(BATCH, n // 10 // BATCH * BATCH)
        rates: list[float] = []
        kw = {"embedder": PrecomputedEmbedder(ds)} if vectors else {}
        with Cortex.open(tmp / "s", actor="bench", map_size=1 << 32, **kw) as cx:
            cpu = time.process_time()
            start = time.perf_counter()
            mark = start
            for lo in range(0, n, BATCH):
                cx.write_many(items[lo : lo + BATCH])
                if (lo + BATCH) % tenth == 0:
                    now = time.perf_counter()
                    rates.append(tenth / (now - mark))
                    mark = now
            total = time.perf_counter() - start
            cpu = time.process_time() - cpu
        size = sum(f.stat().st_size for f in (tmp / "s").rglob("*") if f.is_file())
        name = "caller's random ids" if random_ids else "the store's ids"
        report(f"cortex, {name}", n, total, cpu, rates=rates, size=size)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report(name: str, n: int, total: float, cpu: float, *, rates: list[float], size: int) -> None:
    print(
        f"{name:28s} {n / total:7,.0f} records/s ({cpu / n * 1e6:.0f} µs CPU each); per tenth: "
        + " ".join(f"{r:,.0f}" for r in rates)
        + f"; the last tenth {rates[0] / rates[-1]:.2f}x slower than the first; "
        f"{size / n:,.0f} B per memory",
        flush=True,
    )


def run_sqlite(n: int, random_ids: bool, vectors: bool) -> None:
    """The same records into SQLite, each with a 16-byte id in a unique column."""
    from bench_peers.sqlite_peer import _driver

    db = _driver()
    ds = make(n)
    t0 = time.time_ns() // 1000
    ids = [
        os.urandom(16) if random_ids else (t0 + i).to_bytes(8, "big") + os.urandom(8)
        for i in range(n)
    ]
    rows = []
    for i in range(n):
        rec = ds.record(i)
        rows.append((ids[i], rec["type"], json.dumps(rec), rec["tags"], ds.texts[i]))
    tmp = Path(tempfile.mkdtemp(prefix="cortex-random-ids-sqlite-"))
    try:
        con = db.connect(str(tmp / "peer.db"), isolation_level=None)
        if vectors:
            import sqlite_vec

            con.enable_load_extension(True)
            sqlite_vec.load(con)
            con.enable_load_extension(False)
            con.execute("create virtual table vec using vec0(embedding float[384], type text)")
        con.execute("pragma journal_mode=wal")
        con.execute("pragma synchronous=full")
        con.executescript(
            """
            create table mem (rid integer primary key, id blob not null unique,
                type text not null, body text not null);
            create table mem_tag (tag text not null, rid integer not null,
                primary key (tag, rid)) without rowid;
            create virtual table fts using fts5(text, content='', contentless_delete=1);
            """
        )
        tenth = max(BATCH, n // 10 // BATCH * BATCH)
        rates: list[float] = []
        cpu = time.process_time()
        start = mark = time.perf_counter()
        for lo in range(0, n, BATCH):
            con.execute("begin")
            for mid, typ, body, tags, text in rows[lo : lo + BATCH]:
                rid = con.execute(
                    "insert into mem (id, type, body) values (?, ?, ?)", (mid, typ, body)
                ).lastrowid
                con.executemany("insert into mem_tag values (?, ?)", [(t, rid) for t in tags])
                con.execute("insert into fts (rowid, text) values (?, ?)", (rid, text))
                if vectors:
                    con.execute(
                        "insert into vec (rowid, embedding, type) values (?, ?, ?)",
                        (rid, ds.vectors[rid - 1].tobytes(), typ),
                    )
            con.execute("commit")
            if (lo + BATCH) % tenth == 0:
                now = time.perf_counter()
                rates.append(tenth / (now - mark))
                mark = now
        total = time.perf_counter() - start
        cpu = time.process_time() - cpu
        con.execute("pragma wal_checkpoint(truncate)")
        con.close()
        size = sum(f.stat().st_size for f in tmp.rglob("*") if f.is_file())
        name = "random ids" if random_ids else "time-ordered ids"
        report(f"sqlite, {name}", n, total, cpu, rates=rates, size=size)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--size", type=int, default=50_000)
    ap.add_argument("--vectors", action="store_true", help="a precomputed vector with each")
    ap.add_argument("--sqlite", action="store_true", help="SQLite too, in the same run")
    args = ap.parse_args()
    for random_ids in (False, True):
        run(args.size, random_ids, args.vectors)
        if args.sqlite:
            run_sqlite(args.size, random_ids, args.vectors)


if __name__ == "__main__":
    main()
