"""The MCP tools of ``cortex serve``: their schemas, and what each call does for one caller.

Tools are plain functions of a ``Caller`` (who is calling: bound when the connection was
made, never taken from an argument) and the call's arguments, returning a JSON object that
matches the tool's output schema. They import no MCP code: ``cortex.serve.server`` puts them
on the wire. Every read goes through the caller's ``ReaderView`` (the owner's view for the
owner), so a scoped helper sees exactly what its scopes select on every tool; every write is
synchronous (the result names what was committed) and counts against the caller's write
budget.

The seed tools keep their names and shapes (CORE: ``memory_search``, ``memory_ingest``,
``memory_about_user``; seed 004: ``memory_search``, ``memory_save``, ``memory_core_get``,
``memory_core_update``, ``memory_core_delete``); the typed tools reach the rest of the API.
There is no tool that clears the store.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final

import jsonschema

from cortex import (
    Cortex,
    CortexError,
    Hit,
    Memory,
    MemoryId,
    MemoryType,
    NotFoundError,
    Query,
    Reader,
    ReaderView,
    Result,
    Scope,
    Sensitivity,
    Uri,
    ValidationError,
    Verb,
    Visibility,
    Window,
    WriteBudgetError,
    from_json,
    json_schema,
    parse_where,
)
from cortex.agent.core import core_yaml
from cortex.model.jsonmap import from_plain, parse_time, to_plain
from cortex.model.records import FrameRef
from cortex.query.context import MAX_BUDGET

__all__ = [
    "DEFAULT_WRITE_BUDGET",
    "TOOLS",
    "Caller",
    "Identity",
    "Tool",
    "ToolError",
    "WriteBudget",
    "call",
]

DEFAULT_WRITE_BUDGET: Final = 50
"""Writes one MCP session (a task) may make unless the server or the token says otherwise."""
MAX_LIMIT: Final = 100
DEFAULT_LIMIT: Final = 10
DEFAULT_FIND_BUDGET: Final = 2000
"""Tokens of rendered memories a find, search or about returns unless the call asks for more."""
MAX_FIND_BUDGET: Final = 8000


class ToolError(CortexError):
    """A call the tool refuses; the message goes back to the agent as the tool's error."""


# ---------------------------------------------------------------------------------------------
# Who is calling


@dataclass(frozen=True)
class Identity:
    """Who a connection acts as: bound when it is made (stdio: configured; HTTP: the token).

    Attributes:
        name: the token's name (``stdio`` for a stdio server).
        actor: the actor it reads and writes as; the store's owner sees everything.
        scopes: what a non-owner sees and (``writable``) may write.
        write_budget: writes per session (``None``: the server's default; 0: none allowed).
        clearance: the most sensitive level a non-owner sees and may set (``internal``).
    """

    name: str
    actor: str
    scopes: tuple[Scope, ...] = ()
    write_budget: int | None = None
    clearance: Sensitivity = Sensitivity.INTERNAL


class WriteBudget:
    """Writes per task (an MCP session, or a token without sessions), kept by the store.

    Each key is a task of the store's write budgets (``Cortex.task``, ``specs/claims.md`` §9)
    named for this server run, so the count is exact under concurrent calls, a failed write
    costs nothing, a batch counts what it stores, and every drop is journalled.
    """

    def __init__(self) -> None:
        self.run = uuid.uuid4().hex  # a server run's tasks are its own

    def task_id(self, key: str) -> str:
        """The store task that counts ``key``'s writes."""
        return f"mcp:{self.run}:{key}"

    def used(self, cx: Cortex, key: str) -> int:
        """Writes counted for ``key``."""
        return cx.task_usage(self.task_id(key))

    @contextmanager
    def take(self, cx: Cortex, key: str, limit: int | None) -> Iterator[None]:
        """Count the writes of this block against ``key``'s budget of ``limit``.

        Raises:
            ToolError: the budget is spent (nothing was written; the store journals the drop).
        """
        if limit is None:
            yield
            return
        try:
            with cx.task(self.task_id(key), limit=limit):
                yield
        except WriteBudgetError:
            raise ToolError(
                f"write budget spent: this session made its {limit} writes (the per-task "
                "budget); nothing was written. Finish the task, or start a new session; "
                "an operator can raise it with `cortex serve --write-budget N` or a "
                "token's write_budget"
            ) from None


def view_of(cx: Cortex, identity: Identity) -> ReaderView:
    """The store as ``identity`` sees it (the owner's view for the owner)."""
    return cx.view(
        Reader(actor=identity.actor, scopes=identity.scopes, clearance=identity.clearance)
    )


@dataclass
class Caller:
    """One call's caller: its identity, its view of the store, and its budget key."""

    cx: Cortex
    identity: Identity
    budget: WriteBudget
    task: str
    default_budget: int | None = DEFAULT_WRITE_BUDGET
    view: ReaderView | None = None
    """The identity's view (made here when not given; a server keeps one per identity)."""

    def __post_init__(self) -> None:
        if self.view is None:
            self.view = view_of(self.cx, self.identity)

    @property
    def v(self) -> ReaderView:
        """The caller's view of the store."""
        assert self.view is not None
        return self.view

    @property
    def is_owner(self) -> bool:
        """Whether the caller acts as the store's owner."""
        return self.identity.actor == self.cx.owner

    @property
    def write_limit(self) -> int | None:
        """Writes this caller's task may make (``None``: no limit)."""
        b = self.identity.write_budget
        return b if b is not None else self.default_budget

    def writes_left(self) -> int | None:
        """What is left of the write budget (``None``: no limit)."""
        limit = self.write_limit
        return None if limit is None else max(0, limit - self.budget.used(self.cx, self.task))

    @contextmanager
    def writing(self) -> Iterator[None]:
        """One write against the budget (refunded when the write fails)."""
        with self.budget.take(self.cx, self.task, self.write_limit):
            yield


# ---------------------------------------------------------------------------------------------
# Schemas

_TYPE_NAMES: Final = [t.type_name for t in MemoryType]
_TIME: Final = {"type": "string", "format": "date-time", "description": "ISO-8601 with an offset"}
_URI_OR_ID: Final = {
    "type": "string",
    "minLength": 1,
    "description": "a memory URI (cortex://Type/ID#N, that exact version) or its id",
}
_STRS: Final = {"type": "array", "items": {"type": "string", "minLength": 1}}


def _obj(
    props: Mapping[str, Any], required: tuple[str, ...] = (), *, extra: bool = False
) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": dict(props)}
    if required:
        out["required"] = list(required)
    if not extra:
        out["additionalProperties"] = False
    return out


def _nullable(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {"anyOf": [dict(schema), {"type": "null"}]}


_HIT: Final = _obj(
    {
        "uri": {"type": "string"},
        "type": {"type": "string", "enum": _TYPE_NAMES},
        "text": {"type": "string"},
        "tokens": {"type": "integer"},
        "score": {"type": "number"},
        "salience": {"type": "number"},
        "tier": _nullable({"type": "string"}),
    },
    ("uri", "type", "text", "tokens", "score", "salience"),
)
_HITS_OUT: Final = _obj(
    {
        "hits": {"type": "array", "items": _HIT},
        "tokens": {"type": "integer"},
        "dropped": {"type": "array", "items": {"type": "string"}},
        "next_offset": _nullable({"type": "integer"}),
        "plan": {"type": "string"},
    },
    ("hits", "tokens", "dropped", "next_offset"),
)
_MEMORY: Final = _obj(
    {
        "uri": {"type": "string"},
        "id": {"type": "string"},
        "type": {"type": "string", "enum": _TYPE_NAMES},
        "version": {"type": "integer"},
        "current_version": {"type": "integer"},
        "data": _nullable({"type": "object"}),
        "text": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "frames": {"type": "array", "items": {"type": "string"}},
        "importance": {"type": "integer"},
        "visibility": {"type": "string"},
        "confidence": {"type": "number"},
        "created_at": {"type": "string"},
        "created_by": {"type": "string"},
        "valid_from": _nullable({"type": "string"}),
        "valid_until": _nullable({"type": "string"}),
        "expires_at": _nullable({"type": "string"}),
        "tombstone": _nullable(
            _obj({"reason": {"type": "string"}, "at": {"type": "string"}, "by": {"type": "string"}})
        ),
    },
    ("uri", "id", "type", "version", "current_version", "data", "tags", "visibility"),
)
_WRITTEN: Final = _obj(
    {
        "uri": {"type": "string"},
        "id": {"type": "string"},
        "type": {"type": "string"},
        "version": {"type": "integer"},
        "writes_left": _nullable({"type": "integer"}),
    },
    ("uri", "id", "type", "version", "writes_left"),
)
_EPISODE_OUT: Final = _obj(
    {
        "episode": {"type": "string"},
        "bytes": {"type": "integer"},
        "chunks": {"type": "integer"},
        "hash": {"type": "string"},
        "memories": {"type": "array", "items": {"type": "string"}},
        "writes_left": _nullable({"type": "integer"}),
    },
    ("episode", "bytes", "chunks", "hash", "memories", "writes_left"),
)
_BLOCK: Final = {"type": "object", "additionalProperties": {"type": "string"}}
_SECTION: Final = {"type": "string", "enum": ["user", "agent"], "description": "user or agent"}
_KEY: Final = {"type": "string", "minLength": 1, "maxLength": 1024}
_WINDOW: Final = _obj(
    {
        "recent_days": {"type": "number", "exclusiveMinimum": 0},
        "since": _TIME,
        "until": _TIME,
        "on": {
            "type": "string",
            "enum": ["own", "created", "updated"],
            "description": "which time: the memory's own (default), created or updated",
        },
    }
)
_LIMIT: Final = {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}
_OFFSET: Final = {"type": "integer", "minimum": 0}
_BUDGET: Final = {
    "type": "integer",
    "minimum": 1,
    "maximum": MAX_FIND_BUDGET,
    "description": f"tokens of rendered memories to return at most (default {DEFAULT_FIND_BUDGET})",
}
_FORM: Final = {"type": "string", "enum": ["short", "medium", "full"]}
_FRAMES: Final = {
    "type": "array",
    "items": {"type": "string", "pattern": "^[a-z_]+(:[a-z_]+(:.+)?)?$"},
    "description": "frames as verb:kind:ref, e.g. find:knowledge:ada",
}
_VISIBILITY: Final = {"type": "string", "enum": [v.label for v in Visibility]}
_SENSITIVITY: Final = {
    "type": "string",
    "enum": [s.label for s in Sensitivity],
    "description": "default internal; at most the connection's clearance",
}


def _data_schema() -> dict[str, Any]:
    """``data`` of a write: the JSON Schema of the type named by ``type``."""
    branches = []
    for t in MemoryType:
        schema = json_schema(t)
        schema.pop("$schema", None)
        branches.append(
            {
                "if": {"properties": {"type": {"const": t.type_name}}},
                "then": {"properties": {"data": schema}},
            }
        )
    return {"allOf": branches}


@dataclass(frozen=True)
class Tool:
    """One tool: its name, what it is for, its schemas and hints, and what it does."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    run: Callable[[Caller, dict[str, Any]], dict[str, Any]]
    read_only: bool = True
    destructive: bool = False
    idempotent: bool = False
    writes: bool = False
    validator: Any = field(default=None, compare=False)


# ---------------------------------------------------------------------------------------------
# JSON forms


def _frame_text(f: FrameRef) -> str:
    return f"{f.verb.label}:{f.obj_kind.label}:{f.obj_ref}"


def _time(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat()


def memory_json(m: Memory) -> dict[str, Any]:
    """A memory (one version) as the tools return it."""
    h, v = m.head, m.version
    stone = h.tombstone
    return {
        "uri": str(m.uri),
        "id": str(m.id),
        "type": h.type.type_name,
        "version": v.version,
        "current_version": h.current_version,
        "data": None if m.data is None else to_plain(m.data),
        "text": v.forms.medium if v.forms is not None else "",
        "tags": list(h.tags),
        "frames": [_frame_text(f) for f in h.frames],
        "importance": h.importance,
        "visibility": h.visibility.label,
        "confidence": v.confidence,
        "created_at": v.created_at.isoformat(),
        "created_by": v.created_by,
        "valid_from": _time(v.valid_from),
        "valid_until": _time(v.valid_until),
        "expires_at": _time(v.expires_at),
        "tombstone": None
        if stone is None
        else {"reason": stone.reason, "at": stone.at.isoformat(), "by": stone.by},
    }


def _hit_json(h: Hit) -> dict[str, Any]:
    return {
        "uri": str(h.uri),
        "type": h.memory.head.type.type_name,
        "text": h.text,
        "tokens": h.tokens,
        "score": float(h.score),
        "salience": float(h.salience),
        "tier": h.tier,
    }


def _hits_json(res: Result, limit: int | None, offset: int) -> dict[str, Any]:
    more = limit is not None and len(res.hits) + len(res.dropped) >= limit
    return {
        "hits": [_hit_json(h) for h in res.hits],
        "tokens": res.tokens,
        "dropped": [str(u) for u in res.dropped],
        "next_offset": offset + len(res.hits) + len(res.dropped) if more else None,
        "plan": res.plan,
    }


def _written(c: Caller, uri: Uri) -> dict[str, Any]:
    return {
        "uri": str(uri),
        "id": str(uri.id),
        "type": uri.type.type_name,
        "version": uri.version,
        "writes_left": c.writes_left(),
    }


# ---------------------------------------------------------------------------------------------
# Arguments


def _opt_time(args: Mapping[str, Any], key: str) -> datetime | None:
    value = args.get(key)
    return None if value is None else parse_time(value, key)


def _window(args: Mapping[str, Any]) -> Window | None:
    w = args.get("window")
    if w is None:
        return None
    on = w.get("on", "own")
    if "recent_days" in w:
        if "since" in w or "until" in w:
            raise ValidationError("window", "exclusive", "give recent_days or since/until")
        return Window.recent(float(w["recent_days"]), on=on)
    since, until = _opt_time(w, "since"), _opt_time(w, "until")
    return Window(start=since, end=until, on=on)


def _frames(values: list[str], field: str) -> list[FrameRef]:
    out = []
    for i, text in enumerate(values):
        parts = text.split(":", 2)
        if len(parts) != 3:
            raise ValidationError(f"{field}[{i}]", "type", f"{text!r} is not verb:kind:ref")
        out.append(
            from_plain_frame(parts[0], parts[1], parts[2], f"{field}[{i}]"),
        )
    return out


def from_plain_frame(verb: str, kind: str, ref: str, field: str) -> FrameRef:
    """A ``FrameRef`` from its three parts (labels), naming ``field`` on error."""
    return from_plain(FrameRef, {"verb": verb, "obj_kind": kind, "obj_ref": ref}, field)


def _resolve(c: Caller, ref: str) -> Memory:
    """The memory a reference names: an exact version for a URI with one, else the latest."""
    if ref.startswith("cortex://") and "#" in ref:
        return c.v.resolve(Uri.parse(ref))
    return c.v.resolve_latest(_memory_id(ref))


def _memory_id(ref: str) -> MemoryId:
    """The id a URI (of any version) or an id names."""
    text = ref.rsplit("/", maxsplit=1)[-1].split("#", maxsplit=1)[0] if "://" in ref else ref
    try:
        return MemoryId.parse(text)
    except (CortexError, ValueError):
        raise ValidationError(
            "ref", "type", f"{text!r} is neither a cortex:// URI nor a memory id"
        ) from None


def _visibility(c: Caller, args: Mapping[str, Any]) -> str:
    given = args.get("visibility")
    if given is not None:
        return str(given)
    return "private" if c.is_owner else "scoped"


# ---------------------------------------------------------------------------------------------
# The seed tools


def _memory_search(c: Caller, args: dict[str, Any]) -> dict[str, Any]:
    query = args["query"]
    limit = args.get("topK", args.get("limit", DEFAULT_LIMIT))
    labels = args.get("labelIds") or []
    since, until = _opt_time(args, "startTime"), _opt_time(args, "endTime")
    if labels or since or until:  # a filtered search: find with the filters, ranked by text
        window = None if since is None and until is None else Window(start=since, end=until)
        res = c.v.find(
            Query(
                text=query,
                tags=tuple(labels),
                window=window,
                limit=limit,
                budget_tokens=DEFAULT_FIND_BUDGET,
            )
        )
        return {"results": [_hit_json(h) for h in res.hits], "query_type": "filtered"}
    found = c.v.search(query, limit=limit)
    return {
        "results": [_hit_json(h) for h in found.hits],
        "query_type": str(found.route.query_type),
    }


def _ingested(c: Caller, res: Any) -> dict[str, Any]:
    ep = res.episode
    return {
        "episode": str(ep.id),
        "bytes": len(ep.content or b""),
        "chunks": len(ep.chunks),
        "hash": ep.hash.hex(),
        "memories": [str(u) for u in res.memories],
        "writes_left": c.writes_left(),
    }


def _memory_ingest(c: Caller, args: dict[str, Any]) -> dict[str, Any]:
    with c.writing():
        res = c.v.ingest(
            args["content"],
            source=args.get("source", "mcp"),
            channel=args.get("channel"),
            labels=tuple(args.get("labels", ())),
            occurred_at=_opt_time(args, "occurred_at"),
            media_type=args.get("media_type"),
            visibility=args.get("visibility", "private" if c.is_owner else "actor_public"),
            sensitivity=args.get("sensitivity"),
        )
    return _ingested(c, res)


def _memory_save(c: Caller, args: dict[str, Any]) -> dict[str, Any]:
    with c.writing():
        res = c.v.ingest(
            args["content"],
            source=args.get("source", "manual"),
            visibility="private" if c.is_owner else "actor_public",
        )
    return _ingested(c, res)


def _memory_about_user(c: Caller, args: dict[str, Any]) -> dict[str, Any]:
    user = c.v.core_get("user")
    about = c.v.about("user", limit=MAX_LIMIT)
    prefs = c.v.find(Query(types=("Preference",), limit=20, budget_tokens=1000))
    seen: set[str] = set()
    hits = []
    for h in (*about.hits, *prefs.hits):
        if str(h.uri) not in seen:
            seen.add(str(h.uri))
            hits.append(_hit_json(h))
    return {"user": user, "memories": hits}


def _memory_core_get(c: Caller, args: dict[str, Any]) -> dict[str, Any]:
    blocks = c.v.core_get(as_of=_opt_time(args, "as_of"))
    return {
        "user": blocks.get("user", {}),
        "agent": blocks.get("agent", {}),
        "yaml": core_yaml(blocks),
    }


def _memory_core_update(c: Caller, args: dict[str, Any]) -> dict[str, Any]:
    with c.writing():
        uri = c.v.core_update(args["section"], args["key"], args["value"])
    return _written(c, uri)


def _memory_core_delete(c: Caller, args: dict[str, Any]) -> dict[str, Any]:
    with c.writing():
        uri = c.v.core_delete(args["section"], args["key"])
    return _written(c, uri)


# ---------------------------------------------------------------------------------------------
# The typed tools


def _memory_write(c: Caller, args: dict[str, Any]) -> dict[str, Any]:
    data = from_json(args["type"], args["data"])
    frames = _frames(args.get("frames", []), "frames")
    with c.writing():
        uri = c.v.write(
            data,
            tags=tuple(args.get("tags", ())),
            frames=frames,
            importance=args.get("importance", 5),
            visibility=_visibility(c, args),
            confidence=args.get("confidence", 1.0),
            valid_from=_opt_time(args, "valid_from"),
            valid_until=_opt_time(args, "valid_until"),
            expires_at=_opt_time(args, "expires_at"),
            dedupe=args.get("dedupe"),
            sensitivity=args.get("sensitivity"),
        )
    return _written(c, uri)


def _memory_update(c: Caller, args: dict[str, Any]) -> dict[str, Any]:
    current = _resolve(c, args["ref"])
    given = args["data"]
    if args.get("merge"):
        if current.data is None:
            raise ValidationError("merge", "purged", f"memory {current.id} was purged")
        given = {**to_plain(current.data), **given}
    data = from_json(current.head.type, given)
    with c.writing():
        uri = c.v.update(
            current.id,
            data,
            expected_version=args.get("expected_version"),
            confidence=args.get("confidence", 1.0),
            valid_from=_opt_time(args, "valid_from"),
            valid_until=_opt_time(args, "valid_until"),
            expires_at=_opt_time(args, "expires_at"),
        )
    return _written(c, uri)


def _memory_get(c: Caller, args: dict[str, Any]) -> dict[str, Any]:
    as_of = _opt_time(args, "as_of")
    if as_of is None:
        return memory_json(_resolve(c, args["ref"]))
    m = c.v.resolve_as_of(_memory_id(args["ref"]), as_of, known_at=_opt_time(args, "known_at"))
    return memory_json(m)


def _memory_history(c: Caller, args: dict[str, Any]) -> dict[str, Any]:
    versions = c.v.history(_memory_id(args["ref"]))
    limit, offset = args.get("limit", 20), args.get("offset", 0)
    page = versions[offset : offset + limit]
    nxt = offset + limit if offset + limit < len(versions) else None
    return {"versions": [memory_json(m) for m in page], "total": len(versions), "next_offset": nxt}


def _memory_find(c: Caller, args: dict[str, Any]) -> dict[str, Any]:
    limit = args.get("limit", DEFAULT_LIMIT)
    offset = args.get("offset", 0)
    where = args.get("where")
    types = tuple(args.get("types", ()))
    tags = tuple(args.get("tags", ()))
    frames = tuple(args.get("frames", ()))
    text, near = args.get("text"), args.get("near")
    if not (types or tags or frames or text or near):
        types = tuple(MemoryType)  # every type: the type index starts the plan
    q = Query(
        types=types,
        tags=tags,
        frames=frames,
        text=text,
        near=near,
        where=None if where is None else parse_where(where),
        window=_window(args),
        as_of=_opt_time(args, "as_of"),
        include_tombstoned=bool(args.get("include_tombstoned", False)),
        order_by=args.get("order_by"),
        limit=limit,
        offset=offset,
        budget_tokens=args.get("budget_tokens", DEFAULT_FIND_BUDGET),
        form=args.get("form", "short"),
    )
    return _hits_json(c.v.find(q), limit, offset)


def _memory_context(c: Caller, args: dict[str, Any]) -> dict[str, Any]:
    b = c.v.context(
        args["verb"],
        list(args.get("objects", ())),
        budget_tokens=args.get("budget_tokens", DEFAULT_FIND_BUDGET),
        query=args.get("query"),
        form=args.get("form", "medium"),
    )
    return {
        "text": b.render(),
        "hits": [_hit_json(h) for h in b.hits],
        "tokens": b.tokens,
        "budget": b.budget,
        "dropped": [str(u) for u in b.dropped],
    }


def _memory_about(c: Caller, args: dict[str, Any]) -> dict[str, Any]:
    limit = args.get("limit", 20)
    res = c.v.about(
        args["subject"], args.get("attribute"), limit=limit, as_of=_opt_time(args, "as_of")
    )
    return _hits_json(res, limit, 0)


def _memory_forget(c: Caller, args: dict[str, Any]) -> dict[str, Any]:
    current = _resolve(c, args["ref"])
    with c.writing():
        stone = c.v.tombstone(current.id, args["reason"])
    return {
        "uri": str(current.uri),
        "tombstoned_at": stone.at.isoformat(),
        "by": stone.by,
        "writes_left": c.writes_left(),
    }


def _memory_status(c: Caller, args: dict[str, Any]) -> dict[str, Any]:
    counts = c.v.facets(by="type")
    return {
        "store": c.cx.path,
        "owner": c.cx.owner,
        "actor": c.identity.actor,
        "identity": c.identity.name,
        "owner_access": c.is_owner,
        "scopes": [s.name for s in c.identity.scopes],
        "clearance": "restricted" if c.is_owner else c.identity.clearance.label,
        "writes_used": c.budget.used(c.cx, c.task),
        "write_budget": c.write_limit,
        "writes_left": c.writes_left(),
        "memories": counts,
        "total": sum(counts.values()),
    }


# ---------------------------------------------------------------------------------------------
# The table

_RESULTS_OUT: Final = _obj(
    {"results": {"type": "array", "items": _HIT}, "query_type": {"type": "string"}},
    ("results", "query_type"),
)
_CORE_OUT: Final = _obj(
    {"user": _BLOCK, "agent": _BLOCK, "yaml": {"type": "string"}}, ("user", "agent", "yaml")
)
_INGEST_IN: Final = _obj(
    {
        "content": {"type": "string", "minLength": 1, "description": "the text, kept verbatim"},
        "source": {"type": "string", "minLength": 1, "description": "entry point (default mcp)"},
        "channel": {"type": "string", "minLength": 1},
        "labels": {**_STRS, "maxItems": 16},
        "occurred_at": _TIME,
        "media_type": {"type": "string", "minLength": 1},
        "visibility": _VISIBILITY,
        "sensitivity": _SENSITIVITY,
    },
    ("content",),
)
_WRITE_OPTIONS: Final = {
    "tags": {**_STRS, "maxItems": 16},
    "frames": _FRAMES,
    "importance": {"type": "integer", "minimum": 0, "maximum": 10},
    "visibility": _VISIBILITY,
    "sensitivity": _SENSITIVITY,
    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    "valid_from": _TIME,
    "valid_until": _TIME,
    "expires_at": _TIME,
}


def _tools() -> tuple[Tool, ...]:
    w = {"read_only": False, "writes": True}
    tools = [
        Tool(
            "memory_search",
            "Search long-term memory in plain words (the question is routed: entities, time "
            "windows like 'last week', aspects). Use before answering questions that may need "
            "recalled context. labelIds (tags), startTime and endTime filter instead.",
            _obj(
                {
                    "query": {"type": "string", "minLength": 1},
                    "topK": {**_LIMIT, "description": "results to return (default 10)"},
                    "limit": _LIMIT,
                    "labelIds": _STRS,
                    "startTime": _TIME,
                    "endTime": _TIME,
                },
                ("query",),
            ),
            _RESULTS_OUT,
            _memory_search,
        ),
        Tool(
            "memory_ingest",
            "Push content (a conversation, a document, a tool result) into memory: it is kept "
            "verbatim as an episode, chunked and searchable. Returns the episode id.",
            _INGEST_IN,
            _EPISODE_OUT,
            _memory_ingest,
            **w,
        ),
        Tool(
            "memory_about_user",
            "What memory holds about the user: the core user block, facts about 'user' and "
            "preferences.",
            _obj({}),
            _obj(
                {"user": _BLOCK, "memories": {"type": "array", "items": _HIT}},
                ("user", "memories"),
            ),
            _memory_about_user,
        ),
        Tool(
            "memory_save",
            "Save a piece of information to long-term memory (kept verbatim and searchable).",
            _obj(
                {
                    "content": {"type": "string", "minLength": 1},
                    "source": {"type": "string", "minLength": 1, "description": "default manual"},
                },
                ("content",),
            ),
            _EPISODE_OUT,
            _memory_save,
            **w,
        ),
        Tool(
            "memory_core_get",
            "Core memory: the user and agent key-value blocks (also as YAML for a prompt).",
            _obj({"as_of": _TIME}),
            _CORE_OUT,
            _memory_core_get,
        ),
        Tool(
            "memory_core_update",
            "Set one key of core memory (section user or agent). Versioned; other keys stay.",
            _obj(
                {"section": _SECTION, "key": _KEY, "value": {"type": "string"}},
                ("section", "key", "value"),
            ),
            _WRITTEN,
            _memory_core_update,
            idempotent=True,
            **w,
        ),
        Tool(
            "memory_core_delete",
            "Delete one key of core memory (section user or agent).",
            _obj({"section": _SECTION, "key": _KEY}, ("section", "key")),
            _WRITTEN,
            _memory_core_delete,
            destructive=True,
            **w,
        ),
        Tool(
            "memory_write",
            "Remember something as a typed memory: type is one of Identity, Fact, Preference, "
            "Belief, Event, Goal, Constraint, Capability, Pattern and data follows that type's "
            "schema. Returns the committed URI (cortex://Type/ID#1).",
            {
                **_obj(
                    {
                        "type": {"type": "string", "enum": _TYPE_NAMES},
                        "data": {"type": "object"},
                        "dedupe": {
                            "type": "boolean",
                            "description": "confirm an existing memory with the same claim",
                        },
                        **_WRITE_OPTIONS,
                    },
                    ("type", "data"),
                ),
                **_data_schema(),
            },
            _WRITTEN,
            _memory_write,
            **w,
        ),
        Tool(
            "memory_update",
            "Write a new version of a memory (same type). merge=true patches the current data; "
            "expected_version makes it a compare-and-swap.",
            _obj(
                {
                    "ref": _URI_OR_ID,
                    "data": {"type": "object"},
                    "merge": {"type": "boolean"},
                    "expected_version": {"type": "integer", "minimum": 1},
                    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                    "valid_from": _TIME,
                    "valid_until": _TIME,
                    "expires_at": _TIME,
                },
                ("ref", "data"),
            ),
            _WRITTEN,
            _memory_update,
            **w,
        ),
        Tool(
            "memory_get",
            "One memory: a URI names an exact version, an id the current one; as_of gives the "
            "version current at that time.",
            _obj({"ref": _URI_OR_ID, "as_of": _TIME, "known_at": _TIME}, ("ref",)),
            _MEMORY,
            _memory_get,
        ),
        Tool(
            "memory_history",
            "Every version of a memory, oldest first, a page at a time.",
            _obj({"ref": _URI_OR_ID, "limit": _LIMIT, "offset": _OFFSET}, ("ref",)),
            _obj(
                {
                    "versions": {"type": "array", "items": _MEMORY},
                    "total": {"type": "integer"},
                    "next_offset": _nullable({"type": "integer"}),
                },
                ("versions", "total", "next_offset"),
            ),
            _memory_history,
        ),
        Tool(
            "memory_find",
            "Find memories by text (BM25, hybrid with vectors), near (meaning), types, tags, "
            'frames, a where expression (e.g. "data.subject = ada and not has_tag(old)"), a '
            "time window and as_of; paged with limit/offset and cut to budget_tokens (lowest "
            "salience dropped first).",
            _obj(
                {
                    "text": {"type": "string", "minLength": 1},
                    "near": {"type": "string", "minLength": 1},
                    "types": {"type": "array", "items": {"type": "string", "enum": _TYPE_NAMES}},
                    "tags": _STRS,
                    "frames": {
                        "type": "array",
                        "items": {"type": "string", "minLength": 1},
                        "description": "frame patterns verb[:kind[:ref]]",
                    },
                    "where": {"type": "string", "minLength": 1},
                    "window": _WINDOW,
                    "as_of": _TIME,
                    "include_tombstoned": {"type": "boolean"},
                    "order_by": {
                        "type": "string",
                        "enum": ["salience", "created", "updated", "importance", "score"],
                    },
                    "limit": _LIMIT,
                    "offset": _OFFSET,
                    "budget_tokens": _BUDGET,
                    "form": _FORM,
                }
            ),
            _HITS_OUT,
            _memory_find,
        ),
        Tool(
            "memory_context",
            "The working set for an action: pinned memories (identity, constraints, goals, core "
            "memory), recent outcomes and frame-relevant memories for the objects, plus a recall "
            "tier for query, under one token budget. text is ready for a prompt.",
            _obj(
                {
                    "verb": {"type": "string", "enum": [v.label for v in Verb]},
                    "objects": {**_STRS, "description": "object references, e.g. knowledge:ada"},
                    "budget_tokens": {"type": "integer", "minimum": 1, "maximum": MAX_BUDGET},
                    "query": {"type": "string", "minLength": 1},
                    "form": _FORM,
                },
                ("verb",),
            ),
            _obj(
                {
                    "text": {"type": "string"},
                    "hits": {"type": "array", "items": _HIT},
                    "tokens": {"type": "integer"},
                    "budget": {"type": "integer"},
                    "dropped": {"type": "array", "items": {"type": "string"}},
                },
                ("text", "hits", "tokens", "budget", "dropped"),
            ),
            _memory_context,
        ),
        Tool(
            "memory_about",
            "Everything about an entity (facts, beliefs, events with it, capabilities), or one "
            "attribute of it; newest first.",
            _obj(
                {
                    "subject": {"type": "string", "minLength": 1},
                    "attribute": {"type": "string", "minLength": 1},
                    "limit": _LIMIT,
                    "as_of": _TIME,
                },
                ("subject",),
            ),
            _HITS_OUT,
            _memory_about,
        ),
        Tool(
            "memory_forget",
            "Retire a memory (a tombstone with a reason): hidden from search, kept for audit.",
            _obj(
                {"ref": _URI_OR_ID, "reason": {"type": "string", "minLength": 1}},
                ("ref", "reason"),
            ),
            _obj(
                {
                    "uri": {"type": "string"},
                    "tombstoned_at": {"type": "string"},
                    "by": {"type": "string"},
                    "writes_left": _nullable({"type": "integer"}),
                },
                ("uri", "tombstoned_at", "by", "writes_left"),
            ),
            _memory_forget,
            destructive=True,
            idempotent=True,
            **w,
        ),
        Tool(
            "memory_status",
            "Who this connection acts as, its write budget, and how many memories it can see.",
            _obj({}),
            _obj(
                {
                    "store": {"type": "string"},
                    "owner": {"type": "string"},
                    "actor": {"type": "string"},
                    "identity": {"type": "string"},
                    "owner_access": {"type": "boolean"},
                    "scopes": {"type": "array", "items": {"type": "string"}},
                    "clearance": {"type": "string", "enum": [s.label for s in Sensitivity]},
                    "writes_used": {"type": "integer"},
                    "write_budget": _nullable({"type": "integer"}),
                    "writes_left": _nullable({"type": "integer"}),
                    "memories": {"type": "object", "additionalProperties": {"type": "integer"}},
                    "total": {"type": "integer"},
                },
                ("store", "owner", "actor", "owner_access", "writes_left", "memories", "total"),
            ),
            _memory_status,
        ),
    ]
    out = []
    for t in tools:
        cls = jsonschema.validators.validator_for(t.input_schema)
        out.append(replace(t, validator=cls(t.input_schema, format_checker=cls.FORMAT_CHECKER)))
    return tuple(out)


TOOLS: Final = {t.name: t for t in _tools()}


def _check_arguments(tool: Tool, args: Any) -> dict[str, Any]:
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise ToolError(f"{tool.name}: arguments must be a JSON object")
    error = next(iter(sorted(tool.validator.iter_errors(args), key=lambda e: list(e.path))), None)
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "arguments"
        raise ToolError(f"{tool.name}: {where}: {error.message}")
    return args


def call(caller: Caller, name: str, args: Any) -> dict[str, Any]:
    """Run tool ``name`` for ``caller``; its result matches the tool's output schema.

    Raises:
        ToolError: an unknown tool or arguments that break its input schema.
        CortexError: what cortex refused, with its message (nothing was written).
    """
    tool = TOOLS.get(name)
    if tool is None:
        raise ToolError(f"no tool named {name!r}; list the tools to see them")
    checked = _check_arguments(tool, args)
    try:
        return tool.run(caller, checked)
    except NotFoundError:
        raise
    except (KeyError, TypeError) as exc:  # pragma: no cover - the schemas should prevent it
        raise ToolError(f"{name}: bad arguments ({exc})") from None
