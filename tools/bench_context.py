"""What the text query's terms cost: CPU time per find(text, limit 10), each term off and on.

N memories (default 100,000; 40% Events with one of 50 counterparty names, the rest Facts, 12
random words of 2,000 each) written in batches of 1,000, so every Event has neighbours (the
worst case); 200 random three-word queries, half of them with a counterparty's name as well
(the entity term then cuts it from the vector query: ``rerank.unnamed``), lexical only and
hybrid (HashingEmbedder, 64-d); three configurations on the same store, three interleaved
rounds: ``off`` (``Fusion(context_weight=0, entity_weight=0)``), ``v8``
(``Fusion(entity_weight=0)``: context only, the ranking before the entity term was on) and
``default``. Prints each round's p50 and their median. CPU time (``time.process_time``), so a
shared machine's load moves it less.

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
NAMES = [f"Name{i}" for i in range(50)]
d = tempfile.mkdtemp()
E = HashingEmbedder(64)
with Cortex.open(Path(d) / "s", actor="a", metasync=False, embedder=E) as cx:
    for _batch in range(N // 1000):
        items = []
        for i in range(1000):
            txt = " ".join(rng.choice(W) for _ in range(12))
            items.append(
                NewMemory(
                    data=Event(kind="x", summary=txt, counterparty=NAMES[i % len(NAMES)])
                    if i % 5 < 2
                    else Fact(statement=txt, subject="s", predicate="p")
                )
            )
        cx.write_many(items)
qs = [" ".join(rng.choice(W) for _ in range(3)) for _ in range(200)]
qs = [f"{q} {rng.choice(NAMES)}" if i % 2 else q for i, q in enumerate(qs)]
CONFIGS = (
    ("off", Fusion(context_weight=0, entity_weight=0)),
    ("v8", Fusion(entity_weight=0)),
    ("default", Fusion()),
)
res = {}
for _round in range(3):
    for mode in ("lexical", "hybrid"):
        for label, f in CONFIGS:
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
