"""The hash-chained journal: its entries, their codec, and the writer of one transaction.

Every mutation appends one or more entries in its own write transaction; each entry holds
``prev = sha256(previous entry bytes)``, so the journal is a chain anyone can re-check
(``specs/storage.md``). Entries name what changed, never content.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any, Final

import msgspec

from cortex.engine.values import SHORT_TEXT as _short
from cortex.model.codec import (
    TIME_FIELD,
    BytesField,
    EnumField,
    IdField,
    IntField,
    Invalid,
    ListField,
    StructCodec,
    TextField,
    encode_uint,
)
from cortex.model.enums import (
    CodedEnum,
    EdgeType,
    MemoryType,
)
from cortex.model.ids import MemoryId
from cortex.storage.keys import (
    JOURNAL,
    journal_key,
    parse_journal_key,
)
from cortex.storage.kv import WriteTxn, seal, unseal

try:
    from cortex import _speedups as _sp
except ImportError:  # pragma: no cover - installed without a C compiler
    _sp = None  # type: ignore[assignment]

_USE_SPEEDUPS: bool = _sp is not None and hasattr(_sp, "journal_entry")
"""Build a ``write`` entry in C (``JournalWriter.write_entry``); tests switch it off."""

ZERO_HASH: Final = bytes(32)
"""The ``prev`` of the first entry."""
_sha256 = hashlib.sha256
_seal = seal
_unseal = unseal


class JournalKind(CodedEnum):
    """What a journal entry records."""

    INIT = 0x01
    WRITE = 0x02
    UPDATE = 0x03
    UPDATE_HEAD = 0x04
    TOMBSTONE = 0x05
    PURGE = 0x06
    ADD_EDGE = 0x07
    REMOVE_EDGE = 0x08
    EMBED = 0x09
    MIGRATION = 0x0A
    IMPORT = 0x0B
    ATTEST = 0x0C
    CONFIRM = 0x0D
    EPISODE = 0x0E
    EPISODE_PURGE = 0x0F
    BUDGET_DROP = 0x10
    EPISODE_UPDATE = 0x11
    EXPORT = 0x12
    ALIAS = 0x13


class JournalEntry(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One mutation, chained to the previous entry by ``prev = sha256(previous entry bytes)``.

    Entries name what changed (ids, versions, content hashes, field names), never content, so a
    purge erases everything but the proof.
    """

    seq: int
    kind: JournalKind
    at: datetime
    by: str
    prev: bytes
    id: MemoryId | None = None
    type: MemoryType | None = None
    version: int | None = None
    hash: bytes | None = None
    fields: tuple[str, ...] = ()
    reason: str | None = None
    edge: EdgeType | None = None
    dst: MemoryId | None = None


JOURNAL_CODEC: Final = StructCodec(
    JournalEntry,
    [
        ("seq", IntField(1)),
        ("kind", EnumField(JournalKind)),
        ("at", TIME_FIELD),
        ("by", _short),
        ("prev", BytesField(32, exact=32)),
        ("id", IdField()),
        ("type", EnumField(MemoryType)),
        ("version", IntField(1)),
        ("hash", BytesField(32, exact=32)),
        ("fields", ListField(_short, max_items=16)),
        ("reason", TextField()),
        ("edge", EnumField(EdgeType)),
        ("dst", IdField()),
    ],
    schema_version=1,
)


_tail_memo: list[tuple[bytes, bytes]] = [(b"", b"")]
"""The sealed value of the last entry this process made and its payload's sha256: the next
write's tail, unless another writer came in between (equal bytes, the same hash)."""

_by_memo: list[tuple[object, bytes]] = [(None, b"")]
"""The last writer name (a str) ``write_shared`` encoded, checked by the codec, and its bytes."""


class JournalWriter:
    """Appends chained entries within one write transaction."""

    def __init__(self, txn: WriteTxn, at: datetime, by: str) -> None:
        self.txn = txn
        self.at = at
        self.by = by
        self._write_shared: bytes | None = None
        tail = getattr(txn, "last", None)  # LMDB's: the tail in one positioning
        last = tail(JOURNAL) if tail is not None else next(txn.scan(JOURNAL, reverse=True), None)
        if last is None:
            self.seq, self.prev = 0, ZERO_HASH
        else:
            key = last[0]
            if len(key) == 10:  # ``j/`` u64 (anything else: parse_journal_key names it)
                self.seq = int.from_bytes(key[2:], "big")
            else:
                self.seq = parse_journal_key(key)
            memo = _tail_memo[0]  # one read: another thread may replace it meanwhile
            if memo[0] == last[1] and memo[0]:
                self.prev = memo[1]
            else:
                self.prev = _sha256(_unseal(key, last[1])).digest()

    def append(self, kind: JournalKind, **fields: Any) -> JournalEntry:
        """Put the next entry of ``kind`` with ``fields``; return it."""
        self.seq += 1
        entry = JournalEntry(
            seq=self.seq, kind=kind, at=self.at, by=self.by, prev=self.prev, **fields
        )
        payload = JOURNAL_CODEC.encode(entry, "journal")
        self.txn.put(journal_key(self.seq), _seal(payload))
        self.prev = hashlib.sha256(payload).digest()
        return entry

    def staged(self, value: bytes) -> None:
        """Note ``value``, the sealed last entry put outside ``write_entry``; ``prev`` its digest.

        ``Store._stage_new`` puts entries made in C: the next writer takes its tail's digest
        from here instead of hashing the entry again.
        """
        _tail_memo[0] = (value, self.prev)

    def write_shared(self) -> bytes | None:
        """The encoded parts every ``write`` entry of this transaction shares (kind, at, by).

        None when the journal codec has to check them (it then names the field and the rule).
        """
        shared = self._write_shared
        if shared is None:
            # checked by the journal codec's own field codecs (a single write's only entry is
            # its first: it takes this path too)
            by = self.by
            try:
                memo = _by_memo[0]
                if type(by) is not str or memo[0] != by:  # the writer's name, encoded once
                    memo = (by, _short.enc(by))
                    if type(by) is str:
                        _by_memo[0] = memo
                shared = b"\x02\x02\x03" + TIME_FIELD.enc(self.at) + b"\x04" + memo[1]
            except (Invalid, TypeError, ValueError, AttributeError):
                return None
            self._write_shared = shared
        return shared

    def write_entry(
        self, mid: MemoryId, mtype: MemoryType, version: int, hash: bytes
    ) -> tuple[bytes, bytes]:
        """The next ``write`` entry's key and sealed value, for the caller to put.

        The same bytes as ``append(JournalKind.WRITE, id=..., type=..., version=..., hash=...)``
        (tests compare the two), built from the parts every entry of this transaction shares:
        the entry's map holds keys 0..9, in order, and only ``seq``, ``prev`` and the memory's
        fields vary.
        """
        shared = self.write_shared()
        seq = self.seq + 1
        if _USE_SPEEDUPS and shared is not None and type(mid) is MemoryId:
            # the C accelerator checks the rest as below (None: the code below runs)
            entry = _sp.journal_entry(
                JOURNAL, shared, seq, self.prev, mid.bytes, mtype, version, hash
            )
            if entry is not None:
                key, value, self.prev = entry
                self.seq = seq
                _tail_memo[0] = (value, self.prev)
                return key, value
        if (
            shared is None
            or type(mid) is not MemoryId
            or type(hash) is not bytes
            or len(hash) != 32
            or not 1 <= version < 1 << 63
            or seq >= 1 << 63
        ):
            # anything unusual: the codec checks (and names any error)
            key, value = (
                journal_key(seq),
                _seal(
                    JOURNAL_CODEC.encode(
                        JournalEntry(
                            seq=seq,
                            kind=JournalKind.WRITE,
                            at=self.at,
                            by=self.by,
                            prev=self.prev,
                            id=mid,
                            type=mtype,
                            version=version,
                            hash=hash,
                        ),
                        "journal",
                    )
                ),
            )
            self.seq, self.prev = seq, _sha256(value[:-4]).digest()
            return key, value
        self.seq = seq
        payload = b"".join(
            (
                b"\xaa\x00\x01\x01",
                encode_uint(seq),
                shared,
                b"\x05\x58\x20",
                self.prev,
                b"\x06\x50",
                mid.bytes,
                b"\x07",
                encode_uint(mtype.value),
                b"\x08",
                encode_uint(version),
                b"\x09\x58\x20",
                hash,
            )
        )
        self.prev = _sha256(payload).digest()
        return JOURNAL + seq.to_bytes(8, "big"), _seal(payload)
