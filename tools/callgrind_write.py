"""Client instructions a single durable write costs, counted by callgrind (deterministic).

    python tools/callgrind_write.py --engine pg --writes 200 --size 1000

runs itself under ``valgrind --tool=callgrind`` with collection off except inside the measured
loop (the loop runs in ``itertools.starmap``: ``--toggle-collect=starmap_next``), and prints the
instructions a ``Cortex.write`` of ``bench_pg``'s facts costs the client, on a store of
``--size`` memories: LMDB on a temporary directory (``/dev/shm`` where there is one), or
PostgreSQL in a private cluster (``tests/pgserver.py``, fsync off: the client's count does not
depend on it). The machine's load does not change the count, so two checkouts compare to a
fraction of a per cent where wall or CPU time on a shared machine moves by ten. PostgreSQL's
send-ahead (``PgKV._sends_ahead``) is adaptive, on timings valgrind distorts: ``--ahead``
fixes it (on by default, as on a quiet machine; ``off``: one pipeline a write).

Needs valgrind. Kernel time (the sockets' system calls, the server's wake-ups) is not counted.
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))


def _child(engine: str, writes: int, size: int, ahead: str) -> None:
    """The measured process (under valgrind): fill, warm, then the writes inside starmap."""
    import bench_pg

    from cortex import Cortex

    cluster = None
    if engine == "pg":
        from cortex.storage import pgkv
        from tests import pgserver

        if ahead != "auto":
            on = ahead == "on"
            pgkv.PgKV._sends_ahead = lambda self: on  # type: ignore[method-assign]
            pgkv.PgKV._ahead_note = lambda self, *a, **k: None  # type: ignore[method-assign]
        cluster = pgserver.PgCluster(pgserver.find_bin(), fsync=False).start()
        where = cluster.url("cgw")
    else:
        shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
        where = str(Path(tempfile.mkdtemp(dir=shm), "s"))
    try:
        bench_pg.fill(where, size)
        with Cortex.open(where, actor="bench") as cx:
            for i in range(100):
                cx.write(bench_pg.fact(size + i))
            list(
                itertools.starmap(
                    lambda i: cx.write(bench_pg.fact(5 * size + i)), [(i,) for i in range(writes)]
                )
            )
    finally:
        if cluster is not None:
            cluster.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--engine", choices=("lmdb", "pg"), default="pg")
    ap.add_argument("--writes", type=int, default=200)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--ahead", choices=("on", "off", "auto"), default="on")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.engine, args.writes, args.size, args.ahead)
        return
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp, "callgrind.out")
        cmd = [
            "valgrind",
            "--tool=callgrind",
            "--collect-atstart=no",
            "--toggle-collect=starmap_next",
            f"--callgrind-out-file={out}",
            sys.executable,
            __file__,
            "--child",
            f"--engine={args.engine}",
            f"--writes={args.writes}",
            f"--size={args.size}",
            f"--ahead={args.ahead}",
        ]
        run = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if run.returncode != 0:
            sys.exit(f"valgrind failed ({run.returncode}):\n{run.stderr[-2000:]}")
        total = next(
            int(line.split()[1])
            for line in out.read_text().splitlines()
            if line.startswith(("summary:", "totals:"))
        )
    print(
        f"{args.engine}: {total / args.writes:,.0f} client instructions a write "
        f"({args.writes} writes, {args.size:,}-memory store, send-ahead {args.ahead})"
    )


if __name__ == "__main__":
    main()
