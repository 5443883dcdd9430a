"""The write path's CPU cost: ``write_many`` and single writes, in CPU time per memory.

    python tools/bench_write_path.py [--size 5000] [--singles 300] [--repeat 7] [--json OUT]

Each repeat builds a fresh store: ``--size`` memories with ``write_many`` in batches of 1,000
(the data, tags and frames of ``tools/bench_store.py``), then ``--singles`` more with ``write``,
one transaction each. The figures are the process's CPU time (``time.process_time``) over the
calls, not wall-clock time: the disk's flushes and other work on a shared machine count less
(the store is opened with ``metasync=False``). Ids come from a counter (``store_digest``'s), the
clock is fixed and the data comes from a seeded generator, so every repeat does the same work.

``--calls`` times instead the two hashes a new memory costs, in CPU nanoseconds a call (the
minimum and median of 60 rounds, interleaved): its journal entry (``_speedups.journal_entry``,
the chain hash inside it) and its content hash (``hashing.content_hash``); ``--other SO`` loads
another build of the accelerator (a ``_speedups*.so`` file) into the same process and times its
journal entry, and its content hash when it has the ``sha256`` of builds before issue 17:

    python tools/bench_write_path.py --calls --other /tmp/base/cortex/_speedups.cpython-311-*.so

Printed: the median CPU microseconds per memory of each phase over the repeats, and the spread
(min..max). To compare two builds of cortex, run the tool with each on ``PYTHONPATH``,
alternating, and compare the medians. For an instruction count instead of a time, run one
repeat under callgrind (it prints "Collected : N", the instructions) and subtract a run of
``--size 0 --singles 0`` (start-up and imports):

    valgrind --tool=callgrind python tools/bench_write_path.py --size 2000 --singles 0 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(1, str(ROOT / "tools"))

from bench_store import make_item  # noqa: E402
from store_digest import FixedClock, fixed_ids  # noqa: E402

from cortex import Cortex  # noqa: E402

BATCH = 1000


def one_run(size: int, singles: int) -> tuple[float, float]:
    """CPU seconds of the batched writes and of the single writes of one fresh store."""
    rng = random.Random(17)
    items = [make_item(rng, i) for i in range(size + singles)]
    batched = single = 0.0
    with (
        tempfile.TemporaryDirectory(prefix="cortex-bench-write-") as tmp,
        fixed_ids(),
        Cortex.open(Path(tmp) / "s", actor="bench", clock=FixedClock(), metasync=False) as cx,
    ):
        for start in range(0, size, BATCH):
            part = items[start : start + BATCH]
            t0 = time.process_time()
            cx.write_many(part)
            batched += time.process_time() - t0
        for item in items[size:]:
            t0 = time.process_time()
            cx.write(item.data, tags=item.tags, frames=item.frames, importance=item.importance)
            single += time.process_time() - t0
    return batched, single


def time_calls(other: Path | None) -> None:
    """CPU nanoseconds a call of the two hashes of a new memory (and of another build's)."""
    import importlib.machinery
    import importlib.util
    import timeit

    from cortex import _speedups
    from cortex.model import hashing
    from cortex.model.enums import MemoryType
    from cortex.storage.keys import JOURNAL

    shared = b"\x02\x02\x03\x1b\x00\x00\x01\x9a\x00\x00\x00\x00\x04\x65agent"
    entry = (JOURNAL, shared, 12345, bytes(32), bytes(16), MemoryType.FACT, 1, bytes(32))
    data = b"\xa5" * 180  # about a memory's canonical data
    cases: dict[str, Any] = {
        "journal_entry": lambda: _speedups.journal_entry(*entry),
        "content_hash": lambda: hashing.content_hash(MemoryType.FACT, data),
    }
    if other is not None:
        loader = importlib.machinery.ExtensionFileLoader("other._speedups", str(other))
        spec = importlib.util.spec_from_loader("other._speedups", loader)
        assert spec is not None
        sp = importlib.util.module_from_spec(spec)
        loader.exec_module(sp)
        assert sp.journal_entry(*entry) == _speedups.journal_entry(*entry)
        cases["other journal_entry"] = lambda: sp.journal_entry(*entry)
        if hasattr(sp, "sha256"):
            prefix = hashing.DOMAIN + bytes((MemoryType.FACT.value,))
            assert sp.sha256(prefix, data) == hashing.content_hash(MemoryType.FACT, data)
            cases["other content hash (its sha256)"] = lambda: sp.sha256(prefix, data)
    n = 20_000
    got: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(60):
        for k, fn in cases.items():
            got[k].append(timeit.timeit(fn, number=n, timer=time.thread_time) / n * 1e9)
    for k, xs in got.items():
        print(f"{k:34} {min(xs):6.0f} ns CPU a call (min), {statistics.median(xs):6.0f} (median)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=5000)
    ap.add_argument("--singles", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--calls", action="store_true", help="time the two hashes of a memory")
    ap.add_argument("--other", type=Path, help="with --calls: another build's _speedups .so")
    args = ap.parse_args(argv)
    if args.calls:
        time_calls(args.other)
        return 0
    batched: list[float] = []
    single: list[float] = []
    for _ in range(args.repeat):
        b, s = one_run(args.size, args.singles)
        if args.size:
            batched.append(b / args.size * 1e6)
        if args.singles:
            single.append(s / args.singles * 1e6)
    out: dict[str, Any] = {"size": args.size, "singles": args.singles, "repeat": args.repeat}
    for name, xs in (("write_many", batched), ("write", single)):
        if xs:
            out[name] = {"median_us": statistics.median(xs), "min_us": min(xs), "max_us": max(xs)}
            print(
                f"{name:<10} {statistics.median(xs):8.2f} µs CPU a memory "
                f"(median of {len(xs)}; {min(xs):.2f}..{max(xs):.2f})"
            )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
