"""Python function calls per operation of the public API: a load-independent check of hot paths.

Counts (``cProfile``'s total calls, Python and built-in functions) per ``write``, ``update``,
``resolve``, ``resolve_latest``, ``history`` and ``find`` (by type, by tag, by both) on a small
store. The counts are deterministic, so two checkouts compare exactly even on a loaded machine
where wall-clock benchmarks (``bench_store.py``, ``bench_query.py``) are noise: an added call
layer on a hot path shows as a higher count. Run it once per checkout, e.g.::

    python tools/calls_per_op.py
    (cd /tmp/base && PYTHONPATH=/tmp/base python /path/to/tools/calls_per_op.py)
"""

from __future__ import annotations

import cProfile
import json
import pstats
import tempfile
from collections.abc import Callable
from itertools import count
from typing import Any

import cortex
from cortex import Cortex, Fact, Query


def _calls(fn: Callable[[], Any], n: int) -> float:
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        fn()
    prof.disable()
    return float(pstats.Stats(prof).total_calls) / n  # type: ignore[attr-defined]


def main() -> None:
    out: dict[str, Any] = {"cortex": cortex.__file__}
    with tempfile.TemporaryDirectory() as d, Cortex.open(d + "/s", actor="a") as cx:
        uris = [
            cx.write(
                Fact(statement=f"s{i} w{i % 97}", subject=f"e{i % 50}", predicate=f"p{i % 13}"),
                tags=[f"t{i % 20}"],
            )
            for i in range(300)
        ]
        n = count()
        ops: dict[str, tuple[Callable[[], Any], int]] = {
            "write": (
                lambda: cx.write(Fact(statement=f"x{next(n)}", subject="e", predicate="q")),
                100,
            ),
            "update": (
                lambda: cx.update(
                    uris[9], Fact(statement=f"y{next(n)}", subject="e9", predicate="p")
                ),
                50,
            ),
            "resolve": (lambda: cx.resolve(uris[7]), 200),
            "resolve_latest": (lambda: cx.resolve_latest(uris[7].id), 200),
            "history": (lambda: cx.history(uris[7].id), 200),
            "find_type": (lambda: cx.find(Query(types=["Fact"], limit=10)), 100),
            "find_tag": (lambda: cx.find(Query(tags=["t3"], limit=10)), 100),
            "find_type_tag": (lambda: cx.find(Query(types=["Fact"], tags=["t3"], limit=10)), 100),
        }
        for name, (fn, times) in ops.items():
            out[name] = round(_calls(fn, times), 2)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
