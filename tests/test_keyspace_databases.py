"""Format 17: the append-mostly keyspaces in LMDB named databases (``specs/storage.md`` §2).

Which keys land in which database, scans that span databases, the migration from the format-16
fixture, and salvage when the leaf holding the databases' records is lost.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import lmdb
import pytest

from cortex import Cortex, CortexError, Fact, MemoryId, MigrationRequiredError, Query
from cortex.engine.values import FORMAT_CODEC
from cortex.index.embed import HashingEmbedder
from cortex.storage import pages as pg
from cortex.storage.keys import (
    DATABASE_PREFIX,
    DATABASES,
    DUP_DATABASES,
    HEAD,
    ID,
    IDX_TYPE,
    JOURNAL,
    LEX_DOCNO,
    meta_key,
)
from cortex.storage.kv import LmdbKV, WriteTxn, seal, unseal
from cortex.transfer import migrate as M
from cortex.transfer.salvage import salvage
from tests import rows as R

from .qsupport import dump_store
from .test_damaged_files import _build, _records, trials_tool

ROOT = Path(__file__).resolve().parent.parent
FIXTURE16 = ROOT / "tests" / "data" / "format16.cortex"  # tools/make_fixture_v16.py
FIXTURE18 = ROOT / "tests" / "data" / "format18.cortex"  # tools/make_fixture_v18.py
FIXTURE19 = ROOT / "tests" / "data" / "format19.cortex"  # tools/make_fixture_v19.py


def _raw(path: Path) -> tuple[list[bytes], dict[bytes, list[bytes]]]:
    """The main database's keys and each named database's keys, read with LMDB itself.

    A database of duplicates (format 20) gives each key as its head and duplicate joined.
    """
    env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=2 * len(DATABASES))
    try:
        with env.begin() as txn:
            main = [bytes(k) for k, _ in txn.cursor()]
        named: dict[bytes, list[bytes]] = {}
        for name in (k for k in main if k.startswith(DATABASE_PREFIX)):
            db = env.open_db(name, create=False)
            with env.begin() as txn:
                dup = db.flags(txn)["dupsort"]
                named[name[len(DATABASE_PREFIX) :]] = [
                    bytes(k) + bytes(v) if dup else bytes(k) for k, v in txn.cursor(db=db)
                ]
        return main, named
    finally:
        env.close()


def _fill(path: Path) -> None:
    with Cortex.open(path, actor="a", embedder=HashingEmbedder(8)) as cx:
        uris = [
            cx.write(Fact(statement=f"the ferry leaves at {i}", subject="ferry", predicate="p"))
            for i in range(40)
        ]
        cx.update(uris[0], Fact(statement="the ferry is late", subject="ferry", predicate="p"))
        assert cx.verify().ok


def test_each_keyspace_lands_in_its_database(tmp_path: Path) -> None:
    _fill(tmp_path / "s")
    main, named = _raw(tmp_path / "s")
    assert sorted(named) == sorted(DATABASES)
    assert [k for k in main if k.startswith(DATABASE_PREFIX)] == [
        DATABASE_PREFIX + p for p in sorted(DATABASES)
    ]
    assert not [k for k in main if k.startswith(DATABASES)]
    for prefix, keys in named.items():
        # the index keyspaces a Fact without tags or frames does not use are empty
        assert keys or prefix in DUP_DATABASES, prefix
        assert all(k.startswith(prefix) for k in keys), prefix
    assert any(k.startswith(b"lex/p/") for k in main)  # the other keyspaces stay in main
    assert len(named[IDX_TYPE]) == 40
    # the KV layer shows one ordered store, without the databases' records
    kv = LmdbKV(tmp_path / "s", readonly=True)
    try:
        with kv.read() as txn:
            every = list(txn.keys(b""))
        want = sorted(
            [k for k in main if not k.startswith(DATABASE_PREFIX)]
            + [k for keys in named.values() for k in keys]
        )
        assert every == want
        assert kv.info()["entries"] == len(want)
    finally:
        kv.close()


_KEYS = [
    b"a/1",
    b"e/to/1",
    b"j/\x00\x00\x00\x00\x00\x00\x00\x01",
    b"j/\x00\x00\x00\x00\x00\x00\x00\x02",
    b"lex/d/x",
    b"lex/i/\x00\x00\x00\x01",
    b"lex/p/t\x00",
    b"lex/t/w",
    b"m/1",
    b"m/2",
    b"meta/format",
    b"mv/1/v/\x00",
    b"vec/1",
    b"zz",
]


@pytest.fixture
def kv(tmp_path: Path) -> Any:
    store = LmdbKV(tmp_path / "kv")
    store.write(lambda t: t.put_many([(k, seal(k)) for k in _KEYS]))
    yield store
    store.close()


def test_a_new_store_has_every_named_database(kv: LmdbKV) -> None:
    kv.close()  # LMDB opens a file once per process
    main, named = _raw(kv.path)
    assert sorted(named) == sorted(DATABASES)
    assert [k for k in main if not k.startswith(DATABASE_PREFIX)] == [
        k for k in _KEYS if not k.startswith(DATABASES)
    ]


@pytest.mark.parametrize("prefix", [b"", b"m", b"lex/", b"j/", b"lex/p/", b"mv/1", b"x"])
def test_scans_span_the_databases_in_key_order(kv: LmdbKV, prefix: bytes) -> None:
    want = [k for k in _KEYS if k.startswith(prefix)]
    with kv.read() as txn:
        assert list(txn.keys(prefix)) == want
        assert [k for k, _ in txn.scan(prefix)] == want
        assert all(unseal(k, v) == k for k, v in txn.scan(prefix))
        assert list(txn.keys(prefix, reverse=True)) == want[::-1]
        assert [k for k, _ in txn.scan(prefix, reverse=True)] == want[::-1]
        for start in [prefix + b"l", prefix + b"m/", prefix + b"\xff", *want]:
            fwd = [k for k in want if k >= start]
            rev = [k for k in want if k <= start][::-1]
            assert list(txn.keys(prefix, start=start)) == fwd, start
            assert list(txn.keys(prefix, start=start, reverse=True)) == rev, start
            assert txn.seek(prefix, start) == (fwd[0] if fwd else None)
            assert txn.seek(prefix, start, reverse=True) == (rev[0] if rev else None)
        tail = txn.last(prefix)
        assert (tail[0] if tail else None) == (want[-1] if want else None)


def test_around_and_point_reads_across_databases(kv: LmdbKV) -> None:
    with kv.read() as txn:
        k0, v0, k1 = txn.around(b"lex/", b"lex/e")
        assert (k0, k1) == (b"lex/d/x", b"lex/i/\x00\x00\x00\x01") and v0 == seal(b"lex/d/x")
        k0, v0, k1 = txn.around(b"m/", b"m/1")
        assert (k0, k1) == (b"m/1", b"m/2")
    values, tail = kv.point_read([b"m/1", b"a/1", b"mv/1/v/\x00", b"nope"], last=b"j/")
    assert values == [seal(b"m/1"), seal(b"a/1"), seal(b"mv/1/v/\x00"), None]
    assert tail == (_KEYS[3], seal(_KEYS[3]))
    _values, tail = kv.point_read([], last=b"")
    assert tail == (b"zz", seal(b"zz"))


def test_writes_route_like_reads_against_a_model(kv: LmdbKV) -> None:
    rng = random.Random(16)
    model = {k: seal(k) for k in _KEYS}
    prefixes = [b"a/", b"j/", b"lex/d/", b"lex/p/", b"m/", b"mv/", b"vec/", b"zz/"]
    for _ in range(30):
        puts = list(
            {
                rng.choice(prefixes) + bytes([rng.randrange(256)]): rng.randbytes(rng.randrange(50))
                for _ in range(rng.randrange(1, 20))
            }.items()
        )
        gone = rng.sample(sorted(model), min(3, len(model)))

        def step(
            txn: WriteTxn, puts: list[tuple[bytes, bytes]] = puts, gone: list[bytes] = gone
        ) -> int:
            for k in gone:
                assert txn.delete(k)
            txn.put_many(sorted(puts))
            return txn.add_many([(b"m/new" + bytes([rng.randrange(4)]), b"x")])

        kv.write(step)
        for k in gone:
            del model[k]
        model.update(puts)
        with kv.read() as txn:
            model.update((k, txn.get(k) or b"") for k in list(txn.keys(b"m/new")))
            assert dict(txn.scan(b"")) == model
            assert list(txn.keys(b"")) == sorted(model)
    assert kv.info()["entries"] == len(model)


# ---------------------------------------------------------------------------------------------
# The migration from format 16


def _copy16(tmp_path: Path) -> Path:
    dest = tmp_path / "v16"
    dest.mkdir()
    shutil.copy(FIXTURE16 / "data.mdb", dest / "data.mdb")
    return dest


def test_the_fixture_is_format_16_with_every_keyspace_in_main(tmp_path: Path) -> None:
    v16 = _copy16(tmp_path)
    main, named = _raw(v16)
    assert named == {} and any(k.startswith(b"m/") for k in main)
    before = dump_store(v16)
    key = meta_key("format")
    assert FORMAT_CODEC.decode(unseal(key, before[key]), "f").format_version == 16
    with pytest.raises(MigrationRequiredError):
        Cortex.open(v16, actor="x")


def test_migrating_the_format_16_fixture_moves_the_keyspaces(tmp_path: Path) -> None:
    v16 = _copy16(tmp_path)
    before = dump_store(v16)
    moving = sum(1 for k in before if k.startswith(M.FORMAT17_DATABASES))
    assert [(s.name, s.from_version, s.to_version) for s in M.plan(v16)] == [
        (M.KEYSPACE_DATABASES_MIGRATION, 16, 17),
        ("0017-medium-references", 17, 18),
        ("0018-head-database", 18, 19),
        ("0019-index-duplicates", 19, 20),
        ("0020-memory-rows", 20, 21),
    ]
    seen: list[tuple[str, int, int]] = []
    report = M.migrate(v16, to=17, progress=lambda *a: seen.append(a))
    [step] = report.steps
    assert step.step.name == M.KEYSPACE_DATABASES_MIGRATION and step.applied
    assert step.records == moving > 300
    assert seen == [(M.KEYSPACE_DATABASES_MIGRATION, i, moving) for i in range(1, moving + 1)]
    after = dump_store(v16)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    # the records are the same: only the format, the migrations and one journal entry change
    assert len([k for k in changed if k.startswith(JOURNAL)]) == 1
    assert {k for k in changed if not k.startswith(JOURNAL)} == {
        meta_key("format"),
        M.MIGRATIONS_KEY,
    }
    main, named = _raw(v16)
    assert sorted(named) == sorted(M.FORMAT17_DATABASES)
    assert not [k for k in main if k.startswith(M.FORMAT17_DATABASES)]
    assert any(k.startswith(HEAD) for k in main)  # format 19 moves them (0018)
    assert sum(len(v) for v in named.values()) == moving + 1  # and the migration's entry
    M.migrate(v16)  # on to the format this cortex opens (0017: tests/test_medium_refs.py)
    main, named = _raw(v16)
    assert sorted(named) == sorted(DATABASES)
    assert not [k for k in main if k.startswith(DATABASES)]
    with Cortex.open(v16, actor="checker", as_owner=True) as cx:
        report_v = cx.verify()
        assert report_v.ok, report_v.problems
        assert list(cx.journal())[-5].reason == (
            f"{M.KEYSPACE_DATABASES_MIGRATION}: format 16 -> 17"
        )
        new = cx.write(Fact(statement="a ferry to the lighthouse", subject="f", predicate="p"))
        assert cx.resolve_latest(new.id).head.id == new.id
        assert cx.verify().ok
    assert M.migrate(v16).steps == ()  # again: nothing


def test_0016_failing_half_way_leaves_format_16(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    v16 = _copy16(tmp_path)
    before = (v16 / "data.mdb").read_bytes()
    dumped = dump_store(v16)
    calls = 0

    def failing(name: str, done: int, total: int) -> None:
        nonlocal calls
        calls += 1
        if calls == 300:
            raise OSError("disk on fire")

    with pytest.raises(OSError, match="disk on fire"):
        M.migrate(v16, progress=failing)
    assert dump_store(v16) == dumped
    assert _raw(v16)[1] == {}
    assert len((v16 / "data.mdb").read_bytes()) >= len(before)
    report = M.migrate(v16)
    assert report.to_version == 21
    with Cortex.open(v16, actor="checker", as_owner=True) as cx:
        assert cx.verify().ok


# ---------------------------------------------------------------------------------------------
# Format 19: the heads (m/) in a named database of their own (0018-head-database)


def _copy18(tmp_path: Path) -> Path:
    dest = tmp_path / "v18"
    dest.mkdir()
    shutil.copy(FIXTURE18 / "data.mdb", dest / "data.mdb")
    return dest


def _outcome(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except CortexError as exc:
        return type(exc).__name__


def _reads(path: Path) -> dict[str, Any]:
    """Every memory as the store reads it: its latest and history, and finds by type and tag."""
    ids = [MemoryId(k[len(ID) :]) for k in dump_store(path) if k.startswith(ID)]
    assert len(ids) > 100
    with Cortex.open(path, actor="checker", as_owner=True) as cx:
        return {
            "latest": {str(i): _outcome(cx.resolve_latest, i) for i in ids},
            "history": {str(i): _outcome(cx.history, i) for i in ids},
            "facts": cx.find(Query(types=("Fact",), limit=1000, include_tombstoned=True)).uris,
            "tagged": cx.find(Query(tags=("floor-3",), limit=1000)).uris,
        }


def test_the_fixture_is_format_18_with_the_heads_in_main(tmp_path: Path) -> None:
    v18 = _copy18(tmp_path)
    main, named = _raw(v18)
    assert sorted(named) == sorted(M.FORMAT17_DATABASES)
    assert len([k for k in main if k.startswith(HEAD)]) > 100
    key = meta_key("format")
    assert FORMAT_CODEC.decode(unseal(key, dump_store(v18)[key]), "f").format_version == 18
    with pytest.raises(MigrationRequiredError):
        Cortex.open(v18, actor="x")


def test_migrating_the_format_18_fixture_moves_the_heads(tmp_path: Path) -> None:
    v18 = _copy18(tmp_path)
    before = dump_store(v18)
    heads = sorted(k for k in before if k.startswith(HEAD))
    assert [(s.name, s.from_version, s.to_version) for s in M.plan(v18)] == [
        ("0018-head-database", 18, 19),
        ("0019-index-duplicates", 19, 20),
        ("0020-memory-rows", 20, 21),
    ]
    dry, _, _ = M.migrate(v18, dry_run=True).steps
    assert dry.records == len(heads) and not dry.applied
    assert dump_store(v18) == before
    seen: list[tuple[str, int, int]] = []
    report = M.migrate(v18, to=19, progress=lambda *a: seen.append(a))
    [step] = report.steps
    assert step.step.name == "0018-head-database" and step.applied
    assert step.records == len(heads)
    assert seen == [("0018-head-database", i, len(heads)) for i in range(1, len(heads) + 1)]
    after = dump_store(v18)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    # the records are the same: only the format, the migrations and one journal entry change
    assert len([k for k in changed if k.startswith(JOURNAL)]) == 1
    assert {k for k in changed if not k.startswith(JOURNAL)} == {
        meta_key("format"),
        M.MIGRATIONS_KEY,
    }
    main, named = _raw(v18)
    assert sorted(named) == sorted((*M.FORMAT17_DATABASES, HEAD))
    assert named[HEAD] == heads
    assert not [k for k in main if k.startswith((*M.FORMAT17_DATABASES, HEAD))]
    M.migrate(v18)  # 0019 (below: the format-19 fixture's migration)
    got = _reads(v18)
    with Cortex.open(v18, actor="checker", as_owner=True) as cx:
        report_v = cx.verify()
        assert report_v.ok, report_v.problems
        assert list(cx.journal())[-3].reason == "0018-head-database: format 18 -> 19"
        new = cx.write(Fact(statement="a ferry to the lighthouse", subject="f", predicate="p"))
        assert cx.resolve_latest(new.id).head.id == new.id
        assert cx.verify().ok
        new_row = R.of_kv(cx._kv, new.id)
    assert ID + new.id.bytes in _raw(v18)[1][ID]  # format 21: its row's head is the last
    assert _raw(v18)[1][HEAD][-1] == HEAD + new_row.to_bytes(4, "big")
    assert M.migrate(v18).steps == ()  # again: nothing
    assert got["facts"] and got["tagged"]


def test_the_heads_read_the_same_before_and_after_0018(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the move, a get, a history and finds read the same memories with the C read path
    (``read_latest``, ``read_current`` given the heads' database) and without it (the records
    are unchanged: ``test_migrating_the_format_18_fixture_moves_the_heads``)."""
    from cortex.engine import store as store_module

    v18 = _copy18(tmp_path)
    M.migrate(v18)
    with_c = _reads(v18)
    monkeypatch.setattr(store_module, "_READ_LATEST", None)
    monkeypatch.setattr(store_module, "_READ", None)
    assert _reads(v18) == with_c


def test_0018_failing_half_way_leaves_format_18(tmp_path: Path) -> None:
    v18 = _copy18(tmp_path)
    dumped = dump_store(v18)

    def failing(name: str, done: int, total: int) -> None:
        if done == 100:
            raise OSError("disk on fire")

    with pytest.raises(OSError, match="disk on fire"):
        M.migrate(v18, progress=failing)
    assert dump_store(v18) == dumped
    assert sorted(_raw(v18)[1]) == sorted(M.FORMAT17_DATABASES)
    assert M.migrate(v18).to_version == 21
    with Cortex.open(v18, actor="checker", as_owner=True) as cx:
        assert cx.verify().ok


# ---------------------------------------------------------------------------------------------
# Salvage: the leaf holding the named databases' records is lost


def _record_page(path: Path) -> int:
    """The live leaf page of the main tree holding the named databases' records."""
    lay = trials_tool.layout(path)
    with pg.DataFile(path / "data.mdb") as f:
        found = [
            p
            for p, kind in lay.kinds.items()
            if kind == "leaf" and list(pg._named_nodes(f.page(p), 4096))
        ]
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize("compacted", [False, True])
def test_salvage_recovers_the_named_keyspaces_when_their_records_are_lost(
    tmp_path: Path, compacted: bool
) -> None:
    store = tmp_path / "store"
    _build(store)
    if compacted:
        with Cortex.open(store, actor="builder") as cx:
            assert cx.backup(tmp_path / "compact").ok
        store = tmp_path / "compact"
    before = _records(store)
    page = _record_page(store)
    with open(store / "data.mdb", "r+b") as f:
        f.seek(page * 4096)
        f.write(bytes(4096))
    found = pg.read_records(store)
    assert found.orphans_searched
    assert all(any(k.startswith(p) for k in found.records) for p in (b"m/", b"mv/", b"j/"))
    report = salvage(store, tmp_path / "new")
    assert report.verify_ok, report
    after = _records(tmp_path / "new")
    assert set(after) == set(before)  # every memory: none of their records was on the page
    for mid, rec in after.items():
        assert rec["records"] == before[mid]["records"], mid


# ---------------------------------------------------------------------------------------------
# Format 20: the index keyspaces in databases of duplicates (0019-index-duplicates)


def _copy19(tmp_path: Path) -> Path:
    dest = tmp_path / "v19"
    dest.mkdir()
    shutil.copy(FIXTURE19 / "data.mdb", dest / "data.mdb")
    return dest


def _node_kinds(path: Path) -> dict[str, int]:
    """How many leaf nodes of each kind the databases of duplicates hold, and P_LEAF2 pages."""
    kinds = {"one": 0, "inline": 0, "tree": 0, "leaf2": 0}
    with pg.DataFile(path / "data.mdb") as f:
        meta = pg.newest(pg.read_metas(f))
        assert meta is not None
        f.psize = meta.psize
        for pgno in range(2, meta.next_pgno):
            page = f.page(pgno)
            flags = pg._HDR.unpack_from(page, 0)[2]
            if flags == pg.P_LEAF | pg.P_LEAF2:
                kinds["leaf2"] += 1
            elif flags == pg.P_LEAF:
                for key, _ in pg._named_nodes(page, meta.psize):
                    del key
                lower = pg._HDR.unpack_from(page, 0)[3]
                for i in range(pg.PAGE_HEADER, lower, 2):
                    ptr = int.from_bytes(page[i : i + 2], "little")
                    _lo, _hi, nflags, ksize = pg._NODE.unpack_from(page, ptr)
                    key = page[ptr + 8 : ptr + 8 + ksize]
                    if pg._dup_head(key):
                        kinds[{0: "one", 4: "inline", 6: "tree"}[nflags]] += 1
    return kinds


def test_the_fixture_is_format_19_with_the_indexes_in_main(tmp_path: Path) -> None:
    v19 = _copy19(tmp_path)
    main, named = _raw(v19)
    assert sorted(named) == sorted((*M.FORMAT17_DATABASES, HEAD))
    assert len([k for k in main if k.startswith(IDX_TYPE)]) > 100
    key = meta_key("format")
    assert FORMAT_CODEC.decode(unseal(key, dump_store(v19)[key]), "f").format_version == 19
    with pytest.raises(MigrationRequiredError):
        Cortex.open(v19, actor="x")


def test_migrating_the_format_19_fixture_moves_the_indexes(tmp_path: Path) -> None:
    v19 = _copy19(tmp_path)
    before = dump_store(v19)
    moving = sorted(k for k in before if k.startswith(tuple(DUP_DATABASES)))
    assert [(s.name, s.from_version, s.to_version) for s in M.plan(v19)] == [
        ("0019-index-duplicates", 19, 20),
        ("0020-memory-rows", 20, 21),
    ]
    dry, _ = M.migrate(v19, dry_run=True).steps
    assert dry.records == len(moving) > 300 and not dry.applied
    assert dump_store(v19) == before
    seen: list[tuple[str, int, int]] = []
    [step] = M.migrate(v19, to=20, progress=lambda *a: seen.append(a)).steps
    assert step.step.name == "0019-index-duplicates" and step.applied
    assert step.records == len(moving)
    assert seen == [("0019-index-duplicates", i, len(moving)) for i in range(1, len(moving) + 1)]
    after = dump_store(v19)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    # the records are the same: only the format, the migrations and one journal entry change
    assert len([k for k in changed if k.startswith(JOURNAL)]) == 1
    assert {k for k in changed if not k.startswith(JOURNAL)} == {
        meta_key("format"),
        M.MIGRATIONS_KEY,
    }
    main, named = _raw(v19)
    assert sorted(named) == sorted({*DATABASES, LEX_DOCNO} - {ID})  # format 20's
    assert sorted(k for p in DUP_DATABASES for k in named[p]) == moving
    assert not [k for k in main if k.startswith(DATABASES)]
    # every kind of node of a database of duplicates: one duplicate, an inline page, a tree
    kinds = _node_kinds(v19)
    assert all(kinds.values()), kinds
    M.migrate(v19)  # 0020: the memories by row (tests/test_memory_rows.py)
    main, named = _raw(v19)
    assert sorted(named) == sorted(DATABASES)  # id/ made, lex/i/ dropped
    got = _reads(v19)
    with Cortex.open(v19, actor="checker", as_owner=True) as cx:
        report_v = cx.verify()
        assert report_v.ok, report_v.problems
        assert list(cx.journal())[-2].reason == "0019-index-duplicates: format 19 -> 20"
        new = cx.write(
            Fact(statement="a ferry to the lighthouse", subject="f", predicate="p"),
            tags=("floor-3",),
        )
        assert cx.find(Query(types=("Fact",), tags=("floor-3",), limit=1)).uris == [new]
        assert cx.verify().ok
    assert M.migrate(v19).steps == ()  # again: nothing
    assert got["facts"] and got["tagged"]


def test_the_indexes_read_the_same_with_and_without_the_c_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After 0019, finds by type and by tag read the same memories through ``newest_ids`` over
    a head's duplicates and through the Python scans of the joined keys."""
    from cortex.query import planner

    v19 = _copy19(tmp_path)
    M.migrate(v19)
    with_c = _reads(v19)
    monkeypatch.setattr(planner, "_NEWEST", None)
    assert _reads(v19) == with_c


def test_0019_failing_half_way_leaves_format_19(tmp_path: Path) -> None:
    v19 = _copy19(tmp_path)
    dumped = dump_store(v19)

    def failing(name: str, done: int, total: int) -> None:
        if done == 200:
            raise OSError("disk on fire")

    with pytest.raises(OSError, match="disk on fire"):
        M.migrate(v19, progress=failing)
    assert dump_store(v19) == dumped
    assert sorted(_raw(v19)[1]) == sorted((*M.FORMAT17_DATABASES, HEAD))
    assert M.migrate(v19).to_version == 21
    with Cortex.open(v19, actor="checker", as_owner=True) as cx:
        assert cx.verify().ok


def test_an_index_entry_with_a_value_is_refused(tmp_path: Path) -> None:
    kv = LmdbKV(tmp_path / "kv")
    try:
        key = IDX_TYPE + b"\x01" + bytes(24)
        with pytest.raises(CortexError, match="empty values"):
            kv.write(lambda t: t.put(key, b"x"))
        with pytest.raises(CortexError, match="empty values"):
            kv.write(lambda t: t.put(IDX_TYPE + b"\x01", b""))
        with kv.read() as txn:
            assert txn.get(key) is None and list(txn.scan(IDX_TYPE)) == []
    finally:
        kv.close()


def _pages_of(path: Path, flags: int, sub: bool = False) -> list[int]:
    """Pages of ``flags`` (with ``sub``: leaves holding an inline page of duplicates)."""
    out = []
    with pg.DataFile(path / "data.mdb") as f:
        meta = pg.newest(pg.read_metas(f))
        assert meta is not None
        for pgno in range(2, meta.next_pgno):
            page = f.page(pgno)
            if pg._HDR.unpack_from(page, 0)[2] != flags:
                continue
            if sub:
                lower = pg._HDR.unpack_from(page, 0)[3]
                ptrs = [int.from_bytes(page[i : i + 2], "little") for i in range(16, lower, 2)]
                if not any(pg._NODE.unpack_from(page, p)[2] == pg.F_DUPDATA for p in ptrs):
                    continue
            out.append(pgno)
    return out


@pytest.mark.parametrize("kind", ["leaf2", "inline"])
@pytest.mark.parametrize("at", [8, 12, 20, 100])
def test_a_damaged_page_of_duplicates_is_refused_clearly(
    tmp_path: Path, kind: str, at: int
) -> None:
    """A flipped byte in a P_LEAF2 page or in a leaf holding an inline page of duplicates: the
    open refuses the store or verify reports it (never a crash), and salvage completes."""
    v19 = _copy19(tmp_path)
    M.migrate(v19)
    with Cortex.open(v19, actor="checker", as_owner=True) as cx:  # the clean state
        assert cx.verify().ok
    (v19 / pg.CHECKED).unlink(missing_ok=True)
    pages = (
        _pages_of(v19, pg.P_LEAF | pg.P_LEAF2)
        if kind == "leaf2"
        else _pages_of(v19, pg.P_LEAF, sub=True)
    )
    assert pages
    page = pages[len(pages) // 2]
    with open(v19 / "data.mdb", "r+b") as f:
        f.seek(page * 4096 + at)
        byte = f.read(1)
        f.seek(page * 4096 + at)
        f.write(bytes((byte[0] ^ 0x5A,)))
    try:
        with Cortex.open(v19, actor="checker", as_owner=True) as cx:
            report = cx.verify()
            outcome = "ok" if report.ok else "reported"
    except CortexError as exc:
        outcome = "refused"
        assert "data.mdb" in str(exc) or "damaged" in str(exc), exc
    assert outcome in ("reported", "refused", "ok")
    if kind == "leaf2" or at in (12, 20):  # the page's bounds, its duplicates, its pointers
        assert outcome != "ok"
    if outcome == "ok":  # a byte no reader reads (a gap): nothing to report
        return
    report_s = salvage(v19, tmp_path / "new")
    assert report_s.verify_ok, report_s


@pytest.mark.parametrize("field", [10, 12, 16])
def test_a_damaged_inline_page_of_duplicates_is_refused(tmp_path: Path, field: int) -> None:
    """A flipped byte of an inline page of duplicates (its flags, its bound, a duplicate): the
    page check refuses the store with a clear error (LMDB would read past it), salvage
    completes."""
    v19 = _copy19(tmp_path)
    M.migrate(v19)
    (v19 / pg.CHECKED).unlink(missing_ok=True)
    page = _pages_of(v19, pg.P_LEAF, sub=True)[0]
    with open(v19 / "data.mdb", "r+b") as f:
        f.seek(page * 4096)
        raw = f.read(4096)
        lower = pg._HDR.unpack_from(raw, 0)[3]
        ptrs = [int.from_bytes(raw[i : i + 2], "little") for i in range(16, lower, 2)]
        ptr = next(p for p in ptrs if pg._NODE.unpack_from(raw, p)[2] == pg.F_DUPDATA)
        at = ptr + 8 + pg._NODE.unpack_from(raw, ptr)[3] + field
        f.seek(page * 4096 + at)
        f.write(bytes((raw[at] ^ (0x80 if field == 16 else 0x5A),)))
    outcome = "ok"
    try:
        with Cortex.open(v19, actor="checker", as_owner=True) as cx:
            outcome = "ok" if cx.verify().ok else "reported"
    except CortexError as exc:
        outcome = "refused"
        assert "damaged" in str(exc), exc
    assert outcome != "ok"
    report_s = salvage(v19, tmp_path / "new")
    assert report_s.verify_ok, report_s


def test_a_backup_of_trees_of_duplicates_is_whole(tmp_path: Path) -> None:
    """LMDB's compacting copy crashes on a tree of duplicates (P_LEAF2 leaves): a backup of
    a format-20 store copies it record by record, and the copy reads as the store does."""
    v19 = _copy19(tmp_path)
    M.migrate(v19)
    assert _node_kinds(v19)["tree"]
    kv = LmdbKV(v19)
    try:
        assert not kv.compact_copy_safe
        with pytest.raises(CortexError, match="databases of duplicates"):
            kv.copy(tmp_path / "raw")
    finally:
        kv.close()
    with Cortex.open(v19, actor="checker", as_owner=True) as cx:
        assert cx.backup(tmp_path / "backup").ok
    assert dump_store(tmp_path / "backup") == dump_store(v19)
