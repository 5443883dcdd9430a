"""The analyzer of the lexical index: text to search terms (``specs/lexical.md`` §2).

Pure functions. ``tokenize`` splits folded text into words; ``terms`` stems them (Snowball
English) into what the index holds; ``query_terms`` does the same for a query and leaves out
English function words ("what", "did", "the") unless the query has nothing else. Documents and
queries go through the same folding and stemming, so whatever they merge (case, accents,
compatibility forms, inflections) matches in both directions.
"""

from __future__ import annotations

import re
import sys
import threading
import unicodedata
from functools import cache
from typing import Final

import Stemmer

try:
    from cortex import _speedups as _sp
except ImportError:  # pragma: no cover - installed without a C compiler
    _sp = None  # type: ignore[assignment]

# an extension built from an older _speedups.c lacks the function: then the Python path runs
_USE_SPEEDUPS: bool = _sp is not None and hasattr(_sp, "ascii_tokens")
"""Tokenize ASCII text in C (``cortex._speedups.ascii_tokens``) when it is built; tests switch
this off to compare with the Python path, which stays the definition."""

__all__ = ["MAX_TOKEN_CHARS", "STEMMER", "STOP_WORDS", "fold", "query_terms", "terms", "tokenize"]

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


STEMMER: Final = "snowball-english"
"""The stemming algorithm applied to every token (Snowball's English, "Porter2")."""

# English function words: left out of queries (not of documents) when a query has other terms.
# Contraction remnants are here because the tokenizer splits "don't" into "don", "t".
STOP_WORDS: Final = frozenset(
    """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could d did do does doing don down during each few
    for from further had has have having he her here hers herself him himself his how i if
    in into is it its itself just ll m me might more most must my myself no nor not now of
    off on once only or other ought our ours ourselves out over own re s same shall she
    should so some such t than that the their theirs them themselves then there these they
    this those through to too under until up ve very was we were what when where which while
    who whom why will with would you your yours yourself yourselves
    """.split()  # noqa: SIM905 (a word list reads better as text)
)

_local = threading.local()
STEMS: dict[str, str] = {}
"""token -> stem, shared by every thread (a dict's get and update are atomic in CPython)."""
_STEMS_MAX: Final = 1 << 17
"""Entries at most: the cache is emptied when a new batch would pass this (vocabularies are
Zipfian, so the hot words come back at once)."""


def _stem_words(words: list[str]) -> list[str]:
    cache = STEMS
    found = [*map(cache.get, words)]
    if None not in found:
        return found  # type: ignore[return-value]  # no None left
    missing = list(dict.fromkeys(w for w, s in zip(words, found, strict=True) if s is None))
    # PyStemmer objects are not thread-safe: one per thread
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = Stemmer.Stemmer("english", 0)  # no cache of its own
    new = {w: s or w for w, s in zip(missing, stemmer.stemWords(missing), strict=True)}
    if len(cache) + len(new) > _STEMS_MAX:
        cache.clear()
    cache.update(new)
    return [s if s is not None else new[w] for w, s in zip(words, found, strict=True)]


def terms(text: str) -> list[str]:
    """The index terms of a document: its tokens, each stemmed (Snowball English).

    Args:
        text: any text (a memory's full form).

    Returns:
        ``stem(t)`` for every ``t`` of ``tokenize(text)``, in order, with repeats; never an
        empty string (a token the stemmer would empty stays as it is).
    """
    return _stem_words(tokenize(text))


def query_terms(text: str) -> list[str]:
    """The distinct terms a query searches for, in order of first occurrence.

    Tokens in ``STOP_WORDS`` are dropped before stemming, unless every token is one (then all
    are kept, so "who are you" still finds something); the rest are stemmed as in ``terms``.

    Args:
        text: the query.

    Returns:
        Distinct terms; empty only when the query has no token at all.
    """
    tokens = tokenize(text)
    content = [t for t in tokens if t not in STOP_WORDS]
    return list(dict.fromkeys(_stem_words(content or tokens)))
