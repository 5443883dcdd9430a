"""Core memory (seed 004): the ``user`` and ``agent`` key-value blocks an agent keeps at hand.

Each section is one Identity memory (``name`` = ``core:user`` or ``core:agent``, the block in
its ``profile``) under an id derived from the section name, so every process of a store finds
the same one. ``core_update`` and ``core_delete`` are one call each: the read-modify-write is
done here, as a compare-and-swap on the section's version, retried when another writer got
there first, so concurrent changes to different keys all land. Every change is a new version,
so ``history`` and ``as_of`` work as for any memory, and ``core_history`` lists one key's values
over time. Identities are pinned, and the sections carry importance 10, so a context bundle's
pinned tier holds them first. ``core_yaml`` renders the blocks for a prompt.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final, Literal

import msgspec

from cortex.errors import ConflictError, NotFoundError, TombstonedError, ValidationError
from cortex.model.codec import LIMITS
from cortex.model.ids import MemoryId, Uri
from cortex.model.records import Identity

__all__ = ["SECTIONS", "CoreChange", "core_id", "core_yaml"]

SECTIONS: Final = ("user", "agent")
Section = Literal["user", "agent"]
_RETRIES: Final = 32
_PLAIN_YAML: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_ ./@+-]*")
_YAML_WORDS: Final = frozenset(
    {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}
)  # fmt: skip


class CoreChange(msgspec.Struct, frozen=True, kw_only=True):
    """One change of a key: the version that made it, when, by whom, and the value after it.

    ``value`` is ``None`` when the change deleted the key.
    """

    uri: Uri
    at: datetime
    by: str
    value: str | None


def _section(section: object) -> Section:
    if section == "user":
        return "user"
    if section == "agent":
        return "agent"
    raise ValidationError("section", "enum", f"must be 'user' or 'agent', got {section!r}")


def _key(key: object) -> str:
    if not isinstance(key, str) or not key.strip():
        raise ValidationError("key", "required", "must be non-empty text")
    if len(key.encode("utf-8", "surrogatepass")) > LIMITS.SHORT_TEXT_BYTES:
        raise ValidationError("key", "size", f"is over {LIMITS.SHORT_TEXT_BYTES} bytes")
    return key


def core_id(section: str) -> MemoryId:
    """The id of a section's memory: fixed, so every handle and process finds the same one.

    A ULID whose time is 0 and whose 80 random bits are the first bytes of
    ``sha256("cortex.core.v1/" + section)``.
    """
    digest = hashlib.sha256(b"cortex.core.v1/" + _section(section).encode()).digest()
    return MemoryId(bytes(6) + digest[:10])


def _name(section: str) -> str:
    return f"core:{section}"


def read(cx: Any, section: str, as_of: datetime | None = None) -> dict[str, str]:
    """A section's block (empty when it was never written or is retired)."""
    mid = core_id(section)
    try:
        m = cx.resolve_latest(mid) if as_of is None else cx.resolve_as_of(mid, as_of)
    except (NotFoundError, TombstonedError):
        return {}
    if m is None or m.head.tombstone is not None or not isinstance(m.data, Identity):
        return {}
    return dict(sorted(m.data.profile.items()))


def change(cx: Any, section: str, key: str, value: str | None) -> Uri:
    """Set (``value``) or delete (``None``) one key, atomically against other writers."""
    sec = _section(section)
    k = _key(key)
    if value is not None and not isinstance(value, str):
        raise ValidationError("value", "type", f"must be text, got {type(value).__name__}")
    if value is not None and len(value.encode("utf-8", "surrogatepass")) > LIMITS.TEXT_BYTES:
        raise ValidationError("value", "size", f"is over {LIMITS.TEXT_BYTES} bytes")
    mid = core_id(sec)
    for _ in range(_RETRIES):
        try:
            current = cx.resolve_latest(mid)
        except NotFoundError:
            current = None
        if current is None:
            if value is None:
                raise NotFoundError(f"core memory has no {sec} block, so no key {k!r}")
            data = Identity(name=_name(sec), profile={k: value})
            try:
                uri: Uri = cx.write(data, id=mid, importance=10, tags=["core"])
                return uri
            except ConflictError:
                continue  # another writer created it first: update theirs
        if current.head.tombstone is not None:
            raise TombstonedError(
                f"core memory's {sec} block {mid} is tombstoned: it was retired on purpose"
            )
        profile = dict(current.data.profile)
        if value is None:
            if k not in profile:
                raise NotFoundError(f"core memory's {sec} block has no key {k!r}")
            del profile[k]
        elif profile.get(k) == value:
            same: Uri = current.uri  # nothing changes: no new version
            return same
        else:
            profile[k] = value
        data = Identity(name=_name(sec), profile=profile)
        try:
            new: Uri = cx.update(mid, data, expected_version=current.version.version)
            return new
        except TombstonedError:
            raise
        except ConflictError:
            continue  # a concurrent change: read again and reapply
    raise ConflictError(f"core memory's {sec} block kept changing under {_RETRIES} retries")


def history(cx: Any, section: str, key: str) -> list[CoreChange]:
    """Every change of ``key`` in ``section``, oldest first."""
    sec, k = _section(section), _key(key)
    try:
        versions = cx.history(core_id(sec))
    except NotFoundError:
        return []
    out: list[CoreChange] = []
    last: str | None = None
    for m in versions:
        if not isinstance(m.data, Identity):
            continue  # purged
        value = m.data.profile.get(k)
        if value != last:
            out.append(
                CoreChange(uri=m.uri, at=m.version.created_at, by=m.version.created_by, value=value)
            )
            last = value
    return out


def _yaml_text(s: str) -> str:
    if _PLAIN_YAML.fullmatch(s) and s.lower() not in _YAML_WORDS and not s[:1].isdigit():
        return s
    return json.dumps(s, ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar


def core_yaml(blocks: Mapping[str, Mapping[str, str]]) -> str:
    """The blocks as YAML for a prompt: sections in order, keys sorted, values quoted if needed."""
    lines: list[str] = []
    for sec in SECTIONS:
        block = blocks.get(sec)
        if block is None:
            continue
        if not block:
            lines.append(f"{sec}: {{}}")
            continue
        lines.append(f"{sec}:")
        lines += [f"  {_yaml_text(k)}: {_yaml_text(v)}" for k, v in sorted(block.items())]
    return "\n".join(lines) + ("\n" if lines else "")
