"""Hostile-input fuzzing of the public surface (issue 20): value strategies and the harness.

Every public call is tried with arguments drawn from three pools: valid values (refs of
memories the store holds, records from ``tests.strategies``), boundary values (limits, their
neighbours, empty, zero) and hostile values (wrong types, NaN, 10**400, lone surrogates, naive
and extreme times, deep nesting, objects of no use). The contract (README, "Every error is a
``cortex.CortexError``"): each call either returns or raises a ``CortexError`` subclass, and a
call that raises leaves a digest of every key and value of the store unchanged.

``World`` holds one small store seeded with every kind of record; ``World.call`` runs one call
under the contract and counts it (tried / ok / refused / escaped) by surface. ``SURFACES``
maps a surface name to a function drawing one call from a ``World`` (``tests/test_fuzz.py``
runs each under hypothesis). Strategies that need the store draw from it at run time, so a
memory written by one example is a valid reference in the next.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import hashlib
import io
import json
import math
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Final

import msgspec
from hypothesis import strategies as st

import cortex
from cortex import (
    And,
    Cortex,
    CortexError,
    EdgeType,
    EpisodeMatch,
    Eq,
    Event,
    Fact,
    Follow,
    FrameMatch,
    FrameRef,
    Fusion,
    Ge,
    Goal,
    GoalStatus,
    Gt,
    HasTag,
    Identity,
    In,
    Le,
    Lt,
    Matches,
    MemoryId,
    MemoryType,
    Ne,
    NewMemory,
    Not,
    ObjKind,
    Or,
    Outcome,
    Query,
    Reader,
    Scope,
    Uri,
    Verb,
    Visibility,
    Weights,
    Window,
    WriteBudgetError,
)
from tests.qsupport import Clock, digest_of_store
from tests.strategies import any_data, aware_datetimes, forms, frame_refs, memories, provenances

# ---------------------------------------------------------------------------------------------
# Values

SURROGATES = ("\ud800", "a\udcffb", "\udfff", "x\ud83d")
"""Lone surrogates: valid ``str`` values with no UTF-8 encoding (``$'\\xff'`` in argv)."""

HOSTILE_TEXTS = (
    "",
    " ",
    "\t\n",
    "\x00",
    "a\x00b",
    *SURROGATES,
    "x" * 257,
    "x" * 16_385,
    "é" * 200,
    "\u202e\u0301",
    "ſoft",
    "nan",
    "-1",
    "1e400",
    "9" * 5000,
    "cortex://",
    "cortex://Fact/",
    "cortex://Fact/01ARZ3NDEKTSV4RRFFQ69G5FAV",
    "cortex://Fact/01ARZ3NDEKTSV4RRFFQ69G5FAV#latest",
    "cortex://Fact/01ARZ3NDEKTSV4RRFFQ69G5FAV#0",
    "cortex://Fact/01ARZ3NDEKTSV4RRFFQ69G5FAV#99999999999999999999999",
    "cortex://fact/01arz3ndektsv4rrffq69g5fav#1",
    "01ARZ3NDEKTSV4RRFFQ69G5FAV",
    "ZZZZZZZZZZZZZZZZZZZZZZZZZZ",
    "8ZZZZZZZZZZZZZZZZZZZZZZZZZ",
    "[" * 1000,
    "{" * 100,
    "(" * 500 + ")" * 500,
    "not " * 300 + "x",
    "a:b:c:d",
    "find:",
    ":::",
    "user",
    "agent",
    "..",
    ".",
)
"""Never an absolute path or one with a separator: calls that write files get these as paths
(they run in the world's temporary directory; see ``World.execute``)."""

_SAFE_CHARS = st.characters(blacklist_characters="/\\")
"""Drawn text never holds a path separator, so no drawn path leaves the temporary directory."""

HOSTILE_NUMBERS = (
    0,
    -1,
    1,
    10,
    11,
    255,
    256,
    2**31,
    2**53 + 1,
    2**63 - 1,
    2**63,
    2**64,
    -(2**63) - 1,
    10**400,
    -(10**400),
    0.5,
    -0.0,
    1e-300,
    5e-324,
    1.0000001,
    1e308,
    math.nan,
    math.inf,
    -math.inf,
    True,
    False,
)

_OFFSETS = (UTC, timezone(timedelta(hours=14)), timezone(-timedelta(hours=14)))
HOSTILE_TIMES = (
    datetime(2030, 1, 1),  # naive
    datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC),
    datetime(1, 1, 1, tzinfo=UTC),
    datetime.min.replace(tzinfo=timezone(timedelta(hours=14))),
    datetime.max.replace(tzinfo=UTC),
    datetime.max.replace(tzinfo=timezone(-timedelta(hours=14))),
    datetime(1970, 1, 1, tzinfo=UTC),
    datetime(9999, 12, 31, tzinfo=UTC),
)


class Opaque:
    """An object of no use to cortex (its repr is harmless)."""

    def __repr__(self) -> str:
        return "Opaque()"


class _Mode:
    """How the example being drawn picks arguments: ``valid_only`` (a third of the examples, so
    that calls also succeed and change the store) or valid, boundary and hostile mixed."""

    valid_only = False


MODE = _Mode()

_MEMO: collections.OrderedDict[Any, st.SearchStrategy[Any]] = collections.OrderedDict()


def memo(fn: Callable[..., st.SearchStrategy[Any]]) -> Callable[..., st.SearchStrategy[Any]]:
    """Build each strategy once per distinct arguments (hypothesis re-validates a strategy
    built afresh on every draw, which made the fuzz ten times slower). The key holds the
    arguments themselves, so an id is never reused while its entry lives; at most 4,096."""

    @functools.wraps(fn)
    def wrapper(*args: Any) -> st.SearchStrategy[Any]:
        key = (fn.__qualname__, args)
        try:
            hit = _MEMO.get(key)
        except TypeError:  # an unhashable argument: built each time
            return fn(*args)
        if hit is None:
            hit = _MEMO[key] = fn(*args)
            if len(_MEMO) > 4096:
                _MEMO.popitem(last=False)
        return hit

    return wrapper


@memo
def pick(values: Any) -> st.SearchStrategy[Any]:
    """One of ``values`` (like ``sampled_from``, but its repr does not hold them: some are
    long, and hypothesis reprs strategies)."""
    values = tuple(values)
    return st.integers(0, len(values) - 1).map(values.__getitem__)


@memo
def _scalars() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        pick(HOSTILE_NUMBERS),
        pick(HOSTILE_TEXTS),
        pick(HOSTILE_TIMES),
        st.integers(),
        st.floats(),
        st.text(_SAFE_CHARS, max_size=12),
        st.binary(max_size=24),
        st.sampled_from((b"", bytearray(b"x"), memoryview(b"ab"), Opaque(), object, len)),
        st.sampled_from((*MemoryType, *Verb, *ObjKind, *Visibility, *EdgeType, *Outcome)),
        st.binary(min_size=16, max_size=16).map(MemoryId),
    )


@memo
def hostile() -> st.SearchStrategy[Any]:
    """Anything at all: scalars of every kind, and small lists, tuples, sets and maps of them
    (two levels; ``st.recursive`` shared across draws made long runs flaky)."""
    scalar = _scalars()
    one = st.one_of(
        st.lists(scalar, max_size=4),
        st.lists(scalar, max_size=4).map(tuple),
        st.dictionaries(st.text(_SAFE_CHARS, max_size=4), scalar, max_size=3),
        st.frozensets(pick(HOSTILE_TEXTS[:12]), max_size=3),
        st.lists(scalar, max_size=3).map(iter),
    )
    two = st.one_of(
        st.lists(one, max_size=3),
        st.dictionaries(st.text(_SAFE_CHARS, max_size=4), one, max_size=2),
    )
    return st.one_of(scalar, scalar, one, two)


@st.composite
def _mixed(draw: st.DrawFn, valid: st.SearchStrategy[Any], boundary: tuple[Any, ...]) -> Any:
    if MODE.valid_only:
        return draw(valid)
    k = draw(st.integers(0, 4 if boundary else 3))
    if k < 3:
        return draw(valid)
    if k == 3:
        return draw(hostile())
    return draw(pick(boundary))


@memo
def arg(valid: st.SearchStrategy[Any], *boundary: Any) -> st.SearchStrategy[Any]:
    """An argument: valid most of the time, else a boundary value or anything at all (valid
    only, in a valid-only example)."""
    return _mixed(valid, boundary)


@memo
def texts_arg(*valid: str) -> st.SearchStrategy[Any]:
    """A text argument: one of ``valid``, drawn text, or hostile text and values."""
    good: list[st.SearchStrategy[Any]] = [st.text(_SAFE_CHARS, min_size=1, max_size=16)]
    if valid:
        good.append(st.sampled_from(valid))
    return arg(st.one_of(good), *HOSTILE_TEXTS)


@memo
def ints_arg(lo: int, hi: int) -> st.SearchStrategy[Any]:
    return arg(st.integers(lo, hi), lo - 1, lo, hi, hi + 1, *HOSTILE_NUMBERS)


@memo
def numbers_arg(lo: float, hi: float) -> st.SearchStrategy[Any]:
    return arg(st.floats(lo, hi), lo, hi, *HOSTILE_NUMBERS)


@memo
def times_arg() -> st.SearchStrategy[Any]:
    """A time: in a valid-only example one of the next years (a write takes it); otherwise any
    aware time, or a hostile one."""
    soon = st.datetimes(datetime(2030, 1, 2), datetime(2040, 1, 1), timezones=st.just(UTC))
    return st.one_of(arg(aware_datetimes(), *HOSTILE_TIMES), arg(soon))


@memo
def callbacks() -> st.SearchStrategy[Any]:
    """A progress callback, or something that is not callable (a callable that raises is the
    caller's own error, passed through)."""
    return st.one_of(
        st.just(lambda *a: None), st.none(), hostile().filter(lambda v: not callable(v))
    )


@memo
def list_of(item: st.SearchStrategy[Any], max_size: int = 4) -> st.SearchStrategy[Any]:
    """A list argument: a list or tuple of ``item``, or anything at all."""
    return arg(
        st.one_of(st.lists(item, max_size=max_size), st.lists(item, max_size=max_size).map(tuple)),
        (),
        None,
        0,
        "",
        "abc",
    )


def _break(value: msgspec.Struct, draw: Callable[..., Any]) -> Any:
    """``value`` with one field replaced by a hostile value (msgspec does not check on init)."""
    names = tuple(value.__struct_fields__)
    name = draw(st.sampled_from(names))
    return msgspec.structs.replace(value, **{name: draw(hostile())})


def _hostile_kind(draw: st.DrawFn, kinds: int) -> int:
    """0 in a valid-only example, else one of ``0..kinds`` (the callers' own menus)."""
    return 0 if MODE.valid_only else draw(st.integers(0, kinds))


@st.composite
def _data_arg(draw: st.DrawFn) -> Any:
    kind = _hostile_kind(draw, 5)
    if kind <= 2:
        return draw(any_data())
    if kind <= 4:
        return _break(draw(any_data()), draw)
    return draw(hostile())


@memo
def data_arg() -> st.SearchStrategy[Any]:
    """Typed data: valid, with one field broken, or not data at all."""
    return _data_arg()


@st.composite
def _frames_arg(draw: st.DrawFn) -> Any:
    kind = _hostile_kind(draw, 4)
    if kind <= 1:
        return draw(st.lists(frame_refs(), max_size=3, unique=True))
    if kind == 2:
        return [_break(draw(frame_refs()), draw)]
    if kind == 3:
        return [draw(frame_refs())] * 2  # repeated
    return draw(hostile())


@memo
def frames_arg() -> st.SearchStrategy[Any]:
    return _frames_arg()


@st.composite
def _provenance_arg(draw: st.DrawFn) -> Any:
    kind = _hostile_kind(draw, 3)
    if kind <= 1:
        return draw(provenances())
    if kind == 2:
        return _break(draw(provenances()), draw)
    return draw(hostile())


@memo
def provenance_arg() -> st.SearchStrategy[Any]:
    return _provenance_arg()


@st.composite
def _forms_arg(draw: st.DrawFn) -> Any:
    kind = _hostile_kind(draw, 3)
    if kind <= 1:
        return draw(forms())
    if kind == 2:
        return _break(draw(forms()), draw)
    return draw(hostile())


@memo
def forms_arg() -> st.SearchStrategy[Any]:
    return _forms_arg()


# ---------------------------------------------------------------------------------------------
# The world: one seeded store and the harness


T0 = datetime(2030, 1, 1, tzinfo=UTC)


@dataclass
class Counts:
    """Calls by surface and outcome: ok, refused (a CortexError), escaped (anything else)."""

    by_surface: dict[str, collections.Counter[str]] = field(default_factory=dict)

    def add(self, surface: str, outcome: str) -> None:
        self.by_surface.setdefault(surface, collections.Counter())[outcome] += 1

    def table(self) -> list[dict[str, Any]]:
        return [
            {
                "surface": name,
                "tried": sum(c.values()),
                "ok": c["ok"],
                "refused": c["refused"],
                "escaped": c["escaped"],
            }
            for name, c in sorted(self.by_surface.items())
        ]


COUNTS = Counts()
"""Every call the fuzz tests made in this process (``make fuzz`` prints them)."""

ESCAPES: list[dict[str, str]] = []
"""Escapes seen with ``CORTEX_FUZZ_COLLECT=1`` (``make fuzz``): recorded, and the run goes on."""


SAMPLES: dict[str, list[str]] = {}
"""What refused CLI calls printed, by surface (to read while writing strategies)."""


class Escape(AssertionError):
    """A call raised something other than a CortexError, or a failed call changed the store."""


def escape(surface: str, message: str, exc: BaseException | None = None) -> None:
    """Count an escape; raise it, or with ``CORTEX_FUZZ_COLLECT`` record it and go on."""
    COUNTS.add(surface, "escaped")
    if not os.environ.get("CORTEX_FUZZ_COLLECT"):
        raise Escape(message) from exc
    where = ""
    tb = exc.__traceback__ if exc is not None else None
    while tb is not None:
        if "/cortex/" in tb.tb_frame.f_code.co_filename:
            code = tb.tb_frame.f_code
            where = f"{Path(code.co_filename).name}:{tb.tb_lineno} {code.co_name}"
        tb = tb.tb_next
    ESCAPES.append({"surface": surface, "error": message, "where": where})


class World:
    """A seeded store, the refs it holds, and the harness that runs calls under the contract."""

    def __init__(self, root: Path, surface: str, url: str | None = None) -> None:
        self.root = root
        self.surface = surface
        self.clock = Clock(T0)
        # a directory (LMDB), or a PostgreSQL URL: the same calls through the engine with
        # round trips, whose reads preload (``Planner.preload``)
        self.path: Any = root / "store" if url is None else url
        self.cx = Cortex.open(self.path, actor="owner", clock=self.clock)
        self.uris: list[Uri] = []
        self.episodes: list[MemoryId] = []
        self.n = 0
        self.pending: list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] | None
        self.pending = None
        self._ref: st.SearchStrategy[Any] | None = None
        self._episode_ref: st.SearchStrategy[Any] | None = None
        self._queries: st.SearchStrategy[Any] | None = None
        self._seed()

    def close(self) -> None:
        with contextlib.suppress(CortexError):
            self.cx.close()

    def _seed(self) -> None:
        cx = self.cx
        w = cx.write
        self.uris += [
            w(
                Fact(statement="Ada lives in Zurich", subject="ada", predicate="home_city"),
                tags=["people", "zurich"],
                frames=[FrameRef(verb=Verb.FIND, obj_kind=ObjKind.KNOWLEDGE, obj_ref="ada")],
                importance=7,
                visibility=Visibility.ACTOR_PUBLIC,
            ),
            w(
                Event(kind="deploy", outcome=Outcome.SUCCESS, counterparty="ada", occurred_at=T0),
                frames=[FrameRef(verb=Verb.DELIVER, obj_kind=ObjKind.SERVICE, obj_ref="svc://a")],
                visibility=Visibility.SCOPED,
                tags=["ops"],
            ),
            w(Identity(name="ada", roles=("engineer",))),
            w(Goal(statement="ship it", status=GoalStatus.ACTIVE), tags=["people"]),
            w(Fact(statement="Bob likes tea", subject="bob", predicate="likes")),
        ]
        self.uris.append(
            cx.update(
                self.uris[0],
                Fact(statement="Ada lives in Basel", subject="ada", predicate="home_city"),
            )
        )
        gone = w(Fact(statement="old news", subject="x", predicate="y"))
        cx.tombstone(gone, "wrong")
        purged = w(Fact(statement="secret", subject="x", predicate="z"))
        cx.purge(purged, "erase")
        self.uris += [gone, purged]
        cx.add_edge(self.uris[0], EdgeType.REFERENCES, self.uris[1])
        cx.add_edge(self.uris[1], EdgeType.CAUSED_BY, self.uris[3])
        cx.remove_edge(self.uris[1], EdgeType.CAUSED_BY, self.uris[3])
        ep = cx.ingest("Ada said she moved to Basel last week.", source="chat", labels=["s1"])
        self.episodes.append(ep.episode.id)
        # labelled memories and episodes another reader's gate must hide (sensitivity.md §3)
        for level in ("public", "confidential", "restricted"):
            self.uris.append(
                w(
                    Fact(statement=f"Ada's {level} plan", subject="ada", predicate=f"{level}_plan"),
                    tags=["people"],
                    visibility=Visibility.ACTOR_PUBLIC,
                    sensitivity=level,
                )
            )
            ep = cx.ingest(f"A {level} note about Ada.", visibility="actor_public",
                           sensitivity=level)  # fmt: skip
            self.episodes.append(ep.episode.id)
        cx.core_update("user", "timezone", "Europe/Zurich")
        cx.attest([self.uris[0]], Outcome.SUCCESS)

    # -- drawing refs held by the store ---------------------------------------------------

    def ref(self) -> st.SearchStrategy[Any]:
        """A memory reference: a URI, its text, an id or id text of a memory the store holds
        (or held), one it never held, or anything at all."""
        if self._ref is None:
            known = _known(self, "uris")
            self._ref = arg(
                st.one_of(
                    known,
                    known.map(str),
                    known.map(lambda u: u.id),
                    known.map(lambda u: str(u.id)),
                    known.map(lambda u: Uri(u.type, u.id, u.version + 1)),
                    known.map(lambda u: Uri(MemoryType.PATTERN, u.id, 1)),
                    st.binary(min_size=16, max_size=16).map(MemoryId),
                ),
                *HOSTILE_TEXTS[-20:],
            )
        return self._ref

    def episode_ref(self) -> st.SearchStrategy[Any]:
        if self._episode_ref is None:
            eps = _known(self, "episodes")
            self._episode_ref = arg(
                st.one_of(eps, eps.map(str)), "01ARZ3NDEKTSV4RRFFQ69G5FAV", *SURROGATES
            )
        return self._episode_ref

    def reader(self) -> st.SearchStrategy[Any]:
        """A reader: none, the owner, another actor with or without scopes, or not a reader."""
        return _readers()

    def queries(self) -> st.SearchStrategy[Any]:
        if self._queries is None:
            self._queries = queries(self)
        return self._queries

    # -- the contract ---------------------------------------------------------------------

    def call(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        """Run ``fn(*args, **kw)`` (or, while drawing, hold it for ``run_pending``): it returns,
        or raises a CortexError leaving the store as it was; anything else is an escape."""
        if self.pending is not None:
            self.pending.append((fn, args, kw))
            return None
        return self.execute(fn, *args, **kw)

    def execute(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        with _inside(self.root):  # a relative path a call writes lands in the world
            return self._execute(fn, *args, **kw)

    def _execute(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        surface = self.surface
        self.n += 1
        self.clock.tick(1)
        before, before_rest = _digests(self.cx)
        try:
            out = fn(*args, **kw)
            if isinstance(out, Iterator):  # lazy results are part of the call
                out = list(out)
        except CortexError as exc:
            after, after_rest = _digests(self.cx)
            if isinstance(exc, WriteBudgetError) or isinstance(exc.__context__, WriteBudgetError):
                # by design a dropped write journals its drop (budget_drop): the journal may
                # grow, nothing else may change
                before, after = before_rest, after_rest
            if after != before:
                escape(surface, f"{surface}: a failed call changed the store ({exc!r})", exc)
                return None
            COUNTS.add(surface, "refused")
            return None
        except Exception as exc:
            escape(surface, f"{surface}: {type(exc).__name__} escaped: {exc!s:.200}", exc)
            return None
        COUNTS.add(surface, "ok")
        episode = getattr(out, "episode", None)
        if isinstance(episode, cortex.model.records.Episode):
            self.episodes.append(episode.id)
        if isinstance(out, Uri):
            self.uris.append(out)
        elif isinstance(out, list) and out and all(isinstance(u, Uri) for u in out):
            self.uris.extend(out)
        return out

    def tmp(self, name: str) -> Path:
        self.n += 1
        return self.root / f"{name}-{self.n}"


@st.composite
def _known(draw: st.DrawFn, w: World, attr: str) -> Any:
    """One of what the world holds now (``uris``, ``episodes``): it grows as calls succeed."""
    seq = getattr(w, attr)
    # the same strategy however long the list is (a replay may find it longer)
    return seq[draw(st.integers(0, 2**16)) % len(seq)]


@memo
def _readers() -> st.SearchStrategy[Any]:
    scopes = st.sampled_from(
        (
            (),
            (Scope(types=frozenset({MemoryType.FACT}), tags=frozenset({"people"})),),
            (Scope(writable=True, frames=(FrameMatch(verb=Verb.FIND),)),),
            (Scope(token_budget=5, expires_at=T0 + timedelta(days=1)),),
            (Scope(expires_at=T0 - timedelta(days=1)),),
        )
    )
    good = st.builds(Reader, actor=st.sampled_from(("owner", "guest", "helper")), scopes=scopes)
    return arg(st.one_of(st.none(), good))


@contextlib.contextmanager
def _inside(root: Path) -> Iterator[None]:
    here = os.getcwd()
    os.chdir(root)
    try:
        yield
    finally:
        os.chdir(here)


_NEVER_VALID: Final = frozenset({"vector", "expected_version"})
"""Options a valid-only example leaves out: the world's store has no embedder, and a random
expected version is mostly stale."""


def _digests(cx: Cortex) -> tuple[str, str]:
    """``digest_of_store``, and the same digest without the journal's keys (``j/``)."""
    whole, rest = hashlib.sha256(), hashlib.sha256()
    with cx._kv.read() as txn:
        for key, value in txn.scan(b""):
            item = len(key).to_bytes(4, "big") + key + len(value).to_bytes(4, "big") + value
            whole.update(item)
            if not key.startswith(b"j/"):
                rest.update(item)
    return whole.hexdigest(), rest.hexdigest()


def opt(draw: st.DrawFn, kw: dict[str, Any], name: str, strategy: st.SearchStrategy[Any]) -> None:
    """Set ``kw[name]`` to a drawn value half of the time (else the default applies); a third
    of the time in a valid-only example."""
    if MODE.valid_only:
        if name not in _NEVER_VALID and draw(st.integers(0, 2)) == 0:
            kw[name] = draw(strategy)
    elif draw(st.booleans()):
        kw[name] = draw(strategy)


# ---------------------------------------------------------------------------------------------
# Queries, predicates and windows


FIELDS = (
    "data.subject",
    "data.statement",
    "data.confidence",
    "data.strength",
    "data.occurred_at",
    "data.roles",
    "head.importance",
    "head.tags",
    "head.created_at",
    "head.visibility",
    "head.id",
    "head.tombstoned",
    "version.confidence",
    "version.provenance.source",
    "head.nope",
    "data.",
    "meta.x",
)


def predicates() -> st.SearchStrategy[Any]:
    field_ = arg(st.sampled_from(FIELDS))
    value = arg(
        st.one_of(st.text(max_size=6), st.integers(-5, 12), st.floats(0, 1), aware_datetimes())
    )
    leaf = st.one_of(
        st.builds(Eq, field_, value),
        st.builds(Ne, field_, value),
        st.builds(Lt, field_, value),
        st.builds(Le, field_, value),
        st.builds(Gt, field_, value),
        st.builds(Ge, field_, value),
        st.builds(In, field_, arg(st.lists(value, max_size=3).map(tuple))),
        st.builds(HasTag, texts_arg("people")),
        st.builds(Matches, field_, texts_arg("a.*", "(", "a{99999999999}", "(" * 300)),
    )
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3).map(lambda ps: And(*ps)),
            st.lists(inner, max_size=3).map(lambda ps: Or(*ps)),
            inner.map(Not),
        ),
        max_leaves=6,
    ) | st.one_of(
        st.sampled_from((63, 64, 65, 200)).map(_deep_not),
        st.sampled_from((64, 65, 200)).map(_deep_and),
        st.sampled_from((Opaque(), "data.x = 1")),
    )


def _deep_not(n: int) -> Any:
    p: Any = Eq("head.importance", 1)
    for _ in range(n):
        p = Not(p)
    return p


def _deep_and(n: int) -> Any:
    p: Any = Eq("head.importance", 1)
    for _ in range(n):
        p = And(p, Eq("head.importance", 2))
    return p


def windows() -> st.SearchStrategy[Any]:
    on = arg(st.sampled_from(("own", "created", "updated")))
    return arg(
        st.one_of(
            st.builds(Window.recent, numbers_arg(0.001, 10_000), on=on),
            st.builds(lambda a, b, o: Window(start=a, end=b, on=o), times_arg(), times_arg(), on),
            st.builds(lambda d, a: Window(days=d, start=a), numbers_arg(1, 9), times_arg()),
            st.builds(lambda d: Window(days=d), pick(HOSTILE_NUMBERS)),
        )
    )


@st.composite
def queries(draw: st.DrawFn, w: World) -> Any:
    if draw(st.integers(0, 20)) == 0:
        return draw(hostile())
    kw: dict[str, Any] = {}
    opt(draw, kw, "types", list_of(arg(st.sampled_from(("Fact", "event", *MemoryType)))))
    opt(draw, kw, "tags", list_of(texts_arg("people", "ops")))
    opt(
        draw,
        kw,
        "frames",
        list_of(
            arg(
                st.one_of(
                    frame_refs(),
                    st.sampled_from(("find", "find:knowledge:ada", "deliver:service", "nope:x")),
                )
            )
        ),
    )
    opt(draw, kw, "text", texts_arg("ada", "tea basel"))
    opt(draw, kw, "near", texts_arg("ada"))
    opt(draw, kw, "near_vector", arg(st.lists(st.floats(-1, 1), max_size=4)))
    opt(draw, kw, "where", arg(predicates()))
    opt(draw, kw, "window", windows())
    opt(draw, kw, "as_of", times_arg())
    opt(draw, kw, "include_tombstoned", arg(st.booleans()))
    opt(draw, kw, "include_expired", arg(st.booleans()))
    opt(
        draw,
        kw,
        "order_by",
        texts_arg("salience", "created", "updated", "importance", "hop", "score"),
    )
    opt(draw, kw, "descending", arg(st.booleans()))
    opt(draw, kw, "limit", ints_arg(1, 100_000))
    opt(draw, kw, "offset", ints_arg(0, 5))
    opt(draw, kw, "budget_tokens", ints_arg(1, 4000))
    opt(draw, kw, "form", texts_arg("short", "medium", "full"))
    opt(draw, kw, "from_", list_of(w.ref(), 2))
    opt(
        draw,
        kw,
        "follow",
        arg(
            st.builds(
                Follow,
                types=list_of(arg(st.sampled_from((*EdgeType, "references", "nope")))),
                min_hops=ints_arg(0, 6),
                max_hops=ints_arg(0, 6),
                direction=texts_arg("out", "in", "both"),
            )
        ),
    )
    opt(draw, kw, "reader", w.reader())
    opt(draw, kw, "record_access", arg(st.booleans()))
    opt(
        draw,
        kw,
        "episode",
        arg(
            st.one_of(
                w.episode_ref(),
                st.builds(EpisodeMatch, source=texts_arg("chat"), label=texts_arg("s1")),
            )
        ),
    )
    opt(draw, kw, "evidence", ints_arg(0, 100))
    return Query(**kw)


# ---------------------------------------------------------------------------------------------
# Surfaces: each draws one call and runs it under the contract

Surface = Callable[[World, st.DrawFn], None]
SURFACES: dict[str, Surface] = {}


def surface(name: str) -> Callable[[Surface], Surface]:
    def register(fn: Surface) -> Surface:
        SURFACES[name] = fn
        return fn

    return register


def _version_options(draw: st.DrawFn, w: World, kw: dict[str, Any]) -> None:
    opt(draw, kw, "created_by", texts_arg("someone"))
    opt(draw, kw, "confidence", numbers_arg(0, 1))
    opt(draw, kw, "provenance", provenance_arg())
    opt(draw, kw, "forms", forms_arg())
    opt(draw, kw, "valid_from", times_arg())
    opt(draw, kw, "valid_until", times_arg())
    opt(draw, kw, "expires_at", times_arg())
    opt(draw, kw, "vector", arg(st.lists(st.floats(-1, 1), max_size=3)))


def _head_options(draw: st.DrawFn, kw: dict[str, Any]) -> None:
    opt(draw, kw, "tags", list_of(texts_arg("people", "x" * 64, "x" * 65), 17))
    opt(draw, kw, "frames", frames_arg())
    opt(draw, kw, "importance", ints_arg(0, 10))
    opt(draw, kw, "visibility", arg(st.sampled_from((*Visibility, "private", "public"))))


@surface("Cortex.write")
def _write(w: World, draw: st.DrawFn) -> None:
    kw: dict[str, Any] = {}
    _head_options(draw, kw)
    _version_options(draw, w, kw)
    opt(draw, kw, "id", arg(st.binary(min_size=16, max_size=16).map(MemoryId)))
    opt(draw, kw, "dedupe", arg(st.booleans()))
    if draw(st.integers(0, 9)) == 0:
        kw[draw(st.sampled_from(("tag", "colour", "head")))] = draw(hostile())
    w.call(w.cx.write, draw(data_arg()), **kw)


@surface("Cortex.write_many")
def _write_many(w: World, draw: st.DrawFn) -> None:
    item = st.one_of(
        data_arg(),
        st.builds(lambda d, t: NewMemory(data=d, tags=t), data_arg(), list_of(texts_arg())),
    )
    w.call(w.cx.write_many, draw(list_of(item, 3)))


@surface("Cortex.update")
def _update(w: World, draw: st.DrawFn) -> None:
    kw: dict[str, Any] = {}
    _version_options(draw, w, kw)
    opt(draw, kw, "expected_version", ints_arg(1, 3))
    w.call(w.cx.update, draw(w.ref()), draw(data_arg()), **kw)


@surface("Cortex.update_head")
def _update_head(w: World, draw: st.DrawFn) -> None:
    kw: dict[str, Any] = {}
    _head_options(draw, kw)
    if draw(st.integers(0, 9)) == 0:
        kw[draw(st.sampled_from(("forms", "type", "x")))] = draw(hostile())
    w.call(w.cx.update_head, draw(w.ref()), **kw)


@surface("Cortex.tombstone")
def _tombstone(w: World, draw: st.DrawFn) -> None:
    kw: dict[str, Any] = {}
    opt(draw, kw, "by", texts_arg("someone"))
    w.call(w.cx.tombstone, draw(w.ref()), draw(texts_arg("wrong")), **kw)


@surface("Cortex.purge")
def _purge(w: World, draw: st.DrawFn) -> None:
    kw: dict[str, Any] = {}
    opt(draw, kw, "by", texts_arg("someone"))
    w.call(w.cx.purge, draw(w.ref()), draw(texts_arg("gdpr")), **kw)


@surface("Cortex.resolve")
def _resolve(w: World, draw: st.DrawFn) -> None:
    kw: dict[str, Any] = {}
    opt(draw, kw, "reader", w.reader())
    name = draw(st.sampled_from(("resolve", "resolve_latest", "history", "salience_state")))
    if name == "salience_state":
        kw = {}
    w.call(getattr(w.cx, name), draw(w.ref()), **kw)


@surface("Cortex.resolve_as_of")
def _as_of(w: World, draw: st.DrawFn) -> None:
    kw: dict[str, Any] = {}
    opt(draw, kw, "known_at", times_arg())
    opt(draw, kw, "reader", w.reader())
    w.call(w.cx.resolve_as_of, draw(w.ref()), draw(times_arg()), **kw)


@surface("Cortex.find")
def _find(w: World, draw: st.DrawFn) -> None:
    w.call(w.cx.find, draw(w.queries()))


@surface("Cortex.context")
def _context(w: World, draw: st.DrawFn) -> None:
    kw: dict[str, Any] = {}
    opt(draw, kw, "budget_tokens", ints_arg(1, 4000))
    opt(draw, kw, "query", texts_arg("ada"))
    opt(draw, kw, "reader", w.reader())
    opt(draw, kw, "form", texts_arg("short", "medium", "full"))
    opt(draw, kw, "outcomes_per_object", ints_arg(0, 5))
    opt(draw, kw, "recall_limit", ints_arg(1, 20))
    opt(draw, kw, "evidence", ints_arg(0, 100))
    objects = arg(
        st.one_of(
            st.lists(
                st.one_of(
                    st.sampled_from(("ada", "knowledge:ada", "service:svc://a", "svc://a")),
                    st.tuples(st.sampled_from(("knowledge", "service", "x")), texts_arg("ada")),
                    frame_refs(),
                ),
                max_size=3,
            ),
            texts_arg("ada"),
        )
    )
    w.call(
        w.cx.context,
        draw(arg(st.sampled_from((*Verb, "find", "deliver", "call")))),
        draw(objects),
        **kw,
    )


@surface("Cortex.attest")
def _attest(w: World, draw: st.DrawFn) -> None:
    outcome = arg(st.sampled_from((*Outcome, "success", "failure", "partial")))
    if draw(st.booleans()):
        w.call(w.cx.attest, draw(list_of(w.ref(), 3)), draw(outcome))
    else:
        w.call(w.cx.attest, draw(list_of(w.ref(), 3)))


@surface("Cortex.facets")
def _facets(w: World, draw: st.DrawFn) -> None:
    kw: dict[str, Any] = {}
    opt(draw, kw, "types", list_of(arg(st.sampled_from(("Fact", *MemoryType)))))
    opt(draw, kw, "reader", w.reader())
    by = texts_arg("type", "tag", "subject", "counterparty")
    w.call(w.cx.facets, draw(st.one_of(st.none(), windows())), draw(by), **kw)


@surface("Cortex.about")
def _about(w: World, draw: st.DrawFn) -> None:
    kw: dict[str, Any] = {}
    opt(draw, kw, "limit", ints_arg(1, 100_000))
    opt(draw, kw, "reader", w.reader())
    opt(draw, kw, "as_of", times_arg())
    attribute = st.one_of(st.none(), texts_arg("home_city"))
    w.call(w.cx.about, draw(texts_arg("ada", "bob")), draw(attribute), **kw)


@surface("Cortex.search")
def _search(w: World, draw: st.DrawFn) -> None:
    kw: dict[str, Any] = {}
    opt(draw, kw, "limit", ints_arg(1, 1000))
    opt(draw, kw, "reader", w.reader())
    question = texts_arg(
        "where does ada live?",
        "what happened last week",
        "what did Ana say in May 2023?",
        "between March and June",
        "since Tuesday",
    )
    w.call(w.cx.search, draw(question), **kw)


@surface("Cortex.view")
def _view(w: World, draw: st.DrawFn) -> None:
    reader = draw(w.reader())
    if reader is None or not isinstance(reader, Reader):
        w.call(w.cx.view, reader)
        return
    view = w.cx.view(reader)
    what = draw(
        st.sampled_from(("find", "context", "resolve", "history", "write", "update", "tombstone"))
    )
    if what == "find":
        w.call(view.find, draw(w.queries()))
    elif what == "context":
        w.call(
            view.context,
            draw(arg(st.sampled_from(("find", "call")))),
            draw(list_of(texts_arg("ada", "knowledge:ada"))),
        )
    elif what == "resolve":
        w.call(view.resolve, draw(w.ref()))
    elif what == "history":
        w.call(view.history, draw(w.ref()))
    elif what == "write":
        kw: dict[str, Any] = {}
        _head_options(draw, kw)
        w.call(view.write, draw(data_arg()), **kw)
    elif what == "update":
        w.call(view.update, draw(w.ref()), draw(data_arg()))
    else:
        w.call(view.tombstone, draw(w.ref()), draw(texts_arg("why")))


@surface("Cortex.edges")
def _edges(w: World, draw: st.DrawFn) -> None:
    et = arg(st.sampled_from((*EdgeType, "references", "supersedes")))
    what = draw(st.sampled_from(("add", "remove", "list")))
    if what == "add":
        kw: dict[str, Any] = {}
        opt(draw, kw, "by", texts_arg("someone"))
        opt(draw, kw, "weight", numbers_arg(0, 1))
        w.call(w.cx.add_edge, draw(w.ref()), draw(et), draw(w.ref()), **kw)
    elif what == "remove":
        kw = {}
        opt(draw, kw, "by", texts_arg("someone"))
        w.call(w.cx.remove_edge, draw(w.ref()), draw(et), draw(w.ref()), **kw)
    else:
        kw = {}
        opt(draw, kw, "direction", texts_arg("out", "in", "both"))
        opt(draw, kw, "types", st.one_of(st.none(), list_of(et)))
        opt(draw, kw, "include_removed", arg(st.booleans()))
        w.call(w.cx.edges, draw(w.ref()), **kw)


@surface("Cortex.journal")
def _journal(w: World, draw: st.DrawFn) -> None:
    kw: dict[str, Any] = {}
    opt(draw, kw, "reverse", arg(st.booleans()))
    opt(draw, kw, "limit", st.one_of(st.none(), ints_arg(0, 50)))
    if draw(st.booleans()):
        w.call(w.cx.journal, draw(ints_arg(0, 2**64 - 1)), **kw)
    else:
        w.call(w.cx.journal, **kw)


@surface("Cortex.verify+stats")
def _verify(w: World, draw: st.DrawFn) -> None:
    what = draw(
        st.sampled_from(
            [
                "verify",
                "stats",
                "vector_info",
                "vector_state",
                "save_vectors",
                "reindex_lexical",
                "embed_pending",
                "reindex_vectors",
            ]
        )
    )
    fn = getattr(w.cx, what)
    if what in ("verify", "reindex_lexical", "reindex_vectors") and draw(st.booleans()):
        w.call(fn, draw(callbacks()))
    else:
        w.call(fn)


@surface("Cortex.backup")
def _backup(w: World, draw: st.DrawFn) -> None:
    dest = arg(
        st.just(str(w.tmp("backup"))),
        str(w.path),
        str(w.path / "data.mdb"),
        str(w.path / "data.mdb" / "under"),
        "\x00",
        "x" * 5000,
        *SURROGATES,
    )
    w.call(w.cx.backup, draw(dest))


@st.composite
def _imported(draw: st.DrawFn) -> Any:
    head, version, _ = draw(memories())
    head = msgspec.structs.replace(head, current_version=1)
    version = msgspec.structs.replace(version, version=1)
    kind = draw(st.integers(0, 6))
    if kind == 4:
        head = _break(head, draw)
    elif kind == 5:
        version = _break(version, draw)
    elif kind == 6:
        return draw(hostile())
    return (head, [version])


@surface("Cortex.import_records")
def _import_records(w: World, draw: st.DrawFn) -> None:
    memories_ = list_of(_imported(), 2)
    edges = list_of(st.builds(lambda e: e, hostile()), 1)
    if draw(st.booleans()):
        w.call(w.cx.import_records, draw(memories_))
    else:
        w.call(w.cx.import_records, draw(memories_), draw(edges), draw(list_of(hostile(), 1)))


@surface("Cortex.ingest")
def _ingest(w: World, draw: st.DrawFn) -> None:
    kw: dict[str, Any] = {}
    opt(draw, kw, "occurred_at", times_arg())
    opt(draw, kw, "source", texts_arg("chat", "api"))
    opt(draw, kw, "channel", texts_arg("thread-1"))
    opt(draw, kw, "labels", list_of(texts_arg("s1"), 17))
    opt(draw, kw, "visibility", arg(st.sampled_from((*Visibility, "private"))))
    opt(draw, kw, "media_type", texts_arg("text/markdown", "text/plain"))
    opt(draw, kw, "id", arg(st.binary(min_size=16, max_size=16).map(MemoryId)))
    content = texts_arg("# Notes\n\nAda moved to Basel.", "Bob likes tea. " * 300)
    w.call(w.cx.ingest, draw(content), **kw)


@surface("Cortex.episodes")
def _episodes(w: World, draw: st.DrawFn) -> None:
    what = draw(
        st.sampled_from(("episode", "episodes", "episode_of", "memories_from", "purge_episode"))
    )
    kw: dict[str, Any] = {}
    if what != "purge_episode":
        opt(draw, kw, "reader", w.reader())
    if what == "episodes":
        opt(draw, kw, "limit", ints_arg(1, 10_000))
        opt(draw, kw, "source", texts_arg("chat"))
        opt(draw, kw, "channel", texts_arg("x"))
        opt(draw, kw, "label", texts_arg("s1"))
        w.call(w.cx.episodes, **kw)
    elif what == "episode_of":
        w.call(w.cx.episode_of, draw(w.ref()), **kw)
    elif what == "purge_episode":
        opt(draw, kw, "by", texts_arg("someone"))
        w.call(w.cx.purge_episode, draw(w.episode_ref()), draw(texts_arg("erase")), **kw)
    else:
        w.call(getattr(w.cx, what), draw(w.episode_ref()), **kw)


@surface("Cortex.core")
def _core(w: World, draw: st.DrawFn) -> None:
    section = texts_arg("user", "agent")
    key = texts_arg("timezone", "tone")
    what = draw(st.sampled_from(("get", "update", "delete", "history", "yaml")))
    if what == "get":
        kw: dict[str, Any] = {}
        opt(draw, kw, "as_of", times_arg())
        w.call(w.cx.core_get, draw(st.one_of(st.none(), section)), **kw)
    elif what == "update":
        w.call(w.cx.core_update, draw(section), draw(key), draw(texts_arg("UTC")))
    elif what == "delete":
        w.call(w.cx.core_delete, draw(section), draw(key))
    elif what == "history":
        w.call(w.cx.core_history, draw(section), draw(key))
    else:
        kw = {}
        opt(draw, kw, "as_of", times_arg())
        w.call(w.cx.core_yaml, **kw)


_NAMES = ("ada", "Ada Lovelace", "@ADA.", "sarah chen", "Sarah", "nyc", "new york city", "bob")


@surface("Cortex.aliases")
def _aliases(w: World, draw: st.DrawFn) -> None:
    name = texts_arg(*_NAMES)
    what = draw(st.sampled_from(("alias", "unalias", "aliases", "suggest", "about", "write")))
    kw: dict[str, Any] = {}
    if what == "alias":
        w.call(w.cx.alias, draw(name), draw(name))
    elif what == "unalias":
        w.call(w.cx.unalias, draw(name))
    elif what == "aliases":
        w.call(w.cx.aliases, *([] if draw(st.booleans()) else [draw(st.one_of(st.none(), name))]))
    elif what == "suggest":  # names embedded: a second handle of the store with an embedder
        opt(draw, kw, "threshold", numbers_arg(0.0, 1.0))
        opt(draw, kw, "limit", ints_arg(0, 5))
        opt(draw, kw, "reader", w.reader())
        from cortex.index.embed import HashingEmbedder

        # opened before the call: opening with an embedder may record it (not the call's doing)
        with Cortex.open(
            w.path, actor="owner", clock=w.clock, embedder=HashingEmbedder(32)
        ) as handle:
            w.call(handle.suggest_aliases, **kw)
    elif what == "about":
        opt(draw, kw, "reader", w.reader())
        w.call(w.cx.about, draw(name), **kw)
    else:  # a claim under one of the names: aliases make it compete with the others'
        subject = draw(st.sampled_from(_NAMES))
        city = draw(st.sampled_from(("Basel", "Zurich", "Lisbon")))
        w.call(
            w.cx.write,
            Fact(statement=f"{subject} lives in {city}", subject=subject, predicate="home_city"),
        )


@surface("Cortex.chains")
def _chains(w: World, draw: st.DrawFn) -> None:
    what = draw(st.sampled_from(("chain", "conflicts", "resolve_conflict")))
    kw: dict[str, Any] = {}
    opt(draw, kw, "reader", w.reader())
    if what == "chain":
        opt(draw, kw, "as_of", times_arg())
        w.call(w.cx.chain, draw(w.ref()), **kw)
    elif what == "conflicts":
        w.call(w.cx.conflicts, **kw)
    else:
        reason = texts_arg("the newer source")
        w.call(w.cx.resolve_conflict, draw(w.ref()), draw(w.ref()), reason=draw(reason))


@surface("Cortex.task")
def _task(w: World, draw: st.DrawFn) -> None:
    task_id = texts_arg("task-1", "task-2")
    if draw(st.booleans()):
        w.call(w.cx.task_usage, draw(task_id))
        return
    kw: dict[str, Any] = {}
    opt(draw, kw, "limit", ints_arg(0, 3))
    data = draw(data_arg())

    def write_in_task(tid: Any, **options: Any) -> None:
        with w.cx.task(tid, **options):
            w.cx.write(data)

    w.call(write_in_task, draw(task_id), **kw)


_LEVELS = ("public", "internal", "confidential", "restricted", "secret")


@surface("Cortex.sensitivity")
def _sensitivity(w: World, draw: st.DrawFn) -> None:
    level = arg(st.sampled_from(_LEVELS[:4]), *_LEVELS)
    what = draw(st.sampled_from(("of", "episode_of", "set_episode", "head", "write", "read")))
    kw: dict[str, Any] = {}
    if what in ("of", "episode_of"):
        opt(draw, kw, "reader", w.reader())
    if what == "of":
        w.call(w.cx.sensitivity, draw(w.ref()), **kw)
    elif what == "episode_of":
        w.call(w.cx.episode_sensitivity, draw(w.episode_ref()), **kw)
    elif what == "set_episode":
        w.call(w.cx.set_episode_sensitivity, draw(w.episode_ref()), draw(level))
    elif what == "head":
        w.call(w.cx.update_head, draw(w.ref()), sensitivity=draw(level))
    elif what == "write":
        w.call(w.cx.write, draw(data_arg()), sensitivity=draw(level))
    else:  # a reader's clearance, then a read through it
        clearance = draw(level)

        def read_as(c: Any, ref: Any) -> Any:
            return w.cx.resolve_latest(ref, reader=Reader(actor="guest", clearance=c))

        w.call(read_as, clearance, draw(w.ref()))


@surface("salvage+export_digest")
def _salvage(w: World, draw: st.DrawFn) -> None:
    if draw(st.booleans()):
        w.call(cortex.export_digest, w.cx, encoding=draw(texts_arg("jsonl", "cbor")))
        return
    source = arg(st.just(str(w.path)), str(w.root / "nowhere"), "", "\x00", *SURROGATES)
    dest = arg(st.builds(lambda: str(w.tmp("salvaged"))), str(w.path), "\x00", *SURROGATES)
    kw: dict[str, Any] = {}
    opt(draw, kw, "actor", texts_arg("owner"))
    opt(draw, kw, "progress", callbacks())
    w.call(cortex.salvage, draw(source), draw(dest), **kw)


@surface("Cortex.open")
def _open(w: World, draw: st.DrawFn) -> None:
    kw: dict[str, Any] = {}
    opt(draw, kw, "create", arg(st.booleans()))
    opt(draw, kw, "readonly", arg(st.booleans()))
    opt(draw, kw, "metasync", arg(st.booleans()))
    opt(draw, kw, "map_size", ints_arg(1, 1 << 30))
    opt(
        draw,
        kw,
        "decay",
        arg(
            st.dictionaries(
                st.sampled_from(("Fact", "event", "x")), st.sampled_from(("slow", "fast", "x"))
            )
        ),
    )
    opt(draw, kw, "weights", arg(st.just(Weights())))
    opt(draw, kw, "salience_blend", numbers_arg(0, 1))
    opt(draw, kw, "fusion", arg(st.sampled_from(("convex", "rrf", Fusion(method="rrf")))))
    opt(draw, kw, "dedupe", arg(st.booleans()))
    opt(draw, kw, "vector_ef", ints_arg(1, 1000))
    opt(draw, kw, "embedder", arg(st.sampled_from((None, "auto"))))
    opt(draw, kw, "check_pages", arg(st.booleans()))
    opt(draw, kw, "clearance", arg(st.sampled_from(_LEVELS[:4]), *_LEVELS))
    if draw(st.integers(0, 9)) == 0:
        kw["clock"] = draw(
            st.sampled_from(
                [
                    lambda: datetime(1960, 1, 1, tzinfo=UTC),
                    lambda: datetime(2030, 1, 1),
                    lambda: "now",
                ]
            )
        )
    path = arg(
        st.just(str(w.tmp("open"))),
        str(w.path / "data.mdb"),
        str(w.path / "data.mdb" / "under"),
        "x" * 5000,
        "",
        *SURROGATES,
    )
    actor = arg(st.sampled_from(("owner", "someone", None)), "", "x" * 300, *SURROGATES)

    def open_and_close(p: Any, a: Any, **options: Any) -> None:
        cx = Cortex.open(p, actor=a, **options)
        cx.close()

    w.call(open_and_close, draw(path), draw(actor), **kw)


@surface("Memories")
def _memories(w: World, draw: st.DrawFn) -> None:
    m = getattr(w, "_memories", None)
    if m is None:
        m = cortex.Memories(w.root / "quick", clock=w.clock)
        w._memories = m  # type: ignore[attr-defined]
        w.quick = []  # type: ignore[attr-defined]
    ids = texts_arg("sam", "agent-1")
    kw: dict[str, Any] = {}
    what = draw(st.sampled_from(("add", "search", "get_all", "get", "update", "delete", "history")))
    if what in ("add", "search", "get_all"):
        opt(draw, kw, "user_id", ids)
        opt(draw, kw, "agent_id", ids)
        opt(draw, kw, "run_id", ids)
    if what == "add":
        content = arg(
            st.one_of(
                st.sampled_from(("I moved to Lisbon", "x")),
                st.lists(
                    st.fixed_dictionaries({"role": texts_arg("user"), "content": texts_arg("hi")}),
                    max_size=2,
                ),
            )
        )
        w.call(m.add, draw(content), **kw)
    elif what == "search":
        opt(draw, kw, "limit", ints_arg(1, 100))
        w.call(m.search, draw(texts_arg("lisbon")), **kw)
    elif what == "get_all":
        opt(draw, kw, "limit", ints_arg(1, 100))
        w.call(m.get_all, **kw)
    else:
        fn = getattr(m, what)
        ref = draw(w.ref())
        if what == "update":
            w.call(fn, ref, draw(st.one_of(data_arg(), texts_arg("new text"))))
        else:
            w.call(fn, ref)


# ---------------------------------------------------------------------------------------------
# Module functions: queries and predicates alone, the where syntax, decoders, renderers


@surface("Query+Window+Reader")
def _structs(w: World, draw: st.DrawFn) -> None:
    """The validating constructors, and the query planner on what they build."""
    what = draw(st.sampled_from(("Reader", "Scope", "FrameMatch", "Fusion", "Weights", "plan")))
    if what == "Reader":
        w.call(Reader, actor=draw(texts_arg("guest")), scopes=draw(list_of(hostile(), 2)))
    elif what == "Scope":
        kw: dict[str, Any] = {}
        for name in (
            "name",
            "types",
            "tags",
            "ids",
            "frames",
            "exclude_types",
            "exclude_tags",
            "exclude_ids",
            "exclude_frames",
            "expires_at",
            "writable",
            "token_budget",
        ):
            opt(draw, kw, name, hostile())
        w.call(Scope, **kw)
    elif what == "FrameMatch":
        w.call(
            FrameMatch.of,
            draw(
                arg(
                    st.sampled_from(("find", "find:knowledge:ada", "x:y", ("find", "service", "a")))
                )
            ),
        )
    elif what == "Fusion":
        w.call(
            Fusion,
            method=draw(texts_arg("rrf")),
            lexical_weight=draw(numbers_arg(0, 1)),
            k=draw(ints_arg(1, 100)),
            depth=draw(ints_arg(2, 100)),
            context=draw(ints_arg(0, 8)),
            context_weight=draw(numbers_arg(0, 1)),
            entity_weight=draw(numbers_arg(0, 1)),
        )
    elif what == "Weights":
        names = [f.name for f in msgspec.structs.fields(Weights)]
        kw = {}
        for name in names:
            opt(draw, kw, name, numbers_arg(0, 5))
        w.call(Weights, **kw)
    else:
        from cortex.query.language import compile_query

        w.call(compile_query, draw(w.queries()), draw(times_arg()))


@surface("parse_where+format_where")
def _where(w: World, draw: st.DrawFn) -> None:
    if draw(st.booleans()):
        text = arg(
            st.one_of(
                st.sampled_from(
                    [
                        "data.subject = ada",
                        "not (head.importance > 5)",
                        "data.roles in [a, b]",
                        "has_tag(x) or data.x ~ '^a'",
                        "version.created_at < 2030-01-01T00:00:00Z",
                    ]
                ),
                st.text(alphabet="()[],=!<>~ \"'\\andortihsgxe0123456789.:-_", max_size=40),
            ),
            "not " * 1000 + "data.x = 1",
            "(" * 5000 + "data.x = 1" + ")" * 5000,
            "data.x = " + "9" * 5000,
            "data.x in [" + "[" * 100,
            'data.x = "\\ud800"',
        )
        w.call(cortex.parse_where, draw(text))
    else:
        w.call(cortex.format_where, draw(arg(predicates())))


@st.composite
def _cbor_bytes(draw: st.DrawFn) -> Any:
    """Bytes for a decoder: a valid record's, mutated, or hostile CBOR."""
    from cortex.model.codec import encode_head, encode_version

    head, version, data = draw(memories())
    good = draw(
        st.sampled_from((cortex.encode_data(data), encode_head(head), encode_version(version)))
    )
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return good
    if kind == 1:  # one byte flipped
        i = draw(st.integers(0, len(good) - 1))
        return good[:i] + bytes([good[i] ^ draw(st.integers(1, 255))]) + good[i + 1 :]
    if kind == 2:
        return good[: draw(st.integers(0, len(good)))]
    if kind == 3:
        return draw(pick(HOSTILE_CBOR))
    if kind == 4:
        return draw(st.binary(max_size=40))
    return draw(hostile())


HOSTILE_CBOR = (
    bytes.fromhex("d81c81d81d00"),  # a shared-reference cycle
    bytes.fromhex("d8246178"),  # tag 36 (MIME) over text
    bytes.fromhex("9f" * 1000),  # 1000 nested indefinite arrays
    bytes.fromhex("81" * 100_000) + b"\x00",  # 100,000 nested arrays
    bytes.fromhex("a1" * 5000) + b"\x00",
    bytes.fromhex("c249" + "ff" * 9),  # a bignum
    bytes.fromhex("1bffffffffffffffff"),
    bytes.fromhex("fb7ff8000000000000"),  # NaN
    bytes.fromhex("7f"),  # unterminated text
    bytes.fromhex("5b" + "ff" * 8),  # a byte string of 2**64-1 bytes
    bytes.fromhex("d9d9f7a0"),  # self-described CBOR
    bytes.fromhex("c11bffffffffffffffff"),  # an epoch time past datetime
    bytes.fromhex("c07818") + b"9999-99-99T99:99:99Z----",
    bytes.fromhex("d81e82010a"),  # a rational
    bytes.fromhex("d82380"),  # a regular expression tag over an array
    bytes.fromhex("d9010280"),  # a set
)


@surface("decoders")
def _decoders(w: World, draw: st.DrawFn) -> None:
    from cortex.model.codec import decode_head, decode_version
    from cortex.model.episode import decode_episode

    what = draw(st.sampled_from(("data", "head", "version", "episode", "encode", "hash")))
    raw = draw(_cbor_bytes())
    if what == "data":
        t = draw(arg(st.sampled_from(list(MemoryType))))
        w.call(cortex.decode_data, t, raw)
    elif what == "head":
        w.call(decode_head, raw)
    elif what == "version":
        w.call(decode_version, raw)
    elif what == "episode":
        w.call(decode_episode, raw)
    elif what == "encode":
        w.call(cortex.encode_data, draw(data_arg()))
    else:
        w.call(cortex.content_hash, draw(arg(st.sampled_from(list(MemoryType)))), raw)


@surface("schema+forms+ids")
def _misc(w: World, draw: st.DrawFn) -> None:
    what = draw(
        st.sampled_from(
            [
                "from_json",
                "json_schema",
                "render",
                "count_tokens",
                "field_names",
                "Uri.parse",
                "MemoryId.parse",
            ]
        )
    )
    type_ = arg(st.sampled_from(("Fact", "fact", "Event", *MemoryType, Fact)))
    if what == "from_json":
        obj = arg(
            st.one_of(
                st.fixed_dictionaries(
                    {
                        "statement": texts_arg("x"),
                        "subject": texts_arg("a"),
                        "predicate": texts_arg("b"),
                    }
                ),
                st.dictionaries(
                    st.sampled_from(
                        ["statement", "kind", "occurred_at", "roles", "confidence", "x"]
                    ),
                    hostile(),
                    max_size=4,
                ),
            ),
            json.loads("[" * 50 + "]" * 50),
        )
        w.call(cortex.from_json, draw(type_), draw(obj))
    elif what == "json_schema":
        w.call(cortex.json_schema, draw(type_))
    elif what == "render":
        fn = draw(
            st.sampled_from(
                [cortex.render, cortex.render_short, cortex.render_medium, cortex.render_full]
            )
        )
        w.call(fn, draw(data_arg()))
    elif what == "count_tokens":
        w.call(cortex.count_tokens, draw(texts_arg("hello world")))
    elif what == "field_names":
        w.call(cortex.field_names, draw(st.one_of(st.none(), type_)))
    elif what == "Uri.parse":
        w.call(Uri.parse, draw(texts_arg(*(str(u) for u in w.uris[:3]))))
    else:
        w.call(MemoryId.parse, draw(texts_arg(*(str(u.id) for u in w.uris[:3]))))


# ---------------------------------------------------------------------------------------------
# Bundles: export, then import of the bundle mutated


def _bundle(w: World, encoding: str) -> bytes:
    cached = getattr(w, f"_bundle_{encoding}", None)
    if cached is None:
        p = w.tmp(f"bundle.{encoding}")
        cortex.export_store(w.cx, p, encoding=encoding)  # type: ignore[arg-type]
        cached = p.read_bytes()
        setattr(w, f"_bundle_{encoding}", cached)
    return bytes(cached)


def _json_mutate(line: bytes, draw: st.DrawFn) -> bytes:
    """One JSON line with one value, somewhere inside it, replaced by a hostile one."""
    obj = json.loads(line)
    paths: list[tuple[Any, Any]] = []
    todo = [obj]
    while todo:
        node = todo.pop()
        keys = list(node) if isinstance(node, dict) else range(len(node))
        for k in keys:
            paths.append((node, k))
            if isinstance(node[k], dict | list):
                todo.append(node[k])
    if not paths:
        return line
    node, k = draw(st.sampled_from(paths))
    node[k] = draw(
        st.one_of(
            st.sampled_from(
                [
                    None,
                    True,
                    -1,
                    2**64,
                    10**30,
                    1e308,
                    "",
                    "\ud800",
                    [],
                    {},
                    "1969-12-31T23:59:59Z",
                    "0001-01-01T00:00:00+14:00",
                    "9999-12-31T23:59:59-14:00",
                    "x" * 300,
                    "zz",
                    "A" * 26,
                ]
            ),
            st.integers(),
            st.text(_SAFE_CHARS, max_size=8),
        )
    )
    return json.dumps(obj, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")


@st.composite
def bundles(draw: st.DrawFn, w: World) -> bytes:
    encoding = draw(st.sampled_from(("jsonl", "cbor")))
    data = _bundle(w, encoding)
    kind = draw(st.integers(0, 8))
    if kind == 0:
        return data
    if kind == 1:  # a byte flipped
        i = draw(st.integers(0, len(data) - 1))
        return data[:i] + bytes([data[i] ^ draw(st.integers(1, 255))]) + data[i + 1 :]
    if kind == 2:  # cut short
        return data[: draw(st.integers(0, len(data) - 1))]
    if kind == 3:  # a range of bytes replaced by hostile CBOR
        i = draw(st.integers(0, len(data)))
        return data[:i] + draw(pick(HOSTILE_CBOR)) + data[i:]
    lines = data.split(b"\n")
    if encoding == "jsonl" and kind <= 6:
        n = draw(st.integers(0, len(lines) - 2))
        if kind == 4:
            lines[n] = _json_mutate(lines[n], draw)
        elif kind == 5:
            depth = draw(st.sampled_from((63, 64, 65, 1000, 100_000)))
            lines[n] = b'{"kind": "memory", "head": ' + b"[" * depth + b"]" * depth + b"}"
        else:
            del lines[n]
        return b"\n".join(lines)
    if encoding == "cbor" and kind <= 6:
        # a well-formed item array holding hostile CBOR
        return data[:40] + b"\x83\x66memory" + draw(pick(HOSTILE_CBOR)) + data[40:]
    return draw(st.binary(max_size=200))


@surface("import_bundle")
def _import_bundle(w: World, draw: st.DrawFn) -> None:
    data = draw(bundles(w))
    path = w.tmp("in")
    path.write_bytes(data)
    what = draw(st.sampled_from(("import", "read", "into-new")))
    if what == "import":
        w.call(cortex.import_bundle, w.cx, path)
    elif what == "read":
        from cortex.transfer.bundle import read_bundle

        w.call(read_bundle, data)
    else:

        def into_new() -> None:
            with Cortex.open(w.tmp("new"), actor="owner", clock=w.clock) as cx:
                cortex.import_bundle(cx, path)

        w.call(into_new)


@surface("export_store")
def _export(w: World, draw: st.DrawFn) -> None:
    path = arg(st.just(str(w.tmp("out"))), str(w.path), "\x00", "x" * 5000, *SURROGATES)
    encoding = texts_arg("jsonl", "cbor")
    w.call(cortex.export_store, w.cx, draw(path), encoding=draw(encoding))


@surface("migrate")
def _migrate(w: World, draw: st.DrawFn) -> None:
    from cortex.transfer import migrate

    what = draw(st.sampled_from(("plan", "applied", "migrate")))
    path = arg(st.just(str(w.root / "mig")), str(w.root / "nowhere"), "\x00", *SURROGATES)
    if not (w.root / "mig").exists():
        Cortex.open(w.root / "mig", actor="owner").close()
    if what == "plan":
        w.call(migrate.plan, draw(path), draw(st.one_of(st.none(), ints_arg(1, 7))))
    elif what == "applied":
        w.call(migrate.applied, draw(path))
    else:
        kw: dict[str, Any] = {}
        opt(draw, kw, "dry_run", arg(st.booleans()))
        opt(draw, kw, "to", st.one_of(st.none(), ints_arg(1, 7)))
        w.call(migrate.migrate, draw(path), **kw)


# ---------------------------------------------------------------------------------------------
# The MCP tools (cortex/serve/tools.py): JSON arguments as a client sends them

_JSON_HOSTILE: Final = (
    None,
    True,
    0,
    -1,
    2**63,
    10**400,
    -(10**400),
    1e308,
    math.nan,
    math.inf,
    -0.0,
    *HOSTILE_TEXTS,
    [],
    [None],
    ["\ud800"],
    {},
    {"": None},
    [[[[[]]]]],
)
"""JSON values a client can send (``json.loads`` accepts NaN and Infinity, and integers of any
size); never a Python-only object, since the tools are reached through JSON."""


def _json_value(schema: dict[str, Any], name: str, w: World) -> st.SearchStrategy[Any]:
    """A value for the property ``name`` of a tool's input schema: valid by the schema and the
    store (refs of memories it holds) most of the time, else a boundary or hostile JSON value."""
    kind = schema.get("type")
    if "enum" in schema:
        valid: st.SearchStrategy[Any] = st.sampled_from(schema["enum"])
    elif name in ("ref", "near"):
        valid = _known(w, "uris").map(lambda u: str(u) if hash(u) % 2 else str(u.id))
    elif schema.get("format") == "date-time":
        valid = st.sampled_from(
            ("2030-01-01T00:00:00Z", "2029-06-30T12:00:00+02:00", "1999-01-01T00:00:00Z")
        )
    elif name == "data":
        valid = st.sampled_from(
            (
                {"statement": "Ada moved to Bern", "subject": "ada", "predicate": "home_city"},
                {"name": "ada"},
                {"statement": "ship it", "status": "active"},
                {"kind": "deploy", "outcome": "success", "occurred_at": "2030-01-01T00:00:00Z"},
                {"statement": "x"},
            )
        )
    elif name == "where":
        valid = st.sampled_from(("data.subject = 'ada'", "importance >= 5", "tag = 'people'"))
    elif name == "window":
        valid = st.sampled_from(({"days": 7}, {"from": "2029-01-01T00:00:00Z"}, {}))
    elif kind == "string":
        valid = st.text(_SAFE_CHARS, min_size=1, max_size=24)
    elif kind == "integer":
        lo, hi = schema.get("minimum", -5), schema.get("maximum", 10**6)
        valid = st.integers(lo, hi)
        return arg(valid, lo - 1, hi + 1, *_JSON_HOSTILE)
    elif kind == "number":
        valid = st.floats(0.0, 1.0)
    elif kind == "boolean":
        valid = st.booleans()
    elif kind == "array":
        item = schema.get("items", {})
        if item.get("enum"):
            each: st.SearchStrategy[Any] = st.sampled_from(item["enum"])
        elif name == "frames":
            each = st.sampled_from(("find:knowledge:ada", "deliver:service:svc://a", "bad"))
        elif name in ("types",):
            each = st.sampled_from(("fact", "event", "goal", "Fact", "nope"))
        else:
            each = st.text(_SAFE_CHARS, min_size=1, max_size=12)
        valid = st.lists(each, max_size=4)
    elif kind == "object":
        valid = st.dictionaries(st.text(_SAFE_CHARS, max_size=6), st.text(max_size=6), max_size=3)
    else:
        valid = st.none()
    return arg(valid, *_JSON_HOSTILE)


_MCP_IDENTITIES: Final = (
    ("owner", None, None, "internal"),
    ("guest", None, None, "internal"),
    ("guest", "read", 5, "public"),
    ("guest", "write", 0, "confidential"),
    ("helper", "facts", None, "restricted"),
)
"""Who calls: the owner, another actor with no scope, read and writable scopes, each write
budget kind (none, a few, zero) and every clearance."""


@surface("MCP tools")
def _mcp(w: World, draw: st.DrawFn) -> None:
    from cortex import Sensitivity
    from cortex.serve import tools as T

    actor, scope, budget, clearance = draw(st.sampled_from(_MCP_IDENTITIES))
    scopes = {
        None: (),
        "read": (Scope(tags=frozenset({"people"})),),
        "write": (Scope(tags=frozenset({"people"}), writable=True),),
        "facts": (Scope(types=frozenset({MemoryType.FACT}), writable=True),),
    }[scope]
    identity = T.Identity(
        name="fuzz",
        actor=actor,
        scopes=scopes,
        write_budget=budget,
        clearance=Sensitivity.coerce(clearance) or Sensitivity.INTERNAL,
    )
    budgets = w.__dict__.setdefault("_mcp_budget", T.WriteBudget())
    caller = T.Caller(w.cx, identity, budgets, task=f"fuzz-{actor}", default_budget=None)
    names = sorted(T.TOOLS)
    name = draw(st.one_of(st.sampled_from(names), st.sampled_from(("", "memory_nope", "\ud800"))))
    tool = T.TOOLS.get(name)
    if tool is None or draw(st.integers(0, 19)) == 0:
        args: Any = draw(st.sampled_from((None, [], "x", 1, {"": 1})))
    else:
        props = tool.input_schema.get("properties", {})
        required = set(tool.input_schema.get("required", ()))
        args = {}
        for prop, schema in props.items():
            if (prop in required and draw(st.integers(0, 15)) != 0) or draw(st.booleans()):
                args[prop] = draw(_json_value(schema, prop, w))
        if draw(st.integers(0, 15)) == 0:
            args[draw(st.sampled_from(("bogus", "", "\ud800")))] = 1
    validator = None if tool is None else tool.output_schema

    def run(caller: Any, name: str, args: Any) -> Any:
        out = T.call(caller, name, args)
        if validator is not None:  # the result matches the tool's output schema
            import jsonschema

            errors = list(jsonschema.Draft202012Validator(validator).iter_errors(out))
            if errors:
                raise AssertionError(f"{name}: result breaks its output schema: {errors[0]}")
        json.dumps(out, allow_nan=False)  # and goes out as JSON
        return out

    w.call(run, caller, name, args)


# ---------------------------------------------------------------------------------------------
# The CLI: every command and option, argv drawn from its parser

CLI_SKIP = {"demo", "serve"}  # the tour writes its own stores; serve runs until stopped
CLI_SKIP_OPTIONS = {"--follow", "--interval"}  # log --follow runs until interrupted
CLI_INTERNAL = 70
"""The exit code of an internal error (a bug): sysexits.h EX_SOFTWARE."""

HOSTILE_ARGS = (
    "",
    "-",
    "--",
    "-1",
    "0",
    "nan",
    "inf",
    "1e400",
    "99999999999999999999",
    "9" * 5000,
    "\udcff",  # $'\xff' as Python decodes argv (surrogateescape)
    "a\udcc3b",
    "x" * 300,
    "[" * 1000,
    "{" * 1000,
    '{"statement": "\\ud800", "subject": "a", "predicate": "b"}',
    "[]",
    "null",
    "@nonexistent",
    "@/dev/null",  # read only: JSON arguments
    "nonexistent/file",
    "1969-12-31T23:59:59Z",
    "0001-01-01T00:00:00-14:00",
    "9999-12-31T23:59:59+14:00",
    "2030-01-01T00:00:00",
    "find:",
    "a:b:c",
    "1..",
    "3..1",
    "0..99999999999999999999",
    "not " * 200 + "data.x = 1",
)


def _cli_values(w: World, dest: str, option: str, command: str = "") -> list[str]:
    if command.startswith("edge") and dest == "type":
        return ["references", "references", "caused_by", "supersedes"]
    if command.startswith("edge") and dest in ("src", "dst"):  # the seeded edges, mostly
        first, second, third = (str(u) for u in w.uris[:3])
        return [first, second] if dest == "src" else [second, third]
    if command in ("write", "update") and dest == "data":
        return [
            '{"statement": "x", "subject": "a", "predicate": "b"}',
            '{"statement": "Ada moved", "subject": "ada", "predicate": "home_city"}',
            '{"statement": "y"}',
            "@" + str(w.cli_files["fact"]),
            "-",
        ]
    if command == "write" and dest == "type":
        return ["fact", "Fact"]
    if command in ("alias", "unalias", "aliases") and dest in ("name", "alias"):
        return ["ada", "Ada Lovelace", "@sarah", "sarah chen", "nyc"]
    if command == "aliases" and dest == "threshold":
        return ["0.8", "0.5", "1", "0", "nan"]
    return _values(w, dest)


def _values(w: World, dest: str) -> list[str]:
    refs = [str(u) for u in w.uris[:6]] + [str(u.id) for u in w.uris[:3]]
    table: dict[str, list[str]] = {
        "ref": refs,
        "a": refs,
        "b": refs,
        "refs": refs,
        "resolve": refs,
        "src": refs,
        "dst": refs,
        "id": [str(e) for e in w.episodes] + refs[:2],
        "type": ["fact", "Fact", "event", "identity", "references", "supersedes"],
        "data": [
            '{"statement": "x", "subject": "a", "predicate": "b"}',
            '{"name": "ada"}',
            '{"statement": "y"}',
        ],
        "provenance": ['{"source": "user_input"}', '{"source": "x"}'],
        "tag": ["people", "ops", "x" * 64],
        "frame": ["find:knowledge:ada", "deliver:service:svc://a", "find"],
        "importance": ["0", "10", "11", "5"],
        "visibility": ["private", "scoped", "actor_public", "public"],
        "confidence": ["0", "1", "0.5", "1.5", "-0.0"],
        "weight": ["0", "1", "0.5", "2"],
        "reason": ["wrong", "gdpr"],
        "text": ["ada", "tea"],
        "near": ["ada"],
        "query": ["ada"],
        "question": ["where does ada live?", "what happened last week"],
        "where": ["data.subject = ada", "head.importance > 5 and not has_tag(x)"],
        "recent": ["1", "30", "0", "-1", "1e7"],
        "hops": ["1..2", "0..6", "2"],
        "follow": ["references", "references,caused_by", "nope"],
        "limit": ["1", "10", "0", "100001"],
        "offset": ["0", "2", "-1"],
        "budget": ["1", "500", "4000", "4001"],
        "tail": ["1", "20", "0", "-5"],
        "start": ["1", "2", "0", "-1"],
        "end": ["3", "1", "0"],
        "kind": ["write", "update", "nope"],
        "outcome": ["success", "failure", "partial"],
        "verb": ["find", "deliver", "nope"],
        "objects": ["ada", "knowledge:ada", "svc://a"],
        "subject": ["ada", "bob"],
        "attribute": ["home_city"],
        "source": ["user_input", "chat", "upload"],
        "channel": ["thread"],
        "label": ["s1"],
        "media_type": ["text/markdown"],
        "at": ["2030-01-01T00:00:00Z", "now"],
        "as_of": ["2030-01-01T00:00:00Z", "now"],
        "since": ["2029-01-01T00:00:00Z"],
        "until": ["2031-01-01T00:00:00Z"],
        "valid_from": ["2030-01-01T00:00:00Z"],
        "valid_until": ["2029-01-01T00:00:00Z"],
        "expires_at": ["2031-01-01T00:00:00Z", "2000-01-01T00:00:00Z"],
        "expected_version": ["1", "2", "0"],
        "created_by": ["someone"],
        "model": ["hashing", "minilm", "nope"],
        "to": ["7", "1", "8", "99999999999999999999"],
        "format": ["jsonl", "cbor"],
        "action": ["list", "add", "rotate", "remove"],
        "name": ["ci", "helper"],
        "for_actor": ["helper", "owner"],
        "scope": ['{"types": ["Fact"]}', '{"tags": ["people"], "writable": true}', "{}"],
        "write_budget": ["1", "0", "50"],
        "task": ["task-1", "task-2"],
        "set_sensitivity": ["public", "confidential", "restricted", "secret"],
        "sensitivity": ["public", "confidential", "restricted", "secret"],
        "clearance": ["public", "confidential", "restricted"],
        "direction": ["out", "in", "both"],
        "on": ["own", "created", "updated"],
        "order_by": ["salience", "created", "score", "hop"],
        "form": ["short", "medium", "full"],
        "by": ["type", "tag", "subject", "counterparty"],
    }
    if dest == "file":
        return [str(w.cli_files[k]) for k in sorted(w.cli_files)]
    if dest == "dest":
        return [str(w.tmp("cli-backup")), str(w.cli_store)]
    if dest == "src":  # copy
        return [str(w.cli_store), str(w.root / "nowhere")]
    if dest == "dst":  # copy
        return [str(w.tmp("cli-copy")), str(w.cli_store)]
    if dest == "damaged":  # salvage
        return [str(w.cli_store), str(w.root / "nowhere")]
    if dest == "new":
        return [str(w.tmp("cli-salvaged")), str(w.cli_store)]
    if dest == "tokens":
        return [str(w.root / "tokens.json"), str(w.root / "nowhere" / "t.json")]
    return table.get(dest, ["x"])


def _commands() -> list[tuple[str, Any]]:
    import argparse

    from cortex.cli.app import _parser

    out: list[tuple[str, Any]] = []

    def walk(p: argparse.ArgumentParser, prefix: str) -> None:
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sp in a.choices.items():
                    full = f"{prefix} {name}".strip()
                    if full in CLI_SKIP:
                        continue
                    if any(isinstance(x, argparse._SubParsersAction) for x in sp._actions):
                        walk(sp, full)
                    else:
                        out.append((full, sp))

    walk(_parser(), "")
    return out


CLI_COMMANDS = _commands()


@st.composite
def argvs(draw: st.DrawFn, w: World, command: str, parser: Any) -> list[str]:
    import argparse

    # a third of the examples use valid values only; the rest mix in hostile ones
    valid_only = draw(st.integers(0, 2)) == 0
    chance = draw(st.sampled_from((2, 3, 5)))  # an option is given with probability 1/chance

    def value(dest: str, option: str) -> str:
        pool = _cli_values(w, dest, option, command)
        if valid_only:
            return draw(st.sampled_from(pool))
        return draw(
            st.one_of(
                st.sampled_from(pool),
                st.sampled_from(pool),
                pick(HOSTILE_ARGS),
                st.text(_SAFE_CHARS, max_size=8),
            )
        )

    argv = ["--store", str(w.cli_store), *command.split()]
    if draw(st.booleans()):
        argv.append("--json")
    for a in parser._actions:
        if isinstance(a, argparse._HelpAction) or a.dest in ("store", "json", "actor", "embedder"):
            continue
        if a.option_strings:
            if a.option_strings[-1] in CLI_SKIP_OPTIONS:
                continue
            if draw(st.integers(1, chance)) > 1 and not (a.required and valid_only):
                continue
            opt_ = draw(st.sampled_from(a.option_strings))
            if a.nargs == 0:
                argv.append(opt_)
            elif isinstance(a.nargs, int):  # e.g. conflicts --resolve WINNER LOSER
                argv += [opt_, *(value(a.dest, opt_) for _ in range(a.nargs))]
            else:
                argv += [opt_, value(a.dest, opt_)]
        else:  # a positional: usually given, sometimes left out
            n = {
                None: 1,
                "?": draw(st.integers(0, 1)),
                "*": draw(st.integers(0, 2)),
                "+": draw(st.integers(1, 2)),
            }.get(a.nargs, 1)
            if not valid_only and draw(st.integers(0, 15)) == 0:
                n = 0
            argv += [value(a.dest, "") for _ in range(n)]
    if not valid_only and draw(st.integers(0, 20)) == 0:
        argv.append(draw(st.sampled_from(("--nope", "extra", "--json", "--store"))))
    return argv


class CliWorld(World):
    """A world whose store the CLI opens and closes on every call (in this process)."""

    def __init__(self, root: Path, surface: str) -> None:
        super().__init__(root, surface)
        self.cli_store = root / "cli-store"
        bundle = root / "seed.jsonl"
        cortex.export_store(self.cx, bundle)
        self.cx.close()
        from cortex.cli import main

        with _quiet():
            assert (
                main(["--store", str(self.cli_store), "--actor", "owner", "import", str(bundle)])
                == 0
            )
        self.cli_files = {
            "bundle": bundle,
            "cbor": root / "seed.cbor",
            "cut": root / "cut.jsonl",
            "deep": root / "deep.jsonl",
            "text": root / "notes.md",
            "fact": root / "fact.json",
            "missing": root / "missing.jsonl",
            "dir": root,
        }
        with Cortex.open(self.cli_store, actor=None) as cx:
            cortex.export_store(cx, self.cli_files["cbor"], encoding="cbor")
        data = bundle.read_bytes()
        self.cli_files["cut"].write_bytes(data[: len(data) // 2])
        self.cli_files["deep"].write_bytes(data.split(b"\n")[0] + b"\n" + b"[" * 5000 + b"\n")
        self.cli_files["text"].write_text("# Notes\n\nAda moved to Basel.\n")
        self.cli_files["fact"].write_text('{"statement": "z", "subject": "a", "predicate": "b"}')

    def close(self) -> None:
        pass

    def digest(self) -> str | None:
        if not (self.cli_store / "data.mdb").exists():
            return None
        with Cortex.open(self.cli_store, actor=None, readonly=True) as cx:
            return digest_of_store(cx)

    def digests(self) -> tuple[str, str] | None:
        """``_digests``: the whole store, and the store without the journal's keys."""
        if not (self.cli_store / "data.mdb").exists():
            return None
        with Cortex.open(self.cli_store, actor=None, readonly=True) as cx:
            return _digests(cx)

    def run(self, argv: list[str]) -> int:
        """``cortex ARGV`` in this process: exit 0, 1 or 2, never an internal error (70), and a
        failed command leaves the store as it was."""
        from cortex.cli import main

        surface = self.surface
        self.clock.tick(1)
        before = self.digests()
        with _quiet() as streams, _inside(self.root):
            try:
                rc = main(argv)
            except BaseException as exc:  # main returns codes; nothing may get past it
                escape(surface, f"{surface}: {type(exc).__name__} escaped main: {exc!s:.200}", exc)
                return -1
            finally:
                self.stderr = streams[1].getvalue()
        if rc == CLI_INTERNAL or rc not in (0, 1, 2):
            escape(
                surface,
                f"{surface}: exit {rc} (an internal error) for {argv!r:.300}: {self.stderr[-300:]}",
            )
        elif rc != 0:
            SAMPLES.setdefault(surface, []).append(
                f"{rc} {self.stderr.strip().splitlines()[-1][:160] if self.stderr.strip() else ''}"
            )
            after = self.digests()
            if before is not None and after is not None and "budget" in self.stderr:
                # a write the task's budget drops journals its drop by design (budget_drop):
                # the journal may grow, nothing else may change (as for the API)
                before, after = (before[1],), (after[1],)
            if after != before:
                escape(surface, f"{surface}: exit {rc} but the store changed, for {argv!r:.300}")
            else:
                COUNTS.add(surface, "refused")
        else:
            COUNTS.add(surface, "ok")
        return rc


@contextlib.contextmanager
def _quiet() -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """Standard streams of the CLI captured (stdin: a short text)."""
    stdin = io.TextIOWrapper(
        io.BytesIO(b'{"statement": "s", "subject": "a", "predicate": "b"}\n'), encoding="utf-8"
    )
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin
    sys.stdin = stdin
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            yield out, err
    finally:
        sys.stdin = saved


class Calls:
    """The calls one example drew (a short repr: hypothesis prints it for a failing example)."""

    def __init__(self, calls: list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]]):
        self.calls = calls

    def __repr__(self) -> str:
        return "Calls(" + ", ".join(getattr(f, "__qualname__", "?") for f, _, _ in self.calls) + ")"


@st.composite
def drawn_calls(draw: st.DrawFn, w: World, surface: Surface) -> Calls:
    """The calls of one example of ``surface``, drawn now and run by ``Calls`` later."""
    w.pending = []
    MODE.valid_only = draw(st.integers(0, 2)) == 0
    try:
        surface(w, draw)
        return Calls(w.pending)
    finally:
        w.pending = None
        MODE.valid_only = False


def new_world(surface: str, url: str | None = None) -> World:
    """A fresh world for ``surface``: LMDB in a temporary directory, or the store at ``url``."""
    root = Path(tempfile.mkdtemp(prefix="cortex-fuzz-"))
    return CliWorld(root, surface) if surface.startswith("cli ") else World(root, surface, url)


PG_SURFACES: Final = (
    "Cortex.find",
    "Cortex.context",
    "Cortex.search",
    "Cortex.about",
    "Cortex.facets",
    "Cortex.view",
    "Cortex.resolve",
    "Cortex.sensitivity",
    "Cortex.episodes",
    "Cortex.edges",
    "Cortex.write",
    "Cortex.update_head",
    "MCP tools",
)
"""The surfaces run again on PostgreSQL: the reads whose candidates a PostgreSQL snapshot
preloads in round trips (``Planner.preload``: heads with their levels, use counters, versions,
supersedes edges), through the owner and through gated readers, and the writes beside them."""


def fuzz_examples(default: int) -> int:
    """Examples per surface: ``CORTEX_FUZZ_EXAMPLES`` (``make fuzz``), else ``default``."""
    return int(os.environ.get("CORTEX_FUZZ_EXAMPLES", default))
