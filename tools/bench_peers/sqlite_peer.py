"""The SQLite peer: WAL + FTS5 + sqlite-vec holding the same records as JSON rows.

WAL mode with synchronous=FULL (every commit durable), a tag table, FTS5 for BM25 text search
and a ``sqlite-vec`` ``vec0`` table (with the type as a metadata column, filtered inside the
scan) for exact vector search.

Uses the standard ``sqlite3`` when it can load extensions, else ``pysqlite3`` (pyenv's Python
is built without extension loading).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_peers.dataset import Dataset
from bench_peers.harness import NotAvailable


def _driver() -> Any:
    import sqlite3

    if hasattr(sqlite3.connect(":memory:"), "enable_load_extension"):
        return sqlite3
    try:
        from pysqlite3 import dbapi2
    except ImportError as exc:
        raise NotAvailable(
            "this Python's sqlite3 cannot load extensions and pysqlite3 is not installed"
        ) from exc
    return dbapi2


class System:
    """The adapter the harness drives."""

    name = "sqlite"

    def __init__(self, path: Path, ds: Dataset, log: Callable[[str], None]) -> None:
        try:
            import sqlite_vec
        except ImportError as exc:
            raise NotAvailable(f"sqlite-vec not installed: {exc}") from exc
        db = _driver()
        self.ds = ds
        path.mkdir(parents=True, exist_ok=True)
        self.con = db.connect(str(path / "peer.db"), isolation_level=None)
        self.con.enable_load_extension(True)
        sqlite_vec.load(self.con)
        self.con.enable_load_extension(False)
        ver = self.con.execute("select sqlite_version(), vec_version()").fetchone()
        self.notes = [f"SQLite {ver[0]} via {db.__name__}, sqlite-vec {ver[1]}"]
        c = self.con
        c.execute("pragma journal_mode=wal")
        c.execute("pragma synchronous=full")
        c.executescript(
            """
            create table mem (id integer primary key, type text not null, body text not null);
            create table mem_tag (tag text not null, id integer not null, primary key (tag, id))
                without rowid;
            create virtual table fts using fts5(text, content='', contentless_delete=1);
            create virtual table vec using vec0(embedding float[384], type text);
            """
        )

    def _insert(self, i: int) -> None:
        rec = self.ds.record(i)
        c = self.con
        rid = i + 1
        c.execute("insert into mem values (?, ?, ?)", (rid, rec["type"], json.dumps(rec)))
        c.executemany("insert into mem_tag values (?, ?)", [(t, rid) for t in rec["tags"]])
        c.execute("insert into fts (rowid, text) values (?, ?)", (rid, self.ds.texts[i]))
        c.execute(
            "insert into vec (rowid, embedding, type) values (?, ?, ?)",
            (rid, self.ds.vectors[i].tobytes(), rec["type"]),
        )

    def ingest_batch(self, start: int, stop: int) -> None:
        """Write records ``start`` to ``stop`` in one durable transaction."""
        self.con.execute("begin")
        for i in range(start, stop):
            self._insert(i)
        self.con.execute("commit")

    def ingest_one(self, i: int) -> None:
        """Write record ``i`` in a durable transaction of its own."""
        self.con.execute("begin")
        self._insert(i)
        self.con.execute("commit")

    def after_ingest(self) -> None:
        """Finish the bulk load (untimed)."""
        self.con.execute("pragma wal_checkpoint(truncate)")

    def vector_bytes(self) -> int:
        """Bytes of the vector chunks (float32, allocated 1,024 rows at a time)."""
        (b,) = self.con.execute("select sum(length(vectors)) from vec_vector_chunks00").fetchone()
        return int(b or 0)

    def prepare(self, workload: str) -> None:
        """Get ready for a workload (untimed)."""
        pass

    def _bodies(self, ids: list[int]) -> list[int]:
        for rid in ids:
            (body,) = self.con.execute("select body from mem where id = ?", (rid,)).fetchone()
            json.loads(body)
        return [r - 1 for r in ids]

    def get(self, i: int) -> Any:
        """Read record ``i`` in full by its id."""
        (body,) = self.con.execute("select body from mem where id = ?", (i + 1,)).fetchone()
        return json.loads(body)

    def find(self, type_: str, tag: str, limit: int) -> list[int]:
        """Up to ``limit`` records of a type with a tag, newest first."""
        rows = self.con.execute(
            "select m.id, m.body from mem_tag t join mem m on m.id = t.id "
            "where t.tag = ? and m.type = ? order by t.id desc limit ?",
            (tag, type_, limit),
        ).fetchall()
        for _, body in rows:
            json.loads(body)
        return [r[0] - 1 for r in rows]

    def _fts(self, q: str, k: int) -> list[int]:
        match = " OR ".join(f'"{w}"' for w in q.split())
        rows = self.con.execute(
            "select rowid from fts where fts match ? order by rank limit ?", (match, k)
        ).fetchall()
        return [r[0] for r in rows]

    def _knn(self, j: int, k: int, type_: str | None) -> list[int]:
        qv = self.ds.query_vectors[j].tobytes()
        if type_ is None:
            rows = self.con.execute(
                "select rowid from vec where embedding match ? and k = ? order by distance",
                (qv, k),
            ).fetchall()
        else:
            rows = self.con.execute(
                "select rowid from vec where embedding match ? and k = ? and type = ? "
                "order by distance",
                (qv, k, type_),
            ).fetchall()
        return [r[0] for r in rows]

    def text(self, q: str, k: int) -> list[int]:
        """Text search: the top ``k`` records for ``q``."""
        return self._bodies(self._fts(q, k))

    def vector(self, j: int, k: int, type_: str | None) -> list[int]:
        """Vector search for query vector ``j``, optionally within one type."""
        return self._bodies(self._knn(j, k, type_))

    def hybrid(self, q: str, j: int, k: int) -> list[int]:
        """Reciprocal-rank fusion (k=60) of the FTS5 top-50 and the vector top-50."""
        score: dict[int, float] = {}
        for ranked in (self._fts(q, 50), self._knn(j, 50, None)):
            for r, rid in enumerate(ranked):
                score[rid] = score.get(rid, 0.0) + 1.0 / (60 + r)
        top = sorted(score, key=score.__getitem__, reverse=True)[:k]
        return self._bodies(top)

    def context(self, q: str, j: int) -> Any:
        """The ``context`` bundle for a query (cortex only)."""
        raise NotAvailable("cortex only")

    def close(self) -> None:
        """Close the store."""
        self.con.close()
