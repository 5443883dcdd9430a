"""How far the single durable write is from the disk: cortex's own writes replayed by raw LMDB.

    python tools/bench_write_replay.py [--size 100000] [--rounds 15] [--per-round 100]

Issue 18 asks for a single durable write within 1.3x the LMDB floor's single put + commit. This
measures how much of that ratio is the bytes cortex must write and how much is its code. It
builds a store of ``--size`` memories exactly as ``make bench`` does (``tools/bench_peers``: the
same records, tags, importance and precomputed vectors, ``write_many`` in durable batches of
1,000), copies it three times, and then runs rounds. In each round:

- **cortex** writes ``--per-round`` memories, one durable ``write`` each (the bench's
  ``ingest_single``), and every put, delete and ``put_many`` of each transaction is recorded;
- **replay, all** applies those same operations, transaction by transaction, to the first copy
  through the key-value layer alone (``cortex.storage.kv.LmdbKV``: each key to the named
  database that holds its keyspace, durable commits, two flushes each, as cortex's): the same
  keys and bytes into the same B-trees, so the same dirty pages reach the disk, and none of
  the store's code runs;
- **replay, no lexical** does the same without the lexical index's records (``lex/``,
  ``meta/lexical``) on another copy, and **replay, no idx/** without the type, tag, frame
  and other ``idx/`` entries (the databases of duplicates) on another: what each index's
  pages cost a write;
- **replay, one tree** applies all of them with raw py-lmdb (``sync=True``, ``metasync=True``)
  into the main tree of another copy, where those keyspaces are otherwise absent (they live in
  named databases since format 17): not the store's layout, and fewer pages than any layout of
  a full store would dirty (a write's keys land together in a few new leaves). Before
  2026-11-29 this was the tool's "replay, all", which therefore measured less than the store's
  own pages cost;
- **floor** puts, on another copy, what the bench's floor (``tools/bench_peers/floor.py``)
  puts for one record: its head, version, index and journal entries, and its float32 vector in
  a database of its own.

With ``--held F`` another copy measures a second design not built: **replay, idx/ held** applies a
write's operations as "replay, all" does except its ``idx/`` entries, which go as ONE record at
the end of the main tree (appended); every ``F``-th write also puts the held entries into their
databases of duplicates and deletes the held records, in the same durable transaction (an
overlay over the index keyspaces only, as the lexical segments are over the postings; readers
would merge the held entries). Its p50 is a write that holds; its mean counts the folds.

With ``--log F`` another store measures a design not built: **replay, logged** puts each write's
operations as ONE record (their keys and values, length-prefixed) at the end of the tree
(appended), and every ``F``-th write also applies the ``F`` logged writes' operations to the
B-tree and deletes their records, in the same durable transaction (an LSM-style write log over
the whole key space, as the lexical index's segments are over its postings). Its p50 is a write
that only logs; its mean counts the folds.

With ``--rows`` another copy measures a third design not built: **replay, row-major** first
rewrites the copy's heads (``m/``), versions (``mv/``), lexical documents (``lex/d/``) and
vectors (``vec/``) as one keyspace ordered by row and then by kind (``r/`` u32(row) kind,
a version's number after its kind), so that a new memory's four records are neighbours in one
tree (in the main tree here) instead of the last leaves of four, and replays every write's
operations with those keys mapped alike. Its control, **replay, all, rewritten**, deletes and
puts back the same four keyspaces unchanged in one commit before replaying as "replay, all"
does: a rewrite leaves a run of free pages that later commits take their pages from, which
alone changes what a commit costs on a disk.

The runs go in a rotating order each round, so a slow stretch of a shared machine falls on
each alike. Printed: the median microseconds per write of each over the rounds, and the ratios
to the floor. ``replay, all ÷ floor`` is the closest a write of today's records can come to the
floor on this disk: no code can make cortex's commit cheaper than writing its own pages.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(1, str(ROOT / "tools"))

import lmdb  # noqa: E402
from bench_peers import cortex_adapter  # noqa: E402
from bench_peers.dataset import make  # noqa: E402
from bench_peers.harness import build  # noqa: E402

from cortex.storage import kv as kvmod  # noqa: E402
from cortex.storage.keys import DATABASE_PREFIX  # noqa: E402
from cortex.storage.kv import LmdbKV  # noqa: E402

Op = tuple[str, Any]

_LEXICAL = (b"lex/", b"meta/lexical")
_FLOOR = (b"m/", b"mv/", b"idx/", b"j/")  # what the bench's floor puts for a record


_RECORDING = [True]
"""Off while a replay writes through the same key-value layer (its puts are not cortex's)."""


def _record(log: list[list[Op]]) -> Callable[[], None]:
    """Record every change an LMDB write transaction of cortex makes; returns the undo."""
    cls = kvmod._LmdbTxn
    saved = {name: getattr(cls, name) for name in ("put", "delete", "put_many", "add_many")}

    def put(self: Any, key: bytes, value: bytes, *, overwrite: bool = True) -> bool:
        if _RECORDING[0]:
            log[-1].append(("put", (key, value, overwrite)))
        return bool(saved["put"](self, key, value, overwrite=overwrite))

    def delete(self: Any, key: bytes) -> bool:
        if _RECORDING[0]:
            log[-1].append(("delete", key))
        return bool(saved["delete"](self, key))

    def put_many(self: Any, items: Any) -> None:
        pairs = list(items)
        if _RECORDING[0]:
            log[-1].append(("put_many", pairs))
        saved["put_many"](self, pairs)

    def add_many(self: Any, items: Any) -> int:
        pairs = list(items)
        if _RECORDING[0]:
            log[-1].append(("add_many", pairs))
        return int(saved["add_many"](self, pairs))

    for name, fn in (("put", put), ("delete", delete), ("put_many", put_many)):
        setattr(cls, name, fn)
    cls.add_many = add_many  # type: ignore[method-assign]

    def undo() -> None:
        for name, fn in saved.items():
            setattr(cls, name, fn)

    return undo


def _apply(txn: Any, ops: list[Op], keep: Callable[[bytes], bool], *, kv: bool = False) -> None:
    """``ops`` (those ``keep`` passes) in ``txn``, raw py-lmdb's or the key-value layer's.

    With ``kv``, ``txn`` is the key-value layer's write transaction: each key routed to its
    database, as the store routes.
    """
    for kind, arg in ops:
        if kind == "put":
            key, value, overwrite = arg
            if keep(key):
                txn.put(key, value, overwrite=overwrite)
        elif kind == "delete":
            if keep(arg):
                txn.delete(arg)
        else:
            pairs = [p for p in arg if keep(p[0])]
            if pairs and kv:
                getattr(txn, kind)(pairs)
            elif pairs:
                with txn.cursor() as cur:
                    cur.putmulti(pairs, overwrite=kind == "put_many")


def _replay_held(
    kv: LmdbKV, batch: list[list[Op]], every: int, state: dict[str, Any]
) -> list[float]:
    """``_replay`` through ``kv`` with each write's ``idx/`` entries held (``--held``)."""
    out = []
    _RECORDING[0] = False
    try:
        for ops in batch:
            held = [
                k
                for kind, arg in ops
                for k in (
                    [arg[0]] if kind == "put" else [p[0] for p in arg] if kind != "delete" else []
                )
                if k.startswith(b"idx/")
            ]
            n = state["seq"]
            state["seq"] = n + 1
            state["held"].append(held)
            fold = len(state["held"]) >= every

            def fn(
                txn: Any,
                ops: list[Op] = ops,
                held: list[bytes] = held,
                n: int = n,
                fold: bool = fold,
            ) -> None:
                _apply(txn, ops, _not_idx, kv=True)
                # a deleted index entry goes now (only new entries are held)
                _apply(txn, [op for op in ops if op[0] == "delete"], _is_idx, kv=True)
                txn.put(
                    _HELD + n.to_bytes(8, "big"),
                    b"".join(len(k).to_bytes(1, "big") + k for k in held),
                )
                if fold:
                    txn.put_many(sorted((k, b"") for h in state["held"] for k in h))
                    for m in range(n + 1 - len(state["held"]), n + 1):
                        txn.delete(_HELD + m.to_bytes(8, "big"))

            t0 = time.perf_counter()
            kv.write(fn)
            out.append((time.perf_counter() - t0) * 1e6)
            if fold:
                state["held"] = []
    finally:
        _RECORDING[0] = True
    return out


_HELD = b"\xfe~held/"  # after every key of the main tree: the held records append


def _everything(key: bytes) -> bool:
    return True


def _not_lexical(key: bytes) -> bool:
    return not key.startswith(_LEXICAL)


def _is_idx(key: bytes) -> bool:
    return key.startswith(b"idx/")


def _not_idx(key: bytes) -> bool:
    return not _is_idx(key)


def _floor_keys(key: bytes) -> bool:
    return key.startswith(_FLOOR)


def _replay(
    env: Any,
    batch: list[list[Op]],
    keep: Callable[[bytes], bool],
    vectors: list[tuple[bytes, bytes]] | None,
    vec_db: Any,
) -> list[float]:
    """Each write's operations (those ``keep`` passes) in a durable transaction of its own.

    Returns the microseconds of each transaction.
    """
    out = []
    if isinstance(env, LmdbKV):  # the store's own layout
        _RECORDING[0] = False
        try:
            for ops in batch:
                t0 = time.perf_counter()
                env.write(functools.partial(_apply, ops=ops, keep=keep, kv=True))
                out.append((time.perf_counter() - t0) * 1e6)
        finally:
            _RECORDING[0] = True
        return out
    for j, ops in enumerate(batch):
        t0 = time.perf_counter()
        with env.begin(write=True) as txn:
            _apply(txn, ops, keep)
            if vectors is not None:  # the floor: the vector as float32, in its own database
                txn.put(*vectors[j], db=vec_db)
        out.append((time.perf_counter() - t0) * 1e6)
    return out


_LOG = b"\xfe~log/"  # after every key of the store: the log's puts append


def _replay_logged(
    env: Any, batch: list[list[Op]], every: int, state: dict[str, Any]
) -> list[float]:
    """``_replay`` of all operations through a write log folded every ``every`` writes."""
    out = []
    for ops in batch:
        t0 = time.perf_counter()
        parts: list[bytes] = []
        for kind, arg in ops:
            pairs = [arg[:2]] if kind == "put" else [(arg, b"")] if kind == "delete" else arg
            for k, v in pairs:
                parts += [len(k).to_bytes(2, "big"), k, len(v).to_bytes(4, "big"), v]
        with env.begin(write=True) as txn:
            n = state["seq"]
            state["seq"] = n + 1
            with txn.cursor() as cur:
                cur.put(_LOG + n.to_bytes(8, "big"), b"".join(parts), append=True)
            state["held"].append(ops)
            if len(state["held"]) >= every:  # the fold: every held write's operations
                for held in state["held"]:
                    _apply(txn, held, _everything)
                for m in range(n + 1 - len(state["held"]), n + 1):
                    txn.delete(_LOG + m.to_bytes(8, "big"))
                state["held"] = []
        out.append((time.perf_counter() - t0) * 1e6)
    return out


_ROWS = b"r/"
_ROW_KINDS = ((b"m/", b"\x00"), (b"mv/", b"\x01"), (b"lex/d/", b"\x02"), (b"vec/", b"\x03"))


def _row_key(key: bytes) -> bytes:
    """``key`` in the row-major layout of ``--rows`` (unchanged outside its four keyspaces)."""
    for prefix, kind in _ROW_KINDS:
        if key.startswith(prefix):
            rest = key[len(prefix) :]
            return _ROWS + rest[:4] + kind + rest[4:]
    return key


def _row_ops(ops: list[Op]) -> list[Op]:
    """A write's operations with their keys in the row-major layout."""
    out: list[Op] = []
    for kind, arg in ops:
        if kind == "put":
            out.append((kind, (_row_key(arg[0]), *arg[1:])))
        elif kind == "delete":
            out.append((kind, _row_key(arg)))
        else:
            out.append((kind, sorted((_row_key(k), v) for k, v in arg)))
    return out


def rewrite_records(path: Path, row_major: bool = True) -> None:
    """Delete and put back the store's heads, versions, documents and vectors in one commit.

    In the row-major layout (``--rows``), or unchanged when not ``row_major`` (the control,
    and ``bench_write_placement.py``'s rewritten store: a rewrite frees and reuses pages, which
    changes how a commit's dirty pages lie in the file whatever the layout).
    """
    env = lmdb.open(str(path), map_size=1 << 34, max_dbs=64)
    try:
        with env.begin(write=True) as txn:
            main = env.open_db(None, txn=txn)
            moved: list[tuple[Any, list[tuple[bytes, bytes]]]] = []
            for prefix, _ in _ROW_KINDS:
                name = DATABASE_PREFIX + prefix
                db = env.open_db(name, txn=txn) if txn.get(name) is not None else main
                pairs: list[tuple[bytes, bytes]] = []
                with txn.cursor(db=db) as cur:
                    ok = cur.set_range(prefix)
                    while ok and cur.key().startswith(prefix):
                        key = _row_key(cur.key()) if row_major else cur.key()
                        pairs.append((key, cur.value()))
                        ok = cur.delete()  # moves to the next entry
                moved.append((main if row_major else db, pairs))
            if row_major:
                moved = [(main, sorted(p for _, pairs in moved for p in pairs))]
            for db, pairs in moved:  # appended (full pages) when past every key of the tree
                with txn.cursor(db=db) as cur:
                    after = not pairs or not cur.last() or cur.key() < pairs[0][0]
                    added = cur.putmulti(pairs, append=after)[1]
                if added != len(pairs):
                    raise RuntimeError(f"put back {added} of {len(pairs)} records")
    finally:
        env.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--per-round", type=int, default=100)
    ap.add_argument("--dir", type=Path, help="where the stores go (default: a temporary one)")
    ap.add_argument(
        "--log",
        type=int,
        default=0,
        metavar="F",
        help="also replay through a write log folded every F writes",
    )
    ap.add_argument(
        "--held",
        type=int,
        default=0,
        metavar="F",
        help="also replay with the idx/ entries held, folded every F writes",
    )
    ap.add_argument(
        "--rows",
        action="store_true",
        help="also replay into a row-major layout of heads, versions, documents and vectors",
    )
    args = ap.parse_args(argv)
    singles = args.rounds * args.per_round
    ds = make(args.size, n_extra=singles)
    tmp = Path(tempfile.mkdtemp(prefix="cortex-write-replay-", dir=args.dir))
    try:
        cx = build(cortex_adapter.System(tmp, ds, print), args.size)
        cx.cx.close()
        envs: dict[str, Any] = {}
        names = (
            "all",
            "nolex",
            "noidx",
            "tree",
            "floor",
            *(("held",) if args.held else ()),
            *(("log",) if args.log else ()),
            *(("rows", "rows0") if args.rows else ()),
        )
        for name in names:
            shutil.copytree(cx.path, tmp / name)
            if name in ("rows", "rows0"):
                rewrite_records(tmp / name, row_major=name == "rows")
            if name in ("all", "nolex", "noidx", "held", "rows", "rows0"):
                envs[name] = LmdbKV(tmp / name, map_size=1 << 34)
            else:
                envs[name] = lmdb.open(
                    str(tmp / name), map_size=1 << 34, sync=True, metasync=True, max_dbs=2
                )
        vec_db = envs["floor"].open_db(b"floor-vec")
        cx.cx = cx._open(cx.mode)  # with the embedder, as the bench's ingest_single
        log: list[list[Op]] = []
        undo = _record(log)
        times: dict[str, list[float]] = {k: [] for k in ("cortex", *names)}
        logged: dict[str, Any] = {"seq": 0, "held": []}
        held_state: dict[str, Any] = {"seq": 0, "held": []}
        each: dict[str, list[float]] = {k: [] for k in times}
        keys_per_write: list[int] = []
        bytes_per_write: list[int] = []
        i = args.size
        try:
            for r in range(args.rounds):
                batch: list[list[Op]] = []
                t0 = time.perf_counter()  # cortex first: the replays need its operations
                for _ in range(args.per_round):
                    log.append([])
                    t1 = time.perf_counter()
                    cx.ingest_one(i)
                    each["cortex"].append((time.perf_counter() - t1) * 1e6)
                    batch.append(log[-1])
                    i += 1
                times["cortex"].append((time.perf_counter() - t0) / args.per_round * 1e6)
                vectors = [
                    (j.to_bytes(8, "big"), ds.vectors[j].tobytes())
                    for j in range(i - len(batch), i)
                ]
                runs: list[
                    tuple[str, Callable[[bytes], bool], list[tuple[bytes, bytes]] | None]
                ] = [
                    ("all", _everything, None),
                    ("nolex", _not_lexical, None),
                    ("noidx", _not_idx, None),
                    ("tree", _everything, None),
                    ("floor", _floor_keys, vectors),
                ]
                if args.held:
                    runs.append(("held", _everything, None))
                if args.log:
                    runs.append(("log", _everything, None))
                if args.rows:
                    runs += [("rows", _everything, None), ("rows0", _everything, None)]
                rows = [_row_ops(ops) for ops in batch] if args.rows else []
                k = r % len(runs)
                for name, keep, vecs in runs[k:] + runs[:k]:  # rotating
                    t0 = time.perf_counter()
                    if name == "held":
                        each[name] += _replay_held(envs[name], batch, args.held, held_state)
                    elif name == "log":
                        each[name] += _replay_logged(envs[name], batch, args.log, logged)
                    elif name == "rows":
                        each[name] += _replay(envs[name], rows, keep, vecs, vec_db)
                    else:
                        each[name] += _replay(envs[name], batch, keep, vecs, vec_db)
                    times[name].append((time.perf_counter() - t0) / args.per_round * 1e6)
                for ops in batch:
                    n = b = 0
                    for kind, arg in ops:
                        if kind == "put":
                            n, b = n + 1, b + len(arg[0]) + len(arg[1])
                        elif kind == "delete":
                            n, b = n + 1, b + len(arg)
                        else:
                            n += len(arg)
                            b += sum(len(k) + len(v) for k, v in arg)
                    keys_per_write.append(n)
                    bytes_per_write.append(b)
                log.clear()
        finally:
            undo()
            cx.close()
            for env in envs.values():
                env.close()
        med = {k: statistics.median(v) for k, v in times.items()}
        p50 = {k: statistics.median(v) for k, v in each.items()}
        print(
            f"N = {args.size:,}, {args.rounds} rounds of {args.per_round} single durable writes; "
            f"a write changes {statistics.mean(keys_per_write):.1f} keys "
            f"(median {statistics.median(keys_per_write):.0f}), "
            f"{statistics.mean(bytes_per_write):,.0f} B of keys and values "
            f"(median {statistics.median(bytes_per_write):,.0f})"
        )
        for name, label in (
            ("cortex", "cortex write"),
            ("all", "replay, all its operations"),
            ("nolex", "replay, no lexical index"),
            ("noidx", "replay, no idx/ entries"),
            ("tree", "replay, one tree (not the layout)"),
            ("floor", "the bench floor's write"),
            *([("held", f"replay, idx/ held (fold /{args.held})")] if args.held else []),
            *([("log", f"replay, logged (fold /{args.log})")] if args.log else []),
            *(
                [("rows0", "replay, all, rewritten (control)"), ("rows", "replay, row-major")]
                if args.rows
                else []
            ),
        ):
            print(
                f"{label:34} p50 {p50[name]:7,.0f} µs {p50[name] / p50['floor']:5.2f}x the floor;"
                f" mean {med[name]:7,.0f} µs {med[name] / med['floor']:5.2f}x"
                f" (round means {min(times[name]):,.0f}..{max(times[name]):,.0f})"
            )
        print(
            f"cortex ÷ replay of its own operations: p50 {p50['cortex'] / p50['all']:.2f}x, "
            f"mean {med['cortex'] / med['all']:.2f}x"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
