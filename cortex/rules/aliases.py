"""Entity aliases: other names of an entity, said explicitly (``specs/claims.md`` §10).

``alias("Sarah Chen", "sarah")`` records that "sarah" names the entity "Sarah Chen". Names are
compared normalised (``chains.norm_entity``: "@Sarah", "sarah" and "SARAH" are one spelling
already). Each normalised name is an alias of at most one *canonical* name, and a canonical name
has no record of its own; the canonical name and its aliases are the entity's *group*.

A record lives under ``ent/a/`` + the normalised alias (UTF-8) and holds the canonical
normalised name, the alias as the caller gave it, and when and by whom it was made.

Aliases change lookups, never another record: a write competes with the memories of every
spelling of its subject (and object), ``about`` finds every spelling, and the claim index keeps
holding what each memory's own data implies. So adding or removing an alias rewrites nothing but
its own record, and takes effect for every write after it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime
from typing import Final

import msgspec
import numpy as np
import numpy.typing as npt

from cortex.errors import CodecError, IntegrityError, ValidationError
from cortex.model.codec import TIME_FIELD, StructCodec, TextField
from cortex.rules.chains import norm_entity
from cortex.storage.keys import ENTITY_ALIAS
from cortex.storage.kv import ReadTxn, unseal

__all__ = [
    "ALIAS_CODEC",
    "ALIAS_DOMAIN",
    "ALIAS_PREFIX",
    "MAX_NAME_BYTES",
    "WORDS_COSINE",
    "AliasChange",
    "AliasRecord",
    "AliasSuggestion",
    "Aliases",
    "alias_hash",
    "alias_key",
    "chained",
    "decode_record",
    "normal_name",
    "plan_alias",
    "read_aliases",
    "suggest",
]

ALIAS_PREFIX: Final = ENTITY_ALIAS
"""``ent/a/`` + a normalised alias (UTF-8): its sealed ``AliasRecord`` (format 8)."""
ALIAS_DOMAIN: Final = b"matrix.cortex.alias.v1"
"""The hash domain of an alias in journal entries (which carry no names)."""
MAX_NAME_BYTES: Final = 400
"""The longest normalised name an alias may have, in UTF-8 bytes (the key stays under LMDB's
511-byte limit)."""


class AliasRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One alias: the entity's canonical name (normalised) and this name as given."""

    canonical: str
    name: str
    at: datetime
    by: str


ALIAS_CODEC: Final = StructCodec(
    AliasRecord,
    [
        ("canonical", TextField(1024)),
        ("name", TextField(1024)),
        ("at", TIME_FIELD),
        ("by", TextField(256)),
    ],
    schema_version=1,
)


def alias_key(normal: str) -> bytes:
    """The key of the alias whose normalised name is ``normal``."""
    return ALIAS_PREFIX + normal.encode("utf-8")


def alias_hash(normal: str) -> bytes:
    """``sha256(ALIAS_DOMAIN || normalised name)``: how a journal entry names an alias."""
    return hashlib.sha256(ALIAS_DOMAIN + normal.encode("utf-8")).digest()


def normal_name(name: object, field: str) -> str:
    """``name`` normalised for an alias, checked.

    Raises:
        ValidationError: not text, nothing left once normalised, or too long.
    """
    if not isinstance(name, str):
        raise ValidationError(field, "type", f"must be text, got {type(name).__name__}")
    try:
        normal = norm_entity(name)
        size = len(normal.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValidationError(field, "text", "must be valid Unicode (no lone surrogates)") from None
    if not normal:
        raise ValidationError(field, "required", "must name an entity (letters or digits)")
    if size > MAX_NAME_BYTES:
        raise ValidationError(
            field, "length", f"is {size} bytes once normalised; the limit is {MAX_NAME_BYTES}"
        )
    return normal


class Aliases:
    """The aliases of one snapshot of a store: name → canonical name, and the groups."""

    __slots__ = ("_canonical", "_members", "records")

    def __init__(self, records: dict[str, AliasRecord]) -> None:
        self.records = records
        """Every alias record, by normalised alias."""
        self._canonical = {a: r.canonical for a, r in records.items()}
        members: dict[str, list[str]] = {}
        for a, r in records.items():
            members.setdefault(r.canonical, []).append(a)
        self._members = {c: tuple(sorted(m)) for c, m in members.items()}

    def __bool__(self) -> bool:
        return bool(self.records)

    def canonical(self, normal: str) -> str:
        """The canonical name of a normalised name (itself when it is no alias)."""
        return self._canonical.get(normal, normal)

    def group(self, normal: str) -> tuple[str, ...]:
        """Every normalised spelling of ``normal``'s entity: the canonical name first."""
        c = self._canonical.get(normal, normal)
        return (c, *self._members.get(c, ()))

    def groups(self) -> dict[str, tuple[str, ...]]:
        """Each canonical name that has aliases, with them (sorted)."""
        return dict(sorted(self._members.items()))


def read_aliases(txn: ReadTxn) -> Aliases:
    """The aliases a snapshot holds.

    Raises:
        IntegrityError: a record fails its checksum or does not decode, or its key and record
            disagree (the store is damaged).
    """
    out: dict[str, AliasRecord] = {}
    for key, value in txn.scan(ALIAS_PREFIX):
        out[_alias_of(key)] = decode_record(key, value)
    return Aliases(out)


def chained(records: Mapping[str, AliasRecord]) -> list[str]:
    """The aliases whose canonical name is an alias itself, sorted.

    Each breaks the rule that an entity has one canonical name (``verify``, import and salvage
    refuse them).
    """
    return sorted(a for a, r in records.items() if r.canonical in records)


def decode_record(key: bytes, value: bytes) -> AliasRecord:
    """The record under ``key``, checked (see ``read_aliases``)."""
    shown = "ent/a/" + key[len(ALIAS_PREFIX) :].decode("utf-8", "backslashreplace")
    try:
        rec: AliasRecord = ALIAS_CODEC.decode(unseal(key, value), "alias")
    except CodecError as exc:
        raise IntegrityError(f"{shown}: {exc}") from None
    normal = _alias_of(key)
    if norm_entity(rec.name) != normal or rec.canonical == normal or not rec.canonical:
        raise IntegrityError(f"{shown} holds a record of another alias: the store is damaged")
    return rec


def _alias_of(key: bytes) -> str:
    try:
        return key[len(ALIAS_PREFIX) :].decode("utf-8")
    except UnicodeDecodeError:
        raise IntegrityError(f"alias key {key!r} is not UTF-8: the store is damaged") from None


def plan_alias(
    aliases: Aliases, canonical_of: str, alias: str
) -> tuple[str, list[tuple[str, str]]]:
    """What ``alias(name, other)`` writes: the canonical name and the records to write.

    The records are ``(alias, canonical)`` pairs, none when ``alias`` is in the group already.
    ``canonical_of`` and ``alias`` are normalised. When ``alias`` is itself the canonical name
    of other aliases, those move to the new group with it.

    Raises:
        ValidationError: ``alias`` is an alias of another entity already (unalias it first),
            or both name one spelling.
    """
    c = aliases.canonical(canonical_of)
    if alias == canonical_of:
        raise ValidationError("alias", "same", "is the same name once normalised")
    if aliases.canonical(alias) == c:
        return c, []
    if alias in aliases.records:
        other = aliases.records[alias].canonical
        raise ValidationError(
            "alias",
            "taken",
            f"{alias!r} is an alias of {other!r} already; unalias it first to move it",
        )
    moves = [(a, c) for a in aliases.group(alias)[1:]]  # its own aliases follow it
    return c, [(alias, c), *moves]


class AliasChange(msgspec.Struct, frozen=True, kw_only=True):
    """What ``alias`` or ``unalias`` did.

    Attributes:
        outcome: ``added`` (a new alias), ``moved`` (an alias with aliases of its own: they
            moved with it), ``unchanged`` (in the group already), ``removed`` or ``absent``.
        canonical: the entity's canonical name (normalised).
        alias: the alias (normalised).
        moved: the aliases that followed it into the group (``moved``).
        group: the entity's spellings after the change, canonical name first.
    """

    outcome: str
    canonical: str
    alias: str
    moved: tuple[str, ...] = ()
    group: tuple[str, ...] = ()


class AliasSuggestion(msgspec.Struct, frozen=True, kw_only=True):
    """Two entity names that may name one entity (never merged without ``alias``).

    Attributes:
        a, b: the names as the store holds them (``a`` sorts first, normalised).
        cosine: the cosine of their embeddings.
        reason: ``words`` (every word of one is a word of the other, and their cosine is at
            least ``WORDS_COSINE``: "Sarah" and "Sarah Chen") or ``cosine`` (at least the
            caller's threshold).
    """

    a: str
    b: str
    cosine: float
    reason: str


WORDS_COSINE: Final = 0.5
"""The least cosine of two names, one's words within the other's, that ``suggest_aliases``
offers (MiniLM: "Sarah Chen"/"Sarah" 0.62, two unrelated first names 0.35–0.50)."""


def suggest(
    normals: list[str], vecs: npt.NDArray[np.float32], threshold: float, aliases: Aliases
) -> list[AliasSuggestion]:
    """The pairs of ``normals`` (sorted normalised names, with unit ``vecs``) to suggest."""
    sims = vecs @ vecs.T
    pairs: dict[tuple[int, int], str] = {}
    rows, cols = np.nonzero(np.triu(sims >= threshold, k=1))
    for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
        pairs[(i, j)] = "cosine"
    words = [frozenset(n.split(" ")) for n in normals]
    having: dict[str, list[int]] = {}
    for i, ws in enumerate(words):
        for w in ws:
            having.setdefault(w, []).append(i)
    for i, ws in enumerate(words):
        first = min(ws, key=lambda w: len(having[w]))  # the rarest word: the fewest candidates
        for j in having[first]:
            if j != i and ws < words[j] and sims[i, j] >= WORDS_COSINE:
                pairs[(min(i, j), max(i, j))] = "words"
    out = [
        AliasSuggestion(a=normals[i], b=normals[j], cosine=round(float(sims[i, j]), 4), reason=r)
        for (i, j), r in pairs.items()
        if aliases.canonical(normals[i]) != aliases.canonical(normals[j])
    ]
    out.sort(key=lambda x: (x.reason != "words", -x.cosine, x.a, x.b))
    return out
