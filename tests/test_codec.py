"""The canonical CBOR codec: round trips, determinism, strictness, without golden bytes."""

from __future__ import annotations

import contextlib
import hashlib
import math
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, Final

import cbor2
import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cortex.errors import CodecError, NonCanonicalError, ValidationError
from cortex.model.codec import (
    DEFAULT_PROVENANCE,
    LIMITS,
    decode_data,
    decode_head,
    decode_version,
    encode_data,
    encode_head,
    encode_new_pair,
    encode_version,
    explain_noncanonical,
)
from cortex.model.enums import MemoryType, ObjKind, Polarity, SourceKind, Verb, Visibility
from cortex.model.hashing import DOMAIN, content_hash
from cortex.model.ids import MemoryId, Uri
from cortex.model.records import (
    Belief,
    Capability,
    Cost,
    Data,
    Event,
    Fact,
    Forms,
    FrameRef,
    Head,
    Identity,
    Pattern,
    Preference,
    Provenance,
    Version,
)
from tests.strategies import (
    FULL,
    MINIMAL,
    any_data,
    data_of_type,
    heads,
    memories,
    respell,
    respelled,
    versions,
)

TYPES = list(MemoryType)
T0 = datetime(2026, 1, 2, 3, 4, 5, 678_901, tzinfo=UTC)


def _uri(n: int) -> str:
    return str(Uri(MemoryType.FACT, MemoryId(n.to_bytes(16, "big")), n + 1))


# Records at the limits, pinned as examples of the round-trip property.
MAX_IDENTITY = Identity(
    name="x" * LIMITS.TEXT_BYTES,
    did="d" * LIMITS.SHORT_TEXT_BYTES,
    roles=tuple(f"{i:03d}".ljust(LIMITS.SHORT_TEXT_BYTES, "r") for i in range(LIMITS.ITEMS)),
    profile={f"k{i}": "é" * (LIMITS.TEXT_BYTES // 2) for i in range(4)}
    | {f"key{i:03d}": "v" for i in range(LIMITS.ITEMS - 4)},
    public_keys=tuple(bytes([i]) * 1_024 for i in range(LIMITS.ITEMS)),
)
MAX_PATTERN = Pattern(
    statement="€" * (LIMITS.TEXT_BYTES // 3) + "a",
    strength=1.0,
    coverage=2**63 - 1,
    derived_from=tuple(_uri(i) for i in range(LIMITS.ITEMS)),
)
MAX_EVENT = Event(
    kind="k" * LIMITS.SHORT_TEXT_BYTES,
    duration_us=2**63 - 1,
    occurred_at=datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
    cost=Cost(asset="USD", amount="-" + "9" * 30 + "." + "1" * 32),
    artifacts=tuple("🎉" * (LIMITS.TEXT_BYTES // 4) for _ in range(3)),
)
EARLIEST = Fact(
    statement="s", subject="s", predicate="p", observed_at=datetime(1, 1, 1, tzinfo=UTC)
)


def _check_round_trip(d: Data) -> bytes:
    b = encode_data(d)
    back = decode_data(d.TYPE, b)
    assert type(back) is type(d)
    assert back == d
    assert encode_data(back) == b  # encode(decode(b)) == b
    assert encode_data(d) == b  # deterministic
    # the key order is RFC 8949 bytewise order, which cbor2's length-first order equals here
    assert cbor2.dumps(cbor2.loads(b), canonical=True) == b
    assert content_hash(d.TYPE, b) == hashlib.sha256(DOMAIN + bytes([d.TYPE]) + b).digest()
    return b


# ---------------------------------------------------------------------------------------------
# Round trip and determinism


@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.type_name)
@settings(max_examples=40)
@given(data=st.data())
def test_round_trip_every_type(t: MemoryType, data: st.DataObject) -> None:
    d = data.draw(data_of_type(t))
    assert d.TYPE is t
    _check_round_trip(d)


@settings(max_examples=60)
@given(any_data())
@example(MAX_IDENTITY)
@example(MAX_PATTERN)
@example(MAX_EVENT)
@example(EARLIEST)
@example(Fact(statement="Zürich", subject="한국어", predicate="Ω≈ç√", object="𝔘𝔫𝔦"))
@example(Identity(name="a", roles=(), profile={}, public_keys=()))
@example(Capability(subject="s", capability="c", verified=False))
@example(Fact(statement="s", subject="s", predicate="p", confidence=2.0**-24))
@example(Fact(statement="s", subject="s", predicate="p", confidence=0.10000000149011612))
@example(Fact(statement="s", subject="s", predicate="p", confidence=5e-324))
@example(Preference(topic="t", polarity=Polarity.NEUTRAL, strength=1 / 3))
@example(Event(kind="k", duration_us=0, cost=Cost(asset="€", amount="0")))
@example(Event(kind="k", duration_us=2**32, cost=Cost(asset="X", amount="-0.5")))
@example(Identity(name="Ω", profile={"bb": "1", "a": "2", "ä": "3", "z": "4", "zz": "5"}))
def test_round_trip_any(d: Data) -> None:
    _check_round_trip(d)


@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.type_name)
def test_fixed_records_round_trip(t: MemoryType) -> None:
    for d in (FULL[t], MINIMAL[t]):
        _check_round_trip(d)


def test_records_of_different_types_never_share_bytes_and_hash() -> None:
    hashes = {content_hash(t, encode_data(d)) for t, d in FULL.items()}
    hashes |= {content_hash(t, encode_data(d)) for t, d in MINIMAL.items()}
    assert len(hashes) == 2 * len(TYPES)
    # the type byte separates equal bytes of different types
    b = encode_data(MINIMAL[MemoryType.IDENTITY])
    assert len({content_hash(t, b) for t in TYPES}) == len(TYPES)


def _reversed_maps(d: Data) -> Data:
    """The same value, with every free map built in reverse insertion order."""
    changes = {
        name: dict(reversed(list(v.items())))
        for name in d.__struct_fields__
        if isinstance(v := getattr(d, name), dict)
    }
    return msgspec.structs.replace(d, **changes) if changes else d


@settings(max_examples=60)
@given(any_data())
def test_map_insertion_order_does_not_matter(d: Data) -> None:
    assert encode_data(_reversed_maps(d)) == encode_data(d)


# ---------------------------------------------------------------------------------------------
# Equivalent inputs give identical bytes (NFC, numeric coercion, enum spellings, time zones)


@settings(max_examples=80)
@given(any_data(), st.data())
def test_equivalent_inputs_encode_identically(d: Data, data: st.DataObject) -> None:
    twin = data.draw(respelled(d))
    b = encode_data(d)
    assert encode_data(twin) == b
    assert decode_data(d.TYPE, b) == d


FACT = {"statement": "s", "subject": "s", "predicate": "p"}


@pytest.mark.parametrize(
    ("spelled", "canonical"),
    [
        pytest.param(
            Fact(statement="Zu\u0308rich", subject="Ångström", predicate="p"),
            Fact(statement="Zürich", subject="Ångström", predicate="p"),
            id="nfc",
        ),
        pytest.param(
            Identity(name="n", profile={"cafe\u0301": "x"}),
            Identity(name="n", profile={"café": "x"}),
            id="nfc-map-key",
        ),
        pytest.param(Fact(**FACT, confidence=1), Fact(**FACT, confidence=1.0), id="int-for-float"),
        pytest.param(Fact(**FACT, confidence=0), Fact(**FACT, confidence=0.0), id="zero-for-float"),
        pytest.param(
            Fact(**FACT, confidence=-0.0), Fact(**FACT, confidence=0.0), id="negative-zero"
        ),
        pytest.param(Pattern(statement="p", coverage=3.0), Pattern(statement="p", coverage=3)),
        pytest.param(Event(kind="k", duration_us=5.0), Event(kind="k", duration_us=5)),
        pytest.param(
            Preference(topic="t", polarity="prefer"),
            Preference(topic="t", polarity=Polarity.PREFER),
            id="enum-label",
        ),
        pytest.param(
            Fact(**FACT, source=3),
            Fact(**FACT, source=SourceKind.OBSERVED),
            id="enum-code",
        ),
        pytest.param(
            Fact(**FACT, observed_at=T0.astimezone(timezone(timedelta(hours=2)))),
            Fact(**FACT, observed_at=T0),
            id="time-zone",
        ),
        pytest.param(
            Identity(name="n", roles=[], profile={}, public_keys=[]),
            Identity(name="n"),
            id="empty-collections",
        ),
        pytest.param(
            Capability(subject="s", capability="c", verified=False, parameters={}),
            Capability(subject="s", capability="c"),
            id="false-omitted",
        ),
        pytest.param(
            Belief(statement="b", stance=1, evidence_for=[_uri(1)]),
            Belief(statement="b", stance=1, evidence_for=(_uri(1),)),
            id="list-for-tuple",
        ),
    ],
)
def test_pinned_equivalent_inputs(spelled: Data, canonical: Data) -> None:
    assert encode_data(spelled) == encode_data(canonical)
    assert decode_data(canonical.TYPE, encode_data(spelled)) == canonical


def test_empty_collections_and_unset_optionals_are_omitted() -> None:
    # only key 0 (schema version) and key 1 (name): a map of two entries
    assert encode_data(Identity(name="n", roles=(), profile={}, public_keys=())) == bytes.fromhex(
        "a2000101616e"
    )
    assert encode_data(Capability(subject="s", capability="c", verified=False)) == bytes.fromhex(
        "a30001016173026163"
    )


@pytest.mark.parametrize(
    ("value", "tail"),
    [
        (0.0, "f90000"),
        (-0.0, "f90000"),
        (1.0, "f93c00"),
        (0.5, "f93800"),
        (2.0**-24, "f90001"),  # the smallest half-precision subnormal
        (2.0**-14, "f90400"),
        (0.10000000149011612, "fa3dcccccd"),  # float32(0.1): exact in single, not in half
        (2.0**-149, "fa00000001"),
        (0.1, "fb3fb999999999999a"),
        (1 / 3, "fb3fd5555555555555"),
        (5e-324, "fb0000000000000001"),
    ],
)
def test_floats_take_the_shortest_width(value: float, tail: str) -> None:
    b = encode_data(Fact(**FACT, confidence=value))
    assert b.hex().endswith("07" + tail)
    assert decode_data(MemoryType.FACT, b).confidence == value


@pytest.mark.parametrize(
    ("n", "head"),
    [
        (0, "00"),
        (23, "17"),
        (24, "1818"),
        (255, "18ff"),
        (256, "190100"),
        (2**16, "1a00010000"),
        (2**32, "1b0000000100000000"),
        (2**63 - 1, "1b7fffffffffffffff"),
    ],
)
def test_integers_take_the_shortest_head(n: int, head: str) -> None:
    b = encode_data(Pattern(statement="p", coverage=n))
    assert b.hex().endswith("03" + head)
    assert decode_data(MemoryType.PATTERN, b) == Pattern(statement="p", coverage=n)


# ---------------------------------------------------------------------------------------------
# Any single-byte change is rejected or changes the value (and so the hash)


REPLACEMENTS = (
    lambda b: b ^ 0x01,
    lambda b: b ^ 0x20,
    lambda b: b ^ 0x80,
    lambda b: 0,
    lambda b: 0xFF,
)


def _mutations(b: bytes) -> list[bytes]:
    out = []
    for i, byte in enumerate(b):
        for f in REPLACEMENTS:
            r = f(byte)
            if r != byte:
                out.append(b[:i] + bytes([r]) + b[i + 1 :])
    return out


@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.type_name)
def test_single_byte_changes_are_rejected_or_change_the_hash(t: MemoryType) -> None:
    for d in (FULL[t], MINIMAL[t]):
        b = encode_data(d)
        h = content_hash(t, b)
        accepted = 0
        for m in _mutations(b):
            try:
                v = decode_data(t, m)
            except CodecError:
                continue
            accepted += 1
            # accepted bytes are canonical for a different value, so the hash differs
            assert v != d
            assert encode_data(v) == m
            assert content_hash(t, m) != h
        assert accepted < len(b) * len(REPLACEMENTS)


@settings(max_examples=10)
@given(heads(), versions())
def test_single_byte_changes_to_heads_and_versions(head: Head, version: Version) -> None:
    for b, decode, original in (
        (encode_head(head), decode_head, head),
        (encode_version(version), decode_version, version),
    ):
        for m in _mutations(b):
            try:
                v = decode(m)
            except CodecError:
                continue
            assert v != original


# ---------------------------------------------------------------------------------------------
# Strict decoding

# A minimal Fact {0: 1, 1: "a", 2: "b", 3: "c"}, and the same with room for one more key
BASE = "a4 0001 016161 026162 036163"
FIVE = "a5 0001 016161 026162 036163"

# (hex, the exact error class or None for any CodecError, what explain_noncanonical says)
STRICT = [
    pytest.param(
        f"{BASE} 00",
        NonCanonicalError,
        "1 bytes of trailing data after the item at offset 12",
        id="trailing",
    ),
    pytest.param(
        f"d9d9f7 {BASE}", None, "tag 55799 at offset 0; tags are not allowed", id="tag-outer"
    ),
    pytest.param(
        "a4 0001 01 d820 6161 026162 036163",
        None,
        "tag 32 at offset 4; tags are not allowed",
        id="tag-text",
    ),
    pytest.param(
        "a4 00 c101 016161 026162 036163",
        None,
        "tag 1 at offset 2; tags are not allowed",
        id="tag-int",
    ),
    pytest.param(
        "bf 0001 016161 026162 036163 ff",
        NonCanonicalError,
        "indefinite-length item at offset 0",
        id="indefinite-map",
    ),
    pytest.param(
        "a4 0001 01 7f6161ff 026162 036163",
        NonCanonicalError,
        "indefinite-length item at offset 4",
        id="indefinite-text",
    ),
    pytest.param(
        f"{FIVE} 04 7f 6161 6162 ff",
        NonCanonicalError,
        "indefinite-length item at offset 13",
        id="indefinite-text-chunks",
    ),
    pytest.param(
        "a5 0001 016161 016161 026162 036163",
        NonCanonicalError,
        "duplicate map key at offset 6",
        id="duplicate-key",
    ),
    pytest.param(
        "a4 0001 016161 036163 026162",
        NonCanonicalError,
        "map keys out of order at offset 9",
        id="unsorted-keys",
    ),
    pytest.param(
        "a4 016161 026162 036163 0001",
        NonCanonicalError,
        "map keys out of order at offset 10",
        id="key-0-last",
    ),
    pytest.param(
        "a4 001801 016161 026162 036163",
        NonCanonicalError,
        "non-shortest integer or length head at offset 2",
        id="long-int-key",
    ),
    pytest.param(
        "b804 0001 016161 026162 036163",
        NonCanonicalError,
        "non-shortest integer or length head at offset 0",
        id="long-map-head",
    ),
    pytest.param(
        "a4 0001 01 780161 026162 036163",
        NonCanonicalError,
        "non-shortest integer or length head at offset 4",
        id="long-text-head",
    ),
    pytest.param(
        f"{FIVE} 06 190017",
        NonCanonicalError,
        "non-shortest integer or length head at offset 13",
        id="long-time",
    ),
    pytest.param(
        f"{FIVE} 07 fb3fe0000000000000",
        NonCanonicalError,
        "float at offset 13 is not in its shortest form",
        id="long-float-f64",
    ),
    pytest.param(
        f"{FIVE} 07 fa3f800000",
        NonCanonicalError,
        "float at offset 13 is not in its shortest form",
        id="long-float-f32",
    ),
    pytest.param(
        f"{FIVE} 07 f98000",
        NonCanonicalError,
        "does not re-encode to the same bytes",
        id="negative-zero",
    ),
    pytest.param(
        f"{FIVE} 07 f97e00", None, "float at offset 13 is not in its shortest form", id="nan"
    ),
    pytest.param(
        "a4 0001 01 61ff 026162 036163",
        None,
        "invalid UTF-8 in text at offset 4",
        id="invalid-utf8",
    ),
    pytest.param(
        "a4 0001 01 63eda080 026162 036163",
        None,
        "invalid UTF-8 in text at offset 4",
        id="lone-surrogate",
    ),
    pytest.param(
        "a4 0001 01 6365cc81 026162 036163",
        NonCanonicalError,
        "text at offset 4 is not NFC-normalised",
        id="non-nfc",
    ),
    pytest.param(
        f"{FIVE} 09 f5", CodecError, "does not re-encode to the same bytes", id="unknown-key"
    ),
    pytest.param(f"{FIVE} 6178 01", CodecError, None, id="text-key"),
    pytest.param("a4 0001 01 01 026162 036163", CodecError, None, id="wrong-type-text"),
    pytest.param(f"{FIVE} 05 686f62736572766564", CodecError, None, id="label-for-enum"),
    pytest.param(f"{FIVE} 05 09", CodecError, None, id="unknown-enum-code"),
    pytest.param(f"{FIVE} 06 f93c00", CodecError, None, id="float-for-time"),
    pytest.param(f"{FIVE} 07 f5", CodecError, None, id="bool-for-float"),
    pytest.param(f"{FIVE} 07 01", CodecError, None, id="int-for-float"),
    pytest.param(f"{FIVE} 07 f94000", CodecError, None, id="out-of-range"),
    pytest.param("a4 0001 01 60 026162 036163", CodecError, None, id="empty-text"),
    pytest.param(f"{FIVE} 04 f6", None, None, id="null-for-optional"),
    pytest.param("84 01 6161 6162 6163", CodecError, None, id="not-a-map"),
    pytest.param("a4 0002 016161 026162 036163", CodecError, None, id="schema-version-2"),
    pytest.param("a3 016161 026162 036163", CodecError, None, id="no-schema-version"),
    pytest.param("a3 0001 016161 026162", CodecError, None, id="missing-required"),
    pytest.param("", CodecError, None, id="empty"),
    pytest.param("a4 0001 016161 026162 0361", CodecError, None, id="truncated"),
]


@pytest.mark.parametrize(("raw", "error", "message"), STRICT)
def test_strict_decoding_rejects(raw: str, error: type[CodecError] | None, message: Any) -> None:
    b = bytes.fromhex(raw)
    with pytest.raises(CodecError) as info:
        decode_data(MemoryType.FACT, b)
    if error is not None:
        assert type(info.value) is error, info.value
    assert str(info.value).startswith("data")


@pytest.mark.parametrize(
    ("raw", "message"),
    [pytest.param(p.values[0], p.values[2], id=p.id) for p in STRICT if p.values[2] is not None],
)
def test_explain_noncanonical(raw: str, message: str) -> None:
    assert explain_noncanonical(bytes.fromhex(raw)) == message


def test_noncanonical_error_names_the_problem() -> None:
    with pytest.raises(NonCanonicalError, match=r"^data: map keys out of order at offset 9$"):
        decode_data(MemoryType.FACT, bytes.fromhex("a4 0001 016161 036163 026162"))


def test_codec_error_names_the_field() -> None:
    with pytest.raises(CodecError, match=r"^data\.statement: must be text, got int$"):
        decode_data(MemoryType.FACT, bytes.fromhex("a4 0001 0101 026162 036163"))
    with pytest.raises(CodecError, match=r"Fact has no field with key 9"):
        decode_data(MemoryType.FACT, bytes.fromhex(FIVE + "09 f5"))


def test_decoding_checks_the_type_it_was_asked_for() -> None:
    b = encode_data(MINIMAL[MemoryType.FACT])
    assert decode_data(MemoryType.FACT, b) == MINIMAL[MemoryType.FACT]
    with pytest.raises(CodecError):
        decode_data(MemoryType.GOAL, b)  # key 2 is a GoalStatus there, "lawn" is not
    with pytest.raises(CodecError, match="unknown memory type"):
        decode_data(99, b)


@pytest.mark.parametrize("value", ["a4", 5, None, [1]], ids=lambda v: type(v).__name__)
def test_decoding_non_bytes_is_a_codec_error(value: Any) -> None:
    with pytest.raises(CodecError, match="expected bytes"):
        decode_data(MemoryType.FACT, value)


def test_bytes_like_input_is_accepted() -> None:
    b = encode_data(FULL[MemoryType.EVENT])
    assert decode_data(MemoryType.EVENT, bytearray(b)) == FULL[MemoryType.EVENT]
    assert decode_data(MemoryType.EVENT, memoryview(b)) == FULL[MemoryType.EVENT]


HOSTILE = [
    "81" * 5000 + "00",  # deep nesting
    "a1" * 5000 + "00",
    "5bffffffffffffffff",  # a byte string of 2**64 - 1 bytes
    "9bffffffffffffffff",
    "bbffffffffffffffff",
    "d823617a",  # tag 35: a regular expression
    "d82363282a29",
    "c074323031332d30332d3231543230",  # tag 0: a malformed date string
    "c11bffffffffffffffff",  # tag 1: an epoch time out of range
    "d81e820100",  # tag 30: a fraction over zero
    "c482211a",  # tag 4: a truncated decimal fraction
    "d9010480",  # tag 260: an empty IP address
    "d8258f",  # tag 37: a truncated UUID
    "d81c80",  # tag 28: shareable
    "d81d05",  # tag 29: a reference to nothing shared
    "f818",  # a reserved simple value
    "1c",  # reserved additional information
    "ff",  # a stray break
    "a1a0a0",  # a map as a map key
    "a18000",  # an array as a map key
]


@pytest.mark.parametrize("raw", HOSTILE)
def test_hostile_input_is_a_codec_error(raw: str) -> None:
    b = bytes.fromhex(raw)
    for t in (MemoryType.FACT, MemoryType.IDENTITY):
        with pytest.raises(CodecError):
            decode_data(t, b)
    with pytest.raises(CodecError):
        decode_head(b)
    with pytest.raises(CodecError):
        decode_version(b)


@settings(max_examples=300)
@given(st.binary(max_size=48), st.sampled_from(TYPES))
@example(bytes.fromhex(BASE), MemoryType.FACT)
def test_no_third_party_exception_escapes(b: bytes, t: MemoryType) -> None:
    try:
        v = decode_data(t, b)
    except CodecError:
        pass
    else:
        assert encode_data(v) == b
    for decode in (decode_head, decode_version):
        with contextlib.suppress(CodecError):
            decode(b)


@settings(max_examples=100)
@given(any_data(), st.binary(min_size=1, max_size=4), st.integers(0, 2**16))
def test_spliced_bytes_are_rejected_or_canonical(d: Data, junk: bytes, at: int) -> None:
    b = encode_data(d)
    at %= len(b) + 1
    for m in (b[:at] + junk + b[at:], b[:at] + b[at + len(junk) :]):
        if m == b:
            continue
        try:
            v = decode_data(d.TYPE, m)
        except CodecError:
            continue
        assert encode_data(v) == m
        assert v != d


# ---------------------------------------------------------------------------------------------
# Heads and versions


@settings(max_examples=60)
@given(heads())
def test_head_round_trip(head: Head) -> None:
    b = encode_head(head)
    back = decode_head(b)
    assert back == head
    assert encode_head(back) == b
    assert cbor2.dumps(cbor2.loads(b), canonical=True) == b


@settings(max_examples=60)
@given(versions())
def test_version_round_trip(version: Version) -> None:
    b = encode_version(version)
    back = decode_version(b)
    assert back == version
    assert encode_version(back) == b
    assert cbor2.dumps(cbor2.loads(b), canonical=True) == b
    if version.data is not None:
        assert decode_data(version.type, version.data) is not None
        assert content_hash(version.type, version.data) == version.hash


ID = MemoryId(bytes(range(16)))


def _version(**kw: Any) -> Version:
    fields: dict[str, Any] = {
        "id": ID,
        "version": 1,
        "type": MemoryType.FACT,
        "data": encode_data(MINIMAL[MemoryType.FACT]),
        "hash": content_hash(MemoryType.FACT, encode_data(MINIMAL[MemoryType.FACT])),
        "created_at": T0,
        "created_by": "agent-1",
        "provenance": Provenance(source=SourceKind.OBSERVED),
        "forms": Forms(short="s", medium="m"),
    }
    return Version(**(fields | kw))


def test_purged_version_round_trip() -> None:
    live = _version()
    purged = msgspec.structs.replace(live, data=None, forms=None)
    b = encode_version(purged)
    back = decode_version(b)
    assert back == purged
    assert back.data is None and back.forms is None
    assert back.hash == live.hash
    keys = set(cbor2.loads(b))
    assert 4 not in keys and 11 not in keys  # data and forms are absent, not null
    assert {4, 11} <= set(cbor2.loads(encode_version(live)))


def test_version_defaults_round_trip() -> None:
    v = _version(forms=None)
    back = decode_version(encode_version(v))
    assert back.confidence == 1.0 and back.forms_override is False
    assert back.expires_at is None and back.valid_from is None and back.valid_until is None
    assert back == v


def test_head_round_trip_pinned() -> None:
    head = Head(
        id=ID,
        type=MemoryType.GOAL,
        current_version=3,
        actor_scope="agent-1",
        visibility=Visibility.ACTOR_PUBLIC,
        importance=10,
        tags=("Ω", "ä"),
        frames=(FrameRef(verb=1, obj_kind=2, obj_ref="gpt"),),
        created_at=T0,
        last_updated_at=T0 + timedelta(seconds=1),
        forms=Forms(short="s", medium="m"),
    )
    back = decode_head(encode_head(head))
    assert back == head
    assert back.id == ID and back.visibility is Visibility.ACTOR_PUBLIC


def test_decoded_times_are_utc() -> None:
    b = encode_data(Fact(**FACT, observed_at=T0.astimezone(timezone(timedelta(hours=-7)))))
    back = decode_data(MemoryType.FACT, b)
    assert back.observed_at == T0
    assert back.observed_at.tzinfo is UTC


HEAD = Head(
    id=ID,
    type=MemoryType.FACT,
    current_version=1,
    actor_scope="a",
    created_at=T0,
    last_updated_at=T0,
)


@pytest.mark.parametrize(
    ("raw", "decode"),
    [(encode_head(HEAD), decode_head), (encode_version(_version()), decode_version)],
    ids=["head", "version"],
)
def test_head_and_version_decoding_is_strict(raw: bytes, decode: Any) -> None:
    with pytest.raises(NonCanonicalError, match="trailing data"):
        decode(raw + b"\x00")
    with pytest.raises(CodecError, match="schema version 2 is not 1"):
        decode(b"\xa1\x00\x02")
    with pytest.raises(CodecError):
        decode(encode_data(MINIMAL[MemoryType.FACT]))


def test_encoding_rejects_what_decoding_would() -> None:
    with pytest.raises(ValidationError):
        encode_version(_version(hash=b"\x00" * 31))
    with pytest.raises(ValidationError):
        encode_head(msgspec.structs.replace(HEAD, current_version=0))


def test_frames_fast_path_equals_the_generic_encoder() -> None:
    """A head's frames go through the record encoder; bytes and errors match the generic path."""
    from cortex.model.codec import FRAMES, Invalid
    from cortex.model.records import FrameRef

    a = FrameRef(verb="find", obj_kind="knowledge", obj_ref="x")  # labels: fall back
    b = FrameRef(verb=Verb.FIND, obj_kind=ObjKind.KNOWLEDGE, obj_ref="y")
    for frames in [(), (b,), (b, b), (a, b), tuple(b for _ in range(17))]:
        try:
            want = FRAMES._enc_generic(frames)
        except Invalid as exc:
            with pytest.raises(Invalid) as got:
                FRAMES.enc(frames)
            assert got.value.rule == exc.rule
            continue
        assert FRAMES.enc(frames) == want


# ---------------------------------------------------------------------------------------------
# A new memory's head and version encoded together (``encode_new_pair``) against the definition


def _both(encode: Any, head: Any, version: Any) -> Any:
    try:
        return encode(head, version)
    except ValidationError as exc:
        return (exc.field, exc.rule, exc.message)


def _separately(head: Any, version: Any) -> tuple[bytes, bytes]:
    return encode_head(head), encode_version(version)


_PAIR_RESPELL: Final = ("importance", "visibility", "tags", "frames", "created_at")
_VERSION_RESPELL: Final = ("created_by", "confidence", "expires_at", "valid_from", "provenance")


@st.composite
def _new_pairs(draw: st.DrawFn) -> tuple[Head, Version]:
    """A head and a version shaped as the store makes them, some fields respelled."""
    head, version, _ = draw(memories())
    # mostly the store's shape (the shared path), sometimes any valid pair (the generic one)
    as_store = draw(st.integers(0, 3)) > 0
    if as_store:
        head = msgspec.structs.replace(head, tombstone=None, embedding_ref=None)
    if as_store:
        version = msgspec.structs.replace(
            version,
            id=head.id,
            version=head.current_version,
            forms=head.forms,
            created_at=head.last_updated_at,
        )
        if draw(st.booleans()):
            version = msgspec.structs.replace(version, provenance=DEFAULT_PROVENANCE)
        if draw(st.booleans()):
            version = msgspec.structs.replace(version, created_by=head.actor_scope)
    for name in draw(st.lists(st.sampled_from(_PAIR_RESPELL), max_size=2, unique=True)):
        spelled = respell(getattr(head, name), draw)
        head = msgspec.structs.replace(head, **{name: spelled})
    for name in draw(st.lists(st.sampled_from(_VERSION_RESPELL), max_size=2, unique=True)):
        spelled = respell(getattr(version, name), draw)
        version = msgspec.structs.replace(version, **{name: spelled})
    return head, version


_PAIR_HEAD: Final = Head(
    id=MemoryId(bytes(range(16))),
    type=MemoryType.FACT,
    current_version=1,
    actor_scope="agent",
    importance=5,
    tags=("a", "b"),
    frames=(FrameRef(verb=Verb.FIND, obj_kind=ObjKind.SERVICE, obj_ref="svc"),),
    created_at=T0,
    last_updated_at=T0,
    forms=Forms(short="s", medium="m"),
)
_PAIR_DATA: Final = encode_data(Fact(statement="s", subject="s", predicate="p"))
_PAIR_VERSION: Final = Version(
    id=_PAIR_HEAD.id,
    version=1,
    type=MemoryType.FACT,
    data=_PAIR_DATA,
    hash=content_hash(MemoryType.FACT, _PAIR_DATA),
    created_at=T0,
    created_by="agent",
    provenance=DEFAULT_PROVENANCE,
    forms=_PAIR_HEAD.forms,
)
_NAIVE: Final = datetime(2026, 1, 1)  # a naive time is the point


@settings(max_examples=150)
@given(_new_pairs())
@example((_PAIR_HEAD, _PAIR_VERSION))
@example((msgspec.structs.replace(_PAIR_HEAD, current_version=300), _PAIR_VERSION))
@example(
    (
        msgspec.structs.replace(_PAIR_HEAD, current_version=300, tags=(), frames=(), forms=None),
        msgspec.structs.replace(_PAIR_VERSION, version=300, forms=None, forms_override=True),
    )
)
def test_new_pair_is_the_head_and_version_encoders(pair: tuple[Head, Version]) -> None:
    head, version = pair
    assert _both(encode_new_pair, head, version) == _both(_separately, head, version)


_BAD_HEAD: Final[list[dict[str, Any]]] = [
    {"importance": 11},
    {"importance": -1},
    {"importance": True},
    {"importance": 5.5},
    {"importance": None},
    {"importance": "5"},
    {"visibility": None},
    {"visibility": "bogus"},
    {"actor_scope": ""},
    {"actor_scope": "x" * 300},
    {"tags": ("a", "a")},
    {"tags": ("",)},
    {"tags": tuple(str(i) for i in range(17))},
    {"tags": ("\ud800",)},
    {"frames": _PAIR_HEAD.frames * 2},
    {"frames": (FrameRef(verb=Verb.FIND, obj_kind=ObjKind.SERVICE, obj_ref="x" * 257),)},
    {"created_at": _NAIVE},
    {"created_at": None},
    {"last_updated_at": _NAIVE},
    {"forms": Forms(short="", medium="m")},
    {"current_version": 0},
    {"id": b"0123456789abcdef"},
]
_BAD_VERSION: Final[list[dict[str, Any]]] = [
    {"confidence": 2.0},
    {"confidence": math.nan},
    {"confidence": None},
    {"confidence": True},
    {"confidence": -0.1},
    {"created_by": ""},
    {"created_by": None},
    {"created_by": 5},
    {"expires_at": _NAIVE},
    {"valid_from": datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1)))},
    {"valid_until": "2026"},
    {"provenance": None},
    {"provenance": Provenance(source=SourceKind.DERIVED, derived_from=("not a uri",))},
    {"forms_override": 1},
    {"data": b""},
    {"hash": b"short"},
    {"created_at": _NAIVE},
    {"version": 0},
]


@pytest.mark.parametrize("bad", _BAD_HEAD)
def test_new_pair_names_a_bad_head_field_as_the_head_encoder(bad: dict[str, Any]) -> None:
    head = msgspec.structs.replace(_PAIR_HEAD, **bad)
    got = _both(encode_new_pair, head, _PAIR_VERSION)
    assert isinstance(got, tuple) and got[0].startswith("head")
    assert got == _both(_separately, head, _PAIR_VERSION)


@pytest.mark.parametrize("bad", _BAD_VERSION)
def test_new_pair_names_a_bad_version_field_as_the_version_encoder(bad: dict[str, Any]) -> None:
    version = msgspec.structs.replace(_PAIR_VERSION, **bad)
    got = _both(encode_new_pair, _PAIR_HEAD, version)
    assert isinstance(got, tuple) and got[0].startswith("version")
    assert got == _both(_separately, _PAIR_HEAD, version)
    # a bad head field is named first, as the head is encoded first
    head = msgspec.structs.replace(_PAIR_HEAD, importance=11)
    assert _both(encode_new_pair, head, version)[0] == "head.importance"


@pytest.mark.parametrize(
    "odd",
    [
        {"forms_override": None},
        {"data": None},
        {"confidence": 1},
        {"confidence": -0.0},
        {"created_by": "agént"},
        {"created_at": T0.astimezone(timezone(timedelta(hours=-3)))},
        {"id": MemoryId(bytes(16))},
    ],
)
def test_new_pair_of_unusual_valid_versions(odd: dict[str, Any]) -> None:
    version = msgspec.structs.replace(_PAIR_VERSION, **odd)
    got = _both(encode_new_pair, _PAIR_HEAD, version)
    assert got == _both(_separately, _PAIR_HEAD, version)


# ---------------------------------------------------------------------------------------------
# Rules of encoding.md checked across every record: booleans, the schema version, truncation


def _non_bool_fields(value: Any) -> list[str]:
    """The fields of a record (a msgspec struct) that are not booleans."""
    fields = msgspec.structs.fields(value)
    return [f.name for f in fields if f.type is not bool and f.type != bool | None]


@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.type_name)
@pytest.mark.parametrize("flag", [False, True])
def test_a_boolean_is_never_a_value_of_another_type(t: MemoryType, flag: bool) -> None:
    """``false`` occurs only in boolean fields, where it is omitted, and booleans are never
    numbers (encoding.md §3.1, §3.5): a bool in any other field, required or optional, is
    refused naming the field, never encoded and never dropped as if absent."""
    for name in _non_bool_fields(FULL[t]):
        bad = msgspec.structs.replace(FULL[t], **{name: flag})
        with pytest.raises(ValidationError) as info:
            encode_data(bad)
        assert info.value.field.startswith(f"data.{name}"), (name, info.value.field)


def test_a_boolean_is_never_a_version_or_head_field_of_another_type() -> None:
    version = _version()
    for name in _non_bool_fields(version):
        with pytest.raises(ValidationError):
            encode_version(msgspec.structs.replace(version, **{name: False}))
    for name in _non_bool_fields(HEAD):
        with pytest.raises(ValidationError):
            encode_head(msgspec.structs.replace(HEAD, **{name: False}))


def test_every_top_level_record_starts_with_schema_version_1() -> None:
    """A top-level record's map holds key 0 = 1 first (encoding.md §3.8, format.md §1;
    episodes.md §1 for episodes), and a decoder refuses any other version."""
    from cortex.model.episode import decode_episode, encode_episode, new_episode

    episode = new_episode("said once", occurred_at=T0, source="chat", created_by="a", created_at=T0)
    encoded = [encode_data(MINIMAL[t]) for t in TYPES]
    encoded += [encode_head(HEAD), encode_version(_version()), encode_episode(episode)]
    for raw in encoded:
        assert raw[0] >> 5 == 5  # a map
        assert raw[1:3] == b"\x00\x01", raw.hex()
    raw = encode_episode(episode)
    assert decode_episode(raw) == episode
    with pytest.raises(CodecError):
        decode_episode(raw[:2] + b"\x02" + raw[3:])


@pytest.mark.parametrize(
    "item",
    [
        "19 0100",  # uint, 2-byte argument
        "1b 0000000100000000",  # uint, 8-byte argument
        "3a 00010000",  # negative int, 4-byte argument
        "fb 400921fb54442d18",  # float64
        "fa 47c35000",  # float32
        "98 18 " + "00" * 24,  # array, 1-byte count
        "99 0000",  # empty array with a 2-byte count (well formed, not shortest)
        "a1 00 19 0100",  # a map whose last value has a 2-byte argument
        "82 01 1a 00010000",  # an array whose last item has a 4-byte argument
    ],
)
def test_cbor_extent_refuses_every_truncation(item: str) -> None:
    """cbor_extent gives the end of a well-formed item (encoding.md §6: bundle items are walked
    before parsing); input cut anywhere, inside a head's argument too, is not well formed
    (encoding.md §5: truncated input is a CodecError), and no extent lies past the bytes."""
    from cortex.model.codec import cbor_extent

    raw = bytes.fromhex(item.replace(" ", ""))
    assert cbor_extent(raw) == len(raw)
    assert cbor_extent(raw + b"\x00") == len(raw)
    for i in range(len(raw)):  # cut anywhere, inside a head's argument too
        with pytest.raises(CodecError):
            cbor_extent(raw[:i])


def test_cbor_extent_of_records_and_their_truncations() -> None:
    from cortex.model.codec import cbor_extent

    for raw in [encode_head(HEAD), encode_version(_version()), encode_data(FULL[MemoryType.EVENT])]:
        assert cbor_extent(raw) == len(raw)
        for i in range(len(raw)):
            with pytest.raises(CodecError):
                cbor_extent(raw[:i])


@pytest.mark.parametrize("value", ["45 68656c6c6f", "05", "81 61 61", "f5", "f6"])
@pytest.mark.parametrize("trusted", [False, True])
def test_a_text_field_of_another_cbor_type_is_refused(value: str, trusted: bool) -> None:
    """Strict decoding refuses a value of the wrong CBOR type (encoding.md §5, bytes_for_text);
    the trusted decoder skips only the re-encoding check, never a type check
    (``decode_data_trusted``)."""
    from cortex.model.codec import decode_data_trusted

    raw = bytes.fromhex("a4 0001 01" + value + "02 6161 03 6170")
    decode = decode_data_trusted if trusted else decode_data
    with pytest.raises(CodecError) as info:
        decode(MemoryType.FACT, raw)
    assert "data.statement" in str(info.value)
