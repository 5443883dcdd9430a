"""Export and import: a whole store as one JSON Lines or CBOR bundle (``specs/export.md``).

A bundle holds a header, every memory (its head and all its versions), every edge (removed
ones too), every episode (version 2 bundles, written when the store holds episodes) and a
trailer with counts and the sha256 of everything before it. Export reads one
snapshot and writes the file atomically; import verifies the whole bundle (structure, digest,
every version's hash) before it writes anything, then writes it in one transaction.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final, Literal

import cbor2
import msgspec

from cortex import argcheck
from cortex.agent.api import Cortex
from cortex.agent.ingest import visible_episode
from cortex.engine.heads import decode_row, head_from
from cortex.engine.journal import JournalKind, JournalWriter
from cortex.engine.store import FORMAT_VERSION, Store, edge_of
from cortex.engine.values import EDGE_CODEC, Edge, EdgeRecord, ImportReport, decode_trusted
from cortex.errors import (
    CodecError,
    CortexError,
    FormatError,
    IntegrityError,
    ValidationError,
)
from cortex.model.codec import (
    EPISODE,
    HEAD,
    HEAD_V14,
    VERSION,
    VERSION_V14,
    VERSION_V17,
    cbor_extent,
    decode_data,
    encode_data,
)
from cortex.model.enums import EdgeType, Sensitivity
from cortex.model.episode import decode_episode, encode_episode
from cortex.model.ids import MemoryId
from cortex.model.jsonmap import from_plain, loads, to_plain
from cortex.model.records import DATA_TYPES, Episode, Head, Version
from cortex.rules.aliases import ALIAS_CODEC, ALIAS_PREFIX, AliasRecord
from cortex.rules.aliases import decode_record as decode_alias
from cortex.rules.chains import norm_entity
from cortex.rules.scope import Reader
from cortex.rules.sensitivity import DEFAULT
from cortex.storage.keys import (
    EDGE_FROM,
    ID,
    edge_to_key,
    head_key,
    parse_edge_key,
    parse_episode_key,
    parse_id_key,
    version_prefix,
)
from cortex.storage.keys import EPISODE as EPISODE_PREFIX
from cortex.storage.keys import HEAD as _HEAD_KEY_PREFIX
from cortex.storage.kv import ReadTxn
from cortex.storage.kv import unseal as _unseal
from cortex.storage.pages import damage_error

__all__ = [
    "BUNDLE_FORMAT",
    "BUNDLE_VERSION",
    "Bundle",
    "ExportReport",
    "export_digest",
    "export_store",
    "import_bundle",
    "read_bundle",
]

BUNDLE_FORMAT: Final = "cortex-export"
"""The name every bundle's header carries."""
BUNDLE_VERSION: Final = 4
"""The newest bundle layout this code writes and reads (separate from the store's format).

Version 1 holds memories and edges; version 2 adds episodes (and an ``episodes`` count in the
trailer); version 3 lets memory and episode items carry a sensitivity other than ``internal``;
version 4 adds entity aliases (``alias`` items after the episodes, an ``aliases`` count). An
export is written at the lowest version that holds it, so a store without aliases, labels or
episodes gives the same bytes as before."""

Encoding = Literal["jsonl", "cbor"]
Progress = Callable[[int, int], None]
"""Called as ``progress(done, total)`` while a long transfer runs."""


class ExportReport(msgspec.Struct, frozen=True, kw_only=True):
    """What ``export_store`` wrote."""

    path: str
    encoding: str
    memories: int
    versions: int
    edges: int
    bytes: int
    sha256: str
    episodes: int = 0
    aliases: int = 0
    confidential: int = 0
    """Confidential memories and episodes in the bundle (``include_confidential``)."""
    withheld: int = 0
    """Memories and episodes the export policy kept in the store (restricted ones, and
    confidential ones without ``include_confidential``)."""


class Bundle(msgspec.Struct, frozen=True, kw_only=True):
    """A parsed, structurally verified bundle, ready for ``Store.import_records``."""

    encoding: str
    store_format: int
    memories: list[tuple[Head, list[Version]]]
    edges: list[Edge]
    episodes: list[Episode] = msgspec.field(default_factory=list)
    sensitivity: dict[MemoryId, Sensitivity] = msgspec.field(default_factory=dict)
    """The levels of memories other than ``internal`` (version 3)."""
    episode_sensitivity: dict[MemoryId, Sensitivity] = msgspec.field(default_factory=dict)
    """The levels of episodes other than ``internal`` (version 3)."""
    aliases: dict[str, AliasRecord] = msgspec.field(default_factory=dict)
    """Entity aliases by normalised alias (version 4)."""


# ---------------------------------------------------------------------------------------------
# Export


class _Plan:
    """What leaves the store in one export (``specs/sensitivity.md`` §4), read in ``txn``.

    ``restricted`` memories and episodes never leave; ``confidential`` ones only with
    ``include_confidential``; a restricted handle (opened by another actor than the owner)
    exports only what its reader sees. The plan reads the levels from the heads and episode
    records once and decides each record by its id.
    """

    def __init__(
        self,
        store: Store,
        txn: ReadTxn,
        include_confidential: bool,
        everything: bool = False,
        reader: Reader | None = None,
    ) -> None:
        self.store = store
        self.everything = everything  # the digest of a whole store (``export_digest``)
        self.include_confidential = include_confidential
        self.reader = reader
        self.now = store.now()
        self.levels: dict[bytes, Sensitivity] = {}  # raw id -> level, memories
        self.episode_levels: dict[bytes, Sensitivity] = {}
        self.kept_out: set[bytes] = set()  # memories left out: their edges stay too
        self.withheld = 0  # left out by the policy (not hidden from the reader)
        self.confidential = 0  # confidential records in the bundle
        self.has_episodes = txn.seek(EPISODE_PREFIX, EPISODE_PREFIX) is not None
        # the levels are in the sealed heads and episode records (format 9): one pass over
        # each decides the bundle's version before its first byte is written
        labelled = False
        for key, value in txn.scan(_HEAD_KEY_PREFIX):
            head: Head = decode_trusted(HEAD, key, value)
            if head.sensitivity is not None:
                self.levels[head.id.bytes] = head.sensitivity
                labelled = labelled or self._leaves(head.sensitivity, self._sees(head))
        for key, value in txn.scan(EPISODE_PREFIX):
            ep: Episode = decode_trusted(EPISODE, key, value)
            if ep.sensitivity is not None:
                self.episode_levels[ep.id.bytes] = ep.sensitivity
                labelled = labelled or self._leaves(ep.sensitivity, self._sees_episode(ep))
        # aliases are the owner's (a restricted handle lists none: claims.md section 10)
        self.aliases = (
            []
            if self.reader is not None and self.reader.actor != store.owner
            else list(txn.scan(ALIAS_PREFIX))
        )
        # version 3 only when an item carries a level, 4 when aliases leave: other bundles
        # stay byte for byte
        self.version = 4 if self.aliases else 3 if labelled else 2 if self.has_episodes else 1

    def _sees(self, head: Head) -> bool:
        rd = self.reader
        if rd is None:
            return True
        level = self.levels.get(head.id.bytes, DEFAULT)
        return rd.can_see(head, self.store.owner, self.now) and rd.clears(level, self.store.owner)

    def _sees_episode(self, ep: Episode) -> bool:
        rd = self.reader
        if rd is None:
            return True
        level = self.episode_levels.get(ep.id.bytes, DEFAULT)
        return visible_episode(ep, rd, self.store.owner) and rd.clears(level, self.store.owner)

    def _leaves(self, level: Sensitivity, seen: bool) -> bool:
        if not seen or self.everything:
            return seen
        if level is Sensitivity.RESTRICTED:
            return False
        return level is not Sensitivity.CONFIDENTIAL or self.include_confidential

    def memory(self, head: Head) -> Sensitivity | None:
        """The level a memory leaves with, or ``None``: it stays (counted when withheld)."""
        level = self.levels.get(head.id.bytes, DEFAULT)
        seen = self._sees(head)
        if not self._leaves(level, seen):
            self.kept_out.add(head.id.bytes)
            self.withheld += seen
            return None
        self.confidential += level is Sensitivity.CONFIDENTIAL
        return level

    def episode(self, ep: Episode) -> Sensitivity | None:
        """The level an episode leaves with, or ``None``: it stays."""
        level = self.episode_levels.get(ep.id.bytes, DEFAULT)
        seen = self._sees_episode(ep)
        if not self._leaves(level, seen):
            self.withheld += seen
            return None
        self.confidential += level is Sensitivity.CONFIDENTIAL
        return level

    def edge(self, s: MemoryId, d: MemoryId) -> bool:
        """Whether an edge leaves: both its ends do."""
        return s.bytes not in self.kept_out and d.bytes not in self.kept_out


def _engine_of(store: Store | Cortex) -> tuple[Store, Reader | None]:
    """The engine a handle composes, and the reader it reads as (``None``: it sees everything)."""
    if isinstance(store, Cortex):
        return store.engine, store.reads_as
    return store, None


def _snapshot(store: Store, txn: ReadTxn, plan: _Plan) -> Iterator[tuple[int, Any]]:
    """``(total, item)`` for every memory, then every edge, then every episode that leaves.

    Items are ``(head, head_payload, [(version, version_payload)], level)``,
    ``(edge, edge_payload)`` and ``(episode, level)``; payloads are the stored canonical
    encodings (the sealed bytes without their checksum), checked on the way out. ``total``
    counts every record, those that stay too (for progress).
    """
    total = (
        sum(1 for _ in txn.keys(_HEAD_KEY_PREFIX))
        + sum(1 for _ in txn.keys(EDGE_FROM))
        + sum(1 for _ in txn.keys(EPISODE_PREFIX))
    )
    # in id order, as before format 21 (``id/`` is the one keyspace ordered by id): a bundle
    # of the same memories is the same whatever order they were written in
    for ikey, ivalue in txn.scan(ID):
        mid = parse_id_key(ikey)
        row = decode_row(ikey, ivalue)
        key = head_key(row)
        value = txn.get(key)
        head = head_from(mid, value, row)  # checked: a head, and this memory's
        assert value is not None  # head_from raised otherwise
        level = plan.memory(head)
        if level is None:
            yield total, None
            continue
        versions = [
            (store.hashed_version(k, raw, mid), _unseal(k, raw))
            for k, raw in txn.scan(version_prefix(row))
        ]
        if [v.version for v, _ in versions] != list(range(1, head.current_version + 1)):
            raise IntegrityError(
                f"memory {head.id} points at versions 1..{head.current_version} but the "
                "store holds others: the store is damaged; run `cortex verify`"
            )
        payload = _unseal(key, value)
        if head.sensitivity is not None or head.has_counters:
            # the bundle carries the level beside the head, and no use counters (format 11)
            head = msgspec.structs.replace(head, sensitivity=None, has_counters=False)
            payload = HEAD.encode(head, "head")
        yield total, (head, payload, versions, level)
    for key, value in txn.scan(EDGE_FROM):
        s, et, d = parse_edge_key(key)
        if not plan.edge(s, d):
            yield total, None
            continue
        rec: EdgeRecord = decode_trusted(EDGE_CODEC, key, value)
        # the endpoints come from the key, which no checksum covers: a damaged key would
        # export an edge between other memories, so its twin half must agree
        if txn.get(edge_to_key(d, et, s)) != value:
            raise IntegrityError(
                f"the two halves of edge {s} {et.label} {d} differ or one is missing: the "
                "store is damaged; run `cortex verify`"
            )
        yield total, (edge_of(s, et, d, rec), _unseal(key, value))
    for key, _ in txn.scan(EPISODE_PREFIX):
        ep = store.episode_record(txn, parse_episode_key(key))  # checked: hash and chunks
        level = plan.episode(ep)
        if ep.sensitivity is not None:  # the bundle carries the level beside the record
            ep = msgspec.structs.replace(ep, sensitivity=None)
        yield total, None if level is None else (ep, level)


def _json_line(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def _cbor(obj: Any) -> bytes:
    return cbor2.dumps(obj, canonical=True)


def _episode_json(ep: Episode) -> dict[str, Any]:
    """An episode as a JSON line: its fields, the content as text (exactly its UTF-8)."""
    out: dict[str, Any] = {"kind": "episode", **to_plain(ep)}
    if ep.content is not None:
        out["content"] = ep.content.decode("utf-8")
    return out


def _level(value: Any, where: str) -> Sensitivity:
    """A bundle item's level (a label in JSON Lines, a code in CBOR)."""
    level = Sensitivity.coerce(value)
    if level is None:
        raise ValidationError(
            f"{where}.sensitivity", "enum", f"must be one of {Sensitivity.labels()}"
        )
    return level


def _episode_from_json(obj: dict[str, Any], where: str) -> Episode:
    rest = {k: v for k, v in obj.items() if k not in ("kind", "content", "sensitivity")}
    ep = from_plain(Episode, rest, where)
    content = obj.get("content")
    if content is not None:
        if not isinstance(content, str):
            raise ValidationError(f"{where}.content", "type", "must be text")
        try:
            raw = content.encode("utf-8")
        except UnicodeEncodeError:
            raise ValidationError(f"{where}.content", "utf8", "is not valid Unicode") from None
        ep = msgspec.structs.replace(ep, content=raw)
    encode_episode(ep)  # every field rule
    return ep


def _version_json(v: Version) -> dict[str, Any]:
    out: dict[str, Any] = to_plain(v)
    if v.data is not None:
        out["data"] = to_plain(decode_data(v.type, v.data))
    return out


def _header(encoding: Encoding, version: int = BUNDLE_VERSION) -> dict[str, Any]:
    return {
        "format": BUNDLE_FORMAT,
        "version": version,
        "encoding": encoding,
        "store_format": FORMAT_VERSION,
    }


def _bundle(
    store: Store,
    txn: ReadTxn,
    *,
    plan: _Plan,
    encoding: Encoding,
    emit: Callable[[bytes], None],
    progress: Progress | None,
) -> tuple[dict[str, int], bytes]:
    """Emit the bundle of ``plan`` from ``txn``, trailer included; its counts and digest."""
    digest = hashlib.sha256()
    counts = {"memories": 0, "versions": 0, "edges": 0}
    if plan.version >= 2:
        counts["episodes"] = 0
    if plan.version >= 4:
        counts["aliases"] = 0

    def put(chunk: bytes) -> None:
        digest.update(chunk)
        emit(chunk)

    header = _header(encoding, plan.version)
    put(_json_line(header) if encoding == "jsonl" else _cbor(header))
    labels = plan.version >= 3
    for done, (total, item) in enumerate(_snapshot(store, txn, plan), start=1):
        if item is None:
            pass
        elif len(item) == 2 and isinstance(item[0], Episode):
            ep, level = item
            counts["episodes"] += 1
            tagged = labels and level is not DEFAULT
            if encoding == "jsonl":
                line = _episode_json(ep)
                if tagged:
                    line["sensitivity"] = level.label
                put(_json_line(line))
            else:
                cbor_item: list[Any] = ["episode", encode_episode(ep)]
                put(_cbor([*cbor_item, int(level)] if tagged else cbor_item))
        elif len(item) == 4:
            head, head_payload, versions, level = item
            counts["memories"] += 1
            counts["versions"] += len(versions)
            tagged = labels and level is not DEFAULT
            if encoding == "jsonl":
                obj: dict[str, Any] = {
                    "kind": "memory",
                    "head": to_plain(head),
                    "versions": [_version_json(v) for v, _ in versions],
                }
                if tagged:
                    obj["sensitivity"] = level.label
                put(_json_line(obj))
            else:
                cbor_item = ["memory", head_payload, [p for _, p in versions]]
                put(_cbor([*cbor_item, int(level)] if tagged else cbor_item))
        else:
            edge, payload = item
            counts["edges"] += 1
            if encoding == "jsonl":
                put(_json_line({"kind": "edge", **to_plain(edge)}))
            else:
                put(_cbor(["edge", edge.src.bytes, int(edge.type), edge.dst.bytes, payload]))
        if progress is not None:
            progress(done, total)
    for key, value in plan.aliases:
        alias = key[len(ALIAS_PREFIX) :].decode("utf-8")
        rec = decode_alias(key, value)
        counts["aliases"] += 1
        if encoding == "jsonl":
            put(_json_line({"kind": "alias", "alias": alias, **to_plain(rec)}))
        else:
            put(_cbor(["alias", _unseal(key, value)]))
    sha = digest.digest()
    if encoding == "jsonl":
        emit(_json_line({"kind": "end", **counts, "sha256": sha.hex()}))
    else:
        emit(_cbor(["end", {**counts, "sha256": sha}]))
    return counts, sha


def export_store(
    store: Store | Cortex,
    path: str | os.PathLike[str],
    *,
    encoding: Encoding = "jsonl",
    progress: Progress | None = None,
    include_confidential: bool = False,
) -> ExportReport:
    """Write the memories (all versions), edges and episodes of ``store`` to one bundle file.

    The export policy of ``specs/sensitivity.md`` §4 holds: ``restricted`` memories and
    episodes never leave; ``confidential`` ones only with ``include_confidential``, and such
    an export is journalled (kind ``export``: how many confidential records left, the
    encoding and the bundle's sha256; no content); an edge leaves only with both its ends. A
    restricted handle exports only what its reader sees. Levels other than ``internal``
    travel in the bundle (version 3).

    The bundle is read from one snapshot, so writers may continue meanwhile. The same store
    content always gives the same bytes. The file appears whole or not at all (it is written
    beside ``path`` and renamed into place).

    Args:
        store: the store to export.
        path: the file to write (replaced if it exists).
        encoding: ``jsonl`` (readable JSON Lines) or ``cbor`` (the canonical record bytes).
        progress: called as ``progress(done, total)`` with memories and edges written.
        include_confidential: let ``confidential`` memories and episodes leave too.

    Raises:
        ValidationError: an unknown encoding, or ``include_confidential`` is not a bool.
        IntegrityError: the store is damaged (a record fails its checksum or hash).
        CortexError: the file cannot be written, or the store (read-only) cannot journal an
            export that includes confidential records; no file is written then.
    """
    if encoding not in ("jsonl", "cbor"):
        raise ValidationError("encoding", "enum", f"must be jsonl or cbor, got {encoding!r}")
    if not isinstance(include_confidential, bool):
        raise ValidationError("include_confidential", "type", "must be True or False")
    argcheck.callback(progress, "progress")
    store, reader = _engine_of(store)
    target = Path(argcheck.path(path, "path"))
    if os.path.isdir(target):  # refused first: the rename at the end would fail after the
        # export was journalled (include_confidential)
        raise CortexError(f"cannot write the export to {target}: it is a directory")
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    size = 0
    try:
        with open(tmp, "wb") as out:

            def emit(chunk: bytes) -> None:
                nonlocal size
                out.write(chunk)
                size += len(chunk)

            with store.kv.read_checked() as txn:
                if txn.damage:  # LMDB would abort walking the damaged pages
                    raise damage_error(store.path, txn.damage)
                plan = _Plan(store, txn, include_confidential, reader=reader)
                counts, sha = _bundle(
                    store, txn, plan=plan, encoding=encoding, emit=emit, progress=progress
                )
            out.flush()
            os.fsync(out.fileno())
        if include_confidential:
            _journal_export(store, plan.confidential, encoding, sha)
        os.replace(tmp, target)
    except OSError as exc:
        raise CortexError(f"cannot write the export to {target}: {exc}") from exc
    finally:
        with contextlib.suppress(OSError):  # the name may be what failed (too long, ...)
            tmp.unlink(missing_ok=True)
    return ExportReport(
        path=str(target),
        encoding=encoding,
        **counts,
        bytes=size,
        sha256=sha.hex(),
        confidential=plan.confidential,
        withheld=plan.withheld,
    )


def _journal_export(store: Store, confidential: int, encoding: str, sha: bytes) -> None:
    """Record an export that was allowed confidential records (before the file appears)."""
    if store.kv.readonly:
        raise CortexError(
            "an export that includes confidential records is recorded in the journal: open "
            "the store writable (not readonly) to export them"
        )
    now = store.now()
    store.kv.write(
        lambda txn: JournalWriter(txn, now, store.actor).append(
            JournalKind.EXPORT,
            reason=(
                f"exported {confidential} confidential memories and episodes "
                f"({encoding}, sha256 {sha.hex()})"
            ),
        )
    )


def export_digest(store: Store | Cortex, *, encoding: Encoding = "jsonl") -> str:
    """The sha256 of the bundle of the WHOLE store, every level included, writing nothing.

    For comparing two stores (``cortex copy``): nothing leaves the process, so the export
    policy does not apply; a restricted handle still digests only what its reader sees.

    Raises:
        ValidationError: an unknown encoding.
    """
    if encoding not in ("jsonl", "cbor"):
        raise ValidationError("encoding", "enum", f"must be jsonl or cbor, got {encoding!r:.50}")
    store, reader = _engine_of(store)
    with store.kv.read() as txn:
        plan = _Plan(store, txn, include_confidential=True, everything=True, reader=reader)
        _, sha = _bundle(
            store, txn, plan=plan, encoding=encoding, emit=lambda chunk: None, progress=None
        )
    return sha.hex()


# ---------------------------------------------------------------------------------------------
# Import


def _refuse(where: str, what: str) -> IntegrityError:
    return IntegrityError(f"the bundle does not verify: {where}: {what}; nothing was imported")


def _check_header(header: Any, encoding: Encoding) -> int:
    if not isinstance(header, dict) or header.get("format") != BUNDLE_FORMAT:
        raise FormatError(f"not a cortex export: the first item must be a {BUNDLE_FORMAT} header")
    if (
        header.get("version") not in range(1, BUNDLE_VERSION + 1)
        or type(header["version"]) is not int
    ):
        raise FormatError(
            f"bundle version {header.get('version')!r} is not 1 to {BUNDLE_VERSION}; "
            "use the cortex that wrote it"
        )
    if header.get("encoding") != encoding:
        raise _refuse("header", f"encoding {header.get('encoding')!r} is not {encoding}")
    store_format = header.get("store_format")
    if type(store_format) is not int or not 1 <= store_format <= FORMAT_VERSION:
        raise FormatError(
            f"the bundle comes from store format {store_format!r}; this cortex reads up to "
            f"{FORMAT_VERSION}"
        )
    return store_format


def _check_trailer(trailer: Any, counts: dict[str, int], sha: bytes, where: str) -> None:
    expected = {**counts, "sha256": sha}
    if not isinstance(trailer, dict) or set(trailer) != set(expected):
        raise _refuse(where, "the trailer is malformed")
    for name, count in counts.items():
        if trailer[name] != count:
            raise _refuse(
                where, f"the trailer counts {trailer[name]!r} {name}, the bundle holds {count}"
            )
    if trailer["sha256"] != sha:
        raise _refuse(where, "the sha256 of the bundle does not match its trailer (it was altered)")


def _memory_from_json(obj: dict[str, Any], where: str) -> tuple[Head, list[Version]]:
    head = from_plain(Head, obj.get("head"), f"{where}.head")
    raw = obj.get("versions")
    if not isinstance(raw, list):
        raise ValidationError(f"{where}.versions", "type", "must be a list")
    versions = []
    for i, vobj in enumerate(raw):
        path = f"{where}.versions[{i}]"
        if not isinstance(vobj, dict):
            raise ValidationError(path, "type", "must be an object")
        rest = {k: v for k, v in vobj.items() if k != "data"}
        v = from_plain(Version, rest, path)
        if vobj.get("data") is not None:
            data = from_plain(DATA_TYPES[v.type], vobj["data"], f"{path}.data")
            v = msgspec.structs.replace(v, data=encode_data(data))
        versions.append(v)
    return head, versions


def _read_jsonl(data: bytes, progress: Progress | None) -> Bundle:
    lines = data.split(b"\n")
    if lines[-1] != b"":
        raise _refuse(f"line {len(lines)}", "the bundle is cut short (no final newline)")
    lines.pop()
    memories: list[tuple[Head, list[Version]]] = []
    edges: list[Edge] = []
    episodes: list[Episode] = []
    levels: dict[MemoryId, Sensitivity] = {}
    episode_levels: dict[MemoryId, Sensitivity] = {}
    labels = False  # version 3: items may carry a sensitivity
    aliases: dict[str, AliasRecord] = {}
    counts = {"memories": 0, "versions": 0, "edges": 0}
    digest = hashlib.sha256()
    store_format = 0
    offset = 0
    for n, line in enumerate(lines, start=1):
        where = f"line {n}"
        try:
            obj = loads(line, where)
        except ValidationError as exc:
            raise _refuse(where, f"not JSON ({exc.message})") from None
        if n == 1:
            store_format = _check_header(obj, "jsonl")
            if obj["version"] >= 2:
                counts["episodes"] = 0
            if obj["version"] >= 4:
                counts["aliases"] = 0
            labels = obj["version"] >= 3
        elif not isinstance(obj, dict) or "kind" not in obj:
            raise _refuse(where, "an item must be an object with a kind")
        elif "sensitivity" in obj and not labels:
            raise _refuse(where, "a sensitivity in a bundle of version 1 or 2")
        elif obj["kind"] == "memory":
            try:
                memories.append(_memory_from_json(obj, "memory"))
                if "sensitivity" in obj:
                    levels[memories[-1][0].id] = _level(obj["sensitivity"], "memory")
            except ValidationError as exc:
                raise ValidationError(f"{where}: {exc.field}", exc.rule, exc.message) from None
            counts["memories"] += 1
            counts["versions"] += len(memories[-1][1])
        elif obj["kind"] == "edge":
            try:
                edges.append(
                    from_plain(Edge, {k: v for k, v in obj.items() if k != "kind"}, "edge")
                )
            except ValidationError as exc:
                raise ValidationError(f"{where}: {exc.field}", exc.rule, exc.message) from None
            counts["edges"] += 1
        elif obj["kind"] == "episode" and "episodes" in counts:
            try:
                episodes.append(_episode_from_json(obj, "episode"))
                if "sensitivity" in obj:
                    episode_levels[episodes[-1].id] = _level(obj["sensitivity"], "episode")
            except ValidationError as exc:
                raise ValidationError(f"{where}: {exc.field}", exc.rule, exc.message) from None
            counts["episodes"] += 1
        elif obj["kind"] == "alias" and "aliases" in counts:
            fields = {k: v for k, v in obj.items() if k not in ("kind", "alias")}
            try:
                rec = from_plain(AliasRecord, fields, "alias")
                key = _alias_item_key(obj.get("alias"), rec, aliases)
                ALIAS_CODEC.encode(rec, "alias")  # every field rule
            except ValidationError as exc:
                raise ValidationError(f"{where}: {exc.field}", exc.rule, exc.message) from None
            aliases[key] = rec
            counts["aliases"] += 1
        elif obj["kind"] == "end":
            if n != len(lines):
                raise _refuse(where, "items follow the trailer")
            trailer = {k: v for k, v in obj.items() if k != "kind"}
            try:
                trailer["sha256"] = bytes.fromhex(trailer["sha256"])
            except (KeyError, TypeError, ValueError):
                raise _refuse(where, "the trailer is malformed") from None
            _check_trailer(trailer, counts, digest.digest(), where)
            break
        else:
            raise _refuse(where, f"unknown kind {obj['kind']!r}")
        digest.update(line + b"\n")
        offset += len(line) + 1
        if progress is not None:
            progress(offset, len(data))
    else:
        raise _refuse(f"line {len(lines)}", "the bundle is cut short (no trailer)")
    return Bundle(
        encoding="jsonl",
        store_format=store_format,
        memories=memories,
        edges=edges,
        episodes=episodes,
        sensitivity=levels,
        episode_sensitivity=episode_levels,
        aliases=aliases,
    )


def _read_cbor(data: bytes, progress: Progress | None) -> Bundle:
    memories: list[tuple[Head, list[Version]]] = []
    edges: list[Edge] = []
    episodes: list[Episode] = []
    levels: dict[MemoryId, Sensitivity] = {}
    episode_levels: dict[MemoryId, Sensitivity] = {}
    labels = False  # version 3: items may carry a sensitivity code
    aliases: dict[str, AliasRecord] = {}
    counts = {"memories": 0, "versions": 0, "edges": 0}
    store_format = 0
    n = 0
    end = 0
    while True:
        start = end
        if start == len(data):
            raise _refuse(f"byte {start}", "the bundle is cut short (no trailer)")
        n += 1
        where = f"item {n} (byte {start})"
        try:
            # its structure first (no tags, definite lengths, bounded nesting): no input
            # reaches the decoder that could make it recurse deeply, loop or build cycles
            end = cbor_extent(data, start)
            raw = data[start:end]
            item = cbor2.loads(raw)
        except CodecError as exc:
            raise _refuse(where, f"not CBOR ({exc})") from None
        except (cbor2.CBORDecodeError, ValueError, TypeError, OverflowError) as exc:
            raise _refuse(where, f"not CBOR ({exc})") from None
        if _cbor(item) != raw:
            raise _refuse(where, "not canonical CBOR")
        if n == 1:
            store_format = _check_header(item, "cbor")
            if item["version"] >= 2:
                counts["episodes"] = 0
            if item["version"] >= 4:
                counts["aliases"] = 0
            labels = item["version"] >= 3
            continue
        if not isinstance(item, list) or not item:
            raise _refuse(where, "an item must be an array starting with its kind")
        kind = item[0]
        try:
            if kind == "memory" and len(item) in (3, 3 + labels) and isinstance(item[2], list):
                # the records as their store format encoded them: forms compact from 15 on,
                # a version's medium form a reference into its data from 18 on
                head_codec, version_codec = (
                    (HEAD, VERSION)
                    if store_format >= 18
                    else (HEAD, VERSION_V17)
                    if store_format >= 15
                    else (HEAD_V14, VERSION_V14)
                )
                head = head_codec.decode(_bytes(item[1]), "head")
                versions = [version_codec.decode(_bytes(b), "version") for b in item[2]]
                memories.append((head, versions))
                if len(item) == 4:
                    levels[head.id] = _code(item[3])
                counts["memories"] += 1
                counts["versions"] += len(versions)
            elif kind == "edge" and len(item) == 5:
                rec: EdgeRecord = EDGE_CODEC.decode(_bytes(item[4]), "edge")
                et = EdgeType.coerce(item[2])
                if et is None or type(item[2]) is not int:
                    raise CodecError(f"edge type {item[2]!r} is not an EdgeType code")
                src, dst = MemoryId(_bytes(item[1])), MemoryId(_bytes(item[3]))
                edges.append(edge_of(src, et, dst, rec))
                counts["edges"] += 1
            elif kind == "episode" and len(item) in (2, 2 + labels) and "episodes" in counts:
                episodes.append(decode_episode(_bytes(item[1])))
                if len(item) == 3:
                    episode_levels[episodes[-1].id] = _code(item[2])
                counts["episodes"] += 1
            elif kind == "alias" and len(item) == 2 and "aliases" in counts:
                alias_rec: AliasRecord = ALIAS_CODEC.decode(_bytes(item[1]), "alias")
                aliases[_alias_item_key(None, alias_rec, aliases)] = alias_rec
                counts["aliases"] += 1
            elif kind == "end" and len(item) == 2:
                _check_trailer(item[1], counts, hashlib.sha256(data[:start]).digest(), where)
                if end != len(data):
                    raise _refuse(where, "bytes follow the trailer")
                break
            else:
                raise _refuse(where, f"malformed {kind!r} item")
        except (CodecError, ValidationError) as exc:
            raise _refuse(where, str(exc)) from None
        if progress is not None:
            progress(end, len(data))
    return Bundle(
        encoding="cbor",
        store_format=store_format,
        memories=memories,
        edges=edges,
        episodes=episodes,
        sensitivity=levels,
        episode_sensitivity=episode_levels,
        aliases=aliases,
    )


def _alias_item_key(given: object, rec: AliasRecord, seen: dict[str, AliasRecord]) -> str:
    """The normalised alias an ``alias`` item is for: its record's name normalised.

    A JSON Lines item also names it, and the two must agree; each alias once per bundle.
    """
    alias = norm_entity(rec.name)
    if given is not None and given != alias:
        raise ValidationError(
            "alias", "name", f"is {given!r} but the record's name gives {alias!r}"
        )
    if not alias or alias == rec.canonical or alias in seen:
        raise ValidationError("alias", "record", f"{alias!r}: an empty, self or repeated alias")
    return alias


def _code(x: object) -> Sensitivity:
    level = Sensitivity.coerce(x) if type(x) is int else None
    if level is None:
        raise CodecError(f"sensitivity {x!r} is not a Sensitivity code")
    return level


def _bytes(x: object) -> bytes:
    if type(x) is not bytes:
        raise CodecError(f"expected a byte string, got {type(x).__name__}")
    return x


def read_bundle(data: bytes, *, progress: Progress | None = None) -> Bundle:
    """Parse a bundle (either encoding, told apart by its first byte) and check its structure.

    Checks the header, that every item decodes (strictly: canonical CBOR in the CBOR
    encoding), the counts and the sha256 in the trailer. Version hashes are checked by
    ``Store.import_records``.

    Raises:
        FormatError: not a cortex bundle, or a bundle version or store format this code does
            not read.
        IntegrityError: the bundle is damaged, cut short or altered.
        ValidationError: a record in a JSON Lines bundle breaks a rule (naming the line and
            field).
    """
    if data[:1] == b"{":
        return _read_jsonl(data, progress)
    return _read_cbor(data, progress)


def import_bundle(
    store: Store | Cortex, path: str | os.PathLike[str], *, progress: Progress | None = None
) -> ImportReport:
    """Import a bundle file written by ``export_store`` into ``store``, all or nothing.

    Ids, versions, hashes, times and heads are kept exactly; importing the same bundle again
    changes nothing. The whole bundle is verified (structure, digest, every version's hash)
    before the one write transaction; a bundle that does not verify is refused and nothing is
    written.

    Raises:
        FormatError: not a cortex bundle, or of an unknown version.
        IntegrityError: the bundle is damaged or altered, or a version's data does not match
            its hash.
        ValidationError: a record breaks a rule.
        ConflictError: the store holds a memory or edge of the same name with other records.
        CortexError: the file cannot be read.
    """
    argcheck.callback(progress, "progress")
    try:
        data = Path(argcheck.path(path, "path")).read_bytes()
    except OSError as exc:
        raise CortexError(f"cannot read {path}: {exc}") from exc
    bundle = read_bundle(data, progress=progress)
    return store.import_records(
        bundle.memories,
        bundle.edges,
        bundle.episodes,
        sensitivity=bundle.sensitivity,
        episode_sensitivity=bundle.episode_sensitivity,
        aliases=bundle.aliases,
    )
