"""cortex on LMDB and on PostgreSQL, beside plain psycopg doing the same statements (the floor).

Starts a private PostgreSQL cluster (tests/pgserver.py: Debian's binaries, a unix socket,
fsync on), fills a store of N memories on each engine, then measures (medians of repeats):

- a durable single write (``Cortex.write`` of one Fact) against a plain ``INSERT`` + ``COMMIT``
  of one row holding as many bytes as cortex's commit sends;
- get by id (``Cortex.resolve``) against a plain primary-key ``SELECT`` of the same head's key;
- each of those two ways: unpaired (``blocks``: each in loops of its own, the loops
  alternating, ratio of the medians) and paired (``paired``: one of each alternately, which
  goes first alternating too, median of the pairs' ratios); wall time and the client's CPU
  time (``time.process_time``) apart, and for the unpaired writes the server's CPU time per
  write (``server_cpu``: steadier than wall time when the disk or the CPUs are shared);
- find: type + tag (limit 10) and text (BM25, limit 10), each engine beside the other;
- the same writes beside plain libpq sending exactly the statements cortex sent (replayed on a
  copy of the table: the server's share of a write without cortex's client work), each paired
  with the plain INSERT + COMMIT;
- 1, 4 and 8 writer processes on one store: writes per second in all, client CPU per write,
  and the serialization failures the engine retried (``PgKV.conflicts``);
- get by id beside the SELECT again with the client and both server backends pinned to one CPU,
  then the client on one and the backends on another (``placed``: the wake-up of another vCPU,
  not the statement, is most of a round trip's wall time on this VM);
- round trips per operation on PostgreSQL (``PgKV.round_trips``: statements, or pipelines of
  them, sent and answered), beside the floor's (BEGIN, INSERT, COMMIT: 3; a SELECT: 1).

    python tools/bench_pg.py [--sizes 10000,100000] [--writers 1,4,8] [--out bench-results/pg]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cortex import Cortex, Fact, NewMemory, Query  # noqa: E402
from tests import pgserver  # noqa: E402

REPEATS = 300


def fact(i: int) -> Fact:
    return Fact(
        statement=f"the user {i} likes green tea in the morning", subject="user", predicate="likes"
    )


def fill(where: Any, n: int) -> list[Any]:
    uris: list[Any] = []
    with Cortex.open(where, actor="bench") as cx:
        for lo in range(0, n, 2000):
            uris += cx.write_many(
                NewMemory(data=fact(i), tags=(f"t{i % 50}",)) for i in range(lo, min(n, lo + 2000))
            )
    return uris


class Trips:
    """Round trips per operation of a PostgreSQL store (``PgKV.round_trips``); none on LMDB."""

    def __init__(self, cx: Any) -> None:
        self.kv = getattr(cx, "_kv", None)
        self.last = self.count()
        self.last_ahead = getattr(self.kv, "overlapped", None)

    def count(self) -> int | None:
        """The store's round trips so far (None: not PostgreSQL)."""
        return getattr(self.kv, "round_trips", None)

    def note(self, row: dict[str, Any], engine: str, op: str, ops: int) -> None:
        """Put the round trips per operation since the last note in ``row``."""
        now = self.count()
        if now is not None and self.last is not None:
            row[f"{engine}_{op}_trips"] = round((now - self.last) / ops, 2)
        self.last = now
        # and those sent ahead of the work that needs them (a write's lock, BEGIN and version
        # read: ``PgKV.overlapped``), answered while the client works: not waited for
        ahead = getattr(self.kv, "overlapped", None)
        if ahead is not None and self.last_ahead is not None:
            row[f"{engine}_{op}_ahead"] = round((ahead - self.last_ahead) / ops, 2)
        self.last_ahead = ahead


def median_us(fn: Any, repeats: int = REPEATS) -> float:
    """The median wall time of ``fn(i)`` for ``i`` in ``range(repeats)``, in µs."""
    return timed(fn, repeats)[0]


def timed(fn: Any, repeats: int = REPEATS) -> tuple[float, float]:
    """Medians of the wall time and of this process's CPU time of ``fn(i)``, in µs.

    The CPU time (``time.process_time``) is the client's own work: it leaves out the wait for
    the server and the kernel's wake-up of this process, which on a shared 2-core VM vary more
    than the work does.
    """
    wall: list[float] = []
    cpu: list[float] = []
    for i in range(repeats):
        c = time.process_time()
        t = time.perf_counter()
        fn(i)
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return statistics.median(wall) * 1e6, statistics.median(cpu) * 1e6


def commit_bytes(url: str) -> int:
    """Bytes of keys and values one cortex write sends at commit (measured on the engine)."""
    import cortex.storage.pgkv as P

    seen: list[int] = []
    real = P._PgWrite.commit

    def spy(self: Any) -> None:
        seen.append(sum(len(k) + len(v or b"") for k, v in self._buf.items()))
        real(self)

    P._PgWrite.commit = spy  # type: ignore[method-assign]
    try:
        with Cortex.open(url, actor="bench") as cx:
            for i in range(20):
                cx.write(fact(10**9 + i))
    finally:
        P._PgWrite.commit = real  # type: ignore[method-assign]
    return int(statistics.median(seen))


class Floor:
    """Plain psycopg on its own connection: the same bytes, the fewest round trips."""

    def __init__(self, conninfo: str, size: int, keys: list[bytes], table: str) -> None:
        import psycopg

        self.conn = psycopg.connect(conninfo, autocommit=True, prepare_threshold=0)
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS floor (k bytea PRIMARY KEY, v bytea NOT NULL)"
        )
        self.payload = os.urandom(size)
        self.keys = keys
        self.table = table

    def insert(self, i: int) -> None:
        """BEGIN, INSERT of one row of the commit's size, COMMIT: 3 round trips."""
        self.conn.execute("BEGIN")
        self.conn.execute(
            "INSERT INTO floor (k, v) VALUES (%s, %s)", (os.urandom(16), self.payload)
        )
        self.conn.execute("COMMIT")

    def select(self, i: int) -> None:
        """A primary-key SELECT of a head (the one cortex's ``i``-th get reads): 1 round trip."""
        self.conn.execute(
            f'SELECT v FROM "{self.table}" WHERE k = %s',
            (self.keys[(i * 7919) % len(self.keys)],),
            binary=True,
        ).fetchone()


class Pair:
    """Medians of ``a`` beside ``b`` run alternately (``paired``), wall and client CPU, µs."""

    def __init__(self, ta: list[float], tb: list[float], ca: list[float], cb: list[float]):
        self.a_us = statistics.median(ta) * 1e6
        self.b_us = statistics.median(tb) * 1e6
        self.ratio = statistics.median(x / y for x, y in zip(ta, tb, strict=True))
        self.a_cpu_us = statistics.median(ca) * 1e6
        self.b_cpu_us = statistics.median(cb) * 1e6
        self.cpu_ratio = self.a_cpu_us / self.b_cpu_us if self.b_cpu_us else float("nan")

    def row(self, a: str, b: str, ratio: str) -> dict[str, float]:
        """The figures as a result row's fields (``a`` and ``b`` name the two operations)."""
        return {
            f"{a}_us": self.a_us,
            f"{b}_us": self.b_us,
            f"{ratio}_ratio": self.ratio,
            f"{a}_cpu_us": self.a_cpu_us,
            f"{b}_cpu_us": self.b_cpu_us,
            f"{ratio}_cpu_ratio": self.cpu_ratio,
        }


def paired(a: Any, b: Any, repeats: int) -> Pair:
    """``a(i)`` and ``b(i)`` alternately, which goes first alternating too.

    On a loaded machine both of a pair meet the same load, so the median of the pairs' ratios
    is steadier than the ratio of medians taken at different moments. The order alternates
    because the first of a pair pays for what ran before it: measured here, a primary-key
    SELECT right after a 1 ms sleep takes 164 µs of wall time and 104 µs of client CPU, against
    23 and 15 µs in a loop of them (cold caches and a woken vCPU), and two different code paths
    interleaved (cortex's get, psycopg's cursor) each run slower than in a loop of its own (the
    caches hold one of them, not both: +40% CPU each). Always running the same one first
    charged it that penalty: the 2.23x "paired" get ratio beside a 1.00x unpaired one. Each
    side's wall time and client CPU (``time.process_time``) are kept apart.
    """
    ta: list[float] = []
    tb: list[float] = []
    ca: list[float] = []
    cb: list[float] = []

    def one(fn: Any, i: int, t_out: list[float], c_out: list[float]) -> None:
        c = time.process_time()
        t = time.perf_counter()
        fn(i)
        t_out.append(time.perf_counter() - t)
        c_out.append(time.process_time() - c)

    for i in range(repeats):
        if i % 2:
            one(b, i, tb, cb)
            one(a, i, ta, ca)
        else:
            one(a, i, ta, ca)
            one(b, i, tb, cb)
    return Pair(ta, tb, ca, cb)


def _wall(fn: Any, i: int) -> float:
    t = time.perf_counter()
    fn(i)
    return time.perf_counter() - t


def same_statements(cluster: Any, n: int, floor: Floor, repeats: int = REPEATS) -> dict[str, float]:
    """Writes beside plain libpq sending the very statements they sent, each paired.

    This is the issue's floor ("plain psycopg doing the same statements cortex issues"); each
    write and each replay is paired with the plain INSERT + COMMIT. A copy of the store's table
    (``cortex_bNr``, same rows and key) is made first; ``repeats`` writes then run on the store,
    their query strings and pipelines recorded (``pgkv._send_all``, ``pgkv._pipeline``), and
    they are replayed in order on the copy over one connection with the engine's statements
    prepared: the same server work, none of cortex's client work.
    """
    import psycopg

    from cortex.storage import pgkv

    table, copy = f"cortex_b{n}", f"cortex_b{n}r"
    with psycopg.connect(cluster.conninfo(), autocommit=True) as conn:
        conn.execute(f'DROP TABLE IF EXISTS "{copy}"')
        conn.execute(f'CREATE TABLE "{copy}" (k bytea PRIMARY KEY, v bytea NOT NULL)')
        conn.execute(f'INSERT INTO "{copy}" SELECT k, v FROM "{table}" ORDER BY k')
        conn.execute(f'VACUUM ANALYZE "{copy}"')
        # the store's version sequence and trigger (``specs/postgres.md`` §2), as the engine's
        setup = getattr(pgkv._Scan(copy), "version_setup", None)
        if setup is not None:
            conn.execute(setup.replace("%s", "1"))
    sent: list[list[tuple[Any, int | None]]] = []
    real = pgkv._send_all
    real_pipeline = pgkv._pipeline

    def spy(c: Any, query: str, keep: int | None = None) -> list[list[Any]]:
        sent[-1].append((query.replace(f'"{table}"', f'"{copy}"'), keep))
        return real(c, query, keep)

    def spy_pipeline(c: Any, steps: list[Any], *rest: Any) -> list[list[Any]]:
        sent[-1].append((list(steps), None))  # prepared statements by name: no table named
        return real_pipeline(c, steps, *rest)

    cortex_t: list[float] = []
    cortex_r: list[float] = []
    with Cortex.open(cluster.url(f"b{n}"), actor="bench") as cx:
        if setup is not None:  # the copy's version where the store's is: the checks pass alike
            with psycopg.connect(cluster.conninfo(), autocommit=True) as conn:
                (v0,) = conn.execute(f'SELECT last_value FROM "{table}_v"').fetchone()
                conn.execute(f"SELECT setval('\"{copy}_v\"', %s)", (v0,))
        pgkv._send_all = spy  # type: ignore[assignment]
        pgkv._pipeline = spy_pipeline  # type: ignore[assignment]
        try:
            for i in range(repeats):
                sent.append([])
                if i % 2:  # which goes first alternates (``paired``)
                    y = _wall(floor.insert, i)
                x = _wall(lambda i, n=n: cx.write(fact(3 * n + i)), i)
                if not i % 2:
                    y = _wall(floor.insert, i)
                cortex_t.append(x)
                cortex_r.append(x / y)
        finally:
            pgkv._send_all = real  # type: ignore[assignment]
            pgkv._pipeline = real_pipeline  # type: ignore[assignment]
    replay_t: list[float] = []
    replay_r: list[float] = []
    with psycopg.connect(cluster.conninfo(), autocommit=True) as conn:
        scan = pgkv._Scan(copy)
        # the engine's session settings too (generic plans, where the engine sets them)
        generic = getattr(scan, "generic", None)
        prepare = getattr(scan, "prepare_typed_v", scan.prepare)
        real(conn, f"{generic}; {prepare}" if generic else prepare, keep=0)

        def replay(i: int) -> None:
            for query, keep in sent[i]:
                if isinstance(query, str):
                    real(conn, query, keep)
                else:
                    real_pipeline(conn, query)

        for i in range(len(sent)):
            if i % 2:
                y = _wall(floor.insert, repeats + i)
            x = _wall(replay, i)
            if not i % 2:
                y = _wall(floor.insert, repeats + i)
            replay_t.append(x)
            replay_r.append(x / y)
    return {
        "cortex_us": statistics.median(cortex_t) * 1e6,
        "cortex_ratio": statistics.median(cortex_r),
        "replay_us": statistics.median(replay_t) * 1e6,
        "replay_ratio": statistics.median(replay_r),
        "strings_per_write": statistics.mean(len(s) for s in sent),
    }


def server_cpu(cluster: Any) -> float:
    """CPU time so far of the cluster's server processes (the postmaster and its children), µs.

    From ``/proc/PID/schedstat`` (nanoseconds on CPU): the server's share of an operation,
    which its wall time mixes with waits for the disk and for a CPU on a shared machine.
    Processes that have exited are not counted (a write's backend lives as long as its pool).
    """
    pm = int((cluster.data / "postmaster.pid").read_text().split()[0])
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path("/proc", pid, "stat").read_text()
            if int(pid) == pm or int(stat.rsplit(")", 1)[1].split()[1]) == pm:
                total += int(Path("/proc", pid, "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e3


def blocks(
    a: Any, b: Any, repeats: int, rounds: int = 10, server: Any = None
) -> tuple[Pair, float, float]:
    """``a`` and ``b`` each in loops of their own (``repeats // rounds`` calls), alternating.

    The unpaired measure: each side runs with its own code hot in the caches, as a loop of one
    operation does; the loops alternate (and which goes first too) so both meet the same
    stretches of load (with 4 loops a side, a burst of load on this shared machine still fell on
    one side's loop: a SELECT at 100 µs beside a get at 33). ``Pair.ratio`` here is the ratio
    of the medians. Also returns each side's server CPU per call (µs, the mean: ``server()``
    before and after each loop; 0 without ``server``).
    """
    ta: list[float] = []
    tb: list[float] = []
    ca: list[float] = []
    cb: list[float] = []
    srv = [0.0, 0.0]
    per = max(1, repeats // rounds)
    for r in range(rounds):
        for side, fn, t_out, c_out in [(0, a, ta, ca), (1, b, tb, cb)][:: -1 if r % 2 else 1]:
            s0 = server() if server is not None else 0.0
            for i in range(r * per, (r + 1) * per):
                c = time.process_time()
                t = time.perf_counter()
                fn(i)
                t_out.append(time.perf_counter() - t)
                c_out.append(time.process_time() - c)
            srv[side] += (server() if server is not None else 0.0) - s0
    pair = Pair(ta, tb, ca, cb)
    pair.ratio = pair.a_us / pair.b_us
    return pair, srv[0] / len(ta), srv[1] / len(tb)


def placed(a: Any, b: Any, pids: tuple[int, int], repeats: int) -> dict[str, float] | None:
    """``blocks(a, b)`` with this process and the two server backends pinned: one CPU, two CPUs.

    On this VM a round trip costs ~20-25 µs when the client and its backend share a vCPU and
    ~80-100 µs when they do not (the wake-up of a halted vCPU), whatever the statement; the
    scheduler picks one of the two for a connection and it tends to stay (measured: a get at 103
    µs beside a SELECT at 26 in one idle run, both near 80 or both near 22 in others). Pinned,
    both sides meet the same placement: ``same_cpu_*`` all on the first CPU, ``split_cpu_*``
    the client on the first and the backends (``pids``) on the second. None where the process
    may not pin the server's processes (not root, nor their owner) or has one CPU.
    """
    mine = os.sched_getaffinity(0)
    if len(mine) < 2:
        return None
    first, second = sorted(mine)[:2]
    try:
        before = [os.sched_getaffinity(p) for p in pids]
        os.sched_setaffinity(pids[0], {first})
    except OSError:
        return None
    row: dict[str, float] = {}
    try:
        for name, client, server in (("same_cpu", first, first), ("split_cpu", first, second)):
            os.sched_setaffinity(0, {client})
            for p in pids:
                os.sched_setaffinity(p, {server})
            row |= blocks(a, b, repeats)[0].row(f"{name}_get", f"{name}_select", f"{name}_get")
    finally:
        os.sched_setaffinity(0, mine)
        for p, cpus in zip(pids, before, strict=True):
            os.sched_setaffinity(p, cpus)
    return row


WRITER = """
import json, sys, time
from cortex import Cortex, Fact
w, n, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
cx = Cortex.open(w, actor=name)
kv = getattr(cx, "_kv", None)
print("ready", flush=True)
sys.stdin.readline()
c = time.process_time()
for i in range(n):
    cx.write(Fact(statement=f"{name} {i} kites", subject=name, predicate="wrote"))
cpu = time.process_time() - c
print(json.dumps({"cpu_s": cpu, "conflicts": getattr(kv, "conflicts", None)}), flush=True)
cx.close()
"""


def writers(where: str, procs: int, each: int) -> dict[str, float | None]:
    """``procs`` processes writing ``each`` Facts to one store at once.

    Returns writes per second in all, the client CPU per write (µs, the mean over processes)
    and the serialization failures and deadlocks the engine retried (``PgKV.conflicts``; None
    on LMDB).
    """
    ps = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, where, str(each), f"w{p}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for p in range(procs)
    ]
    for p in ps:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    t = time.perf_counter()
    for p in ps:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    done = []
    for p in ps:
        assert p.stdout is not None
        done.append(json.loads(p.stdout.readline()))
        assert p.wait(timeout=600) == 0
    rate = procs * each / (time.perf_counter() - t)
    conflicts = [d["conflicts"] for d in done]
    return {
        "writes_per_s": rate,
        "cpu_us_per_write": statistics.mean(d["cpu_s"] for d in done) / each * 1e6,
        "conflicts": None if None in conflicts else sum(conflicts),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000")
    ap.add_argument("--out", default="bench-results/pg")
    ap.add_argument("--writers", default="1,4,8", help="writer processes to run ('' for none)")
    ap.add_argument(
        "--shared-buffers",
        default="1GB",
        help="the server's shared_buffers: as an operator sizes it (~25%% of the memory), large "
        "enough to hold the stores; the tests' 64MB makes a 100k store's get a read of the OS's "
        "page cache per key",
    )
    args = ap.parse_args()
    bindir = pgserver.find_bin()
    if bindir is None:
        raise SystemExit("no PostgreSQL server binaries: apt-get install -y postgresql")
    # a TERM (timeout, kill) unwinds through the finally below, which stops the cluster
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cluster = pgserver.PgCluster(bindir, shared_buffers=args.shared_buffers).start()
    results: dict[str, Any] = {"sizes": {}, "writers": {}, "shared_buffers": args.shared_buffers}
    try:
        with tempfile.TemporaryDirectory(prefix="cortex-bench-pg-") as tmp:
            for n in [int(x) for x in args.sizes.split(",")]:
                row: dict[str, Any] = {}
                for engine in ("lmdb", "postgres"):
                    where: Any = Path(tmp, f"s{n}") if engine == "lmdb" else cluster.url(f"b{n}")
                    uris = fill(where, n)
                    with Cortex.open(where, actor="bench") as cx:
                        trips = Trips(cx)
                        row[f"{engine}_write_us"], row[f"{engine}_write_cpu_us"] = timed(
                            lambda i, cx=cx, n=n: cx.write(fact(n + i))
                        )
                        trips.note(row, engine, "write", REPEATS)
                        row[f"{engine}_get_us"], row[f"{engine}_get_cpu_us"] = timed(
                            lambda i, cx=cx, u=uris: cx.resolve(u[(i * 7919) % len(u)]), 2000
                        )
                        trips.note(row, engine, "get", 2000)
                        row[f"{engine}_find_tag_us"] = median_us(
                            lambda i, cx=cx: cx.find(
                                Query(types=["Fact"], tags=[f"t{i % 50}"], limit=10)
                            ),
                            500,
                        )
                        trips.note(row, engine, "find_tag", 500)
                        row[f"{engine}_find_text_us"] = median_us(
                            lambda i, cx=cx: cx.find(
                                Query(text=f"user {i % 997} green tea", limit=10)
                            ),
                            200,
                        )
                        trips.note(row, engine, "find_text", 200)
                from cortex.engine.heads import row_of
                from cortex.storage.keys import head_key

                size = commit_bytes(cluster.url(f"b{n}"))
                # the floor reads the very heads cortex's gets resolve, in the same order (by
                # their rows: format 21's ``m/`` keys)
                with Cortex.open(cluster.url(f"b{n}"), actor="bench") as cx, cx._kv.read() as t:
                    keys = [head_key(row_of(t, u.id)) for u in uris]
                floor = Floor(cluster.conninfo(), size, keys, f"cortex_b{n}")
                row["commit_bytes"] = size
                with Cortex.open(cluster.url(f"b{n}"), actor="bench") as cx:

                    def write(i: int, cx: Any = cx, n: int = n) -> None:
                        cx.write(fact(2 * n + i))

                    def get(i: int, cx: Any = cx, u: list[Any] = uris) -> None:
                        cx.resolve(u[(i * 7919) % len(u)])

                    # unpaired: each in loops of its own, the loops alternating
                    pair, w_srv, i_srv = blocks(
                        write, floor.insert, REPEATS, server=lambda: server_cpu(cluster)
                    )
                    row |= pair.row("loop_write", "insert_commit", "write")
                    row |= {"loop_write_server_us": w_srv, "insert_commit_server_us": i_srv}
                    row |= blocks(get, floor.select, 2000)[0].row("loop_get", "pk_select", "get")
                    # paired: one of each, alternately, which goes first alternating too
                    row |= paired(write, floor.insert, REPEATS).row(
                        "paired_write", "paired_insert", "paired_write"
                    )
                    row |= paired(get, floor.select, 2000).row(
                        "paired_get", "paired_select", "paired_get"
                    )
                    # the same two with the client and both backends placed alike (``placed``)
                    backends = (cx._kv._hot[0].info.backend_pid, floor.conn.info.backend_pid)
                    row |= placed(get, floor.select, backends, 2000) or {}
                row |= {f"same_{k}": v for k, v in same_statements(cluster, n, floor).items()}
                floor.conn.close()
                results["sizes"][n] = row
                print(n, json.dumps(row), flush=True)
            for procs in [int(x) for x in args.writers.split(",") if x]:
                each = 100
                lm = writers(str(Path(tmp, f"w{procs}")), procs, each)
                pg = writers(cluster.url(f"w{procs}"), procs, each)
                results["writers"][procs] = {f"lmdb_{k}": v for k, v in lm.items()} | {
                    f"postgres_{k}": v for k, v in pg.items()
                }
                print(procs, "writers", results["writers"][procs], flush=True)
    finally:
        cluster.stop()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=2))
    lines = [
        "| memories | LMDB write µs | PG write µs | floor INSERT+COMMIT µs | ratio | "
        "LMDB get µs | PG get µs | floor PK SELECT µs | ratio |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n, r in results["sizes"].items():
        lines.append(
            f"| {n} | {r['lmdb_write_us']:.0f} | {r['loop_write_us']:.0f} | "
            f"{r['insert_commit_us']:.0f} ({r['commit_bytes']} B) | {r['write_ratio']:.2f} | "
            f"{r['lmdb_get_us']:.0f} | {r['loop_get_us']:.0f} | {r['pk_select_us']:.0f} | "
            f"{r['get_ratio']:.2f} |"
        )
    lines += [
        "",
        "| memories | LMDB find type+tag µs | PG find type+tag µs | LMDB find text µs | "
        "PG find text µs |",
        "|---|---|---|---|---|",
    ]
    for n, r in results["sizes"].items():
        lines.append(
            f"| {n} | {r['lmdb_find_tag_us']:.0f} | {r['postgres_find_tag_us']:.0f} | "
            f"{r['lmdb_find_text_us']:.0f} | {r['postgres_find_text_us']:.0f} |"
        )
    lines += [
        "",
        "| memories | PG round trips: write (and sent ahead) | get | find type+tag | find text | "
        "floor: INSERT+COMMIT | PK SELECT |",
        "|---|---|---|---|---|---|---|",
    ]
    for n, r in results["sizes"].items():
        trips = [r.get(f"postgres_{op}_trips", "-") for op in ("write", "get", "find_tag")]
        trips[0] = f"{trips[0]} (+{r.get('postgres_write_ahead', 0)})"
        trips.append(r.get("postgres_find_text_trips", "-"))
        lines.append(f"| {n} | {' | '.join(map(str, trips))} | 3 | 1 |")
    lines += [
        "",
        "| memories | paired: PG write µs | INSERT+COMMIT µs | median ratio | "
        "PG get µs | PK SELECT µs | median ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for n, r in results["sizes"].items():
        lines.append(
            f"| {n} | {r['paired_write_us']:.0f} | {r['paired_insert_us']:.0f} | "
            f"{r['paired_write_ratio']:.2f} | {r['paired_get_us']:.0f} | "
            f"{r['paired_select_us']:.0f} | {r['paired_get_ratio']:.2f} |"
        )
    lines += [
        "",
        "| memories | placed alike: one CPU: PG get µs | PK SELECT µs | ratio | "
        "two CPUs (client, server): PG get µs | PK SELECT µs | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for n, r in results["sizes"].items():
        if "same_cpu_get_us" in r:
            lines.append(
                f"| {n} | {r['same_cpu_get_us']:.0f} | {r['same_cpu_select_us']:.0f} | "
                f"{r['same_cpu_get_ratio']:.2f} | {r['split_cpu_get_us']:.0f} | "
                f"{r['split_cpu_select_us']:.0f} | {r['split_cpu_get_ratio']:.2f} |"
            )
    lines += [
        "",
        "| memories | client CPU µs: PG write | INSERT+COMMIT | ratio | PG get | PK SELECT | "
        "ratio | the same, paired: write | INSERT+COMMIT | get | PK SELECT | "
        "server CPU µs: PG write | INSERT+COMMIT |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, r in results["sizes"].items():
        lines.append(
            f"| {n} | {r['loop_write_cpu_us']:.0f} | {r['insert_commit_cpu_us']:.0f} | "
            f"{r['write_cpu_ratio']:.2f} | {r['loop_get_cpu_us']:.0f} | "
            f"{r['pk_select_cpu_us']:.0f} | {r['get_cpu_ratio']:.2f} | "
            f"{r['paired_write_cpu_us']:.0f} | {r['paired_insert_cpu_us']:.0f} | "
            f"{r['paired_get_cpu_us']:.0f} | {r['paired_select_cpu_us']:.0f} | "
            f"{r['loop_write_server_us']:.0f} | {r['insert_commit_server_us']:.0f} |"
        )
    lines += [
        "",
        "| memories | cortex write µs | ÷ INSERT+COMMIT (paired) | the same statements by plain "
        "libpq µs | ÷ INSERT+COMMIT (paired) | query strings per write |",
        "|---|---|---|---|---|---|",
    ]
    for n, r in results["sizes"].items():
        lines.append(
            f"| {n} | {r['same_cortex_us']:.0f} | {r['same_cortex_ratio']:.2f} | "
            f"{r['same_replay_us']:.0f} | {r['same_replay_ratio']:.2f} | "
            f"{r['same_strings_per_write']:.2f} |"
        )
    lines += [
        "",
        "| writer processes | LMDB writes/s | PG writes/s | PG client CPU µs per write | "
        "PG serialization failures retried |",
        "|---|---|---|---|---|",
    ]
    for p, r in results["writers"].items():
        conflicts = r["postgres_conflicts"]
        lines.append(
            f"| {p} | {r['lmdb_writes_per_s']:.0f} | {r['postgres_writes_per_s']:.0f} | "
            f"{r['postgres_cpu_us_per_write']:.0f} | {'-' if conflicts is None else conflicts} |"
        )
    buffers = results["shared_buffers"]
    lines += ["", f"Server: shared_buffers = {buffers} (a private cluster, fsync on)."]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
