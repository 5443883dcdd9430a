"""JSON Schemas of the nine types and ``from_json`` (issue 13 item 4): checked against the golden
vectors both ways, against an independent JSON Schema validator, and on what LLMs produce."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from cortex import (
    Fact,
    MemoryType,
    Polarity,
    Preference,
    ValidationError,
    encode_data,
    from_json,
    json_schema,
    json_schemas,
)
from cortex.model.jsonmap import to_plain
from cortex.model.schema import memory_type_of

from .test_vectors import gen_vectors

VECTORS = Path(__file__).resolve().parent.parent / "specs" / "vectors"


def _golden() -> list[tuple[MemoryType, dict[str, Any]]]:
    out = []
    for t in MemoryType:
        doc = json.loads((VECTORS / gen_vectors.file_name(t.type_name)).read_text())
        out += [(t, case) for case in doc["cases"]]
    return out


GOLDEN = _golden()


def test_every_type_has_a_valid_schema_with_descriptions() -> None:
    schemas = json_schemas()
    assert list(schemas) == [t.type_name for t in MemoryType]
    for name, schema in schemas.items():
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["title"] == name and schema["description"]
        assert schema["additionalProperties"] is False
        for field, prop in schema["properties"].items():
            assert prop["description"], f"{name}.{field}"
            assert "integer code" not in json.dumps(prop)
    fact = schemas["Fact"]
    assert fact["required"] == ["statement", "subject", "predicate"]
    assert fact["properties"]["source"]["enum"] == ["user_input", "derived", "observed", "imported"]
    assert fact["properties"]["confidence"] == {
        "type": "number",
        "minimum": 0,
        "maximum": 1,
        "description": fact["properties"]["confidence"]["description"],
    }


@pytest.mark.parametrize(
    ("t", "case"), GOLDEN, ids=lambda x: x["name"] if isinstance(x, dict) else ""
)
def test_golden_data_round_trips_and_validates(t: MemoryType, case: dict[str, Any]) -> None:
    data = gen_vectors.expected_value(t.type_name, case["input"])
    plain = to_plain(data)
    jsonschema.validate(plain, json_schema(t), format_checker=jsonschema.FormatChecker())
    back = from_json(t, plain)
    assert back == data
    assert encode_data(back).hex() == case["cbor_hex"]


def test_type_names_and_classes() -> None:
    assert memory_type_of("fact") is memory_type_of("Fact") is memory_type_of(Fact)
    assert memory_type_of(MemoryType.GOAL) is MemoryType.GOAL
    for bad in ("Facts", "", 2, None, dict):
        with pytest.raises(ValidationError) as info:
            memory_type_of(bad)  # type: ignore[arg-type]
        assert info.value.field == "type"


# -- what an LLM produces ------------------------------------------------------------------------


def test_nulls_case_and_spacing_numbers_as_text() -> None:
    got = from_json(
        "Preference",
        {"topic": "green tea", "polarity": " Prefer ", "strength": "0.8", "rationale": None},
    )
    assert got == Preference(topic="green tea", polarity=Polarity.PREFER, strength=0.8)
    c = from_json(
        "constraint",
        {
            "statement": "no flights",
            "polarity": "DONT",
            "strength": "Hard",
            "source": "user-declared",
        },
    )
    assert c.source.label == "user_declared"  # type: ignore[union-attr]


def test_times_dates_and_zones() -> None:
    f = {"statement": "s", "subject": "a", "predicate": "p"}
    aware = from_json("Fact", {**f, "observed_at": "2024-05-01T14:00:00+02:00"})
    assert aware.observed_at == datetime(2024, 5, 1, 12, tzinfo=UTC)  # type: ignore[union-attr]
    for naive in ("2024-05-01T14:00:00", "2024-05-01"):
        with pytest.raises(ValidationError) as info:
            from_json("Fact", {**f, "observed_at": naive})
        assert (info.value.field, info.value.rule) == ("data.observed_at", "naive_time")
    day = from_json("Fact", {**f, "observed_at": "2024-05-01"}, assume_tz=UTC)
    assert day.observed_at == datetime(2024, 5, 1, tzinfo=UTC)  # type: ignore[union-attr]
    tz = timezone(timedelta(hours=-5))
    local = from_json("Fact", {**f, "observed_at": "2024-05-01T09:30"}, assume_tz=tz)
    assert local.observed_at == datetime(2024, 5, 1, 14, 30, tzinfo=UTC)  # type: ignore[union-attr]
    with pytest.raises(ValidationError) as info:
        from_json("Fact", {**f, "observed_at": "last tuesday"}, assume_tz=UTC)
    assert info.value.field == "data.observed_at"


F: dict[str, Any] = {"statement": "s", "subject": "a", "predicate": "p"}


@pytest.mark.parametrize(
    ("t", "obj", "field", "rule"),
    [
        ("Fact", {"statement": "s", "subject": "a"}, "data.predicate", "required"),
        (
            "Fact",
            {**F, "mood": 1},
            "data.mood",
            "unknown_field",
        ),
        ("Fact", {"statement": None, "subject": "a", "predicate": "p"}, "data.statement", "type"),
        ("Fact", {"statement": 5, "subject": "a", "predicate": "p"}, "data.statement", "type"),
        (
            "Fact",
            {**F, "statement": "x" * 20_000},
            "data.statement",
            "",
        ),
        (
            "Fact",
            {**F, "confidence": 1.5},
            "data.confidence",
            "range",
        ),
        (
            "Fact",
            {**F, "confidence": "high"},
            "data.confidence",
            "type",
        ),
        ("Preference", {"topic": "t", "polarity": "love"}, "data.polarity", "enum"),
        ("Preference", {"topic": "t", "polarity": 1}, "data.polarity", "enum"),
        (
            "Event",
            {"kind": "trip", "cost": {"asset": "CHF", "amount": "1e3"}},
            "data.cost.amount",
            "",
        ),
        ("Event", {"kind": "trip", "duration_us": -1}, "data.duration_us", "range"),
        (
            "Goal",
            {"statement": "g", "status": "active", "subgoals": ["not a uri"]},
            "data.subgoals[0]",
            "",
        ),
        ("Fact", ["a", "list"], "data", "type"),
        ("Fact", "text", "data", "type"),
    ],
)
def test_bad_input_names_the_field(t: str, obj: Any, field: str, rule: str) -> None:
    with pytest.raises(ValidationError) as info:
        from_json(t, obj, assume_tz=UTC)
    assert info.value.field == field
    if rule:  # (the codec names its size, decimal and URI rules its own way)
        assert info.value.rule == rule


# -- lists: every item follows the item's rule ----------------------------------------------------


@pytest.mark.parametrize(
    ("t", "obj", "field", "good", "bad"),
    [
        ("Identity", {"name": "n"}, "roles", ["owner"], [7]),
        ("Identity", {"name": "n"}, "public_keys", ["00ff"], ["not hex"]),
        ("Goal", {"statement": "g", "status": "active"}, "success_criteria", ["done"], [{}]),
        (
            "Goal",
            {"statement": "g", "status": "active"},
            "subgoals",
            [f"cortex://Goal/{'0' * 26}#1"],
            ["not a uri"],
        ),
    ],
)
def test_list_items_follow_the_item_rule(
    t: str, obj: dict[str, Any], field: str, good: list[Any], bad: list[Any]
) -> None:
    """A list field is a list *of* its item type (format.md §2): the schema refuses an item a
    write refuses, so what validates is what a write accepts."""
    schema = json_schema(t)
    jsonschema.validate({**obj, field: good}, schema, format_checker=jsonschema.FormatChecker())
    from_json(t, {**obj, field: good})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**obj, field: bad}, schema, format_checker=jsonschema.FormatChecker())
    with pytest.raises(ValidationError) as info:
        from_json(t, {**obj, field: bad})
    assert info.value.field == f"data.{field}[0]"


@pytest.mark.parametrize(
    "span", [[-1, 2], [0, -2], ["0", "2"], [0.5, 2], [None, 2], [0, True], [[0], 2]]
)
def test_span_schema_is_two_unsigned_integers(span: list[Any]) -> None:
    """A span is an array of exactly two uints (format.md §2, SourceRef.span): the schema of
    the record holding one refuses anything else in either place, as the codec does."""
    from cortex.model.codec import SOURCE_REF, Invalid
    from cortex.model.records import SourceRef

    validator = jsonschema.Draft202012Validator(SOURCE_REF.json_schema())
    assert validator.is_valid({"session_id": "s", "span": [0, 2]})
    assert SOURCE_REF.enc(SourceRef(session_id="s", span=(0, 2)))
    assert not validator.is_valid({"session_id": "s", "span": span})
    with pytest.raises((Invalid, ValidationError)):
        SOURCE_REF.enc(SourceRef(session_id="s", span=tuple(span)))  # type: ignore[arg-type]
