"""Golden vectors: regenerates ``specs/vectors/*.json`` from fixed inputs, deterministically.

Run ``python tools/gen_vectors.py`` to rewrite the files, or ``--check`` to compare the committed
files with what the code produces now (exit 1 on a difference). There is no randomness: ids,
times and every input below are fixed.

The JSON input helpers (``parse_input``, ``expected_value``, ``typed``) are shared with
``tests/test_vectors.py``, so the conventions in ``CONVENTIONS`` are implemented once.
"""

from __future__ import annotations

import argparse
import enum
import json
import struct
import sys
import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import msgspec
import msgspec.inspect as mi

from cortex.errors import CodecError, CortexError, ValidationError
from cortex.model.codec import LIMITS, decode_data, encode_data
from cortex.model.enums import MemoryType
from cortex.model.forms import render_full, render_medium, render_short
from cortex.model.hashing import content_hash
from cortex.model.ids import MemoryId, Uri
from cortex.model.records import DATA_TYPES, Data, Head

VECTORS_DIR: Final = Path(__file__).resolve().parent.parent / "specs" / "vectors"

CONVENTIONS: Final = {
    "input": (
        "A JSON object: field name -> value. A field that is absent takes its default "
        "(None, empty, False). Field names are the Python attribute names of specs/format.md."
    ),
    "text": (
        "A JSON string, exactly as handed to the encoder: it may be decomposed (not NFC); the "
        'encoder NFC-normalises it. Long text may be written {"$repeat": [unit, count]}, '
        "meaning unit repeated count times."
    ),
    "numbers": (
        "A JSON number with a fraction or exponent (1.0, 6.1e-05) is a float; one without "
        "(1) is an integer. An integer in a float field, or an integral float in an integer "
        "field, is deliberate: it tests numeric coercion. -0.0 is negative zero."
    ),
    "enums": 'The member\'s label, e.g. "user_input" (never its code).',
    "times": (
        "An RFC 3339 timestamp with an explicit offset (Z or +hh:mm), microsecond precision "
        'at most, e.g. "2024-05-01T14:00:00.25+02:00". The encoder stores the instant.'
    ),
    "bytes": '{"$bytes": "<lower-case hex>"}.',
    "records": "A nested record (Cost) is a JSON object with the same conventions.",
    "maps": "A free map (profile, parameters) is a JSON object; its key order is irrelevant.",
    "lists": "A JSON array.",
    "cbor_hex": "The canonical CBOR of the typed data (specs/encoding.md), lower-case hex.",
    "hash_hex": (
        'sha256(b"matrix.cortex.memory.v1" || type_byte || cbor) (specs/hashing.md), '
        "lower-case hex."
    ),
    "forms": (
        "short, medium and full as rendered from the canonical value (specs/forms.md); "
        "rendering the input before encoding MUST give the same text."
    ),
    "escaping": (
        "Files are written with every non-ASCII character escaped (\\uXXXX), so decomposed "
        "and precomposed text are told apart at a glance."
    ),
}

NEGATIVE_CONVENTIONS: Final = {
    "cases": (
        "Each case is bytes that decode_data(type, bytes) MUST reject. valid_hex is a valid "
        "canonical encoding; cbor_hex is made from it by the byte change described in why (plus "
        "the map head's count where an entry is added or removed)."
    ),
    "error": (
        "NonCanonicalError: the bytes are well-formed and describe a valid value, but are not "
        "its canonical encoding. CodecError: the bytes are not valid CBOR, or not a valid "
        "record of the type (unknown key, wrong type, missing field, value out of range). "
        "NonCanonicalError is a subclass of CodecError; the class named is the exact one."
    ),
}

URI_CONVENTIONS: Final = {
    "valid": (
        "Each uri parses; type, id (text), id_hex (the 16 raw bytes), version and "
        "timestamp_ms are what it names, and printing the parsed URI gives uri back."
    ),
    "invalid": (
        "Each uri MUST be rejected with a ValidationError; field and rule are the error's "
        "field and rule in the reference implementation."
    ),
}


# ---------------------------------------------------------------------------------------------
# JSON input -> structs (shared with tests/test_vectors.py)


class InputError(ValueError):
    """A vector's input does not follow ``CONVENTIONS``."""


def _text(v: Any) -> str:
    if isinstance(v, dict) and set(v) == {"$repeat"}:
        unit, count = v["$repeat"]
        if not isinstance(unit, str) or type(count) is not int:
            raise InputError(f"bad $repeat {v!r}")
        return unit * count
    if not isinstance(v, str):
        raise InputError(f"expected text, got {v!r}")
    return v


def _nfc(s: str) -> str:
    return unicodedata.normalize("NFC", s)


def _convert(t: mi.Type, v: Any, canonical: bool) -> Any:
    if isinstance(t, mi.UnionType):
        (t,) = (x for x in t.types if not isinstance(x, mi.NoneType))
    if isinstance(t, mi.StrType):
        s = _text(v)
        return _nfc(s) if canonical else s
    if isinstance(t, mi.EnumType):
        if not isinstance(v, str) or v.upper() not in t.cls.__members__ or not v.islower():
            raise InputError(f"{v!r} is not a {t.cls.__name__} label")
        return t.cls[v.upper()]
    if isinstance(t, mi.FloatType):
        if type(v) not in (int, float):
            raise InputError(f"expected a number, got {v!r}")
        return float(v) + 0.0 if canonical else v
    if isinstance(t, mi.IntType):
        if type(v) not in (int, float):
            raise InputError(f"expected a number, got {v!r}")
        return int(v) if canonical else v
    if isinstance(t, mi.BoolType):
        if type(v) is not bool:
            raise InputError(f"expected true or false, got {v!r}")
        return v
    if isinstance(t, mi.DateTimeType):
        when = datetime.fromisoformat(v)
        if when.tzinfo is None:
            raise InputError(f"time {v!r} has no offset")
        return when.astimezone(UTC) if canonical else when
    if isinstance(t, mi.BytesType):
        if not isinstance(v, dict) or set(v) != {"$bytes"}:
            raise InputError(f"expected {{'$bytes': hex}}, got {v!r}")
        return bytes.fromhex(v["$bytes"])
    if isinstance(t, mi.VarTupleType):
        return tuple(_convert(t.item_type, x, canonical) for x in v)
    if isinstance(t, mi.DictType):
        return {
            _convert(t.key_type, k, canonical): _convert(t.value_type, x, canonical)
            for k, x in v.items()
        }
    if isinstance(t, mi.StructType):
        return _struct(t.cls, v, canonical)
    raise InputError(f"no JSON convention for {t!r}")


def _struct(cls: type[Any], obj: dict[str, Any], canonical: bool) -> Any:
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    fields = {f.name: f for f in info.fields}
    unknown = set(obj) - set(fields)
    if unknown:
        raise InputError(f"{cls.__name__} has no field(s) {sorted(unknown)}")
    return cls(**{name: _convert(fields[name].type, v, canonical) for name, v in obj.items()})


def data_class(type_name: str) -> type[Data]:
    """The typed data struct for a type name (``"Fact"``)."""
    mtype = MemoryType.from_name(type_name)
    if mtype is None:
        raise InputError(f"unknown type name {type_name!r}")
    return DATA_TYPES[mtype]


def parse_input(type_name: str, obj: dict[str, Any]) -> Data:
    """Build the typed data a vector's ``input`` describes, as a caller would hand it in.

    Text stays as written (possibly not NFC) and numbers keep their JSON kind (int or float),
    so encoding it exercises normalisation and coercion.
    """
    value: Data = _struct(data_class(type_name), obj, canonical=False)
    return value


def expected_value(type_name: str, obj: dict[str, Any]) -> Data:
    """The value decoding the vector's bytes must give: the input after NFC and coercion.

    Text is NFC-normalised, integers in float fields become floats (-0.0 becomes 0.0),
    integral floats in integer fields become integers and times are in UTC.
    """
    value: Data = _struct(data_class(type_name), obj, canonical=True)
    return value


def typed(v: Any) -> Any:
    """A comparable picture of ``v`` that also records every Python type (1 != 1.0 here)."""
    if isinstance(v, msgspec.Struct):
        return (type(v).__name__, tuple((f, typed(getattr(v, f))) for f in v.__struct_fields__))
    if isinstance(v, float):
        return ("float", v.hex())
    if isinstance(v, enum.Enum):
        return (type(v).__name__, v.name)
    if isinstance(v, datetime):
        return ("datetime", v.isoformat())
    if isinstance(v, dict):
        return ("dict", tuple(sorted((typed(k), typed(x)) for k, x in v.items())))
    if isinstance(v, tuple | list):
        return (type(v).__name__, tuple(typed(x) for x in v))
    return (type(v).__name__, v)


# ---------------------------------------------------------------------------------------------
# Fixed ids, URIs and helpers

_MS: Final = 1_714_564_800_000  # 2024-05-01T12:00:00Z


def fixed_id(n: int) -> MemoryId:
    """The ``n``-th fixed id: timestamp 2024-05-01T12:00:00Z, random part ``n``."""
    return MemoryId(((_MS << 80) | n).to_bytes(16, "big"))


def uri(type_name: str, n: int, version: int = 1) -> str:
    """A version URI of fixed id ``n``."""
    return f"cortex://{type_name}/{fixed_id(n)}#{version}"


def rep(unit: str, count: int) -> dict[str, Any]:
    """The ``$repeat`` marker for long text."""
    return {"$repeat": [unit, count]}


def _b(hex_text: str) -> dict[str, str]:
    return {"$bytes": hex_text}


T_NOON: Final = "2024-05-01T14:00:00+02:00"  # 12:00:00Z
T_MICROS: Final = "2024-05-01T12:00:00.123456Z"
T_OFFSET: Final = "2024-04-30T23:30:00.5-05:00"  # 2024-05-01T04:30:00.5Z
T_BEFORE_EPOCH: Final = "1969-12-31T23:59:59.999999Z"  # -1 microsecond
T_MIN: Final = "0001-01-01T00:00:00Z"
T_MAX: Final = "9999-12-31T23:59:59.999999Z"

F32_EXACT: Final = 0.100000001490116119384765625  # float32(0.1): needs 32 bits
F16_MIN_NORMAL: Final = 0.00006103515625  # 2**-14
F16_MIN_SUBNORMAL: Final = 2.0**-24
F32_ONLY_SMALL: Final = 2.0**-25  # below every float16, exact in float32

TEXT_MAX: Final = LIMITS.TEXT_BYTES
SHORT_MAX: Final = LIMITS.SHORT_TEXT_BYTES
ITEMS: Final = LIMITS.ITEMS

Case = tuple[str, str, dict[str, Any]]  # name, note, input


def _numbered(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i:03d}" for i in range(n)]


# ---------------------------------------------------------------------------------------------
# Positive cases, by type. Every type has minimal, full, nfc and max_lengths cases.

CASES: Final[dict[str, list[Case]]] = {
    "Identity": [
        ("minimal", "required fields only", {"name": "Ada"}),
        (
            "full",
            "every optional field set; profile keys are ordered shortest first, then bytewise",
            {
                "name": "Ada Lovelace",
                "did": "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK",
                "roles": ["operator", "reviewer"],
                "profile": {"language": "en", "team": "core", "tz": "Europe/London"},
                "public_keys": [_b("00" * 31 + "01"), _b("ff" * 32)],
            },
        ),
        (
            "nfc",
            "decomposed text (e + U+0301) is stored and rendered as precomposed U+00E9",
            {
                "name": "Jose\u0301",
                "roles": ["de\u0301veloppeur"],
                "profile": {"cafe\u0301": "cre\u0300me", "b": "1"},
            },
        ),
        (
            "profile_key_order",
            "text keys sort by their encoding: shorter first, then bytewise (b < aa < ab < \u00e9)",
            {"name": "order", "profile": {"\u00e9": "4", "ab": "3", "aa": "2", "b": "1"}},
        ),
        (
            "short_at_budget",
            "a short form of exactly 200 bytes (50 tokens) is not truncated",
            {"name": "a" * 200},
        ),
        (
            "short_over_budget",
            "201 bytes: cut to 197 bytes and U+2026 appended",
            {"name": "a" * 201},
        ),
        (
            "truncate_utf8_boundary",
            "byte 197 falls inside a 3-byte character: the cut drops the partial character",
            {"name": "a" * 196 + "\u20ac" * 5},
        ),
        (
            "max_lengths",
            "name at 16384 bytes, did at 256 bytes, 256 roles, a 1024-byte public key",
            {
                "name": rep("abcdefgh", TEXT_MAX // 8),
                "did": "did:" + "x" * (SHORT_MAX - 4),
                "roles": _numbered("role", ITEMS),
                "public_keys": [_b("5a" * LIMITS.PUBLIC_KEY_BYTES)],
            },
        ),
    ],
    "Fact": [
        (
            "minimal",
            "required fields only",
            {"statement": "grass is green", "subject": "lawn", "predicate": "color"},
        ),
        (
            "full",
            "every optional field set; the time has a +02:00 offset",
            {
                "statement": "Ada prefers morning meetings",
                "subject": "ada",
                "predicate": "meeting_time",
                "object": "morning",
                "source": "observed",
                "observed_at": T_NOON,
                "confidence": 0.75,
            },
        ),
        (
            "nfc",
            "decomposed input; the stored text and the forms are NFC",
            {
                "statement": "cafe\u0301 au lait",
                "subject": "Zoe\u0308",
                "predicate": "drinks",
                "object": "n\u0303",
            },
        ),
        (
            "nfc_across_template",
            "statement begins with U+0338: the rendered '=' + U+0338 composes to U+2260",
            {"statement": "\u0338 equal", "subject": "x", "predicate": "p"},
        ),
        (
            "float16",
            "0.5 fits float16",
            {"statement": "s", "subject": "x", "predicate": "p", "confidence": 0.5},
        ),
        (
            "float32",
            "float32(0.1) = 0.100000001490116119384765625 needs 32 bits",
            {"statement": "s", "subject": "x", "predicate": "p", "confidence": F32_EXACT},
        ),
        (
            "float64",
            "0.1 is exact only in float64",
            {"statement": "s", "subject": "x", "predicate": "p", "confidence": 0.1},
        ),
        (
            "float16_min_normal",
            "2**-14, the smallest normal float16",
            {"statement": "s", "subject": "x", "predicate": "p", "confidence": F16_MIN_NORMAL},
        ),
        (
            "float16_subnormal",
            "2**-24, the smallest float16 subnormal, still fits 16 bits",
            {"statement": "s", "subject": "x", "predicate": "p", "confidence": F16_MIN_SUBNORMAL},
        ),
        (
            "float32_below_float16",
            "2**-25 is below every float16 but exact in float32",
            {"statement": "s", "subject": "x", "predicate": "p", "confidence": F32_ONLY_SMALL},
        ),
        (
            "float_zero",
            "0.0 encodes as f9 0000",
            {"statement": "s", "subject": "x", "predicate": "p", "confidence": 0.0},
        ),
        (
            "float_negative_zero",
            "-0.0 is stored as 0.0: equal values, equal bytes",
            {"statement": "s", "subject": "x", "predicate": "p", "confidence": -0.0},
        ),
        (
            "coerce_int_to_float",
            "confidence 1 (an integer) is stored as the float 1.0",
            {"statement": "s", "subject": "x", "predicate": "p", "confidence": 1},
        ),
        (
            "time_micros",
            "a time with microseconds",
            {"statement": "s", "subject": "x", "predicate": "p", "observed_at": T_MICROS},
        ),
        (
            "time_before_epoch",
            "one microsecond before the epoch is the negative integer -1",
            {"statement": "s", "subject": "x", "predicate": "p", "observed_at": T_BEFORE_EPOCH},
        ),
        (
            "time_min",
            "0001-01-01T00:00:00Z, the earliest time",
            {"statement": "s", "subject": "x", "predicate": "p", "observed_at": T_MIN},
        ),
        (
            "time_max",
            "9999-12-31T23:59:59.999999Z, the latest time",
            {"statement": "s", "subject": "x", "predicate": "p", "observed_at": T_MAX},
        ),
        (
            "max_lengths",
            "a statement of 8192 x U+00E9 = 16384 UTF-8 bytes (the limit counts bytes)",
            {"statement": rep("\u00e9", TEXT_MAX // 2), "subject": "x", "predicate": "p"},
        ),
    ],
    "Preference": [
        ("minimal", "required fields only", {"topic": "tea", "polarity": "prefer"}),
        (
            "full",
            "every optional field set; 0.8 needs float64",
            {
                "topic": "green tea",
                "polarity": "avoid",
                "strength": 0.8,
                "rationale": "caffeine late in the day",
            },
        ),
        (
            "full_format_8",
            "every field, with subject (store format 8: whose preference it is)",
            {
                "topic": "green tea",
                "polarity": "avoid",
                "strength": 0.8,
                "rationale": "caffeine late in the day",
                "subject": "Sam",
            },
        ),
        (
            "nfc",
            "decomposed input",
            {
                "topic": "the\u0301",
                "polarity": "neutral",
                "rationale": "cre\u0300me bru\u0302le\u0301e",
            },
        ),
        (
            "round_half_even",
            "0.125 is exact in binary and a tie: two decimals round it to even, 0.12",
            {"topic": "t", "polarity": "do", "strength": 0.125},
        ),
        (
            "round_binary_value",
            "0.015 is 0.01499999... in binary, so two decimals give 0.01",
            {"topic": "t", "polarity": "dont", "strength": 0.015},
        ),
        (
            "coerce_int_to_float",
            "strength 1 (an integer) is stored as the float 1.0",
            {"topic": "t", "polarity": "prefer", "strength": 1},
        ),
        (
            "max_lengths",
            "rationale at 16384 bytes",
            {
                "topic": "tea",
                "polarity": "prefer",
                "rationale": rep("why.", TEXT_MAX // 4),
            },
        ),
    ],
    "Belief": [
        ("minimal", "required fields only", {"statement": "it will rain", "stance": "suspect"}),
        (
            "full",
            "every optional field set",
            {
                "statement": "the build is flaky",
                "subject": "ci",
                "stance": "believe",
                "confidence": 0.875,
                "evidence_for": [uri("Event", 1, 1), uri("Event", 2, 3)],
                "evidence_against": [uri("Fact", 3, 2)],
            },
        ),
        (
            "nfc",
            "decomposed input",
            {"statement": "the pin\u0303ata is full", "subject": "pin\u0303ata", "stance": "doubt"},
        ),
        (
            "coerce_int_to_float",
            "confidence 0 (an integer) is stored as the float 0.0",
            {"statement": "s", "stance": "doubt", "confidence": 0},
        ),
        (
            "evidence_against_only",
            "the evidence count shows 0 for",
            {"statement": "s", "stance": "doubt", "evidence_against": [uri("Fact", 4, 9)]},
        ),
        (
            "max_lengths",
            "statement at 16384 bytes, 256 evidence URIs",
            {
                "statement": rep("believe ", TEXT_MAX // 8),
                "stance": "believe",
                "evidence_for": [uri("Fact", 5, v) for v in range(1, ITEMS + 1)],
            },
        ),
    ],
    "Event": [
        ("minimal", "required fields only", {"kind": "deploy"}),
        (
            "full",
            "every optional field set; the time has a -05:00 offset and half a second",
            {
                "kind": "purchase",
                "outcome": "success",
                "counterparty": "acme-gpu",
                "cost": {"asset": "USD", "amount": "12.5"},
                "duration_us": 1_500_000,
                "occurred_at": T_OFFSET,
                "summary": "bought 4 GPU hours",
                "intent_ref": "intent-42",
                "artifacts": ["receipt.pdf", "invoice.json"],
            },
        ),
        (
            "nfc",
            "decomposed input",
            {"kind": "re\u0301servation", "counterparty": "Cafe\u0301", "summary": "ta\u0302che"},
        ),
        (
            "cost_without_outcome",
            "no outcome: the short form starts with the kind; a negative decimal amount",
            {"kind": "refund", "cost": {"asset": "EUR", "amount": "-0.25"}},
        ),
        (
            "duration_zero",
            "a zero duration is set (0 is not empty) and renders as 0s",
            {"kind": "ping", "outcome": "failure", "duration_us": 0},
        ),
        (
            "duration_one_micro",
            "1 microsecond renders as 0.000001s",
            {"kind": "ping", "outcome": "partial", "duration_us": 1},
        ),
        (
            "duration_large",
            "2**40 microseconds needs an 8-byte integer head",
            {"kind": "archive", "duration_us": 2**40},
        ),
        (
            "coerce_float_to_int",
            "duration_us 1500000.0 (an integral float) is stored as the integer 1500000",
            {"kind": "build", "duration_us": 1_500_000.0},
        ),
        (
            "time_micros",
            "occurred_at with microseconds: medium shows seconds, full shows microseconds",
            {"kind": "tick", "occurred_at": T_MICROS},
        ),
        (
            "medium_truncates",
            "a long summary: the medium form is cut to 797 bytes plus U+2026",
            {"kind": "report", "outcome": "success", "summary": "word " * 200},
        ),
        (
            "max_lengths",
            "kind at 256 bytes, summary at 16384 bytes, 256 artifacts",
            {
                "kind": "k" * SHORT_MAX,
                "summary": rep("summary.", TEXT_MAX // 8),
                "artifacts": _numbered("artifact-", ITEMS),
            },
        ),
    ],
    "Goal": [
        ("minimal", "required fields only", {"statement": "ship v1", "status": "active"}),
        (
            "full",
            "every optional field set",
            {
                "statement": "ship cortex v1",
                "status": "paused",
                "horizon": "2024-12-31T23:59:59+00:00",
                "success_criteria": ["vectors pass", "docs tested"],
                "subgoals": [uri("Goal", 6, 1), uri("Goal", 7, 2)],
            },
        ),
        (
            "full_format_8",
            "every field, with subject (store format 8: whose goal it is)",
            {
                "statement": "ship cortex v1",
                "status": "paused",
                "horizon": "2024-12-31T23:59:59+00:00",
                "success_criteria": ["vectors pass", "docs tested"],
                "subgoals": [uri("Goal", 6, 1), uri("Goal", 7, 2)],
                "subject": "Ana",
            },
        ),
        (
            "nfc",
            "decomposed input",
            {"statement": "finish the re\u0301sume\u0301", "status": "completed"},
        ),
        (
            "horizon_far",
            "the latest representable time",
            {"statement": "s", "status": "abandoned", "horizon": T_MAX},
        ),
        (
            "max_lengths",
            "statement at 16384 bytes, 256 success criteria, 256 subgoals",
            {
                "statement": rep("goal", TEXT_MAX // 4),
                "status": "active",
                "success_criteria": _numbered("criterion ", ITEMS),
                "subgoals": [uri("Goal", 8, v) for v in range(1, ITEMS + 1)],
            },
        ),
    ],
    "Constraint": [
        (
            "minimal",
            "required fields only (all four); medium always names the source",
            {
                "statement": "never spend over 100 USD",
                "polarity": "dont",
                "strength": "hard",
                "source": "user_declared",
            },
        ),
        (
            "full",
            "every optional field set",
            {
                "statement": "ask before deleting files",
                "polarity": "do",
                "strength": "firm",
                "source": "learned",
                "trigger": "a tool call deletes a file",
            },
        ),
        (
            "nfc",
            "decomposed input",
            {
                "statement": "no cafe\u0301 after 4pm",
                "polarity": "avoid",
                "strength": "soft",
                "source": "inferred",
                "trigger": "o\u0308",
            },
        ),
        (
            "max_lengths",
            "trigger at 16384 bytes",
            {
                "statement": "rule",
                "polarity": "prefer",
                "strength": "soft",
                "source": "inferred",
                "trigger": rep("when", TEXT_MAX // 4),
            },
        ),
    ],
    "Capability": [
        (
            "minimal",
            "required fields only: unverified",
            {"subject": "agent-7", "capability": "book flights"},
        ),
        (
            "full",
            "every optional field set; parameters ordered shortest key first",
            {
                "subject": "agent-7",
                "capability": "book flights",
                "verified": True,
                "parameters": {"max_price": "400", "class": "economy", "seats": "1"},
                "last_observed": T_MICROS,
            },
        ),
        (
            "nfc",
            "decomposed input, including a parameter key",
            {
                "subject": "Rene\u0301",
                "capability": "tradu\u0301ire",
                "parameters": {"langue\u0301": "fr"},
            },
        ),
        (
            "max_lengths",
            "capability at 16384 bytes, 256 parameters",
            {
                "subject": "s",
                "capability": rep("can.", TEXT_MAX // 4),
                "parameters": {f"p{i:03d}": str(i) for i in range(ITEMS)},
            },
        ),
    ],
    "Pattern": [
        (
            "minimal",
            "required fields only: the short form is the statement",
            {"statement": "retry"},
        ),
        (
            "full",
            "every optional field set",
            {
                "statement": "retry with backoff on 429",
                "strength": 0.625,
                "coverage": 12,
                "derived_from": [uri("Event", 9, 1), uri("Event", 10, 1)],
            },
        ),
        (
            "recipe",
            "a structured neo.pattern.v1 recipe is plain text to the codec",
            {
                "statement": 'neo.pattern.v1:{"name":"backoff","steps":["wait","retry"]}',
                "coverage": 3,
            },
        ),
        ("nfc", "decomposed input", {"statement": "mise en place, a\u0300 la carte"}),
        (
            "coverage_only",
            "only coverage set",
            {"statement": "s", "coverage": 0},
        ),
        (
            "coerce_both",
            "strength 1 (integer) becomes 1.0; coverage 3.0 (integral float) becomes 3",
            {"statement": "s", "strength": 1, "coverage": 3.0},
        ),
        (
            "max_lengths",
            "statement at 16384 bytes, 256 derived_from URIs",
            {
                "statement": rep("pattern.", TEXT_MAX // 8),
                "derived_from": [uri("Event", 11, v) for v in range(1, ITEMS + 1)],
            },
        ),
    ],
}


def _case(type_name: str, name: str, note: str, inp: dict[str, Any]) -> dict[str, Any]:
    mtype = MemoryType.from_name(type_name)
    assert mtype is not None
    data = parse_input(type_name, inp)
    cbor = encode_data(data)
    decoded = decode_data(mtype, cbor)
    if typed(decoded) != typed(expected_value(type_name, inp)):
        raise AssertionError(f"{type_name}/{name}: decoding does not give the expected value")
    # Forms are a function of the canonical value; tests/test_vectors.py also renders the input.
    return {
        "name": name,
        "note": note,
        "type": type_name,
        "input": inp,
        "cbor_hex": cbor.hex(),
        "hash_hex": content_hash(mtype, cbor).hex(),
        "short": render_short(decoded),
        "medium": render_medium(decoded),
        "full": render_full(decoded),
    }


def _type_file(type_name: str) -> dict[str, Any]:
    mtype = MemoryType.from_name(type_name)
    assert mtype is not None
    return {
        "conventions": CONVENTIONS,
        "type": type_name,
        "type_code": mtype.value,
        "cases": [_case(type_name, *c) for c in CASES[type_name]],
    }


# ---------------------------------------------------------------------------------------------
# Negative vectors: one precise byte change to a valid encoding each


def _hx(s: str) -> bytes:
    return bytes.fromhex(s.replace(" ", ""))


def sub(valid: bytes, old: str, new: str) -> bytes:
    """Replace the one occurrence of hex ``old`` in ``valid`` by hex ``new``."""
    o, n = _hx(old), _hx(new)
    if valid.count(o) != 1:
        raise AssertionError(f"{old!r} occurs {valid.count(o)} times in {valid.hex()}")
    return valid.replace(o, n)


def uint_hex(n: int, major: int = 0) -> str:
    """The shortest CBOR head of ``n`` with major type ``major``, as hex."""
    mt = major << 5
    if n < 24:
        return f"{mt | n:02x}"
    for info, size in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if n < 1 << (8 * size):
            return f"{mt | info:02x}" + n.to_bytes(size, "big").hex()
    raise ValueError(n)


def text_hex(s: str) -> str:
    """The canonical CBOR text string ``s`` (UTF-8 of ``s`` as given), as hex."""
    b = s.encode("utf-8")
    return uint_hex(len(b), 3) + b.hex()


FACT_MIN: Final = {"statement": "grass is green", "subject": "lawn", "predicate": "color"}
FACT_FULL: Final = {
    **FACT_MIN,
    "source": "observed",
    "observed_at": "2024-05-01T12:00:00Z",
    "confidence": 0.5,
}
FACT_F32: Final = {**FACT_MIN, "confidence": F32_EXACT}
FACT_CAFE: Final = {**FACT_MIN, "subject": "caf\u00e9"}
IDENTITY_FULL: Final = {
    "name": "Ada",
    "roles": ["a", "b"],
    "profile": {"b": "1", "aa": "2"},
    "public_keys": [_b("0102")],
}
CAPABILITY_MIN: Final = {"subject": "bot", "capability": "fly"}
PATTERN_COV: Final = {"statement": "retry", "coverage": 10}
EVENT_FULL: Final = {
    "kind": "buy",
    "outcome": "success",
    "cost": {"asset": "USD", "amount": "1.5"},
    "duration_us": 1_500_000,
}
BELIEF_EVIDENCE: Final = {"statement": "s", "stance": "believe", "evidence_for": [uri("Fact", 1)]}

_NOON_US: Final = 1_714_564_800_000_000
_NOON_S: Final = 1_714_564_800
_TIME_MAX_US: Final = 253_402_300_799_999_999

Negative = tuple[str, str, dict[str, Any], Callable[[bytes], bytes], str, str]


def _count(old: int, new: int) -> Callable[[bytes], bytes]:
    """Change the top-level map head (the first byte) from ``old`` to ``new`` entries."""

    def change(b: bytes) -> bytes:
        if b[0] != 0xA0 | old:
            raise AssertionError(f"expected a map of {old} entries, got {b[:1].hex()}")
        return bytes((0xA0 | new,)) + b[1:]

    return change


def _then(*steps: Callable[[bytes], bytes]) -> Callable[[bytes], bytes]:
    def run(b: bytes) -> bytes:
        for step in steps:
            b = step(b)
        return b

    return run


def _s(old: str, new: str) -> Callable[[bytes], bytes]:
    return lambda b: sub(b, old, new)


NC, CE = "NonCanonicalError", "CodecError"
STATEMENT, LAWN, COLOR = text_hex("grass is green"), text_hex("lawn"), text_hex("color")

NEGATIVES: Final[list[Negative]] = [
    # -- map key order and duplicates
    (
        "unsorted_keys", "Fact", FACT_MIN,
        _s(f"01 {STATEMENT} 02 {LAWN}", f"02 {LAWN} 01 {STATEMENT}"),
        NC, "keys 1 and 2 swapped: map keys must be in bytewise order of their encodings",
    ),
    (
        "unsorted_text_keys", "Identity", IDENTITY_FULL,
        _s("a2 6162 6131 626161 6132", "a2 626161 6132 6162 6131"),
        NC, "profile key 'aa' before 'b': encoded 62 61 61 sorts after 61 62 (shorter first)",
    ),
    (
        "unsorted_nested_keys", "Event", EVENT_FULL,
        _s("a2 01 63555344 02 63312e35", "a2 02 63312e35 01 63555344"),
        NC, "the Cost map's keys 1 and 2 swapped",
    ),
    (
        "duplicate_key", "Fact", FACT_MIN,
        _then(_s(f"01 {STATEMENT}", f"01 {STATEMENT} 01 {STATEMENT}"), _count(4, 5)),
        NC, "key 1 appears twice (the map head counts 5 entries)",
    ),
    # -- shortest heads
    (
        "non_shortest_key", "Fact", FACT_MIN,
        _s(f"03 {COLOR}", f"1803 {COLOR}"),
        NC, "key 3 written as 18 03 (one-byte argument) instead of 03",
    ),
    (
        "non_shortest_int_1", "Pattern", PATTERN_COV,
        _s("03 0a", "03 180a"),
        NC, "coverage 10 written as 18 0a instead of 0a",
    ),
    (
        "non_shortest_int_8", "Event", EVENT_FULL,
        _s("05 1a0016e360", "05 1b000000000016e360"),
        NC, "duration_us 1500000 written with an 8-byte argument instead of 4",
    ),
    (
        "non_shortest_text_length", "Fact", FACT_MIN,
        _s(f"02 {LAWN}", "02 7804 6c61776e"),
        NC, "the 4-byte text 'lawn' with length head 78 04 instead of 64",
    ),
    (
        "non_shortest_array_length", "Identity", IDENTITY_FULL,
        _s("03 82 6161 6162", "03 9802 6161 6162"),
        NC, "the 2-item roles array with head 98 02 instead of 82",
    ),
    (
        "non_shortest_map_length", "Fact", FACT_MIN,
        lambda b: _hx("b804") + b[1:],
        NC, "the 4-entry top-level map with head b8 04 instead of a4",
    ),
    (
        "non_shortest_bytes_length", "Identity", IDENTITY_FULL,
        _s("05 81 420102", "05 81 58020102"),
        NC, "the 2-byte public key with head 58 02 instead of 42",
    ),
    # -- shortest floats
    (
        "float32_for_float16", "Fact", FACT_FULL,
        _s("07 f93800", "07 fa3f000000"),
        NC, "confidence 0.5 as float32 (fa); float16 (f9 3800) keeps the value",
    ),
    (
        "float64_for_float16", "Fact", FACT_FULL,
        _s("07 f93800", "07 fb3fe0000000000000"),
        NC, "confidence 0.5 as float64 (fb); float16 keeps the value",
    ),
    (
        "float64_for_float32", "Fact", FACT_F32,
        _s("07 fa3dcccccd", "07 fb3fb99999a0000000"),
        NC, "confidence float32(0.1) as float64; float32 (fa 3dcccccd) keeps the value",
    ),
    (
        "negative_zero", "Fact", FACT_FULL,
        _s("07 f93800", "07 f98000"),
        NC, "confidence -0.0 (f9 8000): it equals 0.0, whose encoding is f9 0000",
    ),
    # -- indefinite lengths
    (
        "indefinite_text", "Fact", FACT_MIN,
        _s(f"02 {LAWN}", "02 7f 626c61 62776e ff"),
        NC, "'lawn' as an indefinite-length text of two chunks ('la', 'wn')",
    ),
    (
        "indefinite_bytes", "Identity", IDENTITY_FULL,
        _s("05 81 420102", "05 81 5f 4101 4102 ff"),
        NC, "the public key as an indefinite-length byte string of two chunks",
    ),
    (
        "indefinite_array", "Identity", IDENTITY_FULL,
        _s("03 82 6161 6162", "03 9f 6161 6162 ff"),
        NC, "roles as an indefinite-length array",
    ),
    (
        "indefinite_map", "Fact", FACT_MIN,
        lambda b: _hx("bf") + b[1:] + _hx("ff"),
        NC, "the top-level map as an indefinite-length map (bf ... ff)",
    ),
    # -- tags
    (
        "tag_1_time", "Fact", FACT_FULL,
        _s(f"06 {uint_hex(_NOON_US)}", f"06 c1 {uint_hex(_NOON_S)}"),
        CE, "observed_at as tag 1 (epoch seconds) instead of integer microseconds: a time is "
        "an untagged integer",
    ),
    (
        "tag_unknown", "Fact", FACT_FULL,
        _s(f"06 {uint_hex(_NOON_US)}", f"06 d863 {uint_hex(_NOON_US)}"),
        CE, "observed_at wrapped in tag 99: no tags are allowed",
    ),
    (
        "tag_bignum", "Event", EVENT_FULL,
        _s("05 1a0016e360", "05 c2 43 16e360"),
        NC, "duration_us as tag 2 (unsigned bignum) of 3 bytes: the value is the integer "
        "1500000, whose canonical form is 1a 0016e360",
    ),
    (
        "tag_self_describe", "Fact", FACT_MIN,
        lambda b: _hx("d9d9f7") + b,
        CE, "the whole item wrapped in tag 55799 (self-described CBOR): no tags are allowed",
    ),
    # -- structure: keys and schema version
    (
        "unknown_key", "Fact", FACT_MIN,
        _then(lambda b: b + _hx("08 6178"), _count(4, 5)),
        CE, "key 8 does not exist in a Fact (it has keys 0..7)",
    ),
    (
        "text_key", "Fact", FACT_MIN,
        _s(f"01 {STATEMENT}", f"{text_hex('statement')} {STATEMENT}"),
        CE, "field name 'statement' as a text key instead of its integer key 1",
    ),
    (
        "bool_key", "Fact", FACT_MIN,
        _s(f"01 {STATEMENT}", f"f5 {STATEMENT}"),
        CE, "key 1 written as true (f5): keys are unsigned integers, and true is not 1",
    ),
    (
        "float_key", "Fact", FACT_MIN,
        _s(f"01 {STATEMENT}", f"f93c00 {STATEMENT}"),
        CE, "key 1 written as the float 1.0 (f9 3c00): keys are unsigned integers",
    ),
    (
        "nested_schema_version", "Event", EVENT_FULL,
        _s("a2 01 63555344", "a3 00 01 01 63555344"),
        CE, "a nested Cost map carries key 0: only top-level records have a schema version",
    ),
    (
        "missing_schema_version", "Fact", FACT_MIN,
        _s("a4 0001", "a3"),
        CE, "key 0 (schema version) removed",
    ),
    (
        "wrong_schema_version", "Fact", FACT_MIN,
        _s("a4 0001", "a4 0002"),
        CE, "schema version 2; this format is version 1",
    ),
    (
        "missing_required", "Fact", FACT_MIN,
        _then(_s(f"03 {COLOR}", ""), _count(4, 3)),
        CE, "the required predicate (key 3) removed",
    ),
    (
        "not_a_map", "Fact", FACT_MIN,
        lambda b: _hx("88") + b[1:],
        CE, "map head a4 replaced by array head 88: the 8 keys and values become an array",
    ),
    # -- wrong types
    (
        "text_for_int", "Pattern", PATTERN_COV,
        _s("03 0a", "03 623130"),
        CE, "coverage as the text '10' instead of the integer 10",
    ),
    (
        "int_for_float", "Fact", FACT_FULL,
        _s("07 f93800", "07 00"),
        CE, "confidence as the integer 0: a float field holds a float (encoders coerce first)",
    ),
    (
        "float_for_int", "Pattern", PATTERN_COV,
        _s("03 0a", "03 f94900"),
        CE, "coverage as the float 10.0 instead of the integer 10",
    ),
    (
        "float_for_time", "Fact", FACT_FULL,
        _s(f"06 {uint_hex(_NOON_US)}", "06 fb" + struct.pack(">d", _NOON_US).hex()),
        CE, "observed_at as a float: a time is integer microseconds",
    ),
    (
        "bytes_for_text", "Fact", FACT_MIN,
        _s(f"02 {LAWN}", "02 44 6c61776e"),
        CE, "subject as a byte string (44) instead of a text string (64)",
    ),
    (
        "label_for_enum", "Fact", FACT_FULL,
        _s("05 03", f"05 {text_hex('observed')}"),
        CE, "source as its label 'observed' instead of its code 3",
    ),
    (
        "int_for_bool", "Capability", {**CAPABILITY_MIN, "verified": True},
        _s("03 f5", "03 01"),
        CE, "verified as the integer 1 instead of true",
    ),
    (
        "null_for_optional", "Fact", FACT_MIN,
        _then(lambda b: b + _hx("04 f6"), _count(4, 5)),
        CE, "object (key 4) present as null: an unset field is omitted",
    ),
    # -- text
    (
        "invalid_utf8", "Fact", FACT_MIN,
        _s(f"02 {LAWN}", "02 64 6c61ff6e"),
        CE, "the byte ff inside 'lawn' is not UTF-8",
    ),
    (
        "utf8_surrogate", "Fact", FACT_MIN,
        _s(f"02 {LAWN}", "02 64 6ceda080"),
        CE, "ed a0 80 encodes the surrogate U+D800, which is not valid UTF-8",
    ),
    (
        "non_nfc_text", "Fact", FACT_CAFE,
        _s("65 636166c3a9", "66 63616665cc81"),
        NC, "'caf\u00e9' with e + U+0301 (decomposed) instead of U+00E9: text is stored NFC",
    ),
    (
        "empty_text", "Fact", FACT_MIN,
        _s(f"01 {STATEMENT}", "01 60"),
        CE, "an empty statement: text is never empty",
    ),
    (
        "short_text_over_limit", "Identity", {"name": "Ada"},
        _then(lambda b: b + _hx("02 790101" + "78" * 257), _count(2, 3)),
        CE, "did of 257 bytes; the limit is 256",
    ),
    (
        "list_over_limit", "Identity", {"name": "Ada"},
        _then(lambda b: b + _hx("03 990101" + "6178" * 257), _count(2, 3)),
        CE, "257 roles; the limit is 256 items",
    ),
    (
        "bad_decimal", "Event", EVENT_FULL,
        _s("02 63312e35", "02 64312e3530"),
        CE, "cost amount '1.50': a decimal has no trailing zeros",
    ),
    (
        "latest_uri", "Belief", BELIEF_EVIDENCE,
        _s(text_hex(uri("Fact", 1)), text_hex(uri("Fact", 1)[:-1] + "latest")),
        CE, "an evidence URI ending in #latest: URIs name one exact version",
    ),
    (
        "duplicate_uri", "Belief", BELIEF_EVIDENCE,
        _s(f"81 {text_hex(uri('Fact', 1))}", f"82 {text_hex(uri('Fact', 1)) * 2}"),
        CE, "the same URI twice in evidence_for: URI lists hold distinct items",
    ),
    # -- values
    (
        "confidence_over_one", "Fact", FACT_FULL,
        _s("07 f93800", "07 f93e00"),
        CE, "confidence 1.5: it lies in [0, 1]",
    ),
    (
        "confidence_negative", "Fact", FACT_FULL,
        _s("07 f93800", "07 f9b800"),
        CE, "confidence -0.5: it lies in [0, 1]",
    ),
    (
        "confidence_nan", "Fact", FACT_FULL,
        _s("07 f93800", "07 f97e00"),
        CE, "confidence NaN: it lies in [0, 1]",
    ),
    (
        "confidence_infinity", "Fact", FACT_FULL,
        _s("07 f93800", "07 f97c00"),
        CE, "confidence +infinity: it lies in [0, 1]",
    ),
    (
        "enum_code_zero", "Fact", FACT_FULL,
        _s("05 03", "05 00"),
        CE, "source code 0: no SourceKind has it",
    ),
    (
        "enum_code_unknown", "Fact", FACT_FULL,
        _s("05 03", "05 05"),
        CE, "source code 5: SourceKind has codes 1..4",
    ),
    (
        "time_out_of_range", "Fact", FACT_FULL,
        _s(f"06 {uint_hex(_NOON_US)}", f"06 {uint_hex(_TIME_MAX_US + 1)}"),
        CE, "observed_at one microsecond after 9999-12-31T23:59:59.999999Z",
    ),
    # -- defaults written out
    (
        "explicit_false", "Capability", CAPABILITY_MIN,
        _then(lambda b: b + _hx("03 f4"), _count(3, 4)),
        NC, "verified present as false: false is omitted",
    ),
    (
        "explicit_empty_list", "Identity", {"name": "Ada"},
        _then(lambda b: b + _hx("03 80"), _count(2, 3)),
        NC, "roles present as an empty array: empty lists are omitted",
    ),
    (
        "explicit_empty_map", "Identity", {"name": "Ada"},
        _then(lambda b: b + _hx("04 a0"), _count(2, 3)),
        NC, "profile present as an empty map: empty maps are omitted",
    ),
    # -- framing
    (
        "trailing_byte", "Fact", FACT_MIN,
        lambda b: b + _hx("00"),
        NC, "one byte (00) after the item",
    ),
    (
        "trailing_item", "Fact", FACT_MIN,
        lambda b: b + _hx("a0"),
        NC, "a second item (an empty map) after the first",
    ),
    (
        "truncated", "Fact", FACT_MIN,
        lambda b: b[:-1],
        CE, "the last byte removed: the input ends inside an item",
    ),
    (
        "empty_input", "Fact", FACT_MIN,
        lambda b: b"",
        CE, "no bytes at all",
    ),
]  # fmt: skip


def _negative(spec: Negative) -> dict[str, Any]:
    name, type_name, base, change, error, why = spec
    mtype = MemoryType.from_name(type_name)
    assert mtype is not None
    valid = encode_data(parse_input(type_name, base))
    decode_data(mtype, valid)
    bad = change(valid)
    try:
        decode_data(mtype, bad)
    except CodecError as exc:
        if type(exc).__name__ != error:
            raise AssertionError(
                f"{name}: raised {type(exc).__name__} ({exc}), not {error}"
            ) from exc
    else:
        raise AssertionError(f"{name}: {bad.hex()} decodes")
    return {
        "name": name,
        "type": type_name,
        "valid_hex": valid.hex(),
        "cbor_hex": bad.hex(),
        "error": error,
        "why": why,
    }


def _negative_file() -> dict[str, Any]:
    names = [n[0] for n in NEGATIVES]
    assert len(set(names)) == len(names), "negative names repeat"
    return {"conventions": NEGATIVE_CONVENTIONS, "cases": [_negative(n) for n in NEGATIVES]}


# ---------------------------------------------------------------------------------------------
# URIs

_ID_1: Final = str(fixed_id(1))
_ID_0: Final = "0" * 26
_ID_MAX: Final = "7" + "Z" * 25

VALID_URIS: Final = [
    f"cortex://Fact/{_ID_1}#1",
    f"cortex://Identity/{_ID_1}#42",
    f"cortex://Pattern/{_ID_0}#1",
    f"cortex://Event/{_ID_MAX}#9223372036854775807",
    *(f"cortex://{t.type_name}/{fixed_id(100 + t.value)}#{t.value}" for t in MemoryType),
]

INVALID_URIS: Final = [
    (f"cortex://Fact/{_ID_1}", "uri", "format", "no version"),
    (f"cortex://Fact/{_ID_1}#", "uri", "version", "an empty version"),
    (f"cortex://Fact/{_ID_1}#latest", "uri", "version", "#latest names no exact version"),
    (f"cortex://Fact/{_ID_1}#0", "uri", "version", "versions start at 1"),
    (f"cortex://Fact/{_ID_1}#-1", "uri", "version", "a negative version"),
    (f"cortex://Fact/{_ID_1}#01", "uri", "version", "a leading zero"),
    (f"cortex://Fact/{_ID_1}#+1", "uri", "version", "a sign"),
    (f"cortex://Fact/{_ID_1}#1.0", "uri", "version", "not a whole number"),
    (f"cortex://Fact/{_ID_1}# 1", "uri", "version", "a space"),
    (f"cortex://Fact/{_ID_1}#1\n", "uri", "version", "a trailing newline"),
    (f"cortex://Fact/{_ID_1}#1#2", "uri", "version", "two fragments"),
    (f"cortex://Fact/{_ID_1}#9223372036854775808", "uri", "version", "above 2**63 - 1"),
    (f"cortex://Fact/{_ID_1.lower()}#1", "uri", "id", "a lower-case id"),
    (f"cortex://Fact/{_ID_1[:-1]}I#1", "uri", "id", "I is not a Crockford base32 digit"),
    (f"cortex://Fact/{_ID_1[:-1]}U#1", "uri", "id", "U is not a Crockford base32 digit"),
    (f"cortex://Fact/8{_ID_1[1:]}#1", "uri", "id", "a first character above 7 exceeds 128 bits"),
    (f"cortex://Fact/{_ID_1[:-1]}#1", "uri", "format", "an id of 25 characters"),
    (f"cortex://Fact/{_ID_1}0#1", "uri", "format", "an id of 27 characters"),
    (f"cortex://fact/{_ID_1}#1", "uri", "type_name", "a lower-case type name"),
    (f"cortex://FACT/{_ID_1}#1", "uri", "type_name", "an upper-case type name"),
    (f"cortex://Facts/{_ID_1}#1", "uri", "type_name", "not a type name"),
    (f"cortex://Memory/{_ID_1}#1", "uri", "type_name", "not a type name"),
    (f"cortex:/Fact/{_ID_1}#1", "uri", "format", "one slash after the scheme"),
    (f"CORTEX://Fact/{_ID_1}#1", "uri", "format", "an upper-case scheme"),
    (f"https://Fact/{_ID_1}#1", "uri", "format", "another scheme"),
    (f" cortex://Fact/{_ID_1}#1", "uri", "format", "leading white space"),
    (f"cortex://Fact/{_ID_1}/#1", "uri", "format", "a slash before the fragment"),
    (f"cortex://Fact/{_ID_1}?v=1", "uri", "format", "a query instead of a fragment"),
]


def _uri_file() -> dict[str, Any]:
    valid = []
    for text in VALID_URIS:
        u = Uri.parse(text)
        assert str(u) == text
        valid.append(
            {
                "uri": text,
                "type": u.type.type_name,
                "id": str(u.id),
                "id_hex": u.id.bytes.hex(),
                "version": u.version,
                "timestamp_ms": u.id.timestamp_ms,
            }
        )
    invalid = []
    for text, field, rule, why in INVALID_URIS:
        try:
            Uri.parse(text)
        except ValidationError as exc:
            if (exc.field, exc.rule) != (field, rule):
                raise AssertionError(
                    f"{text!r}: {exc.field}/{exc.rule}, not {field}/{rule}"
                ) from exc
        else:
            raise AssertionError(f"{text!r} parses")
        invalid.append({"uri": text, "field": field, "rule": rule, "why": why})
    return {"conventions": URI_CONVENTIONS, "valid": valid, "invalid": invalid}


# ---------------------------------------------------------------------------------------------
# The lexical analyzer (specs/lexical.md §2): stems, document terms, query terms

LEXICAL_CONVENTIONS: Final = {
    "stems": "[token, stem]: the Snowball English stem of a folded token (lexical.md §2 step 4)",
    "documents": "text -> tokens (tokenize) and terms (the index terms: tokens, stemmed)",
    "queries": "text -> terms (query_terms: function words left out unless all are; stemmed; "
    "distinct, in order of first occurrence)",
}
STEM_WORDS: Final = (  # noqa: SIM905 (a word list reads better as text)
    # inflections that merge
    "run running runs ran runner "
    "connect connected connecting connection connections "
    "adopt adopted adopting adoption adoptions "
    "agency agencies happy happiness happily "
    "generous generously generosity painting paintings painted "
    "study studies studied studying "
    "argue argued argues arguing argument "
    "relate relational relativity "
    "hopeful hopefully hopefulness "
    "caress caresses ponies ties cats "
    "sky skies dying lying news "
    "gently early only singly "
    "generate generates generation generations "
    "communism communication "
    # words the algorithm leaves alone or keeps apart
    "went was is the tea teas green greenish teapot "
    "lgbtq 2023 08t13 rtx4090 zurich cafe σοφια москва 東"
).split()
LEXICAL_DOCUMENTS: Final = (
    "I went to a LGBTQ support group yesterday and it was so powerful.",
    "Event: interaction with Caroline\noccurred_at: 2023-05-08T13:56:00Z",
    "Running, runs and ran: the runner's RUNNING shoes.",
    "Crème brûlée at the Café de Genève",
    "東京は日本",
    "",
)
LEXICAL_QUERIES: Final = (
    "When did Caroline go to the LGBTQ support group?",
    "What are Melanie's hobbies?",
    "who are you",
    "the the THE",
    "Paintings? painting, painted!",
    "",
)


def _lexical_file() -> dict[str, Any]:
    from cortex.index.text import query_terms, terms, tokenize

    return {
        "conventions": LEXICAL_CONVENTIONS,
        "stems": [[w, s] for w in STEM_WORDS for (s,) in [terms(w)]],
        "documents": [
            {"text": t, "tokens": tokenize(t), "terms": terms(t)} for t in LEXICAL_DOCUMENTS
        ],
        "queries": [{"text": t, "terms": query_terms(t)} for t in LEXICAL_QUERIES],
    }


POSTINGS_CONVENTIONS: Final = {
    "varints": "[value, its unsigned LEB128 varint (hex)]: 7 bits a byte, least significant "
    "first, the high bit set on every byte but the last, shortest form only (lexical.md §4a)",
    "refused_varints": "[bytes (hex), why]: not one canonical varint of at most 5 bytes",
    "cases": "a term's postings [docno, tf, dl] in docno order -> its blocks [key (hex), sealed "
    "value (hex)]: lex/p/ term 0x00 first-docno(u32 BE) -> varint(tf) varint(dl), then per "
    "next posting varint(docno - previous docno) varint(tf) varint(dl); crc32(BE); a block "
    "holds 1 to 128 postings, a list written in one go is cut every 128 from its first",
    "refused": "[key (hex), sealed value (hex, checksum right), why]: not a posting block",
}

VARINTS: Final = [0, 1, 127, 128, 255, 300, 16383, 16384, 2**21 - 1, 2**21, 2**28, 2**32 - 1]


def _varint(n: int) -> bytes:
    from cortex.index.postings import encode_varint

    out = bytearray()
    encode_varint(n, out)
    return bytes(out)


def _postings_file() -> dict[str, Any]:
    import random

    from cortex.index.postings import BLOCK_MAX, block_encode, cut_runs, decode_varint
    from cortex.storage.keys import posting_prefix
    from cortex.storage.kv import seal

    def case(term: str, docnos: list[int], why: str) -> dict[str, Any]:
        rows = [(d, 1 + i % 3, 3 + i % 7 + (i % 5) * 90) for i, d in enumerate(docnos)]
        records = b"".join(struct.pack(">III", d, tf, dl) for d, tf, dl in rows)
        prefix = posting_prefix(term)
        return {
            "why": why,
            "term": term,
            "postings": [list(r) for r in rows],
            "blocks": [
                [(prefix + run[:4]).hex(), seal(block_encode(run)).hex()]
                for run in cut_runs(records)
            ],
        }

    rng = random.Random(4)
    spread = sorted(rng.sample(range(1, 3_000_000), 300))
    refused_varints = [
        ("80", "cut: a continuation byte last"),
        ("8000", "not the shortest form (0 in two bytes)"),
        ("ff8000", "not the shortest form (a last byte of 0)"),
        ("8080808080", "longer than 5 bytes' worth: cut"),
        ("808080808001", "longer than 5 bytes"),
    ]
    for hx, _ in refused_varints:
        try:
            decode_varint(bytes.fromhex(hx), 0)
        except ValueError:
            continue
        raise AssertionError(f"varint vector {hx} decodes")  # pragma: no cover
    prefix = posting_prefix("tea")
    one = block_encode(struct.pack(">III", 5, 1, 4) + struct.pack(">III", 9, 2, 4))
    refused = [
        (prefix + (5).to_bytes(4, "big"), b"", "empty"),
        (prefix + (5).to_bytes(4, "big"), one + b"\x01", "trailing byte"),
        (prefix + (5).to_bytes(4, "big"), one[:2] + b"\x00" + one[3:], "a docno delta of 0"),
        (prefix + (5).to_bytes(4, "big"), b"\x00\x04", "tf 0"),
        (prefix + (5).to_bytes(4, "big"), b"\x05\x04", "tf above dl"),
        (prefix + (5).to_bytes(4, "big"), b"\x81\x00\x04", "a varint not in its shortest form"),
        (prefix + (5).to_bytes(4, "big"), b"\x01\x04" * (BLOCK_MAX + 1), "129 postings"),
        (
            prefix + (2**32 - 2).to_bytes(4, "big"),
            b"\x01\x04\x02\x01\x04",
            "a docno past 2**32 - 1",
        ),
    ]
    return {
        "conventions": POSTINGS_CONVENTIONS,
        "varints": [[n, _varint(n).hex()] for n in VARINTS],
        "refused_varints": [[hx, why] for hx, why in refused_varints],
        "cases": [
            case("tea", [0, 1, 2], "a few postings: one block"),
            case("zürich", spread, "300 postings far apart: blocks of 128, 128 and 44"),
            case("run", list(range(1000, 1128)), "exactly one full block"),
            case("a", [2**32 - 2, 2**32 - 1], "the largest docnos"),
        ],
        "refused": [[k.hex(), seal(v).hex(), why] for k, v, why in refused],
    }


SEGMENTS_CONVENTIONS: Final = {
    "cases": "a segment's entries [term, kind (1 ADD, 2 SET, 3 DEL), docno, tf, dl] (tf, dl "
    "null for DEL) -> its sealed value (hex): count(u32 BE), then per term in byte order "
    "len(u16 BE) term n(u32 BE), then per docno in order kind(u8) docno(u32 BE) [tf(u32 BE) "
    "dl(u32 BE)], crc32(BE) (lexical.md §4b, format 14)",
    "refused": "sealed values (hex, checksum right) that are not the canonical encoding of a "
    "segment, and why: decoding MUST refuse them",
}


def _segments_file() -> dict[str, Any]:
    from cortex.index import segments
    from cortex.storage.kv import seal

    ids = [n.to_bytes(4, "big") for n in (3, 70, 4096, 2**32 - 1)]

    def entries_of(rows: list[tuple[str, int, bytes, int | None, int | None]]) -> Any:
        groups: dict[str, dict[bytes, tuple[int, bytes | None]]] = {}
        for term, kind, raw, tf, dl in rows:
            tail = None if tf is None else struct.pack(">II", tf, dl)
            groups.setdefault(term, {})[raw] = (kind, tail)
        return groups

    def case(why: str, rows: list[tuple[str, int, bytes, int | None, int | None]]) -> Any:
        payload = segments.encode(entries_of(rows))
        back = segments.decode(payload)
        flat = [
            [
                t,
                k,
                int.from_bytes(raw, "big"),
                *(struct.unpack(">II", tail) if tail else (None, None)),
            ]
            for t, es in back
            for k, raw, tail in es
        ]
        assert sorted(flat, key=lambda r: (r[0].encode(), r[2])) == flat
        return {"why": why, "entries": flat, "value": seal(payload).hex()}

    a, b, c, d = ids
    cases = [
        case("one new memory: ADDs of its terms", [("tea", 1, a, 1, 5), ("garden", 1, a, 2, 5)]),
        case(
            "an update keeping a term (SET), dropping one (DEL), adding one (ADD)",
            [("tea", 2, b, 1, 4), ("coffee", 1, b, 1, 4), ("milk", 3, b, None, None)],
        ),
        case(
            "terms in byte order (ü after z), ids in order",
            [("zürich", 1, d, 1, 3), ("zurich", 1, c, 1, 3), ("zurich", 3, a, None, None)],
        ),
        case("a DEL alone (a tombstone)", [("a", 3, bytes(4), None, None)]),
    ]
    good = segments.encode(entries_of([("tea", 1, a, 1, 5), ("tea", 1, b, 1, 5)]))
    one = segments.encode(entries_of([("tea", 1, a, 1, 5)]))
    swapped = bytearray(good)  # the two ids of "tea" in the wrong order
    first = 4 + 2 + 3 + 4
    swapped[first : first + 13], swapped[first + 13 : first + 26] = (
        good[first + 13 : first + 26],
        good[first : first + 13],
    )
    refused = [
        ("empty", b""),
        ("no group", struct.pack(">I", 0)),
        ("count says 2 for 1 entry", struct.pack(">I", 2) + one[4:]),
        ("trailing byte", one + b"\x00"),
        ("docnos out of order", bytes(swapped)),
        ("a docno twice", good[: first + 13] + good[first : first + 13]),
        ("unknown kind 4", one[:first] + b"\x04" + one[first + 1 :]),
        ("tf 0", one[: first + 5] + struct.pack(">II", 0, 5)),
        ("tf above dl", one[: first + 5] + struct.pack(">II", 6, 5)),
        ("empty term", struct.pack(">IH", 1, 0) + struct.pack(">I", 1) + one[first:]),
        ("term with 0x00", struct.pack(">IH", 1, 3) + b"t\x00a" + one[4 + 2 + 3 :]),
        ("term not UTF-8", struct.pack(">IH", 1, 3) + b"t\xffa" + one[4 + 2 + 3 :]),
        ("empty group", struct.pack(">IH", 1, 3) + b"tea" + struct.pack(">I", 0) + one[4:]),
        (
            "terms out of order",
            segments.encode(entries_of([("tea", 1, a, 1, 5)]))[:4].replace(
                b"\x00\x00\x00\x01", b"\x00\x00\x00\x02"
            )
            + struct.pack(">H", 3)
            + b"tea"
            + struct.pack(">I", 1)
            + one[first:]
            + struct.pack(">H", 3)
            + b"cup"
            + struct.pack(">I", 1)
            + one[first:],
        ),
        ("a DEL with a posting", one[:first] + b"\x03" + one[first + 1 :]),
        ("an ADD cut short", one[:-4]),
    ]
    out_refused = []
    for why, payload in refused:
        try:
            segments.decode(payload)
        except segments.SegmentError:
            out_refused.append({"why": why, "value": seal(payload).hex()})
        else:  # pragma: no cover - the vector would be wrong
            raise AssertionError(f"segment vector {why!r} decodes")
    return {"conventions": SEGMENTS_CONVENTIONS, "cases": cases, "refused": out_refused}


# ---------------------------------------------------------------------------------------------
# Files


FORMS_CASES: Final = [
    ("prefix", "the short form is the medium's first bytes: key 4 = their count",
     "prefers window seats", "prefers window seats (prefer)"),
    ("prefix cut", "the short form is the medium's first bytes then '…': key 3 = their count",
     "the night ferry to the northern…",
     "the night ferry to the northern islands leaves at eleven"),
    ("whole", "the short form is the whole medium form: key 4 = its length",
     "short one", "short one"),
    ("ellipsis alone", "the short form is '…' alone: key 3 = 0",
     "…", "anything at all"),
    ("non-ASCII cut", "lengths count UTF-8 bytes: 'Zoë ' is 5",
     "Zoë …", "Zoë prefers tea"),
    ("an ellipsis in the medium", "the medium holds '…' where the short form ends: the short "
     "form is its prefix, key 4 (key 3 with the shorter count is refused)",
     "wait…", "wait… then go"),
    ("own text", "a short form that does not begin the medium form stays text: key 1",
     "a summary of its own", "a medium form the short form does not begin"),
    ("one character short", "the short form differs in its last character: key 1",
     "prefers window seat!", "prefers window seats (prefer)"),
]  # fmt: skip
"""``forms.json``'s cases: (name, why, short, medium)."""

FORMS_VERSION: Final = {
    "version": 1,
    "created_at": "2026-11-20T09:30:00Z",
    "created_by": "agent-1",
    "confidence": 1.0,
    "provenance": {"source": "user_input"},
    "data": "Preference(topic='window seats', polarity=prefer), its hash",
}
"""The version of ``forms.json``'s record vectors (the id and times of ``SENSITIVITY_HEAD``)."""


def forms_records(short: str, medium: str) -> tuple[Any, Any]:
    """The head (``SENSITIVITY_HEAD``) and version (``FORMS_VERSION``) holding these forms."""
    from cortex.model.enums import SourceKind
    from cortex.model.records import Forms, Preference, Provenance, Version

    forms = Forms(short=short, medium=medium)
    head, _ep = sensitivity_records("internal")
    head = msgspec.structs.replace(head, type=MemoryType.PREFERENCE, forms=forms)
    data = encode_data(Preference(topic="window seats", polarity="prefer"))
    version = Version(
        id=head.id,
        version=1,
        type=MemoryType.PREFERENCE,
        data=data,
        hash=content_hash(MemoryType.PREFERENCE, data),
        created_at=head.created_at,
        created_by="agent-1",
        confidence=1.0,
        provenance=Provenance(source=SourceKind.USER_INPUT),
        forms=forms,
    )
    return head, version


def _forms_file() -> dict[str, Any]:
    """Forms in their compact encoding (format 15, ``specs/format.md`` Forms).

    Each case as the nested record, and in a head and a version; records a reader refuses.
    """
    from cortex.errors import CodecError, NonCanonicalError
    from cortex.model.codec import FORMS, FORMS_V14, HEAD, VERSION_V17
    from cortex.model.records import Forms

    cases = []
    for name, why, short, medium in FORMS_CASES:
        forms = Forms(short=short, medium=medium)
        raw = FORMS.encode(forms, "forms")
        assert FORMS.decode(raw, "forms") == forms
        head, version = forms_records(short, medium)
        hraw, vraw = HEAD.encode(head, "head"), VERSION_V17.encode(version, "version")
        assert HEAD.decode(hraw, "head") == head
        assert VERSION_V17.decode(vraw, "version") == version
        assert raw in hraw and raw in vraw
        cases.append(
            {
                "name": name,
                "why": why,
                "short": short,
                "medium": medium,
                "cbor_hex": raw.hex(),
                "format14_hex": FORMS_V14.encode(forms, "forms").hex(),
                "head_hex": hraw.hex(),
                "version_hex": vraw.hex(),
            }
        )
    m = text_hex("Zoë prefers tea")  # 'Zoë' is 5a 6f c3 ab: byte 3 is inside the ë
    e = text_hex("wait… then go")
    negative = [
        ("n past the end (key 4)", "a2 02" + m + "04 11", "CodecError"),
        ("n past the end (key 3)", "a2 02" + m + "03 11", "CodecError"),
        ("n inside a UTF-8 sequence", "a2 02" + m + "04 03", "CodecError"),
        ("n inside a UTF-8 sequence (key 3)", "a2 02" + m + "03 03", "CodecError"),
        ("n = 0 with key 4 (the short form is never empty)", "a2 02" + m + "04 00", "CodecError"),
        ("n not an unsigned integer", "a2 02" + m + "04 20", "CodecError"),
        ("n as text", "a2 02" + m + "04" + text_hex("3"), "CodecError"),
        ("keys 3 and 4 both", "a3 02" + m + "03 02 04 02", "CodecError"),
        ("keys 1 and 4 both", "a3 01" + text_hex("Zo") + "02" + m + "04 02", "CodecError"),
        ("no short form", "a1 02" + m, "CodecError"),
        ("no medium form", "a1 04 02", "CodecError"),
        ("an unknown key 5", "a2 02" + m + "05 02", "CodecError"),
        ("the wide form where key 4 applies", "a2 01" + text_hex("Zoë") + "02" + m,
         "NonCanonicalError"),
        ("the wide form where key 3 applies", "a2 01" + text_hex("Zoë…") + "02" + m,
         "NonCanonicalError"),
        ("key 3 where key 4 applies ('…' follows in the medium)", "a2 02" + e + "03 04",
         "NonCanonicalError"),
        ("keys out of order", "a2 04 03 02" + m, "CodecError"),
    ]  # fmt: skip
    classes = {"CodecError": CodecError, "NonCanonicalError": NonCanonicalError}
    out_negative = []
    for name, hx, error in negative:
        raw = _hx(hx)
        try:
            FORMS.decode(raw, "forms")
        except CodecError as exc:
            assert type(exc) is classes[error], (name, exc)
        else:
            raise AssertionError(f"forms vector {name!r} decodes")
        out_negative.append({"name": name, "cbor_hex": raw.hex(), "error": error})
    return {
        "conventions": {
            "cbor_hex": "the Forms record in its compact encoding (store format 15): {1: short, "
            "2: medium}, or {2: medium, 4: n} (short = the medium's first n UTF-8 bytes) or "
            "{2: medium, 3: n} (short = those bytes then U+2026 '…'); the encoder takes 4, "
            "else 3, else 1",
            "format14_hex": "the same forms as formats 1-14 and their bundles encode them",
            "head_hex": "a head holding the forms (SENSITIVITY_HEAD, type preference) at key 13",
            "version_hex": "a version holding them at key 11 (FORMS_VERSION in "
            "tools/gen_vectors.py, its data Preference(topic='window seats', polarity=prefer)) "
            "as store formats 15-17 encode it; format 18 stores a version's medium form as a "
            "reference into its data where one applies (medium_refs.json)",
            "negative": "Forms a reader MUST refuse, with the error class",
        },
        "head": SENSITIVITY_HEAD,
        "version": FORMS_VERSION,
        "cases": cases,
        "negative": out_negative,
    }


MEDIUM_REF_CASES: Final = [
    ("a preference", "the topic occurs in the medium: prefix 'prefers ', the topic's item, "
     "suffix ' (prefer)'; the short form is the medium's first bytes (key 4)",
     "preference", {"topic": "window seats on long flights", "polarity": "prefer"},
     "prefers window seats on long flights", "prefers window seats on long flights (prefer)"),
    ("a short text stays literal", "'green tea' is 9 bytes, under the 12 a reference needs: "
     "key 2", "preference", {"topic": "green tea", "polarity": "prefer"},
     "prefers green tea", "prefers green tea (prefer)"),
    ("twelve bytes", "exactly 12 bytes is enough", "preference",
     {"topic": "window seats", "polarity": "avoid"}, "avoids window seats",
     "avoids window seats (avoid)"),
    ("the longest text", "statement and subject both occur; the longer, the statement, is "
     "referred to", "fact",
     {"statement": "the harbour ferry leaves at eleven", "subject": "the harbour ferry",
      "predicate": "departs"},
     "the harbour ferry leaves at eleven", "the harbour ferry leaves at eleven"),
    ("equal lengths: the first in data", "two texts of 14 bytes occur; the one encoded first "
     "(the statement, key 1, before the subject, key 2)", "fact",
     {"statement": "north terminal", "subject": "south terminal", "predicate": "pairs"},
     "pairs", "north terminal / south terminal"),
    ("the first occurrence in the medium", "the text occurs twice: the prefix is the "
     "shortest", "fact", {"statement": "bring an umbrella", "subject": "weather",
     "predicate": "advice"}, "twice", "bring an umbrella, bring an umbrella"),
    ("the whole medium", "prefix and suffix empty", "fact",
     {"statement": "the ferry leaves at eleven", "subject": "ferry", "predicate": "leaves"},
     "the ferry leaves at eleven", "the ferry leaves at eleven"),
    ("own text", "forms supplied by a caller that hold no text of the data: key 2", "fact",
     {"statement": "the ferry leaves at eleven", "subject": "ferry", "predicate": "leaves"},
     "a summary of its own", "a medium form of its own"),
    ("non-ASCII", "offsets and lengths count UTF-8 bytes", "preference",
     {"topic": "crème brûlée after dinner", "polarity": "prefer"},
     "prefers crème brûlée…", "prefers crème brûlée after dinner (prefer)"),
    ("a cut short form", "the short form is a cut of the medium (key 3), which refers to the "
     "data (key 5)", "fact",
     {"statement": "the quarterly report is due on the first monday of april",
      "subject": "report", "predicate": "due"},
     "report: the quarterly report is due…",
     "report: the quarterly report is due on the first monday of april"),
]  # fmt: skip
"""``medium_refs.json``'s cases: (name, why, type, data fields, short, medium)."""


def medium_ref_version(type_name: str, fields: dict[str, Any], short: str, medium: str) -> Any:
    """The version of ``medium_refs.json``: ``FORMS_VERSION``'s fields, this data, these forms."""
    from cortex.model.enums import SourceKind
    from cortex.model.records import Forms, Provenance, Version

    head, _ep = sensitivity_records("internal")
    mtype = next(t for t in MemoryType if t.type_name.lower() == type_name)
    data = encode_data(parse_input(mtype.type_name, fields))
    return Version(
        id=head.id,
        version=1,
        type=mtype,
        data=data,
        hash=content_hash(mtype, data),
        created_at=head.created_at,
        created_by="agent-1",
        confidence=1.0,
        provenance=Provenance(source=SourceKind.USER_INPUT),
        forms=Forms(short=short, medium=medium),
    )


def _medium_refs_file() -> dict[str, Any]:
    """A version's medium form as a reference into its data (format 18, ``specs/format.md``).

    Each case's forms and whole version; versions a reader refuses.
    """
    from cortex.errors import NonCanonicalError
    from cortex.model.codec import VERSION, VERSION_FORMS, VERSION_V17

    cases = []
    for name, why, type_name, fields, short, medium in MEDIUM_REF_CASES:
        version = medium_ref_version(type_name, fields, short, medium)
        raw = VERSION.encode(version, "version")
        assert VERSION.decode(raw, "version") == version
        forms = VERSION_FORMS.enc_in(version.forms, version.data)
        assert raw.endswith(b"\x0b" + forms)
        cases.append(
            {
                "name": name,
                "why": why,
                "type": type_name,
                "data_hex": version.data.hex(),
                "short": short,
                "medium": medium,
                "forms_hex": forms.hex(),
                "version_hex": raw.hex(),
                "format17_hex": VERSION_V17.encode(version, "version").hex(),
            }
        )

    def splice(case: int, forms_hex: str, data: bool = True) -> bytes:
        version = medium_ref_version(*MEDIUM_REF_CASES[case][2:])
        bare = msgspec.structs.replace(version, forms=None)
        if not data:
            bare = msgspec.structs.replace(bare, data=None)
        b = VERSION.encode(bare, "version")
        return bytes((b[0] + 1,)) + b[1:] + b"\x0b" + _hx(forms_hex)

    pre = text_hex("prefers ")
    suf = text_hex(" (prefer)")
    # case 0's data: a3 00 01 01 78 1c <topic> 02 01: the topic's item is at offset 4
    negative = [
        ("the literal medium where a reference applies", 0,
         "a2 02" + text_hex(MEDIUM_REF_CASES[0][5]) + "04 18 24", "NonCanonicalError"),
        ("an offset past the data", 0, "a2 04 18 24 05 83" + pre + "18 40" + suf, "CodecError"),
        ("an offset on no text item (the map's head)", 0, "a2 04 18 24 05 83" + pre + "00" + suf,
         "CodecError"),
        ("an offset inside the text", 0, "a2 04 18 24 05 83" + pre + "06" + suf, "CodecError"),
        ("a reference to a text under 12 bytes", 1,
         "a2 04 11 05 83" + pre + "04" + suf, "NonCanonicalError"),
        ("not the longest text", 3, "a2 04 18 22 05 83 60 18 29" + text_hex(" leaves at eleven"),
         "NonCanonicalError"),
        ("not the first occurrence in the medium", 5,
         "a2 01" + text_hex("twice") + "05 83" + text_hex("bring an umbrella, ") + "04 60",
         "NonCanonicalError"),
        ("keys 2 and 5 both", 0, "a3 02" + text_hex(MEDIUM_REF_CASES[0][5]) + "04 18 24 05 83"
         + pre + "04" + suf, "CodecError"),
        ("a reference of two items", 0, "a2 04 18 24 05 82" + pre + "04", "CodecError"),
        ("a prefix as bytes", 0, "a2 04 18 24 05 83 48 7072656665727320 04" + suf, "CodecError"),
        ("an offset as text", 0, "a2 04 18 24 05 83" + pre + text_hex("4") + suf, "CodecError"),
    ]  # fmt: skip
    out_negative = []
    for name, case, hx, error in negative:
        raw = splice(case, hx)
        try:
            VERSION.decode(raw, "version")
        except CodecError as exc:
            want = NonCanonicalError if error == "NonCanonicalError" else CodecError
            assert type(exc) is want, (name, exc)
        else:
            raise AssertionError(f"medium_refs vector {name!r} decodes")
        out_negative.append({"name": name, "version_hex": raw.hex(), "error": error})
    raw = splice(0, "a2 04 18 24 05 83" + pre + "04" + suf, data=False)
    try:
        VERSION.decode(raw, "version")
    except CodecError as exc:
        assert type(exc) is CodecError, exc
    else:
        raise AssertionError("a reference without data decodes")
    out_negative.append(
        {"name": "a reference in a version without data", "version_hex": raw.hex(),
         "error": "CodecError"}
    )  # fmt: skip
    return {
        "conventions": {
            "forms_hex": "a version's Forms (store format 18): the medium form is key 5 = "
            "[prefix, at, suffix] (the medium is prefix, the text item at offset at of the "
            "version's data, then suffix) when a text of the data of at least 12 UTF-8 bytes "
            "occurs in it on character boundaries (the longest; of equal lengths the first in "
            "the data; its first occurrence in the medium), else key 2; the short form keeps "
            "keys 1, 3, 4 relative to the medium's text",
            "data_hex": "the version's data: the canonical CBOR of the typed value",
            "version_hex": "the whole version (FORMS_VERSION's fields, this data and its hash, "
            "these forms)",
            "format17_hex": "the same version as store formats 15-17 encode it (medium text)",
            "negative": "versions a reader MUST refuse, with the error class",
        },
        "version": FORMS_VERSION,
        "cases": cases,
        "negative": out_negative,
    }


def file_name(type_name: str) -> str:
    """The vector file of a type: ``fact.json`` for ``Fact``."""
    return f"{type_name.lower()}.json"


def build() -> dict[str, Any]:
    """Every vector file: file name -> JSON document. Deterministic.

    Raises:
        AssertionError: the code disagrees with a hand-written expectation (a negative
            vector's error class, a URI's error, a round trip).
    """
    files = {file_name(t.type_name): _type_file(t.type_name) for t in MemoryType}
    files["negative.json"] = _negative_file()
    files["uris.json"] = _uri_file()
    files["lexical.json"] = _lexical_file()
    files["postings.json"] = _postings_file()
    files["segments.json"] = _segments_file()
    files["chunks.json"] = _chunks_file()
    files["episodes.json"] = _episodes_file()
    files["claims.json"] = _claims_file()
    files["sensitivity.json"] = _sensitivity_file()
    files["counters.json"] = _counters_file()
    files["stored_vectors.json"] = _stored_vectors_file()
    files["forms.json"] = _forms_file()
    files["medium_refs.json"] = _medium_refs_file()
    return files


SENSITIVITY_HEAD: Final = {
    "id": "01ARZ3NDEKTSV4RRFFQ69G5FAV",
    "type": "fact",
    "current_version": 1,
    "actor_scope": "agent-1",
    "visibility": "actor_public",
    "importance": 5,
    "created_at": "2026-11-20T09:30:00Z",
    "last_updated_at": "2026-11-20T09:30:00Z",
}
"""The head of ``sensitivity.json``'s memory vectors (with each level added)."""


def sensitivity_records(level: str) -> tuple[Any, Any]:
    """The head and the episode record of ``sensitivity.json`` at ``level`` (a label)."""
    from cortex.model.enums import Sensitivity
    from cortex.model.jsonmap import from_plain

    code = Sensitivity.coerce(level)
    stored = None if code is Sensitivity.INTERNAL else code
    head = from_plain(Head, SENSITIVITY_HEAD, "head")
    ep = build_episode(episode_inputs()[0])
    return (
        msgspec.structs.replace(head, sensitivity=stored),
        msgspec.structs.replace(ep, sensitivity=stored),
    )


def _refused_heads(negative: list[dict[str, str]], what: str) -> None:
    """Check that every head of ``negative`` (``cbor_hex``) is refused by the strict decoder."""
    from cortex.errors import CodecError
    from cortex.model.codec import HEAD

    for case in negative:
        try:
            HEAD.decode(bytes.fromhex(case["cbor_hex"]), "head")
        except CodecError:
            continue
        raise AssertionError(f"{what} vector {case['name']!r} decodes")


def _sensitivity_file() -> dict[str, Any]:
    """Levels in head and episode records (format 9, ``specs/sensitivity.md`` §2).

    Each record at each level, sealed as stored, and heads a reader refuses.
    """
    import zlib

    from cortex.model.codec import EPISODE, HEAD
    from cortex.model.enums import Sensitivity
    from cortex.storage.keys import episode_key, head_key

    def sealed(payload: bytes) -> str:
        return (payload + zlib.crc32(payload).to_bytes(4, "big")).hex()

    vectors = []
    for level in Sensitivity:
        head, ep = sensitivity_records(level.label)
        for kind, codec, rec, key in (
            ("head", HEAD, head, head_key(VECTOR_ROW)),
            ("episode", EPISODE, ep, episode_key(ep.id)),
        ):
            payload = codec.encode(rec, kind)
            assert codec.decode(payload, kind) == rec
            vectors.append(
                {
                    "name": f"{kind} {level.label}",
                    "record": kind,
                    "level": level.label,
                    "key": key.hex(),
                    "cbor_hex": payload.hex(),
                    "value": sealed(payload),
                }
            )
    base = HEAD.encode(sensitivity_records("internal")[0], "head")  # a map of 9 entries

    def with_key_14(code: bytes) -> str:
        return (bytes((base[0] + 1,)) + base[1:] + b"\x0e" + code).hex()

    negative = [
        {"name": "internal written as code 2 (it is the field's absence)", "record": "head",
         "cbor_hex": with_key_14(b"\x02"), "error": "CodecError"},
        {"name": "code 0 names no level", "record": "head", "cbor_hex": with_key_14(b"\x00"),
         "error": "CodecError"},
        {"name": "code 5 names no level", "record": "head", "cbor_hex": with_key_14(b"\x05"),
         "error": "CodecError"},
        {"name": "a CBOR text label instead of the code", "record": "head",
         "cbor_hex": with_key_14(b"\x66public"), "error": "CodecError"},
    ]  # fmt: skip
    _refused_heads(negative, "sensitivity")
    return {
        "conventions": {
            "record": "head (key 14, sensitivity) or episode (key 15): format.md, episodes.md",
            "level": "the level's label; internal is the field's absence, never code 2",
            "key": "the record's store key, hex (format 21: m/ and the memory's row, u32 "
            "big-endian, row 258 here; ep/ and the 16 raw id bytes)",
            "cbor_hex": "the record's canonical CBOR",
            "value": "what the store holds: the CBOR and its CRC-32, big-endian, hex",
            "head": "the memory vectors' head without its level: see SENSITIVITY_HEAD in "
            "tools/gen_vectors.py; the episode is episodes.json's 'minimal' case",
            "negative": "heads a reader MUST refuse (CodecError)",
        },
        "head": SENSITIVITY_HEAD,
        "vectors": vectors,
        "negative": negative,
    }


def counters_head(has_counters: bool, level: str = "internal") -> Any:
    """The head of ``counters.json`` (``SENSITIVITY_HEAD`` at ``level``) with the flag."""
    head, _ep = sensitivity_records(level)
    return msgspec.structs.replace(head, has_counters=has_counters)


def _counters_file() -> dict[str, Any]:
    """Heads that record whether their memory has use counters (format 11, key 15).

    A head without counters, with them, and with them and a level (key 14 before key 15),
    sealed as stored, and heads a reader refuses.
    """
    import zlib

    from cortex.model.codec import HEAD
    from cortex.storage.keys import head_key

    vectors = []
    for name, flag, level in (
        ("no counters", False, "internal"),
        ("counters", True, "internal"),
        ("counters and a level", True, "confidential"),
    ):
        head = counters_head(flag, level)
        payload = HEAD.encode(head, "head")
        assert HEAD.decode(payload, "head") == head
        vectors.append(
            {
                "name": name,
                "has_counters": flag,
                "level": level,
                "key": head_key(VECTOR_ROW).hex(),
                "cbor_hex": payload.hex(),
                "value": (payload + zlib.crc32(payload).to_bytes(4, "big")).hex(),
            }
        )
    base = HEAD.encode(counters_head(False), "head")

    def with_key_15(code: bytes) -> str:
        return (bytes((base[0] + 1,)) + base[1:] + b"\x0f" + code).hex()

    negative = [
        {"name": "false written out (it is the field's absence)", "cbor_hex": with_key_15(b"\xf4"),
         "error": "CodecError"},
        {"name": "the integer 1 instead of true", "cbor_hex": with_key_15(b"\x01"),
         "error": "CodecError"},
        {"name": "null instead of true", "cbor_hex": with_key_15(b"\xf6"), "error": "CodecError"},
    ]  # fmt: skip
    _refused_heads(negative, "counters")
    return {
        "conventions": {
            "record": "a head (m/): key 15, has_counters, is true exactly when the memory has a "
            "sal/ record (format.md, query.md section 2); false is the field's absence",
            "key": "the head's store key, hex (format 21: m/ and the memory's row, u32 "
            "big-endian, row 258 here)",
            "cbor_hex": "the head's canonical CBOR",
            "value": "what the store holds: the CBOR and its CRC-32, big-endian, hex",
            "head": "sensitivity.json's head (SENSITIVITY_HEAD in tools/gen_vectors.py) at the "
            "vector's level",
            "negative": "heads a reader MUST refuse (CodecError)",
        },
        "head": SENSITIVITY_HEAD,
        "vectors": vectors,
        "negative": negative,
    }


STORED_VECTOR_INPUT: Final = [3.0, -1.5, 0.25, 0.0, 1e-9, -0.7, 2.0, 0.1]
"""The caller's vector of ``stored_vectors.json`` (scaled to unit length before it is stored)."""


def _stored_vectors_file() -> dict[str, Any]:
    """``vec/`` records of both element types, ``meta/vectors`` with and without float32.

    Format 13 (vector-index.md section 3), sealed as stored, and records a reader refuses.
    """
    import zlib

    import numpy as np

    from cortex.errors import CodecError
    from cortex.index.vectors import (
        VECTOR_RECORD,
        VECTORS_META,
        VectorsMeta,
        check_vector,
        stored_vector,
        to_bytes,
        vector_record,
    )
    from cortex.storage.keys import meta_key, vec_key

    dim, model = len(STORED_VECTOR_INPUT), "example/model-8"
    unit = to_bytes(check_vector(STORED_VECTOR_INPUT, dim, model, "vector"))
    key = vec_key(VECTOR_ROW)

    def sealed(payload: bytes) -> str:
        return (payload + zlib.crc32(payload).to_bytes(4, "big")).hex()

    records = []
    for name, half in (
        ("float16 (the default)", True),
        ("float32 (format 12, or a float32 store)", False),
    ):
        rec = vector_record(model, dim, 3, unit, float16=half)
        payload = VECTOR_RECORD.encode(rec, "vector")
        assert VECTOR_RECORD.decode(payload, "vector") == rec
        widened = stored_vector(rec)
        records.append(
            {
                "name": name,
                "float16": half,
                "model_id": model,
                "dim": dim,
                "version": 3,
                "vector_hex": rec.vector.hex(),
                "widened": [float(x) for x in widened],
                "key": key.hex(),
                "cbor_hex": payload.hex(),
                "value": sealed(payload),
            }
        )
    f32 = bytes.fromhex(records[1]["vector_hex"])
    assert records[0]["widened"] == [
        float(x) for x in np.frombuffer(f32, "<f4").astype("<f2").astype(np.float32)
    ]
    metas = []
    for name, full in (("float16 store (the default)", False), ("float32 store", True)):
        meta = VectorsMeta(model_id=model, dim=dim, synced=42, float32=full)
        payload = VECTORS_META.encode(meta, "meta/vectors")
        assert VECTORS_META.decode(payload, "meta/vectors") == meta
        metas.append(
            {
                "name": name,
                "float32": full,
                "model_id": model,
                "dim": dim,
                "synced": 42,
                "key": meta_key("vectors").hex(),
                "cbor_hex": payload.hex(),
                "value": sealed(payload),
            }
        )
    base = bytes.fromhex(records[1]["cbor_hex"])  # the float32 record: no key 5
    half_hex = bytes.fromhex(records[0]["cbor_hex"])

    def with_key_5(code: bytes) -> str:
        return (bytes((base[0] + 1,)) + base[1:] + b"\x05" + code).hex()

    negative = [
        {"name": "float16 false written out (it is the field's absence)",
         "cbor_hex": with_key_5(b"\xf4"), "error": "CodecError"},
        {"name": "the integer 1 instead of true", "cbor_hex": with_key_5(b"\x01"),
         "error": "CodecError"},
        {"name": "float16 set twice (a duplicate key 5)",
         "cbor_hex": (bytes((half_hex[0] + 1,)) + half_hex[1:] + b"\x05\xf5").hex(),
         "error": "CodecError"},
    ]  # fmt: skip
    for case in negative:
        try:
            VECTOR_RECORD.decode(bytes.fromhex(case["cbor_hex"]), "vector")
        except CodecError:
            continue
        raise AssertionError(f"stored vector {case['name']!r} decodes")
    return {
        "conventions": {
            "record": "a vec/ record (vector-index.md section 3): key 4 is the vector's bytes, "
            "little-endian; key 5, float16, is true when they are IEEE binary16 (2 bytes a "
            "value), absent when binary32 (4 bytes a value)",
            "input": "the caller's vector: scaled to unit length (float64, then float32) and, in "
            "a float16 record, rounded to nearest even binary16",
            "widened": "what a reader gets: the stored values widened to float32",
            "meta": "meta/vectors: key 4, float32, is true when the store keeps float32 "
            "vectors, absent when it stores float16",
            "key": "the store key, hex (format 21: vec/ and the memory's row, u32 big-endian, "
            "row 258 here; meta/vectors)",
            "cbor_hex": "the canonical CBOR",
            "value": "what the store holds: the CBOR and its CRC-32, big-endian, hex",
            "negative": "vec/ records a reader MUST refuse (CodecError)",
        },
        "input": STORED_VECTOR_INPUT,
        "vectors": records,
        "meta": metas,
        "negative": negative,
    }


def claim_inputs() -> list[dict[str, Any]]:
    """The memories of ``claims.json``: a type and its fields as JSON."""
    return [
        {"name": "single-valued predicate", "type": "Fact",
         "input": {"statement": "Sam lives in Berlin", "subject": "Sam", "predicate": "home_city"}},
        {"name": "subject spelled otherwise, predicate with spaces", "type": "Fact",
         "input": {"statement": "sam lives in Lisbon", "subject": " @SAM ",
                   "predicate": "Home City", "object": "Lisbon"}},
        {"name": "many-valued predicate with an object", "type": "Fact",
         "input": {"statement": "Sam is allergic to peanuts", "subject": "Sam",
                   "predicate": "allergic_to", "object": "Peanuts"}},
        {"name": "a negated predicate competes with the claim it negates", "type": "Fact",
         "input": {"statement": "Sam is not allergic to peanuts", "subject": "sam",
                   "predicate": "is not allergic-to", "object": "peanuts."}},
        {"name": "many-valued predicate, no object: no lookup key", "type": "Fact",
         "input": {"statement": "Sam likes things", "subject": "Sam", "predicate": "likes"}},
        {"name": "favorite_ prefix is single-valued", "type": "Fact",
         "input": {"statement": "Sam's favourite colour is teal", "subject": "Sam",
                   "predicate": "favorite_color", "object": "teal"}},
        {"name": "non-ASCII, NFKC", "type": "Fact",
         "input": {"statement": "東京は日本の首都です", "subject": "東京",
                   "predicate": "capital_of", "object": "日本"}},
        {"name": "Preference topic", "type": "Preference",
         "input": {"topic": "  Dark   Mode ", "polarity": "prefer"}},
        {"name": "someone else's Preference competes only with theirs", "type": "Preference",
         "input": {"topic": "dark mode", "polarity": "avoid", "subject": "@Ana"}},
        {"name": "other types have no key", "type": "Event",
         "input": {"kind": "note", "summary": "Sam called"}},
    ]  # fmt: skip


def _claims_file() -> dict[str, Any]:
    from cortex.model.records import Fact
    from cortex.rules import chains
    from cortex.rules.aliases import ALIAS_CODEC, Aliases, AliasRecord, alias_hash, alias_key

    cases = []
    for case in claim_inputs():
        data = parse_input(case["type"], case["input"])
        keys = chains.claim_keys(data)
        lookup = chains.lookup_key(data)
        cases.append(
            {
                "name": case["name"],
                "type": case["type"],
                "input": case["input"],
                "keys": [k.decode("utf-8") for k in keys],
                "hashes": [chains.claim_hash(k).hex() for k in keys],
                "lookup": None if lookup is None else lookup.decode("utf-8"),
            }
        )
    aliases = []
    for alias, canonical, name in (
        ("sarah", "sarah chen", "@Sarah"),
        ("new york city", "nyc", "New York City"),
        ("zoë", "zoë kravitz", "Zoë"),
    ):
        rec = AliasRecord(
            canonical=canonical,
            name=name,
            at=datetime(2026, 11, 25, 15, 30, tzinfo=UTC),
            by="agent-1",
        )
        payload = ALIAS_CODEC.encode(rec, "alias")
        aliases.append(
            {
                "alias": alias,
                "record": {
                    "canonical": canonical,
                    "name": name,
                    "at": "2026-11-25T15:30:00+00:00",
                    "by": "agent-1",
                },
                "key_hex": alias_key(alias).hex(),
                "payload_hex": payload.hex(),
                "journal_hash_hex": alias_hash(alias).hex(),
            }
        )
    lookups = []
    for name, fields, force, table in (
        (
            "single-valued predicate, subject with an alias",
            {"statement": "Sarah lives in Lisbon", "subject": "@Sarah", "predicate": "home_city"},
            False,
            {"sarah": "sarah chen"},
        ),
        (
            "object with two aliases",
            {"statement": "Sam knows her", "subject": "Sam", "predicate": "knows",
             "object": "Sarah Chen"},
            False,
            {"sarah": "sarah chen", "dr chen": "sarah chen"},
        ),
    ):  # fmt: skip
        names = Aliases(
            {a: AliasRecord(canonical=c, name=a, at=datetime(2026, 1, 1, tzinfo=UTC), by="x")
             for a, c in table.items()}
        )  # fmt: skip
        keys = chains.lookup_keys(Fact(**fields), force, names.group)
        lookups.append(
            {
                "name": name,
                "input": fields,
                "force": force,
                "aliases": table,
                "lookups": [k.decode("utf-8") for k in keys],
                "hashes": [chains.claim_hash(k).hex() for k in keys],
            }
        )
    return {
        "conventions": {
            "keys": "claim keys, parts joined by U+001F (specs/claims.md section 5)",
            "aliases": "entity alias records (specs/claims.md section 10): the key ent/a/ + the "
            "normalised alias, the record's canonical CBOR payload (before the CRC-32 seal), and "
            "sha256('matrix.cortex.alias.v1' || alias), the hash alias journal entries carry",
            "alias_lookups": "the keys a new Fact looks its competitors up by, given aliases "
            "(normalised alias -> canonical name): every spelling of its entities, canonical first",
            "hashes": "sha256('matrix.cortex.claim.v1' || UTF-8 key)[:16], lower-case hex: the "
            "claim16 of idx/claim/ keys",
            "lookup": "the key a new memory looks up its competitors by (null: none)",
        },
        "cases": cases,
        "aliases": aliases,
        "alias_lookups": lookups,
    }


def episode_inputs() -> list[dict[str, Any]]:
    """The episodes of ``episodes.json``: every field of ``new_episode`` as JSON."""
    docs = {d["name"]: d["text"] for d in chunk_documents()}
    base = {
        "id": "01JD2R7X4E000000000000000A",
        "occurred_at": "2026-11-20T09:30:00Z",
        "created_at": "2026-11-20T09:30:01.5Z",
        "created_by": "agent-1",
        "source": "chat",
    }
    return [
        {"name": "minimal", **base, "content": "Sam: I moved to Lisbon last month."},
        {
            "name": "every field",
            **base,
            "id": "01JD2R7X4E000000000000000B",
            "content": "Ana: Noted. Café at 9?\r\nSam: Yes — ok 👍",
            "source": "mcp",
            "channel": "thread-42",
            "labels": ["travel", "sam"],
            "visibility": "scoped",
            "media_type": "text/plain",
        },
        {
            "name": "not normalised (decomposed e + combining acute kept)",
            **base,
            "id": "01JD2R7X4E000000000000000C",
            "content": "Cafe\u0301 au lait",
        },
        {
            "name": "markdown document, chunked",
            **base,
            "id": "01JD2R7X4E000000000000000D",
            "source": "upload",
            "media_type": "text/markdown",
            "content": docs["markdown with code fences"],
        },
        {
            "name": "CJK, chunked",
            **base,
            "id": "01JD2R7X4E000000000000000E",
            "source": "upload",
            "content": docs["CJK"],
        },
    ]


def build_episode(obj: dict[str, Any]) -> Any:
    """The episode record an ``episodes.json`` input describes."""
    from cortex.model.episode import new_episode
    from cortex.model.jsonmap import parse_time

    kw = {k: v for k, v in obj.items() if k not in ("name", "id")}
    kw["occurred_at"] = parse_time(kw["occurred_at"], "occurred_at")
    kw["created_at"] = parse_time(kw["created_at"], "created_at")
    return new_episode(id=MemoryId.parse(obj["id"]), **kw)


def _episodes_file() -> dict[str, Any]:
    from cortex.model.episode import encode_episode, purged

    cases = []
    for obj in episode_inputs():
        ep = build_episode(obj)
        cases.append(
            {
                "name": obj["name"],
                "input": {k: v for k, v in obj.items() if k != "name"},
                "hash_hex": ep.hash.hex(),
                "chunks": [list(c) for c in ep.chunks],
                "cbor_hex": encode_episode(ep).hex(),
            }
        )
    first = build_episode(episode_inputs()[0])
    gone = purged(first, first.created_at)
    cases.append(
        {
            "name": "minimal, purged at its creation time",
            "input": None,
            "hash_hex": gone.hash.hex(),
            "chunks": [],
            "cbor_hex": encode_episode(gone).hex(),
        }
    )
    return {
        "conventions": {
            "hash": 'sha256("matrix.cortex.episode.v1" || the UTF-8 bytes of content), hex.',
            "content": "stored as given: the UTF-8 bytes of the JSON string, never normalised.",
            "chunks": "[start, end) UTF-8 byte spans of specs/chunking.md version 1.",
            "cbor_hex": "the canonical CBOR record of specs/episodes.md, hex.",
            "times": "RFC 3339 with an offset; stored as UTC microseconds.",
        },
        "cases": cases,
    }


def chunk_documents() -> list[dict[str, Any]]:
    """The documents of ``chunks.json``: name, text and the sizes they are cut with."""
    prose = "\n\n".join(
        " ".join(
            f"Paragraph {p} sentence {i} says that the {('red', 'blue', 'green')[i % 3]} "
            f"boat left harbour number {p * 10 + i} at dawn."
            for i in range(4 + p % 5)
        )
        for p in range(24)
    )
    code = "\n".join(f"    total += weight[{i}] * value[{i}]  # step {i}" for i in range(60))
    markdown = (
        "# Release notes\n\n"
        "This release changes how memories are chunked. Read the whole note before upgrading.\n\n"
        "## Install\n\n"
        "- download the wheel\n- install it with pip\n  into a fresh virtualenv\n"
        "- run the smoke test\n\n"
        "## The new loop\n\n"
        "```python\ndef score(weight, value):\n    total = 0\n"
        + code
        + "\n    return total\n```\n\n"
        "After the code block comes a paragraph. It has two sentences.\n\n"
        "### Notes\n\n"
        + " ".join(f"Note {i}: the chunk after a fence starts fresh." for i in range(40))
        + "\n\n~~~\nshort fence\n~~~\n"
    )
    cjk = "\n\n".join(
        "".join(f"第{p}段第{i}句说明了记忆的分块方法。" for i in range(12)) for p in range(6)
    )
    long_sentence = (
        "".join(f"Short sentence {i} comes before it. " for i in range(25))
        + "A single sentence that goes on "
        + " and on ".join(f"past landmark {i}" for i in range(48))
        + " without ever ending until here. "
        + "".join(f"Short sentence {i} comes after it. " for i in range(25))
        + "\n"
    )
    unbroken = "x" * 2000 + " tail words after the long word."
    small = "# A\n\nOne two three. Four five six. Seven eight nine ten.\n\n- a\n- b\n\n# B\n\ntext"
    return [
        {"name": "markdown with code fences", "text": markdown},
        {"name": "plain prose", "text": prose},
        {"name": "CJK", "text": cjk},
        {"name": "one 300-token sentence", "text": long_sentence},
        {"name": "a word longer than a chunk", "text": unbroken},
        {"name": "small sizes", "text": small, "target": 8, "overlap": 4},
        {"name": "empty", "text": ""},
    ]


def _chunks_file() -> dict[str, Any]:
    import hashlib

    from cortex.model.chunk import DEFAULT_OVERLAP, DEFAULT_TARGET, chunk_text

    cases = []
    for doc in chunk_documents():
        target = doc.get("target", DEFAULT_TARGET)
        overlap = doc.get("overlap", DEFAULT_OVERLAP)
        raw = doc["text"].encode("utf-8")
        chunks = chunk_text(doc["text"], target=target, overlap=overlap)
        cases.append(
            {
                "name": doc["name"],
                "target": target,
                "overlap": overlap,
                "text": doc["text"],
                "chunks": [
                    {
                        "start": c.start,
                        "end": c.end,
                        "tokens": c.tokens,
                        "sha256": hashlib.sha256(raw[c.start : c.end]).hexdigest(),
                    }
                    for c in chunks
                ],
            }
        )
    return {
        "conventions": {
            "offsets": "UTF-8 byte offsets into text: the chunk is text_bytes[start:end].",
            "tokens": "ceil((end - start) / 4), cortex's token count.",
            "sha256": "of the chunk's bytes, lower-case hex.",
            "rules": "specs/chunking.md",
        },
        "cases": cases,
    }


def dumps(doc: Any) -> str:
    """The exact text of a vector file."""
    return json.dumps(doc, indent=1, ensure_ascii=True) + "\n"


VECTOR_ROW = 258
"""The row of the memories whose records the vectors key (format 21: ``m/``, ``vec/`` by row)."""


def main(argv: list[str] | None = None) -> int:
    """Write ``specs/vectors/*.json``, or with ``--check`` compare and report differences."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 on change")
    parser.add_argument("--out", type=Path, default=VECTORS_DIR, help="output directory")
    args = parser.parse_args(argv)
    try:
        files = build()
    except CortexError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    stale = []
    for name, doc in files.items():
        path = args.out / name
        text = dumps(doc)
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(name)
        if not args.check:
            args.out.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    verb = "differ" if args.check else "written"
    print(f"{len(stale)} of {len(files)} files {verb}: {', '.join(stale) or '-'}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
