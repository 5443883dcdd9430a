"""The query executor: walks the chosen index in one snapshot; filters, orders, trims, renders.

Index orders the executor relies on: ``idx/type``, ``idx/tag`` and (for a frame pattern with a
reference) ``idx/frame`` keys sort by created time then id, so "newest first" streams straight
off a reverse scan and stops after ``limit`` accepted results, whatever the store's size; other
orders, and frame patterns without a reference, read every candidate the index yields and sort
them.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, Final

from cortex.engine import store as _store
from cortex.engine.heads import NEVER_USED, read_counters, row_of, superseder
from cortex.engine.store import Store, check_edge_neighbours
from cortex.engine.values import EDGE_CODEC, EdgeRecord, Memory, decode_trusted
from cortex.errors import CodecError, IntegrityError, NotFoundError, ValidationError
from cortex.index.text import fold, tokenize
from cortex.model.codec import decode_data_trusted, to_micros
from cortex.model.enums import DecayClass, EdgeType, MemoryType
from cortex.model.forms import count_tokens
from cortex.model.ids import MemoryId, Uri
from cortex.model.records import Data, Head, Version
from cortex.query.language import (
    Form,
    Fusion,
    Hit,
    Plan,
    Result,
    Row,
    fuse,
    in_window,
    own_time,
    render_form,
    trim_to_budget,
)
from cortex.query.rerank import (
    CONTEXT_GAP,
    CONTEXT_SCAN,
    CONTEXT_SOURCES,
    combine,
    context_scores,
    entity_names,
    names_any,
    unnamed,
)
from cortex.rules.salience import HALF_LIFE_DAYS, SalienceState, Weights, salience_at
from cortex.rules.scope import Reader
from cortex.rules.sensitivity import gate
from cortex.storage.keys import (
    EDGE_FROM,
    EDGE_TO,
    IDX_FRAME,
    IDX_TYPE,
    frame_prefix,
    head_key,
    id_key,
    obj_hash,
    parse_edge_key,
    salience_key,
    tag_prefix,
    type_key,
    version_key,
    version_prefix,
)
from cortex.storage.keys import HEAD as _HEAD_KEY_PREFIX
from cortex.storage.keys import VERSION as _VERSION_KEY_PREFIX
from cortex.storage.kv import ReadTxn

__all__ = [
    "Candidate",
    "Executor",
    "TextSearch",
    "VectorSearch",
    "memory_of",
    "newest_first",
    "newest_prefix",
    "read_state",
    "result",
    "to_hits",
]

_U64: Final = 8
_ID: Final = 16
_MAX_ID: Final = b"\xff" * 16
_INTO: Final = bytes((EdgeType.SUPERSEDES,))
_RUN: Final = 64
"""The longest run of one created time ``created_scan`` buffers from its reverse scan."""

try:
    from cortex import _speedups as _sp
except ImportError:  # pragma: no cover - installed without a C compiler
    _sp = None  # type: ignore[assignment]

_NEWEST: Callable[[Any, bytes, bytes | None, int, int], Any] | None = getattr(
    _sp, "newest_ids", None
)
"""``_newest`` in pages from C (``cursor.c``), or None: the Python generator (tests compare)."""

_UTF8_LEN: Callable[[str], int] | None = getattr(_sp, "utf8_len", None)
"""``len(text.encode())`` counted in C (-1: a lone surrogate), or None (``to_hits``)."""

_SALIENCE: Callable[..., float | None] | None = getattr(_sp, "salience", None)
"""``salience_at`` of a memory never used, in C (None: the definition; tests compare)."""

_READ_PAGE: Callable[..., list[Any] | None] | None = getattr(_sp, "read_page", None)
"""A page of ``newest_first``'s reads, filters, salience and memories in C (None: one by one)."""

_READ_NEWEST: Callable[..., tuple[list[Any], int, int] | None] | None = getattr(
    _sp, "read_newest", None
)
"""``newest_first``'s pages, reads and hits in one C call (None: a page at a time, tests
compare)."""

_FORM_CODE: Final = {"short": 0, "medium": 1}
"""``read_newest``'s code of a hit's form (-1, any other: the rows only, ``render_form``)."""

_MEMORY_OF: Callable[..., Memory | None] | None = getattr(_sp, "memory_of", None)
"""``Store.memory`` of a row whose data is not decoded, in C (``run``; None: ``memory_of``)."""

_FUSED = True
"""Whether ``run`` takes the fused loop (``Executor._stream``) where it applies: the same
candidates as the general one (tests turn it off to compare the two)."""

_ACCEPTED = True
"""Whether the fused loop runs the first filters in the C read (``Store.accepted_reader``)
where it can; tests turn it off to compare."""

_READ_ACCEPTED: Callable[..., Any] | None = getattr(_sp, "read_accepted", None)
_ACCEPT_PAIR: Callable[..., Any] | None = getattr(_sp, "accept_pair", None)
"""``read_accepted`` of a head and version already read (a search's ``found``), in C."""

_ALL_TYPES: Final = frozenset(MemoryType)

TextSearch = Callable[[ReadTxn, str, int], list[tuple[MemoryId, float]]]
"""``(txn, text, n) -> [(id, score)]`` best first: the lexical index's top ``n``."""
VectorSearch = Callable[[ReadTxn, Any, int], list[tuple[MemoryId, float]]]
"""``(txn, query vector or text, n) -> [(id, cosine)]`` best first."""
TypesOf = Callable[[list[MemoryId]], list[int | None]]
"""Memories' types (``int(MemoryType)``) where known without a read (the vector index keeps
them), else None for each."""


class Candidate:
    """An accepted memory on its way to becoming a hit."""

    __slots__ = ("hop", "memory", "ranks", "relevance", "row", "salience", "scores")

    def __init__(self, row: Row) -> None:
        self.row = row
        self.memory: Memory | None = None
        self.salience = 0.0
        self.relevance = 0.0
        self.hop: int | None = None
        self.ranks: dict[str, int] = {}
        self.scores: dict[str, float] = {}

    @property
    def id(self) -> MemoryId:
        """The candidate's memory id."""
        return self.row.head.id


class Executor:
    """Runs one plan against one read snapshot."""

    def __init__(
        self,
        store: Store,
        txn: ReadTxn,
        plan: Plan,
        now: datetime,
        *,
        reader: Reader,
        decay: dict[MemoryType, DecayClass],
        weights: Weights,
        text_search: TextSearch | None = None,
        vector_search: VectorSearch | None = None,
        salience_blend: float = 0.2,
        fusion: Fusion | None = None,
        types_of: TypesOf | None = None,
        type_share: Callable[[list[int]], float | None] | None = None,
        type_seen: Callable[[MemoryId, MemoryType], None] | None = None,
        found: dict[bytes, tuple[Head, Version]] | None = None,
    ) -> None:
        self.store = store
        self.txn = txn
        self.plan = plan
        self.now = now
        self.now_us = to_micros(now)
        self.reader = reader
        self.owner = store.owner
        # the reader's clearance (``specs/sensitivity.md``): None for the owner; the level is
        # in the head the query reads anyway
        self.gate = gate(reader, self.owner)
        # the store's owner sees every memory at every level (``Reader.can_see``: the owner
        # owns every head; ``gate``: None), so ``visible`` need not ask
        self._sees_all = type(reader) is Reader and reader.actor == self.owner and self.gate is None
        self.decay = decay
        self.weights = weights
        self.text_search = text_search
        self.vector_search = vector_search
        self.salience_blend = salience_blend
        self.fusion = fusion or Fusion()
        self.types_of = types_of
        self.type_share = type_share
        self.type_seen = type_seen
        # rows the reader may see, by id, read once per query (``_seen_row``), and the entity
        # names of their data (``_names_of``)
        self._seen: dict[MemoryId, Row | None] = {}
        self._entity_names: dict[MemoryId, tuple[str, ...]] = {}
        # the time a query looks at: as_of when given, else now
        self.at_us = plan.as_of if plan.as_of is not None else self.now_us
        # a memory's head and current version in one C call (None: the Python reads)
        self._current = store.current_reader(txn) if plan.as_of is None else None
        # heads and current versions a search has read in this snapshot, by raw id (the
        # lexical list's: ``lexical.search``'s ``found``), taken before reading again
        self._found = found if found is not None and self._current is not None else None
        # the snapshot's cursor, where the engine has one (LMDB): the superseder check's look
        self._cursor = txn.cursor() if hasattr(txn, "cursor") else None
        # ``accept``'s first filters in C (``read_accepted``), where they are all the plan has
        # and the reader is the owner (as ``_stream``'s): its arguments before the id
        self._accepting = (
            store.accepted_args(
                txn,
                plan.types or _ALL_TYPES,
                plan.tags,
                plan.include_superseded,
                self._cursor,
            )
            if _ACCEPTED
            and _READ_ACCEPTED is not None
            and _ACCEPT_PAIR is not None
            and self._current is not None
            and self._sees_all
            and not plan.frames
            and plan.window is None
            and plan.where is None
            else None
        )

    # -- reading ----------------------------------------------------------------------------

    def head(self, mid: MemoryId) -> Head | None:
        """The head of ``mid``, or ``None`` when there is none."""
        try:
            return self.store.head(self.txn, mid)
        except NotFoundError:
            return None

    def visible(self, head: Head) -> bool:
        """Visibility and liveness (tombstones, creation after ``as_of``)."""
        p = self.plan
        if p.as_of is not None and to_micros(head.created_at) > p.as_of:
            return False
        if (
            head.tombstone is not None
            and not p.include_tombstoned
            and (p.as_of is None or to_micros(head.tombstone.at) <= p.as_of)
        ):
            return False
        if self._sees_all:
            return True
        return self.reader.can_see(head, self.owner, self.now) and (
            self.gate is None or self.gate.memory(head)
        )

    def version_for(self, head: Head) -> Version | None:
        """The version the query sees: the current one, or the one current at ``as_of``."""
        p = self.plan
        if p.as_of is None:
            return self.store.version(self.txn, head.id, head.current_version)
        row = row_of(self.txn, head.id)
        if row is None:
            return None
        for key, raw in self.txn.scan(version_prefix(row), reverse=True):
            v = self.store.checked_version(key, raw, owner=head.id)
            if to_micros(v.created_at) > p.as_of:
                continue
            if v.valid_from is not None and to_micros(v.valid_from) > p.as_of:
                continue
            if v.valid_until is not None and to_micros(v.valid_until) <= p.as_of:
                continue
            return v
        return None

    def preloaded(self, ids: Iterable[MemoryId], first: int = 8) -> Iterator[MemoryId]:
        """``ids`` in their order, each chunk of them preloaded before its first is given.

        For a caller that accepts the ids of an index scan one by one: where reads cost a
        round trip (a PostgreSQL snapshot's ``preload``), a chunk's rows, heads, versions and
        edges are read together, not each candidate's in turn (``context``'s tiers made 655
        round trips for 128 candidates, ``facets`` five a memory); chunks grow from ``first``
        four times at a step, to 512, while the caller goes on. LMDB reads in place: ``ids``
        is given as it is, nothing read ahead.
        """
        it = iter(ids)
        if getattr(self.txn, "preload", None) is None:
            yield from it
            return
        size = first
        while chunk := list(itertools.islice(it, size)):
            self.preload(chunk)
            yield from chunk
            size = min(size * 4, 512)

    def preload(self, mids: Sequence[MemoryId]) -> None:
        """Read what accepting ``mids`` will read, in few round trips where reads have them.

        An engine with round trips preloads (``preload`` of a PostgreSQL snapshot); LMDB
        reads in place, and nothing happens.

        Heads (which hold the levels), the ``supersedes`` edges to each memory and, for a
        query of the present, each memory's last version (its current one, ``storage.md`` §2)
        first; then what those did not answer: the versions the query sees, the heads of their
        superseders and the use counters of the memories whose heads say they have some (format
        11: a memory never used costs no read). A find of memories nobody superseded or used
        reads them in one round trip.
        """
        load = getattr(self.txn, "preload", None)
        if load is None or not mids:
            return
        into = bytes((EdgeType.SUPERSEDES,))
        # format 21: the rows (id/), the edges and, through the rows, the heads and last
        # versions in one round trip (the server follows each id/ record: ``via``); the reads
        # below find them loaded and read them again only where a row was not the one its
        # checked id/ record holds (a damaged record)
        ids = [id_key(m) for m in mids]
        tail = _VERSION_KEY_PREFIX if self.plan.as_of is None else None
        load(ids, [EDGE_TO + m.bytes + into for m in mids], via=(ids, _HEAD_KEY_PREFIX, tail))
        rows: dict[MemoryId, int] = {}
        sources: list[MemoryId] = []
        for m in mids:
            try:
                row = row_of(self.txn, m)
            except IntegrityError:
                continue  # the reads below say what is wrong
            if row is not None:
                rows[m] = row
            for key, _ in self.txn.scan(EDGE_TO + m.bytes + into):  # loaded: no query
                sources.append(MemoryId(key[-16:]))
        load(
            [head_key(r) for r in rows.values()] + [id_key(s) for s in sources],
            tails=[version_prefix(r) for r in rows.values()] if self.plan.as_of is None else (),
        )
        more: list[bytes] = []
        prefixes: list[bytes] = []
        for m, row in rows.items():
            head = self.head(m)
            if head is None:
                continue
            if head.has_counters:
                more.append(salience_key(row))
            if self.plan.as_of is None:
                more.append(version_key(row, head.current_version))
            else:
                prefixes.append(version_prefix(row))
        for s in sources:
            try:
                srow = row_of(self.txn, s)
            except IntegrityError:
                continue
            if srow is not None:
                more.append(head_key(srow))
        load(more, prefixes)

    def accept(
        self, mid: MemoryId, head: Head | None = None, *, indexed: bool = False
    ) -> Row | None:
        """The row of ``mid`` when it passes every filter of the plan, else ``None``.

        ``indexed``: ``mid`` was read off an index key (type, tag, frame), written in the same
        transaction as the head: no head means the key is damaged (keys carry no checksum),
        which is an error, not a memory to leave out.
        """
        version: Version | None = None
        current = self._current
        # the head and its version in one C call (which takes 16 bytes: an id off a damaged
        # index key of another length takes the Python path, which says what is wrong)
        if head is None and current is not None and len(mid.bytes) == _ID:
            raw = mid.bytes
            found = self._found
            pair = found.get(raw) if found else None
            accepting = self._accepting
            if accepting is not None:
                got = (
                    _READ_ACCEPTED(*accepting, raw)  # type: ignore[misc]
                    if pair is None
                    else _ACCEPT_PAIR(*accepting, raw, pair)  # type: ignore[misc]
                )
                if got is False:
                    return None
                if got is not None:
                    return Row(got[0], got[1], _decode) if got[2] else self.passes(got[0], got[1])
            elif pair is None:
                pair = current(raw)
            if pair is not None:
                return self.passes(pair[0], pair[1])
        if head is None:
            head = self.head(mid) if len(mid.bytes) == _ID else None
            if head is None:
                if indexed:
                    raise IntegrityError(
                        f"an index entry names memory {mid}, which has no head: an index key "
                        "is damaged; run cortex verify (the memory it belonged to is missing "
                        "from this query)"
                    )
                return None
        return self.passes(head, version)

    def passes(self, head: Head, version: Version | None) -> Row | None:
        """``accept`` after the reads: the row of ``head`` when it passes every filter, else None.

        ``version``: the version the query sees when the caller read it with the head (the C
        read), else None (read here once the head's filters pass).
        """
        p = self.plan
        if p.types and head.type not in p.types:
            return None
        if not self.visible(head):
            return None
        if not p.include_superseded and self._superseded(head):
            return None
        if p.tags:
            have = head.tags
            for t in p.tags:
                if t not in have:
                    return None
        if p.frames and not all(any(f.matches(h) for h in head.frames) for f in p.frames):
            return None
        if version is None:
            version = (
                self.store.version(self.txn, head.id, head.current_version)
                if p.as_of is None
                else self.version_for(head)
            )
        if version is None:
            return None
        if (
            not p.include_expired
            and version.expires_at is not None
            and to_micros(version.expires_at) <= self.at_us
        ):
            return None
        row = Row(head, version, _decode)
        if p.window is not None and not in_window(own_time(row, p.window_on), p.window):
            return None
        if p.where is not None and not p.where(row):
            return None
        return row

    def _superseded(self, head: Head) -> bool:
        """Whether another memory supersedes ``head``'s at the time the query looks at."""
        cur = self._cursor
        if cur is None:
            return superseder(self.txn, head.id, self.at_us) is not None
        # no key under the memory's supersedes edges (the common case): no superseder
        # without a Python call (``heads.superseder`` looks the same way first)
        into = EDGE_TO + head.id.bytes + _INTO
        return bool(
            cur.set_range(into)
            and cur.key().startswith(into)
            and superseder(self.txn, head.id, self.at_us)
        )

    def state(self, head: Head) -> SalienceState:
        """The use counters of ``head``'s memory (all zero when never used)."""
        return read_state(self.txn, head) if head.has_counters else NEVER_USED

    def salience_of(self, row: Row, vector: float | None = None) -> float:
        """The salience of an accepted row now (in C for a memory never used)."""
        head = row.head
        fast = _SALIENCE
        if fast is not None and type(self.decay) is dict and not head.has_counters:
            w = self.weights
            s = fast(
                head,
                self.now_us,
                self.decay,
                DecayClass.PERMANENT,
                HALF_LIFE_DAYS,
                (w.recency, w.access, w.citation, w.importance),
                w.vector,
                vector,
            )
            if s is not None:
                return s
        return salience_at(
            head,
            read_state(self.txn, head) if head.has_counters else NEVER_USED,
            self.now_us,
            decay=self.decay[head.type],
            weights=self.weights,
            vector=vector,
        )

    # -- index scans --------------------------------------------------------------------------

    def created_scan(self, prefix: bytes, descending: bool) -> Iterator[tuple[int, MemoryId]]:
        """``(created_us, id)`` under an index keyed ``prefix u64(created) id16``.

        In created order (newest first when ``descending``), ties by id ascending, inside the
        plan's created-time window and ``as_of``.
        """
        p = self.plan
        lo: int | None = None
        hi: int | None = None  # exclusive
        if p.window is not None and p.window_on == "created":
            lo, hi = p.window
        if p.as_of is not None:
            hi = p.as_of + 1 if hi is None else min(hi, p.as_of + 1)
        n = len(prefix)
        if not descending:
            start = prefix + lo.to_bytes(_U64, "big") if lo is not None else None
            for key in self.txn.keys(prefix, start=start):
                created = int.from_bytes(key[n : n + _U64], "big")
                if hi is not None and created >= hi:
                    return
                yield created, MemoryId._trusted(key[n + _U64 :])
            return
        # Newest first with ties by id ascending. A reverse scan, a run of keys of one created
        # time buffered and given in reverse (ids ascending): most runs are of one key. A run
        # longer than _RUN (write_many gives a whole batch one time) is read forward from its
        # start instead, so the first result never waits for a whole batch; then the reverse
        # scan goes on below it.
        top = hi - 1 if hi is not None else None
        while top is None or top >= 0:
            seek = prefix + top.to_bytes(_U64, "big") + _MAX_ID if top is not None else None
            run: list[bytes] = []
            run_at = -1
            for key in self.txn.keys(prefix, start=seek, reverse=True):
                created = int.from_bytes(key[n : n + _U64], "big")
                if created != run_at:
                    for k in reversed(run):
                        yield run_at, MemoryId._trusted(k[n + _U64 :])
                    if lo is not None and created < lo:
                        return
                    run, run_at = [key], created
                elif len(run) < _RUN:
                    run.append(key)
                else:
                    break  # a long run: read forward from its start
            else:
                for k in reversed(run):
                    yield run_at, MemoryId._trusted(k[n + _U64 :])
                return
            for k in self.txn.keys(prefix + run[0][n : n + _U64]):
                yield run_at, MemoryId._trusted(k[n + _U64 :])
            top = run_at - 1

    def newest(self, prefix: bytes) -> Iterator[MemoryId]:
        """The ids of ``created_scan(prefix, True)``, in the same order.

        In pages of raw ids from C (``newest_ids``, as ``_stream`` reads them) where the plan
        has no created window or ``as_of`` and the engine has a cursor (LMDB); where a page
        declines (a key of another length under the prefix), ``created_scan`` gives the rest.
        """
        p = self.plan
        page = _NEWEST
        n = 0
        if (
            page is not None
            and self._cursor is not None
            and p.as_of is None
            and not (p.window is not None and p.window_on == "created")
        ):
            trusted = MemoryId._trusted
            for ids in self._pages(page, prefix, None):
                if ids is None:
                    break
                for raw in ids:
                    n += 1
                    yield trusted(raw)
            else:
                return
        for i, (_, mid) in enumerate(self.created_scan(prefix, True)):
            if i >= n:
                yield mid

    def _type_ids(self, descending: bool) -> Iterator[MemoryId]:
        streams = [
            self.created_scan(IDX_TYPE + bytes((t,)), descending) for t in sorted(self.plan.types)
        ]
        if len(streams) == 1:
            merged: Iterator[tuple[int, MemoryId]] = streams[0]
        else:
            # newest first (or oldest first) across types; ties by id ascending
            sign = -1 if descending else 1
            merged = heapq.merge(*streams, key=lambda e: (sign * e[0], e[1].bytes))
        for _, mid in merged:
            yield mid

    def ids_of_type(self, t: MemoryType) -> Iterator[MemoryId]:
        """Ids of one type, newest first (inside the plan's created window and as_of)."""
        for _, mid in self.created_scan(IDX_TYPE + bytes((t,)), True):
            yield mid

    def _tag_ids(self, descending: bool) -> Iterator[MemoryId]:
        """Ids carrying every tag and full frame pattern (and of one of the types), by created time.

        One tag or pattern alone is a plain scan. Several, or any with types, are intersected by
        a leapfrog join over the (created, id) order the tag, frame and type indexes share: each
        index seeks to the next key at or past the others' current key, so the work follows the
        smallest of them instead of the first one's size. Patterns without a reference are
        left to the filters.
        """
        p = self.plan
        full = {
            frame_prefix(f.verb, f.obj_kind, f.obj_ref): None
            for f in p.frames
            if f.obj_kind is not None and f.obj_ref is not None
        }
        groups = [[prefix] for prefix in full]
        # a tag's entries sit under one prefix per type (format 4): the types of the query, or
        # all of them, so tags with types need no separate type index in the join
        types = sorted(p.types) if p.types else list(MemoryType)
        groups += [[tag_prefix(t, ty) for ty in types] for t in dict.fromkeys(p.tags)]
        if p.types and not p.tags:
            groups.append([IDX_TYPE + bytes((t,)) for t in types])
        if len(groups) == 1:
            scans = [self.created_scan(prefix, descending) for prefix in groups[0]]
            sign = -1 if descending else 1
            merged = (
                scans[0]
                if len(scans) == 1
                else heapq.merge(*scans, key=lambda e: (sign * e[0], e[1].bytes))
            )
            for _, mid in merged:
                yield mid
            return
        lo, hi = self._created_bounds()
        for raw in _leapfrog(self.txn, groups, descending, lo, hi):
            yield MemoryId._trusted(raw[_U64:])

    def _full_pattern(self) -> bool:
        """Whether some frame pattern names a reference (its index keys are in created order)."""
        frames = self.plan.frames
        return bool(frames) and any(
            f.obj_kind is not None and f.obj_ref is not None for f in frames
        )

    def _created_bounds(self) -> tuple[int | None, int | None]:
        """The created-time range ``[lo, hi)`` the index scans may skip to."""
        p = self.plan
        lo: int | None = None
        hi: int | None = None
        if p.window is not None and p.window_on == "created":
            lo, hi = p.window
        if p.as_of is not None:
            hi = p.as_of + 1 if hi is None else min(hi, p.as_of + 1)
        return lo, hi

    def _frame_ids(self) -> Iterator[MemoryId]:
        """Ids under the first frame pattern with a reference (else the first), in no order."""
        frames = self.plan.frames
        f = next((f for f in frames if f.obj_ref is not None), frames[0])
        prefix = IDX_FRAME + bytes((f.verb,))
        if f.obj_kind is not None:
            prefix += bytes((f.obj_kind,))
            if f.obj_ref is not None:
                prefix += obj_hash(f.obj_ref)
        seen: set[bytes] = set()
        for key in self.txn.keys(prefix):
            raw = key[-_ID:]
            if raw not in seen:  # a verb-only pattern meets a memory once per matching frame
                seen.add(raw)
                yield MemoryId._trusted(raw)

    def _walk(self) -> Iterator[tuple[MemoryId, int]]:
        """Breadth-first from ``from_``: ``(id, hops)`` by shortest path, each id once."""
        p = self.plan
        follow = p.follow
        assert follow is not None
        prefixes = []
        if follow.direction in ("out", "both"):
            prefixes.append((EDGE_FROM, True))
        if follow.direction in ("in", "both"):
            prefixes.append((EDGE_TO, False))
        frontier: list[MemoryId] = []
        seen: set[MemoryId] = set()
        for mid in p.from_:
            head = self.head(mid)
            if (
                head is None
                or not self.reader.can_see(head, self.owner, self.now)
                or (self.gate is not None and not self.gate.memory(head))
                or (p.as_of is not None and to_micros(head.created_at) > p.as_of)
            ):
                raise NotFoundError(f"no memory {mid}")  # hidden looks exactly like missing
            if mid not in seen:
                seen.add(mid)
                frontier.append(mid)
        hop = 0
        while frontier:
            if hop >= follow.min_hops:
                for mid in sorted(frontier, key=lambda m: m.bytes):
                    yield mid, hop
            if hop == follow.max_hops:
                return
            nxt: set[MemoryId] = set()
            for mid in frontier:
                head = self.head(mid)
                if head is None or not self._passable(head):
                    continue
                for base, outgoing in prefixes:
                    check_edge_neighbours(self.txn, mid, base)
                    for key, value in self.txn.scan(base + mid.bytes):
                        s, et, d = parse_edge_key(key)
                        if p.edge_types is not None and et not in p.edge_types:
                            continue
                        rec: EdgeRecord = decode_trusted(EDGE_CODEC, key, value)
                        if not self._edge_live(rec):
                            continue
                        other = d if outgoing else s
                        if other not in seen:
                            seen.add(other)
                            nxt.add(other)
            frontier = list(nxt)
            hop += 1

    def _passable(self, head: Head) -> bool:
        """Whether a walk may go on through ``head``: visible, and live at the query's time."""
        return self.visible(head)

    def _edge_live(self, rec: EdgeRecord) -> bool:
        """Whether an edge is followed: not removed (with ``as_of``: existing then)."""
        p = self.plan
        if p.as_of is None:
            return rec.removed_at is None
        if to_micros(rec.created_at) > p.as_of:
            return False
        return rec.removed_at is None or to_micros(rec.removed_at) > p.as_of

    # -- running ------------------------------------------------------------------------------

    def run(
        self, among: Sequence[MemoryId] | None = None
    ) -> tuple[list[Candidate], list[Candidate]]:
        """The hits in order and the candidates the budget dropped.

        ``among``: the memories to consider, in place of the plan's index scan, for a caller
        that knows every memory the plan can find is among them (``Cortex.about``: those whose
        indexed terms name the entity); each is accepted and the hits are ordered as the plan
        orders them, so the result is the scan's.
        """
        p = self.plan
        want = None if p.limit is None else p.offset + p.limit
        streaming = among is None and (
            p.order_by == "created"
            and (p.start in ("type", "tag") or (p.start == "frame" and self._full_pattern()))
        )
        if among is not None:
            cands = [
                Candidate(r)
                for r in (self.accept(m) for m in self.preloaded(among, 512))
                if r is not None
            ]
        elif p.start == "walk":
            cands = self._from_walk()
        elif p.start in ("text", "vector"):
            cands = self._from_search(want)
        elif (
            streaming
            and _FUSED
            and (one := self._one_prefix()) is not None
            and (fused := self._stream(one, want)) is not None
        ):
            cands = fused
        elif streaming:
            # a frame start here has a full pattern: it joins like a tag
            ids = self._type_ids(p.descending) if p.start == "type" else self._tag_ids(p.descending)
            cands = []
            for mid in self.preloaded(ids, max(8, want or 0)):
                row = self.accept(mid, indexed=True)
                if row is not None:
                    cands.append(Candidate(row))
                    if want is not None and len(cands) >= want:
                        break
        else:
            joined = p.start == "tag" or (p.start == "frame" and self._full_pattern())
            ids = (
                self._tag_ids(True)
                if joined
                else (self._frame_ids() if p.start == "frame" else self._type_ids(True))
            )
            cands = [
                Candidate(r)
                for r in (self.accept(m, indexed=True) for m in self.preloaded(ids, 512))
                if r is not None
            ]
        if p.start not in ("vector", "text"):
            # ``salience_of`` of each row, its per-query values looked up once; in C for a
            # memory never used (None: the definition runs)
            txn, now_us, decay, weights = self.txn, self.now_us, self.decay, self.weights
            fast = _SALIENCE if type(decay) is dict else None
            w = (weights.recency, weights.access, weights.citation, weights.importance)
            permanent, half_lives = DecayClass.PERMANENT, HALF_LIFE_DAYS
            for c in cands:
                head = c.row.head
                s = (
                    fast(head, now_us, decay, permanent, half_lives, w)
                    if fast is not None
                    else None
                )
                c.salience = (
                    s
                    if s is not None
                    else salience_at(
                        head,
                        read_state(txn, head) if head.has_counters else NEVER_USED,
                        now_us,
                        decay=decay[head.type],
                        weights=weights,
                    )
                )
        if not streaming:
            cands.sort(key=self._sort_key)
        cands = cands[p.offset :]
        if p.limit is not None:
            cands = cands[: p.limit]
        # memory_of of each row, inline: one C call where the data is not decoded yet
        build, ctx = _MEMORY_OF, _store._READ
        for c in cands:
            row = c.row
            m = (
                build(ctx, row.head, row.version)
                if build is not None and ctx is not None and row._data is False
                else None
            )
            c.memory = m if m is not None else memory_of(row)
        dropped: list[Candidate] = []
        if p.budget is not None:
            cands, dropped = trim_to_budget(
                cands,
                lambda c: _tokens(c, p.form),
                lambda c: c.salience,
                p.budget,
            )
        return cands, dropped

    def _one_prefix(self) -> bytes | None:
        """The one index prefix a streaming plan reads, where ``_stream`` may run it, else None.

        Newest first without a created window or ``as_of``, on an engine with the C read and a
        cursor (LMDB): one type alone, or one tag of one type and no frame pattern to join
        (``_type_ids`` and ``_tag_ids`` then read this prefix alone through ``created_scan``).
        """
        p = self.plan
        if (
            self._current is None
            or self._cursor is None
            or not p.descending
            or p.as_of is not None
            or (p.window is not None and p.window_on == "created")
            or len(p.types) != 1
        ):
            return None
        (t,) = p.types
        if p.start == "type":
            return IDX_TYPE + bytes((t,))
        if p.start == "tag" and len(set(p.tags)) == 1 and not self._full_pattern():
            return tag_prefix(p.tags[0], t)
        return None

    def _stream(self, prefix: bytes, want: int | None) -> list[Candidate] | None:
        """``run``'s streaming loop over one index prefix, fused: the same candidates, in order.

        ``created_scan`` newest first (the raw ids as they come off the keys: in pages from C
        where it is built, else ``_newest``) and ``accept`` of each id until ``want`` pass; no
        chunks (they are for ``preload``, which an engine with the C read does not have).
        None where the C scan declines (a key of another length under the prefix): ``run``
        then takes the general path.
        """
        current = self._current
        assert current is not None
        passes = self.passes
        p = self.plan
        # the first filters in the C read too, where they are all the plan has (the owner's)
        accepted = (
            self.store.accepted_reader(self.txn, p.types, p.tags, p.include_superseded)
            if _ACCEPTED
            and self._sees_all
            and not p.frames
            and p.window is None
            and p.where is None
            else None
        )
        cands: list[Candidate] = []
        page = _NEWEST
        if page is None:
            ids_of = self._newest(prefix)
            pages: Iterator[list[bytes] | None] = iter(
                lambda: list(itertools.islice(ids_of, _RUN)), []
            )
        else:
            pages = self._pages(page, prefix, want)
        for ids in pages:
            if ids is None:
                return None
            for raw in ids:
                if len(raw) != _ID:
                    row = self.accept(MemoryId._trusted(raw), indexed=True)
                elif accepted is not None:
                    got = accepted(raw)
                    if got is False:
                        continue
                    if got is None:
                        row = self.accept(MemoryId._trusted(raw), indexed=True)
                    elif got[2]:
                        row = Row(got[0], got[1], _decode)
                    else:
                        row = passes(got[0], got[1])
                else:
                    pair = current(raw)
                    row = (
                        passes(pair[0], pair[1])
                        if pair is not None
                        else self.accept(MemoryId._trusted(raw), indexed=True)
                    )
                if row is not None:
                    cands.append(Candidate(row))
                    if want is not None and len(cands) >= want:
                        return cands
        return cands

    def _pages(
        self,
        page: Callable[[Any, bytes, bytes | None, int, int], Any],
        prefix: bytes,
        want: int | None,
    ) -> Iterator[Any]:
        """Pages of ``newest_ids`` (None: it declined); the first as long as ``want``.

        Over the duplicates of ``prefix`` where it is a head of a database of duplicates
        (format 20's index keyspaces, ``_LmdbTxn.dup_cursor``), else over the main cursor.
        """
        dup_cursor = getattr(self.txn, "dup_cursor", None)
        got = dup_cursor(prefix) if dup_cursor is not None else None
        cur, head = got if got is not None else (self._cursor, 0)
        size = max(8, want or 0)
        after: bytes | None = None
        while True:
            got = page(cur, prefix, after, size, head)
            if got is None:
                yield None
                return
            ids, after = got
            yield ids
            if after is None:
                return
            size = min(size * 4, 512)

    def _newest(self, prefix: bytes) -> Iterator[bytes]:
        """The raw ids under ``prefix`` as ``created_scan(prefix, True)`` gives them.

        ``_stream`` runs without a created window or ``as_of``, so no bound applies.
        """
        return (m.bytes for _, m in self.created_scan(prefix, True))

    def _sort_key(self, c: Candidate) -> tuple[Any, ...]:
        p = self.plan
        sign = -1 if p.descending else 1
        h = c.row.head
        if p.order_by == "salience":
            k: Any = c.salience
        elif p.order_by == "created":
            k = to_micros(h.created_at)
        elif p.order_by == "updated":
            k = to_micros(h.last_updated_at)
        elif p.order_by == "importance":
            k = h.importance
        elif p.order_by == "hop":
            k = c.hop or 0
        else:
            k = c.relevance
        return (sign * k, h.id.bytes)

    def _from_walk(self) -> list[Candidate]:
        out = []
        for mid, hop in self._walk():
            row = self.accept(mid)
            if row is not None:
                c = Candidate(row)
                c.hop = hop
                out.append(c)
        return out

    def _from_search(self, want: int | None) -> list[Candidate]:
        """Text and vector plans: over-fetch from the ranked lists until enough pass."""
        p = self.plan
        lists: dict[str, Callable[[int], list[tuple[MemoryId, float]]]] = {}
        if p.text is not None:
            if self.text_search is None:
                raise ValidationError(
                    "text", "unavailable", "this store has no lexical index; run cortex migrate"
                )
            text_search = self.text_search
            lists["lexical"] = lambda n: text_search(self.txn, p.text or "", n)
        vec_query = p.near_vector if p.near_vector is not None else (p.near or p.text)
        if (p.near is not None or p.near_vector is not None or p.text is not None) and (
            self.vector_search is not None
        ):
            vector_search = self.vector_search
            lists["vector"] = lambda n: vector_search(self.txn, vec_query, n)
        elif p.near is not None or p.near_vector is not None:
            raise ValidationError(
                "near",
                "unavailable",
                "vector search needs an embedder: Cortex.open(..., embedder=…)",
            )
        # with the entity term on, the vector ranking embeds the text without the names it
        # names among the lexical list's first ``depth`` (``rerank.unnamed``, §1.9); found once,
        # so a deeper fetch embeds the same text
        unname = (
            "lexical" in lists
            and "vector" in lists
            and p.near is None
            and p.near_vector is None
            and self.fusion.entity_weight > 0
        )
        # each list counts its first ``depth`` (§1.8): fetched at least that deep, so a small
        # limit scores what a larger one does
        n = max(32, self.fusion.depth, 4 * (want or 0))
        if (
            want
            and p.types
            and self.type_share is not None
            and list(lists) == ["vector"]
            and p.order_by == "score"
            and p.descending
        ):  # a type filter alone on a vector list in its order (final: the same hits whatever
            # the depth): deep enough in one round for twice ``want`` of the types where the
            # index holds them in that share
            share = self.type_share([int(t) for t in p.types])
            if share:
                n = max(n, min(_SHARE_FETCH_MAX, math.ceil(2 * want / share)))
        f = self.fusion
        # one list and nothing to rerank: relevance is the list's score, so its order is the
        # hits' order (ties by id, as the list breaks them; the lexical list breaks them by
        # document number, so accepting goes on through a tie at the cut) and accepting stops
        # once ``want`` pass and the score falls below the last of them
        final = (
            _STOP_AT_WANT
            and want is not None
            and len(lists) == 1
            and p.order_by == "score"
            and p.descending
            and not (p.text is not None and (f.context_weight > 0 or f.entity_weight > 0))
        )
        while True:
            ranked: dict[str, list[tuple[MemoryId, float]]] = {}
            for name, fn in lists.items():
                if name == "vector" and unname:
                    unname = False
                    vec_query = self._unnamed(p.text or "", ranked["lexical"])
                ranked[name] = fn(n)
            exhausted = all(len(r) < n for r in ranked.values())
            # one list: its order, each one's rank and score made into dicts only when it passes
            # (None here: the rank is its place, the score the list's)
            fused: list[tuple[MemoryId, float, dict[str, int] | None, dict[str, float] | None]] = (
                fuse(ranked, self.fusion)  # type: ignore[assignment]
                if len(ranked) > 1
                else [(mid, s, None, None) for r in ranked.values() for mid, s in r]
            )
            one = next(iter(ranked))
            out = []
            # a type filter: candidates whose type is known to be another are left out
            # unread (they would not pass); the others are read, and their types kept
            ids = [mid for mid, _, _, _ in fused]
            known = self._known_types(ids)
            if known is not None:
                kinds, wanted = known
                self.preload([m for m, k in zip(ids, kinds, strict=True) if k in wanted])
            else:
                self.preload(ids)
            cut: float | None = None  # with ``final``: the score of the ``want``-th to pass
            for i, (mid, score, ranks, scores) in enumerate(fused):
                if cut is not None and score < cut:
                    break
                if known is not None:
                    kind = kinds[i]
                    if kind is None:
                        seen = self.type_seen
                        head = self.head(mid) if seen is not None else None
                        if head is not None and seen is not None:  # what ``accept`` reads first
                            seen(mid, head.type)
                    elif kind not in wanted:
                        continue  # of another type: it would not pass
                row = self.accept(mid)
                if row is None:
                    continue
                c = Candidate(row)
                if ranks is None or scores is None:
                    c.ranks, c.scores = {one: i + 1}, {one: score}
                else:
                    c.ranks, c.scores = dict(ranks), dict(scores)
                # the cosine counts (salience's V) among the vector list's first ``depth`` only,
                # like the list itself: a deeper fetch does not change a memory's relevance
                vec = (
                    c.scores.get("vector")
                    if c.ranks.get("vector", 0) <= self.fusion.depth
                    else None
                )
                c.salience = self.salience_of(row, vector=vec)
                c.relevance = self._blend(score, c.salience, len(ranked))
                if len(ranked) > 1:
                    c.ranks["fused"] = 0
                    c.scores["fused"] = score
                out.append(c)
                if final and cut is None and len(out) >= want:  # type: ignore[operator]
                    cut = score
            if exhausted or (want is not None and len(out) >= want):
                break
            n *= 4
        if p.text is not None and (f.context_weight > 0 or f.entity_weight > 0):
            out = self._rerank(out, ranked, fused)
        out.sort(key=lambda c: (-c.relevance, c.id.bytes))
        if "fused" in (out[0].ranks if out else {}):
            for i, c in enumerate(out, start=1):
                c.ranks["fused"] = i
        return out

    def _known_types(
        self, ids: list[MemoryId]
    ) -> tuple[list[int | None], frozenset[int | None]] | None:
        """With a type filter, ``ids``' types where known without a read, and those read on.

        Those read on are the plan's types and None (a type not known: the memory is read).
        None without a filter (or no ``types_of``).
        """
        types, types_of = self.plan.types, self.types_of
        if not types or types_of is None or len(types) == len(MemoryType):
            return None
        return types_of(ids), frozenset((*map(int, types), None))

    def _rerank(
        self,
        cands: list[Candidate],
        ranked: dict[str, list[tuple[MemoryId, float]]],
        fused: list[tuple[MemoryId, float, dict[str, int] | None, dict[str, float] | None]],
    ) -> list[Candidate]:
        """A text query's context and entity terms (``rerank``, ``specs/query.md`` §1.9).

        The base of a memory is its fused score, or with one list its score over the list's
        best. Only the first ``depth`` of each list lend context or count a named entity, and
        they do whether or not they pass the query's filters (only what the reader may see
        counts), so, as for fusion, a memory's score depends neither on how deep the lists
        were fetched nor on the filters: a filtered query keeps the unfiltered order of what
        passes. Neighbours no list returned join the candidates with their context alone, when
        they pass the filters.
        """
        f = self.fusion
        p = self.plan
        many = len(ranked) > 1
        (name, items), *_ = ranked.items()
        hi = items[0][1] if items else 0.0
        q_tokens = tuple(tokenize(fold(p.text or "")))

        def base_of(score: float, scores: dict[str, float] | None) -> float:
            if many:
                b = score
            else:  # the list's score (a fused list's entry holds it as ``score``: None)
                own = score if scores is None else scores.get(name, 0.0)
                b = own / hi if hi > 0 else 0.0
            return min(1.0, max(0.0, b))

        within = {m for r in ranked.values() for m, _ in r[: f.depth]}
        seen = self._seen
        by_id: dict[MemoryId, Candidate] = {}
        for c in cands:  # accepted rows are seen rows (a row read before is the same row)
            mid = c.row.head.id
            if seen.get(mid) is None:
                seen[mid] = c.row
            by_id[mid] = c
        base: dict[MemoryId, float] = {}  # of the first ``depth`` the reader may see
        rows: dict[MemoryId, Row] = {}
        named: set[MemoryId] = set()
        entities = f.entity_weight > 0
        for mid, score, _, scores in fused:
            if mid not in within:
                continue
            row = seen[mid] if mid in seen else self._seen_row(mid)
            if row is None:
                continue
            base[mid] = b = base_of(score, scores)
            rows[mid] = row
            if entities and b > 0 and names_any(q_tokens, self._names_of(mid, row)):
                named.add(mid)
        cw, ew = f.context_weight, f.entity_weight
        own = {m: combine(b, m in named, 0.0, cw, ew) for m, b in base.items()}
        links: dict[MemoryId, list[MemoryId]] = {}
        if f.context > 0 and f.context_weight > 0:
            best = sorted(own, key=lambda m: (-own[m], m.bytes))[:CONTEXT_SOURCES]
            for mid in best:
                if own[mid] <= 0 or rows[mid].head.type != MemoryType.EVENT:
                    continue
                links[mid] = [r.head.id for r in self._neighbours(rows[mid], f.context)]
                for nid in links[mid]:
                    if nid in by_id:
                        continue
                    row = self._seen_row(nid)
                    if row is not None and self._passes(row):
                        c = Candidate(row)
                        c.salience = self.salience_of(row)
                        if many:
                            c.ranks["fused"] = 0
                        by_id[nid] = c
                        cands.append(c)
        context = context_scores({m: own[m] for m in links}, links)
        for c in cands:
            ctx = context.get(c.id, 0.0)
            if ctx <= 0 and c.id not in named:
                continue  # no term applies: the relevance stays as fusion left it
            if ctx > 0:
                c.scores["context"] = ctx
            if c.id in named:
                c.scores["entity"] = f.entity_weight
            b = base.get(c.id, base_of(c.scores.get("fused", 0.0), c.scores))
            score = combine(b, c.id in named, ctx, f.context_weight, f.entity_weight)
            # one list: back on its own scale (its raw score plus the terms times its best)
            c.relevance = self._blend(score, c.salience, 2) if many else hi * score
        return cands

    def _unnamed(self, text: str, lexical: list[tuple[MemoryId, float]]) -> str:
        """``text`` without the entity names of the lexical list's first ``depth`` it names.

        Only memories the reader may see count (``_seen_row``), so a hidden memory's name
        changes nothing; ``rerank.unnamed`` does the cutting.
        """
        q_tokens = tokenize(fold(text))
        names: dict[str, None] = {}
        first = lexical[: self.fusion.depth]
        # their heads, last versions and supersedes edges together where reads cost a round
        # trip (PostgreSQL: one preload, not two reads of each of the list's 32)
        self.preload([mid for mid, _ in first if mid not in self._seen])
        for mid, _ in first:
            row = self._seen_row(mid)
            if row is None:
                continue
            for name in self._names_of(mid, row):
                if name not in names and names_any(q_tokens, (name,)):
                    names[name] = None
        return unnamed(text, names)

    def _names_of(self, mid: MemoryId, row: Row) -> tuple[str, ...]:
        """``entity_names`` of a seen row's data, once a query (``_unnamed``, ``_rerank`` ask)."""
        names = self._entity_names.get(mid)
        if names is None:
            names = self._entity_names[mid] = entity_names(row.data)
        return names

    def _passes(self, row: Row) -> bool:
        """Whether a row the reader may see (``_seen_row``) passes the query's filters too."""
        p = self.plan
        head = row.head
        if p.types and head.type not in p.types:
            return False
        if p.tags and not all(t in head.tags for t in p.tags):
            return False
        if p.frames and not all(any(f.matches(h) for h in head.frames) for f in p.frames):
            return False
        if p.window is not None and not in_window(own_time(row, p.window_on), p.window):
            return False
        return p.where is None or bool(p.where(row))

    def _seen_row(self, mid: MemoryId) -> Row | None:
        """The row of ``mid`` when the reader may see it, whatever the query's filters."""
        if mid in self._seen:
            return self._seen[mid]
        row = self._seen[mid] = self._read_seen(mid)
        return row

    def _read_seen(self, mid: MemoryId) -> Row | None:
        p = self.plan
        version: Version | None = None
        current = self._current
        # the head and its version in one C call where it reads them (as ``accept``), or as
        # the text search read them
        pair = None
        if current is not None and len(raw := mid.bytes) == _ID:
            found = self._found
            pair = found.get(raw) if found else None
            if pair is None:
                pair = current(raw)
        if pair is not None:
            head, version = pair
        else:
            got = self.head(mid)
            if got is None:
                return None
            head = got
        if not self.visible(head):
            return None
        if not p.include_superseded and self._superseded(head):
            return None
        if version is None:
            version = self.version_for(head)
        if version is None:
            return None
        if (
            not p.include_expired
            and version.expires_at is not None
            and to_micros(version.expires_at) <= self.at_us
        ):
            return None
        return Row(head, version, _decode)

    def _neighbours(self, row: Row, window: int) -> list[Row]:
        """The memories next to ``row`` that lend it context (``cortex.query.rerank``).

        Up to ``window`` on each side in its type index (created time, then id) that the reader
        may see (whatever the query's filters), stopping at the first whose own time is more
        than ``CONTEXT_GAP`` from its own.
        """
        h = row.head
        prefix = IDX_TYPE + bytes((h.type,))
        key = type_key(h.type, to_micros(h.created_at), h.id)
        at = own_time(row, "own")
        gap = int(CONTEXT_GAP.total_seconds() * 1_000_000)
        out: list[Row] = []
        load = getattr(self.txn, "preload", None)
        for reverse in (True, False):
            taken = read = 0
            keys: Iterable[bytes] = self.txn.keys(prefix, start=key, reverse=reverse)
            if load is not None:  # an engine with round trips: a side's memories read together
                keys = list(itertools.islice(keys, window + CONTEXT_SCAN + 2))
                ids = [MemoryId(bytes(k[-_ID:])) for k in keys if k != key]
                self.preload([m for m in ids[:window] if m not in self._seen])
            for k in keys:
                if k == key:
                    continue
                read += 1
                if read > window + CONTEXT_SCAN:
                    break
                if load is not None and read == window + 1:  # past the first few: the rest
                    self.preload([m for m in ids[window:] if m not in self._seen])
                other = self._seen_row(MemoryId(bytes(k[-_ID:])))
                if other is None:
                    continue
                if abs(own_time(other, "own") - at) > gap:
                    break
                out.append(other)
                taken += 1
                if taken == window:
                    break
        return out

    def _blend(self, score: float, sal: float, lists: int) -> float:
        """Relevance blended with salience: ``(1 - w) * relevance + w * salience``.

        Fused scores lie in [0, 1] (``fuse`` divides by the best possible one); a single
        list's scores are not blended (BM25 and cosine keep their own scale, so the blend
        weight matters only for fused results).
        """
        w = self.salience_blend
        if lists > 1:
            return (1 - w) * score + w * sal
        return score


_FAST = True
"""Whether ``newest_first`` runs where it applies (tests turn it off to compare with
``Executor.run``)."""
_STOP_AT_WANT = True
"""A search of one list and nothing to rerank accepts until the limit passes (``_from_search``);
off, it accepts every candidate fetched (the same hits: tests compare the two)."""
_SHARE_FETCH_MAX: Final = 1024
"""The deepest first round of a vector search with a type filter sized by the types' share
(``_from_search``); rarer types widen from there round by round."""


def newest_prefix(plan: Plan) -> bytes | None:
    """The one index prefix of a plain find newest first, where ``newest_first`` may run it.

    A find of one type, alone or with one tag, ordered by created time newest first, with a
    limit and nothing else to filter, order, skip or trim (no frames, where, window, as_of,
    offset or budget): ``Executor.run`` streams it through ``_stream`` over this one prefix.
    None for every other plan.
    """
    p = plan
    if (
        p.order_by != "created"
        or not p.descending
        or p.limit is None
        or p.offset
        or p.budget is not None
        or p.as_of is not None
        or p.window is not None
        or p.where is not None
        or p.frames
        or len(p.types) != 1
    ):
        return None
    (t,) = p.types
    if p.start == "type":
        return IDX_TYPE + bytes((t,))
    if p.start == "tag" and len(set(p.tags)) == 1:
        return tag_prefix(p.tags[0], t)
    return None


def newest_first(
    store: Store,
    txn: ReadTxn,
    plan: Plan,
    *,
    prefix: bytes,
    now_us: int,
    decay: dict[MemoryType, DecayClass],
    weights: Weights,
) -> Result | None:
    """``result`` of ``Executor.run`` of a plan ``newest_prefix`` gave ``prefix``, as the owner.

    The same hits in the same order, without building an ``Executor`` or its candidates: the
    ids of ``prefix`` newest first in pages from C (``newest_ids``), each read with its first
    filters (``read_accepted``, as ``_stream`` reads them), its salience and its memory, and
    its hit: every page in one C call (``read_newest``), else a page at a time in one
    (``read_page``). None (nothing decided; the caller runs the
    ``Executor`` in the same snapshot) where any of it is not plain: no C read on this engine,
    an index key of another length, a row whose tombstone, superseder or expiry ``passes``
    must weigh, a read the C path declines.
    The caller checks the reader sees every memory (``Executor._sees_all``).
    """
    page = _NEWEST
    build = _MEMORY_OF
    ctx = _store._READ
    dup_cursor = getattr(txn, "dup_cursor", None)
    if not (_FAST and _FUSED and _ACCEPTED) or page is None or build is None or ctx is None:
        return None
    if dup_cursor is None:
        return None
    args = store.accepted_args(txn, plan.types, plan.tags, plan.include_superseded)
    if args is None:
        return None
    got = dup_cursor(prefix)
    cur, head_len = got if got is not None else (txn.cursor(), 0)  # type: ignore[attr-defined]
    want = plan.limit
    assert want is not None
    fast = _SALIENCE if type(decay) is dict else None
    # a page's reads, filters, salience and memories in one C call (None: one id at a time)
    read_page = _READ_PAGE if fast is not None else None
    accepted: Callable[..., Any] | None = getattr(_sp, "read_accepted", None)
    if read_page is None and accepted is None:
        return None
    w = (weights.recency, weights.access, weights.citation, weights.importance)
    permanent, half_lives = DecayClass.PERMANENT, HALF_LIFE_DAYS
    form = plan.form
    plan_text = f"{plan.start} index, order by {plan.order_by}"
    whole = _READ_NEWEST if read_page is not None else None
    if whole is not None:
        # every page and its hits in one C call; the rows it leaves (salience from counters,
        # a memory or text C declines, the full form) are made hits of here, in order
        done = whole(
            *args,
            cur,
            prefix,
            head_len,
            want,
            now_us,
            decay,
            permanent,
            half_lives,
            w,
            Hit,
            _FORM_CODE.get(form, -1),
        )
        if done is None:
            return None
        items, total, left = done
        if left:
            total += _hits_of_left(txn, items, form, now_us, decay, weights)
        return Result(hits=tuple(items), tokens=total, plan=plan_text)
    rows: list[tuple[Head, Version, Memory | None, float | None]] = []
    size = max(8, want)
    after: bytes | None = None
    while True:
        pg = page(cur, prefix, after, size, head_len)
        if pg is None:
            return None
        ids, after = pg
        if read_page is not None:
            some = read_page(*args, ids, want - len(rows), now_us, decay, permanent, half_lives, w)
            if some is None:
                return None
            rows += some
        else:
            assert accepted is not None
            for raw in ids:
                if len(raw) != _ID:
                    return None
                row = accepted(*args, raw)
                if row is False:
                    continue
                if row is None or not row[2]:
                    return None
                head = row[0]
                s = (
                    fast(head, now_us, decay, permanent, half_lives, w)
                    if fast is not None
                    else None
                )
                rows.append((head, row[1], build(ctx, head, row[1]), s))
                if len(rows) >= want:
                    break
        if after is None or len(rows) >= want:
            break
        size = min(size * 4, 512)
    # to_hits and result, inline: a hit straight from each memory (no Candidate, no Row)
    hits = []
    total = 0
    for row in rows:
        hit, n = _hit_of_row(txn, row, form=form, now_us=now_us, decay=decay, weights=weights)
        total += n
        hits.append(hit)
    return Result(hits=tuple(hits), tokens=total, plan=plan_text)


Newest = tuple[Any, ...]
"""What ``newest_read`` reads a plan with, made once (``newest_prep``)."""


def newest_prep(
    plan: Plan, prefix: bytes, decay: dict[MemoryType, DecayClass], weights: Weights
) -> Newest | None:
    """What ``newest_read`` needs of a plan ``newest_prefix`` gave ``prefix``, or None.

    None without the C read (``read_newest``) or with a decay that is not a dict. Made once
    for a kept plan (``Cortex.find``); the caller checks ``decay`` and ``weights`` are still
    the handle's.
    """
    ctx = _store._READ
    if ctx is None or _READ_NEWEST is None or type(decay) is not dict or plan.limit is None:
        return None
    w = (weights.recency, weights.access, weights.citation, weights.importance)
    return (
        ctx,
        EDGE_TO,
        _INTO,
        plan.types,
        plan.tags,
        plan.include_superseded,
        prefix,
        plan.limit,
        decay,
        w,
        _FORM_CODE.get(plan.form, -1),
        plan.form,
        weights,
        f"{plan.start} index, order by {plan.order_by}",
    )


def newest_read(  # noqa: PLR0917 - the snapshot's parts, as LmdbKV.read_newest hands them
    get: Any,
    cursor: Any,
    icur: Any,
    head: int,
    snapshot: Callable[[], ReadTxn],
    prep: Newest,
    now_us: int,
) -> Result | bool | None:
    """``newest_first`` of a kept plan (``newest_prep``) in one C call, or False, or None.

    ``get``, ``cursor``, ``icur`` and ``head`` are those of the snapshot ``LmdbKV.read_newest``
    hands out (``newest_first`` takes them from its ``ReadTxn``); ``snapshot()`` is that
    snapshot, read where a row's hit needs more (its use counters). False where
    ``newest_first`` would not read through ``read_newest`` (the caller runs it in the same
    snapshot); None where ``read_newest`` declines (so would ``newest_first``: the caller runs
    the ``Executor``).
    """
    whole = _READ_NEWEST
    if (
        whole is None
        or not (_FAST and _FUSED and _ACCEPTED)
        or _NEWEST is None
        or _MEMORY_OF is None
        or _SALIENCE is None
        or _READ_PAGE is None
    ):
        return False
    (ctx, edge_to, into, types, tags, superseded, prefix, want, decay, w, code, form, weights,
     plan_text) = prep  # fmt: skip
    done = whole(
        ctx,
        get,
        None if superseded else cursor,
        edge_to,
        into,
        types,
        tags,
        icur,
        prefix,
        head,
        want,
        now_us,
        decay,
        DecayClass.PERMANENT,
        HALF_LIFE_DAYS,
        w,
        Hit,
        code,
    )
    if done is None:
        return None
    items, total, left = done
    if left:
        total += _hits_of_left(snapshot(), items, form, now_us, decay, weights)
    return Result(hits=tuple(items), tokens=total, plan=plan_text)


def _hits_of_left(  # noqa: PLR0917 - newest_first's and newest_read's own arguments
    txn: ReadTxn,
    items: list[Any],
    form: Form,
    now_us: int,
    decay: dict[MemoryType, DecayClass],
    weights: Weights,
) -> int:
    """Make hits, in place, of the rows ``read_newest`` left in ``items``; their tokens."""
    total = 0
    for i, item in enumerate(items):
        if type(item) is tuple:
            items[i], n = _hit_of_row(
                txn, item, form=form, now_us=now_us, decay=decay, weights=weights
            )
            total += n
    return total


def _hit_of_row(
    txn: ReadTxn,
    row: tuple[Head, Version, Memory | None, float | None],
    *,
    form: Form,
    now_us: int,
    decay: dict[MemoryType, DecayClass],
    weights: Weights,
) -> tuple[Hit, int]:
    """``newest_first``'s hit of a row ``(head, version, memory, salience)`` and its tokens.

    The memory built where the row has none, the salience computed (the counters read) where
    the row has none.
    """
    head, version, built, s = row
    if s is None:
        s = salience_at(
            head,
            read_state(txn, head) if head.has_counters else NEVER_USED,
            now_us,
            decay=decay[head.type],
            weights=weights,
        )
    m = built if built is not None else Store.memory(head, version)
    if form == "full":
        text = render_form(m, form)
    else:
        forms = m.version.forms or m.head.forms
        text = "" if forms is None else forms.short if form == "short" else forms.medium
    utf8_len = _UTF8_LEN
    n = (
        -(-len(text) // 4)
        if text.isascii()
        else -(-u // 4)
        if utf8_len is not None and (u := utf8_len(text)) >= 0
        else count_tokens(text)
    )
    return Hit(memory=m, text=text, tokens=n, salience=s, score=s), n


def _decode(v: Version) -> Data | None:
    if v.data is None:
        return None
    try:
        return decode_data_trusted(v.type, v.data)
    except CodecError as exc:
        raise IntegrityError(f"version {v.id}#{v.version}: {exc}") from None


_SUFFIX: Final = _U64 + _ID
_SUFFIX_MAX: Final = (1 << (8 * _SUFFIX)) - 1


def _seek(txn: ReadTxn, prefixes: list[bytes], target: int, descending: bool) -> int | None:
    """The nearest (created, id) suffix at or before (descending) / after ``target``.

    Looks in every prefix of ``prefixes`` (a union) and returns the suffix as a 24-byte
    big-endian integer; ``None`` when there is none.
    """
    best: int | None = None
    for prefix in prefixes:
        key = txn.seek(prefix, prefix + target.to_bytes(_SUFFIX, "big"), reverse=descending)
        if key is None:
            continue
        x = int.from_bytes(key[len(prefix) :], "big")
        if best is None or (x > best if descending else x < best):
            best = x
    return best


def _leapfrog(
    txn: ReadTxn, groups: list[list[bytes]], descending: bool, lo: int | None, hi: int | None
) -> Iterator[bytes]:
    """Suffixes (u64 created, id16) present in every group.

    Created newest first (or oldest first), ties by id ascending, within ``[lo, hi)``.
    """
    shift = 8 * _ID
    if descending:
        target = _SUFFIX_MAX if hi is None else (hi << shift) - 1
    else:
        target = 0 if lo is None else lo << shift
    run: list[int] = []
    run_at = -1
    while 0 <= target <= _SUFFIX_MAX:
        cand = _seek(txn, groups[0], target, descending)
        if cand is None:
            break
        agreed = True
        for group in groups[1:]:
            x = _seek(txn, group, cand, descending)
            if x is None:
                cand = None
                break
            if x != cand:
                target, agreed = x, False
                break
        if cand is None:
            break
        if not agreed:
            continue
        created = cand >> shift
        if (descending and lo is not None and created < lo) or (
            not descending and hi is not None and created >= hi
        ):
            break
        if descending and created != run_at:
            # the join meets equal times in descending id order: emit each time's run reversed
            yield from (r.to_bytes(_SUFFIX, "big") for r in reversed(run))
            run, run_at = [], created
        if descending:
            run.append(cand)
        else:
            yield cand.to_bytes(_SUFFIX, "big")
        target = cand - 1 if descending else cand + 1
    yield from (r.to_bytes(_SUFFIX, "big") for r in reversed(run))


def read_state(txn: ReadTxn, head: Head) -> SalienceState:
    """The use counters of ``head``'s memory (all zero when never used; ``query.md`` §2).

    Read only when the head says the memory has counters (format 11).

    Raises:
        IntegrityError: the head says it has counters and their record is missing (a damaged
            ``sal/`` key) or damaged.
    """
    return read_counters(txn, head)


def memory_of(row: Row) -> Memory:
    """The ``Memory`` of an accepted row."""
    v = row.version
    if not row.decoded:  # one C call decodes the data and builds the Memory (Store.memory)
        return Store.memory(row.head, v)
    return Memory(
        uri=Uri._trusted(v.type, v.id, v.version), head=row.head, version=v, data=row.data
    )


def _tokens(c: Candidate, form: Form) -> int:
    assert c.memory is not None
    return count_tokens(render_form(c.memory, form))


def to_hits(cands: Sequence[Candidate], form: Form, order_by: str) -> tuple[list[Hit], int]:
    """Render candidates as hits; returns the hits and their token total."""
    hits = []
    total = 0
    by_score = order_by == "score"
    utf8_len = _UTF8_LEN
    for c in cands:
        m = c.memory
        assert m is not None
        if form == "full":
            text = render_form(m, form)
        else:  # render_form's short and medium forms, inline (one Python call less a hit)
            forms = m.version.forms or m.head.forms
            text = "" if forms is None else forms.short if form == "short" else forms.medium
        # count_tokens, inline (one Python call less a hit): ASCII, else UTF-8 counted in C
        n = (
            -(-len(text) // 4)
            if text.isascii()
            else -(-u // 4)
            if utf8_len is not None and (u := utf8_len(text)) >= 0
            else count_tokens(text)
        )
        total += n
        score = c.relevance if by_score else c.salience
        hits.append(
            Hit(
                memory=m,
                text=text,
                tokens=n,
                salience=c.salience,
                score=score,
                hop=c.hop,
                ranks=c.ranks,
                scores=c.scores,
            )
        )
    return hits, total


def result(cands: Sequence[Candidate], dropped: Sequence[Candidate], plan: Plan) -> Result:
    """The ``Result`` of a run."""
    hits, total = to_hits(cands, plan.form, plan.order_by)
    return Result(
        hits=tuple(hits),
        tokens=total,
        dropped=tuple(c.memory.uri for c in dropped if c.memory is not None),
        plan=f"{plan.start} index, order by {plan.order_by}",
    )
