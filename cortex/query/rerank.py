"""Pure: a text query's ranking terms beyond BM25 and cosine: neighbours' context, named entities.

A text query's fused (or single-list) scores are adjusted by two rules (``specs/query.md``
§1.9), each with a weight in ``cortex.Fusion``:

- *context*: an Event's score gains ``context_weight`` times the best score among its
  neighbours — the Events written just before and after it whose own times lie within
  ``CONTEXT_GAP`` of its own (the turns around it in the same conversation), so the answer that
  follows a matching question, or a turn between two matching ones, ranks with them. Only
  Events: they are episodic, a sequence of what happened; a Fact or a Preference states
  something on its own, and the one written before it need not be related;
- *entity*: a memory whose entity field (an Event's counterparty, a Fact's, Belief's or
  Capability's subject, an Identity's name) the query names, as whole words, gains
  ``entity_weight``: the field is the speaker or the subject, the words of the text only
  mention it. With the term on, the vector ranking embeds the query without the names it
  finds that way (``unnamed``): the name counts through the field, and a sentence encoder
  given a bare name pulls towards texts that mention it (a greeting to that person) rather
  than towards what the question asks about them.

The functions here compute both from plain mappings; ``cortex.query.planner`` finds the neighbours
in the type index and calls them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any, Final, TypeVar

from cortex.index.text import fold, tokenize
from cortex.model.records import Identity

__all__ = [
    "CONTEXT_GAP",
    "CONTEXT_SCAN",
    "CONTEXT_SOURCES",
    "combine",
    "context_scores",
    "entity_names",
    "names_any",
    "unnamed",
]

K = TypeVar("K", bound=Hashable)

CONTEXT_GAP: Final = timedelta(minutes=30)
"""Neighbours are no further apart in own time than this: the usual inactivity timeout that
ends a session (web analytics, chat logs), not a figure fitted to any data."""

CONTEXT_SCAN: Final = 16
"""Index entries read at most beyond the wanted neighbours on each side (hidden, filtered or
tombstoned ones are skipped): bounds the reads of one hit."""

CONTEXT_SOURCES: Final = 10
"""Only the best this many (by their own score) lend context: it bounds the reads of a query
(at most 10 × 2 × ``context`` neighbours). On the LoCoMo development split 5, 10, 16, 32 and 64
give the same recall within the noise (``tools/sweep_retrieval.py``)."""

_ENTITY_FIELDS: Final = ("counterparty", "subject")


def entity_names(data: Any) -> tuple[str, ...]:
    """The entity fields of typed data: counterparty, subject, or an Identity's name."""
    if isinstance(data, Identity):
        return (data.name,) if data.name else ()
    return tuple(v for f in _ENTITY_FIELDS if isinstance(v := getattr(data, f, None), str) and v)


@functools.lru_cache(maxsize=8192)
def _tokens(text: str) -> tuple[str, ...]:
    """A name's tokens, as ``names_any`` compares them (kept: a store's names recur)."""
    return tuple(tokenize(fold(text)))


def names_any(query_tokens: Sequence[str], names: Iterable[str]) -> bool:
    """Whether the query's tokens hold some name's tokens as a contiguous run.

    ``query_tokens`` are ``tokenize(fold(query))``; a name is folded and tokenized the same
    way, so case, accents and punctuation do not matter ("Melanie's kids" names "melanie"),
    but a part of a word does not match ("Anabel" does not name "Ana").
    """
    q = query_tokens if type(query_tokens) is tuple else tuple(query_tokens)
    for name in names:
        t = _tokens(name)
        n = len(t)
        if n == 1:
            if t[0] in q:
                return True
        elif n and any(q[i : i + n] == t for i in range(len(q) - n + 1)):
            return True
    return False


_WORD: Final = re.compile(r"[^\W_]+")
"""A word of the original text for ``unnamed``: a run of letters and digits (as ``tokenize``
splits the folded text, for scripts written with spaces)."""

_POSSESSIVE: Final = re.compile(r"['\u2019][sS]\b")


def unnamed(text: str, names: Iterable[str]) -> str:
    """``text`` without the names it names: each run of words that folds to a name's tokens.

    Words are compared as ``names_any`` compares them (folded and tokenized, whole words, in a
    row, so "Melanie's kids" names "Melanie" and "Anabel" does not name "Ana"); a possessive
    "'s" after a name goes with it, and the spaces left behind collapse to one. A text that
    would be left without a word is returned unchanged: a query that is only a name still
    asks about it.
    """
    wanted = {t for t in (_tokens(n) for n in names) if t}
    if not wanted:
        return text
    words = [(m.start(), m.end(), fold(m.group())) for m in _WORD.finditer(text)]
    cuts: list[tuple[int, int]] = []
    i = 0
    while i < len(words):
        for t in sorted(wanted, key=len, reverse=True):  # the longest name first
            n = len(t)
            if tuple(w for _, _, w in words[i : i + n]) == t:
                end = words[i + n - 1][1]
                if m := _POSSESSIVE.match(text, end):
                    end = m.end()
                cuts.append((words[i][0], end))
                i += n
                break
        else:
            i += 1
    if not cuts:
        return text
    parts, at = [], 0
    for start, end in cuts:
        parts.append(text[at:start])
        at = end
    parts.append(text[at:])
    out = re.sub(r"\s+", " ", "".join(parts)).strip()
    out = re.sub(r"\s+([?.!,;:])", r"\1", out)
    return out if _WORD.search(out) else text


def context_scores(
    sources: Mapping[K, float], neighbours: Mapping[K, Sequence[K]]
) -> dict[K, float]:
    """The context of every memory next to a source: the best source score among its neighbours.

    Args:
        sources: the scores of the memories that lend context (each list's first ``depth``).
        neighbours: for each source, its neighbours (the relation is symmetric: a memory next
            to a source has that source as a neighbour).

    Returns:
        ``{memory: max(score of each source it is next to)}``, only for memories next to a
        source with a positive score.
    """
    out: dict[K, float] = {}
    for src, score in sources.items():
        if score <= 0.0:
            continue
        for n in neighbours.get(src, ()):
            if n != src and score > out.get(n, 0.0):
                out[n] = score
    return out


def combine(
    base: float, named: bool, context: float, context_weight: float, entity_weight: float
) -> float:
    """``base + entity_weight * named + context_weight * context``.

    ``base`` is a fused score, or a single list's score over its best (both in [0, 1]);
    ``named`` counts only for a memory with a base score. ``context`` is the best combined
    base of a neighbour (``context_scores`` over ``base + entity_weight * named``).
    """
    own = base + (entity_weight if named and base > 0.0 else 0.0)
    return own + context_weight * context
