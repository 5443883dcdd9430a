"""Damage a store's files in every way issue 20 lists and count what each damage leads to.

Every trial copies a store built here (deterministic: fixed clock and ids), damages one file,
and runs a child process that opens the copy and does everything a user would: verify, stats,
export, backup, reads of every memory, the journal, text and vector search, a write, and
salvage into a new store. Outcomes are classified against the intact store:

- crash: a child died by a signal, hung, or let an exception other than a CortexError out;
- wrong: a call returned data that differs from the intact store's without an error (or
  verify said ok although a read differed, or backup left a copy that does not verify, or
  salvage recovered a memory whose records differ);
- missed: salvage did not recover a memory whose records lie on undamaged pages (and, when the
  free-page tree is damaged too, whose way from the root is undamaged);
- otherwise each call either returned what the intact store returns or raised a CortexError.

Damage classes (``--classes``): ``truncate`` (data.mdb cut at every page boundary), ``zero``
(each page zeroed), ``header`` (one bit of each page's 16-byte header flipped), ``value`` (one
byte of a value flipped, on every page that holds one), ``key`` (one bit of a key flipped where
it lies in its leaf page, a few keys of every key family: keys carry no checksum, so a read that
misses a record, or finds it under another id, without an error is wrong data here, and a
``NotFoundError`` for a record the intact store holds is counted as one that silently vanished),
``anywhere`` (seeded random bytes), ``sidecar`` (the vector index files and lock files:
truncated, zeroed, flipped).

    python tools/damage_trials.py                 # the full counts (a few minutes per class)
    python tools/damage_trials.py --every 5       # every fifth trial of each class
    python tools/damage_trials.py --json out.json

``tests/test_damaged_files.py`` runs a fixed sample of these trials.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
PSIZE = 4096
OPS = (
    "open",
    "verify",
    "stats",
    "export",
    "backup",
    "reopen",
    "journal",
    "reads",
    "find",
    "vector",
    "salvage",
    "write",
)
CLASSES = ("truncate", "zero", "header", "value", "key", "anywhere", "sidecar")
KEY_FAMILIES = (
    b"m/",
    b"mv/",
    b"e/from/",
    b"e/to/",
    b"j/",
    b"lex/p/",
    b"lex/d/",
    b"lex/t/",
    b"lex/s/",
    b"lex/i/",
    b"idx/type/",
    b"idx/tag/",
    b"idx/claim/",
    b"ent/a/",
    b"vec/",
    b"sal/",
    b"ep/",
    b"prov/e/",
    b"meta/",
)
"""The key families the ``key`` class damages (``cortex.storage.keys``). Format 9 has no
``sens/`` keys: a level is in its head or episode record (damaged with ``m/`` and ``ep/``).
Format 10's posting segments (``lex/s/``): the build ends with small writes that leave some."""


# ---------------------------------------------------------------------------------------------
# The store


def build(path: Path, *, n: int = 40) -> None:
    """A store with multi-page values, versions, edges, an episode, vectors and use counters.

    It also holds a tombstone and a purge, and saves its vector index; the same bytes every run.
    """
    from cortex import Cortex, EdgeType, Fact, MemoryId, Outcome, Query
    from cortex.index.embed import HashingEmbedder

    rng = random.Random(99)
    start = datetime(2026, 1, 2, tzinfo=UTC)
    ticks = itertools.count()

    def clock() -> datetime:
        return start + timedelta(milliseconds=next(ticks))

    with Cortex.open(path, actor="builder", clock=clock, embedder=HashingEmbedder(64)) as cx:
        uris = [
            cx.write(
                Fact(
                    statement=f"fact {i} about {['tea', 'rust', 'lisbon', 'chess'][i % 4]} "
                    + "z" * rng.choice([1, 50, 3000, 9000]),
                    subject=f"s{i % 7}",
                    predicate="p",
                ),
                tags=[f"t{i % 5}"],
                id=MemoryId(bytes.fromhex("019b7c0a8c00") + rng.randbytes(10)),
            )
            for i in range(n)
        ]
        for u in uris[::3]:
            cx.update(u, Fact(statement=f"new {u.id} about tea", subject="s", predicate="p"))
        for x, y in itertools.pairwise(uris):
            cx.add_edge(x, EdgeType.PART_OF, y)
        cx.tombstone(uris[5], "retired")
        cx.purge(uris[6], "erased")
        cx.attest(uris[7:10], Outcome.SUCCESS)
        cx.alias("s1", "subject one")  # ent/a/
        cx.alias("s2", "subject two")
        cx.update_head(uris[11], sensitivity="confidential")  # in its head (format 9)
        cx.ingest(
            "A conversation about tea and chess, kept verbatim. " * 40,
            source="chat",
            id=MemoryId(bytes.fromhex("019b7c0a8c00") + rng.randbytes(10)),
        )
        # small commits after the purge (which folded every segment): posting segments (lex/s/)
        cx.update(uris[12], Fact(statement="segment tea chess", subject="s", predicate="p"))
        cx.tombstone(uris[13], "retired")
        cx.write(Fact(statement="a fact pending in a segment", subject="s9", predicate="q"))
        assert cx.verify().ok
        cx.find(Query(near="tea", limit=1))  # builds the vector index, saved on close


class Layout(NamedTuple):
    """Where a store's records lie in its data.mdb."""

    pages: int
    kinds: dict[int, str]  # page -> meta, branch, leaf, overflow, free-tree, free
    key_pages: dict[bytes, set[int]]  # key -> the leaf and overflow pages holding it
    values: dict[int, list[tuple[int, int, bytes]]]  # page -> (offset, length, key) of values
    parents: dict[int, int]  # a page of the main tree below the root -> its branch page
    key_at: dict[bytes, int]  # key -> the file offset of its bytes in its leaf page
    named_roots: frozenset[int] = frozenset()  # the root pages of the named databases
    rows: dict[bytes, bytes] = {}  # noqa: RUF012 - format 21: id16 -> its row (4 bytes)


def layout(path: Path) -> Layout:
    """Map every page of ``path``'s data.mdb: its kind, and the keys and values on it."""
    from cortex.storage import pages as pg

    with pg.DataFile(path / "data.mdb") as f:
        meta = pg.newest(pg.read_metas(f))
        assert meta is not None
        total = f.size // PSIZE
        kinds = {0: "meta", 1: "meta"}
        key_pages: dict[bytes, set[int]] = {}
        values: dict[int, list[tuple[int, int, bytes]]] = {}
        parents: dict[int, int] = {}
        key_at: dict[bytes, int] = {}
        named_roots: set[int] = set()
        rows: dict[bytes, bytes] = {}
        trees = [(meta.main, "main"), (meta.free, "free-tree")]
        for tree, name in trees:  # grows: the named databases' trees are walked as main ones
            if tree.root == pg.P_INVALID:
                continue
            stack = [tree.root]
            while stack:
                p = stack.pop()
                page = f.page(p)
                flags = struct.unpack_from("<H", page, 10)[0]
                if flags == pg.P_LEAF | pg.P_LEAF2:  # a tree of duplicates' leaf (format 20)
                    kinds[p] = "leaf"
                    continue
                lower = struct.unpack_from("<H", page, 12)[0]
                ptrs = struct.unpack_from(f"<{(lower - 16) // 2}H", page, 16)
                if flags == pg.P_BRANCH:
                    kinds[p] = "branch" if name == "main" else name
                    for ptr in ptrs:
                        lo, hi, fl, _k = struct.unpack_from("<HHHH", page, ptr)
                        stack.append(lo | hi << 16 | fl << 32)
                        if name == "main":
                            parents[stack[-1]] = p
                    continue
                kinds[p] = "leaf" if name == "main" else name
                for ptr in ptrs:
                    lo, hi, fl, ks = struct.unpack_from("<HHHH", page, ptr)
                    key = page[ptr + 8 : ptr + 8 + ks]
                    dsize = lo | hi << 16
                    if fl == pg.F_SUBDATA | pg.F_DUPDATA:  # a tree of duplicates (format 20)
                        dup = pg.dup_tree(
                            page[ptr + 8 + ks : ptr + 8 + ks + dsize], pg._dup_head(key)
                        )
                        assert dup is not None
                        trees.append((dup, "main"))
                        continue
                    if fl == pg.F_SUBDATA:  # a named database's record (format 17)
                        sub = pg.named_tree(key, page[ptr + 8 + ks : ptr + 8 + ks + dsize])
                        assert sub is not None
                        trees.append((sub, "main"))
                        named_roots.add(sub.root)
                        continue
                    if name == "main":
                        key_pages.setdefault(key, set()).add(p)
                        key_at[key] = p * PSIZE + ptr + 8
                    if fl == pg.F_BIGDATA:
                        ov = struct.unpack_from("<Q", page, ptr + 8 + ks)[0]
                        npages = struct.unpack_from("<I", f.page(ov), 12)[0]
                        for q in range(ov, ov + npages):
                            kinds[q] = "overflow"
                            if name == "main":
                                key_pages[key].add(q)
                        values.setdefault(ov, []).append((16, min(dsize, PSIZE - 16), key))
                    elif dsize and name == "main":
                        values.setdefault(p, []).append((ptr + 8 + ks, dsize, key))
                        if key.startswith(b"id/") and len(key) == 19 and dsize == 8:
                            rows[key[3:]] = page[ptr + 8 + ks : ptr + 8 + ks + 4]
        for p in range(total):
            kinds.setdefault(p, "free")
    return Layout(total, kinds, key_pages, values, parents, key_at, frozenset(named_roots), rows)


# ---------------------------------------------------------------------------------------------
# Damage


class Trial(NamedTuple):
    """One damage to one file of a copy of the store."""

    cls: str
    name: str
    file: str  # relative to the store directory
    how: str  # truncate:N, zero:OFFSET:LEN, flip:OFFSET:MASK
    damaged_pages: tuple[int, ...]  # data.mdb pages affected (truncate: from the first one on)


def trials(store: Path, lay: Layout, classes: tuple[str, ...], every: int = 1) -> list[Trial]:
    """Every trial of the given classes, in a fixed order (every ``every``-th one)."""
    out: list[Trial] = []
    n = lay.pages
    if "truncate" in classes:
        out += [
            Trial("truncate", f"cut at page {k}", "data.mdb", f"truncate:{k * PSIZE}", (k,))
            for k in range(n)
        ]
    if "zero" in classes:
        out += [
            Trial(
                "zero",
                f"page {p} ({lay.kinds[p]}) zeroed",
                "data.mdb",
                f"zero:{p * PSIZE}:{PSIZE}",
                (p,),
            )
            for p in range(n)
        ]
    if "header" in classes:
        for p in range(n):
            byte = (p * 5) % 16
            out.append(
                Trial(
                    "header",
                    f"page {p} ({lay.kinds[p]}) header byte {byte} bit {p % 8}",
                    "data.mdb",
                    f"flip:{p * PSIZE + byte}:{1 << (p % 8)}",
                    (p,),
                )
            )
    if "value" in classes:
        for p in sorted(lay.values):
            spans = lay.values[p]
            off, length, _key = spans[p % len(spans)]
            at = off + (length // 2 if length > 1 else 0)
            out.append(
                Trial(
                    "value",
                    f"page {p} ({lay.kinds[p]}) value byte {at}",
                    "data.mdb",
                    f"flip:{p * PSIZE + at}:{1 << (p % 8)}",
                    (p,),
                )
            )
    if "key" in classes:
        for family in KEY_FAMILIES:
            keys = sorted(k for k in lay.key_at if k.startswith(family) and len(k) > len(family))
            step = max(1, len(keys) // 4)
            for j, key in enumerate(keys[::step][:4]):
                # a byte after the family's prefix: an id, a term, a sequence number
                at = len(family) + (j * 7 + 3) % (len(key) - len(family))
                off = lay.key_at[key] + at
                out.append(
                    Trial(
                        "key",
                        f"{family.decode()} key #{j} byte {at}",
                        "data.mdb",
                        f"flip:{off}:{1 << (j * 3 % 8)}",
                        (off // PSIZE,),
                    )
                )
    if "anywhere" in classes:
        rng = random.Random(2020)
        for i in range(200):
            off = rng.randrange(n * PSIZE)
            out.append(
                Trial(
                    "anywhere",
                    f"byte {off} (page {off // PSIZE}, {lay.kinds[off // PSIZE]}) #{i}",
                    "data.mdb",
                    f"flip:{off}:{1 << rng.randrange(8)}",
                    (off // PSIZE,),
                )
            )
    if "sidecar" in classes:
        out += list(_sidecar_trials(store))
    return out[::every]


def _sidecar_trials(store: Path) -> Iterator[Trial]:
    files = sorted(p for p in (store / "vectors").iterdir() if p.is_file())
    files.append(store / "lock.mdb")
    for path in files:
        rel = str(path.relative_to(store))
        size = path.stat().st_size
        cuts = sorted({0, 1, size // 2, max(size - 1, 0)} | set(range(0, size, PSIZE)))
        for k in cuts[:12]:
            if k < size:
                yield Trial("sidecar", f"{rel} cut at {k}", rel, f"truncate:{k}", ())
        for off in range(0, size, PSIZE):
            if off // PSIZE >= 6:
                break
            yield Trial("sidecar", f"{rel} block {off} zeroed", rel, f"zero:{off}:{PSIZE}", ())
        rng = random.Random(rel)
        for _ in range(min(8, size)):
            off = rng.randrange(size)
            yield Trial(
                "sidecar",
                f"{rel} byte {off} flipped",
                rel,
                f"flip:{off}:{1 << rng.randrange(8)}",
                (),
            )


def damage(path: Path, how: str) -> None:
    """Apply ``how`` (see ``Trial.how``) to the file ``path``."""
    kind, *args = how.split(":")
    if kind == "truncate":
        os.truncate(path, int(args[0]))
        return
    with open(path, "r+b") as f:
        at = int(args[0])
        if kind == "zero":
            size = os.fstat(f.fileno()).st_size
            f.seek(at)
            f.write(b"\0" * max(0, min(int(args[1]), size - at)))
        else:
            f.seek(at)
            byte = f.read(1)[0]
            f.seek(at)
            f.write(bytes([byte ^ int(args[1])]))


# ---------------------------------------------------------------------------------------------
# The child: every operation, one JSON line each


def _digest(obj: Any) -> str:
    return hashlib.sha256(repr(obj).encode()).hexdigest()[:16]


def child(store: str, ops: str, scratch: str) -> None:
    """Run ``ops`` (comma-separated) on ``store``, printing ``{"op", "start"|"result"}`` lines."""
    from cortex import Cortex, CortexError, Query
    from cortex.index.embed import HashingEmbedder
    from cortex.transfer.bundle import export_store
    from cortex.transfer.salvage import salvage

    def say(obj: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    cx: Any = None
    work = Path(scratch)
    for op in ops.split(","):
        say({"op": op, "start": True})
        try:
            result: Any
            if op == "open":  # a plain open, as `cortex verify` does (the walks check pages)
                cx = Cortex.open(store, actor="builder", create=False, check_pages=False)
                result = "ok"
            elif op == "reopen":  # the reads: opened as --reads-open says
                if cx is not None:
                    cx.close()
                    cx = None
                how = os.environ.get("DAMAGE_READS_OPEN", "default")
                options = {} if how == "default" else {"check_pages": how == "checked"}
                cx = Cortex.open(
                    store, actor="builder", create=False, embedder=HashingEmbedder(64), **options
                )
                result = "ok"
            elif op == "salvage":
                dest = work / "salvaged"
                shutil.rmtree(dest, ignore_errors=True)
                rep = salvage(store, dest)
                # a memory whose use counters salvage reports lost (format 11) has its head's
                # flag clear: that reported difference is undone before comparing
                counters_lost = {x.id for x in rep.lost if x.kind == "counters"}
                with Cortex.open(dest, actor=None, create=False) as new:  # as its owner
                    mems = {
                        str(m): _memory_digest(
                            new, m, parts=True, counters_lost=str(m) in counters_lost
                        )
                        for m in _all_heads(new)
                    }
                result = {
                    "verify_ok": rep.verify_ok,
                    "memories": mems,
                    "lost": [[x.kind, x.id] for x in rep.lost],
                }
            elif cx is None:
                result = {"error": "not open"}
            elif op == "verify":
                v = cx.verify()
                result = {"ok": v.ok, "problems": [[p.record, p.what] for p in v.problems[:3]]}
            elif op == "stats":
                s = cx.stats()
                result = _digest(
                    {k: v for k, v in s.items() if k not in ("map_size", "used_bytes")}
                )
            elif op == "export":
                out = work / "export.jsonl"
                r = export_store(cx, out)
                result = r.sha256
            elif op == "backup":
                dest = work / "backup"
                shutil.rmtree(dest, ignore_errors=True)
                rep = cx.backup(dest)
                result = {"ok": rep.ok, "left": dest.exists()}
            elif op == "journal":  # each entry's digest and kind
                result = [[_digest(repr(e)), e.kind.label] for e in cx.journal()]
            elif op == "reads":
                result = {
                    str(mid): _memory_digest(cx, mid)
                    for mid in json.loads((work / "ids.json").read_text())
                }
            elif op == "find":
                handle = cx
                result = {
                    q: _attempt(
                        lambda q=q, h=handle: _digest(
                            [str(hit.uri) for hit in h.find(Query(**json.loads(q)))]
                        )
                    )
                    for q in (
                        '{"types": ["Fact"], "limit": 100}',
                        '{"tags": ["t2"], "types": ["Fact"], "limit": 100}',
                        '{"tags": ["t1"], "limit": 100}',
                        '{"text": "tea chess", "limit": 20}',
                        '{"text": "lisbon", "limit": 20, "evidence": 3}',
                    )
                }
                result["aliases"] = _attempt(lambda h=handle: _digest(h.aliases()))
                result["about"] = _attempt(
                    lambda h=handle: _digest([str(x.uri) for x in h.about("subject one")])
                )
                for m in json.loads((work / "ids.json").read_text()):
                    result[f"sensitivity {m}"] = _attempt(
                        lambda h=handle, m=m: str(h.sensitivity(m))
                    )
            elif op == "vector":
                hits = cx.find(Query(near="a fact about rust", limit=10))
                result = {"hits": _digest([str(h.uri) for h in hits]), "state": cx.vector_state()}
            elif op == "write":
                from cortex import Fact

                u = cx.write(Fact(statement="written after damage", subject="x", predicate="y"))
                result = {"ok": cx.resolve(u).data.statement == "written after damage"}
            else:
                raise SystemExit(f"unknown op {op}")
        except CortexError as exc:
            result = {"error": type(exc).__name__, "message": str(exc)[:300]}
        except Exception as exc:
            result = {
                "foreign": f"{type(exc).__name__}: {exc}",
                "tb": traceback.format_exc()[-1500:],
            }
        say({"op": op, "result": result})
    if cx is not None:
        with contextlib.suppress(CortexError):
            cx.close()


def _attempt(fn: Callable[[], Any]) -> Any:
    from cortex import CortexError

    try:
        return fn()
    except CortexError as exc:
        return {"error": type(exc).__name__}


def _all_heads(cx: Any) -> list[Any]:
    from cortex.model.ids import MemoryId
    from cortex.storage.keys import ID

    with cx._kv.read() as txn:  # format 21: every memory's id in id/, in id order
        return [MemoryId(k[len(ID) :]) for k in txn.keys(ID)]


def _memory_digest(cx: Any, mid: Any, *, parts: bool = False, counters_lost: bool = False) -> Any:
    """One memory as read: its head, its versions and its edges (digests; ``parts``: apart).

    ``counters_lost``: salvage reported the memory's use counters lost, so its head has the
    flag clear; the head is digested with the flag set, as the intact store holds it.
    """
    import msgspec

    from cortex import CortexError

    try:
        latest = cx.resolve_latest(mid)
        hist = cx.history(mid)
        edges = cx.edges(mid, direction="both", include_removed=True)
    except CortexError as exc:
        return {"error": type(exc).__name__}
    head = latest.head
    if counters_lost and not head.has_counters:
        head = msgspec.structs.replace(head, has_counters=True)
    records = _digest((repr(head), [repr((m.version, m.data)) for m in hist]))
    links = sorted(_digest(repr(e)) for e in edges)
    return {"records": records, "edges": links} if parts else _digest((records, links))


# ---------------------------------------------------------------------------------------------
# Running trials


class Outcome(NamedTuple):
    """What one trial led to."""

    trial: Trial
    verdict: str  # crash, wrong, missed, refused, reported, clean
    ops: dict[str, str]  # op -> equal, error, rebuilt, partial (salvage), wrong, crash, skipped
    details: list[str]


def run_child(
    store: Path, ops: list[str], scratch: Path, timeout: float = 120
) -> tuple[dict[str, Any], str | None]:
    """Run the child; its results by op, and the op it crashed in (None: it did not)."""
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        str(store),
        ",".join(ops),
        str(scratch),
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    try:
        proc = subprocess.run(cmd, capture_output=True, timeout=timeout, env=env, check=False)
        out, rc, err = proc.stdout, proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as exc:
        out, rc, err = exc.stdout or b"", -999, b"timeout"
    results: dict[str, Any] = {}
    started = None
    for line in out.decode(errors="replace").splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if obj.get("start"):
            started = obj["op"]
        else:
            results[obj["op"]] = obj["result"]
            started = None
    if rc != 0:  # a signal, a timeout (-999) or an exit before any op reported
        crashed = started or next((o for o in ops if o not in results), ops[-1])
        results[crashed] = {"crash": rc, "stderr": err.decode(errors="replace")[-800:]}
        return results, crashed
    return results, None


def probe(store: Path, scratch: Path, ids: list[str]) -> dict[str, Any]:
    """Every op on ``store``; after a crash the ops after it run in a fresh child."""
    (scratch / "ids.json").write_text(json.dumps(ids))
    todo = list(OPS)
    results: dict[str, Any] = {}
    reads = OPS.index("reopen")
    for _ in range(len(OPS)):
        got, crashed = run_child(store, todo, scratch)
        results.update({k: v for k, v in got.items() if k not in results})
        if crashed is None or crashed not in OPS:
            break
        at = OPS.index(crashed)
        rest = [o for o in OPS[at + 1 :] if o not in results]
        if not rest:
            break
        # the ops after the crash, in a fresh child that opens the store again first
        if crashed == "reopen":
            todo = ["salvage"]
        elif at < reads:
            todo = ["open", *rest] if crashed != "open" else rest[rest.index("reopen") :]
        else:
            todo = ["reopen", *rest]
    return results


def classify(trial: Trial, got: dict[str, Any], base: dict[str, Any], lay: Layout) -> Outcome:
    """Compare a damaged copy's results with the intact store's."""
    ops: dict[str, str] = {}
    details: list[str] = []
    vanish = trial.cls == "key"  # not found, for a record the intact store holds: wrong
    verify = got.get("verify")
    verify_ok = isinstance(verify, dict) and verify.get("ok") is True
    for op in OPS:
        r = got.get(op)
        b = base[op]
        if r is None:
            ops[op] = "skipped"
        elif isinstance(r, dict) and "crash" in r:
            ops[op] = "crash"
            details.append(f"{op}: crashed ({r['crash']}): {r['stderr'][-300:]}")
        elif isinstance(r, dict) and "foreign" in r:
            ops[op] = "crash"
            details.append(f"{op}: {r['foreign']} {r['tb'][-600:]}")
        elif isinstance(r, dict) and ("error" in r and len(r) <= 2):
            ops[op] = "error"
            if vanish and r["error"] == "NotFoundError" and op in ("reads", "journal", "find"):
                ops[op] = "wrong"
                details.append(f"{op}: NotFoundError (a record silently vanished)")
        elif op == "salvage":
            ops[op] = _salvage_outcome(trial, r, b, lay, details)
        elif op == "backup":
            if r["ok"]:
                ops[op] = "equal" if r == b else "wrong"
            else:
                ops[op] = "wrong" if r["left"] else "error"
                if r["left"]:
                    details.append("backup: a copy that does not verify was left")
        elif op == "reopen":
            ops[op] = "equal" if r == b else "error"
        elif op == "verify":
            ops[op] = "equal" if r == b else "error"  # a report of damage is not data
        elif op in ("reads", "find"):
            bad = [
                k
                for k, v in r.items()
                if v != b.get(k)
                and not (
                    isinstance(v, dict)
                    and "error" in v
                    and not (vanish and v["error"] == "NotFoundError")
                )
            ]
            errors = [k for k, v in r.items() if isinstance(v, dict) and "error" in v]
            ops[op] = "wrong" if bad else ("error" if errors else "equal")
            if bad:
                details.append(f"{op}: {len(bad)} differ without an error, e.g. {bad[0]}")
        elif op == "journal":
            if r == b:
                ops[op] = "equal"
            elif r[: len(b)] == b and all(kind == "embed" for _, kind in r[len(b) :]):
                ops[op] = "rebuilt"  # damaged vectors re-embedded at open, journalled
            else:
                ops[op] = "wrong"
                details.append("journal: differs without an error")
        elif op == "vector":
            rebuilt = r["state"].startswith("rebuilt") and not b["state"].startswith("rebuilt")
            ops[op] = ("rebuilt" if rebuilt else "equal") if r["hits"] == b["hits"] else "wrong"
            if r["hits"] != b["hits"]:
                details.append(f"vector: hits differ (index {r['state']})")
        elif op == "write":
            ops[op] = "equal" if r == b else "wrong"
        else:
            ops[op] = "equal" if r == b else "wrong"
            if r != b:
                details.append(f"{op}: differs without an error")
    # verify vouching for a store whose reads differ is wrong data too
    if verify_ok and any(ops[o] in ("wrong", "error") for o in ("reads", "journal", "export")):
        details.append("verify said ok but reads differ or fail")
        ops["verify"] = "wrong"
    if vanish and ops.get("verify") == "equal" and ops.get("open") == "equal":
        ops["verify"] = "blind"  # a damaged key that verify did not report
        details.append("verify: said ok with a damaged key")
    if "crash" in ops.values():
        verdict = "crash"
    elif "wrong" in ops.values():
        verdict = "wrong"
    elif ops.get("salvage") == "missed":
        verdict = "missed"
    elif ops.get("verify") == "blind":
        verdict = "blind"
    elif ops["open"] == "error" and ops["reopen"] in ("error", "skipped"):
        verdict = "refused"
    elif all(v == "equal" for k, v in ops.items() if k != "salvage"):
        verdict = "clean"
    elif all(v in ("equal", "rebuilt") for k, v in ops.items() if k != "salvage"):
        verdict = "rebuilt"
    else:
        verdict = "reported"
    return Outcome(trial, verdict, ops, details)


def _salvage_outcome(
    trial: Trial, r: dict[str, Any], b: dict[str, Any], lay: Layout, details: list[str]
) -> str:
    if not r["verify_ok"]:
        details.append("salvage: the new store does not verify")
        return "wrong"
    base_mems = b["memories"]
    wrong = [
        m
        for m, d in r["memories"].items()
        if m not in base_mems
        or "records" not in d  # a recovered memory its owner cannot read
        or d["records"] != base_mems[m]["records"]
        or not set(d["edges"]) <= set(base_mems[m]["edges"])
    ]
    if wrong:
        details.append(f"salvage: {len(wrong)} recovered memories differ, e.g. {wrong[0]}")
        return "wrong"
    if trial.file != "data.mdb":
        expected = set(base_mems)  # a sidecar file: nothing in data.mdb is lost
    elif trial.damaged_pages[0] < 2:
        # the file cut within the meta pages, or a meta page damaged: the other meta page's
        # snapshot (one commit older) is all there is; not counted
        expected = set()
    else:
        expected = {m for m in base_mems if not _touched(m, trial, lay)}
    missed = sorted(expected - set(r["memories"]))
    if missed:
        details.append(f"salvage: missed {len(missed)} undamaged memories, e.g. {missed[0]}")
        return "missed"
    return "equal" if set(r["memories"]) == set(base_mems) else "partial"


def _touched(mid: str, trial: Trial, lay: Layout) -> bool:
    """Whether salvage may lose the memory (its pages, or the way to them, damaged).

    A page holding its head or a version is damaged, or, with the free-page tree damaged too,
    a branch page above one of them: salvage reads the leaves a damaged branch page cuts off
    only when the free-page tree is intact (``specs/storage.md`` §10), since without it they
    cannot be told from stale pages.
    """
    from cortex.model.ids import MemoryId
    from cortex.storage.keys import HEAD, VERSION

    raw = MemoryId.parse(mid).bytes
    row = lay.rows.get(raw, raw)  # format 21: its head and versions are keyed by its row
    pages: set[int] = set(lay.key_pages.get(b"id/" + raw, ()))
    for key, where in lay.key_pages.items():
        if key == HEAD + row or key.startswith(VERSION + row):
            pages |= where

    def damaged(p: int) -> bool:
        if trial.cls == "truncate":
            return p >= trial.damaged_pages[0]
        return p in trial.damaged_pages

    if any(damaged(p) for p in pages):
        return True
    if not any(damaged(p) for p, kind in lay.kinds.items() if kind == "free-tree"):
        return False
    for start in pages:
        p = start
        while p in lay.parents:
            p = lay.parents[p]
            if damaged(p):
                return True
    return False


def run(
    classes: tuple[str, ...],
    *,
    every: int = 1,
    jobs: int = 2,
    work: Path | None = None,
    report: Callable[[Outcome], None] | None = None,
    select: Callable[[list[Trial]], list[Trial]] | None = None,
) -> tuple[list[Outcome], Layout]:
    """Build the store, run the trials, return their outcomes."""
    own = work is None
    root = Path(tempfile.mkdtemp(prefix="damage-")) if work is None else work
    try:
        store = root / "store"
        build(store)
        lay = layout(store)
        ids = sorted(_ids(store))
        intact = root / "intact"
        shutil.copytree(store, intact)  # the probe writes: keep the store itself as built
        base = probe(intact, _scratch(root, "base"), ids)
        if any(
            isinstance(v, dict) and ("crash" in v or "foreign" in v or "error" in v)
            for v in base.values()
        ):
            raise SystemExit(f"the intact store does not probe cleanly: {base}")
        todo = trials(store, lay, classes, every)
        if select is not None:
            todo = select(todo)

        def one(i: int, t: Trial) -> Outcome:
            copy = root / f"t{i}"
            shutil.copytree(store, copy)
            try:
                damage(copy / t.file, t.how)
                got = probe(copy, _scratch(root, f"s{i}"), ids)
                out = classify(t, got, base, lay)
            finally:
                shutil.rmtree(copy, ignore_errors=True)
                shutil.rmtree(root / f"s{i}", ignore_errors=True)
            if report is not None:
                report(out)
            return out

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            outcomes = list(pool.map(lambda it: one(*it), enumerate(todo)))
        return outcomes, lay
    finally:
        if own:
            shutil.rmtree(root, ignore_errors=True)


def _scratch(root: Path, name: str) -> Path:
    p = root / name
    p.mkdir(parents=True, exist_ok=True)
    return p


def _ids(store: Path) -> list[str]:
    from cortex import Cortex

    with Cortex.open(store, actor="builder", create=False) as cx:
        return [str(m) for m in _all_heads(cx)]


def summary(outcomes: list[Outcome]) -> dict[str, Any]:
    """Counts by class: trials, verdicts, and per op the outcomes."""
    out: dict[str, Any] = {}
    for cls in sorted({o.trial.cls for o in outcomes}):
        mine = [o for o in outcomes if o.trial.cls == cls]
        ops: dict[str, Counter[str]] = {op: Counter() for op in OPS}
        for o in mine:
            for op, v in o.ops.items():
                ops[op][v] += 1
        out[cls] = {
            "trials": len(mine),
            "verdicts": dict(Counter(o.verdict for o in mine)),
            "ops": {op: dict(c) for op, c in ops.items()},
        }
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*sys.argv[2:5])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--classes", default=",".join(CLASSES), help="comma-separated damage classes")
    ap.add_argument("--every", type=int, default=1, help="run every N-th trial of each class")
    ap.add_argument("--jobs", type=int, default=2, help="trials run at once")
    ap.add_argument("--json", metavar="FILE", help="write every outcome and the counts here")
    ap.add_argument(
        "--reads-open",
        choices=("default", "checked", "plain"),
        default="default",
        help="open for the reads as Cortex.open does by default, with check_pages=True, or "
        "with check_pages=False",
    )
    args = ap.parse_args()
    os.environ["DAMAGE_READS_OPEN"] = args.reads_open
    classes = tuple(c for c in args.classes.split(",") if c)
    bad: list[Outcome] = []

    def show(o: Outcome) -> None:
        mark = (
            ""
            if o.verdict in ("clean", "reported", "refused", "rebuilt")
            else "  <-- " + "; ".join(o.details)[:400]
        )
        print(f"{o.trial.cls:9} {o.trial.name:55} {o.verdict}{mark}", flush=True)
        if mark:
            bad.append(o)

    outcomes: list[Outcome] = []
    for cls in classes:
        got, _lay = run((cls,), every=args.every, jobs=args.jobs, report=show)
        outcomes += got
    counts = summary(outcomes)
    print(json.dumps(counts, indent=1))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "counts": counts,
                    "outcomes": [
                        {
                            "trial": o.trial._asdict(),
                            "verdict": o.verdict,
                            "ops": o.ops,
                            "details": o.details,
                        }
                        for o in outcomes
                    ],
                },
                indent=1,
            )
        )
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
