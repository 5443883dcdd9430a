"""Context: an agent's working set for one action, assembled in tiers under one token budget.

Tiers, in order (a memory appears once, in the first tier that holds it):

1. ``pinned`` — Identity, hard Constraints and active Goals (``idx/pin``, newest first per
   type); their salience is floored at ``PINNED_FLOOR`` so they are trimmed last;
2. ``outcomes`` — the latest Events framed with the verb and each object (``idx/actor_obj``);
3. ``frame`` — every memory framed with the verb and each object (``idx/frame``), by salience;
4. ``recall`` — hybrid text/vector hits for ``query`` (when the store has a lexical index).

Each tier reads at most ``tier_limit`` candidates per type or object (default 64), newest
first, so a context costs the same in a store of any size.

The budget (default 3000 tokens, capped at ``MAX_BUDGET``) is shared: over it, the lowest
salience memories across all tiers are dropped first, at least one is kept, and the dropped
URIs are returned so the agent can resolve them later. Assembling a context is a pure read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any, Final

import msgspec

from cortex import argcheck
from cortex.engine.values import Memory
from cortex.errors import ValidationError
from cortex.index.evidence import Evidence
from cortex.model.enums import GoalStatus, MemoryType, ObjKind, Strength, Verb
from cortex.model.forms import count_tokens
from cortex.model.ids import MemoryId, Uri
from cortex.model.records import FrameRef
from cortex.query.language import Form, Hit, render_form, trim_to_budget
from cortex.query.planner import Candidate, Executor, memory_of, to_hits
from cortex.rules.scope import FrameMatch
from cortex.storage.keys import IDX_ACTOR_OBJ, IDX_PIN, frame_prefix, obj_hash

__all__ = [
    "DEFAULT_BUDGET",
    "MAX_BUDGET",
    "PINNED_FLOOR",
    "TIERS",
    "Bundle",
    "assemble",
    "objects_of",
]

DEFAULT_BUDGET: Final = 3000
MAX_BUDGET: Final = 4000
PINNED_FLOOR: Final = 0.7
TIERS: Final = ("pinned", "outcomes", "frame", "recall")


class Bundle(msgspec.Struct, frozen=True, kw_only=True):
    """A context: hits in tier order, the tokens they take, the budget, and what was dropped."""

    verb: Verb
    hits: tuple[Hit, ...]
    tokens: int
    budget: int
    dropped: tuple[Uri, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    """Episode chunks for the query (``context(evidence=N)``), within the budget."""

    @property
    def memories(self) -> list[Memory]:
        """The memories, in tier order."""
        return [h.memory for h in self.hits]

    def tier(self, name: str) -> list[Hit]:
        """The hits of one tier (``pinned``, ``outcomes``, ``frame`` or ``recall``)."""
        return [h for h in self.hits if h.tier == name]

    def render(self) -> str:
        """The bundle as text for a prompt: one section per non-empty tier, one line per memory."""
        lines: list[str] = []
        for name in TIERS:
            hits = self.tier(name)
            if not hits:
                continue
            lines.append(f"## {name}")
            lines.extend(f"- {h.text} [{h.memory.uri}]" for h in hits)
        if self.evidence:
            lines.append("## evidence (episode text)")
            lines.extend(
                f"- {' '.join(e.text.split())} [episode {e.episode} bytes {e.span[0]}..{e.span[1]}]"
                for e in self.evidence
            )
        if self.dropped:
            lines.append(f"## dropped ({len(self.dropped)}, resolve by URI if needed)")
            lines.extend(f"- {u}" for u in self.dropped)
        return "\n".join(lines)


def objects_of(objects: Sequence[Any] | str) -> list[FrameMatch]:
    """Object patterns from refs (``"ada"``: any kind), ``"kind:ref"``, tuples or ``FrameRef``.

    The verb of each pattern is a placeholder; ``assemble`` applies the context's verb.
    """
    if isinstance(objects, str):
        objects = [objects]
    out = []
    for o in argcheck.items(objects, "objects"):
        kind: Any
        ref: Any
        if isinstance(o, FrameRef | FrameMatch):
            kind, ref = o.obj_kind, o.obj_ref
        elif isinstance(o, tuple) and len(o) == 2:
            kind, ref = o
        elif isinstance(o, str):
            head, sep, tail = o.partition(":")
            # "kind:ref" names a kind; "service://x" is a reference that happens to look so
            if sep and ObjKind.coerce(head) is not None and not tail.startswith("//"):
                kind, ref = head, tail
            else:
                kind, ref = None, o
        else:
            raise ValidationError("objects", "type", f"not an object: {o!r}")
        if not isinstance(ref, str) or not ref:
            raise ValidationError("objects", "type", "an object reference is non-empty text")
        out.append(FrameMatch(verb=Verb.FIND, obj_kind=kind, obj_ref=ref))
    return out


def _by_salience(cands: list[Candidate]) -> list[Candidate]:
    return sorted(cands, key=lambda c: (-c.salience, c.id.bytes))


def assemble(
    ex: Executor,
    verb: Verb,
    objects: list[FrameMatch],
    budget: int,
    *,
    form: Form,
    outcomes_per_object: int,
    tier_limit: int = 64,
    recall: Callable[[], list[Candidate]] | None = None,
) -> Bundle:
    """Build the tiers with ``ex`` (its plan supplies visibility, as-of and expiry rules)."""
    seen: set[MemoryId] = set()
    tiers: list[tuple[str, list[Candidate]]] = []

    def take(name: str, cands: list[Candidate]) -> None:
        fresh = [c for c in cands if c.id not in seen]
        seen.update(c.id for c in fresh)
        tiers.append((name, fresh))

    take("pinned", _pinned(ex, tier_limit))
    take("outcomes", _outcomes(ex, verb, objects, outcomes_per_object))
    take("frame", _framed(ex, verb, objects, tier_limit))
    if recall is not None:
        take("recall", recall())
    flat: list[tuple[str, Candidate, int]] = []  # each with its tokens, counted once
    for tier, cs in tiers:
        for c in cs:
            c.memory = _memory(c)
            flat.append((tier, c, _tokens(c, form)))
    kept, dropped = trim_to_budget(flat, itemgetter(2), lambda t: t[1].salience, budget)
    hits: list[Hit] = []
    total = 0
    for name, c, _ in kept:
        [hit], n = to_hits([c], form, "salience")
        hits.append(msgspec.structs.replace(hit, tier=name))
        total += n
    return Bundle(
        verb=verb,
        hits=tuple(hits),
        tokens=total,
        budget=budget,
        dropped=tuple(c.memory.uri for _, c, _ in dropped if c.memory is not None),
    )


def _memory(c: Candidate) -> Memory:
    return memory_of(c.row)


def _tokens(c: Candidate, form: Form) -> int:
    assert c.memory is not None
    return count_tokens(render_form(c.memory, form))


def _pinned(ex: Executor, limit: int) -> list[Candidate]:
    out: list[Candidate] = []
    for t, keep in _PIN_RULES:
        kept = 0
        # the pinned index holds what the current versions imply; the version a query sees
        # (as_of) is checked again, like tags and frames are
        for mid in ex.preloaded(ex.newest(IDX_PIN + bytes((t,)))):
            if kept >= limit:
                break
            row = ex.accept(mid)
            if row is not None and row.head.type is t:
                c = Candidate(row)
                if keep(c):
                    out.append(c)
                    kept += 1
    for c in out:
        c.salience = max(PINNED_FLOOR, ex.salience_of(c.row))
    return _by_salience(out)


_PIN_RULES: Final[tuple[tuple[MemoryType, Callable[[Candidate], bool]], ...]] = (
    (MemoryType.IDENTITY, lambda c: True),
    (MemoryType.CONSTRAINT, lambda c: getattr(c.row.data, "strength", None) is Strength.HARD),
    (MemoryType.GOAL, lambda c: getattr(c.row.data, "status", None) is GoalStatus.ACTIVE),
)


def _outcomes(ex: Executor, verb: Verb, objects: list[FrameMatch], per: int) -> list[Candidate]:
    out: list[Candidate] = []
    got: set[MemoryId] = set()
    for o in objects:
        assert o.obj_ref is not None
        prefix = IDX_ACTOR_OBJ + bytes((verb,)) + obj_hash(o.obj_ref)
        n = 0
        # newest first, ties by id ascending
        for mid in ex.preloaded(m for _, m in ex.created_scan(prefix, True)):
            if n >= per:
                break
            if mid in got:
                continue
            row = ex.accept(mid)
            if row is None or row.head.type is not MemoryType.EVENT:
                continue
            if not _framed_with(row.head.frames, verb, o):
                continue
            c = Candidate(row)
            c.salience = ex.salience_of(row)
            out.append(c)
            got.add(mid)
            n += 1
    return out


def _framed_with(frames: Sequence[FrameRef], verb: Verb, o: FrameMatch) -> bool:
    return any(
        f.verb is verb
        and f.obj_ref == o.obj_ref
        and (o.obj_kind is None or f.obj_kind is o.obj_kind)
        for f in frames
    )


def _framed(ex: Executor, verb: Verb, objects: list[FrameMatch], limit: int) -> list[Candidate]:
    out: dict[MemoryId, Candidate] = {}
    for o in objects:
        assert o.obj_ref is not None
        kinds = [o.obj_kind] if o.obj_kind is not None else list(ObjKind)
        for kind in kinds:
            n = 0
            # newest first, ties by id ascending (format 3 keys carry the created time)
            scan = ex.created_scan(frame_prefix(verb, kind, o.obj_ref), True)
            for mid in ex.preloaded(m for _, m in scan):
                if n >= limit:
                    break
                if mid in out:
                    continue
                n += 1
                row = ex.accept(mid)
                if row is None or not _framed_with(row.head.frames, verb, o):
                    continue  # index keys hold hashes: compare the head's own frames
                c = Candidate(row)
                c.salience = ex.salience_of(row)
                out[mid] = c
    return _by_salience(list(out.values()))
