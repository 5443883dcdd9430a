"""What the default page check at open costs (``specs/storage.md`` §9), against open, get and find.

For stores of N memories (``tools/bench_page_check.py``'s build), as medians of ``--repeat``
runs, wall clock and CPU time:

- ``Cortex.open`` + close with ``check_pages=False``; with the default check when the file is
  not in the state ``pages.checked`` records (the record removed before each open: the full
  check); and when it is (the record hit);
- the full check's cost per GiB of ``data.mdb``;
- get by id (``resolve``) and find by type + tag on a handle opened with the default and on one
  opened without the check, interleaved in the same run: the check is made at open, so reads
  should cost the same (the ratio near 1);
- open, one durable write and close, default against unchecked (the record written at close).

    python tools/bench_open_check.py --sizes 10000,100000 --repeat 5
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from bench_page_check import build  # noqa: E402

from cortex import Cortex, Fact, Query  # noqa: E402
from cortex.storage.keys import HEAD  # noqa: E402
from cortex.storage.pages import CHECKED  # noqa: E402


def timed(
    fn: Callable[[], object], repeat: int, before: Callable[[], object] | None = None
) -> tuple[float, float]:
    """Median wall and CPU seconds of ``fn`` (``before`` runs untimed ahead of each)."""
    wall, cpu = [], []
    for _ in range(repeat):
        if before is not None:
            before()
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


def per_call(fn: Callable[[], object], calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def measure(path: Path, r: int) -> dict[str, float]:
    record = path / CHECKED
    out: dict[str, float] = {}

    def drop() -> None:
        record.unlink(missing_ok=True)

    def open_close(**kw: object) -> None:
        Cortex.open(path, actor="bench", **kw).close()  # type: ignore[arg-type]

    out["open_plain"], out["open_plain_cpu"] = timed(lambda: open_close(check_pages=False), r)
    out["open_full"], out["open_full_cpu"] = timed(open_close, r, before=drop)
    open_close()  # the record is written
    out["open_hit"], out["open_hit_cpu"] = timed(open_close, r)
    rng = random.Random(7)
    with (
        Cortex.open(path, actor="bench") as checked,
        Cortex.open(path, actor="bench", check_pages=False) as plain,
    ):
        with plain._kv.read() as txn:
            ids = [k[len(HEAD) :] for k in txn.keys(HEAD)]
        from cortex.model.ids import MemoryId

        picks = [MemoryId(rng.choice(ids)) for _ in range(2000)]
        it = {"i": 0}

        def get(cx: Cortex) -> Callable[[], object]:
            def one() -> object:
                it["i"] = (it["i"] + 1) % len(picks)
                return cx.resolve_latest(picks[it["i"]])

            return one

        q = Query(types=["Fact"], tags=["t3"], limit=10)
        gets: dict[str, list[float]] = {"checked": [], "plain": []}
        finds: dict[str, list[float]] = {"checked": [], "plain": []}
        for _ in range(r):  # interleaved: the same load on both
            for name, cx in (("checked", checked), ("plain", plain)):
                gets[name].append(per_call(get(cx), 2000))
                finds[name].append(per_call(lambda cx=cx: cx.find(q), 200))
        for name in ("checked", "plain"):
            out[f"get_{name}"] = statistics.median(gets[name])
            out[f"find_{name}"] = statistics.median(finds[name])

    def write_close(**kw: object) -> None:
        with Cortex.open(path, actor="bench", **kw) as cx:  # type: ignore[arg-type]
            cx.write(Fact(statement="one more", subject="s", predicate="p"))

    out["write_plain"], _ = timed(lambda: write_close(check_pages=False), r)
    open_close()  # checked and recorded: the default's open hits the record below
    out["write_default"], _ = timed(write_close, r)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for n in (int(x) for x in args.sizes.split(",")):
            path = Path(work) / f"s{n}"
            build(path, n)
            size = (path / "data.mdb").stat().st_size
            rows.append((n, size, measure(path, args.repeat)))
    print(
        "| memories | data.mdb | open, unchecked | open, full check (CPU) | check per GiB | "
        "open, record hit | get: default / unchecked | find type+tag: default / unchecked | "
        "open+write+close: default / unchecked |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, size, m in rows:
        gib = size / 2**30
        per_gib = (m["open_full"] - m["open_plain"]) / gib
        print(
            f"| {n:,} | {size / 2**20:.0f} MiB | {m['open_plain'] * 1e3:.1f} ms | "
            f"{m['open_full'] * 1e3:.0f} ms ({m['open_full_cpu'] * 1e3:.0f} ms) | "
            f"{per_gib:.2f} s | {m['open_hit'] * 1e3:.1f} ms | "
            f"{m['get_checked'] * 1e6:.1f} / {m['get_plain'] * 1e6:.1f} µs "
            f"({m['get_checked'] / m['get_plain']:.2f}×) | "
            f"{m['find_checked'] * 1e6:.0f} / {m['find_plain'] * 1e6:.0f} µs "
            f"({m['find_checked'] / m['find_plain']:.2f}×) | "
            f"{m['write_default'] * 1e3:.1f} / {m['write_plain'] * 1e3:.1f} ms "
            f"({m['write_default'] / m['write_plain']:.2f}×) |"
        )


if __name__ == "__main__":
    main()
