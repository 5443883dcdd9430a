"""Readers and scopes: who may see (and write) which memories.

The rules (``specs/query.md`` §Visibility):

- the owner sees everything: a reader whose actor is the store's owner or the memory's
  ``actor_scope``;
- another actor holding no scope sees ``actor_public`` memories;
- a reader holding scopes sees the ``scoped`` and ``actor_public`` memories that at least one of
  its unexpired scopes selects; ``private`` memories never;
- and any reader but the store's owner sees only memories and episodes whose sensitivity is at
  or below its ``clearance`` (``internal`` by default; ``specs/sensitivity.md``): the levels
  live in the store, so ``cortex.rules.sensitivity`` checks them inside a read.

A scope selects a head when the head matches every non-empty include list (any entry of a list
matches) and no exclude list; exclusion always wins. A hidden memory is indistinguishable from a
missing one.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import msgspec
from msgspec.structs import force_setattr

from cortex import argcheck
from cortex.errors import ValidationError
from cortex.model.codec import to_micros
from cortex.model.enums import MemoryType, ObjKind, Sensitivity, Verb, Visibility
from cortex.model.ids import MemoryId
from cortex.model.records import FrameRef, Head

__all__ = ["FrameMatch", "Reader", "Scope"]


class FrameMatch(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A frame pattern: a verb, optionally narrowed to an object kind and a reference.

    A reference needs its kind (the frame index is keyed by verb, kind, reference).
    """

    verb: Verb
    obj_kind: ObjKind | None = None
    obj_ref: str | None = None

    def __post_init__(self) -> None:
        verb = Verb.coerce(self.verb)
        if verb is None:
            raise ValidationError("frame.verb", "enum", f"must be one of {Verb.labels()}")
        force_setattr(self, "verb", verb)
        if self.obj_kind is not None:
            kind = ObjKind.coerce(self.obj_kind)
            if kind is None:
                raise ValidationError(
                    "frame.obj_kind", "enum", f"must be one of {ObjKind.labels()}"
                )
            force_setattr(self, "obj_kind", kind)
        if self.obj_ref is not None:
            argcheck.text(self.obj_ref, "frame.obj_ref")
            force_setattr(self, "obj_ref", unicodedata.normalize("NFC", self.obj_ref))

    @classmethod
    def of(cls, value: FrameMatch | FrameRef | str | Sequence[Any]) -> FrameMatch:
        """A pattern from a ``FrameMatch``, a ``FrameRef``, ``"verb[:kind[:ref]]"`` or a tuple."""
        if isinstance(value, FrameMatch):
            return value
        if isinstance(value, FrameRef):
            return cls(verb=value.verb, obj_kind=value.obj_kind, obj_ref=value.obj_ref)
        if isinstance(value, str):
            parts: Sequence[Any] = value.split(":", 2)
        elif isinstance(value, Sequence):
            parts = value
        else:
            raise ValidationError("frames", "type", f"not a frame pattern: {value!r}")
        if not 1 <= len(parts) <= 3:
            raise ValidationError("frames", "type", "a frame pattern is verb[:kind[:ref]]")
        verb, kind, ref = (*parts, None, None)[:3]
        return cls(verb=verb, obj_kind=kind or None, obj_ref=ref or None)

    def matches(self, frame: FrameRef) -> bool:
        """Whether ``frame`` fits the pattern."""
        return (
            frame.verb is self.verb
            and (self.obj_kind is None or frame.obj_kind is self.obj_kind)
            and (self.obj_ref is None or frame.obj_ref == self.obj_ref)
        )


def _types(values: Iterable[MemoryType | str], field: str) -> frozenset[MemoryType]:
    out = set()
    for v in argcheck.items(values, field):
        t = MemoryType.coerce(v) if not isinstance(v, str) else MemoryType.from_name(v)
        if t is None:
            raise ValidationError(field, "enum", f"unknown memory type {v!r}")
        out.add(t)
    return frozenset(out)


class Scope(msgspec.Struct, frozen=True, kw_only=True):
    """A grant to read (and, if ``writable``, write) a selection of an actor's memories.

    Attributes:
        name: a label for audit and error messages.
        types, tags, ids, frames: what the scope includes (empty: no restriction).
        exclude_types, exclude_tags, exclude_ids, exclude_frames: what it never includes.
        expires_at: after this time the scope grants nothing.
        writable: writes through the scope are allowed (inside its selection).
        token_budget: a cap on the tokens one find or context through the scope returns.
    """

    name: str = "scope"
    types: frozenset[MemoryType] = frozenset()
    tags: frozenset[str] = frozenset()
    ids: frozenset[MemoryId] = frozenset()
    frames: tuple[FrameMatch, ...] = ()
    exclude_types: frozenset[MemoryType] = frozenset()
    exclude_tags: frozenset[str] = frozenset()
    exclude_ids: frozenset[MemoryId] = frozenset()
    exclude_frames: tuple[FrameMatch, ...] = ()
    expires_at: datetime | None = None
    writable: bool = False
    token_budget: int | None = None

    def __post_init__(self) -> None:
        set_ = force_setattr
        set_(self, "types", _types(self.types, "scope.types"))
        set_(self, "exclude_types", _types(self.exclude_types, "scope.exclude_types"))
        argcheck.text(self.name, "scope.name")
        for name in ("tags", "exclude_tags"):
            tags = argcheck.texts(getattr(self, name), f"scope.{name}")
            set_(self, name, frozenset(unicodedata.normalize("NFC", t) for t in tags))
        for name in ("ids", "exclude_ids"):
            ids = []
            for v in argcheck.items(getattr(self, name), f"scope.{name}"):
                if isinstance(v, str):
                    ids.append(MemoryId.parse(v))
                elif isinstance(v, MemoryId):
                    ids.append(v)
                else:
                    raise ValidationError(
                        f"scope.{name}", "type", f"must be memory ids, got {type(v).__name__}"
                    )
            set_(self, name, frozenset(ids))
        for name in ("frames", "exclude_frames"):
            frames = argcheck.items(getattr(self, name), f"scope.{name}")
            set_(self, name, tuple(FrameMatch.of(f) for f in frames))
        if self.expires_at is not None:
            argcheck.aware(self.expires_at, "scope.expires_at")
        if type(self.writable) is not bool:
            raise ValidationError("scope.writable", "type", "must be True or False")
        if self.token_budget is not None:
            argcheck.integer(self.token_budget, "scope.token_budget", 1)

    def active(self, now: datetime) -> bool:
        """Whether the scope still grants anything at ``now``."""
        return self.expires_at is None or to_micros(now) < to_micros(self.expires_at)

    def selects(self, head: Head) -> bool:
        """Whether the scope's selector includes ``head`` (exclusion wins)."""
        if (
            head.type in self.exclude_types
            or head.id in self.exclude_ids
            or (self.exclude_tags and not self.exclude_tags.isdisjoint(head.tags))
            or any(p.matches(f) for p in self.exclude_frames for f in head.frames)
        ):
            return False
        return (
            (not self.types or head.type in self.types)
            and (not self.ids or head.id in self.ids)
            and (not self.tags or not self.tags.isdisjoint(head.tags))
            and (not self.frames or any(p.matches(f) for p in self.frames for f in head.frames))
        )


class Reader(msgspec.Struct, frozen=True, kw_only=True):
    """Who is reading: an actor, the scopes it holds and its clearance.

    ``clearance`` is the most sensitive level the reader may see (``internal`` by default, so
    memories written without a level stay visible as before); the store's owner sees every
    level whatever its clearance.
    """

    actor: str
    scopes: tuple[Scope, ...] = ()
    clearance: Sensitivity = Sensitivity.INTERNAL

    def __post_init__(self) -> None:
        if not isinstance(self.actor, str) or not self.actor:
            raise ValidationError("reader.actor", "required", "must be non-empty text")
        argcheck.unicode(self.actor, "reader.actor")
        scopes = argcheck.items(self.scopes, "reader.scopes")
        for i, s in enumerate(scopes):
            if not isinstance(s, Scope):
                raise ValidationError(
                    f"reader.scopes[{i}]", "type", f"must be a cortex.Scope, got {type(s).__name__}"
                )
        force_setattr(self, "scopes", scopes)
        clearance = Sensitivity.coerce(self.clearance)
        if clearance is None:
            raise ValidationError(
                "reader.clearance", "enum", f"must be one of {Sensitivity.labels()}"
            )
        force_setattr(self, "clearance", clearance)

    def clears(self, level: Sensitivity, owner: str) -> bool:
        """Whether the reader may see (or set) ``level``: the owner always."""
        return self.actor == owner or level <= self.clearance

    def is_owner(self, head: Head, owner: str) -> bool:
        """Whether the reader owns ``head`` (the store's owner or the memory's actor)."""
        return self.actor in (owner, head.actor_scope)

    def can_see(self, head: Head, owner: str, now: datetime) -> bool:
        """Whether ``head`` is visible to this reader at ``now``."""
        if self.is_owner(head, owner):
            return True
        if head.visibility is Visibility.PRIVATE:
            return False
        if not self.scopes:
            return head.visibility is Visibility.ACTOR_PUBLIC
        return any(s.active(now) and s.selects(head) for s in self.scopes)

    def can_write(self, head: Head, owner: str, now: datetime) -> bool:
        """Whether the reader may write ``head``.

        The owner may; anyone else only a memory it can see that one of its writable, active
        scopes selects.
        """
        if self.is_owner(head, owner):
            return True
        if not self.can_see(head, owner, now):
            return False
        return any(s.writable and s.active(now) and s.selects(head) for s in self.scopes)

    def token_cap(self, now: datetime) -> int | None:
        """The largest token budget the reader's active scopes allow (``None``: no cap)."""
        if not self.scopes:
            return None
        caps = [s.token_budget for s in self.scopes if s.active(now)]
        if not caps or any(c is None for c in caps):
            return None
        return max(c for c in caps if c is not None)
