"""The tokenizer of the lexical index: text to search terms (``specs/lexical.md`` §2).

Pure functions. Documents and queries go through the same ``tokenize``, so whatever it folds
together (case, accents, compatibility forms) matches in both directions.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from functools import cache
from typing import Final

try:
    from cortex import _speedups as _sp
except ImportError:  # pragma: no cover - installed without a C compiler
    _sp = None  # type: ignore[assignment]

# an extension built from an older _speedups.c lacks the function: then the Python path runs
_USE_SPEEDUPS: bool = _sp is not None and hasattr(_sp, "ascii_tokens")
"""Tokenize ASCII text in C (``cortex._speedups.ascii_tokens``) when it is built; tests switch
this off to compare with the Python path, which stays the definition."""

__all__ = ["MAX_TOKEN_CHARS", "fold", "tokenize"]

MAX_TOKEN_CHARS: Final = 64
"""Longer tokens are cut to their first 64 characters (code points), in documents and queries."""

# Scripts written without spaces between words: every character is its own token (unigrams),
# so that a word inside a run of ideographs can be found at all. Hiragana, Katakana, CJK
# unified ideographs (with extension A and the supplementary planes).
_UNIGRAM_RANGES: Final = (
    "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
)
_ASCII_TOKEN: Final = re.compile(r"[a-z0-9]+")
# Mn (nonspacing) and Me (enclosing) marks are the accents dropped by folding.
_DROPPED_MARKS: Final = frozenset({"Mn", "Me"})


@cache
def _token_re() -> re.Pattern[str]:
    """The general pattern, built on first use (it scans the code points for spacing marks)."""
    # A word is a maximal run of letters and digits (str.isalnum), plus spacing combining marks
    # (Mc, e.g. Devanagari vowel signs), which belong inside words of the scripts that use them.
    spacing = "".join(
        re.escape(chr(c))
        for c in range(0x0300, min(sys.maxunicode, 0x1FFFF) + 1)
        if unicodedata.category(chr(c)) == "Mc"
    )
    word = rf"(?:[^\W_{_UNIGRAM_RANGES}]|[{spacing}])+"
    return re.compile(rf"[{_UNIGRAM_RANGES}]|{word}")


def _strip_marks(s: str) -> str:
    return "".join(c for c in s if unicodedata.category(c) not in _DROPPED_MARKS)


def fold(text: str) -> str:
    """Fold text for matching: compatibility-decompose, drop accents, casefold.

    NFKD, then remove nonspacing and enclosing marks (Mn, Me), then casefold, then the same
    once more (casefolding can produce decomposable characters), then NFC.

    Args:
        text: any text.

    Returns:
        The folded text; ``fold(fold(t)) == fold(t)``.
    """
    if text.isascii():
        return text.lower()
    s = _strip_marks(unicodedata.normalize("NFKD", text)).casefold()
    s = _strip_marks(unicodedata.normalize("NFKD", s))
    return unicodedata.normalize("NFC", s)


def tokenize(text: str) -> list[str]:
    """Split text into search terms, in order, with repeats.

    A term is a maximal run of letters, digits and spacing marks of the folded text (any
    script), or a single character of a script written without spaces (Han, Hiragana,
    Katakana). Everything else separates terms, so numbers split at their punctuation
    (``"3.5"`` gives ``"3"``, ``"5"``). Terms are cut to ``MAX_TOKEN_CHARS`` characters.

    Args:
        text: any text (a document's full form or a query).

    Returns:
        The terms; never an empty string, and ``tokenize(" ".join(terms)) == terms``.
    """
    if text.isascii():
        if _USE_SPEEDUPS and type(text) is str:
            tokens = _sp.ascii_tokens(text)
            if tokens is not None:
                return tokens
        found = _ASCII_TOKEN.findall(text.lower())
    else:
        found = _token_re().findall(fold(text))
    if not found or max(map(len, found)) <= MAX_TOKEN_CHARS:
        return found
    return [t if len(t) <= MAX_TOKEN_CHARS else t[:MAX_TOKEN_CHARS] for t in found]
