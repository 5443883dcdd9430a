"""Format 11: a head records that its memory has use counters (``Head.has_counters``).

``specs/query.md`` §2 and ``specs/storage.md``: the flag is true exactly when a ``sal/`` record
exists. Every write of counters sets it (in the same transaction), a purge clears it, reads
trust it both ways (flag and no record: ``IntegrityError``; no flag: never used, no read),
verify checks it both ways, bundles never carry it, salvage reports counters it lost, and the
migration ``0010-counters-in-heads`` sets it from the format-10 fixture. The damaged-key cases
are in ``tests/test_corruption.py``.
"""

from __future__ import annotations

import json
import shutil
import sys
import zlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import lmdb
import pytest

from cortex import (
    CodecError,
    Cortex,
    Fact,
    IntegrityError,
    MemoryId,
    MemoryType,
    MigrationRequiredError,
    Outcome,
    Query,
    export_store,
    import_bundle,
)
from cortex.engine.heads import decode_counters, encode_counters
from cortex.model.codec import HEAD as HEAD_CODEC
from cortex.model.codec import HEAD_V14
from cortex.model.ids import new_id
from cortex.model.records import Head
from cortex.query.language import compile_query
from cortex.rules.salience import SALIENCE_STATE, SalienceState
from cortex.storage.engines import copy_kv
from cortex.storage.keys import IDX_CLAIM, SALIENCE, head_key, meta_key, salience_key
from cortex.storage.kv import LmdbKV, seal, unseal
from cortex.transfer import migrate as M
from cortex.transfer.salvage import salvage
from tests import rows as R

from .qsupport import dump_store

ROOT = Path(__file__).resolve().parent.parent
FIXTURE10 = ROOT / "tests" / "data" / "format10.cortex"
OWNER = "me"


def _tool(name: str) -> Any:
    tools = str(ROOT / "tools")
    if tools not in sys.path:
        sys.path.insert(0, tools)
    return __import__(name)


def _head(cx: Cortex, mid: MemoryId) -> Head:
    with cx._kv.read() as txn:
        return cx.engine.head(txn, mid)


def _flagged(cx: Cortex) -> tuple[set[MemoryId], set[MemoryId]]:
    """The ids whose heads have the flag, and the ids with a ``sal/`` record."""
    with cx._kv.read() as txn:
        by_row = {k[2:]: HEAD_CODEC.decode(v[:-4], "h") for k, v in txn.scan(b"m/")}
        flags = {h.id for h in by_row.values() if h.has_counters}
        records = {by_row[k[len(SALIENCE) :]].id for k in txn.keys(SALIENCE)}
    return flags, records


def _fact(i: int, what: str = "tea") -> Fact:
    return Fact(statement=f"note {i} about {what}", subject="n", predicate=f"p{i}")


# ---------------------------------------------------------------------------------------------
# Writes


def test_every_write_of_counters_sets_the_flag_and_only_that(store_path: Any) -> None:
    """attest (success and failure), find with record_access and a dedupe confirmation each set
    the flag with the first use; the head keeps its other fields (``last_updated_at`` too: a
    use is not a change). A plain write, an update and a head change leave it as it was."""
    with Cortex.open(store_path, actor=OWNER) as cx:
        ids = [cx.write(_fact(i)).id for i in range(5)]
        assert _flagged(cx) == (set(), set())
        before = {m: _head(cx, m) for m in ids}
        cx.attest([ids[0]], Outcome.SUCCESS)
        cx.attest([ids[1]], Outcome.FAILURE)
        hit = cx.find(Query(text="note 2", limit=1, record_access=True)).hits[0].memory.id
        again = cx.write(_fact(3), dedupe=True)
        assert again.outcome == "confirmed" and again.id == ids[3]
        used = {ids[0], ids[1], hit, ids[3]}
        assert _flagged(cx) == (used, used)
        for m in used:
            head = _head(cx, m)
            assert head.has_counters
            assert head == Head(**{**_fields(before[m]), "has_counters": True})
        assert cx.salience_state(ids[1]).failures == 1
        # the flag stays through later uses, updates and head changes, and an update keeps it
        cx.attest([ids[0]], Outcome.PARTIAL)
        cx.update(ids[0], _fact(0, "coffee"))
        cx.update_head(ids[0], tags=["x"], importance=9)
        assert _head(cx, ids[0]).has_counters
        assert cx.salience_state(ids[0]).citations == 2
        cx.write(_fact(9))  # a plain write never touches counters
        assert _flagged(cx) == (used, used)
        assert cx.verify().ok


def _fields(head: Head) -> dict[str, Any]:
    return {f: getattr(head, f) for f in head.__struct_fields__}


def test_a_purge_clears_the_flag_with_the_record(store_path: Any) -> None:
    with Cortex.open(store_path, actor=OWNER) as cx:
        a, b = cx.write(_fact(1)), cx.write(_fact(2))
        cx.attest([a, b], Outcome.SUCCESS)
        cx.tombstone(b, "retired")  # a tombstone keeps the counters
        assert _head(cx, b.id).has_counters
        cx.purge(a, "erasure")
        assert not _head(cx, a.id).has_counters
        assert _flagged(cx) == ({b.id}, {b.id})
        assert cx.verify().ok
        assert cx.verify_erasure().ok


def test_record_access_skips_a_memory_gone_since_the_find(tmp_path: Path) -> None:
    """Counting a use never writes counters for a memory without a head."""
    with Cortex.open(tmp_path / "s", actor=OWNER) as cx:
        a = cx.write(_fact(1))
        ghost = MemoryId(bytes(range(16)))
        cx._record_access([a.id, ghost], cx._now())
        assert _flagged(cx) == ({a.id}, {a.id})
        assert cx.verify().ok


# ---------------------------------------------------------------------------------------------
# Reads and verify


def test_reads_trust_the_flag_both_ways(store_path: Any) -> None:
    """Flag and no record: an error naming the key. No flag: never used, without reading
    ``sal/`` — a stray record beside such a head is not seen (and verify reports it)."""
    with Cortex.open(store_path, actor=OWNER) as cx:
        a, b = cx.write(_fact(1)), cx.write(_fact(2))
        cx.attest([a], Outcome.SUCCESS)
        stray = SalienceState(citations=40)
        cx._kv.write(lambda txn: txn.put(R.salience_key(txn, b.id), encode_counters(b.id, stray)))
        assert cx.salience_state(b) == SalienceState()  # its head says never used
        ranked = [h.memory.id for h in cx.find(Query(text="note", limit=5)).hits]
        assert ranked[0] == a.id  # b's stray citations do not lift it
        ra, rb = R.of_kv(cx._kv, a.id), R.of_kv(cx._kv, b.id)
        problems = {p.record: p.what for p in cx.verify().problems}
        assert (
            problems == {f"sal/{rb}": problems[f"sal/{rb}"]}
            and "whose head says it has none" in problems[f"sal/{rb}"]
        )
        cx._kv.write(lambda txn: txn.delete(R.salience_key(txn, b.id)))
        cx._kv.write(lambda txn: txn.delete(R.salience_key(txn, a.id)))
        with pytest.raises(IntegrityError, match=f"sal/{a.id} is missing"):
            cx.salience_state(a)
        with pytest.raises(IntegrityError, match=f"sal/{a.id} is missing"):
            cx.find(Query(text="note", limit=5))
        problems = {p.record: p.what for p in cx.verify().problems}
        assert list(problems) == [f"m/{ra}"]
        assert f"sal/{ra} is missing" in problems[f"m/{ra}"]


def test_a_find_on_postgresql_fetches_only_the_counters_of_used_memories(pg_url: Any) -> None:
    """The query's preload asks the server for the ``sal/`` keys of flagged heads only: a memory
    never used costs no read (what the snapshot fetched is what it holds)."""
    with Cortex.open(pg_url(), actor=OWNER) as cx:
        ids = [cx.write(_fact(i)).id for i in range(6)]
        cx.attest([ids[2]], Outcome.SUCCESS)
        now = cx._now()
        with cx._kv.read() as txn:
            plan = compile_query(Query(text="note", limit=6), now)
            kept, _ = cx._executor(txn, plan, cx._reader(None), now).run()
            fetched = set(txn._loaded)  # type: ignore[attr-defined]
        with cx._kv.read() as txn:
            want = {R.head_key(txn, m) for m in ids}
            used = R.salience_key(txn, ids[2])
        assert len(kept) == 6 and want <= fetched
        assert {k for k in fetched if k.startswith(SALIENCE)} == {used}


# ---------------------------------------------------------------------------------------------
# Bundles, salvage


def test_bundles_carry_no_counters(store_path: Any, place: Any, tmp_path: Path) -> None:
    """Export writes heads without the flag (counters do not travel); an import clears a flag
    a bundle carries; importing a bundle again into the store it came from, after its memories
    were used, finds them unchanged."""
    with Cortex.open(store_path, actor=OWNER) as cx:
        a, b = cx.write(_fact(1)), cx.write(_fact(2))
        export_store(cx, tmp_path / "clean.jsonl")
        cx.attest([a], Outcome.SUCCESS)
        export_store(cx, tmp_path / "used.jsonl")
        assert (tmp_path / "clean.jsonl").read_bytes().split(b"\n")[1:] == (
            (tmp_path / "used.jsonl").read_bytes().split(b"\n")[1:]
        )
        report = import_bundle(cx, tmp_path / "used.jsonl")
        assert (report.memories_added, report.memories_unchanged) == (0, 2)
        assert cx.salience_state(a).citations == 1 and _head(cx, a.id).has_counters
    with Cortex.open(place("copy"), actor=OWNER) as dst:
        import_bundle(dst, tmp_path / "used.jsonl")
        assert _flagged(dst) == (set(), set())
        assert dst.salience_state(a) == SalienceState() and dst.verify().ok
        assert {h.memory.id for h in dst.find(Query(text="note", limit=5)).hits} == {a.id, b.id}


def test_salvage_reports_lost_counters_and_drops_strays(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with Cortex.open(path, actor=OWNER) as cx:
        a, b, c = (cx.write(_fact(i)) for i in range(3))
        cx.attest([a, b], Outcome.SUCCESS)
        lost = salience_key(R.of_kv(cx._kv, a.id))
        stray = salience_key(R.of_kv(cx._kv, c.id))  # c never used: a record there is not c's
        value = encode_counters(c.id, SalienceState(citations=7))
        cx._kv.write(lambda txn: (txn.delete(lost), txn.put(stray, value)))
    rep = salvage(path, tmp_path / "new")
    assert rep.verify_ok and rep.salience == 1
    assert [(x.kind, x.id) for x in rep.lost] == [("counters", str(a.id))]
    assert any("left out" in n and "use-counter" in n for n in rep.notes)
    with Cortex.open(tmp_path / "new", actor=OWNER) as cx:
        assert _flagged(cx) == ({b.id}, {b.id})
        assert cx.salience_state(b).citations == 1
        assert cx.salience_state(a) == SalienceState()
        assert cx.salience_state(c) == SalienceState()
        assert cx.verify().ok


def test_a_record_moved_onto_another_used_memory_is_an_error(store_path: Any) -> None:
    """Format 12: a ``sal/`` record names its memory, so a damaged key that lands exactly on
    another used memory's key (the case a flag alone cannot see) is an error on read."""
    with Cortex.open(store_path, actor=OWNER) as cx:
        a, b = cx.write(_fact(1)), cx.write(_fact(2))
        cx.attest([a], Outcome.SUCCESS)
        cx.attest([a], Outcome.SUCCESS)
        cx.attest([b], Outcome.SUCCESS)
        with cx._kv.read() as txn:
            akey, bkey = R.salience_key(txn, a.id), R.salience_key(txn, b.id)
            moved = txn.get(akey)
        assert moved is not None and unseal(akey, moved)[:16] == a.id.bytes
        cx._kv.write(lambda txn: txn.put(bkey, moved))  # a's record at b's key
        with pytest.raises(IntegrityError, match=f"use counters of {a.id}, not of {b.id}"):
            cx.salience_state(b)
        with pytest.raises(IntegrityError, match="use counters of"):
            cx.find(Query(text="note", limit=5))
        assert any(f"not of {b.id}" in p.what for p in cx.verify().problems)


def test_counter_records_name_their_memory_in_the_format() -> None:
    """The value is the sealed id16 followed by the SalienceState CBOR (``storage.md``)."""
    mid = new_id()
    st = SalienceState(accesses=3, citations=1)
    value = encode_counters(mid, st)
    payload = unseal(salience_key(7), value)
    assert payload[:16] == mid.bytes and SALIENCE_STATE.decode(payload[16:], "s") == st
    assert decode_counters(salience_key(7), value, mid) == st
    with pytest.raises(IntegrityError, match="not of"):
        decode_counters(salience_key(7), value, new_id())
    bare = seal(SALIENCE_STATE.encode(st, "s"))  # format 11's layout
    with pytest.raises(IntegrityError):
        decode_counters(salience_key(7), bare, mid)


# ---------------------------------------------------------------------------------------------
# Golden vectors


def test_golden_vectors() -> None:
    """specs/vectors/counters.json both ways: record -> bytes -> record, and the flag's bytes
    by hand (one more map entry, key 15 and CBOR true, after the same head without it)."""
    gen = _tool("gen_vectors")
    doc = json.loads((ROOT / "specs" / "vectors" / "counters.json").read_text())
    assert doc["head"] == gen.SENSITIVITY_HEAD
    assert [v["has_counters"] for v in doc["vectors"]] == [False, True, True]
    for v in doc["vectors"]:
        raw = bytes.fromhex(v["cbor_hex"])
        rec = HEAD_CODEC.decode(raw, v["name"])
        assert rec.has_counters is v["has_counters"]
        assert HEAD_CODEC.encode(rec, v["name"]) == raw
        assert HEAD_CODEC.encode(gen.counters_head(v["has_counters"], v["level"]), "h") == raw
        assert head_key(gen.VECTOR_ROW).hex() == v["key"]
        assert (raw + zlib.crc32(raw).to_bytes(4, "big")).hex() == v["value"] == seal(raw).hex()
        if v["has_counters"]:
            base = HEAD_CODEC.encode(gen.counters_head(False, v["level"]), "h")
            assert raw == bytes((base[0] + 1,)) + base[1:] + b"\x0f\xf5"
    for v in doc["negative"]:
        with pytest.raises(CodecError):
            HEAD_CODEC.decode(bytes.fromhex(v["cbor_hex"]), v["name"])


# ---------------------------------------------------------------------------------------------
# The migration from format 10


def _copy10(tmp_path: Path, target: str | None) -> Any:
    dest = tmp_path / "v10"
    dest.mkdir()
    shutil.copy(FIXTURE10 / "data.mdb", dest / "data.mdb")
    if target is None:
        return dest
    src = LmdbKV(dest, readonly=True, create=False)
    try:
        copy_kv(src, target)
    finally:
        src.close()
    return target


def test_migrating_the_format_10_fixture_sets_the_flags(tmp_path: Path, store_path: Any) -> None:
    """0010 sets the flag on exactly the heads with counters; nothing else changes but the
    format and the migration records; the counters read the same after it; verify is clean."""
    fx = _tool("make_fixture_v1")
    counted = {fx.fid(n) for n in _tool("make_fixture_v10").COUNTED}
    target = store_path if isinstance(store_path, str) else None
    v10 = _copy10(tmp_path, target)
    before = dump_store(v10)
    assert {MemoryId(k[len(SALIENCE) :]) for k in before if k.startswith(SALIENCE)} == counted
    states = {
        m: SALIENCE_STATE.decode(before[b"sal/" + m.bytes][:-4], "s") for m in counted
    }  # as format 10 stored them
    with pytest.raises(MigrationRequiredError):
        Cortex.open(v10, actor="x")
    assert [(s.name, s.from_version, s.to_version) for s in M.plan(v10)] == [
        ("0010-counters-in-heads", 10, 11),
        ("0011-current-claims-named-counters", 11, 12),
        ("0012-half-vectors", 12, 13),
        ("0013-posting-docnos", 13, 14),
        ("0014-compact-forms", 14, 15),
        ("0015-lean-lexical-documents", 15, 16),
        ("0016-keyspace-databases", 16, 17),
        ("0017-medium-references", 17, 18),
        ("0018-head-database", 18, 19),
        ("0019-index-duplicates", 19, 20),
        ("0020-memory-rows", 20, 21),
    ]
    report = M.migrate(v10, to=14)
    superseded = sum(1 for k, v in before.items() if k.startswith(IDX_CLAIM) and v == b"s")
    assert [(s.step.name, s.records, s.applied) for s in report.steps] == [
        ("0010-counters-in-heads", len(counted), True),
        ("0011-current-claims-named-counters", superseded + len(counted), True),
        ("0012-half-vectors", 0, True),
        ("0013-posting-docnos", sum(1 for k in before if k.startswith(b"lex/d/")), True),
    ]
    after = dump_store(v10)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert {k for k in changed if not k.startswith((b"j/", b"lex/"))} == {
        meta_key("format"),
        meta_key("lexical"),
        M.MIGRATIONS_KEY,
    } | {b"m/" + m.bytes for m in counted} | {b"sal/" + m.bytes for m in counted} | {
        k for k, v in before.items() if k.startswith(IDX_CLAIM) and v == b"s"
    }  # 0011 drops the superseded memories' claim entries and names each counter's memory
    assert not any(k.startswith(IDX_CLAIM) and v for k, v in after.items())
    for m in counted:
        old = HEAD_V14.decode(before[b"m/" + m.bytes][:-4], "h")  # format 10: forms wide
        new = HEAD_V14.decode(after[b"m/" + m.bytes][:-4], "h")  # format 14: forms wide
        assert not old.has_counters and new == Head(**{**_fields(old), "has_counters": True})
    M.migrate(v10)  # 0014 to 0018 (test_migrate, test_lean_docs, test_medium_refs, ...)
    with Cortex.open(v10, actor="checker", as_owner=True) as cx:
        assert cx.verify().ok
        assert list(cx.journal())[-8].reason == "0013-posting-docnos: format 13 -> 14"
        assert _flagged(cx) == (counted, counted)
        for m, st in states.items():
            assert cx.salience_state(m) == st
        used = next(iter(sorted(counted)))
        fresh = cx.write(_fact(1, "migrated"))
        cx.attest([fresh, used], Outcome.SUCCESS)
        assert _head(cx, fresh.id).has_counters and cx.verify().ok


def test_the_migration_refuses_counters_of_no_memory(tmp_path: Path) -> None:
    """A ``sal/`` record whose key names no head (a damaged key) stops 0010 with nothing
    written: setting a flag on a guess would hand another memory counters not its own."""
    v10 = _copy10(tmp_path, None)
    env = lmdb.open(str(v10), subdir=True, max_dbs=0)
    try:
        with env.begin(write=True) as txn:
            key = next(k for k, _ in txn.cursor() if bytes(k).startswith(SALIENCE))
            value = txn.get(key)
            txn.delete(key)
            txn.put(SALIENCE + bytes(16), value)
    finally:
        env.close()
    before = dump_store(v10)
    with pytest.raises(IntegrityError, match="use counters of no memory"):
        M.migrate(v10)
    assert dump_store(v10) == before


@pytest.mark.parametrize("accelerated", [True, False], ids=["c", "python"])
def test_an_explicit_false_flag_is_refused_by_the_read_decoder(
    accelerated: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """format.md §5: key 15 is true or absent; the trusted (read) decoder refuses ``false`` on
    the C path and the pure-Python one alike (it once fell back to a decoder that took it)."""
    import cbor2

    from cortex.model import codec

    head = Head(
        id=new_id(),
        type=MemoryType.FACT,
        current_version=1,
        actor_scope="a",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        last_updated_at=datetime(2026, 1, 1, tzinfo=UTC),
        has_counters=True,
    )
    good = HEAD_CODEC.encode(head, "head")
    as_map = cbor2.loads(good)
    assert as_map[15] is True
    bad = cbor2.dumps({**as_map, 15: False}, canonical=True)
    monkeypatch.setattr(codec, "_USE_SPEEDUPS", accelerated)
    assert HEAD_CODEC.decode_trusted(good).has_counters
    with pytest.raises(codec.Invalid):
        HEAD_CODEC.decode_trusted(bad)
