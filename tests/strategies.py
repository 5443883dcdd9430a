"""Hypothesis strategies for every record: the nine typed data structs, Head, Version and parts.

Every strategy here draws *canonical* values: text is NFC-normalised and within its byte limit,
times are aware, floats are in range, enums are members. So for anything drawn from them
``decode(encode(x)) == x`` holds, and ``validate_memory`` accepts what ``memories()`` draws.

Import as ``from tests.strategies import any_data, data_of_type, frames, tags``.
"""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, Final

import msgspec
from hypothesis import strategies as st

from cortex.model.codec import LIMITS, encode_data
from cortex.model.enums import (
    CodedEnum,
    ConstraintSource,
    GoalStatus,
    MemoryType,
    ObjKind,
    Outcome,
    Polarity,
    SourceKind,
    Stance,
    Strength,
    Verb,
    Visibility,
)
from cortex.model.forms import MEDIUM_TOKENS, SHORT_TOKENS
from cortex.model.hashing import content_hash
from cortex.model.ids import MAX_VERSION, MemoryId, Uri
from cortex.model.records import (
    Belief,
    Capability,
    Constraint,
    Cost,
    Data,
    Event,
    Fact,
    Forms,
    FrameRef,
    Goal,
    Head,
    Identity,
    Pattern,
    Preference,
    Provenance,
    SourceRef,
    Tombstone,
    VectorRef,
    Version,
)

__all__ = [
    "FULL",
    "ITEMS",
    "MINIMAL",
    "any_data",
    "aware_datetimes",
    "data_of_type",
    "decimals",
    "forms",
    "frame_refs",
    "frames",
    "heads",
    "memories",
    "memory_ids",
    "memory_types",
    "provenances",
    "respell",
    "respelled",
    "short_texts",
    "tags",
    "texts",
    "tombstones",
    "units",
    "uri_lists",
    "uris",
    "vector_refs",
    "versions",
]

ITEMS = 4
"""Default maximum size of drawn lists and maps (the limits themselves are pinned by examples)."""

_CHARS = st.characters(codec="utf-8")  # 1- to 4-byte characters, never a lone surrogate


def _nfc(s: str) -> str:
    return unicodedata.normalize("NFC", s)


def texts(max_bytes: int = LIMITS.TEXT_BYTES, *, max_size: int = 24) -> st.SearchStrategy[str]:
    """Non-empty NFC text of at most ``max_bytes`` UTF-8 bytes (``max_size`` characters drawn)."""
    return (
        st.text(_CHARS, min_size=1, max_size=max_size)
        .map(_nfc)
        .filter(lambda s: 0 < len(s.encode("utf-8")) <= max_bytes)
    )


def short_texts(*, max_size: int = 16) -> st.SearchStrategy[str]:
    """Names, keys and labels: NFC text of at most ``LIMITS.SHORT_TEXT_BYTES`` bytes."""
    return texts(LIMITS.SHORT_TEXT_BYTES, max_size=max_size)


def _tuples(elements: st.SearchStrategy[Any], max_size: int = ITEMS) -> st.SearchStrategy[Any]:
    return st.lists(elements, max_size=max_size).map(tuple)


def _text_maps(max_size: int = ITEMS) -> st.SearchStrategy[dict[str, str]]:
    return st.dictionaries(short_texts(), texts(), max_size=max_size)


_OFFSETS = st.sampled_from(
    [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=8))]
)


def aware_datetimes() -> st.SearchStrategy[datetime]:
    """Aware datetimes (UTC or a fixed offset) whose UTC instant lies in years 1..9999."""
    return st.datetimes(
        min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=_OFFSETS
    )


def units() -> st.SearchStrategy[float]:
    """Floats in [0, 1] (confidence, strength), with the interesting widths well represented."""
    return st.one_of(
        st.sampled_from([0.0, 1.0, 0.5, 0.25, 0.1, 2.0**-24, 0.10000000149011612, 1 / 3]),
        st.floats(min_value=0.0, max_value=1.0, allow_nan=False),
    )


def memory_types() -> st.SearchStrategy[MemoryType]:
    """Any of the nine memory types."""
    return st.sampled_from(list(MemoryType))


def memory_ids() -> st.SearchStrategy[MemoryId]:
    """Any 16-byte id."""
    return st.binary(min_size=16, max_size=16).map(MemoryId)


def uris() -> st.SearchStrategy[str]:
    """Text of a valid version URI."""
    return st.builds(
        lambda t, i, v: str(Uri(t, i, v)),
        memory_types(),
        memory_ids(),
        st.integers(1, MAX_VERSION),
    )


def uri_lists(max_size: int = ITEMS) -> st.SearchStrategy[tuple[str, ...]]:
    """A tuple of distinct URIs (evidence, subgoals, derived_from)."""
    return st.lists(uris(), unique=True, max_size=max_size).map(tuple)


def decimals() -> st.SearchStrategy[str]:
    """Decimal amounts in the one accepted spelling: no exponent, sign or trailing zeros."""
    return st.from_regex(r"-?(0|[1-9][0-9]{0,20})(\.[0-9]{0,10}[1-9])?", fullmatch=True).filter(
        lambda s: s != "-0"
    )


def _opt(s: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | s


_DATA: dict[MemoryType, st.SearchStrategy[Any]] = {
    MemoryType.IDENTITY: st.builds(
        Identity,
        name=texts(),
        did=_opt(short_texts()),
        roles=_tuples(short_texts()),
        profile=_text_maps(),
        public_keys=_tuples(st.binary(min_size=1, max_size=48)),
    ),
    MemoryType.FACT: st.builds(
        Fact,
        statement=texts(),
        subject=texts(),
        predicate=texts(),
        object=_opt(texts()),
        source=_opt(st.sampled_from(list(SourceKind))),
        observed_at=_opt(aware_datetimes()),
        confidence=_opt(units()),
    ),
    MemoryType.PREFERENCE: st.builds(
        Preference,
        topic=texts(),
        polarity=st.sampled_from(list(Polarity)),
        strength=_opt(units()),
        rationale=_opt(texts()),
    ),
    MemoryType.BELIEF: st.builds(
        Belief,
        statement=texts(),
        subject=_opt(texts()),
        stance=st.sampled_from(list(Stance)),
        confidence=_opt(units()),
        evidence_for=uri_lists(),
        evidence_against=uri_lists(),
    ),
    MemoryType.EVENT: st.builds(
        Event,
        kind=short_texts(),
        outcome=_opt(st.sampled_from(list(Outcome))),
        counterparty=_opt(short_texts()),
        cost=_opt(st.builds(Cost, asset=short_texts(), amount=decimals())),
        duration_us=_opt(st.integers(0, 2**63 - 1)),
        occurred_at=_opt(aware_datetimes()),
        summary=_opt(texts()),
        intent_ref=_opt(short_texts()),
        artifacts=_tuples(texts()),
    ),
    MemoryType.GOAL: st.builds(
        Goal,
        statement=texts(),
        status=st.sampled_from(list(GoalStatus)),
        horizon=_opt(aware_datetimes()),
        success_criteria=_tuples(texts()),
        subgoals=uri_lists(),
    ),
    MemoryType.CONSTRAINT: st.builds(
        Constraint,
        statement=texts(),
        polarity=st.sampled_from(list(Polarity)),
        strength=st.sampled_from(list(Strength)),
        source=st.sampled_from(list(ConstraintSource)),
        trigger=_opt(texts()),
    ),
    MemoryType.CAPABILITY: st.builds(
        Capability,
        subject=texts(),
        capability=texts(),
        verified=st.booleans(),
        parameters=_text_maps(),
        last_observed=_opt(aware_datetimes()),
    ),
    MemoryType.PATTERN: st.builds(
        Pattern,
        statement=texts(),
        strength=_opt(units()),
        coverage=_opt(st.integers(0, 2**63 - 1)),
        derived_from=uri_lists(),
    ),
}


def data_of_type(t: MemoryType) -> st.SearchStrategy[Data]:
    """Canonical typed data of type ``t``: optional fields set or unset, collections 0..4 long."""
    return _DATA[MemoryType(t)]


def any_data() -> st.SearchStrategy[Data]:
    """Canonical typed data of any of the nine types."""
    return st.one_of([_DATA[t] for t in MemoryType])


def frame_refs() -> st.SearchStrategy[FrameRef]:
    """One frame: a verb, an object kind and an object reference of at most 256 bytes."""
    return st.builds(
        FrameRef,
        verb=st.sampled_from(list(Verb)),
        obj_kind=st.sampled_from(list(ObjKind)),
        obj_ref=texts(LIMITS.OBJ_REF_BYTES, max_size=12),
    )


def frames(max_size: int = LIMITS.FRAMES) -> st.SearchStrategy[tuple[FrameRef, ...]]:
    """Distinct frames, at most 16 (the head's limit)."""
    return st.lists(frame_refs(), unique=True, max_size=max_size).map(tuple)


def tags(max_size: int = LIMITS.TAGS) -> st.SearchStrategy[tuple[str, ...]]:
    """Distinct NFC tags of at most 64 bytes, at most 16 (the head's limit)."""
    return st.lists(texts(LIMITS.TAG_BYTES, max_size=10), unique=True, max_size=max_size).map(tuple)


def forms() -> st.SearchStrategy[Forms]:
    """Forms within their budgets (short <= 50 tokens, medium <= 200 tokens).

    The short form is often the medium's beginning, whole or cut with "…" (as rendered forms
    are; stored compact from format 15), or another text.
    """
    return st.one_of(
        st.builds(
            Forms,
            short=texts(SHORT_TOKENS * 4, max_size=20),
            medium=texts(MEDIUM_TOKENS * 4, max_size=40),
        ),
        _prefix_forms(),
    )


@st.composite
def _prefix_forms(draw: st.DrawFn) -> Forms:
    medium = draw(texts(MEDIUM_TOKENS * 4, max_size=40))
    cut = draw(st.integers(0, min(len(medium), 19)))  # as short as the other shorts
    short = unicodedata.normalize("NFC", medium[:cut])
    if not medium.startswith(short):
        short = ""
    if draw(st.booleans()) or not short:
        short += "\u2026"
    return Forms(short=short, medium=medium)


def tombstones() -> st.SearchStrategy[Tombstone]:
    """A tombstone, purged or not."""
    return st.builds(
        Tombstone,
        reason=texts(),
        at=aware_datetimes(),
        by=short_texts(),
        purged_at=_opt(aware_datetimes()),
    )


def vector_refs() -> st.SearchStrategy[VectorRef]:
    """An embedding reference."""
    return st.builds(
        VectorRef,
        model_id=short_texts(),
        dim=st.integers(1, 65_536),
        version=st.integers(1, 2**63 - 1),
    )


def _spans() -> st.SearchStrategy[tuple[int, int]]:
    return st.tuples(st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1)).map(
        lambda p: (min(p), max(p))
    )


def provenances() -> st.SearchStrategy[Provenance]:
    """A version's provenance."""
    return st.builds(
        Provenance,
        source=st.sampled_from(list(SourceKind)),
        derived_from=uri_lists(),
        sources=_tuples(
            st.builds(
                SourceRef,
                session_id=short_texts(),
                message_ids=_tuples(short_texts()),
                span=_opt(_spans()),
            ),
            max_size=2,
        ),
    )


def heads(
    id: MemoryId | None = None,
    type: MemoryType | None = None,
    current_version: int | None = None,
) -> st.SearchStrategy[Head]:
    """Any valid head; pass ``id``, ``type`` or ``current_version`` to pin them."""
    return st.builds(
        Head,
        id=st.just(id) if id is not None else memory_ids(),
        type=st.just(type) if type is not None else memory_types(),
        current_version=(
            st.just(current_version) if current_version is not None else st.integers(1, 2**63 - 1)
        ),
        actor_scope=short_texts(),
        visibility=st.sampled_from(list(Visibility)),
        importance=st.integers(0, LIMITS.IMPORTANCE_MAX),
        tags=tags(max_size=ITEMS),
        frames=frames(max_size=ITEMS),
        tombstone=_opt(tombstones()),
        created_at=aware_datetimes(),
        last_updated_at=aware_datetimes(),
        embedding_ref=_opt(vector_refs()),
        forms=_opt(forms()),
        has_counters=st.booleans(),
    )


@st.composite
def versions(
    draw: st.DrawFn,
    data: Data | None = None,
    *,
    id: MemoryId | None = None,
    version: int | None = None,
    purged: bool | None = None,
) -> Version:
    """A valid version holding ``data`` (drawn when not given), or a purged one.

    ``data`` and ``hash`` agree (``hash = content_hash(type, encode_data(data))``), and the
    optional times are ordered as ``validate_memory`` requires. A purged version has ``data``
    and ``forms`` set to ``None`` and keeps the hash.
    """
    if data is None:
        data = draw(any_data())
    raw = encode_data(data)
    if purged is None:
        purged = draw(st.booleans())
    created_at = draw(aware_datetimes())
    # at most ~2.8 hours later: never past the year 9999 even from the latest drawn time
    expires_at = draw(_opt(st.integers(0, 10**10).map(lambda us: created_at + timedelta(0, 0, us))))
    valid = draw(_opt(st.tuples(aware_datetimes(), aware_datetimes()).map(sorted)))
    return Version(
        id=id if id is not None else draw(memory_ids()),
        version=version if version is not None else draw(st.integers(1, 2**63 - 1)),
        type=data.TYPE,
        data=None if purged else raw,
        hash=content_hash(data.TYPE, raw),
        created_at=created_at,
        created_by=draw(short_texts()),
        expires_at=expires_at,
        confidence=draw(units()),
        provenance=draw(provenances()),
        forms=None if purged else draw(_opt(forms())),
        forms_override=draw(st.booleans()),
        valid_from=valid[0] if valid else None,
        valid_until=valid[1] if valid else None,
    )


def respell(value: Any, draw: st.DrawFn) -> Any:
    """``value`` spelled another way the API accepts, equal in meaning and in encoding.

    Enums become their code or label, text its NFD form, integral floats ints (and ints
    floats), ``0.0`` ``-0.0``, times move to another offset, tuples become lists, bytes
    ``bytearray`` and maps reverse their insertion order.
    """
    if isinstance(value, CodedEnum):
        return draw(st.sampled_from([value, value.value, value.label]))
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return draw(st.sampled_from([value, unicodedata.normalize("NFD", value)]))
    if isinstance(value, float):
        if value == 0.0:
            return draw(st.sampled_from([value, -0.0, 0]))
        return draw(st.sampled_from([value, int(value)] if value.is_integer() else [value]))
    if isinstance(value, int):
        return draw(st.sampled_from([value, float(value)] if value < 2**53 else [value]))
    if isinstance(value, datetime):
        return value.astimezone(draw(_OFFSETS))
    if isinstance(value, bytes):
        return draw(st.sampled_from([value, bytearray(value)]))
    if isinstance(value, tuple):
        items = [respell(x, draw) for x in value]
        return draw(st.sampled_from([tuple(items), items]))
    if isinstance(value, dict):
        return {respell(k, draw): respell(x, draw) for k, x in reversed(list(value.items()))}
    if isinstance(value, msgspec.Struct):
        fields = {n: respell(getattr(value, n), draw) for n in value.__struct_fields__}
        return type(value)(**fields)
    raise TypeError(f"cannot respell {type(value).__name__}")


@st.composite
def respelled(draw: st.DrawFn, data: Data) -> Data:
    """``data`` as a caller might spell it (see ``respell``); it encodes to the same bytes."""
    out: Data = respell(data, draw)
    return out


@st.composite
def memories(draw: st.DrawFn, t: MemoryType | None = None) -> tuple[Head, Version, Data]:
    """A ``(head, version, data)`` triple that ``validate_memory`` accepts."""
    data = draw(data_of_type(t) if t is not None else any_data())
    head = draw(heads(type=data.TYPE))
    n = draw(st.integers(1, head.current_version))
    version = draw(versions(data, id=head.id, version=n, purged=False))
    return head, version, data


# ---------------------------------------------------------------------------------------------
# Fixed records: one with every field set, one with only the required fields, for every type

_AT: Final = datetime(2026, 11, 22, 9, 30, 15, 250_000, tzinfo=UTC)
_URI_A: Final = "cortex://Fact/01HWT0D7G00000000000000001#1"
_URI_B: Final = "cortex://Event/01HWT0D7G00000000000000002#3"

FULL: Final[dict[MemoryType, Data]] = {
    MemoryType.IDENTITY: Identity(
        name="Ada Lovelace",
        did="did:key:z6MkAda",
        roles=("researcher", "operator"),
        profile={"lang": "en", "city": "Zürich"},
        public_keys=(b"\x01" * 32, b"\xfe\x00"),
    ),
    MemoryType.FACT: Fact(
        statement="Ada's home city is Zürich",
        subject="ada",
        predicate="home_city",
        object="Zürich",
        source=SourceKind.USER_INPUT,
        observed_at=_AT,
        confidence=0.95,
    ),
    MemoryType.PREFERENCE: Preference(
        topic="dark mode", polarity=Polarity.PREFER, strength=0.8, rationale="eye strain"
    ),
    MemoryType.BELIEF: Belief(
        statement="the build is flaky on Fridays",
        subject="ci",
        stance=Stance.SUSPECT,
        confidence=0.4,
        evidence_for=(_URI_A, _URI_B),
        evidence_against=(_URI_B,),
    ),
    MemoryType.EVENT: Event(
        kind="purchase",
        outcome=Outcome.SUCCESS,
        counterparty="gpu-vendor",
        cost=Cost(asset="USD", amount="1299.99"),
        duration_us=1_500_000,
        occurred_at=_AT,
        summary="bought a GPU for the lab",
        intent_ref="intent-42",
        artifacts=("invoice.pdf", "receipt.png"),
    ),
    MemoryType.GOAL: Goal(
        statement="ship cortex 1.0",
        status=GoalStatus.ACTIVE,
        horizon=_AT,
        success_criteria=("all tests pass", "docs published"),
        subgoals=(_URI_A,),
    ),
    MemoryType.CONSTRAINT: Constraint(
        statement="spend more than 2000 USD without asking",
        polarity=Polarity.DONT,
        strength=Strength.HARD,
        source=ConstraintSource.USER_DECLARED,
        trigger="a purchase is proposed",
    ),
    MemoryType.CAPABILITY: Capability(
        subject="agent",
        capability="run SQL queries",
        verified=True,
        parameters={"dialect": "sqlite", "max_rows": "1000"},
        last_observed=_AT,
    ),
    MemoryType.PATTERN: Pattern(
        statement="retry flaky network calls with backoff",
        strength=0.7,
        coverage=12,
        derived_from=(_URI_A, _URI_B),
    ),
}
"""A record of every type with every field set."""

MINIMAL: Final[dict[MemoryType, Data]] = {
    MemoryType.IDENTITY: Identity(name="Ada"),
    MemoryType.FACT: Fact(statement="grass is green", subject="lawn", predicate="color"),
    MemoryType.PREFERENCE: Preference(topic="tea", polarity=Polarity.AVOID),
    MemoryType.BELIEF: Belief(statement="it will rain", stance=Stance.DOUBT),
    MemoryType.EVENT: Event(kind="login"),
    MemoryType.GOAL: Goal(statement="learn Rust", status=GoalStatus.PAUSED),
    MemoryType.CONSTRAINT: Constraint(
        statement="use tabs",
        polarity=Polarity.AVOID,
        strength=Strength.SOFT,
        source=ConstraintSource.LEARNED,
    ),
    MemoryType.CAPABILITY: Capability(subject="agent", capability="send email"),
    MemoryType.PATTERN: Pattern(statement="check the logs first"),
}
"""A record of every type with only its required fields set."""
