"""Crash safety: kill writers with SIGKILL, reopen, nothing committed is lost or half-written."""

from __future__ import annotations

import json
import os
import random
import selectors
import signal
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cortex import Cortex, Fact, JournalKind, MemoryId, Uri
from tests import workers

pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGKILL and fork-free spawn on POSIX")

KILLS = 25
BATCH = 20


class Child:
    """A worker subprocess whose stdout lines are JSON reports; use it in a ``with`` block."""

    def __init__(self, argv: list[str]) -> None:
        self._err = tempfile.TemporaryFile()  # noqa: SIM115 (closed in __exit__)
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._err)
        assert self.proc.stdout is not None
        self._out = self.proc.stdout
        os.set_blocking(self._out.fileno(), False)
        self._buf = b""
        self.lines: list[dict[str, Any]] = []

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        self._out.close()
        self._err.close()

    def _take(self, chunk: bytes) -> None:
        self._buf += chunk
        *complete, self._buf = self._buf.split(b"\n")
        self.lines.extend(json.loads(line) for line in complete)

    def wait_for(self, op: str, timeout: float = 60.0, count: int = 1) -> None:
        """Block until the child has reported ``op`` ``count`` times (it is then running)."""
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(self._out, selectors.EVENT_READ)
            while sum(line["op"] == op for line in self.lines) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"child never said {op!r} in {timeout} s")
                if sel.select(min(left, 1.0)):
                    chunk = self._out.read()
                    if chunk is None:  # woken without data
                        continue
                    if not chunk:
                        self.proc.wait(30)
                        raise AssertionError(f"child exited before {op!r}: {self.stderr()}")
                    self._take(chunk)

    def kill(self) -> list[dict[str, Any]]:
        """SIGKILL the child, then collect every complete line it managed to write.

        A partial last line (no newline) was cut by the kill: that op is not reported.
        """
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        os.set_blocking(self._out.fileno(), True)
        self._take(self._out.read())
        return self.lines

    def stderr(self) -> str:
        self._err.seek(0)
        return self._err.read().decode(errors="replace")[-3000:]


def _check_reports(cx: Cortex, seed: int, reports: list[dict[str, Any]]) -> int:
    """Every op the child reported is in the store, whole. Returns how many were checked."""
    n = 0
    for r in reports:
        op = r["op"]
        if op == "write":
            m = cx.resolve(r["uri"])
            assert m.data == workers.fact_for(seed, r["i"], 0), r
            assert m.head.tags[0] == r["tag"]
        elif op == "many":
            assert len(r["uris"]) == BATCH
            for j, u in enumerate(r["uris"]):
                m = cx.resolve(u)
                assert m.data == workers.fact_for(seed, r["i"], j), (r, j)
                assert m.head.tags[0] == r["tag"]
        elif op == "update":
            uri = Uri.parse(r["uri"])
            m = cx.resolve(uri)
            assert m.data == workers.fact_for(seed, r["i"], 0, uri.version), r
            assert m.head.current_version >= uri.version
        elif op == "head":
            head = cx.resolve_latest(r["id"]).head
            assert list(head.tags) == r["tags"], r
            assert head.importance == r["importance"]
        elif op == "tomb":
            head = cx.resolve_latest(r["id"]).head
            assert head.tombstone is not None, r
            assert head.tombstone.reason == r["reason"]
        elif op == "edge":
            found = {(str(e.type.label), str(e.dst)) for e in cx.edges(r["src"])}
            assert (r["type"], r["dst"]) in found, r
        else:
            continue
        n += 1
    return n


def _check_whole_store(cx: Cortex) -> None:
    """The heads, versions and edges are exactly what the journal says happened.

    Also: every write_many batch (one tag per batch) is all there or not there at all.
    """
    report = cx.verify()
    assert report.ok, report.problems[:10]
    state: dict[MemoryId, dict[str, Any]] = {}
    edges: set[tuple[MemoryId, str, MemoryId]] = set()
    entries = list(cx.journal())
    assert [e.seq for e in entries] == list(range(1, len(entries) + 1))
    assert entries[0].kind is JournalKind.INIT
    for e in entries[1:]:
        if e.kind is JournalKind.WRITE:
            assert e.id is not None and e.id not in state
            state[e.id] = {"v": 1, "hashes": [e.hash], "tomb": False}
        elif e.kind is JournalKind.UPDATE:
            s = state[e.id]
            assert e.version == s["v"] + 1
            s["v"] = e.version
            s["hashes"].append(e.hash)
        elif e.kind is JournalKind.UPDATE_HEAD:
            assert e.version == state[e.id]["v"]
        elif e.kind is JournalKind.TOMBSTONE:
            state[e.id]["tomb"] = True
        elif e.kind is JournalKind.ADD_EDGE:
            assert e.id is not None and e.edge is not None and e.dst is not None
            edges.add((e.id, e.edge.label, e.dst))
        else:
            raise AssertionError(f"unexpected journal entry {e}")
    stats = cx.stats()
    assert stats["memories"] == len(state)
    # the lexical index holds exactly the live memories (verify checked every posting)
    assert stats["lexical"]["documents"] == sum(not s["tomb"] for s in state.values())
    assert stats["journal_entries"] == len(entries)
    assert stats["edges"] == len(edges)
    batches: Counter[str] = Counter()
    for mid, s in state.items():
        hist = cx.history(mid)
        assert [m.version.hash for m in hist] == s["hashes"], mid
        head = hist[-1].head
        assert head.current_version == s["v"]
        assert (head.tombstone is not None) == s["tomb"]
        if head.tags and head.tags[0].startswith("b"):
            batches[head.tags[0]] += 1
    assert {(e.src, e.type.label, e.dst) for mid in state for e in cx.edges(mid)} == edges
    partial = {tag: n for tag, n in batches.items() if n != BATCH}
    assert not partial, f"write_many batches partly visible: {partial}"


def _delay(rng: random.Random) -> float:
    """Seconds to let the child run: some kills land within milliseconds, some later."""
    band = rng.choice([(0.0, 0.004), (0.004, 0.04), (0.04, 0.4)])
    return rng.uniform(*band)


def test_repeated_sigkill_loses_nothing_committed(store_path: Any) -> None:
    rng = random.Random(20240611)
    path = store_path
    total = Counter[str]()
    kinds = ("write", "many", "update", "head", "tomb", "edge")

    def one_kill(seed: int, delay: float) -> None:
        with Child(workers.command("crash_writer", path, seed)) as child:
            child.wait_for("ready")
            time.sleep(delay)
            reports = child.kill()
            assert child.proc.returncode == -signal.SIGKILL, child.stderr()
        total.update(r["op"] for r in reports)
        with Cortex.open(path, actor="checker", as_owner=True) as cx:
            _check_reports(cx, seed, reports)
            _check_whole_store(cx)

    for kill in range(KILLS):
        one_kill(1000 + kill, _delay(rng))
    # the runs did real work of every kind (not only kills before the first op): on a slow
    # machine the short runs may not reach every kind, so longer ones follow until they do
    for extra in range(8):
        if all(total[op] > 0 for op in kinds):
            break
        one_kill(2000 + extra, 0.5 * 2**extra)
    assert all(total[op] > 0 for op in kinds), total
    # the last writer died holding nothing we cannot recover: a new process writes at once
    out = subprocess.run(
        workers.command("write_one", path, "after the kills"),
        capture_output=True,
        timeout=60,
        check=True,
    )
    uri = json.loads(out.stdout)["uri"]
    with Cortex.open(path, actor="checker", as_owner=True) as cx:
        assert cx.resolve(uri).data.statement == "after the kills"  # type: ignore[union-attr]
        _check_whole_store(cx)


def _count_tag(cx: Cortex, tag: str) -> int:
    ids = {e.id for e in cx.journal() if e.kind is JournalKind.WRITE}
    return sum(tag in cx.resolve_latest(mid).head.tags for mid in ids if mid is not None)


def test_kill_inside_a_large_write_many_leaves_none_of_it(store_path: Any) -> None:
    path = store_path
    with Child(workers.command("big_batch_writer", path, 5000, 2500)) as child:
        child.wait_for("mid")  # 2,500 of 5,000 memories are put, in an uncommitted transaction
        reports = child.kill()
    first = reports[0]
    with Cortex.open(path, actor="checker", as_owner=True) as cx:
        assert cx.verify().ok
        assert cx.resolve(first["uri"]).data == workers.fact_for(0, 0, 0)
        assert cx.stats()["memories"] == 1
        assert cx.stats()["lexical"]["documents"] == 1  # none of the batch's postings
        assert len(list(cx.journal())) == 2  # init and the one write
        assert _count_tag(cx, "big") == 0
    # the dead child held the writer lock: the next writer gets it (LMDB's robust mutex)
    out = subprocess.run(
        workers.command("write_one", path, "after"), capture_output=True, timeout=60, check=True
    )
    with Cortex.open(path, actor="checker", as_owner=True) as cx:
        assert cx.resolve(json.loads(out.stdout)["uri"]).version.version == 1
        assert cx.stats()["memories"] == 2
        assert cx.verify().ok


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15, 0.6])
def test_kill_around_a_large_write_many_is_all_or_nothing(store_path: Any, delay: float) -> None:
    path = store_path
    with Child(workers.command("big_batch_writer", path, 5000, 0)) as child:
        child.wait_for("start")
        time.sleep(delay)
        reports = child.kill()
    done = any(r["op"] == "done" for r in reports)
    with Cortex.open(path, actor="checker", as_owner=True) as cx:
        assert cx.verify().ok
        big = _count_tag(cx, "big")
        assert big in (0, 5000)
        if done:
            assert big == 5000
        assert len(list(cx.journal())) == 2 + big


# ---------------------------------------------------------------------------------------------
# Erasure: a kill during a purge's erasure step (issue 21)

ERASE_KILLS = 12
PAGE = 4096


def occurrences(root: Path, needles: list[bytes]) -> dict[str, Counter[int]]:
    """Where any needle occurs: ``{file: Counter(page -> hits)}`` over every file under root."""
    out: dict[str, Counter[int]] = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            data = path.read_bytes()
            found: Counter[int] = Counter()
            for needle in needles:
                start = data.find(needle)
                while start >= 0:
                    found[start // PAGE] += 1
                    start = data.find(needle, start + 1)
            if found:
                out[path.relative_to(root).as_posix()] = found
    return out


def _filled(path: Path, n: int) -> None:
    """A store big enough that an erasure step takes a while (it reads every page)."""
    with Cortex.open(path, actor="setup") as cx:
        cx.write_many(
            Fact(statement=f"filler {i} " + "x" * (i % 400), subject="s", predicate="p")
            for i in range(n)
        )


def test_kill_inside_the_zeroing_leaves_a_consistent_store(tmp_path: Path) -> None:
    """The child stops half way through zeroing (holding the writer lock) and is killed."""
    path = tmp_path / "store"
    _filled(path, 2000)
    with Child(workers.command("stalled_scrub", path)) as child:
        child.wait_for("mid")
        reports = child.kill()
    uri = next(r["uri"] for r in reports if r["op"] == "write")
    word = b"zqxstall0000"
    with Cortex.open(path, actor="checker", as_owner=True) as cx:
        assert cx.verify().ok
        assert cx.resolve(uri).data is None  # the purge committed before its erasure step
        assert cx.stats()["memories"] == 2001
    # the dead child held the writer lock: the next writer gets it, and the erasure completes
    out = subprocess.run(
        workers.command("write_one", path, "after"), capture_output=True, timeout=60, check=True
    )
    with Cortex.open(path, actor="checker", as_owner=True) as cx:
        assert cx.resolve(json.loads(out.stdout)["uri"]).data is not None
        assert cx.scrub().complete
        assert cx.verify().ok and cx.verify_erasure().ok
    assert occurrences(path, [word]) == {}


def test_repeated_sigkill_during_purges_and_erasure_steps(tmp_path: Path) -> None:
    """A child writes secrets and purges them (each purge runs the erasure step) until it is
    killed at a random moment; after every kill the store is whole, every acknowledged write
    and purge is there, and after the last one a single erasure step leaves no secret of any
    purged memory in any file."""
    rng = random.Random(20261125)
    path = tmp_path / "store"
    _filled(path, 3000)
    words: dict[str, bytes] = {}  # memory id -> its secret word
    acknowledged: set[str] = set()
    purges = 0
    for kill in range(ERASE_KILLS):
        seed = 3000 + kill
        with Child(workers.command("erasure_crasher", path, seed)) as child:
            child.wait_for("ready")
            time.sleep(rng.uniform(0.0, 1.2))
            reports = child.kill()
            assert child.proc.returncode == -signal.SIGKILL, child.stderr()
        for r in reports:
            if r["op"] == "write":
                for j, u in enumerate(r["uris"]):
                    words[str(Uri.parse(u).id)] = f"zqxc{seed}x{r['i'] + j:04d}".encode()
            elif r["op"] == "purge":
                acknowledged.add(r["id"])
                purges += 1
        with Cortex.open(path, actor="checker", as_owner=True) as cx:
            report = cx.verify()
            assert report.ok, report.problems[:10]
            purged = {str(e.id) for e in cx.journal() if e.kind is JournalKind.PURGE}
            assert acknowledged <= purged
            for mid, word in words.items():
                m = cx.resolve_latest(mid)
                if mid in purged:
                    assert m.data is None and m.head.tombstone is not None
                else:
                    assert word.decode() in m.data.statement  # type: ignore[union-attr]
    assert purges >= ERASE_KILLS  # the runs got far enough to purge, many times
    with Cortex.open(path, actor="checker", as_owner=True) as cx:
        purged = {str(e.id) for e in cx.journal() if e.kind is JournalKind.PURGE}
        assert cx.scrub().complete
        audit = cx.verify_erasure()
        assert audit.ok and audit.records == len(purged), audit.residues[:5]
    gone = [words[mid] for mid in purged]
    assert gone and occurrences(path, gone) == {}
    kept = [w for mid, w in words.items() if mid not in purged]
    assert kept and occurrences(path, kept)  # the live ones are still there
