"""Concurrency: several processes and threads write and read one store at once."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import threading
import traceback
from pathlib import Path
from typing import Any

from cortex import Cortex, EdgeType, JournalKind, Uri
from tests import workers

N = 200
SEED = 7


def _check_store(cx: Cortex, writers: int, n: int, mutations: int) -> None:
    """No write is lost, every memory holds the right content, the journal counts every op."""
    report = cx.verify()
    assert report.ok, report.problems[:10]
    for k in range(writers):
        for i in range(n):
            m = cx.resolve_latest(workers.conc_id(k, i))
            version = 2 if i % 10 == 0 else 1
            assert m.version.version == version, (k, i)
            assert m.data == workers.conc_fact(k, i, version), (k, i)
            assert m.head.tags == ((f"proc{k}", "thirteen") if i % 13 == 12 else (f"proc{k}",))
            if i % 10 == 0:
                v1 = Uri(m.uri.type, m.id, 1)
                assert cx.resolve(v1).data == workers.conc_fact(k, i, 1), (k, i)
            out = cx.edges(m.id)
            if i % 7 == 6:
                assert [(e.type, e.dst) for e in out] == [
                    (EdgeType.REFERENCES, workers.conc_id(k, i - 1))
                ]
            else:
                assert out == []
    stats = cx.stats()
    assert stats["memories"] == writers * n
    entries = list(cx.journal())
    assert len(entries) == mutations + 1  # and the init entry
    assert [e.seq for e in entries] == list(range(1, mutations + 2))
    assert sum(e.kind is JournalKind.WRITE for e in entries) == writers * n


def _expected_mutations(n: int) -> int:
    """Writes, updates, edges and head updates one writer makes for ``n`` memories."""
    return sum(1 + (i % 10 == 0) + (i % 7 == 6) + (i % 13 == 12) for i in range(n))


def _run_spawned(
    target: Any, path: str, count: int, tmp: Path, events: tuple[str, ...] = (), **kw: Any
) -> list[dict[str, Any]]:
    """Start ``count`` spawned ``target(path, k, ...)``, release them together, collect results.

    Each gets ``start`` (set once all are started), ``out`` (its result file), one shared
    event per name in ``events``, and the keyword arguments ``kw``.
    """
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    shared = {name: ctx.Event() for name in events}
    outs = [tmp / f"result-{k}.json" for k in range(count)]
    procs = [
        ctx.Process(
            target=target,
            args=(path, k),
            kwargs={**kw, **shared, "start": start, "out": str(out)},
        )
        for k, out in enumerate(outs)
    ]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
    assert [p.exitcode for p in procs] == [0] * len(procs)
    return [json.loads(out.read_text()) for out in outs]


def test_processes_write_and_read_one_store(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    Cortex.open(path, actor="owner").close()
    writers = 4
    results = _run_spawned(
        workers.conc_process, path, writers, tmp_path, nwriters=writers, n=N, seed=SEED
    )
    errors = [r["error"] for r in results if "error" in r]
    assert not errors, errors[0]
    assert all(r["mutations"] == _expected_mutations(N) for r in results)
    assert sum(r["cross_reads"] for r in results) > 0  # they did read each other's writes
    with Cortex.open(path, actor="checker", as_owner=True) as cx:
        _check_store(cx, writers, N, sum(r["mutations"] for r in results))


def test_threads_share_one_cortex(tmp_path: Path) -> None:
    writers = 4
    errors: list[str] = []
    results: list[dict[str, Any]] = []
    barrier = threading.Barrier(writers)
    with Cortex.open(tmp_path / "store", actor="threads") as cx:

        def run(k: int) -> None:
            try:
                barrier.wait(30)
                results.append(workers.conc_writer(cx, k, writers, N, SEED))
            except BaseException:
                errors.append(traceback.format_exc())

        threads = [threading.Thread(target=run, args=(k,)) for k in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads)
        assert not errors, errors[0]
        assert sum(r["cross_reads"] for r in results) > 0
        _check_store(cx, writers, N, sum(r["mutations"] for r in results))


def test_two_processes_grow_the_map_at_once(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    Cortex.open(path, actor="owner", map_size=0).close()  # the minimum map: 64 MiB
    # writer 0 alone fills the first 64 MiB (about 1,000 memories of ~66 KiB), then both
    # write 650 more at once: about 150 MiB in all, so the map doubles twice
    results = _run_spawned(workers.grow_process, path, 2, tmp_path, events=("grown",), n=650)
    errors = [r["error"] for r in results if "error" in r]
    assert not errors, errors[0]
    assert sum(r["grows"] for r in results) >= 2
    assert results[1]["adoptions"] >= 1  # it met MapResizedError and took the other's size
    for r in results:
        assert r["first"] == 64 << 20
        assert r["last"] >= 256 << 20  # each saw the map reach 256 MiB, by itself or not
    with Cortex.open(path, actor="checker", as_owner=True) as cx:
        assert cx.verify().ok
        for r in results:
            for i in range(r["written"]):
                m = cx.resolve_latest(workers.conc_id(r["k"], i))
                assert m.data == workers.big_fact(r["k"], i)
        assert cx.stats()["memories"] == sum(r["written"] for r in results)
        assert len(list(cx.journal())) == cx.stats()["memories"] + 1


def test_threads_survive_map_growth(tmp_path: Path) -> None:
    # in a subprocess: a remap under a live reader would crash the interpreter, not fail a test
    out = subprocess.run(
        workers.command("thread_grow", tmp_path / "store", 800),
        capture_output=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr.decode()[-3000:]
    result = json.loads(out.stdout)
    assert result["errors"] == [], result["errors"][0]
    assert result["missing"] == 0
    assert result["problems"] == []
    assert result["map_size"] >= 128 << 20
    assert result["reads"] > 0


def test_stats_and_backup_after_another_process_grew_the_map(tmp_path: Path) -> None:
    """A handle whose map another process grew reads its sizes and backs up: it adopts the
    new size (``stats`` read the named databases' sizes outside the gate and raised
    MDB_MAP_RESIZED; a backup, which sizes its copy from them, failed under a writer)."""
    import sys

    path = tmp_path / "store"
    with Cortex.open(path, actor="a", map_size=0) as cx:  # the minimum map: 64 MiB
        cx.write(workers.big_fact(0, 0))
        first = cx.stats()["map_size"]
        grow = (
            "import sys\n"
            "from cortex import Cortex\n"
            "from tests import workers\n"
            "with Cortex.open(sys.argv[1], actor='g', map_size=0) as cx:\n"
            "    i = 1\n"
            "    while cx.stats()['map_size'] <= int(sys.argv[2]):\n"
            "        cx.write_many([workers.big_fact(0, i + j) for j in range(50)])\n"
            "        i += 50\n"
        )
        subprocess.run(
            [sys.executable, "-c", grow, str(path), str(first)],
            check=True,
            cwd=Path(__file__).resolve().parent.parent,
            timeout=120,
        )
        assert cx._kv.info()["map_size"] > first  # its first look at the store since
        assert cx.backup(tmp_path / "copy").ok
