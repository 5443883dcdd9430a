"""Episode records (issue 13 item 1, specs/episodes.md): golden vectors both ways, the hash
recomputed independently, verbatim content, chunks, purge, and every rule."""

from __future__ import annotations

import hashlib
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from cortex import CodecError, IntegrityError, ValidationError
from cortex.model.chunk import chunk_text
from cortex.model.episode import (
    check_episode,
    decode_episode,
    encode_episode,
    episode_text,
    new_episode,
    purged,
)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))

import gen_vectors

VECTORS = gen_vectors.VECTORS_DIR / "episodes.json"
T = datetime(2026, 11, 20, 9, 30, tzinfo=UTC)


def _cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads(VECTORS.read_text(encoding="utf-8"))["cases"]
    return cases


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c["name"])
def test_golden_vectors_both_ways(case: dict[str, Any]) -> None:
    raw = bytes.fromhex(case["cbor_hex"])
    ep = decode_episode(raw)  # bytes -> record
    assert encode_episode(ep) == raw  # and back, byte for byte
    check_episode(ep)
    assert ep.hash.hex() == case["hash_hex"]
    assert [list(c) for c in ep.chunks] == case["chunks"]
    if case["input"] is None:
        assert ep.content is None and ep.purged_at is not None
        return
    built = gen_vectors.build_episode({"name": case["name"], **case["input"]})  # input -> bytes
    assert encode_episode(built) == raw
    content = case["input"]["content"].encode("utf-8")
    assert ep.content == content  # verbatim: not normalised
    want = hashlib.sha256(b"matrix.cortex.episode.v1" + content).hexdigest()
    assert case["hash_hex"] == want  # the hash, recomputed without cortex
    spans = [[c.start, c.end] for c in chunk_text(case["input"]["content"])]
    assert case["chunks"] == spans


def test_content_is_kept_exactly() -> None:
    text = "Cafe\u0301 \r\n\t  trailing  \u00a0"
    ep = new_episode(text, occurred_at=T, source="chat", created_by="a", created_at=T)
    assert episode_text(ep) == text
    assert decode_episode(encode_episode(ep)) == ep


def test_ten_megabytes() -> None:
    text = ("A line of a long document, with some words in it.\n" * 200_000)[: 10 * 1024 * 1024]
    ep = new_episode(text, occurred_at=T, source="upload", created_by="a", created_at=T)
    raw = encode_episode(ep)
    back = decode_episode(raw)
    assert back.content == text.encode() and len(back.chunks) > 6000
    check_episode(back)


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"content": ""}, "content"),
        ({"content": b"bytes"}, "content"),
        ({"content": "lone \ud800 surrogate"}, "content"),
        ({"source": "Chat Room"}, "episode.source"),
        ({"source": ""}, "episode.source"),
        ({"labels": "one"}, "labels"),
        ({"labels": ["a", "a"]}, "episode.labels"),
        ({"labels": ["x"] * 17}, "episode.labels"),
        ({"visibility": "secret"}, "visibility"),
        ({"occurred_at": datetime(2026, 1, 1)}, "episode.occurred_at"),
        ({"channel": "c" * 300}, "episode.channel"),
        ({"created_by": ""}, "episode.created_by"),
    ],
)
def test_bad_input_names_the_field(kw: dict[str, Any], field: str) -> None:
    args: dict[str, Any] = {
        "content": "x",
        "occurred_at": T,
        "source": "chat",
        "created_by": "a",
        "created_at": T,
        **kw,
    }
    content = args.pop("content")
    with pytest.raises(ValidationError) as info:
        new_episode(content, **args)
    assert info.value.field.startswith(field)


def test_over_64_mib() -> None:
    with pytest.raises(ValidationError) as info:
        new_episode("x" * (64 * 1024 * 1024 + 1), occurred_at=T, source="chat",
                    created_by="a", created_at=T)  # fmt: skip
    assert (info.value.field, info.value.rule) == ("content", "size")


def test_damage_is_found() -> None:
    ep = new_episode("Sam lives in Lisbon. " * 200, occurred_at=T, source="chat",
                     created_by="a", created_at=T)  # fmt: skip
    assert ep.content is not None
    flipped = msgspec.structs.replace(ep, content=b"X" + ep.content[1:])
    with pytest.raises(IntegrityError, match="hash"):
        check_episode(flipped)
    for chunks in (((0, 10), (20, 30)), ((5, len(ep.content)),), ((0, 10),), ((0, 0),)):
        with pytest.raises(IntegrityError):
            check_episode(msgspec.structs.replace(ep, chunks=chunks))
    multi = new_episode("é" * 10, occurred_at=T, source="chat", created_by="a", created_at=T)
    with pytest.raises(IntegrityError, match="cuts a character"):
        check_episode(msgspec.structs.replace(multi, chunks=((0, 3), (3, 20))))
    with pytest.raises(CodecError):
        decode_episode(encode_episode(ep)[:-3])


def test_purge_keeps_the_hash_and_drops_the_text() -> None:
    ep = new_episode("my passport is X123", occurred_at=T, source="chat", created_by="a",
                     created_at=T)  # fmt: skip
    gone = purged(ep, T)
    raw = encode_episode(gone)
    assert b"X123" not in raw and ep.hash in raw
    assert episode_text(decode_episode(raw)) is None
    check_episode(gone)
    with pytest.raises(IntegrityError):
        check_episode(msgspec.structs.replace(gone, chunks=((0, 1),)))
