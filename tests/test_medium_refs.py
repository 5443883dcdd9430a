"""A version's medium form as a reference into its data (store format 18, ``specs/format.md``).

The golden vectors of ``specs/vectors/medium_refs.json`` both ways on the Python and the C
paths, the C encoder and decoder against the Python definition (PARITY), malformed input, the
write paths, bundles of format 17, salvage, ``_speedups.read_latest`` on versions with a
reference, and the migration ``0017-medium-references`` on the format-17 fixture
(``tools/make_fixture_v17.py``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import cbor2
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cortex import Cortex, Fact, Forms, Preference
from cortex.engine.store import FORMAT_VERSION
from cortex.errors import CodecError, CortexError, NonCanonicalError
from cortex.model import codec
from cortex.model.codec import VERSION, VERSION_FORMS, VERSION_V17, encode_data
from cortex.transfer.migrate import MEDIUM_REFS_STEP, migrate
from tests import rows as R

from .test_compact_forms import _gen

sp = pytest.importorskip("cortex._speedups", reason="PARITY needs the C accelerator")

ROOT = Path(__file__).resolve().parent.parent
DOC = json.loads((ROOT / "specs" / "vectors" / "medium_refs.json").read_text())
FIXTURE = ROOT / "tests" / "data" / f"format{MEDIUM_REFS_STEP}.cortex"
BUNDLE = ROOT / "tests" / "data" / f"format{MEDIUM_REFS_STEP}.bundle.cbor"  # FIXTURE, exported
ERRORS = {"CodecError": CodecError, "NonCanonicalError": NonCanonicalError}


def test_the_vectors_are_what_the_generator_builds() -> None:
    assert _gen()._medium_refs_file() == DOC


@pytest.mark.parametrize("case", DOC["cases"], ids=[c["name"] for c in DOC["cases"]])
def test_golden_versions_both_ways(case: dict[str, Any]) -> None:
    version = _gen().medium_ref_version(case["type"], *_fields(case))
    raw = bytes.fromhex(case["version_hex"])
    old = bytes.fromhex(case["format17_hex"])
    assert version.data == bytes.fromhex(case["data_hex"])
    assert VERSION.encode(version, "v") == raw and VERSION.decode(raw, "v") == version
    assert sp.encode(VERSION._plan, version) == raw and sp.decode(VERSION._plan, raw) == version
    assert VERSION_FORMS.enc_in(version.forms, version.data).hex() == case["forms_hex"]
    assert VERSION_V17.encode(version, "v") == old and VERSION_V17.decode(old, "v") == version
    if old != raw:  # a reference: shorter, and the literal medium is refused at format 18
        assert len(raw) < len(old)
        assert 5 in cbor2.loads(raw)[11]
        with pytest.raises(NonCanonicalError):
            VERSION.decode(old, "v")
        with pytest.raises(sp.Reject):
            sp.decode(VERSION._plan, old)
        with pytest.raises(CodecError):
            VERSION_V17.decode(raw, "v")


def _fields(case: dict[str, Any]) -> tuple[Any, ...]:
    spec = next(c for c in _gen().MEDIUM_REF_CASES if c[0] == case["name"])
    return spec[3], case["short"], case["medium"]


@pytest.mark.parametrize("case", DOC["negative"], ids=[c["name"] for c in DOC["negative"]])
def test_golden_negative_versions(case: dict[str, Any]) -> None:
    raw = bytes.fromhex(case["version_hex"])
    with pytest.raises(ERRORS[case["error"]]) as info:
        VERSION.decode(raw, "v")
    assert type(info.value) is ERRORS[case["error"]]
    with pytest.raises(sp.Reject):
        sp.decode(VERSION._plan, raw)


_TEXTS = st.sampled_from(
    [
        "window seats on long flights",
        "tea",
        "crème brûlée after dinner",
        "the ferry",
        "日本の鉄道の旅",
    ]
)


@given(_TEXTS, _TEXTS, st.text(max_size=12), st.text(max_size=12), st.booleans())
@example("the ferry", "the ferry", "", "", True)
def test_c_and_python_encode_and_decode_versions_alike(
    a: str, b: str, pre: str, suf: str, cut: bool
) -> None:
    """PARITY: a version's forms around texts of its data, both encoders and decoders."""
    import unicodedata

    medium = unicodedata.normalize("NFC", pre + a + " / " + b + suf).strip() or "x"
    short = medium[:10] + ("…" if cut else "")
    fields = {"statement": a, "subject": b, "predicate": "p"}
    version = _gen().medium_ref_version("fact", fields, short, medium)
    try:
        raw = VERSION.encode(version, "v")
    except Exception:  # a rule of the forms (a short form of its own too long, ...)
        return
    assert VERSION.decode(raw, "v") == version
    assert sp.encode(VERSION._plan, version) in (raw, None)
    assert sp.decode(VERSION._plan, raw) == version
    assert len(raw) <= len(VERSION_V17.encode(version, "v"))


@given(st.binary(min_size=1, max_size=24), st.integers(0, 80))
def test_c_and_python_refuse_the_same_versions(junk: bytes, at: int) -> None:
    """PARITY: damaged references never crash; what C takes, Python takes alike."""
    case = DOC["cases"][0]
    good = bytes.fromhex(case["version_hex"])
    forms = bytes.fromhex(case["forms_hex"])
    base = good[: -len(forms)]
    for tail in (forms[: -len(junk)] + junk, forms.replace(b"\x04", bytes([at % 24]), 1), junk):
        raw = base + tail
        try:
            got = sp.decode(VERSION._plan, raw)
        except sp.Reject:
            with pytest.raises(CodecError):
                VERSION.decode(raw, "v")
            continue
        assert VERSION.decode(raw, "v") == got


def test_data_texts_refuse_malformed_data() -> None:
    assert codec.data_texts(b"") == []
    assert codec.data_texts(b"\x7f") == []  # indefinite
    assert codec.data_texts(b"\x63ab") == []  # cut short
    assert codec.data_texts(b"\xc1\x61a") == []  # a tag
    assert codec.data_texts(b"\x61a\x00") == []  # trailing bytes
    assert codec.data_texts(b"\x82\x61a\x62bc") == [(1, 2, 1), (3, 4, 2)]
    deep = b"\x81" * 33 + b"\x61a"
    assert codec.data_texts(deep) == []
    assert codec.data_texts(b"\x81" * 32 + b"\x61a") == [(32, 33, 1)]


def test_writes_store_references_and_read_the_same(tmp_path: Path) -> None:
    """New memories (C pair encoder), updates (the generic encoder) and supplied forms."""
    topic = "a window seat on long-haul flights"
    with Cortex.open(tmp_path / "s", actor="a") as cx:
        res = cx.write(Preference(topic=topic, polarity="prefer"))
        up = cx.update(
            res.id, Preference(topic="an aisle seat on long-haul flights", polarity="prefer")
        )
        own = cx.write(
            Fact(statement="the night bus runs hourly", subject="bus", predicate="runs"),
            forms=Forms(short="bus", medium="note: the night bus runs hourly"),
        )
        for mid in (res.id, own.id):
            m = cx.resolve_latest(mid)
            assert m.head.forms == m.version.forms
            raw = VERSION.encode(m.version, "v")
            assert 5 in cbor2.loads(raw)[11]
            assert m.head.forms is m.version.forms  # one object on the read path
        assert up.outcome in ("updated", "created", "superseded") or up
        assert cx.verify().ok


def test_the_format_17_fixture_migrates(tmp_path: Path) -> None:
    store = tmp_path / "s"
    store.mkdir()
    shutil.copy(FIXTURE / "data.mdb", store / "data.mdb")
    from cortex.storage.keys import VERSION as VERSION_PREFIX
    from cortex.storage.kv import LmdbKV, unseal

    def versions() -> dict[bytes, bytes]:
        kv = LmdbKV(store, readonly=True, create=False)
        try:
            with kv.read() as txn:
                return {bytes(k): unseal(k, v) for k, v in txn.scan(VERSION_PREFIX)}
        finally:
            kv.close()

    before = versions()
    old = {k: VERSION_V17.decode(v, "v") for k, v in before.items()}
    report = migrate(store, to=20)  # the versions by id (0020 then keys them by row)
    assert report.from_version == MEDIUM_REFS_STEP and report.to_version == 20
    after = versions()
    assert after.keys() == before.keys()
    changed = 0
    for k, raw in after.items():
        assert VERSION.decode(raw, "v") == old[k]
        changed += raw != before[k]
        assert len(raw) <= len(before[k])
    assert changed > 20
    assert sum(map(len, after.values())) < sum(map(len, before.values()))
    migrate(store)  # 0020: the same versions, keyed by row
    assert sorted(versions().values()) == sorted(after.values())
    with Cortex.open(store, actor="checker", as_owner=True) as cx:
        assert cx.verify().ok
        before_n = len(after)
        cx.write(Preference(topic="a window seat on long-haul flights", polarity="avoid"))
        assert cx.verify().ok
    assert len(versions()) == before_n + 1


def test_a_format_17_bundle_imports(tmp_path: Path) -> None:
    """A bundle of format 17 (every medium form as text) imports, and the versions read as
    they were written; the store's own export, at format 18, carries the references, is
    smaller, and imports to the same memories."""
    from cortex.transfer.bundle import export_store, import_bundle, read_bundle

    old = read_bundle(BUNDLE.read_bytes())
    assert old.store_format == MEDIUM_REFS_STEP
    with Cortex.open(tmp_path / "s", actor="importer") as cx:
        rep = import_bundle(cx, BUNDLE)
        assert rep.memories_added == len(old.memories) > 50
        for head, versions in old.memories:
            if not head.tombstone:
                assert cx.resolve_latest(head.id).version == versions[-1]
        assert cx.verify().ok
        export_store(cx, tmp_path / "b18.cbor", encoding="cbor", include_confidential=True)
    new = read_bundle((tmp_path / "b18.cbor").read_bytes())
    assert new.store_format == FORMAT_VERSION
    assert {h.id: v for h, v in new.memories} == {h.id: v for h, v in old.memories}
    assert (tmp_path / "b18.cbor").stat().st_size < BUNDLE.stat().st_size
    with Cortex.open(tmp_path / "t", actor="importer") as cx:
        rep = import_bundle(cx, tmp_path / "b18.cbor")
        assert rep.memories_added == len(new.memories)
        for head, versions in old.memories:
            if not head.tombstone:
                assert cx.resolve_latest(head.id).version == versions[-1]


def test_salvage_reads_both_encodings(tmp_path: Path) -> None:
    from cortex.transfer.salvage import salvage

    src = tmp_path / "v16"
    src.mkdir()
    shutil.copy(FIXTURE / "data.mdb", src / "data.mdb")
    report = salvage(src, tmp_path / "new")
    assert report.records_bad == 0 and report.memories > 50
    with Cortex.open(tmp_path / "new", actor="checker", as_owner=True) as cx:
        assert cx.verify().ok


def test_a_short_text_is_never_referred_to() -> None:
    data = encode_data(Preference(topic="green tea", polarity="prefer"))
    assert codec.medium_ref(data, b"prefers green tea (prefer)") is None


@pytest.mark.parametrize("cut", [False, True])
@pytest.mark.parametrize("case", _gen().MEDIUM_REF_CASES, ids=lambda c: str(c[0]))
def test_the_c_pair_encoder_writes_the_references(case: Any, cut: bool) -> None:
    """PARITY: ``encode_new_pair`` (C, then Python) against ``HEAD``/``VERSION.encode``."""
    from cortex.model.codec import HEAD, NEW_PAIR_PLAN, _encode_new_pair
    from cortex.storage.kv import seal
    from tests.test_speedups import _pinned_pair

    _, _, type_name, fields, short, medium = case
    version = _gen().medium_ref_version(
        type_name, fields, short[:5] + "…" if cut else short, medium
    )
    head, version = _pinned_pair(forms=version.forms, version_data=version.data)
    want = (HEAD.encode(head, "h"), VERSION.encode(version, "v"))
    assert _encode_new_pair(head, version) == want
    got = sp.encode_new_pair(head, version, NEW_PAIR_PLAN)
    assert got is not None and tuple(got) == tuple(seal(b) for b in want)
    assert (5 in cbor2.loads(want[1])[11]) is (
        case[0] not in ("a short text stays literal", "own text")
    )


def _damaged_refs(payload: bytes) -> list[tuple[str, bytes, bool]]:
    """A stored version's payload (unsealed) with its medium reference damaged, one way each:
    the refusals of ``specs/vectors/medium_refs.json``'s negative vectors, and worse; True where
    a read must fail. The two non-canonical ones (False) are values still: the checksum says
    cortex wrote them, so a read that the C path declines decodes them trusted (as any record,
    ``values.decode_trusted``)."""
    record = cbor2.loads(payload)
    forms = record[11]
    pre, at, suf = forms[5]
    data: bytes = record[4]

    def with_forms(f: dict[int, Any]) -> bytes:
        return bytes(cbor2.dumps({**record, 11: f}, canonical=True))

    item = cbor2.loads(data[at:]) if data[at] >> 5 == 3 else None
    literal = {k: v for k, v in forms.items() if k != 5}
    literal[2] = pre + str(item) + suf
    return [
        ("the literal medium", with_forms(literal), False),
        ("not the first occurrence", with_forms({**forms, 5: [pre + str(item), at, suf]}), False),
        ("an offset past the data", with_forms({**forms, 5: [pre, len(data) + 3, suf]}), True),
        ("an offset on the map's head", with_forms({**forms, 5: [pre, 0, suf]}), True),
        ("an offset inside the text", with_forms({**forms, 5: [pre, at + 1, suf]}), True),
        ("a reference of two items", with_forms({**forms, 5: [pre, at]}), True),
        ("a prefix as bytes", with_forms({**forms, 5: [pre.encode(), at, suf]}), True),
        ("an offset as text", with_forms({**forms, 5: [pre, str(at), suf]}), True),
        ("keys 2 and 5 both", with_forms({**forms, 2: pre + suf}), True),
        ("a negative offset", with_forms({**forms, 5: [pre, -1, suf]}), True),
        ("a huge offset", with_forms({**forms, 5: [pre, 2**64 - 1, suf]}), True),
        ("bad UTF-8", payload.replace(pre.encode(), b"\xff" * len(pre.encode()), 1), True),
        ("cut short", payload[:-3], True),
    ]


def test_read_latest_reads_references_as_the_python_path_does(tmp_path: Path) -> None:
    """PARITY (``read_latest``): a get by id through the C read (head, last version and the
    Memory in one call) returns what the Python path (point_read, then the codecs) returns for
    versions whose medium form is a reference, and, for every damaged reference, raises the
    same error; the C call itself builds the Memory of a good one and declines every damaged
    one (never a crash, never a wrong value)."""
    from cortex.engine import store as store_module
    from cortex.engine.heads import encode_row
    from cortex.storage.keys import head_key, id_key, version_key
    from cortex.storage.kv import seal, unseal
    from tests.test_speedups import _scratch_env, same

    assert store_module._READ_LATEST is not None and store_module._READ is not None
    with Cortex.open(tmp_path / "s", actor="a") as cx:
        ids = [
            cx.write(Preference(topic="a window seat on long-haul flights", polarity="prefer")).id,
            cx.write(
                Fact(statement="the harbour ferry leaves at eleven", subject="harbour ferry",
                     predicate="departs")
            ).id,
            cx.write(
                Fact(statement="crème brûlée at the café", subject="dessert", predicate="is")
            ).id,
            cx.write(Preference(topic="tea", polarity="avoid")).id,  # too short: literal
            cx.write(
                Fact(statement="the night bus runs hourly", subject="bus", predicate="runs"),
                forms=Forms(short="bus", medium="note — the night bus runs hourly, always"),
            ).id,
            cx.write(Fact(statement=" ".join(["the long ferry — over the sound"] * 12),
                          subject="ferry", predicate="is")).id,  # a short form cut with "…"
        ]  # fmt: skip
        cx.update(ids[0], Preference(topic="an aisle seat on long-haul flights", polarity="prefer"))

        def put(key: bytes, value: bytes) -> None:
            cx._kv.write(lambda txn: txn.put(key, value))

        def reads() -> list[Any]:
            out: list[Any] = []
            for mid in ids:
                try:
                    out.append(("ok", cx.resolve_latest(mid)))
                except CortexError as exc:
                    out.append((type(exc), str(exc)))
            return out

        def both() -> list[Any]:
            fast = reads()
            old, store_module._READ_LATEST = store_module._READ_LATEST, None
            try:
                slow = reads()
            finally:
                store_module._READ_LATEST = old
            for a, b in zip(fast, slow, strict=True):
                assert a[0] == b[0], (a, b)
                assert same(a[1], b[1]) if a[0] == "ok" else a[1] == b[1], (a, b)
            return fast

        assert [g[0] for g in both()] == ["ok"] * len(ids)
        stored: dict[Any, tuple[int, bytes, bytes, bytes]] = {}
        with cx._kv.read() as txn:
            for mid in ids:
                row = R.row(txn, mid)  # format 21: the head and versions by row
                vkey = version_key(row, cx.resolve_latest(mid).head.current_version)
                stored[mid] = (row, bytes(txn.get(head_key(row))), vkey, bytes(txn.get(vkey)))
        refs = [m for m in ids if 5 in cbor2.loads(unseal(stored[m][2], stored[m][3]))[11]]
        assert refs == [ids[0], ids[1], ids[2], ids[4], ids[5]]  # all but the short topic
        assert cx.resolve_latest(ids[5]).head.forms.short.endswith("…")  # type: ignore[union-attr]

        env = _scratch_env()

        def c_read(mid: Any, row: int, hraw: bytes, vkey: bytes, vraw: bytes) -> Any:
            with env.begin(write=True) as w:
                w.drop(env.open_db(), delete=False)
                w.put(id_key(mid), encode_row(row))
                w.put(head_key(row), hraw)
                w.put(vkey, vraw)
            with env.begin() as txn:
                return sp.read_latest(store_module._READ, txn, mid.bytes)

        old, store_module._READ_LATEST = store_module._READ_LATEST, None
        try:
            python = {mid: cx.resolve_latest(mid) for mid in ids}
        finally:
            store_module._READ_LATEST = old
        for mid in ids:  # the Memory, built in C, its version's forms the head's object
            got = c_read(mid, *stored[mid])
            assert got is not None and same(got, python[mid])
            assert got.version.forms is got.head.forms
        for mid in refs:
            row, hraw, vkey, vraw = stored[mid]
            for what, bad, refused in _damaged_refs(unseal(vkey, vraw)):
                put(vkey, seal(bad))
                kind, _ = both()[ids.index(mid)]  # the same on both paths
                assert (kind != "ok" and issubclass(kind, CortexError)) is refused, what
                assert c_read(mid, row, hraw, vkey, seal(bad)) is None, what  # C declines
            put(vkey, vraw)
        assert [g[0] for g in both()] == ["ok"] * len(ids)
