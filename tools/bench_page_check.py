"""What checking LMDB's pages costs, against the walks it guards and against a child process.

For stores of N memories (small facts, tags, a few edges) this measures, as medians of
``--repeat`` runs:

- the full page check of a snapshot (``cortex.storage.pages.check_snapshot``) and the ranged one
stats
  uses, beside ``verify`` and ``stats`` (which include their check);
- ``Cortex.open`` plain and with ``check_pages=True``;
- the alternative design, isolating a walk in a child process: the fixed cost of starting a
  Python child that imports cortex, opens the store and returns, and the same child running
  ``verify``;
- ``salvage`` of the intact store into a new one.

    python tools/bench_page_check.py --sizes 1000,10000,50000 --repeat 5
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cortex import Cortex, EdgeType, Fact, NewMemory  # noqa: E402
from cortex.storage import pages as pg  # noqa: E402
from cortex.storage.keys import EDGE_FROM, HEAD, JOURNAL, meta_key, prefix_end  # noqa: E402
from cortex.transfer.salvage import salvage  # noqa: E402

WORDS = ["tea", "rust", "lisbon", "chess", "zebra", "quantum", "river", "budget", "ada"]


def build(path: Path, n: int) -> None:
    rng = random.Random(n)
    with Cortex.open(path, actor="bench") as cx:
        for start in range(0, n, 1000):
            uris = cx.write_many(
                [
                    NewMemory(
                        data=Fact(
                            statement=" ".join(
                                rng.choice(WORDS) for _ in range(rng.randrange(4, 30))
                            ),
                            subject=f"s{i % 50}",
                            predicate="p",
                        ),
                        tags=[f"t{i % 20}"],
                    )
                    for i in range(start, min(n, start + 1000))
                ]
            )
            for a, b in zip(uris[::10], uris[1::10], strict=False):
                cx.add_edge(a, EdgeType.REFERENCES, b)


def median(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def child(path: Path, what: str) -> None:
    code = (
        "import sys; from cortex import Cortex\n"
        "with Cortex.open(sys.argv[1], actor='bench', create=False) as cx:\n"
        "    cx.verify() if sys.argv[2] == 'verify' else None\n"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(path), what],
        check=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )


STATS_RANGES: list[tuple[bytes, bytes | None]] = [
    (HEAD, prefix_end(HEAD)),
    (EDGE_FROM, prefix_end(EDGE_FROM)),
    (prefix_end(JOURNAL), prefix_end(JOURNAL)),
    (meta_key("lexical"), meta_key("lexical")),
]


def measure(path: Path, work: Path, r: int) -> list[float]:
    """The medians of one store, in the order of the table's columns."""
    with Cortex.open(path, actor="bench") as cx:
        with cx._kv.read() as txn:
            tid = txn._txn.id()
            full = median(lambda: pg.check_snapshot(path, tid), r)
            ranged = median(lambda: pg.check_snapshot(path, tid, STATS_RANGES), r)
        verify = median(cx.verify, max(1, r // 2))
        stats = median(cx.stats, r)
    open_plain = median(lambda: Cortex.open(path, actor="bench").close(), r)
    open_checked = median(lambda: Cortex.open(path, actor="bench", check_pages=True).close(), r)
    child_open = median(lambda: child(path, "open"), r)
    child_verify = median(lambda: child(path, "verify"), max(1, r // 2))
    dest = work / "salvaged"

    def run_salvage() -> None:
        shutil.rmtree(dest, ignore_errors=True)
        salvage(path, dest)

    salv = median(run_salvage, max(1, r // 2))
    shutil.rmtree(dest, ignore_errors=True)
    return [full, ranged, verify, stats, open_plain, open_checked, child_open, child_verify, salv]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,50000")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for n in (int(x) for x in args.sizes.split(",")):
            path = Path(work) / f"s{n}"
            build(path, n)
            size = (path / "data.mdb").stat().st_size
            rows.append((n, size, *measure(path, Path(work), args.repeat)))
            shutil.rmtree(path)
    print(
        "| memories | data.mdb | full page check | stats' ranged check | verify (with check) | "
        "stats (with check) | open | open, check_pages | child: start + open | "
        "child: verify | salvage |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, size, *ts in rows:
        cells = " | ".join(f"{t * 1000:,.1f} ms" for t in ts)
        print(f"| {n:,} | {size / 2**20:.1f} MiB | {cells} |")


if __name__ == "__main__":
    main()
