"""The C decoder (cortex._speedups) against the pure-Python strict decoder.

The C path may only change speed: for every input both paths give an equal value of the same
types, or the same error class and message, and at the public boundary that error is a
``CortexError`` on both paths (issue 20: agreeing on a raw ``TypeError`` is not enough).
``cortex._speedups.decode`` itself must accept exactly what the Python strict decoder accepts
(it rejects by raising ``Reject`` only, and the wrappers then run the Python path for the
message).
"""

from __future__ import annotations

import json
import math
import struct
import sys
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Final

import msgspec
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from cortex.engine import journal, values
from cortex.errors import CodecError, CortexError, ValidationError
from cortex.model import codec
from cortex.model.codec import (
    DATA_CODECS,
    HEAD,
    VERSION,
    StructCodec,
    _head,
    _Time,
    decode_data,
    decode_data_trusted,
    decode_head,
    decode_version,
    encode_data,
    encode_head,
    encode_version,
)
from cortex.model.enums import CodedEnum, MemoryType, SourceKind
from cortex.model.ids import MemoryId
from cortex.model.records import Identity, Provenance, Version
from tests.strategies import data_of_type, heads, versions

sp = pytest.importorskip(
    "cortex._speedups",
    reason="the C accelerator cortex._speedups is not built (no C compiler at install time)",
)

NEGATIVE = Path(__file__).resolve().parent.parent / "specs" / "vectors" / "negative.json"


def _store_codecs() -> dict[str, StructCodec[Any]]:

    return {
        "journal": journal.JOURNAL_CODEC,
        "edge": values.EDGE_CODEC,
        "format": values.FORMAT_CODEC,
    }


CODECS: dict[str, StructCodec[Any]] = {
    **{t.type_name: c for t, c in DATA_CODECS.items()},
    "head": HEAD,
    "version": VERSION,
    **_store_codecs(),
}


# -- helpers


@contextmanager
def _speedups(on: bool) -> Iterator[None]:
    old = codec._USE_SPEEDUPS
    codec._USE_SPEEDUPS = on
    try:
        yield
    finally:
        codec._USE_SPEEDUPS = old


def _outcome(on: bool, fn: Callable[..., Any], *args: Any) -> tuple[Any, Any]:
    """``("ok", value)`` or ``(error class, message)`` of ``fn(*args)`` on one path."""
    with _speedups(on):
        try:
            return ("ok", fn(*args))
        except Exception as exc:
            return (type(exc), str(exc))


def _raw(c: StructCodec[Any], data: Any) -> tuple[bool, Any]:
    """The C decoder alone: ``(True, value)`` or ``(False, None)`` when it rejects."""
    try:
        return True, sp.decode(c._plan, data)
    except sp.Reject:
        return False, None


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (``1 == 1.0`` is not enough)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, msgspec.Struct):
        return all(same(getattr(a, f), getattr(b, f)) for f in a.__struct_fields__)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, datetime):
        return a == b and a.tzinfo is b.tzinfo and a.fold == b.fold
    if isinstance(a, float):
        return struct.pack(">d", a) == struct.pack(">d", b)
    if isinstance(a, CodedEnum):
        return a is b
    return bool(a == b)


def check_codec(c: StructCodec[Any], data: Any) -> None:
    """Both paths of ``c.decode`` agree on ``data``, and the C decoder accepts what Python does."""
    py = _outcome(False, c.decode, data, "x")
    fast = _outcome(True, c.decode, data, "x")
    assert py[0] == fast[0], (data, py, fast)
    if py[0] == "ok":
        assert same(py[1], fast[1]), (data, py, fast)
    else:
        assert py[1] == fast[1]
        assert issubclass(py[0], CortexError), py  # and so fast[0], the same class
    ok, value = _raw(c, data)
    assert ok == (py[0] == "ok"), (bytes(data).hex(), py)
    if ok:
        assert same(value, py[1])


def check_data(t: MemoryType, data: Any) -> None:
    """``decode_data`` and ``decode_data_trusted`` agree on both paths for ``data``."""
    for fn in (decode_data, decode_data_trusted):
        py = _outcome(False, fn, t, data)
        fast = _outcome(True, fn, t, data)
        assert py[0] == fast[0], (fn.__name__, data, py, fast)
        if py[0] == "ok":
            assert same(py[1], fast[1])
        else:
            assert py[1] == fast[1]
            assert issubclass(py[0], CortexError), py
    check_codec(DATA_CODECS[t], data)


def m(*entries: tuple[bytes, bytes]) -> bytes:
    """A map of already-encoded (key, value) entries, in the order given."""
    return _head(5, len(entries)) + b"".join(k + v for k, v in entries)


def u(n: int) -> bytes:
    return _head(0, n)


def txt(s: str | bytes) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return _head(3, len(b)) + b


def arr(*items: bytes) -> bytes:
    return _head(4, len(items)) + b"".join(items)


SV = (u(0), u(1))


def fact(*extra: tuple[bytes, bytes], confidence: bytes | None = None) -> bytes:
    entries = [SV, (u(1), txt("grass is green")), (u(2), txt("lawn")), (u(3), txt("colour"))]
    entries += extra
    if confidence is not None:
        entries.append((u(7), confidence))
    return m(*entries)


# -- the extension is there and wired


def test_plans_are_built_for_every_record() -> None:
    assert codec._USE_SPEEDUPS
    for name, c in CODECS.items():
        assert isinstance(c._plan, sp.Plan), name


def test_text_below_u0300_is_nfc() -> None:
    # the C decoder skips unicodedata for text of one-byte kind (all characters < U+0100)
    for c in range(0x300):
        ch = chr(c)
        assert unicodedata.is_normalized("NFC", ch)
        assert unicodedata.combining(ch) == 0
    # nor for the forms' punctuation beside such text: NFC_QC=Yes, class 0, composes with nothing
    for ch in ("\u2014", "\u2026"):
        assert unicodedata.combining(ch) == 0
        for c in range(0x300):
            for pair in (chr(c) + ch, ch + chr(c)):
                assert unicodedata.is_normalized("NFC", pair)


_PUNCTUATED = st.text(st.sampled_from("a\u00e9 \u2014\u2026\u0301\u0327\u1e09e\u0308"), max_size=8)


@given(_PUNCTUATED)
@example("a \u2014 b\u2026")
@example("\u2014\u0301")
@example("e\u0301\u2014")
def test_text_with_the_forms_punctuation(s: str) -> None:
    """Text of the forms' punctuation and other characters decodes and encodes as in Python."""
    b = s.encode("utf-8")
    check_data(MemoryType.FACT, fact((u(4), txt(b))))


# -- valid records: equal values of the same types


@pytest.mark.parametrize("t", list(MemoryType), ids=lambda t: t.type_name)
@given(data=st.data())
def test_data_roundtrip_equal(t: MemoryType, data: st.DataObject) -> None:
    value = data.draw(data_of_type(t))
    raw = encode_data(value)
    check_data(t, raw)
    ok, decoded = _raw(DATA_CODECS[t], raw)
    assert ok and decoded == value
    # other bytes-like objects decode the same
    check_data(t, bytearray(raw))
    check_data(t, memoryview(raw))


@given(heads())
def test_head_roundtrip_equal(head: Any) -> None:
    raw = encode_head(head)
    check_codec(HEAD, raw)
    for on in (False, True):
        with _speedups(on):
            assert decode_head(raw) == head


@given(versions())
def test_version_roundtrip_equal(version: Any) -> None:
    raw = encode_version(version)
    check_codec(VERSION, raw)
    for on in (False, True):
        with _speedups(on):
            assert decode_version(raw) == version


@given(st.integers(_Time._MIN - 2, _Time._MAX + 2) | st.sampled_from([0, -1, 1, -(10**6)]))
def test_times(us: int) -> None:
    _check_time(us)


def _check_time(us: int) -> None:
    raw = fact((u(6), _head(0, us) if us >= 0 else _head(1, -1 - us)))
    check_data(MemoryType.FACT, raw)
    ok, value = _raw(DATA_CODECS[MemoryType.FACT], raw)
    if _Time._MIN <= us <= _Time._MAX:
        assert ok
        assert value.observed_at == datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=us)
        assert value.observed_at.tzinfo is UTC


def test_time_bounds() -> None:
    for us in (_Time._MIN, _Time._MAX, _Time._MIN - 1, _Time._MAX + 1, 0, -1, 951782400000000):
        _check_time(us)


@given(
    st.one_of(
        st.integers(0, 0xFFFF).map(lambda h: b"\xf9" + h.to_bytes(2, "big")),
        st.integers(0, 0xFFFFFFFF).map(lambda f: b"\xfa" + f.to_bytes(4, "big")),
        st.integers(0, 2**64 - 1).map(lambda d: b"\xfb" + d.to_bytes(8, "big")),
        st.floats(0.0, 1.0).map(lambda x: b"\xfb" + struct.pack(">d", x)),
        st.floats(0.0, 1.0, width=32).map(lambda x: b"\xfa" + struct.pack(">f", x)),
        st.floats(0.0, 1.0).map(codec._float),
    )
)
def test_float_widths(encoded: bytes) -> None:
    check_data(MemoryType.FACT, fact(confidence=encoded))


def test_float_edges() -> None:
    edges = [0.0, -0.0, 1.0, 2.0**-24, 2.0**-25, 2.0**-14, 2.0**-149, 2.0**-126, 1 / 3, 0.1]
    edges += [1.0 - 2.0**-11, 1.0 - 2.0**-12, 1.0 - 2.0**-24, 1.0 - 2.0**-25, 1.0 + 2.0**-52]
    edges += [math.nan, math.inf, -math.inf, 5e-324, 2.0**-1074 * 3]
    for x in edges:
        for fmt, ib in ((">e", b"\xf9"), (">f", b"\xfa"), (">d", b"\xfb")):
            try:
                encoded = ib + struct.pack(fmt, x)
            except OverflowError:
                continue
            check_data(MemoryType.FACT, fact(confidence=encoded))
        if 0.0 <= x <= 1.0:
            check_data(MemoryType.FACT, fact(confidence=codec._float(x + 0.0)))


@given(st.text(st.characters(codec="utf-8"), max_size=12) | st.text(max_size=4))
def test_any_text(s: str) -> None:
    try:
        b = s.encode("utf-8")
    except UnicodeEncodeError:
        b = s.encode("utf-8", "surrogatepass")
    check_data(MemoryType.FACT, fact((u(4), txt(b))))
    check_data(MemoryType.IDENTITY, m(SV, (u(1), txt("x")), (u(4), m((txt(b), txt(b))))))


@given(st.binary(max_size=12))
def test_any_utf8_bytes(b: bytes) -> None:
    check_data(MemoryType.FACT, fact((u(4), txt(b))))


URI = "cortex://Fact/01K9ZJ0Q5W3X4Y5Z6A7B8C9D0E#1"


@pytest.mark.parametrize(
    "uri",
    [
        URI,
        "cortex://Fact/01K9ZJ0Q5W3X4Y5Z6A7B8C9D0E#9223372036854775807",
        "cortex://Fact/01K9ZJ0Q5W3X4Y5Z6A7B8C9D0E#9223372036854775808",
        "cortex://Fact/01K9ZJ0Q5W3X4Y5Z6A7B8C9D0E#999999999999999999",
        "cortex://Fact/01K9ZJ0Q5W3X4Y5Z6A7B8C9D0E#10000000000000000000",
        "cortex://Fact/01K9ZJ0Q5W3X4Y5Z6A7B8C9D0E#0",
        "cortex://Fact/01K9ZJ0Q5W3X4Y5Z6A7B8C9D0E#01",
        "cortex://Fact/01K9ZJ0Q5W3X4Y5Z6A7B8C9D0E#latest",
        "cortex://Fact/01K9ZJ0Q5W3X4Y5Z6A7B8C9D0E#",
        "cortex://Fact/01K9ZJ0Q5W3X4Y5Z6A7B8C9D0E",
        "cortex://Fact/81K9ZJ0Q5W3X4Y5Z6A7B8C9D0E#1",
        "cortex://Fact/01K9ZJ0Q5W3X4Y5Z6A7B8C9D0U#1",
        "cortex://Fact/01k9zj0q5w3x4y5z6a7b8c9d0e#1",
        "cortex://fact/01K9ZJ0Q5W3X4Y5Z6A7B8C9D0E#1",
        "cortex://Facts/01K9ZJ0Q5W3X4Y5Z6A7B8C9D0E#1",
        "cortex://Fac/01K9ZJ0Q5W3X4Y5Z6A7B8C9D0E#1",
        "cortex://Pattern/7ZZZZZZZZZZZZZZZZZZZZZZZZZ#42",
        "cortex://Identity/00000000000000000000000000#1",
        "cortex://Fact/01K9ZJ0Q5W3X4Y5Z6A7B8C9D0E#1\n",
        "cortex://Fact/01K9ZJ0Q5W3X4Y5Z6A7B8C9D0E#١",
        "xortex://Fact/01K9ZJ0Q5W3X4Y5Z6A7B8C9D0E#1",
    ],
)
def test_uris(uri: str) -> None:
    check_data(MemoryType.PATTERN, m(SV, (u(1), txt("p")), (u(4), arr(txt(uri)))))


@pytest.mark.parametrize(
    "amount",
    ["0", "1", "-1", "-0", "12.5", "12.50", "0.0", "0.01", "-0.5", "01", "1.", ".5", "1e5", "+1",
     "1299.99", "-", "", "1.2.3", "١٢", "0" * 64, "1" * 65],
)  # fmt: skip
def test_decimals(amount: str) -> None:
    cost = m((u(1), txt("USD")), (u(2), txt(amount)))
    check_data(MemoryType.EVENT, m(SV, (u(1), txt("buy")), (u(4), cost)))


# -- invalid records: the same error on both paths


def _negative_cases() -> list[Any]:
    if not NEGATIVE.exists():
        return []
    cases = json.loads(NEGATIVE.read_text(encoding="utf-8"))["cases"]
    return [pytest.param(c, id=c["name"]) for c in cases]


@pytest.mark.parametrize("case", _negative_cases())
def test_negative_vectors(case: dict[str, Any]) -> None:
    t = MemoryType.from_name(case["type"])
    assert t is not None
    bad = bytes.fromhex(case["cbor_hex"])
    py = _outcome(False, decode_data, t, bad)
    fast = _outcome(True, decode_data, t, bad)
    assert py == fast
    assert py[0].__name__ == case["error"]
    assert _raw(DATA_CODECS[t], bad) == (False, None)
    check_data(t, bytes.fromhex(case["valid_hex"]))


F32 = b"\xfa" + struct.pack(">f", 0.5)
MALFORMED: dict[str, tuple[MemoryType, bytes]] = {
    "valid": (MemoryType.FACT, fact()),
    "f16_ok": (MemoryType.FACT, fact(confidence=b"\xf9\x38\x00")),
    "f32_for_f16": (MemoryType.FACT, fact(confidence=F32)),
    "f64_for_f16": (MemoryType.FACT, fact(confidence=b"\xfb" + struct.pack(">d", 0.5))),
    "f64_for_f32": (MemoryType.FACT, fact(confidence=b"\xfb" + struct.pack(">d", 0.1 + 2**-30))),
    "neg_zero_f16": (MemoryType.FACT, fact(confidence=b"\xf9\x80\x00")),
    "nan_f64": (MemoryType.FACT, fact(confidence=b"\xfb" + struct.pack(">d", math.nan))),
    "float_over_one": (MemoryType.FACT, fact(confidence=b"\xf9\x3c\x01")),
    "int_for_float": (MemoryType.FACT, fact(confidence=u(1))),
    "simple_for_float": (MemoryType.FACT, fact(confidence=b"\xf8\x20")),
    "undefined": (MemoryType.FACT, fact(confidence=b"\xf7")),
    "null": (MemoryType.FACT, fact((u(4), b"\xf6"))),
    "float_key": (MemoryType.FACT, m(SV, (b"\xf9\x3c\x00", txt("x")))),
    "neg_key": (MemoryType.FACT, m(SV, (b"\x20", txt("x")))),
    "key_0_in_nested": (
        MemoryType.EVENT,
        m(SV, (u(1), txt("buy")), (u(4), m((u(0), u(1)), (u(1), txt("USD")), (u(2), txt("1"))))),
    ),
    "non_shortest_key_0": (MemoryType.FACT, b"\xa4\x18\x00" + fact()[3:]),
    "map_head_1_byte": (MemoryType.FACT, b"\xb8\x04" + fact()[1:]),
    "map_count_too_big": (MemoryType.FACT, b"\xa5" + fact()[1:]),
    "map_count_huge": (MemoryType.FACT, b"\xbb" + (2**63).to_bytes(8, "big") + fact()[1:]),
    "map_count_short": (MemoryType.FACT, b"\xa3" + fact()[1:]),
    "text_len_huge": (MemoryType.FACT, m(SV, (u(1), b"\x7b" + (2**64 - 1).to_bytes(8, "big")))),
    "text_len_past_end": (MemoryType.FACT, m(SV, (u(1), b"\x78\xff" + b"a" * 10))),
    "text_len_non_shortest": (MemoryType.FACT, m(SV, (u(1), b"\x78\x01a"))),
    "reserved_info": (MemoryType.FACT, m(SV, (u(1), b"\x7c"))),
    "break": (MemoryType.FACT, m(SV, (u(1), b"\xff"))),
    "tag_text": (MemoryType.FACT, m(SV, (u(1), b"\xd8\x20" + txt("x")))),
    "overlong_utf8": (MemoryType.FACT, m(SV, (u(1), txt(b"\xc0\xaf")))),
    "cesu_surrogate": (MemoryType.FACT, m(SV, (u(1), txt(b"\xed\xa0\x80")))),
    "non_nfc_latin": (MemoryType.FACT, fact((u(4), txt("e\u0301")))),
    "nfc_latin1": (MemoryType.FACT, fact((u(4), txt("café ÿ")))),
    "nfc_cjk": (MemoryType.FACT, fact((u(4), txt("日本語 🎉")))),
    "singleton_non_nfc": (MemoryType.FACT, fact((u(4), txt("\u212b")))),
    "text_at_limit": (MemoryType.FACT, fact((u(4), txt("a" * 16384)))),
    "text_over_limit": (MemoryType.FACT, fact((u(4), txt("a" * 16385)))),
    "empty_text": (MemoryType.FACT, fact((u(4), txt("")))),
    "enum_code_big": (MemoryType.FACT, fact((u(5), u(300)))),
    "enum_negative": (MemoryType.FACT, fact((u(5), b"\x20"))),
    "enum_ok": (MemoryType.FACT, fact((u(5), u(3)))),
    "time_negative_huge": (MemoryType.FACT, fact((u(6), b"\x3b" + (2**64 - 1).to_bytes(8, "big")))),
    "time_float": (MemoryType.FACT, fact((u(6), b"\xf9\x00\x00"))),
    "int_max": (MemoryType.PATTERN, m(SV, (u(1), txt("p")), (u(3), u(2**63 - 1)))),
    "int_over_max": (MemoryType.PATTERN, m(SV, (u(1), txt("p")), (u(3), u(2**63)))),
    "int_u64_max": (MemoryType.PATTERN, m(SV, (u(1), txt("p")), (u(3), u(2**64 - 1)))),
    "int_negative": (MemoryType.PATTERN, m(SV, (u(1), txt("p")), (u(3), b"\x20"))),
    "dup_uri": (MemoryType.PATTERN, m(SV, (u(1), txt("p")), (u(4), arr(txt(URI), txt(URI))))),
    "list_is_map": (MemoryType.PATTERN, m(SV, (u(1), txt("p")), (u(4), m((txt(URI), txt(URI)))))),
    "list_indefinite": (MemoryType.PATTERN, m(SV, (u(1), txt("p")), (u(4), b"\x9f\xff"))),
    "list_at_limit": (
        MemoryType.GOAL,
        m(SV, (u(1), txt("g")), (u(2), u(1)), (u(4), arr(*[txt("c")] * 256))),
    ),
    "list_over_limit": (
        MemoryType.GOAL,
        m(SV, (u(1), txt("g")), (u(2), u(1)), (u(4), arr(*[txt("c")] * 257))),
    ),
    "list_len_huge": (
        MemoryType.GOAL,
        m(SV, (u(1), txt("g")), (u(2), u(1)), (u(4), b"\x9b" + (2**64 - 1).to_bytes(8, "big"))),
    ),
    "list_truncated": (MemoryType.GOAL, m(SV, (u(1), txt("g")), (u(2), u(1)), (u(4), b"\x83a"))),
    "false_bool": (
        MemoryType.CAPABILITY,
        m(SV, (u(1), txt("a")), (u(2), txt("b")), (u(3), b"\xf4")),
    ),
    "true_bool": (
        MemoryType.CAPABILITY,
        m(SV, (u(1), txt("a")), (u(2), txt("b")), (u(3), b"\xf5")),
    ),
    "int_bool": (MemoryType.CAPABILITY, m(SV, (u(1), txt("a")), (u(2), txt("b")), (u(3), u(1)))),
    "map_dup_key": (
        MemoryType.CAPABILITY,
        m(
            SV,
            (u(1), txt("a")),
            (u(2), txt("b")),
            (u(4), m((txt("k"), txt("v")), (txt("k"), txt("w")))),
        ),
    ),
    "map_int_key": (
        MemoryType.CAPABILITY,
        m(SV, (u(1), txt("a")), (u(2), txt("b")), (u(4), m((u(1), txt("v"))))),
    ),
    "map_empty_value": (
        MemoryType.CAPABILITY,
        m(SV, (u(1), txt("a")), (u(2), txt("b")), (u(4), m((txt("k"), txt(""))))),
    ),
    "map_long_key": (
        MemoryType.CAPABILITY,
        m(SV, (u(1), txt("a")), (u(2), txt("b")), (u(4), m((txt("k" * 257), txt("v"))))),
    ),
    "map_len_first": (
        MemoryType.CAPABILITY,
        m(
            SV,
            (u(1), txt("a")),
            (u(2), txt("b")),
            (u(4), m((txt("b"), txt("v")), (txt("aa"), txt("w")))),
        ),
    ),
    "empty_public_key": (MemoryType.IDENTITY, m(SV, (u(1), txt("a")), (u(5), arr(b"\x40")))),
    "public_key_over_limit": (
        MemoryType.IDENTITY,
        m(SV, (u(1), txt("a")), (u(5), arr(_head(2, 1025) + b"k" * 1025))),
    ),
    "text_public_key": (MemoryType.IDENTITY, m(SV, (u(1), txt("a")), (u(5), arr(txt("k"))))),
    "schema_version_2": (MemoryType.FACT, b"\xa4\x00\x02" + fact()[3:]),
    "schema_version_text": (MemoryType.FACT, b"\xa4\x00\x61\x31" + fact()[3:]),
    "no_map": (MemoryType.FACT, b"\x80"),
    "empty_map": (MemoryType.FACT, b"\xa0"),
    "trailing": (MemoryType.FACT, fact() + b"\x00"),
    "empty": (MemoryType.FACT, b""),
    "wrong_type_constraint": (MemoryType.CONSTRAINT, fact()),
}


@pytest.mark.parametrize(
    "n", [0, 23, 24, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1]
)
def test_int_heads_of_every_width(n: int) -> None:
    for info, size in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if n >= 1 << (8 * size):
            continue
        arg = bytes([info]) + n.to_bytes(size, "big")
        check_data(MemoryType.PATTERN, m(SV, (u(1), txt("p")), (u(3), arg)))
        check_data(
            MemoryType.PATTERN, m(SV, (u(1), txt("p")), (u(3), bytes([0x20 | info]) + arg[1:]))
        )
        if n < 300:
            text = bytes([0x60 | info]) + arg[1:] + b"t" * n
            check_data(MemoryType.FACT, fact((u(4), text)))
            check_data(MemoryType.GOAL, m(SV, (u(1), txt("g")), (u(2), bytes([info]) + arg[1:])))
        if n < 24:
            check_data(MemoryType.PATTERN, m(SV, (u(1), txt("p")), (u(3), bytes([n]))))


@pytest.mark.parametrize("t,data", list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed(t: MemoryType, data: bytes) -> None:
    check_data(t, data)


def test_not_bytes() -> None:
    for bad in ("a4", None, 12, [1, 2], memoryview(b"\xa0\x00\x01" * 2)[::2]):
        py = _outcome(False, decode_data, MemoryType.FACT, bad)
        fast = _outcome(True, decode_data, MemoryType.FACT, bad)
        assert py == fast
        assert issubclass(py[0], CodecError)
        assert _raw(DATA_CODECS[MemoryType.FACT], bad) == (False, None)


def _pair_version(span: bytes) -> bytes:
    source = m((u(1), txt("s")), (u(3), span))
    prov = m((u(1), u(1)), (u(3), arr(source)))
    base = encode_version(
        Version(
            id=MemoryId(bytes(16)),
            version=1,
            type=MemoryType.FACT,
            hash=bytes(32),
            created_at=datetime(2026, 1, 1, tzinfo=UTC),
            created_by="me",
            provenance=Provenance(source=SourceKind.USER_INPUT),
        )
    )
    plain = m((u(1), u(1)))
    assert base.count(plain) == 1
    return base.replace(plain, prov)


@pytest.mark.parametrize(
    "span",
    [arr(u(1), u(2)), arr(u(2), u(2)), arr(u(3), u(2)), arr(u(1)), arr(u(1), u(2), u(3)),
     arr(b"\x20", u(2)), arr(u(1), u(2**63)), arr(u(0), u(2**63 - 1)), m((u(1), u(2)))],
)  # fmt: skip
def test_pairs(span: bytes) -> None:
    check_codec(VERSION, _pair_version(span))


# -- fuzz: both paths agree on anything, and nothing crashes


@given(st.sampled_from(list(CODECS)), st.binary(max_size=64))
def test_fuzz_binary(name: str, data: bytes) -> None:
    check_codec(CODECS[name], data)


@given(st.sampled_from(list(MemoryType)), st.binary(max_size=48))
def test_fuzz_map_prefix(t: MemoryType, tail: bytes) -> None:
    # start like a record so the fuzz reaches the field decoders
    check_data(t, b"\xa4\x00\x01\x01" + tail)


def _mutate(draw: st.DrawFn, raw: bytes) -> bytes:
    assume(raw)
    i = draw(st.integers(0, len(raw) - 1))
    how = draw(st.sampled_from(["set", "flip", "delete", "insert", "truncate"]))
    if how == "set":
        return raw[:i] + bytes([draw(st.integers(0, 255))]) + raw[i + 1 :]
    if how == "flip":
        return raw[:i] + bytes([raw[i] ^ (1 << draw(st.integers(0, 7)))]) + raw[i + 1 :]
    if how == "delete":
        return raw[:i] + raw[i + 1 :]
    if how == "insert":
        return raw[:i] + bytes([draw(st.integers(0, 255))]) + raw[i:]
    return raw[:i]


@given(st.data())
def test_fuzz_mutated_data(data: st.DataObject) -> None:
    t = data.draw(st.sampled_from(list(MemoryType)))
    raw = encode_data(data.draw(data_of_type(t)))
    check_data(t, raw)
    check_data(t, _mutate(data.draw, raw))


@given(st.data())
def test_fuzz_mutated_head(data: st.DataObject) -> None:
    check_codec(HEAD, _mutate(data.draw, encode_head(data.draw(heads()))))


@given(st.data())
def test_fuzz_mutated_version(data: st.DataObject) -> None:
    check_codec(VERSION, _mutate(data.draw, encode_version(data.draw(versions()))))


# -- the C module's own contract


def test_reject_is_the_only_error() -> None:
    plan = DATA_CODECS[MemoryType.FACT]._plan
    with pytest.raises(sp.Reject):
        sp.decode(plan, b"\xa0")
    with pytest.raises(TypeError):
        sp.decode(None, b"\xa0")
    with pytest.raises(TypeError):
        sp.decode(plan)


def test_bad_plans_are_refused() -> None:
    from cortex.model.records import Cost

    names = ("asset", "amount")
    text = ("text", 10, 0, ())
    good = ((1, 0, False, None, None, text), (2, 1, False, None, None, text))
    assert isinstance(sp.Plan(Cost, names, None, good), sp.Plan)
    for fields in [
        ((1, 0, False, None, None, text),),  # fewer fields than names
        ((2, 0, False, None, None, text), (1, 1, False, None, None, text)),  # keys unsorted
        ((1, 0, False, None, None, text), (2, 0, False, None, None, text)),  # slot twice
        ((0, 0, False, None, None, text), (2, 1, False, None, None, text)),  # key 0
        ((1, 0, False, None, None, ("nope",)), (2, 1, False, None, None, text)),
        ((1, 0, False, None, None, ("int", 5, 1)), (2, 1, False, None, None, text)),
        ((1, 0, False, None, None, ("enum", {256: 1})), (2, 1, False, None, None, text)),
        ((1, 0, False, None, None, ("int", 0, 2**64)), (2, 1, False, None, None, text)),
        ((1, 0, False, None, None, ("record", None)), (2, 1, False, None, None, text)),
        (
            (1, 0, False, None, None, ("map", ("int", 0, 1), text, 4)),
            (2, 1, False, None, None, text),
        ),
    ]:
        with pytest.raises((TypeError, ValueError, OverflowError)):
            sp.Plan(Cost, names, None, fields)


def test_python_path_without_extension(monkeypatch: pytest.MonkeyPatch) -> None:
    # codec works when the extension is missing: no plan, the flag off
    monkeypatch.setattr(codec, "_USE_SPEEDUPS", False)
    raw = fact(confidence=b"\xf9\x38\x00")
    assert decode_data(MemoryType.FACT, raw).confidence == 0.5


# -- the write path's hot loops: tokenizing, counting terms, short ASCII text lists


@contextmanager
def _module_speedups(module: Any, on: bool) -> Iterator[None]:
    old = module._USE_SPEEDUPS
    module._USE_SPEEDUPS = on
    try:
        yield
    finally:
        module._USE_SPEEDUPS = old


def _both(module: Any, fn: Callable[..., Any], *args: Any, public: bool = False) -> None:
    """``fn(*args)`` gives equal values of the same types, or the same error, on both paths.

    With ``public`` (a call of the public surface) that error is a ``CortexError`` on both;
    internal helpers may raise what their callers turn into one.
    """
    outcomes = []
    for on in (False, True):
        with _module_speedups(module, on):
            try:
                outcomes.append(("ok", fn(*args)))
            except Exception as exc:
                outcomes.append((type(exc), str(exc)))
    (py_kind, py), (c_kind, c) = outcomes
    assert py_kind == c_kind, (args, outcomes)
    if py_kind == "ok":
        assert type(py) is type(c) and py == c, (args, outcomes)
        if isinstance(py, list):
            assert [type(x) for x in py] == [type(x) for x in c]
    else:
        assert py == c
        assert not public or issubclass(py_kind, CortexError), (args, outcomes)


_ASCII = st.characters(max_codepoint=127)
_TOKEN_TEXT = st.text(_ASCII, max_size=80) | st.text(max_size=20)


@given(_TOKEN_TEXT)
@example("")
@example("Hello, World! rtx4090 3.5 2023-05-08 under_score")
@example("x" * 64 + " " + "Y" * 65 + "z" * 200)
@example("\x00A\x7fB\tc")
@example("Zürich ZURICH")
def test_tokenize_paths_agree(s: str) -> None:
    from cortex.index import text

    _both(text, text.tokenize, s)
    if not s.isascii():
        assert sp.ascii_tokens(s) is None


_TERMS = st.lists(
    st.text(max_size=4)
    | st.sampled_from(["", "\x00", "a\x00b", "é", "a", "b", "東", "\U00020000"]),
    max_size=30,
)


@given(_TERMS)
@example([])
@example(["b", "a", "b", "c", "a", "b"])
@example(["a", ""])
@example(["é", "e", "z", "\U00020000", "\uffff"])
def test_count_terms_paths_agree(terms: list[str]) -> None:
    from cortex.index import lexical

    _both(lexical, lexical.count_terms, terms)


def test_count_terms_refuses_what_cannot_be_a_key() -> None:
    assert sp.count_terms(["a", ""]) is None
    assert sp.count_terms(["a\x00"]) is None
    assert sp.count_terms(["a", 1]) is None
    with pytest.raises(TypeError):
        sp.count_terms(("a",))


_ITEMS = st.lists(
    st.text(_ASCII, max_size=30)
    | st.text(max_size=3)
    | st.sampled_from(["", "x" * 23, "x" * 24, "x" * 255, "x" * 256, 1, None, b"a"]),
    max_size=30,
)


@given(_ITEMS, st.sampled_from([1, 23, 24, 64, 255]), st.booleans())
@example([], 64, False)
@example(["a"] * 24, 255, True)
@example(["x" * 255], 255, False)
def test_ascii_text_lists_agree(items: list[Any], max_chars: int, as_tuple: bool) -> None:
    v = tuple(items) if as_tuple else items
    assert sp.encode_ascii_texts(v, max_chars) == codec._ascii_texts(v, max_chars)


@given(_ITEMS, st.booleans())
@example(["a", "a"], False)
@example(["t" * 64, "é"], True)
def test_text_list_fields_agree(items: list[Any], as_tuple: bool) -> None:
    from cortex.index.lexical import DOC_CODEC
    from cortex.model.codec import TAGS

    v = tuple(items) if as_tuple else items
    _both(codec, TAGS.enc, v)
    terms = DOC_CODEC.fields[2][3]
    _both(codec, terms.enc, v)
    # and through the public encoders: a ValidationError naming the field on both paths
    _both(codec, codec.encode_tags, v, public=True)
    _both(codec, encode_data, Identity(name="n", roles=v), public=True)


def test_encode_ascii_texts_arguments() -> None:
    assert sp.encode_ascii_texts("ab", 64) is None  # a str is not a list
    assert sp.encode_ascii_texts(["ab"] * 300, 64) == codec._head(4, 300) + b"\x62ab" * 300
    for bad in (0, 256):
        with pytest.raises(ValueError):
            sp.encode_ascii_texts([], bad)


_PENDING = st.dictionaries(
    st.text(max_size=3) | st.sampled_from(["", "\x00", "a\x00", "é", "\ud800", "東"]),
    st.dictionaries(st.binary(min_size=0, max_size=3), st.binary(max_size=3), max_size=4),
    max_size=6,
)


@given(_PENDING, st.lists(st.text(max_size=3), max_size=8), st.binary(max_size=3))
def test_add_postings_agree(
    pending: dict[str, dict[bytes, bytes]], terms: list[str], raw: bytes
) -> None:
    from cortex.index import lexical

    values = [t.encode("utf-8", "surrogatepass") for t in terms]
    a = {k: dict(v) for k, v in pending.items()}
    b = {k: dict(v) for k, v in pending.items()}
    sp.add_postings(a, terms, values, raw)
    lexical._add_postings(b, terms, values, raw)
    assert a == b
    assert [list(g) for g in a.values()] == [list(g) for g in b.values()]  # insertion order


def test_posting_helpers_arguments() -> None:
    with pytest.raises(ValueError):
        sp.add_postings({}, ["a"], [], b"x")
    with pytest.raises(TypeError):
        sp.add_postings({}, ("a",), [b"v"], b"x")


def test_indexer_paths_write_the_same(tmp_path: Path) -> None:
    """A batch indexed with the C helpers leaves exactly the store the Python path leaves."""
    from cortex.index import lexical
    from cortex.storage.kv import LmdbKV

    docs = {
        MemoryId(bytes([i]) * 16): ["b", "a", "é", "a", f"t{i % 3}", "東"][: 2 + i % 5]
        for i in range(1, 12)
    }
    stores = []
    for on in (False, True):
        kv = LmdbKV(tmp_path / f"kv-{on}")
        with _module_speedups(lexical, on):

            def fn(txn: Any) -> None:
                lex = lexical.Indexer(txn)
                rows = {}
                for m, terms in docs.items():
                    rows[m] = lex.take_row()  # format 21: the memory's row, its number
                    lex.add(rows[m], 1, terms)
                three = MemoryId(bytes([3]) * 16)
                lex.remove(rows[three], terms=sorted(set(docs[three])))
                lex.flush()

            kv.write(fn)
        with kv.read() as txn:
            stores.append(list(txn.scan(b"")))
        kv.close()
    assert stores[0] == stores[1]


def test_an_older_extension_leaves_the_python_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """A build of an older _speedups.c (decode only) must not break writing: the flags say so."""
    from cortex.index import lexical, postings, text
    from cortex.model.codec import TAGS

    want = TAGS.enc(("alpha", "beta"))
    monkeypatch.setattr(codec, "_HAS_ASCII_TEXTS", False)
    assert TAGS.enc(("alpha", "beta")) == want
    from cortex.engine import store
    from cortex.index import vectors
    from cortex.storage import keys, kv

    for module, names in (
        (text, ("ascii_tokens",)),
        (
            lexical,
            (
                "count_terms",
                "add_postings",
                "ascii_term_counts",
                "StemTable",
                "index_doc",
                "index_new",
                "df_updates",
                "full_term_counts",
            ),
        ),
        (postings, ("block_encode", "block_decode", "append_fresh")),
        (store, ("encode_new_pair", "journal_entry", "stage_new")),
        (journal, ("journal_entry",)),
        (keys, ("index_keys",)),
        (kv, ("seal", "unseal", "sort_pairs")),
        (vectors, ("float16",)),
    ):
        assert all(hasattr(sp, n) for n in names) == module._USE_SPEEDUPS
    # the read path: without the read functions every read takes the Python path
    assert (store._READ is not None) == all(
        hasattr(sp, n)
        for n in ("read_memory", "read_head", "read_version", "memory_of", "read_current")
    )


# -- the records of a new memory: its sealed head and version, index keys, journal entry


def _sealed_pair(head: Any, version: Any) -> tuple[bytes, bytes] | None:
    """The definition: each record by its generic encoder, sealed; None when one is invalid."""
    from cortex.storage.kv import seal

    try:
        return seal(encode_head(head)), seal(encode_version(version))
    except ValidationError:
        return None


def _utc(t: datetime) -> datetime:
    return t.astimezone(UTC)


@st.composite
def _store_pairs(draw: st.DrawFn) -> tuple[Any, Any]:
    """A head and version shaped as the store makes them (the C path's case), some fields odd."""
    from cortex.model.codec import DEFAULT_PROVENANCE
    from tests.strategies import forms, frames, respell, tags

    version = draw(versions(purged=False))
    head = draw(heads(id=version.id, type=version.type, current_version=version.version))
    shared = draw(st.one_of(st.none(), forms()))
    texts = codec.data_texts(version.data) if version.data else []
    if shared is not None and texts and draw(st.booleans()):  # a medium holding a data text
        _, body, n = draw(st.sampled_from(texts))
        text = version.data[body : body + n].decode()
        pre, post = draw(st.sampled_from(["", "prefers "])), draw(st.sampled_from(["", " (x)"]))
        shared = msgspec.structs.replace(shared, medium=pre + text + post)
    head = msgspec.structs.replace(
        head,
        tombstone=None,
        embedding_ref=None,
        tags=draw(tags()),
        frames=draw(frames()),
        forms=shared,
        created_at=_utc(head.created_at),
        last_updated_at=_utc(head.last_updated_at),
    )
    version = msgspec.structs.replace(
        version,
        forms=shared,
        created_at=_utc(version.created_at),
        provenance=DEFAULT_PROVENANCE if draw(st.integers(0, 3)) else version.provenance,
        expires_at=None if version.expires_at is None else _utc(version.expires_at),
        valid_from=None if version.valid_from is None else _utc(version.valid_from),
        valid_until=None if version.valid_until is None else _utc(version.valid_until),
    )
    # now and then one field spelled another way, or broken
    odd = draw(st.integers(0, 9))
    if odd == 0:
        name = draw(st.sampled_from(["tags", "frames", "importance", "visibility", "created_at"]))
        head = msgspec.structs.replace(head, **{name: respell(getattr(head, name), draw)})
    elif odd == 1:
        name = draw(st.sampled_from(["confidence", "created_by", "expires_at", "valid_from"]))
        version = msgspec.structs.replace(version, **{name: respell(getattr(version, name), draw)})
    elif odd == 2:
        head = msgspec.structs.replace(head, tags=head.tags + head.tags[:1])
    return head, version


def _pinned_pair(**changes: Any) -> tuple[Any, Any]:
    """A store-shaped pair with ``changes`` (``head.x`` / ``version.x`` / ``forms``)."""
    from cortex.model.records import Forms
    from tests.test_codec import _PAIR_HEAD, _PAIR_VERSION

    t0 = datetime(2026, 1, 2, 3, 4, 5, 678_901, tzinfo=UTC)
    forms = changes.pop("forms", Forms(short="s", medium="m — ü"))
    head = msgspec.structs.replace(_PAIR_HEAD, created_at=t0, last_updated_at=t0, forms=forms)
    version = msgspec.structs.replace(_PAIR_VERSION, created_at=t0, forms=forms)
    h = {k[5:]: v for k, v in changes.items() if k.startswith("head_")}
    v = {k[8:]: v for k, v in changes.items() if k.startswith("version_")}
    return msgspec.structs.replace(head, **h), msgspec.structs.replace(version, **v)


@settings(max_examples=300)
@given(_store_pairs())
def test_new_pair_is_the_sealed_head_and_version(pair: tuple[Any, Any]) -> None:
    from cortex.model.codec import NEW_PAIR_PLAN

    head, version = pair
    got = sp.encode_new_pair(head, version, NEW_PAIR_PLAN)
    if got is not None:  # None: the Python path runs (and names any error)
        assert got == _sealed_pair(head, version)


_LONG: Final = "x" * 16_384


@pytest.mark.parametrize(
    ("changes", "taken"),
    [
        ({}, True),
        ({"forms": None}, True),
        ({"forms": msgspec.structs.replace(_pinned_pair()[0].forms, medium="Zoë")}, True),
        ({"forms": msgspec.structs.replace(_pinned_pair()[0].forms, medium="e\u0301")}, False),
        ({"forms": msgspec.structs.replace(_pinned_pair()[0].forms, medium="\ud800")}, False),
        ({"forms": msgspec.structs.replace(_pinned_pair()[0].forms, medium="😀" * 4096)}, True),
        ({"forms": msgspec.structs.replace(_pinned_pair()[0].forms, medium=_LONG)}, True),
        ({"forms": msgspec.structs.replace(_pinned_pair()[0].forms, medium=_LONG + "x")}, False),
        ({"forms": msgspec.structs.replace(_pinned_pair()[0].forms, short="")}, False),
        ({"head_tags": ()}, True),
        ({"head_tags": None}, True),
        ({"head_tags": ["a", "b"]}, True),
        ({"head_tags": tuple(f"t{i}" for i in range(16))}, True),
        ({"head_tags": tuple(f"t{i}" for i in range(17))}, False),
        ({"head_tags": ("a", "a")}, False),
        ({"head_tags": ("x" * 64, "é" * 32)}, True),
        ({"head_tags": ("x" * 65,)}, False),
        ({"head_tags": ("é" * 33,)}, False),
        ({"head_tags": ("",)}, False),
        ({"head_tags": (1,)}, False),
        ({"head_tags": "ab"}, False),
        ({"head_frames": ()}, True),
        ({"head_frames": _pinned_pair()[0].frames * 2}, False),
        ({"head_frames": list(_pinned_pair()[0].frames)}, True),
        ({"head_actor_scope": "é" * 128}, True),
        ({"head_actor_scope": "é" * 129}, False),
        ({"head_actor_scope": "x" * 256}, True),
        ({"head_importance": 10}, True),
        ({"head_importance": 11}, False),
        ({"head_importance": True}, False),
        ({"head_importance": 5.0}, False),
        ({"head_visibility": "scoped"}, False),
        ({"head_current_version": 2**63 - 1, "version_version": 2**63 - 1}, True),
        ({"head_current_version": 300, "version_version": 300}, True),
        ({"head_current_version": 2, "version_version": 1}, False),
        ({"head_current_version": 0, "version_version": 0}, False),
        ({"head_created_at": datetime(1, 1, 1, tzinfo=UTC)}, True),
        ({"head_created_at": datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)}, True),
        ({"head_created_at": datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)}, True),
        ({"head_created_at": datetime(2024, 2, 29, 12, tzinfo=UTC)}, True),
        ({"head_created_at": datetime(2026, 1, 1)}, False),
        ({"head_created_at": datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=1)))}, False),
        ({"version_confidence": 0.5}, True),
        ({"version_confidence": 0.1}, True),
        ({"version_confidence": 0.10000000149011612}, True),
        ({"version_confidence": 2.0**-24}, True),
        ({"version_confidence": 0.0}, True),
        ({"version_confidence": -0.0}, True),
        ({"version_confidence": 1}, False),
        ({"version_confidence": math.nan}, False),
        ({"version_confidence": 1.5}, False),
        ({"version_forms_override": True}, True),
        ({"version_forms_override": 1}, False),
        ({"version_expires_at": datetime(2030, 1, 1, tzinfo=UTC)}, True),
        ({"version_valid_from": datetime(2020, 1, 1, tzinfo=UTC)}, True),
        ({"version_valid_until": datetime(2030, 1, 1, tzinfo=UTC)}, True),
        ({"version_provenance": Provenance(source=SourceKind.USER_INPUT)}, False),
        ({"version_created_by": ""}, False),
        ({"version_created_by": None}, False),
        ({"version_data": b""}, False),
        ({"version_data": bytearray(b"x")}, False),
        ({"version_hash": b"short"}, False),
        ({"version_id": MemoryId(bytes(range(16)))}, False),  # equal, not the same object
        ({"head_tombstone": "x"}, False),
        ({"head_has_counters": True}, True),  # an update of a used memory (format 11)
        ({"head_has_counters": 1}, False),
        ({"head_has_counters": None}, False),
    ],
)
def test_new_pair_pinned_cases(changes: dict[str, Any], taken: bool) -> None:
    from cortex.model.codec import NEW_PAIR_PLAN

    head, version = _pinned_pair(**changes)
    got = sp.encode_new_pair(head, version, NEW_PAIR_PLAN)
    assert (got is not None) == taken
    if got is not None:
        assert got == _sealed_pair(head, version)


def test_new_pair_arguments() -> None:
    from cortex.model.codec import NEW_PAIR_PLAN

    head, version = _pinned_pair()
    assert sp.encode_new_pair(version, head, NEW_PAIR_PLAN) is None
    assert sp.encode_new_pair(head, None, NEW_PAIR_PLAN) is None
    with pytest.raises(TypeError):
        sp.encode_new_pair(head, version)
    with pytest.raises(TypeError):
        sp.encode_new_pair(head, version, NEW_PAIR_PLAN[:-1])
    with pytest.raises(TypeError):
        sp.encode_new_pair(head, version, list(NEW_PAIR_PLAN))
    bad = list(NEW_PAIR_PLAN)
    bad[0] = "Head"
    with pytest.raises(TypeError):
        sp.encode_new_pair(head, version, tuple(bad))
    bad = list(NEW_PAIR_PLAN)
    bad[-1] = 0
    with pytest.raises(ValueError):
        sp.encode_new_pair(head, version, tuple(bad))
    bad = list(NEW_PAIR_PLAN)
    bad[-1] = "many"
    with pytest.raises(TypeError):
        sp.encode_new_pair(head, version, tuple(bad))
    # fields in another order than the C encoder knows: it declines
    bad = list(NEW_PAIR_PLAN)
    bad[14] = tuple(reversed(bad[14]))
    assert sp.encode_new_pair(head, version, tuple(bad)) is None
    # an astuple that gives no tuple of the fields
    bad = list(NEW_PAIR_PLAN)
    bad[16] = lambda s: None
    with pytest.raises(TypeError):
        sp.encode_new_pair(head, version, tuple(bad))


@given(st.binary(max_size=600))
@example(b"")
@example(b"\x00" * 8)
@example(bytes(range(256)) * 3)
def test_seal_is_zlib_crc32(payload: bytes) -> None:
    import zlib

    assert sp.seal(payload) == payload + zlib.crc32(payload).to_bytes(4, "big")


def test_float16_is_numpys_rounding() -> None:
    """float16 gives numpy's bytes: unit vectors, random finite values, every half's neighbours."""
    import numpy as np

    from cortex.index import vectors

    rng = np.random.default_rng(18)
    for _ in range(50):
        v = rng.standard_normal(384).astype("<f4")
        v /= np.linalg.norm(v)
        raw = v.tobytes()
        assert sp.float16(raw) == np.frombuffer(raw, "<f4").astype("<f2").tobytes()
        rec = vectors.vector_record("m", 384, 1, raw, float16=True)
        assert rec.vector == np.frombuffer(raw, "<f4").astype("<f2").tobytes()
    f = rng.integers(0, 2**32, size=200_000, dtype=np.uint64).astype(np.uint32).view("<f4")
    f = f[np.isfinite(f) & (np.abs(f) < 65520)]
    halves = np.arange(0x7C00, dtype=np.uint16).view("<f2").astype(np.float64)
    mids = ((halves[:-1] + halves[1:]) / 2).astype("<f4")  # exact in float32: the ties
    edges = np.concatenate(
        [
            halves.astype("<f4"),
            mids,
            np.nextafter(mids, np.float32(0)),
            np.nextafter(mids, np.float32(np.inf)),
            np.array([2.0**-25, 2.0**-24, 1.5 * 2.0**-25, 2.0**-26, 65519.0, 0.0], "<f4"),
        ]
    ).astype("<f4")
    edges = edges[np.abs(edges) < 65520]
    for xs in (f, edges, -edges, edges[:13]):  # (13: a tail past the last 8 values)
        raw = xs.astype("<f4").tobytes()
        with np.errstate(all="ignore"):
            want = np.frombuffer(raw, "<f4").astype("<f2").tobytes()
        assert sp.float16(raw) == want
        assert sp.float16(raw, True) == want  # value by value, as without the CPU's


def test_float16_declines_what_numpy_decides() -> None:
    """An infinity, a NaN, a value that overflows, a cut length or not bytes: None (numpy's)."""
    import numpy as np

    for bad in (np.inf, -np.inf, np.nan, 65520.0, -70000.0, 3.4e38):
        assert sp.float16(np.array([0.5, bad], "<f4").tobytes()) is None
    assert sp.float16(b"abc") is None
    assert sp.float16(bytearray(4)) is None
    assert sp.float16(b"") == b""


def test_seal_arguments() -> None:
    from cortex.storage import kv

    with pytest.raises(TypeError):
        sp.seal(bytearray(b"x"))
    _both(kv, kv.seal, b"payload")
    _both(kv, kv.seal, bytearray(b"payload"))  # not bytes: zlib's path, the same bytes


def test_content_hashes_are_hashlibs() -> None:
    """The accelerator keeps no SHA-256 of its own: content hashes are hashlib's (OpenSSL)."""
    import hashlib

    from cortex.model import hashing

    assert not hasattr(sp, "sha256")
    for t in MemoryType:
        data = b"\xa1\x01\x02" * 30
        want = hashlib.sha256(hashing.DOMAIN + bytes((t.value,)) + data).digest()
        assert hashing.content_hash(t, data) == want
        assert hashing.content_hash(t, bytearray(data)) == want
    for t, data in ((None, b"x"), ("Fact", b"x"), (MemoryType.FACT, "x"), (99, b"")):
        with pytest.raises(CortexError):
            hashing.content_hash(t, data)  # type: ignore[arg-type]


@given(st.binary(max_size=300), st.integers(0, 303), st.integers(0, 255))
def test_unseal_is_the_checked_payload(payload: bytes, at: int, flip: int) -> None:
    """C and Python unseal agree on every value, sealed or damaged (one byte changed)."""
    from cortex.storage import kv

    sealed = kv.seal(payload)
    damaged = bytearray(sealed)
    damaged[at % len(damaged)] ^= flip
    for value in (sealed, bytes(damaged), sealed[:-1], b""):
        _both(kv, kv.unseal, b"k", value, public=True)  # damage: IntegrityError on both
        whole = len(value) >= 5 and kv.seal(value[:-4]) == value
        assert sp.unseal(value) == (value[:-4] if whole else None)
    with pytest.raises(TypeError):
        sp.unseal(bytearray(sealed))


def _index_args(draw: st.DrawFn) -> tuple[Any, ...]:
    from cortex.model.enums import ObjKind, Verb
    from cortex.model.records import FrameRef
    from tests.strategies import frames, tags

    mtype = draw(st.sampled_from([*MemoryType, 2, 99, "Fact"]))
    created = draw(st.sampled_from([0, 1, 2**64 - 1, 2**64, -1, True]) | st.integers(0, 2**62))
    mid = draw(st.sampled_from([MemoryId(bytes(range(16))), MemoryId(bytes(16))]))
    the_tags: Any = draw(tags() | st.lists(st.sampled_from(["a", "é", "\ud800", 3]), max_size=3))
    the_frames: Any = draw(
        frames()
        | st.lists(
            st.builds(
                FrameRef,
                verb=st.sampled_from([Verb.FIND, 2, 300, "find"]),
                obj_kind=st.sampled_from([ObjKind.AGENT, 1, -1]),
                obj_ref=st.sampled_from(["svc", "Zoë", "\ud800", 5]),
            ),
            max_size=3,
        )
    )
    if draw(st.booleans()):
        the_tags, the_frames = list(the_tags), list(the_frames)
    actor_obj = draw(st.sampled_from([True, False, 1, None]))
    return mtype, created, mid, the_tags, the_frames, actor_obj


@given(st.composite(_index_args)())
@example((MemoryType.EVENT, 2**60, MemoryId(bytes(16)), ("a", "b"), (), True))
def test_index_keys_paths_agree(args: tuple[Any, ...]) -> None:
    from cortex.storage import keys

    mtype, created, mid, the_tags, the_frames, actor_obj = args

    def fn() -> list[bytes]:
        return keys.index_keys(mtype, created, mid, the_tags, the_frames, actor_obj=actor_obj)

    _both(keys, fn)


def test_index_keys_arguments() -> None:
    from cortex.storage.keys import INDEX_PLAN

    args = (MemoryType.FACT, 5, bytes(16), ("a",), (), False)
    assert isinstance(sp.index_keys(INDEX_PLAN, *args), list)
    with pytest.raises(TypeError):
        sp.index_keys(INDEX_PLAN, *args[:-1])
    with pytest.raises(TypeError):
        sp.index_keys(INDEX_PLAN[:-1], *args)
    with pytest.raises(TypeError):
        sp.index_keys((1,) * len(INDEX_PLAN), *args)
    assert sp.index_keys(INDEX_PLAN, MemoryType.FACT, 5, bytes(65), (), (), False) is None
    assert sp.index_keys(INDEX_PLAN, [], 5, bytes(16), (), (), False) is None  # unhashable
    # a hash function that raises: the same error as the Python path's
    plan = (*INDEX_PLAN[:6], lambda t: 1 / 0, INDEX_PLAN[7])
    with pytest.raises(ZeroDivisionError):
        sp.index_keys(plan, *args)
    plan = (*INDEX_PLAN[:6], lambda t: "not bytes", INDEX_PLAN[7])
    assert sp.index_keys(plan, *args) is None


@given(
    seq=st.sampled_from([1, 23, 24, 255, 256, 2**32, 2**63 - 2]) | st.integers(1, 10**6),
    version=st.sampled_from([1, 24, 2**16, 2**63 - 1]),
    mtype=st.sampled_from(list(MemoryType)),
    digest=st.binary(min_size=32, max_size=32),
    raw=st.binary(min_size=16, max_size=16),
    by=st.sampled_from(["agent", "é" * 10, "x" * 256]),
)
def test_journal_entry_paths_agree(
    *, seq: int, version: int, mtype: MemoryType, digest: bytes, raw: bytes, by: str
) -> None:
    from cortex.engine import store

    def entries() -> list[Any]:
        j = journal.JournalWriter.__new__(journal.JournalWriter)
        j.txn, j.at, j.by = None, datetime(2026, 1, 2, tzinfo=UTC), by  # type: ignore[assignment]
        j._write_shared, j.seq, j.prev = None, seq - 1, bytes(range(32))
        mid = MemoryId(raw)
        out = [j.write_entry(mid, mtype, version, digest) for _ in range(2)]
        return [*out, j.seq, j.prev]

    _both(store, entries)


def test_journal_entry_arguments() -> None:
    import hashlib

    from cortex.storage.keys import JOURNAL

    ok = (JOURNAL, b"\x02\x02", 1, bytes(32), bytes(16), MemoryType.FACT, 1, bytes(32))
    key, value, digest = sp.journal_entry(*ok)
    assert key == JOURNAL + (1).to_bytes(8, "big")
    assert digest == hashlib.sha256(value[:-4]).digest()
    with pytest.raises(TypeError):
        sp.journal_entry(*ok[:-1])
    with pytest.raises(TypeError):
        sp.journal_entry(*ok, None)
    with pytest.raises(TypeError):
        sp.journal_entry("j/", *ok[1:])
    for i, odd in [(2, 0), (2, 2**63), (3, bytes(31)), (4, bytes(15)), (5, 2), (5, True)]:
        args = list(ok)
        args[i] = odd
        assert sp.journal_entry(*args) is None, (i, odd)
    for i, odd in [(6, 0), (6, 1.0), (7, bytearray(32)), (1, None)]:
        args = list(ok)
        args[i] = odd
        assert sp.journal_entry(*args) is None, (i, odd)


# -- a batch's staging (cortex.engine.store.Store._stage_new): the loop of new memories in one call


def _staged(tmp_path: Path, items: list[Any], *, vectors: set[int] = frozenset()) -> Any:
    """What ``_stage_new`` leaves for ``items``: the puts, the lexical state, the journal's."""
    from cortex.engine import store
    from cortex.index import lexical

    now = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    s = store.Store.open(
        tmp_path / f"s{len(list(tmp_path.iterdir()))}", actor="agent", clock=lambda: now
    )
    prepared = []
    for i, (data, tags, frames) in enumerate(items):
        spec = values.NewMemory(
            data=data, tags=tags, frames=frames, id=MemoryId(bytes([i + 1]) * 16)
        )
        p = s._prepare(spec, now)
        if i in vectors:
            p.vector = bytes(8)
        prepared.append(p)
    s._vector_value = lambda version, vector: b"vec" + vector  # type: ignore[method-assign]
    out: list[Any] = []

    def fn(txn: Any) -> None:
        writer = journal.JournalWriter(txn, now, "agent")
        lex = lexical.Indexer(txn)
        for p in prepared:  # format 21: rows given as ``_put_heads`` gives them
            p.row = lex.take_row()
        puts: list[tuple[bytes, bytes]] = []
        s._stage_new(prepared, puts, writer, lex)
        out.extend(
            [
                puts,
                dict(lex._docs),
                {t: dict(g) for t, g in lex._pending.items()},
                {t: bytes(b) for t, b in lex._fresh.items()},
                (lex._documents, lex._total, lex._postings, lex._next),
                sorted(p.row for p in prepared),
                (writer.seq, writer.prev),
            ]
        )
        raise _Rollback

    with suppress(_Rollback):
        s._kv.write(fn)
    s.close()
    return out


class _Rollback(Exception):
    pass


def test_stage_new_paths_agree(tmp_path: Path) -> None:
    """The C loop stages exactly what the Python loop stages, and hands over where it stops."""
    from cortex.model.enums import GoalStatus, Outcome
    from cortex.model.records import Event, Fact, FrameRef, Goal, Identity

    frame = FrameRef(verb="find", obj_kind="knowledge", obj_ref="topic-1")
    other = FrameRef(verb="find", obj_kind="knowledge", obj_ref="topic-2")
    items = [
        (Fact(statement="alpha beta beta", subject="s", predicate="is"), ("t1", "t2"), ()),
        (Event(kind="call", outcome=Outcome.SUCCESS, summary="gamma"), (), (frame,)),
        (Goal(statement="ship it", status=GoalStatus.ACTIVE), ("t1",), (frame, other)),
        (Fact(statement="東京 ωμέγα", subject="s", predicate="is"), (), ()),  # non-ASCII terms
        (Identity(name="agent one"), (), ()),  # pinned
        (Fact(statement="delta", subject="s", predicate="is"), ("t3",), ()),
        (Goal(statement="done already", status=GoalStatus.COMPLETED), (), ()),
    ]
    from cortex.engine import store

    by_python: list[int] = []
    put_new = store.Store._put_new

    def counted(self: Any, p: Any, puts: Any) -> None:
        by_python.append(p.head.id.bytes[0] - 1)
        put_new(self, p, puts)

    for vectors in (set(), {0}, {5, 6}, set(range(len(items)))):
        staged = []
        for on in (False, True):
            by_python.clear()
            with _module_speedups(store, on), pytest.MonkeyPatch.context() as mp:
                mp.setattr(store.Store, "_put_new", counted)
                staged.append(_staged(tmp_path, items, vectors=vectors))
        assert staged[0] == staged[1], vectors
        # the C loop leaves to Python only the memory with non-ASCII terms (vectors: Python's)
        assert by_python == [3], vectors
        assert staged[0][6][0] == 1 + len(items)  # after the store's first entry
        assert sorted(staged[0][5]) == list(range(len(items)))  # numbered in order


def test_stage_new_arguments(tmp_path: Path) -> None:

    from cortex.engine.store import _STAGE_PLAN

    ok: list[Any] = [_STAGE_PLAN, [], 0, [], {}, {}, {}, b"\x02", 0, bytes(32)]
    assert sp.stage_new(*ok) == (0, 0, bytes(32), 0, 0, 0)
    with pytest.raises(TypeError):
        sp.stage_new(*ok[:-1])
    with pytest.raises(TypeError):
        sp.stage_new(_STAGE_PLAN[:-1], *ok[1:])
    with pytest.raises(TypeError):
        sp.stage_new((_STAGE_PLAN[0], b"/v/x", *_STAGE_PLAN[2:]), *ok[1:])  # a long separator
    for i, odd in [
        (1, ()),
        (2, 0.0),
        (3, ()),
        (4, []),
        (7, "x"),
        (8, 1.0),
        (9, bytearray(32)),
    ]:
        args = list(ok)
        args[i] = odd
        with pytest.raises(TypeError):
            sp.stage_new(*args)
    for i in (2, 8):
        args = list(ok)
        args[i] = -1
        with pytest.raises(ValueError):
            sp.stage_new(*args)
    # a start past the end stages nothing; something that is not a prepared memory raises
    args = list(ok)
    args[1], args[2] = [object()], 1
    assert sp.stage_new(*args)[0] == 1
    args[2] = 0
    with pytest.raises(AttributeError):
        sp.stage_new(*args)


# -- records encoded by their plan (codec.StructCodec.encode's common case in C)


def _python_encoding(codec_: StructCodec[Any], value: Any) -> bytes | None:
    """The Python encoder's bytes for ``value``; None when it refuses it."""
    try:
        return codec_.enc(value)
    except codec.Invalid:
        return None


def _odd(value: Any, draw: st.DrawFn) -> Any:
    """``value`` with one field set to something unusual: another spelling or a bad value."""
    from tests.strategies import respell

    name = draw(st.sampled_from(value.__struct_fields__))
    try:
        other = respell(getattr(value, name), draw)
    except TypeError:  # a type respell does not know (an id, a frame)
        other = getattr(value, name)
    odd = draw(
        st.sampled_from(
            [None, "", "x", "e\u0301", 0, -1, 2**70, 1.5, -0.0, True, False, (), ("a", "a"), b""]
        )
        | st.just(other)
        | st.just(datetime(2026, 1, 1))
    )
    return msgspec.structs.replace(value, **{name: odd})


@settings(max_examples=300)
@given(st.data())
def test_encode_is_the_python_encoder(data: st.DataObject) -> None:
    """C ``encode`` gives the Python encoder's bytes, or declines: never other bytes, never a
    value the Python encoder refuses."""
    t = data.draw(st.sampled_from(list(MemoryType)))
    value = data.draw(data_of_type(t))
    records: list[tuple[StructCodec[Any], Any]] = [
        (DATA_CODECS[t], value),
        (HEAD, data.draw(heads())),
        (VERSION, data.draw(versions(value))),
    ]
    for codec_, record in records:
        got = sp.encode(codec_._plan, record)
        assert got is None or got == _python_encoding(codec_, record)
        odd = _odd(record, data.draw)
        got = sp.encode(codec_._plan, odd)
        assert got is None or got == _python_encoding(codec_, odd), odd


def test_encode_takes_the_common_records() -> None:
    """Records as callers write them (ASCII text, members or labels, floats, tuples): in C."""
    from cortex.model.records import Belief, Event, Fact, Goal, Pattern, Preference

    common = [
        Fact(statement="w1 w2", subject="s1", predicate="says", confidence=0.9),
        Event(kind="interaction", outcome="success", counterparty="bob", summary="w3"),
        Preference(topic="w4 w5", polarity="prefer", strength=0.5),
        Belief(statement="w6", stance="believe", confidence=0.7),
        Goal(statement="w7", status="active"),
        Pattern(statement="w8", strength=0.25, coverage=3),
    ]
    for d in common:
        codec_ = DATA_CODECS[d.TYPE]
        assert sp.encode(codec_._plan, d) == _python_encoding(codec_, d) is not None
    with pytest.raises(TypeError):
        sp.encode(None, d)
    with pytest.raises(TypeError):
        sp.encode(codec_._plan)
    assert sp.encode(DATA_CODECS[MemoryType.GOAL]._plan, d) is None  # not its record type


def test_encode_takes_records_naming_memories() -> None:
    """An id field (a journal entry's ``id`` and ``dst``) is encoded in C: exactly a MemoryId."""
    from cortex.engine.journal import JOURNAL_CODEC, JournalEntry, JournalKind
    from cortex.model.enums import EdgeType
    from cortex.model.ids import MemoryId

    a, b = MemoryId(bytes(range(16))), MemoryId(bytes(range(16, 32)))
    entry = JournalEntry(
        seq=3,
        kind=JournalKind.ADD_EDGE,
        at=datetime(2026, 1, 1, tzinfo=UTC),
        by="me",
        prev=bytes(32),
        id=a,
        edge=EdgeType.SUPERSEDES,
        dst=b,
    )
    got = sp.encode(JOURNAL_CODEC._plan, entry)
    assert got is not None and got == _python_encoding(JOURNAL_CODEC, entry)
    assert b"\x50" + a.bytes in got and b"\x50" + b.bytes in got

    class Other(MemoryId):
        __slots__ = ()

    odd = msgspec.structs.replace(entry, dst=Other(b.bytes))
    assert sp.encode(JOURNAL_CODEC._plan, odd) is None  # not exactly a MemoryId: Python decides
    for bad in (b.bytes, str(b), 7):
        assert sp.encode(JOURNAL_CODEC._plan, msgspec.structs.replace(entry, id=bad)) is None


@given(st.lists(st.tuples(st.binary(max_size=6), st.integers()), max_size=60))
@example([(b"b", 1), (b"a", 2), (b"b", 0), (b"", 3), (b"a\x00", 4), (b"a", 5)])
def test_sort_pairs_is_a_stable_sort_by_key(pairs: list[tuple[bytes, int]]) -> None:
    from cortex.storage import kv

    for on in (False, True):
        got = list(pairs)
        with _module_speedups(kv, on):
            kv.sort_by_key(got)
        assert got == sorted(pairs, key=lambda p: p[0])


def test_sort_pairs_arguments() -> None:
    with pytest.raises(TypeError):
        sp.sort_pairs(((b"a", 1),))
    for bad in ([(b"a", 1), ("b", 2)], [(b"a",)], [[b"a", 1]], [(b"a", 1, 2)]):
        pairs = list(bad)
        with pytest.raises(TypeError):
            sp.sort_pairs(pairs)
        assert pairs == bad  # untouched


# -- the public boundary on both paths: the same CortexError, the store untouched (issue 20)


@contextmanager
def _every_speedup(on: bool) -> Iterator[None]:
    """Every module's switch of the C accelerator, on or off."""
    from cortex.engine import store
    from cortex.index import lexical, postings, text
    from cortex.storage import keys, kv

    modules = [codec, keys, kv, lexical, postings, store, journal, text]
    old = [m._USE_SPEEDUPS for m in modules]
    for m in modules:
        m._USE_SPEEDUPS = on and m._USE_SPEEDUPS
    try:
        yield
    finally:
        for m, flag in zip(modules, old, strict=True):
            m._USE_SPEEDUPS = flag


def _hostile_write(draw: st.DrawFn) -> tuple[Any, dict[str, Any]]:
    from tests.fuzz import data_arg, frames_arg, hostile, ints_arg, list_of, numbers_arg

    data = draw(data_arg())
    kw: dict[str, Any] = {}
    if draw(st.booleans()):
        kw["tags"] = draw(list_of(st.sampled_from(["a", "é", "t" * 64, "t" * 65, "\ud800", ""])))
    if draw(st.booleans()):
        kw["frames"] = draw(frames_arg())
    if draw(st.booleans()):
        kw["importance"] = draw(ints_arg(0, 10))
    if draw(st.booleans()):
        kw["confidence"] = draw(numbers_arg(0, 1))
    if draw(st.booleans()):
        kw["visibility"] = draw(st.sampled_from(["private", "scoped", 1, "nope"]) | hostile())
    # an iterator would be used up by the first path: both get its items as a list
    return data, {k: list(v) if isinstance(v, Iterator) else v for k, v in kw.items()}


@settings(max_examples=150)
@given(st.data())
def test_writes_agree_and_refuse_alike(tmp_path_factory: pytest.TempPathFactory, data: Any) -> None:
    """A write of the same (often hostile) input: the same records on both paths, or the same
    CortexError on both with the store unchanged."""
    from cortex import Cortex
    from tests.qsupport import Clock, digest_of_store

    data_, kw = _hostile_write(data.draw)
    mid = MemoryId(bytes(range(16)))
    outcomes = []
    for on in (False, True):
        root = tmp_path_factory.mktemp("parity")
        with _every_speedup(on), Cortex.open(root / "s", actor="me", clock=Clock()) as cx:
            before = digest_of_store(cx)
            try:
                cx.write(data_, id=mid, **kw)
            except Exception as exc:
                assert isinstance(exc, CortexError), (on, type(exc), exc)
                assert digest_of_store(cx) == before
                outcomes.append((type(exc), str(exc)))
            else:
                outcomes.append(("ok", digest_of_store(cx)))
    assert outcomes[0] == outcomes[1], (data_, kw, outcomes)


@settings(max_examples=150)
@given(st.data())
def test_decoders_refuse_alike(data: Any) -> None:
    """Any bytes to the public decoders: the same value on both paths, or the same CortexError."""
    from tests.fuzz import HOSTILE_CBOR

    raw = data.draw(
        st.sampled_from(HOSTILE_CBOR)
        | st.binary(max_size=40)
        | data_of_type(MemoryType.EVENT).map(encode_data)
    )
    t = data.draw(st.sampled_from(list(MemoryType)))
    for fn, args in (
        (decode_data, (t, raw)),
        (decode_head, (raw,)),
        (decode_version, (raw,)),
    ):
        py, fast = (_outcome(on, fn, *args) for on in (False, True))
        assert py[0] == fast[0] and (py[0] == "ok" or py[1] == fast[1]), (fn, raw, py, fast)
        assert py[0] == "ok" or issubclass(py[0], CortexError), (fn, raw, py)


# -- the read path: a memory's head, version and data from their stored values (store._READ)


ROW = 7
"""The row of the memory of the read cases (format 21: its head and versions are keyed by it)."""


def _py_head(mid: MemoryId, hraw: Any) -> Any:
    """The definition: ``Store._head_from`` at ``ROW`` (IntegrityError without a value)."""
    from cortex.engine.store import Store

    return Store._head_from(mid, hraw, ROW)


def _py_version(mid: MemoryId, n: int, vraw: Any) -> Any:
    """The definition: ``Store._checked_version`` of version ``n`` (no sha256: a read's checks)."""
    from cortex.engine.store import Store
    from cortex.storage.keys import version_key

    return Store._checked_version(version_key(ROW, n), vraw, mid, n)


def _py_memory(mid: MemoryId, hraw: Any, vkey: Any, vraw: Any, n: int) -> Any:
    """The definition: ``resolve`` (``n`` >= 1) / ``resolve_latest`` (0) from the values read."""
    from cortex.engine import store as store_module
    from cortex.errors import IntegrityError, NotFoundError
    from cortex.storage.keys import version_key

    head = _py_head(mid, hraw)
    if n == 0:
        n = head.current_version
    elif n > head.current_version:
        raise NotFoundError(f"no version {n} of memory {mid}")
    if vkey != version_key(ROW, n) or vraw is None:
        raise IntegrityError("not the version's key")
    old, store_module._READ = store_module._READ, None
    try:
        v = store_module.Store._checked_version(vkey, vraw, mid, n)
        return store_module.Store._memory(head, v)
    finally:
        store_module._READ = old


def _agree(c: Any, fn: Callable[..., Any], *args: Any) -> None:
    """The C read function ``c`` returns what the definition ``fn`` returns, or None (declines);
    it must decline wherever the definition raises."""
    try:
        want = ("ok", fn(*args))
    except CortexError as exc:
        want = (type(exc), str(exc))
    if c is None:
        return
    assert want[0] == "ok", ("the C path accepted what the Python path refuses", want, c)
    assert same(c, want[1]), (c, want[1])


def _damage(draw: st.DrawFn, raw: bytes, *, reseal: bool) -> bytes:
    """``raw`` with a byte changed, a piece cut or added; resealed (a valid CRC) or not."""
    from cortex.storage.kv import seal

    payload = raw[:-4]
    how = draw(st.integers(0, 2))
    at = draw(st.integers(0, max(0, len(payload) - 1)))
    if how == 0 and payload:
        payload = (
            payload[:at] + bytes([payload[at] ^ draw(st.integers(1, 255))]) + payload[at + 1 :]
        )
    elif how == 1:
        payload = payload[:at]
    else:
        payload = payload[:at] + draw(st.binary(min_size=1, max_size=3)) + payload[at:]
    return seal(payload) if reseal else payload + raw[-4:]


@st.composite
def _stored(draw: st.DrawFn) -> tuple[Any, ...]:
    """(mid, hraw, vkey, vraw, n): a stored head and version as the store reads them, often
    changed: damaged, resealed after a change, another memory's, another version's, missing."""
    from cortex.engine.store import _READ
    from cortex.storage.keys import version_key
    from cortex.storage.kv import seal

    assert _READ is not None
    head, version = draw(_store_pairs())
    try:
        hraw, vraw = seal(encode_head(head)), seal(encode_version(version))
    except ValidationError:
        assume(False)
    mid, n = head.id, draw(st.sampled_from([0, version.version]))
    vkey = version_key(ROW, version.version)
    odd = draw(st.integers(0, 21))  # half of them as stored
    other = (
        MemoryId(bytes(15) + b"\x01") if mid.bytes != bytes(15) + b"\x01" else MemoryId(bytes(16))
    )
    if odd == 0:
        hraw = _damage(draw, hraw, reseal=draw(st.booleans()))
    elif odd == 1:
        vraw = _damage(draw, vraw, reseal=draw(st.booleans()))
    elif odd == 2:
        mid = other  # the values are another memory's
    elif odd == 3:
        hraw = None
    elif odd == 4:
        vraw = None
    elif odd == 5:
        vkey = version_key(ROW, version.version + 1 if version.version < 2**63 - 1 else 1)
    elif odd == 6:
        n = version.version + 1 if version.version < 2**63 - 1 else 2**63 - 1
    elif odd == 7:  # the head points past the version read
        bumped = msgspec.structs.replace(
            head, current_version=min(2**63 - 1, head.current_version + 1)
        )
        hraw = seal(encode_head(bumped))
    elif odd == 8:  # the data no longer matches its hash: a read no longer checks it
        version = msgspec.structs.replace(version, hash=bytes(32))
        vraw = seal(encode_version(version))
    elif odd == 9:
        vkey = vkey[:-1]
    elif odd == 10:
        hraw = bytearray(hraw)
    return mid, hraw, vkey, vraw, n


@settings(max_examples=300)
@given(_stored())
def test_read_memory_is_the_python_read(case: tuple[Any, ...]) -> None:
    from cortex.engine.store import _READ

    mid, hraw, vkey, vraw, n = case
    got = sp.read_memory(_READ, mid.bytes, hraw, vkey, vraw, n)
    _agree(got, _py_memory, mid, hraw, vkey, vraw, n)


@settings(max_examples=300)
@given(_stored())
def test_read_head_and_version_are_the_python_reads(case: tuple[Any, ...]) -> None:
    from cortex.engine.store import _READ

    mid, hraw, _, vraw, n = case
    _agree(sp.read_head(_READ, mid.bytes, hraw), _py_head, mid, hraw)
    if vraw is not None:
        v = n or 1
        _agree(sp.read_version(_READ, mid.bytes, v, vraw), _py_version, mid, v, vraw)


def _py_current(mid: MemoryId, get: Callable[[bytes], Any]) -> Any:
    """The definition: the row (``id/``), ``Store._head_from`` then ``Store._version`` of the
    version it points at."""
    from cortex.engine.heads import decode_row
    from cortex.engine.store import Store
    from cortex.errors import IntegrityError, NotFoundError
    from cortex.storage.keys import head_key, id_key, version_key

    rraw = get(id_key(mid))
    if rraw is None:
        raise NotFoundError(f"no memory {mid}")
    row = decode_row(id_key(mid), rraw)
    head = Store._head_from(mid, get(head_key(row)), row)
    vkey = version_key(row, head.current_version)
    raw = get(vkey)
    if raw is None:
        raise IntegrityError("the version is missing")
    return head, Store._checked_version(vkey, raw, mid, head.current_version)


@settings(max_examples=300)
@given(_stored(), st.booleans())
def test_read_current_is_the_python_read(case: tuple[Any, ...], as_view: bool) -> None:
    from cortex.engine.heads import encode_row
    from cortex.engine.store import _READ
    from cortex.storage.keys import head_key, id_key

    mid, hraw, vkey, vraw, _ = case
    stored = {
        k: v
        for k, v in ((id_key(mid), encode_row(ROW)), (head_key(ROW), hraw), (vkey, vraw))
        if v is not None
    }
    if as_view and stored:  # values that are not bytes: the C path declines
        k = sorted(stored)[0]
        stored[k] = memoryview(bytes(stored[k]))
    get = stored.get
    got = sp.read_current(_READ, get, mid.bytes)
    if got is not None:
        assert type(got) is tuple and len(got) == 2
    _agree(got, _py_current, mid, get)
    with pytest.raises(KeyError):  # an error of get is raised, not declined
        sp.read_current(_READ, {}.__getitem__, mid.bytes)
    # the pair (get, heads): a head read as get(key, None, heads), the rest as get(key); the
    # triple (get, heads, ids) (format 21): the row as get(key, None, ids) too
    heads, ids = object(), object()
    calls: list[tuple[Any, ...]] = []

    def routed(key: bytes, default: Any = None, db: Any = None) -> Any:
        calls.append((key, db))
        assert (db is heads) == key.startswith(b"m/")
        assert db is not ids or key.startswith(b"id/")
        return stored.get(key, default)

    paired = sp.read_current(_READ, (routed, heads), mid.bytes)
    assert type(paired) is type(got) and (got is None or same(paired, got))
    assert calls[0] == (id_key(mid), None)
    calls.clear()
    tripled = sp.read_current(_READ, (routed, heads, ids), mid.bytes)
    assert type(tripled) is type(got) and (got is None or same(tripled, got))
    assert calls[0] == (id_key(mid), ids)
    assert len(calls) == 1 or calls[1] == (head_key(ROW), heads)
    for bad in ((routed,), (routed, heads, ids, None)):
        with pytest.raises(TypeError):
            sp.read_current(_READ, bad, mid.bytes)


@settings(max_examples=200)
@given(_store_pairs(), st.integers(0, 3), st.binary(max_size=8))
def test_memory_of_is_the_python_memory(pair: tuple[Any, Any], odd: int, junk: bytes) -> None:
    from cortex.engine import store as store_module

    head, version = pair
    if odd == 1:  # data that does not decode: the Python path raises, C declines
        version = msgspec.structs.replace(version, data=junk or b"\xff")
    elif odd == 2:  # purged
        version = msgspec.structs.replace(version, data=None)
    got = sp.memory_of(store_module._READ, head, version)

    def py(h: Any, v: Any) -> Any:
        old, store_module._READ = store_module._READ, None
        try:
            return store_module.Store._memory(h, v)
        finally:
            store_module._READ = old

    _agree(got, py, head, version)


class _SubTime(datetime):
    """A datetime subclass: the C ``micros`` declines it (a subclass may change arithmetic)."""


def _py_micros(when: Any) -> Any:
    """``to_micros`` by its Python definition: the value, or the error's class and message."""
    old, codec._MICROS = codec._MICROS, None
    try:
        return codec.to_micros(when)
    except ValidationError as exc:
        return (type(exc), str(exc))
    finally:
        codec._MICROS = old


@settings(max_examples=400)
@given(
    st.datetimes(timezones=st.one_of(st.just(UTC), st.timezones(), st.none())),
    st.integers(0, 3),
)
@example(datetime(1, 1, 1, tzinfo=UTC), 0)
@example(datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC), 0)
@example(datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC), 0)
@example(datetime(2000, 2, 29, 12, tzinfo=timezone(timedelta(0))), 0)
@example(datetime(2000, 2, 29, 12, tzinfo=timezone(timedelta(hours=1))), 0)
@example(datetime(2000, 2, 29, 12, tzinfo=UTC), 1)
def test_micros_is_to_micros(when: datetime, odd: int) -> None:
    value: Any = when
    if odd == 1:  # a subclass: declined, the Python path converts it
        value = _SubTime.fromtimestamp(when.timestamp() if when.tzinfo else 0.0, UTC)
    elif odd == 2:  # no datetime at all: declined, the Python path raises
        value = when.date()
    got = sp.micros(value)
    want = _py_micros(value)
    if type(value) is datetime and value.tzinfo is UTC:
        assert got == want and type(got) is int
    else:
        assert got is None
    if got is None:  # what the public function gives is still the definition's
        try:
            assert codec.to_micros(value) == want
        except ValidationError as exc:
            assert (type(exc), str(exc)) == want
    for bad in (None, 0, "2020-01-01", b""):
        assert sp.micros(bad) is None


_LMDB_ENV: list[Any] = []


def _scratch_env() -> Any:
    """One small LMDB environment for the read_latest cases (emptied by each)."""
    import atexit
    import shutil
    import tempfile

    import lmdb

    if not _LMDB_ENV:
        d = tempfile.mkdtemp(prefix="cortex-read-latest-")
        atexit.register(shutil.rmtree, d, True)
        _LMDB_ENV.append(lmdb.open(d, map_size=1 << 24, lock=False))
    return _LMDB_ENV[0]


_LMDB_HEADS: list[Any] = []


def _scratch_heads_env() -> tuple[Any, Any]:
    """One small LMDB environment with the heads' named database (format 19), and that
    database, for the read_latest cases (each empties both; the main database keeps the
    named database's record)."""
    import atexit
    import shutil
    import tempfile

    import lmdb

    if not _LMDB_HEADS:
        d = tempfile.mkdtemp(prefix="cortex-read-latest-heads-")
        atexit.register(shutil.rmtree, d, True)
        env = lmdb.open(d, map_size=1 << 24, lock=False, max_dbs=2)
        _LMDB_HEADS.extend((env, env.open_db(b"\x01db/m/"), env.open_db(b"\x01db/id/")))
    return _LMDB_HEADS[0], _LMDB_HEADS[1]


def _point_read_of(txn: Any, mid: MemoryId, heads: Any = None, ids: Any = None) -> tuple[Any, Any]:
    """What ``resolve_latest`` reads (format 21): the row in ``id/`` (in the database ``ids``,
    None: main), the head at that row (in ``heads``) and the version it points at, read by its
    key (``specs/storage.md``, "What a read checks": a later version is not looked for).
    ``(None, None)`` when there is no row; ``(head, None)`` when the head does not decode or
    its version is not stored."""
    from cortex.engine.heads import decode_row
    from cortex.engine.values import decode_trusted
    from cortex.errors import CortexError
    from cortex.model.codec import HEAD
    from cortex.storage.keys import head_key, id_key, version_key

    rraw = txn.get(id_key(mid), None, ids)
    if rraw is None:
        return None, None
    row = decode_row(id_key(mid), rraw)
    hraw = txn.get(head_key(row), None, heads)
    try:
        head = decode_trusted(HEAD, head_key(row), hraw)
    except (CortexError, TypeError):
        return hraw, None
    vkey = version_key(row, head.current_version)
    vraw = txn.get(vkey)
    return hraw, None if vraw is None else (vkey, vraw)


@settings(max_examples=300)
@given(_stored(), st.integers(0, 3), st.booleans())
def test_read_latest_is_point_read_then_read_memory(
    case: tuple[Any, ...], extra: int, named: bool
) -> None:
    """``read_latest`` reads what ``resolve_latest``'s Python path reads in the same snapshot
    (format 21: the row in ``id/``, the head at it, the version it points at by key): the
    Memory ``read_memory`` builds from them, or None where that declines; with ``named``, the
    rows and heads in their named databases, given as ``ids`` and ``heads``."""
    from cortex.engine.heads import encode_row
    from cortex.engine.store import _READ
    from cortex.storage.keys import head_key, id_key, version_key, version_prefix

    mid, hraw, vkey, vraw, _ = case
    env, db = _scratch_heads_env()
    idb = _LMDB_HEADS[2]
    heads, ids = (db, idb) if named else (None, None)
    with env.begin(write=True) as w:
        w.drop(db, delete=False)
        w.drop(idb, delete=False)
        with w.cursor() as c:  # main: every key but the named databases' records
            keys = [bytes(k) for k in c.iternext(values=False) if not k.startswith(b"\x01")]
        for k in keys:
            w.delete(k)
        w.put(id_key(mid), encode_row(ROW), db=ids)
        if hraw is not None:
            w.put(head_key(ROW), bytes(hraw), db=heads)
            if named:  # a head in main is not read: the heads are in their database
                w.put(head_key(ROW), b"not this one")
        if vraw is not None:
            w.put(vkey, bytes(vraw))
        if extra == 1:  # a stray version past the head's: not read (the head's is, by key)
            w.put(version_key(ROW, 2**63 - 1), bytes(vraw or b"x"))
        elif extra == 2:  # keys beside the memory's: neither is read
            w.put(version_key(ROW - 1, 1), b"x")
            w.put(b"mv0", b"y")
        elif extra == 3:  # a key of the next row sorts right after this one's prefix
            w.put(version_prefix(ROW + 1) + bytes(8), b"z")
    with env.begin() as txn:
        if named:
            got = sp.read_latest(_READ, txn, mid.bytes, heads, ids)
            given = sp.read_latest(_READ, txn, mid, heads, ids)  # a MemoryId: shared
        else:
            got = sp.read_latest(_READ, txn, mid.bytes)
            given = sp.read_latest(_READ, txn, mid, None, None)  # None: main
        hread, last = _point_read_of(txn, mid, heads, ids)
    assert type(given) is type(got) and given == got
    if got is None:  # declined: what it read is what read_memory declines or refuses
        assert (
            hread is None
            or last is None
            or (sp.read_memory(_READ, mid.bytes, hread, *last, 0) is None)
        )
        return
    assert given.head.id is mid and given.version.id is mid and given.uri.id is mid
    assert got.head.id is got.version.id is got.uri.id  # one id, decoded once
    assert last is not None
    want = sp.read_memory(_READ, mid.bytes, hread, *last, 0)
    assert want is not None and same(got, want), (got, want)
    _agree(got, _py_memory, mid, hread, last[0], last[1], 0)


def test_resolve_latest_is_the_same_with_and_without_read_latest(tmp_path: Path) -> None:
    """The store's get through ``read_latest`` returns (and raises) what point_read and
    read_memory do: several versions, a tombstone, a missing id, a damaged head and version."""
    import cortex
    from cortex.engine import store as store_module
    from cortex.storage.keys import head_key, version_key
    from tests.rows import of_kv

    cx = cortex.Cortex.open(tmp_path / "s", actor="me")
    try:
        ids = [cx.write(Identity(name=f"n{i}")).id for i in range(6)]
        cx.update(ids[1], Identity(name="changed"))
        cx.update(ids[1], Identity(name="changed again"))
        cx.tombstone(ids[2], reason="gone")

        def damage(key: bytes) -> None:
            def fn(txn: Any) -> None:
                raw = txn.get(key)
                txn.put(key, raw[:5] + bytes([raw[5] ^ 1]) + raw[6:])

            cx._kv.write(fn)

        damage(head_key(of_kv(cx._kv, ids[3])))
        damage(version_key(of_kv(cx._kv, ids[4]), 1))
        probes = [*ids, MemoryId(bytes(16))]

        def reads() -> list[Any]:
            out: list[Any] = []
            for mid in probes:
                try:
                    out.append(("ok", cx.resolve_latest(mid)))
                except CortexError as exc:
                    out.append((type(exc), str(exc)))
            return out

        assert store_module._READ_LATEST is not None
        fast = reads()
        old, store_module._READ_LATEST = store_module._READ_LATEST, None
        try:
            slow = reads()
        finally:
            store_module._READ_LATEST = old
        assert len(fast) == len(slow)
        for a, b in zip(fast, slow, strict=True):
            assert a[0] == b[0] and (same(a[1], b[1]) if a[0] == "ok" else a[1] == b[1]), (a, b)
        assert [x[0] for x in fast][:3] == ["ok"] * 3
        assert fast[-1][0] is not None and fast[-1][0] != "ok"
    finally:
        cx.close()


def test_read_latest_refuses_bad_arguments() -> None:
    from cortex.engine.store import _READ

    assert _READ is not None
    env = _scratch_env()
    with env.begin() as txn:
        for bad_ctx in (None, (), _READ[:-1]):
            with pytest.raises(TypeError):
                sp.read_latest(bad_ctx, txn, bytes(16))
        for bad_mid in (b"", bytes(15), "x" * 16, None):
            with pytest.raises(TypeError):
                sp.read_latest(_READ, txn, bad_mid)
        with pytest.raises(TypeError):
            sp.read_latest(_READ, txn)
        with pytest.raises(TypeError):
            sp.read_latest(_READ, txn, bytes(16), None, None, None)
        with pytest.raises(TypeError):  # not a database: LMDB's get refuses it
            sp.read_latest(_READ, txn, bytes(16), None, "ids")
        with pytest.raises(AttributeError):  # not a transaction: its error is raised
            sp.read_latest(_READ, object(), bytes(16))
    from cortex.engine.heads import encode_row

    with env.begin(write=True) as w:
        w.put(b"id/" + bytes(16), encode_row(0))
        w.put(b"mv/" + bytes(4) + bytes(7) + b"\x01", b"x")
    # buffers, not bytes: refused, never read as bytes
    with env.begin(buffers=True) as txn, pytest.raises(TypeError):
        sp.read_latest(_READ, txn, bytes(16))


@settings(max_examples=300)
@given(st.binary(max_size=1100), st.integers(0, 15))
@example(b"", 0)
@example(bytes(64), 0)
@example(bytes(range(256)) * 4, 3)
def test_crc32_is_zlib_crc32(data: bytes, cut: int) -> None:
    """Both ways of the CRC (carry-less multiplication from 64 bytes, the tables) are zlib's,
    at every length and alignment."""
    import zlib

    for b in (data, data[cut:]):
        assert sp.crc32(b) == zlib.crc32(b)
        assert sp.crc32(b, True) == zlib.crc32(b)


def test_crc32_every_length_and_alignment() -> None:
    import os
    import zlib

    buf = os.urandom(1200)
    for n in range(0, 1101):
        for off in (0, 1, 7, 8, 15):
            b = buf[off : off + n]
            assert sp.crc32(b) == zlib.crc32(b), (n, off)
    with pytest.raises(TypeError):
        sp.crc32(bytearray(b"x"))
    with pytest.raises(TypeError):
        sp.crc32()


@settings(max_examples=500)
@given(st.lists(st.integers(0, 0x10FFFF), max_size=40).map(lambda cs: "".join(map(chr, cs))))
@example("a…b—c")
@example("\ud800")
@example("x" * 100 + "\U0001f600")
def test_utf8_len_is_the_encoded_length(text: str) -> None:
    from cortex.model import forms

    try:
        want = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        want = -1
    assert sp.utf8_len(text) == want
    # count_tokens the same either way (a lone surrogate: the same error)
    try:
        fast: Any = forms.count_tokens(text)
    except ValidationError as exc:
        fast = str(exc)
    old, forms._UTF8_LEN = forms._UTF8_LEN, None
    try:
        try:
            slow: Any = forms.count_tokens(text)
        except ValidationError as exc:
            slow = str(exc)
    finally:
        forms._UTF8_LEN = old
    assert fast == slow
    with pytest.raises(TypeError):
        sp.utf8_len(b"x")  # type: ignore[arg-type]


def test_read_functions_refuse_bad_arguments() -> None:
    from cortex.engine.store import _READ

    assert _READ is not None
    for bad_ctx in (None, (), _READ[:-1], (None,) * len(_READ)):
        with pytest.raises(TypeError):
            sp.read_memory(bad_ctx, bytes(16), b"", b"", b"", 0)
        with pytest.raises(TypeError):
            sp.read_head(bad_ctx, bytes(16), b"")
    for bad_mid in (b"", bytes(15), "x" * 16, None):
        with pytest.raises(TypeError):
            sp.read_memory(_READ, bad_mid, b"", b"", b"", 0)
        with pytest.raises(TypeError):
            sp.read_version(_READ, bad_mid, 1, b"")
    with pytest.raises(TypeError):
        sp.read_memory(_READ, bytes(16), b"", b"", b"")
    # versions that are no version number: declined, never an error
    for n in (-1, 2**64, 1.0, True, "1"):
        assert sp.read_memory(_READ, bytes(16), b"", b"", b"", n) is None
    for n in (0, -1, 2**64, 1.0, "1"):
        assert sp.read_version(_READ, bytes(16), n, b"") is None


def test_decoded_ids_are_memory_ids() -> None:
    """The C decoder builds a MemoryId as ``MemoryId._trusted`` does (its one slot filled)."""
    from cortex.model.records import Head

    raw = encode_head(
        Head(
            id=MemoryId(bytes(range(16))),
            type=MemoryType.FACT,
            current_version=1,
            actor_scope="a",
            created_at=datetime(2026, 1, 1, tzinfo=UTC),
            last_updated_at=datetime(2026, 1, 1, tzinfo=UTC),
        )
    )
    head = sp.decode(HEAD._plan, raw)
    assert type(head.id) is MemoryId and head.id.bytes == bytes(range(16))
    assert head.id == MemoryId._trusted(bytes(range(16))) and hash(head.id) == hash(
        bytes(range(16))
    )
    with pytest.raises(AttributeError):
        head.id._b = b"x"  # type: ignore[misc]
    with pytest.raises(TypeError):  # the slot must be the class's own member descriptor
        sp.Plan(
            type("X", (msgspec.Struct,), {"__annotations__": {"a": int}}),
            ("a",),
            None,
            ((1, 0, False, None, None, ("id", MemoryId._trusted, MemoryId, vars(Version)["id"])),),
        )


# -- every export of the accelerator has a test against its Python definition

_LEX = "tests.test_speedups_lexical"
_POST = "tests.test_postings"
PARITY: dict[str, tuple[str, ...]] = {
    "Plan": ("test_plans_are_built_for_every_record", "test_bad_plans_are_refused"),
    "Reject": ("test_reject_is_the_only_error", "test_decoders_refuse_alike"),
    "decode": (
        "test_data_roundtrip_equal",
        "test_fuzz_mutated_data",
        "test_negative_vectors",
        "tests.test_medium_refs::test_c_and_python_refuse_the_same_versions",
        "tests.test_medium_refs::test_golden_negative_versions",
    ),
    "encode": (
        "test_encode_is_the_python_encoder",
        "tests.test_medium_refs::test_c_and_python_encode_and_decode_versions_alike",
    ),
    "encode_new_pair": (
        "test_new_pair_is_the_sealed_head_and_version",
        "tests.test_medium_refs::test_writes_store_references_and_read_the_same",
    ),
    "encode_ascii_texts": ("test_ascii_text_lists_agree", "test_text_list_fields_agree"),
    "ascii_tokens": ("test_tokenize_paths_agree",),
    "count_terms": ("test_count_terms_paths_agree",),
    "StemTable": (f"{_LEX}::test_the_stem_table_stays_within_half_its_slots",),
    "ascii_term_counts": (f"{_LEX}::test_ascii_term_counts_is_count_terms_of_terms",),
    "full_term_counts": (f"{_LEX}::test_full_term_counts_is_the_full_forms_counts",),
    "add_postings": ("test_add_postings_agree",),
    "index_doc": (f"{_LEX}::test_index_doc_is_add_counted",),
    "index_new": (f"{_LEX}::test_index_doc_is_add_counted",),  # its new=True half
    "block_encode": (f"{_POST}::test_block_encode_is_the_python_definition",),
    "block_decode": (f"{_POST}::test_block_decode_is_the_python_definition",),
    "append_fresh": (
        f"{_POST}::test_append_fresh_is_the_python_append",
        f"{_POST}::test_append_fresh_extends_the_last_block_as_python_cuts_it",
        f"{_POST}::test_append_fresh_leaves_the_unusual_to_python",
    ),
    "df_updates": (f"{_LEX}::test_df_updates_agree",),
    "df_values": (f"{_LEX}::test_df_values_agree",),
    "segment_fresh": ("tests.test_segments::test_segment_fresh_is_encode_fresh",),
    "segment_decode": (
        "tests.test_segments::test_segment_decode_is_decode",
        "tests.test_segments::test_segment_decode_agrees_with_the_definition_on_the_vectors",
    ),
    "bm25_top": (
        "tests.test_bm25::test_bm25_top_is_search_terms_over_blocks_and_segments",
        "tests.test_bm25::test_bm25_top_is_search_terms_after_any_writes",
        "tests.test_bm25::test_bm25_top_declines_what_it_does_not_expect",
    ),
    "segments_folded": ("tests.test_segments::test_segments_folded_is_overlay_folded",),
    "segments_added": (
        "tests.test_segments::test_overlay_added_is_overlay_folded_of_additions",
        "tests.test_segments::test_a_fold_of_additions_writes_what_the_general_fold_writes",
    ),
    "index_keys": ("test_index_keys_paths_agree",),
    "journal_entry": ("test_journal_entry_paths_agree",),
    "stage_new": ("test_stage_new_paths_agree",),
    "seal": ("test_seal_is_zlib_crc32",),
    "float16": ("test_float16_is_numpys_rounding", "test_float16_declines_what_numpy_decides"),
    "unseal": ("test_unseal_is_the_checked_payload",),
    "sort_pairs": ("test_sort_pairs_is_a_stable_sort_by_key",),
    "read_memory": (
        "test_read_memory_is_the_python_read",
        "test_read_functions_refuse_bad_arguments",
    ),
    "read_head": ("test_read_head_and_version_are_the_python_reads",),
    "read_version": ("test_read_head_and_version_are_the_python_reads",),
    "memory_of": ("test_memory_of_is_the_python_memory",),
    "read_current": ("test_read_current_is_the_python_read",),
    "read_latest": (
        "test_read_latest_is_point_read_then_read_memory",
        "test_resolve_latest_is_the_same_with_and_without_read_latest",
        "test_read_latest_refuses_bad_arguments",
    ),
    "crc32": ("test_crc32_is_zlib_crc32", "test_crc32_every_length_and_alignment"),
    "utf8_len": ("test_utf8_len_is_the_encoded_length",),
    "micros": ("test_micros_is_to_micros",),
    "newest_ids": (
        "tests.test_query_fused::test_newest_ids_is_created_scan",
        "tests.test_query_fused::test_newest_ids_over_duplicates_is_created_scan",
        "tests.test_query_fused::test_newest_ids_declines_a_key_of_another_length",
        "tests.test_query_fused::test_newest_ids_refuses_bad_arguments",
    ),
    "salience": (
        "tests.test_salience::test_the_c_salience_is_salience_at",
        "tests.test_salience::test_the_c_salience_refuses_bad_arguments",
        "tests.test_search_reads::test_c_salience_with_a_vector_is_the_definition",
    ),
    "read_accepted": (
        "tests.test_query_fused::test_read_accepted_is_passes",
        "tests.test_query_fused::test_read_accepted_refuses_bad_arguments",
        "tests.test_query_fused::test_a_flipped_byte_fails_the_fused_loop_as_the_general_path",
    ),
    "read_rows": (
        "tests.test_search_reads::test_the_lexical_hits_read_in_c_are_the_reads_one_by_one",
        "tests.test_search_reads::test_a_damaged_head_of_a_hit_is_the_python_paths_error",
        "tests.test_search_reads::test_accept_pair_and_read_rows_refuse_bad_arguments",
        "tests.test_search_reads::test_searches_give_what_the_python_reads_give",
    ),
    "accept_pair": (
        "tests.test_search_reads::test_accept_pair_is_read_accepted",
        "tests.test_search_reads::test_accept_pair_and_read_rows_refuse_bad_arguments",
        "tests.test_search_reads::test_searches_give_what_the_python_reads_give",
    ),
    "id_slots": (
        "tests.test_search_reads::test_memory_id_hash_and_comparisons_are_its_methods",
        "tests.test_search_reads::test_id_slots_takes_only_the_class_of_one_bytes_slot",
    ),
    "read_page": (
        "tests.test_query_fused::test_read_page_is_read_accepted",
        "tests.test_query_fused::test_read_page_refuses_bad_arguments",
        "tests.test_query_fused::test_a_flipped_byte_fails_the_fused_loop_as_the_general_path",
    ),
    "MapFile": (
        "tests.test_map_reads::test_a_meta_page_two_commits_old_is_declined",
        "tests.test_map_reads::test_a_short_mapping_asks_for_a_new_one",
        "tests.test_map_reads::test_the_map_refuses_bad_arguments",
        "tests.test_map_reads::test_store_reads_agree_with_the_map_on_and_off",
    ),
    "MapTxn": (
        "tests.test_map_reads::test_gets_are_lmdbs",
        "tests.test_map_reads::test_a_snapshot_keeps_its_pages_while_commits_rewrite_the_tree",
        "tests.test_map_reads::test_damaged_pages_are_declined_never_followed",
        "tests.test_map_reads::test_after_abort_the_map_is_not_read",
    ),
    "MapCursor": (
        "tests.test_map_reads::test_cursor_operations_are_lmdbs",
        "tests.test_map_reads::test_whole_scans_both_ways",
        "tests.test_map_reads::test_damaged_pages_are_declined_never_followed",
    ),
    "read_newest": (
        "tests.test_query_fused::test_read_newest_is_newest_ids_and_read_page",
        "tests.test_query_fused::test_read_newest_refuses_bad_arguments",
        "tests.test_query_fused::test_the_kept_find_gives_what_find_gives",
        "tests.test_query_fused::test_a_flipped_byte_fails_the_fused_loop_as_the_general_path",
    ),
}
"""Each name ``cortex._speedups`` exports, and the tests comparing it with its Python definition
(``module::test``, or a test of this module). A new export must name its test here."""


def test_every_export_is_compared_with_its_python_definition() -> None:
    import importlib

    exported = {n for n in dir(sp) if not n.startswith("_")}
    assert exported == set(PARITY), "name the parity tests of new exports in PARITY"
    for name, tests in PARITY.items():
        for test in tests:
            module, _, fn = test.rpartition("::")
            where = importlib.import_module(module) if module else sys.modules[__name__]
            assert callable(getattr(where, fn, None)), f"{name}: no test {test}"
