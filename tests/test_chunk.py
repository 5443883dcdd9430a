"""Chunking (specs/chunking.md): golden spans, hand cases and the properties under hypothesis."""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cortex import ValidationError
from cortex.model.chunk import DEFAULT_OVERLAP, DEFAULT_TARGET, Chunk, chunk_text

VECTORS = Path(__file__).resolve().parent.parent / "specs" / "vectors" / "chunks.json"


def _cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads(VECTORS.read_text(encoding="utf-8"))["cases"]
    return cases


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c["name"])
def test_golden_spans(case: dict[str, Any]) -> None:
    raw = case["text"].encode("utf-8")
    got = chunk_text(case["text"], target=case["target"], overlap=case["overlap"])
    assert [(c.start, c.end, c.tokens) for c in got] == [
        (c["start"], c["end"], c["tokens"]) for c in case["chunks"]
    ]
    for c in case["chunks"]:  # the vector's own digests agree with its spans
        assert hashlib.sha256(raw[c["start"] : c["end"]]).hexdigest() == c["sha256"]
        assert c["tokens"] == -(-(c["end"] - c["start"]) // 4)


def test_golden_cases_cover_what_the_issue_names() -> None:
    by_name = {c["name"]: c for c in _cases()}
    md = by_name["markdown with code fences"]
    raw = md["text"].encode()
    fence = (raw.index(b"```python"), raw.index(b"```\n\n", raw.index(b"```python") + 3) + 4)
    assert fence[1] - fence[0] > 4 * DEFAULT_TARGET  # a fence larger than a chunk
    holding = [c for c in md["chunks"] if c["start"] <= fence[0] and fence[1] <= c["end"]]
    assert len(holding) == 1  # whole, in one chunk
    assert raw[holding[0]["start"] :].startswith(b"## The new loop")  # with its heading
    sentence = by_name["one 300-token sentence"]
    raw = sentence["text"].encode()
    s, e = raw.index(b"A single sentence"), raw.index(b"until here. ") + len(b"until here. ")
    assert 280 <= (e - s) / 4 <= 320
    assert any(c["start"] <= s and e <= c["end"] for c in sentence["chunks"])
    assert len(sentence["chunks"]) > 1  # the cut fell around it, not through it
    assert any(ord(ch) > 0x3000 for ch in by_name["CJK"]["text"])
    assert len(by_name["plain prose"]["chunks"]) > 5


# -- hand cases ----------------------------------------------------------------------------------


def _texts(text: str, chunks: list[Chunk]) -> list[str]:
    raw = text.encode()
    return [raw[c.start : c.end].decode() for c in chunks]


def test_empty_and_blank() -> None:
    assert chunk_text("") == []
    assert chunk_text("   \n\n\t") == [Chunk(0, 0, 6, 2)]
    assert chunk_text("one line") == [Chunk(0, 0, 8, 2)]


def test_small_text_is_one_chunk() -> None:
    text = "# Title\n\nA paragraph.\n\n- a\n- b\n\n```\ncode\n```\n"
    assert _texts(text, chunk_text(text)) == [text]


def test_unclosed_fence_runs_to_the_end_and_is_never_split() -> None:
    text = "intro\n\n```\n" + "line of code\n" * 400
    chunks = chunk_text(text, target=64, overlap=16)
    assert [c.end for c in chunks][-1] == len(text)
    fence_start = text.index("```")
    assert all(not (fence_start < c.start < len(text)) for c in chunks)
    assert chunks[-1].start <= fence_start


def test_heading_goes_with_what_follows() -> None:
    text = "".join(f"Sentence number {i} is here. " for i in range(20)) + "\n\n# Next\n\nBody. " * 3
    for c in _texts(text, chunk_text(text, target=64, overlap=8)):
        assert not c.rstrip().endswith("# Next") or c.lstrip().startswith("# Next")


def test_crlf_and_lists() -> None:
    text = "".join(f"- item {i} with a few words in it\r\n" for i in range(200))
    chunks = chunk_text(text, target=32, overlap=8)
    for c in _texts(text, chunks)[1:]:
        assert c.startswith("- item")  # cut between items (item blocks), never inside one


def test_a_word_longer_than_a_chunk_is_cut_at_characters() -> None:
    text = "é" * 1000  # 2,000 bytes, no space
    chunks = chunk_text(text, target=100, overlap=0)
    assert [c.end - c.start for c in chunks] == [400] * 5
    assert "".join(_texts(text, chunks)) == text


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"target": 7}, "target"),
        ({"target": 400.0}, "target"),
        ({"overlap": -1}, "overlap"),
        ({"overlap": 201}, "overlap"),
        ({"overlap": True}, "overlap"),
    ],
)
def test_bad_sizes(kw: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        chunk_text("text", **kw)
    assert info.value.field == field


def test_not_a_string() -> None:
    with pytest.raises(ValidationError):
        chunk_text(b"bytes")  # type: ignore[arg-type]


# -- properties ----------------------------------------------------------------------------------

_words = st.text(
    alphabet=st.sampled_from([*list("abcdefghij klmnop.,!?;:'\""), "é", "ß", "中", "文", "😀"]),
    min_size=1,
    max_size=80,
)


@st.composite
def _documents(draw: st.DrawFn) -> tuple[str, list[tuple[int, int]]]:
    """A markdown-like text and the byte spans of its fenced code blocks."""
    parts: list[str] = []
    fences: list[tuple[int, int]] = []
    size = 0
    for _ in range(draw(st.integers(1, 25))):
        kind = draw(st.sampled_from(["para", "para", "heading", "item", "fence", "cjk", "blank"]))
        if kind == "para":
            part = " ".join(draw(st.lists(_words, min_size=1, max_size=12))) + "\n\n"
        elif kind == "heading":
            part = "#" * draw(st.integers(1, 6)) + " " + draw(_words).replace("\n", " ") + "\n"
        elif kind == "item":
            part = "- " + draw(_words) + "\n"
        elif kind == "cjk":
            part = "这是一个句子。" * draw(st.integers(1, 60)) + "\n\n"
        elif kind == "blank":
            part = "\n" * draw(st.integers(1, 3))
        else:
            body = "".join(f"code {draw(_words)}\n" for _ in range(draw(st.integers(0, 40))))
            part = "```\n" + body.replace("```", "'''").replace("~~~", "---") + "```\n"
            if parts and not parts[-1].endswith("\n"):
                parts.append("\n")
                size += 1
            fences.append((size, size + len(part.encode())))
        parts.append(part)
        size += len(part.encode())
    return "".join(parts), fences


@given(doc=_documents(), target=st.sampled_from([8, 16, 40, 100, DEFAULT_TARGET]), data=st.data())
def test_properties(doc: tuple[str, list[tuple[int, int]]], target: int, data: Any) -> None:
    text, fences = doc
    overlap = data.draw(st.integers(0, target // 2))
    raw = text.encode()
    limit, keep = 4 * target, 4 * overlap
    chunks = chunk_text(text, target=target, overlap=overlap)
    assert chunk_text(text, target=target, overlap=overlap) == chunks  # deterministic
    # every byte is in some chunk, in order, each span decodes
    assert chunks[0].start == 0 and chunks[-1].end == len(raw)
    for k, c in enumerate(chunks):
        assert c.index == k and c.start < c.end
        assert c.tokens == -(-(c.end - c.start) // 4)
        raw[c.start : c.end].decode("utf-8")  # on character boundaries
    for a, b in itertools.pairwise(chunks):
        assert a.start < b.start and a.end < b.end
        assert b.start <= a.end  # no gap
        assert a.end - b.start <= min(keep, (a.end - a.start) // 2)  # overlap bounds
    # code fences are never cut, and only a code block makes a chunk exceed the target
    for c in chunks:
        for s, e in fences:
            assert not s < c.start < e and not s < c.end < e
        if c.end - c.start > limit:
            assert any(c.start <= s and e <= c.end and e - s > 0 for s, e in fences)


def test_defaults_are_the_seeds() -> None:
    assert (DEFAULT_TARGET, DEFAULT_OVERLAP) == (400, 80)
