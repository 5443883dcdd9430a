"""Salvage: copy every record of a damaged store that still reads and checks into a new store.

The damaged file is never opened with LMDB (it may crash on it): ``cortex.storage.pages`` reads the
records off every page that still parses. Each record must pass its checksum and decode
strictly; each version's data must match its hash. Whole memories (the head and every version),
edges whose endpoints survive and episodes go into the new store through the import path, which
rebuilds every index (the claim index of the current memories included); stored vectors, use
counters and write-budget counts follow. What could not be recovered is named by id, from the
journal entries, edges and index keys that survive. ``specs/storage.md`` §10 is normative.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Literal, NamedTuple

import msgspec

from cortex import argcheck
from cortex.engine.heads import decode_counters, head_row, put_counters
from cortex.engine.importer import Imported
from cortex.engine.journal import JOURNAL_CODEC, JournalEntry, JournalKind, JournalWriter
from cortex.engine.store import FORMAT_VERSION, Store, edge_of
from cortex.engine.values import (
    EDGE_CODEC,
    FORMAT_CODEC,
    Edge,
    EdgeRecord,
    FormatRecord,
    VerifyReport,
)
from cortex.errors import (
    CodecError,
    CortexError,
    IntegrityError,
    NonCanonicalError,
    ValidationError,
)
from cortex.index.vectors import VECTOR_RECORD, VECTORS_META, VectorRecord, VectorsMeta
from cortex.model.codec import HEAD, HEAD_V14, VERSION, VERSION_V14, VERSION_V17, StructCodec
from cortex.model.enums import EdgeType, MemoryType, Sensitivity
from cortex.model.episode import check_episode, decode_episode
from cortex.model.hashing import content_hash
from cortex.model.ids import MemoryId
from cortex.model.records import Episode, Head, Version
from cortex.rules.aliases import ALIAS_PREFIX, chained
from cortex.rules.aliases import decode_record as decode_alias
from cortex.rules.salience import SalienceState
from cortex.rules.sensitivity import decode_level
from cortex.storage.keys import (
    EDGE_FROM,
    EDGE_TO,
    EPISODE,
    EPISODE_MEMORY,
    IDX_ACTOR_OBJ,
    IDX_CLAIM,
    IDX_FRAME,
    IDX_PIN,
    IDX_TAG,
    IDX_TYPE,
    JOURNAL,
    LEX_DOC,
    LEX_DOCNO,
    SALIENCE,
    SENS,
    TASK_PREFIX,
    VEC,
    VERSION_INFIX,
    edge_from_key,
    meta_key,
    parse_edge_key,
    parse_journal_key,
    parse_sens_key,
    parse_type_key,
    prefix_end,
    show_key,
    vec_key,
)
from cortex.storage.keys import (
    HEAD as HEAD_PREFIX,
)
from cortex.storage.keys import ID as ID_PREFIX
from cortex.storage.keys import (
    VERSION as VERSION_PREFIX,
)
from cortex.storage.kv import WriteTxn, seal, unseal
from cortex.storage.pages import Found, read_records, short_path
from cortex.storage.pgkv import is_url

__all__ = ["SalvageLoss", "SalvageReport", "salvage"]

Progress = Callable[[str, int, int], None]

_EPISODE_KINDS: Final = frozenset(
    {JournalKind.EPISODE, JournalKind.EPISODE_PURGE, JournalKind.EPISODE_UPDATE}
)
"""Journal kinds whose id names an episode (episode and memory ids are separate namespaces)."""
_EDGE_KINDS: Final = frozenset({JournalKind.ADD_EDGE, JournalKind.REMOVE_EDGE})
_COUNTERS_FORMAT: Final = 11
"""The format whose heads record that their memory has use counters (``has_counters``)."""


class SalvageLoss(msgspec.Struct, frozen=True, kw_only=True):
    """Something the damaged store held that the new store does not.

    Attributes:
        kind: ``memory``, ``episode``, ``edge``, or ``counters``: the use counters of a
            recovered memory whose head says it had some (format 11) and whose record was lost;
            the new store's head says it has none, and the memory reads as never used.
        id: the memory's or episode's id; for an edge ``"<src> <type> <dst>"``.
        type: the memory's type name when anything still names it.
        why: what was found (or not) of it.
        seen_in: where its id still appears: ``journal``, ``edges``, ``index``, ``records``.
    """

    kind: Literal["memory", "episode", "edge", "counters"]
    id: str
    type: str | None = None
    why: str
    seen_in: tuple[str, ...] = ()


class SalvageReport(msgspec.Struct, frozen=True, kw_only=True):
    """What ``salvage`` read, recovered and lost.

    Attributes:
        source: the damaged store.
        dest: the new store.
        pages: pages in the damaged file's snapshot.
        damaged_pages: the page problems met (``data.mdb page N: ...``).
        records_read: key-value pairs read off the pages that parse.
        records_bad: those that failed their checksum, decoding or hash.
        memories: memories recovered (each with every version).
        versions: versions recovered.
        edges: edges recovered.
        episodes: episodes recovered.
        vectors: stored vectors recovered.
        salience: use-counter records recovered.
        tasks: write-budget counts (``task/``) carried over as they were (entity aliases,
            ``ent/a/``, are carried too).
        restricted: memories and episodes recovered as ``restricted`` because their level
            could not be read (its record failed its checks, or the ``sens/`` keys lay on
            damaged pages): salvage never lowers a level it cannot read (``specs/storage.md``
            §10); the owner sees them and relabels them with ``update_head`` or
            ``set_episode_sensitivity``.
        lost: what could not be recovered, by id.
        notes: anything else the caller should know.
        verify_ok: whether the new store verifies.
    """

    source: str
    dest: str
    pages: int
    damaged_pages: tuple[str, ...]
    records_read: int
    records_bad: int
    memories: int
    versions: int
    edges: int
    episodes: int
    vectors: int
    salience: int
    tasks: int
    restricted: int
    lost: tuple[SalvageLoss, ...]
    notes: tuple[str, ...]
    verify_ok: bool

    @property
    def complete(self) -> bool:
        """Nothing was lost and no page was damaged."""
        return not self.lost and not self.damaged_pages and not self.records_bad


class _Sightings:
    """Where each id is still named: journal entries, edge keys, index keys, record keys."""

    def __init__(self) -> None:
        self.memories: dict[MemoryId, set[str]] = {}
        self.types: dict[MemoryId, MemoryType] = {}
        self.episodes: dict[MemoryId, set[str]] = {}
        self.edges: dict[tuple[MemoryId, EdgeType, MemoryId], set[str]] = {}

    def memory(self, mid: MemoryId, where: str, mtype: MemoryType | None = None) -> None:
        self.memories.setdefault(mid, set()).add(where)
        if mtype is not None:
            self.types.setdefault(mid, mtype)

    def episode(self, eid: MemoryId, where: str) -> None:
        self.episodes.setdefault(eid, set()).add(where)

    def edge(self, s: MemoryId, et: EdgeType, d: MemoryId, where: str) -> None:
        self.edges.setdefault((s, et, d), set()).add(where)
        self.memory(s, "edges")
        self.memory(d, "edges")


class _Records:
    """The damaged store's records, checked, by keyspace."""

    def __init__(self, found: Found) -> None:
        self.bad = 0
        self.heads: dict[MemoryId, Head] = {}
        self.head_problems: dict[MemoryId, str] = {}
        self.versions: dict[MemoryId, dict[int, Version]] = {}
        self.version_problems: dict[MemoryId, dict[int, str]] = {}
        self.edges: dict[tuple[MemoryId, EdgeType, MemoryId], set[bytes]] = {}
        self.edge_problems: dict[tuple[MemoryId, EdgeType, MemoryId], str] = {}
        self.episodes: dict[MemoryId, Episode] = {}
        self.episode_problems: dict[MemoryId, str] = {}
        self.journal: dict[int, JournalEntry] = {}
        self.vectors: dict[MemoryId, VectorRecord] = {}
        self.vectors_meta: VectorsMeta | None = None
        self.salience: dict[MemoryId, SalienceState] = {}
        self.tasks: dict[bytes, bytes] = {}
        self.aliases: dict[bytes, bytes] = {}
        self.levels: dict[tuple[bool, MemoryId], Sensitivity] = {}
        """Sensitivity levels read, by ``(is_episode, id)``."""
        self.unreadable_levels: set[tuple[bool, MemoryId]] = set()
        """Ids whose ``sens/`` record is there but fails its checks."""
        self.labels_lost = False
        """Whether a ``sens/`` record was found whose key does not parse."""
        self.format: FormatRecord | None = None
        self.seen = _Sightings()
        self.said: dict[MemoryId, _Said] = {}
        self.rows: dict[bytes, MemoryId] = {}  # format 21: a head's row (4 bytes) -> its id
        # the heads first: the records keyed by row (format 21) are then named by their id
        heads_first = sorted(
            found.records.items(), key=lambda kv: not kv[0].startswith(HEAD_PREFIX)
        )
        for key, value in heads_first:
            try:
                self._take(key, value)
            except Exception:  # damaged bytes may fail any decoder in any way: a bad record
                self.bad += 1
        self.said = _journal_says(self.journal)

    def _strict(self, codec: StructCodec[Any], key: bytes, value: bytes) -> Any:
        return codec.decode(unseal(key, value), show_key(key))

    def _record(self, codecs: tuple[StructCodec[Any], ...], key: bytes, value: bytes) -> Any:
        """A head or version, strictly, in the encoding of its store's format.

        ``codecs`` newest first: a record the first finds not canonical is tried with the next.
        A store of formats 1-14 holds its forms wide (``HEAD_V14``, ``VERSION_V14``); one of
        formats 15-17 its versions' medium forms as text (``VERSION_V17``).
        """
        for codec in codecs[:-1]:
            try:
                return self._strict(codec, key, value)
            except NonCanonicalError:
                pass
        return self._strict(codecs[-1], key, value)

    def _owner(self, key: bytes, prefix: bytes) -> MemoryId:
        """The memory a per-memory key names: its id16 (formats 1-20) or its row (21).

        Raises:
            ValueError: a row no recovered head has (its memory cannot be told).
        """
        rest = key[len(prefix) :]
        if len(rest) >= 16:
            return MemoryId(rest[:16])
        mid = self.rows.get(rest[:4])
        if mid is None:
            raise ValueError(key)
        return mid

    def _take(self, key: bytes, value: bytes) -> None:
        if key.startswith(HEAD_PREFIX):
            rest = key[len(HEAD_PREFIX) :]
            try:
                head: Head = self._record((HEAD, HEAD_V14), key, value)
            except (CodecError, IntegrityError) as exc:
                if len(rest) == 16:
                    self.head_problems[MemoryId(rest)] = f"its head is damaged ({exc})"
                raise
            mid = MemoryId(rest) if len(rest) == 16 else head.id
            self.seen.memory(mid, "records")
            if head.id != mid or len(rest) not in (4, 16):
                self.head_problems[mid] = f"its head record names {head.id}"
                raise ValueError(mid)
            if len(rest) == 4:
                self.rows[rest] = mid
            self.heads[mid] = head
            self.seen.memory(mid, "records", head.type)
        elif key.startswith(ID_PREFIX):
            if len(key) == len(ID_PREFIX) + 16:
                self.seen.memory(MemoryId(key[len(ID_PREFIX) :]), "index")
        elif key.startswith(VERSION_PREFIX):
            if len(key) == len(VERSION_PREFIX) + 4 + 8:  # format 21: mv/ row u64(n)
                mid = self._owner(key, VERSION_PREFIX)
                n = int.from_bytes(key[-8:], "big")
            else:
                mid, n = MemoryId(key[3:19]), int.from_bytes(key[-8:], "big")
                if len(key) != 30 or key[19:22] != VERSION_INFIX:
                    raise ValueError(key)
            self.seen.memory(mid, "records")
            problems = self.version_problems.setdefault(mid, {})
            try:
                v: Version = self._record((VERSION, VERSION_V17, VERSION_V14), key, value)
            except (CodecError, IntegrityError) as exc:
                problems[n] = f"version {n} is damaged ({exc})"
                raise
            if (v.id, v.version) != (mid, n):
                problems[n] = f"the record under version {n} is {v.id}#{v.version}"
                raise ValueError(mid)
            if v.data is not None and content_hash(v.type, v.data) != v.hash:
                problems[n] = f"version {n}'s data does not match its hash"
                raise ValueError(mid)
            self.versions.setdefault(mid, {})[n] = v
            self.seen.memory(mid, "records", v.type)
        elif key.startswith((EDGE_FROM, EDGE_TO)):
            edge = parse_edge_key(key)  # (src, type, dst) of either half
            self.seen.edge(*edge, "edges")
            try:
                self._strict(EDGE_CODEC, key, value)
            except (CodecError, IntegrityError) as exc:
                self.edge_problems.setdefault(edge, f"its record is damaged ({exc})")
                raise
            self.edges.setdefault(edge, set()).add(value)
        elif key.startswith(EPISODE_MEMORY):
            rest = key[len(EPISODE_MEMORY) :]
            if len(rest) == 32:
                self.seen.episode(MemoryId(rest[:16]), "index")
                self.seen.memory(MemoryId(rest[16:]), "index")
        elif key.startswith(EPISODE):
            eid = MemoryId(key[len(EPISODE) :])
            self.seen.episode(eid, "records")
            try:
                ep = decode_episode(unseal(key, value))
                check_episode(ep)
            except (CodecError, IntegrityError, ValidationError) as exc:
                self.episode_problems[eid] = f"its record is damaged ({exc})"
                raise
            if ep.id != eid:
                self.episode_problems[eid] = f"its record names {ep.id}"
                raise ValueError(eid)
            self.episodes[eid] = ep
        elif key.startswith(JOURNAL):
            entry: JournalEntry = self._strict(JOURNAL_CODEC, key, value)
            if entry.seq != parse_journal_key(key):
                raise ValueError(key)
            self.journal[entry.seq] = entry
            self._journal_sighting(entry)
        elif key.startswith(IDX_TYPE):
            t = parse_type_key(key)
            self.seen.memory(t.id, "index", t.type)
        elif key.startswith(LEX_DOC):
            self.seen.memory(self._owner(key, LEX_DOC), "index")
        elif key.startswith((IDX_TAG, IDX_FRAME, IDX_ACTOR_OBJ, IDX_PIN, IDX_CLAIM)):
            if len(key) >= 16 + 4:
                self.seen.memory(MemoryId(key[-16:]), "index")
        elif key.startswith(LEX_DOCNO):  # a document number names its memory in the value
            named = unseal(key, value)
            if len(named) != 16:
                raise ValueError(key)
            self.seen.memory(MemoryId(named), "index")
        elif key.startswith(VEC):
            mid = self._owner(key, VEC)
            self.vectors[mid] = self._strict(VECTOR_RECORD, key, value)
        elif key.startswith(SALIENCE):
            mid = self._owner(key, SALIENCE)
            # a record naming another memory (a damaged key) is not this one's: left out
            self.salience[mid] = decode_counters(key, value, mid)
        elif key.startswith(SENS):
            try:
                which = parse_sens_key(key)
            except CodecError:
                self.labels_lost = True  # whose label it was cannot be told
                raise
            try:
                self.levels[which] = decode_level(key, value)
            except IntegrityError:
                self.unreadable_levels.add(which)
                raise
        elif key.startswith(TASK_PREFIX):
            if len(key) != len(TASK_PREFIX) + 16 or len(unseal(key, value)) != 8:
                raise ValueError(key)
            self.tasks[key] = value
        elif key.startswith(ALIAS_PREFIX):
            decode_alias(key, value)  # checked: the name normalises to the key
            self.aliases[key] = value
        elif key == meta_key("format"):
            self.format = self._strict(FORMAT_CODEC, key, value)
        elif key == meta_key("vectors"):
            self.vectors_meta = self._strict(VECTORS_META, key, value)

    def _journal_sighting(self, e: JournalEntry) -> None:
        if e.id is None:
            return
        if e.kind in _EPISODE_KINDS:
            self.seen.episode(e.id, "journal")
        elif e.edge is not None and e.dst is not None:
            self.seen.edge(e.id, e.edge, e.dst, "journal")
        elif e.kind not in _EDGE_KINDS:
            self.seen.memory(e.id, "journal", e.type)


class _Said(NamedTuple):
    """What the surviving journal says of one memory's latest state."""

    version: int
    tombstoned: bool
    purged: bool


def _journal_says(journal: dict[int, JournalEntry]) -> dict[MemoryId, _Said]:
    said: dict[MemoryId, _Said] = {}
    for seq in sorted(journal):
        e = journal[seq]
        if e.id is None or e.kind in _EPISODE_KINDS or e.edge is not None:
            continue
        old = said.get(e.id, _Said(0, False, False))
        said[e.id] = _Said(
            max(old.version, e.version or 0),
            old.tombstoned or e.kind in (JournalKind.TOMBSTONE, JournalKind.PURGE),
            old.purged or e.kind is JournalKind.PURGE,
        )
    return said


def _stale(head: Head, said: _Said | None) -> str | None:
    """Why ``head`` is older than the surviving journal says, or None."""
    if said is None:
        return None
    if said.version > head.current_version:
        return f"its head is at version {head.current_version}; the journal names {said.version}"
    if said.purged and (head.tombstone is None or head.tombstone.purged_at is None):
        return "the journal records a purge its head does not show"
    if said.tombstoned and head.tombstone is None:
        return "the journal records a tombstone its head does not show"
    return None


def salvage(
    source: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    *,
    actor: str | None = None,
    progress: Progress | None = None,
) -> SalvageReport:
    """Copy every record of the store at ``source`` that still reads and checks into ``dest``.

    ``source`` is read page by page without LMDB (``cortex.storage.pages``), so a file LMDB would
    crash on, refuse or has truncated can be salvaged; it is never written. A memory is recovered
    with its head and every version, each passing its checksum, decoding strictly and (for
    versions) matching its hash, and its head no older than the surviving journal; an edge when
    a half of it checks and both endpoints are recovered; an episode when its record checks.
    ``dest`` (a new directory) gets them through the import path, which rebuilds every index,
    then the stored vectors and use counters of recovered memories and every task's write
    count (``task/``, as it was). Its journal starts anew: one ``import`` entry per memory,
    edge and episode, one ``embed`` entry per vector.

    Args:
        source: the damaged store's directory.
        dest: a new directory for the recovered store.
        actor: the owner of the new store when neither the damaged one's ``meta/format`` nor
            its journal's ``init`` entry survives (default ``salvage``); the recorded owner
            always wins.
        progress: called as ``progress(step, done, total)``.

    Returns:
        What was recovered, and what was lost by id.

    Raises:
        CortexError: ``source`` is not a store directory, or ``dest`` exists.
        ValidationError: a path, the actor or the callback is of the wrong type.
    """
    source, dest = argcheck.path(source, "source"), argcheck.path(dest, "dest")
    argcheck.callback(progress, "progress")
    if actor is not None:
        argcheck.text(actor, "actor", max_bytes=256)
    for which, target in (("damaged", source), ("new", dest)):
        if is_url(target):  # Path() would fold "postgresql://" into a relative directory
            raise CortexError(
                f"salvage reads and writes LMDB directories, and the {which} store is a URL: a "
                "PostgreSQL store's files are the server's (repair them with PostgreSQL's "
                "tools); salvage into a directory, then `cortex copy` it into PostgreSQL"
            )
    src, out = Path(source), Path(dest)
    shown = short_path(src)
    try:
        if not (src / "data.mdb").is_file():
            raise CortexError(f"no store at {shown} (data.mdb missing)")
        if out.exists() or out.is_symlink():
            raise CortexError(f"{short_path(out)} exists; salvage writes a new store")
    except OSError as exc:
        raise CortexError(f"cannot salvage {shown}: {exc.strerror}") from exc

    def tick(step: str, done: int, total: int) -> None:
        if progress is not None:
            progress(step, done, total)

    tick("read", 0, 1)
    try:
        found = read_records(src)
    except OSError as exc:
        raise CortexError(f"cannot read {shown}: {exc.strerror}") from exc
    tick("read", 1, 1)
    recs = _Records(found)
    notes: list[str] = []
    if found.ambiguous:
        notes.append(
            f"{len(found.ambiguous)} records were found with two different values on pages cut "
            "off from the tree and were left out"
        )
    if recs.format is not None and recs.format.format_version != FORMAT_VERSION:
        notes.append(
            f"the damaged store has format {recs.format.format_version}; the new one has "
            f"format {FORMAT_VERSION}"
        )
    lost: list[SalvageLoss] = []
    memories: list[tuple[Head, list[Version]]] = []
    kept: set[MemoryId] = set()
    heads = recs.heads
    for n, (mid, head) in enumerate(sorted(heads.items())):
        tick("check", n, len(heads))
        why = _memory_problem(mid, head, recs)
        if why is None:
            versions = [recs.versions[mid][i] for i in range(1, head.current_version + 1)]
            try:
                Imported(head, versions)
            except (CodecError, IntegrityError, ValidationError) as exc:
                why = f"its records do not check together ({exc})"
            else:
                memories.append((head, versions))
                kept.add(mid)
                continue
        lost.append(_lost_memory(mid, why, recs))
    for mid in sorted(set(recs.seen.memories) - set(heads)):
        why = recs.head_problems.get(mid) or "its head was not found (it was on a damaged page)"
        have = sorted(recs.versions.get(mid, {}))
        if have:
            why += f"; versions {have} survive"
        lost.append(_lost_memory(mid, why, recs))
    edges: list[Edge] = []
    for key in sorted(set(recs.edges) | set(recs.edge_problems) | set(recs.seen.edges)):
        s, et, d = key
        name = f"{s} {et.label} {d}"
        seen = tuple(sorted(recs.seen.edges.get(key, ())))
        values = recs.edges.get(key, set())
        if len(values) != 1:  # none checks, or the two halves disagree: neither is trusted
            why = (
                "its two halves disagree"
                if values
                else recs.edge_problems.get(key, "its record was not found")
            )
            lost.append(SalvageLoss(kind="edge", id=name, why=why, seen_in=seen))
            continue
        missing = [m for m in (s, d) if m not in kept]
        if missing:
            why = f"its endpoint {missing[0]} was not recovered"
            lost.append(SalvageLoss(kind="edge", id=name, why=why, seen_in=seen))
            continue
        (value,) = values
        rec: EdgeRecord = EDGE_CODEC.decode(unseal(edge_from_key(s, et, d), value), name)
        edges.append(edge_of(s, et, d, rec))
    _counters(recs, memories, lost, notes)
    episodes = [recs.episodes[e] for e in sorted(recs.episodes)]
    for eid in sorted(set(recs.seen.episodes) - set(recs.episodes)):
        why = recs.episode_problems.get(eid) or "its record was not found"
        seen = tuple(sorted(recs.seen.episodes[eid]))
        lost.append(SalvageLoss(kind="episode", id=str(eid), why=why, seen_in=seen))
    if any(p.startswith("meta page") for p in (x.what for x in found.problems)):
        notes.append(
            "a meta page is damaged: the store was read as of the other meta page's commit, "
            "which may be one commit older"
        )
    if not found.orphans_searched and found.problems:
        notes.append("pages cut off from the tree were not searched (see the damaged pages)")
    levels, episode_levels, restricted = _levels(found, recs, memories, episodes, notes)
    owner = _owner(recs, actor)
    tick("write", 0, 1)
    vectors, salience, tasks = _write(
        out,
        owner,
        (memories, edges, episodes),
        (levels, episode_levels),
        recs,
        kept,
        notes,
    )
    tick("write", 1, 1)
    tick("verify", 0, 1)
    with Store.open(out, actor=owner, create=False) as new:
        report: VerifyReport = new.verify()
    tick("verify", 1, 1)
    return SalvageReport(
        source=str(src),
        dest=str(out),
        pages=found.pages,
        damaged_pages=tuple(str(p) for p in found.problems),
        records_read=len(found.records),
        records_bad=recs.bad,
        memories=len(memories),
        versions=sum(len(v) for _, v in memories),
        edges=len(edges),
        episodes=len(episodes),
        vectors=vectors,
        salience=salience,
        tasks=tasks,
        restricted=restricted,
        lost=tuple(lost),
        notes=tuple(notes),
        verify_ok=report.ok,
    )


def _counters(
    recs: _Records,
    memories: list[tuple[Head, list[Version]]],
    lost: list[SalvageLoss],
    notes: list[str],
) -> None:
    """Match the recovered use counters with the recovered heads (format 11).

    A head that says its memory has counters whose record was lost: the loss is reported
    (the new store's head has the flag clear; the memory reads as never used). A record whose
    memory's head says it has none is not that memory's (its key is damaged and moved it onto
    another id): it is dropped, and a note says so. Before format 11 heads had no flag, and
    every record of a recovered memory is kept.
    """
    flagged = recs.format is None or recs.format.format_version >= _COUNTERS_FORMAT
    stray = 0
    for head, _versions in memories:
        has = head.id in recs.salience
        if head.has_counters and not has:
            lost.append(
                SalvageLoss(
                    kind="counters",
                    id=str(head.id),
                    type=head.type.type_name,
                    why="its use-counter record was not found (on a damaged page, or its key "
                    "is damaged); it reads as never used",
                    seen_in=("records",),
                )
            )
        elif flagged and has and not head.has_counters:
            del recs.salience[head.id]
            stray += 1
    if stray:
        notes.append(
            f"{stray} use-counter records named a memory whose head says it has none (a "
            "damaged key moved them); they were left out"
        )


def _memory_problem(mid: MemoryId, head: Head, recs: _Records) -> str | None:
    """Why the memory ``mid`` cannot be recovered whole, or None."""
    have = recs.versions.get(mid, {})
    problems = recs.version_problems.get(mid, {})
    for n in range(1, head.current_version + 1):
        if n in problems:
            return problems[n]
        if n not in have:
            return f"version {n} was not found (it was on a damaged page)"
        if have[n].type is not head.type:
            return f"version {n} has type {have[n].type.type_name}, its head {head.type.type_name}"
    extra = sorted(set(have) - set(range(1, head.current_version + 1)))
    if extra:
        return f"its head is at version {head.current_version} but version {extra[0]} exists"
    return _stale(head, recs.said.get(mid))


def _lost_memory(mid: MemoryId, why: str, recs: _Records) -> SalvageLoss:
    mtype = recs.seen.types.get(mid)
    return SalvageLoss(
        kind="memory",
        id=str(mid),
        type=None if mtype is None else mtype.type_name,
        why=why,
        seen_in=tuple(sorted(recs.seen.memories.get(mid, ()))),
    )


def _owner(recs: _Records, actor: str | None) -> str:
    """Who owns the new store: the damaged store's owner if anything still names it.

    ``meta/format`` names it, or, when that record is lost, the journal's ``init`` entry;
    else ``actor`` (or ``salvage``). The owner is the one reader who sees every memory
    (``specs/query.md`` §3): a new owner would hide the old one's private and labelled
    memories from it.
    """
    if recs.format is not None:
        return recs.format.owner
    init = next((e for e in recs.journal.values() if e.kind is JournalKind.INIT), None)
    if init is not None:
        return init.by
    return actor or "salvage"


def _levels(
    found: Found,
    recs: _Records,
    memories: list[tuple[Head, list[Version]]],
    episodes: list[Episode],
    notes: list[str],
) -> tuple[dict[MemoryId, Sensitivity], dict[MemoryId, Sensitivity], int]:
    """The sensitivity of each recovered memory and episode, and how many became restricted.

    Since format 9 a level is in its head or episode record: it is recovered with the record.
    A format-8 store kept them under ``sens/``, and there a level is never lowered for want of
    reading it: a record whose ``sens/`` entry fails its checks is ``restricted``, and so is
    every record without an entry when entries may have been lost without a trace (the
    ``sens/`` keys lie in a key range of damaged pages, or an entry's key is damaged or names
    nothing else the store names). Purged records hold none.
    """
    # format 9 keeps the level in the sealed head or episode record, recovered with it; only
    # a format-8 store (sens/ entries) can have lost a level without a trace
    legacy = bool(recs.levels or recs.unreadable_levels or recs.labels_lost) or (
        recs.format is not None and recs.format.format_version < 9
    )
    end = prefix_end(SENS)
    uncertain = legacy and (
        recs.labels_lost
        or any((lo is None or lo < end) and (hi is None or hi > SENS) for lo, hi in found.suspect)
    )
    for is_episode, mid in list(recs.levels) + list(recs.unreadable_levels):
        if mid not in (recs.seen.episodes if is_episode else recs.seen.memories):
            uncertain = True  # a damaged key moved a level onto an id nothing else names
    out: tuple[dict[MemoryId, Sensitivity], dict[MemoryId, Sensitivity]] = ({}, {})
    restricted = 0
    items = [
        *(
            (
                False,
                h.id,
                h.tombstone is not None and h.tombstone.purged_at is not None,
                h.sensitivity,
            )
            for h, _ in memories
        ),
        *((True, ep.id, ep.content is None, ep.sensitivity) for ep in episodes),
    ]
    for is_episode, mid, purged, own in items:
        if purged:
            continue
        level = recs.levels.get((is_episode, mid), own)
        if level is None and ((is_episode, mid) in recs.unreadable_levels or uncertain):
            level = Sensitivity.RESTRICTED
            restricted += 1
        if level is not None and level is not Sensitivity.INTERNAL:
            out[is_episode][mid] = level
    if restricted:
        notes.append(
            f"{restricted} memories and episodes were recovered as restricted: their "
            "sensitivity could not be read (a sens/ record failed its checks, or lay on "
            "damaged pages), and salvage never lowers a level. The owner sees them; relabel "
            "with update_head(ref, sensitivity=...) or set_episode_sensitivity(id, ...)"
        )
    return out[0], out[1], restricted


def _write(  # noqa: PLR0917 - private: the pieces of one salvage
    out: Path,
    owner: str,
    records: tuple[list[tuple[Head, list[Version]]], list[Edge], list[Episode]],
    levels: tuple[dict[MemoryId, Sensitivity], dict[MemoryId, Sensitivity]],
    recs: _Records,
    kept: set[MemoryId],
    notes: list[str],
) -> tuple[int, int, int]:
    """Create the new store and write what was recovered: (vectors, use counters, tasks)."""
    memories, edges, episodes = records
    try:
        with Store.open(out, actor=owner, create=True) as new:
            new.import_records(
                memories,
                edges,
                episodes,
                sensitivity=levels[0],
                episode_sensitivity=levels[1],
            )
            return new.kv.write(
                lambda txn: _extras(new, txn, memories=memories, recs=recs, kept=kept, notes=notes)
            )
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)  # nothing half-written is left behind
        raise


def _extras(
    new: Store,
    txn: WriteTxn,
    *,
    memories: list[tuple[Head, list[Version]]],
    recs: _Records,
    kept: set[MemoryId],
    notes: list[str],
) -> tuple[int, int, int]:
    """Stored vectors (one ``embed`` entry each), use counters and task write counts.

    The use counters are those of the recovered memories; the write-budget counts are every
    task's, as they were (a spent budget stays spent).
    """
    meta = recs.vectors_meta
    vectors = 0
    if meta is not None:
        journal = JournalWriter(txn, new.now(), new.actor)
        live = [(h, vs) for h, vs in memories if h.tombstone is None]
        missing = 0
        for head, _versions in live:
            rec = recs.vectors.get(head.id)
            if rec is None or (rec.model_id, rec.dim, rec.version) != (
                meta.model_id,
                meta.dim,
                head.current_version,
            ):
                missing += 1
                continue
            txn.put(vec_key(head_row(txn, head)), seal(VECTOR_RECORD.encode(rec, "vector")))
            journal.append(JournalKind.EMBED, id=head.id, type=head.type, version=rec.version)
            vectors += 1
        last = next(txn.keys(JOURNAL, reverse=True), None)
        synced = 0 if missing or last is None else parse_journal_key(last)
        # the store's precision too (format 13): its records are copied in their own types
        vm = VectorsMeta(model_id=meta.model_id, dim=meta.dim, synced=synced, float32=meta.float32)
        txn.put(meta_key("vectors"), seal(VECTORS_META.encode(vm, "meta/vectors")))
        if missing:
            notes.append(
                f"{missing} live memories have no recovered vector: opening the new store with "
                f"its embedder ({meta.model_id}) embeds them"
            )
    counters = 0
    for mid, state in recs.salience.items():
        if mid in kept:  # the import left the flag clear: set with the record (format 11)
            put_counters(txn, new.head(txn, mid), state)
            counters += 1
    for key, value in recs.tasks.items():
        txn.put(key, value)
    # entity aliases (claims.md section 10), each whose canonical name is no alias itself
    records = {k[len(ALIAS_PREFIX) :].decode("utf-8"): k for k in recs.aliases}
    left_out = set(chained({a: decode_alias(k, recs.aliases[k]) for a, k in records.items()}))
    for alias, key in records.items():
        if alias not in left_out:
            txn.put(key, recs.aliases[key])
    if left_out:
        notes.append(f"{len(left_out)} aliases named an alias as their entity and were left out")
    return vectors, counters, len(recs.tasks)
