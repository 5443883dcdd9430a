"""CPU cost of use counters: finds that count their hits as used, and a plain write.

A find that counts its hits (``record_access``) on memories used for the first time (format 11
rewrites each one's head too) and on memories used before, a find that counts nothing, an
attest, and a plain write (which never touches counters). CPU time (``time.process_time``),
median of repeats, so two checkouts compare on a loaded machine::

    python tools/bench_counters.py --size 10000
    (cd /tmp/base && PYTHONPATH=/tmp/base python /path/to/tools/bench_counters.py --size 10000)

Each timed find returns 10 hits; "first use" runs each find on words no earlier find used, so
its 10 hits have never been used; "later use" repeats finds whose hits were used before.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import cortex
from cortex import Cortex, Fact, NewMemory, Outcome, Query

PER_WORD = 20  # memories per distinct word: every timed find has at least 10 hits


def _cpu(fn: Callable[[], Any], n: int) -> float:
    """Median CPU microseconds of ``fn`` over ``n`` calls."""
    out = []
    for _ in range(n):
        t = time.process_time()
        fn()
        out.append((time.process_time() - t) * 1e6)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=120)
    args = ap.parse_args()
    out: dict[str, Any] = {"cortex": cortex.__file__, "size": args.size}
    n_words = args.size // PER_WORD
    with tempfile.TemporaryDirectory() as d, Cortex.open(d + "/s", actor="a") as cx:
        for lo in range(0, args.size, 1000):
            cx.write_many(
                [
                    NewMemory(
                        data=Fact(
                            statement=f"note {i} about w{i % n_words} and the garden",
                            subject=f"s{i}",
                            predicate="p",
                        )
                    )
                    for i in range(lo, min(lo + 1000, args.size))
                ]
            )
        words = iter(range(n_words))

        def first_use() -> None:
            q = Query(text=f"w{next(words)}", limit=10, record_access=True)
            assert len(cx.find(q).hits) == 10

        def later_use() -> None:
            assert len(cx.find(Query(text="w0", limit=10, record_access=True)).hits) == 10

        def plain_find() -> None:
            assert len(cx.find(Query(text=f"w{n_words - 1}", limit=10)).hits) == 10

        n = min(args.repeat, n_words - 2)
        out["find_no_counting_us"] = _cpu(plain_find, n)  # before any use: all unflagged
        out["find_record_access_first_use_us"] = _cpu(first_use, n)
        out["find_record_access_later_use_us"] = _cpu(later_use, n)
        out["find_no_counting_after_use_us"] = _cpu(lambda: cx.find(Query(text="w0", limit=10)), n)
        ids = [h.memory.id for h in cx.find(Query(text="w1", limit=10)).hits]
        out["attest_1_later_use_us"] = _cpu(lambda: cx.attest(ids[:1], Outcome.SUCCESS), n)
        seq = iter(range(10**9))
        out["plain_write_us"] = _cpu(
            lambda: cx.write(Fact(statement=f"plain {next(seq)}", subject="x", predicate="y")), n
        )
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
