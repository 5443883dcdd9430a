"""Salience: how much a memory matters now, from recency (by decay class), use and importance.

``salience = wR·R + wA·A + wC·C + wD·D (+ wV·V)`` with the weights renormalised to sum to 1
over the factors present (V only when a query vector exists). See ``specs/salience.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Final

import msgspec

from cortex.errors import ValidationError
from cortex.model.codec import TIME_FIELD, IntField, StructCodec, to_micros
from cortex.model.enums import DecayClass, MemoryType
from cortex.model.records import Head

__all__ = [
    "DEFAULT_DECAY",
    "DEFAULT_WEIGHTS",
    "HALF_LIFE_DAYS",
    "SALIENCE_STATE",
    "SalienceState",
    "Weights",
    "decay_table",
    "recency",
    "salience",
    "salience_at",
]

HALF_LIFE_DAYS: Final[Mapping[DecayClass, float]] = {DecayClass.SLOW: 180.0, DecayClass.FAST: 21.0}
"""Half-life of recency per decay class; ``PERMANENT`` never decays."""

DEFAULT_DECAY: Final[Mapping[MemoryType, DecayClass]] = {
    MemoryType.IDENTITY: DecayClass.PERMANENT,
    MemoryType.CONSTRAINT: DecayClass.PERMANENT,
    MemoryType.FACT: DecayClass.SLOW,
    MemoryType.PREFERENCE: DecayClass.SLOW,
    MemoryType.BELIEF: DecayClass.SLOW,
    MemoryType.GOAL: DecayClass.SLOW,
    MemoryType.CAPABILITY: DecayClass.SLOW,
    MemoryType.PATTERN: DecayClass.SLOW,
    MemoryType.EVENT: DecayClass.FAST,
}
"""The decay class of each type unless the store is configured otherwise."""

_US_PER_DAY: Final = 86_400 * 1_000_000
_LN_1001: Final = math.log(1001.0)


class Weights(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Weights of the salience factors (DESIGN §6 defaults)."""

    recency: float = 0.25
    access: float = 0.15
    citation: float = 0.30
    importance: float = 0.20
    vector: float = 0.10

    def __post_init__(self) -> None:
        for name in self.__struct_fields__:
            w = getattr(self, name)
            if not isinstance(w, int | float) or isinstance(w, bool) or not 0 <= w <= 1:
                raise ValidationError(f"weights.{name}", "range", f"must be in [0, 1], got {w!r}")
        if self.recency + self.access + self.citation + self.importance <= 0:
            raise ValidationError("weights", "range", "the non-vector weights sum to 0")


DEFAULT_WEIGHTS: Final = Weights()


class SalienceState(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Derived use counters of a memory (``sal/<id>``); not part of any hash.

    ``citations`` counts attestations with a success or partial outcome, ``failures`` those
    with a failure outcome (kept for audit, not scored); ``confirmations`` counts writes that
    dedupe turned into a confirmation of this memory (a use: they refresh recency).
    """

    accesses: int = 0
    citations: int = 0
    failures: int = 0
    last_used_at: datetime | None = None
    confirmations: int = 0


SALIENCE_STATE: Final = StructCodec(
    SalienceState,
    [
        ("accesses", IntField(0)),
        ("citations", IntField(0)),
        ("failures", IntField(0)),
        ("last_used_at", TIME_FIELD),
        ("confirmations", IntField(0)),
    ],
    schema_version=1,
)

_ZERO_STATE: Final = SalienceState()


def decay_table(
    overrides: Mapping[MemoryType, DecayClass] | None = None,
) -> dict[MemoryType, DecayClass]:
    """The decay class of every type: the defaults with ``overrides`` applied."""
    table = dict(DEFAULT_DECAY)
    if overrides:
        table.update(overrides)
    return table


def recency(decay: DecayClass, last_used: datetime, now: datetime) -> float:
    """``0.5 ** (age / half_life)`` for decaying classes, 1 for permanent; future times give 1."""
    return _recency_us(decay, to_micros(last_used), to_micros(now))


def _recency_us(decay: DecayClass, last_us: int, now_us: int) -> float:
    """``recency`` of times in microseconds since the epoch."""
    if decay is DecayClass.PERMANENT:
        return 1.0
    age_days = max(0, now_us - last_us) / _US_PER_DAY
    return float(0.5 ** (age_days / HALF_LIFE_DAYS[decay]))


def salience(
    head: Head,
    state: SalienceState | None,
    now: datetime,
    *,
    decay: DecayClass,
    weights: Weights = DEFAULT_WEIGHTS,
    vector: float | None = None,
) -> float:
    """The salience of a memory in [0, 1]; tombstoned memories score 0.

    Args:
        head: the memory's head (importance, last update, tombstone).
        state: its use counters (``None`` when it was never used).
        now: the time salience is computed for.
        decay: the memory's decay class.
        weights: factor weights; renormalised over the factors present.
        vector: cosine similarity to the query vector in [-1, 1], when there is one (negative
            similarity counts as 0).
    """
    return salience_at(head, state, to_micros(now), decay=decay, weights=weights, vector=vector)


def salience_at(
    head: Head,
    state: SalienceState | None,
    now_us: int,
    *,
    decay: DecayClass,
    weights: Weights = DEFAULT_WEIGHTS,
    vector: float | None = None,
) -> float:
    """``salience`` at ``now_us`` (microseconds since the epoch): the definition.

    A query converts its ``now`` once (``cortex.query.planner.Executor``).
    """
    if head.tombstone is not None:
        return 0.0
    st = state or _ZERO_STATE
    last_us = to_micros(head.last_updated_at)
    if st.last_used_at is not None:
        last_us = max(last_us, to_micros(st.last_used_at))
    # ``_recency_us``, inline (once per candidate of every find)
    if decay is DecayClass.PERMANENT:
        r = 1.0
    else:
        r = float(0.5 ** ((max(0, now_us - last_us) / _US_PER_DAY) / HALF_LIFE_DAYS[decay]))
    a = math.log1p(min(st.accesses, 1000)) / _LN_1001
    c = math.log1p(min(st.citations, 1000)) / _LN_1001
    d = head.importance / 10.0
    total = weights.recency * r + weights.access * a + weights.citation * c + weights.importance * d
    norm = weights.recency + weights.access + weights.citation + weights.importance
    if vector is not None:
        total += weights.vector * max(0.0, min(1.0, vector))
        norm += weights.vector
    return total / norm
