"""CPU of reading a version whose medium form is a reference into its data (store format 18).

Writes the bench's first ``--size`` records (``tools/bench_peers``) into a store without
vectors, then, in alternating rounds, times (``time.process_time``) the C decoder on every
version as format 18 stores it (``VERSION``) and as formats 15-17 stored it (``VERSION_V17``,
the medium form text), and ``read_memory`` (get by id: head, version and data) on the same
two encodings (the read context's version plan swapped). Prints the median of the rounds per
record and the stored bytes of each encoding.

    python tools/bench_medium_refs.py [--size 2000] [--rounds 21]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))


def main() -> int:
    from bench_peers import dataset
    from bench_peers.cortex_adapter import to_data

    import cortex._speedups as sp
    from cortex import Cortex, NewMemory
    from cortex.engine import store as S
    from cortex.model.codec import VERSION, VERSION_V17
    from cortex.storage.keys import head_key, version_key
    from cortex.storage.kv import seal, unseal

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=21)
    args = ap.parse_args()
    ds = dataset.make(args.size, n_extra=0)
    rows: list[tuple[bytes, bytes, bytes, bytes, bytes]] = []
    with tempfile.TemporaryDirectory() as tmp, Cortex.open(Path(tmp) / "s", actor="b") as cx:
        res = cx.write_many([NewMemory(data=to_data(ds, i)) for i in range(args.size)])
        with cx._kv.read() as txn:
            for r in res:
                hk, vk = head_key(r.id), version_key(r.id, 1)
                hraw, vraw = bytes(txn.get(hk)), bytes(txn.get(vk))
                v18 = unseal(vk, vraw)
                v17 = VERSION_V17.encode(VERSION.decode(v18, "v"), "v")
                rows.append((r.id.bytes, hraw, vk, v18, v17))
    ctx18 = S._READ
    assert ctx18 is not None
    ctx17: Any = (ctx18[0], VERSION_V17._plan, *ctx18[2:])
    p18, p17 = VERSION._plan, VERSION_V17._plan
    sealed = [(mid, h, vk, seal(a), seal(b)) for mid, h, vk, a, b in rows]
    for mid, h, vk, a, b in sealed:  # both encodings read the same memory
        m18 = sp.read_memory(ctx18, mid, h, vk, a, 1)
        m17 = sp.read_memory(ctx17, mid, h, vk, b, 1)
        assert m18 is not None and m17 is not None and m18 == m17

    def decode(plan: Any, i: int) -> float:
        t0 = time.process_time()
        for row in rows:
            sp.decode(plan, row[i])
        return (time.process_time() - t0) / len(rows) * 1e9

    def read(ctx: Any, i: int) -> float:
        t0 = time.process_time()
        for mid, h, vk, *raws in sealed:
            sp.read_memory(ctx, mid, h, vk, raws[i], 1)
        return (time.process_time() - t0) / len(sealed) * 1e9

    times: dict[str, list[float]] = {k: [] for k in ("dec17", "dec18", "read17", "read18")}
    for r in range(args.rounds):
        pairs = [("dec17", lambda: decode(p17, 4)), ("dec18", lambda: decode(p18, 3))]
        pairs += [("read17", lambda: read(ctx17, 1)), ("read18", lambda: read(ctx18, 0))]
        for name, fn in pairs if r % 2 == 0 else pairs[::-1]:
            times[name].append(fn())
    n17 = sum(len(row[4]) for row in rows) / len(rows)
    n18 = sum(len(row[3]) for row in rows) / len(rows)
    print(f"{len(rows):,} versions; payload {n17:.1f} B (format 17) -> {n18:.1f} B (format 18)")
    for what in ("dec", "read"):
        a, b = statistics.median(times[what + "17"]), statistics.median(times[what + "18"])
        label = "sp.decode(version)" if what == "dec" else "read_memory (get by id)"
        print(f"{label}: {a:,.0f} -> {b:,.0f} ns per record ({b - a:+,.0f} ns, {b / a - 1:+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
