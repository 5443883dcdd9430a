"""A PostgreSQL server whose disk really fills up under cortex's writes.

The server of these tests has its data directory (tables and WAL) on a small tmpfs mounted in a
mount namespace of its own (a ``sleep`` holds the namespace; every server command enters it with
``nsenter``), so the file system the server writes to runs out of space as a user's disk would.
What the issue asks (a full disk gives a clear ``CortexError`` and never a half-applied write):
the write that meets the full disk raises a CortexError: ``StoreFullError`` when a table file
could not grow (the statement failed: the write left nothing), or ``EngineError`` when a WAL
write failed first (the server PANICs and restarts, its clients lose their connections: the
write is there whole or not at all; which file fills first depends on timing, so a run meets
one or the other). Every acknowledged write is there; once space is freed (and the server is
back), ``verify`` is clean and writes go on.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cortex import Cortex, CortexError, Fact
from cortex.errors import EngineError, StoreFullError

from . import pgserver

pytestmark = pytest.mark.postgres

DISK_MB = 48
"""The tmpfs: initdb with 1 MiB WAL segments takes ~25 MiB of it."""
LEFT_MB = 4
"""What the filler leaves free once the server runs: a few thousand writes' worth."""


def _namespaces() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("nsenter") is None:
        return False
    got = subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False)
    return got.returncode == 0


class FullDiskCluster(pgserver.PgCluster):
    """A private cluster on a DISK_MB tmpfs only its own mount namespace sees."""

    def __init__(self, bindir: Path) -> None:
        super().__init__(bindir)
        self.disk = self.root / "disk"
        self.disk.mkdir()
        self.data = self.disk / "data"  # the socket stays in root: visible outside
        self.holder = subprocess.Popen(
            ["unshare", "-m", "--propagation", "private", "sleep", "3600"],
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        mine = os.readlink("/proc/self/ns/mnt")
        while os.readlink(f"/proc/{self.holder.pid}/ns/mnt") == mine:
            assert time.monotonic() < deadline, "unshare did not enter a mount namespace"
            time.sleep(0.01)
        self.inside(
            "mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m,mode=0700", "tmpfs", str(self.disk)
        )
        if self._user is not None:
            self.inside("chown", self._user, str(self.disk))

    def inside(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``cmd`` as root in the server's mount namespace."""
        return subprocess.run(
            ["nsenter", "-t", str(self.holder.pid), "-m", "--", *cmd],
            capture_output=True,
            text=True,
            check=check,
            timeout=120,
        )

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if args[0] == "initdb":
            cmd.append("--wal-segsize=1")  # small WAL segments: the tmpfs is small
        if self._user is not None:
            cmd = ["runuser", "-u", self._user, "--", *cmd]
        return self.inside(*cmd, check=check)

    def start(self) -> FullDiskCluster:
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            "cortex",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-locale",
            "--no-sync",
        )
        conf = (
            "\nlisten_addresses = ''\n"
            f"unix_socket_directories = '{self.socket_dir}'\n"
            "shared_buffers = 16MB\n"
            "min_wal_size = 2MB\n"
            "max_wal_size = 4MB\n"
            "log_min_messages = warning\n"
        )
        self.inside("sh", "-c", f"printf '%s' \"$0\" >> '{self.data}/postgresql.conf'", conf)
        self.start_server()
        return self

    def fill(self) -> None:
        """Leave LEFT_MB of the tmpfs free (a file the test deletes to free space)."""
        got = self.inside("df", "--output=avail", "-B1M", str(self.disk))
        avail = int(got.stdout.split()[-1])
        count = max(0, avail - LEFT_MB)
        self.inside(
            "dd", "if=/dev/zero", f"of={self.disk}/filler", "bs=1M", f"count={count}", check=False
        )

    def unfill(self) -> None:
        self.inside("rm", "-f", f"{self.disk}/filler")

    def server_alive(self) -> bool:
        got = self._run("pg_ctl", "-D", str(self.data), "status", check=False)
        return got.returncode == 0

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.stop_server("immediate")
        self.holder.kill()
        self.holder.wait(10)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def full_disk() -> Iterator[FullDiskCluster]:
    bindir = pgserver.find_bin()
    if bindir is None or not _namespaces():
        why = (
            "no PostgreSQL server binaries"
            if bindir is None
            else "needs root and mount namespaces (unshare -m, nsenter)"
        )
        if pgserver.required() and bindir is None:
            pytest.fail(f"the PostgreSQL tests are required here but cannot run: {why}")
        pytest.skip(why)
    cluster = FullDiskCluster(bindir)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def test_a_real_full_disk_fails_the_write_whole_and_the_store_goes_on(
    full_disk: FullDiskCluster,
) -> None:
    url = full_disk.url("full")
    cx = Cortex.open(url, actor="filler")
    cx.write(Fact(statement="first", subject="disk", predicate="holds"))
    full_disk.fill()
    acknowledged: list[str] = []
    failure: CortexError | None = None
    for i in range(20_000):
        try:
            ref = cx.write(
                Fact(statement=f"fill {i}", subject="disk", predicate="fills", object="f" * 3000)
            )
        except CortexError as exc:
            failure = exc
            break
        acknowledged.append(str(ref))
    assert failure is not None, "the disk never filled"
    assert acknowledged, "not one write fitted"
    message = str(failure)
    assert message  # a clear error, not an empty one
    cx.close()

    full_disk.unfill()
    if isinstance(failure, StoreFullError):  # a table file that could not grow
        assert "No space left on device" in message
        lost = 0  # the statement failed: the write left nothing
    else:  # a WAL write that failed: the server PANICs, its clients lose their connections
        assert isinstance(failure, EngineError), repr(failure)
        assert "connection" in message and "whole or not at all" in message
        lost = 1  # the commit's answer was lost: applied whole or not at all
    if not full_disk.server_alive():  # the server stopped: start it (crash recovery)
        full_disk.start_server()
    deadline = time.monotonic() + 60
    while True:  # a server restarting after a PANIC refuses connections while it recovers
        try:
            cx = Cortex.open(url, actor="filler")
            break
        except EngineError:
            assert time.monotonic() < deadline, "the server did not come back"
            time.sleep(0.2)
    try:
        report = cx.verify()
        assert report.ok, report
        for mid in acknowledged:  # every acknowledged write is there, whole
            assert cx.resolve(mid).data.statement.startswith("fill ")
        count = cx.stats()["memories"]
        assert len(acknowledged) + 1 <= count <= len(acknowledged) + 1 + lost
        cx.write(Fact(statement="after", subject="disk", predicate="has room"))
        assert cx.stats()["memories"] == count + 1
    finally:
        cx.close()
