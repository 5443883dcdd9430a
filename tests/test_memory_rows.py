"""Format 21: every memory keyed by a row number (``specs/storage.md`` §2, ``lexical.md`` §4).

A memory's row is given at its creation in write order, kept for its life (update, tombstone,
purge, reindex) and never given again; ``m/``, ``mv/``, ``vec/``, ``sal/`` and ``lex/d/`` are
keyed by it and ``id/`` id16 holds it, so that caller-chosen random ids land at the ends of
those trees. ``id/`` and ``m/`` are a bijection, which ``verify`` checks.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from cortex import Cortex, Fact, MemoryId, NewMemory, Outcome, Query
from cortex.engine.heads import encode_row, row_of
from cortex.errors import IntegrityError, NotFoundError
from cortex.storage import keys as K
from cortex.storage.kv import LmdbKV, seal

OWNER = "rows-test"


def rid(n: int) -> MemoryId:
    """A caller-chosen id in no order (16 bytes of sha256)."""
    return MemoryId(hashlib.sha256(f"rows/{n}".encode()).digest()[:16])


def fact(n: int, what: str = "tar") -> Fact:
    return Fact(statement=f"crate {n} holds {what}", subject=f"crate {n}", predicate="holds")


def rows(cx: Cortex) -> dict[MemoryId, int]:
    with cx._kv.read() as txn:
        out = {}
        for key, _ in txn.scan(K.ID):
            m = K.parse_id_key(key)
            r = row_of(txn, m)
            assert r is not None
            out[m] = r
        return out


def test_random_ids_take_rows_in_write_order_and_keep_them(store_path: Any) -> None:
    """Random ids, two batches and a single write: rows 0.. in write order; every read by id
    (get, history, find by tag, text) finds its memory; an update, a tombstone, a purge and a
    reindex keep every row, and the next memory takes the next row (a purge leaves a gap)."""
    with Cortex.open(store_path, actor=OWNER) as cx:
        cx.write_many([NewMemory(data=fact(n), id=rid(n), tags=("hold",)) for n in range(30)])
        cx.write_many(
            [NewMemory(data=fact(n, "rope"), id=rid(n), tags=("hold",)) for n in range(30, 60)]
        )
        cx.write(fact(60), id=rid(60), tags=("hold",))
        assert rows(cx) == {rid(n): n for n in range(61)}
        with cx._kv.read() as txn:  # the heads are in write order, whatever the ids
            heads = [K.parse_head_key(k) for k in txn.keys(K.HEAD)]
        assert heads == list(range(61))
        for n in (0, 17, 42, 60):
            assert cx.resolve_latest(rid(n)).data == fact(n, "rope" if 30 <= n < 60 else "tar")
        assert len(cx.find(Query(tags=["hold"], limit=100)).hits) == 61
        assert [h.memory.id for h in cx.find(Query(text="crate 42 rope", limit=1)).hits] == [
            rid(42)
        ]
        cx.update(rid(5), fact(5, "pitch"))
        assert [m.version.version for m in cx.history(rid(5))] == [1, 2]
        assert cx.resolve_latest(rid(5)).data == fact(5, "pitch")
        cx.tombstone(rid(6), "gone")
        cx.purge(rid(7), "erase")
        cx.attest([rid(8)], Outcome.SUCCESS)
        assert cx.salience_state(rid(8)).citations == 1
        assert rows(cx) == {rid(n): n for n in range(61)}  # every row kept
        assert cx.resolve_latest(rid(7)).data is None and cx.resolve_latest(rid(6)).tombstoned
        hits = {h.memory.id for h in cx.find(Query(text="crate pitch", limit=5)).hits}
        assert rid(5) in hits and rid(6) not in hits
        cx.reindex_lexical()
        assert rows(cx) == {rid(n): n for n in range(61)}
        new = cx.write(fact(99))
        assert rows(cx)[new.id] == 61  # past every row given
        assert cx.resolve_latest(new.id).data == fact(99)
        report = cx.verify()
        assert report.ok, report.problems


def test_a_taken_id_writes_nothing_and_gives_no_row(store_path: Any) -> None:
    """A batch with a taken id is refused whole: no row is given (the next write takes the
    row the batch would have)."""
    from cortex.errors import ConflictError

    with Cortex.open(store_path, actor=OWNER) as cx:
        cx.write(fact(1), id=rid(1))
        with pytest.raises(ConflictError, match=str(rid(1))):
            cx.write_many([NewMemory(data=fact(2), id=rid(2)), NewMemory(data=fact(1), id=rid(1))])
        with pytest.raises(ConflictError):
            cx.write(fact(1), id=rid(1))
        assert rows(cx) == {rid(1): 0}
        cx.write(fact(3), id=rid(3))
        assert rows(cx) == {rid(1): 0, rid(3): 1}
        assert cx.verify().ok


def _damage(path: Path, fn: Any) -> None:
    kv = LmdbKV(path, create=False)
    try:
        kv.write(fn)
    finally:
        kv.close()


@pytest.mark.parametrize("damage", ["id record gone", "id names another row", "bad value"])
def test_verify_catches_a_broken_id_and_head_pair(tmp_path: Path, damage: str) -> None:
    """``id/`` and ``m/`` are a bijection: a head whose id has no ``id/`` record, an ``id/``
    record naming another memory's row, or one that does not hold a row, is reported (never a
    crash), and a read by that id says the store is damaged or finds no memory."""
    path = tmp_path / "s"
    with Cortex.open(path, actor=OWNER) as cx:
        for n in range(3):
            cx.write(fact(n), id=rid(n))

    def harm(txn: Any) -> None:
        if damage == "id record gone":
            txn.delete(K.id_key(rid(1)))
        elif damage == "id names another row":
            txn.put(K.id_key(rid(1)), encode_row(2))
        else:
            txn.put(K.id_key(rid(1)), b"\x00\x01")

    _damage(path, harm)
    with Cortex.open(path, actor=OWNER) as cx:
        report = cx.verify()
        assert not report.ok
        found = {p.record: p.what for p in report.problems}
        if damage == "id record gone":
            assert "has no id/ record" in found["m/1"]
            with pytest.raises(NotFoundError):
                cx.resolve_latest(rid(1))
        elif damage == "id names another row":
            assert "the head of" in found[f"id/{rid(1)}"]
            assert "has no id/ record" in found["m/1"]
            with pytest.raises(IntegrityError, match="damaged"):
                cx.resolve_latest(rid(1))
        else:
            assert any(str(rid(1)) in r for r in found)
            with pytest.raises(IntegrityError):
                cx.resolve_latest(rid(1))
        assert cx.resolve_latest(rid(0)).data == fact(0)  # the others read as before


def test_a_purge_keeps_the_row_and_erases_its_records(tmp_path: Path) -> None:
    """A purge keeps the memory's head (tombstoned, for audit), its ``id/`` record and its
    row; its vector, counters and lexical document go with its content (the erasure check
    finds nothing left)."""
    from cortex.index.embed import HashingEmbedder

    path = tmp_path / "s"
    with Cortex.open(path, actor=OWNER, embedder=HashingEmbedder(8)) as cx:
        a = cx.write(fact(1, "secret cargo"), id=rid(1))
        cx.write(fact(2), id=rid(2))
        cx.attest([a], Outcome.SUCCESS)
        with cx._kv.read() as txn:
            row = row_of(txn, a.id)
            assert row is not None
            for key in (K.vec_key(row), K.salience_key(row), K.lex_doc_key(row)):
                assert txn.get(key) is not None
        cx.purge(a, "erase", scrub=True)
        with cx._kv.read() as txn:
            assert row_of(txn, a.id) == row
            for key in (K.vec_key(row), K.salience_key(row), K.lex_doc_key(row)):
                assert txn.get(key) is None
        assert cx.verify_erasure().ok
        assert cx.verify().ok


def _point_row_by_two_reads(kv: Any, ptr: bytes, keys: Any, last: bytes | None) -> Any:
    """``point_read_row``'s answer from two plain point reads (the pointer, then the keys)."""
    (pv,), _ = kv.point_read([ptr])
    if pv is None:
        return None, [None] * len(keys), None
    r = pv[:4]
    vals, tail = kv.point_read([p + r + x for p, x in keys], None if last is None else last + r)
    return pv, vals, tail


def test_a_get_by_id_follows_the_row_in_one_read(store_path: Any) -> None:
    """``KV.point_read_row`` answers what reading ``id/`` and then the keys at its row answers
    (one, two and three keys, with and without the last version; an absent id: Nones); a get
    by id and by URI through it (the C path off) reads the memory ``history`` reads."""
    with Cortex.open(store_path, actor=OWNER) as cx:
        for n in range(4):
            cx.write(fact(n), id=rid(n))
        cx.update(rid(2), fact(2, "rope"))
        kv = cx._kv
        cx._engine._point_call = None  # the Python path (PostgreSQL's)
        v1 = K.version_key(0, 1)[len(K.VERSION) + 4 :]
        shapes: list[tuple[list[tuple[bytes, bytes]], bytes | None]] = [
            ([(K.HEAD, b"")], None),
            ([(K.HEAD, b"")], K.VERSION),
            ([(K.HEAD, b""), (K.VERSION, v1)], None),
            ([(K.HEAD, b""), (K.VERSION, v1)], K.VERSION),
            ([(K.HEAD, b""), (K.VERSION, v1), (K.SALIENCE, b"")], K.VERSION),
        ]
        for n in (0, 2, 3, 99):
            ptr = K.id_key(rid(n))
            for keys, last in shapes:
                got = kv.point_read_row(ptr, keys, last)
                assert got == _point_row_by_two_reads(kv, ptr, keys, last)
                assert (got[0] is None) == (n == 99)
        for n in (0, 2, 3):
            hist = cx.history(rid(n))
            assert cx.resolve_latest(rid(n)) == hist[-1]
            assert [cx.resolve(m.uri) for m in hist] == hist
        assert len(cx.history(rid(2))) == 2
        with pytest.raises(NotFoundError, match=str(rid(99))):
            cx.resolve_latest(rid(99))
        with pytest.raises(NotFoundError, match=str(rid(99))):
            cx.resolve(f"{cx.resolve_latest(rid(0)).uri}".replace(str(rid(0)), str(rid(99))))


@pytest.mark.parametrize("damage", ["crc", "length", "no head", "no such row"])
@pytest.mark.parametrize("c_path", [True, False])
def test_a_get_by_id_through_a_damaged_id_record_says_so(
    store_path: Any, damage: str, c_path: bool
) -> None:
    """A get by id or by URI whose ``id/`` value fails its checksum or is not 4 bytes, or names
    a row without a head: IntegrityError naming the record (what was read at the row is not
    used); the other memories read as before."""
    with Cortex.open(store_path, actor=OWNER) as cx:
        for n in range(3):
            cx.write(fact(n), id=rid(n))
        uri = cx.resolve_latest(rid(1)).uri
        key = K.id_key(rid(1))

        def harm(txn: Any) -> None:
            if damage == "crc":
                raw = bytearray(encode_row(1))
                raw[-1] ^= 0x40
                txn.put(key, bytes(raw))
            elif damage == "length":  # a well sealed value of 5 bytes: row 1 and one more
                txn.put(key, seal(b"\x00\x00\x00\x01\x00"))
            elif damage == "no head":
                txn.delete(K.head_key(1))
            else:
                txn.put(key, encode_row(77))

        cx._kv.write(harm)
        if not c_path:
            cx._engine._point_call = None
        want = {
            "crc": f"id/{rid(1)}",
            "length": f"id/{rid(1)} does not hold a row number",
            "no head": "no head there",
            "no such row": "row 77",
        }[damage]
        with pytest.raises(IntegrityError, match=want):
            cx.resolve_latest(rid(1))
        with pytest.raises(IntegrityError, match=want):
            cx.resolve(uri)
        assert cx.resolve_latest(rid(0)).data == fact(0)
        assert cx.resolve_latest(rid(2)).data == fact(2)


@pytest.mark.parametrize("damage", ["crc", "no such row"])
def test_a_find_whose_hit_has_a_damaged_id_record_says_so(store_path: Any, damage: str) -> None:
    """A find by tag whose hit has a damaged ``id/`` record: IntegrityError on either engine
    (on PostgreSQL the preload read the pairs at the row the damaged record gave, which are
    not used); an undamaged find reads as before."""
    with Cortex.open(store_path, actor=OWNER) as cx:
        for n in range(6):
            cx.write(fact(n), id=rid(n), tags=("bad" if n == 4 else "good",))
        key = K.id_key(rid(4))
        raw = bytearray(encode_row(4))
        raw[-1] ^= 0x40
        cx._kv.write(lambda t: t.put(key, bytes(raw) if damage == "crc" else encode_row(1)))
        with pytest.raises(IntegrityError):
            cx.find(Query(tags=["bad"], limit=10))
        assert {h.memory.id for h in cx.find(Query(tags=["good"], limit=10)).hits} == {
            rid(n) for n in (0, 1, 2, 3, 5)
        }
