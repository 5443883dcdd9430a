"""FORMAT 21 (memories keyed by a row number) tested against its spec, not against the code.

``specs/storage.md`` version 21 (§2 Rows, the keys table, Databases; §5 format 21 and
``0020-memory-rows``; §6 purge; §7 the ``id/`` <-> ``m/`` bijection; §11 erasure),
``specs/lexical.md`` version 7 (the document number is the row), ``specs/vector-index.md``
version 5 and ``specs/query.md`` (``vec/`` and ``sal/`` by row). The keys and values are
built and read here from the spec's words (big-endian integers, sealed CBOR records), not
through ``cortex.storage.keys``, so that a disagreement between the code and the spec shows
even when the code agrees with itself.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cbor2
import msgspec
import pytest

from cortex import (
    Cortex,
    CortexError,
    Fact,
    IntegrityError,
    LLMExtractor,
    MemoryId,
    NewMemory,
    NotFoundError,
    Outcome,
    Query,
    StoreFullError,
)
from cortex.index.embed import HashingEmbedder
from cortex.storage.engines import copy_kv, open_kv
from cortex.storage.kv import LmdbKV
from cortex.transfer import migrate as M
from cortex.transfer.bundle import export_store, import_bundle
from tests.test_ingest import ANSWER, CHAT, llm

ROOT = Path(__file__).resolve().parent.parent
FIXTURE20 = ROOT / "tests" / "data" / "format20.cortex"
MIGRATION = "0020-memory-rows"

ID = b"id/"
HEAD = b"m/"
VERSION = b"mv/"
VEC = b"vec/"
SAL = b"sal/"
LEX_D = b"lex/d/"
LEX_I = b"lex/i/"
LEX_P = b"lex/p/"
LEX_S = b"lex/s/"
STATS = b"meta/lexical"
ROW_KEYSPACES = (HEAD, VERSION, VEC, SAL, LEX_D)


# --- the spec's encodings, written out here ---------------------------------------------------


def u32(n: int) -> bytes:
    return n.to_bytes(4, "big")


def u64(n: int) -> bytes:
    return n.to_bytes(8, "big")


def seal(payload: bytes) -> bytes:
    return payload + zlib.crc32(payload).to_bytes(4, "big")


def unseal(value: bytes) -> bytes:
    payload = value[:-4]
    assert zlib.crc32(payload).to_bytes(4, "big") == value[-4:], "a CRC that does not check"
    return payload


def cbor_map(value: bytes) -> dict[int, Any]:
    out: dict[int, Any] = cbor2.loads(unseal(value))
    return out


def cbor_seal(record: dict[int, Any]) -> bytes:
    return seal(cbor2.dumps(dict(sorted(record.items())), canonical=True))


def id_key(mid: MemoryId | bytes) -> bytes:
    return ID + (mid.bytes if isinstance(mid, MemoryId) else mid)


def head_key(row: int) -> bytes:
    return HEAD + u32(row)


def version_key(row: int, n: int) -> bytes:
    return VERSION + u32(row) + u64(n)


def dump(cx: Cortex) -> dict[bytes, bytes]:
    with cx._kv.read() as txn:
        return {bytes(k): bytes(v) for k, v in txn.scan(b"")}


def dump_at(where: Any) -> dict[bytes, bytes]:
    kv = open_kv(where, create=False)
    try:
        with kv.read() as txn:
            return {bytes(k): bytes(v) for k, v in txn.scan(b"")}
    finally:
        kv.close()


def rows(items: dict[bytes, bytes]) -> dict[bytes, int]:
    """``id/``: id16 -> row, each value checked as §2 states (sealed, 4 bytes, big-endian)."""
    out = {}
    for k, v in items.items():
        if k.startswith(ID):
            assert len(k) == len(ID) + 16, k
            payload = unseal(v)
            assert len(payload) == 4, (k, v)
            out[k[len(ID) :]] = int.from_bytes(payload, "big")
    return out


def heads(items: dict[bytes, bytes]) -> dict[int, dict[int, Any]]:
    """``m/``: row -> the decoded Head."""
    out = {}
    for k, v in items.items():
        if k.startswith(HEAD):
            assert len(k) == len(HEAD) + 4, k
            out[int.from_bytes(k[len(HEAD) :], "big")] = cbor_map(v)
    return out


def next_docno(items: dict[bytes, bytes]) -> int:
    return int(cbor_map(items[STATS])[5])


def read_varint(p: bytes, i: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = p[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def posting_rows(items: dict[bytes, bytes]) -> dict[str, set[int]]:
    """Every term's document numbers in the main index (lexical.md §4a blocks)."""
    assert not any(k.startswith(LEX_S) for k in items), "fold the segments first"
    out: dict[str, set[int]] = {}
    for k, v in items.items():
        if not k.startswith(LEX_P):
            continue
        assert k[-5] == 0
        term = k[len(LEX_P) : -5].decode()
        docno = int.from_bytes(k[-4:], "big")
        p = unseal(v)
        i = 0
        first = True
        while i < len(p):
            if not first:
                delta, i = read_varint(p, i)
                docno += delta
            first = False
            _, i = read_varint(p, i)
            _, i = read_varint(p, i)
            out.setdefault(term, set()).add(docno)
    return out


def memory_keys(items: dict[bytes, bytes], row: int) -> set[bytes]:
    """Every key of the row keyspaces that names ``row``."""
    return {k for k in items for ks in ROW_KEYSPACES if k.startswith(ks + u32(row))}


def fact(text: str, subject: str = "s") -> Fact:
    return Fact(statement=text, subject=subject, predicate="p")


def rid(rng: random.Random) -> MemoryId:
    return MemoryId(rng.randbytes(16))


def check_bijection(items: dict[bytes, bytes]) -> dict[bytes, int]:
    """§2 Rows: ``id/`` and ``m/`` are a bijection, each head naming the id that maps to it."""
    by_id = rows(items)
    by_row = heads(items)
    assert sorted(by_id.values()) == sorted(by_row), "an id/ row without a head or back"
    for mid, row in by_id.items():
        assert by_row[row][1] == mid, (mid.hex(), row)
    assert len(set(by_id.values())) == len(by_id)
    # every other per-memory key is of a row with a head
    for k in items:
        for ks in (VERSION, VEC, SAL, LEX_D):
            if k.startswith(ks):
                assert int.from_bytes(k[len(ks) : len(ks) + 4], "big") in by_row, k
    assert not any(k.startswith(LEX_I) for k in items), "format 21 has no lex/i/"
    if by_row:
        assert next_docno(items) > max(by_row)
    return by_id


# --- 1. rows: given in write order, one per memory, kept, never given again ------------------


def test_rows_follow_the_writes_whatever_the_ids(store_path: Any) -> None:
    rng = random.Random(21)
    chosen = [rid(rng) for _ in range(6)]
    assert sorted(chosen) != chosen
    order: list[MemoryId] = []
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        order.append(cx.write(fact("own id one")).uri.id)
        order.append(cx.write(fact("chosen id one"), id=chosen[0]).uri.id)
        res = cx.write_many(
            [
                NewMemory(data=fact("batch chosen a"), id=chosen[1]),
                NewMemory(data=fact("batch own b")),
                NewMemory(data=fact("batch chosen c"), id=chosen[2]),
                fact("batch own d, plain data"),
                NewMemory(data=fact("batch chosen e"), id=chosen[3]),
            ]
        )
        order += [r.uri.id for r in res]
        order.append(cx.write(fact("chosen late"), id=chosen[4]).uri.id)
        order.append(cx.write(fact("own late")).uri.id)
        assert order[1] == chosen[0] and order[2] == chosen[1] and order[6] == chosen[3]
        items = dump(cx)
        by_id = check_bijection(items)
        assert by_id == {m.bytes: n for n, m in enumerate(order)}
        assert next_docno(items) == len(order)
        # the lexical document of each memory holds its row as its docno (lexical.md §4)
        for n in by_id.values():
            assert cbor_map(items[LEX_D + u32(n)])[3] == n
        assert cx.verify().ok


def test_rows_are_kept_for_life_and_never_given_again(store_path: Any) -> None:
    rng = random.Random(7)
    ids = [rid(rng) for _ in range(8)]
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        cx.write_many(NewMemory(data=fact(f"kettle note {i}"), id=m) for i, m in enumerate(ids))
        want = {m.bytes: n for n, m in enumerate(ids)}
        assert rows(dump(cx)) == want
        cx.update(ids[2], fact("kettle note two, rewritten"))
        cx.update(ids[2], fact("kettle note two, rewritten again"))
        cx.update_head(ids[3], tags=["moved"])
        cx.tombstone(ids[4], "gone")
        cx.purge(ids[5], "forget")
        cx.tombstone(ids[6], "gone first")
        cx.purge(ids[6], "then forget")
        cx.attest([ids[1]], Outcome.SUCCESS)
        items = dump(cx)
        assert rows(items) == want  # purged memories keep their id/ record too (§2 Rows)
        check_bijection(items)
        # versions stay under the row: three of memory 2
        assert [k for k in items if k.startswith(VERSION + u32(2))] == [
            version_key(2, n) for n in (1, 2, 3)
        ]
        assert next_docno(items) == 8
        late = rid(rng)
        cx.write(fact("kettle late"), id=late)
        own = cx.write(fact("kettle own late")).uri.id
        items = dump(cx)
        assert rows(items)[late.bytes] == 8 and rows(items)[own.bytes] == 9
        assert next_docno(items) == 10
        # a rebuild of the lexical index keeps the numbers (lexical.md §4: no renumbering)
        cx.reindex_lexical()
        cx.merge_lexical()
        after = dump(cx)
        assert rows(after) == rows(items)
        assert next_docno(after) == 10
        docs = {int.from_bytes(k[len(LEX_D) :], "big"): cbor_map(v)[3] for k, v in after.items()
                if k.startswith(LEX_D)}  # fmt: skip
        assert docs == {n: n for n in (0, 1, 2, 3, 7, 8, 9)}  # the live memories, by row
        assert cx.verify().ok


def test_a_failed_write_takes_no_row(store_path: Any) -> None:
    rng = random.Random(3)
    taken = rid(rng)
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        cx.write(fact("first"), id=taken)
        before = dump(cx)
        # a validation error: an empty statement, a bad tag
        with pytest.raises(CortexError):
            cx.write(fact(""), id=rid(rng))
        with pytest.raises(CortexError):
            cx.write(fact("ok text"), tags=["x" * 10_000])
        # an id that is taken (§2 Rows: "gives no row (nothing is written)")
        with pytest.raises(CortexError):
            cx.write(fact("other text"), id=taken)
        # a batch with one bad item writes nothing, takes no rows
        with pytest.raises(CortexError):
            cx.write_many(
                [NewMemory(data=fact("fine a"), id=rid(rng)), NewMemory(data=fact("dup"), id=taken)]
            )
        with pytest.raises(CortexError):
            cx.write_many([NewMemory(data=fact("fine b")), NewMemory(data=fact(""))])
        twice = rid(rng)  # one id twice in a batch
        with pytest.raises(CortexError):
            cx.write_many(
                [NewMemory(data=fact("c"), id=twice), NewMemory(data=fact("d"), id=twice)]
            )
        assert dump(cx) == before
        nxt = cx.write(fact("second"), id=rid(rng)).uri.id
        assert rows(dump(cx))[nxt.bytes] == 1
        assert next_docno(dump(cx)) == 2


def test_a_write_that_would_need_row_2_32_fails(store_path: Any, tmp_path: Path) -> None:
    """§2 Rows: a write that would need row 2^32 MUST fail (StoreFullError, nothing written):
    a single write, a batch that would cross it, an import."""
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        for i in range(3):
            cx.write(fact(f"to export {i}"), id=MemoryId(bytes([i + 1]) * 16))
        export_store(cx, tmp_path / "three.jsonl")
    with Cortex.open(tmp_path / "other", actor="t", as_owner=True) as cx:
        cx.write(fact("first memory"))
        stats = cbor_map(dump(cx)[STATS])
        stats[5] = 2**32 - 2
        cx._kv.write(lambda txn: txn.put(STATS, cbor_seal(stats)))
        before = dump(cx)
        with pytest.raises(StoreFullError):
            cx.write_many([fact("this one fits"), fact("this one too"), fact("not this one")])
        with pytest.raises(StoreFullError):
            import_bundle(cx, tmp_path / "three.jsonl")
        assert dump(cx) == before
        cx.write(fact("row 2**32 - 2"))
        last = cx.write(fact("the last row")).uri.id
        items = dump(cx)
        assert rows(items)[last.bytes] == 2**32 - 1
        assert cx.verify().ok
        assert next_docno(items) == 2**32
        before = dump(cx)
        with pytest.raises(StoreFullError):
            cx.write(fact("one too many"))
        with pytest.raises(StoreFullError):
            cx.write_many([fact("one too many"), fact("and another")])
        assert dump(cx) == before


# --- 2. keys: the exact bytes ---------------------------------------------------------------


def test_the_keys_of_a_memory_are_by_its_row(store_path: Any) -> None:
    rng = random.Random(11)
    with Cortex.open(store_path, actor="t", as_owner=True, embedder=HashingEmbedder(16)) as cx:
        for i in range(3):
            cx.write(fact(f"filler {i}"), id=rid(rng))
        mid = rid(rng)
        cx.write(fact("zebra crossings glow"), id=mid, tags=["road"])
        cx.update(mid, fact("zebra crossings glow at night"))
        cx.attest([mid], Outcome.SUCCESS)
        cx.merge_lexical()
        items = dump(cx)
        row = 3
        assert items[id_key(mid)] == seal(u32(row))
        assert memory_keys(items, row) == {
            head_key(row),
            version_key(row, 1),
            version_key(row, 2),
            VEC + u32(row),
            SAL + u32(row),
            LEX_D + u32(row),
        }
        head = cbor_map(items[head_key(row)])
        assert head[1] == mid.bytes and head[3] == 2
        for n in (1, 2):
            version = cbor_map(items[version_key(row, n)])
            assert version[1] == mid.bytes and version[2] == n
        assert unseal(items[SAL + u32(row)])[:16] == mid.bytes  # format 12: names its memory
        assert cbor_map(items[VEC + u32(row)])[3] == 2  # the vector of version 2
        doc = cbor_map(items[LEX_D + u32(row)])
        assert doc[0] == 2 and doc[1] == 2 and doc[3] == row
        # postings are keyed by the row: every term of the text holds row 3, and only it
        post = posting_rows(items)
        for term in ("zebra", "cross", "glow", "night"):
            assert post[term] == {row}, term
        # nothing is keyed by the id but id/ (and the index keys that name it)
        for k in items:
            if mid.bytes in k:
                assert k.startswith((ID, b"idx/", b"e/", b"prov/")), k
        assert not any(k.startswith(LEX_I) for k in items)
        # the id/ key sorts by id; none of the row keyspaces' keys is of the old length
        assert all(len(k) == len(HEAD) + 4 for k in items if k.startswith(HEAD))
        assert all(len(k) == len(VERSION) + 12 for k in items if k.startswith(VERSION))
        # a read by id reads id/ then m/ at the row
        assert cx.resolve_latest(mid).data == fact("zebra crossings glow at night")
        assert cx.verify().ok


@pytest.mark.lmdb_only
def test_id_is_a_named_database_of_its_own(tmp_path: Path) -> None:
    """§2 Databases: on LMDB, id/ (format ≥ 21) is in a named database ``\\x01db/id/``; lex/i/
    has none."""
    where = tmp_path / "s"
    with Cortex.open(where, actor="t", as_owner=True) as cx:
        cx.write(fact("one"))
    import lmdb

    env = lmdb.open(str(where), readonly=True, lock=False, max_dbs=64, subdir=True)
    try:
        with env.begin() as txn:
            names = [bytes(k) for k, _ in txn.cursor() if bytes(k).startswith(b"\x01db/")]
        assert b"\x01db/id/" in names
        assert b"\x01db/m/" in names
        assert b"\x01db/lex/i/" not in names
        db = env.open_db(b"\x01db/id/", create=False)
        with env.begin(db=db) as txn:
            keys = [bytes(k) for k, _ in txn.cursor()]
        assert len(keys) == 1 and keys[0].startswith(ID)
    finally:
        env.close()


# --- 3. purge -------------------------------------------------------------------------------


def test_a_purge_erases_the_records_by_row(store_path: Any, engine: str) -> None:
    """§2 Rows and §6: a purged memory keeps its head (tombstoned, content erased), its
    versions' hashes and its id/ record; its vector, use counters, lexical document and
    postings go, and the row is not given again."""
    rng = random.Random(5)
    secret = "quagmirezyx"
    with Cortex.open(store_path, actor="t", as_owner=True, embedder=HashingEmbedder(16)) as cx:
        keep = [rid(rng) for _ in range(4)]
        cx.write_many(NewMemory(data=fact(f"harbour note {i}"), id=m) for i, m in enumerate(keep))
        gone = rid(rng)
        cx.write(fact(f"harbour {secret} sealed away", subject=secret), id=gone, tags=[secret])
        cx.update(gone, fact(f"harbour {secret} sealed away twice", subject=secret))
        cx.attest([gone], Outcome.SUCCESS)
        cx.merge_lexical()
        row = 4
        before = dump(cx)
        assert rows(before)[gone.bytes] == row
        assert {VEC + u32(row), SAL + u32(row), LEX_D + u32(row)} <= set(before)
        cx.purge(gone, "erase")
        cx.merge_lexical()
        after = dump(cx)
        assert after[id_key(gone)] == seal(u32(row))
        assert memory_keys(after, row) == {head_key(row), version_key(row, 1), version_key(row, 2)}
        head = cbor_map(after[head_key(row)])
        assert head[1] == gone.bytes and 9 in head and 7 not in head and 13 not in head
        for n in (1, 2):
            v = cbor_map(after[version_key(row, n)])
            assert 4 not in v and 11 not in v and v[5] == cbor_map(before[version_key(row, n)])[5]
        assert all(row not in docs for docs in posting_rows(after).values())
        for k, v in after.items():
            assert secret.encode() not in k and secret.encode() not in v, k
        assert cx.verify().ok
        hits = cx.find(Query(text=secret, limit=5)).hits
        assert gone not in [h.memory.id for h in hits]
        assert all("lexical" not in h.ranks for h in hits)  # no posting holds the term
        new = cx.write(fact("harbour after"), id=rid(rng)).uri.id
        assert rows(dump(cx))[new.bytes] == 5  # the purged row is a gap, never given again
        cx.scrub(wait=5)
        audit = cx.verify_erasure()  # §11: no record of the memory holds content, no residue
        assert audit.ok, audit
    if engine == "lmdb":
        data = (Path(store_path) / "data.mdb").read_bytes()
        assert data.count(secret.encode()) == 0
        assert data.count(before[LEX_D + u32(row)]) == 0
        assert data.count(before[VEC + u32(row)]) == 0


# --- 4. reads by id: the same answers with random ids as with the store's own ---------------


class Tick:
    """A clock one millisecond a call, from a fixed instant."""

    def __init__(self) -> None:
        from datetime import UTC, datetime

        self.now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

    def __call__(self) -> Any:
        from datetime import timedelta

        self.now += timedelta(milliseconds=1)
        return self.now


def _populate(cx: Cortex, ids: list[MemoryId | None]) -> list[MemoryId]:
    """The same memories, with ``ids`` (None: the store's own)."""
    texts = [
        ("tea is grown in the hills", "tea", ["drink"]),
        ("coffee is roasted in the town", "coffee", ["drink"]),
        ("the hills are green in spring", "hills", ["place"]),
        ("the town has a market on fridays", "town", ["place"]),
        ("spring rain fills the river", "river", ["place", "water"]),
        ("the river runs past the tea gardens", "river", ["water"]),
        ("a market sells tea and coffee", "market", ["drink", "place"]),
    ]
    out = []
    # single writes: the items of one write_many share their created time, and the type and
    # tag indexes order ties by id (§2), which differ between the two stores by design
    for (text, subject, tags), mid in zip(texts, ids, strict=True):
        kw: dict[str, Any] = {"tags": tags}
        if mid is not None:
            kw["id"] = mid
        out.append(cx.write(fact(text, subject), **kw).uri.id)
    cx.update(out[1], fact("coffee is roasted in the old town", "coffee"))
    cx.tombstone(out[3], "closed")
    cx.attest([out[0], out[6]], Outcome.SUCCESS)
    cx.merge_lexical()
    return out


def _norm(m: Any, pos: dict[bytes, int]) -> Any:
    """A Memory with its id replaced by its place in the write order."""
    head = msgspec.structs.replace(m.head, id=MemoryId(bytes(16)))
    version = msgspec.structs.replace(m.version, id=MemoryId(bytes(16)))
    return (pos[m.id.bytes], head, version, m.data)


def _hits(hits: Any, pos: dict[bytes, int]) -> list[Any]:
    return [
        (_norm(h.memory, pos), h.text, h.tokens, round(h.score, 9), getattr(h, "tier", None))
        for h in hits
    ]


def test_reads_by_id_are_the_same_with_random_ids(place: Callable[[str], Any]) -> None:
    rng = random.Random(99)
    chosen: list[MemoryId | None] = [rid(rng) for _ in range(7)]
    own: list[MemoryId | None] = [None] * 7
    seen = []
    for name, ids in (("own", own), ("random", chosen)):
        with Cortex.open(place(name), actor="t", as_owner=True, clock=Tick()) as cx:
            got = _populate(cx, ids)
            pos = {m.bytes: i for i, m in enumerate(got)}
            items = dump(cx)
            assert rows(items) == pos  # rows in write order either way
            out: dict[str, Any] = {}
            out["get"] = [_norm(cx.resolve_latest(m), pos) for m in got]
            out["resolve"] = [_norm(cx.resolve(f"{cx.resolve_latest(m).uri}"), pos) for m in got]
            out["history"] = [[_norm(v, pos) for v in cx.history(m)] for m in got]
            when = cx.history(got[1])[0].version.created_at  # before the update of memory 1
            as_of: list[Any] = []
            for m in got:
                try:
                    as_of.append(_norm(cx.resolve_as_of(m, when), pos))
                except NotFoundError:  # created later
                    as_of.append(None)
            assert as_of[1] is not None and as_of[1][2].version == 1 and as_of[2] is None
            out["as_of"] = as_of
            out["type"] = _hits(cx.find(Query(types=["Fact"], limit=20)).hits, pos)
            out["tomb"] = _hits(
                cx.find(Query(types=["Fact"], include_tombstoned=True, limit=20)).hits, pos
            )
            out["tag"] = _hits(cx.find(Query(tags=["place"], limit=20)).hits, pos)
            out["tag2"] = _hits(cx.find(Query(tags=["drink", "place"], limit=20)).hits, pos)
            for q in ("tea", "market town", "river spring"):
                out[f"text {q}"] = _hits(cx.find(Query(text=q, limit=20)).hits, pos)
            out["context"] = _hits(cx.context("find", query="tea hills").hits, pos)
            out["counters"] = [cx.salience_state(m) for m in got]
            seen.append(out)
    for key in seen[0]:
        assert seen[0][key] == seen[1][key], key


# --- 5. verify: the id/ <-> m/ bijection ----------------------------------------------------


def _small(cx: Cortex, rng: random.Random) -> list[MemoryId]:
    ids = [rid(rng) for _ in range(4)]
    cx.write_many(NewMemory(data=fact(f"lamp note {i}"), id=m) for i, m in enumerate(ids))
    cx.merge_lexical()
    return ids


DAMAGE = [
    "id/ to a row with no head",
    "head with no id/",
    "id/ to another memory's head",
    "two id/ swapped",
    "id/ value of 3 bytes",
    "id/ value CRC broken",
    "head key of 3 bytes",
    "head key of 5 bytes",
    "head moved to a free row",
    "id/ key of 15 bytes",
    "vec/ of a row with no head",
    "lex/d/ docno not its row",
    "next_docno not past every row",
    "sal/ of a row with no head",
    "mv/ of a row with no head",
    "lex/d/ of a row with no head",
    "lex/d/ key of 5 bytes",
    "vec/ key of 3 bytes",
    "sal/ key of 5 bytes",
    "mv/ key of 11 bytes",
]


NAMED = {
    "id/ to a row with no head": "id/",
    "head with no id/": "m/1",
    "id/ to another memory's head": "id/",
    "two id/ swapped": "id/",
    "id/ value of 3 bytes": "id/",
    "id/ value CRC broken": "id/",
    "head key of 3 bytes": "id/",
    "head key of 5 bytes": "id/",
    "head moved to a free row": "m/77",
    "id/ key of 15 bytes": "m/1",
    "vec/ of a row with no head": "",
    "lex/d/ docno not its row": "lex/d/1",
    "next_docno not past every row": "meta/lexical",
    "sal/ of a row with no head": "",
    "mv/ of a row with no head": "",
    "lex/d/ of a row with no head": "",
    "lex/d/ key of 5 bytes": "",
    "vec/ key of 3 bytes": "",
    "sal/ key of 5 bytes": "",
    "mv/ key of 11 bytes": "",
}
"""Where verify's report must point (a prefix of a problem's record)."""


@pytest.mark.parametrize("damage", DAMAGE)
def test_verify_reports_a_broken_bijection(store_path: Any, damage: str) -> None:
    rng = random.Random(17)
    with Cortex.open(store_path, actor="t", as_owner=True, embedder=HashingEmbedder(8)) as cx:
        ids = _small(cx, rng)
        cx.attest([ids[1]], Outcome.SUCCESS)
        assert cx.verify().ok
        items = dump(cx)
        a, b = ids[1].bytes, ids[2].bytes

        def hurt(txn: Any) -> None:
            if damage == "id/ to a row with no head":
                txn.put(id_key(rid(rng)), seal(u32(999)))
            elif damage == "head with no id/":
                txn.delete(id_key(a))
            elif damage == "id/ to another memory's head":
                txn.put(id_key(a), seal(u32(2)))
            elif damage == "two id/ swapped":
                txn.put(id_key(a), items[id_key(b)])
                txn.put(id_key(b), items[id_key(a)])
            elif damage == "id/ value of 3 bytes":
                txn.put(id_key(a), seal(b"\x00\x00\x01"))
            elif damage == "id/ value CRC broken":
                v = bytearray(items[id_key(a)])
                v[-1] ^= 0x40
                txn.put(id_key(a), bytes(v))
            elif damage == "head key of 3 bytes":
                txn.delete(head_key(1))
                txn.put(HEAD + b"\x00\x00\x01", items[head_key(1)])
            elif damage == "head key of 5 bytes":
                txn.delete(head_key(1))
                txn.put(head_key(1) + b"\x00", items[head_key(1)])
            elif damage == "head moved to a free row":
                txn.delete(head_key(1))
                txn.put(head_key(77), items[head_key(1)])
            elif damage == "id/ key of 15 bytes":
                txn.delete(id_key(a))
                txn.put(id_key(a)[:-1], items[id_key(a)])
            elif damage == "vec/ of a row with no head":
                txn.put(VEC + u32(50), items[VEC + u32(1)])
            elif damage == "lex/d/ docno not its row":
                doc = cbor_map(items[LEX_D + u32(1)])
                doc[3] = 3
                txn.put(LEX_D + u32(1), cbor_seal(doc))
            elif damage == "sal/ of a row with no head":
                txn.put(SAL + u32(60), seal(a + cbor2.dumps({0: 1, 1: 1, 2: 0, 3: 0, 4: 0})))
            elif damage == "mv/ of a row with no head":
                txn.put(version_key(61, 1), items[version_key(1, 1)])
            elif damage == "lex/d/ of a row with no head":
                doc = cbor_map(items[LEX_D + u32(1)])
                doc[3] = 62
                txn.put(LEX_D + u32(62), cbor_seal(doc))
            elif damage.endswith(" bytes") and damage.split(maxsplit=1)[0] in (
                "lex/d/",
                "vec/",
                "sal/",
                "mv/",
            ):
                prefix = damage.split(maxsplit=1)[0].encode()
                key = next(k for k in sorted(items) if k.startswith(prefix))
                value = items[key]
                want = int(damage.split()[3]) + len(prefix)
                txn.delete(key)
                txn.put((key + b"\x00")[:want], value)
            elif damage == "next_docno not past every row":
                stats = cbor_map(items[STATS])
                stats[5] = 3
                txn.put(STATS, cbor_seal(stats))
            else:
                raise AssertionError(damage)

        cx._kv.write(hurt)
        report = cx.verify()  # never raises
        assert not report.ok, damage
        assert any(p.record.startswith(NAMED[damage]) for p in report.problems), report.problems
        if damage in ("id/ to another memory's head", "two id/ swapped"):
            # a read by id must not return another memory (§2 Rows, §3 what a read checks)
            try:
                m = cx.resolve_latest(ids[1])
            except CortexError:
                pass
            else:
                assert m.id == ids[1], "a read by id returned another memory"


# --- 6. migration 0020-memory-rows from the format-20 fixture -------------------------------


def _copy20(tmp_path: Path, store_path: Any) -> Any:
    dest = tmp_path / "v20"
    dest.mkdir()
    shutil.copy(FIXTURE20 / "data.mdb", dest / "data.mdb")
    if not isinstance(store_path, str):
        return dest
    src = LmdbKV(dest, readonly=True, create=False)
    try:
        copy_kv(src, store_path)
    finally:
        src.close()
    return store_path


def _format20(items: dict[bytes, bytes]) -> dict[str, Any]:
    """The per-memory records of a format-20 store, by id (storage.md §2, formats 1–20)."""
    out: dict[str, Any] = {"head": {}, "versions": {}, "vec": {}, "sal": {}, "docno": {}}
    for k, v in items.items():
        if k.startswith(VERSION):
            assert len(k) == len(VERSION) + 16 + 3 + 8 and k[19:22] == b"/v/", k
            out["versions"].setdefault(k[3:19], {})[int.from_bytes(k[22:], "big")] = v
        elif k.startswith(HEAD):
            assert len(k) == len(HEAD) + 16, k
            assert cbor_map(v)[1] == k[2:]
            out["head"][k[2:]] = v
        elif k.startswith(VEC):
            out["vec"][k[4:]] = v
        elif k.startswith(SAL):
            out["sal"][k[4:]] = v
        elif k.startswith(LEX_D):
            out["docno"][k[6:]] = cbor_map(v)[3]
    names = {
        int.from_bytes(k[6:], "big"): unseal(v) for k, v in items.items() if k.startswith(LEX_I)
    }
    assert names == {n: m for m, n in out["docno"].items()}  # lex/i/ and lex/d/ agree
    out["next"] = next_docno(items)
    return out


def _fixture_reads(cx: Cortex) -> dict[str, Any]:
    """What the store answers by id and by query."""
    items = dump(cx)
    out: dict[str, Any] = {}
    for mid in sorted(rows(items)):
        m = MemoryId(mid)
        try:
            out[mid] = (cx.resolve_latest(m), cx.history(m))
        except NotFoundError:  # a memory the owner may not read (sensitivity.md)
            out[mid] = "hidden"
    for q in ("crate barrels of tar", "ferries", "tea", "lighthouse", "train"):
        hits = cx.find(Query(text=q, limit=30)).hits
        out[f"text {q}"] = [(h.memory.id, round(h.score, 9)) for h in hits]
    for tag in ("hold-0", "hold-1", "people"):
        out[f"tag {tag}"] = cx.find(Query(tags=[tag], limit=50)).uris
    return out


def _fresh_format21(tmp_path: Path) -> Path:
    """A store written at format 21 by the fixture's own steps (tools/make_fixture_v20.py)."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from make_fixture_v1 import ACTOR, FixedClock, populate
        from make_fixture_v8 import populate_labels
        from make_fixture_v9 import populate_text
        from make_fixture_v10 import populate_counters
        from make_fixture_v11 import populate_chains
        from make_fixture_v12 import DIM, populate_vectors
        from make_fixture_v13 import populate_docnos
        from make_fixture_v14 import populate_forms
        from make_fixture_v15 import populate_lean
        from make_fixture_v17 import populate_refs
        from make_fixture_v18 import populate_many
        from make_fixture_v20 import populate_random
    finally:
        sys.path.remove(str(ROOT / "tools"))
    path = tmp_path / "fresh"
    clock = FixedClock()
    with Cortex.open(path, actor=ACTOR, clock=clock) as cx:
        for step in (populate, populate_labels, populate_text, populate_counters, populate_chains):
            step(cx)
    with Cortex.open(path, actor=ACTOR, clock=clock, embedder=HashingEmbedder(DIM)) as cx:
        for step in (
            populate_vectors,
            populate_docnos,
            populate_forms,
            populate_lean,
            populate_refs,
            populate_many,
            populate_random,
        ):
            step(cx)
    return path


def test_0020_keys_every_memory_by_its_row(tmp_path: Path, store_path: Any) -> None:
    where = _copy20(tmp_path, store_path)
    old = _format20(dump_at(where))
    memories = set(old["head"])
    assert len(memories) > 200
    indexed = set(old["docno"])
    others = sorted(memories - indexed)
    assert others, "the fixture holds tombstoned and purged memories"
    report = M.migrate(where)
    [step] = [s for s in report.steps if s.step.name == MIGRATION]
    assert step.records == len(memories)
    items = dump_at(where)
    by_id = check_bijection(items)
    assert set(by_id) == memories
    # indexed memories keep their document number; the others take the next, in id order
    for mid in indexed:
        assert by_id[mid] == old["docno"][mid]
    assert [by_id[m] for m in others] == list(range(old["next"], old["next"] + len(others)))
    assert next_docno(items) == old["next"] + len(others)
    # values unchanged, moved to their keys by row
    for mid in memories:
        row = by_id[mid]
        assert items[head_key(row)] == old["head"][mid]
        got = {int.from_bytes(k[7:], "big"): v for k, v in items.items()
               if k.startswith(VERSION + u32(row))}  # fmt: skip
        assert got == old["versions"][mid]
        assert items.get(VEC + u32(row)) == old["vec"].get(mid)
        assert items.get(SAL + u32(row)) == old["sal"].get(mid)
        assert (LEX_D + u32(row) in items) == (mid in indexed)
    assert sum(k.startswith(VEC) for k in items) == len(old["vec"])
    assert sum(k.startswith(SAL) for k in items) == len(old["sal"])
    assert not any(len(k) == len(HEAD) + 16 for k in items if k.startswith(HEAD))
    assert [a.name for a in M.applied(where)][-1] == MIGRATION
    with Cortex.open(where, actor="checker", as_owner=True) as cx:
        assert cx.format.format_version == 21 and "memory-rows" in cx.format.features
        assert cx.verify().ok


def test_0020_reads_as_a_store_written_at_format_21(tmp_path: Path) -> None:
    """The migrated fixture answers every read as a store written by the fixture's steps at
    format 21 (same clock, same ids) does, and exports the same bundle."""
    where = _copy20(tmp_path, None)
    M.migrate(where)
    fresh = _fresh_format21(tmp_path)
    with (
        Cortex.open(where, actor="x", as_owner=True) as a,
        Cortex.open(fresh, actor="x", as_owner=True) as b,
    ):
        ra, rb = _fixture_reads(a), _fixture_reads(b)
        assert ra.keys() == rb.keys()
        for key in ra:
            assert ra[key] == rb[key], key
        # the live memories have the same rows (docnos were given in write order at format 20)
        items_a, items_b = dump(a), dump(b)
        rows_a, rows_b = rows(items_a), rows(items_b)
        indexed_a = {m for m, n in rows_a.items() if LEX_D + u32(n) in items_a}
        assert {m: rows_a[m] for m in indexed_a} == {m: rows_b[m] for m in indexed_a}
        ea = export_store(a, tmp_path / "a.jsonl")
        eb = export_store(b, tmp_path / "b.jsonl")
        assert ea.sha256 == eb.sha256


def test_0020_dry_run_and_a_second_run_change_nothing(tmp_path: Path) -> None:
    where = _copy20(tmp_path, None)
    before = dump_at(where)
    report = M.migrate(where, dry_run=True)
    assert [s.step.name for s in report.steps] == [MIGRATION]
    assert dump_at(where) == before
    M.migrate(where)
    once = dump_at(where)
    assert M.migrate(where).steps == ()
    assert dump_at(where) == once


_CHILD = """
import sys, time
from pathlib import Path
from cortex.transfer import migrate as M
marker = Path(sys.argv[2])
def progress(name, done, total):
    if name == "0020-memory-rows" and done >= total // 2 and not marker.exists():
        part = marker.with_suffix(".part")
        part.write_text(f"{name} {done} {total}")
        part.rename(marker)
        time.sleep(120)
M.migrate(sys.argv[1], progress=progress)
"""


def _without_clock(items: dict[bytes, bytes]) -> dict[bytes, bytes]:
    """Records but the journal and meta/migrations (they hold the time of the migration)."""
    return {k: v for k, v in items.items() if not k.startswith((b"j/", b"meta/migrations"))}


def test_a_killed_0020_leaves_format_20_and_resumes_to_the_same_store(
    tmp_path: Path, store_path: Any
) -> None:
    where = _copy20(tmp_path, store_path)
    before = dump_at(where)
    marker = tmp_path / "inside"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(where), str(marker)], env=env)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert child.poll() is None, "the migration ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(30)
    assert child.returncode == -signal.SIGKILL
    assert marker.read_text().startswith(MIGRATION)
    assert dump_at(where) == before  # one transaction: wholly at format 20
    M.migrate(where)
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(FIXTURE20 / "data.mdb", other / "data.mdb")
    M.migrate(other)
    assert _without_clock(dump_at(where)) == _without_clock(dump_at(other))
    with Cortex.open(where, actor="checker", as_owner=True) as cx:
        assert cx.verify().ok


# --- 7. export / import -----------------------------------------------------------------------


def test_export_import_round_trip(place: Callable[[str], Any], tmp_path: Path) -> None:
    rng = random.Random(42)
    with Cortex.open(place("a"), actor="t", as_owner=True) as cx:
        ids = _populate(cx, [rid(rng) for _ in range(7)])
        cx.purge(ids[5], "erase")
        cx.add_edge(ids[0], "references", ids[2])
        first = export_store(cx, tmp_path / "a.jsonl")
        cbor_a = export_store(cx, tmp_path / "a.cbor", encoding="cbor")
    with Cortex.open(place("b"), actor="t", as_owner=True) as cx:
        import_bundle(cx, tmp_path / "a.jsonl")
        items = dump(cx)
        by_id = check_bijection(items)
        assert set(by_id) == {m.bytes for m in ids}
        assert sorted(by_id.values()) == list(range(len(ids)))  # one row each, from 0
        assert cx.verify().ok
        second = export_store(cx, tmp_path / "b.jsonl")
        cbor_b = export_store(cx, tmp_path / "b.cbor", encoding="cbor")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert first.sha256 == second.sha256 and cbor_a.sha256 == cbor_b.sha256


# --- 8. every way a memory is created takes the next row; none that creates nothing --------


def test_an_episodes_memories_take_rows_in_order(store_path: Any) -> None:
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        before = cx.write(fact("before the chat")).uri.id
        res = cx.ingest(CHAT, extractor=LLMExtractor(llm(ANSWER)))
        after = cx.write(fact("after the chat")).uri.id
        drawn = [m.id for m in res.memories]
        assert len(drawn) == 2
        items = dump(cx)
        by_id = check_bijection(items)
        assert [by_id[m.bytes] for m in (before, *drawn, after)] == [0, 1, 2, 3]
        assert next_docno(items) == 4
        assert cx.verify().ok


def test_a_deduplicated_write_takes_no_row(store_path: Any) -> None:
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        a = cx.write(fact("the same words twice"))
        b = cx.write(fact("the same words twice"), dedupe=True)
        assert a.uri.id == b.uri.id  # a confirmation of the memory, not a new one
        items = dump(cx)
        assert rows(items) == {a.uri.id.bytes: 0} and next_docno(items) == 1
        c = cx.write(fact("other words"))
        assert rows(dump(cx))[c.uri.id.bytes] == 1


def test_an_import_takes_the_next_rows_and_a_repeat_takes_none(
    place: Callable[[str], Any], tmp_path: Path
) -> None:
    rng = random.Random(8)
    with Cortex.open(place("a"), actor="t", as_owner=True) as cx:
        ids = [cx.write(fact(f"thing {i}"), id=rid(rng)).uri.id for i in range(4)]
        cx.tombstone(ids[1], "gone")
        cx.purge(ids[2], "erased")
        export_store(cx, tmp_path / "a.jsonl")
    with Cortex.open(place("b"), actor="t", as_owner=True) as cx:
        own = [cx.write(fact(f"own {i}")).uri.id for i in range(2)]
        import_bundle(cx, tmp_path / "a.jsonl")
        items = dump(cx)
        by_id = check_bijection(items)
        assert [by_id[m.bytes] for m in own] == [0, 1]
        # tombstoned and purged memories are created by the import too: one row each
        assert sorted(by_id[m.bytes] for m in ids) == [2, 3, 4, 5]
        assert next_docno(items) == 6
        import_bundle(cx, tmp_path / "a.jsonl")  # every memory held already: skipped
        assert rows(dump(cx)) == by_id and next_docno(dump(cx)) == 6
        late = cx.write(fact("late")).uri.id
        assert rows(dump(cx))[late.bytes] == 6
        assert cx.verify().ok


def test_concurrent_writes_with_failures_leave_no_gap(tmp_path: Path) -> None:
    """Group commit (§1): single writes of several threads share a transaction; one that fails
    (its id taken) aborts only itself and takes no row."""
    import threading

    rng = random.Random(12)
    with Cortex.open(tmp_path / "s", actor="t", as_owner=True) as cx:
        taken = [cx.write(fact(f"taken {i}"), id=rid(rng)).uri.id for i in range(3)]
        fresh = [rid(rng) for _ in range(40)]
        failed: list[int] = []
        done: list[MemoryId] = []
        lock = threading.Lock()

        def work(i: int) -> None:
            try:
                if i % 4 == 0:
                    cx.write(fact(f"a duplicate {i}"), id=taken[i % 3])
                else:
                    cx.write(fact(f"thread {i} words"), id=fresh[i])
                    with lock:
                        done.append(fresh[i])
            except CortexError:
                with lock:
                    failed.append(i)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(failed) == list(range(0, 40, 4))
        items = dump(cx)
        by_id = check_bijection(items)
        assert sorted(by_id.values()) == list(range(3 + len(done)))
        assert next_docno(items) == 3 + len(done)
        # the journal orders the writes as their rows do
        writes = [e.id for e in cx.journal() if e.kind.name.lower() == "write"]
        assert [by_id[m.bytes] for m in writes] == list(range(len(writes)))
        assert cx.verify().ok


# --- 9. reads through a damaged id/ or head ---------------------------------------------------


def test_a_read_by_id_does_not_turn_damage_into_a_miss(store_path: Any) -> None:
    """§2 Rows (a head names the id whose id/ names its row) and §9 (a read does not turn a
    damaged record into a silently missing one where the store can tell)."""
    rng = random.Random(31)
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        ids = [cx.write(fact(f"lamp {i}"), id=rid(rng), tags=["lamp"]).uri.id for i in range(3)]
        cx._kv.write(lambda txn: txn.delete(head_key(1)))  # id/ names row 1; no head there
        with pytest.raises(IntegrityError):
            cx.resolve_latest(ids[1])
        with pytest.raises(IntegrityError):
            cx.history(ids[1])
        with pytest.raises(IntegrityError):
            cx.find(Query(tags=["lamp"], limit=10))
        cx._kv.write(lambda txn: txn.put(id_key(ids[0]), seal(u32(2))))  # row 2 is ids[2]'s
        with pytest.raises(IntegrityError):
            cx.resolve_latest(ids[0])
        assert cx.resolve_latest(ids[2]).id == ids[2]


# --- 10. vectors by row: the sidecar's rebuild and catch-up read the head at each row --------


def test_vector_search_by_row_rebuild_and_catch_up(tmp_path: Path) -> None:
    """vector-index.md v5: a rebuild from vec/ (row order) reads the head at each row for its
    id; catching up from the journal reads the row in id/ first."""
    rng = random.Random(77)
    where = tmp_path / "s"
    texts = [f"{w} lantern by the {v} quay" for w, v in zip("abcdefgh", "stuvwxyz", strict=True)]
    with (
        Cortex.open(where, actor="t", as_owner=True, embedder=HashingEmbedder(32)) as a,
        Cortex.open(where, actor="t", as_owner=True, embedder=HashingEmbedder(32)) as b,
    ):
        ids = [a.write(fact(t), id=rid(rng)).uri.id for t in texts[:4]]

        def top(cx: Cortex, text: str) -> MemoryId:
            return cx.find(Query(near=text, limit=1)).hits[0].memory.id

        assert [top(a, t) for t in texts[:4]] == ids
        # another handle writes, updates and purges: a catches up from the journal
        ids += [b.write(fact(t), id=rid(rng)).uri.id for t in texts[4:]]
        b.update(ids[0], fact("a lantern moved to the harbour wall"))
        b.purge(ids[1], "erase")
        assert [top(a, t) for t in texts[2:]] == ids[2:]
        assert top(a, "a lantern moved to the harbour wall") == ids[0]
        assert ids[1] not in [h.memory.id for h in a.find(Query(near=texts[1], limit=20)).hits]
        assert a.reindex_vectors() == 7
        assert [top(a, t) for t in texts[2:]] == ids[2:]
        assert a.verify().ok


# --- 11. 0020 refuses what it cannot key by row ----------------------------------------------


@pytest.mark.parametrize("damage", ["head key of 4 bytes", "lex/d/ key of 4 bytes", "2**32 rows"])
def test_0020_stops_with_nothing_written(tmp_path: Path, damage: str) -> None:
    """§5: a lex/d/ or head key that is not of format 20 stops it (IntegrityError), as do
    memories that would need row 2^32 (StoreFullError); nothing is written."""
    where = _copy20(tmp_path, None)
    M.migrate(where, to=20)  # a no-op: the fixture is format 20
    items = dump_at(where)
    some_head = next(k for k in sorted(items) if k.startswith(HEAD) and len(k) == 18)
    some_doc = next(k for k in sorted(items) if k.startswith(LEX_D))
    kv = open_kv(where, create=False)
    try:

        def hurt(txn: Any) -> None:
            if damage == "head key of 4 bytes":
                txn.put(HEAD + u32(5), items[some_head])
            elif damage == "lex/d/ key of 4 bytes":
                txn.put(LEX_D + u32(5), items[some_doc])
            else:
                stats = cbor_map(items[STATS])
                stats[5] = 2**32 - 1  # one row left; the fixture has unindexed memories
                txn.put(STATS, cbor_seal(stats))

        kv.write(hurt)
    finally:
        kv.close()
    before = dump_at(where)
    error = StoreFullError if damage == "2**32 rows" else IntegrityError
    with pytest.raises(error):
        M.migrate(where)
    assert dump_at(where) == before
    assert cbor_map(before[b"meta/format"])[1] == 20


@pytest.mark.lmdb_only
def test_0020_drops_the_lex_i_database(tmp_path: Path) -> None:
    import lmdb

    where = _copy20(tmp_path, None)

    def names() -> list[bytes]:
        env = lmdb.open(str(where), readonly=True, lock=False, max_dbs=64)
        try:
            with env.begin() as txn:
                return [bytes(k) for k, _ in txn.cursor() if bytes(k).startswith(b"\x01db/")]
        finally:
            env.close()

    assert b"\x01db/lex/i/" in names() and b"\x01db/id/" not in names()
    M.migrate(where)
    after = names()
    assert b"\x01db/lex/i/" not in after and b"\x01db/id/" in after


# --- 12. more rules by row --------------------------------------------------------------------


def test_a_purged_id_stays_taken(store_path: Any) -> None:
    """§2 Rows: a purged memory keeps its id/ record, so its id is taken: a write with it
    gives no row (nothing is written)."""
    rng = random.Random(4)
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        mid = cx.write(fact("soon erased"), id=rid(rng)).uri.id
        cx.purge(mid, "erase")
        before = dump(cx)
        with pytest.raises(CortexError):
            cx.write(fact("born again"), id=mid)
        with pytest.raises(CortexError):
            cx.write_many([NewMemory(data=fact("born again"), id=mid)])
        assert dump(cx) == before
        assert rows(before) == {mid.bytes: 0}


def test_lexical_ties_go_to_the_smaller_row(store_path: Any) -> None:
    """lexical.md §6: equal scores rank by document number (the row): the memory written
    first, whatever the ids (the lexical ranking; ``find`` orders ties by id, query.md §1)."""
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        high = MemoryId(b"\xf0" + bytes(15))
        low = MemoryId(b"\x01" + bytes(15))
        mid = MemoryId(b"\x80" + bytes(15))
        for m in (high, mid, low):  # write order: the reverse of the id order
            cx.write(fact("walrus tusks gleam", "walrus"), id=m)
        for _ in range(2):  # from the segments, then from the blocks
            ranked = cx._lexical_search("walrus tusks", 3)
            assert len({score for _, score in ranked}) == 1
            assert [m for m, _ in ranked] == [high, mid, low]
            assert [m for m, _ in cx._lexical_search("walrus tusks", 2)] == [high, mid]
            # find breaks ties by id (query.md §1), over the lexical list it fetched
            hits = cx.find(Query(text="walrus tusks", limit=2)).hits
            assert [h.memory.id for h in hits] == [low, mid]
            cx.merge_lexical()


def test_an_export_lists_memories_in_id_order(store_path: Any, tmp_path: Path) -> None:
    """storage.md v21: export keeps id order (it reads id/), whatever the rows."""
    import json

    rng = random.Random(6)
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        ids = [cx.write(fact(f"otter {i}"), id=rid(rng)).uri.id for i in range(12)]
        assert sorted(ids) != ids
        export_store(cx, tmp_path / "e.jsonl")
    lines = [json.loads(x) for x in (tmp_path / "e.jsonl").read_text().splitlines()]
    listed = [x["head"]["id"] for x in lines if x.get("kind") == "memory"]
    assert listed == sorted(str(m) for m in ids)


@pytest.mark.postgres
def test_a_copy_between_engines_keeps_every_record(tmp_path: Path, pg_url: Any) -> None:
    """A format-21 store copied LMDB -> PostgreSQL -> LMDB holds the same records (id/ in its
    named database again) and verifies."""
    rng = random.Random(9)
    src = tmp_path / "src"
    with Cortex.open(src, actor="t", as_owner=True, embedder=HashingEmbedder(8)) as cx:
        ids = [cx.write(fact(f"heron {i}"), id=rid(rng)).uri.id for i in range(6)]
        cx.attest([ids[2]], Outcome.SUCCESS)
        cx.purge(ids[3], "erase")
        original = dump(cx)
    url = pg_url()
    kv = open_kv(src, create=False)
    try:
        copy_kv(kv, url)
    finally:
        kv.close()
    assert dump_at(url) == original
    back = tmp_path / "back"
    kv = open_kv(url, create=False)
    try:
        copy_kv(kv, back)
    finally:
        kv.close()
    assert dump_at(back) == original
    for where in (url, back):
        with Cortex.open(where, actor="t", as_owner=True) as cx:
            assert cx.verify().ok
            assert cx.resolve_latest(ids[2]).data == fact("heron 2")


# --- 13. a random run against a model of the rows ----------------------------------------------


@pytest.mark.parametrize("seed", [1, 2])
def test_random_operations_against_a_model_of_rows(store_path: Any, seed: int) -> None:
    """Rows as §2 gives them, checked after every step of a random mix of writes (own and
    chosen ids, batches, failing ones), updates, tombstones and purges."""
    rng = random.Random(seed)
    model: dict[bytes, int] = {}  # id16 -> row
    state: dict[bytes, str] = {}  # live, tombstoned, purged
    nxt = 0
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        for step in range(60):
            op = rng.choice(["own", "chosen", "batch", "bad", "taken", "update", "tomb", "purge"])
            live = sorted(m for m, s in state.items() if s == "live")
            if op == "own":
                m = cx.write(fact(f"own {step} words")).uri.id.bytes
                model[m], state[m], nxt = nxt, "live", nxt + 1
            elif op == "chosen":
                m = rng.randbytes(16)
                cx.write(fact(f"chosen {step} words"), id=MemoryId(m))
                model[m], state[m], nxt = nxt, "live", nxt + 1
            elif op == "batch":
                items = [
                    NewMemory(data=fact(f"batch {step} {i}"), id=MemoryId(rng.randbytes(16)))
                    if rng.random() < 0.5
                    else NewMemory(data=fact(f"batch {step} {i}"))
                    for i in range(rng.randint(1, 4))
                ]
                for r in cx.write_many(items):
                    m = r.uri.id.bytes
                    model[m], state[m], nxt = nxt, "live", nxt + 1
            elif op == "bad":
                with pytest.raises(CortexError):
                    cx.write_many([NewMemory(data=fact(f"fine {step}")), fact("")])
            elif op == "taken" and model:
                with pytest.raises(CortexError):
                    cx.write(fact(f"again {step}"), id=MemoryId(rng.choice(sorted(model))))
            elif op == "update" and live:
                cx.update(MemoryId(rng.choice(live)), fact(f"updated at {step}"))
            elif op == "tomb" and live:
                m = rng.choice(live)
                cx.tombstone(MemoryId(m), "gone")
                state[m] = "tombstoned"
            elif op == "purge":
                alive = sorted(m for m, s in state.items() if s != "purged")
                if alive:
                    m = rng.choice(alive)
                    cx.purge(MemoryId(m), "erase", scrub=False)
                    state[m] = "purged"
            items_now = dump(cx)
            assert check_bijection(items_now) == model, (step, op)
            if model:
                assert next_docno(items_now) == nxt
            docs = {
                int.from_bytes(k[len(LEX_D) :], "big") for k in items_now if k.startswith(LEX_D)
            }
            assert docs == {model[m] for m, s in state.items() if s == "live"}, (step, op)
        assert cx.verify().ok


# --- 14. 0020 after the older steps -----------------------------------------------------------


@pytest.mark.parametrize("fixture", ["format1", "format13", "format14", "format19"])
def test_0020_rows_from_older_fixtures(tmp_path: Path, fixture: str) -> None:
    """§5: the steps that rebuilt the lexical index before (0001, 0004, 0005, 0013) leave it
    empty, so 0020 gives every memory its row from next_docno (0) up in id order; a store of
    format 14 or later keeps the docnos of its indexed memories and numbers the others after."""
    where = tmp_path / fixture
    where.mkdir()
    shutil.copy(ROOT / "tests" / "data" / f"{fixture}.cortex" / "data.mdb", where / "data.mdb")
    M.migrate(where, to=20)
    old = _format20(dump_at(where))
    M.migrate(where)
    items = dump_at(where)
    by_id = check_bijection(items)
    assert set(by_id) == set(old["head"])
    if fixture in ("format1", "format13"):
        assert old["docno"] == {} and old["next"] == 0
    others = sorted(set(old["head"]) - set(old["docno"]))
    assert [by_id[m] for m in others] == list(range(old["next"], old["next"] + len(others)))
    assert all(by_id[m] == n for m, n in old["docno"].items())
    live = {
        m
        for m, v in old["head"].items()
        if 9 not in cbor_map(v)  # no tombstone
    }
    docs = {int.from_bytes(k[len(LEX_D) :], "big") for k in items if k.startswith(LEX_D)}
    assert docs == {by_id[m] for m in live}  # every live memory indexed under its row
    with Cortex.open(where, actor="checker", as_owner=True) as cx:
        assert cx.verify().ok


# --- 15. a text hit reads the head at its row: the head must be that row's memory ------------


def test_a_text_hit_through_a_head_of_another_row_is_not_returned_twice(store_path: Any) -> None:
    """lexical.md §6 maps a document number to its memory through the head at that row;
    storage.md §2 Rows: a head MUST name the id whose id/ record names its row, and §9: a read
    does not turn damage into a wrong answer where the store can tell. Here row 1 holds a copy
    of row 0's head (its id/ names row 0): a text search that finds rows 0 and 1 must not return
    memory 0 twice (nor as row 1's memory), and verify reports the broken pair."""
    rng = random.Random(3)
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        ids = [cx.write(fact(f"pelican {i} dives"), id=rid(rng)).uri.id for i in range(3)]
        cx.merge_lexical()
        items = dump(cx)
        cx._kv.write(lambda txn: txn.put(head_key(1), items[head_key(0)]))
        report = cx.verify()
        assert not report.ok
        assert any(p.record.startswith(("m/1", f"id/{ids[1]}")) for p in report.problems)
        try:
            hits = cx.find(Query(text="pelican", limit=5)).hits
        except IntegrityError:
            pass
        else:
            got = [h.memory.id for h in hits]
            assert len(got) == len(set(got)), f"a memory returned twice: {got}"
            raise AssertionError(f"row 1's memory read silently as another: {got}")
