"""Find: queries, predicates, the planner that starts every query from an index, and results.

A query names what it wants (types, tags, frames, text, a vector, an edge walk, predicates, a
time window, ``as_of``) and how much (``limit``, ``budget_tokens``). The planner picks one index
to start from — an edge walk, the lexical index, the vector index, the frame, tag or type index —
and rejects a query that has none, or that has neither a limit nor a budget. Everything else is
a filter over the candidates the index yields. Results are ordered by the requested key, ties
always broken by id ascending, so the same store and query give the same answer. See
``specs/query.md``.
"""

from __future__ import annotations

import re
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import NoneType, UnionType
from typing import Any, ClassVar, Final, Literal, TypeAlias

import msgspec

from cortex import argcheck
from cortex.engine.values import Memory
from cortex.errors import ValidationError
from cortex.index.evidence import Evidence
from cortex.model.codec import to_micros
from cortex.model.enums import CodedEnum, EdgeType, MemoryType
from cortex.model.forms import render_full
from cortex.model.ids import MemoryId, Uri
from cortex.model.records import DATA_TYPES, Data, FrameRef, Head, Provenance, Version
from cortex.rules.scope import FrameMatch, Reader

__all__ = [
    "MAX_HOPS",
    "MAX_WINDOW_DAYS",
    "And",
    "EpisodeMatch",
    "Eq",
    "Follow",
    "Fusion",
    "Ge",
    "Gt",
    "HasTag",
    "Hit",
    "In",
    "Le",
    "Lt",
    "Matches",
    "Ne",
    "Not",
    "Or",
    "Predicate",
    "Query",
    "Result",
    "Window",
    "field_names",
    "memory_type",
]

MAX_HOPS: Final = 6
"""The longest edge walk a query may ask for."""
MAX_WINDOW_DAYS: Final = 365_000
"""The longest ``Window(days=...)``: about a thousand years back from the query's time."""

Form: TypeAlias = Literal["short", "medium", "full"]
OrderKey: TypeAlias = Literal["salience", "created", "updated", "importance", "hop", "score"]
_ORDER_KEYS: Final = ("salience", "created", "updated", "importance", "hop", "score")
_DESCENDING_BY_DEFAULT: Final = {
    "salience": True,
    "created": True,
    "updated": True,
    "importance": True,
    "hop": False,
    "score": True,
}


def memory_type(value: object, field: str = "types") -> MemoryType:
    """A memory type from a member, its type name (``"Fact"``), its label (``"fact"``) or code.

    Raises:
        ValidationError: ``value`` names no type.
    """
    if isinstance(value, MemoryType):
        return value
    t = MemoryType.from_name(value) if isinstance(value, str) else None
    t = t or MemoryType.coerce(value)
    if t is None:
        names = ", ".join(m.type_name for m in MemoryType)
        raise ValidationError(field, "enum", f"unknown memory type {value!r}; use one of {names}")
    return t


# ---------------------------------------------------------------------------------------------
# Fields: what a predicate may name


class _Kind(msgspec.Struct, frozen=True):
    """What a field holds: a scalar Python type (or enum class), and whether it is a list."""

    py: type
    many: bool = False

    @property
    def orderable(self) -> bool:
        return not self.many and self.py in (int, float, str, datetime)


def _kind_of(tp: Any) -> _Kind | None:
    if isinstance(tp, UnionType) or typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not NoneType]
        return _kind_of(args[0]) if len(args) == 1 else None
    origin = typing.get_origin(tp)
    if origin is tuple:
        items = typing.get_args(tp)
        inner = _kind_of(items[0]) if items else None
        return _Kind(inner.py, True) if inner is not None and not inner.many else None
    if origin is not None:
        return None  # free maps are not addressable by predicates
    if isinstance(tp, type) and tp in (str, int, float, bool, bytes, datetime):
        return _Kind(tp)
    if isinstance(tp, type) and issubclass(tp, CodedEnum | MemoryId):
        return _Kind(tp)
    return None


def _struct_fields(cls: type, prefix: str) -> dict[str, _Kind]:
    out: dict[str, _Kind] = {}
    hints = typing.get_type_hints(cls)
    for name in cls.__struct_fields__:  # type: ignore[attr-defined]
        tp = hints[name]
        inner = tp
        if isinstance(tp, UnionType):
            args = [a for a in typing.get_args(tp) if a is not NoneType]
            inner = args[0] if len(args) == 1 else tp
        if isinstance(inner, type) and issubclass(inner, msgspec.Struct):
            out.update(_struct_fields(inner, f"{prefix}{name}."))
            continue
        kind = _kind_of(tp)
        if kind is not None:
            out[prefix + name] = kind
    return out


_HEAD_FIELDS: Final = {
    k: v
    for k, v in _struct_fields(Head, "head.").items()
    if not k.startswith(("head.forms.", "head.tombstone.", "head.embedding_ref."))
}
_HEAD_FIELDS["head.tombstoned"] = _Kind(bool)
_VERSION_FIELDS: Final = {
    k: v
    for k, v in _struct_fields(Version, "version.").items()
    if k not in ("version.data", "version.id", "version.type")
    and not k.startswith("version.forms.")
}
_VERSION_FIELDS.update({k: v for k, v in _struct_fields(Provenance, "version.provenance.").items()})
_DATA_FIELDS: Final = {t: _struct_fields(cls, "data.") for t, cls in DATA_TYPES.items()}


def field_names(type_: MemoryType | str | None = None) -> list[str]:
    """Every field a predicate may name.

    ``head.*`` and ``version.*`` for all types, plus the ``data.*`` fields of ``type_`` (of
    every type when ``None``).
    """
    names = [*_HEAD_FIELDS, *_VERSION_FIELDS]
    if type_ is None:
        seen: set[str] = set()
        for fields in _DATA_FIELDS.values():
            seen.update(fields)
        names.extend(sorted(seen))
    else:
        names.extend(_DATA_FIELDS[memory_type(type_, "type")])
    return names


def _field_kinds(path: str, types: frozenset[MemoryType]) -> dict[_Kind, frozenset[MemoryType]]:
    """The kinds a field has, each with the memory types it has it in (all for head/version).

    A data field may differ by type (``data.strength``: an enum on Constraint, a number on
    Preference and Pattern); predicates compare each memory by its own type's kind.
    """
    if not isinstance(path, str):
        raise ValidationError("where", "type", f"a field name is text, got {type(path).__name__}")
    kind = _HEAD_FIELDS.get(path) or _VERSION_FIELDS.get(path)
    if kind is not None:
        return {kind: frozenset(MemoryType)}
    if path.startswith("data."):
        pool = types or frozenset(MemoryType)
        kinds: dict[_Kind, set[MemoryType]] = {}
        for t in pool:
            k = _DATA_FIELDS[t].get(path)
            if k is not None:
                kinds.setdefault(k, set()).add(t)
        if kinds:
            return {k: frozenset(ts) for k, ts in kinds.items()}
        where = ", ".join(sorted(t.type_name for t in pool))
        raise ValidationError(
            "where", "unknown_field", f"{path} is not a data field of {where}; see field_names()"
        )
    raise ValidationError(
        "where",
        "unknown_field",
        f"{path!r} is not a field: name head.<field>, version.<field> or data.<field> "
        "(see cortex.query.language.field_names())",
    )


class Row:
    """One candidate as the filters see it: head, version, and data decoded on first use."""

    __slots__ = ("_data", "_decode", "head", "version")

    def __init__(
        self, head: Head, version: Version, decode: Callable[[Version], Data | None]
    ) -> None:
        self.head = head
        self.version = version
        self._decode = decode
        """The data of a version (``decode(version)``): one function for every row, not a
        closure made per row."""
        self._data: Data | Literal[False] | None = False

    @property
    def data(self) -> Data | None:
        if self._data is False:
            self._data = self._decode(self.version)
        return self._data

    @property
    def decoded(self) -> bool:
        """Whether ``data`` has been decoded (a filter read it)."""
        return self._data is not False

    def get(self, path: str) -> Any:
        root, _, rest = path.partition(".")
        if root == "head":
            if rest == "tombstoned":
                return self.head.tombstone is not None
            obj: Any = self.head
        elif root == "version":
            obj = self.version
        else:
            obj = self.data
        for part in rest.split("."):
            if obj is None:
                return None
            obj = getattr(obj, part, None)
        return obj


# ---------------------------------------------------------------------------------------------
# Predicates


class Predicate(ABC):
    """A condition on a memory; combine with ``&``, ``|`` and ``~``."""

    __slots__ = ()

    def __and__(self, other: Predicate) -> Predicate:
        return And(self, other)

    def __or__(self, other: Predicate) -> Predicate:
        return Or(self, other)

    def __invert__(self) -> Predicate:
        return Not(self)

    @abstractmethod
    def _compile(self, types: frozenset[MemoryType]) -> Callable[[Row], bool]:
        """The check this predicate makes, its field names and values validated for ``types``."""

    def _touches_data(self) -> bool:
        return False


def _coerce_value(path: str, kind: _Kind, value: object) -> Any:
    py = kind.py
    if py is MemoryType:
        return memory_type(value, "where")
    if issubclass(py, CodedEnum):
        m = py.coerce(value)
        if m is None:
            raise ValidationError(
                "where", "value", f"{path} is one of {py.labels()}, got {value!r}"
            )
        return m
    if py is MemoryId:
        if isinstance(value, MemoryId):
            return value
        if isinstance(value, Uri):
            return value.id
        if isinstance(value, str):
            try:
                return MemoryId.parse(value)
            except ValidationError as exc:
                raise ValidationError("where", "value", f"{path}: {exc.message}") from None
    elif py is datetime:
        if isinstance(value, datetime):
            if value.tzinfo is None:
                raise ValidationError("where", "naive", f"{path}: compare with an aware datetime")
            return to_micros(value)
    elif py is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return argcheck.number(value, "where")
    elif py is int:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value  # ints and floats compare numerically
    elif py is bool:
        if isinstance(value, bool):
            return value
    elif py is str:
        if isinstance(value, str):
            return value
    elif py is bytes and isinstance(value, bytes):
        return value
    raise ValidationError(
        "where", "value", f"{path} holds {py.__name__} values; {value!r} cannot be compared"
    )


def _norm(kind: _Kind, v: Any) -> Any:
    if v is None:
        return None
    if kind.py is datetime:
        return to_micros(v)
    return v


def _dispatch(
    path: str,
    types: frozenset[MemoryType],
    build: Callable[[_Kind], Callable[[Row], bool]],
    otherwise: bool = False,
) -> Callable[[Row], bool]:
    """A checker comparing each memory by its own type's kind of ``path``.

    ``build`` makes the checker for one kind and raises ``ValidationError`` when the value
    does not fit that kind. A memory whose type lacks the field, or whose kind the value does
    not fit, gets ``otherwise`` (true only for ``Ne``); if the value fits no kind at all the
    first error is raised.
    """
    checks: dict[MemoryType, Callable[[Row], bool]] = {}
    errors: list[ValidationError] = []
    kinds = _field_kinds(path, types)
    for kind, ts in kinds.items():
        try:
            fn = build(kind)
        except ValidationError as exc:
            errors.append(exc)
            continue
        if len(kinds) == 1 and len(ts) == len(MemoryType):
            return fn
        checks.update(dict.fromkeys(ts, fn))
    if not checks:
        raise errors[0]

    def check(row: Row) -> bool:
        fn = checks.get(row.head.type)
        return otherwise if fn is None else fn(row)

    return check


_OPS: Final[Mapping[str, Callable[[Any, Any], bool]]] = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
}


@dataclass(frozen=True, slots=True)
class _Compare(Predicate):
    field: str
    value: Any
    OP: ClassVar[str] = "eq"

    def _compile(self, types: frozenset[MemoryType]) -> Callable[[Row], bool]:
        return _dispatch(self.field, types, self._build, otherwise=self.OP == "ne")

    def _build(self, kind: _Kind) -> Callable[[Row], bool]:
        op = self.OP
        if op in ("lt", "le", "gt", "ge") and not kind.orderable:
            raise ValidationError(
                "where", "operator", f"{self.field} cannot be ordered; use eq, ne, in or matches"
            )
        want = _coerce_value(self.field, kind, self.value)
        fn = _OPS[op]
        path = self.field

        if kind.many:  # list fields: true when some element compares true ("ne": none equal)
            if op == "ne":
                return lambda row: want not in (row.get(path) or ())
            return lambda row: any(fn(_norm(kind, v), want) for v in (row.get(path) or ()))

        def check(row: Row) -> bool:
            got = _norm(kind, row.get(path))
            if got is None:  # a missing value compares false (and "ne" true)
                return op == "ne"
            return fn(got, want)

        return check

    def _touches_data(self) -> bool:
        return self.field.startswith("data.")


@dataclass(frozen=True, slots=True)
class Eq(_Compare):
    """``field == value`` (for list fields: some element equals it)."""

    OP: ClassVar[str] = "eq"


@dataclass(frozen=True, slots=True)
class Ne(_Compare):
    """``field != value`` (for list fields: no element equals it; a missing value is unequal)."""

    OP: ClassVar[str] = "ne"


@dataclass(frozen=True, slots=True)
class Lt(_Compare):
    """``field < value``; a missing value is false."""

    OP: ClassVar[str] = "lt"


@dataclass(frozen=True, slots=True)
class Le(_Compare):
    """``field <= value``; a missing value is false."""

    OP: ClassVar[str] = "le"


@dataclass(frozen=True, slots=True)
class Gt(_Compare):
    """``field > value``; a missing value is false."""

    OP: ClassVar[str] = "gt"


@dataclass(frozen=True, slots=True)
class Ge(_Compare):
    """``field >= value``; a missing value is false."""

    OP: ClassVar[str] = "ge"


@dataclass(frozen=True, slots=True)
class In(Predicate):
    """``field`` is one of ``values`` (list fields: some element is)."""

    field: str
    values: tuple[Any, ...]

    def _compile(self, types: frozenset[MemoryType]) -> Callable[[Row], bool]:
        if isinstance(self.values, str | bytes) or not isinstance(self.values, Iterable):
            raise ValidationError("where", "value", f"in({self.field}) takes a list of values")
        return _dispatch(self.field, types, self._build)

    def _build(self, kind: _Kind) -> Callable[[Row], bool]:
        wanted = frozenset(_coerce_value(self.field, kind, v) for v in self.values)
        path = self.field
        if kind.many:
            return lambda row: any(_norm(kind, v) in wanted for v in (row.get(path) or ()))
        return lambda row: _norm(kind, row.get(path)) in wanted

    def _touches_data(self) -> bool:
        return self.field.startswith("data.")


@dataclass(frozen=True, slots=True)
class HasTag(Predicate):
    """The memory's head carries ``tag``."""

    tag: str

    def _compile(self, types: frozenset[MemoryType]) -> Callable[[Row], bool]:
        if not isinstance(self.tag, str) or not self.tag:
            raise ValidationError("where", "value", "has_tag takes a non-empty tag")
        tag = self.tag
        return lambda row: tag in row.head.tags


@dataclass(frozen=True, slots=True)
class Matches(Predicate):
    """``re.search(pattern, field)`` on a text field (list fields: on some element)."""

    field: str
    pattern: str

    def _compile(self, types: frozenset[MemoryType]) -> Callable[[Row], bool]:
        return _dispatch(self.field, types, self._build)

    def _build(self, kind: _Kind) -> Callable[[Row], bool]:
        if kind.py is not str and not issubclass(kind.py, CodedEnum):
            raise ValidationError(
                "where", "operator", f"matches needs a text field, not {self.field}"
            )
        # OverflowError: a repeat count past the engine's; RecursionError: groups nested past
        # what Python's own pattern parser can recurse into
        try:
            rx = re.compile(argcheck.text(self.pattern, "where", empty=True))
        except (re.error, OverflowError, RecursionError) as exc:
            raise ValidationError(
                "where", "regex", f"bad pattern {self.pattern!r}: {exc}"
            ) from None
        path = self.field

        def text(v: Any) -> str:
            return v.label if isinstance(v, CodedEnum) else v

        if kind.many:
            return lambda row: any(rx.search(text(v)) for v in (row.get(path) or ()))

        def check(row: Row) -> bool:
            v = row.get(path)
            return v is not None and rx.search(text(v)) is not None

        return check

    def _touches_data(self) -> bool:
        return self.field.startswith("data.")


class And(Predicate):
    """Every part holds."""

    __slots__ = ("parts",)

    def __init__(self, *parts: Predicate) -> None:
        self.parts = tuple(parts)

    def __repr__(self) -> str:
        return f"{type(self).__name__}{self.parts!r}"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.parts == self.parts

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.parts))

    def _compile(self, types: frozenset[MemoryType]) -> Callable[[Row], bool]:
        fns = [_compiled(p, types) for p in self.parts]
        return lambda row: all(f(row) for f in fns)

    def _touches_data(self) -> bool:
        return any(p._touches_data() for p in self.parts)


class Or(Predicate):
    """Some part holds."""

    __slots__ = ("parts",)

    def __init__(self, *parts: Predicate) -> None:
        self.parts = tuple(parts)

    def __repr__(self) -> str:
        return f"{type(self).__name__}{self.parts!r}"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.parts == self.parts

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.parts))

    def _compile(self, types: frozenset[MemoryType]) -> Callable[[Row], bool]:
        fns = [_compiled(p, types) for p in self.parts]
        return lambda row: any(f(row) for f in fns)

    def _touches_data(self) -> bool:
        return any(p._touches_data() for p in self.parts)


@dataclass(frozen=True, slots=True)
class Not(Predicate):
    """The part does not hold."""

    part: Predicate

    def _compile(self, types: frozenset[MemoryType]) -> Callable[[Row], bool]:
        fn = _compiled(self.part, types)
        return lambda row: not fn(row)

    def _touches_data(self) -> bool:
        return self.part._touches_data()


def check_depth(p: object, field: str = "where") -> None:
    """Refuse a predicate nested deeper than ``argcheck.MAX_DEPTH`` (walked without recursion).

    Raises:
        ValidationError: rule ``depth``.
    """
    todo: list[tuple[object, int]] = [(p, 1)]
    while todo:
        node, depth = todo.pop()
        if depth > argcheck.MAX_DEPTH:
            raise ValidationError(
                field, "depth", f"predicates nest deeper than {argcheck.MAX_DEPTH} levels"
            )
        if isinstance(node, And | Or):
            parts = node.parts if isinstance(node.parts, tuple) else ()
            todo.extend((x, depth + 1) for x in parts)
        elif isinstance(node, Not):
            todo.append((node.part, depth + 1))


def _compiled(p: object, types: frozenset[MemoryType]) -> Callable[[Row], bool]:
    if not isinstance(p, Predicate):
        raise ValidationError("where", "type", f"not a predicate: {p!r}")
    return p._compile(types)


# ---------------------------------------------------------------------------------------------
# Time windows and edge walks

_OWN_TIME: Final[Mapping[MemoryType, str]] = {
    MemoryType.EVENT: "data.occurred_at",
    MemoryType.FACT: "data.observed_at",
    MemoryType.GOAL: "data.horizon",
    MemoryType.CAPABILITY: "data.last_observed",
}
"""The field that says when a memory's content happened, per type (else its created time)."""


class Window(msgspec.Struct, frozen=True, kw_only=True):
    """A half-open time range ``[start, end)`` over a memory's time.

    ``on="own"`` (default) uses the memory's own time — Event ``occurred_at``, Fact
    ``observed_at``, Goal ``horizon``, Capability ``last_observed`` — falling back to the
    created time when the type has none or it is unset; ``on="created"`` the created time (the
    type and tag indexes serve that range directly); ``on="updated"`` the head's last update.
    Build one with ``Window.recent(days)``, ``between``, ``before``, ``after`` or ``all``.
    """

    start: datetime | None = None
    end: datetime | None = None
    days: float | None = None
    on: Literal["own", "created", "updated"] = "own"

    @classmethod
    def recent(cls, days: float, *, on: Literal["own", "created", "updated"] = "own") -> Window:
        """The last ``days`` days before the query's time."""
        return cls(days=days, on=on)

    @classmethod
    def between(
        cls, start: datetime, end: datetime, *, on: Literal["own", "created", "updated"] = "own"
    ) -> Window:
        """From ``start`` (inclusive) to ``end`` (exclusive)."""
        return cls(start=start, end=end, on=on)

    @classmethod
    def before(cls, end: datetime, *, on: Literal["own", "created", "updated"] = "own") -> Window:
        """Before ``end``."""
        return cls(end=end, on=on)

    @classmethod
    def after(cls, start: datetime, *, on: Literal["own", "created", "updated"] = "own") -> Window:
        """At or after ``start``."""
        return cls(start=start, on=on)

    @classmethod
    def all(cls) -> Window:
        """No bound."""
        return cls()

    def bounds(self, now: datetime) -> tuple[int | None, int | None]:
        """``(start_us, end_us)`` with ``days`` resolved against ``now``.

        Raises:
            ValidationError: a naive time, ``days`` with an explicit start, or start after end.
        """
        if self.on not in ("own", "created", "updated"):
            raise ValidationError("window.on", "enum", "must be 'own', 'created' or 'updated'")
        for name in ("start", "end"):
            t = getattr(self, name)
            if t is not None:
                argcheck.aware(t, f"window.{name}")
        start = to_micros(self.start) if self.start is not None else None
        end = to_micros(self.end) if self.end is not None else None
        if self.days is not None:
            if start is not None:
                raise ValidationError("window.days", "conflict", "give days or start, not both")
            days = argcheck.number(self.days, "window.days", 0, MAX_WINDOW_DAYS)
            if days <= 0:
                raise ValidationError("window.days", "range", "must be a positive number of days")
            start = to_micros(now - timedelta(days=days))
            end = end if end is not None else to_micros(now) + 1
        if start is not None and end is not None and start >= end:
            raise ValidationError("window", "order", "start must be before end")
        return start, end


class Follow(msgspec.Struct, frozen=True, kw_only=True):
    """An edge walk from ``Query.from_``: which edge types, how many hops, which way.

    Memories reached in ``min_hops..max_hops`` hops (by their shortest path) are the
    candidates; ``min_hops=0`` includes the starting memories. Removed edges are not followed;
    cycles are walked once.
    """

    types: tuple[EdgeType | str, ...] = ()
    min_hops: int = 1
    max_hops: int = 1
    direction: Literal["out", "in", "both"] = "out"


# ---------------------------------------------------------------------------------------------
# Query and result


class EpisodeMatch(msgspec.Struct, frozen=True, kw_only=True):
    """Episodes whose memories a query keeps: by id, source, channel or label (all given hold).

    ``Query(episode=...)`` takes one, or an episode id alone.
    """

    id: MemoryId | None = None
    source: str | None = None
    channel: str | None = None
    label: str | None = None


class Query(msgspec.Struct, frozen=True, kw_only=True):
    """What to find.

    Every field is optional, but a query must name an index to start from (types, tags,
    frames, text, near / near_vector or from_) and a limit or a token budget.

    Attributes:
        types: memory types (``"Fact"``, ``MemoryType.FACT``, ``"fact"``); any of them.
        where: a predicate over ``head.*``, ``version.*`` and ``data.*`` fields.
        tags: tags the head must all carry.
        frames: frame patterns the head must all match: ``FrameRef``, ``FrameMatch`` or
            ``"verb[:kind[:ref]]"``.
        text: lexical (BM25) search; fused with vector search when the store has an embedder.
        near: text to embed and rank by cosine similarity (needs an embedder).
        near_vector: a query vector to rank by cosine similarity.
        window: a time window (see ``Window``).
        as_of: what the store held then: the version current at that time, memories created
            later left out, memories tombstoned later still in. Head fields (tags, frames,
            importance, visibility) are the current ones: heads keep no history.
        include_tombstoned: also return tombstoned (and purged) memories.
        include_superseded: also return memories another has superseded (temporal chains,
            ``specs/claims.md`` §6); by default only the current truth of a chain is found.
        include_expired: also return versions past their ``expires_at``.
        order_by: salience, created, updated, importance, hop or score (relevance); the default
            is score for text/vector queries, hop for walks and created (newest first)
            otherwise, the orders the indexes serve without reading every candidate.
        descending: override the direction of ``order_by``.
        limit: at most this many results (after ``offset``).
        offset: skip this many ordered results.
        budget_tokens: the rendered forms of the results fit in this many tokens; the lowest
            salience results are dropped first, at least one is kept.
        form: which form is rendered and counted: short, medium or full.
        from_: memories (URIs or ids) an edge walk starts from.
        follow: the walk (see ``Follow``); defaults to one hop out along any edge.
        reader: who is reading; ``None`` is the store's own actor.
        record_access: count this find as a use of each memory returned (salience).
        episode: only memories drawn from matching episodes (``EpisodeMatch``, or an episode
            id); with no other index to start from, every type is scanned.
        evidence: with ``text``, also return up to this many episode chunks that match it
            (``Result.evidence``: episode, chunk, byte span, text, score), ranked by their own
            BM25 index; 0 (default) returns none. At most 100.
    """

    types: tuple[MemoryType | str, ...] = ()
    where: Predicate | None = None
    tags: tuple[str, ...] = ()
    frames: tuple[FrameMatch | FrameRef | str, ...] = ()
    text: str | None = None
    near: str | None = None
    near_vector: Any = None
    window: Window | None = None
    as_of: datetime | None = None
    include_tombstoned: bool = False
    include_superseded: bool = False
    include_expired: bool = False
    order_by: OrderKey | None = None
    descending: bool | None = None
    limit: int | None = None
    offset: int = 0
    budget_tokens: int | None = None
    form: Form = "short"
    from_: tuple[Uri | MemoryId | str, ...] = ()
    follow: Follow | None = None
    reader: Reader | None = None
    record_access: bool = False
    episode: EpisodeMatch | MemoryId | str | None = None
    evidence: int = 0


class Hit(msgspec.Struct, frozen=True, kw_only=True):
    """One result: the memory, its rendered form, and why it ranked where it did.

    ``score`` is the relevance (fused text/vector score) for text and vector queries and the
    salience otherwise; ``ranks`` and ``scores`` give each component (``lexical``,
    ``vector``, ``fused``) for text and vector queries; ``hop`` is the walk distance.
    """

    memory: Memory
    text: str
    tokens: int
    salience: float
    score: float
    hop: int | None = None
    ranks: dict[str, int] = msgspec.field(default_factory=dict)
    scores: dict[str, float] = msgspec.field(default_factory=dict)
    tier: str | None = None

    @property
    def uri(self) -> Uri:
        """The URI of the version returned."""
        return self.memory.uri


class Result(msgspec.Struct, frozen=True, kw_only=True):
    """What ``find`` returns: the hits in order, the token total, and what the budget dropped.

    ``evidence`` holds episode chunks (not memories) when the query asked for them.
    """

    hits: tuple[Hit, ...]
    tokens: int
    dropped: tuple[Uri, ...] = ()
    plan: str = ""
    evidence: tuple[Evidence, ...] = ()
    """Episode chunks that match the query's text (``Query(evidence=N)``), best first."""

    @property
    def memories(self) -> list[Memory]:
        """The memories of the hits, in order."""
        return [h.memory for h in self.hits]

    @property
    def uris(self) -> list[Uri]:
        """The URIs of the hits, in order."""
        return [h.memory.uri for h in self.hits]

    @property
    def trimmed(self) -> int:
        """How many results the token budget dropped."""
        return len(self.dropped)

    def __len__(self) -> int:
        return len(self.hits)

    def __iter__(self) -> Iterator[Hit]:
        return iter(self.hits)


# ---------------------------------------------------------------------------------------------
# Helpers shared with the executor


def render_form(m: Memory, form: Form) -> str:
    """The text of one form of a memory (empty for a purged memory)."""
    if form == "full":
        return render_full(m.data) if m.data is not None else ""
    forms = m.version.forms or m.head.forms
    if forms is None:
        return ""
    return forms.short if form == "short" else forms.medium


def trim_to_budget(
    items: list[Any], tokens: Callable[[Any], int], salience: Callable[[Any], float], budget: int
) -> tuple[list[Any], list[Any]]:
    """Drop the lowest-salience items (latest-ranked first among equals) until the rest fit.

    At least one item is always kept. Returns ``(kept, dropped)``, both in their original
    order.
    """
    total = sum(tokens(i) for i in items)
    if total <= budget or len(items) <= 1:
        return items, []
    order = sorted(range(len(items)), key=lambda i: (salience(items[i]), -i))
    gone: set[int] = set()
    for i in order:
        if total <= budget or len(gone) == len(items) - 1:
            break
        gone.add(i)
        total -= tokens(items[i])
    kept = [it for i, it in enumerate(items) if i not in gone]
    dropped = [it for i, it in enumerate(items) if i in gone]
    return kept, dropped


def _check_int(name: str, v: object, lo: int, hi: int | None = None) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < lo or (hi is not None and v > hi):
        bound = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        raise ValidationError(name, "range", f"must be an integer {bound}, got {v!r}")
    return v


_DEFAULT_ORDER: Final = {"walk": "hop", "text": "score", "vector": "score"}
"""A plan's order when the query names none, by where it starts (else ``created``)."""


def _as_tuple(value: object, name: str) -> tuple[Any, ...]:
    if value is None:
        return ()
    if type(value) is tuple:  # the common cases without the ABC checks below
        return value
    if type(value) is list:
        return tuple(value)
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ValidationError(name, "type", f"must be a list, got {type(value).__name__}")
    return tuple(value)


class Plan(msgspec.Struct, frozen=True, kw_only=True):
    """A validated, normalised query (internal)."""

    types: frozenset[MemoryType]
    tags: tuple[str, ...]
    frames: tuple[FrameMatch, ...]
    where: Callable[[Row], bool] | None
    where_data: bool
    text: str | None
    near: str | None
    near_vector: Any
    window: tuple[int | None, int | None] | None
    window_on: str
    as_of: int | None
    include_tombstoned: bool
    include_superseded: bool
    include_expired: bool
    order_by: str
    descending: bool
    limit: int | None
    offset: int
    budget: int | None
    form: Form
    from_: tuple[MemoryId, ...]
    follow: Follow | None
    edge_types: frozenset[EdgeType] | None
    reader: Reader | None
    record_access: bool
    start: str
    """Which index the plan starts from: walk, text, vector, frame, tag or type."""


def compile_query(q: Query, now: datetime, *, token_cap: int | None = None) -> Plan:
    """Validate ``q`` and decide where it starts.

    Raises:
        ValidationError: naming the query field and what to change.
    """
    if not isinstance(q, Query):
        raise ValidationError("query", "type", f"find takes a Query, got {type(q).__name__}")
    # a type given by its name looked up at once (memory_type's common case, without a call);
    # a loop, not a generator (no frame of its own: a find's fixed cost)
    named_types = []
    for t in _as_tuple(q.types, "types"):
        named = MemoryType.from_name(t) if type(t) is str else None
        named_types.append(named if named is not None else memory_type(t))
    types = frozenset(named_types)
    tags = argcheck.texts(_as_tuple(q.tags, "tags"), "tags")
    frames = (
        tuple(FrameMatch.of(f) for f in _as_tuple(q.frames, "frames"))
        if not (q.frames is None or (type(q.frames) is tuple and not q.frames))
        else ()
    )
    for f in frames:
        if f.obj_ref is not None and f.obj_kind is None:
            raise ValidationError(
                "frames", "kind_required", "a frame pattern with a reference needs its object kind"
            )
    where = None
    where_data = False
    if q.where is not None:
        check_depth(q.where)
        where = _compiled(q.where, types)
        where_data = q.where._touches_data()
    if q.near_vector is not None and isinstance(q.near_vector, (str, bytes)):
        raise ValidationError(
            "near_vector", "type", "is a vector (numbers); give text to embed as near="
        )
    if q.text is not None or q.near is not None:
        for name in ("text", "near"):
            v = getattr(q, name)
            if v is not None and (not isinstance(v, str) or not v.strip()):
                raise ValidationError(name, "type", "must be non-empty text")
    window = None
    window_on = "own"
    if q.window is not None:
        if not isinstance(q.window, Window):
            raise ValidationError("window", "type", "must be a Window")
        window = q.window.bounds(now)
        window_on = q.window.on
        if window == (None, None):
            window = None
    as_of = None
    if q.as_of is not None:
        if not isinstance(q.as_of, datetime) or q.as_of.tzinfo is None:
            raise ValidationError("as_of", "naive", "must be an aware datetime")
        as_of = to_micros(q.as_of)
    limit = q.limit
    if limit is not None and (type(limit) is not int or not 1 <= limit <= 100_000):
        limit = _check_int("limit", limit, 1, 100_000)  # raises (or takes an int subclass)
    offset = q.offset
    if type(offset) is not int or offset < 0:
        offset = _check_int("offset", offset, 0)
    budget = None if q.budget_tokens is None else _check_int("budget_tokens", q.budget_tokens, 1)
    if token_cap is not None:
        budget = token_cap if budget is None else min(budget, token_cap)
    if limit is None and budget is None:
        raise ValidationError(
            "limit", "required", "a find needs a limit or a budget_tokens: add limit=… (e.g. 10)"
        )
    if q.form not in ("short", "medium", "full"):
        raise ValidationError("form", "enum", "must be 'short', 'medium' or 'full'")
    from_ = (
        tuple(_ref_id(r) for r in _as_tuple(q.from_, "from_"))
        if not (q.from_ is None or (type(q.from_) is tuple and not q.from_))
        else ()
    )
    follow = q.follow
    edge_types = None
    if follow is not None and not from_:
        raise ValidationError("from_", "required", "follow walks from memories: add from_=[…]")
    if from_:
        follow = follow or Follow()
        if not isinstance(follow, Follow):
            raise ValidationError("follow", "type", "must be a Follow")
        _check_int("follow.max_hops", follow.max_hops, 0, MAX_HOPS)
        _check_int("follow.min_hops", follow.min_hops, 0, follow.max_hops)
        if follow.direction not in ("out", "in", "both"):
            raise ValidationError("follow.direction", "enum", "must be 'out', 'in' or 'both'")
        if follow.types:
            ets = set()
            for et in _as_tuple(follow.types, "follow.types"):
                m = EdgeType.coerce(et)
                if m is None:
                    raise ValidationError(
                        "follow.types", "enum", f"unknown edge type {et!r}: {EdgeType.labels()}"
                    )
                ets.add(m)
            edge_types = frozenset(ets)
    if from_:
        start = "walk"
    elif q.text is not None:
        start = "text"
    elif q.near is not None or q.near_vector is not None:
        start = "vector"
    elif frames and any(f.obj_ref is not None for f in frames):
        start = "frame"
    elif tags:
        start = "tag"
    elif frames:
        start = "frame"
    elif types:
        start = "type"
    else:
        raise ValidationError(
            "query",
            "no_index",
            "a find must start from an index: add types=, tags=, frames=, text=, near= or "
            "from_= (a blind scan of the whole store is refused)",
        )
    order_by: str = q.order_by or _DEFAULT_ORDER.get(start, "created")
    if order_by not in _ORDER_KEYS:
        raise ValidationError("order_by", "enum", f"must be one of {', '.join(_ORDER_KEYS)}")
    if order_by == "hop" and start != "walk":
        raise ValidationError("order_by", "no_walk", "order_by='hop' needs from_ and follow")
    if order_by == "score" and start not in ("text", "vector"):
        raise ValidationError("order_by", "no_score", "order_by='score' needs text or near")
    descending = _DESCENDING_BY_DEFAULT[order_by] if q.descending is None else bool(q.descending)
    if q.reader is not None and not isinstance(q.reader, Reader):
        raise ValidationError("reader", "type", "must be a Reader")
    return Plan(
        types=types,
        tags=tags,
        frames=frames,
        where=where,
        where_data=where_data,
        text=q.text,
        near=q.near,
        near_vector=q.near_vector,
        window=window,
        window_on=window_on,
        as_of=as_of,
        include_tombstoned=bool(q.include_tombstoned),
        include_superseded=bool(q.include_superseded),
        include_expired=bool(q.include_expired),
        order_by=order_by,
        descending=descending,
        limit=limit,
        offset=offset,
        budget=budget,
        form=q.form,
        from_=from_,
        follow=follow,
        edge_types=edge_types,
        reader=q.reader,
        record_access=bool(q.record_access),
        start=start,
    )


def _ref_id(ref: object) -> MemoryId:
    if isinstance(ref, MemoryId):
        return ref
    if isinstance(ref, Uri):
        return ref.id
    if isinstance(ref, str):
        return Uri.parse(ref).id if ref.startswith("cortex://") else MemoryId.parse(ref)
    raise ValidationError("from_", "type", f"must be URIs or ids, got {ref!r}")


def own_time(row: Row, on: str) -> int:
    """The time a window compares, in microseconds."""
    if on == "created":
        return to_micros(row.head.created_at)
    if on == "updated":
        return to_micros(row.head.last_updated_at)
    path = _OWN_TIME.get(row.head.type)
    if path is not None:
        v = row.get(path)
        if v is not None:
            return to_micros(v)
    return to_micros(row.head.created_at)


def in_window(t: int, window: tuple[int | None, int | None]) -> bool:
    """Whether ``t`` lies in the half-open window."""
    start, end = window
    return (start is None or t >= start) and (end is None or t < end)


@dataclass(frozen=True, slots=True)
class Fusion:
    """How a text query with an embedder merges its lexical and vector rankings.

    Each list counts with its first ``depth`` results only, and is fetched at least that deep,
    so a memory's fused score does not depend on how deep the lists were fetched (a larger
    limit, a later page, or filters that made the planner fetch more): pages of one query
    agree with each other.

    ``"convex"`` (the default): in each list a score ``s`` becomes ``(s - lo) / (hi - lo)``,
    ``hi`` its best score and ``lo`` its ``depth``-th (or last) one, so the first result gets 1
    and the ``depth``-th 0 (a list whose scores are all equal gives 1 to each); a memory's fused
    score is ``lexical_weight * lexical + (1 - lexical_weight) * vector``, a list that did not
    return the memory among its first ``depth`` counting 0. ``"rrf"``: reciprocal rank fusion,
    ``sum(1 / (k + rank))`` over the lists (rank from 1, up to ``depth``), which ignores the
    scores. Either fused score is then divided by its best possible value (first in both
    lists), so it lies in [0, 1] before the salience blend.

    On the LoCoMo development split (``tools/bench_retrieval.py``) convex fusion with equal
    weights gave recall@10 0.73 where RRF with k = 60 gave 0.68: BM25 and cosine scores carry
    how much better the first results are, which ranks alone drop.

    A ``text`` query's scores (fused, or a single list's over its best) then take two more
    terms (``cortex.query.rerank``, ``specs/query.md`` §1.9): each memory gains ``context_weight``
    times the best score among its ``context`` neighbours on each side (the memories of its
    type written just before and after it, within 30 minutes of its own time: the turns
    around it), and ``entity_weight`` when the query names its counterparty, subject or
    Identity name. With ``entity_weight`` > 0 the vector ranking also embeds the query without
    the names it counts that way (``cortex.query.rerank.unnamed``): the name is matched as a
    field, not left to pull the embedding towards texts that mention it. Both weights 0 turn
    the terms off. The defaults (2, 0.3, 0.3) come from sweeps on the LoCoMo development split
    with leave-one-conversation-out (``tools/sweep_retrieval.py``): context took hybrid
    recall@10 from 0.729 to 0.779, the entity term with the unnamed vector query to 0.803
    (README, "Retrieval quality").

    Args:
        method: ``"convex"`` or ``"rrf"``.
        lexical_weight: the weight of the lexical list in convex fusion, in [0, 1].
        k: the RRF constant, >= 1.
        depth: how many results of each list count, >= 2.
        context: neighbours on each side that lend a text hit their score, 0..8.
        context_weight: the weight of the best neighbour's score, in [0, 1].
        entity_weight: the weight of a named entity field, in [0, 1].

    Raises:
        ValidationError: an argument is out of range.
    """

    method: Literal["convex", "rrf"] = "convex"
    lexical_weight: float = 0.5
    k: int = 60
    depth: int = 32
    context: int = 2
    context_weight: float = 0.3
    entity_weight: float = 0.3

    def __post_init__(self) -> None:
        if self.method not in ("convex", "rrf"):
            raise ValidationError("fusion", "enum", 'method must be "convex" or "rrf"')
        w = self.lexical_weight
        if type(w) not in (int, float) or not 0.0 <= w <= 1.0:
            raise ValidationError("fusion", "range", "lexical_weight must be a number in [0, 1]")
        for name in ("context_weight", "entity_weight"):
            v = getattr(self, name)
            if type(v) not in (int, float) or not 0.0 <= v <= 1.0:
                raise ValidationError("fusion", "range", f"{name} must be a number in [0, 1]")
        if type(self.context) is not int or not 0 <= self.context <= 8:
            raise ValidationError("fusion", "range", "context must be an int in 0..8")
        if type(self.k) is not int or self.k < 1:
            raise ValidationError("fusion", "range", "k must be an int >= 1")
        if type(self.depth) is not int or self.depth < 2:
            raise ValidationError("fusion", "range", "depth must be an int >= 2")

    @classmethod
    def coerce(cls, value: object) -> Fusion:
        """A ``Fusion`` from itself or a method name (``"convex"``, ``"rrf"``)."""
        if isinstance(value, Fusion):
            return value
        if value in ("convex", "rrf"):
            return cls(method=value)
        raise ValidationError("fusion", "type", 'must be a cortex.Fusion, "convex" or "rrf"')

    def weight(self, name: str) -> float:
        """The weight of the list ``name`` (``"lexical"`` or ``"vector"``) in convex fusion."""
        return self.lexical_weight if name == "lexical" else 1.0 - self.lexical_weight


def fuse(
    lists: Mapping[str, Sequence[tuple[MemoryId, float]]], fusion: Fusion | None = None
) -> list[tuple[MemoryId, float, dict[str, int], dict[str, float]]]:
    """Merge ranked lists (each best first) as ``fusion`` says (``Fusion()`` by default).

    Returns ``(id, fused score in [0, 1], ranks by list, scores by list)`` for every memory of
    every list, best first, ties by id; ranks count from 1.
    """
    f = fusion or Fusion()
    fused: dict[MemoryId, float] = {}
    ranks: dict[MemoryId, dict[str, int]] = {}
    scores: dict[MemoryId, dict[str, float]] = {}
    if f.method == "rrf":
        best = len(lists) / (f.k + 1)
    else:
        best = sum(f.weight(name) for name in lists) or 1.0
    for name, items in lists.items():
        counted = items[: f.depth]
        if f.method == "rrf":
            parts = [1.0 / (f.k + rank) for rank in range(1, len(counted) + 1)]
        elif counted:
            w, hi, lo = f.weight(name), counted[0][1], counted[-1][1]
            span = hi - lo
            parts = [w * (max(0.0, s - lo) / span if span > 0 else 1.0) for _, s in counted]
        else:
            parts = []
        parts += [0.0] * (len(items) - len(counted))
        for rank, ((mid, score), part) in enumerate(zip(items, parts, strict=True), start=1):
            fused[mid] = fused.get(mid, 0.0) + part
            ranks.setdefault(mid, {})[name] = rank
            scores.setdefault(mid, {})[name] = score
    out = [(mid, s / best, ranks[mid], scores[mid]) for mid, s in fused.items()]
    out.sort(key=lambda t: (-t[1], t[0].bytes))
    return out
