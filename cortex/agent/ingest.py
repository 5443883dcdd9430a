"""Ingest: content becomes an episode, and (with an extractor) typed memories linked to it.

``ingest`` builds the episode (``cortex.model.episode``: the verbatim text, its hash and chunks),
asks the extractor — if one is given — for memories *before* any transaction, points each memory's
provenance at the episode and the span it was drawn from (``SourceRef(session_id=
"episode:<id>", span=(start, end))``), and writes the episode and every memory in one
transaction (``Store._write_episode``): a bad extraction or a bad memory leaves nothing behind,
and the error names it. The links answer both ways in one lookup: ``episode_of(memory)`` reads
the version's provenance, ``memories_from(episode)`` scans ``prov/e/<episode>``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import msgspec

from cortex.agent.extract import Context, Dropped, Extraction, ExtractionError, Extractor
from cortex.engine.importer import EPISODE_SESSION, episode_source
from cortex.engine.values import NewMemory
from cortex.errors import CortexError, NotFoundError, ValidationError
from cortex.model.enums import Sensitivity, SourceKind, Visibility
from cortex.model.episode import episode_text, new_episode
from cortex.model.ids import MemoryId, Uri
from cortex.model.records import Episode, Provenance, SourceRef
from cortex.rules import sensitivity as _sens
from cortex.rules.scope import Reader

__all__ = ["EpisodeLink", "IngestResult", "episode_of", "ingest", "visible_episode"]


class IngestResult(msgspec.Struct, frozen=True, kw_only=True):
    """What ``ingest`` wrote: the episode, the memories drawn from it, and what was dropped.

    ``dropped`` lists the items a lenient extractor (``strict=False``) left out, with why.
    """

    episode: Episode
    memories: tuple[Uri, ...] = ()
    dropped: tuple[Dropped, ...] = ()


class EpisodeLink(msgspec.Struct, frozen=True, kw_only=True):
    """Where a memory came from: its episode, the byte span in it and the quoted text.

    ``quote`` is ``None`` when the memory names no span or the episode was purged.
    """

    episode: MemoryId
    span: tuple[int, int] | None
    quote: str | None


def ingest(
    cx: Any,
    content: str,
    *,
    occurred_at: datetime | None = None,
    source: str = "api",
    channel: str | None = None,
    labels: Sequence[str] = (),
    visibility: Visibility | str = Visibility.PRIVATE,
    media_type: str | None = None,
    extractor: Extractor | None = None,
    id: MemoryId | None = None,
    sensitivity: Sensitivity = Sensitivity.INTERNAL,
    check: Callable[[object], None] | None = None,
) -> IngestResult:
    """Store ``content`` as an episode and, with an extractor, the memories it holds.

    ``sensitivity`` is the episode's level; ``check``, when given, vets each extracted
    memory's level (a restricted handle's clearance) before anything is written.

    Raises:
        ValidationError: a field of the episode breaks a rule (named), or ``check`` refuses a
            memory's level (``items[i].sensitivity``).
        ExtractionError: the extractor failed, or returned something unusable; nothing written.
        ConflictError: ``id`` is taken.
    """
    now = cx._now()
    ep = new_episode(
        content,
        occurred_at=occurred_at if occurred_at is not None else now,
        source=source,
        created_by=cx.actor,
        created_at=now,
        channel=channel,
        labels=labels,
        visibility=visibility,
        media_type=media_type,
        id=id,
    )
    items: list[NewMemory] = []
    dropped: tuple[Dropped, ...] = ()
    if extractor is not None:
        if not isinstance(extractor, Extractor):
            raise ValidationError(
                "extractor", "type", "must have extract(content, context) (cortex.agent.extract)"
            )
        context = Context(
            occurred_at=ep.occurred_at,
            source=ep.source,
            channel=ep.channel,
            actor=cx.actor,
            labels=ep.labels,
        )
        try:
            out = extractor.extract(content, context)
        except CortexError:
            raise
        except Exception as exc:  # the runtime's extractor: any failure is named, not leaked
            raise ExtractionError(
                "extractor", "failed", f"the extractor failed: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(out, Extraction):
            raise ExtractionError(
                "extractor",
                "type",
                f"extract() must return an Extraction, not {type(out).__name__}",
            )
        session = f"{EPISODE_SESSION}{ep.id}"
        for i, item in enumerate(out.items):
            memory = getattr(item, "memory", None)
            if not isinstance(memory, NewMemory):
                raise ExtractionError(f"items[{i}]", "type", "each item must hold a NewMemory")
            if check is not None:
                try:
                    check(memory.sensitivity)
                except ValidationError as exc:
                    raise ValidationError(
                        f"items[{i}].{exc.field}", exc.rule, exc.message
                    ) from None
            span = item.span
            sources = (SourceRef(session_id=session, span=span),)
            given = memory.provenance
            prov = Provenance(
                source=SourceKind.DERIVED,
                derived_from=given.derived_from if given is not None else (),
                sources=sources + (given.sources if given is not None else ()),
            )
            items.append(msgspec.structs.replace(memory, provenance=prov))
        dropped = out.dropped
    # the chunks and the memories are embedded together, in the same batches
    ep = msgspec.structs.replace(ep, sensitivity=_sens.stored(sensitivity))  # its record holds it
    uris = cx.engine.write_episode(ep, items, None, sensitivity, embed_chunks=True)
    return IngestResult(episode=ep, memories=tuple(uris), dropped=dropped)


def visible_episode(ep: Episode, reader: Reader | None, owner: str) -> bool:
    """Whether ``reader`` may see ``ep``: the owner always; another actor an actor_public one."""
    if reader is None or reader.actor == owner:
        return True
    return ep.visibility is Visibility.ACTOR_PUBLIC


def episode_of(cx: Any, ref: Uri | MemoryId | str, reader: Reader | None = None) -> EpisodeLink:
    """The episode a memory was drawn from (that version's, or the newest that names one).

    Raises:
        NotFoundError: the memory, or its episode, is not there (or not visible), or it was
            not drawn from an episode.
    """
    if isinstance(ref, Uri):
        versions = [cx.resolve(ref, reader=reader)]
    else:
        versions = cx.history(ref, reader=reader)[::-1]
    for m in versions:
        link = episode_source(m.version.provenance)
        if link is None:
            continue
        eid, span = link
        ep = cx.episode(eid, reader=reader)
        text = episode_text(ep)
        quote = None
        if text is not None and span is not None and ep.content is not None:
            quote = ep.content[span[0] : span[1]].decode("utf-8", "replace")
        return EpisodeLink(episode=eid, span=span, quote=quote)
    raise NotFoundError(f"memory {ref} was not drawn from an episode")
