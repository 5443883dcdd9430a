"""``about(name)``: every current memory about an entity, through the lexical index or a scan.

    python tools/bench_about.py [--size 20000] [--rounds 7] [--dir /dev/shm]

Builds a store of ``--size`` memories (``tools/bench_store.py``'s records, ``write_many`` in
batches of 1,000: a sixth are Facts about one of 997 subjects, a sixth Events with ``bob``),
then times ``about`` of a rare name (``s5``: about ``size / 6 / 997`` Facts), a common one
(``bob``: a sixth of the store) and one nobody has, each ``--rounds`` times, two ways: as
``about`` runs (the memories whose indexed terms name the entity, ``Cortex._find_naming``)
and as a scan of every memory of ``about``'s types (``_name_terms`` answering None, as for a
name of other than ASCII). Printed: the median of each, in milliseconds of wall time, and
that the two found the same.
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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "tools"))

from bench_store import make_item  # noqa: E402

from cortex import Cortex  # noqa: E402
from cortex.agent import api  # noqa: E402


def _median_ms(fn: Callable[[], Any], rounds: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(rounds):
        t = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--dir", default=None, help="where the store is built (default: a temp dir)")
    args = ap.parse_args()
    rng = random.Random(7)
    with (
        tempfile.TemporaryDirectory(dir=args.dir) as d,
        Cortex.open(Path(d) / "s", actor="bench", map_size=1 << 32) as cx,
    ):
        for start in range(0, args.size, 1000):
            cx.write_many([make_item(rng, i) for i in range(start, min(args.size, start + 1000))])
        print(f"about at {args.size:,} memories (ms, median of {args.rounds})")
        print("| name | memories found | through the index | scan | index ÷ scan |")
        print("|---|---:|---:|---:|---:|")
        for name in ("s5", "bob", "nobody"):
            fast, got = _median_ms(lambda n=name: cx.about(n, limit=100), args.rounds)
            saved = api._name_terms
            api._name_terms = lambda _name: None  # type: ignore[assignment]
            try:
                slow, want = _median_ms(lambda n=name: cx.about(n, limit=100), args.rounds)
            finally:
                api._name_terms = saved
            assert got.uris == want.uris, name
            print(f"| {name} | {len(got.hits)} | {fast:.2f} | {slow:.2f} | {fast / slow:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
