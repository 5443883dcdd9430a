"""``search(question)``: route a question (``cortex.query.router``) and run the handler it picks.

Each handler is a few ``find`` calls on the typed API, fused by reciprocal rank (k = 60):

- ``exploratory``: ``find(text=question)`` (hybrid with an embedder);
- ``temporal``: the same text search inside the question's window (``Window`` on each memory's
  own time: an Event's ``occurred_at``, a Fact's ``observed_at``); a question that is only a time
  phrase lists the window's memories, newest first;
- ``entity_lookup``: in attribute mode, the Facts with that predicate first (``about(entity,
  attribute)``); the text search, which counts a named entity field itself while the store's
  ``Fusion.entity_weight`` is above 0 (the default), or else fused with the same search
  restricted to memories about the entity (its subject, counterparty or identity name);
- ``aspect_query``: the text search fused with the same search over the types that hold the
  aspects asked for (Preference, Goal, Belief, Pattern, Constraint, ...);
- ``relationship``: the text search (with ``entity_weight`` 0: fused with a search for the
  entities' names together);
- ``temporal_facets``: counts by subject, counterparty, tag and type in the window
  (``SearchResult.facets``), with the window's best text hits.

A window the router names relative to an event ("before the trip") is resolved by finding that
event; when it cannot be, or the window holds nothing, the search runs without it and says so in
``SearchResult.notes``. ``specs/router.md`` describes the routing and the handlers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Final, Literal, Protocol

import msgspec

from cortex.errors import ValidationError
from cortex.model.enums import MemoryType
from cortex.query.language import Eq, Hit, Or, Query, Result, Window
from cortex.query.router import RouterOutput, Temporal, route
from cortex.rules.scope import Reader


class Searchable(Protocol):
    """What the handlers use of a store (``cortex.Cortex`` and its views provide it)."""

    def find(self, query: Query) -> Result: ...  # noqa: D102

    def about(  # noqa: D102
        self, subject: str, attribute: str | None = None, *, limit: int = 100,
        reader: Reader | None = None,
    ) -> Result: ...  # fmt: skip

    def facets(  # noqa: D102
        self, window: Window | None = None,
        by: Literal["type", "tag", "subject", "counterparty"] = "type", *,
        reader: Reader | None = None,
    ) -> dict[str, int]: ...  # fmt: skip

    def _now(self) -> datetime: ...


__all__ = ["ASPECT_TYPES", "SearchResult", "Searchable", "known_entities", "search"]

RRF_K: Final = 60

ASPECT_TYPES: Final[dict[str, tuple[MemoryType, ...]]] = {
    "Preference": (MemoryType.PREFERENCE,),
    "Goal": (MemoryType.GOAL,),
    "Belief": (MemoryType.BELIEF,),
    "Habit": (MemoryType.PATTERN, MemoryType.PREFERENCE),
    "Task": (MemoryType.GOAL,),
    "Directive": (MemoryType.CONSTRAINT,),
    "Decision": (MemoryType.EVENT, MemoryType.FACT),
    "Problem": (MemoryType.EVENT, MemoryType.FACT),
}
"""The memory types that hold each aspect the router names."""


class SearchResult(msgspec.Struct, frozen=True, kw_only=True):
    """What ``search`` returns: the hits, the routing decision, and what it did.

    ``facets`` holds the counts of a ``temporal_facets`` question (by dimension, then label);
    ``notes`` says where the search departed from the route (an unresolved anchor, an empty
    window searched without its bound).
    """

    hits: tuple[Hit, ...]
    route: RouterOutput
    window: Window | None = None
    facets: dict[str, dict[str, int]] = msgspec.field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def memories(self) -> list[Any]:
        """The memories of the hits, in order."""
        return [h.memory for h in self.hits]

    def __len__(self) -> int:
        return len(self.hits)


def known_entities(cx: Searchable, reader: Reader | None = None) -> list[str]:
    """The entity names the store holds, for the router's ``entities``.

    Fact, Belief and Capability subjects, Event counterparties and Identity names.
    """
    names: dict[str, None] = {}
    dims: tuple[Literal["subject", "counterparty"], ...] = ("subject", "counterparty")
    many = getattr(cx, "_facets_many", None)  # the two in one read of every memory
    if many is not None:
        counted = many(Window.all(), dims, reader=reader)
    else:
        counted = {by: cx.facets(Window.all(), by=by, reader=reader) for by in dims}
    for by in dims:
        names |= dict.fromkeys(counted[by])
    for m in cx.find(Query(types=(MemoryType.IDENTITY,), limit=1000, reader=reader)).memories:
        names[getattr(m.data, "name", "")] = None
    return [n for n in names if n]


def _window(t: Temporal, now: datetime, resolve: Callable[[str], datetime | None]) -> tuple[
    Window | None, str | None
]:  # fmt: skip
    """The ``Window`` of a router time filter, and a note when it could not be built."""

    def start_of(d: date) -> datetime:
        return datetime.combine(d, time(), tzinfo=UTC)

    if t.type == "recent":
        return Window.recent(t.days or 30), None
    if t.type == "range" and t.start is not None and t.end is not None:
        return Window.between(start_of(t.start), start_of(t.end + timedelta(days=1))), None
    if t.type in ("before", "after"):
        if t.anchor is not None and t.start is None and t.end is None:
            at = resolve(t.anchor)
            if at is None:
                return None, f"no event matches {t.anchor!r}: searched without a time bound"
            return (Window.before(at) if t.type == "before" else Window.after(at)), None
        if t.type == "before" and t.end is not None:
            return Window.before(start_of(t.end + timedelta(days=1))), None
        if t.type == "after" and t.start is not None:
            return Window.after(start_of(t.start)), None
    return None, None


def _fuse(lists: Sequence[Sequence[Hit]], limit: int) -> tuple[Hit, ...]:
    """Reciprocal rank fusion (k = 60) of hit lists; ties by first appearance."""
    score: dict[Any, float] = {}
    first: dict[Any, Hit] = {}
    order: dict[Any, int] = {}
    for hits in lists:
        for rank, h in enumerate(hits, start=1):
            key = h.memory.id
            score[key] = score.get(key, 0.0) + 1.0 / (RRF_K + rank)
            first.setdefault(key, h)
            order.setdefault(key, len(order))
    ranked = sorted(score, key=lambda k: (-score[k], order[k]))[:limit]
    return tuple(
        msgspec.structs.replace(first[k], score=score[k], ranks={**first[k].ranks, "routed": i})
        for i, k in enumerate(ranked, start=1)
    )


def search(
    cx: Searchable,
    question: str,
    *,
    limit: int = 10,
    reader: Reader | None = None,
    entities: Sequence[str] | None = None,
) -> SearchResult:
    """Route ``question`` and run its handler (see the module docs).

    Args:
        cx: the store.
        question: the user's question.
        limit: the most hits, 1..1000.
        reader: read as this reader (default: the owner).
        entities: the entity names to route with (default: ``known_entities``).

    Raises:
        ValidationError: a bad question or limit.
    """
    if type(limit) is not int or not 1 <= limit <= 1000:
        raise ValidationError("limit", "range", "must be an int in 1..1000")
    now = cx._now()
    names = known_entities(cx, reader) if entities is None else list(entities)
    r = route(question, now=now, entities=names)
    notes: list[str] = []
    deep = max(32, 3 * limit)

    def find(text: str, window: Window | None, **kw: Any) -> list[Hit]:
        if not text.strip():
            return []
        q = Query(text=text, window=window, limit=deep, reader=reader, **kw)
        return list(cx.find(q).hits)

    def resolve(anchor: str) -> datetime | None:
        hits = find(anchor, None, types=[MemoryType.EVENT])
        for h in hits[:1]:
            return getattr(h.memory.data, "occurred_at", None) or h.memory.version.created_at
        return None

    window, note = _window(r.temporal, now, resolve)
    if note:
        notes.append(note)
    text = r.text if r.text.strip() else question
    facets: dict[str, dict[str, int]] = {}
    qt = r.query_type
    if qt == "temporal" and window is not None and not r.text.strip(" ?.!"):
        q = Query(types=tuple(MemoryType), window=window, limit=limit, reader=reader)
        hits: tuple[Hit, ...] = tuple(cx.find(q).hits)
        return SearchResult(hits=hits, route=r, window=window, notes=tuple(notes))
    asked = window  # the question's own window (facets count in it whatever the text finds)
    base = find(text, window)
    if qt == "temporal" and window is not None and not base:
        # "what happened last week": the words match nothing, the window is the question
        q = Query(types=tuple(MemoryType), window=window, limit=limit, reader=reader)
        listed = tuple(cx.find(q).hits)
        if listed:
            notes.append("the words matched nothing in the window: its memories, newest first")
            return SearchResult(hits=listed, route=r, window=window, notes=tuple(notes))
    if window is not None and not base:
        notes.append("nothing in the window matched: searched without it")
        window = None
        base = find(text, None)
    lists: list[list[Hit]] = [base]
    # a store whose text ranking counts a named entity field itself (``Fusion.entity_weight``,
    # ``specs/query.md`` §1.9) needs no second list for the entity: it would count the name
    # twice, and rank fusion would drop the scores that order the first list
    counted = getattr(getattr(cx, "fusion", None), "entity_weight", 0.0) > 0
    if qt == "entity_lookup" and r.entity_hints:
        e = r.entity_hints[0]
        if r.attribute_hint is not None:
            lists.insert(0, list(cx.about(e, r.attribute_hint, limit=limit, reader=reader).hits))
        if not counted:
            about = Or(Eq("data.subject", e), Eq("data.counterparty", e), Eq("data.name", e))
            lists.append(find(text, window, where=about))
    elif qt == "aspect_query" and r.aspects:
        types = sorted({t for a in r.aspects for t in ASPECT_TYPES.get(a, ())})
        if types:
            lists.append(find(text, window, types=types))
    elif qt == "relationship" and r.entity_hints and not counted:
        lists.append(find(" ".join(r.entity_hints), window))
    elif qt == "temporal_facets":
        every: tuple[Literal["subject", "counterparty", "tag", "type"], ...] = (
            "subject",
            "counterparty",
            "tag",
            "type",
        )
        many = getattr(cx, "_facets_many", None)  # one read of the window for the four
        if many is not None:
            counted = many(asked or Window.all(), every, reader=reader)
        else:
            counted = {by: cx.facets(asked or Window.all(), by=by, reader=reader) for by in every}
        facets.update((by, counts) for by, counts in counted.items() if counts)
    hits = _fuse(lists, limit) if len(lists) > 1 else tuple(base[:limit])
    return SearchResult(hits=hits, route=r, window=window, facets=facets, notes=tuple(notes))
