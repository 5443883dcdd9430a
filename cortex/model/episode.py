"""Episodes: the verbatim source of memories, as records (``specs/episodes.md``).

An episode keeps what an agent was given — a chat turn, a document, a tool result — exactly as
given: its text is stored as UTF-8 bytes and never normalised, and hashed in a domain of its
own (``sha256("matrix.cortex.episode.v1" || content)``), so a quote's byte span stays true
and anyone can recompute the hash. Its search chunks (``cortex.model.chunk``) are byte spans into
that text, fixed when it is built. This module builds, encodes, decodes and checks the record; the
store keeps it under ``ep/<id>`` beside the memories drawn from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import msgspec

from cortex.errors import IntegrityError, ValidationError
from cortex.model.chunk import chunk_text
from cortex.model.codec import EPISODE, EPISODE_MAX_BYTES, from_micros, to_micros
from cortex.model.enums import Visibility
from cortex.model.hashing import episode_hash
from cortex.model.ids import MemoryId, new_id
from cortex.model.records import Episode

__all__ = [
    "CHUNKER_VERSION",
    "check_episode",
    "decode_episode",
    "encode_episode",
    "episode_text",
    "new_episode",
    "purged",
]

CHUNKER_VERSION = 1
"""The version of ``specs/chunking.md`` that cut the chunks of new episodes."""


def new_episode(
    content: str,
    *,
    occurred_at: datetime,
    source: str,
    created_by: str,
    created_at: datetime,
    channel: str | None = None,
    labels: Sequence[str] = (),
    visibility: Visibility | str = Visibility.PRIVATE,
    media_type: str | None = None,
    id: MemoryId | None = None,
) -> Episode:
    """A new episode record, checked by every rule, with its hash and chunks.

    Raises:
        ValidationError: naming the field and the rule (``content``: not text, empty, not
            encodable as UTF-8 (a lone surrogate) or over 64 MiB; ``source``; ``labels``; ...).
    """
    if not isinstance(content, str):
        raise ValidationError("content", "type", f"must be text, got {type(content).__name__}")
    try:
        raw = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(
            "content", "utf8", f"is not valid Unicode at character {exc.start} (a lone surrogate)"
        ) from None
    if not raw:
        raise ValidationError("content", "empty", "must not be empty")
    if len(raw) > EPISODE_MAX_BYTES:
        raise ValidationError(
            "content", "size", f"is {len(raw)} bytes of UTF-8; the limit is {EPISODE_MAX_BYTES}"
        )
    if isinstance(labels, str):
        raise ValidationError("labels", "type", "must be a list of text, not one string")
    vis = visibility if isinstance(visibility, Visibility) else Visibility.coerce(visibility)
    if vis is None:
        raise ValidationError("visibility", "enum", f"must be one of {Visibility.labels()}")
    spans = tuple((c.start, c.end) for c in chunk_text(content))
    try:
        ep = Episode(
            id=id if id is not None else new_id(),
            content=raw,
            hash=episode_hash(raw),
            occurred_at=occurred_at,
            created_at=created_at,
            created_by=created_by,
            source=source,
            channel=channel,
            labels=tuple(labels),
            visibility=vis,
            media_type=media_type,
            chunks=spans,
            chunker=CHUNKER_VERSION,
        )
    except (TypeError, msgspec.ValidationError) as exc:
        raise ValidationError("episode", "type", str(exc)) from None
    encode_episode(ep)  # every field rule, naming the field
    # the record holds the instants as the codec stores them (UTC, microseconds)
    return msgspec.structs.replace(
        ep,
        occurred_at=from_micros(to_micros(occurred_at)),
        created_at=from_micros(to_micros(created_at)),
    )


def encode_episode(ep: Episode) -> bytes:
    """The episode's canonical CBOR.

    Raises:
        ValidationError: a field breaks a rule (``episode.source``, ...).
    """
    return EPISODE.encode(ep, "episode")


def decode_episode(raw: bytes) -> Episode:
    """An episode from its canonical CBOR, strictly.

    Raises:
        CodecError: the bytes are not a valid episode record.
    """
    value: Episode = EPISODE.decode(raw, "episode")
    return value


def episode_text(ep: Episode) -> str | None:
    """The verbatim text (``None`` once purged)."""
    return None if ep.content is None else ep.content.decode("utf-8")


def check_episode(ep: Episode) -> None:
    """Check what the codec cannot: the hash, the UTF-8 and the chunks against the content.

    Raises:
        IntegrityError: saying what does not hold.
    """
    if ep.content is None:
        if ep.chunks:
            raise IntegrityError(f"episode {ep.id} is purged but keeps chunks")
        return
    if episode_hash(ep.content) != ep.hash:
        raise IntegrityError(f"episode {ep.id}: its content does not match its hash")
    try:
        ep.content.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise IntegrityError(f"episode {ep.id}: content is not UTF-8 ({exc.reason})") from None
    n = len(ep.content)
    last_start, last_end = -1, 0
    for start, stop in ep.chunks:
        if not (last_start < start <= last_end and start < stop <= n and stop > last_end):
            raise IntegrityError(
                f"episode {ep.id}: chunk [{start}, {stop}) leaves a gap, goes back or runs past "
                f"the {n} bytes of content"
            )
        try:
            ep.content[start:stop].decode("utf-8")
        except UnicodeDecodeError:
            raise IntegrityError(
                f"episode {ep.id}: chunk [{start}, {stop}) cuts a character"
            ) from None
        last_start, last_end = start, stop
    if ep.chunks and (ep.chunks[0][0] != 0 or last_end != n):
        raise IntegrityError(f"episode {ep.id}: its chunks do not cover the content")


def purged(ep: Episode, at: datetime) -> Episode:
    """The record after erasure: no content, no chunks; the hash and the rest remain."""
    return msgspec.structs.replace(ep, content=None, chunks=(), purged_at=at)
