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
from contextlib import contextmanager, suppress
from operator import itemgetter
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, TypeVar, cast

import lmdb

from cortex import scrub as _scrub
from cortex.errors import CortexError, IntegrityError, StoreFullError
from cortex.keys import prefix_end, show_key

__all__ = ["KV", "LmdbKV", "ReadTxn", "WriteTxn", "seal", "unseal"]

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
        """Run ``fn`` in one write transaction and commit; ``fn`` may be run again on retry."""

    def copy(self, dest: str | os.PathLike[str]) -> None:
        """Write a consistent, compacted copy to the new directory ``dest``."""

    def close(self) -> None:
        """Release the engine."""


class _LmdbTxn:
    """Wraps an lmdb.Transaction; copies every buffer to ``bytes`` at the boundary."""

    __slots__ = ("_cur", "_txn")

    def __init__(self, txn: lmdb.Transaction) -> None:
        self._txn = txn
        self._cur: lmdb.Cursor | None = None

    def seek(self, prefix: bytes, start: bytes, *, reverse: bool = False) -> bytes | None:
        cur = self._cur
        if cur is None:
            cur = self._cur = self._txn.cursor()
        if not self._position(cur, prefix, start, reverse):
            return None
        k = bytes(cur.key())
        return k if k.startswith(prefix) else None

    def cursor(self) -> lmdb.Cursor:
        """The transaction's cursor (set_range, key, value, next, prev, last).

        For the C accelerator's batch walks (``cortex.postings.apply_many``); an engine without
        such a cursor has no ``cursor`` method.
        """
        cur = self._cur
        if cur is None:
            cur = self._cur = self._txn.cursor()
        return cur

    def around(self, prefix: bytes, key: bytes) -> tuple[bytes | None, bytes | None, bytes | None]:
        cur = self._cur
        if cur is None:
            cur = self._cur = self._txn.cursor()
        k0 = v0 = k1 = None
        if cur.set_range(key):
            if cur.key() == key:
                k0, v0 = key, bytes(cur.value())
                if cur.next():
                    k1 = bytes(cur.key())
            else:
                k1 = bytes(cur.key())
                if cur.prev():
                    k0, v0 = bytes(cur.key()), bytes(cur.value())
        elif cur.last():
            k0, v0 = bytes(cur.key()), bytes(cur.value())
        if k0 is not None and not k0.startswith(prefix):
            k0 = v0 = None
        if k1 is not None and not k1.startswith(prefix):
            k1 = None
        return k0, v0, k1

    def get(self, key: bytes) -> bytes | None:
        v = self._txn.get(key)
        return None if v is None else bytes(v)

    def scan(
        self, prefix: bytes, *, start: bytes | None = None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        with self._txn.cursor() as cur:
            if not self._position(cur, prefix, start, reverse):
                return
            # the iterators yield the current pair first; they run in C, and without
            # ``buffers=True`` they yield bytes (copies), so nothing outlives the transaction
            pairs = cast(
                Iterator[tuple[bytes, bytes]], cur.iterprev() if reverse else cur.iternext()
            )
            for k, v in pairs:
                if not k.startswith(prefix):
                    return
                yield k, v

    def keys(
        self, prefix: bytes, *, start: bytes | None = None, reverse: bool = False
    ) -> Iterator[bytes]:
        with self._txn.cursor() as cur:
            if not self._position(cur, prefix, start, reverse):
                return
            keys = cast(
                Iterator[bytes],
                cur.iterprev(values=False) if reverse else cur.iternext(values=False),
            )
            for k in keys:
                if not k.startswith(prefix):
                    return
                yield k

    @staticmethod
    def _position(cur: lmdb.Cursor, prefix: bytes, start: bytes | None, reverse: bool) -> bool:
        if not reverse:
            return bool(cur.set_range(start if start is not None and start > prefix else prefix))
        # reverse: land on the last key <= bound
        bound = start
        if bound is not None and not bound.startswith(prefix):
            # a start outside the prefix lies wholly before or after its keys; landing on the
            # last key <= start would stop at a key of some other prefix in between
            if bound < prefix:
                return False
            bound = None
        if bound is None:
            end = prefix_end(prefix) if prefix.strip(b"\xff") else None
            if end is None or not cur.set_range(end):
                return bool(cur.last())
            return bool(cur.prev())
        if cur.set_range(bound):
            if cur.key() == bound:
                return True
            return bool(cur.prev())
        return bool(cur.last())

    def put(self, key: bytes, value: bytes, *, overwrite: bool = True) -> bool:
        return bool(self._txn.put(key, value, overwrite=overwrite))

    def delete(self, key: bytes) -> bool:
        return bool(self._txn.delete(key))

    def put_many(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        # one call into the engine for the whole batch; in key order LMDB's inserts stay local
        with self._txn.cursor() as cur:
            cur.putmulti(items)

    def add_many(self, items: Iterable[tuple[bytes, bytes]]) -> int:
        with self._txn.cursor() as cur:
            return int(cur.putmulti(items, overwrite=False)[1])


class _Gate:
    """Counts this process's live transactions so that a remap of the map waits for none.

    LMDB's ``mdb_env_set_mapsize`` unmaps and remaps the file: any transaction of this process
    still running (another thread's reader, or a writer that took the lock meanwhile) would then
    read unmapped memory. py-lmdb leaves that check to the caller.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()  # a plain lock: its with-statement costs no Python call
        self._cond = threading.Condition(self._lock)
        self._active = 0
        self._remapping = False
        self._mine = threading.local()

    def enter(self) -> None:
        with self._lock:
            while self._remapping:
                self._cond.wait()
            self._active += 1
        mine = self._mine
        mine.n = getattr(mine, "n", 0) + 1

    def leave(self) -> None:
        self._mine.n -= 1
        with self._lock:
            self._active -= 1
            if not self._active and self._remapping:  # a remap waits for the last one
                self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        if getattr(self._mine, "n", 0):
            raise CortexError(
                "the map must be resized while this thread holds a transaction of the same "
                "store; end the transaction first"
            )
        with self._cond:
            while self._remapping:
                self._cond.wait()
            self._remapping = True
            while self._active:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._remapping = False
                self._cond.notify_all()


class _Read:
    """``LmdbKV.read()``: begins a read transaction on entry, ends it on exit."""

    __slots__ = ("_kv", "_txn")

    def __init__(self, kv: LmdbKV) -> None:
        self._kv = kv
        self._txn: lmdb.Transaction | None = None

    def __enter__(self) -> _LmdbTxn:
        kv = self._kv
        kv._check_fork()
        self._txn = kv._begin(write=False)
        return _LmdbTxn(self._txn)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        txn, self._txn = self._txn, None
        try:
            if isinstance(exc, lmdb.Error):  # e.g. a damaged page met while reading
                raise _wrap(exc) from exc
        finally:
            if txn is not None:
                txn.abort()
                self._kv._gate.leave()


class LmdbKV:
    """LMDB as the ordered KV engine.

    Durable by default: every commit is fsynced (data and meta pages). ``metasync=False`` skips
    the flush of the meta page: a commit is then at risk until the next durable commit, and an
    operating-system crash (not a process crash) may roll back the last transaction(s), but the
    store is never corrupted. The map grows by doubling when full, without failing the write.
    Several threads and processes may use one store; an environment inherited across ``fork()``
    must not be used: the child reopens the store.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        readonly: bool = False,
        metasync: bool = True,
        map_size: int = _MIN_MAP,
        create: bool = True,
        epoch_prefix: bytes | None = None,
    ) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self._metasync = metasync
        self._epoch_prefix = epoch_prefix
        self._epoch_seen: Any = _NEVER
        if not readonly and create:
            self.path.mkdir(parents=True, exist_ok=True)
        elif not (self.path / "data.mdb").exists():
            raise CortexError(f"no store at {self.path} (data.mdb missing)")
        self._pid = os.getpid()
        self._gate = _Gate()
        self._env = self._open(max(map_size, _MIN_MAP), create=create and not readonly)

    def _open(self, map_size: int, *, create: bool) -> lmdb.Environment:
        try:
            env = lmdb.open(
                str(self.path),
                map_size=map_size,
                subdir=True,
                readonly=self.readonly,
                metasync=self._metasync,
                sync=True,
                lock=True,
                max_dbs=0,
                max_readers=256,
                create=create,
                max_spare_txns=4,
            )
            if not self.readonly:
                env.reader_check()  # clear reader slots of processes that died
        except lmdb.Error as exc:
            raise CortexError(f"cannot open the store at {self.path}: {exc}") from exc
        return env

    # -- transactions ------------------------------------------------------------------------

    def _check_fork(self) -> None:
        if os.getpid() != self._pid:
            raise CortexError(
                "this store was opened before fork(); an LMDB environment must not cross a fork: "
                "open the store in a process started with spawn (multiprocessing) or after exec"
            )

    def read(self) -> _Read:
        """A read snapshot, as a context manager (keep it short: it pins pages until it ends)."""
        return _Read(self)

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
                    # only this write holds a transaction of this thread: it can renew (a
                    # thread inside a read snapshot renews at a later write instead)
                    renew = (
                        self._epoch_seen is not _NEVER
                        and epoch != self._epoch_seen
                        and self._gate._mine.n == 1
                    )
                if renew:
                    txn.abort()
                else:
                    result = fn(_LmdbTxn(txn))
                    txn.commit()
                    if self._epoch_prefix is not None and self._gate._mine.n == 1:
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

    def _renew(self) -> None:
        """Close and reopen the environment: LMDB frees the page buffers it recycles.

        A writer builds each page it writes in a buffer kept from earlier writes, and the
        unused part of the page is written as the buffer left it. After an erasure those
        buffers may hold erased bytes; a fresh environment's buffers start zeroed. Waits for
        this process's other transactions.
        """
        if getattr(self._gate._mine, "n", 0):
            return  # this thread holds a transaction: it renews at a later write instead
        with self._gate.exclusive():
            size = int(self._env.info()["map_size"])
            self._env.close()
            self._env = self._open(size, create=False)
            self._epoch_seen = _NEVER

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
    def _file_under_lock(self) -> Iterator[tuple[int, Any, int, int, list[tuple[int, int]]]]:
        """``data.mdb`` under LMDB's writer lock: ``(fd, mmap, page size, oldest, snapshots)``.

        The lock is held by an empty write transaction: no commit changes the file meanwhile.

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
            snapshots = self.snapshots()
            oldest = min([last, *(t for _, t in snapshots)])
            psize = int(self._env.stat()["psize"])
            fd = os.open(self.path / "data.mdb", os.O_RDWR)
            size = os.fstat(fd).st_size
            buf = mmap.mmap(fd, size, prot=mmap.PROT_READ)
            yield fd, buf, psize, oldest, snapshots
        except lmdb.Error as exc:
            raise _wrap(exc) from exc
        except OSError as exc:
            raise CortexError(f"cannot erase in {self.path / 'data.mdb'}: {exc}") from exc
        finally:
            if buf is not None:
                with suppress(BufferError):  # a view still held (an error on its way out):
                    buf.close()  # the map closes when the view goes
            if fd >= 0:
                os.close(fd)
            txn.abort()
            self._gate.leave()

    def zero_unused(self) -> tuple[_scrub.ZeroCounts, list[tuple[int, int]]]:
        """Zero every byte of ``data.mdb`` no reader can read again (``cortex.scrub``).

        Holds the writer lock while it runs (writers wait; readers go on). Free pages a read
        snapshot or the previous meta page may still read are left (only their gaps are
        zeroed): the counts say how many. Returns the counts and ``(pid, txn id)`` of every
        read snapshot open at the time.

        Raises:
            LayoutError: the file does not parse as LMDB 0.9 (nothing is written).
            CortexError: the store is read-only or the file cannot be written.
        """
        with self._file_under_lock() as (fd, buf, psize, oldest, snapshots):
            layout = _scrub.read_layout(buf, psize, len(buf), oldest)
            counts = _scrub.zero(fd, buf, layout)
        return counts, snapshots

    def refresh_separators(self, txn: WriteTxn, prefixes: tuple[bytes, ...]) -> int:
        """Rewrite the subtrees under separators that name deleted keys with ``prefixes``.

        Call it inside ``write(fn)`` (``txn`` is that transaction; nothing else is committed
        meanwhile, so the file holds the tree ``txn`` started from). A separator is a copy of a
        key in a branch page (``cortex.scrub.separators``); when the key was deleted the copy
        stays. Deleting every key under it and putting them back with the same values makes
        LMDB merge or rebalance those pages, which drops the stale copy; the store's contents
        do not change. Returns how many stale separators were found.
        """
        psize = int(self._env.stat()["psize"])
        try:
            with (self.path / "data.mdb").open("rb") as f:
                size = os.fstat(f.fileno()).st_size
                with mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ) as buf:
                    layout = _scrub.read_layout(buf, psize, size, 0, details=False)
                    stale = [
                        (key, child)
                        for key, child in _scrub.separators(buf, layout, prefixes)
                        if txn.get(key) is None
                    ]
                    keys: dict[bytes, None] = {}
                    for _, child in stale:
                        keys.update(dict.fromkeys(_scrub.subtree_keys(buf, psize, child)))
        except OSError as exc:
            raise CortexError(f"cannot read {self.path / 'data.mdb'}: {exc}") from exc
        pairs = [(k, v) for k in keys if (v := txn.get(k)) is not None]
        for key, _ in pairs:
            txn.delete(key)
        txn.put_many(pairs)
        return len(stale)

    def inspect(self, fn: Callable[[Any, _scrub.Layout], T]) -> T:
        """Run ``fn(buffer, layout)`` on ``data.mdb`` under the writer lock (for an audit).

        ``buffer`` is a read-only map of the file, valid only during the call.
        """
        with self._file_under_lock() as (_, buf, psize, oldest, _snapshots):
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
