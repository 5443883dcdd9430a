"""A private PostgreSQL cluster for the tests and benchmarks: Debian's server binaries, a data
directory in a temporary directory, a unix socket only (``listen_addresses=''``), stopped on exit.

initdb and the server refuse to run as root: as root the cluster belongs to the ``postgres`` OS
user (Debian's package creates it) and every server command runs through ``runuser``.

Run by hand: ``python -m tests.pgserver`` starts a cluster, prints its URL and waits (Ctrl-C
stops it).
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["PgCluster", "find_bin", "required"]


def required() -> bool:
    """Whether the PostgreSQL tests must run (CI, or CORTEX_PG_REQUIRED=1): never skipped."""
    flag = os.environ.get("CORTEX_PG_REQUIRED", "")
    if flag:
        return flag not in ("0", "false", "no")
    return os.environ.get("CI", "") not in ("", "0", "false")


def find_bin() -> Path | None:
    """The newest Debian server binaries (``/usr/lib/postgresql/N/bin``), or CORTEX_PG_BIN."""
    given = os.environ.get("CORTEX_PG_BIN")
    if given:
        return Path(given)
    found = [Path(p) for p in glob.glob("/usr/lib/postgresql/*/bin") if Path(p, "initdb").exists()]
    if not found:
        return None
    return max(found, key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)


class PgCluster:
    """One throw-away cluster; ``start()`` then ``url(store)``; ``stop()`` (also at exit)."""

    def __init__(self, bindir: Path, *, fsync: bool = True, shared_buffers: str = "64MB") -> None:
        self.bindir = bindir
        self.fsync = fsync
        self.shared_buffers = shared_buffers
        """The server's buffer cache (``shared_buffers``): small for the tests, as large as a
        benchmark's stores for ``tools/bench_pg.py`` (operators give it ~25% of the memory)."""
        self.root = Path(tempfile.mkdtemp(prefix="cortex-pg-"))
        self.data = self.root / "data"
        self.socket_dir = self.root
        self.log = self.root / "server.log"
        self.port = 5432
        self.running = False
        self._user: str | None = None
        if os.geteuid() == 0:
            self._user = "postgres"
            try:
                pw = pwd.getpwnam(self._user)
            except KeyError:
                raise RuntimeError(
                    "running as root, and there is no 'postgres' OS user to run the server as "
                    "(apt-get install postgresql creates it)"
                ) from None
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        self.root.chmod(0o700)

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if self._user is not None:
            cmd = ["runuser", "-u", self._user, "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=120)

    def start(self) -> PgCluster:
        """initdb (first time) and start the server; wait until it accepts connections."""
        if not self.data.exists():
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
            conf = self.data / "postgresql.conf"
            with conf.open("a") as f:
                f.write(
                    "\nlisten_addresses = ''\n"
                    f"unix_socket_directories = '{self.socket_dir}'\n"
                    "max_connections = 200\n"
                    f"shared_buffers = {self.shared_buffers}\n"
                    f"fsync = {'on' if self.fsync else 'off'}\n"
                    "log_min_messages = warning\n"
                )
        self.start_server()
        atexit.register(self.stop)
        return self

    def start_server(self) -> None:
        """Start (or restart) the server on the existing data directory."""
        got = self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "start", check=False
        )
        if got.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {got.stdout}{got.stderr}\n{log[-2000:]}")
        self.running = True
        # pg_ctl -w returns once the server accepts connections; a socket file may lag a little
        deadline = time.monotonic() + 10
        while not (self.socket_dir / f".s.PGSQL.{self.port}").exists():
            if time.monotonic() > deadline:
                raise RuntimeError("the server started but its socket did not appear")
            time.sleep(0.05)

    def stop_server(self, mode: str = "fast") -> None:
        """``pg_ctl stop -m MODE`` (``immediate``: as if it crashed, recovery on next start)."""
        if self.running:
            self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)
            self.running = False

    def url(self, store: str | None = None, database: str = "postgres") -> str:
        """A cortex URL for this cluster (``store=`` names the table)."""
        q = f"?host={self.socket_dir}&port={self.port}&user=cortex"
        if store is not None:
            q += f"&store={store}"
        return f"postgresql:///{database}{q}"

    def conninfo(self, database: str = "postgres") -> str:
        """A libpq connection string (for plain psycopg)."""
        return f"host={self.socket_dir} port={self.port} user=cortex dbname={database}"

    def stop(self) -> None:
        """Stop the server and remove the cluster."""
        self.stop_server("fast")
        shutil.rmtree(self.root, ignore_errors=True)


if __name__ == "__main__":  # pragma: no cover - a developer's tool
    b = find_bin()
    if b is None:
        raise SystemExit("no PostgreSQL server binaries: apt-get install -y postgresql")
    c = PgCluster(b).start()
    print(c.url("NAME"), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        c.stop()
