"""Memory ids (ULIDs) and version URIs."""

from __future__ import annotations

import itertools
import os
import random
import types
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cortex.errors import ValidationError
from cortex.model import ids
from cortex.model.enums import MemoryType
from cortex.model.ids import MAX_VERSION, MemoryId, Uri, new_id
from tests.strategies import memory_ids, memory_types

# ---------------------------------------------------------------------------------------------
# Text encoding: 128 bits as 26 Crockford base32 digits, two zero bits on top


@pytest.mark.parametrize(
    ("raw_hex", "text"),
    [
        ("00" * 16, "0" * 26),
        ("ff" * 16, "7" + "Z" * 25),
        ("80" + "00" * 15, "4" + "0" * 25),  # the top bit is the third bit of the first digit
        ("00" * 15 + "01", "0" * 25 + "1"),
        ("00" * 15 + "1f", "0" * 25 + "Z"),
        ("00" * 15 + "20", "0" * 24 + "10"),
        # the ULID spec's example timestamp, 1469918176385 ms = 0x01563DF36481
        ("01563df36481" + "00" * 10, "01ARYZ6S41" + "0" * 16),
        ("000102030405060708090a0b0c0d0e0f", "00041061050R3GG28A1C60T3GF"),
        ("018f34069e0000000000000000000001", "01HWT0D7G00000000000000001"),
    ],
)
def test_known_vectors(raw_hex: str, text: str) -> None:
    mid = MemoryId(bytes.fromhex(raw_hex))
    assert str(mid) == text
    assert MemoryId.parse(text) == mid
    assert MemoryId.parse(text).bytes == bytes.fromhex(raw_hex)
    assert repr(mid) == f"MemoryId('{text}')"


def test_spec_example_timestamp() -> None:
    mid = MemoryId((1469918176385).to_bytes(6, "big") + bytes(range(10)))
    assert str(mid).startswith("01ARYZ6S41")
    assert mid.timestamp_ms == 1469918176385
    assert MemoryId.parse("01ARYZ6S41TSV4RRFFQ69G5FAV").timestamp_ms == 1469918176385


def test_alphabet_excludes_i_l_o_u() -> None:
    digits = {c for i in range(32) for c in str(MemoryId(i.to_bytes(16, "big")))[-1]}
    assert "".join(sorted(digits)) == "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


@given(memory_ids())
def test_parse_and_str_round_trip(mid: MemoryId) -> None:
    text = str(mid)
    assert len(text) == 26
    assert text.isupper() or text.isdigit()
    assert MemoryId.parse(text) == mid
    assert MemoryId(mid.bytes) == mid
    assert hash(MemoryId(mid.bytes)) == hash(mid)


@given(memory_ids(), memory_ids())
def test_text_order_is_byte_order(a: MemoryId, b: MemoryId) -> None:
    assert (str(a) < str(b)) == (a.bytes < b.bytes) == (a < b)
    assert (a <= b) == (a.bytes <= b.bytes)
    assert (a > b) == (b < a)
    assert (a >= b) == (b <= a)


@pytest.mark.parametrize(
    "raw",
    [b"\x00" * 15, b"\x00" * 17, b"", bytearray(16), memoryview(b"\x00" * 16), "0" * 16, 0, None],
    ids=lambda v: f"{type(v).__name__}-{len(v) if hasattr(v, '__len__') else ''}",
)
def test_memory_id_rejects_anything_but_16_bytes(raw: Any) -> None:
    with pytest.raises(ValidationError) as info:
        MemoryId(raw)
    assert (info.value.field, info.value.rule) == ("id", "type")
    assert "exactly 16 raw bytes" in info.value.message


@pytest.mark.parametrize(
    "text",
    [
        "01hwt0d7g00000000000000001",  # lower case
        "01HWT0D7G0000000000000000",  # 25 characters
        "01HWT0D7G000000000000000010",  # 27 characters
        "01HWT0D7G0000000000000000I",
        "01HWT0D7G0000000000000000L",
        "01HWT0D7G0000000000000000O",
        "01HWT0D7G0000000000000000U",
        "81HWT0D7G00000000000000001",  # above 128 bits
        " 1HWT0D7G00000000000000001",
        "01HWT0D7G00000000000000001\n",
        "０1HWT0D7G00000000000000001",  # a full-width digit
        "",
    ],
)
def test_parse_rejects(text: str) -> None:
    with pytest.raises(ValidationError) as info:
        MemoryId.parse(text)
    assert (info.value.field, info.value.rule) == ("id", "format")
    assert "26 upper-case Crockford base32 characters" in info.value.message


def test_parse_rejects_non_text() -> None:
    with pytest.raises(ValidationError):
        MemoryId.parse(b"01HWT0D7G00000000000000001")


def test_memory_id_is_immutable_and_compares_only_with_ids() -> None:
    mid = MemoryId(bytes(16))
    with pytest.raises(AttributeError):
        mid._b = b"\x01" * 16
    assert mid != bytes(16)
    assert mid != str(mid)
    with pytest.raises(TypeError):
        _ = mid < bytes(16)
    with pytest.raises(TypeError):
        _ = mid <= "x"


# ---------------------------------------------------------------------------------------------
# Generation: monotonic within a millisecond


def test_new_ids_increase_strictly() -> None:
    made = [new_id() for _ in range(5_000)]
    assert all(a < b for a, b in itertools.pairwise(made))
    assert len(set(made)) == len(made)


def test_sorting_gives_creation_order() -> None:
    made = [new_id() for _ in range(1_000)]
    shuffled = made[:]
    random.Random(7).shuffle(shuffled)
    assert sorted(shuffled) == made
    assert sorted(shuffled, key=str) == made
    assert sorted(shuffled, key=lambda m: m.bytes) == made


def _fake_clock(monkeypatch: pytest.MonkeyPatch, *ms: int) -> None:
    """Make the generator read ``ms`` (one value per call, the last one repeated)."""
    readings = list(ms)

    def time_ns() -> int:
        return (readings.pop(0) if len(readings) > 1 else readings[0]) * 1_000_000

    monkeypatch.setattr(ids, "time", types.SimpleNamespace(time_ns=time_ns))


def _rand(mid: MemoryId) -> int:
    return int.from_bytes(mid.bytes[6:], "big")


def test_same_millisecond_counts_up_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_clock(monkeypatch, 1_700_000_000_000)
    gen = ids._Generator()
    made = [gen.next() for _ in range(1_000)]
    assert {m.timestamp_ms for m in made} == {1_700_000_000_000}
    first = _rand(made[0])
    assert first < 2**79  # the top bit is clear: 2**79 increments of headroom
    assert [_rand(m) - first for m in made] == list(range(1_000))


def test_a_new_millisecond_draws_new_randomness(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_clock(monkeypatch, 1_000, 1_000, 1_001)
    gen = ids._Generator()
    a, b, c = gen.next(), gen.next(), gen.next()
    assert (a.timestamp_ms, b.timestamp_ms, c.timestamp_ms) == (1_000, 1_000, 1_001)
    assert _rand(b) == _rand(a) + 1
    assert a < b < c


def test_a_clock_going_back_keeps_ids_increasing(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_clock(monkeypatch, 5_000, 4_000, 3_000, 5_000)
    gen = ids._Generator()
    made = [gen.next() for _ in range(4)]
    assert all(m.timestamp_ms == 5_000 for m in made)
    assert all(a < b for a, b in itertools.pairwise(made))


def test_exhausting_a_millisecond_borrows_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_clock(monkeypatch, 9_000)
    gen = ids._Generator()
    first = gen.next()
    gen._last_rand = 2**80 - 2
    last = gen.next()
    assert (last.timestamp_ms, _rand(last)) == (9_000, 2**80 - 1)
    borrowed = gen.next()
    assert borrowed.timestamp_ms == 9_001
    assert first < last < borrowed


def test_a_forked_child_starts_a_fresh_sequence(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_clock(monkeypatch, 2_000)
    gen = ids._Generator()
    parent = gen.next()
    monkeypatch.setattr(ids, "os", types.SimpleNamespace(urandom=lambda n: b"\x00" * n))
    gen._after_fork()  # what os.register_at_fork runs in the child
    child = gen.next()
    assert child.timestamp_ms == 2_000
    assert _rand(child) == 0  # fresh randomness, not the parent's sequence + 1
    assert _rand(child) != _rand(parent) + 1


def test_randomness_comes_from_a_pool_drawn_from_the_os(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each new millisecond takes the pool's next 10 bytes (the top bit cleared); the OS is
    asked again only when the pool runs out, and never for bytes already handed out."""
    calls: list[int] = []
    source = random.Random(7)

    def urandom(n: int) -> bytes:
        calls.append(n)
        return source.randbytes(n)

    monkeypatch.setattr(ids, "os", types.SimpleNamespace(urandom=urandom))
    _fake_clock(monkeypatch, *range(1_000, 1_000 + 500))
    gen = ids._Generator()
    made = [gen.next() for _ in range(500)]
    per = ids._Generator._POOL // 10
    assert calls == [ids._Generator._POOL, ids._Generator._POOL]
    pool = random.Random(7).randbytes(ids._Generator._POOL)
    assert [_rand(m) for m in made[:3]] == [
        int.from_bytes(pool[i * 10 : i * 10 + 10], "big") >> 1 for i in range(3)
    ]
    assert len({_rand(m) for m in made[:per]}) == per  # no 10 bytes handed out twice
    assert all(a < b for a, b in itertools.pairwise(made))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_real_fork_does_not_repeat_the_parents_next_id() -> None:
    last = ids.new_id()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first id, to the parent
        try:
            os.write(write, ids.new_id().bytes)
        finally:
            os._exit(0)
    os.close(write)
    child = MemoryId(os.read(read, 16))
    os.close(read)
    os.waitpid(pid, 0)
    mine = ids.new_id()
    assert child != mine
    if child.timestamp_ms == last.timestamp_ms:  # not simply the parent's sequence + 1
        assert _rand(child) != _rand(last) + 1


def test_a_batch_counts_up_within_one_millisecond(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_clock(monkeypatch, 7_000, 7_000)
    gen = ids._Generator()
    batch = gen.take(500)
    assert [_rand(m) - _rand(batch[0]) for m in batch] == list(range(500))
    assert gen.take(0) == []
    after = gen.next()
    assert after.timestamp_ms == 7_000 and _rand(after) == _rand(batch[-1]) + 1
    gen._last_rand = 2**80 - 3
    spill = gen.take(4)
    assert [m.timestamp_ms for m in spill] == [7_000, 7_000, 7_001, 7_001]
    assert all(a < b for a, b in itertools.pairwise([after, *spill]))


# ---------------------------------------------------------------------------------------------
# URIs

CANONICAL = "cortex://Fact/01HWT0D7G00000000000000001#1"


def test_parse_canonical_uri() -> None:
    uri = Uri.parse(CANONICAL)
    assert uri.type is MemoryType.FACT
    assert uri.id == MemoryId.parse("01HWT0D7G00000000000000001")
    assert uri.version == 1
    assert str(uri) == CANONICAL
    assert repr(uri) == f"Uri('{CANONICAL}')"
    assert Uri.parse(uri) is uri
    assert Uri.parse(f"cortex://Pattern/7ZZZZZZZZZZZZZZZZZZZZZZZZZ#{MAX_VERSION}").version == (
        MAX_VERSION
    )


@pytest.mark.parametrize(
    ("text", "field", "rule"),
    [
        ("cortex://Fact/01HWT0D7G00000000000000001", "uri", "format"),  # missing version
        ("cortex://Fact/01HWT0D7G00000000000000001#", "uri", "version"),
        ("cortex://Fact/01HWT0D7G00000000000000001#latest", "uri", "version"),
        ("cortex://Fact/01HWT0D7G00000000000000001#0", "uri", "version"),
        ("cortex://Fact/01HWT0D7G00000000000000001#01", "uri", "version"),
        ("cortex://Fact/01HWT0D7G00000000000000001#-1", "uri", "version"),
        ("cortex://Fact/01HWT0D7G00000000000000001#1#2", "uri", "version"),
        (f"cortex://Fact/01HWT0D7G00000000000000001#{MAX_VERSION + 1}", "uri", "version"),
        # a lower-case id: which field and rule name it is not pinned here (see specs/)
        ("cortex://Fact/01hwt0d7g00000000000000001#1", None, None),
        ("cortex://fact/01HWT0D7G00000000000000001#1", "uri", "type_name"),
        ("cortex://FACT/01HWT0D7G00000000000000001#1", "uri", "type_name"),
        ("cortex://Memory/01HWT0D7G00000000000000001#1", "uri", "type_name"),
        ("cortex://Fact/01HWT0D7G0000000000000001#1", "uri", "format"),  # 25-character id
        ("https://Fact/01HWT0D7G00000000000000001#1", "uri", "format"),
        ("cortex:/Fact/01HWT0D7G00000000000000001#1", "uri", "format"),
        (" " + CANONICAL, "uri", "format"),
        ("", "uri", "format"),
        ("junk", "uri", "format"),
    ],
)
def test_uri_rejects(text: str, field: str | None, rule: str | None) -> None:
    with pytest.raises(ValidationError) as info:
        Uri.parse(text)
    if field is None:
        assert "Crockford base32" in info.value.message
    else:
        assert (info.value.field, info.value.rule) == (field, rule)


def test_uri_error_messages_say_how_to_fix() -> None:
    with pytest.raises(ValidationError, match="use resolve_latest"):
        Uri.parse(CANONICAL[:-1] + "latest")
    with pytest.raises(ValidationError, match="cortex://<TypeName>/<ULID>#<version>"):
        Uri.parse(CANONICAL[:-2])
    with pytest.raises(ValidationError, match="one of Identity, Fact, Preference"):
        Uri.parse(CANONICAL.replace("Fact", "fact"))
    with pytest.raises(ValidationError, match="without leading zeros"):
        Uri.parse(CANONICAL[:-2] + "#01")


def test_uri_rejects_non_text() -> None:
    with pytest.raises(ValidationError) as info:
        Uri.parse(42)
    assert (info.value.field, info.value.rule) == ("uri", "type")


@given(memory_types(), memory_ids(), st.integers(1, MAX_VERSION))
def test_uri_str_round_trip(t: MemoryType, mid: MemoryId, version: int) -> None:
    uri = Uri(t, mid, version)
    text = str(uri)
    assert text == f"cortex://{t.type_name}/{mid}#{version}"
    back = Uri.parse(text)
    assert back == uri
    assert hash(back) == hash(uri)
    assert (back.type, back.id, back.version) == (t, mid, version)


@pytest.mark.parametrize("version", [0, -1, MAX_VERSION + 1, True, 1.0, "1", None])
def test_uri_constructor_rejects_bad_versions(version: Any) -> None:
    with pytest.raises(ValidationError) as info:
        Uri(MemoryType.FACT, MemoryId(bytes(16)), version)
    assert (info.value.field, info.value.rule) == ("uri", "version")


def test_uri_constructor_checks_type_and_id() -> None:
    assert Uri(2, MemoryId(bytes(16)), 1).type is MemoryType.FACT
    with pytest.raises(ValidationError) as info:
        Uri(MemoryType.FACT, bytes(16), 1)
    assert (info.value.field, info.value.rule) == ("uri", "type")
    with pytest.raises(ValidationError) as info:
        Uri(99, MemoryId(bytes(16)), 1)
    assert (info.value.field, info.value.rule) == ("uri", "type_name")


def test_uri_equality_and_immutability() -> None:
    mid = MemoryId(bytes(16))
    a = Uri(MemoryType.FACT, mid, 1)
    assert a == Uri(MemoryType.FACT, mid, 1)
    assert a != Uri(MemoryType.FACT, mid, 2)
    assert a != Uri(MemoryType.GOAL, mid, 1)
    assert a != str(a)
    assert len({a, Uri.parse(str(a))}) == 1
    with pytest.raises(AttributeError):
        a.version = 2


@given(
    st.sampled_from(list(MemoryType)),
    st.binary(min_size=16, max_size=16),
    st.integers(1, 2**63 - 1),
)
def test_trusted_uri_equals_a_checked_one(t: MemoryType, raw: bytes, version: int) -> None:
    trusted = Uri._trusted(t, MemoryId(raw), version)
    checked = Uri(t, MemoryId(raw), version)
    assert trusted == checked and str(trusted) == str(checked) and hash(trusted) == hash(checked)
    with pytest.raises(AttributeError):
        trusted.version = 2  # type: ignore[misc]
