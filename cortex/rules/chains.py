"""Claim keys and temporal chains: new knowledge meeting old (``specs/claims.md`` §5–§8).

Two memories *compete* when they answer the same question: Facts with one subject and one
single-valued predicate ("where does Sam live?"), or one subject, predicate and object for any
other predicate ("is Sam allergic to peanuts?"), and Preferences on one topic. The question is
the memory's *claim key*; the store indexes every memory under the hashes of its keys
(``idx/claim/``, format 8), so a write finds its competitors in the same transaction.

When a new memory meets a current competitor, one of them ends the other's time as the current
truth, and a ``supersedes`` edge from the winner to the loser records it (``resolve``):

1. Their times differ (``valid_from``, else a Fact's ``observed_at``, else when written): the
   later one wins — the world changed, the earlier one is history — unless its confidence is
   lower, in which case the earlier stays current and the later is archived.
2. Their times are equal: the higher confidence wins; at equal confidence both stay current,
   joined by a ``contradicts`` edge, an open conflict for the caller (``Cortex.conflicts``).

A memory is *superseded* while a live ``supersedes`` edge points at it from a memory that is not
tombstoned; ``find``, ``about`` and ``context`` leave it out unless asked, ``as_of`` reads the
edges as they stood then, and ``Cortex.chain`` lists the whole chain with the time each link
was the truth.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from collections.abc import Callable
from datetime import datetime
from typing import Final

from cortex.model.records import Data, Fact, Preference

__all__ = [
    "SINGLE_VALUED",
    "claim_hash",
    "claim_keys",
    "effective_confidence",
    "effective_time",
    "lookup_key",
    "lookup_keys",
    "norm_entity",
    "norm_predicate",
    "single_valued",
    "winner",
]

CLAIM_DOMAIN: Final = b"matrix.cortex.claim.v1"
"""The hash domain of claim keys (``specs/claims.md`` §5)."""

SINGLE_VALUED: Final = frozenset(
    {
        "name",
        "full_name",
        "nickname",
        "age",
        "birthday",
        "date_of_birth",
        "home_city",
        "home_town",
        "hometown",
        "city",
        "lives_in",
        "location",
        "current_location",
        "address",
        "home_address",
        "country",
        "timezone",
        "time_zone",
        "email",
        "email_address",
        "phone",
        "phone_number",
        "employer",
        "works_at",
        "works_for",
        "company",
        "job",
        "job_title",
        "title",
        "role",
        "position",
        "occupation",
        "team",
        "department",
        "manager",
        "reports_to",
        "spouse",
        "partner",
        "marital_status",
        "relationship_status",
        "status",
        "salary",
        "budget",
        "price",
        "deadline",
        "due_date",
        "pronouns",
        "language",
        "preferred_language",
        "height",
        "weight",
        "diet",
    }
)
"""Predicates that hold one value at a time (after ``norm_predicate``); so do ``favorite_*``,
``favourite_*``, ``current_*`` and ``preferred_*``. Any other predicate may hold many values,
and only a Fact with the same object competes."""

_SINGLE_PREFIXES: Final = ("favorite_", "favourite_", "current_", "preferred_")
_NEGATED: Final = re.compile(r"^(?:is_not|are_not|does_not|do_not|not|no|never|isnt|doesnt)_")
_NON_WORD: Final = re.compile(r"[\W_]+")
_EDGE_PUNCT: Final = re.compile(r"^[\W_]+|[\W_]+$")
_SPACES: Final = re.compile(r"\s+")


@functools.lru_cache(maxsize=4096)
def norm_entity(text: str) -> str:
    """A subject, object or topic as its competitors spell it.

    NFKC, case-folded, one space between words, leading ``@`` and punctuation at either end
    dropped ("@Sam " → "sam").
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _EDGE_PUNCT.sub("", _SPACES.sub(" ", folded).strip())


@functools.lru_cache(maxsize=1024)
def norm_predicate(text: str) -> str:
    """A predicate as a key.

    NFKC, case-folded, every run of other than letters and digits one ``_``, a leading negation
    dropped ("Not allergic-to" → "allergic_to": a negated claim competes with the claim it
    negates).
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    p = _NON_WORD.sub("_", folded).strip("_")
    while True:
        stripped = _NEGATED.sub("", p)
        if stripped == p:
            return p
        p = stripped


def single_valued(predicate: str) -> bool:
    """Whether a normalised predicate holds one value at a time."""
    return predicate in SINGLE_VALUED or predicate.startswith(_SINGLE_PREFIXES)


def _key(*parts: str) -> bytes:
    return "\x1f".join(parts).encode("utf-8")


def claim_keys(data: Data | None) -> tuple[bytes, ...]:
    """Every claim key a memory's data is indexed under (none for other types or purged data).

    A Fact: ``fact␟subject␟predicate`` and, with an object, ``fact␟subject␟predicate␟object``;
    a Preference: ``preference␟topic``, or ``preference␟topic␟subject`` when it says whose it is
    (``␟`` is U+001F, the parts normalised).
    """
    if isinstance(data, Fact):
        s, p = norm_entity(data.subject), norm_predicate(data.predicate)
        if not s or not p:
            return ()
        if data.object is None or not norm_entity(data.object):
            return (_key("fact", s, p),)
        return (_key("fact", s, p), _key("fact", s, p, norm_entity(data.object)))
    if isinstance(data, Preference):
        t = norm_entity(data.topic)
        if not t:
            return ()
        if data.subject is not None and norm_entity(data.subject):
            return (_key("preference", t, norm_entity(data.subject)),)  # someone else's
        return (_key("preference", t),)
    return ()


def lookup_keys(
    data: Data, force: bool = False, group: Callable[[str], tuple[str, ...]] | None = None
) -> tuple[bytes, ...]:
    """``lookup_key`` under every spelling of its entities (``specs/claims.md`` §10).

    ``group`` gives the normalised spellings of an entity (its aliases, canonical name first);
    a Fact's subject and object and a Preference's subject are spelled every way it gives, a
    Preference's topic as it is. Without ``group``: ``(lookup_key(data, force),)`` or ``()``.
    """
    key = lookup_key(data, force)
    if key is None:
        return ()
    if group is None:
        return (key,)
    if isinstance(data, Fact):
        s, p = norm_entity(data.subject), norm_predicate(data.predicate)
        if force or single_valued(p):
            return tuple(_key("fact", s2, p) for s2 in group(s))
        o = norm_entity(data.object or "")
        return tuple(_key("fact", s2, p, o2) for s2 in group(s) for o2 in group(o))
    if isinstance(data, Preference) and data.subject is not None:
        t, who = norm_entity(data.topic), norm_entity(data.subject)
        if who:
            return tuple(_key("preference", t, w) for w in group(who))
    return (key,)


def lookup_key(
    data: Data, force: bool = False, keys: tuple[bytes, ...] | None = None
) -> bytes | None:
    """The key whose holders a new memory competes with, or ``None``.

    A Fact with a single-valued predicate (or ``force``: the caller's ``supersede=True``)
    competes on subject and predicate, any other Fact with an object on subject, predicate and
    object; a Preference on its topic. ``keys`` is ``claim_keys(data)`` when the caller has
    it already.
    """
    if keys is None:
        keys = claim_keys(data)
    if not keys:
        return None
    if isinstance(data, Fact):
        if force or single_valued(norm_predicate(data.predicate)):
            return keys[0]
        return keys[1] if len(keys) > 1 else None
    return keys[0]


@functools.lru_cache(maxsize=4096)
def claim_hash(key: bytes) -> bytes:
    """The 16 bytes under which ``idx/claim/`` holds a key: sha256(domain ‖ key)[:16]."""
    return hashlib.sha256(CLAIM_DOMAIN + key).digest()[:16]


def effective_time(data: Data | None, valid_from: datetime | None, created: datetime) -> datetime:
    """When a memory's claim starts being true.

    ``valid_from``, else a Fact's ``observed_at``, else when it was written.
    """
    if valid_from is not None:
        return valid_from
    if isinstance(data, Fact) and data.observed_at is not None:
        return data.observed_at
    return created


def effective_confidence(data: Data | None, version_confidence: float) -> float:
    """A Fact's own ``confidence`` when it has one, else the version's."""
    if isinstance(data, Fact) and data.confidence is not None:
        return data.confidence
    return version_confidence


def winner(new_when: int, new_conf: float, old_when: int, old_conf: float) -> str:
    """Which of two competing memories is the current truth: ``new``, ``old`` or ``tie``.

    Times (microseconds) first: the later one wins unless its confidence is lower; at equal
    times the higher confidence wins, and equal confidence is a tie (an open conflict).
    """
    if new_when != old_when:
        later_is_new = new_when > old_when
        later, earlier = (new_conf, old_conf) if later_is_new else (old_conf, new_conf)
        if later >= earlier:
            return "new" if later_is_new else "old"
        return "old" if later_is_new else "new"
    if new_conf != old_conf:
        return "new" if new_conf > old_conf else "old"
    return "tie"
