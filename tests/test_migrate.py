"""Migrations, on the committed fixtures (tests/data/format1.cortex, format2, format5).

"Equal" below means: every key of the store outside the journal and ``meta/migrations`` holds
the same bytes (heads, versions, index entries, edges, lexical postings, document records,
term frequencies, ``meta/lexical`` and even ``meta/format``); the journal of the migrated store
is the old journal, byte for byte, plus one ``migration`` entry per step chained to it; and a store
written fresh at the new format by the same operations journals the same entries (same kinds,
times, actors, ids, versions, hashes, fields, reasons, edges) except the reason of its ``init``
entry, which names the format it was created at.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest.mock import ANY

import msgspec
import pytest

import cortex.index.lexical
from cortex import (
    Cortex,
    Fact,
    FormatError,
    IntegrityError,
    JournalKind,
    MigrationRequiredError,
    Query,
    ValidationError,
)
from cortex.engine.store import FEATURES, FORMAT_VERSION, _seal, _unseal
from cortex.engine.values import FORMAT_CODEC
from cortex.model.codec import HEAD, HEAD_V14, VERSION_V14, VERSION_V17
from cortex.model.ids import MemoryId
from cortex.storage import keys as K
from cortex.storage.engines import copy_kv, open_kv
from cortex.storage.keys import JOURNAL, meta_key, show_key
from cortex.storage.kv import LmdbKV
from cortex.transfer import migrate as M

from .qsupport import dump_store

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "data" / "format1.cortex"
FIXTURE2 = ROOT / "tests" / "data" / "format2.cortex"  # the same populate, written at format 2
FIXTURE5 = ROOT / "tests" / "data" / "format5.cortex"  # ... and at format 5
FIXTURE6 = ROOT / "tests" / "data" / "format6.cortex"  # ... and at format 6
FIXTURE7 = ROOT / "tests" / "data" / "format7.cortex"  # ... and at format 7


def _fixture_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "make_fixture_v1", ROOT / "tools" / "make_fixture_v1.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("make_fixture_v1", module)
    spec.loader.exec_module(module)
    return module


TOOL = _fixture_tool()


def _copy(fixture: Path, dest: Path, url: str | None = None) -> Any:
    """A writable copy of a committed fixture store: a directory, or the store at ``url``."""
    dest.mkdir()
    shutil.copy(fixture / "data.mdb", dest / "data.mdb")
    if url is None:
        return dest
    src = LmdbKV(dest, readonly=True, create=False)
    try:
        copy_kv(src, url)  # the same records on PostgreSQL
    finally:
        src.close()
    return url


@pytest.fixture
def target(store_path: Any) -> str | None:
    """Where the fixture copies go: None (a directory) or a PostgreSQL URL."""
    return store_path if isinstance(store_path, str) else None


@pytest.fixture
def v1(tmp_path: Path, target: str | None) -> Any:
    return _copy(FIXTURE, tmp_path / "v1", target)


@pytest.fixture
def v2(tmp_path: Path, target: str | None) -> Any:
    return _copy(FIXTURE2, tmp_path / "v2", target)


@pytest.fixture
def v5(tmp_path: Path, target: str | None) -> Any:
    return _copy(FIXTURE5, tmp_path / "v5", target)


dump = dump_store


def _before_0016(seen: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """The progress calls of the steps but ``0016-keyspace-databases``, ``0018-head-database``,
    ``0019-index-duplicates`` and ``0020-memory-rows`` (one call per record moved or memory
    keyed by its row: checked here to count up)."""
    moves = (
        M.KEYSPACE_DATABASES_MIGRATION,
        "0018-head-database",
        "0019-index-duplicates",
        "0020-memory-rows",
    )
    for kd in moves:
        ticks = [t for t in seen if t[0] == kd]
        assert ticks == [(kd, i, len(ticks)) for i in range(1, len(ticks) + 1)]
    return [t for t in seen if t[0] not in moves]


def _to_20_then_21(path: Any) -> tuple[tuple[M.StepReport, ...], dict[bytes, bytes]]:
    """Migrate to format 20, dump the store, then run ``0020-memory-rows``: every step's report
    and the records at format 20 (what the earlier steps changed, before 0020 keys every
    per-memory record by its row)."""
    first = M.migrate(path, to=20)
    at20 = dump(path)
    last = M.migrate(path)
    return first.steps + last.steps, at20


def journal(items: dict[bytes, bytes]) -> list[tuple[bytes, bytes]]:
    return sorted((k, v) for k, v in items.items() if k.startswith(JOURNAL))


ERASURE_ONLY = (K.ERASURE, meta_key("scrub"))
"""What a store written fresh at format 8 has and a migrated one cannot: the erasure record
of its purge and the mark of the erasure step that followed it (``specs/storage.md`` §11)."""


class _DictTxn:
    """A read transaction over a store's dumped pairs (what ``lexical.logical`` reads)."""

    def __init__(self, items: dict[bytes, bytes]) -> None:
        self.items = items

    def get(self, key: bytes) -> bytes | None:
        return self.items.get(key)

    def scan(self, prefix: bytes, **_: Any) -> Any:
        return iter(sorted((k, v) for k, v in self.items.items() if k.startswith(prefix)))

    def keys(self, prefix: bytes, **_: Any) -> Any:
        return (k for k, _ in self.scan(prefix))


LEX_ONLY = (b"lex/", cortex.index.lexical.STATS_KEY)
"""The lexical index: its document numbers follow the order of the writes (format 14), so a
migrated store (numbered in id order) and one written fresh compare by memory id."""


def without_journal(items: dict[bytes, bytes]) -> dict[bytes, Any]:
    out: dict[bytes, Any] = {
        k: v
        for k, v in items.items()
        if not k.startswith(JOURNAL)
        and k != M.MIGRATIONS_KEY
        and not k.startswith(ERASURE_ONLY)
        and not k.startswith(LEX_ONLY)
    }
    if any(k.startswith(LEX_ONLY) for k in items):
        out[b"lex (by id)"] = cortex.index.lexical.logical(_DictTxn(items))  # type: ignore[arg-type]
    return out


def fresh(tmp_path: Path) -> Path:
    path = tmp_path / "fresh"
    with Cortex.open(path, actor=TOOL.ACTOR, clock=TOOL.FixedClock()) as cx:
        TOOL.populate(cx)
        cx.merge_lexical()  # the bytes of a migrated index: no segment left (lexical.md §4b)
    return path


def test_the_fixture_is_format_1_and_opening_it_asks_for_migrate(v1: Path) -> None:
    assert (FIXTURE / "data.mdb").stat().st_size < 100_000
    with pytest.raises(MigrationRequiredError, match=r"cortex .*migrate"):
        Cortex.open(v1, actor="x", as_owner=True)
    kv = open_kv(v1, create=False)
    try:
        with kv.read() as txn:
            raw = txn.get(meta_key("format"))
            assert raw is not None
            record = FORMAT_CODEC.decode(_unseal(b"meta/format", raw), "meta/format")
    finally:
        kv.close()
    assert record.format_version == 1
    assert set(record.features) == {"crc32-envelope", "journal-sha256-chain"}


def test_the_migrations_form_a_chain_to_this_format() -> None:
    assert [m.step.from_version for m in M.MIGRATIONS] == list(range(1, FORMAT_VERSION))
    assert [m.step.to_version for m in M.MIGRATIONS] == list(range(2, FORMAT_VERSION + 1))
    assert M.MIGRATIONS[-1].features == FEATURES
    names = [m.step.name for m in M.MIGRATIONS]
    assert names == sorted(names) and len(set(names)) == len(names)
    assert M.known() == [m.step for m in M.MIGRATIONS]


STEPS = [
    ("0001-lexical-index", 1, 2),
    ("0002-pinned-and-frame-time", 2, 3),
    ("0003-tag-index-by-type", 3, 4),
    ("0004-lexical-stemming", 4, 5),
    ("0005-posting-blocks", 5, 6),
    ("0006-episodes", 6, 7),
    ("0007-claim-index", 7, 8),
    ("0008-sensitivity-in-heads", 8, 9),
    ("0009-posting-segments", 9, 10),
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


def test_plan(v1: Path) -> None:
    steps = M.plan(v1)
    assert [(s.name, s.from_version, s.to_version) for s in steps] == STEPS
    assert [(s.name, s.from_version, s.to_version) for s in M.plan(v1, to=2)] == STEPS[:1]
    assert M.plan(v1, to=1) == []


def test_migrating_the_fixture_equals_a_fresh_store(v1: Path, tmp_path: Path) -> None:
    before = dump(v1)
    seen: list[tuple[str, int, int]] = []
    report = M.migrate(v1, progress=lambda name, done, total: seen.append((name, done, total)))
    assert (report.from_version, report.to_version, report.dry_run) == (1, 21, False)
    assert [(s.step.name, s.records, s.applied) for s in report.steps] == [
        ("0001-lexical-index", 9, True),
        ("0002-pinned-and-frame-time", 11, True),  # every memory, tombstoned and purged too
        ("0003-tag-index-by-type", 11, True),
        ("0004-lexical-stemming", 9, True),  # the live memories
        ("0005-posting-blocks", 9, True),
        ("0006-episodes", 0, True),  # no records change
        ("0007-claim-index", 11, True),  # every memory
        ("0008-sensitivity-in-heads", 0, True),
        ("0009-posting-segments", 0, True),
        ("0010-counters-in-heads", 0, True),
        ("0011-current-claims-named-counters", 0, True),
        ("0012-half-vectors", 0, True),
        ("0013-posting-docnos", 9, True),
        ("0014-compact-forms", 25, True),  # every head and version
        ("0015-lean-lexical-documents", 9, True),
        ("0016-keyspace-databases", ANY, True),
        ("0017-medium-references", 14, True),
        ("0018-head-database", ANY, True),
        ("0019-index-duplicates", ANY, True),
        ("0020-memory-rows", ANY, True),
    ]
    assert _before_0016(seen) == [("0001-lexical-index", i, 9) for i in range(1, 10)] + [
        (name, i, 11)
        for name in ("0002-pinned-and-frame-time", "0003-tag-index-by-type")
        for i in range(1, 12)
    ] + [
        (name, i, 9)
        for name in ("0004-lexical-stemming", "0005-posting-blocks")
        for i in range(1, 10)
    ] + [("0007-claim-index", i, 11) for i in range(1, 12)] + [
        ("0013-posting-docnos", i, 9) for i in range(1, 10)
    ] + [("0014-compact-forms", i, 25) for i in range(1, 26)] + [
        ("0017-medium-references", i, 14) for i in range(1, 14 + 1)
    ]  # (0015 finds no lexical document: 0013 left the index to 0020)
    after = dump(v1)
    want = dump(fresh(tmp_path))
    # everything but the journal (and the record of migrations) is byte-identical
    assert without_journal(after) == without_journal(want)
    assert any(k.startswith(b"lex/p/") for k in after)
    # the pinned index: the Identity, the active Goal and the hard Constraint
    pins = [K.parse_pin_key(k) for k in after if k.startswith(K.IDX_PIN)]
    assert sorted(p.id for p in pins) == [TOOL.fid(1), TOOL.fid(6), TOOL.fid(7)]
    # every frame entry is in the format-3 layout, none in the old one
    frames = [k for k in after if k.startswith(K.IDX_FRAME)]
    old_frames = [k for k in before if k.startswith(K.IDX_FRAME)]
    assert len(frames) == len(old_frames) > 0 and not set(frames) & set(old_frames)
    assert all(K.parse_frame_key(k).created_us > 0 for k in frames)
    # the journal: the old one untouched, plus one migration entry per step
    # every tag entry is in the format-4 layout (the type after the tag), none in the old one
    tags = [k for k in after if k.startswith(K.IDX_TAG)]
    old_tags = [k for k in before if k.startswith(K.IDX_TAG)]
    assert len(tags) == len(old_tags) > 0 and not set(tags) & set(old_tags)
    assert all(K.parse_tag_key(k).type for k in tags)
    old, new = journal(before), journal(after)
    assert new[:-20] == old
    with Cortex.open(v1, actor="checker", as_owner=True) as cx:
        report_v = cx.verify()
        assert report_v.ok, report_v.problems
        assert report_v.lexical_documents == 9
        entries = list(cx.journal())
        (
            first,
            second,
            third,
            fourth,
            fifth,
            sixth,
            seventh,
            eighth,
            ninth,
            tenth,
            eleventh,
            twelfth,
            thirteenth,
            fourteenth,
            fifteenth,
            sixteenth,
            last,
        ) = entries[-20:-3]
        assert first.kind is last.kind is JournalKind.MIGRATION and last.by == "cortex-migrate"
        assert first.reason == "0001-lexical-index: format 1 -> 2"
        assert second.reason == "0002-pinned-and-frame-time: format 2 -> 3"
        assert third.reason == "0003-tag-index-by-type: format 3 -> 4"
        assert fourth.reason == "0004-lexical-stemming: format 4 -> 5"
        assert fifth.reason == "0005-posting-blocks: format 5 -> 6"
        assert sixth.reason == "0006-episodes: format 6 -> 7"
        assert seventh.reason == "0007-claim-index: format 7 -> 8"
        assert eighth.reason == "0008-sensitivity-in-heads: format 8 -> 9"
        assert ninth.reason == "0009-posting-segments: format 9 -> 10"
        assert tenth.reason == "0010-counters-in-heads: format 10 -> 11"
        assert eleventh.reason == "0011-current-claims-named-counters: format 11 -> 12"
        assert twelfth.reason == "0012-half-vectors: format 12 -> 13"
        assert thirteenth.reason == "0013-posting-docnos: format 13 -> 14"
        assert fourteenth.reason == "0014-compact-forms: format 14 -> 15"
        assert fifteenth.reason == "0015-lean-lexical-documents: format 15 -> 16"
        assert sixteenth.reason == "0016-keyspace-databases: format 16 -> 17"
        assert last.reason == "0017-medium-references: format 17 -> 18"
        assert entries[-3].reason == "0018-head-database: format 18 -> 19"
        assert entries[-2].reason == "0019-index-duplicates: format 19 -> 20"
        assert entries[-1].reason == "0020-memory-rows: format 20 -> 21"
        assert cx.format.format_version == 21 and set(cx.format.features) == FEATURES
        assert cx.stats()["lexical"]["documents"] == 9
        hits = cx._lexical_search("Genève", 5)
        assert [str(m) for m, _ in hits] == [str(TOOL.fid(2))]
    with Cortex.open(tmp_path / "fresh", actor="checker", as_owner=True) as cx:
        fresh_entries = list(cx.journal())
    assert len(fresh_entries) == len(entries) - 20

    assert [essence(e) for e in fresh_entries] == [essence(e) for e in entries[:-20]]
    assert fresh_entries[0].reason == "format 21" and entries[0].reason == "format 1"
    applied = M.applied(v1)
    assert [(a.name, a.from_version, a.to_version, a.records) for a in applied] == [
        ("0001-lexical-index", 1, 2, 9),
        ("0002-pinned-and-frame-time", 2, 3, 11),
        ("0003-tag-index-by-type", 3, 4, 11),
        ("0004-lexical-stemming", 4, 5, 9),
        ("0005-posting-blocks", 5, 6, 9),
        ("0006-episodes", 6, 7, 0),
        ("0007-claim-index", 7, 8, 11),
        ("0008-sensitivity-in-heads", 8, 9, 0),
        ("0009-posting-segments", 9, 10, 0),
        ("0010-counters-in-heads", 10, 11, 0),
        ("0011-current-claims-named-counters", 11, 12, 0),
        ("0012-half-vectors", 12, 13, 0),
        ("0013-posting-docnos", 13, 14, 9),
        ("0014-compact-forms", 14, 15, 25),
        ("0015-lean-lexical-documents", 15, 16, 9),
        ("0016-keyspace-databases", 16, 17, ANY),
        ("0017-medium-references", 17, 18, 14),
        ("0018-head-database", 18, 19, ANY),
        ("0019-index-duplicates", 19, 20, ANY),
        ("0020-memory-rows", 20, 21, ANY),
    ]


def essence(e: Any) -> dict[str, Any]:
    """A journal entry as the same operations journal it at any format.

    The init entry names the format it was created at; since format 8 a purge entry also
    carries the content hash of the version it erased.
    """
    d = msgspec.structs.asdict(e)
    del d["prev"]
    if e.kind is JournalKind.INIT:
        del d["reason"]
    if e.kind is JournalKind.PURGE:
        del d["hash"]
    return d


def test_migrating_to_2_stops_after_0001(v1: Path, tmp_path: Path) -> None:
    before = dump(v1)
    report = M.migrate(v1, to=2)
    assert (report.from_version, report.to_version) == (1, 2)
    assert [s.step.name for s in report.steps] == ["0001-lexical-index"]
    assert [a.name for a in M.applied(v1)] == ["0001-lexical-index"]
    at2 = dump(v1)
    key = meta_key("format")
    record = FORMAT_CODEC.decode(_unseal(key, at2[key]), "meta/format")
    assert record.format_version == 2
    assert set(record.features) == {"crc32-envelope", "journal-sha256-chain", "lexical-bm25"}
    # 0001 adds the lexical index and touches no other index: frame keys keep the format-2
    # layout and there is no pinned index yet
    idx = {k: v for k, v in at2.items() if k.startswith(b"idx/")}
    assert idx == {k: v for k, v in before.items() if k.startswith(b"idx/")}
    assert not any(k.startswith(K.IDX_PIN) for k in at2)
    # format 21: the lexical index is built under the memories' rows by 0020-memory-rows; the
    # earlier rebuilds leave its statistics and no posting
    assert meta_key("lexical") in at2 and not any(k.startswith(b"lex/p/") for k in at2)
    # this cortex reads format 5 only: a format-2 store asks for the rest of the migration
    with pytest.raises(MigrationRequiredError, match="migrate"):
        Cortex.open(v1, actor="x", as_owner=True)
    rest = [
        "0002-pinned-and-frame-time",
        "0003-tag-index-by-type",
        "0004-lexical-stemming",
        "0005-posting-blocks",
        "0006-episodes",
        "0007-claim-index",
        "0008-sensitivity-in-heads",
        "0009-posting-segments",
        "0010-counters-in-heads",
        "0011-current-claims-named-counters",
        "0012-half-vectors",
        "0013-posting-docnos",
        "0014-compact-forms",
        "0015-lean-lexical-documents",
        "0016-keyspace-databases",
        "0017-medium-references",
        "0018-head-database",
        "0019-index-duplicates",
        "0020-memory-rows",
    ]
    assert [s.name for s in M.plan(v1)] == rest
    # and finishing it later gives exactly what migrating in one go gives
    report = M.migrate(v1)
    assert [s.step.name for s in report.steps] == rest
    assert without_journal(dump(v1)) == without_journal(dump(fresh(tmp_path)))
    with Cortex.open(v1, actor="checker", as_owner=True) as cx:
        assert cx.verify().ok


def test_a_dry_run_writes_nothing(v1: Path) -> None:
    data = dump(v1)
    report = M.migrate(v1, dry_run=True)
    assert report.dry_run and (report.from_version, report.to_version) == (1, 21)
    assert [(s.step.name, s.records, s.applied) for s in report.steps] == [
        ("0001-lexical-index", 9, False),
        ("0002-pinned-and-frame-time", 11, False),
        ("0003-tag-index-by-type", 11, False),
        ("0004-lexical-stemming", 9, False),
        ("0005-posting-blocks", 9, False),
        ("0006-episodes", 0, False),
        ("0007-claim-index", 11, False),
        ("0008-sensitivity-in-heads", 0, False),
        ("0009-posting-segments", 0, False),
        ("0010-counters-in-heads", 0, False),
        ("0011-current-claims-named-counters", 0, False),
        ("0012-half-vectors", 0, False),
        ("0013-posting-docnos", 9, False),
        ("0014-compact-forms", 25, False),
        ("0015-lean-lexical-documents", 9, False),
        ("0016-keyspace-databases", ANY, False),
        ("0017-medium-references", 14, False),
        ("0018-head-database", ANY, False),
        ("0019-index-duplicates", ANY, False),
        ("0020-memory-rows", ANY, False),
    ]
    assert dump(v1) == data
    with pytest.raises(MigrationRequiredError):
        Cortex.open(v1, actor="x", as_owner=True)
    M.migrate(v1, to=2)
    at2 = dump(v1)
    report = M.migrate(v1, dry_run=True)
    assert (report.from_version, report.to_version) == (2, 21)
    assert [(s.step.name, s.records, s.applied) for s in report.steps] == [
        ("0002-pinned-and-frame-time", 11, False),
        ("0003-tag-index-by-type", 11, False),
        ("0004-lexical-stemming", 9, False),
        ("0005-posting-blocks", 9, False),
        ("0006-episodes", 0, False),
        ("0007-claim-index", 11, False),
        ("0008-sensitivity-in-heads", 0, False),
        ("0009-posting-segments", 0, False),
        ("0010-counters-in-heads", 0, False),
        ("0011-current-claims-named-counters", 0, False),
        ("0012-half-vectors", 0, False),
        ("0013-posting-docnos", 9, False),
        ("0014-compact-forms", 25, False),
        ("0015-lean-lexical-documents", 9, False),
        ("0016-keyspace-databases", ANY, False),
        ("0017-medium-references", 14, False),
        ("0018-head-database", ANY, False),
        ("0019-index-duplicates", ANY, False),
        ("0020-memory-rows", ANY, False),
    ]
    assert dump(v1) == at2


def test_running_it_again_is_a_no_op(v1: Path) -> None:
    M.migrate(v1)
    once = dump(v1)
    report = M.migrate(v1)
    assert report.steps == () and (report.from_version, report.to_version) == (21, 21)
    assert M.migrate(v1, dry_run=True).steps == ()
    assert dump(v1) == once
    assert M.plan(v1) == []


def test_a_migration_failing_half_way_leaves_format_20(
    v1: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0020-memory-rows killed half way (an error on the 5th memory it indexes, after it moved
    every memory's records to their rows): the store is wholly at format 20, as the steps
    before left it, and the migration runs again."""
    M.migrate(v1, to=20)
    before = dump(v1)
    original = cortex.index.lexical.Indexer.add
    calls = 0

    def failing_add(self: Any, *args: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == 5:
            raise OSError("disk on fire")
        original(self, *args)

    monkeypatch.setattr(cortex.index.lexical.Indexer, "add", failing_add)
    with pytest.raises(OSError, match="disk on fire"):
        M.migrate(v1)
    assert calls == 5
    assert dump(v1) == before
    assert M.applied(v1)[-1].name == "0019-index-duplicates"
    with pytest.raises(MigrationRequiredError):
        Cortex.open(v1, actor="x", as_owner=True)
    monkeypatch.setattr(cortex.index.lexical.Indexer, "add", original)
    assert M.migrate(v1).to_version == 21  # and it can be run again
    with Cortex.open(v1, actor="checker", as_owner=True) as cx:
        assert cx.verify().ok


def test_0002_failing_half_way_leaves_format_2(
    v1: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    M.migrate(v1, to=2)
    before = dump(v1)
    original = M.is_pinned
    calls = 0

    def failing(data: Any) -> bool:
        nonlocal calls
        calls += 1
        if calls == 5:  # after the frame keys were deleted and some rewritten
            raise OSError("disk on fire")
        return original(data)

    monkeypatch.setattr(M, "is_pinned", failing)
    with pytest.raises(OSError, match="disk on fire"):
        M.migrate(v1)
    assert calls == 5
    assert dump(v1) == before  # wholly at format 2: old frame keys, no pins, no record
    assert [a.name for a in M.applied(v1)] == ["0001-lexical-index"]
    monkeypatch.setattr(M, "is_pinned", original)
    assert M.migrate(v1).to_version == 21  # and it can be run again
    assert without_journal(dump(v1)) == without_journal(dump(fresh(tmp_path)))


def test_targets(v1: Path) -> None:
    with pytest.raises(ValidationError, match="knows formats up to"):
        M.plan(v1, to=FORMAT_VERSION + 1)
    with pytest.raises(ValidationError, match="integer"):
        M.migrate(v1, to="2")  # type: ignore[arg-type]
    assert M.migrate(v1, to=1).steps == ()
    M.migrate(v1, to=2)
    with pytest.raises(ValidationError, match="only go forward"):
        M.migrate(v1, to=1)
    assert M.migrate(v1, to=2).steps == ()
    M.migrate(v1, to=3)
    with pytest.raises(ValidationError, match="only go forward"):
        M.migrate(v1, to=2)
    M.migrate(v1, to=4)
    with pytest.raises(ValidationError, match="only go forward"):
        M.migrate(v1, to=3)
    M.migrate(v1, to=5)
    with pytest.raises(ValidationError, match="only go forward"):
        M.migrate(v1, to=4)
    M.migrate(v1, to=6)
    with pytest.raises(ValidationError, match="only go forward"):
        M.migrate(v1, to=5)
    M.migrate(v1, to=7)
    with pytest.raises(ValidationError, match="only go forward"):
        M.migrate(v1, to=6)


def test_a_newer_store_is_refused(v1: Path) -> None:
    kv = open_kv(v1, create=False)
    key = meta_key("format")

    def bump(txn: Any) -> None:
        raw = txn.get(key)
        record = FORMAT_CODEC.decode(_unseal(key, raw), "meta/format")
        newer = msgspec.structs.replace(record, format_version=FORMAT_VERSION + 1)
        txn.put(key, _seal(FORMAT_CODEC.encode(newer, "meta/format")))

    try:
        kv.write(bump)
    finally:
        kv.close()
    with pytest.raises(FormatError, match="newer"):
        M.migrate(v1)


def test_not_a_store(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="no store"):
        M.migrate(tmp_path / "nothing")


def test_migrating_the_format_2_fixture_equals_a_fresh_store(v2: Path, tmp_path: Path) -> None:
    before = dump(v2)
    key = meta_key("format")
    assert FORMAT_CODEC.decode(_unseal(key, before[key]), "meta/format").format_version == 2
    assert [s.name for s in M.plan(v2)] == [
        "0002-pinned-and-frame-time",
        "0003-tag-index-by-type",
        "0004-lexical-stemming",
        "0005-posting-blocks",
        "0006-episodes",
        "0007-claim-index",
        "0008-sensitivity-in-heads",
        "0009-posting-segments",
        "0010-counters-in-heads",
        "0011-current-claims-named-counters",
        "0012-half-vectors",
        "0013-posting-docnos",
        "0014-compact-forms",
        "0015-lean-lexical-documents",
        "0016-keyspace-databases",
        "0017-medium-references",
        "0018-head-database",
        "0019-index-duplicates",
        "0020-memory-rows",
    ]
    steps, after = _to_20_then_21(v2)  # after: at format 20
    assert [(s.step.name, s.records, s.applied) for s in steps] == [
        ("0002-pinned-and-frame-time", 11, True),
        ("0003-tag-index-by-type", 11, True),
        ("0004-lexical-stemming", 9, True),
        ("0005-posting-blocks", 9, True),
        ("0006-episodes", 0, True),
        ("0007-claim-index", 11, True),
        ("0008-sensitivity-in-heads", 0, True),
        ("0009-posting-segments", 0, True),
        ("0010-counters-in-heads", 0, True),
        ("0011-current-claims-named-counters", 0, True),
        ("0012-half-vectors", 0, True),
        ("0013-posting-docnos", 9, True),
        ("0014-compact-forms", 25, True),
        ("0015-lean-lexical-documents", 9, True),
        ("0016-keyspace-databases", ANY, True),
        ("0017-medium-references", 14, True),
        ("0018-head-database", ANY, True),
        ("0019-index-duplicates", ANY, True),
        ("0020-memory-rows", ANY, True),
    ]
    assert without_journal(dump(v2)) == without_journal(dump(fresh(tmp_path)))
    # only the frame, tag, pinned and lexical indexes and the records of the format changed
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert all(
        k.startswith((K.IDX_FRAME, K.IDX_TAG, K.IDX_PIN, K.IDX_CLAIM, b"lex/", JOURNAL))
        or k.startswith((K.HEAD, K.VERSION))  # 0014: the forms compact
        or k in (key, M.MIGRATIONS_KEY, meta_key("lexical"))
        for k in changed
    )
    # stemming changed some terms: "Genève" was indexed as "geneve" and is now "genev"
    assert any(k.startswith(b"lex/p/geneve\x00") for k in before)
    assert not any(k.startswith(b"lex/p/geneve\x00") for k in after)
    assert journal(after)[:-18] == journal(before)
    with Cortex.open(v2, actor="checker", as_owner=True) as cx:
        assert cx.verify().ok
        *entries, last21 = list(cx.journal())
        assert entries[-18].reason == "0002-pinned-and-frame-time: format 2 -> 3"
        assert entries[-17].reason == "0003-tag-index-by-type: format 3 -> 4"
        assert entries[-16].reason == "0004-lexical-stemming: format 4 -> 5"
        assert entries[-15].reason == "0005-posting-blocks: format 5 -> 6"
        assert entries[-14].reason == "0006-episodes: format 6 -> 7"
        assert entries[-13].reason == "0007-claim-index: format 7 -> 8"
        assert entries[-12].reason == "0008-sensitivity-in-heads: format 8 -> 9"
        assert entries[-11].reason == "0009-posting-segments: format 9 -> 10"
        assert entries[-10].reason == "0010-counters-in-heads: format 10 -> 11"
        assert entries[-9].reason == "0011-current-claims-named-counters: format 11 -> 12"
        assert entries[-8].reason == "0012-half-vectors: format 12 -> 13"
        assert entries[-7].reason == "0013-posting-docnos: format 13 -> 14"
        assert entries[-6].reason == "0014-compact-forms: format 14 -> 15"
        assert entries[-5].reason == "0015-lean-lexical-documents: format 15 -> 16"
        assert entries[-4].reason == "0016-keyspace-databases: format 16 -> 17"
        assert entries[-3].reason == "0017-medium-references: format 17 -> 18"
        assert entries[-2].reason == "0018-head-database: format 18 -> 19"
        assert entries[-1].reason == "0019-index-duplicates: format 19 -> 20"
        assert last21.reason == "0020-memory-rows: format 20 -> 21"
        assert [m for m, _ in cx._lexical_search("Genève", 5)] == [TOOL.fid(2)]
    assert [(a.name, a.records) for a in M.applied(v2)] == [
        ("0002-pinned-and-frame-time", 11),
        ("0003-tag-index-by-type", 11),
        ("0004-lexical-stemming", 9),
        ("0005-posting-blocks", 9),
        ("0006-episodes", 0),
        ("0007-claim-index", 11),
        ("0008-sensitivity-in-heads", 0),
        ("0009-posting-segments", 0),
        ("0010-counters-in-heads", 0),
        ("0011-current-claims-named-counters", 0),
        ("0012-half-vectors", 0),
        ("0013-posting-docnos", 9),
        ("0014-compact-forms", 25),
        ("0015-lean-lexical-documents", 9),
        ("0016-keyspace-databases", ANY),
        ("0017-medium-references", 14),
        ("0018-head-database", ANY),
        ("0019-index-duplicates", ANY),
        ("0020-memory-rows", ANY),
    ]


def test_migrating_the_format_5_fixture_equals_a_fresh_store(v5: Path, tmp_path: Path) -> None:
    """Format 5 held one key per posting; 0005 puts them in blocks and changes nothing else."""
    before = dump(v5)
    key = meta_key("format")
    assert FORMAT_CODEC.decode(_unseal(key, before[key]), "meta/format").format_version == 5
    assert [s.name for s in M.plan(v5)] == [
        "0005-posting-blocks",
        "0006-episodes",
        "0007-claim-index",
        "0008-sensitivity-in-heads",
        "0009-posting-segments",
        "0010-counters-in-heads",
        "0011-current-claims-named-counters",
        "0012-half-vectors",
        "0013-posting-docnos",
        "0014-compact-forms",
        "0015-lean-lexical-documents",
        "0016-keyspace-databases",
        "0017-medium-references",
        "0018-head-database",
        "0019-index-duplicates",
        "0020-memory-rows",
    ]
    with pytest.raises(MigrationRequiredError):
        Cortex.open(v5, actor="x", as_owner=True)
    steps, after = _to_20_then_21(v5)  # after: at format 20
    assert [(s.step.name, s.records, s.applied) for s in steps] == [
        ("0005-posting-blocks", 9, True),
        ("0006-episodes", 0, True),
        ("0007-claim-index", 11, True),
        ("0008-sensitivity-in-heads", 0, True),
        ("0009-posting-segments", 0, True),
        ("0010-counters-in-heads", 0, True),
        ("0011-current-claims-named-counters", 0, True),
        ("0012-half-vectors", 0, True),
        ("0013-posting-docnos", 9, True),
        ("0014-compact-forms", 25, True),
        ("0015-lean-lexical-documents", 9, True),
        ("0016-keyspace-databases", ANY, True),
        ("0017-medium-references", 14, True),
        ("0018-head-database", ANY, True),
        ("0019-index-duplicates", ANY, True),
        ("0020-memory-rows", ANY, True),
    ]
    assert without_journal(dump(v5)) == without_journal(dump(fresh(tmp_path)))
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert all(
        k.startswith((b"lex/", K.IDX_CLAIM, JOURNAL, K.HEAD, K.VERSION))  # 0014: forms
        or k in (key, M.MIGRATIONS_KEY, meta_key("lexical"))
        for k in changed
    )
    old_postings = [k for k in before if k.startswith(K.LEX_POSTING)]
    new_blocks = [k for k in after if k.startswith(K.LEX_POSTING)]
    assert len(new_blocks) < len(old_postings)
    assert journal(after)[:-15] == journal(before)
    with Cortex.open(v5, actor="checker", as_owner=True) as cx:
        assert cx.verify().ok
        last = list(cx.journal())[-1]
        assert last.reason == "0020-memory-rows: format 20 -> 21"
        assert [m for m, _ in cx._lexical_search("Genève", 5)] == [TOOL.fid(2)]


def test_migrating_the_format_6_fixture_adds_episodes_and_changes_no_record(
    tmp_path: Path, target: str | None
) -> None:
    """Format 7 allows episodes; 0006 rewrites no record, only the format and its journal."""
    v6 = _copy(FIXTURE6, tmp_path / "v6", target)
    before = dump(v6)
    key = meta_key("format")
    assert FORMAT_CODEC.decode(_unseal(key, before[key]), "meta/format").format_version == 6
    with pytest.raises(MigrationRequiredError):
        Cortex.open(v6, actor="x", as_owner=True)
    steps, after = _to_20_then_21(v6)  # after: at format 20
    assert [(s.step.name, s.records, s.applied) for s in steps] == [
        ("0006-episodes", 0, True),
        ("0007-claim-index", 11, True),
        ("0008-sensitivity-in-heads", 0, True),
        ("0009-posting-segments", 0, True),
        ("0010-counters-in-heads", 0, True),
        ("0011-current-claims-named-counters", 0, True),
        ("0012-half-vectors", 0, True),
        ("0013-posting-docnos", 9, True),
        ("0014-compact-forms", 25, True),
        ("0015-lean-lexical-documents", 9, True),
        ("0016-keyspace-databases", ANY, True),
        ("0017-medium-references", 14, True),
        ("0018-head-database", ANY, True),
        ("0019-index-duplicates", ANY, True),
        ("0020-memory-rows", ANY, True),
    ]
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert all(
        k.startswith((JOURNAL, K.IDX_CLAIM, b"lex/", K.HEAD, K.VERSION))  # 0014: forms
        or k in (key, M.MIGRATIONS_KEY, meta_key("lexical"))
        for k in changed
    )
    assert journal(after)[:-14] == journal(before)
    assert without_journal(dump(v6)) == without_journal(dump(fresh(tmp_path)))
    record = FORMAT_CODEC.decode(_unseal(key, dump(v6)[key]), "meta/format")
    assert record.format_version == 21 and "episodes" in record.features
    with Cortex.open(v6, actor="checker", as_owner=True) as cx:
        assert cx.verify().ok
        last = list(cx.journal())[-1]
        assert last.reason == "0020-memory-rows: format 20 -> 21"


def test_migrating_the_format_7_fixture_adds_the_claim_index_and_nothing_else(
    tmp_path: Path,
) -> None:
    """Format 8 indexes claim keys; 0007 adds ``idx/claim/`` entries and changes no record."""
    v7 = _copy(FIXTURE7, tmp_path / "v7")
    before = dump(v7)
    key = meta_key("format")
    assert FORMAT_CODEC.decode(_unseal(key, before[key]), "meta/format").format_version == 7
    assert not any(k.startswith(K.IDX_CLAIM) for k in before)
    with pytest.raises(MigrationRequiredError):
        Cortex.open(v7, actor="x")
    steps, after = _to_20_then_21(v7)  # after: at format 20
    assert [(s.step.name, s.records, s.applied) for s in steps] == [
        ("0007-claim-index", 11, True),
        ("0008-sensitivity-in-heads", 0, True),
        ("0009-posting-segments", 0, True),
        ("0010-counters-in-heads", 0, True),
        ("0011-current-claims-named-counters", 0, True),
        ("0012-half-vectors", 0, True),
        ("0013-posting-docnos", 9, True),
        ("0014-compact-forms", 25, True),
        ("0015-lean-lexical-documents", 9, True),
        ("0016-keyspace-databases", ANY, True),
        ("0017-medium-references", 14, True),
        ("0018-head-database", ANY, True),
        ("0019-index-duplicates", ANY, True),
        ("0020-memory-rows", ANY, True),
    ]
    added = set(after) - set(before)
    assert {k for k in added if not k.startswith((JOURNAL, b"lex/")) and k != M.MIGRATIONS_KEY} == {
        k for k in after if k.startswith(K.IDX_CLAIM)
    }
    # every Fact and Preference that has content (the purged one has none), none other
    claims = {K.parse_claim_index_key(k)[1] for k in after if k.startswith(K.IDX_CLAIM)}
    with Cortex.open(v7, actor="checker", as_owner=True) as cx:
        want = {
            h.memory.id
            for h in cx.find(
                Query(types=("Fact", "Preference"), include_tombstoned=True, limit=100)
            ).hits
            if h.memory.data is not None
        }
    assert claims == want and len(want) >= 3
    assert all(
        before[k] == after[k]
        for k in before
        if k not in (key, M.MIGRATIONS_KEY, meta_key("lexical"))
        and not k.startswith((b"lex/", K.HEAD, K.VERSION))  # 0014: the forms compact
    )
    assert without_journal(dump(v7)) == without_journal(dump(fresh(tmp_path)))
    with Cortex.open(v7, actor="checker", as_owner=True) as cx:
        assert cx.verify().ok
        last = list(cx.journal())[-1]
        assert last.reason == "0020-memory-rows: format 20 -> 21"


def test_a_migrated_format_7_store_has_no_erasure_record_and_scrubs(tmp_path: Path) -> None:
    """The fixture's purge (at format 7) left no erasure record: ``verify_erasure`` has nothing
    of it to search for, and a scrub still zeroes every page it freed."""
    v7 = _copy(FIXTURE7, tmp_path / "v7")
    M.migrate(v7)
    after = dump(v7)
    assert not any(k.startswith(ERASURE_ONLY) for k in after)
    record = FORMAT_CODEC.decode(_unseal(meta_key("format"), after[meta_key("format")]), "f")
    assert "erasure-records" in record.features
    with Cortex.open(v7, actor="checker", as_owner=True) as cx:
        report_e = cx.verify_erasure()
        assert report_e.ok and report_e.records == 0
        assert cx.scrub().complete


FIXTURE8 = ROOT / "tests" / "data" / "format8.cortex"  # populate + labels, at format 8


def _fixture8_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "make_fixture_v8", ROOT / "tools" / "make_fixture_v8.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("make_fixture_v8", module)
    spec.loader.exec_module(module)
    return module


def test_migrating_the_format_8_fixture_moves_the_levels_into_the_records(
    tmp_path: Path, target: str | None
) -> None:
    """Format 9 keeps each level in its head or episode record; 0008 rewrites exactly the
    labelled heads and episodes, deletes every ``sens/`` entry, and the result equals a store
    written fresh at format 9 through the same calls."""
    from cortex.model.codec import EPISODE, HEAD

    tool8 = _fixture8_tool()
    v8 = _copy(FIXTURE8, tmp_path / "v8", target)
    before = dump(v8)
    key = meta_key("format")
    assert FORMAT_CODEC.decode(_unseal(key, before[key]), "meta/format").format_version == 8
    labels = {k: v for k, v in before.items() if k.startswith(K.SENS)}
    assert len(labels) == 6  # 3 memories, 3 episodes (public, confidential, restricted...)
    with pytest.raises(MigrationRequiredError):
        Cortex.open(v8, actor="x")
    assert [(s.name, s.from_version, s.to_version) for s in M.plan(v8)] == [
        ("0008-sensitivity-in-heads", 8, 9),
        ("0009-posting-segments", 9, 10),
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
    steps, after = _to_20_then_21(v8)  # after: at format 20
    assert [(s.step.name, s.records, s.applied) for s in steps] == [
        ("0008-sensitivity-in-heads", 6, True),
        ("0009-posting-segments", 0, True),
        ("0010-counters-in-heads", 0, True),
        ("0011-current-claims-named-counters", 0, True),
        ("0012-half-vectors", 0, True),
        ("0013-posting-docnos", 13, True),
        ("0014-compact-forms", 35, True),
        ("0015-lean-lexical-documents", 13, True),
        ("0016-keyspace-databases", ANY, True),
        ("0017-medium-references", 19, True),
        ("0018-head-database", ANY, True),
        ("0019-index-duplicates", ANY, True),
        ("0020-memory-rows", ANY, True),
    ]
    assert not any(k.startswith(K.SENS) for k in after)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    # (0014 rewrites every head's forms too: a head counts when its value changed)
    rewritten = {
        k
        for k in changed
        if k.startswith(K.EPISODE)
        or (
            k.startswith(K.HEAD)
            and HEAD_V14.decode_trusted(_unseal(k, before[k]))
            != HEAD.decode(_unseal(k, after[k]), "head")
        )
    }
    # exactly the records the entries labelled, each with its level
    want = set()
    for k, v in labels.items():
        episode, rid = K.parse_sens_key(k)
        want.add(K.episode_key(rid) if episode else K.HEAD + rid.bytes)  # (format 20's keys)
        code = _unseal(k, v)[0]
        codec = EPISODE if episode else HEAD
        rk = K.episode_key(rid) if episode else K.HEAD + rid.bytes
        rec = codec.decode(_unseal(rk, after[rk]),
                           "r")  # fmt: skip
        assert rec.sensitivity is not None and int(rec.sensitivity) == code
    assert rewritten == want
    assert changed - rewritten - set(labels) <= {key, M.MIGRATIONS_KEY, meta_key("lexical")} | {
        k for k in changed if k.startswith((JOURNAL, b"lex/", K.HEAD, K.VERSION))
    }
    assert journal(after)[:-12] == journal(before)
    fresh9 = tmp_path / "fresh9"
    with Cortex.open(fresh9, actor=TOOL.ACTOR, clock=TOOL.FixedClock()) as cx:
        TOOL.populate(cx)
        tool8.populate_labels(cx)
        cx.merge_lexical()
    assert without_journal(dump(v8)) == without_journal(dump(fresh9))
    with Cortex.open(v8, actor="checker", as_owner=True) as cx:
        assert cx.verify().ok
        last = list(cx.journal())[-1]
        assert last.reason == "0020-memory-rows: format 20 -> 21"
        assert cx.sensitivity(TOOL.fid(41)).label == "confidential"
        assert cx.sensitivity(TOOL.fid(43)).label == "restricted"
        assert cx.sensitivity(TOOL.fid(40)).label == "internal"
        assert cx.episode_sensitivity(tool8.eid(0)).label == "confidential"


@pytest.mark.parametrize("damage", ["orphan", "value", "key", "purged"])
def test_a_damaged_level_stops_0008_with_nothing_written(tmp_path: Path, damage: str) -> None:
    """A sens/ entry that does not read, names nothing or labels a purged record: the
    migration refuses (IntegrityError) rather than drop or misplace a level."""
    from cortex import IntegrityError

    v8 = _copy(FIXTURE8, tmp_path / "v8")
    kv = LmdbKV(v8, create=False)
    try:
        with kv.read() as txn:
            first_key, first_value = next(iter(txn.scan(K.SENS)))
        nobody = K.sens_key(MemoryId(bytes(15) + b"\x07"))
        purged = K.sens_key(_fixture8_tool().fid(44))

        def harm(txn: Any) -> None:
            if damage == "orphan":
                txn.put(nobody, first_value)
            elif damage == "value":
                txn.put(first_key, first_value[:-1] + bytes((first_value[-1] ^ 1,)))
            elif damage == "key":
                txn.put(K.SENS + b"m/" + b"\x01" * 3, first_value)
            else:
                txn.put(purged, first_value)

        kv.write(harm)
    finally:
        kv.close()
    before = dump(v8)
    with pytest.raises(IntegrityError):
        M.migrate(v8)
    assert dump(v8) == before


@pytest.mark.parametrize("damage", ["key", "value", "gone"])
def test_verify_reports_a_damaged_meta_migrations(tmp_path: Path, damage: str) -> None:
    """``meta/migrations`` is read by nothing but ``cortex migrate --applied``: a damaged key
    (the record moves to another name), a damaged value or a lost record must still show in
    verify, from the journal's migration entries and the names ``meta/`` may hold."""
    v7 = _copy(FIXTURE7, tmp_path / "v7")
    M.migrate(v7)
    with Cortex.open(v7, actor="checker", as_owner=True) as cx:
        assert cx.verify().ok
    kv = LmdbKV(v7, create=False)
    try:
        with kv.read() as txn:
            value = txn.get(M.MIGRATIONS_KEY)
        assert value is not None

        def harm(txn: Any) -> None:
            if damage != "value":
                txn.delete(M.MIGRATIONS_KEY)
            if damage == "key":  # one flipped bit of the name
                txn.put(b"meta/migratiojs", value)
            elif damage == "value":
                txn.put(M.MIGRATIONS_KEY, value[:-1] + bytes((value[-1] ^ 0x10,)))

        kv.write(harm)
    finally:
        kv.close()
    with Cortex.open(v7, actor="checker", as_owner=True) as cx:
        report = cx.verify()
    assert not report.ok
    found = {(p.record, p.what.split(":")[0].split(",")[0]) for p in report.problems}
    if damage == "value":
        assert any(p.record == "meta/migrations" and "checksum" in p.what for p in report.problems)
    else:
        assert any(
            p.record == "meta/migrations" and "journal records 14 migration" in p.what
            for p in report.problems
        ), found
    if damage == "key":
        assert any("meta/migratiojs" in p.record and "damaged key" in p.what
                   for p in report.problems), found  # fmt: skip


FIXTURE9 = ROOT / "tests" / "data" / "format9.cortex"  # populate + labels + text, at format 9


def test_migrating_the_format_9_fixture_changes_no_record_and_segments_follow(
    tmp_path: Path, target: str | None
) -> None:
    """A format-9 store is a format-10 store without posting segments: 0009 changes no record
    but the format and the migration records; the store verifies, searches alike, and its
    next small write stores a segment (``lex/s/``), which a merge folds again."""
    v9 = _copy(FIXTURE9, tmp_path / "v9", target)
    before = dump(v9)
    key = meta_key("format")
    assert FORMAT_CODEC.decode(_unseal(key, before[key]), "meta/format").format_version == 9
    with pytest.raises(MigrationRequiredError):
        Cortex.open(v9, actor="x")
    assert [(s.name, s.from_version, s.to_version) for s in M.plan(v9)] == [
        ("0009-posting-segments", 9, 10),
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
    report = M.migrate(v9, to=14)
    assert [(s.step.name, s.records, s.applied) for s in report.steps] == [
        ("0009-posting-segments", 0, True),
        ("0010-counters-in-heads", 0, True),
        ("0011-current-claims-named-counters", 0, True),
        ("0012-half-vectors", 0, True),
        ("0013-posting-docnos", 20, True),
    ]
    after = dump(v9)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert {k for k in changed if not k.startswith((JOURNAL, b"lex/"))} <= {
        key,
        M.MIGRATIONS_KEY,
        meta_key("lexical"),
    }
    record = FORMAT_CODEC.decode(_unseal(key, after[key]), "f")
    assert record.format_version == 14 and "lexical-posting-segments" in record.features
    assert not any(k.startswith(K.LEX_SEGMENT) for k in after)
    M.migrate(v9)  # 0014, the forms (its own test below)
    with Cortex.open(v9, actor="checker", as_owner=True) as cx:
        assert cx.verify().ok
        last = list(cx.journal())[-1]
        assert last.reason == "0020-memory-rows: format 20 -> 21"
        hits = [m for m, _ in cx._lexical_search("tea garden", 10)]
        assert hits and TOOL.fid(68) in hits and TOOL.fid(62) not in hits
        cx.write(Fact(statement="a tea garden by the lake", subject="lake", predicate="has"))
        cx.tombstone(TOOL.fid(60), "segment")
        with cx._kv.read() as txn:
            assert len(list(txn.keys(K.LEX_SEGMENT))) == 2
        pending = [m for m, _ in cx._lexical_search("tea garden", 10)]
        assert cx.verify().ok and TOOL.fid(60) not in pending
        assert cx.merge_lexical() == 2
        assert [m for m, _ in cx._lexical_search("tea garden", 10)] == pending
        assert cx.verify().ok


FIXTURE13 = ROOT / "tests" / "data" / "format13.cortex"  # tools/make_fixture_v13.py, format 13


def test_migrating_the_format_13_fixture_numbers_the_lexical_index(
    tmp_path: Path, target: str | None
) -> None:
    """Format 14 keys postings by document number; 0013 rebuilds the lexical index (blocks by
    id and pending segments go), numbering the live memories in id order, and changes nothing
    else: the store verifies (the index against the live memories, both ways) and finds what
    it found."""
    v13 = _copy(FIXTURE13, tmp_path / "v13", target)
    before = dump(v13)
    key = meta_key("format")
    assert FORMAT_CODEC.decode(_unseal(key, before[key]), "meta/format").format_version == 13
    assert any(k.startswith(K.LEX_SEGMENT) for k in before)  # segments pending in the fixture
    assert not any(k.startswith(K.LEX_DOCNO) for k in before)
    with pytest.raises(MigrationRequiredError):
        Cortex.open(v13, actor="x")
    assert [(s.name, s.from_version, s.to_version) for s in M.plan(v13)] == [
        ("0013-posting-docnos", 13, 14),
        ("0014-compact-forms", 14, 15),
        ("0015-lean-lexical-documents", 15, 16),
        ("0016-keyspace-databases", 16, 17),
        ("0017-medium-references", 17, 18),
        ("0018-head-database", 18, 19),
        ("0019-index-duplicates", 19, 20),
        ("0020-memory-rows", 20, 21),
    ]
    report = M.migrate(v13, to=14)
    [step] = report.steps
    live = step.records
    assert step.step.name == "0013-posting-docnos" and step.applied and live > 30
    after = dump(v13)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert all(
        k.startswith((b"lex/", JOURNAL)) or k in (key, M.MIGRATIONS_KEY, meta_key("lexical"))
        for k in changed
    )
    assert journal(after)[:-1] == journal(before)
    assert not any(k.startswith((K.LEX_SEGMENT, K.LEX_POSTING, K.LEX_DOCNO)) for k in after)
    record = FORMAT_CODEC.decode(_unseal(key, after[key]), "f")
    assert record.format_version == 14 and "lexical-docnos" in record.features
    M.migrate(v13)  # 0014, the forms (its own test below), ..., 0020: the index by row
    # format 21: every memory has a row, in id order here (0020 found no document number:
    # 0013 left the index to it), and the live ones are indexed under them
    final = dump(v13)
    rows = {
        k[len(K.ID) :]: int.from_bytes(_unseal(k, v), "big")
        for k, v in final.items()
        if k.startswith(K.ID)
    }
    assert [rows[i] for i in sorted(rows)] == list(range(len(rows)))
    assert sum(1 for k in final if k.startswith(K.LEX_DOC)) == live
    with Cortex.open(v13, actor="checker", as_owner=True) as cx:
        report_v = cx.verify()
        assert report_v.ok, report_v.problems
        assert report_v.lexical_documents == live
        assert cx.stats()["lexical"]["documents"] == live
        ferry = {m for m, _ in cx._lexical_search("ferry", 50)}
        assert {TOOL.fid(111), TOOL.fid(120), TOOL.fid(139)} <= ferry
        assert TOOL.fid(122) not in ferry  # tombstoned in the fixture
        assert TOOL.fid(121) in [m for m, _ in cx._lexical_search("ferry rewritten", 5)]
        assert [m for m, _ in cx._lexical_search("Genève", 5)] == [TOOL.fid(2)]
        last = list(cx.journal())[-8]  # then 0014 to 0020
        assert last.reason == "0013-posting-docnos: format 13 -> 14"
        # the next memory takes the next row; a small write stores a segment again
        new = cx.write(Fact(statement="a ferry to the lighthouse", subject="f", predicate="p"))
        with cx._kv.read() as txn:
            assert txn.get(K.lex_doc_key(len(rows))) is not None
            assert len(list(txn.keys(K.LEX_SEGMENT))) == 1
        assert new.id in {m for m, _ in cx._lexical_search("lighthouse ferry", 3)}
        assert cx.verify().ok


def test_0013_failing_half_way_leaves_format_13(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash inside a step (here 0020's rebuild of the index under the rows: an error on the
    7th memory indexed) rolls the step back: the store is as the steps before left it, byte
    for byte, and the migration runs again."""
    v13 = _copy(FIXTURE13, tmp_path / "v13")
    M.migrate(v13, to=20)
    before = dump(v13)
    original = cortex.index.lexical.Indexer.add
    calls = 0

    def failing_add(self: Any, *args: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == 7:
            raise OSError("disk on fire")
        original(self, *args)

    monkeypatch.setattr(cortex.index.lexical.Indexer, "add", failing_add)
    with pytest.raises(OSError, match="disk on fire"):
        M.migrate(v13)
    assert dump(v13) == before
    monkeypatch.setattr(cortex.index.lexical.Indexer, "add", original)
    assert M.migrate(v13).to_version == 21
    with Cortex.open(v13, actor="checker", as_owner=True) as cx:
        assert cx.verify().ok


FIXTURE14 = ROOT / "tests" / "data" / "format14.cortex"  # tools/make_fixture_v14.py, format 14


def _fixture_tool14() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "make_fixture_v14", ROOT / "tools" / "make_fixture_v14.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOOL14 = _fixture_tool14()


def _records(items: dict[bytes, bytes], prefix: bytes, codec: Any) -> dict[bytes, Any]:
    """Every head or version of a dump, decoded strictly by ``codec``."""
    return {
        k: codec.decode(_unseal(k, v), show_key(k))
        for k, v in items.items()
        if k.startswith(prefix)
    }


def test_migrating_the_format_14_fixture_compacts_the_forms(
    tmp_path: Path, target: str | None
) -> None:
    """Format 15 stores a short form that begins the medium form as its length; 0014 rewrites
    every head and version so, and nothing else: each record decodes (strictly, in its own
    format's encoding) to the same value before and after, every memory reads as before, and
    the store verifies."""
    v14 = _copy(FIXTURE14, tmp_path / "v14", target)
    before = dump(v14)
    key = meta_key("format")
    assert FORMAT_CODEC.decode(_unseal(key, before[key]), "meta/format").format_version == 14
    with pytest.raises(MigrationRequiredError):
        Cortex.open(v14, actor="x")
    assert [(s.name, s.from_version, s.to_version) for s in M.plan(v14)] == [
        ("0014-compact-forms", 14, 15),
        ("0015-lean-lexical-documents", 15, 16),
        ("0016-keyspace-databases", 16, 17),
        ("0017-medium-references", 17, 18),
        ("0018-head-database", 18, 19),
        ("0019-index-duplicates", 19, 20),
        ("0020-memory-rows", 20, 21),
    ]
    heads = _records(before, K.HEAD, HEAD_V14)
    versions = _records(before, K.VERSION, VERSION_V14)
    report = M.migrate(v14, to=15)
    [step] = report.steps
    assert step.step.name == "0014-compact-forms" and step.applied
    assert step.records == len(heads) + len(versions) > 100
    after = dump(v14)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert all(
        k.startswith((K.HEAD, K.VERSION, JOURNAL)) or k in (key, M.MIGRATIONS_KEY) for k in changed
    )
    assert journal(after)[:-1] == journal(before)
    assert _records(after, K.HEAD, HEAD) == heads
    assert _records(after, K.VERSION, VERSION_V17) == versions
    # every record with forms whose short form begins the medium form got smaller
    wide = 0
    for k in set(heads) | set(versions):
        forms = (heads.get(k) or versions[k]).forms
        if forms is None:
            assert after[k] == before[k]  # a purged version holds none
            continue
        s, m = forms.short.encode(), forms.medium.encode()
        if m.startswith(s) or (s.endswith("…".encode()) and m.startswith(s[:-3])):
            assert len(after[k]) < len(before[k]), show_key(k)
        else:
            wide += 1
            assert after[k] == before[k]
    assert wide >= 2  # the head and version of memory 152
    record = FORMAT_CODEC.decode(_unseal(key, after[key]), "f")
    assert record.format_version == 15 and "compact-forms" in record.features
    assert M.migrate(v14).to_version == 21  # then 0015 to 0018
    with Cortex.open(v14, actor="checker", as_owner=True) as cx:
        report_v = cx.verify()
        assert report_v.ok, report_v.problems
        for i, forms in enumerate(TOOL14.OVERRIDES):
            m = cx.resolve_latest(TOOL.fid(150 + i))
            assert m.head.forms == forms == m.version.forms
        long = cx.resolve_latest(TOOL.fid(140)).head.forms
        assert long is not None and long.short.endswith("…")
        ferry = {m for m, _ in cx._lexical_search("ferry", 50)}
        assert TOOL.fid(140) in ferry
        last = list(cx.journal())[-6]
        assert last.reason == "0015-lean-lexical-documents: format 15 -> 16"
        new = cx.write(Fact(statement="a ferry to the lighthouse", subject="f", predicate="p"))
        assert cx.resolve_latest(new.id).head.forms is not None
        assert cx.verify().ok


def test_0014_failing_half_way_leaves_format_14(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash inside the rewrite (here: an error on the 40th record) rolls the step back:
    the store is the format-14 fixture, byte for byte, and the migration runs again."""
    v14 = _copy(FIXTURE14, tmp_path / "v14")
    before = dump(v14)
    original = M.seal
    calls = 0

    def failing_seal(payload: bytes) -> bytes:
        nonlocal calls
        calls += 1
        if calls == 40:
            raise OSError("disk on fire")
        return original(payload)

    monkeypatch.setattr(M, "seal", failing_seal)
    with pytest.raises(OSError, match="disk on fire"):
        M.migrate(v14)
    assert dump(v14) == before
    monkeypatch.setattr(M, "seal", original)
    assert M.migrate(v14).to_version == 21
    with Cortex.open(v14, actor="checker", as_owner=True) as cx:
        assert cx.verify().ok


def test_0014_refuses_a_damaged_record_and_writes_nothing(tmp_path: Path) -> None:
    """A head whose forms do not decode (a short-form length past the medium's end, written
    with a valid checksum) stops the migration with IntegrityError, the store untouched."""
    v14 = _copy(FIXTURE14, tmp_path / "v14")
    kv = open_kv(v14, create=False)
    k = K.HEAD + TOOL.fid(140).bytes  # (format 14's key)

    def damage(txn: Any) -> None:
        head = HEAD_V14.decode(_unseal(k, txn.get(k)), "head")
        raw = HEAD_V14.encode(head, "head")
        at = raw.index(b"\x0d\xa2\x01") + 3  # the short form's text -> {1: 7, 2: medium}
        end = at + 1 + (raw[at] & 31 if raw[at] & 31 < 24 else 1 + raw[at + 1])
        txn.put(k, _seal(raw[:at] + b"\x07" + raw[end:]))

    try:
        kv.write(damage)
    finally:
        kv.close()
    before = dump(v14)
    with pytest.raises(IntegrityError, match="does not decode"):
        M.migrate(v14)
    assert dump(v14) == before
