"""Store benchmark: cortex beside the raw-LMDB floor doing the same puts and gets, same run.

For each size N (default 10k and 100k memories of mixed types with tags and frames):

- ``write_many``: build the store in batches of 1,000. The floor replays, with raw py-lmdb
  into a fresh environment, exactly the key-value operations cortex made (recorded on an
  untimed run that builds the same store): every get, seek, scan step, put (with putmulti where
  cortex used it) and delete of the same bytes, one write transaction per batch; and it
  canonically encodes each memory's data with cbor2 (the "encode" of encode+raw puts).
- ``write`` durable, one per transaction: 400 more writes (per two repeats) on the store of
  size N; the floor replays each write's operations, one durable commit each, alternating with
  cortex in blocks of 50, into a replica of the store (built by replaying the build). The
  operations are recorded on a twin of cortex's store doing the same writes (same ids, same
  data) untimed just before, so cortex's timed writes carry no recorder.
- ``resolve`` / ``resolve_latest``: random memories; the floor gets the head and the version
  and decodes them (and the data) with cbor2.loads, one read transaction per call as cortex.
- ``history``: memories with 4 versions; the floor scans the versions with a cursor and decodes.

Latencies are medians over repeated runs. Ratios are cortex / floor.

    python tools/bench_store.py [--sizes 10000,100000] [--repeat 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import cbor2
import lmdb

from cortex import (
    Belief,
    Cortex,
    Event,
    Fact,
    FrameRef,
    Goal,
    NewMemory,
    Outcome,
    Pattern,
    Preference,
)
from cortex.model.ids import new_ids
from cortex.model.records import Data
from cortex.storage.keys import head_key, version_prefix

WORDS = [f"w{i}" for i in range(400)]
TAGS = [f"tag-{i}" for i in range(200)]


def make_data(rng: random.Random, i: int) -> Data:
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 24)))
    k = i % 6
    if k == 0:
        return Fact(statement=words, subject=f"s{i % 997}", predicate="says", confidence=0.9)
    if k == 1:
        return Event(kind="interaction", outcome=Outcome.SUCCESS, counterparty="bob", summary=words)
    if k == 2:
        return Preference(topic=words[:60], polarity="prefer", strength=0.5)
    if k == 3:
        return Belief(statement=words, stance="believe", confidence=0.7)
    if k == 4:
        return Goal(statement=words, status="active")
    return Pattern(statement=words, strength=0.25, coverage=i % 50)


def make_item(rng: random.Random, i: int) -> NewMemory:
    tags = rng.sample(TAGS, rng.randint(1, 3))
    frames = [FrameRef(verb="find", obj_kind="knowledge", obj_ref=f"topic-{i % 500}")]
    return NewMemory(data=make_data(rng, i), tags=tags, frames=frames, importance=i % 11)


def _median(xs: list[float]) -> float:
    return statistics.median(xs)


# -- recording cortex's key-value operations, and replaying them on raw LMDB -------------------

GET, SEEK, AROUND, SCAN, PUT, MANY, ADD, DELETE, CURSOR = range(9)
Op = tuple[Any, ...]


class _Recording:
    """A write transaction that logs every operation before doing it (the KV API)."""

    def __init__(self, txn: Any, ops: list[Op]) -> None:
        self._txn = txn
        self._ops = ops

    def get(self, key: bytes) -> bytes | None:
        self._ops.append((GET, key))
        return self._txn.get(key)  # type: ignore[no-any-return]

    def seek(self, prefix: bytes, start: bytes, *, reverse: bool = False) -> bytes | None:
        self._ops.append((SEEK, start, reverse))
        return self._txn.seek(prefix, start, reverse=reverse)  # type: ignore[no-any-return]

    def around(self, prefix: bytes, key: bytes) -> Any:
        self._ops.append((AROUND, key))
        return self._txn.around(prefix, key)

    def cursor(self) -> _RecordingCursor:
        return _RecordingCursor(self._txn.cursor(), self._ops)

    def scan(
        self, prefix: bytes, *, start: bytes | None = None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        op = [SCAN, start if start is not None else prefix, reverse, 0]
        self._ops.append(op)  # type: ignore[arg-type]  # the count is filled in as it goes
        for pair in self._txn.scan(prefix, start=start, reverse=reverse):
            op[3] += 1
            yield pair

    def keys(
        self, prefix: bytes, *, start: bytes | None = None, reverse: bool = False
    ) -> Iterator[bytes]:
        for k, _ in self.scan(prefix, start=start, reverse=reverse):
            yield k

    def put(self, key: bytes, value: bytes, *, overwrite: bool = True) -> bool:
        self._ops.append((PUT, key, value, overwrite))
        return self._txn.put(key, value, overwrite=overwrite)  # type: ignore[no-any-return]

    def put_many(self, items: Any) -> None:
        items = list(items)
        self._ops.append((MANY, items))
        self._txn.put_many(items)

    def add_many(self, items: Any) -> int:
        items = list(items)
        self._ops.append((ADD, items))
        return self._txn.add_many(items)  # type: ignore[no-any-return]

    def delete(self, key: bytes) -> bool:
        self._ops.append((DELETE, key))
        return self._txn.delete(key)  # type: ignore[no-any-return]


class _RecordingCursor:
    """The transaction's cursor as the C accelerator walks it, each step logged."""

    def __init__(self, cur: Any, ops: list[Op]) -> None:
        self._cur = cur
        self._ops = ops

    def _step(self, name: str, *args: Any) -> Any:
        self._ops.append((CURSOR, name, *args))
        return getattr(self._cur, name)(*args)

    def set_range(self, key: bytes) -> bool:
        return bool(self._step("set_range", key))

    def set_key(self, key: bytes) -> bool:
        return bool(self._step("set_key", key))

    def key(self) -> bytes:
        return bytes(self._step("key"))

    def value(self) -> bytes:
        return bytes(self._step("value"))

    def prev(self) -> bool:
        return bool(self._step("prev"))

    def next(self) -> bool:
        return bool(self._step("next"))

    def last(self) -> bool:
        return bool(self._step("last"))


@contextmanager
def recording(cx: Cortex) -> Iterator[list[list[Op]]]:
    """Log the operations of every write transaction of ``cx``: one list per transaction."""
    kv = cx._kv
    txns: list[list[Op]] = []
    real = kv.write

    def write(fn: Any) -> Any:
        def logged(txn: Any) -> Any:
            ops: list[Op] = []
            result = fn(_Recording(txn, ops))
            txns.append(ops)  # only a transaction that ran to its commit
            return result

        return real(logged)

    kv.write = write  # type: ignore[method-assign]
    try:
        yield txns
    finally:
        del kv.write


def replay(env: lmdb.Environment, ops: list[Op]) -> None:
    """Do ``ops`` in one raw write transaction of ``env`` (committed)."""
    with env.begin(write=True) as txn, txn.cursor() as cur:
        for op in ops:
            kind = op[0]
            if kind == MANY:
                cur.putmulti(op[1])
            elif kind == ADD:
                cur.putmulti(op[1], overwrite=False)
            elif kind == PUT:
                txn.put(op[1], op[2], overwrite=op[3])
            elif kind == GET:
                txn.get(op[1])
            elif kind == SEEK:
                if not cur.set_range(op[1]) and op[2]:
                    cur.last()
                elif op[2]:
                    cur.prev()
                cur.key()
            elif kind == CURSOR:
                getattr(cur, op[1])(*op[2:])
            elif kind == AROUND:
                if cur.set_range(op[1]):
                    if cur.key() == op[1]:
                        cur.value()
                        cur.next()
                    elif cur.prev():
                        cur.value()
                elif cur.last():
                    cur.value()
            elif kind == SCAN:
                cur.set_range(op[1])
                step = cur.prev if op[2] else cur.next
                for _ in range(op[3]):
                    cur.value()
                    step()
            else:
                txn.delete(op[1])


def floor_write_many(path: Path, builtins: list[Any], batches: list[list[Op]]) -> float:
    """Memories/s of the floor replaying the build's batches into a fresh environment.

    The environment at ``path`` is removed after; each batch also cbor2-encodes its data.
    """
    n = len(builtins)
    t0 = time.perf_counter()
    env = floor_env(path)
    for b, ops in enumerate(batches):
        for j in range(b * 1000, min(b * 1000 + 1000, n)):
            cbor2.dumps(builtins[j], canonical=True)
        replay(env, ops)
    rate = n / (time.perf_counter() - t0)
    env.close()
    shutil.rmtree(path)
    return rate


def _puts(ops: list[Op]) -> int:
    return sum(len(op[1]) if op[0] in (MANY, ADD) else op[0] == PUT for op in ops)


def floor_env(path: Path) -> lmdb.Environment:
    return lmdb.open(str(path), map_size=8 << 30, sync=True, metasync=True)


def bench_size(n: int, repeat: int, root: Path) -> dict[str, Any]:
    rng = random.Random(n)
    items = [make_item(rng, i) for i in range(n)]
    out: dict[str, Any] = {"n": n}

    # -- write_many, batches of 1,000 ---------------------------------------------------------
    # an untimed build records cortex's operations; it is the store the rest measures on
    keep = root / f"cx-{n}"
    with Cortex.open(keep, actor="bench", map_size=1 << 30) as cx:
        with recording(cx) as batches:
            for b in range(0, n, 1000):
                cx.write_many(items[b : b + 1000])
        if len(batches) != -(-n // 1000):
            raise SystemExit("a batch ran twice (the map grew): the recording is not one build")
    out["puts_per_memory"] = sum(map(_puts, batches)) / n
    builtins = [_builtin(it.data) for it in items]
    # the recording is millions of tuples: everything made so far (it, the items) goes out of
    # the cycle collector's sight, or its walks over them land on whichever side is running
    gc.collect()
    gc.freeze()
    ours_rates, floor_rates = [], []
    for r in range(repeat):
        store = root / f"cx-{n}-{r}"
        t0 = time.perf_counter()
        with Cortex.open(store, actor="bench", map_size=1 << 30) as cx:
            for b in range(0, n, 1000):
                cx.write_many(items[b : b + 1000])
        ours_rates.append(n / (time.perf_counter() - t0))
        shutil.rmtree(store)
        floor_rates.append(floor_write_many(root / f"floor-{n}-{r}", builtins, batches))
    out["write_many_per_s"] = _median(ours_rates)
    out["floor_write_many_per_s"] = _median(floor_rates)

    # -- a replica of the store for the floor's single writes and reads -----------------------
    fpath = root / f"floor-{n}"
    env = floor_env(fpath)
    for ops in batches:
        replay(env, ops)

    # -- durable single writes on the store of size N --------------------------------------------
    # Cortex and the floor alternate in blocks of 50 writes: an fsync costs ~1-2 ms and drifts
    # with the disk's other load, so 400 writes of one side followed by 400 of the other
    # measured the drift as much as either. The floor replays the operations of the same 50
    # writes (the same ids and data) recorded on a twin of the store, untimed, just before:
    # recording the timed writes themselves would charge cortex for the recorder (a Python
    # call for every operation and cursor step the C accelerator makes).
    twin = root / f"cx-{n}-twin"
    shutil.copytree(keep, twin)
    singles, block, rounds = 400, 50, max(1, repeat // 2)
    extra = [make_item(rng, n + i) for i in range(singles * rounds)]
    extra_ids = new_ids(len(extra))
    ours_lat, floor_lat = [], []
    with Cortex.open(keep, actor="bench") as cx, Cortex.open(twin, actor="bench") as tw:
        for r in range(rounds):
            ours_t = floor_t = 0.0
            for b in range(r * singles, (r + 1) * singles, block):
                todo = [(extra[i], extra_ids[i]) for i in range(b, b + block)]
                with recording(tw) as writes:
                    for it, mid in todo:
                        tw.write(
                            it.data,
                            tags=it.tags,
                            frames=it.frames,
                            importance=it.importance,
                            id=mid,
                        )
                t0 = time.perf_counter()
                for it, mid in todo:
                    cx.write(
                        it.data, tags=it.tags, frames=it.frames, importance=it.importance, id=mid
                    )
                ours_t += time.perf_counter() - t0
                t0 = time.perf_counter()
                for ops in writes:
                    replay(env, ops)
                floor_t += time.perf_counter() - t0
            ours_lat.append(ours_t / singles)
            floor_lat.append(floor_t / singles)
    out["write_us"] = _median(ours_lat) * 1e6
    out["floor_write_us"] = _median(floor_lat) * 1e6

    # -- reads ---------------------------------------------------------------------------------
    with Cortex.open(keep, actor="bench") as cx:
        ids = [e.id for e in cx.journal(2) if e.id is not None][:n]
        uris = [cx.resolve_latest(i).uri for i in rng.sample(ids, 2000)]
        multi = rng.sample(ids, 300)
        for mid in multi:
            m = cx.resolve_latest(mid)
            for _ in range(3):
                cx.update(mid, m.data)  # type: ignore[arg-type]
        probe = uris[:2000]

        def ours_resolve() -> None:
            for u in probe:
                cx.resolve(u)

        def ours_latest() -> None:
            for u in probe:
                cx.resolve_latest(u.id)

        def ours_history() -> None:
            for mid in multi:
                cx.history(mid)

        env2 = cx._kv._env  # history floor reads the same environment (4 versions each)

        def floor_resolve() -> None:
            for u in probe:
                with env.begin() as txn:
                    h = cbor2.loads(bytes(txn.get(head_key(u.id)))[:-4])
                    v = cbor2.loads(
                        bytes(txn.get(version_prefix(u.id) + (1).to_bytes(8, "big")))[:-4]
                    )
                    cbor2.loads(v[4])
                    del h

        def floor_history() -> None:
            for mid in multi:
                with env2.begin() as txn, txn.cursor() as cur:
                    pfx = version_prefix(mid)
                    cur.set_range(pfx)
                    for k, val in cur:
                        if not bytes(k).startswith(pfx):
                            break
                        v = cbor2.loads(bytes(val)[:-4])
                        cbor2.loads(v[4])
                    txn.get(head_key(mid))

        for name, fn, count in (
            ("resolve", ours_resolve, len(probe)),
            ("resolve_latest", ours_latest, len(probe)),
            ("history", ours_history, len(multi)),
            ("floor_resolve", floor_resolve, len(probe)),
            ("floor_history", floor_history, len(multi)),
        ):
            fn()  # warm up
            runs = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                fn()
                runs.append((time.perf_counter() - t0) / count)
            out[f"{name}_us"] = _median(runs) * 1e6
    env.close()
    out["disk_bytes_per_memory"] = (keep / "data.mdb").stat().st_size / n
    gc.unfreeze()
    return out


def _builtin(data: Data) -> Any:
    from cortex.model.codec import encode_data

    return cbor2.loads(encode_data(data))


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| N | operation | cortex | raw LMDB floor | ratio | target |",
        "|---:|---|---:|---:|---:|---|",
    ]
    for r in rows:
        n = f"{r['n']:,}"
        wm, fwm = r["write_many_per_s"], r["floor_write_many_per_s"]
        lines.append(
            f"| {n} | write_many (batches of 1,000; {r['puts_per_memory']:.1f} puts a memory) "
            f"| {wm:,.0f} /s | {fwm:,.0f} /s | {fwm / wm:.2f}× time | ≥ 20,000/s, ≤ 2.5× |"
        )
        lines.append(
            f"| {n} | write, durable, 1 per txn | {r['write_us']:,.0f} µs | "
            f"{r['floor_write_us']:,.0f} µs | {r['write_us'] / r['floor_write_us']:.2f}× | ≤ 1.3× |"
        )
        for op, target in (("resolve", "≤ 2×"), ("resolve_latest", "≤ 2×")):
            lines.append(
                f"| {n} | {op} | {r[op + '_us']:.1f} µs | {r['floor_resolve_us']:.1f} µs "
                f"| {r[op + '_us'] / r['floor_resolve_us']:.2f}× | {target} |"
            )
        lines.append(
            f"| {n} | history (4 versions) | {r['history_us']:.1f} µs | "
            f"{r['floor_history_us']:.1f} µs | {r['history_us'] / r['floor_history_us']:.2f}× | |"
        )
        lines.append(f"| {n} | disk per memory | {r['disk_bytes_per_memory']:,.0f} B | | | |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json")
    ap.add_argument("--dir", help="scratch directory (default: a temporary one)")
    args = ap.parse_args()
    root = Path(args.dir or tempfile.mkdtemp(prefix="cortex-bench-"))
    rows = []
    try:
        for n in (int(x) for x in args.sizes.split(",")):
            rows.append(bench_size(n, args.repeat, root))
            print(f"N={n:,} done", file=sys.stderr, flush=True)
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
