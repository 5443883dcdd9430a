"""Format 13 (issue 18, disk): ``vec/`` records in float16 by default, float32 on request.

A record says its element type (``VectorRecord.float16``, key 5); a store records the type of its
new vectors in ``meta/vectors`` (``float32``, key 4) when it first records its model
(``Cortex.open(..., vector_precision=...)``). Format-12 records (float32) stay as they are: the
migration ``0012-half-vectors`` rewrites none, and a store holding both types verifies and
searches them alike. See ``specs/vector-index.md`` §3.
"""

from __future__ import annotations

import json
import math
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cortex import Cortex, MigrationRequiredError, Query, ValidationError
from cortex.engine.heads import id_at
from cortex.engine.store import FORMAT_VERSION
from cortex.engine.values import decode_trusted
from cortex.errors import CodecError
from cortex.index.vectors import (
    VECTOR_RECORD,
    VECTORS_META,
    VectorRecord,
    check_vector,
    stored_vector,
    to_bytes,
    vector_record,
)
from cortex.storage.engines import copy_kv
from cortex.storage.keys import VEC, meta_key
from cortex.storage.kv import LmdbKV, seal, unseal
from cortex.transfer import migrate as M
from tests import rows as R

from .qsupport import digest_of_store, dump_store, fixture_store
from .vsupport import DIM, HALF, E, fact, half, open_store, vec_record, vectors_meta

ROOT = Path(__file__).resolve().parent.parent
FIXTURE12 = ROOT / "tests" / "data" / "format12.cortex"
FIXTURE_MODEL = "hashing-v1-64"
"""``tools/make_fixture_v12.py``'s embedder (``HashingEmbedder(64)``, the same as ``E``)."""


def _unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(DIM)
    return v / np.linalg.norm(v)


def _records(cx: Cortex) -> dict[bytes, VectorRecord]:
    """Every ``vec/`` record by its memory's id16 (format 21: the key names the row)."""
    with cx._kv.read() as txn:
        out = {}
        for k, v in txn.scan(VEC):
            m = id_at(txn, k[len(VEC) :])
            assert m is not None
            out[m.bytes] = VECTOR_RECORD.decode(unseal(k, v), "vector")
        return out


# ---------------------------------------------------------------------------------------------
# Golden vectors


def test_golden_vectors() -> None:
    """specs/vectors/stored_vectors.json both ways: input -> record -> bytes -> record, the
    widened values, meta/vectors with and without float32, and records a reader refuses."""
    doc = json.loads((ROOT / "specs" / "vectors" / "stored_vectors.json").read_text())
    given = doc["input"]
    unit = to_bytes(check_vector(given, len(given), "m", "vector"))
    assert [v["float16"] for v in doc["vectors"]] == [True, False]
    for v in doc["vectors"]:
        raw = bytes.fromhex(v["cbor_hex"])
        rec = VECTOR_RECORD.decode(raw, v["name"])
        want = vector_record(v["model_id"], v["dim"], v["version"], unit, float16=v["float16"])
        assert rec == want and VECTOR_RECORD.encode(want, "v") == raw
        assert rec.vector.hex() == v["vector_hex"]
        assert len(rec.vector) == (2 if rec.float16 else 4) * rec.dim
        assert stored_vector(rec).tolist() == v["widened"]
        key = bytes.fromhex(v["key"])
        assert key.startswith(VEC) and len(key) == len(VEC) + 4  # format 21: by row
        assert (raw + zlib.crc32(raw).to_bytes(4, "big")).hex() == v["value"] == seal(raw).hex()
        assert decode_trusted(VECTOR_RECORD, key, bytes.fromhex(v["value"])) == rec  # C path
    f16, f32 = doc["vectors"]
    # the float16 values are the float32 ones rounded (to nearest even), by numpy's rounding
    widened32 = np.frombuffer(bytes.fromhex(f32["vector_hex"]), "<f4")
    assert f16["widened"] == half(widened32).tolist()
    # the flag's bytes by hand: one more map entry, key 5 and CBOR true, after the vector
    body = bytes.fromhex(f16["cbor_hex"])
    assert body[0] == 0xA6 and body.endswith(b"\x05\xf5")
    assert [m["float32"] for m in doc["meta"]] == [False, True]
    for m in doc["meta"]:
        raw = bytes.fromhex(m["cbor_hex"])
        meta = VECTORS_META.decode(raw, m["name"])
        assert (meta.model_id, meta.dim, meta.synced, meta.float32) == (
            m["model_id"],
            m["dim"],
            m["synced"],
            m["float32"],
        )
        assert VECTORS_META.encode(meta, "m") == raw and seal(raw).hex() == m["value"]
        assert bytes.fromhex(m["key"]) == meta_key("vectors")
    for v in doc["negative"]:
        with pytest.raises(CodecError):
            VECTOR_RECORD.decode(bytes.fromhex(v["cbor_hex"]), v["name"])


# ---------------------------------------------------------------------------------------------
# The default: float16


def test_a_new_store_keeps_float16_vectors(store_path: Any) -> None:
    """Embedded and given vectors are stored rounded to float16 (half the bytes); reads and the
    index get them widened to float32, and search finds them."""
    with open_store(store_path, embedder=E) as cx:
        embedded = cx.write(fact("green tea in the morning"))
        mine = _unit(7)
        given = cx.write(
            fact("a vector from elsewhere", subject="ada"), vector=(5.0 * mine).tolist()
        )
        meta = vectors_meta(cx)
        assert meta is not None and meta.float32 is False
        assert cx.vector_info()["precision"] == "float16"  # type: ignore[index]
        for u, want in (
            (embedded, E.embed([cx.resolve(embedded).version.forms.medium])[0]),  # type: ignore[union-attr]
            (given, mine),
        ):
            rec = vec_record(cx, u.id)
            assert rec is not None and rec.float16 and len(rec.vector) == 2 * DIM
            got = stored_vector(rec)
            assert got.dtype == np.float32
            assert np.abs(got - want).max() <= HALF
            # exactly the float16 rounding of the unit float32 vector the write computed
            unit32 = check_vector(want, DIM, E.model_id, "v")
            assert np.array_equal(got, half(unit32)) or np.abs(got - half(unit32)).max() <= 2**-10
        hits = cx.find(Query(near_vector=mine, limit=1)).hits
        assert hits[0].memory.id == given.id and hits[0].scores["vector"] == pytest.approx(
            1.0, abs=1e-5
        )
        assert cx.find(Query(near="green tea in the morning", limit=1)).hits[0].memory.id == (
            embedded.id
        )
        assert cx.verify().ok
    with open_store(store_path, embedder=E) as cx:  # a search after reopening: the same
        assert cx.find(Query(near_vector=mine, limit=1)).hits[0].memory.id == given.id


def test_an_update_stores_the_new_vector_in_float16(store_path: Any) -> None:
    with open_store(store_path, embedder=E) as cx:
        u = cx.write(fact("green tea"))
        u2 = cx.update(u, fact("mountain hiking"), vector=_unit(3).tolist())
        rec = vec_record(cx, u.id)
        assert rec is not None and rec.version == u2.version == 2 and rec.float16
        assert np.abs(stored_vector(rec) - _unit(3)).max() <= HALF


# ---------------------------------------------------------------------------------------------
# A store that keeps float32


def test_a_float32_store(store_path: Any) -> None:
    """``vector_precision="float32"`` at creation: meta/vectors records it, every vector is
    stored as computed, and a later handle keeps it without being told."""
    with open_store(store_path, embedder=E, vector_precision="float32") as cx:
        u = cx.write(fact("green tea in the morning"))
        meta = vectors_meta(cx)
        assert meta is not None and meta.float32 is True
        assert cx.vector_info()["precision"] == "float32"  # type: ignore[index]
        rec = vec_record(cx, u.id)
        assert rec is not None and not rec.float16 and len(rec.vector) == 4 * DIM
        want = E.embed([cx.resolve(u).version.forms.medium])[0]  # type: ignore[union-attr]
        assert np.allclose(stored_vector(rec), want, atol=1e-6)
    with open_store(store_path, embedder=E) as cx:  # no option: the store's precision
        v = cx.write(fact("black coffee at night"), vector=_unit(1).tolist())
        rec = vec_record(cx, v.id)
        assert rec is not None and not rec.float16
        assert np.allclose(stored_vector(rec), _unit(1), atol=1e-6)
        assert vectors_meta(cx).float32 is True  # type: ignore[union-attr]
        assert cx.verify().ok


def test_the_precision_is_the_stores_until_a_reembed(store_path: Any) -> None:
    """Another precision than the recorded one is refused (nothing written); ``reembed=True``
    rewrites every vector in the new one."""
    with open_store(store_path, embedder=E, vector_precision="float32") as cx:
        for i in range(5):
            cx.write(fact(f"topic {i} about tea"))
    before = dump_store(store_path)
    with pytest.raises(ValidationError) as exc:
        open_store(store_path, embedder=E, vector_precision="float16")
    assert exc.value.field == "vector_precision" and "reembed=True" in str(exc.value)
    assert "keeps its vectors in float32" in str(exc.value)
    assert dump_store(store_path) == before
    with open_store(store_path, embedder=E, vector_precision="float16", reembed=True) as cx:
        assert cx.reembedded == 5
        recs = _records(cx)
        assert len(recs) == 5 and all(r.float16 for r in recs.values())
        assert vectors_meta(cx).float32 is False  # type: ignore[union-attr]
        assert cx.verify().ok
        assert len(cx.find(Query(near="tea", limit=5)).hits) == 5


@pytest.mark.parametrize(
    ("kw", "field", "rule"),
    [
        ({"vector_precision": "float64"}, "vector_precision", "enum"),
        ({"vector_precision": 16}, "vector_precision", "enum"),
        ({"vector_precision": "float32", "embedder": None}, "vector_precision", "required"),
    ],
)
def test_the_option_is_checked(tmp_path: Path, kw: dict[str, Any], field: str, rule: str) -> None:
    kw.setdefault("embedder", E)
    with pytest.raises(ValidationError) as exc:
        open_store(tmp_path / "s", **kw)
    assert (exc.value.field, exc.value.rule) == (field, rule)


# ---------------------------------------------------------------------------------------------
# What a caller's vector may hold


def test_no_caller_vector_overflows_float16_and_a_non_finite_one_is_refused(
    store_path: Any,
) -> None:
    """Values far beyond float16's range (65504) are scaled to unit length first, so they fit;
    a vector that is not finite is refused with nothing written."""
    with open_store(store_path, embedder=E) as cx:
        big = _unit(5) * 1e300
        u = cx.write(fact("huge values"), vector=big.tolist())
        rec = vec_record(cx, u.id)
        assert rec is not None and rec.float16
        got = stored_vector(rec)
        assert np.isfinite(got).all() and np.abs(got - _unit(5)).max() <= HALF
        tiny = np.zeros(DIM)
        tiny[3], tiny[9] = 1.0, 1e-9  # below float16's smallest value: rounds to zero
        t = cx.write(fact("tiny values"), vector=tiny.tolist())
        got = stored_vector(vec_record(cx, t.id))  # type: ignore[arg-type]
        assert got[3] == 1.0 and got[9] == 0.0 and np.linalg.norm(got) == 1.0
        before = digest_of_store(cx)
        for bad in (math.inf, -math.inf, math.nan):
            v = _unit(6).tolist()
            v[2] = bad
            with pytest.raises(ValidationError) as exc:
                cx.write(fact("not finite"), vector=v)
            assert exc.value.field == "vector" and "finite" in str(exc.value)
        assert digest_of_store(cx) == before


# ---------------------------------------------------------------------------------------------
# Verify


def _put(cx: Cortex, key: bytes, value: bytes) -> None:
    cx._kv.write(lambda txn: txn.put(key, value))


def test_verify_catches_a_damaged_float16_record(store_path: Any) -> None:
    with open_store(store_path, embedder=E) as cx:
        u = cx.write(fact("green tea"))
        with cx._kv.read() as txn:
            key = R.vec_key(txn, u.id)
        with cx._kv.read() as txn:
            good = txn.get(key)
        assert good is not None
        rec = VECTOR_RECORD.decode(unseal(key, good), "vector")
        assert rec.float16 and cx.verify().ok
        # a flipped bit in the vector's bytes: the checksum
        damaged = bytearray(good)
        damaged[-10] ^= 0x04
        _put(cx, key, bytes(damaged))
        problems = [p for p in cx.verify().problems if p.record.startswith(("vec/", "7665632f"))]
        assert problems and "checksum" in problems[0].what
        # a well-sealed record whose bytes are not 2 per value (float32 bytes marked float16)
        wide = VectorRecord(
            model_id=rec.model_id,
            dim=rec.dim,
            version=rec.version,
            vector=stored_vector(rec).astype("<f4").tobytes(),
            float16=True,
        )
        _put(cx, key, seal(VECTOR_RECORD.encode(wide, "vector")))
        report = cx.verify()
        assert [p.what for p in report.problems] == [
            f"holds {4 * DIM} bytes for {DIM} float16 values ({2 * DIM} bytes)"
        ]
        # a value that is not finite (the float16 infinity, 0x7c00)
        inf = bytearray(rec.vector)
        inf[0:2] = b"\x00\x7c"
        bad = VectorRecord(
            model_id=rec.model_id, dim=rec.dim, version=rec.version, vector=bytes(inf), float16=True
        )
        _put(cx, key, seal(VECTOR_RECORD.encode(bad, "vector")))
        report = cx.verify()
        assert [p.what for p in report.problems] == ["holds a value that is not finite (float16)"]
        _put(cx, key, good)
        assert cx.verify().ok


# ---------------------------------------------------------------------------------------------
# The migration from format 12, and a store of both element types


def _fixture(tmp_path: Path, store_path: Any) -> Any:
    return fixture_store(FIXTURE12, tmp_path, store_path)


def test_migrating_the_format_12_fixture_rewrites_no_vector_and_mixes(
    tmp_path: Path, store_path: Any
) -> None:
    """0012 changes the format and the migration records only; the float32 records stay; new
    vectors are float16; the store verifies, search finds memories of both types, and a copy
    to the other engine holds the same bytes."""
    where = _fixture(tmp_path, store_path)
    before = dump_store(where)
    old = {k[len(VEC) :]: v for k, v in before.items() if k.startswith(VEC)}  # by id16
    assert len(old) > 30
    assert not any(VECTOR_RECORD.decode(unseal(VEC + k, v), "v").float16 for k, v in old.items())
    with pytest.raises(MigrationRequiredError):
        Cortex.open(where, actor="x")
    assert [(s.name, s.from_version, s.to_version) for s in M.plan(where)] == [
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
    report = M.migrate(where, to=14)
    assert [(s.step.name, s.records, s.applied) for s in report.steps] == [
        ("0012-half-vectors", 0, True),
        ("0013-posting-docnos", sum(1 for k in before if k.startswith(b"lex/d/")), True),
    ]
    after = dump_store(where)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert {k for k in changed if not k.startswith((b"j/", b"lex/"))} == {
        meta_key("format"),
        meta_key("lexical"),
        M.MIGRATIONS_KEY,
    }
    M.migrate(where)  # 0014 to 0018 (test_migrate, test_lean_docs, test_medium_refs, ...)
    with Cortex.open(where, actor="fixture-agent", as_owner=True, embedder=E) as cx:
        assert E.model_id == FIXTURE_MODEL
        assert cx.format.format_version == FORMAT_VERSION
        assert "vectors-float16" in cx.format.features
        assert cx.vector_info()["precision"] == "float16"  # type: ignore[index]
        report_v = cx.verify()
        assert report_v.ok, report_v.problems
        new = cx.write(fact("the harbour master rows to the lighthouse", subject="harbour"))
        given = cx.write(fact("a second caller's vector", subject="sea"), vector=_unit(11).tolist())
        recs = _records(cx)
        assert {k for k, r in recs.items() if r.float16} == {new.id.bytes, given.id.bytes}
        assert {k for k, r in recs.items() if not r.float16} == set(old)
        assert all(r.float16 is False for k, r in recs.items() if k in old)
        report_v = cx.verify()
        assert report_v.ok, report_v.problems
        # search finds both: an old float32 memory by its own vector, a new float16 one by its
        old_key = next(iter(old))
        old_vec = stored_vector(recs[old_key])
        hit = cx.find(Query(near_vector=old_vec, limit=1)).hits[0]
        assert hit.memory.id.bytes == old_key
        assert hit.scores["vector"] == pytest.approx(1.0, abs=1e-5)
        hit = cx.find(Query(near_vector=_unit(11), limit=1)).hits[0]
        assert hit.memory.id == given.id
        ids = [h.memory.id for h in cx.find(Query(near="harbour lighthouse", limit=5)).hits]
        assert new.id in ids
        mixed = dump_store(where)
    # cortex copy to the other engine (and LMDB to LMDB) keeps every vector's bytes
    dst: Any = tmp_path / "copy"
    src_kv = LmdbKV(where, readonly=True, create=False) if not isinstance(where, str) else None
    try:
        if src_kv is not None:
            copy_kv(src_kv, dst)
            assert dump_store(dst) == mixed
        else:
            from cortex.storage.engines import open_kv

            kv = open_kv(where, create=False)
            try:
                copy_kv(kv, dst)
            finally:
                kv.close()
            assert {k: v for k, v in dump_store(dst).items() if k.startswith(VEC)} == {
                k: v for k, v in mixed.items() if k.startswith(VEC)
            }
    finally:
        if src_kv is not None:
            src_kv.close()


# ---------------------------------------------------------------------------------------------
# Erasure


def test_a_purged_float16_vector_leaves_no_byte(tmp_path: Path) -> None:
    """The erasure record's needles are the float16 bytes as stored and the float32 copy the
    index cache holds: a purge and scrub leave neither in any file."""
    from cortex.engine.erasure import sidecar_copy

    from .test_crash import occurrences

    root = tmp_path / "s"
    with Cortex.open(root, actor="a", as_owner=True, embedder=E) as cx:
        uris = [cx.write(fact(f"topic {i} zqxhalf{i:04d}")) for i in range(20)]
        gone = uris[3]
        rec = vec_record(cx, gone.id)
        assert rec is not None and rec.float16
        needles = [rec.vector, sidecar_copy(stored_vector(rec).astype("<f4").tobytes())]
        cx.find(Query(near="topic", limit=3))
        cx.save_vectors()
        found = occurrences(root, needles)
        assert any(f.startswith("vectors/") for f in found) and "data.mdb" in found
        cx.purge(gone, "erasure request")
        cx.scrub()
        cx.save_vectors()
        assert occurrences(root, needles) == {}
        assert cx.verify_erasure().ok
        hits = cx.find(Query(near="topic 3", limit=20)).hits
        assert gone.id not in {h.memory.id for h in hits}


# ---------------------------------------------------------------------------------------------
# Salvage


@pytest.mark.parametrize("precision", ["float16", "float32"])
def test_salvage_keeps_each_records_type_and_the_stores_precision(
    tmp_path: Path, precision: str
) -> None:
    from cortex.transfer.salvage import salvage

    src = tmp_path / "s"
    with open_store(src, embedder=E, vector_precision=precision) as cx:
        for i in range(6):
            cx.write(fact(f"topic {i} about tea"))
        want = _records(cx)
    report = salvage(src, tmp_path / "new")
    assert report.vectors == 6
    with open_store(tmp_path / "new", embedder=E) as cx:
        assert _records(cx) == want
        assert vectors_meta(cx).float32 is (precision == "float32")  # type: ignore[union-attr]
        assert all(r.float16 is (precision == "float16") for r in want.values())
        assert cx.verify().ok


@pytest.mark.parametrize("precision", ["float16", "float32"])
def test_a_sealed_vector_is_the_codecs_record(tmp_path: Path, precision: str) -> None:
    """``_seal_vector`` puts the vector into the record bytes kept from the last call: the same
    bytes as the codec's whole record, whatever the vector, version, dim or model."""
    from cortex.index.embed import HashingEmbedder

    rng = np.random.default_rng(5)
    with open_store(tmp_path / "s", embedder=E, vector_precision=precision) as cx:
        others = [E, HashingEmbedder(8), HashingEmbedder(DIM), HashingEmbedder(300)]
        for i in range(40):
            e = others[i % len(others)] if i % 3 else E
            version = [1, 1, 2, 23, 1 << 40][i % 5]
            v = rng.standard_normal(e.dim).astype(np.float32)
            v[i % e.dim] = [0.0, 1e-9, -3.5][i % 3]
            raw = to_bytes(v / np.linalg.norm(v))
            rec = vector_record(e.model_id, e.dim, version, raw, float16=precision == "float16")
            assert cx._seal_vector(e, version, raw) == seal(VECTOR_RECORD.encode(rec, "vector"))
