"""Erasure records: what a purge removed, kept as fingerprints an auditor searches files for.

A purge journals what it erased (ids, content hashes) and writes one erasure record
(``er/`` seq, ``specs/storage.md`` §11) holding *needles*: fingerprints of 16-byte windows of
the content the records it deleted or rewrote held, as stored (``content_of``), taken 16 bytes
apart (the bytes a leftover copy in a free page, a page gap or a cache file would show). A
needle is a 32-bit window hash (fast to compute at every offset of a file) and 64 bits of a
personalised BLAKE2b of the window (to confirm a match). The record holds no content: it lets
someone holding the store test a guess of a whole 16-byte run of what was erased, as the
content hash of each version (kept since format 1) lets them test a guess of the whole
version; nothing in it can be read back without guessing.

``scan`` slides over a file and reports every offset where a needle's window occurs. Any
leftover run of at least 31 bytes of an erased record contains a needle's window.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import time
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Final, cast

import msgspec
import numpy as np
import numpy.typing as npt

from cortex.engine.values import decode_trusted
from cortex.errors import CortexError
from cortex.index.vectors import VECTOR_RECORD, stored_vector
from cortex.model.codec import (
    HEAD,
    TIME_FIELD,
    VERSION,
    BytesField,
    EnumField,
    IdField,
    IntField,
    ListField,
    StructCodec,
    TextField,
)
from cortex.model.enums import CodedEnum
from cortex.model.episode import decode_episode
from cortex.model.ids import MemoryId
from cortex.model.records import Forms, Head, Version
from cortex.storage.kv import KV, LmdbKV, WriteTxn, seal, unseal

__all__ = [
    "CONTENT_PREFIXES",
    "ERASURE_CODEC",
    "KEYED_CONTENT",
    "MAX_NEEDLES",
    "NEEDLE_SIZE",
    "SCRUB_CODEC",
    "WINDOW",
    "ErasureKind",
    "ErasureRecord",
    "ErasureReport",
    "Needles",
    "Recorder",
    "Residue",
    "ScrubMark",
    "ScrubReport",
    "content_of",
    "needles_of",
    "scan_file",
    "scrub_files",
    "sidecar_copy",
    "store_files",
    "window_hashes",
]

WINDOW: Final = 16
"""Bytes per fingerprinted window."""
MAX_NEEDLES: Final = 65536
"""Needles per record at most; a larger erasure (a big episode) spaces them further apart."""
NEEDLE_SIZE: Final = 12  # 4 bytes of window hash, 8 of BLAKE2b
_PERSON: Final = b"cortex.erase.v1"
_P: Final = 0x9E3779B1  # odd, so invertible modulo 2**32
_Q: Final = pow(_P, -1, 1 << 32)
_TABLE: Final = np.array(
    [
        int.from_bytes(hashlib.sha256(b"cortex.erasure.table.v1" + bytes([i])).digest()[:4], "big")
        for i in range(256)
    ],
    dtype=np.uint32,
)
_CHUNK: Final = 1 << 14  # window hashes per numpy pass: the arrays stay in cache
_BITS: Final = 24


def _powers(base: int, n: int) -> npt.NDArray[np.uint32]:
    out = np.empty(n, dtype=np.uint32)
    out[0] = 1
    out[1:] = base
    return np.cumprod(out, dtype=np.uint32)


_QPOW: Final = _powers(_Q, _CHUNK + WINDOW)
_PPOW: Final = _powers(_P, _CHUNK + WINDOW)


def window_hashes(data: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint32]:
    """The 32-bit hash of every ``WINDOW``-byte window of ``data`` (``len - WINDOW + 1``).

    ``h(w) = sum(T[w[j]] * Q**j) mod 2**32`` for a fixed random table ``T``: position-free, so
    a prefix sum gives every window in a few array passes.
    """
    n = len(data)
    if n < WINDOW:
        return np.zeros(0, dtype=np.uint32)
    out = np.empty(n - WINDOW + 1, dtype=np.uint32)
    for start in range(0, n - WINDOW + 1, _CHUNK):
        part = data[start : min(n, start + _CHUNK + WINDOW - 1)]
        m = len(part)
        t = np.take(_TABLE, part)
        t *= _QPOW[:m]
        s = np.empty(m + 1, dtype=np.uint32)
        s[0] = 0
        np.cumsum(t, out=s[1:])
        x = s[WINDOW:] - s[:-WINDOW]
        x *= _PPOW[: m - WINDOW + 1]
        out[start : start + len(x)] = x
    return out


def _confirm(window: bytes) -> bytes:
    return hashlib.blake2b(window, digest_size=8, person=_PERSON).digest()


def needles_of(fragments: Iterable[bytes]) -> bytes:
    """The packed needles of ``fragments``: the erased content as stored (``content_of``).

    Windows start every ``WINDOW`` bytes, and one ends at each fragment's end; when there
    would be more than ``MAX_NEEDLES`` they start further apart. A fragment shorter than a
    window has none (it is found inside the longer ones that hold it).
    """
    frags = [f for f in fragments if len(f) >= WINDOW]
    if not frags:
        return b""
    total = sum(len(f) // WINDOW + 1 for f in frags)
    stride = WINDOW * max(1, -(-total // MAX_NEEDLES))
    out: dict[bytes, None] = {}
    for f in frags:
        hashes = window_hashes(np.frombuffer(f, dtype=np.uint8))
        starts = list(range(0, len(f) - WINDOW + 1, stride))
        if starts[-1] != len(f) - WINDOW:
            starts.append(len(f) - WINDOW)
        for i in starts:
            w = f[i : i + WINDOW]
            if len(set(w)) < 3 or w.count(0) >= WINDOW // 2:
                # a run like 16 zero bytes, or mostly zeros (a sparse vector's stretch):
                # such windows turn up everywhere and identify nothing
                continue
            out[int(hashes[i]).to_bytes(4, "big") + _confirm(w)] = None
            if len(out) >= MAX_NEEDLES:
                return b"".join(out)
    return b"".join(out)


def sidecar_copy(vector: bytes) -> bytes:
    """A stored vector (widened to float32 bytes) as the hnswlib cache holds it.

    Scaled to unit length by the index (numpy), then again by hnswlib (a float32 sum in
    order, ``1 / (sqrt + 1e-30)``).
    """
    v = np.frombuffer(vector, dtype="<f4")
    if not len(v) or not np.isfinite(v).all():
        return b""
    row = v[None, :]
    norms = np.linalg.norm(row, axis=1)
    if not norms[0] > 0:
        return b""
    unit = np.ascontiguousarray(row / norms[:, None], dtype=np.float32)[0]
    acc = np.float32(0.0)
    for x in unit:
        acc = np.float32(acc + np.float32(x * x))
    scale = np.float32(1.0) / (np.float32(np.sqrt(acc)) + np.float32(1e-30))
    copy: bytes = (unit * scale).astype("<f4").tobytes()
    return copy


class ErasureKind(CodedEnum):
    """What an erasure record erased."""

    MEMORY = 0x01
    EPISODE = 0x02


class ErasureRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``er/`` u64(seq): what the purge journalled at ``seq`` erased, as needles.

    Attributes:
        seq: the journal entry of the purge (kind ``purge`` or ``episode_purge``).
        kind: a memory or an episode.
        id: its id.
        at: when it was erased.
        by: who erased it.
        hashes: the content hashes of what was erased (every version's; the episode's).
        window: bytes per fingerprinted window (``WINDOW``).
        needles: ``NEEDLE_SIZE``-byte needles, a 32-bit window hash then 8 bytes of BLAKE2b
            (``None``: the erased content was too short to fingerprint).
        records: stored records the purge deleted or rewrote.
        size: their bytes before (keys and values).
    """

    seq: int
    kind: ErasureKind
    id: MemoryId
    at: datetime
    by: str
    hashes: tuple[bytes, ...] = ()
    window: int = WINDOW
    needles: bytes | None = None
    records: int = 0
    size: int = 0


ERASURE_CODEC: Final = StructCodec(
    ErasureRecord,
    [
        ("seq", IntField(1)),
        ("kind", EnumField(ErasureKind)),
        ("id", IdField()),
        ("at", TIME_FIELD),
        ("by", TextField(256)),
        ("hashes", ListField(BytesField(32, exact=32), max_items=1 << 24)),
        ("window", IntField(1, 4096)),
        ("needles", BytesField(NEEDLE_SIZE * MAX_NEEDLES)),
        ("records", IntField(0)),
        ("size", IntField(0)),
    ],
    schema_version=1,
)


class ScrubMark(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``meta/scrub``: the last erasure step.

    Its commit is what frees the pages a purge released from the previous meta page's tree,
    so that they can be zeroed.
    """

    at: datetime
    by: str
    count: int


SCRUB_CODEC: Final = StructCodec(
    ScrubMark,
    [("at", TIME_FIELD), ("by", TextField(256)), ("count", IntField(1))],
    schema_version=1,
)


class ScrubReport(msgspec.Struct, frozen=True, kw_only=True):
    """What one erasure step (``scrub``) did.

    Attributes:
        complete: every byte an erased record left in the store's files is gone: no read
            snapshot older than the step held a page, and nothing failed.
        free_pages: free pages LMDB may reuse (every one is now zero).
        free_pages_zeroed: of those, how many held bytes.
        held_pages: free pages a read snapshot or the previous meta page may still read
            (their gaps are zeroed; they are zeroed whole by a later step).
        gaps_zeroed: page gaps (between node pointers and nodes) that held bytes.
        tails_zeroed: unused ends of large values' last pages that held bytes.
        beyond_pages_zeroed: pages past the last one in use that held bytes.
        bytes_zeroed: bytes overwritten in ``data.mdb``.
        holding: ``(pid, txn id)`` of the read snapshots older than the step still open when
            it gave up waiting.
        separators: branch-page copies of deleted content keys whose subtrees were rewritten.
        sidecar_files: vector index files rewritten without erased vectors.
        files_zeroed: the step zeroed the engine's files (LMDB). False on PostgreSQL: the
            step ran ``VACUUM`` (no row or index entry keeps the content) and ``holding`` lists
            ``(pid, xmin age)`` of transactions older than it; the server's files, WAL and
            replicas are the operator's part (``specs/storage.md`` §11).
        seconds: how long it took.
    """

    complete: bool
    free_pages: int
    free_pages_zeroed: int
    held_pages: int
    gaps_zeroed: int
    tails_zeroed: int
    beyond_pages_zeroed: int
    bytes_zeroed: int
    holding: tuple[tuple[int, int], ...] = ()
    separators: int = 0
    sidecar_files: int = 0
    files_zeroed: bool = True
    seconds: float = 0.0


class Residue(msgspec.Struct, frozen=True, kw_only=True):
    """One place a file holds a window of erased bytes.

    Attributes:
        file: the file, relative to the store directory.
        offset: where the window starts.
        region: for ``data.mdb`` what the bytes are (``free``, ``held``, ``gap``, ``tail``,
            ``beyond``, ``meta``, ``separator``: a branch-page copy of a deleted key;
            ``node``, ``overflow``: a live record); in a saved vector index ``vector`` (an
            element in use) or ``deleted``; ``file`` for anything else.
        seq: the erasure record (its journal seq) whose needle matched.
        id: the memory or episode erased.
        key: for a live record (``node``), its key (shown escaped).
    """

    file: str
    offset: int
    region: str
    seq: int
    id: str
    key: str | None = None


class ErasureReport(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of ``verify_erasure``.

    Attributes:
        ok: no residue, no problem.
        records: erasure records checked.
        needles: needles searched for.
        files: files scanned (relative paths).
        scanned: bytes scanned.
        residues: windows of erased records found outside live records.
        shared: windows found that a live record also holds (the same bytes are live
            content of another record: not evidence of a leftover).
        problems: ``(record, what)`` for live records that still hold erased content.
        unscrubbed: bytes of ``data.mdb`` no reader can read but not zero (written since the
            last erasure step; not erased content unless a residue says so).
        held_pages: free pages a read snapshot or the previous meta page may still read.
        stale_separators: copies of deleted term keys (lexical and evidence postings and
            terms) that branch pages still hold (the next erasure step rewrites them; any
            update or tombstone leaves some, an erasure step leaves none).
        files_searched: the store's files were searched (LMDB). False on PostgreSQL: the
            records are checked, the server's files are not (``specs/storage.md`` §11).
        seconds: how long it took.
    """

    ok: bool
    records: int
    needles: int
    files: tuple[str, ...]
    scanned: int
    residues: tuple[Residue, ...]
    shared: tuple[Residue, ...]
    problems: tuple[tuple[str, str], ...]
    unscrubbed: int
    held_pages: int
    stale_separators: int
    seconds: float
    files_searched: bool = True


class Needles:
    """Every needle of some erasure records, indexed for ``scan``."""

    def __init__(self, records: Iterable[ErasureRecord]) -> None:
        self.owner: dict[bytes, list[int]] = {}  # the 12-byte needle -> record seqs
        self.records: dict[int, ErasureRecord] = {}
        for rec in records:
            self.records[rec.seq] = rec
            raw = rec.needles or b""
            for i in range(0, len(raw) - NEEDLE_SIZE + 1, NEEDLE_SIZE):
                self.owner.setdefault(raw[i : i + NEEDLE_SIZE], []).append(rec.seq)
        hashes = np.array(
            sorted({int.from_bytes(n[:4], "big") for n in self.owner}), dtype=np.uint32
        )
        self.hashes = hashes
        # a first filter on the low bits of the hash: about 1 in 64 offsets pass it, and the
        # table stays small enough to stay in cache
        self.bits = max(12, min(_BITS, (max(1, len(hashes)) * 64).bit_length()))
        self.table = np.zeros(1 << self.bits, dtype=bool)
        self.table[hashes & ((1 << self.bits) - 1)] = True

    def __len__(self) -> int:
        return len(self.owner)

    def scan(self, data: npt.NDArray[np.uint8]) -> Iterator[tuple[int, bytes]]:
        """``(offset, needle)`` of every needle window in ``data``."""
        if not len(self.hashes):
            return
        n = len(data)
        step = 1 << 20
        mask = (1 << self.bits) - 1
        for start in range(0, max(0, n - WINDOW + 1), step):
            part = data[start : min(n, start + step + WINDOW - 1)]
            h = window_hashes(part)
            cand = np.nonzero(self.table[h & mask])[0]
            if not len(cand):
                continue
            hc = h[cand]
            pos = np.searchsorted(self.hashes, hc)
            pos[pos >= len(self.hashes)] = 0
            for i in cand[self.hashes[pos] == hc].tolist():
                at = start + i
                needle = int(h[i]).to_bytes(4, "big") + _confirm(bytes(data[at : at + WINDOW]))
                if needle in self.owner:
                    yield at, needle

    def match(self, window: bytes) -> bytes | None:
        """The needle of a ``WINDOW``-byte window, if it is one."""
        h = window_hashes(np.frombuffer(window, dtype=np.uint8))
        if len(window) != WINDOW:
            return None
        needle = int(h[0]).to_bytes(4, "big") + _confirm(window)
        return needle if needle in self.owner else None


def scan_file(path: Path, needles: Needles) -> tuple[int, list[tuple[int, bytes]]]:
    """``(size, [(offset, needle), ...])`` for one file (mapped, not read into memory).

    Raises:
        CortexError: the file cannot be read.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise CortexError(f"cannot read {path} to audit it: {exc}") from exc
    try:
        size = os.fstat(fd).st_size
        if size < WINDOW:
            data = os.pread(fd, size, 0)
            return size, list(needles.scan(np.frombuffer(data, dtype=np.uint8)))
        with mmap.mmap(fd, size, prot=mmap.PROT_READ) as buf:
            arr = np.frombuffer(buf, dtype=np.uint8)
            try:
                return size, list(needles.scan(arr))
            finally:
                del arr
    except OSError as exc:
        raise CortexError(f"cannot read {path} to audit it: {exc}") from exc
    finally:
        os.close(fd)


def store_files(root: Path) -> list[Path]:
    """Every regular file under the store directory, in a stable order."""
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if p.is_file() and not p.is_symlink():
                out.append(p)
    return out


_KEY_ONLY: Final = (b"lex/p/", b"lex/t/", b"cx/p/", b"cx/t/")
CONTENT_PREFIXES: Final = (
    b"m/",
    b"mv/",
    b"lex/p/",
    b"lex/d/",
    b"lex/t/",
    b"lex/s/",
    b"vec/",
    b"ep/",
    b"cx/p/",
    b"cx/t/",
    b"cv/",
)
"""Keyspaces whose keys or values carry memory or episode content (``specs/storage.md`` §2);
the others hold ids, hashes, counts and times."""
KEYED_CONTENT: Final = _KEY_ONLY
"""Keyspaces whose keys themselves carry content (a term): a deleted one must not live on as a
B-tree separator."""


def content_of(key: bytes, value: bytes) -> list[bytes]:
    """The content a stored record holds, as the bytes that appear in the file.

    Data (canonical CBOR), form texts, tags, frame references and caller text in provenance
    of versions and heads; the terms of lexical and evidence keys; vectors; episode text.
    Ids, hashes, times and counts are not content. A value that does not decode is taken
    whole.
    """
    try:
        payload = unseal(key, value) if not key.startswith(_KEY_ONLY) else b""
        if key.startswith(b"mv/"):
            v: Version = VERSION.decode(payload, "version")
            out = [] if v.data is None else [v.data]
            out += _forms(v.forms)
            for src in v.provenance.sources:
                out += [src.session_id.encode(), *(m.encode() for m in src.message_ids)]
            return out
        if key.startswith(b"m/"):
            h: Head = HEAD.decode(payload, "head")
            out = [t.encode() for t in h.tags] + [f.obj_ref.encode() for f in h.frames]
            return out + _forms(h.forms)
        if key.startswith(_KEY_ONLY):
            # the term is the content (ended by 0x00 where ids follow); the value is a count
            # or postings
            end = key.find(b"\x00")
            return [key if end < 0 else key[: end + 1]]
        if key.startswith(b"lex/s/"):
            # a posting segment holds terms and ids of many memories; a purge folds every
            # segment into the blocks, whose keys and counts then say which terms went
            return []
        if key.startswith(b"vec/"):
            rec = VECTOR_RECORD.decode(payload, "vector")
            # the bytes as stored (float16 or float32) and as the index cache holds them
            # (widened to float32, scaled to unit length)
            try:
                widened = stored_vector(rec).astype("<f4").tobytes()
            except ValueError:  # fewer bytes than its dimensions (damaged): as stored only
                widened = b""
            return [rec.vector, sidecar_copy(widened)]
        if key.startswith(b"ep/"):
            ep = decode_episode(payload)
            return [] if ep.content is None else [ep.content]
        return [payload]  # cv/ (a vector), lex/d/ (the terms)
    except (CortexError, UnicodeError):
        return [key + value]


def _forms(forms: Forms | None) -> list[bytes]:
    if forms is None:
        return []
    return [t.encode() for t in (forms.short, forms.medium) if t]


class Recorder:
    """A write transaction that remembers the bytes each content record had before.

    A purge runs through it; ``before`` then maps every content key it deleted or rewrote to
    its old value, and ``erased`` gives the content those held. It lends no cursor, so the
    lexical index takes its plain path through ``get``/``put``/``delete``.
    """

    def __init__(self, txn: WriteTxn) -> None:
        self._txn = txn
        self.before: dict[bytes, bytes | None] = {}

    def _note(self, key: bytes) -> None:
        if key not in self.before and key.startswith(CONTENT_PREFIXES):
            self.before[key] = self._txn.get(key)

    def get(self, key: bytes) -> bytes | None:
        """As ``WriteTxn``'s (reads pass through)."""
        return self._txn.get(key)

    def scan(
        self, prefix: bytes, *, start: bytes | None = None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        """As ``WriteTxn``'s (reads pass through)."""
        return self._txn.scan(prefix, start=start, reverse=reverse)

    def keys(
        self, prefix: bytes, *, start: bytes | None = None, reverse: bool = False
    ) -> Iterator[bytes]:
        """As ``WriteTxn``'s (reads pass through)."""
        return self._txn.keys(prefix, start=start, reverse=reverse)

    def seek(self, prefix: bytes, start: bytes, *, reverse: bool = False) -> bytes | None:
        """As ``WriteTxn``'s (reads pass through)."""
        return self._txn.seek(prefix, start, reverse=reverse)

    def around(self, prefix: bytes, key: bytes) -> tuple[bytes | None, bytes | None, bytes | None]:
        """As ``WriteTxn``'s (reads pass through)."""
        return self._txn.around(prefix, key)

    # writes are noted first
    def put(self, key: bytes, value: bytes, *, overwrite: bool = True) -> bool:
        """As ``WriteTxn``'s, noting the old value first."""
        self._note(key)
        return self._txn.put(key, value, overwrite=overwrite)

    def delete(self, key: bytes) -> bool:
        """As ``WriteTxn``'s, noting the old value first."""
        self._note(key)
        return self._txn.delete(key)

    def put_many(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        """As ``WriteTxn``'s, noting the old value first."""
        items = list(items)
        for key, _ in items:
            self._note(key)
        self._txn.put_many(items)

    def add_many(self, items: Iterable[tuple[bytes, bytes]]) -> int:
        """As ``WriteTxn``'s, noting the old value first."""
        items = list(items)
        for key, _ in items:
            self._note(key)
        return self._txn.add_many(items)

    def erased(self) -> list[bytes]:
        """The content the records changed held before (``content_of`` their old values).

        A term counts only where its key went (its last posting or its document frequency):
        a term other records still hold is live content, not evidence of a leftover. The
        lexical document (the sorted terms of the memory) is left out for the same reason;
        the text it was made from is in.
        """
        gone = {  # terms whose document frequency went to zero: no record holds them now
            key.replace(b"/t/", b"/p/", 1) + b"\x00"
            for key, old in self.before.items()
            if old is not None
            and key.startswith((b"lex/t/", b"cx/t/"))
            and self._txn.get(key) is None
        }
        out: list[bytes] = []
        for key, old in self.before.items():
            if old is None or key.startswith(b"lex/d/"):
                continue
            if key.startswith(_KEY_ONLY):
                if key.startswith((b"lex/t/", b"cx/t/")):
                    if self._txn.get(key) is not None:
                        continue
                elif key[: key.find(b"\x00") + 1] not in gone:
                    continue
            out += content_of(key, old)
        return out


SCRUB_KEY: Final = b"meta/scrub"
"""The last erasure step (``erasure.ScrubMark``, format 8)."""


def scrub_files(kv: KV, actor: str, wait: float, now: datetime) -> ScrubReport:
    """The erasure step on a store's files (``Store.scrub``, see there), marked by ``actor``.

    LMDB: the ``meta/scrub`` mark, then every unused byte of the data file zeroed
    (``cortex.storage.scrub``); PostgreSQL: the mark, then VACUUM of the store's table.
    """
    started = time.perf_counter()

    def mark(txn: WriteTxn) -> int:
        raw = txn.get(SCRUB_KEY)
        count = 1 if raw is None else decode_trusted(SCRUB_CODEC, SCRUB_KEY, raw).count + 1
        record = ScrubMark(at=now, by=actor, count=count)
        txn.put(SCRUB_KEY, seal(SCRUB_CODEC.encode(record, "meta/scrub")))
        if not isinstance(kv, LmdbKV):
            return 0
        return kv.refresh_separators(txn, KEYED_CONTENT)

    lmdb_files = isinstance(kv, LmdbKV)
    if not lmdb_files:
        # PostgreSQL (``specs/storage.md`` §11): the mark, then VACUUM of the store's table;
        # the server's files, its WAL and replicas are the operator's part
        kv.write(mark)
        pg_holding = kv.vacuum(wait)  # type: ignore[attr-defined]
        return ScrubReport(
            complete=not pg_holding,
            free_pages=0,
            free_pages_zeroed=0,
            held_pages=0,
            gaps_zeroed=0,
            tails_zeroed=0,
            beyond_pages_zeroed=0,
            bytes_zeroed=0,
            holding=tuple(pg_holding),
            files_zeroed=False,
            seconds=time.perf_counter() - started,
        )
    # the pages that held stale separators are freed by the commit that rewrote them: one
    # more commit lets them be zeroed (a few rounds at most: a rewrite makes new ones rarely)
    rewritten = 0
    for _ in range(4):
        found = kv.write(mark)
        rewritten += found
        if not found:
            break
    kv = cast(LmdbKV, kv)
    target = kv.last_txnid() - 1
    kv.wait_for_snapshots(target, wait)
    counts, snapshots = kv.zero_unused()
    holding = tuple(sorted((pid, t) for pid, t in snapshots if t <= target))
    return ScrubReport(
        complete=not holding,
        free_pages=counts.free_pages,
        free_pages_zeroed=counts.free_pages_zeroed,
        held_pages=counts.held_pages,
        gaps_zeroed=counts.gaps_zeroed,
        tails_zeroed=counts.tails_zeroed,
        beyond_pages_zeroed=counts.beyond_pages_zeroed,
        bytes_zeroed=counts.bytes_zeroed,
        holding=holding,
        separators=rewritten,
        seconds=time.perf_counter() - started,
    )
