"""Erasure: a purge of a memory or an episode, and the audit that nothing erased is left.

A purge rewrites the records that held the content without it, in one write transaction that
also writes an erasure record (``er/``: fingerprints of what went); its erasure step
(``cortex.engine.erasure.scrub_files``) then zeroes the freed bytes of the store's files
(``specs/storage.md`` §11). ``verify_erasure`` audits every erasure record. The functions work on
any engine with the parts ``Purgeable`` names (``cortex.engine.store.Store`` is one).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import msgspec

from cortex.engine import erasure
from cortex.engine.erasure import (
    ERASURE_CODEC,
    KEYED_CONTENT,
    ErasureKind,
    ErasureRecord,
    ErasureReport,
    Residue,
    ScrubReport,
)
from cortex.engine.heads import check_tombstone, head_row, read_head, set_pin
from cortex.engine.hooks import GuardChange
from cortex.engine.importer import episode_source
from cortex.engine.journal import JournalKind, JournalWriter
from cortex.engine.values import (
    decode_trusted,
)
from cortex.errors import (
    CodecError,
    CortexError,
    ErasurePendingError,
    IntegrityError,
    ValidationError,
)
from cortex.index import evidence, lexical
from cortex.index.ann import saved_region
from cortex.index.lexical import Indexer
from cortex.model.codec import (
    HEAD,
    VERSION,
    to_micros,
)
from cortex.model.episode import decode_episode, encode_episode, purged
from cortex.model.ids import MemoryId
from cortex.model.records import (
    Episode,
    Head,
    Provenance,
    SourceRef,
    Tombstone,
    Version,
)
from cortex.storage.keys import ERASURE as ERASURE_PREFIX
from cortex.storage.keys import (
    claim_index_key,
    episode_key,
    erasure_key,
    head_key,
    lex_doc_key,
    salience_key,
    show_key,
    vec_key,
    version_prefix,
)
from cortex.storage.kv import KV, LmdbKV, ReadTxn, WriteTxn, seal, unseal
from cortex.storage.scrub import Layout, separators, unused_ranges

__all__ = [
    "Purgeable",
    "check_wait",
    "erase_now",
    "erased_provenance",
    "purge",
    "purge_episode",
    "verify_erasure",
]

_seal = seal
_unseal = unseal
_show_key = show_key
_Placed = tuple[int, bytes, str, bytes | None]  # offset, needle, region, live key


class Purgeable(Protocol):
    """What a purge uses of the engine (``Store``'s engine interface)."""

    actor: str

    @property
    def kv(self) -> KV: ...  # noqa: D102 - the class says

    @property
    def path(self) -> str: ...  # noqa: D102

    @property
    def guard_change(self) -> GuardChange: ...  # noqa: D102

    def now(self) -> datetime: ...  # noqa: D102

    def head(self, txn: ReadTxn, mid: MemoryId) -> Head: ...  # noqa: D102

    def episode_record(self, txn: ReadTxn, eid: MemoryId) -> Episode: ...  # noqa: D102

    def claims_of(self, txn: ReadTxn, head: Head) -> tuple[bytes, ...]: ...  # noqa: D102

    def losers(self, txn: ReadTxn, mid: MemoryId) -> list[MemoryId]: ...  # noqa: D102

    def move_index(self, txn: WriteTxn, old: Head, new: Head) -> None: ...  # noqa: D102

    def remark(  # noqa: D102
        self, txn: WriteTxn, mids: Iterable[MemoryId], now_us: int
    ) -> None: ...

    def erasure_step(self, wait: float, now: datetime) -> ScrubReport: ...  # noqa: D102


def purge(
    engine: Purgeable,
    mid: MemoryId,
    reason: str,
    by: str | None = None,
    *,
    scrub: bool = True,
    wait: float = 30.0,
) -> Tombstone:
    """``Store.purge`` (see there) of memory ``mid`` on ``engine``."""
    now = engine.now()
    who = by if by is not None else engine.actor
    check_tombstone(Tombstone(reason=reason, at=now, by=who))
    check_wait(wait)

    def txn_fn(txn: WriteTxn) -> Tombstone:
        head = engine.head(txn, mid)
        row = head_row(txn, head)  # format 21: the row stays the memory's (a gap, never reused)
        engine.guard_change(txn, mid, head)
        if head.tombstone is not None and head.tombstone.purged_at is not None:
            return head.tombstone
        stone = head.tombstone or Tombstone(reason=reason, at=now, by=who)
        stone = msgspec.structs.replace(stone, purged_at=now)
        # the vector goes below, so the head must stop pointing at it
        new_head = msgspec.structs.replace(
            head,
            tombstone=stone,
            tags=(),
            frames=(),
            forms=None,
            embedding_ref=None,
            sensitivity=None,  # nothing left to protect (``sensitivity.md`` §2)
            has_counters=False,  # the use counters go with the data (below)
            last_updated_at=now,
        )
        for c in engine.claims_of(txn, head):  # hashes of the content: they go with it
            txn.delete(claim_index_key(c, mid))
        rec = erasure.Recorder(txn)
        # every posting segment folded first (not recorded: what it changes is the index of
        # earlier commits), then the memory's postings removed from the blocks: its terms leave
        # the index's keys and values (a segment would keep them in the blocks below a removal)
        lexical.fold(txn)
        lex = Indexer(rec, fold=True)
        # (before its versions are erased: the removal renders the indexed one again)
        if lex.remove(row, head.current_version):  # absent when tombstoned first
            lex.flush()
        hashes: list[bytes] = []
        current_hash: bytes | None = None
        for key, value in list(txn.scan(version_prefix(row))):
            v: Version = decode_trusted(VERSION, key, value)
            hashes.append(v.hash)
            if v.version == head.current_version:
                current_hash = v.hash
            erased = msgspec.structs.replace(
                v, data=None, forms=None, provenance=erased_provenance(v.provenance)
            )
            rec.put(key, _seal(VERSION.encode(erased, "version")))
        engine.move_index(txn, head, new_head)
        set_pin(txn, head, False)  # the data is erased
        rec.delete(vec_key(row))
        txn.delete(salience_key(row))
        rec.put(head_key(row), _seal(HEAD.encode(new_head, "head")))
        engine.remark(txn, engine.losers(txn, mid), to_micros(now))  # tombstoned now
        entry = JournalWriter(txn, now, engine.actor).append(
            JournalKind.PURGE,
            id=mid,
            type=head.type,
            version=head.current_version,
            hash=current_hash,
            reason=reason,
        )
        _put_erasure(txn, entry.seq, ErasureKind.MEMORY, mid, now, who, hashes, rec)
        return stone

    stone: Tombstone = engine.kv.write(txn_fn)
    if scrub:
        erase_now(engine, f"memory {mid}", wait, now)
    return stone


def purge_episode(
    engine: Purgeable,
    eid: MemoryId,
    reason: str,
    by: str | None = None,
    *,
    scrub: bool = True,
    wait: float = 30.0,
) -> Episode:
    """``Store.purge_episode`` (see there) on ``engine``."""
    if not isinstance(reason, str) or not reason.strip():
        raise ValidationError("reason", "required", "say why the episode is erased")
    check_wait(wait)
    now = engine.now()
    who = by if by is not None else engine.actor

    def txn_fn(txn: WriteTxn) -> Episode:
        ep = engine.episode_record(txn, eid)
        if ep.content is None:
            return ep
        # its level goes with the content: nothing is left to protect
        gone = msgspec.structs.replace(purged(ep, now), sensitivity=None)
        rec = erasure.Recorder(txn)
        evidence.unindex_episode(rec, ep)
        rec.put(episode_key(eid), _seal(encode_episode(gone)))
        entry = JournalWriter(txn, now, who).append(
            JournalKind.EPISODE_PURGE, id=eid, hash=ep.hash, reason=reason
        )
        _put_erasure(txn, entry.seq, ErasureKind.EPISODE, eid, now, who, [ep.hash], rec)
        return gone

    result: Episode = engine.kv.write(txn_fn)
    if scrub:
        erase_now(engine, f"episode {eid}", wait, now)
    return result


def erase_now(engine: Purgeable, what: str, wait: float, now: datetime) -> ScrubReport:
    """Run the erasure step after a purge; raise ``ErasurePendingError`` unless complete.

    The step is marked with the purge's time, so that a purge reads the clock once.
    """
    try:
        report = engine.erasure_step(wait, now)
    except CortexError as exc:
        raise ErasurePendingError(
            f"{what} is purged (no read returns its content), but the erasure step failed: "
            f"{exc}; its bytes stay in freed pages until `cortex scrub` succeeds"
        ) from exc
    if not report.complete and not report.files_zeroed:
        pids = ", ".join(f"pid {pid} (xmin age {t})" for pid, t in report.holding)
        raise ErasurePendingError(
            f"{what} is purged (no read returns its content), but transactions older than "
            f"the purge still keep its dead rows after {wait:g} s: {pids}; run `cortex "
            "scrub` (Store.scrub()) once they end, or purge again",
            report,
        )
    if not report.complete:
        pids = ", ".join(f"pid {pid} (txn {t})" for pid, t in report.holding)
        raise ErasurePendingError(
            f"{what} is purged (no read returns its content), but read snapshots opened "
            f"before the purge still hold pages with its bytes after {wait:g} s: {pids}; "
            "run `cortex scrub` (Store.scrub()) once they end, or purge again",
            report,
        )
    return report


def verify_erasure(kv: KV, store_path: str) -> ErasureReport:
    """``Store.verify_erasure`` (see there) of the store on ``kv`` in ``store_path``."""
    started = time.perf_counter()
    problems: list[tuple[str, str]] = []
    records: list[ErasureRecord] = []
    with kv.read() as txn:
        for key, value in txn.scan(ERASURE_PREFIX):
            try:
                rec: ErasureRecord = ERASURE_CODEC.decode(_unseal(key, value), "erasure")
            except (IntegrityError, CodecError) as exc:
                problems.append((_show_key(key), str(exc)))
                continue
            records.append(rec)
            problems.extend(_leftovers(txn, rec))
    needles = erasure.Needles(records)
    if not isinstance(kv, LmdbKV):
        # PostgreSQL: the records are checked; the files are the server's (§11)
        return ErasureReport(
            ok=not problems,
            records=len(records),
            needles=len(needles),
            files=(),
            scanned=0,
            residues=(),
            shared=(),
            problems=tuple(problems),
            unscrubbed=0,
            held_pages=0,
            stale_separators=0,
            files_searched=False,
            seconds=time.perf_counter() - started,
        )
    root = Path(store_path)
    names: list[str] = []
    scanned = 0
    hits: dict[str, list[tuple[int, bytes]]] = {}
    for path in erasure.store_files(root):
        name = path.relative_to(root).as_posix()
        size, found = erasure.scan_file(path, needles)
        names.append(name)
        scanned += size
        if found:
            hits[name] = found
    data_hits = hits.pop("data.mdb", [])

    def place(buf: Any, layout: Layout) -> tuple[list[_Placed], int, int, list[bytes]]:
        placed = []
        for offset, needle in data_hits:
            if needles.match(bytes(buf[offset : offset + erasure.WINDOW])) != needle:
                continue  # rewritten since the scan
            region = layout.region(buf, offset)
            key = layout.node_key(buf, offset) if region == "node" else None
            if region == "node" and layout.is_branch(offset):
                region = "branch"  # a key's copy: live only if that key still exists
            placed.append((offset, needle, region, key))
        unused = sum(n for _, n, _ in unused_ranges(buf, layout))
        keyed = [k for k, _ in separators(buf, layout, KEYED_CONTENT)]
        return placed, unused, layout.held_count(), keyed

    placed, unscrubbed, held, keyed = kv.inspect(place)
    with kv.read() as txn:
        stale = sum(1 for k in keyed if txn.get(k) is None)
        placed = [
            (off, needle, ("node" if txn.get(key) is not None else "separator"), key)
            if region == "branch" and key is not None
            else (off, needle, region, key)
            for off, needle, region, key in placed
        ]
    live = {needle for _, needle, region, _ in placed if region in ("node", "overflow")}
    residues: list[Residue] = []
    shared: list[Residue] = []
    found_all: list[tuple[str, int, bytes, str, bytes | None]] = [
        ("data.mdb", off, needle, region, key) for off, needle, region, key in placed
    ]
    for name, found in hits.items():
        if name.endswith(".hnsw"):  # the vector index cache: placed like data.mdb
            regions = saved_region(root / name, [off for off, _ in found])
        else:
            regions = ["file"] * len(found)
        for (off, needle), region in zip(found, regions, strict=True):
            found_all.append((name, off, needle, region, None))
            if region == "vector":
                live.add(needle)
    for name, offset, needle, region, live_key in found_all:
        for seq in needles.owner[needle]:
            rec = needles.records[seq]
            residue = Residue(
                file=name,
                offset=offset,
                region=region,
                seq=seq,
                id=str(rec.id),
                key=None if live_key is None else _show_key(live_key),
            )
            (shared if needle in live else residues).append(residue)
    return ErasureReport(
        ok=not residues and not problems,
        records=len(records),
        needles=len(needles),
        files=tuple(names),
        scanned=scanned,
        residues=tuple(residues),
        shared=tuple(shared),
        problems=tuple(problems),
        unscrubbed=unscrubbed,
        held_pages=held,
        stale_separators=stale,
        seconds=time.perf_counter() - started,
    )


def _leftovers(txn: ReadTxn, rec: ErasureRecord) -> list[tuple[str, str]]:
    """``(record, what)`` for every record of an erased memory or episode still holding content."""
    out: list[tuple[str, str]] = []
    mid = rec.id
    if rec.kind is ErasureKind.EPISODE:
        raw = txn.get(episode_key(mid))
        if raw is None:
            return [(f"ep/{mid}", "the erased episode is missing")]
        try:
            ep = decode_episode(_unseal(episode_key(mid), raw))
        except (IntegrityError, CodecError) as exc:
            return [(f"ep/{mid}", str(exc))]
        if ep.content is not None or ep.chunks:
            out.append((f"ep/{mid}", "still holds its text"))
        for prefix in (evidence.CHUNK_DOC, evidence.CHUNK_VECTOR):
            if next(txn.keys(prefix + mid.bytes), None) is not None:
                out.append((f"{prefix.decode()}{mid}", "the erased episode still has chunks here"))
        return out
    try:
        got = read_head(txn, mid)
    except IntegrityError as exc:
        return [(f"id/{mid}", str(exc))]
    if got is None:
        return [(f"id/{mid}", "the erased memory is missing")]
    row, head = got
    if head.tombstone is None or head.tombstone.purged_at is None:
        out.append((f"m/{row}", "is not purged"))
    if head.tags or head.frames or head.forms is not None:
        out.append((f"m/{row}", "still holds tags, frames or forms"))
    if head.has_counters:
        out.append((f"m/{row}", "still says the memory has use counters"))
    for key, value in txn.scan(version_prefix(row)):
        v: Version = decode_trusted(VERSION, key, value)
        if v.data is not None or v.forms is not None:
            out.append((_show_key(key), "still holds data or forms"))
        if v.provenance != erased_provenance(v.provenance):
            out.append((_show_key(key), "its provenance still holds session or message ids"))
    for key, what in (
        (lex_doc_key(row), "a lexical document"),
        (vec_key(row), "a vector"),
        (salience_key(row), "use counters"),
    ):
        if txn.get(key) is not None:
            out.append((_show_key(key), f"the erased memory still has {what}"))
    return out


def check_wait(wait: object) -> None:
    """Refuse a ``wait`` (seconds of an erasure step) that is not a number >= 0."""
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not wait >= 0:
        raise ValidationError("wait", "range", f"must be a number of seconds >= 0, got {wait!r}")


def erased_provenance(p: Provenance) -> Provenance:
    """A purged version's provenance: what of it is not caller text.

    Its kind, the URIs it was derived from and the episode spans it was drawn from (ids and
    offsets); session ids and message ids are caller text and go.
    """
    sources = tuple(
        SourceRef(session_id=src.session_id, span=src.span)
        for src in p.sources
        if episode_source(Provenance(source=p.source, sources=(src,))) is not None
    )
    return Provenance(source=p.source, derived_from=p.derived_from, sources=sources)


def _put_erasure(  # noqa: PLR0917 - private, one call site each for memories and episodes
    txn: WriteTxn,
    seq: int,
    kind: ErasureKind,
    mid: MemoryId,
    at: datetime,
    by: str,
    hashes: Sequence[bytes],
    recorded: erasure.Recorder,
) -> None:
    content = recorded.erased()
    record = ErasureRecord(
        seq=seq,
        kind=kind,
        id=mid,
        at=at,
        by=by,
        hashes=tuple(hashes),
        needles=erasure.needles_of(content) or None,
        records=sum(1 for v in recorded.before.values() if v is not None),
        size=sum(len(c) for c in content),
    )
    txn.put(erasure_key(seq), _seal(ERASURE_CODEC.encode(record, "erasure")))
