"""The five-line quickstart: the flows people know from mem0 and Letta, on the typed API.

``Memories`` wraps one ``Cortex``: ``add`` keeps content as an episode (and, with an extractor,
the typed memories it holds), ``search`` returns memories and the episode text that matches,
``get_all`` lists what belongs to a user, agent or run, and ``get`` / ``update`` / ``delete`` /
``history`` work on one memory. A user, agent or run id is a tag on memories (``user:<id>``,
``agent:<id>``, ``run:<id>``) and a label on episodes, so every call below is an ordinary typed
call underneath and ``Memories.cx`` is the full API.

    from cortex import Memories
    m = Memories("agent.cortex")
    m.add("I moved to Lisbon and I can't stand cilantro", user_id="sam")
    m.search("where does sam live", user_id="sam")
    m.get_all(user_id="sam")
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Literal, Self

import msgspec

from cortex.agent.api import Cortex
from cortex.agent.extract import Dropped, Extractor
from cortex.engine.values import Memory
from cortex.errors import ValidationError
from cortex.model.enums import MemoryType
from cortex.model.ids import MemoryId, Uri
from cortex.model.records import (
    Belief,
    Capability,
    Constraint,
    Data,
    Episode,
    Event,
    Fact,
    Goal,
    Identity,
    Pattern,
    Preference,
    Tombstone,
)
from cortex.query.language import Query

__all__ = ["Added", "Found", "Memories"]

# The field ``update(id, "text")`` replaces, by type.
_TEXT_FIELD: dict[type[Data], str] = {
    Fact: "statement",
    Preference: "topic",
    Belief: "statement",
    Event: "summary",
    Goal: "statement",
    Constraint: "statement",
    Capability: "capability",
    Pattern: "statement",
    Identity: "name",
}


class Added(msgspec.Struct, frozen=True, kw_only=True):
    """What ``add`` stored: the episode, the memories drawn from it, and what was dropped."""

    episode: Episode
    memories: tuple[Uri, ...] = ()
    dropped: tuple[Dropped, ...] = ()


class Found(msgspec.Struct, frozen=True, kw_only=True):
    """One search result: a memory (``uri``) or a chunk of an episode (``episode``, ``span``)."""

    kind: Literal["memory", "episode"]
    text: str
    score: float
    uri: Uri | None = None
    episode: MemoryId | None = None
    span: tuple[int, int] | None = None


def _scope(user_id: str | None, agent_id: str | None, run_id: str | None) -> list[str]:
    out = []
    for prefix, value in (("user", user_id), ("agent", agent_id), ("run", run_id)):
        if value is None:
            continue
        if not isinstance(value, str) or not value:
            raise ValidationError(f"{prefix}_id", "type", "must be non-empty text")
        out.append(f"{prefix}:{value}")
    return out


def _messages(content: str | Sequence[Any]) -> str:
    """Chat messages (``{"role", "content"}`` dicts) as one transcript; text as it is."""
    if isinstance(content, str):
        return content
    if not isinstance(content, Sequence):
        raise ValidationError("content", "type", "must be text or a list of messages")
    lines = []
    for i, msg in enumerate(content):
        if not isinstance(msg, dict) or not isinstance(msg.get("content"), str):
            raise ValidationError(
                f"content[{i}]", "type", 'each message must be {"role": ..., "content": text}'
            )
        role = msg.get("role") or "user"
        lines.append(f"{role}: {msg['content']}")
    return "\n".join(lines)


class Memories:
    """A store with the quickstart flows (see the module docs).

    Args:
        path: the store directory (created if missing).
        actor: who writes (the store's owner when it is created).
        extractor: the default extractor of ``add`` (``cortex.LLMExtractor`` over your model);
            without one, ``add`` keeps the content as a searchable episode only.
        **options: passed to ``Cortex.open`` (``embedder=``, ``dedupe=``, ...).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        actor: str = "app",
        extractor: Extractor | None = None,
        **options: Any,
    ) -> None:
        self.cx = Cortex.open(path, actor=actor, **options)
        self.extractor = extractor

    def close(self) -> None:
        """Close the store."""
        self.cx.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def add(
        self,
        content: str | Sequence[Any],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        source: str = "api",
        extractor: Extractor | None = None,
    ) -> Added:
        """Keep ``content`` (text, or chat messages) and the memories an extractor finds in it.

        Raises:
            ValidationError, ExtractionError: nothing was written.
        """
        scope = _scope(user_id, agent_id, run_id)
        ex = extractor if extractor is not None else self.extractor
        text = _messages(content)
        if ex is not None and scope:
            ex = _Tagged(ex, scope)
        res = self.cx.ingest(text, source=source, labels=scope, extractor=ex)
        return Added(episode=res.episode, memories=res.memories, dropped=res.dropped)

    def search(
        self,
        query: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        limit: int = 10,
    ) -> list[Found]:
        """Memories and episode text that match ``query``, best first (memories, then text)."""
        scope = _scope(user_id, agent_id, run_id)
        res = self.cx.find(Query(text=query, tags=tuple(scope), limit=limit, evidence=limit))
        out = [Found(kind="memory", text=h.text, score=h.score, uri=h.memory.uri) for h in res.hits]
        labels = set(scope)
        for e in res.evidence:
            if len(out) >= limit:
                break
            if labels and not labels <= set(self.cx.episode(e.episode).labels):
                continue
            out.append(
                Found(kind="episode", text=e.text, score=e.score, episode=e.episode, span=e.span)
            )
        return out

    def get_all(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        limit: int = 100,
    ) -> list[Memory]:
        """Every live memory of a user, agent or run (all of them without one), newest first."""
        scope = _scope(user_id, agent_id, run_id)
        q = Query(tags=tuple(scope), limit=limit) if scope else Query(
            types=tuple(MemoryType), limit=limit
        )  # fmt: skip
        return list(self.cx.find(q).memories)

    def get(self, memory_id: Uri | MemoryId | str) -> Memory:
        """One memory, its current version."""
        return self.cx.resolve_latest(memory_id)

    def update(self, memory_id: Uri | MemoryId | str, data: Data | str) -> Uri:
        """A new version: new typed data, or new text for the type's main field."""
        current = self.cx.resolve_latest(memory_id)
        if isinstance(data, str):
            if current.data is None:
                raise ValidationError("memory_id", "purged", "this memory's content was erased")
            field = _TEXT_FIELD[type(current.data)]
            data = msgspec.structs.replace(current.data, **{field: data})
        return self.cx.update(current.uri, data)

    def delete(self, memory_id: Uri | MemoryId | str, reason: str = "deleted") -> Tombstone:
        """Retire a memory (a tombstone: hidden from search, still resolvable for audit)."""
        return self.cx.tombstone(memory_id, reason)

    def history(self, memory_id: Uri | MemoryId | str) -> list[Memory]:
        """Every version of a memory, oldest first."""
        return self.cx.history(memory_id)


class _Tagged:
    """An extractor whose memories carry the caller's user/agent/run tags."""

    def __init__(self, inner: Extractor, tags: list[str]) -> None:
        self.inner = inner
        self.tags = tags

    def extract(self, content: str, context: Any) -> Any:
        out = self.inner.extract(content, context)
        items = tuple(
            msgspec.structs.replace(
                it,
                memory=msgspec.structs.replace(
                    it.memory, tags=tuple(dict.fromkeys([*it.memory.tags, *self.tags]))
                ),
            )
            for it in getattr(out, "items", ())
        )
        return msgspec.structs.replace(out, items=items) if items else out
