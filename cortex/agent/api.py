"""The public entry point: ``Cortex``, the store with find, context, salience and scopes."""

from __future__ import annotations

import contextlib
import copy
import inspect
import math
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Final, Literal, Self, TypeVar, cast

import msgspec
import numpy as np
import numpy.typing as npt

from cortex import argcheck
from cortex.agent import core as _core
from cortex.agent.core import CoreChange
from cortex.agent.extract import Extractor
from cortex.agent.ingest import EpisodeLink, IngestResult, visible_episode
from cortex.agent.ingest import episode_of as _episode_of
from cortex.agent.ingest import ingest as _ingest
from cortex.engine.erasure import ErasureReport, ScrubReport
from cortex.engine.heads import head_row, id_at, put_counters, row_of
from cortex.engine.hooks import Hooks, Visible
from cortex.engine.hooks import given_vector as plain_given_vector
from cortex.engine.journal import JOURNAL_CODEC, JournalEntry, JournalKind, JournalWriter
from cortex.engine.sidecar import DIRECTORY as SIDECAR_DIRECTORY
from cortex.engine.sidecar import VectorSidecar, embed_checked, journal_head
from cortex.engine.store import DEFAULT_WRITE_BUDGET, Prepared, Store, as_id, edge_of, open_store
from cortex.engine.values import (
    EDGE_CODEC,
    Edge,
    FormatRecord,
    ImportReport,
    Memory,
    NewMemory,
    VerifyReport,
    decode_trusted,
)
from cortex.errors import (
    IntegrityError,
    NotFoundError,
    TombstonedError,
    ValidationError,
)
from cortex.index import evidence, lexical
from cortex.index.ann import DEFAULT_EF, erase_saved
from cortex.index.embed import Embedder, External, embedder_for
from cortex.index.evidence import search as evidence_search
from cortex.index.text import terms as doc_terms
from cortex.index.text import tokenize
from cortex.index.vectors import (
    PRECISIONS,
    VECTOR_RECORD,
    VECTORS_META,
    VectorRecord,
    VectorsMeta,
    check_vector,
    from_bytes,
    stored_vector,
    to_bytes,
    vector_record,
)
from cortex.model.codec import (
    data_codec,
    decode_data,
    encode_data,
    encode_tags,
    from_micros,
    to_micros,
)
from cortex.model.enums import (
    DecayClass,
    EdgeType,
    MemoryType,
    Outcome,
    Sensitivity,
    Verb,
    Visibility,
)
from cortex.model.forms import count_tokens, render
from cortex.model.hashing import content_hash
from cortex.model.ids import MemoryId, Uri, WriteResult, new_id
from cortex.model.records import (
    Data,
    Episode,
    Forms,
    FrameRef,
    Head,
    Provenance,
    Tombstone,
    Version,
)
from cortex.query.context import DEFAULT_BUDGET, MAX_BUDGET, Bundle, assemble, objects_of
from cortex.query.language import (
    EpisodeMatch,
    Form,
    Fusion,
    In,
    Matches,
    Or,
    Plan,
    Predicate,
    Query,
    Result,
    Row,
    Window,
    compile_query,
    memory_type,
)
from cortex.query.planner import (
    Executor,
    Newest,
    TextSearch,
    VectorSearch,
    newest_first,
    newest_prefix,
    newest_prep,
    newest_read,
    read_state,
    result,
)
from cortex.query.search import SearchResult, known_entities
from cortex.query.search import search as _search
from cortex.rules import sensitivity as _sens
from cortex.rules.aliases import (
    AliasChange,
    AliasRecord,
    AliasSuggestion,
    normal_name,
    read_aliases,
    suggest,
)
from cortex.rules.chains import effective_time, norm_entity, norm_predicate
from cortex.rules.claims import same_claim
from cortex.rules.salience import (
    DEFAULT_WEIGHTS,
    SalienceState,
    Weights,
    decay_table,
)
from cortex.rules.scope import Reader, Scope
from cortex.storage.engines import vectors_root
from cortex.storage.keys import (
    EDGE_FROM,
    ID,
    JOURNAL,
    VEC,
    edge_from_key,
    edge_to_key,
    journal_key,
    meta_key,
    parse_edge_key,
    vec_key,
)
from cortex.storage.kv import KV, ReadTxn, WriteTxn
from cortex.storage.kv import seal as _seal

__all__ = ["DEDUPE_COSINE", "Cortex", "ReaderView"]

_FACETS = ("type", "tag", "subject", "counterparty")
_WRITE_OPTIONS: Final = frozenset(
    n for n in inspect.signature(Store.write).parameters if n not in ("self", "data")
)
DEDUPE_COSINE: Final = 0.92
"""Cosine at or above which ``write(..., dedupe=True)`` takes new data for an existing memory."""


_NEW_KINDS: Final = frozenset({JournalKind.WRITE, JournalKind.UPDATE, JournalKind.IMPORT})


_NAMELESS_KINDS: Final = frozenset(
    {
        JournalKind.EMBED,
        JournalKind.EPISODE,
        JournalKind.EXPORT,
        JournalKind.CONFIRM,
        JournalKind.ATTEST,
        JournalKind.BUDGET_DROP,
        JournalKind.ALIAS,
    }
)
"""Journal entries that change no memory's subject, counterparty or liveness (``search``'s
entity names carry over them)."""

_NAMED_KINDS: Final = frozenset(
    {
        JournalKind.WRITE,
        JournalKind.UPDATE,
        JournalKind.UPDATE_HEAD,
        JournalKind.TOMBSTONE,
        JournalKind.PURGE,
        JournalKind.ADD_EDGE,
        JournalKind.REMOVE_EDGE,
    }
)
"""Journal entries whose memories (``id``, and an edge's ``dst``) ``search``'s entity names
count again; any other kind (an import, a migration...) reads every memory again."""


class _Names:
    """``search``'s entity names (``known_entities``), kept with what each memory adds.

    ``subjects`` and ``counterparties`` count the live memories (as ``facets`` accepts them)
    naming each; ``by_memory`` is what each counted memory added, so that a memory a later
    journal entry names is taken out and counted again as it is then (an update, a tombstone,
    a change of visibility, a supersedes edge). Identities are read as ``known_entities``
    reads them (the newest 1,000); a change to one reads everything again, as does reaching
    ``expires``, the earliest expiry among the memories counted.
    """

    __slots__ = (
        "by_memory",
        "counterparties",
        "expires",
        "head",
        "identities",
        "names",
        "subjects",
    )

    def __init__(self, head: tuple[int, Any]) -> None:
        self.head = head
        self.subjects: dict[str, int] = {}
        self.counterparties: dict[str, int] = {}
        self.by_memory: dict[MemoryId, tuple[str | None, str | None]] = {}
        self.identities: dict[MemoryId, str] = {}
        self.expires: datetime | None = None
        self.names: list[str] = []

    def count(self, mid: MemoryId, row: Any) -> None:
        """Count in the memory ``row`` (accepted) of id ``mid``."""
        subject = getattr(row.data, "subject", None)
        party = getattr(row.data, "counterparty", None)
        subject = subject if isinstance(subject, str) else None
        party = party if isinstance(party, str) else None
        if subject is None and party is None:
            return
        self.by_memory[mid] = (subject, party)
        for name, counts in ((subject, self.subjects), (party, self.counterparties)):
            if name is not None:
                counts[name] = counts.get(name, 0) + 1
        at = row.version.expires_at
        if at is not None and (self.expires is None or at < self.expires):
            self.expires = at

    def expired(self, now: datetime) -> bool:
        """Whether a memory counted may have expired by ``now``."""
        return self.expires is not None and self.expires <= now

    def uncount(self, mid: MemoryId) -> None:
        """Take out what the memory ``mid`` added, if it added anything."""
        added = self.by_memory.pop(mid, None)
        if added is None:
            return
        for name, counts in ((added[0], self.subjects), (added[1], self.counterparties)):
            if name is not None:
                left = counts[name] - 1
                if left:
                    counts[name] = left
                else:
                    del counts[name]

    def listed(self) -> None:
        """Set ``names``: the names in ``known_entities``' order, empty ones left out.

        Subjects, then counterparties, most counted first (ties by name), then the
        identities' names.
        """

        def ordered(counts: dict[str, int]) -> list[str]:
            return [n for n, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]

        out = dict.fromkeys(ordered(self.subjects))
        out |= dict.fromkeys(ordered(self.counterparties))
        out |= dict.fromkeys(self.identities.values())
        self.names = [n for n in out if n]


def _accepted(ex: Executor) -> Iterator[tuple[MemoryId, Row]]:
    """Every memory of ``ex``'s plan's types (newest first, type by type) that it accepts."""
    for t in sorted(ex.plan.types):
        for mid in ex.preloaded(ex.ids_of_type(t)):
            row = ex.accept(mid)
            if row is not None:
                yield mid, row


_PLANS_KEPT: Final = 256
"""How many plans ``Cortex._plan_of`` keeps (all dropped when it is full)."""


def _plain_kinds(q: Query) -> bool:
    """Whether ``q``'s limit and offset are ints and its types and tags plain text.

    What a kept plan asks of a query equal to the one it was compiled from: equal values of
    other kinds (``True``, ``1.0``, a ``str`` subclass, a ``MemoryType``) are compiled again.
    """
    if type(q.limit) is not int or type(q.offset) is not int:
        return False
    for t in q.types:
        if type(t) is not str:
            return False
    for t in q.tags:  # noqa: SIM110 - a loop, not all() of a generator: every kept find asks
        if type(t) is not str:
            return False
    return True


def _written_since(txn: ReadTxn, since: int, t: MemoryType) -> list[MemoryId]:
    """The memories of type ``t`` written, updated or imported after journal entry ``since``."""
    out: list[MemoryId] = []
    for key, value in txn.scan(JOURNAL, start=journal_key(since + 1)):
        entry: JournalEntry = decode_trusted(JOURNAL_CODEC, key, value)
        if entry.kind in _NEW_KINDS and entry.type is t and entry.id is not None:
            out.append(entry.id)
    return out


_F = TypeVar("_F", bound=Callable[..., Any])


def _doc_of(original: object) -> Callable[[_F], _F]:
    """Give a delegating method the docstring of the engine's method (or property) it calls."""

    def give(fn: _F) -> _F:
        fn.__doc__ = original.__doc__
        return fn

    return give


_ONE = True
"""Whether a single memory's embedding takes ``_embed_prepared``'s short path (the same vector
as the general loop: tests switch it off to compare the two)."""


def _frame_of(rec: VectorRecord) -> tuple[bytes | None, bytes]:
    """The encoded ``vec/`` record of ``rec``'s shape before and after its vector bytes.

    Found by encoding the record with two vectors of the same length that differ in every
    byte: they must differ in exactly one window, holding the vector (else None: the caller
    encodes each record whole). The codec checks the record's fields once, here.
    """
    n = len(rec.vector)
    zeros = VECTOR_RECORD.encode(msgspec.structs.replace(rec, vector=bytes(n)), "vector")
    ones = VECTOR_RECORD.encode(msgspec.structs.replace(rec, vector=b"\x01" * n), "vector")
    at = next((i for i, (a, b) in enumerate(zip(zeros, ones, strict=False)) if a != b), 0)
    if (
        len(zeros) != len(ones)
        or zeros[at : at + n] != bytes(n)
        or ones[at : at + n] != b"\x01" * n
        or zeros[:at] != ones[:at]
        or zeros[at + n :] != ones[at + n :]
    ):
        return None, b""
    return zeros[:at], zeros[at + n :]


class Cortex:
    """One actor's memory store: a directory holding one LMDB environment.

    Open it with ``Cortex.open(path, actor=...)`` and use it as a context manager::

        with Cortex.open("agent.cortex", actor="agent-1") as cx:
            uri = cx.write(Fact(statement="...", subject="user", predicate="likes"))
            cx.resolve(uri)
            cx.find(Query(types=["Fact"], limit=10))

    Options of ``open`` beyond the store's: ``decay`` (decay class per memory type, overriding
    ``cortex.rules.salience.DEFAULT_DECAY``), ``weights`` (salience weights), ``salience_blend``
    (the weight of salience in hybrid ranking), ``fusion`` (how a text query merges its lexical and
    vector rankings: ``cortex.Fusion``, or ``"convex"`` (the default) / ``"rrf"``),
    ``embedder`` (vectors and vector search: every new version is embedded in its write
    transaction; the store records the model and refuses another unless ``reembed=True``,
    which re-embeds every live memory, reporting to ``progress(done, total)``),
    ``dedupe`` (the default of ``write(..., dedupe=)``), ``vector_ef`` (the vector index's
    search-time candidate list: larger finds more true neighbours and is slower; see
    ``specs/vector-index.md`` §4), and ``vector_precision`` (with ``embedder``: ``"float16"``, the
    default, or ``"float32"``: the element type the store keeps its vectors in, recorded when
    the store first records its model; another than the recorded one is refused unless
    ``reembed=True`` rewrites every vector in it). A vector, embedded or the caller's, is scaled
    to unit length and stored rounded to float16 unless the store keeps float32; reads and the
    vector index get the stored values widened to float32 (``specs/vector-index.md`` §3).

    A handle opened with an ``actor`` that is not the store's owner reads and writes as that
    actor: every read applies its visibility, ``scopes`` (``cortex.Scope``) and ``clearance``
    (the most sensitive level it sees and may set: ``internal`` by default;
    ``specs/sensitivity.md``), new memories are its own, and it changes another's memory only
    through a writable scope that selects it. ``as_owner=True`` opens it as the owner instead
    (it sees and may change everything; its changes are still journalled under its own name).
    Several handles of one store in one process share one LMDB environment.
    """

    def __init__(
        self,
        kv: KV,
        actor: str | None,
        *,
        clock: Callable[[], datetime] | None = None,
        decay: Mapping[MemoryType | str, DecayClass | str] | None = None,
        weights: Weights | None = None,
        salience_blend: float = 0.2,
        fusion: Fusion | str = "convex",
        embedder: Embedder | Literal["auto"] | None = None,
        reembed: bool = False,
        progress: Callable[[int, int], None] | None = None,
        dedupe: bool = False,
        vector_ef: int = DEFAULT_EF,
        vector_precision: Literal["float16", "float32"] | None = None,
        as_owner: bool = False,
        scopes: Sequence[Scope] = (),
        clearance: Sensitivity | str | None = None,
    ) -> None:
        overrides: dict[MemoryType, DecayClass] = {}
        for t, d in (argcheck.mapping(decay, "decay") if decay is not None else {}).items():
            cls = DecayClass.coerce(d)
            if cls is None:
                raise ValidationError("decay", "enum", f"must be one of {DecayClass.labels()}")
            overrides[memory_type(t, "decay")] = cls
        if weights is not None and not isinstance(weights, Weights):
            raise ValidationError("weights", "type", "must be a cortex.rules.salience.Weights")
        if not isinstance(salience_blend, int | float) or not 0 <= salience_blend <= 1:
            raise ValidationError("salience_blend", "range", "must be in [0, 1]")
        fusion = Fusion.coerce(fusion)
        argcheck.flag(reembed, "reembed")
        argcheck.flag(dedupe, "dedupe")
        argcheck.callback(progress, "progress")
        if type(vector_ef) is not int or vector_ef < 1:
            raise ValidationError("vector_ef", "range", f"must be an int >= 1, got {vector_ef!r}")
        if vector_precision is not None and vector_precision not in PRECISIONS:
            raise ValidationError(
                "vector_precision",
                "enum",
                f"must be one of {', '.join(PRECISIONS)} (the element type of stored vectors), "
                f"got {vector_precision!r}",
            )
        if embedder is not None and embedder != "auto" and not isinstance(embedder, Embedder):
            raise ValidationError(
                "embedder", "type", "must have model_id, dim and embed(texts) (cortex.index.embed)"
            )
        self._engine: Store = Store(kv, actor, clock=clock, hooks=self._hooks())
        """The engine this handle composes; it calls back into this handle through ``Hooks``."""
        self._kv: KV = kv  # the engine's KV (bound once: reads open transactions on it)
        self._now: Callable[[], datetime] = self._engine.now  # the engine's clock, checked
        self._lexical_search = self._engine.lexical_search  # BM25 over live memories
        # -- who this handle reads and writes as (issue 15) --
        self._as: Reader | None = None
        """The reader every call of a restricted handle reads as; ``None``: the owner."""
        self._own: Reader | None = None
        """The owner's ``Reader``, kept for the calls that read as the owner (``_reader``)."""
        self._plans: dict[tuple[Query, int | None], tuple[Plan, bytes]] = {}
        """Plans of plain finds newest first by query and token cap (``_plan_of``)."""
        self._newest: dict[Query, tuple[Plan, Newest]] = {}
        """The plain finds newest first of the owner's own reader, by query (``find``): those
        ``_plan_of`` keeps with no token cap, with what ``newest_read`` reads them with, read
        without ``find``'s checks (at most ``_PLANS_KEPT``)."""
        self._read_newest: Callable[..., Any] | None = getattr(kv, "read_newest", None)
        """The engine's one-shot snapshot of an index newest first (``LmdbKV.read_newest``)."""
        if actor is not None and actor != self.owner and not as_owner:
            self._as = Reader(
                actor=actor,
                scopes=tuple(scopes),
                clearance=_sens.coerce_level(
                    Sensitivity.INTERNAL if clearance is None else clearance, "clearance"
                ),
            )
        elif scopes or clearance is not None:
            raise ValidationError(
                "scopes" if scopes else "clearance",
                "owner",
                "scopes and a clearance restrict a handle opened by another actor than the "
                f"owner ({self.owner}) without as_owner=True; the owner's handle sees everything",
            )
        # -- end --
        if embedder == "auto":  # the embedder of the model the store holds, if it ships here
            with self._kv.read() as txn:
                raw = txn.get(meta_key("vectors"))
            if raw is None:
                embedder = None
            else:
                embedder = _embedder_of(decode_trusted(VECTORS_META, meta_key("vectors"), raw))
        self.decay = decay_table(overrides)
        self.weights = weights or DEFAULT_WEIGHTS
        self.salience_blend = float(salience_blend)
        self.fusion = fusion
        self.dedupe = bool(dedupe)
        self.embedder = embedder
        self.reembedded: int | None = None
        """How many memories opening with ``reembed=True`` re-embedded (None: it did not)."""
        self._sidecar: VectorSidecar | None = None
        # search's names, at (journal head, server epoch)
        self._entities: _Names | None = None
        self._float16 = True
        """Whether this handle stores new vectors in float16 (the store's ``meta/vectors``)."""
        self._vector_frame: tuple[tuple[Any, ...], bytes | None, bytes] | None = None
        """``_seal_vector``'s record bytes before and after the vector, for the last shape."""
        if embedder is None and vector_precision is not None:
            raise ValidationError(
                "vector_precision",
                "required",
                "is the precision of the store's vectors: pass it with embedder=… (the store "
                "records it with its model)",
            )
        if embedder is not None:
            self._adopt(embedder, reembed=reembed, progress=progress, precision=vector_precision)
            self._sidecar = VectorSidecar(
                vectors_root(self._kv),
                embedder,
                self._kv.read,
                ef=vector_ef,
                epoch=getattr(self._kv, "epoch", None),
            )

    # -- the engine it composes ---------------------------------------------------------------
    # ``Cortex`` holds a ``Store`` (``self._engine``) and uses it through the engine interface
    # (``Store.head``, ``write_new``, ...: the section at the end of ``Store``) and ``Hooks``
    # (``cortex.engine.hooks``: its vectors, its reader's checks inside the engine's write
    # transactions, the vector cache's part of the erasure step). The store's public methods are
    # delegated one by one below; those a reader restricts are defined further on.

    def _hooks(self) -> Hooks:
        """What this handle decides for its engine (bound methods of this handle)."""
        return Hooks(
            embed_prepared=self._embed_prepared,
            chunk_vectors=self._chunk_vectors,
            given_vector=self._given_vector,
            vector_value=self._vector_value,
            writer_sees=self._writer_sees,
            guard_change=self._guard_change,
            guard_see=self._guard_see,
            after_scrub=self._after_scrub,
        )

    @property
    def engine(self) -> Store:
        """The engine (``cortex.engine.store.Store``) this handle composes.

        For tools and transfer: its reads and writes apply no reader's visibility or scopes.
        """
        return self._engine

    @property
    def reads_as(self) -> Reader | None:
        """The reader every read of this handle applies (``None``: the owner's, everything)."""
        return self._as

    @property
    def actor(self) -> str:
        """Who this handle writes as (its changes are journalled under this name)."""
        return self._engine.actor

    @property
    def format(self) -> FormatRecord:
        """The store's format record (``meta/format``) as the handle opened it."""
        return self._engine.format

    @classmethod
    @_doc_of(Store.open)
    def open(  # noqa: D102 - the engine method's docstring (_doc_of)
        cls,
        path: str | os.PathLike[str],
        *,
        actor: str | None,
        create: bool = True,
        readonly: bool = False,
        metasync: bool = True,
        map_size: int = 64 << 20,
        clock: Callable[[], datetime] | None = None,
        check_pages: bool = True,
        **options: Any,
    ) -> Self:
        return open_store(
            cls,
            path,
            actor=actor,
            create=create,
            readonly=readonly,
            metasync=metasync,
            map_size=map_size,
            clock=clock,
            check_pages=check_pages,
            options=options,
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    @_doc_of(Store.path)
    def path(self) -> str:  # noqa: D102 - the engine method's docstring (_doc_of)
        return self._engine.path

    @property
    @_doc_of(Store.owner)
    def owner(self) -> str:  # noqa: D102 - the engine method's docstring (_doc_of)
        return self._engine.format.owner

    @contextlib.contextmanager
    @_doc_of(Store.task)
    def task(self, task_id: str, *, limit: int = DEFAULT_WRITE_BUDGET) -> Iterator[None]:  # noqa: D102 - the engine method's docstring (_doc_of)
        with self._engine.task(task_id, limit=limit):
            yield

    @_doc_of(Store.task_usage)
    def task_usage(self, task_id: str) -> int:  # noqa: D102 - the engine method's docstring (_doc_of)
        return self._engine.task_usage(task_id)

    @_doc_of(Store.scrub)
    def scrub(self, *, wait: float = 30.0) -> ScrubReport:  # noqa: D102 - the engine method's docstring (_doc_of)
        return self._engine.scrub(wait=wait)

    @_doc_of(Store.verify_erasure)
    def verify_erasure(self) -> ErasureReport:  # noqa: D102 - the engine method's docstring (_doc_of)
        return self._engine.verify_erasure()

    @_doc_of(Store.import_records)
    def import_records(  # noqa: D102 - the engine method's docstring (_doc_of)
        self,
        memories: Iterable[tuple[Head, Sequence[Version]]],
        edges: Iterable[Edge] = (),
        episodes: Iterable[Episode] = (),
        *,
        sensitivity: Mapping[MemoryId, Sensitivity] | None = None,
        episode_sensitivity: Mapping[MemoryId, Sensitivity] | None = None,
        aliases: Mapping[str, AliasRecord] | None = None,
    ) -> ImportReport:
        return self._engine.import_records(
            memories,
            edges,
            episodes,
            sensitivity=sensitivity,
            episode_sensitivity=episode_sensitivity,
            aliases=aliases,
        )

    @_doc_of(Store.backup)
    def backup(self, dest: str | os.PathLike[str]) -> VerifyReport:  # noqa: D102 - the engine method's docstring (_doc_of)
        return self._engine.backup(dest)

    @_doc_of(Store.merge_lexical)
    def merge_lexical(self) -> int:  # noqa: D102 - the engine method's docstring (_doc_of)
        return self._engine.merge_lexical()

    @_doc_of(Store.reindex_lexical)
    def reindex_lexical(self, progress: Callable[[int, int], None] | None = None) -> int:  # noqa: D102 - the engine method's docstring (_doc_of)
        return self._engine.reindex_lexical(progress)

    @_doc_of(Store.stats)
    def stats(self) -> dict[str, Any]:  # noqa: D102 - the engine method's docstring (_doc_of)
        return self._engine.stats()

    @_doc_of(Store.verify)
    def verify(self, progress: Callable[[int, int], None] | None = None) -> VerifyReport:  # noqa: D102 - the engine method's docstring (_doc_of)
        return self._engine.verify(progress)

    # -- vectors -----------------------------------------------------------------------------

    def _adopt(
        self,
        e: Embedder,
        *,
        reembed: bool,
        progress: Callable[[int, int], None] | None,
        precision: str | None,
    ) -> None:
        """Record ``e`` as the store's model (or check it is), then embed what lacks a vector.

        ``precision`` (``vector_precision``): the element type of new vectors; ``None`` keeps
        the store's (float16 for a store that records its model now).
        """
        with self._kv.read() as txn:
            raw = txn.get(meta_key("vectors"))
            meta = None if raw is None else decode_trusted(VECTORS_META, meta_key("vectors"), raw)
        kept = None if meta is None else ("float32" if meta.float32 else "float16")
        if precision is not None and kept is not None and precision != kept and not reembed:
            raise ValidationError(
                "vector_precision",
                "mismatch",
                f"this store keeps its vectors in {kept} (chosen when it recorded its model): "
                f"open it without vector_precision, or rewrite every vector in {precision} with "
                "reembed=True",
            )
        self._float16 = (precision or kept or "float16") == "float16"
        if reembed and not self._kv.readonly:
            self.reembedded = self._embed_pending(e, since=0, everything=True, progress=progress)
        elif meta is not None and (meta.model_id, meta.dim) != (e.model_id, e.dim):
            raise ValidationError(
                "embedder",
                "model",
                f"this store holds {meta.model_id} vectors (dim {meta.dim}), not "
                f"{e.model_id} (dim {e.dim}): open it with that embedder, or re-embed "
                "everything with Cortex.open(..., embedder=..., reembed=True) "
                "(cortex reindex --vectors --model NAME)",
            )
        elif not self._kv.readonly:
            self._embed_pending(e, since=0 if meta is None else meta.synced, progress=progress)

    def _embed_pending(
        self,
        e: Embedder,
        *,
        since: int,
        everything: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Embed live memories that lack a vector of their current version; returns how many.

        Looks at the memories changed after journal entry ``since`` (all live memories with
        ``everything``).

        Embedding runs outside any transaction; one write transaction then stores the vectors
        (one ``embed`` journal entry each) and ``meta/vectors``, skipping memories that changed
        meanwhile (the next sweep takes them).
        """
        todo: list[tuple[MemoryId, int, str]] = []
        with self._kv.read() as txn:
            last = journal_head(txn)
            raw_meta = txn.get(meta_key("vectors"))
            synced_before = (
                None
                if raw_meta is None
                else decode_trusted(VECTORS_META, meta_key("vectors"), raw_meta).synced
            )
            ids: dict[MemoryId, None] = {}
            if everything or since == 0:
                for key in txn.keys(ID):  # in id order (format 21: id/ id16 -> row)
                    ids[MemoryId(key[len(ID) :])] = None
            else:
                for key, value in txn.scan(JOURNAL, start=journal_key(since + 1)):
                    entry: JournalEntry = decode_trusted(JOURNAL_CODEC, key, value)
                    if (
                        entry.id is not None
                        and entry.edge is None
                        and entry.kind
                        in (
                            JournalKind.WRITE,
                            JournalKind.UPDATE,
                            JournalKind.IMPORT,
                        )
                    ):
                        ids[entry.id] = None
            for mid in ids:
                head = self._engine.head(txn, mid)
                if head.tombstone is not None:
                    continue
                if not everything:
                    rec = _vector_or_none(txn, mid)
                    if rec is not None and (rec.version, rec.model_id, rec.dim) == (
                        head.current_version,
                        e.model_id,
                        e.dim,
                    ):
                        continue
                forms = head.forms
                todo.append((mid, head.current_version, forms.medium if forms else ""))
        if isinstance(e, External):  # its vectors come with the writes; none to compute here
            if everything:
                raise ValidationError(
                    "reembed",
                    "external",
                    f"{e.model_id} vectors are computed outside cortex: cortex cannot re-embed "
                    "them; write new versions with vector=…",
                )
            todo = []
        if not todo and not everything and synced_before == last:
            return 0  # nothing to embed and the cursor is current: no write at all
        vectors: list[bytes] = []
        for i in range(0, len(todo), 64):
            chunk = todo[i : i + 64]
            for row in embed_checked(e, [t for _, _, t in chunk]):
                vectors.append(to_bytes(row))
            if progress is not None:
                progress(min(i + 64, len(todo)), len(todo))
        now = self._now()

        def txn_fn(txn: WriteTxn) -> int:
            journal = JournalWriter(txn, now, self.actor)
            done = 0
            for (mid, n, _), vec in zip(todo, vectors, strict=True):
                head = self._engine.head(txn, mid)
                if head.tombstone is not None or head.current_version != n:
                    continue
                txn.put(vec_key(head_row(txn, head)), self._seal_vector(e, n, vec))
                journal.append(JournalKind.EMBED, id=mid, type=head.type, version=n)
                done += 1
            if everything:  # every vector not just written (other models, damaged) goes
                written = {
                    vec_key(r) for r in (row_of(txn, mid) for mid, _, _ in todo) if r is not None
                }
                for key in list(txn.keys(VEC)):
                    if key not in written:
                        txn.delete(key)
            float32 = not self._float16
            old = None if everything else txn.get(meta_key("vectors"))
            if old is not None:  # the precision stays the store's (a re-embed chooses anew)
                float32 = decode_trusted(VECTORS_META, meta_key("vectors"), old).float32
            meta = VectorsMeta(model_id=e.model_id, dim=e.dim, synced=last, float32=float32)
            txn.put(meta_key("vectors"), _seal(VECTORS_META.encode(meta, "meta/vectors")))
            return done

        return self._kv.write(txn_fn)

    def _seal_vector(self, e: Embedder, version: int, vector: bytes) -> bytes:
        """The sealed ``vec/`` value of ``vector`` (unit float32 bytes) in the store's precision.

        The record's bytes around its vector are the same for every vector of one model, dim,
        version, precision and length: they are kept from the last call (``_vector_frame``)
        and the vector put between them, the same bytes as the codec's (a test compares them).
        """
        rec = vector_record(e.model_id, e.dim, version, vector, float16=self._float16)
        frame = self._vector_frame
        at = (rec.model_id, rec.dim, version, rec.float16, len(rec.vector))
        if frame is None or frame[0] != at:
            frame = self._vector_frame = (at, *_frame_of(rec))
        if frame[1] is None:
            return _seal(VECTOR_RECORD.encode(rec, "vector"))
        return _seal(b"".join((frame[1], rec.vector, frame[2])))

    def _embed_prepared(
        self, prepared: Sequence[Prepared], chunks: Sequence[str] | None = None
    ) -> list[bytes] | None:
        e = self.embedder
        if e is None:
            return None
        if _ONE and chunks is None and len(prepared) == 1 and type(e) is not External:
            # a single write's (the loop below, without its lists)
            p = prepared[0]
            if p.vector is None:
                forms = p.version.forms
                p.vector = to_bytes(embed_checked(e, [forms.medium if forms else ""])[0])
            return None
        todo = [p for p in prepared if p.vector is None]  # the rest came with their vector
        if not todo and (chunks is None or isinstance(e, External)):
            return None
        if isinstance(e, External):
            i = next(i for i, p in enumerate(prepared) if p.vector is None)
            raise ValidationError(
                "vector" if len(prepared) == 1 else f"items[{i}].vector",
                "required",
                f"this store's vectors ({e.model_id}, dim {e.dim}) are computed outside cortex: "
                "pass vector=… with every write and update",
            )
        # one list, embedded in calls of 64: the embedder batches them (fewer, fuller batches)
        texts = [p.version.forms.medium if p.version.forms else "" for p in todo]
        texts += chunks or ()
        vectors: list[bytes] = []
        for i in range(0, len(texts), 64):
            raw = to_bytes(embed_checked(e, texts[i : i + 64]))  # the rows' bytes, one after
            step = len(raw) // min(64, len(texts) - i)  # another: sliced, not one call a row
            vectors += [raw[j : j + step] for j in range(0, len(raw), step)]
        for p, vec in zip(todo, vectors, strict=False):
            p.vector = vec
        return None if chunks is None else vectors[len(todo) :]

    def _given_vector(self, vector: Any) -> bytes:
        e = self.embedder
        if e is None:
            return plain_given_vector(vector)
        return to_bytes(check_vector(vector, e.dim, e.model_id, "vector"))

    def _vector_value(self, version: int, vector: bytes) -> bytes:
        assert self.embedder is not None
        return self._seal_vector(self.embedder, version, vector)

    def embed_pending(self) -> int:
        """Embed live memories written by handles without the embedder; returns how many.

        Opening the store with an embedder does this too.

        Raises:
            ValidationError: the store was opened without an embedder.
        """
        if self.embedder is None:
            raise ValidationError("embedder", "required", "open the store with embedder=…")
        with self._kv.read() as txn:
            raw = txn.get(meta_key("vectors"))
            meta = None if raw is None else decode_trusted(VECTORS_META, meta_key("vectors"), raw)
        return self._embed_pending(self.embedder, since=0 if meta is None else meta.synced)

    def reindex_vectors(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Re-embed every live memory with the store's embedder; returns how many.

        One ``embed`` journal entry per memory; the vector index cache is rebuilt on the next
        search.

        Raises:
            ValidationError: the store was opened without an embedder.
        """
        argcheck.callback(progress, "progress")
        if self.embedder is None or self._sidecar is None:
            raise ValidationError("embedder", "required", "open the store with embedder=…")
        n = self._embed_pending(self.embedder, since=0, everything=True, progress=progress)
        self._sidecar.drop()
        if self._sidecar.directory is not None:
            shutil.rmtree(self._sidecar.directory, ignore_errors=True)
        return n

    def vector_info(self) -> dict[str, Any] | None:
        """The store's vectors: model, dim, precision, count, sync cursor and index state.

        ``precision`` is the element type new vectors are stored in (``float16`` or ``float32``).

        ``None`` when the store holds no vectors (never opened with an embedder).
        """
        with self._kv.read() as txn:
            raw = txn.get(meta_key("vectors"))
            if raw is None:
                return None
            meta: VectorsMeta = decode_trusted(VECTORS_META, meta_key("vectors"), raw)
            count = sum(1 for _ in txn.keys(VEC))
        return {
            "model_id": meta.model_id,
            "dim": meta.dim,
            "precision": "float32" if meta.float32 else "float16",
            "vectors": count,
            "synced": meta.synced,
            "index": self.vector_state(),
        }

    def vector_state(self) -> str:
        """What the vector sidecar is doing: no embedder, not loaded, loaded, or rebuilt (why)."""
        if self._sidecar is None:
            return "no embedder"
        return self._sidecar.state

    def _after_scrub(self, report: ScrubReport, now: datetime) -> ScrubReport:
        """After the erasure step (``Store.scrub``): the vector index cache beside the store.

        Saved index files keep no vector of a memory that has no stored vector any more: they
        are rewritten without it (``cortex.index.ann.erase_saved``), whether or not this handle has
        an embedder.
        """
        root = vectors_root(self._kv)
        directory = None if root is None else root / SIDECAR_DIRECTORY
        if directory is None or not directory.is_dir():
            return report
        started = time.perf_counter()
        with self._kv.read() as txn:
            live = {m for k in txn.keys(VEC) if (m := id_at(txn, k[len(VEC) :])) is not None}
        files = erase_saved(directory, live.__contains__)
        return msgspec.structs.replace(
            report, sidecar_files=files, seconds=report.seconds + time.perf_counter() - started
        )

    def save_vectors(self) -> None:
        """Save the vector index cache now (``close`` does it too)."""
        if self._sidecar is not None:
            self._sidecar.save()

    def close(self) -> None:
        """Save the vector index cache (if it changed) and close the store."""
        if getattr(self, "_sidecar", None) is not None and not self._kv.readonly:
            assert self._sidecar is not None
            self._sidecar.save()
        self._engine.close()

    # -- seams for the search indexes --------------------------------------------------------

    def _text_search(self, found: dict[bytes, Any] | None = None) -> TextSearch | None:
        """The lexical index's search (BM25 over each live memory's full form).

        ``found``: where the hits' heads and current versions, read in one C call, are kept
        by raw id for the executor that reads them next (``Executor.accept``).
        """
        rows_reader = self._engine.rows_reader

        def search(txn: ReadTxn, text: str, n: int) -> list[tuple[MemoryId, float]]:
            return lexical.search(txn, text, limit=n, rows=rows_reader(txn), found=found)

        return search

    def _vector_search(self, plan: Plan | None = None) -> VectorSearch | None:
        """The vector index's search, when the store has an embedder.

        A store of ``External`` vectors cannot embed a query's text: its text-only queries rank
        lexically (``near=`` still reaches the search, which says to give ``near_vector``).
        """
        if self._sidecar is None:
            return None
        if (
            plan is not None
            and isinstance(self.embedder, External)
            and plan.near is None
            and plan.near_vector is None
        ):
            return None
        return self._sidecar.search

    # -- dedupe on write ------------------------------------------------------------------

    def write(self, data: Data, *, dedupe: bool | None = None, **options: Any) -> WriteResult:
        """Write a new memory (``Store.write``), or with ``dedupe`` confirm an existing one.

        With ``dedupe`` (default: the store's ``dedupe`` option) and no caller-chosen ``id``, a
        live, unexpired memory of the same type whose current version has the same content
        hash, or (with an embedder) whose vector has cosine >= ``DEDUPE_COSINE`` to this data's
        and states the same claim (``cortex.rules.claims.same_claim``), is confirmed instead: its
        use counters record the confirmation, a ``confirm`` journal entry names it and the hash of
        the data offered, and the result is its current URI with outcome ``confirmed`` and the
        reason. Nothing new is written. The exact match is checked again inside the write
        transaction, so two processes writing the same data at once make one memory. The
        options are validated either way.

        Returns:
            A ``WriteResult`` (a ``Uri``) whose ``outcome`` says what happened: ``created``,
            ``confirmed``, or a temporal chain's ``superseded``, ``archived``, ``conflict``.

        Raises:
            ValidationError, ConflictError: as ``Store.write``.
        """
        if not _WRITE_OPTIONS.issuperset(options):
            unknown = sorted(set(options) - _WRITE_OPTIONS)
            raise ValidationError(
                unknown[0],
                "unknown",
                f"is not an option of write; the options are {', '.join(sorted(_WRITE_OPTIONS))}",
            )
        if dedupe is not None:
            argcheck.flag(dedupe, "dedupe")
        return self._write(data, dedupe, None, options)

    def _write(
        self, data: Data, dedupe: bool | None, reader: Reader | None, options: dict[str, Any]
    ) -> WriteResult:
        now = self._now()
        spec = NewMemory(data=data, **options)
        writer = reader if reader is not None else self._as
        self._check_level(writer, spec.sensitivity)
        visible = self._visible_to(writer, now)

        if not ((dedupe if dedupe is not None else self.dedupe) and spec.id is None):
            return self._engine.write_new(spec, now, visible)
        p = self._engine.prepare(spec, now)  # validates
        if not isinstance(self.embedder, External):
            self._embed_prepared([p])  # once, for the dedupe check and the write
        vec: npt.NDArray[np.float32] | None = None
        since = 0
        if self._cosine_dedupe(p.vector):
            # the cosine path searches outside the write lock, so it runs in a read
            # transaction first; the exact match alone is checked only in the write's (below)
            hit, vec, since = self._duplicate_of(data, reader, p.vector)
            if hit is not None:
                return self._confirm(hit[0], data, hit[1])
        terms = lexical.analyze(data)
        digest = content_hash(data.TYPE, encode_data(data))

        def usable(txn: ReadTxn, mid: MemoryId) -> tuple[Head, Version] | None:
            head = self._engine.head(txn, mid)
            if head.tombstone is not None or head.type is not data.TYPE:
                return None
            if visible is not None and not visible(txn, head):
                return None
            v = self._engine.version(txn, mid, head.current_version)
            if v.expires_at is not None and to_micros(v.expires_at) <= to_micros(now):
                return None
            return head, v

        def duplicate(txn: WriteTxn) -> WriteResult | None:
            # the same checks, in the write transaction: a writer that got there first
            for mid in lexical.same_terms(txn, terms):
                found = usable(txn, mid)
                if found is not None and found[1].hash == digest:
                    return self._confirm_in(txn, found[0], digest, now, _SAME_CONTENT)
            if vec is None:
                return None
            # the cosine path saw the store as of journal entry ``since``: the memories written
            # after it are compared here, so two writers of one claim make one memory
            for mid in _written_since(txn, since, data.TYPE):
                found = usable(txn, mid)
                if found is None:
                    continue
                other = self._engine.memory(*found).data
                if other is None:
                    continue
                rec = _vector_or_none(txn, mid)
                if rec is None:
                    continue
                if rec.dim != len(vec) or len(rec.vector) != rec.dim * (2 if rec.float16 else 4):
                    continue  # another model's vector (or a damaged one: verify names it)
                stored = stored_vector(rec)  # scaled to unit length, as the index holds it
                cos = float(np.dot(stored, vec) / (np.linalg.norm(stored) or 1.0))
                if cos >= DEDUPE_COSINE and same_claim(other, data).same:
                    reason = f"cosine {cos:.3f} and the same claim (written meanwhile)"
                    return self._confirm_in(txn, found[0], digest, now, reason)
            return None

        return self._engine.write_new(spec, now, visible, duplicate, p)

    def _cosine_dedupe(self, given: bytes | None) -> bool:
        """Whether dedupe's cosine path can run (``_duplicate_of`` compares vectors)."""
        if self._sidecar is None or self.embedder is None:
            return False
        return given is not None or not isinstance(self.embedder, External)

    def _duplicate_of(
        self, data: Data, reader: Reader | None, given: bytes | None = None
    ) -> tuple[tuple[Memory, str] | None, npt.NDArray[np.float32] | None, int]:
        """A live memory ``data`` duplicates (same type: equal hash, or a near vector), and why.

        Also the vector the cosine path compared (None when it did not run) and the journal
        entry the check saw the store at (the write's transaction checks what came after it).
        """
        t = data.TYPE
        digest = content_hash(t, encode_data(data))
        now = self._now()
        rd = self._reader(reader)

        def usable(txn: ReadTxn, mid: MemoryId) -> Memory | None:
            head = self._engine.head(txn, mid)
            if head.tombstone is not None or head.type is not t:
                return None
            if not self._sees(txn, rd, head, now):
                return None  # a duplicate the reader cannot see must not be revealed
            v = self._engine.version(txn, mid, head.current_version)
            if v.expires_at is not None and to_micros(v.expires_at) <= to_micros(now):
                return None
            return self._engine.memory(head, v)

        with self._kv.read() as txn:
            since = journal_head(txn)
            for mid in lexical.same_terms(txn, lexical.analyze(data)):
                m = usable(txn, mid)
                if m is not None and m.version.hash == digest:
                    return (m, _SAME_CONTENT), None, since
            if self._sidecar is None or self.embedder is None:
                return None, None, since
            if given is not None:
                vec = from_bytes(given, self.embedder.dim)
            elif isinstance(self.embedder, External):
                return None, None, since  # no vector to compare (the write will ask for one)
            else:
                vec = embed_checked(self.embedder, [render(data).medium])[0]
            n = 16
            while True:
                near = self._sidecar.search(txn, vec, n)
                for mid, cos in near:
                    if cos < DEDUPE_COSINE:
                        return None, vec, since
                    m = usable(txn, mid)
                    # near in meaning is not enough: the claims must be the same
                    if m is not None and m.data is not None and same_claim(m.data, data).same:
                        return (m, f"cosine {cos:.3f} and the same claim"), vec, since
                if len(near) < n:
                    return None, vec, since
                n *= 4  # every hit so far was close but unusable: look further

    def _confirm(self, m: Memory, data: Data, reason: str) -> WriteResult:
        digest = content_hash(m.version.type, encode_data(data))
        now = self._now()
        return self._kv.write(
            lambda txn: self._confirm_in(txn, self._engine.head(txn, m.id), digest, now, reason)
        )

    def _confirm_in(
        self, txn: WriteTxn, head: Head, digest: bytes, now: datetime, reason: str
    ) -> WriteResult:
        """Record a confirmation of ``head``'s memory by data of hash ``digest``."""
        st = read_state(txn, head)
        st = msgspec.structs.replace(st, confirmations=st.confirmations + 1, last_used_at=now)
        put_counters(txn, head, st)
        JournalWriter(txn, now, self.actor).append(
            JournalKind.CONFIRM,
            id=head.id,
            type=head.type,
            version=head.current_version,
            hash=digest,
        )
        uri = Uri._trusted(head.type, head.id, head.current_version)
        return WriteResult.of(uri, "confirmed", reason=reason)

    # -- find ------------------------------------------------------------------------------

    def _reader(self, reader: Reader | None) -> Reader:
        if reader is None:  # the handle's own reader: the owner, or its restricted actor
            if self._as is not None:
                return self._as
            own = self._own
            owner = self._engine.format.owner
            if own is None or own.actor != owner:  # built once (a Reader checks its fields)
                own = self._own = Reader(actor=owner)
            return own
        if not isinstance(reader, Reader):
            raise ValidationError("reader", "type", "must be a cortex.Reader")
        return reader

    def _executor(
        self,
        txn: ReadTxn,
        plan: Plan,
        reader: Reader,
        now: datetime,
        found: dict[bytes, Any] | None = None,
    ) -> Executor:
        if found is None:
            found = {}  # the text search's reads, for ``accept``
        return Executor(
            self._engine,
            txn,
            plan,
            now,
            reader=reader,
            decay=self.decay,
            weights=self.weights,
            text_search=self._text_search(found),
            vector_search=self._vector_search(plan),
            salience_blend=self.salience_blend,
            fusion=self.fusion,
            types_of=None if self._sidecar is None else self._sidecar.types_of,
            type_share=None if self._sidecar is None else self._sidecar.type_share,
            type_seen=None if self._sidecar is None else self._sidecar.note_type,
            found=found,
        )

    def _plan_of(self, query: Query, now: datetime, cap: int | None) -> tuple[Plan, bytes | None]:
        """``compile_query`` of ``query`` and its ``newest_prefix``; plain finds kept.

        A plan ``newest_prefix`` serves does not depend on ``now`` (it has no window), so it is
        kept by ``(query, cap)`` and a query equal to one seen before takes it without being
        compiled again, when its fields are of the kinds that compiled (an int limit and
        offset, types and tags given as plain text: ``1 == True == 1.0`` and a ``str``
        subclass equals its text, but ``compile_query`` does not accept them alike).
        """
        plans = self._plans
        key: tuple[Query, int | None] | None = (query, cap)
        try:
            got = plans.get(key)  # type: ignore[arg-type]
        except TypeError:  # a field that cannot be hashed (a list, an array): not kept
            got = key = None
        if got is not None and _plain_kinds(query):
            return got
        plan = compile_query(query, now, token_cap=cap)
        prefix = newest_prefix(plan)
        if prefix is not None and key is not None and _plain_kinds(query):
            if len(plans) >= _PLANS_KEPT:
                plans.clear()
            plans[key] = (plan, prefix)
        return plan, prefix

    def find(self, query: Query) -> Result:
        """Find memories: start from an index, filter, order, limit, fit a token budget.

        Args:
            query: what to find (see ``Query``); it needs an index to start from (types, tags,
                frames, text, near or from_) and a limit or a token budget.

        Returns:
            The hits in order (ties by id ascending), their token total, and the URIs the
            budget dropped.

        Raises:
            ValidationError: the query is malformed or unplannable; the message says what to
                add or change. Nothing is read or written.
            NotFoundError: a walk starts from a memory that does not exist (or is hidden).
        """
        if type(query) is Query:
            try:
                entry = self._newest.get(query)
            except TypeError:  # a field that cannot be hashed: the general path
                entry = None
            # a find kept below, as the owner's own reader: none of the checks below has more
            # to say (its evidence, episode and reader were 0 and None, of the same kinds)
            me = self._own
            if (
                entry is not None
                and self._as is None
                and me is not None
                and me.actor == self._engine.format.owner
                and type(query.evidence) is int
                and _plain_kinds(query)
            ):
                kplan, kprep = entry
                call = self._read_newest
                if call is not None and kprep[8] is self.decay and kprep[12] is self.weights:
                    # the default clock read as microseconds: a datetime only where it is needed
                    us = self._engine.now_us()
                    at = None
                    if us is None:
                        at = self._now()
                        us = to_micros(at)
                    return call(kprep[6], self._newest_or_run, (kplan, kprep, at, us, me))  # type: ignore[no-any-return]
        now = self._now()
        if not isinstance(query, Query):
            raise ValidationError(
                "query", "type", f"find takes a Query, got {type(query).__name__}"
            )
        reader = self._reader(query.reader)
        wanted = query.evidence
        if type(wanted) is not int or not 0 <= wanted <= 100:
            raise ValidationError("evidence", "range", "must be an int in 0..100")
        if wanted and query.text is None:
            raise ValidationError("evidence", "text", "episode evidence needs text=")
        if query.episode is not None:
            narrowed = self._episode_query(query)
            if narrowed is None:
                return Result(hits=(), tokens=0, plan="episode: no matching episode")
            query = narrowed
        # the owner's own Reader (``_reader``): no scopes, no token cap, every level
        own = reader is self._own and reader.actor == self._engine.format.owner
        plan, prefix = self._plan_of(query, now, None if own else reader.token_cap(now))
        if prefix is not None and not own:
            owner = self._engine.owner
            if not (
                type(reader) is Reader
                and reader.actor == owner
                and _sens.gate(reader, owner) is None
            ):
                prefix = None  # newest_first reads as the owner (``Executor._sees_all``)
        if (
            prefix is not None
            and own
            and not wanted
            and not plan.record_access
            and query.reader is None
            and self._read_newest is not None
            and type(query) is Query
            and _plain_kinds(query)
        ):
            prep = newest_prep(plan, prefix, self.decay, self.weights)
            if prep is not None:
                try:
                    newest = self._newest
                    if len(newest) >= _PLANS_KEPT:
                        newest.clear()
                    newest[query] = (plan, prep)
                except TypeError:  # a field that cannot be hashed: not kept
                    pass
        with self._kv.read() as txn:
            fast = (
                newest_first(
                    self._engine,
                    txn,
                    plan,
                    prefix=prefix,
                    now_us=to_micros(now),
                    decay=self.decay,
                    weights=self.weights,
                )
                if prefix is not None
                else None
            )
            if fast is not None:
                res = fast
            else:
                kept, dropped = self._executor(txn, plan, reader, now).run()
                res = result(kept, dropped, plan)
            if wanted:
                found = evidence.search(
                    txn,
                    query.text or "",
                    wanted,
                    self._visible_episode(txn, query.reader),
                    self._query_vector(query.text or ""),
                )
                res = msgspec.structs.replace(res, evidence=tuple(found))
        if plan.record_access and res.hits:
            self._record_access([h.memory.id for h in res.hits], now)
        return res

    def _newest_or_run(  # noqa: PLR0917 - the snapshot's parts, as LmdbKV.read_newest hands them
        self,
        get: Any,
        cursor: Any,
        icur: Any,
        head: int,
        snapshot: Callable[[], ReadTxn],
        kept: tuple[Plan, Newest, datetime | None, int, Reader],
    ) -> Result:
        """A kept find (``_newest``) in ``LmdbKV.read_newest``'s snapshot.

        ``newest_read``, else ``newest_first``, else the ``Executor``, as ``find`` runs them.
        """
        plan, prep, at, now_us, reader = kept
        got = newest_read(get, cursor, icur, head, snapshot, prep, now_us)
        if isinstance(got, Result):
            return got
        now = at if at is not None else from_micros(now_us)
        txn = snapshot()
        if got is False:
            fast = newest_first(
                self._engine,
                txn,
                plan,
                prefix=prep[6],
                now_us=now_us,
                decay=self.decay,
                weights=self.weights,
            )
            if fast is not None:
                return fast
        kept_rows, dropped = self._executor(txn, plan, reader, now).run()
        return result(kept_rows, dropped, plan)

    def _record_access(self, ids: Sequence[MemoryId], now: datetime) -> None:
        def txn_fn(txn: WriteTxn) -> None:
            for mid in ids:
                try:
                    head = self._engine.head(txn, mid)
                except NotFoundError:  # gone since the find read it: nothing to count
                    continue
                st = read_state(txn, head)
                put_counters(
                    txn,
                    head,
                    msgspec.structs.replace(st, accesses=st.accesses + 1, last_used_at=now),
                )

        self._kv.write(txn_fn)

    def _attest(
        self, uris: Iterable[Uri | MemoryId | str], outcome: Outcome | str = Outcome.SUCCESS
    ) -> None:
        """Record that memories were used to act, and how it went (raises their salience).

        A ``success`` or ``partial`` outcome counts as a citation; a ``failure`` is counted
        apart and does not raise salience. One journal entry per memory, all in one
        transaction.

        Raises:
            NotFoundError: a memory does not exist; nothing is recorded.
            TombstonedError: a memory is tombstoned; nothing is recorded.
            ValidationError: an unknown outcome.
        """
        out = Outcome.coerce(outcome)
        if out is None:
            raise ValidationError("outcome", "enum", f"must be one of {Outcome.labels()}")
        ids = list(dict.fromkeys(as_id(u, "uris") for u in argcheck.items(uris, "uris")))
        now = self._now()

        def txn_fn(txn: WriteTxn) -> None:
            journal = JournalWriter(txn, now, self.actor)
            for mid in ids:
                head = self._engine.head(txn, mid)
                if head.tombstone is not None:
                    raise TombstonedError(f"memory {mid} is tombstoned; it cannot be attested")
                st = read_state(txn, head)
                if out is Outcome.FAILURE:  # counted for audit; a failure is not a use
                    st = msgspec.structs.replace(st, failures=st.failures + 1)
                else:
                    st = msgspec.structs.replace(st, citations=st.citations + 1, last_used_at=now)
                head = put_counters(txn, head, st)
                journal.append(
                    JournalKind.ATTEST,
                    id=mid,
                    type=head.type,
                    version=head.current_version,
                    reason=out.label,
                )

        self._kv.write(txn_fn)

    def salience_state(self, ref: Uri | MemoryId | str) -> SalienceState:
        """A memory's use counters (zero for a memory never used).

        Raises:
            NotFoundError: no such memory.
            IntegrityError: its head says it has counters and their record is missing (a
                damaged ``sal/`` key; ``specs/query.md`` §2).
        """
        mid = as_id(ref)
        if self._as is not None:
            self._check_visible(self._head_of(mid), None)
        with self._kv.read() as txn:
            return read_state(txn, self._engine.head(txn, mid))

    # -- context ---------------------------------------------------------------------------

    def context(
        self,
        verb: Verb | str,
        objects: Sequence[Any] | str = (),
        budget_tokens: int = DEFAULT_BUDGET,
        *,
        query: str | None = None,
        reader: Reader | None = None,
        form: Form = "medium",
        outcomes_per_object: int = 3,
        recall_limit: int = 10,
        evidence: int = 0,
    ) -> Bundle:
        """The working set for doing ``verb`` to ``objects``, in tiers, under one budget.

        Args:
            verb: the action (a ``Verb`` or its label).
            objects: object references (``"ada"`` for any kind, ``"knowledge:ada"``,
                ``(kind, ref)`` or ``FrameRef``).
            budget_tokens: the token budget (default 3000, at most 4000).
            query: text for the recall tier (needs the lexical index).
            reader: who is reading (default: the store's actor).
            form: the form rendered and counted (default medium).
            outcomes_per_object: latest Events per object in the outcomes tier.
            recall_limit: hits of the recall tier before the budget.
            evidence: with ``query``, also up to this many episode chunks matching it
                (``Bundle.evidence``), added best first while they fit in what the memories
                left of the budget.

        Returns:
            A ``Bundle``; a pure read (nothing is recorded).

        Raises:
            ValidationError: a bad verb, object, budget or form.
        """
        v = Verb.coerce(verb)
        if v is None:
            raise ValidationError("verb", "enum", f"must be one of {Verb.labels()}")
        objs = objects_of(objects)
        if (
            not isinstance(budget_tokens, int)
            or isinstance(budget_tokens, bool)
            or not 1 <= budget_tokens <= MAX_BUDGET
        ):
            raise ValidationError(
                "budget_tokens",
                "range",
                f"must be an integer 1..{MAX_BUDGET}, got {budget_tokens!r}",
            )
        if not isinstance(outcomes_per_object, int) or outcomes_per_object < 0:
            raise ValidationError("outcomes_per_object", "range", "must be an integer >= 0")
        if type(evidence) is not int or not 0 <= evidence <= 100:
            raise ValidationError("evidence", "range", "must be an int in 0..100")
        if evidence and query is None:
            raise ValidationError("evidence", "text", "episode evidence needs query=")
        now = self._now()
        rd = self._reader(reader)
        base = Query(types=tuple(MemoryType), budget_tokens=budget_tokens, form=form, reader=rd)
        plan = compile_query(base, now, token_cap=rd.token_cap(now))
        plan = msgspec.structs.replace(plan, types=frozenset())
        recall_plan = None
        if query is not None:
            recall_plan = compile_query(
                Query(text=query, limit=recall_limit, form=form, reader=rd), now
            )
        with self._kv.read() as txn:
            ex = self._executor(txn, plan, rd, now)
            recall = None
            if recall_plan is not None:
                rex = self._executor(txn, recall_plan, rd, now)
                recall = lambda: rex.run()[0]  # noqa: E731
            bundle = assemble(
                ex,
                v,
                objs,
                plan.budget or budget_tokens,
                form=plan.form,
                outcomes_per_object=outcomes_per_object,
                recall=recall,
            )
            if not evidence or query is None:
                return bundle
            room = bundle.budget - bundle.tokens
            chunks = []
            qvec = self._query_vector(query)
            for e in evidence_search(
                txn, query, evidence, self._visible_episode(txn, reader), qvec
            ):
                n = count_tokens(e.text)
                if n > room:
                    continue
                chunks.append(e)
                room -= n
            return msgspec.structs.replace(
                bundle, evidence=tuple(chunks), tokens=bundle.budget - room
            )

    # -- facets and entities -----------------------------------------------------------------

    def facets(
        self,
        window: Window | None = None,
        by: Literal["type", "tag", "subject", "counterparty"] = "type",
        *,
        types: Sequence[MemoryType | str] = (),
        reader: Reader | None = None,
    ) -> dict[str, int]:
        """Counts of live memories in a time window, by type, tag, subject or counterparty.

        Reads every memory of the types in the window (the type index serves created-time
        windows directly), so it costs what the window holds.

        Returns:
            ``{label: count}``, largest first, ties by label.
        """
        if by not in _FACETS:
            raise ValidationError("by", "enum", f"must be one of {', '.join(_FACETS)}")
        return self._facets_many(window, (by,), types=types, reader=reader)[by]

    def _facets_many(
        self,
        window: Window | None,
        dims: Sequence[Literal["type", "tag", "subject", "counterparty"]],
        *,
        types: Sequence[MemoryType | str] = (),
        reader: Reader | None = None,
    ) -> dict[str, dict[str, int]]:
        """``facets`` by each of ``dims``, in one read of the window's memories."""
        ts = argcheck.items(types, "types") or tuple(MemoryType)
        out: dict[str, dict[str, int]] = {by: {} for by in dims}
        with self._kv.read() as txn:
            ex = self._counting(txn, window, ts, reader, self._now())
            for _, row in _accepted(ex):
                for by, counts in out.items():
                    if by == "type":
                        labels: Iterable[str] = (row.head.type.type_name,)
                    elif by == "tag":
                        labels = row.head.tags
                    else:
                        value = getattr(row.data, by, None)
                        labels = (value,) if isinstance(value, str) else ()
                    for label in labels:
                        counts[label] = counts.get(label, 0) + 1
        return {
            by: dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
            for by, counts in out.items()
        }

    def about(
        self,
        subject: str,
        attribute: str | None = None,
        *,
        types: Sequence[MemoryType | str] | None = None,
        limit: int = 100,
        reader: Reader | None = None,
        as_of: datetime | None = None,
    ) -> Result:
        """Every current memory about an entity, newest first.

        That is: Identities named so, Facts, Beliefs, Capabilities, Preferences and Goals with
        that subject, and Events with it as counterparty — the name compared as claim keys
        compare it (case, surrounding punctuation, a leading ``@`` and runs of spaces do not
        matter: "Sarah", "sarah" and "@sarah" meet; ``specs/claims.md`` §5), and every alias
        of the entity (``alias``) with it. With
        ``attribute``: only Facts with that predicate and Capabilities with that capability
        (compared the same way: "Home City" = ``home_city``). ``types`` keeps only some of
        these types.

        Raises:
            ValidationError: an empty subject, or a type about() cannot answer with.
        """
        if not isinstance(subject, str) or not norm_entity(subject):
            raise ValidationError("subject", "required", "must be non-empty text")
        with self._kv.read() as txn:
            spellings = read_aliases(txn).group(norm_entity(subject))
        allowed: tuple[MemoryType, ...] = (
            (MemoryType.FACT, MemoryType.CAPABILITY)
            if attribute is not None
            else (
                MemoryType.IDENTITY,
                MemoryType.FACT,
                MemoryType.BELIEF,
                MemoryType.EVENT,
                MemoryType.CAPABILITY,
                MemoryType.PREFERENCE,
                MemoryType.GOAL,
            )
        )
        chosen = allowed
        if types is not None:
            if isinstance(types, str | MemoryType):
                types = (types,)
            wanted = []
            for t in types:
                mt = t if isinstance(t, MemoryType) else None
                if isinstance(t, str):
                    mt = MemoryType.from_name(t) or MemoryType.coerce(t.lower())
                if mt is None or mt not in allowed:
                    raise ValidationError(
                        "types",
                        "about",
                        f"about() finds {', '.join(a.type_name for a in allowed)}; not {t!r}",
                    )
                wanted.append(mt)
            chosen = tuple(dict.fromkeys(wanted))
        # the field that names the entity, by type (a where may name only fields of its types)
        naming = {
            "data.subject": {
                MemoryType.FACT,
                MemoryType.BELIEF,
                MemoryType.CAPABILITY,
                MemoryType.PREFERENCE,
                MemoryType.GOAL,
            },
            "data.counterparty": {MemoryType.EVENT},
            "data.name": {MemoryType.IDENTITY},
        }
        where: Predicate = Or(
            *(
                Matches(f, _entity_pattern(name))
                for f, ts in naming.items()
                if ts & set(chosen)
                for name in spellings
            )
        )
        if attribute is not None:
            if not isinstance(attribute, str) or not norm_predicate(attribute):
                raise ValidationError("attribute", "required", "must be non-empty text")
            what = _predicate_pattern(attribute)
            of = {MemoryType.FACT: "data.predicate", MemoryType.CAPABILITY: "data.capability"}
            where = where & Or(*(Matches(of[t], what) for t in chosen))
        query = Query(types=chosen, where=where, limit=limit, reader=reader, as_of=as_of)
        named = [_name_terms(s) for s in spellings] if as_of is None else []
        if named and all(g is not None for g in named):
            got = self._find_naming(query, cast(list[list[list[str]]], named))
            if got is not None:
                return got
        return self.find(query)

    def _find_naming(self, query: Query, named: list[list[list[str]]]) -> Result | None:
        """``find(query)`` of an ``about`` among the memories whose indexed terms name it.

        A memory whose entity field matches a spelling holds that spelling's terms (its full
        form, which the lexical index holds, has the field: ``_name_terms``), so the plan's
        answer is among the memories holding, for each of some spelling's groups, one of the
        group's terms (``lexical.containing``): each is accepted and filtered as the scan of
        the plan's types would, without reading the memories that do not name the entity.

        None (``find`` scans instead) for a name so common that the scan, newest first, is
        likely to meet the limit sooner: with C such memories of N, the scan reads about
        ``limit × N / C`` before ``limit`` pass, this C, so C above ``√(limit × N)`` scans.
        """
        now = self._now()
        reader = self._reader(query.reader)
        own = reader is self._own and reader.actor == self._engine.format.owner
        plan, _ = self._plan_of(query, now, None if own else reader.token_cap(now))
        with self._kv.read() as txn:
            found: dict[bytes, Any] = {}
            rows = self._engine.rows_reader(txn)
            most = math.isqrt(max(1, plan.offset + (plan.limit or 0)) * lexical.documents(txn))
            among: dict[MemoryId, None] = {}
            for groups in named:
                ids = lexical.containing(txn, groups, rows=rows, found=found, most=most)
                if ids is None:
                    return None
                among.update(dict.fromkeys(ids))
                if len(among) > most:
                    return None
            kept, dropped = self._executor(txn, plan, reader, now, found).run(list(among))
            return result(kept, dropped, plan)

    def search(
        self, question: str, *, limit: int = 10, reader: Reader | None = None
    ) -> SearchResult:
        """Answer a question in plain words: route it, then run the handler it picks.

        The router (``cortex.query.router.route``, no LLM) reads the question's type, entities,
        attribute and time window against the store's entity names; the handler fuses
        ``find`` calls (``cortex.query.search``). ``find(Query(text=...))`` stays the direct way.

        Raises:
            ValidationError: a bad question or limit.
        """
        if self._restricted(reader):
            return _search(self, question, limit=limit, reader=self._reader(reader))
        with self._kv.read() as txn:
            # a PostgreSQL server's restart may have lost writes whose positions others reuse
            epoch = getattr(self._kv, "epoch", None)
            head = (journal_head(txn), None if epoch is None else epoch())
        kept = self._entities
        if kept is None or kept.head != head or kept.expired(self._now()):
            kept = self._entities = self._entity_names(head)  # the owner's, until a change
        return _search(self, question, limit=limit, entities=kept.names)

    def _entity_names(self, head: tuple[int, Any]) -> _Names:
        """The owner's entity names for the router (``known_entities``) as of ``head``.

        ``known_entities`` reads every memory (two ``facets``): after each write that was the
        cost of the next ``search`` (470 ms at 20k memories on LMDB). The names kept at an
        earlier head (``_Names``) are carried over the journal entries since: each memory an
        entry names is counted again as it is now (a new memory, an update, a tombstone, a
        change of visibility, an edge), and entries that change no memory pass. Everything is
        read again (one pass over the memories) for the first search, another server epoch,
        an entry of another kind (an import, a migration), a change to an Identity, a memory
        counted reaching its expiry, or more changed memories than a tenth of those counted.
        """
        kept = self._entities
        if (
            kept is not None
            and kept.head[1] == head[1]
            and kept.head[0] < head[0]
            and self._names_since(kept, head)
        ):
            kept.head = head
            kept.listed()
            return kept
        return self._names_read(head)

    def _counting(
        self,
        txn: ReadTxn,
        window: Window | None,
        types: tuple[MemoryType | str, ...],
        reader: Reader | None,
        now: datetime,
    ) -> Executor:
        """An executor that accepts memories as ``facets`` counts them (``_accepted``)."""
        rd = self._reader(reader)
        plan = compile_query(Query(types=types, window=window, limit=1, reader=rd), now)
        return self._executor(txn, plan, rd, now)

    def _names_read(self, head: tuple[int, Any]) -> _Names:
        """``_Names`` read from every memory (as ``known_entities`` reads them)."""
        out = _Names(head)
        with self._kv.read() as txn:
            ex = self._counting(txn, Window.all(), tuple(MemoryType), None, self._now())
            for mid, row in _accepted(ex):
                out.count(mid, row)
        found = self.find(Query(types=(MemoryType.IDENTITY,), limit=1000)).memories
        out.identities = {m.uri.id: getattr(m.data, "name", "") for m in found}
        out.listed()
        return out

    def _names_since(self, kept: _Names, head: tuple[int, Any]) -> bool:
        """Count again in ``kept`` the memories named by the entries in ``(kept.head, head]``.

        False (``kept`` then unusable) where everything must be read again.
        """
        now = self._now()
        if kept.expired(now):
            return False
        touched: dict[MemoryId, None] = {}
        most = len(kept.by_memory) // 10 + 64
        with self._kv.read() as txn:
            for key, value in txn.scan(JOURNAL, start=journal_key(kept.head[0] + 1)):
                entry: JournalEntry = decode_trusted(JOURNAL_CODEC, key, value)
                if entry.seq > head[0]:
                    break
                if entry.kind in _NAMELESS_KINDS:
                    continue
                if entry.kind not in _NAMED_KINDS:
                    return False
                for mid in (entry.id, entry.dst):
                    if mid is not None:
                        if mid in kept.identities:
                            return False
                        touched[mid] = None
                if len(touched) > most:
                    return False  # one pass over every memory costs less
            ex = self._counting(txn, Window.all(), tuple(MemoryType), None, now)
            for mid in ex.preloaded(list(touched)):
                kept.uncount(mid)
                row = ex.accept(mid)
                if row is None:
                    head_of = ex.head(mid)  # an Identity past the newest 1,000 may have gone
                    if head_of is not None and head_of.type is MemoryType.IDENTITY:
                        return False
                    continue
                if row.head.type is MemoryType.IDENTITY:
                    return False
                kept.count(mid, row)
        return True

    # -- episodes and ingest (cortex.agent.ingest) ------------------------------------------------

    def ingest(
        self,
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
        sensitivity: Sensitivity | str | None = None,
    ) -> IngestResult:
        """Keep ``content`` verbatim as an episode; with ``extractor``, write what it holds.

        The episode (its text, hash and chunks) and every extracted memory — each pointing at
        the episode and the span of its quote — are written in one transaction, or nothing is.

        Args:
            content: the text, exactly as given (up to 64 MiB).
            occurred_at: when it was said or made (default: now).
            source: the entry point (``chat``, ``mcp``, ``upload``, ``api``, ``tool``, ...).
            channel: the sub-source (thread, repository, session id).
            labels: up to 16 labels.
            visibility: private (default), scoped or actor_public.
            media_type: e.g. ``text/markdown``.
            extractor: turns the content into memories (``cortex.LLMExtractor``; your own
                rules); without one only the episode is stored.
            id: a caller-chosen episode id.
            sensitivity: the episode's level (default ``internal``; ``specs/sensitivity.md``);
                the memories drawn from it carry their own (``NewMemory.sensitivity``).

        Raises:
            ValidationError: a field breaks a rule (named), or a restricted handle sets a
                level above its clearance; ExtractionError: the extraction failed;
                ConflictError: the id is taken. Nothing is written in any case.
        """
        self._check_level(self._as, sensitivity)
        return _ingest(
            self,
            content,
            occurred_at=occurred_at,
            source=source,
            channel=channel,
            labels=labels,
            visibility=visibility,
            media_type=media_type,
            extractor=extractor,
            id=id,
            sensitivity=_sens.DEFAULT if sensitivity is None else _sens.coerce_level(sensitivity),
            check=None if self._as is None else (lambda lv: self._check_level(self._as, lv)),
        )

    def episode(self, ref: MemoryId | str, *, reader: Reader | None = None) -> Episode:
        """An episode by id (``cortex.model.episode.episode_text`` gives its text).

        Raises:
            NotFoundError: no such episode, or the reader may not see it.
            IntegrityError: the record is damaged.
        """
        eid = as_id(ref, "episode")
        self._reader(reader)
        with self._kv.read() as txn:
            ep = self._engine.episode_record(txn, eid)
            if not self._sees_episode(txn, ep, self._reader(reader)):
                raise NotFoundError(f"no episode {eid}")
        return ep

    def _chunk_vectors(self, ep: Episode) -> list[bytes] | None:
        """The vectors of ``ep``'s chunks by the store's embedder (``None`` without one)."""
        e = self.embedder
        if e is None or isinstance(e, External) or ep.content is None:
            return None
        texts = [ep.content[a:b].decode("utf-8") for a, b in ep.chunks]
        out: list[bytes] = []
        for i in range(0, len(texts), 64):
            out += [to_bytes(row) for row in embed_checked(e, texts[i : i + 64])]
        return out

    def _query_vector(self, text: str) -> Any:
        """The query's vector for episode evidence (``None`` without a local embedder)."""
        e = self.embedder
        if e is None or isinstance(e, External):
            return None
        if self._sidecar is not None:  # shared with the memories' vector search: embedded once
            return self._sidecar.query_vector(text)
        return embed_checked(e, [text])[0]

    def _episode_query(self, query: Query) -> Query | None:
        """``query`` with its episode filter as an id predicate; ``None``: no memory matches."""
        m = query.episode
        if isinstance(m, MemoryId | str):
            m = EpisodeMatch(id=as_id(m, "episode"))
        if not isinstance(m, EpisodeMatch):
            raise ValidationError("episode", "type", "must be an EpisodeMatch or an episode id")
        ids: set[MemoryId] = set()
        with self._kv.read() as txn:
            if m.id is not None:
                candidates: list[Episode] = []
                with contextlib.suppress(NotFoundError):
                    candidates.append(self._engine.episode_record(txn, m.id))
            else:
                candidates = list(self._engine.episode_records(txn))
            for ep in candidates:
                if (m.source is not None and ep.source != m.source) or (
                    m.channel is not None and ep.channel != m.channel
                ):
                    continue
                if m.label is not None and m.label not in ep.labels:
                    continue
                if not self._sees_episode(txn, ep, self._reader(query.reader)):
                    continue
                ids.update(self._engine.episode_memories(txn, ep.id))
        if not ids:
            return None
        only = In("head.id", tuple(sorted(str(i) for i in ids)))
        where = only if query.where is None else (query.where & only)
        starts = query.types or query.tags or query.frames or query.text or query.near
        types = query.types if starts or query.from_ else tuple(MemoryType)
        return msgspec.structs.replace(query, where=where, types=types, episode=None)

    def _visible_episode(
        self, txn: ReadTxn, reader: Reader | None
    ) -> Callable[[MemoryId], Episode | None]:
        rd = self._reader(reader)

        def get(eid: MemoryId) -> Episode | None:
            try:
                ep = self._engine.episode_record(txn, eid)
            except NotFoundError:
                return None
            return ep if self._sees_episode(txn, ep, rd) else None

        return get

    def episodes(
        self,
        *,
        limit: int = 50,
        source: str | None = None,
        channel: str | None = None,
        label: str | None = None,
        reader: Reader | None = None,
    ) -> list[Episode]:
        """The newest episodes, optionally of one source, channel or label.

        Raises:
            ValidationError: a bad limit.
        """
        if type(limit) is not int or not 1 <= limit <= 10_000:
            raise ValidationError("limit", "range", "must be an int in 1..10000")
        self._reader(reader)
        for name, value in (("source", source), ("channel", channel), ("label", label)):
            if value is not None:
                argcheck.text(value, name)
        out: list[Episode] = []
        with self._kv.read() as txn:
            for ep in self._engine.episode_records(txn):
                if (source is not None and ep.source != source) or (
                    channel is not None and ep.channel != channel
                ):
                    continue
                if label is not None and label not in ep.labels:
                    continue
                if not self._sees_episode(txn, ep, self._reader(reader)):
                    continue
                out.append(ep)
                if len(out) >= limit:
                    break
        return out

    def episode_of(self, ref: Uri | MemoryId | str, *, reader: Reader | None = None) -> EpisodeLink:
        """The episode a memory was drawn from, the span and the quoted text.

        Raises:
            NotFoundError: the memory or its episode is missing or hidden, or it was not drawn
                from an episode.
        """
        self._reader(reader)
        return _episode_of(self, ref, reader)

    def memories_from(self, ref: MemoryId | str, *, reader: Reader | None = None) -> list[Uri]:
        """The current URIs of the memories drawn from an episode, in id order.

        Raises:
            NotFoundError: no such episode (or hidden from the reader).
        """
        ep = self.episode(ref, reader=reader)
        rd = self._reader(reader)
        now = self._now()
        out: list[Uri] = []
        with self._kv.read() as txn:
            for mid in self._engine.episode_memories(txn, ep.id):
                head = self._engine.head(txn, mid)
                if self._sees(txn, rd, head, now):
                    out.append(Uri(head.type, mid, head.current_version))
        return out

    # -- entity aliases (``specs/claims.md`` §10) ------------------------------------------

    def alias(self, name: str, alias: str) -> AliasChange:
        """Say that ``alias`` is another name of the entity ``name``.

        From then on a Fact or Preference about either name competes with those about the
        other (temporal chains, ``specs/claims.md`` §6) and ``about`` finds both. Names compare
        normalised ("@Sarah" = "sarah"); the entity keeps ``name``'s canonical name (if
        ``name`` is an alias already, its entity's), and an alias that had aliases of its own
        brings them along. Nothing already stored is rewritten: memories that compete now stay
        current until the next write of their claim. Journalled (kind ``alias``, a hash).

        Returns:
            What it did (``AliasChange``): ``added``, ``moved`` or ``unchanged``.

        Raises:
            ValidationError: a name that is empty once normalised or too long, the same name
                twice, ``alias`` an alias of another entity already (``unalias`` it first), or
                a restricted handle (only the owner names entities).
        """
        self._owner_only("names entities")
        canonical_of = normal_name(name, "name")
        other = normal_name(alias, "alias")
        return self._engine.add_alias(canonical_of, other, alias)

    def unalias(self, alias: str) -> AliasChange:
        """Remove an alias: ``alias`` names only itself from then on (``removed``/``absent``).

        Raises:
            ValidationError: an empty or too long name, or a restricted handle.
        """
        self._owner_only("names entities")
        return self._engine.drop_alias(normal_name(alias, "alias"))

    def aliases(self, name: str | None = None) -> dict[str, tuple[str, ...]]:
        """The entities that have aliases: canonical name → its aliases (normalised, sorted).

        With ``name``: only its entity (``{}`` when it has no alias). A restricted handle must
        name one (the names of every entity are the owner's to list).

        Raises:
            ValidationError: a bad name, or a restricted handle without ``name``.
        """
        if name is None:
            self._owner_only("lists every entity's aliases")
            with self._kv.read() as txn:
                return read_aliases(txn).groups()
        normal = normal_name(name, "name")
        with self._kv.read() as txn:
            group = read_aliases(txn).group(normal)
        return {group[0]: group[1:]} if len(group) > 1 else {}

    def suggest_aliases(
        self, *, threshold: float = 0.8, limit: int = 20, reader: Reader | None = None
    ) -> list[AliasSuggestion]:
        """Pairs of entity names that may name one entity: candidates for ``alias``.

        The names (normalised) are those ``about`` can find (Fact, Belief, Capability,
        Preference and Goal subjects, Event counterparties, Identity names) that the reader
        sees. A pair is offered when one name's words are all words of the other and their
        embeddings' cosine is at least ``WORDS_COSINE`` ("sarah" / "sarah chen"), or when the
        cosine reaches ``threshold`` ("nyc" / "new york city"); pairs already one entity are
        left out. Nothing is merged: call ``alias`` for the pairs that are one entity. Word
        pairs first, then by cosine; at most ``limit``.

        Raises:
            ValidationError: no embedder that computes vectors here (``External`` has no
                model to run), or a threshold outside (0, 1].
        """
        if not isinstance(threshold, int | float) or not 0 < threshold <= 1:
            raise ValidationError("threshold", "range", "must be a number in (0, 1]")
        argcheck.integer(limit, "limit", 0)
        e = self.embedder
        if e is None or isinstance(e, External):
            raise ValidationError(
                "embedder",
                "required",
                "suggesting aliases embeds entity names: open the store with a local embedder "
                "(embedder=cortex.index.embed.MiniLM() or HashingEmbedder)",
            )
        rd = self._reader(reader)
        normals = sorted({norm_entity(n) for n in known_entities(self, rd)} - {""})
        if len(normals) < 2 or limit == 0:
            return []
        with self._kv.read() as txn:
            known = read_aliases(txn)
        vecs = embed_checked(e, normals)
        return suggest(normals, vecs, float(threshold), known)[:limit]

    def _owner_only(self, what: str) -> None:
        if self._as is not None:
            raise ValidationError("actor", "read_only", f"only the owner ({self.owner}) {what}")

    # -- core memory (cortex.agent.core) ----------------------------------------------------------

    def core_get(
        self, section: str | None = None, *, as_of: datetime | None = None
    ) -> dict[str, Any]:
        """Core memory: ``{"user": {...}, "agent": {...}}``, or one section's ``{key: value}``.

        With ``as_of``, the blocks as they were then.

        Raises:
            ValidationError: an unknown section.
        """
        if section is not None:
            return _core.read(self, section, as_of)
        return {s: _core.read(self, s, as_of) for s in _core.SECTIONS}

    def core_update(self, section: str, key: str, value: str) -> Uri:
        """Set one key of core memory (``user`` or ``agent``); returns the section's new URI.

        One call, no read-modify-write by the caller: concurrent changes to other keys land
        too. Setting a key to the value it has writes nothing and returns the current URI.

        Raises:
            ValidationError: an unknown section, an empty or over-long key or value.
            TombstonedError: the section's memory was tombstoned.
        """
        if not isinstance(value, str):
            raise ValidationError("value", "type", f"must be text, got {type(value).__name__}")
        _core_writable(self.resolve_latest, self._as, section)
        return _core.change(self, section, key, value)

    def core_delete(self, section: str, key: str) -> Uri:
        """Remove one key of core memory; returns the section's new URI.

        Raises:
            NotFoundError: the section has no such key.
            ValidationError: an unknown section or a bad key.
        """
        _core_writable(self.resolve_latest, self._as, section)
        return _core.change(self, section, key, None)

    def core_history(self, section: str, key: str) -> list[CoreChange]:
        """Every change of one core key, oldest first (value ``None``: deleted)."""
        return _core.history(self, section, key)

    def core_yaml(self, *, as_of: datetime | None = None) -> str:
        """Core memory as YAML, for a prompt."""
        return _core.core_yaml(self.core_get(as_of=as_of))

    # -- temporal chains and conflicts (``specs/claims.md`` §6-§7) -------------------------

    def chain(
        self,
        ref: Uri | MemoryId | str,
        *,
        reader: Reader | None = None,
        as_of: datetime | None = None,
    ) -> list[ChainLink]:
        """The temporal chain a memory belongs to, the current truth first.

        Each link is a memory (its current version), the time its claim starts being true
        (``since``), the time a later one took over (``until``; ``None`` for the current one)
        and what superseded it. A memory that no other supersedes or is superseded by is a
        chain of one. ``as_of`` reads the chain as the store held it then; memories the
        reader may not see are left out.

        Raises:
            NotFoundError: no such memory (or hidden from ``reader``).
        """
        mid = as_id(ref)
        rd = self._reader(reader)
        now = self._now()
        at = to_micros(as_of) if as_of is not None else to_micros(now)
        with self._kv.read() as txn:
            head = self._engine.head(txn, mid)
            if not self._sees(txn, rd, head, now):
                raise NotFoundError(f"no memory {mid}")
            top, seen = mid, {mid}
            while (up := self._engine.superseder(txn, top, at)) is not None and up not in seen:
                seen.add(up)
                top = up
            order: list[MemoryId] = []
            by: dict[MemoryId, MemoryId | None] = {top: None}
            todo = [top]
            while todo:
                cur = todo.pop()
                order.append(cur)
                prefix = EDGE_FROM + cur.bytes + bytes((EdgeType.SUPERSEDES,))
                for key, value in txn.scan(prefix):
                    rec = decode_trusted(EDGE_CODEC, key, value)
                    if to_micros(rec.created_at) > at or (
                        rec.removed_at is not None and to_micros(rec.removed_at) <= at
                    ):
                        continue
                    older = MemoryId(key[-16:])
                    if older not in by:
                        by[older] = cur
                        todo.append(older)
            links: list[ChainLink] = []
            for m in order:
                h = self._engine.head(txn, m)
                if not self._sees(txn, rd, h, now):
                    continue
                v = self._engine.version(txn, m, h.current_version)
                data = None if v.data is None else decode_data(h.type, v.data)
                since = effective_time(data, v.valid_from, v.created_at)
                links.append(
                    ChainLink(memory=self._engine.memory(h, v), since=since, superseded_by=by[m])
                )
        when = {link.memory.id: link.since for link in links}
        out = []
        for link in links:
            until = None
            if link.superseded_by is not None:
                later = when.get(link.superseded_by, link.since)
                until = later if later > link.since else link.since
            out.append(msgspec.structs.replace(link, until=until))
        out.sort(key=lambda lk: (lk.until is not None, -to_micros(lk.since)))
        return out

    def conflicts(self, *, reader: Reader | None = None) -> list[Conflict]:
        """Open conflicts: live ``contradicts`` edges between two current memories.

        A write that meets a competitor of equal time and confidence opens one (both stay
        current); ``resolve_conflict`` closes it. Oldest first.
        """
        rd = self._reader(reader)
        now = self._now()
        now_us = to_micros(now)
        out = []
        with self._kv.read() as txn:
            for key, value in txn.scan(EDGE_FROM):
                s, et, d = parse_edge_key(key)
                if et is not EdgeType.CONTRADICTS:
                    continue
                rec = decode_trusted(EDGE_CODEC, key, value)
                if rec.removed_at is not None:
                    continue
                pair = []
                for mid in (s, d):
                    h = self._engine.head(txn, mid)
                    if h.tombstone is not None or not self._sees(txn, rd, h, now):
                        break
                    if self._engine.superseder(txn, mid, now_us) is not None:
                        break
                    pair.append(
                        self._engine.memory(h, self._engine.version(txn, mid, h.current_version))
                    )
                if len(pair) == 2:
                    out.append(Conflict(a=pair[0], b=pair[1], since=rec.created_at))
        out.sort(key=lambda c: to_micros(c.since))
        return out

    def resolve_conflict(
        self, winner: Uri | MemoryId | str, loser: Uri | MemoryId | str, *, reason: str
    ) -> Edge:
        """Close a conflict: ``winner`` supersedes ``loser`` from now on, in one transaction.

        The ``contradicts`` edges between them are removed (kept, marked removed) and a
        ``supersedes`` edge added; the journal records both and ``reason``.

        Raises:
            NotFoundError: either memory does not exist.
            ValidationError: the same memory twice, or an empty reason.
        """
        w, lo = as_id(winner, "winner"), as_id(loser, "loser")
        self._may_change(w)  # a restricted handle resolves only what it may write
        self._may_change(lo)
        if w == lo:
            raise ValidationError("loser", "self_edge", "a memory cannot supersede itself")
        if not isinstance(reason, str) or not reason.strip():
            raise ValidationError("reason", "required", "say why (non-empty text)")
        now = self._now()

        def txn_fn(txn: WriteTxn) -> Edge:
            for mid in (w, lo):  # NotFoundError; a restricted handle checks again (issue 22)
                self._guard_change(txn, mid, self._engine.head(txn, mid))
            journal = JournalWriter(txn, now, self.actor)
            for s, d in ((w, lo), (lo, w)):
                fkey = edge_from_key(s, EdgeType.CONTRADICTS, d)
                raw = txn.get(fkey)
                if raw is None:
                    continue
                rec = decode_trusted(EDGE_CODEC, fkey, raw)
                if rec.removed_at is None:
                    rec = msgspec.structs.replace(rec, removed_at=now, removed_by=self.actor)
                    payload = _seal(EDGE_CODEC.encode(rec, "edge"))
                    txn.put(fkey, payload)
                    txn.put(edge_to_key(d, EdgeType.CONTRADICTS, s), payload)
                    journal.append(JournalKind.REMOVE_EDGE, id=s, edge=EdgeType.CONTRADICTS, dst=d)
            self._engine.put_edge(
                txn, w, EdgeType.SUPERSEDES, lo, journal=journal, reason=f"conflict: {reason}"
            )
            self._engine.remark(txn, (lo,), to_micros(now))
            fkey = edge_from_key(w, EdgeType.SUPERSEDES, lo)
            raw = txn.get(fkey)
            assert raw is not None
            return edge_of(w, EdgeType.SUPERSEDES, lo, decode_trusted(EDGE_CODEC, fkey, raw))

        return self._kv.write(txn_fn)

    # -- reads as a reader -------------------------------------------------------------------

    def _check_visible(self, head: Head, reader: Reader | None) -> None:
        rd = self._reader(reader)
        if not (rd.can_see(head, self.owner, self._now()) and self._cleared(rd, head)):
            raise NotFoundError(f"no memory {head.id}")  # exactly what a missing one raises

    # -- sensitivity (``specs/sensitivity.md``) ---------------------------------------------

    def _cleared(self, rd: Reader, record: Head | Episode) -> bool:
        """Whether ``rd``'s clearance lets it see a memory (its head) or an episode.

        The level is in the record itself (format 9): nothing more is read.
        """
        if rd.actor == self.owner or rd.clearance is Sensitivity.RESTRICTED:
            return True
        return _sens.level_of(record) <= rd.clearance

    def _sees(self, txn: ReadTxn, rd: Reader, head: Head, now: datetime) -> bool:
        """Visibility and clearance: whether ``rd`` may see ``head``'s memory."""
        return rd.can_see(head, self.owner, now) and self._cleared(rd, head)

    def _sees_episode(self, txn: ReadTxn, ep: Episode, rd: Reader) -> bool:
        """Visibility and clearance: whether ``rd`` may see the episode ``ep``."""
        return visible_episode(ep, rd, self.owner) and self._cleared(rd, ep)

    def _check_level(self, writer: Reader | None, level: object) -> None:
        """Refuse a level a writer other than the owner is not cleared for (or a bad one).

        Raises:
            ValidationError: rule ``enum`` (no such level) or ``clearance``.
        """
        if level is None:
            return
        lv = _sens.coerce_level(level)
        if writer is not None and not writer.clears(lv, self.owner):
            raise ValidationError(
                "sensitivity",
                "clearance",
                f"{writer.actor}'s clearance is {writer.clearance.label}: it cannot set "
                f"{lv.label} (the owner, or a reader cleared for {lv.label}, can)",
            )

    def sensitivity(
        self, ref: Uri | MemoryId | str, *, reader: Reader | None = None
    ) -> Sensitivity:
        """A memory's sensitivity (``internal`` unless another level was set).

        Raises:
            NotFoundError: no such memory, or hidden from ``reader``.
        """
        mid = as_id(ref)
        rd = self._reader(reader)
        with self._kv.read() as txn:
            head = self._engine.head(txn, mid)
            level = _sens.level_of(head)
            if rd.actor != self.owner and not (
                rd.can_see(head, self.owner, self._now()) and level <= rd.clearance
            ):
                raise NotFoundError(f"no memory {mid}")
        return level

    def episode_sensitivity(
        self, ref: MemoryId | str, *, reader: Reader | None = None
    ) -> Sensitivity:
        """An episode's sensitivity (``internal`` unless another level was set).

        Raises:
            NotFoundError: no such episode, or hidden from ``reader``.
        """
        eid = as_id(ref, "episode")
        rd = self._reader(reader)
        with self._kv.read() as txn:
            ep = self._engine.episode_record(txn, eid)
            if not self._sees_episode(txn, ep, rd):
                raise NotFoundError(f"no episode {eid}")
            return _sens.level_of(ep)

    def set_episode_sensitivity(
        self, ref: MemoryId | str, sensitivity: Sensitivity | str
    ) -> Episode:
        """Change an episode's sensitivity, in one transaction journalled ``episode_update``.

        Only the owner changes an episode's level (a restricted handle changes no episode).

        Raises:
            NotFoundError: no such episode. ValidationError: a bad level, a purged episode
                (nothing is left to protect), or a restricted handle.
        """
        level = _sens.coerce_level(sensitivity)
        if self._as is not None:
            raise ValidationError(
                "actor", "read_only", f"only the owner ({self.owner}) changes an episode"
            )
        return self._engine.set_episode_level(as_id(ref, "episode"), level)

    def _restricted(self, reader: Reader | None) -> bool:
        """Whether reads for ``reader`` need a visibility check (not for the owner)."""
        if reader is None and self._as is None:  # the owner's own handle: the hot path
            return False
        return self._reader(reader).actor != self.owner

    def resolve(self, uri: Uri | str, *, reader: Reader | None = None) -> Memory:
        """The exact version a URI names, if ``reader`` (default: the owner) may see it.

        Raises:
            ValidationError: the URI is malformed (e.g. has no version or ``#latest``).
            NotFoundError: no such memory or version, or it is hidden from ``reader``.
            IntegrityError: the head or the version is damaged or missing.
        """
        m = self._engine.resolve(uri)
        if (reader is not None or self._as is not None) and self._restricted(reader):
            self._check_visible(m.head, reader)
        return m

    def resolve_latest(self, ref: Uri | MemoryId | str, *, reader: Reader | None = None) -> Memory:
        """The current version of a memory (see ``resolve`` for ``reader``)."""
        m = self._engine.resolve_latest(ref)
        if (reader is not None or self._as is not None) and self._restricted(reader):
            self._check_visible(m.head, reader)
        return m

    def history(self, ref: Uri | MemoryId | str, *, reader: Reader | None = None) -> list[Memory]:
        """Every version of a memory, oldest first (see ``resolve`` for ``reader``)."""
        if self._restricted(reader):
            self._check_visible(self._head_of(as_id(ref)), reader)
        return self._engine.history(ref)

    def resolve_as_of(
        self,
        ref: Uri | MemoryId | str,
        when: datetime,
        *,
        known_at: datetime | None = None,
        reader: Reader | None = None,
    ) -> Memory:
        """The version current at ``when`` (``Store.resolve_as_of``; ``reader`` as in resolve)."""
        if self._restricted(reader):
            self._check_visible(self._head_of(as_id(ref)), reader)
        return self._engine.resolve_as_of(ref, when, known_at=known_at)

    def _head_of(self, mid: MemoryId) -> Head:
        with self._kv.read() as txn:
            return self._engine.head(txn, mid)

    def view(self, reader: Reader) -> ReaderView:
        """The store as ``reader`` sees it.

        Every read is filtered; writes go only through a writable scope (or as the owner) and
        are made and journalled by the reader's actor. A restricted handle (opened by another
        actor than the owner) gives only a view of its own reader.

        Raises:
            ValidationError: not a ``Reader``, or a restricted handle asked for another reader.
        """
        rd = self._reader(reader)
        if self._as is not None and rd != self._as:
            raise ValidationError(
                "reader",
                "restricted",
                f"this handle reads as {self._as.actor}: it cannot open a view for another reader",
            )
        return ReaderView(self, rd)

    # -- restricted handles (issue 15): changes only where the handle's reader may write --

    def _acting_for(self, reader: Reader) -> Cortex:
        """This handle acting as ``reader``: the same environment, indexes and options.

        Its changes are made and journalled by ``reader.actor``; its new memories are this
        handle's (``actor_scope``); it reads as ``reader``.
        """
        other = copy.copy(self)
        other._engine = self._engine.acting(
            reader.actor, self._engine.space or self.actor, other._hooks()
        )
        other._now = other._engine.now
        other._as = None if reader.actor == self.owner else reader
        if other._as is not None:
            other._entities = None  # the owner's entity names are not the reader's
        return other

    def _may_change(self, ref: Uri | MemoryId | str) -> None:
        """Refuse a change by a restricted handle to a memory its reader may not write."""
        rd = self._as
        if rd is None:
            return
        mid = as_id(ref, "uri")
        head = self._head_of(mid)
        now = self._now()
        self._check_visible(head, rd)  # hidden looks exactly like missing
        if not rd.can_write(head, self.owner, now):
            raise ValidationError(
                "actor",
                "read_only",
                f"{rd.actor} may not change {mid}: it is not {rd.actor}'s and no writable scope "
                "of the handle selects it",
            )

    def _guard_change(self, txn: ReadTxn, mid: MemoryId, head: Head | None = None) -> None:
        """``_may_change`` again, inside the change's transaction (a restricted handle).

        What the reader sees and may write is decided by the snapshot the change is written on.
        """
        rd = self._as
        if rd is None:
            return
        if head is None:
            head = self._engine.head(txn, mid)
        now = self._now()
        if not self._sees(txn, rd, head, now):
            raise NotFoundError(f"no memory {mid}")  # exactly what a missing one raises
        if not rd.can_write(head, self.owner, now):
            raise ValidationError(
                "actor",
                "read_only",
                f"{rd.actor} may not change {mid}: it is not {rd.actor}'s and no writable scope "
                "of the handle selects it",
            )

    def _guard_see(self, txn: ReadTxn, mid: MemoryId) -> None:
        """A restricted handle links only to memories its reader sees (inside the change)."""
        rd = self._as
        if rd is not None and not self._sees(txn, rd, self._engine.head(txn, mid), self._now()):
            raise NotFoundError(f"no memory {mid}")

    def update(self, ref: Uri | MemoryId | str, data: Data, **options: Any) -> WriteResult:
        """``Store.update``; a restricted handle changes only what its reader may write.

        Its new content competes only with memories its reader sees (``specs/claims.md`` §6).
        """
        self._may_change(ref)
        if self._as is None:
            return self._engine.update(ref, data, **options)
        mid = as_id(ref, "uri")
        expected = options.pop("expected_version", None)
        now = self._now()
        spec = NewMemory(data=data, id=mid, **options)
        return self._engine.update_version(
            mid, spec, now, expected, self._visible_to(self._as, now)
        )

    def _visible_to(self, reader: Reader | None, now: datetime) -> Visible | None:
        """What a write by ``reader`` may compete with (``None``: the owner, everything)."""
        if reader is None or reader.actor == self.owner:
            return None
        return lambda txn, head: self._sees(txn, reader, head, now)

    def _writer_sees(self, now: datetime) -> Visible | None:
        return self._visible_to(self._as, now)

    def update_head(self, ref: Uri | MemoryId | str, **patch: Any) -> Head:
        """``Store.update_head``; a restricted handle changes only what its reader may write.

        Such a handle may set a sensitivity only up to its reader's clearance.
        """
        self._may_change(ref)
        self._check_level(self._as, patch.get("sensitivity"))
        return self._engine.update_head(ref, **patch)

    def write_many(self, items: Iterable[NewMemory | Data]) -> list[WriteResult]:
        """``Store.write_many``; a restricted handle sets sensitivities up to its clearance."""
        if self._as is None:
            return self._engine.write_many(items)
        items = list(items)
        for i, item in enumerate(items):
            if isinstance(item, NewMemory):
                try:
                    self._check_level(self._as, item.sensitivity)
                except ValidationError as exc:
                    raise ValidationError(
                        f"items[{i}].{exc.field}", exc.rule, exc.message
                    ) from None
        return self._engine.write_many(items)

    def tombstone(
        self,
        ref: Uri | MemoryId | str,
        reason: str,
        by: str | None = None,
        *,
        erase: bool = False,
        wait: float = 30.0,
    ) -> Tombstone:
        """``Store.tombstone``; a restricted handle retires only what its reader may write."""
        self._may_change(ref)
        return self._engine.tombstone(ref, reason, by, erase=erase, wait=wait)

    def purge(
        self,
        ref: Uri | MemoryId | str,
        reason: str,
        by: str | None = None,
        *,
        scrub: bool = True,
        wait: float = 30.0,
    ) -> Tombstone:
        """``Store.purge``; a restricted handle erases only what its reader may write."""
        self._may_change(ref)
        return self._engine.purge(ref, reason, by, scrub=scrub, wait=wait)

    def add_edge(
        self,
        src: Uri | MemoryId | str,
        type: EdgeType | str,
        dst: Uri | MemoryId | str,
        **options: Any,
    ) -> Edge:
        """``Store.add_edge``; a restricted handle links from what it may write to what it sees."""
        self._may_change(src)
        if self._as is not None:
            self._check_visible(self._head_of(as_id(dst, "dst")), None)
        return self._engine.add_edge(src, type, dst, **options)

    def remove_edge(
        self,
        src: Uri | MemoryId | str,
        type: EdgeType | str,
        dst: Uri | MemoryId | str,
        **options: Any,
    ) -> Edge:
        """``Store.remove_edge``; a restricted handle unlinks only from what it may write."""
        self._may_change(src)
        return self._engine.remove_edge(src, type, dst, **options)

    def edges(self, ref: Uri | MemoryId | str, **options: Any) -> list[Edge]:
        """``Store.edges``; a restricted handle sees the edges between memories it sees."""
        if self._as is None:
            return self._engine.edges(ref, **options)
        self._check_visible(self._head_of(as_id(ref)), None)
        rd, now = self._as, self._now()
        out = []
        edges = self._engine.edges(ref, **options)
        with self._kv.read() as txn:
            for e in edges:
                try:
                    if all(
                        self._sees(txn, rd, self._engine.head(txn, m), now) for m in (e.src, e.dst)
                    ):
                        out.append(e)
                except NotFoundError:
                    continue
        return out

    def journal(
        self, start: int | None = None, *, reverse: bool = False, limit: int | None = None
    ) -> Iterator[JournalEntry]:
        """``Store.journal``; a restricted handle reads only the entries of what it sees.

        Entries of hidden memories, of edges touching one, of episodes it may not see, and
        store-wide entries are left out (the sequence numbers show the gaps); ``limit`` counts
        the entries returned, so a reader gets up to ``limit`` of those it may see.
        """
        entries = self._engine.journal(start, reverse=reverse, limit=limit)  # checked, read now
        if self._as is None:
            return entries
        if limit is None:
            return iter(self._visible_entries(list(entries)))
        # ``limit`` counts the entries the reader gets: read on in pages past hidden ones
        out: list[JournalEntry] = []
        page, asked = list(entries), limit
        while True:
            out += self._visible_entries(page)
            if len(out) >= limit or len(page) < asked:  # enough, or the journal's end
                return iter(out[:limit])
            after = page[-1].seq + (-1 if reverse else 1)
            if after < 1:
                return iter(out)
            asked = max(limit, 64)
            page = list(self._engine.journal(after, reverse=reverse, limit=asked))

    def _visible_entries(self, entries: list[JournalEntry]) -> list[JournalEntry]:
        rd, now = self._as, self._now()
        assert rd is not None
        out: list[JournalEntry] = []
        with self._kv.read() as txn:
            for entry in entries:
                if entry.id is None:
                    continue
                try:
                    if entry.kind in _EPISODE_KINDS:
                        if self._sees_episode(txn, self._engine.episode_record(txn, entry.id), rd):
                            out.append(entry)
                        continue
                    heads = [self._engine.head(txn, entry.id)]
                    if entry.dst is not None:
                        heads.append(self._engine.head(txn, entry.dst))
                except NotFoundError:
                    continue
                if all(self._sees(txn, rd, h, now) for h in heads):
                    out.append(entry)
        return out

    def attest(
        self, uris: Iterable[Uri | MemoryId | str], outcome: Outcome | str = Outcome.SUCCESS
    ) -> None:
        """``attest`` (use counters); a restricted handle attests only memories it sees."""
        uris = list(argcheck.items(uris, "uris"))
        if self._as is not None:
            for u in uris:
                self._check_visible(self._head_of(as_id(u, "uris")), None)
        self._attest(uris, outcome)

    def purge_episode(
        self,
        ref: MemoryId | str,
        reason: str,
        by: str | None = None,
        *,
        scrub: bool = True,
        wait: float = 30.0,
    ) -> Episode:
        """Erase an episode's text and chunks; its hash, times, links and journal stay.

        The memories drawn from it are not changed (purge them too if they repeat the text).
        As for ``purge``, an erasure record keeps fingerprints of what went, and with
        ``scrub`` (the default) no byte of it is left in the store's files on return.

        Raises:
            NotFoundError: no such episode. ValidationError: an empty reason, or a restricted
                handle (only the owner purges episodes).
            ErasurePendingError: as for ``purge``.
        """
        if self._as is not None:
            raise ValidationError(
                "actor", "read_only", f"only the owner ({self.owner}) purges episodes"
            )
        return self._engine.purge_episode(as_id(ref, "episode"), reason, by, scrub=scrub, wait=wait)


class ReaderView:
    """The store seen by one reader (``Cortex.view``): hidden memories look missing.

    A view hands out no handle of the store: its reads are the reader's, and its changes are
    made and journalled by the reader's actor, into the memories of the handle it came from.
    """

    def __init__(self, cx: Cortex, reader: Reader) -> None:
        self._cx = cx._acting_for(reader)
        self.reader = reader

    @property
    def owner(self) -> str:
        """The actor that owns the store."""
        return self._cx.owner

    def find(self, query: Query) -> Result:
        """``Cortex.find`` as this reader."""
        if not isinstance(query, Query):
            raise ValidationError(
                "query", "type", f"find takes a Query, got {type(query).__name__}"
            )
        return self._cx.find(msgspec.structs.replace(query, reader=self.reader))

    def context(self, verb: Verb | str, objects: Sequence[Any] | str = (), **kw: Any) -> Bundle:
        """``Cortex.context`` as this reader."""
        kw.pop("reader", None)
        return self._cx.context(verb, objects, reader=self.reader, **kw)

    def search(self, question: str, *, limit: int = 10) -> SearchResult:
        """``Cortex.search`` as this reader."""
        return self._cx.search(question, limit=limit, reader=self.reader)

    def about(
        self,
        subject: str,
        attribute: str | None = None,
        *,
        limit: int = 100,
        as_of: datetime | None = None,
    ) -> Result:
        """``Cortex.about`` as this reader."""
        return self._cx.about(subject, attribute, limit=limit, reader=self.reader, as_of=as_of)

    def facets(
        self,
        window: Window | None = None,
        by: Literal["type", "tag", "subject", "counterparty"] = "type",
        *,
        types: Sequence[MemoryType | str] = (),
    ) -> dict[str, int]:
        """``Cortex.facets`` as this reader."""
        return self._cx.facets(window, by, types=types, reader=self.reader)

    def _facets_many(
        self,
        window: Window | None,
        dims: Sequence[Literal["type", "tag", "subject", "counterparty"]],
        *,
        types: Sequence[MemoryType | str] = (),
        reader: Reader | None = None,
    ) -> dict[str, dict[str, int]]:
        """``Cortex._facets_many`` as this reader."""
        return self._cx._facets_many(window, dims, types=types, reader=self.reader)

    def resolve(self, uri: Uri | str) -> Memory:
        """``Cortex.resolve`` as this reader."""
        return self._cx.resolve(uri, reader=self.reader)

    def resolve_latest(self, ref: Uri | MemoryId | str) -> Memory:
        """``Cortex.resolve_latest`` as this reader."""
        return self._cx.resolve_latest(ref, reader=self.reader)

    def history(self, ref: Uri | MemoryId | str) -> list[Memory]:
        """``Cortex.history`` as this reader."""
        return self._cx.history(ref, reader=self.reader)

    def resolve_as_of(
        self, ref: Uri | MemoryId | str, when: datetime, *, known_at: datetime | None = None
    ) -> Memory:
        """``Cortex.resolve_as_of`` as this reader."""
        return self._cx.resolve_as_of(ref, when, known_at=known_at, reader=self.reader)

    def episode(self, ref: MemoryId | str) -> Episode:
        """``Cortex.episode`` as this reader."""
        return self._cx.episode(ref, reader=self.reader)

    def core_get(
        self, section: str | None = None, *, as_of: datetime | None = None
    ) -> dict[str, Any]:
        """Core memory as this reader sees it (a hidden block reads as empty)."""
        return self._cx.core_get(section, as_of=as_of)

    def core_history(self, section: str, key: str) -> list[CoreChange]:
        """``Cortex.core_history`` as this reader (nothing for a hidden block)."""
        try:
            return self._cx.core_history(section, key)
        except NotFoundError:
            return []

    def core_update(self, section: str, key: str, value: str) -> Uri:
        """``Cortex.core_update`` through a writable scope that selects the block."""
        if not isinstance(value, str):
            raise ValidationError("value", "type", f"must be text, got {type(value).__name__}")
        _core_writable(self.resolve_latest, self._cx._as, section)
        return _core.change(self, section, key, value)

    def core_delete(self, section: str, key: str) -> Uri:
        """``Cortex.core_delete`` through a writable scope that selects the block."""
        _core_writable(self.resolve_latest, self._cx._as, section)
        return _core.change(self, section, key, None)

    def _writable(self, head: Head) -> None:
        now = self._cx._now()
        self._cx._check_visible(head, self.reader)  # hidden looks exactly like missing
        if not self.reader.can_write(head, self._cx.owner, now):
            raise ValidationError(
                "reader",
                "read_only",
                f"{self.reader.actor} may not write {head.id}: no writable scope of the reader "
                "selects it",
            )

    def write(
        self,
        data: Data,
        *,
        tags: Sequence[str] = (),
        frames: Sequence[FrameRef] = (),
        importance: int = 5,
        visibility: Visibility | str = Visibility.SCOPED,
        confidence: float = 1.0,
        provenance: Provenance | None = None,
        forms: Forms | None = None,
        valid_from: datetime | None = None,
        valid_until: datetime | None = None,
        expires_at: datetime | None = None,
        id: MemoryId | None = None,
        dedupe: bool | None = None,
        vector: Any = None,
        supersede: bool | None = None,
        sensitivity: Sensitivity | str | None = None,
    ) -> WriteResult:
        """Write through the reader's scope.

        Allowed when a writable, active scope selects the new memory (or the reader owns the
        store), at a sensitivity up to the reader's clearance. The version is created, and the
        write journalled, by the reader.

        Raises:
            ValidationError: no writable scope selects the memory, the level is above the
                reader's clearance (rule ``clearance``), or a field is invalid.
        """
        data_codec(data)  # a ValidationError for anything that is not typed data
        cx = self._cx
        mid = id if id is not None else new_id()
        now = cx._now()
        probe = Head(
            id=mid,
            type=data.TYPE,
            current_version=1,
            actor_scope=cx._engine.space or cx.actor,
            visibility=Visibility.coerce(visibility) or Visibility.SCOPED,
            importance=importance if isinstance(importance, int) else 5,
            tags=encode_tags(tags),
            frames=argcheck.items(frames, "head.frames"),
            created_at=now,
            last_updated_at=now,
        )
        # the rule of updates (Reader.can_write): a non-owner writes only what it can see, so
        # never a private memory
        if not self.reader.can_write(probe, cx.owner, now):
            raise ValidationError(
                "reader",
                "read_only",
                f"{self.reader.actor} holds no writable scope that selects "
                f"a {data.TYPE.type_name} with these tags and frames",
            )
        options: dict[str, Any] = {
            "tags": tags,
            "frames": frames,
            "importance": importance,
            "visibility": visibility,
            "created_by": self.reader.actor,
            "confidence": confidence,
            "provenance": provenance,
            "forms": forms,
            "valid_from": valid_from,
            "valid_until": valid_until,
            "expires_at": expires_at,
            "id": mid,
            "vector": vector,
            "supersede": supersede,
            "sensitivity": sensitivity,
        }
        if id is None and (dedupe if dedupe is not None else cx.dedupe):
            del options["id"]  # a duplicate is looked for only among what the reader sees
        return cx._write(data, dedupe, self.reader, options)

    def update(self, ref: Uri | MemoryId | str, data: Data, **kw: Any) -> WriteResult:
        """``Cortex.update`` through a writable scope that selects the memory."""
        mid = as_id(ref, "uri")
        self._writable(self._cx._head_of(mid))
        if kw.setdefault("created_by", self.reader.actor) != self.reader.actor:
            raise ValidationError(
                "created_by", "reader", f"a write through a view is by {self.reader.actor}"
            )
        expected = kw.pop("expected_version", None)
        now = self._cx._now()
        spec = NewMemory(data=data, id=mid, **kw)
        return self._cx._engine.update_version(
            mid, spec, now, expected, self._cx._visible_to(self.reader, now)
        )

    def tombstone(self, ref: Uri | MemoryId | str, reason: str) -> Tombstone:
        """``Cortex.tombstone`` through a writable scope that selects the memory."""
        self._writable(self._cx._head_of(as_id(ref, "uri")))
        return self._cx.tombstone(ref, reason, by=self.reader.actor)

    def ingest(self, content: str, **options: Any) -> IngestResult:
        """``Cortex.ingest`` by the reader: it needs an active writable scope (or ownership).

        The episode is created, and journalled, by the reader's actor.

        Raises:
            ValidationError: the reader holds no active writable scope; as ``Cortex.ingest``.
        """
        cx = self._cx
        now = cx._now()
        if self.reader.actor != cx.owner and not any(
            s.writable and s.active(now) for s in self.reader.scopes
        ):
            raise ValidationError(
                "reader", "read_only", f"{self.reader.actor} holds no writable scope"
            )
        return cx.ingest(content, **options)


def _core_writable(
    resolve_latest: Callable[[MemoryId], Memory], reader: Reader | None, section: str
) -> None:
    """Refuse a core change by another actor than the owner when the block is not visible.

    The blocks are the owner's: another actor changes one only through a writable scope that
    selects it, and never creates one (its fixed id would be taken by the wrong actor).
    """
    if reader is None:
        return
    try:
        resolve_latest(_core.core_id(section))
    except NotFoundError:
        raise NotFoundError(
            f"core memory's {section} block is missing or not visible to {reader.actor}: the "
            "owner creates it, and a writable scope over it (e.g. tags ['core']) lets another "
            "actor change it"
        ) from None


_SAME_CONTENT: Final = "the same content (equal hash)"
_EPISODE_KINDS: Final = (
    JournalKind.EPISODE,
    JournalKind.EPISODE_PURGE,
    JournalKind.EPISODE_UPDATE,
)


def _name_terms(name: str) -> list[list[str]] | None:
    """The lexical index's terms every memory ``about(name)`` finds holds, in groups.

    ``name`` is a spelling ``norm_entity`` gave. A memory's entity field matches it when the
    field is the name's words, case aside, between punctuation and spaces (``_entity_pattern``),
    and the field is a line of the memory's full form, whose terms the lexical index holds: so
    the memory holds each token's term. Case-insensitive matching also takes a dotless ``ı``
    for an ``i`` (which folding keeps apart), so a token's group holds its spellings with any of
    its ``i``s dotless. None (the caller scans instead) for a name of other than ASCII, of no
    token, or with a token of more than four ``i``s.
    """
    if not name.isascii():
        return None
    groups: list[list[str]] = []
    for token in tokenize(name):
        at = [i for i, c in enumerate(token) if c == "i"]
        if len(at) > 4:
            return None
        group: set[str] = set()
        for mask in range(1 << len(at)):
            chars = list(token)
            for bit, i in enumerate(at):
                if mask >> bit & 1:
                    chars[i] = "\u0131"
            got = doc_terms("".join(chars))
            if len(got) != 1:
                return None
            group.add(got[0])
        groups.append(sorted(group))
    return groups or None


def _entity_pattern(name: str) -> str:
    """A regex matching the spellings of ``name`` that normalise alike (``norm_entity``)."""
    words = norm_entity(name).split(" ")
    return r"(?i)^[\W_]*" + r"\s+".join(re.escape(w) for w in words) + r"[\W_]*$"


def _predicate_pattern(predicate: str) -> str:
    """A regex matching the spellings of a predicate that normalise alike (``norm_predicate``)."""
    parts = norm_predicate(predicate).split("_")
    return r"(?i)^[\W_]*" + r"[\W_]+".join(re.escape(w) for w in parts) + r"[\W_]*$"


class ChainLink(msgspec.Struct, frozen=True, kw_only=True):
    """One memory of a temporal chain (``Cortex.chain``)."""

    memory: Memory
    since: datetime
    """When its claim starts being true (``valid_from``, a Fact's ``observed_at``, or when
    it was written)."""
    until: datetime | None = None
    """When a later memory took over (``None``: the current truth)."""
    superseded_by: MemoryId | None = None

    @property
    def current(self) -> bool:
        """Whether this is the chain's current truth."""
        return self.superseded_by is None


class Conflict(msgspec.Struct, frozen=True, kw_only=True):
    """Two current memories that contradict each other at equal time and confidence."""

    a: Memory
    b: Memory
    since: datetime


def _embedder_of(meta: VectorsMeta) -> Embedder:
    """The embedder of a store's recorded model: one that ships here, else its declaration."""
    try:
        e = embedder_for(meta.model_id)
    except ValidationError:  # a model cortex does not ship: its vectors come with the writes
        return External(meta.model_id, meta.dim)
    return e if e.dim == meta.dim else External(meta.model_id, meta.dim)


def _vector_or_none(txn: ReadTxn, mid: MemoryId) -> VectorRecord | None:
    """The stored vector of ``mid``; ``None`` when there is none or it is damaged (re-embed)."""
    try:
        row = row_of(txn, mid)
        if row is None:
            return None
        key = vec_key(row)
        raw = txn.get(key)
        if raw is None:
            return None
        rec: VectorRecord = decode_trusted(VECTOR_RECORD, key, raw)
    except IntegrityError:
        return None
    return rec
