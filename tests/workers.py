"""Code that runs in child processes for the crash, concurrency and corruption tests.

Every function here opens its own store: nothing crosses a fork (children are started with
``python -c`` or multiprocessing's 'spawn'). Children that report progress print one JSON line
per event on stdout and flush it, *after* the call it reports has returned.

Run one from a shell with ``python -m tests.workers NAME ARG...``.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from cortex import Cortex, CortexError, Fact, MemoryId, NewMemory, NotFoundError, Query
from cortex.engine.store import Store

ROOT = Path(__file__).resolve().parent.parent
EDGE_TYPES = ("references", "derived_from", "corroborates", "part_of")


def emit(obj: dict[str, Any]) -> None:
    """Print one JSON line and flush it, so the parent sees it as soon as it is true."""
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def command(name: str, *args: object) -> list[str]:
    """The argv that runs ``workers.NAME(*args)`` in a fresh interpreter via ``python -c``."""
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); from tests import workers; workers.main()"
    )
    return [sys.executable, "-c", code, name, *map(str, args)]


def rest_of_output(proc: Any, timeout: float) -> str:
    """What a child started with ``stdout=PIPE, text=True`` prints until it exits (the parent's
    side), read through ``proc.stdout`` itself.

    Not ``proc.communicate(timeout=...)`` after reading some lines with ``readline`` or by
    iterating: with a timeout it reads the pipe's descriptor directly, and the lines the file
    object had already read ahead into its buffer are lost (a test then counts fewer
    acknowledged writes than the child made). Kills the child and fails after ``timeout``.
    """
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(proc.stdout.read()), daemon=True)
    reader.start()
    reader.join(timeout)
    if reader.is_alive():
        proc.kill()
        reader.join(10)
        proc.stdout.close()
        raise AssertionError(f"the child did not finish within {timeout} s")
    proc.stdout.close()
    proc.wait(timeout=10)
    return got[0] if got else ""


# ---------------------------------------------------------------------------------------------
# Crash safety


def fact_for(seed: int, i: int, j: int, version: int = 1) -> Fact:
    """The content the crash writer writes for op ``i`` item ``j`` (recomputable by the parent).

    Sizes vary from a few bytes to several pages so that commits touch overflow pages too.
    """
    size = (seed * 7919 + i * 104729 + j * 1299709 + version) % 9000
    return Fact(
        statement=f"s{seed}:{i}:{j}:v{version}",
        subject=f"crash-{seed}",
        predicate="wrote",
        object="o" * size if size % 3 else None,
    )


def crash_writer(path: str, seed: str) -> None:
    """Mutate the store in a loop until killed, reporting each op after it returns.

    Ops: write, write_many (20 items, sharing a batch tag), update, update_head (appends a tag
    and sets importance), tombstone, add_edge. Only ids written in this run are changed, and an
    id gets at most one update_head or tombstone, so the parent can check each report exactly.
    """
    s = int(seed)
    rng = random.Random(s)
    cx = Cortex.open(path, actor="crasher", as_owner=True)
    emit({"op": "ready"})
    written: list[MemoryId] = []
    changeable: list[MemoryId] = []
    version: dict[MemoryId, int] = {}
    i = 0
    while True:
        i += 1
        r = rng.random()
        if r < 0.3 or len(changeable) < 3:
            tag = f"w{s}-{i}"
            uri = cx.write(fact_for(s, i, 0), tags=[tag])
            written.append(uri.id)
            changeable.append(uri.id)
            version[uri.id] = 1
            emit({"op": "write", "uri": str(uri), "i": i, "tag": tag})
        elif r < 0.45:
            tag = f"b{s}-{i}"
            uris = cx.write_many(
                NewMemory(data=fact_for(s, i, j), tags=[tag], importance=j % 11) for j in range(20)
            )
            for u in uris:
                written.append(u.id)
                changeable.append(u.id)
                version[u.id] = 1
            emit({"op": "many", "uris": [str(u) for u in uris], "i": i, "tag": tag})
        elif r < 0.65:
            mid = rng.choice(changeable)
            uri = cx.update(mid, fact_for(s, i, 0, version[mid] + 1))
            version[mid] = uri.version
            emit({"op": "update", "uri": str(uri), "i": i})
        elif r < 0.75:
            mid = changeable.pop(rng.randrange(len(changeable)))
            old = cx.resolve_latest(mid).head.tags
            tags = [*old, f"h{s}-{i}"]
            importance = rng.randint(0, 10)
            cx.update_head(mid, tags=tags, importance=importance)
            emit({"op": "head", "id": str(mid), "tags": tags, "importance": importance})
        elif r < 0.85:
            mid = changeable.pop(rng.randrange(len(changeable)))
            reason = f"t{s}-{i}"
            cx.tombstone(mid, reason)
            emit({"op": "tomb", "id": str(mid), "reason": reason})
        else:
            src, dst = rng.sample(written, 2)
            et = rng.choice(EDGE_TYPES)
            cx.add_edge(src, et, dst)
            emit({"op": "edge", "src": str(src), "type": et, "dst": str(dst)})


def group_writer(path: str, seed: str, threads: str) -> None:
    """``threads`` threads of one process write single memories until killed (group commit).

    Thread ``t`` writes op ``i = t * 1,000,000 + n`` (``fact_for(seed, i, 0)``, tag
    ``g{seed}-{i}``) and reports each write after it returns, as ``crash_writer`` does.
    """
    s, count = int(seed), int(threads)
    cx = Cortex.open(path, actor="grouper", as_owner=True)
    lock = threading.Lock()
    barrier = threading.Barrier(count + 1)

    def run(t: int) -> None:
        barrier.wait()
        n = 0
        while True:
            n += 1
            i = t * 1_000_000 + n
            tag = f"g{s}-{i}"
            uri = cx.write(fact_for(s, i, 0), tags=[tag])
            with lock:
                emit({"op": "write", "uri": str(uri), "i": i, "tag": tag})

    for t in range(count):
        threading.Thread(target=run, args=(t,), daemon=True).start()
    barrier.wait()
    emit({"op": "ready"})
    threading.Event().wait()


def big_batch_writer(path: str, n: str, stall_at: str) -> None:
    """Write one memory, then ``n`` memories in one write_many, reporting progress.

    With ``stall_at`` > 0 the child stops inside the write transaction after that many memories
    have been put, says ``mid`` and sleeps, so the parent's kill lands mid-transaction for sure.
    """
    count, stall = int(n), int(stall_at)
    cx = Cortex.open(path, actor="bulk")
    uri = cx.write(fact_for(0, 0, 0), tags=["before"])
    emit({"op": "write", "uri": str(uri)})
    if stall > 0:
        original = Store._stage_new

        def stage_new(self: Store, prepared: Any, puts: Any, journal: Any, lex: Any) -> None:
            # the heads of all are put; the other records of the first ``stall`` go in too
            original(self, prepared[:stall], puts, journal, lex)
            journal.txn.put_many(puts)
            emit({"op": "mid", "puts": stall})
            time.sleep(120)

        Store._stage_new = stage_new  # type: ignore[method-assign]
    items = [NewMemory(data=fact_for(1, 0, j), tags=["big"]) for j in range(count)]
    emit({"op": "start"})
    uris = cx.write_many(items)
    emit({"op": "done", "n": len(uris)})
    time.sleep(120)


def write_one(path: str, statement: str) -> None:
    """Open the store, write one memory and report its URI (proves the writer lock is free)."""
    with Cortex.open(path, actor="after", as_owner=True) as cx:
        uri = cx.write(Fact(statement=statement, subject="after", predicate="wrote"))
        emit({"op": "write", "uri": str(uri)})


def steady_writer(path: str, stop_file: str) -> None:
    """Write small batches until ``stop_file`` exists (a writer for backups to race)."""
    n = 0
    with Cortex.open(path, actor="steady", as_owner=True) as cx:
        emit({"op": "started"})
        while not Path(stop_file).exists():
            cx.write_many(
                Fact(statement=f"steady {n + j} " + "x" * 300, subject="s", predicate="p")
                for j in range(20)
            )
            n += 20
    emit({"op": "done", "n": n})


# ---------------------------------------------------------------------------------------------
# Concurrency


def conc_id(k: int, i: int) -> MemoryId:
    """The id writer ``k`` gives its memory ``i``: every process can name every other's."""
    return MemoryId(b"\x01" + bytes([k]) + i.to_bytes(4, "big") + bytes(10))


def conc_fact(k: int, i: int, version: int = 1) -> Fact:
    """The content of writer ``k``'s memory ``i`` at ``version``."""
    return Fact(
        statement=f"p{k}-{i}-v{version}",
        subject=f"proc{k}",
        predicate="wrote",
        object="x" * (1 + (k * 131 + i * 17) % 600),
    )


def conc_writer(cx: Cortex, k: int, nwriters: int, n: int, seed: int) -> dict[str, Any]:
    """Writer ``k``'s share of a concurrency test, on a store shared with the others.

    Writes memories ``0..n-1`` (singly and in write_many batches, tagged ``proc{k}``), updates
    every 10th, links every 7th to its predecessor and re-tags every 13th; between ops it reads
    other writers' memories and checks their content. Returns the counts the parent checks.
    """
    rng = random.Random(seed * 1000 + k)
    tag = f"proc{k}"
    mutations = cross_reads = misses = 0
    i = 0
    while i < n:
        if rng.random() < 0.4:
            size = min(rng.randint(2, 12), n - i)
            cx.write_many(
                NewMemory(data=conc_fact(k, j), tags=[tag], id=conc_id(k, j))
                for j in range(i, i + size)
            )
        else:
            size = 1
            cx.write(conc_fact(k, i), tags=[tag], id=conc_id(k, i))
        mutations += size
        for j in range(i, i + size):
            if j % 10 == 0:
                cx.update(conc_id(k, j), conc_fact(k, j, 2), expected_version=1)
                mutations += 1
            if j % 7 == 6:
                cx.add_edge(conc_id(k, j), "references", conc_id(k, j - 1))
                mutations += 1
            if j % 13 == 12:
                cx.update_head(conc_id(k, j), tags=[tag, "thirteen"])
                mutations += 1
        i += size
        for _ in range(2):
            other = rng.randrange(nwriters)
            j = rng.randrange(n)
            try:
                m = cx.resolve_latest(conc_id(other, j))
            except NotFoundError:
                misses += 1
                continue
            if m.data not in (conc_fact(other, j, 1), conc_fact(other, j, 2)):
                raise AssertionError(f"writer {k} read wrong content for {other}/{j}: {m.data}")
            cross_reads += 1
    return {"k": k, "mutations": mutations, "cross_reads": cross_reads, "misses": misses}


def conc_process(
    path: str, k: int, *, nwriters: int, n: int, seed: int, start: Any, out: str
) -> None:
    """A spawned process: open the store, wait for the start signal, write, save the outcome."""
    result: dict[str, Any]
    try:
        with Cortex.open(path, actor=f"proc{k}", as_owner=True) as cx:
            if not start.wait(60):
                raise RuntimeError("no start signal")
            result = conc_writer(cx, k, nwriters, n, seed)
    except BaseException:
        result = {"k": k, "error": traceback.format_exc()}
    Path(out).write_text(json.dumps(result))


def big_text(k: int, i: int, field: int) -> str:
    """Text just under the 16 KiB field limit, different for every writer, memory and field."""
    head = f"{k}:{i}:{field}:"
    return head + "abcdefghijklmnop"[(k + i + field) % 16] * (16_380 - len(head))


def big_fact(k: int, i: int) -> Fact:
    """About 64 KiB of data: four text fields near their limit."""
    return Fact(
        statement=big_text(k, i, 0),
        subject=big_text(k, i, 1),
        predicate=big_text(k, i, 2),
        object=big_text(k, i, 3),
    )


def grow_process(path: str, k: int, *, n: int, start: Any, grown: Any, out: str) -> None:
    """A spawned process writing big memories with ids ``conc_id(k, i)``.

    Writer 0 starts at once and writes until it has grown the map and committed past the old
    size, then sets ``grown``; writer 1, which opened the store before that, starts only then,
    so its first write must adopt the bigger map (``MapResizedError``). Then both write ``n``
    more at once, crossing the next size together. Counts grows and adoptions.
    """
    from cortex.storage.kv import LmdbKV, _Gate

    counts = {"grows": 0, "remaps": 0}
    original_grow, original_exclusive = LmdbKV._grow, _Gate.exclusive

    def counting_grow(self: LmdbKV, *args: Any) -> None:
        counts["grows"] += 1
        original_grow(self, *args)

    def counting_exclusive(self: _Gate) -> Any:  # every remap: a grow or an adoption
        counts["remaps"] += 1
        return original_exclusive(self)

    LmdbKV._grow = counting_grow  # type: ignore[method-assign]
    _Gate.exclusive = counting_exclusive  # type: ignore[method-assign]
    result: dict[str, Any]
    i = 0

    def write_next(cx: Cortex) -> None:
        nonlocal i
        cx.write(big_fact(k, i), id=conc_id(k, i))
        if i % 50 == 49:  # read back one of the other's, mid-growth
            try:
                m = cx.resolve_latest(conc_id(1 - k, i))
            except NotFoundError:
                pass
            else:
                assert m.data == big_fact(1 - k, i), "wrong content read"
        i += 1

    try:
        with Cortex.open(path, actor=f"grow{k}", map_size=0, as_owner=True) as cx:
            first = cx.stats()["map_size"]
            if not start.wait(60):
                raise RuntimeError("no start signal")
            if k == 0:
                while not counts["grows"]:
                    write_next(cx)
                grown.set()
            elif not grown.wait(120):
                raise RuntimeError("writer 0 never grew the map")
            for _ in range(n):
                write_next(cx)
            result = {
                "k": k,
                "written": i,
                "grows": counts["grows"],
                "adoptions": counts["remaps"] - counts["grows"],
                "first": first,
                "last": cx.stats()["map_size"],
            }
    except BaseException:
        result = {"k": k, "error": traceback.format_exc()}
    grown.set()  # never leave the other waiting
    Path(out).write_text(json.dumps(result))


def thread_grow(path: str, n: str) -> None:
    """Threads of one process share a store while the map grows under them.

    Two threads write big memories into a store opened at the minimum map size, so the map
    grows several times, while two threads keep reading. Prints one JSON line with the outcome.
    """
    nw = 2
    count = int(n)
    errors: list[str] = []
    done = threading.Event()
    reads = 0
    cx = Cortex.open(path, actor="threads", map_size=0)

    def writer(k: int) -> None:
        try:
            for i in range(count):
                cx.write(big_fact(k, i), id=conc_id(k, i))
        except BaseException:
            errors.append(traceback.format_exc())

    def reader(seed: int) -> None:
        nonlocal reads
        rng = random.Random(seed)
        try:
            while not done.is_set():
                k, i = rng.randrange(nw), rng.randrange(count)
                try:
                    m = cx.resolve_latest(conc_id(k, i))
                except NotFoundError:
                    continue
                if m.data != big_fact(k, i):
                    raise AssertionError(f"wrong content for {k}/{i}")
                reads += 1
                time.sleep(0.0005)  # leave the writers some of the GIL
        except BaseException:
            errors.append(traceback.format_exc())

    writers = [threading.Thread(target=writer, args=(k,)) for k in range(nw)]
    readers = [threading.Thread(target=reader, args=(s,)) for s in range(2)]
    for t in writers + readers:
        t.start()
    for t in writers:
        t.join()
    done.set()
    for t in readers:
        t.join()
    missing = 0
    for k in range(nw):
        for i in range(count):
            try:
                ok = cx.resolve_latest(conc_id(k, i)).data == big_fact(k, i)
            except CortexError:
                ok = False
            missing += not ok
    report = cx.verify()
    emit(
        {
            "errors": errors,
            "reads": reads,
            "missing": missing,
            "problems": [[p.record, p.what] for p in report.problems[:5]],
            "map_size": cx.stats()["map_size"],
        }
    )
    cx.close()


# ---------------------------------------------------------------------------------------------
# Corruption


def probe(path: str, ids_file: str) -> None:
    """Open a possibly damaged store and read everything in it, classifying every outcome.

    ``ids_file`` holds a JSON list of the ids of every memory in the store. Prints one JSON
    line: ``open`` (``ok`` or the CortexError class), the journal (its length or the error
    class), per memory what ``resolve_latest``, ``history`` and ``edges`` gave (content as
    text, or the error class), and verify's problems. Any exception that is not a CortexError
    is listed under ``foreign`` (and fails the test).
    """
    out: dict[str, Any] = {"foreign": []}

    def attempt(what: str, fn: Any) -> Any:
        try:
            return fn()
        except CortexError as exc:
            return {"error": type(exc).__name__}
        except Exception:
            out["foreign"].append(f"{what}: {traceback.format_exc()}")
            return {"error": "foreign"}

    cx = attempt("open", lambda: Cortex.open(path, actor="probe", as_owner=True, create=False))
    if isinstance(cx, dict):
        out["open"] = cx["error"]
        emit(out)
        return
    out["open"] = "ok"
    journal = attempt("journal", lambda: list(cx.journal()))
    out["journal"] = journal if isinstance(journal, dict) else [repr(e) for e in journal]
    memories: dict[str, Any] = {}
    for mid in json.loads(Path(ids_file).read_text()):
        latest = attempt("resolve_latest", lambda mid=mid: cx.resolve_latest(mid))
        hist = attempt("history", lambda mid=mid: cx.history(mid))
        edges = attempt("edges", lambda mid=mid: cx.edges(mid, direction="both"))
        memories[mid] = {
            "latest": latest if isinstance(latest, dict) else repr((latest.head, latest.data)),
            "history": hist if isinstance(hist, dict) else [repr(m.data) for m in hist],
            "edges": edges if isinstance(edges, dict) else [repr(e) for e in edges],
        }
    out["memories"] = memories
    report = attempt("verify", cx.verify)
    out["verify"] = (
        report if isinstance(report, dict) else [[p.record, p.what] for p in report.problems]
    )
    attempt("close", cx.close)
    emit(out)


def edit_value(path: str, key_hex: str, offset: str) -> None:
    """Flip one byte of the value under a key, through the KV layer (in the database its
    keyspace lives in), in a process of its own."""
    from cortex.storage.kv import LmdbKV, WriteTxn

    key = bytes.fromhex(key_hex)
    kv = LmdbKV(path, check_pages=False)

    def flip(txn: WriteTxn) -> None:
        value = bytearray(txn.get(key) or b"")
        value[int(offset)] ^= 0x20
        txn.put(key, bytes(value))

    kv.write(flip)
    kv.close()


# ---------------------------------------------------------------------------------------------
# Full disks and address space (issue 20: a failed write is a StoreFullError, the handle lives)


def fill_until_full(path: str, filler: str, limit: str) -> None:
    """Write until the store cannot grow, free space, then verify and write again.

    ``filler`` is a file taking most of a small file system (deleted to free space), or ``-``;
    ``limit`` is a soft RLIMIT_FSIZE in bytes above the store's size now (``0``: none), lifted
    to free space. Prints what the failed write raised, whether verify passed afterwards and
    whether a write then succeeded.
    """
    import resource

    cx = Cortex.open(path, actor="filler")
    if filler != "-" and not Path(filler).exists():  # leave about 1.5 MiB free
        st = os.statvfs(path)
        Path(filler).write_bytes(b"\0" * max(0, st.f_bavail * st.f_frsize - (3 << 19)))
    if int(limit):
        size = (Path(path) / "data.mdb").stat().st_size
        hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + int(limit), hard))
    before = cx.stats()["memories"]
    failure = None
    written = 0
    for i in range(20000):
        try:
            cx.write(
                Fact(statement=f"fill {i}", subject="disk", predicate="fills", object="f" * 3000)
            )
            written += 1
        except CortexError as exc:
            failure = [type(exc).__name__, str(exc)]
            break
        except Exception as exc:
            failure = ["foreign", f"{type(exc).__name__}: {exc}"]
            break
    after_failure = cx.stats()["memories"]
    if filler != "-":
        Path(filler).unlink()
    if int(limit):
        resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
    report = cx.verify()
    try:
        cx.write(Fact(statement="after", subject="disk", predicate="fills"))
        again = True
    except CortexError:
        again = False
    emit(
        {
            "failure": failure,
            "written": written,
            "counted": after_failure - before,
            "verify_ok": report.ok,
            "problems": [[p.record, p.what] for p in report.problems[:3]],
            "write_again": again,
        }
    )
    cx.close()


def fill_map(path: str) -> None:
    """Fill the map while the address space cannot hold a larger one; the handle must live.

    A second handle of the store shares the process's environment: the failed remap replaces
    the environment for both.
    """
    import resource

    cx = Cortex.open(path, actor="filler")
    other = Cortex.open(path, actor="filler")
    kept = cx.write(Fact(statement="kept", subject="map", predicate="fills"))
    status = Path("/proc/self/status").read_text().splitlines()
    vm = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize"))
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    resource.setrlimit(resource.RLIMIT_AS, (vm + (48 << 20), hard))
    failure = None
    blob = random.Random(1).randbytes(1 << 20)
    for i in range(200):
        try:
            cx._kv.write(lambda txn, i=i: txn.put(f"zz/{i:04}".encode(), blob))
        except CortexError as exc:
            failure = [type(exc).__name__, str(exc)]
            break
    try:
        cx.write(Fact(statement="refused", subject="map", predicate="fills"))
        refused = None
    except CortexError as exc:
        refused = type(exc).__name__
    read_back = cx.resolve(kept).data.statement
    found = len(cx.find(Query(types=["Fact"], limit=10)).hits)
    other_read = other.resolve(kept).data.statement
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    with cx._kv.read() as txn:
        keys = sum(1 for _ in txn.keys(b"zz/"))
    cx._kv.write(lambda txn: [txn.delete(k) for k in [f"zz/{i:04}".encode() for i in range(keys)]])
    again = str(cx.write(Fact(statement="written again", subject="map", predicate="fills")))
    other_again = str(other.write(Fact(statement="other again", subject="map", predicate="fills")))
    emit(
        {
            "failure": failure,
            "refused": refused,
            "read_back": read_back,
            "found": found,
            "again": again,
            "shared": cx._kv._shared is other._kv._shared,
            "other_read": other_read,
            "other_again": other_again,
            "verify_ok": cx.verify().ok,
        }
    )
    other.close()
    cx.close()


# ---------------------------------------------------------------------------------------------
# Many processes, one PostgreSQL store


def shared_writer(path: str, name: str, n: str) -> None:
    """Write ``n`` facts tagged ``name`` (one of several processes on one store), searching
    for the previous process's words between writes; report every write after it returns."""
    from cortex import Query
    from cortex.index.embed import HashingEmbedder

    with Cortex.open(path, actor=name, embedder=HashingEmbedder(64)) as cx:
        emit({"op": "ready"})
        for i in range(int(n)):
            uri = cx.write(
                Fact(
                    statement=f"{name} wrote note {i} about kites", subject=name, predicate="wrote"
                ),
                tags=[name],
            )
            emit({"op": "write", "uri": str(uri)})
            if i % 5 == 0:
                cx.find(Query(near="note about kites", limit=3))
        emit({"op": "done"})


def steady_pg_writer(path: str) -> None:
    """Write one memory at a time until the server goes away; report each acknowledged write,
    then the error that ended the run (a CortexError, never a raw driver exception)."""
    i = 0
    with Cortex.open(path, actor="steady") as cx:
        emit({"op": "ready"})
        while True:
            i += 1
            try:
                uri = cx.write(fact_for(7, i, 0), tags=[f"s{i}"])
            except CortexError as exc:
                emit({"op": "error", "kind": type(exc).__name__, "message": str(exc)})
                return
            emit({"op": "write", "uri": str(uri), "i": i})


# Erasure (tests/test_erasure.py)


def secret_fact(tag: str, i: int) -> Fact:
    """A memory whose statement holds the distinctive term ``zqx{tag}{i:04d}`` twice."""
    word = f"zqx{tag}{i:04d}"
    return Fact(statement=f"{word} is private: {word} must go", subject="user", predicate="secret")


def erasure_writer(path: str, stop_file: str, seed: str, secrets: str) -> None:
    """Write ``secrets`` secret memories first (reported), then filler until ``stop_file``.

    The secrets sit in this process's LMDB page buffers afterwards: once another process
    purges them, this writer's next commit must not carry them back into the file.
    """
    from tests.vsupport import E

    s = int(seed)
    rng = random.Random(s)
    with Cortex.open(path, actor=f"writer{s}", embedder=E, as_owner=True) as cx:
        ids = [
            str(cx.write(secret_fact(f"w{s}x", i), tags=["secret"]).id) for i in range(int(secrets))
        ]
        emit({"op": "secrets", "ids": ids})
        n = 0
        while not Path(stop_file).exists():
            words = " ".join(rng.choice(("tea", "sea", "hill", "bread", "chess")) for _ in range(5))
            cx.write_many(
                Fact(statement=f"filler {s}-{n + j} {words}", subject="f", predicate="p")
                for j in range(5)
            )
            n += 5
            emit({"op": "wrote", "n": n, "at": time.time()})
    emit({"op": "done", "n": n})


def erasure_reader(path: str, stop_file: str, seed: str) -> None:
    """Read (resolve, lexical and vector search) in a loop until ``stop_file`` exists."""
    from cortex import Query
    from tests.vsupport import E

    rng = random.Random(int(seed))
    reads = 0
    with Cortex.open(path, actor="reader", embedder=E, readonly=True, as_owner=True) as cx:
        emit({"op": "started"})
        while not Path(stop_file).exists():
            q = rng.choice(("tea", "private", "filler", "secret", "hill"))
            for hit in cx.find(Query(text=q, limit=5)).hits:
                cx.resolve(hit.uri)
            cx.find(Query(near=q, limit=3))
            reads += 1
    emit({"op": "done", "reads": reads})


def snapshot_holder(path: str) -> None:
    """Open a read snapshot, say so, and keep it open until killed."""
    from cortex.storage.kv import LmdbKV

    kv = LmdbKV(path, readonly=True, create=False)
    with kv.read() as txn:
        txn.get(b"meta/format")
        emit({"op": "holding"})
        time.sleep(300)


def erasure_crasher(path: str, seed: str) -> None:
    """Write secret memories and purge them (with the erasure step) in a loop until killed.

    Reports each purge after it returned (the bytes are then gone from every file), and
    each write, so the parent can check that nothing acknowledged is lost.
    """
    s = int(seed)
    with Cortex.open(path, actor="crasher", as_owner=True) as cx:
        emit({"op": "ready"})
        i = 0
        while True:
            uris = cx.write_many(
                NewMemory(data=secret_fact(f"c{s}x", i + j), tags=[f"c{s}-{i + j}"])
                for j in range(3)
            )
            emit({"op": "write", "uris": [str(u) for u in uris], "i": i})
            for u in uris[:2]:
                cx.purge(u.id, "crash test")
                emit({"op": "purge", "id": str(u.id), "i": i})
            i += 3


def purge_these(path: str, ids: str) -> None:
    """Purge the memories with the given comma-separated ids, then run one erasure step."""
    with Cortex.open(path, actor="purger", as_owner=True) as cx:
        for mid in ids.split(","):
            cx.purge(mid, "erasure request", scrub=False)
        report = cx.scrub()
    emit({"op": "scrubbed", "complete": report.complete})


def kv_erase(path: str) -> None:
    """At the key-value level: delete every ``s`` key, record an erasure (``er/``), make the
    freed pages reusable and zero what no reader can read (as the erasure step does)."""
    from cortex.storage.kv import LmdbKV

    kv = LmdbKV(path, create=False, epoch_prefix=b"er/")
    try:
        kv.write(lambda txn: [txn.delete(k) for k in list(txn.keys(b"s"))])
        kv.write(lambda txn: txn.put(b"er/" + bytes(8), b"x"))
        kv.write(lambda txn: txn.put(b"mark", b"1"))
        counts, _ = kv.zero_unused()
    finally:
        kv.close()
    emit({"op": "zeroed", "bytes": counts.bytes_zeroed})


def stalled_scrub(path: str) -> None:
    """Purge one memory, then stop inside the zeroing of the erasure step and wait."""
    from cortex.storage import scrub as scrub_module

    original = scrub_module.zero

    def zero(fd: int, buf: Any, layout: Any) -> Any:
        ranges = scrub_module.unused_ranges(buf, layout)
        for offset, length, _ in ranges[: len(ranges) // 2]:  # half of it, then stop
            os.pwrite(fd, bytes(length), offset)
        emit({"op": "mid", "ranges": len(ranges)})
        time.sleep(300)
        return original(fd, buf, layout)

    scrub_module.zero = zero  # type: ignore[assignment]
    with Cortex.open(path, actor="stalled", as_owner=True) as cx:
        uri = cx.write(secret_fact("stall", 0))
        emit({"op": "write", "uri": str(uri)})
        cx.purge(uri.id, "stalled")


def merge_crasher(path: str, n: str) -> None:
    """Write ``n`` memories one commit each, then one more whose commit folds the posting
    segments (``lexical.md`` §4b): it stops inside that transaction, after the blocks are
    changed, says ``merging`` and sleeps for the parent's SIGKILL."""
    from cortex import Belief, Stance
    from cortex.index import lexical

    def belief(i: int) -> Belief:
        return Belief(statement=f"merge word{i} tea garden {i % 5}", stance=Stance.SUSPECT)

    original = lexical.apply_many

    def stalled(txn: Any, changes: Any, puts: Any) -> None:
        original(txn, changes, puts)
        txn.put_many(puts)
        emit({"op": "merging", "terms": len(changes)})
        time.sleep(120)

    with Cortex.open(path, actor="merge", as_owner=True) as cx:
        for i in range(int(n)):
            uri = cx.write(belief(i))
            emit({"op": "wrote", "uri": str(uri), "i": i})
        lexical.apply_many = stalled  # type: ignore[assignment]
        cx.write(belief(int(n)))
        emit({"op": "unexpected"})


def main() -> None:
    """Run ``workers.NAME(*ARGS)`` from the command line."""
    name, *args = sys.argv[1:]
    globals()[name](*args)


if __name__ == "__main__":
    main()
