"""Forms in their compact encoding (store format 15, ``specs/format.md`` Forms).

The golden vectors of ``specs/vectors/forms.json`` both ways on the Python and the C paths,
the C encoder and decoder against the Python definition (PARITY), the forms shared by a head
and its version on the read path, and bundles of format 14 (forms always wide) importing.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import cbor2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cortex import Cortex, Fact, Forms
from cortex.engine.store import FORMAT_VERSION
from cortex.errors import CodecError, NonCanonicalError
from cortex.model import codec
from cortex.model.codec import FORMS, FORMS_V14, HEAD, HEAD_V14, VERSION_V14, VERSION_V17
from cortex.transfer.bundle import export_store, import_bundle, read_bundle
from tests.strategies import forms

sp = pytest.importorskip("cortex._speedups", reason="PARITY needs the C accelerator")

ROOT = Path(__file__).resolve().parent.parent
DOC = json.loads((ROOT / "specs" / "vectors" / "forms.json").read_text())
BUNDLE14 = ROOT / "tests" / "data" / "format14.bundle.cbor"  # the format-14 fixture, exported
ERRORS = {"CodecError": CodecError, "NonCanonicalError": NonCanonicalError}


def _gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_vectors", ROOT / "tools" / "gen_vectors.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_vectors_are_what_the_generator_builds() -> None:
    assert _gen()._forms_file() == DOC


@pytest.mark.parametrize("case", DOC["cases"], ids=[c["name"] for c in DOC["cases"]])
def test_golden_forms_both_ways(case: dict[str, Any]) -> None:
    value = Forms(short=case["short"], medium=case["medium"])
    raw = bytes.fromhex(case["cbor_hex"])
    # Python: value -> bytes -> value
    assert FORMS.encode(value, "forms") == raw
    assert FORMS.decode(raw, "forms") == value
    assert codec._loads(raw, "f") == cbor2.loads(raw)
    # C: the same both ways
    assert sp.encode(FORMS._plan, value) == raw
    assert sp.decode(FORMS._plan, raw) == value
    # the wide encoding of formats 1-14 (bundles from those formats)
    wide = bytes.fromhex(case["format14_hex"])
    assert FORMS_V14.encode(value, "forms") == wide
    assert FORMS_V14.decode(wide, "forms") == value
    if wide != raw:
        assert len(raw) < len(wide)
        with pytest.raises(NonCanonicalError):
            FORMS.decode(wide, "forms")
        with pytest.raises(sp.Reject):
            sp.decode(FORMS._plan, wide)
    # in a head and a version, as the generator builds them
    head, version = _gen().forms_records(case["short"], case["medium"])
    for rec, c, c14, hx in (
        (head, HEAD, HEAD_V14, case["head_hex"]),
        (version, VERSION_V17, VERSION_V14, case["version_hex"]),  # format 18: test_medium_refs
    ):
        b = bytes.fromhex(hx)
        assert c.encode(rec, "r") == b and c.decode(b, "r") == rec
        assert sp.encode(c._plan, rec) == b and sp.decode(c._plan, b) == rec
        assert c14.encode(rec, "r") == b.replace(raw, wide)


@pytest.mark.parametrize("case", DOC["negative"], ids=[c["name"] for c in DOC["negative"]])
def test_golden_negative_forms(case: dict[str, Any]) -> None:
    raw = bytes.fromhex(case["cbor_hex"])
    with pytest.raises(ERRORS[case["error"]]) as info:
        FORMS.decode(raw, "forms")
    assert type(info.value) is ERRORS[case["error"]]
    with pytest.raises(sp.Reject):
        sp.decode(FORMS._plan, raw)
    # inside a head: refused the same way on the full read path
    good = bytes.fromhex(DOC["cases"][0]["head_hex"])
    inner = bytes.fromhex(DOC["cases"][0]["cbor_hex"])
    bad = good.replace(inner, raw)
    with pytest.raises(CodecError):
        HEAD.decode(bad, "head")
    with pytest.raises(sp.Reject):
        sp.decode(HEAD._plan, bad)


def test_a_length_inside_a_character_names_the_rule() -> None:
    raw = bytes.fromhex(next(c for c in DOC["negative"] if "inside" in c["name"])["cbor_hex"])
    with pytest.raises(CodecError, match="UTF-8 character boundary"):
        FORMS.decode(raw, "forms")
    with pytest.raises(sp.Reject, match="inside a character"):
        sp.decode(FORMS._plan, raw)


@given(forms())
def test_c_and_python_encode_and_decode_forms_alike(value: Forms) -> None:
    """PARITY: ``sp.encode``/``sp.decode`` of the forms plan against ``FormsCodec``."""
    raw = FORMS.enc(value)
    assert FORMS.decode(raw, "forms") == value
    assert sp.encode(FORMS._plan, value) in (raw, None)  # None: the Python path runs
    assert sp.decode(FORMS._plan, raw) == value
    s, m = value.short.encode(), value.medium.encode()
    compact = m.startswith(s) or (s.endswith("…".encode()) and m.startswith(s[:-3]))
    assert (cbor2.loads(raw).keys() != {1, 2}) is compact
    if compact:
        assert len(raw) < len(FORMS_V14.enc(value))


@given(st.binary(min_size=1, max_size=40))
def test_c_and_python_refuse_the_same_forms(raw: bytes) -> None:
    """PARITY: any bytes the C decoder takes, the strict Python decoder takes alike."""
    try:
        got = sp.decode(FORMS._plan, raw)
    except sp.Reject:
        return
    assert FORMS.decode(raw, "forms") == got


@pytest.mark.parametrize("length", [0, 1, 2, 3, 5, 6, 7, 16])
def test_every_cut_of_a_non_ascii_medium(length: int) -> None:
    """Each length either decodes to the medium's prefix (both paths) or is refused by both."""
    medium = "Zoë…日本 ok"
    m = medium.encode()
    for key in (3, 4):
        raw = cbor2.dumps({2: medium, key: length}, canonical=True)
        try:
            want = FORMS.decode(raw, "forms")
        except CodecError:
            with pytest.raises(sp.Reject):
                sp.decode(FORMS._plan, raw)
            continue
        assert sp.decode(FORMS._plan, raw) == want
        assert want.short.encode() == m[:length] + (b"\xe2\x80\xa6" if key == 3 else b"")
    # the whole medium (key 4): the C decoder gives the medium's own str
    whole = sp.decode(FORMS._plan, cbor2.dumps({2: medium, 4: len(m)}, canonical=True))
    assert whole.short is whole.medium == medium


def test_a_stored_memory_shares_one_forms_object(tmp_path: Path) -> None:
    """The read path decodes the forms once: the version's are the head's object."""
    with Cortex.open(tmp_path / "s", actor="a") as cx:
        res = cx.write(
            Fact(statement="the ferry leaves at eleven " * 8, subject="f", predicate="p")
        )
        m = cx.resolve_latest(res.id)
        assert m.head.forms is m.version.forms
        assert m.head.forms is not None and m.head.forms.short.endswith("…")


def test_a_format_14_bundle_imports_and_exports_compact(tmp_path: Path) -> None:
    """A bundle from format 14 (forms always wide) imports; the store's own export, from
    format 15, carries the compact records and imports again unchanged."""
    old = read_bundle(BUNDLE14.read_bytes())
    assert old.store_format == 14
    with Cortex.open(tmp_path / "s", actor="importer") as cx:
        report = import_bundle(cx, BUNDLE14)
        assert report.memories_added == len(old.memories) > 50
        for head, versions in old.memories:
            m = cx.resolve_latest(head.id)
            assert m.head.forms == head.forms == versions[-1].forms
        assert cx.verify().ok
        export_store(cx, tmp_path / "b.cbor", encoding="cbor", include_confidential=True)
    new = read_bundle((tmp_path / "b.cbor").read_bytes())
    assert new.store_format == FORMAT_VERSION
    assert [h.forms for h, _ in new.memories] == [h.forms for h, _ in old.memories]
    raw = (tmp_path / "b.cbor").read_bytes()
    assert len(raw) < BUNDLE14.stat().st_size
    with Cortex.open(tmp_path / "s", actor="importer") as cx:
        again = import_bundle(cx, tmp_path / "b.cbor")  # the same records: nothing changes
        assert again.memories_added == 0 and again.memories_unchanged == len(old.memories)
        assert cx.verify().ok


def test_a_format_14_bundle_may_not_hold_compact_forms() -> None:
    """The header's store format decides the encoding: in a bundle of format 14 a head with
    compact forms is refused (keys 3 and 4 are unknown there), and in one of format 15 a head
    with wide forms where compact ones apply is not canonical."""
    heads = [h for h, _ in read_bundle(BUNDLE14.read_bytes()).memories if h.forms is not None]
    compacted = 0
    for head in heads:
        wide, compact = HEAD_V14.encode(head, "h"), HEAD.encode(head, "h")
        if wide == compact:
            continue
        compacted += 1
        with pytest.raises(CodecError):
            HEAD_V14.decode(compact, "h")
        with pytest.raises(NonCanonicalError):
            HEAD.decode(wide, "h")
    assert compacted > 50


def test_salvaging_a_format_14_store_keeps_every_memory_and_its_forms(tmp_path: Path) -> None:
    """Salvage reads the heads and versions of a damaged store of an older format (forms
    wide) as strictly as its own; the new store holds them compact, the same values."""
    from cortex.storage.keys import HEAD as HEAD_PREFIX
    from cortex.storage.kv import LmdbKV, unseal
    from cortex.transfer.salvage import salvage

    src = tmp_path / "v14"  # a copy: opening a store may leave a pages.checked beside it
    src.mkdir()
    shutil.copy(ROOT / "tests" / "data" / "format14.cortex" / "data.mdb", src / "data.mdb")
    kv = LmdbKV(src, readonly=True, create=False)
    try:
        with kv.read() as txn:
            heads = {k: HEAD_V14.decode(unseal(k, v), "h") for k, v in txn.scan(HEAD_PREFIX)}
    finally:
        kv.close()
    report = salvage(src, tmp_path / "new")
    assert report.records_bad == 0 and report.memories == len(heads) > 50
    with Cortex.open(tmp_path / "new", actor="checker", as_owner=True) as cx:
        for head in heads.values():
            assert cx.resolve_latest(head.id).head.forms == head.forms
        assert cx.verify().ok
