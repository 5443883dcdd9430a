"""Format 16: ``lex/d/`` records without their terms (``specs/lexical.md`` §4).

A removal from the lexical index (an update, a tombstone, a purge) renders the version the
record names again instead of reading a stored term list. The format-15 fixture
(``tools/make_fixture_v15.py``) holds records with their terms; ``0015-lean-lexical-documents``
rewrites them, and a migrated store must then behave as one written at format 16.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cortex import Cortex, Fact, IntegrityError
from cortex.engine.store import FORMAT_VERSION, _unseal
from cortex.engine.values import FORMAT_CODEC
from cortex.index import lexical
from cortex.index.lexical import DOC_CODEC, DOC_CODEC_V15, LexDoc
from cortex.storage import keys as K
from cortex.storage.keys import JOURNAL, meta_key, show_key
from cortex.storage.kv import LmdbKV, seal
from cortex.transfer import migrate as M
from tests import rows as R

from .test_migrate import TOOL, _copy, dump

ROOT = Path(__file__).resolve().parent.parent
FIXTURE15 = ROOT / "tests" / "data" / "format15.cortex"  # tools/make_fixture_v15.py


def _docs(items: dict[bytes, bytes], codec: Any) -> dict[bytes, Any]:
    return {
        k: codec.decode(_unseal(k, v), show_key(k))
        for k, v in items.items()
        if k.startswith(K.LEX_DOC)
    }


def _rebuilt(cx: Cortex) -> dict[str, Any]:
    """``lexical.logical`` of the store, and of the index rebuilt from its memories."""
    with cx._kv.read() as txn:
        now = lexical.logical(txn)
    cx.reindex_lexical()
    with cx._kv.read() as txn:
        again = lexical.logical(txn)
    assert now == again, "the index differs from the one its memories imply"
    return now


@pytest.fixture
def target(store_path: Any) -> str | None:
    return store_path if isinstance(store_path, str) else None


def test_migrating_the_format_15_fixture_drops_the_terms(
    tmp_path: Path, target: str | None
) -> None:
    """0015 rewrites every ``lex/d/`` record with the same version, length and number and no
    terms (each gets smaller), and nothing else; the store verifies and searches as before."""
    v15 = _copy(FIXTURE15, tmp_path / "v15", target)
    before = dump(v15)
    key = meta_key("format")
    assert FORMAT_CODEC.decode(_unseal(key, before[key]), "f").format_version == 15
    assert [(s.name, s.from_version, s.to_version) for s in M.plan(v15)] == [
        ("0015-lean-lexical-documents", 15, 16),
        ("0016-keyspace-databases", 16, 17),
        ("0017-medium-references", 17, 18),
        ("0018-head-database", 18, 19),
        ("0019-index-duplicates", 19, 20),
        ("0020-memory-rows", 20, 21),
    ]
    old = _docs(before, DOC_CODEC_V15)
    assert len(old) > 50 and sum(bool(d.terms) for d in old.values()) == len(old)
    report = M.migrate(v15, to=16)
    [step] = report.steps
    assert step.applied and step.records == len(old)
    after = dump(v15)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert {k for k in changed if not k.startswith(JOURNAL)} - {key, M.MIGRATIONS_KEY} == set(old)
    new = _docs(after, DOC_CODEC)
    assert set(new) == set(old)
    for k, doc in new.items():
        assert (doc.version, doc.length, doc.docno) == (
            old[k].version,
            old[k].length,
            old[k].docno,
        )
        assert len(after[k]) < len(before[k])
        with pytest.raises(Exception):  # noqa: B017 - a schema-1 reader refuses it
            DOC_CODEC_V15.decode(_unseal(k, after[k]), show_key(k))
    record = FORMAT_CODEC.decode(_unseal(key, after[key]), "f")
    assert record.format_version == 16 and FORMAT_VERSION == 21
    assert "lexical-lean-documents" in record.features
    M.migrate(v15)  # 0016 and 0018 move records, 0017 the versions' medium forms
    with Cortex.open(v15, actor="checker", as_owner=True) as cx:
        assert cx.verify().ok
        last = list(cx.journal())[-6]
        assert last.reason == "0015-lean-lexical-documents: format 15 -> 16"
        assert TOOL.fid(160) in {m for m, _ in cx._lexical_search("Ærøskøbing winter", 5)}
        assert TOOL.fid(161) in {m for m, _ in cx._lexical_search("東京 morning", 5)}
        assert TOOL.fid(162) not in {m for m, _ in cx._lexical_search("tide tables", 5)}
        _rebuilt(cx)


def test_updates_tombstones_and_purges_after_the_migration_keep_the_index_exact(
    tmp_path: Path, target: str | None
) -> None:
    """Each removal finds the old version's terms by rendering it: update, tombstone and
    purge memories the migration rewrote (and ones updated before it), then the index equals
    the one its memories imply, and verify is clean."""
    v15 = _copy(FIXTURE15, tmp_path / "v15", target)
    M.migrate(v15)
    with Cortex.open(v15, actor="checker", as_owner=True) as cx:
        cx.update(
            TOOL.fid(160),
            Fact(statement="Ærøskøbing ferries in spring", subject="ærø", predicate="s"),
        )
        cx.tombstone(TOOL.fid(161), reason="test")
        cx.purge(TOOL.fid(164), reason="test")
        cx.update(TOOL.fid(140), Fact(statement="the day ferry", subject="ferry", predicate="t"))
        assert cx.verify().ok
        assert TOOL.fid(160) in {m for m, _ in cx._lexical_search("spring", 5)}
        assert TOOL.fid(160) not in {m for m, _ in cx._lexical_search("winter", 5)}
        assert TOOL.fid(161) not in {m for m, _ in cx._lexical_search("morning train", 5)}
        assert TOOL.fid(140) not in {m for m, _ in cx._lexical_search("harbour master", 5)}
        logical = _rebuilt(cx)
        assert TOOL.fid(164).bytes not in logical["docs"]


def test_a_fresh_store_writes_lean_records(tmp_path: Path) -> None:
    """A written record is ``{0: 2, 1: version, 2: length, 3: docno}``, both by the C path
    (one memory, a batch) and after an update; its terms are those of its version."""
    with Cortex.open(tmp_path / "s", actor="t") as cx:
        a = cx.write(Fact(statement="the ferry leaves at noon", subject="ferry", predicate="p"))
        b, c = cx.write_many(
            [
                Fact(statement="東京 ferry", subject="x", predicate="p"),
                Fact(statement="déjà vu ferry", subject="y", predicate="p"),
            ]
        )
        cx.update(a.id, Fact(statement="the ferry leaves at one", subject="ferry", predicate="p"))
        with cx._kv.read() as txn:
            for mid, version in ((a.id, 2), (b.id, 1), (c.id, 1)):
                k = R.lex_doc_key(txn, mid)
                payload = _unseal(k, txn.get(k))
                doc: LexDoc = DOC_CODEC.decode(payload, show_key(k))
                assert payload[:3] == b"\xa4\x00\x02" and doc.version == version
                terms = lexical.indexed_terms(txn, R.row(txn, mid), version)
                assert terms == sorted(set(terms)) and "ferri" in terms
                assert doc.length >= len(terms)
        assert cx.verify().ok


def test_a_missing_indexed_version_stops_the_removal_and_names_reindex(tmp_path: Path) -> None:
    """Without the version its record names, a removal cannot know the postings to take out:
    the tombstone fails with IntegrityError naming ``cortex reindex`` and writes nothing."""
    path = tmp_path / "s"
    with Cortex.open(path, actor="t") as cx:
        w = cx.write(Fact(statement="the ferry leaves at noon", subject="ferry", predicate="p"))
        mid = w.id
    kv = LmdbKV(path)
    try:
        kv.write(lambda txn: txn.delete(R.version_key(txn, mid, 1)))
        with kv.read() as txn:
            before = list(txn.scan(b""))
    finally:
        kv.close()
    with Cortex.open(path, actor="t") as cx:
        with pytest.raises(IntegrityError, match="cortex reindex"):
            cx.tombstone(mid, reason="x")
        with cx._kv.read() as txn:
            assert list(txn.scan(b"")) == before


def test_verify_refuses_a_record_with_terms(tmp_path: Path) -> None:
    """A schema-1 record (with its terms) in a format-16 store is damage that verify names."""
    path = tmp_path / "s"
    with Cortex.open(path, actor="t") as cx:
        mid = cx.write(Fact(statement="ferry", subject="f", predicate="p")).id
    kv = LmdbKV(path)
    try:

        def put_old(txn: Any) -> None:
            k = R.lex_doc_key(txn, mid)
            doc: LexDoc = DOC_CODEC.decode(_unseal(k, txn.get(k)), show_key(k))
            old = lexical.LexDoc15(
                version=doc.version, length=doc.length, terms=("ferri", "f"), docno=doc.docno
            )
            txn.put(k, seal(DOC_CODEC_V15.encode(old, "lex/d")))

        kv.write(put_old)
    finally:
        kv.close()
    with Cortex.open(path, actor="t") as cx:
        report = cx.verify()
        with cx._kv.read() as txn:
            shown = show_key(R.lex_doc_key(txn, mid))
    assert not report.ok
    assert any(p.record == shown for p in report.problems), report.problems


def test_0015_failing_half_way_leaves_format_15(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error on the 20th rewritten record rolls the step back: the store is the fixture,
    byte for byte, and the migration runs again."""
    v15 = _copy(FIXTURE15, tmp_path / "v15")
    before = dump(v15)
    original = M.seal
    calls = 0

    def failing_seal(payload: bytes) -> bytes:
        nonlocal calls
        calls += 1
        if calls == 20:
            raise OSError("disk on fire")
        return original(payload)

    monkeypatch.setattr(M, "seal", failing_seal)
    with pytest.raises(OSError, match="disk on fire"):
        M.migrate(v15)
    assert dump(v15) == before
    monkeypatch.setattr(M, "seal", original)
    assert M.migrate(v15).to_version == 21


def test_0015_in_small_batches_gives_the_same_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rewrite reads the records a batch at a time (bounded memory on a large store):
    batches of 1, 2 and 7 records leave exactly what one batch leaves."""
    stores = []
    for size in (4096, 1, 2, 7):
        monkeypatch.setattr(M, "_LEAN_BATCH", size)
        v15 = _copy(FIXTURE15, tmp_path / f"v15-{size}")
        M.migrate(v15)
        stores.append({k: v for k, v in dump(v15).items() if k.startswith(K.LEX_DOC)})
    assert stores[0] and all(s == stores[0] for s in stores[1:])


def test_0015_refuses_a_damaged_record_and_writes_nothing(tmp_path: Path) -> None:
    """A ``lex/d/`` record whose checksum fails stops the migration with IntegrityError, the
    store untouched."""
    v15 = _copy(FIXTURE15, tmp_path / "v15")
    kv = LmdbKV(v15)
    try:

        def harm(txn: Any) -> None:
            k = next(iter(txn.keys(K.LEX_DOC)))
            v = txn.get(k)
            txn.put(k, v[:-1] + bytes((v[-1] ^ 1,)))

        kv.write(harm)
    finally:
        kv.close()
    before = dump(v15)
    with pytest.raises(IntegrityError):
        M.migrate(v15)
    assert dump(v15) == before


def test_indexed_terms_of_a_missing_memory() -> None:
    """``indexed_terms`` names the version it could not find."""

    class Empty:
        def get(self, key: bytes) -> None:
            return None

    with pytest.raises(IntegrityError, match=r"version 3 of .* is missing"):
        lexical.indexed_terms(Empty(), 1, 3)  # type: ignore[arg-type]


def test_the_fixture_is_committed_data() -> None:
    """The fixture is ``data.mdb`` alone, and its tool refuses to rebuild it at format 16."""
    assert (FIXTURE15 / "data.mdb").is_file() and not (FIXTURE15 / "lock.mdb").exists()
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "make_fixture_v15.py"), "--out", "/nonexistent"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and "format-15 fixture" in done.stderr
