"""Validation: every field rule (enforced by the codec as it encodes) and validate_memory's."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings

from cortex.errors import ValidationError
from cortex.model.codec import (
    LIMITS,
    encode_data,
    encode_head,
    encode_tags,
    encode_version,
    to_micros,
)
from cortex.model.enums import (
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
)
from cortex.model.forms import render
from cortex.model.hashing import content_hash
from cortex.model.ids import MemoryId
from cortex.model.records import (
    DATA_TYPES,
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
    Version,
)
from cortex.model.validate import validate_memory
from tests.strategies import FULL, MINIMAL, memories

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
ID = MemoryId(bytes(range(16)))
OTHER_ID = MemoryId(bytes(range(1, 17)))
URI = "cortex://Fact/01HWT0D7G00000000000000001#1"
URI_2 = "cortex://Goal/01HWT0D7G00000000000000001#2"
FACT = {"statement": "s", "subject": "x", "predicate": "p"}


def rejects(call: Callable[[], object], field: str, rule: str, *words: str) -> ValidationError:
    """Assert ``call`` raises a ValidationError naming ``field`` and ``rule``, saying ``words``."""
    with pytest.raises(ValidationError) as info:
        call()
    err = info.value
    assert (err.field, err.rule) == (field, rule), err
    for w in words:
        assert w in err.message, err.message
    assert str(err) == f"{field}: {err.message}"
    assert isinstance(err, ValueError)  # callers may catch it as a ValueError too
    return err


def data_rejects(data: Any, field: str, rule: str, *words: str) -> ValidationError:
    return rejects(lambda: encode_data(data), field, rule, *words)


# ---------------------------------------------------------------------------------------------
# The data itself


@pytest.mark.parametrize(
    "value",
    ["a fact", {"statement": "s"}, None, Cost(asset="X", amount="1"), Forms(short="s", medium="m")],
    ids=lambda v: type(v).__name__,
)
def test_data_must_be_one_of_the_nine_types(value: Any) -> None:
    data_rejects(
        value, "data", "type", "must be one of the nine memory types", type(value).__name__
    )


def test_a_subclass_of_a_data_type_is_not_a_data_type() -> None:
    class MyFact(Fact, frozen=True, kw_only=True):
        pass

    data_rejects(MyFact(**FACT), "data", "type", "MyFact")


REQUIRED = [
    pytest.param(t, f.name, id=f"{t.type_name}.{f.name}")
    for t, cls in DATA_TYPES.items()
    for f in msgspec.structs.fields(cls)
    if f.required
]


def test_required_fields_are_the_designed_ones() -> None:
    required = {p.values[0].type_name + "." + p.values[1] for p in REQUIRED}
    assert required == {
        "Identity.name",
        "Fact.statement",
        "Fact.subject",
        "Fact.predicate",
        "Preference.topic",
        "Preference.polarity",
        "Belief.statement",
        "Belief.stance",
        "Event.kind",
        "Goal.statement",
        "Goal.status",
        "Constraint.statement",
        "Constraint.polarity",
        "Constraint.strength",
        "Constraint.source",
        "Capability.subject",
        "Capability.capability",
        "Pattern.statement",
    }


@pytest.mark.parametrize(("t", "name"), REQUIRED)
def test_required_field_missing(t: MemoryType, name: str) -> None:
    for base in (MINIMAL[t], FULL[t]):
        data_rejects(msgspec.structs.replace(base, **{name: None}), f"data.{name}", "required")


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (Fact(statement="", subject="x", predicate="p"), "data.statement"),
        (Fact(**FACT, object=""), "data.object"),  # an optional field is left unset, not empty
        (Identity(name="n", did=""), "data.did"),
        (Identity(name="n", roles=("a", "")), "data.roles[1]"),
        (Identity(name="n", profile={"k": ""}), "data.profile['k']"),
        (Identity(name="n", profile={"": "v"}), "data.profile[''] (key)"),
        (Event(kind="k", cost=Cost(asset="", amount="1")), "data.cost.asset"),
        (
            Goal(statement="g", status=GoalStatus.ACTIVE, success_criteria=("",)),
            "data.success_criteria[0]",
        ),
        (Identity(name="n", public_keys=(b"",)), "data.public_keys[0]"),
    ],
)
def test_empty_text_is_rejected(data: Data, field: str) -> None:
    data_rejects(data, field, "empty", "must not be empty")


def test_text_must_be_text_and_valid_unicode() -> None:
    data_rejects(Fact(statement=5, subject="x", predicate="p"), "data.statement", "type", "int")
    data_rejects(Identity(name="a\ud800b"), "data.name", "utf8", "lone surrogate")
    data_rejects(Identity(name="n", public_keys=("ab",)), "data.public_keys[0]", "type", "bytes")


@pytest.mark.parametrize(
    ("make", "field", "limit"),
    [
        (lambda s: Fact(statement=s, subject="x", predicate="p"), "data.statement", 16_384),
        (lambda s: Identity(name=s), "data.name", 16_384),
        (lambda s: Identity(name="n", did=s), "data.did", 256),
        (lambda s: Identity(name="n", roles=(s,)), "data.roles[0]", 256),
        (lambda s: Event(kind=s), "data.kind", 256),
        (lambda s: Event(kind="k", intent_ref=s), "data.intent_ref", 256),
        (lambda s: Event(kind="k", cost=Cost(asset=s, amount="1")), "data.cost.asset", 256),
        (
            lambda s: Capability(subject="a", capability="c", parameters={"k": s}),
            "data.parameters['k']",
            16_384,
        ),
    ],
    ids=["statement", "name", "did", "role", "kind", "intent_ref", "asset", "parameter"],
)
def test_max_bytes(make: Callable[[str], Data], field: str, limit: int) -> None:
    encode_data(make("x" * limit))
    encode_data(make("é" * (limit // 2)))
    data_rejects(
        make("x" * (limit + 1)), field, "max_bytes", f"is {limit + 1} bytes", f"limit is {limit}"
    )
    # bytes, not characters: the same number of two-byte characters is over the limit
    data_rejects(make("é" * (limit // 2 + 1)), field, "max_bytes", f"is {limit + 2} bytes")


def test_bytes_are_counted_after_nfc() -> None:
    # "e" + combining acute is 3 bytes; NFC makes it "é", 2 bytes
    encode_data(Identity(name="n", did="e\u0301" * 128))  # 384 bytes given, 256 stored
    data_rejects(Identity(name="n", did="e\u0301" * 129), "data.did", "max_bytes", "is 258 bytes")


def test_max_bytes_of_keys_amounts_and_public_keys() -> None:
    key = "k" * 257
    data_rejects(
        Identity(name="n", profile={key: "v"}), f"data.profile[{key!r}] (key)", "max_bytes"
    )
    data_rejects(
        Event(kind="k", cost=Cost(asset="X", amount="1" * 65)),
        "data.cost.amount",
        "max_bytes",
        "limit is 64",
    )
    encode_data(Event(kind="k", cost=Cost(asset="X", amount="1" * 64)))
    encode_data(Identity(name="n", public_keys=(b"k" * 1_024,)))
    data_rejects(
        Identity(name="n", public_keys=(b"k" * 1_025,)),
        "data.public_keys[0]",
        "max_bytes",
        "limit is 1024",
    )


@pytest.mark.parametrize(
    ("make", "field", "noun"),
    [
        (
            lambda n: Identity(name="n", roles=tuple(f"r{i}" for i in range(n))),
            "data.roles",
            "items",
        ),
        (
            lambda n: Identity(name="n", profile={f"k{i}": "v" for i in range(n)}),
            "data.profile",
            "entries",
        ),
        (
            lambda n: Identity(name="n", public_keys=tuple(i.to_bytes(2, "big") for i in range(n))),
            "data.public_keys",
            "items",
        ),
        (lambda n: Event(kind="k", artifacts=("a",) * n), "data.artifacts", "items"),
        (
            lambda n: Goal(statement="g", status=1, success_criteria=("c",) * n),
            "data.success_criteria",
            "items",
        ),
        (
            lambda n: Goal(
                statement="g", status=1, subgoals=tuple(f"{URI[:-1]}{i + 1}" for i in range(n))
            ),
            "data.subgoals",
            "items",
        ),
        (
            lambda n: Capability(
                subject="a", capability="c", parameters={f"k{i}": "v" for i in range(n)}
            ),
            "data.parameters",
            "entries",
        ),
        (
            lambda n: Pattern(
                statement="p", derived_from=tuple(f"{URI[:-1]}{i + 1}" for i in range(n))
            ),
            "data.derived_from",
            "items",
        ),
    ],
    ids=[
        "roles",
        "profile",
        "public_keys",
        "artifacts",
        "success_criteria",
        "subgoals",
        "parameters",
        "derived_from",
    ],
)
def test_max_items(make: Callable[[int], Data], field: str, noun: str) -> None:
    encode_data(make(LIMITS.ITEMS))
    data_rejects(make(LIMITS.ITEMS + 1), field, "max_items", f"has 257 {noun}; the limit is 256")


# -- numbers

UNIT_FIELDS = [
    (lambda x: Fact(**FACT, confidence=x), "data.confidence"),
    (lambda x: Belief(statement="b", stance=Stance.BELIEVE, confidence=x), "data.confidence"),
    (lambda x: Preference(topic="t", polarity=Polarity.DO, strength=x), "data.strength"),
    (lambda x: Pattern(statement="p", strength=x), "data.strength"),
]


@pytest.mark.parametrize(
    ("make", "field"), UNIT_FIELDS, ids=["fact", "belief", "preference", "pattern"]
)
def test_unit_ranges(make: Callable[[Any], Data], field: str) -> None:
    for ok in (0, 0.0, -0.0, 1, 1.0, 0.5, 5e-324):
        encode_data(make(ok))
    for bad in (1.0000001, -1e-300, 2, -1, math.inf, -math.inf):
        data_rejects(make(bad), field, "range", "must be within [0, 1]")
    data_rejects(make(math.nan), field, "range", "nan")
    for wrong in (True, "0.5", None if False else [0.5]):
        data_rejects(make(wrong), field, "type", "must be a number in [0, 1]")


def test_version_confidence_range() -> None:
    rejects(lambda: encode_version(version(confidence=1.5)), "version.confidence", "range")
    rejects(lambda: encode_version(version(confidence=-0.5)), "version.confidence", "range")


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda n: Pattern(statement="p", coverage=n), "data.coverage"),
        (lambda n: Event(kind="k", duration_us=n), "data.duration_us"),
    ],
    ids=["coverage", "duration_us"],
)
def test_integer_ranges(make: Callable[[Any], Data], field: str) -> None:
    for ok in (0, 1, 2**63 - 1, 7.0):
        encode_data(make(ok))
    data_rejects(make(-1), field, "range", "must be within [0, 9223372036854775807], got -1")
    data_rejects(make(2**63), field, "range")
    data_rejects(make(1.5), field, "type", "must be a whole number, got 1.5")
    data_rejects(make(math.inf), field, "type", "whole number")
    data_rejects(make(True), field, "type", "must be an integer, got bool")
    data_rejects(make("3"), field, "type", "must be an integer, got str")


def test_importance_range() -> None:
    for ok in range(11):
        encode_head(head(importance=ok))
    for bad in (-1, 11, 100):
        h = head(importance=bad)
        rejects(lambda: encode_head(h), "head.importance", "range", "[0, 10]")  # noqa: B023
    rejects(lambda: encode_head(head(importance=2.5)), "head.importance", "type")


# -- closed values


ENUM_FIELDS = [
    pytest.param(
        lambda v: Fact(**FACT, source=v), "data.source", SourceKind, "user_input", id="Fact.source"
    ),
    pytest.param(
        lambda v: Preference(topic="t", polarity=v),
        "data.polarity",
        Polarity,
        "prefer",
        id="Preference.polarity",
    ),
    pytest.param(
        lambda v: Belief(statement="b", stance=v),
        "data.stance",
        Stance,
        "believe",
        id="Belief.stance",
    ),
    pytest.param(
        lambda v: Event(kind="k", outcome=v), "data.outcome", Outcome, "success", id="Event.outcome"
    ),
    pytest.param(
        lambda v: Goal(statement="g", status=v),
        "data.status",
        GoalStatus,
        "active",
        id="Goal.status",
    ),
    pytest.param(
        lambda v: Constraint(statement="c", polarity=1, strength=v, source=1),
        "data.strength",
        Strength,
        "soft",
        id="Constraint.strength",
    ),
    pytest.param(
        lambda v: Constraint(statement="c", polarity=1, strength=1, source=v),
        "data.source",
        ConstraintSource,
        "user_declared",
        id="Constraint.source",
    ),
]


@pytest.mark.parametrize(("make", "field", "cls", "label"), ENUM_FIELDS)
def test_enum_member_code_and_label_are_accepted(
    make: Any, field: str, cls: Any, label: str
) -> None:
    canonical = encode_data(make(cls(1)))
    assert encode_data(make(1)) == canonical
    assert encode_data(make(label)) == canonical
    for member in cls:
        assert encode_data(make(member.label)) == encode_data(make(member.value))


@pytest.mark.parametrize(("make", "field", "cls", "label"), ENUM_FIELDS)
def test_unknown_enum_values_are_rejected(make: Any, field: str, cls: Any, label: str) -> None:
    for bad in (label.upper(), label.capitalize(), " " + label, "nope", "", 0, 99, -1, True, b"x"):
        err = data_rejects(make(bad), field, "enum", "must be one of", cls.labels())
        assert repr(bad) in err.message


@pytest.mark.parametrize(("make", "field", "cls", "label"), ENUM_FIELDS)
def test_enum_values_of_another_kind_are_rejected(
    make: Any, field: str, cls: Any, label: str
) -> None:
    # equal to a code (1.0 == 1, Verb.FIND == 1) is not enough: only ints, labels and members
    for bad in (1.0, Verb.FIND, MemoryType.IDENTITY):
        data_rejects(make(bad), field, "enum", "must be one of")


def test_enum_labels_are_exact() -> None:
    # str.upper() maps "ſ" (long s) to "S" and "ı" (dotless i) to "I"; neither is a label
    data_rejects(
        Constraint(statement="c", polarity=1, strength="ſoft", source=1), "data.strength", "enum"
    )
    data_rejects(Fact(**FACT, source="ımported"), "data.source", "enum")
    assert Strength.coerce("ſoft") is None
    assert MemoryType.coerce("ıdentity") is None
    assert MemoryType.coerce("identity") is MemoryType.IDENTITY


def test_enum_message_lists_the_labels() -> None:
    data_rejects(
        Belief(statement="b", stance="maybe"),
        "data.stance",
        "enum",
        "must be one of believe, doubt, suspect, got 'maybe'",
    )


# -- times


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda t: Fact(**FACT, observed_at=t), "data.observed_at"),
        (lambda t: Event(kind="k", occurred_at=t), "data.occurred_at"),
        (lambda t: Goal(statement="g", status=1, horizon=t), "data.horizon"),
        (lambda t: Capability(subject="a", capability="c", last_observed=t), "data.last_observed"),
    ],
    ids=["observed_at", "occurred_at", "horizon", "last_observed"],
)
def test_times(make: Callable[[Any], Data], field: str) -> None:
    encode_data(make(T0))
    encode_data(make(datetime(1, 1, 1, tzinfo=UTC)))
    encode_data(make(datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)))
    data_rejects(make(datetime(2026, 5, 1, 12, 0)), field, "naive_time", "naive datetime", "aware")
    data_rejects(make(date(2026, 5, 1)), field, "type", "must be a datetime, got date")
    data_rejects(make(1_700_000_000), field, "type", "must be a datetime, got int")
    data_rejects(make("2026-05-01T12:00:00Z"), field, "type", "got str")
    # a local time inside years 1..9999 whose UTC instant is outside them
    east = timezone(timedelta(hours=1))
    west = timezone(timedelta(hours=-1))
    data_rejects(make(datetime(1, 1, 1, tzinfo=east)), field, "range", "years 1..9999")
    data_rejects(make(datetime.max.replace(tzinfo=west)), field, "range", "years 1..9999")


def test_naive_times_in_heads_and_versions() -> None:
    rejects(
        lambda: encode_head(head(created_at=datetime(2026, 1, 1))), "head.created_at", "naive_time"
    )
    rejects(
        lambda: encode_version(version(expires_at=datetime(2026, 1, 1))),
        "version.expires_at",
        "naive_time",
    )
    rejects(lambda: to_micros(datetime(2026, 1, 1)), "time", "naive_time")
    assert to_micros(datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)) == 1_000_000


# -- URIs and amounts


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda u: Belief(statement="b", stance=1, evidence_for=(u,)), "data.evidence_for[0]"),
        (
            lambda u: Belief(statement="b", stance=1, evidence_against=(URI_2, u)),
            "data.evidence_against[1]",
        ),
        (lambda u: Goal(statement="g", status=1, subgoals=(u,)), "data.subgoals[0]"),
        (lambda u: Pattern(statement="p", derived_from=(u,)), "data.derived_from[0]"),
    ],
    ids=["evidence_for", "evidence_against", "subgoals", "derived_from"],
)
@pytest.mark.parametrize(
    "bad",
    [
        URI[:-2],  # no version
        URI[:-1] + "latest",
        URI[:-1] + "0",
        URI.lower(),
        "https://example.com/x",
        "not a uri",
    ],
)
def test_uris_must_parse(make: Callable[[str], Data], field: str, bad: str) -> None:
    encode_data(make(URI))
    data_rejects(make(bad), field, "format", "must be a version URI")


def test_uri_lists_reject_duplicates() -> None:
    data_rejects(
        Pattern(statement="p", derived_from=(URI, URI)),
        "data.derived_from[1]",
        "duplicate",
        "appears twice",
    )
    data_rejects(
        Goal(statement="g", status=1, subgoals=(URI, "x", URI)), "data.subgoals[1]", "format"
    )


def test_provenance_uris() -> None:
    prov = Provenance(source=SourceKind.DERIVED, derived_from=(URI[:-2],))
    rejects(
        lambda: encode_version(version(provenance=prov)),
        "version.provenance.derived_from[0]",
        "format",
    )


@pytest.mark.parametrize("ok", ["0", "1", "-1", "12.5", "1299.99", "-0.5", "0.001", "100", "10.01"])
def test_decimal_amounts_accepted(ok: str) -> None:
    encode_data(Event(kind="k", cost=Cost(asset="USD", amount=ok)))


@pytest.mark.parametrize(
    "bad",
    [
        "1.50",
        "1.0",
        "01",
        "00",
        "+1",
        "1e5",
        "1E5",
        ".5",
        "1.",
        "-",
        "--1",
        "1,5",
        " 1",
        "1 ",
        "NaN",
        "Infinity",
        "١٢",
        "0x10",
    ],
)
def test_decimal_amounts_rejected(bad: str) -> None:
    data_rejects(
        Event(kind="k", cost=Cost(asset="USD", amount=bad)),
        "data.cost.amount",
        "format",
        "decimal number",
        repr(bad),
    )


def test_negative_zero_amount_is_rejected() -> None:
    data_rejects(
        Event(kind="k", cost=Cost(asset="USD", amount="-0")),
        "data.cost.amount",
        "format",
        "negative zero",
    )


def test_amount_must_be_text() -> None:
    data_rejects(Event(kind="k", cost=Cost(asset="USD", amount=12.5)), "data.cost.amount", "type")


# -- free maps


def test_free_map_keys_equal_after_nfc_are_rejected() -> None:
    data_rejects(
        Identity(name="n", profile={"é": "1", "e\u0301": "2"}),
        "data.profile",
        "duplicate",
        "equal after NFC",
    )


def test_free_maps_must_be_text_to_text() -> None:
    data_rejects(Identity(name="n", profile={"k": 1}), "data.profile['k']", "type")
    data_rejects(Identity(name="n", profile={1: "v"}), "data.profile[1] (key)", "type")
    data_rejects(Identity(name="n", profile=[("k", "v")]), "data.profile", "type", "mapping")


# ---------------------------------------------------------------------------------------------
# Heads: tags and frames


def head(**kw: Any) -> Head:
    fields: dict[str, Any] = {
        "id": ID,
        "type": MemoryType.FACT,
        "current_version": 1,
        "actor_scope": "agent-1",
        "created_at": T0,
        "last_updated_at": T0,
    }
    return Head(**(fields | kw))


def test_tags_limits() -> None:
    sixteen = tuple(f"t{i}" for i in range(16))
    encode_head(head(tags=sixteen))
    rejects(
        lambda: encode_head(head(tags=(*sixteen, "t16"))),
        "head.tags",
        "max_items",
        "has 17 items; the limit is 16",
    )
    encode_head(head(tags=("x" * 64, "é" * 32)))
    rejects(
        lambda: encode_head(head(tags=("ok", "x" * 65))),
        "head.tags[1]",
        "max_bytes",
        "is 65 bytes",
        "limit is 64",
    )


def test_tags_must_be_distinct_and_non_empty() -> None:
    rejects(
        lambda: encode_head(head(tags=("a", "b", "a"))),
        "head.tags[2]",
        "duplicate",
        "'a' appears twice",
    )
    rejects(lambda: encode_head(head(tags=("",))), "head.tags[0]", "empty")
    rejects(lambda: encode_head(head(tags=(7,))), "head.tags[0]", "type")


def test_encode_tags_normalises_and_keeps_order() -> None:
    assert encode_tags(["zeta", "e\u0301", "alpha"]) == ("zeta", "é", "alpha")
    assert encode_tags("single") == ("single",)
    assert encode_tags([]) == ()


def frame(verb: Any = Verb.FIND, obj_kind: Any = ObjKind.MODEL, obj_ref: Any = "gpt") -> FrameRef:
    return FrameRef(verb=verb, obj_kind=obj_kind, obj_ref=obj_ref)


def test_frames_limits() -> None:
    sixteen = tuple(frame(obj_ref=f"m{i}") for i in range(16))
    encode_head(head(frames=sixteen))
    rejects(
        lambda: encode_head(head(frames=(*sixteen, frame()))),
        "head.frames",
        "max_items",
        "has 17 items; the limit is 16",
    )


def test_frame_fields() -> None:
    encode_head(head(frames=(frame("build", "agent", "x" * 256), frame(10, 8, "é" * 128))))
    rejects(
        lambda: encode_head(head(frames=(frame(verb="fly"),))),
        "head.frames[0].verb",
        "enum",
        "find",
    )
    rejects(lambda: encode_head(head(frames=(frame(verb=11),))), "head.frames[0].verb", "enum")
    rejects(
        lambda: encode_head(head(frames=(frame(obj_kind="planet"),))),
        "head.frames[0].obj_kind",
        "enum",
        "service",
    )
    rejects(
        lambda: encode_head(head(frames=(frame(obj_kind=0),))), "head.frames[0].obj_kind", "enum"
    )
    rejects(
        lambda: encode_head(head(frames=(frame(obj_ref=""),))), "head.frames[0].obj_ref", "empty"
    )
    rejects(
        lambda: encode_head(head(frames=(frame(obj_ref="x" * 257),))),
        "head.frames[0].obj_ref",
        "max_bytes",
        "limit is 256",
    )
    rejects(
        lambda: encode_head(head(frames=(frame(obj_ref=None),))),
        "head.frames[0].obj_ref",
        "required",
    )
    rejects(lambda: encode_head(head(frames=(frame(), frame()))), "head.frames[1]", "duplicate")
    rejects(lambda: encode_head(head(frames=("find model gpt",))), "head.frames[0]", "type")


def test_head_fields() -> None:
    rejects(lambda: encode_head(head(current_version=0)), "head.current_version", "range")
    rejects(lambda: encode_head(head(id=bytes(16))), "head.id", "type", "MemoryId")
    rejects(lambda: encode_head(head(type=10)), "head.type", "enum")
    rejects(lambda: encode_head(head(actor_scope="")), "head.actor_scope", "empty")
    rejects(
        lambda: encode_head(head(visibility="public")), "head.visibility", "enum", "actor_public"
    )
    rejects(
        lambda: encode_head(head(tombstone=Tombstone(reason="r", at=T0, by=None))),
        "head.tombstone.by",
        "required",
    )
    rejects(lambda: encode_head(head(created_at=None)), "head.created_at", "required")


# ---------------------------------------------------------------------------------------------
# Versions


DATA = MINIMAL[MemoryType.FACT]
DATA_BYTES = encode_data(DATA)


def version(**kw: Any) -> Version:
    fields: dict[str, Any] = {
        "id": ID,
        "version": 1,
        "type": MemoryType.FACT,
        "data": DATA_BYTES,
        "hash": content_hash(MemoryType.FACT, DATA_BYTES),
        "created_at": T0,
        "created_by": "agent-1",
        "provenance": Provenance(source=SourceKind.USER_INPUT),
        "forms": render(DATA),
    }
    return Version(**(fields | kw))


def test_provenance_source_is_required() -> None:
    rejects(
        lambda: encode_version(version(provenance=Provenance(source=None))),
        "version.provenance.source",
        "required",
    )
    rejects(
        lambda: encode_version(version(provenance=Provenance(source="gossip"))),
        "version.provenance.source",
        "enum",
        "user_input, derived, observed, imported",
    )
    rejects(lambda: encode_version(version(provenance=None)), "version.provenance", "required")


def test_provenance_sources() -> None:
    ok = SourceRef(session_id="s1", message_ids=("m1", "m2"), span=(0, 10))
    encode_version(version(provenance=Provenance(source=1, sources=(ok,))))
    bad_span = msgspec.structs.replace(ok, span=(10, 0))
    rejects(
        lambda: encode_version(version(provenance=Provenance(source=1, sources=(bad_span,)))),
        "version.provenance.sources[0].span",
        "range",
        "start 10 is after end 0",
    )
    no_session = msgspec.structs.replace(ok, session_id="")
    rejects(
        lambda: encode_version(version(provenance=Provenance(source=1, sources=(ok, no_session)))),
        "version.provenance.sources[1].session_id",
        "empty",
    )


def test_version_fields() -> None:
    rejects(
        lambda: encode_version(version(hash=b"\x00" * 31)),
        "version.hash",
        "length",
        "exactly 32 bytes, got 31",
    )
    rejects(lambda: encode_version(version(version=0)), "version.version", "range")
    rejects(lambda: encode_version(version(created_by="")), "version.created_by", "empty")
    rejects(
        lambda: encode_version(version(created_by="x" * 257)), "version.created_by", "max_bytes"
    )
    rejects(
        lambda: encode_version(version(forms=Forms(short="", medium="m"))),
        "version.forms.short",
        "empty",
    )


# ---------------------------------------------------------------------------------------------
# validate_memory: the rules that span head, version and data


@settings(max_examples=40)
@given(memories())
def test_valid_memories_pass(memory: tuple[Head, Version, Data]) -> None:
    validate_memory(*memory)


def test_valid_memory_of_every_type() -> None:
    for t, data in FULL.items():
        raw = encode_data(data)
        v = version(type=t, data=raw, hash=content_hash(t, raw), forms=render(data))
        validate_memory(head(type=t, forms=render(data)), v, data)


def test_purged_version_skips_the_data_checks() -> None:
    validate_memory(head(), version(data=None, forms=None), DATA)


def test_id_mismatch() -> None:
    rejects(
        lambda: validate_memory(head(id=OTHER_ID), version(), DATA),
        "version.id",
        "match",
        f"is {ID}, but the head is {OTHER_ID}",
    )


def test_type_mismatch() -> None:
    goal = MINIMAL[MemoryType.GOAL]
    rejects(
        lambda: validate_memory(head(type=MemoryType.GOAL), version(), DATA),
        "version.type",
        "match",
        "head type Goal, version type Fact and data type Fact must agree",
    )
    rejects(
        lambda: validate_memory(head(), version(), goal), "version.type", "match", "data type Goal"
    )


def test_version_past_the_head() -> None:
    validate_memory(head(current_version=3), version(version=3), DATA)
    rejects(
        lambda: validate_memory(head(current_version=2), version(version=3), DATA),
        "version.version",
        "range",
        "3 is past the head's 2",
    )


def test_data_bytes_mismatch() -> None:
    other = Fact(statement="t", subject="x", predicate="p")
    rejects(
        lambda: validate_memory(head(), version(), other),
        "version.data",
        "match",
        "canonical encoding",
    )


def test_hash_mismatch() -> None:
    rejects(
        lambda: validate_memory(head(), version(hash=b"\x00" * 32), DATA),
        "version.hash",
        "match",
        "sha256(domain || type || data)",
    )
    wrong_type_byte = content_hash(MemoryType.GOAL, DATA_BYTES)
    rejects(
        lambda: validate_memory(head(), version(hash=wrong_type_byte), DATA),
        "version.hash",
        "match",
    )


@pytest.mark.parametrize(
    ("where", "forms", "field", "message"),
    [
        (
            "version",
            Forms(short="s" * 201, medium="m"),
            "version.forms.short",
            "is 51 tokens; the budget is 50",
        ),
        (
            "version",
            Forms(short="s", medium="m" * 801),
            "version.forms.medium",
            "is 201 tokens; the budget is 200",
        ),
        (
            "head",
            Forms(short="🎉" * 51, medium="m"),
            "head.forms.short",
            "is 51 tokens; the budget is 50",
        ),
        (
            "head",
            Forms(short="s", medium="€" * 267),
            "head.forms.medium",
            "is 201 tokens; the budget is 200",
        ),
    ],
)
def test_form_budgets(where: str, forms: Forms, field: str, message: str) -> None:
    at_budget = Forms(short="s" * 200, medium="m" * 800)
    validate_memory(head(forms=at_budget), version(forms=at_budget), DATA)
    h = head(forms=forms) if where == "head" else head()
    v = version(forms=forms) if where == "version" else version()
    rejects(lambda: validate_memory(h, v, DATA), field, "budget", message)


def test_validity_interval_order() -> None:
    validate_memory(head(), version(valid_from=T0, valid_until=T0), DATA)
    validate_memory(head(), version(valid_from=T0), DATA)
    validate_memory(head(), version(valid_until=T0), DATA)
    rejects(
        lambda: validate_memory(
            head(), version(valid_from=T0, valid_until=T0 - timedelta(microseconds=1)), DATA
        ),
        "version.valid_until",
        "order",
        "is before valid_from",
    )
    # compared as instants, whatever the offsets
    later_elsewhere = T0.astimezone(timezone(timedelta(hours=-5)))
    validate_memory(head(), version(valid_from=T0, valid_until=later_elsewhere), DATA)


def test_expiry_order() -> None:
    validate_memory(head(), version(expires_at=T0), DATA)
    validate_memory(head(), version(expires_at=T0 + timedelta(days=1)), DATA)
    rejects(
        lambda: validate_memory(head(), version(expires_at=T0 - timedelta(seconds=1)), DATA),
        "version.expires_at",
        "order",
        "is before created_at",
    )


def test_field_rules_apply_inside_validate_memory() -> None:
    rejects(
        lambda: validate_memory(head(), version(), Fact(**FACT, confidence=2)),
        "data.confidence",
        "range",
    )
    rejects(
        lambda: validate_memory(head(importance=11), version(), DATA), "head.importance", "range"
    )
    rejects(
        lambda: validate_memory(head(), version(created_by=""), DATA), "version.created_by", "empty"
    )
    rejects(lambda: validate_memory(head(), version(), "data"), "data", "type")
