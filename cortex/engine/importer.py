"""Import: memories, edges, episodes and aliases brought in exactly as they were.

``Store.import_records`` validates every record and checks every version's hash before its one
write transaction (``specs/export.md``); the bundle reader (``cortex.transfer.bundle``),
``cortex copy`` and salvage bring stores in through it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

import msgspec

from cortex import argcheck
from cortex.engine.heads import (
    claim_hashes,
    encode_row,
    index_keys_of,
    is_pinned,
    pin_key_of,
    row_of,
)
from cortex.engine.journal import JournalKind, JournalWriter
from cortex.engine.values import (
    EDGE_CODEC,
    Edge,
    EdgeRecord,
    ImportReport,
    decode_trusted,
)
from cortex.errors import (
    ConflictError,
    IntegrityError,
    NotFoundError,
    ValidationError,
)
from cortex.index import evidence, lexical
from cortex.index.lexical import Indexer
from cortex.model.codec import (
    HEAD,
    VERSION,
    decode_data,
    encode_version,
    to_micros,
)
from cortex.model.enums import (
    EdgeType,
    Sensitivity,
)
from cortex.model.episode import check_episode, decode_episode, encode_episode
from cortex.model.hashing import content_hash
from cortex.model.ids import MemoryId
from cortex.model.records import (
    Data,
    Episode,
    Head,
    Provenance,
    Version,
)
from cortex.model.validate import validate_memory
from cortex.rules.aliases import (
    ALIAS_CODEC,
    AliasRecord,
    alias_hash,
    alias_key,
    chained,
    read_aliases,
)
from cortex.rules.aliases import decode_record as decode_alias
from cortex.rules.sensitivity import DEFAULT as DEFAULT_SENSITIVITY
from cortex.rules.sensitivity import coerce_level
from cortex.rules.sensitivity import stored as stored_level
from cortex.storage.keys import (
    claim_index_key,
    edge_from_key,
    edge_to_key,
    episode_key,
    episode_memory_key,
    head_key,
    id_key,
    version_key,
    version_prefix,
)
from cortex.storage.kv import KV, ReadTxn, WriteTxn, seal, unseal

__all__ = ["EPISODE_SESSION", "Imported", "episode_source", "import_records"]

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_seal = seal
_unseal = unseal


class Imported:
    """A validated memory brought in with its existing records (see ``import_records``)."""

    __slots__ = ("data", "head", "head_bytes", "version_bytes", "versions")

    def __init__(self, head: Head, versions: Sequence[Version]) -> None:
        self.head_bytes = _seal(HEAD.encode(head, "head"))  # checks it is a valid Head
        if head.tags is None or head.frames is None:  # encoded as empty: index them so too
            head = msgspec.structs.replace(head, tags=head.tags or (), frames=head.frames or ())
        self.head = head
        where = f"memory {head.id}"
        self.versions = argcheck.items(versions, "versions")
        for v in self.versions:
            if type(v) is not Version:
                raise ValidationError(
                    "versions",
                    "type",
                    f"{where}: versions are Version records, got {type(v).__name__}",
                )
        if head.created_at < _EPOCH:  # index keys hold it as unsigned microseconds
            raise ValidationError(
                "head.created_at",
                "range",
                f"{where} was created at {head.created_at.isoformat()}, before 1970; a store "
                "keys memories by creation time since the Unix epoch",
            )
        numbers = [v.version for v in self.versions]
        if numbers != list(range(1, head.current_version + 1)):
            raise ValidationError(
                "versions",
                "complete",
                f"{where} is at version {head.current_version} but versions {numbers} are given",
            )
        purged = head.tombstone is not None and head.tombstone.purged_at is not None
        self.data: Data | None = None  # the current version's decoded data
        for v in self.versions:
            name = f"{where} version {v.version}"
            if v.data is None:
                encode_version(v)
                if not purged:
                    raise ValidationError("version.data", "required", f"{name} has no data")
                if v.id != head.id or v.type is not head.type:
                    raise ValidationError("version.id", "match", f"{name} names {v.id}")
                continue
            if purged:
                raise ValidationError("version.data", "purged", f"{name} holds data")
            if content_hash(v.type, v.data) != v.hash:
                raise IntegrityError(
                    f"{name}: the data does not match its hash; nothing was imported"
                )
            self.data = decode_data(v.type, v.data)
            validate_memory(head, v, self.data)
        self.version_bytes = [_seal(VERSION.encode(v, "version")) for v in self.versions]

    def held_by(self, txn: ReadTxn) -> bool:
        """Whether the store holds exactly these records."""
        got = row_of(txn, self.head.id)
        if got is None:
            return False
        key = head_key(got)
        raw = txn.get(key)
        if raw != self.head_bytes:
            if raw is None:
                return False
            # a memory used here has counters (format 11), which a bundle never carries
            held: Head = decode_trusted(HEAD, key, raw)
            if not held.has_counters:
                return False
            bare = msgspec.structs.replace(held, has_counters=False)
            if _seal(HEAD.encode(bare, "head")) != self.head_bytes:
                return False
        stored = [value for _, value in txn.scan(version_prefix(got))]
        return stored == self.version_bytes


def import_records(  # noqa: PLR0917 - Store.import_records with the engine's parts
    kv: KV,
    actor: str,
    clock: Callable[[], datetime],
    vectors_of: Callable[[Episode], list[bytes] | None],
    remark: Callable[[WriteTxn, Iterable[MemoryId], int], None],
    memories: Iterable[tuple[Head, Sequence[Version]]],
    edges: Iterable[Edge] = (),
    episodes: Iterable[Episode] = (),
    *,
    sensitivity: Mapping[MemoryId, Sensitivity] | None = None,
    episode_sensitivity: Mapping[MemoryId, Sensitivity] | None = None,
    aliases: Mapping[str, AliasRecord] | None = None,
) -> ImportReport:
    """``Store.import_records`` (see there) into ``kv``, journalled by ``actor``.

    ``clock`` is read once, after every record is checked; ``vectors_of`` gives an
    episode's chunk vectors (the store's hook); ``remark`` indexes the imported memories'
    claims (the current ones only) inside the write transaction.
    """
    items = []
    for i, pair in enumerate(argcheck.items(memories, "memories")):
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise ValidationError(
                f"memories[{i}]", "type", "each memory is a (head, versions) pair"
            )
        items.append(Imported(pair[0], pair[1]))
    edges = argcheck.items(edges, "edges")
    episodes = argcheck.items(episodes, "episodes")
    for name, seq, cls in (("edges", edges, Edge), ("episodes", episodes, Episode)):
        for i, x in enumerate(seq):
            if type(x) is not cls:
                raise ValidationError(
                    f"{name}[{i}]", "type", f"must be a {cls.__name__}, got {type(x).__name__}"
                )
    if len({item.head.id for item in items}) != len(items):
        raise ValidationError("memories", "unique", "a memory is given more than once")
    levels = _import_levels(sensitivity, {i.head.id: i.head for i in items}, "sensitivity")
    # the level is in the head (format 9): a head that holds one keeps it unless the
    # mapping names the memory; the head then holds exactly the import's level
    for i, item in enumerate(items):
        own = item.head.sensitivity
        if own is not None and item.head.id not in levels:
            _import_levels({item.head.id: own}, {item.head.id: item.head}, "sensitivity")
            levels[item.head.id] = own
        want = stored_level(levels.get(item.head.id, DEFAULT_SENSITIVITY))
        # use counters do not travel (format 11): an imported memory has none
        if own is not want or item.head.has_counters:
            items[i] = Imported(
                msgspec.structs.replace(item.head, sensitivity=want, has_counters=False),
                item.versions,
            )
    alias_records = _import_aliases(aliases)
    eps: dict[MemoryId, bytes] = {}
    purged_eps: dict[MemoryId, bool] = {}
    chunk_vectors: dict[MemoryId, list[bytes]] = {}
    for ep in episodes:
        sealed = _seal(encode_episode(ep))  # every field's rule first, then the hash
        check_episode(ep)
        if ep.id in eps:
            raise ValidationError("episodes", "unique", f"episode {ep.id} is given twice")
        eps[ep.id] = sealed
        purged_eps[ep.id] = ep.content is None
        vectors = vectors_of(ep)  # with a local embedder: found by meaning too
        if vectors is not None:
            chunk_vectors[ep.id] = vectors
    ep_levels = _import_levels(episode_sensitivity, purged_eps, "episode_sensitivity")
    for ep in episodes:  # the level is in the episode record (format 9), as for heads
        if ep.sensitivity is not None and ep.id not in ep_levels:
            _import_levels({ep.id: ep.sensitivity}, purged_eps, "episode_sensitivity")
            ep_levels[ep.id] = ep.sensitivity
        want = stored_level(ep_levels.get(ep.id, DEFAULT_SENSITIVITY))
        if ep.sensitivity is not want:
            eps[ep.id] = _seal(encode_episode(msgspec.structs.replace(ep, sensitivity=want)))
    drawn = [
        (found[0], item.head.id)
        for item in items
        for found in {episode_source(v.provenance) for v in item.versions}
        if found is not None
    ]
    links: dict[bytes, tuple[MemoryId, EdgeType, MemoryId, bytes]] = {}
    for e in edges:
        if e.src == e.dst:
            raise ValidationError("edges", "self_edge", f"an edge from {e.src} to itself")
        rec = EdgeRecord(
            created_at=e.created_at,
            created_by=e.created_by,
            weight=e.weight,
            removed_at=e.removed_at,
            removed_by=e.removed_by,
        )
        key = edge_from_key(e.src, e.type, e.dst)
        if key in links:
            raise ValidationError("edges", "unique", f"edge {e.src} {e.type.label} {e.dst} twice")
        links[key] = (e.src, e.type, e.dst, _seal(EDGE_CODEC.encode(rec, "edge")))
    now = clock()

    def txn_fn(txn: WriteTxn) -> ImportReport:
        journal = JournalWriter(txn, now, actor)
        lex = Indexer(txn)
        added = same = versions = edges_added = edges_same = 0
        for item in items:
            if txn.get(id_key(item.head.id)) is not None:
                if not item.held_by(txn):  # the head holds the level
                    raise ConflictError(
                        f"memory {item.head.id} already exists with other records (head, "
                        "versions or sensitivity differ); nothing was imported"
                    )
                same += 1
                continue
            _put_imported(txn, item, lex)
            last = item.versions[-1]
            journal.append(
                JournalKind.IMPORT,
                id=last.id,
                type=last.type,
                version=last.version,
                hash=last.hash,
            )
            added += 1
            versions += len(item.versions)
        for fkey, (s, et, d, payload) in links.items():
            for which, mid in (("src", s), ("dst", d)):
                if txn.get(id_key(mid)) is None:
                    raise NotFoundError(f"edge {s} {et.label} {d}: {which} {mid} does not exist")
            old = txn.get(fkey)
            if old is not None:
                if old != payload:
                    raise ConflictError(
                        f"edge {s} {et.label} {d} already exists with another record; "
                        "nothing was imported"
                    )
                edges_same += 1
                continue
            txn.put(fkey, payload)
            txn.put(edge_to_key(d, et, s), payload)
            journal.append(JournalKind.IMPORT, id=s, edge=et, dst=d)
            edges_added += 1
        eps_added = eps_same = 0
        for eid, sealed in eps.items():
            old = txn.get(episode_key(eid))
            if old is not None:
                if old != sealed:  # the record holds the level
                    raise ConflictError(
                        f"episode {eid} already exists with another record or sensitivity; "
                        "nothing was imported"
                    )
                eps_same += 1
                continue
            txn.put(episode_key(eid), sealed)
            imported = decode_episode(_unseal(episode_key(eid), sealed))
            evidence.index_episode(txn, imported)
            if eid in chunk_vectors:
                evidence.put_vectors(txn, imported, chunk_vectors[eid])
            journal.append(JournalKind.EPISODE, id=eid, hash=imported.hash, reason="import")
            eps_added += 1
        for eid, mid in drawn:
            if txn.get(episode_key(eid)) is not None:
                txn.put(episode_memory_key(eid, mid), b"")
        # the imported edges say which imported memories are superseded
        remark(
            txn,
            {item.head.id for item in items}
            | {d for (_, et, d, _) in links.values() if et is EdgeType.SUPERSEDES},
            to_micros(now),
        )
        lex.flush()
        aliases_added, aliases_same = _put_aliases(txn, alias_records, journal)
        return ImportReport(
            memories_added=added,
            memories_unchanged=same,
            versions_added=versions,
            edges_added=edges_added,
            edges_unchanged=edges_same,
            episodes_added=eps_added,
            episodes_unchanged=eps_same,
            aliases_added=aliases_added,
            aliases_unchanged=aliases_same,
        )

    return kv.write(txn_fn)


def _put_imported(txn: WriteTxn, item: Imported, lex: Indexer) -> None:
    """Write an imported memory's row, head, versions, index entries and lexical postings.

    The memory takes the next row (format 21: rows follow the order of the writes here).
    """
    row = lex.take_row()
    if not txn.put(id_key(item.head.id), encode_row(row), overwrite=False):
        raise ConflictError(f"memory {item.head.id} already exists; nothing was imported")
    txn.put(head_key(row), item.head_bytes)
    for v, sealed in zip(item.versions, item.version_bytes, strict=True):
        if not txn.put(version_key(row, v.version), sealed, overwrite=False):
            raise IntegrityError(f"version {v.version} of {v.id} exists without its head")
    for k in index_keys_of(item.head):
        txn.put(k, b"")
    if is_pinned(item.data):
        txn.put(pin_key_of(item.head), b"")
    for c in claim_hashes(item.data):
        txn.put(claim_index_key(c, item.head.id), b"")
    last = item.versions[-1]
    if item.head.tombstone is None and item.data is not None:
        lex.add(row, last.version, lexical.analyze(item.data))


def _import_levels(
    given: Mapping[MemoryId, Any] | None,
    imported: Mapping[MemoryId, Head] | Mapping[MemoryId, bool],
    field: str,
) -> dict[MemoryId, Sensitivity]:
    """The levels of an import, checked: each names an imported, unpurged record.

    ``imported`` maps the imported memories to their heads (or episodes to whether they were
    purged): a purged record has nothing left to protect and holds no level.
    """
    out: dict[MemoryId, Sensitivity] = {}
    for mid, value in (given or {}).items():
        level = coerce_level(value, f"{field}[{mid}]")
        if mid not in imported:
            raise ValidationError(
                f"{field}[{mid}]", "unknown", "names no memory or episode of the import"
            )
        rec = imported[mid]
        gone = (
            rec
            if isinstance(rec, bool)
            else (rec.tombstone is not None and rec.tombstone.purged_at is not None)
        )
        if gone and level is not DEFAULT_SENSITIVITY:
            raise ValidationError(
                f"{field}[{mid}]", "purged", "a purged record holds no sensitivity level"
            )
        if level is not DEFAULT_SENSITIVITY:
            out[mid] = level
    return out


def _import_aliases(aliases: Mapping[str, AliasRecord] | None) -> dict[str, bytes]:
    """Imported alias records, checked and sealed, by normalised alias."""
    if aliases is None:
        return {}
    if not isinstance(aliases, Mapping):
        raise ValidationError("aliases", "type", "must map normalised aliases to AliasRecords")
    out: dict[str, bytes] = {}
    for alias, rec in aliases.items():
        if not isinstance(alias, str) or type(rec) is not AliasRecord:
            raise ValidationError("aliases", "type", "must map normalised aliases to AliasRecords")
        sealed = _seal(ALIAS_CODEC.encode(rec, "alias"))
        decode_alias(alias_key(alias), sealed)  # the name normalises to the alias
        out[alias] = sealed
    return out


def _put_aliases(
    txn: WriteTxn, records: dict[str, bytes], journal: JournalWriter
) -> tuple[int, int]:
    """Write imported aliases (journalled, reason ``import``): (added, already there)."""
    if not records:
        return 0, 0
    added = same = 0
    for alias, sealed in records.items():
        old = txn.get(alias_key(alias))
        if old == sealed:
            same += 1
            continue
        if old is not None:
            raise ConflictError(f"the store holds alias {alias!r} with another record")
        txn.put(alias_key(alias), sealed)
        journal.append(JournalKind.ALIAS, hash=alias_hash(alias), reason="import")
        added += 1
    held = read_aliases(txn).records
    for alias in chained(held)[:1]:
        rec = held[alias]
        raise ValidationError(
            "aliases",
            "chain",
            f"{alias!r} would name {rec.canonical!r}, itself an alias of "
            f"{held[rec.canonical].canonical!r}: an entity has one canonical name",
        )
    return added, same


def episode_source(provenance: Provenance | None) -> tuple[MemoryId, tuple[int, int] | None] | None:
    """The episode a version's provenance names (``episode:<id>``) and the span, if any."""
    if provenance is None:
        return None
    for src in provenance.sources:
        if src.session_id.startswith(EPISODE_SESSION):
            try:
                return MemoryId.parse(src.session_id[len(EPISODE_SESSION) :]), src.span
            except ValidationError:
                return None
    return None


EPISODE_SESSION: Final = "episode:"
"""A ``SourceRef.session_id`` naming an episode: ``episode:<ULID>``."""
