"""cortex on PostgreSQL: the cortex adapter's workloads, on a store in a private cluster.

The same calls as ``cortex_adapter`` (its ``System``, unchanged but for where the store is), on
``Cortex.open("postgresql://...?store=bench")``: a cluster of Debian's server binaries started
for this worker in a temporary directory (``tests/pgserver.py``: a unix socket only, fsync on,
``shared_buffers`` 1GB as ``tools/bench_pg.py`` sizes it), stopped when the worker ends. So the
suite's table has a PostgreSQL column beside the LMDB store's: the same records, queries and
vectors (the vector index is the process's cache, built from the stored vectors by the first
vector search, which the warm-up calls make).

Disk per memory is the store's table with its primary key index and TOAST
(``pg_total_relation_size``), not the cluster's files (the WAL and the catalog are the
server's, whatever it holds); without vectors, the same records are written into a second table
as the LMDB adapter does. Peak memory is the client process's alone (the server is another).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_peers import cortex_adapter
from bench_peers.dataset import Dataset
from bench_peers.harness import BATCH, NotAvailable
from cortex import Cortex

ROOT = Path(__file__).resolve().parents[2]


class System(cortex_adapter.System):
    """The cortex adapter on a PostgreSQL store."""

    name = "cortex-pg"

    def __init__(self, path: Path, ds: Dataset, log: Callable[[str], None]) -> None:
        sys.path.insert(0, str(ROOT))
        from tests import pgserver

        bindir = pgserver.find_bin()
        if bindir is None:
            raise NotAvailable("no PostgreSQL server binaries (apt-get install postgresql)")
        try:
            import psycopg  # noqa: F401
        except ImportError as exc:
            raise NotAvailable(f"the postgres extra is not installed: {exc}") from exc
        self.cluster = pgserver.PgCluster(bindir, shared_buffers="1GB").start()
        self.url = self.cluster.url("bench")
        try:
            super().__init__(path, ds, log)
        except BaseException:
            self.cluster.stop()
            raise
        self.notes.append(
            "cortex on PostgreSQL: a private cluster on a unix socket, fsync on, shared_buffers "
            "1GB; disk is the store's table with its index and TOAST; peak memory is the client's"
        )

    def _open(self, mode: str) -> Any:
        kw = self.vec_kwargs if mode == "vector" and self.vec_kwargs else {}
        return Cortex.open(self.url, actor="bench", **kw)

    def _table_bytes(self, table: str) -> int:
        import psycopg

        with psycopg.connect(self.cluster.conninfo(), autocommit=True) as conn:
            row = conn.execute("SELECT pg_total_relation_size(%s)", (f'"{table}"',)).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def disk_bytes(self) -> int:
        """The store's table, its index and its TOAST, in bytes."""
        return self._table_bytes("cortex_bench")

    def vector_bytes(self) -> int:
        """This store's bytes less those of the same records without vectors (a second table)."""
        if not self.vec_kwargs:
            return 0
        with Cortex.open(self.cluster.url("novectors"), actor="bench") as cx:
            n = len(self.by_n)
            for b in range(0, n, BATCH):
                cx.write_many([self._item(i) for i in range(b, min(b + BATCH, n))])
        without = self._table_bytes("cortex_novectors")
        import psycopg

        with psycopg.connect(self.cluster.conninfo(), autocommit=True) as conn:
            conn.execute('DROP TABLE "cortex_novectors" CASCADE')
        return max(0, self.disk_bytes() - without)

    def close(self) -> None:
        """Close the store and stop the cluster."""
        try:
            super().close()
        finally:
            self.cluster.stop()
