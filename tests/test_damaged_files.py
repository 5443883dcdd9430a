"""Damaged files, hostile paths, full disks and salvage (issue 20, the damaged-file half).

Everything that could crash the process runs in a child process: a test of "never a crash"
that ran in the pytest process would take pytest down with it.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cortex import Cortex, CortexError, EdgeType, Fact, IntegrityError, MemoryId
from cortex.storage import pages as pg
from cortex.storage.kv import LmdbKV
from cortex.transfer.salvage import salvage
from tests import workers

ROOT = Path(__file__).resolve().parent.parent
PSIZE = 4096


def _tool() -> Any:
    spec = importlib.util.spec_from_file_location(
        "damage_trials", ROOT / "tools" / "damage_trials.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["damage_trials"] = module
    spec.loader.exec_module(module)
    return module


trials_tool = _tool()


def _build(path: Path, n: int = 30) -> list[MemoryId]:
    """A store of small and multi-page values, versions and edges; the same bytes every run."""
    start = datetime(2026, 1, 2, tzinfo=UTC)
    ticks = itertools.count()

    def clock() -> datetime:
        return start + timedelta(milliseconds=next(ticks))

    with Cortex.open(path, actor="builder", clock=clock) as cx:
        uris = [
            cx.write(
                Fact(
                    statement=f"fact {i} " + "z" * [1, 60, 3000, 9000][i % 4],
                    subject="s",
                    predicate="p",
                ),
                tags=[f"t{i % 3}"],
                id=MemoryId(bytes.fromhex("019b7c0a8c00") + i.to_bytes(10, "big")),
            )
            for i in range(n)
        ]
        for u in uris[::4]:
            cx.update(u, Fact(statement=f"new {u.id}", subject="s", predicate="p"))
        for x, y in itertools.pairwise(uris):
            cx.add_edge(x, EdgeType.PART_OF, y)
        assert cx.verify().ok
    return [u.id for u in uris]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[MemoryId]]:
    path = tmp_path_factory.mktemp("damaged") / "original"
    return path, _build(path)


@pytest.fixture
def store(built: tuple[Path, list[MemoryId]], tmp_path: Path) -> Path:
    copy = tmp_path / "store"
    shutil.copytree(built[0], copy)
    return copy


@pytest.fixture
def compact(store: Path, tmp_path: Path) -> Path:
    """A compacted copy (`cortex backup`): every page from 2 up is in use."""
    dest = tmp_path / "compact"
    with Cortex.open(store, actor="builder") as cx:
        assert cx.backup(dest).ok
    return dest


def _pages_of(path: Path) -> dict[int, str]:
    return trials_tool.layout(path).kinds  # type: ignore[no-any-return]


def _first_key(path: Path, page: int) -> bytes:
    """The first key on leaf page ``page`` (LMDB's page header, then its first node)."""
    with open(path / "data.mdb", "rb") as f:
        f.seek(page * PSIZE)
        raw = f.read(PSIZE)
    node = int.from_bytes(raw[16:18], "little")
    ksize = int.from_bytes(raw[node + 6 : node + 8], "little")
    return raw[node + 8 : node + 8 + ksize]


def _zero(path: Path, page: int) -> None:
    with open(path / "data.mdb", "r+b") as f:
        f.seek(page * PSIZE)
        f.write(b"\0" * PSIZE)


def _run(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (``sys.argv[1:]`` = ``args``)."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        check=False,
    )


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return _run("import sys; from cortex.cli import main; sys.exit(main(sys.argv[1:]))", *argv)


# ---------------------------------------------------------------------------------------------
# Open: a truncated or emptied data.mdb, a damaged meta page


@pytest.mark.parametrize("readonly", [False, True])
@pytest.mark.parametrize("cut", [0, 1, 2, 3, "half", "last"])
def test_truncated_data_file_is_refused_before_it_is_mapped(
    store: Path, cut: int | str, readonly: bool
) -> None:
    size = (store / "data.mdb").stat().st_size
    # "last": the file cut at its last page in use (pages after it may be free ones, which a
    # file may lack: test_free_pages_missing_at_the_end_are_not_truncation)
    used = max(n for n, kind in _pages_of(store).items() if kind != "free")
    ends = {"half": size // 2 // PSIZE * PSIZE, "last": used * PSIZE}
    at = ends[cut] if isinstance(cut, str) else cut * PSIZE
    os.truncate(store / "data.mdb", at)
    got = _run(
        "import sys; from cortex import Cortex, IntegrityError\n"
        "try:\n"
        "    Cortex.open(sys.argv[1], actor='a', create=False, readonly=sys.argv[2] == 'True')\n"
        "except IntegrityError as exc:\n"
        "    print('IntegrityError', exc)\n",
        str(store),
        str(readonly),
    )
    assert got.returncode == 0, got.stderr  # a SIGBUS would be -7
    assert got.stdout.startswith("IntegrityError"), got.stdout
    assert "data.mdb" in got.stdout
    assert "truncated" in got.stdout or "empty" in got.stdout or "meta page" in got.stdout
    assert (store / "data.mdb").stat().st_size == at  # never re-initialised or extended


def test_an_emptied_data_file_is_not_taken_for_a_new_store(store: Path) -> None:
    os.truncate(store / "data.mdb", 0)
    with pytest.raises(IntegrityError, match="empty"):
        Cortex.open(store, actor="builder")
    assert (store / "data.mdb").stat().st_size == 0


@pytest.mark.parametrize("meta", [0, 1])
def test_a_damaged_meta_page_is_named(store: Path, meta: int) -> None:
    with open(store / "data.mdb", "r+b") as f:
        f.seek(meta * PSIZE + 16)  # the magic number
        f.write(b"\0\0\0\0")
    with pytest.raises(IntegrityError, match=f"meta page {meta}"):
        Cortex.open(store, actor="builder")


def test_free_pages_missing_at_the_end_are_not_truncation(compact: Path) -> None:
    # a file may legitimately end before its last page: LMDB never writes pages it allocated
    # and freed in one transaction. Here the newest meta page claims three pages more.
    data = compact / "data.mdb"
    with pg.DataFile(data) as f:
        meta = pg.newest(pg.read_metas(f))
    assert meta is not None
    with open(data, "r+b") as f:
        f.seek(meta.slot * PSIZE + 136)
        f.write(struct.pack("<Q", meta.last_pg + 3))
    with Cortex.open(compact, actor="builder") as cx:
        assert cx.verify().ok
        cx.write(Fact(statement="still writable", subject="s", predicate="p"))
        assert cx.verify().ok


# ---------------------------------------------------------------------------------------------
# Open: paths that cannot be a store


def test_a_path_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    for readonly in (False, True):
        with pytest.raises(CortexError, match="is a file, not a directory") as info:
            Cortex.open(tmp_path / "f", actor="a", readonly=readonly)
        assert str(tmp_path / "f") in str(info.value)


def test_a_path_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(CortexError, match="a part of the path is a file") as info:
        Cortex.open(tmp_path / "f" / "store", actor="a")
    assert str(tmp_path / "f" / "store") in str(info.value)
    with pytest.raises(CortexError, match="no store"):
        Cortex.open(tmp_path / "f" / "store", actor="a", readonly=True)


def test_a_name_too_long(tmp_path: Path) -> None:
    name = tmp_path / ("n" * 5000)
    for readonly in (False, True):
        with pytest.raises(CortexError, match="too long") as info:
            Cortex.open(name, actor="a", readonly=readonly)
        assert "5000" not in str(info.value) or "characters" in str(info.value)
        assert len(str(info.value)) < 400  # the path is shortened, not printed whole


def _unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    got = subprocess.run(["unshare", "-rm", "true"], capture_output=True, check=False)
    return got.returncode == 0


needs_mounts = pytest.mark.skipif(not _unshare(), reason="needs unshare -rm (user namespaces)")


@needs_mounts
def test_a_read_only_file_system(store: Path) -> None:
    code = (
        "import sys; from cortex import Cortex, CortexError\n"
        "try:\n"
        "    Cortex.open(sys.argv[1], actor='builder')\n"
        "except CortexError as exc:\n"
        "    print('refused:', exc)\n"
        "with Cortex.open(sys.argv[1], actor='builder', readonly=True) as cx:\n"
        "    print('read:', cx.verify().ok, cx.stats()['memories'])\n"
    )
    got = subprocess.run(
        [
            "unshare",
            "-rm",
            "sh",
            "-c",
            f'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" "$1" && '
            f'exec "{sys.executable}" -c "$2" "$1"',
            "sh",
            str(store),
            code,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        check=False,
    )
    assert got.returncode == 0, got.stderr
    assert "refused:" in got.stdout and "read-only" in got.stdout
    assert "readonly=True" in got.stdout
    assert "read: True 30" in got.stdout


def test_a_lock_file_the_user_may_not_write(store: Path) -> None:
    lock = store / "lock.mdb"
    if os.geteuid() == 0:  # root writes any file: make it immutable instead
        if subprocess.run(["chattr", "+i", str(lock)], capture_output=True, check=False).returncode:
            pytest.skip("running as root without chattr +i")
    else:
        lock.chmod(0o444)
        store.chmod(0o555)
    try:
        with pytest.raises(CortexError, match="permission denied"):
            Cortex.open(store, actor="builder")
        with Cortex.open(store, actor="builder", readonly=True) as cx:
            assert not cx._kv.locked  # a snapshot read without the lock file
            with cx._kv.read() as txn:  # no reader slot pins its pages: LMDB reads them
                assert type(txn._txn).__name__ == "Transaction"
            assert cx.verify().ok
            assert cx.stats()["memories"] == 30
            # the fallback is the process's environment: a second reader shares it, a writer
            # is refused while it is open
            with Cortex.open(store, actor="builder", readonly=True) as again:
                assert again._kv._shared is cx._kv._shared and not again._kv.locked
                assert again.stats()["memories"] == 30
            with pytest.raises(CortexError, match="open read-only in this process"):
                Cortex.open(store, actor="builder")
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(lock)], check=False)
        else:
            store.chmod(0o755)
            lock.chmod(0o644)


# ---------------------------------------------------------------------------------------------
# Whole-file walks over a damaged page: a report, never an abort


def _first_page(path: Path, kind: str) -> int:
    return min(p for p, k in _pages_of(path).items() if k == kind)


@pytest.mark.parametrize("kind", ["leaf", "branch", "overflow"])
def test_verify_and_stats_on_a_zeroed_page(compact: Path, kind: str) -> None:
    page = _first_page(compact, kind)
    _zero(compact, page)
    got = _cli("--store", str(compact), "verify")
    assert got.returncode == 1, got.stderr  # LMDB's abort would be -6
    assert "DAMAGED" in got.stdout
    assert f"data.mdb page {page}" in got.stdout
    assert "structurally damaged" in got.stdout
    got = _cli("--store", str(compact), "--json", "verify")
    assert got.returncode == 1 and not json.loads(got.stdout)["ok"]
    stats = _cli("--store", str(compact), "stats")
    assert stats.returncode in (0, 1), stats.stderr  # refused when it meets the damage
    if stats.returncode == 1:
        assert "structurally damaged" in stats.stderr
    # `cortex copy` walks the whole source: checked first, nothing created
    copied = _cli("copy", str(compact), str(compact.parent / "copied"))
    assert copied.returncode == 1, copied.stderr
    assert "structurally damaged" in copied.stderr
    assert not (compact.parent / "copied").exists()


def test_every_zeroed_page_of_a_compacted_store_verifies_to_a_report(compact: Path) -> None:
    """The issue's reproducer: any page from 2 up zeroed, then `cortex verify` (in one child)."""
    n = (compact / "data.mdb").stat().st_size // PSIZE
    code = (
        "import sys, shutil, json\n"
        "from cortex import Cortex, CortexError\n"
        "src, work = sys.argv[1], sys.argv[2]\n"
        "out = {}\n"
        "for page in range(2, int(sys.argv[3])):\n"
        "    d = f'{work}/p{page}'\n"
        "    shutil.copytree(src, d)\n"
        "    with open(d + '/data.mdb', 'r+b') as f:\n"
        "        f.seek(page * 4096); f.write(bytes(4096))\n"
        "    try:\n"
        "        with Cortex.open(d, actor='builder', create=False) as cx:\n"
        "            r = cx.verify()\n"
        "            try:\n"
        "                cx.stats(); s = 'ok'\n"
        "            except CortexError as exc:\n"
        "                s = type(exc).__name__\n"
        "        out[page] = ['ok' if r.ok else 'damaged', s]\n"
        "    except CortexError as exc:\n"
        "        out[page] = [type(exc).__name__, '']\n"
        "    shutil.rmtree(d)\n"
        "print(json.dumps(out))\n"
    )
    with tempfile.TemporaryDirectory() as work:
        got = _run(code, str(compact), work, str(n), timeout=300)
    assert got.returncode == 0, got.stderr[-2000:]
    out = json.loads(got.stdout)
    assert len(out) == n - 2
    # format 20: a backup is copied record by record (LMDB's compacting copy crashes on trees of
    # duplicates), so the copy's own commits leave a free page or two, which no reader reads
    with tempfile.TemporaryDirectory() as work:
        shutil.copytree(compact, Path(work) / "c")
        kv = LmdbKV(Path(work) / "c")
        try:
            free = kv.inspect(lambda _b, lay: {str(p) for ps in lay.free.values() for p in ps})
        finally:
            kv.close()
    assert len(free) <= 2, free
    live = {p: v for p, v in out.items() if p not in free}
    assert all(v[0] in ("damaged", "IntegrityError") for v in live.values()), out


def test_export_and_backup_of_a_structurally_damaged_store(compact: Path, tmp_path: Path) -> None:
    leaves = sorted(p for p, k in _pages_of(compact).items() if k == "leaf")
    _zero(compact, leaves[len(leaves) // 2])  # not on the way to meta/format: opening works
    bundle, dest = tmp_path / "out.jsonl", tmp_path / "copy"
    got = _cli("--store", str(compact), "export", str(bundle))
    assert got.returncode == 1 and "structurally damaged" in got.stderr, got.stderr
    assert not bundle.exists()
    got = _cli("--store", str(compact), "backup", str(dest))
    assert got.returncode == 1 and "no copy was kept" in got.stdout, got.stdout + got.stderr
    assert not dest.exists()


def test_export_refuses_an_edge_whose_key_was_damaged(store: Path, tmp_path: Path) -> None:
    # no checksum covers a key: a bit flipped in an edge's key names other endpoints (found by
    # tools/damage_trials.py, where export wrote such an edge without an error)
    lay = trials_tool.layout(store)
    key = next(k for k in sorted(lay.key_pages) if k.startswith(b"e/from/"))
    page = min(lay.key_pages[key])
    with open(store / "data.mdb", "r+b") as f:
        raw = bytearray(f.read())
    at = page * PSIZE + raw[page * PSIZE : (page + 1) * PSIZE].index(key) + len(key) - 3
    raw[at] ^= 0x08  # a bit of the destination id: the key still sorts in place
    (store / "data.mdb").write_bytes(bytes(raw))
    with Cortex.open(store, actor="builder") as cx:
        assert not cx.verify().ok
    got = _cli("--store", str(store), "export", str(tmp_path / "out.jsonl"))
    assert got.returncode == 1 and "two halves of edge" in got.stderr, got.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_backup_of_a_store_with_a_damaged_record_leaves_no_copy(
    store: Path, tmp_path: Path
) -> None:
    lay = trials_tool.layout(store)
    page = min(
        p
        for p, k in lay.kinds.items()
        if k == "leaf" and any(not v[2].startswith(b"meta/") for v in lay.values.get(p, ()))
    )
    # a record's value (not meta/format's: then the store would not even open)
    off, length, _key = next(v for v in lay.values[page] if not v[2].startswith(b"meta/"))
    with open(store / "data.mdb", "r+b") as f:  # one byte of a value: its checksum fails
        f.seek(page * PSIZE + off + length // 2)
        b = f.read(1)
        f.seek(page * PSIZE + off + length // 2)
        f.write(bytes([b[0] ^ 0x10]))
    with Cortex.open(store, actor="builder") as cx:
        report = cx.backup(tmp_path / "copy")
    assert not report.ok and report.problems
    assert not (tmp_path / "copy").exists()


def test_check_pages_at_open(compact: Path) -> None:
    with Cortex.open(compact, actor="builder", check_pages=True) as cx:
        assert cx.verify().ok
    _zero(compact, _first_page(compact, "leaf"))
    got = _run(
        "import sys; from cortex import Cortex, IntegrityError\n"
        "try:\n"
        "    Cortex.open(sys.argv[1], actor='builder', check_pages=True)\n"
        "except IntegrityError as exc:\n"
        "    print(exc)\n",
        str(compact),
    )
    assert got.returncode == 0, got.stderr
    assert "structurally damaged" in got.stdout and "cortex salvage" in got.stdout


def test_the_page_check_is_the_default_and_its_record(compact: Path) -> None:
    record = compact / pg.CHECKED
    record.unlink(missing_ok=True)
    with Cortex.open(compact, actor="builder") as cx:  # checked: the state recorded
        assert pg.read_checked_record(compact) == pg.checked_state(compact)
        cx.write(Fact(statement="after the check", subject="s", predicate="p"))
    # a checked writer's close moves the record on to the state its commits made
    assert pg.read_checked_record(compact) == pg.checked_state(compact)
    lay = trials_tool.layout(compact)
    # the leaf of the first journal entries: not on the way to meta/format nor beside it, nor a
    # named database's root (the open checks the way to their records): opening reads nothing
    # of it
    [leaf] = lay.key_pages[b"j/" + (1).to_bytes(8, "big")]
    assert lay.kinds[leaf] == "leaf" and leaf not in lay.named_roots
    st = (compact / "data.mdb").stat()
    _zero(compact, leaf)
    # damage that leaves the size and time alone under a matching record is not looked for
    # (the documented limit: verify finds it); any other change of the file is checked
    os.utime(compact / "data.mdb", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert pg.read_checked_record(compact) == pg.checked_state(compact)
    Cortex.open(compact, actor="builder").close()  # skipped: nothing read the damaged leaf
    os.utime(compact / "data.mdb")  # the file changed: the record no longer matches
    with pytest.raises(IntegrityError, match="structurally damaged"):
        Cortex.open(compact, actor="builder")
    assert not record.exists()  # a check that found damage removes the record
    with Cortex.open(compact, actor="builder", check_pages=False) as cx:  # as verify opens
        assert not cx.verify().ok
    assert not record.exists()


def test_a_record_that_does_not_parse_costs_a_check(compact: Path) -> None:
    (compact / pg.CHECKED).write_text("cortex-pages-checked 1 x y\n")
    assert pg.read_checked_record(compact) is None
    Cortex.open(compact, actor="builder").close()
    assert pg.read_checked_record(compact) == pg.checked_state(compact)


_SHARED_OPEN = """
import os, sys
from cortex import Cortex, IntegrityError
first = Cortex.open(sys.argv[1], actor="builder")
n = first.stats()["memories"]
shared = first._kv._shared
with open(os.path.join(sys.argv[1], "data.mdb"), "r+b") as f:
    if sys.argv[2] == "truncate":
        f.truncate(os.path.getsize(f.name) // 2 // 4096 * 4096)
    else:
        f.seek(int(sys.argv[2]) * 4096)
        f.write(bytes(4096))
try:
    Cortex.open(sys.argv[1], actor="builder", check_pages=sys.argv[2] != "truncate")
    print("opened")
except IntegrityError as exc:
    print("IntegrityError", exc)
print("users", shared.users, n)
os._exit(0)  # the first handle maps the damaged file: leave without touching it
"""


@pytest.mark.parametrize("how", ["truncate", "leaf"])
def test_a_second_handle_checks_the_file_the_first_one_mapped(compact: Path, how: str) -> None:
    # several handles of one store in one process share one environment; each open still
    # checks the file (it may have been damaged since the first open mapped it)
    what = how if how == "truncate" else str(_first_page(compact, "leaf"))
    got = _run(_SHARED_OPEN, str(compact), what)
    assert got.returncode == 0, got.stderr
    lines = got.stdout.splitlines()
    assert lines[0].startswith("IntegrityError"), got.stdout
    assert ("truncated" if how == "truncate" else "structurally damaged") in lines[0]
    assert lines[1] == "users 1 30"  # the refused open left no reference behind


# ---------------------------------------------------------------------------------------------
# Full disks and address space


def test_a_full_disk_by_file_size_limit(tmp_path: Path) -> None:
    got = subprocess.run(
        workers.command("fill_until_full", tmp_path / "s", "-", 1 << 20),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert got.returncode == 0, got.stderr
    out = json.loads(got.stdout)
    assert out["failure"][0] == "StoreFullError", out
    assert "file size limit" in out["failure"][1]
    assert out["counted"] == out["written"] > 0  # the failed write left nothing behind
    assert out["verify_ok"] and out["write_again"]


@needs_mounts
def test_a_full_disk(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    cmd = shlex.join(workers.command("fill_until_full", mnt / "s", mnt / "filler", 0))
    got = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=8m tmpfs '{mnt}' && exec {cmd}"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert got.returncode == 0, got.stderr
    out = json.loads(got.stdout)
    assert out["failure"][0] == "StoreFullError", out
    assert "is full" in out["failure"][1] and "disk" in out["failure"][1]
    assert out["counted"] == out["written"] > 0
    assert out["verify_ok"] and out["write_again"]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmSize from /proc")
def test_a_map_that_cannot_grow_keeps_the_handle(tmp_path: Path) -> None:
    got = subprocess.run(
        workers.command("fill_map", tmp_path / "s"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert got.returncode == 0, got.stderr
    out = json.loads(got.stdout)
    assert out["failure"][0] == "StoreFullError", out
    assert "address space" in out["failure"][1]
    assert out["read_back"] == "kept" and out["found"] >= 1  # reads kept working
    assert out["again"].startswith("cortex://Fact/")  # and writes, once space existed
    # a second handle of the store in the process shares the environment the remap replaced
    assert out["shared"] and out["other_read"] == "kept"
    assert out["other_again"].startswith("cortex://Fact/")
    assert out["verify_ok"]


# ---------------------------------------------------------------------------------------------
# Damage trials: a fixed sample of tools/damage_trials.py (the full counts are in its output)


def _sample(todo: list[Any]) -> list[Any]:
    picked = []
    for cls, want in (
        ("truncate", 3),
        ("zero", 4),
        ("header", 3),
        ("value", 3),
        ("key", 4),
        ("anywhere", 2),
        ("sidecar", 4),
    ):
        mine = [t for t in todo if t.cls == cls]
        step = max(1, len(mine) // want)
        picked += mine[step // 2 :: step][:want]
    return picked


@pytest.fixture(scope="module")
def trial_outcomes() -> Iterator[list[Any]]:
    with tempfile.TemporaryDirectory() as work:
        outcomes, _lay = trials_tool.run(
            trials_tool.CLASSES, jobs=2, work=Path(work), select=_sample
        )
    yield outcomes


def test_damage_trials_never_crash_nor_return_wrong_data(trial_outcomes: list[Any]) -> None:
    assert len(trial_outcomes) >= 15
    bad = [
        (o.trial.name, o.verdict, o.details)
        for o in trial_outcomes
        if o.verdict in ("crash", "wrong", "missed")
    ]
    assert not bad, bad
    assert {o.trial.cls for o in trial_outcomes} == set(trials_tool.CLASSES)


def test_damage_trials_walks_report_damage(trial_outcomes: list[Any]) -> None:
    zeroed = [o for o in trial_outcomes if o.trial.cls == "zero" and "free" not in o.trial.name]
    assert zeroed and all(o.verdict in ("reported", "refused") for o in zeroed), [
        (o.trial.name, o.verdict, o.ops) for o in zeroed
    ]
    sidecar = [o for o in trial_outcomes if o.trial.cls == "sidecar"]
    assert sidecar and all(o.ops["vector"] in ("equal", "rebuilt") for o in sidecar)


# ---------------------------------------------------------------------------------------------
# Salvage


def _records(path: Path) -> dict[str, Any]:
    with Cortex.open(path, actor="builder", create=False) as cx:
        out = {}
        for mid in trials_tool._all_heads(cx):
            out[str(mid)] = trials_tool._memory_digest(cx, mid, parts=True)
        return out


def test_salvage_of_an_intact_store_is_complete(store: Path, tmp_path: Path) -> None:
    report = salvage(store, tmp_path / "new")
    assert report.complete and report.verify_ok, report
    assert report.memories == 30 and report.edges == 29
    assert _records(tmp_path / "new") == _records(store)
    with pytest.raises(CortexError, match="exists"):
        salvage(store, tmp_path / "new")
    with pytest.raises(CortexError, match="no store"):
        salvage(tmp_path / "nothing", tmp_path / "new2")


def _claims(path: Path) -> dict[bytes, bytes]:
    with Cortex.open(path, actor="builder", create=False) as cx, cx._kv.read() as txn:
        return dict(txn.scan(b"idx/claim/"))


def test_salvage_carries_format_8(tmp_path: Path) -> None:
    # the claim index (current memories only) is rebuilt by the import; the task/ write
    # counts are carried as they were (a spent budget stays spent)
    src = tmp_path / "src"
    with Cortex.open(src, actor="builder") as cx:
        old = cx.write(Fact(statement="Sam lives in Lisbon", subject="sam", predicate="home_city"))
        new = cx.write(Fact(statement="Sam lives in Porto", subject="sam", predicate="home_city"))
        assert new.outcome == "superseded"
        with cx.task("t-1", limit=2):
            cx.write(Fact(statement="one", subject="x", predicate="p"))
            cx.write(Fact(statement="two", subject="x", predicate="p"))
        chain = [(str(link.memory.uri), link.current) for link in cx.chain(old)]
        cx.alias("Sam Smith", "sam")  # entity aliases are carried too
    report = salvage(src, tmp_path / "new")
    assert report.complete and report.verify_ok and report.tasks == 1, report
    assert _claims(tmp_path / "new") == _claims(src)
    from cortex.storage.keys import parse_claim_index_key

    # the superseded memory is out of the index (format 12), the current one in it
    assert {parse_claim_index_key(k)[1] for k in _claims(src)} >= {new.id}
    assert old.id not in {parse_claim_index_key(k)[1] for k in _claims(src)}
    with Cortex.open(tmp_path / "new", actor="builder", create=False) as cx:
        assert [(str(link.memory.uri), link.current) for link in cx.chain(old)] == chain
        assert cx.task_usage("t-1") == 2
        assert cx.aliases() == {"sam smith": ("sam",)}
        then = cx.write(Fact(statement="in Faro", subject="Sam Smith", predicate="home_city"))
        assert then.supersedes == (new.uri,)


def _labelled(path: Path) -> dict[str, Any]:
    """A store of labelled and unlabelled memories and an episode; the ids by label."""
    with Cortex.open(path, actor="builder") as cx:
        ids = {
            level: cx.write(
                Fact(statement=f"a {level} fact", subject="s", predicate=f"p{level}"),
                sensitivity=level,
            ).id
            for level in ("public", "internal", "confidential", "restricted")
        }
        ep = cx.ingest("a confidential conversation " * 20, source="chat").episode
        cx.set_episode_sensitivity(ep.id, "confidential")
        for i in range(40):  # enough records that the sens/ keys get a leaf page of their own
            cx.write(Fact(statement=f"filler {i} " + "f" * 600, subject="f", predicate=f"q{i}"))
    return {**ids, "episode": ep.id}


def _levels_of(path: Path, ids: dict[str, Any]) -> dict[str, str]:
    with Cortex.open(path, actor="builder", create=False) as cx:
        out = {k: cx.sensitivity(v).label for k, v in ids.items() if k != "episode"}
        out["episode"] = cx.episode_sensitivity(ids["episode"]).label
    return out


def test_salvage_carries_sensitivity_levels(tmp_path: Path) -> None:
    ids = _labelled(tmp_path / "src")
    report = salvage(tmp_path / "src", tmp_path / "new")
    assert report.complete and report.verify_ok and report.restricted == 0, report
    assert _levels_of(tmp_path / "new", ids) == _levels_of(tmp_path / "src", ids)
    assert _levels_of(tmp_path / "new", ids)["restricted"] == "restricted"


def test_salvage_never_lowers_a_level_it_cannot_read(tmp_path: Path) -> None:
    # format 9: the level is in the sealed head. A damaged head of a labelled memory loses that
    # memory (reported by id); it never comes back at another level, and the others keep theirs
    ids = _labelled(tmp_path / "src")
    lay = trials_tool.layout(tmp_path / "src")
    key = b"m/" + lay.rows[ids["confidential"].bytes]  # format 21: the head by its row
    (page,) = lay.key_pages[key]
    off, length, _k = next(v for v in lay.values[page] if v[2] == key)
    with open(tmp_path / "src" / "data.mdb", "r+b") as f:
        f.seek(page * PSIZE + off + length - 5)  # the level's code byte: the checksum fails
        b = f.read(1)
        f.seek(page * PSIZE + off + length - 5)
        f.write(bytes([b[0] ^ 0x01]))
    report = salvage(tmp_path / "src", tmp_path / "new")
    assert report.verify_ok and report.restricted == 0, report
    assert any(loss.id == str(ids["confidential"]) for loss in report.lost), report.lost
    rest = {k: v for k, v in ids.items() if k != "confidential"}
    assert _levels_of(tmp_path / "new", rest) == _levels_of(tmp_path / "src", rest)


def _format8_labelled(path: Path) -> dict[str, Any]:
    """A copy of the format-8 fixture (levels under ``sens/``) and its labelled ids."""
    import importlib.util
    import shutil

    root = Path(__file__).resolve().parent.parent
    shutil.copytree(root / "tests" / "data" / "format8.cortex", path)
    tool_path = root / "tools" / "make_fixture_v8.py"
    spec = importlib.util.spec_from_file_location("_fixture8", tool_path)
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return {"public": tool.fid(40), "confidential": tool.fid(41), "restricted": tool.fid(42)}


def test_salvage_of_a_format_8_store_never_lowers_a_level_it_cannot_read(
    tmp_path: Path,
) -> None:
    # format 8 kept levels under sens/: a damaged entry comes back restricted
    ids = _format8_labelled(tmp_path / "src")
    lay = trials_tool.layout(tmp_path / "src")
    key = b"sens/m/" + ids["confidential"].bytes
    (page,) = lay.key_pages[key]
    off, _length, _k = next(v for v in lay.values[page] if v[2] == key)
    with open(tmp_path / "src" / "data.mdb", "r+b") as f:
        f.seek(page * PSIZE + off)
        f.write(bytes([0x03 ^ 0xFF]))  # the code byte: the checksum fails
    report = salvage(tmp_path / "src", tmp_path / "new", actor="fixture-agent")
    assert report.verify_ok and report.restricted == 1, report
    with Cortex.open(tmp_path / "new", actor=None, create=False) as cx:
        got = {k: cx.sensitivity(v).label for k, v in ids.items()}
    assert got == {"public": "internal", "confidential": "restricted", "restricted": "restricted"}
    assert any("recovered as restricted" in n for n in report.notes)


def test_salvage_of_a_format_8_store_restricts_every_unlabelled_record_when_labels_may_be_lost(
    tmp_path: Path,
) -> None:
    # the leaf page holding the sens/ keys zeroed: no level can be trusted to be absent
    ids = _format8_labelled(tmp_path / "src")
    lay = trials_tool.layout(tmp_path / "src")
    (page,) = lay.key_pages[b"sens/m/" + ids["confidential"].bytes]
    _zero(tmp_path / "src", page)
    report = salvage(tmp_path / "src", tmp_path / "new", actor="fixture-agent")
    assert report.restricted > 0, report
    with Cortex.open(tmp_path / "new", actor=None, create=False) as cx:
        with cx._kv.read() as txn:
            recovered = [MemoryId(k[3:]) for k in txn.keys(b"id/")]  # format 21: ids in id/
        levels = {cx.sensitivity(m).label for m in recovered}
    assert recovered and levels <= {"restricted", "internal"}


def test_salvage_keeps_the_owner_when_meta_format_is_lost(store: Path, tmp_path: Path) -> None:
    # the owner is the one reader who sees everything: the journal's init entry names it
    lay = trials_tool.layout(store)
    (page,) = lay.key_pages[b"meta/format"]
    off, length, _k = next(v for v in lay.values[page] if v[2] == b"meta/format")
    with open(store / "data.mdb", "r+b") as f:
        f.seek(page * PSIZE + off + length // 2)
        b = f.read(1)
        f.seek(page * PSIZE + off + length // 2)
        f.write(bytes([b[0] ^ 0x01]))
    report = salvage(store, tmp_path / "new", actor="someone-else")
    assert report.verify_ok and report.memories == 30, report
    with Cortex.open(tmp_path / "new", actor=None, create=False) as cx:
        assert cx.owner == "builder"


def test_salvage_and_backup_take_directories_only(store: Path, tmp_path: Path) -> None:
    url = "postgresql://u@localhost/db?store=x"
    with pytest.raises(CortexError, match="LMDB directories"):
        salvage(url, tmp_path / "new")
    with pytest.raises(CortexError, match="LMDB directories"):
        salvage(store, url)
    with Cortex.open(store, actor="builder") as cx, pytest.raises(CortexError, match="not a URL"):
        cx.backup(url)  # a backup is a directory too (`cortex copy` goes into PostgreSQL)


@pytest.mark.parametrize(
    "how",
    [
        "truncate",
        "zero-leaf",
        "zero-branch",
        "zero-overflow",
        "header-leaf",
        "value-leaf",
        "value-overflow",
    ],
)
def test_salvage_recovers_everything_undamaged(store: Path, tmp_path: Path, how: str) -> None:
    lay = trials_tool.layout(store)
    before = _records(store)
    cls, _, kind = how.partition("-")
    records = {p for k, ps in lay.key_pages.items() if k.startswith((b"m/", b"mv/")) for p in ps}
    if cls == "truncate":
        # from the last leaf holding memory records (the store ends with the lexical index's)
        page = max(p for p, k in lay.kinds.items() if k == "leaf" and p in records)
        trial = trials_tool.Trial("truncate", how, "data.mdb", f"truncate:{page * PSIZE}", (page,))
    else:
        pages = sorted(
            p
            for p, k in lay.kinds.items()
            if k == kind
            and (kind == "branch" or p in records)
            and (cls != "value" or p in lay.values)
        )
        page = pages[len(pages) // 2]
        if cls == "zero":
            spec = f"zero:{page * PSIZE}:{PSIZE}"
        elif cls == "header":
            spec = f"flip:{page * PSIZE + 10}:1"  # the flags: a leaf that is no leaf
        else:
            off, length, _key = next(
                v for v in lay.values[page] if v[2].startswith((b"m/", b"mv/"))
            )
            spec = f"flip:{page * PSIZE + off + length // 2}:4"
        trial = trials_tool.Trial(cls, how, "data.mdb", spec, (page,))
    trials_tool.damage(store / "data.mdb", trial.how)
    got = _cli("salvage", str(store), str(tmp_path / "new"))
    assert got.returncode == 0, got.stdout + got.stderr
    after = _records(tmp_path / "new")
    for mid, rec in after.items():  # nothing wrong: every recovered memory as it was
        assert rec["records"] == before[mid]["records"], mid
        assert set(rec["edges"]) <= set(before[mid]["edges"]), mid
    undamaged = {m for m in before if not trials_tool._touched(m, trial, lay)}
    assert undamaged <= set(after), sorted(undamaged - set(after))
    lost = set(before) - set(after)
    if cls in ("truncate", "zero", "value") and kind != "branch":
        assert lost, "the damage should have cost something"
    for mid in lost:  # and what was lost is named
        assert mid in got.stdout, (mid, got.stdout)
    with Cortex.open(tmp_path / "new", actor="builder") as cx:
        assert cx.verify().ok


def test_salvage_json_names_lost_memories_and_edges(store: Path, tmp_path: Path) -> None:
    lay = trials_tool.layout(store)
    page = sorted(p for p, k in lay.kinds.items() if k == "overflow")[0]
    _zero(store, page)
    got = _cli("--json", "salvage", str(store), str(tmp_path / "new"))
    assert got.returncode == 0, got.stderr
    report = json.loads(got.stdout)
    kinds = {x["kind"] for x in report["lost"]}
    assert "memory" in kinds and "edge" in kinds  # the edges of a lost memory go with it
    memory = next(x for x in report["lost"] if x["kind"] == "memory")
    assert memory["type"] == "Fact" and "journal" in memory["seen_in"]
    assert report["verify_ok"]


def test_a_file_created_but_never_committed_to_is_not_a_damaged_meta(tmp_path: Path) -> None:
    """LMDB writes transaction id 0 into both meta pages when it creates a file; a file no
    commit ever reached (an environment opened and closed at once) is not refused."""
    import lmdb

    path = tmp_path / "s"
    path.mkdir()
    lmdb.open(str(path), subdir=True).close()
    with Cortex.open(path, actor="a") as cx:  # made a store in it
        assert cx.verify().ok


@pytest.mark.parametrize("bit", [0x01, 0x10])  # the parity bit, and a high byte
def test_a_damaged_meta_transaction_id_is_refused_not_read_as_an_older_state(
    tmp_path: Path, bit: int
) -> None:
    # one bit of meta page 1's transaction id (bytes 144..151 of the page): LMDB would take the
    # page with the larger id and silently read an older state of the store
    path = tmp_path / "s"
    with Cortex.open(path, actor="builder") as cx:
        for i in range(3):
            cx.write(Fact(statement=f"fact {i}", subject="s", predicate=f"p{i}"))
    at = PSIZE + 144 + (0 if bit == 0x01 else 6)
    with open(path / "data.mdb", "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ bit]))
    with pytest.raises(IntegrityError, match="meta page 1 holds transaction id"):
        Cortex.open(path, actor="builder")


@pytest.mark.parametrize("byte", [12, 14])  # mp_lower (the entry count), mp_upper
def test_a_damaged_entry_count_is_named_never_counted(store: Path, byte: int) -> None:
    # a flipped bit of a leaf's ``lower`` leaves a page whose every remaining node looks right:
    # LMDB reads fewer (or more) entries and stats() counted other numbers without an error.
    # A page's nodes fill its node area exactly, so the check names the page instead
    with Cortex.open(store, actor="builder") as cx:
        want = cx.stats()
    leaves = sorted(p for p, k in _pages_of(store).items() if k == "leaf")
    assert leaves
    refused = 0
    for bit in (0x02, 0x04, 0x08, 0x10, 0x20):
        for page in leaves:
            at = page * PSIZE + byte
            st = os.stat(store / "data.mdb")
            with open(store / "data.mdb", "r+b") as f:
                f.seek(at)
                old = f.read(1)
                f.seek(at)
                f.write(bytes([old[0] ^ bit]))
            # bit rot: the file's state stays the one the last open's check recorded, so the
            # next open does not check every page again; the walks must still notice
            os.utime(store / "data.mdb", ns=(st.st_atime_ns, st.st_mtime_ns))
            try:
                with Cortex.open(store, actor="builder") as cx:
                    try:
                        got = cx.stats()
                    except IntegrityError as exc:
                        assert "damaged" in str(exc)
                        refused += 1
                    else:
                        assert got == want, (page, bit)  # a page none of the counts read
                    assert not cx.verify().ok, (page, bit)
            except IntegrityError as exc:  # refused at open (a page the open reads)
                assert "damaged" in str(exc)
            finally:
                with open(store / "data.mdb", "r+b") as f:
                    f.seek(at)
                    f.write(old)
                os.utime(store / "data.mdb", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert refused
