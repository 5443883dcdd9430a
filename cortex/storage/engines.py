"""Where a store lives: an LMDB directory or a PostgreSQL table, named by a path or a URL.

``open_kv`` opens either engine behind the one KV interface; ``exists`` tells whether a store
is there; ``copy_kv`` copies every record of one store into a new one, on either engine, whole
or not at all, and checks the copy record for record.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from cortex.errors import CortexError
from cortex.storage.kv import LmdbKV
from cortex.storage.pages import damage_error
from cortex.storage.pgkv import PgKV, is_url

__all__ = ["CopyReport", "copy_kv", "exists", "is_url", "open_kv", "vectors_root"]

_CHUNK = 8192


def open_kv(
    target: str | os.PathLike[str],
    *,
    readonly: bool = False,
    metasync: bool = True,
    map_size: int = 64 << 20,
    create: bool = True,
    check_pages: bool = True,
    epoch_prefix: bytes | None = None,
) -> Any:
    """The engine for ``target``: ``postgresql://...?store=NAME`` or an LMDB directory.

    ``metasync``, ``map_size``, ``check_pages`` and ``epoch_prefix`` are LMDB's options;
    PostgreSQL accepts and ignores them (the server keeps its own files: it flushes every
    commit, grows its tables, and reports a damaged page as an error, never a crash;
    ``specs/postgres.md``).
    """
    if is_url(target):
        return PgKV(str(target), readonly=readonly, create=create)
    return LmdbKV(
        target,
        readonly=readonly,
        metasync=metasync,
        map_size=map_size,
        create=create,
        check_pages=check_pages,
        epoch_prefix=epoch_prefix,
    )


def exists(target: str | os.PathLike[str]) -> bool:
    """Whether a store (initialised or not) is at ``target``.

    Raises:
        CortexError: a URL's server cannot be reached.
    """
    if is_url(target):
        try:
            kv = PgKV(str(target), create=False)
        except CortexError as exc:
            if str(exc).startswith("no store at"):
                return False
            raise
        kv.close()
        return True
    return (Path(target) / "data.mdb").exists()


def vectors_root(kv: Any) -> Path | None:
    """Where the vector index cache of ``kv``'s store lives (None: kept in memory only)."""
    if isinstance(kv, PgKV):
        if kv.url.vectors is None:
            return None
        return Path(kv.url.vectors) / kv.table
    return Path(kv.path)


def _put_all(kv: LmdbKV, pairs: list[tuple[bytes, bytes]]) -> None:
    def fn(txn: Any) -> None:
        txn.put_many(pairs)

    kv.write(fn)


class CopyReport:
    """What ``copy_kv`` copied: ``records`` pairs, ``bytes`` of keys and values, the digest."""

    def __init__(self, records: int, size: int, digest: str) -> None:
        self.records = records
        self.bytes = size
        self.digest = digest


def _digest_pairs(pairs: Iterator[tuple[bytes, bytes]], into: Any) -> Iterator[tuple[bytes, bytes]]:
    for k, v in pairs:
        into.update(len(k).to_bytes(4, "big") + k + len(v).to_bytes(4, "big") + v)
        yield k, v


def copy_kv(
    src: Any,
    dest: str | os.PathLike[str],
    *,
    progress: Callable[[int, int], None] | None = None,
) -> CopyReport:
    """Copy every record of the open engine ``src`` (one read snapshot) into a new store.

    All or nothing: an LMDB copy is built in a directory beside ``dest`` and renamed into
    place; a PostgreSQL copy is loaded in one transaction. The copy is then read back and its
    digest of every key and value compared with the source's.

    Args:
        src: an open engine (``LmdbKV`` or ``PgKV``).
        dest: a new LMDB directory (it must not exist) or a URL naming an absent or empty store.
        progress: called as ``progress(done, total)`` in records.

    Raises:
        IntegrityError: the source's pages are structurally damaged (LMDB would crash walking
            them; ``cortex salvage`` recovers what is intact).
        CortexError: ``dest`` exists and holds records, or the copy does not match.
    """
    with src.read_checked() as txn:
        if txn.damage:  # a whole-store walk: checked first (``specs/storage.md`` §9)
            raise damage_error(src.path, txn.damage)
        total = sum(1 for _ in txn.keys(b""))
    h = hashlib.sha256()
    done = 0

    def counted(pairs: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[bytes, bytes]]:
        nonlocal done
        for pair in pairs:
            done += 1
            if progress is not None and done % 1000 == 0:
                progress(done, total)
            yield pair

    if is_url(dest):
        dst = PgKV(str(dest), create=True)
        try:
            with src.read() as txn:
                n, size = dst.load(counted(_digest_pairs(txn.scan(b""), h)))
        finally:
            dst.close()
    else:
        target = Path(dest)
        if target.exists():
            raise CortexError(f"{target} exists; a copy goes into a new directory")
        part = target.with_name(f".{target.name}.{os.getpid()}.partial")
        shutil.rmtree(part, ignore_errors=True)
        try:
            n = size = 0
            dst_l = LmdbKV(part, map_size=max(64 << 20, 2 * int(src.info()["used_bytes"])))
            try:
                with src.read() as txn:
                    batch: list[tuple[bytes, bytes]] = []
                    for k, v in counted(_digest_pairs(txn.scan(b""), h)):
                        batch.append((k, v))
                        n += 1
                        size += len(k) + len(v)
                        if len(batch) >= _CHUNK:
                            _put_all(dst_l, batch)
                            batch = []
                    if batch:
                        _put_all(dst_l, batch)
            finally:
                dst_l.close()
            part.rename(target)
        except BaseException:
            shutil.rmtree(part, ignore_errors=True)
            raise
    if progress is not None:
        progress(done, total)
    # read the copy back: every key and value, in order
    back = hashlib.sha256()
    kv = open_kv(dest, readonly=True, create=False)
    try:
        with kv.read() as txn:
            for _ in _digest_pairs(txn.scan(b""), back):
                pass
    finally:
        kv.close()
    if back.hexdigest() != h.hexdigest():
        raise CortexError(
            f"the copy at {dest} does not read back as the source did (digest mismatch); "
            "remove it and copy again"
        )
    return CopyReport(n, size, h.hexdigest())
