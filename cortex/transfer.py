"""Export and import: a whole store as one JSON Lines or CBOR bundle (``specs/export.md``).

A bundle holds a header, every memory (its head and all its versions), every edge (removed
ones too), every episode (version 2 bundles, written when the store holds episodes) and a
trailer with counts and the sha256 of everything before it. Export reads one
snapshot and writes the file atomically; import verifies the whole bundle (structure, digest,
every version's hash) before it writes anything, then writes it in one transaction.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final, Literal

import cbor2
import msgspec

from cortex.codec import HEAD, VERSION, decode_data, encode_data
from cortex.enums import EdgeType
from cortex.episode import decode_episode, encode_episode
from cortex.errors import CodecError, CortexError, FormatError, IntegrityError, ValidationError
from cortex.ids import MemoryId
from cortex.jsonmap import from_plain, to_plain
from cortex.keys import (
    EDGE_FROM,
    edge_to_key,
    parse_edge_key,
    parse_episode_key,
    version_prefix,
)
from cortex.keys import EPISODE as EPISODE_PREFIX
from cortex.keys import HEAD as _HEAD_KEY_PREFIX
from cortex.pages import damage_error
from cortex.records import DATA_TYPES, Episode, Head, Version
from cortex.store import (
    EDGE_CODEC,
    FORMAT_VERSION,
    Edge,
    EdgeRecord,
    ImportReport,
    Store,
    _edge,
    _trusted,
    _unseal,
)

__all__ = [
    "BUNDLE_FORMAT",
    "BUNDLE_VERSION",
    "Bundle",
    "ExportReport",
    "export_store",
    "import_bundle",
    "read_bundle",
]

BUNDLE_FORMAT: Final = "cortex-export"
"""The name every bundle's header carries."""
BUNDLE_VERSION: Final = 2
"""The newest bundle layout this code writes and reads (separate from the store's format).

Version 1 holds memories and edges; version 2 adds episodes (and an ``episodes`` count in the
trailer). A store without episodes is still written as version 1, byte for byte as before."""

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


class Bundle(msgspec.Struct, frozen=True, kw_only=True):
    """A parsed, structurally verified bundle, ready for ``Store.import_records``."""

    encoding: str
    store_format: int
    memories: list[tuple[Head, list[Version]]]
    edges: list[Edge]
    episodes: list[Episode] = msgspec.field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Export


def _snapshot(store: Store) -> Iterator[tuple[int, Any]]:
    """``(total, item)`` for every memory, then every edge, from one read snapshot.

    Items are ``(head, head_payload, [(version, version_payload)])`` and
    ``(edge, edge_payload)``; payloads are the stored canonical encodings (the sealed bytes
    without their checksum), checked on the way out.
    """
    with store._kv.read_checked() as txn:
        if txn.damage:  # LMDB would abort walking the damaged pages
            raise damage_error(store.path, txn.damage)
        total = (
            sum(1 for _ in txn.keys(_HEAD_KEY_PREFIX))
            + sum(1 for _ in txn.keys(EDGE_FROM))
            + sum(1 for _ in txn.keys(EPISODE_PREFIX))
        )
        for key, value in txn.scan(_HEAD_KEY_PREFIX):
            head: Head = _trusted(HEAD, key, value)
            versions = [
                (store._checked_version(k, raw), _unseal(k, raw))
                for k, raw in txn.scan(version_prefix(head.id))
            ]
            if [v.version for v, _ in versions] != list(range(1, head.current_version + 1)):
                raise IntegrityError(
                    f"memory {head.id} points at versions 1..{head.current_version} but the "
                    "store holds others: the store is damaged; run `cortex verify`"
                )
            yield total, (head, _unseal(key, value), versions)
        for key, value in txn.scan(EDGE_FROM):
            s, et, d = parse_edge_key(key)
            rec: EdgeRecord = _trusted(EDGE_CODEC, key, value)
            # the endpoints come from the key, which no checksum covers: a damaged key would
            # export an edge between other memories, so its twin half must agree
            if txn.get(edge_to_key(d, et, s)) != value:
                raise IntegrityError(
                    f"the two halves of edge {s} {et.label} {d} differ or one is missing: the "
                    "store is damaged; run `cortex verify`"
                )
            yield total, (_edge(s, et, d, rec), _unseal(key, value))
        for key, _ in txn.scan(EPISODE_PREFIX):
            ep = store._episode(txn, parse_episode_key(key))  # checked: hash and chunks
            yield total, (ep,)


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


def _episode_from_json(obj: dict[str, Any], where: str) -> Episode:
    rest = {k: v for k, v in obj.items() if k not in ("kind", "content")}
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


def export_store(
    store: Store,
    path: str | os.PathLike[str],
    *,
    encoding: Encoding = "jsonl",
    progress: Progress | None = None,
) -> ExportReport:
    """Write every memory (all versions) and every edge of ``store`` to one bundle file.

    The bundle is read from one snapshot, so writers may continue meanwhile. The same store
    content always gives the same bytes. The file appears whole or not at all (it is written
    beside ``path`` and renamed into place).

    Args:
        store: the store to export.
        path: the file to write (replaced if it exists).
        encoding: ``jsonl`` (readable JSON Lines) or ``cbor`` (the canonical record bytes).
        progress: called as ``progress(done, total)`` with memories and edges written.

    Raises:
        ValidationError: an unknown encoding.
        IntegrityError: the store is damaged (a record fails its checksum or hash).
        CortexError: the file cannot be written.
    """
    if encoding not in ("jsonl", "cbor"):
        raise ValidationError("encoding", "enum", f"must be jsonl or cbor, got {encoding!r}")
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    digest = hashlib.sha256()
    counts = {"memories": 0, "versions": 0, "edges": 0}
    with store._kv.read_checked([(EPISODE_PREFIX, EPISODE_PREFIX)]) as txn:
        if txn.damage:
            raise damage_error(store.path, txn.damage)
        has_episodes = next(iter(txn.keys(EPISODE_PREFIX)), None) is not None
    if has_episodes:
        counts["episodes"] = 0
    size = 0
    try:
        with open(tmp, "wb") as out:

            def emit(chunk: bytes) -> None:
                nonlocal size
                digest.update(chunk)
                out.write(chunk)
                size += len(chunk)

            header = _header(encoding, 2 if has_episodes else 1)
            emit(_json_line(header) if encoding == "jsonl" else _cbor(header))
            for done, (total, item) in enumerate(_snapshot(store), start=1):
                if len(item) == 1:
                    if "episodes" not in counts:  # one was written since the check above
                        raise CortexError("an episode appeared while exporting: export again")
                    (ep,) = item
                    counts["episodes"] += 1
                    if encoding == "jsonl":
                        emit(_json_line(_episode_json(ep)))
                    else:
                        emit(_cbor(["episode", encode_episode(ep)]))
                elif len(item) == 3:
                    head, head_payload, versions = item
                    counts["memories"] += 1
                    counts["versions"] += len(versions)
                    if encoding == "jsonl":
                        line = {
                            "kind": "memory",
                            "head": to_plain(head),
                            "versions": [_version_json(v) for v, _ in versions],
                        }
                        emit(_json_line(line))
                    else:
                        emit(_cbor(["memory", head_payload, [p for _, p in versions]]))
                else:
                    edge, payload = item
                    counts["edges"] += 1
                    if encoding == "jsonl":
                        emit(_json_line({"kind": "edge", **to_plain(edge)}))
                    else:
                        emit(
                            _cbor(["edge", edge.src.bytes, int(edge.type), edge.dst.bytes, payload])
                        )
                if progress is not None:
                    progress(done, total)
            sha = digest.digest()
            if encoding == "jsonl":
                trailer = _json_line({"kind": "end", **counts, "sha256": sha.hex()})
            else:
                trailer = _cbor(["end", {**counts, "sha256": sha}])
            out.write(trailer)
            size += len(trailer)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        raise CortexError(f"cannot write the export to {target}: {exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
    return ExportReport(path=str(target), encoding=encoding, **counts, bytes=size, sha256=sha.hex())


# ---------------------------------------------------------------------------------------------
# Import


def _refuse(where: str, what: str) -> IntegrityError:
    return IntegrityError(f"the bundle does not verify: {where}: {what}; nothing was imported")


def _check_header(header: Any, encoding: Encoding) -> int:
    if not isinstance(header, dict) or header.get("format") != BUNDLE_FORMAT:
        raise FormatError(f"not a cortex export: the first item must be a {BUNDLE_FORMAT} header")
    if header.get("version") not in (1, BUNDLE_VERSION):
        raise FormatError(
            f"bundle version {header.get('version')!r} is not 1 or {BUNDLE_VERSION}; "
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
    counts = {"memories": 0, "versions": 0, "edges": 0}
    digest = hashlib.sha256()
    store_format = 0
    offset = 0
    for n, line in enumerate(lines, start=1):
        where = f"line {n}"
        try:
            obj = json.loads(line)
        except (UnicodeDecodeError, ValueError) as exc:
            raise _refuse(where, f"not JSON ({exc})") from None
        if n == 1:
            store_format = _check_header(obj, "jsonl")
            if obj.get("version") == 2:
                counts["episodes"] = 0
        elif not isinstance(obj, dict) or "kind" not in obj:
            raise _refuse(where, "an item must be an object with a kind")
        elif obj["kind"] == "memory":
            try:
                memories.append(_memory_from_json(obj, "memory"))
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
            except ValidationError as exc:
                raise ValidationError(f"{where}: {exc.field}", exc.rule, exc.message) from None
            counts["episodes"] += 1
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
    )


def _read_cbor(data: bytes, progress: Progress | None) -> Bundle:
    stream = io.BytesIO(data)
    decoder = cbor2.CBORDecoder(stream)
    memories: list[tuple[Head, list[Version]]] = []
    edges: list[Edge] = []
    episodes: list[Episode] = []
    counts = {"memories": 0, "versions": 0, "edges": 0}
    store_format = 0
    n = 0
    while True:
        start = stream.tell()
        if start == len(data):
            raise _refuse(f"byte {start}", "the bundle is cut short (no trailer)")
        n += 1
        where = f"item {n} (byte {start})"
        try:
            item = decoder.decode()
        except (cbor2.CBORDecodeError, ValueError, TypeError, EOFError) as exc:
            raise _refuse(where, f"not CBOR ({exc})") from None
        if _cbor(item) != data[start : stream.tell()]:
            raise _refuse(where, "not canonical CBOR")
        if n == 1:
            store_format = _check_header(item, "cbor")
            if item.get("version") == 2:
                counts["episodes"] = 0
            continue
        if not isinstance(item, list) or not item:
            raise _refuse(where, "an item must be an array starting with its kind")
        kind = item[0]
        try:
            if kind == "memory" and len(item) == 3 and isinstance(item[2], list):
                head = HEAD.decode(_bytes(item[1]), "head")
                versions = [VERSION.decode(_bytes(b), "version") for b in item[2]]
                memories.append((head, versions))
                counts["memories"] += 1
                counts["versions"] += len(versions)
            elif kind == "edge" and len(item) == 5:
                rec: EdgeRecord = EDGE_CODEC.decode(_bytes(item[4]), "edge")
                et = EdgeType.coerce(item[2])
                if et is None or type(item[2]) is not int:
                    raise CodecError(f"edge type {item[2]!r} is not an EdgeType code")
                src, dst = MemoryId(_bytes(item[1])), MemoryId(_bytes(item[3]))
                edges.append(_edge(src, et, dst, rec))
                counts["edges"] += 1
            elif kind == "episode" and len(item) == 2 and "episodes" in counts:
                episodes.append(decode_episode(_bytes(item[1])))
                counts["episodes"] += 1
            elif kind == "end" and len(item) == 2:
                _check_trailer(item[1], counts, hashlib.sha256(data[:start]).digest(), where)
                if stream.tell() != len(data):
                    raise _refuse(where, "bytes follow the trailer")
                break
            else:
                raise _refuse(where, f"malformed {kind!r} item")
        except (CodecError, ValidationError) as exc:
            raise _refuse(where, str(exc)) from None
        if progress is not None:
            progress(stream.tell(), len(data))
    return Bundle(
        encoding="cbor",
        store_format=store_format,
        memories=memories,
        edges=edges,
        episodes=episodes,
    )


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
    store: Store, path: str | os.PathLike[str], *, progress: Progress | None = None
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
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise CortexError(f"cannot read {path}: {exc}") from exc
    bundle = read_bundle(data, progress=progress)
    return store.import_records(bundle.memories, bundle.edges, bundle.episodes)
