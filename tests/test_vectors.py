"""Golden vectors (specs/vectors/*.json), checked in both directions."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))

import gen_vectors

from cortex import errors
from cortex.index.text import STOP_WORDS, query_terms, terms, tokenize
from cortex.model.codec import LIMITS, decode_data, encode_data
from cortex.model.enums import MemoryType
from cortex.model.forms import (
    MEDIUM_TOKENS,
    SHORT_TOKENS,
    count_tokens,
    render_full,
    render_medium,
    render_short,
)
from cortex.model.hashing import content_hash
from cortex.model.ids import Uri

VECTORS = gen_vectors.VECTORS_DIR
TYPE_FILES = {t: gen_vectors.file_name(t.type_name) for t in MemoryType}
RENDER = {"short": render_short, "medium": render_medium, "full": render_full}


def _load(name: str) -> Any:
    return json.loads((VECTORS / name).read_text(encoding="utf-8"))


def _cases() -> list[Any]:
    out = []
    for mtype, name in TYPE_FILES.items():
        for case in _load(name)["cases"]:
            out.append(pytest.param(mtype, case, id=f"{mtype.type_name}-{case['name']}"))
    return out


CASES = _cases()
NEGATIVES = [pytest.param(c, id=c["name"]) for c in _load("negative.json")["cases"]]
URIS = _load("uris.json")


# -- the files themselves


def test_generator_reproduces_committed_files() -> None:
    built = gen_vectors.build()
    on_disk = {p.name for p in VECTORS.glob("*.json")}
    assert on_disk == set(built), "run python tools/gen_vectors.py"
    for name, doc in built.items():
        text = (VECTORS / name).read_text(encoding="utf-8")
        assert json.loads(text) == json.loads(gen_vectors.dumps(doc)), name
        assert text == gen_vectors.dumps(doc), f"{name} is not formatted by the generator"


@pytest.mark.parametrize("mtype", list(MemoryType), ids=lambda t: t.type_name)
def test_every_type_has_the_required_cases(mtype: MemoryType) -> None:
    doc = _load(TYPE_FILES[mtype])
    assert doc["type"] == mtype.type_name
    assert doc["type_code"] == mtype.value
    assert "conventions" in doc
    names = [c["name"] for c in doc["cases"]]
    assert len(names) == len(set(names))
    assert {"minimal", "full", "nfc", "max_lengths"} <= set(names)
    assert all(c["type"] == mtype.type_name for c in doc["cases"])


@pytest.mark.parametrize("mtype", list(MemoryType), ids=lambda t: t.type_name)
def test_minimal_sets_only_required_and_full_sets_everything(mtype: MemoryType) -> None:
    cases = {c["name"]: c for c in _load(TYPE_FILES[mtype])["cases"]}
    cls = gen_vectors.data_class(mtype.type_name)
    required = {f.name for f in msgspec.structs.fields(cls) if f.required}
    assert set(cases["minimal"]["input"]) == required
    # "full" sets every field of format 1 (its bytes are fixed since); a field added by a later
    # store format is set by its own case, "full_format_<n>", which also sets every other field
    later = [c for name, c in cases.items() if name.startswith("full_format_")]
    if later:
        assert set(later[-1]["input"]) == set(cls.__struct_fields__)
        assert set(cases["full"]["input"]) < set(cls.__struct_fields__)
    else:
        assert set(cases["full"]["input"]) == set(cls.__struct_fields__)


def test_max_lengths_reach_the_limits() -> None:
    for mtype, name in TYPE_FILES.items():
        case = next(c for c in _load(name)["cases"] if c["name"] == "max_lengths")
        value = gen_vectors.expected_value(mtype.type_name, case["input"])
        fields = [getattr(value, f) for f in value.__struct_fields__]
        assert max(len(v.encode()) for v in fields if type(v) is str) == LIMITS.TEXT_BYTES
        collections = [len(v) for v in fields if isinstance(v, tuple | dict)]
        if collections:
            assert max(collections) == LIMITS.ITEMS, mtype
        assert count_tokens(case["medium"]) == MEDIUM_TOKENS, mtype


# -- (a) input -> bytes, hash, forms


@pytest.mark.parametrize(("mtype", "case"), CASES)
def test_input_encodes_to_vector(mtype: MemoryType, case: dict[str, Any]) -> None:
    data = gen_vectors.parse_input(case["type"], case["input"])
    assert data.TYPE is mtype
    cbor = encode_data(data)
    assert cbor.hex() == case["cbor_hex"]
    assert content_hash(mtype, cbor).hex() == case["hash_hex"]


def _form_params() -> list[Any]:
    # forms are rendered from the canonical value, so the raw input renders like the vector
    return [pytest.param(p.values[1], form, id=f"{p.id}-{form}") for p in CASES for form in RENDER]


@pytest.mark.parametrize(("case", "form"), _form_params())
def test_input_renders_to_vector(case: dict[str, Any], form: str) -> None:
    data = gen_vectors.parse_input(case["type"], case["input"])
    assert RENDER[form](data) == case[form]


# -- (b) bytes -> value, and back


@pytest.mark.parametrize(("mtype", "case"), CASES)
def test_vector_decodes_to_input(mtype: MemoryType, case: dict[str, Any]) -> None:
    cbor = bytes.fromhex(case["cbor_hex"])
    value = decode_data(mtype, cbor)
    expected = gen_vectors.expected_value(case["type"], case["input"])
    assert value == expected
    assert gen_vectors.typed(value) == gen_vectors.typed(expected)
    assert encode_data(value) == cbor
    for form, render in RENDER.items():
        assert render(value) == case[form]
    assert count_tokens(case["short"]) <= SHORT_TOKENS
    assert count_tokens(case["medium"]) <= MEDIUM_TOKENS


# -- (c) negative vectors


@pytest.mark.parametrize("case", NEGATIVES)
def test_negative_vector_is_rejected(case: dict[str, Any]) -> None:
    mtype = MemoryType.from_name(case["type"])
    assert mtype is not None
    error = getattr(errors, case["error"])
    assert error in (errors.CodecError, errors.NonCanonicalError)
    with pytest.raises(errors.CodecError) as info:
        decode_data(mtype, bytes.fromhex(case["cbor_hex"]))
    assert type(info.value) is error, str(info.value)


@pytest.mark.parametrize("case", NEGATIVES)
def test_negative_vector_starts_from_valid_bytes(case: dict[str, Any]) -> None:
    mtype = MemoryType.from_name(case["type"])
    assert mtype is not None
    valid = bytes.fromhex(case["valid_hex"])
    assert encode_data(decode_data(mtype, valid)) == valid
    assert case["cbor_hex"] != case["valid_hex"]


def test_negative_vectors_cover_both_error_classes() -> None:
    errors_named = {c.values[0]["error"] for c in NEGATIVES}
    assert errors_named == {"CodecError", "NonCanonicalError"}


# -- URIs


@pytest.mark.parametrize("case", URIS["valid"], ids=lambda c: c["uri"])
def test_valid_uri(case: dict[str, Any]) -> None:
    u = Uri.parse(case["uri"])
    assert u.type.type_name == case["type"]
    assert str(u.id) == case["id"]
    assert u.id.bytes.hex() == case["id_hex"]
    assert u.version == case["version"]
    assert u.id.timestamp_ms == case["timestamp_ms"]
    assert str(u) == case["uri"]


@pytest.mark.parametrize("case", URIS["invalid"], ids=lambda c: c["why"])
def test_invalid_uri(case: dict[str, Any]) -> None:
    with pytest.raises(errors.ValidationError) as info:
        Uri.parse(case["uri"])
    assert (info.value.field, info.value.rule) == (case["field"], case["rule"])


# -- the lexical analyzer (specs/lexical.md §2)

LEXICAL = _load("lexical.json")


@pytest.mark.parametrize(("token", "stem"), LEXICAL["stems"])
def test_stem_vector(token: str, stem: str) -> None:
    assert terms(token) == [stem]


@pytest.mark.parametrize("case", LEXICAL["documents"], ids=lambda c: c["text"][:24])
def test_document_terms_vector(case: dict[str, Any]) -> None:
    assert tokenize(case["text"]) == case["tokens"]
    assert terms(case["text"]) == case["terms"]


@pytest.mark.parametrize("case", LEXICAL["queries"], ids=lambda c: c["text"][:24])
def test_query_terms_vector(case: dict[str, Any]) -> None:
    assert query_terms(case["text"]) == case["terms"]


def test_lexical_vectors_cover_merging_and_keeping_apart() -> None:
    stems = dict(LEXICAL["stems"])
    assert stems["running"] == stems["runs"] == stems["run"]  # inflections merge
    assert stems["adoption"] == stems["adopted"]
    assert stems["tea"] == stems["teas"] != stems["teapot"]  # different words stay apart
    assert stems["green"] != stems["greenish"]
    assert any(
        q["terms"] and set(q["text"].lower().split()) <= STOP_WORDS for q in LEXICAL["queries"]
    )


# -- posting blocks (specs/lexical.md §4a, format 14), checked against the rule written out here

POSTINGS = _load("postings.json")


def _spec_varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low = n & 0x7F
        n >>= 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _spec_blocks(term: str, postings: list[list[Any]]) -> list[list[str]]:
    """The blocks §4a describes for a list written in one go, from its text alone."""
    import zlib

    prefix = b"lex/p/" + term.encode("utf-8") + b"\x00"
    blocks = []
    for at in range(0, len(postings), 128):
        run = postings[at : at + 128]
        payload = b""
        last = None
        for docno, tf, dl in run:
            if last is not None:
                payload += _spec_varint(docno - last)
            payload += _spec_varint(tf) + _spec_varint(dl)
            last = docno
        value = payload + zlib.crc32(payload).to_bytes(4, "big")
        blocks.append([(prefix + run[0][0].to_bytes(4, "big")).hex(), value.hex()])
    return blocks


def test_varint_vectors() -> None:
    from cortex.index.postings import decode_varint, encode_varint

    for n, hx in POSTINGS["varints"]:
        assert _spec_varint(n).hex() == hx
        out = bytearray()
        encode_varint(n, out)
        assert out.hex() == hx
        assert decode_varint(bytes.fromhex(hx), 0) == (n, len(hx) // 2)
    for hx, _why in POSTINGS["refused_varints"]:
        with pytest.raises(ValueError):
            decode_varint(bytes.fromhex(hx), 0)


@pytest.mark.parametrize("case", POSTINGS["cases"], ids=lambda c: c["why"])
def test_posting_block_vectors(case: dict[str, Any], tmp_path: Path) -> None:
    from cortex.index.postings import apply, block_entries, entry_tail
    from cortex.storage.kv import LmdbKV

    assert _spec_blocks(case["term"], case["postings"]) == case["blocks"]
    for k, v in case["blocks"]:
        got = block_entries(bytes.fromhex(k), bytes.fromhex(v))
        assert all(list(e) in case["postings"] for e in got)
    # the store's writer, adding the postings in one go, gives the same
    rows = {d.to_bytes(4, "big"): entry_tail(tf, dl) for d, tf, dl in case["postings"]}
    kv = LmdbKV(tmp_path / "kv")
    kv.write(lambda txn: apply(txn, case["term"], rows))
    with kv.read() as txn:
        got = [[k.hex(), v.hex()] for k, v in txn.scan(b"lex/p/")]
    kv.close()
    assert got == case["blocks"]


@pytest.mark.parametrize("case", POSTINGS["refused"], ids=lambda c: c[2])
def test_posting_block_vectors_refused(case: list[str]) -> None:
    from cortex.errors import IntegrityError
    from cortex.index.postings import block_entries

    key, value, _ = case
    with pytest.raises(IntegrityError, match=r"(is not a posting block|fails its checksum)"):
        block_entries(bytes.fromhex(key), bytes.fromhex(value))


# -- posting segments (specs/lexical.md §4b), encoded here anew from the spec's text

SEGMENTS = _load("segments.json")


def _spec_segment(entries: list[list[Any]]) -> bytes:
    """The sealed segment §4b describes for these entries (struct and zlib only)."""
    import struct
    import zlib

    groups: dict[bytes, list[bytes]] = {}
    for term, kind, docno, tf, dl in entries:
        entry = bytes([kind]) + docno.to_bytes(4, "big")
        if kind != 3:
            entry += struct.pack(">II", tf, dl)
        groups.setdefault(term.encode("utf-8"), []).append(entry)
    payload = struct.pack(">I", len(entries))
    for tb in sorted(groups):
        rows = sorted(groups[tb], key=lambda e: e[1:5])
        payload += struct.pack(">H", len(tb)) + tb + struct.pack(">I", len(rows)) + b"".join(rows)
    return payload + zlib.crc32(payload).to_bytes(4, "big")


@pytest.mark.parametrize("case", SEGMENTS["cases"], ids=lambda c: c["why"])
def test_segment_vectors_both_ways(case: dict[str, Any]) -> None:
    import struct

    from cortex.index import segments
    from cortex.storage.keys import lex_segment_key
    from cortex.storage.kv import seal

    value = bytes.fromhex(case["value"])
    assert _spec_segment(case["entries"]) == value
    groups: dict[str, dict[bytes, tuple[int, bytes | None]]] = {}
    for term, kind, docno, tf, dl in case["entries"]:
        tail = None if tf is None else struct.pack(">II", tf, dl)
        groups.setdefault(term, {})[docno.to_bytes(4, "big")] = (kind, tail)
    assert seal(segments.encode(groups)) == value
    back = segments.decode_value(lex_segment_key(7), value)
    flat = [
        [t, k, int.from_bytes(raw, "big"), *(struct.unpack(">II", tail) if tail else (None, None))]
        for t, es in back
        for k, raw, tail in es
    ]
    assert flat == case["entries"]


@pytest.mark.parametrize("case", SEGMENTS["refused"], ids=lambda c: c["why"])
def test_segment_vectors_refused(case: dict[str, Any]) -> None:
    from cortex.errors import IntegrityError
    from cortex.index import segments
    from cortex.storage.keys import lex_segment_key

    with pytest.raises(
        IntegrityError, match=r"record lex/s/3 (is not a posting segment|fails its checksum)"
    ):
        segments.decode_value(lex_segment_key(3), bytes.fromhex(case["value"]))
