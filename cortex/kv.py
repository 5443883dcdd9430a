"""The ordered key-value layer under the store, and its LMDB implementation.

The store speaks only this interface (get, put, delete, ordered scans, atomic write
transactions, read snapshots), so another engine with bytewise-ordered keys can replace LMDB
without touching the layers above. Every stored value wears the same envelope (``seal``):
its payload and a CRC-32, so damage raises ``IntegrityError`` on read (``specs/storage.md`` §3).
"""

from __future__ import annotations

import mmap
import os
import shutil
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from operator import itemgetter
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, TypeVar, cast

import lmdb

from cortex import scrub as _scrub
from cortex.errors import CortexError, IntegrityError, StoreFullError
from cortex.keys import prefix_end, show_key

__all__ = ["KV", "LmdbKV", "ReadTxn", "WriteTxn", "Zeroed", "seal", "unseal"]

try:
    from cortex import _speedups as _sp
except ImportError:  # pragma: no cover - installed without a C compiler
    _sp = None  # type: ignore[assignment]

_USE_SPEEDUPS: bool = _sp is not None and all(
    hasattr(_sp, name) for name in ("seal", "unseal", "sort_pairs")
)
"""Seal, unseal and sort pairs through the C accelerator (the same CRC-32, the same order; an
older build lacks them: zlib and list.sort here)."""

T = TypeVar("T")

_MIN_MAP: int = 64 << 20
_MAX_MAP: int = 1 << 40  # 1 TiB of address space; LMDB only reserves it
_NEVER: Any = object()  # no write through this environment yet


def seal(payload: bytes) -> bytes:
    """The stored form of a value: ``payload || crc32(payload)`` (4 bytes, big-endian)."""
    if _USE_SPEEDUPS and type(payload) is bytes:
        sealed: bytes = _sp.seal(payload)
        return sealed
    return payload + zlib.crc32(payload).to_bytes(4, "big")


def unseal(key: bytes, value: bytes) -> bytes:
    """The payload of a sealed value, checked.

    Raises:
        IntegrityError: the value fails its checksum (naming ``key``).
    """
    if _USE_SPEEDUPS and type(value) is bytes:
        checked: bytes | None = _sp.unseal(value)
        if checked is not None:
            return checked
    else:
        payload = value[:-4]
        if len(value) >= 5 and zlib.crc32(payload).to_bytes(4, "big") == value[-4:]:
            return payload
    raise IntegrityError(f"record {show_key(key)} fails its checksum: the store is damaged")


def sort_by_key(pairs: list[tuple[bytes, Any]]) -> None:
    """Sort ``(key, value)`` pairs in place by key, stably.

    ``WriteTxn.put_many`` is fastest so: each put lands beside the last, without a search from
    the root of the tree.
    """
    if _USE_SPEEDUPS:
        _sp.sort_pairs(pairs)
    else:
        pairs.sort(key=itemgetter(0))


class ReadTxn(Protocol):
    """A consistent snapshot of the store."""

    def get(self, key: bytes) -> bytes | None:
        """The value under ``key`` or ``None``."""

    def scan(
        self, prefix: bytes, *, start: bytes | None = None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        """Pairs whose key starts with ``prefix``, in key order (or reverse).

        ``start`` (a full key, inclusive) skips ahead: forward scans begin at the first key
        >= start, reverse scans at the last key <= start.
        """

    def keys(
        self, prefix: bytes, *, start: bytes | None = None, reverse: bool = False
    ) -> Iterator[bytes]:
        """Keys starting with ``prefix``, like ``scan`` without reading values."""

    def seek(self, prefix: bytes, start: bytes, *, reverse: bool = False) -> bytes | None:
        """The first key ``scan(prefix, start=start, reverse=reverse)`` would yield, or None.

        Cheaper than ``next(keys(...))`` for many point seeks (index joins): the
        implementation may reuse one cursor.
        """

    def around(self, prefix: bytes, key: bytes) -> tuple[bytes | None, bytes | None, bytes | None]:
        """``(k0, v0, k1)``: the last pair at or before ``key`` and the first key after it.

        ``key`` starts with ``prefix``; each is None where there is no such key within
        ``prefix``. One positioning, for a writer that reads the block a key falls in and
        needs to know what follows it.
        """


class WriteTxn(ReadTxn, Protocol):
    """A write transaction: all of it commits, or none of it."""

    def put(self, key: bytes, value: bytes, *, overwrite: bool = True) -> bool:
        """Store ``value``; with ``overwrite=False`` keep an existing value and return False."""

    def delete(self, key: bytes) -> bool:
        """Remove ``key``; False when it was absent."""

    def put_many(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        """Store every ``(key, value)`` pair, overwriting; fastest when the keys are sorted."""

    def add_many(self, items: Iterable[tuple[bytes, bytes]]) -> int:
        """Store each pair whose key is absent (an existing value is kept); how many were added.

        A key given twice is added once. Fastest when the keys are sorted.
        """


class KV(Protocol):
    """An ordered key-value engine."""

    def read(self) -> Any:
        """A context manager giving a ``ReadTxn`` snapshot."""

    def write(self, fn: Callable[[WriteTxn], T]) -> T:
        """Run ``fn`` in one write transaction; grow the map and re-run it on ``MapFullError``.

        With an ``epoch_prefix``, a change of the last key under it since this environment's
        last write (an erasure: ``specs/storage.md`` §9) first renews the environment, so that
        no page buffer of an earlier write carries erased bytes into the pages this one writes.
        """
        self._check_fork()
        if self.readonly:
            raise CortexError("the store is open read-only")
        while True:
            txn = self._begin(write=True)
            renew = False
            try:
                epoch = None
                if self._epoch_prefix is not None:
                    epoch = self._epoch(txn)
                    renew = self._epoch_seen is not _NEVER and epoch != self._epoch_seen
                if renew:
                    txn.abort()
                else:
                    result = fn(_LmdbTxn(txn))
                    txn.commit()
                    if self._epoch_prefix is not None:
                        self._epoch_seen = epoch
                    return result
            except lmdb.MapFullError:
                txn.abort()
                full_at = int(self._env.info()["map_size"])
            except lmdb.Error as exc:
                txn.abort()
                raise _wrap(exc) from exc
            except BaseException:
                txn.abort()
                raise
            finally:
                self._gate.leave()
            if renew:
                self._renew()
            else:
                self._grow(full_at)

    def _epoch(self, txn: lmdb.Transaction) -> bytes | None:
        prefix = self._epoch_prefix
        assert prefix is not None
        with txn.cursor() as cur:
            end = prefix_end(prefix)
            found = cur.set_range(end) if end is not None else False
            moved = cur.prev() if found else cur.last()
            if not moved:
                return None
            key = bytes(cur.key())
            return key if key.startswith(prefix) else None

    def renew(self) -> None:
        """Close and reopen the environment: LMDB frees the page buffers it recycles.

        A writer builds each page it writes in a buffer it keeps from earlier writes, and the
        unused part of the page is written as the buffer left it. After an erasure those
        buffers may hold erased bytes; a fresh environment's buffers start zeroed. Waits for
        this process's other transactions; a thread that holds one itself renews nothing.
        """
        self._renew()

    def _renew(self) -> None:
        try:
            with self._gate.exclusive():
                size = int(self._env.info()["map_size"])
                self._env.close()
                self._env = self._open(size, create=False)
                self._epoch_seen = _NEVER
        except CortexError:
            if getattr(self._gate._mine, "n", 0):
                return  # this thread holds a transaction: renew at its next write instead
            raise

    def _begin(self, *, write: bool) -> lmdb.Transaction:
        """Begin a transaction; the caller ends it, then calls ``self._gate.leave()``."""
        for _ in range(3):
            self._gate.enter()
            try:
                return self._env.begin(write=write)
            except lmdb.MapResizedError:
                self._gate.leave()
            except lmdb.Error as exc:
                self._gate.leave()
                raise _wrap(exc) from exc
            except BaseException:
                self._gate.leave()
                raise
            # another process grew the map: adopt its size and try again
            with self._gate.exclusive():
                try:
                    self._env.set_mapsize(0)
                except lmdb.Error as exc:
                    raise _wrap(exc) from exc
        raise CortexError("the store's map keeps changing size under us; retry")

    def _grow(self, full_at: int) -> None:
        with self._gate.exclusive():
            size = int(self._env.info()["map_size"])
            if size > full_at:  # another thread grew it meanwhile
                return
            if size >= _MAX_MAP:
                raise StoreFullError(f"the store reached its size limit of {_MAX_MAP} bytes")
            try:
                self._env.set_mapsize(min(size * 2, _MAX_MAP))
            except lmdb.Error as exc:
                raise StoreFullError(f"cannot grow the store beyond {size} bytes: {exc}") from exc

    # -- housekeeping ------------------------------------------------------------------------

    def info(self) -> dict[str, int]:
        """Map size, pages in use and reader counts."""
        info = self._env.info()
        stat = self._env.stat()
        return {
            "map_size": int(info["map_size"]),
            "last_txnid": int(info["last_txnid"]),
            "readers": int(info["num_readers"]),
            "entries": int(stat["entries"]),
            "used_bytes": int(stat["psize"])
            * (
                int(stat["branch_pages"])
                + int(stat["leaf_pages"])
                + int(stat["overflow_pages"])
                + 2  # the two meta pages
            ),
        }

    def snapshots(self) -> list[tuple[int, int]]:
        """``(pid, txn id)`` of every open read snapshot of the store, in any process."""
        self._check_fork()
        if not self.readonly:
            try:
                self._env.reader_check()  # slots of processes that died hold nothing
            except lmdb.Error as exc:
                raise _wrap(exc) from exc
        out: list[tuple[int, int]] = []
        for line in self._env.readers().splitlines()[1:]:
            parts = line.split()
            if len(parts) == 3 and parts[0].isdigit() and parts[2].isdigit():
                out.append((int(parts[0]), int(parts[2])))
        return out

    def last_txnid(self) -> int:
        """The id of the last committed write transaction."""
        return int(self._env.info()["last_txnid"])

    def wait_for_snapshots(self, newer_than: int, timeout: float) -> list[tuple[int, int]]:
        """Wait until no read snapshot is at ``newer_than`` or older; those left at the end.

        Snapshots are short (a read, a search); one that stays open longer than ``timeout``
        seconds is returned instead of waited for.
        """
        deadline = time.monotonic() + max(0.0, timeout)
        delay = 0.001
        while True:
            old = [(pid, t) for pid, t in self.snapshots() if t <= newer_than]
            if not old or time.monotonic() >= deadline:
                return old
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    @contextmanager
    def _file_under_lock(self) -> Iterator[tuple[int, Any, int, int]]:
        """``(fd, mmap, page size, oldest)`` of ``data.mdb`` while this process holds LMDB's
        writer lock (an empty write transaction): no commit changes the file meanwhile.

        ``oldest`` is LMDB's own bound for reusing a free page: the smaller of the last
        committed transaction id and every open read snapshot's.
        """
        self._check_fork()
        if self.readonly:
            raise CortexError("the store is open read-only: open it writable to erase")
        _scrub.check_host()
        txn = self._begin(write=True)
        fd = -1
        buf: mmap.mmap | None = None
        try:
            last = self.last_txnid()
            oldest = min([last, *(t for _, t in self.snapshots())])
            psize = int(self._env.stat()["psize"])
            fd = os.open(self.path / "data.mdb", os.O_RDWR)
            size = os.fstat(fd).st_size
            buf = mmap.mmap(fd, size, prot=mmap.PROT_READ)
            yield fd, buf, psize, oldest
        except lmdb.Error as exc:
            raise _wrap(exc) from exc
        except OSError as exc:
            raise CortexError(f"cannot erase in {self.path / 'data.mdb'}: {exc}") from exc
        finally:
            if buf is not None:
                buf.close()
            if fd >= 0:
                os.close(fd)
            txn.abort()
            self._gate.leave()

    def zero_unused(self) -> tuple[_scrub.ZeroCounts, list[tuple[int, int]]]:
        """Zero every byte of ``data.mdb`` no reader can read again (``cortex.scrub``).

        Holds the writer lock while it runs (writers wait; readers go on). Free pages a read
        snapshot or the previous meta page may still read are left (only their gaps are
        zeroed): the counts say how many, and the snapshots holding them are returned.

        Raises:
            LayoutError: the file does not parse as LMDB 0.9 (nothing is written).
            CortexError: the store is read-only or the file cannot be written.
        """
        with self._file_under_lock() as (fd, buf, psize, oldest):
            layout = _scrub.read_layout(buf, psize, len(buf), oldest)
            counts = _scrub.zero(fd, buf, layout)
            holding = [(pid, t) for pid, t in self.snapshots() if t < layout.meta.txnid]
        return counts, holding

    def inspect(self, fn: Callable[[Any, _scrub.Layout], T]) -> T:
        """Run ``fn(buffer, layout)`` on ``data.mdb`` under the writer lock (for an audit).

        ``buffer`` is a read-only map of the file, valid only during the call.
        """
        with self._file_under_lock() as (_, buf, psize, oldest):
            return fn(buf, _scrub.read_layout(buf, psize, len(buf), oldest))

    def copy(self, dest: str | os.PathLike[str]) -> None:
        """Write a consistent, compacted copy to the directory ``dest`` (writers may continue)."""
        self._check_fork()
        Path(dest).mkdir(parents=True, exist_ok=False)
        self._gate.enter()  # the copy runs its own read transaction
        try:
            self._env.copy(str(dest), compact=True)
        except lmdb.Error as exc:
            shutil.rmtree(dest, ignore_errors=True)  # we made it: leave no half copy behind
            raise _wrap(exc) from exc
        finally:
            self._gate.leave()

    def sync(self) -> None:
        """Flush to disk (needed only after commits made with ``metasync=False``)."""
        self._env.sync(True)

    def close(self) -> None:
        """Close the environment (only in the process that opened it)."""
        if os.getpid() == self._pid:
            self._env.close()


def _wrap(exc: lmdb.Error) -> CortexError:
    if isinstance(exc, lmdb.MapFullError | lmdb.DiskError):
        return StoreFullError(f"the store cannot grow: {exc}")
    if isinstance(exc, lmdb.CorruptedError | lmdb.PageNotFoundError | lmdb.InvalidError):
        return IntegrityError(f"LMDB reports damage: {exc}; restore from a backup")
    return CortexError(f"storage engine error: {exc}")
