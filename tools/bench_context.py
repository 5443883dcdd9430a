"""What the context term costs: CPU time per find(text, limit 10), context off and on.

N memories (default 100,000; 40% Events, the rest Facts, 12 random words of 2,000 each) written
in batches of 1,000, so every Event has neighbours (the worst case); 200 random three-word
queries, lexical only and hybrid (HashingEmbedder, 64-d), ``Fusion(context_weight=0)`` against
the default, three interleaved rounds on the same store; prints each round's p50 and their
median. CPU time (``time.process_time``), so a shared machine's load moves it less.

    python tools/bench_context.py [N]
"""

import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from cortex import Cortex, Event, Fact, Fusion, NewMemory, Query
from cortex.index.embed import HashingEmbedder

N = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
rng = random.Random(1)
W = [f"w{i}" for i in range(2000)]
d = tempfile.mkdtemp()
E = HashingEmbedder(64)
with Cortex.open(Path(d) / "s", actor="a", metasync=False, embedder=E) as cx:
    for _batch in range(N // 1000):
        items = []
        for i in range(1000):
            txt = " ".join(rng.choice(W) for _ in range(12))
            items.append(
                NewMemory(
                    data=Event(kind="x", summary=txt)
                    if i % 5 < 2
                    else Fact(statement=txt, subject="s", predicate="p")
                )
            )
        cx.write_many(items)
qs = [" ".join(rng.choice(W) for _ in range(3)) for _ in range(200)]
res = {}
for _round in range(3):
    for mode in ("lexical", "hybrid"):
        for label, f in (("off", Fusion(context_weight=0)), ("default", Fusion())):
            kw = {"embedder": E} if mode == "hybrid" else {}
            with Cortex.open(Path(d) / "s", actor="a", fusion=f, **kw) as cx:
                cx.find(Query(text="w1 w2", limit=10))
                ts = []
                for q in qs:
                    t = time.process_time()
                    cx.find(Query(text=q, limit=10))
                    ts.append(time.process_time() - t)
                res.setdefault((mode, label), []).append(statistics.median(ts) * 1000)
for k, v in res.items():
    print(
        k,
        "cpu p50 per round (ms):",
        [round(x, 2) for x in v],
        "median",
        round(statistics.median(v), 2),
    )
