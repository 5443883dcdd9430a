"""The physical floor: raw LMDB with the same puts and gets of cortex's bytes, exact numpy search.

Vectors live in an in-memory matrix and are also put in a second LMDB database.

The bytes are read back from the cortex store of the same size built earlier in the same run
(before any timing), so the floor puts exactly cortex's encoded heads, versions, index entries
and journal entries; a read decodes the head, the version and the data with ``cbor2``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import cbor2
import lmdb
import numpy as np

from bench_peers.dataset import TYPES, Dataset
from bench_peers.harness import NotAvailable, reset_peak
from cortex.engine.values import decode_trusted
from cortex.storage.keys import (
    HEAD,
    IDX_TAG,
    VERSION,
    head_key,
    journal_key,
    tag_hash,
    version_prefix,
)

_MAP = 64 << 30


def capture(store: Path, count: int) -> list[tuple[bytes, list[tuple[bytes, bytes]]]]:
    """(id, puts) for the first ``count`` memories written to the cortex store, in order."""
    from cortex import Cortex
    from cortex.engine.heads import index_keys_of as _index_keys
    from cortex.engine.heads import row_of
    from cortex.model.codec import HEAD

    groups: list[tuple[bytes, list[tuple[bytes, bytes]]]] = []
    with Cortex.open(store, actor="bench", readonly=True) as cx, cx._kv.read() as txn:
        # through the KV layer: each keyspace in the LMDB database it lives in (format 17)
        for entry in cx.journal(1):
            if entry.id is None:
                continue
            # cortex keys a memory's head and versions by its row (format 21); the floor keeps
            # them by id (``head_key_raw``, ``version_raw``): one head and one version a get,
            # without cortex's id/ lookup (a lower bound still)
            row = row_of(txn, entry.id)
            if row is None:
                continue
            hk = head_key(row)
            puts = [(head_key_raw(entry.id.bytes), bytes(txn.get(hk) or b""))]
            puts.extend(
                (version_raw(entry.id.bytes, int.from_bytes(k[-8:], "big")), v)
                for k, v in txn.scan(version_prefix(row))
            )
            head = decode_trusted(HEAD, hk, puts[0][1])
            puts.extend((k, b"") for k in _index_keys(head))
            jk = journal_key(entry.seq)
            puts.append((jk, bytes(txn.get(jk) or b"")))
            groups.append((entry.id.bytes, puts))
            if len(groups) == count:
                break
    return groups


class System:
    """The adapter the harness drives."""

    name = "floor"

    def __init__(self, path: Path, ds: Dataset, log: Callable[[str], None]) -> None:
        store = path.parent / "cortex" / "store"
        if not store.exists():
            raise NotAvailable("needs the cortex store of the same size (run cortex first)")
        self.ds = ds
        self.notes: list[str] = []
        log("  reading cortex's bytes (untimed)")
        self.groups = capture(store, ds.n + len(ds.extra))
        if len(self.groups) < ds.n:
            raise NotAvailable(f"the cortex store holds {len(self.groups)} of {ds.n} memories")
        self.ids = {g[0]: i for i, g in enumerate(self.groups)}
        path.mkdir(parents=True, exist_ok=True)
        self.env = lmdb.open(str(path / "lmdb"), map_size=_MAP, max_dbs=2, sync=True, metasync=True)
        self.main = self.env.open_db(b"main")
        self.vec = self.env.open_db(b"vec")
        self.chunks: list[np.ndarray] = []
        self.matrix = np.zeros((0, ds.vectors.shape[1]), np.float32)
        self.type_codes = {t: k + 1 for k, t in enumerate(TYPES)}
        self.rss_baseline = reset_peak()  # cortex's bytes held for the puts are not the floor's

    def vector_bytes(self) -> int:
        """Bytes of the vector database (cortex holds no vectors yet: compare without them)."""
        with self.env.begin() as txn:
            s = txn.stat(self.vec)
        return int(s["psize"] * (s["branch_pages"] + s["leaf_pages"] + s["overflow_pages"]))

    def _put(self, txn: Any, i: int) -> None:
        mid, puts = self.groups[i]
        for k, v in puts:
            txn.put(k, v, db=self.main)
        txn.put(mid, self.ds.vectors[i].tobytes(), db=self.vec)

    def ingest_batch(self, start: int, stop: int) -> None:
        """Write records ``start`` to ``stop`` in one durable transaction."""
        with self.env.begin(write=True) as txn:
            for i in range(start, stop):
                self._put(txn, i)
        self.chunks.append(self.ds.vectors[start:stop].copy())

    def after_ingest(self) -> None:
        """Finish the bulk load (untimed)."""
        self.matrix = np.vstack(self.chunks)
        self.chunks = []
        types = np.array([self.type_codes[t] for t in self.ds.types[: self.ds.n]])
        self.by_type = {
            t: np.flatnonzero(types == c).astype(np.int64) for t, c in self.type_codes.items()
        }
        self.sub = {t: self.matrix[ix] for t, ix in self.by_type.items()}

    def ingest_one(self, i: int) -> None:
        """Write record ``i`` in a durable transaction of its own."""
        with self.env.begin(write=True) as txn:
            self._put(txn, i)

    def prepare(self, workload: str) -> None:
        """Get ready for a workload (untimed)."""
        pass

    def _read(self, txn: Any, mid: bytes) -> tuple[Any, Any]:
        head = cbor2.loads(bytes(txn.get(head_key_raw(mid), db=self.main))[:-4])
        ver = cbor2.loads(bytes(txn.get(version_raw(mid, head[3]), db=self.main))[:-4])
        return head, cbor2.loads(ver[4])

    def get(self, i: int) -> Any:
        """Read record ``i`` in full by its id."""
        with self.env.begin() as txn:
            return self._read(txn, self.groups[i][0])

    def find(self, type_: str, tag: str, limit: int) -> list[int]:
        """Up to ``limit`` records of a type with a tag, newest first."""
        code = self.type_codes[type_]
        # cortex's tag keys (format 4) put the type after the tag: the same prefix scan
        pfx = IDX_TAG + tag_hash(tag) + bytes((code,))
        found: list[int] = []
        with self.env.begin() as txn, txn.cursor(db=self.main) as cur:
            end = pfx + b"\xff" * 40
            ok = cur.set_range(end)
            ok = cur.prev() if ok else cur.last()
            while ok:
                key = bytes(cur.key())
                if not key.startswith(pfx):
                    break
                mid = key[-16:]
                head = cbor2.loads(bytes(txn.get(head_key_raw(mid), db=self.main))[:-4])
                if head[2] == code:
                    self._read(txn, mid)
                    found.append(self.ids[mid])
                    if len(found) == limit:
                        break
                ok = cur.prev()
        return found

    def text(self, q: str, k: int) -> list[int]:
        """Text search: the top ``k`` records for ``q``."""
        raise NotAvailable("no text index in the floor")

    def vector(self, j: int, k: int, type_: str | None) -> list[int]:
        """Vector search for query vector ``j``, optionally within one type."""
        q = self.ds.query_vectors[j]
        if type_ is None:
            scores = self.matrix @ q
            top = np.argpartition(-scores, k)[:k]
            top = top[np.argsort(-scores[top])]
        else:
            scores = self.sub[type_] @ q
            t = np.argpartition(-scores, k)[:k]
            top = self.by_type[type_][t[np.argsort(-scores[t])]]
        with self.env.begin() as txn:
            for i in top:
                self._read(txn, self.groups[int(i)][0])
        return [int(i) for i in top]

    def hybrid(self, q: str, j: int, k: int) -> list[int]:
        """Text and vector search combined."""
        raise NotAvailable("no text index in the floor")

    def context(self, q: str, j: int) -> Any:
        """The ``context`` bundle for a query (cortex only)."""
        raise NotAvailable("cortex only")

    def close(self) -> None:
        """Close the store."""
        self.env.close()


def head_key_raw(mid: bytes) -> bytes:
    """The floor's head key of a raw 16-byte id (formats 1-20's layout).

    Cortex's format 21 keys the head by the memory's row, found in ``id/``.
    """
    return HEAD + mid


def version_raw(mid: bytes, n: int) -> bytes:
    """The floor's version key of a raw id (formats 1-20's layout; see ``head_key_raw``)."""
    return VERSION + mid + b"/v/" + n.to_bytes(8, "big")
