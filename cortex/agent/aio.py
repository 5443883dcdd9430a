"""``AsyncCortex``: the store for asyncio runtimes, every call awaitable and off the event loop.

Each call runs the matching ``Cortex`` call in a worker thread of the handle's own pool, so
the event loop keeps running while LMDB commits, the lexical index is written or a query is
ranked (cortex releases no lock the loop needs; the threads share one environment).

Cancellation: a cancelled read is abandoned (its result is dropped). A cancelled change is
not: the task waits until the change has committed whole or failed whole, then raises
``CancelledError``, so when the cancellation reaches the caller the store is in one of the two
states and never in between (an LMDB transaction is atomic either way).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from datetime import datetime
from types import TracebackType
from typing import Any, Literal, TypeVar

from cortex.agent.api import ChainLink, Conflict, Cortex, ReaderView
from cortex.agent.core import CoreChange
from cortex.agent.ingest import EpisodeLink, IngestResult
from cortex.engine.erasure import ErasureReport, ScrubReport
from cortex.engine.journal import JournalEntry
from cortex.engine.values import Edge, Memory, NewMemory, VerifyReport
from cortex.model.enums import MemoryType, Outcome, Sensitivity, Verb
from cortex.model.ids import MemoryId, Uri, WriteResult
from cortex.model.records import Data, Episode, Head, Tombstone
from cortex.query.context import Bundle
from cortex.query.language import Query, Result, Window
from cortex.query.search import SearchResult
from cortex.rules.aliases import AliasChange, AliasSuggestion
from cortex.rules.salience import SalienceState
from cortex.rules.scope import Reader

__all__ = ["AsyncCortex", "AsyncReaderView"]

T = TypeVar("T")
_WORKERS = 8


async def _read(pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
    """Run a read in the pool; a cancellation abandons it."""
    loop = asyncio.get_running_loop()
    ctx = contextvars.copy_context()  # the caller's task (write budget) goes with the call
    return await loop.run_in_executor(pool, ctx.run, functools.partial(fn, *args, **kw))


async def _change(pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
    """Run a change in the pool; a cancellation waits for it to commit or fail, then raises."""
    loop = asyncio.get_running_loop()
    ctx = contextvars.copy_context()  # the caller's task (write budget) goes with the call
    fut = loop.run_in_executor(pool, ctx.run, functools.partial(fn, *args, **kw))
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        while not fut.done():
            try:
                await asyncio.shield(fut)
            except asyncio.CancelledError:
                continue  # cancelled again: still wait for the transaction to end
            except BaseException:  # the change failed whole; the cancellation still wins
                break
        raise


class AsyncCortex:
    """A ``Cortex`` for asyncio: the same calls, each awaitable and run in a worker thread.

    Open one with ``await AsyncCortex.open(path, actor=..., ...)`` (the options of
    ``Cortex.open``) and use it as an async context manager::

        async with await AsyncCortex.open("agent.cortex", actor="agent-1") as cx:
            uri = await cx.write(Fact(statement="...", subject="ada", predicate="likes"))
            res = await cx.find(Query(text="ada", limit=10))

    ``sync`` is the blocking handle underneath (for code that already runs in a thread).

    Args:
        cx: an open ``Cortex``; ``close`` closes it.
        workers: threads of the pool (reads run side by side; LMDB commits one at a time).
    """

    def __init__(self, cx: Cortex, *, workers: int = _WORKERS) -> None:
        self.sync = cx
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="cortex")

    @classmethod
    async def open(
        cls, path: str | os.PathLike[str], *, workers: int = _WORKERS, **options: Any
    ) -> AsyncCortex:
        """``Cortex.open`` in a thread (opening may embed or rebuild an index)."""
        cx = await asyncio.to_thread(lambda: Cortex.open(path, **options))
        return cls(cx, workers=workers)

    async def close(self) -> None:
        """Wait for running calls, then close the store."""
        await asyncio.to_thread(self._pool.shutdown, wait=True)
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncCortex:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def owner(self) -> str:
        """The actor that owns the store."""
        return self.sync.owner

    @property
    def actor(self) -> str:
        """The handle's actor."""
        return self.sync.actor

    @property
    def path(self) -> str:
        """The store directory."""
        return self.sync.path

    # -- changes (a cancellation waits for the commit) ---------------------------------------

    async def write(self, data: Data, **options: Any) -> WriteResult:
        """``Cortex.write``."""
        return await _change(self._pool, self.sync.write, data, **options)

    async def write_many(self, items: Iterable[NewMemory | Data]) -> list[WriteResult]:
        """``Cortex.write_many``: all of them, or none."""
        return await _change(self._pool, self.sync.write_many, list(items))

    async def update(self, ref: Uri | MemoryId | str, data: Data, **options: Any) -> WriteResult:
        """``Cortex.update``."""
        return await _change(self._pool, self.sync.update, ref, data, **options)

    async def update_head(self, ref: Uri | MemoryId | str, **patch: Any) -> Head:
        """``Cortex.update_head``."""
        return await _change(self._pool, self.sync.update_head, ref, **patch)

    async def tombstone(
        self, ref: Uri | MemoryId | str, reason: str, by: str | None = None, **options: Any
    ) -> Tombstone:
        """``Cortex.tombstone`` (``erase=``, ``wait=``)."""
        return await _change(self._pool, self.sync.tombstone, ref, reason, by, **options)

    async def purge(
        self, ref: Uri | MemoryId | str, reason: str, by: str | None = None, **options: Any
    ) -> Tombstone:
        """``Cortex.purge`` (``scrub=``, ``wait=``)."""
        return await _change(self._pool, self.sync.purge, ref, reason, by, **options)

    async def scrub(self, *, wait: float = 30.0) -> ScrubReport:
        """``Cortex.scrub``: the erasure step, in the pool (it holds the writer lock)."""
        return await _change(self._pool, self.sync.scrub, wait=wait)

    async def attest(
        self, uris: Iterable[Uri | MemoryId | str], outcome: Outcome | str = Outcome.SUCCESS
    ) -> None:
        """``Cortex.attest``."""
        await _change(self._pool, self.sync.attest, list(uris), outcome)

    async def add_edge(self, src: Uri | MemoryId | str, type: Any, dst: Any, **kw: Any) -> Edge:
        """``Cortex.add_edge``."""
        return await _change(self._pool, self.sync.add_edge, src, type, dst, **kw)

    async def remove_edge(self, src: Uri | MemoryId | str, type: Any, dst: Any, **kw: Any) -> Edge:
        """``Cortex.remove_edge``."""
        return await _change(self._pool, self.sync.remove_edge, src, type, dst, **kw)

    async def ingest(self, content: str, **options: Any) -> IngestResult:
        """``Cortex.ingest``: the episode and its memories, all or nothing."""
        return await _change(self._pool, self.sync.ingest, content, **options)

    async def purge_episode(
        self, ref: MemoryId | str, reason: str, by: str | None = None, **options: Any
    ) -> Episode:
        """``Cortex.purge_episode`` (``scrub=``, ``wait=``)."""
        return await _change(self._pool, self.sync.purge_episode, ref, reason, by, **options)

    async def set_episode_sensitivity(
        self, ref: MemoryId | str, sensitivity: Sensitivity | str
    ) -> Episode:
        """``Cortex.set_episode_sensitivity``."""
        return await _change(self._pool, self.sync.set_episode_sensitivity, ref, sensitivity)

    async def core_update(self, section: str, key: str, value: str) -> Uri:
        """``Cortex.core_update``."""
        return await _change(self._pool, self.sync.core_update, section, key, value)

    async def core_delete(self, section: str, key: str) -> Uri:
        """``Cortex.core_delete``."""
        return await _change(self._pool, self.sync.core_delete, section, key)

    async def embed_pending(self) -> int:
        """``Cortex.embed_pending``."""
        return await _change(self._pool, self.sync.embed_pending)

    # -- reads -------------------------------------------------------------------------------

    async def resolve(self, uri: Uri | str, **kw: Any) -> Memory:
        """``Cortex.resolve``."""
        return await _read(self._pool, self.sync.resolve, uri, **kw)

    async def resolve_latest(self, ref: Uri | MemoryId | str, **kw: Any) -> Memory:
        """``Cortex.resolve_latest``."""
        return await _read(self._pool, self.sync.resolve_latest, ref, **kw)

    async def resolve_as_of(self, ref: Uri | MemoryId | str, when: datetime, **kw: Any) -> Memory:
        """``Cortex.resolve_as_of``."""
        return await _read(self._pool, self.sync.resolve_as_of, ref, when, **kw)

    async def history(self, ref: Uri | MemoryId | str, **kw: Any) -> list[Memory]:
        """``Cortex.history``."""
        return await _read(self._pool, self.sync.history, ref, **kw)

    async def find(self, query: Query) -> Result:
        """``Cortex.find`` (``record_access=True`` also counts the use, in the same call)."""
        return await _read(self._pool, self.sync.find, query)

    async def context(
        self, verb: Verb | str, objects: Sequence[Any] | str = (), **kw: Any
    ) -> Bundle:
        """``Cortex.context``."""
        return await _read(self._pool, self.sync.context, verb, objects, **kw)

    async def search(self, question: str, **kw: Any) -> SearchResult:
        """``Cortex.search``."""
        return await _read(self._pool, self.sync.search, question, **kw)

    async def about(self, subject: str, attribute: str | None = None, **kw: Any) -> Result:
        """``Cortex.about``."""
        return await _read(self._pool, self.sync.about, subject, attribute, **kw)

    async def chain(self, ref: Uri | MemoryId | str, **kw: Any) -> list[ChainLink]:
        """``Cortex.chain``."""
        return await _read(self._pool, self.sync.chain, ref, **kw)

    async def conflicts(self, **kw: Any) -> list[Conflict]:
        """``Cortex.conflicts``."""
        return await _read(self._pool, self.sync.conflicts, **kw)

    async def resolve_conflict(
        self, winner: Uri | MemoryId | str, loser: Uri | MemoryId | str, *, reason: str
    ) -> Edge:
        """``Cortex.resolve_conflict``."""
        return await _change(self._pool, self.sync.resolve_conflict, winner, loser, reason=reason)

    def task(self, task_id: str, *, limit: int = 50) -> AbstractContextManager[None]:
        """``Cortex.task``, as a plain ``with`` block.

        It holds for the asyncio task that enters it (each task has its own context) and the
        calls that task awaits.
        """
        return self.sync.task(task_id, limit=limit)

    async def task_usage(self, task_id: str) -> int:
        """``Cortex.task_usage``."""
        return await _read(self._pool, self.sync.task_usage, task_id)

    async def facets(
        self,
        window: Window | None = None,
        by: Literal["type", "tag", "subject", "counterparty"] = "type",
        *,
        types: Sequence[MemoryType | str] = (),
        reader: Reader | None = None,
    ) -> dict[str, int]:
        """``Cortex.facets``."""
        return await _read(self._pool, self.sync.facets, window, by, types=types, reader=reader)

    async def salience_state(self, ref: Uri | MemoryId | str) -> SalienceState:
        """``Cortex.salience_state``."""
        return await _read(self._pool, self.sync.salience_state, ref)

    async def edges(self, ref: Uri | MemoryId | str, **kw: Any) -> list[Edge]:
        """``Cortex.edges``."""
        return await _read(self._pool, self.sync.edges, ref, **kw)

    async def sensitivity(self, ref: Uri | MemoryId | str, **kw: Any) -> Sensitivity:
        """``Cortex.sensitivity``."""
        return await _read(self._pool, self.sync.sensitivity, ref, **kw)

    async def episode_sensitivity(self, ref: MemoryId | str, **kw: Any) -> Sensitivity:
        """``Cortex.episode_sensitivity``."""
        return await _read(self._pool, self.sync.episode_sensitivity, ref, **kw)

    async def episode(self, ref: MemoryId | str, **kw: Any) -> Episode:
        """``Cortex.episode``."""
        return await _read(self._pool, self.sync.episode, ref, **kw)

    async def episodes(self, **kw: Any) -> list[Episode]:
        """``Cortex.episodes``."""
        return await _read(self._pool, self.sync.episodes, **kw)

    async def episode_of(self, ref: Uri | MemoryId | str, **kw: Any) -> EpisodeLink:
        """``Cortex.episode_of``."""
        return await _read(self._pool, self.sync.episode_of, ref, **kw)

    async def memories_from(self, ref: MemoryId | str, **kw: Any) -> list[Uri]:
        """``Cortex.memories_from``."""
        return await _read(self._pool, self.sync.memories_from, ref, **kw)

    async def core_get(self, section: str | None = None, **kw: Any) -> dict[str, Any]:
        """``Cortex.core_get``."""
        return await _read(self._pool, self.sync.core_get, section, **kw)

    async def core_history(self, section: str, key: str) -> list[CoreChange]:
        """``Cortex.core_history``."""
        return await _read(self._pool, self.sync.core_history, section, key)

    async def core_yaml(self, **kw: Any) -> str:
        """``Cortex.core_yaml``."""
        return await _read(self._pool, self.sync.core_yaml, **kw)

    async def journal(
        self, start: int = 1, *, reverse: bool = False, limit: int | None = None
    ) -> list[JournalEntry]:
        """``Cortex.journal``, as a list."""
        return await _read(
            self._pool, lambda: list(self.sync.journal(start, reverse=reverse, limit=limit))
        )

    async def verify(self) -> VerifyReport:
        """``Cortex.verify``."""
        return await _read(self._pool, self.sync.verify)

    async def alias(self, name: str, alias: str) -> AliasChange:
        """``Cortex.alias``."""
        return await _change(self._pool, self.sync.alias, name, alias)

    async def unalias(self, alias: str) -> AliasChange:
        """``Cortex.unalias``."""
        return await _change(self._pool, self.sync.unalias, alias)

    async def aliases(self, name: str | None = None) -> dict[str, tuple[str, ...]]:
        """``Cortex.aliases``."""
        return await _read(self._pool, self.sync.aliases, name)

    async def suggest_aliases(self, **options: Any) -> list[AliasSuggestion]:
        """``Cortex.suggest_aliases`` (it embeds: in the pool)."""
        return await _read(self._pool, self.sync.suggest_aliases, **options)

    async def verify_erasure(self) -> ErasureReport:
        """``Cortex.verify_erasure``."""
        return await _read(self._pool, self.sync.verify_erasure)

    async def stats(self) -> dict[str, Any]:
        """``Cortex.stats``."""
        return await _read(self._pool, self.sync.stats)

    def view(self, reader: Reader) -> AsyncReaderView:
        """``Cortex.view``: the store as ``reader`` sees it, awaitable."""
        return AsyncReaderView(self.sync.view(reader), self._pool)


class AsyncReaderView:
    """A ``ReaderView`` for asyncio (``AsyncCortex.view``); it shares the handle's pool."""

    def __init__(self, view: ReaderView, pool: ThreadPoolExecutor) -> None:
        self._view = view
        self._pool = pool
        self.reader = view.reader

    async def find(self, query: Query) -> Result:
        """``ReaderView.find``."""
        return await _read(self._pool, self._view.find, query)

    async def context(
        self, verb: Verb | str, objects: Sequence[Any] | str = (), **kw: Any
    ) -> Bundle:
        """``ReaderView.context``."""
        return await _read(self._pool, self._view.context, verb, objects, **kw)

    async def search(self, question: str, *, limit: int = 10) -> SearchResult:
        """``ReaderView.search``."""
        return await _read(self._pool, self._view.search, question, limit=limit)

    async def about(self, subject: str, attribute: str | None = None, **kw: Any) -> Result:
        """``ReaderView.about``."""
        return await _read(self._pool, self._view.about, subject, attribute, **kw)

    async def resolve(self, uri: Uri | str) -> Memory:
        """``ReaderView.resolve``."""
        return await _read(self._pool, self._view.resolve, uri)

    async def resolve_latest(self, ref: Uri | MemoryId | str) -> Memory:
        """``ReaderView.resolve_latest``."""
        return await _read(self._pool, self._view.resolve_latest, ref)

    async def history(self, ref: Uri | MemoryId | str) -> list[Memory]:
        """``ReaderView.history``."""
        return await _read(self._pool, self._view.history, ref)

    async def core_get(self, section: str | None = None) -> dict[str, Any]:
        """``ReaderView.core_get``."""
        return await _read(self._pool, self._view.core_get, section)

    async def write(self, data: Data, **options: Any) -> WriteResult:
        """``ReaderView.write``."""
        return await _change(self._pool, self._view.write, data, **options)

    async def update(self, ref: Uri | MemoryId | str, data: Data, **kw: Any) -> Uri:
        """``ReaderView.update``."""
        return await _change(self._pool, self._view.update, ref, data, **kw)

    async def tombstone(self, ref: Uri | MemoryId | str, reason: str) -> Tombstone:
        """``ReaderView.tombstone``."""
        return await _change(self._pool, self._view.tombstone, ref, reason)
