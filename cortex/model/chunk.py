"""Chunking: long verbatim text cut into overlapping, markdown-aware chunks (``specs/chunking.md``).

An episode's text (a document, a long message) is searched through its chunks: spans of about
``target`` tokens (cortex's tokens: ``ceil(UTF-8 bytes / 4)``) that overlap their neighbours by
at most ``overlap`` tokens. The cut follows the text's structure:

- the text is first read as *blocks* that tile it: headings, fenced code blocks, list items and
  paragraphs, each with the blank lines after it;
- a block of more than ``target`` tokens is split into sentences, and a sentence of more than
  ``target`` tokens into words (then, for a word longer than that, at a character boundary);
  a fenced code block is never split (it may exceed ``target``: it is then a chunk of its own);
- the pieces (*units*) are packed greedily; when the next unit does not fit, the chunk is cut at
  its last block boundary if what comes before it is at least half the target, else right
  there; a heading never ends a chunk that holds anything else;
- the next chunk starts with the longest run of the previous chunk's last units that fits in
  ``overlap`` tokens (none when the last unit alone is larger, or it is a code block).

Offsets are UTF-8 byte offsets into the verbatim text, so a hit quotes its exact span; every byte
is in at least one chunk, and the chunks are ordered by where they start. Pure: no storage, no
randomness; golden vectors (``specs/vectors/chunks.json``) pin the boundaries.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

import msgspec

from cortex.errors import ValidationError

__all__ = [
    "DEFAULT_OVERLAP",
    "DEFAULT_TARGET",
    "Chunk",
    "chunk_text",
]

DEFAULT_TARGET: Final = 400
"""Tokens a chunk aims at (seed 004: ~400)."""
DEFAULT_OVERLAP: Final = 80
"""Tokens a chunk may repeat of the one before (seed 004: ~80)."""

# Block kinds
_PARA: Final = 0
_HEADING: Final = 1
_FENCE: Final = 2
_ITEM: Final = 3

_FENCE_OPEN: Final = re.compile(r" {0,3}(`{3,}|~{3,})")
_HEADING_LINE: Final = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")
_ITEM_LINE: Final = re.compile(r"[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")
# A sentence ends after terminal punctuation (with closing quotes or brackets) followed by white
# space, or after a CJK full stop, question or exclamation mark (no space follows those).
_SENTENCE_END: Final = re.compile(r"[.!?…]+[\"'”’)\]]*\s+|[。！？]+[」』”’)）]*\s*")
_SPACE_RUN: Final = re.compile(r"\s+")


class Chunk(msgspec.Struct, frozen=True):
    """One chunk: ``text_bytes[start:end]`` of the UTF-8 text, its ``tokens`` and position."""

    index: int
    start: int
    end: int
    tokens: int


class UnitField(NamedTuple):
    size: int  # UTF-8 bytes
    block_start: bool  # the first unit of its block (a place to cut)
    kind: int


def _blen(s: str) -> int:
    return len(s.encode("utf-8")) if not s.isascii() else len(s)


def _blocks(text: str) -> list[tuple[int, str]]:
    """The text's blocks in order, ``(kind, text)``; their texts concatenate to ``text``."""
    lines = text.splitlines(keepends=True)
    out: list[tuple[int, str]] = []
    kind = -1  # the open block's kind (-1: none)
    buf: list[str] = []
    fence: str | None = None  # the fence marker while inside a code block
    blank_tail = False  # the open block has ended with blank lines

    def close() -> None:
        nonlocal kind, buf, blank_tail
        if buf:
            out.append((kind if kind >= 0 else _PARA, "".join(buf)))
        kind, buf, blank_tail = -1, [], False

    for line in lines:
        if fence is not None:  # inside a code block: until the closing fence
            buf.append(line)
            stripped = line.strip()
            if (
                stripped.startswith(fence)
                and set(stripped) == {fence[0]}
                and len(line) - len(line.lstrip(" ")) <= 3
            ):
                fence = None
                blank_tail = True  # only blank lines may join it now
            continue
        if not line.strip():  # a blank line joins the open block (or starts the text)
            buf.append(line)
            if kind >= 0:
                blank_tail = True
            continue
        m = _FENCE_OPEN.match(line)
        if m is not None:
            close()
            kind, fence = _FENCE, m.group(1)
            buf.append(line)
            continue
        if _HEADING_LINE.match(line) is not None:
            if kind >= 0:
                close()
            kind = _HEADING
            buf.append(line)
            blank_tail = True  # a heading is one line
            continue
        if _ITEM_LINE.match(line) is not None:
            if kind >= 0:
                close()
            kind = _ITEM
            buf.append(line)
            continue
        # a text line: it continues a paragraph or a list item, else starts a paragraph
        if kind in (_PARA, _ITEM) and not blank_tail:
            buf.append(line)
            continue
        if kind >= 0:
            close()
        kind = _PARA
        buf.append(line)
    close()
    return out


def _split_words(s: str, limit: int) -> list[str]:
    """``s`` in pieces of at most ``limit`` bytes, cut after white space where possible."""
    out: list[str] = []
    cur: list[str] = []
    size = 0
    pos = 0
    words: list[str] = []
    for m in _SPACE_RUN.finditer(s):
        words.append(s[pos : m.end()])
        pos = m.end()
    if pos < len(s):
        words.append(s[pos:])
    for w in words:
        n = _blen(w)
        if size + n > limit and cur:
            out.append("".join(cur))
            cur, size = [], 0
        if n > limit:  # one word longer than the limit: cut at character boundaries
            piece: list[str] = []
            psize = 0
            for ch in w:
                c = _blen(ch)
                if psize + c > limit and piece:
                    out.append("".join(piece))
                    piece, psize = [], 0
                piece.append(ch)
                psize += c
            cur, size = piece, psize
            continue
        cur.append(w)
        size += n
    if cur:
        out.append("".join(cur))
    return out


def _sentences(s: str) -> list[str]:
    """``s`` cut after each sentence end (the white space after it stays with the sentence)."""
    out: list[str] = []
    pos = 0
    for m in _SENTENCE_END.finditer(s):
        if m.end() > pos:
            out.append(s[pos : m.end()])
            pos = m.end()
    if pos < len(s):
        out.append(s[pos:])
    return out


def _units(text: str, limit: int) -> list[UnitField]:
    """The pieces chunks are packed from: headings and code blocks whole, the rest by sentence."""
    units: list[UnitField] = []
    for kind, block in _blocks(text):
        if kind == _FENCE or (kind == _HEADING and _blen(block) <= limit):
            units.append(UnitField(_blen(block), True, kind))
            continue
        first = True
        for sentence in _sentences(block):
            n = _blen(sentence)
            pieces = [sentence] if n <= limit else _split_words(sentence, limit)
            for piece in pieces:
                units.append(UnitField(_blen(piece), first, kind))
                first = False
    return units


def chunk_text(
    text: str, *, target: int = DEFAULT_TARGET, overlap: int = DEFAULT_OVERLAP
) -> list[Chunk]:
    """Cut ``text`` into chunks (see the module docs and ``specs/chunking.md``).

    Args:
        text: the verbatim text.
        target: tokens a chunk aims at, at least 8.
        overlap: tokens a chunk may repeat of the one before, ``0 <= overlap <= target / 2``.

    Returns:
        The chunks, ordered by ``start``; none for empty text.

    Raises:
        ValidationError: ``text`` is not a string, or a size is out of range.
    """
    if not isinstance(text, str):
        raise ValidationError("text", "type", f"must be a str, got {type(text).__name__}")
    if type(target) is not int or target < 8:
        raise ValidationError("target", "range", f"must be an int >= 8, got {target!r}")
    if type(overlap) is not int or not 0 <= overlap <= target // 2:
        raise ValidationError(
            "overlap", "range", f"must be an int in 0..{target // 2}, got {overlap!r}"
        )
    if not text:
        return []
    limit, keep = target * 4, overlap * 4
    units = _units(text, limit)
    starts = [0] * (len(units) + 1)  # byte offset of each unit, and the end
    for i, u in enumerate(units):
        starts[i + 1] = starts[i] + u.size
    chunks: list[tuple[int, int]] = []  # (first unit, end unit) of each chunk
    first = 0  # the current chunk's first unit
    fresh = 0  # its first unit not carried over from the chunk before
    i = 0
    n = len(units)
    while i < n:
        if starts[i + 1] - starts[first] <= limit:
            i += 1
            continue
        if all(units[j].kind == _HEADING for j in range(fresh, i)):
            # the first new unit (after its headings) does not fit beside what was carried
            # over: carry less, until it fits; a code block larger than a chunk goes in anyway
            f = first
            while f < fresh and starts[i + 1] - starts[f] > limit:
                f += 1
            if starts[i + 1] - starts[f] <= limit or units[i].kind == _FENCE:
                first = f
                i += 1
                continue
        # units[i] does not fit: cut before it, or at the last block boundary before it when
        # at least half a chunk comes before that boundary
        cut = i
        if not units[i].block_start:
            for j in range(i - 1, fresh, -1):
                if units[j].block_start:
                    if 2 * (starts[j] - starts[first]) >= limit:
                        cut = j
                    break
        # a heading does not end a chunk that holds anything else
        while cut - 1 > fresh and units[cut - 1].kind == _HEADING:
            cut -= 1
        chunks.append((first, cut))
        # the next chunk repeats the longest run of this one's last units that fits in
        # ``keep`` bytes and half the chunk (never a code block or a heading at its end)
        room = min(keep, (starts[cut] - starts[first]) // 2)
        nxt = cut
        while (
            nxt - 1 > first
            and units[nxt - 1].kind not in (_FENCE, _HEADING)
            and starts[cut] - starts[nxt - 1] <= room
        ):
            nxt -= 1
        first, fresh, i = nxt, cut, cut
    chunks.append((first, n))
    return [
        Chunk(k, starts[a], starts[b], -(-(starts[b] - starts[a]) // 4))
        for k, (a, b) in enumerate(chunks)
    ]
