"""Extraction behind a protocol (issue 13 item 4): ``LLMExtractor`` over scripted callables,
including malformed, partial and hostile answers."""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cortex import CortexError, Fact, MemoryType, Preference, ValidationError
from cortex.agent.extract import (
    MAX_JSON_DEPTH,
    MAX_OUTPUT_CHARS,
    Context,
    Extraction,
    ExtractionError,
    Extractor,
    LLMExtractor,
    locate,
)

CONTENT = (
    "Sam: I moved to Lisbon last month, and honestly I can't stand cilantro.\n"
    "Ana: Noted! Are you still flying to Paris on Tuesday?\n"
    "Sam: Yes — the flight is at 9am.  東京にも行きたい。"
)

ITEM = '[{"type": "Fact", "data": {"statement": "s", "subject": "a", "predicate": "p"}, '

GOOD = [
    {
        "type": "Fact",
        "data": {
            "statement": "Sam lives in Lisbon",
            "subject": "sam",
            "predicate": "home_city",
            "object": "Lisbon",
            "source": "user_input",
            "observed_at": None,
        },
        "quote": "I moved to Lisbon last month",
        "confidence": 0.9,
        "tags": ["people", "people"],
    },
    {
        "type": "preference",
        "data": {"topic": "cilantro", "polarity": "Avoid", "strength": "0.9"},
        "quote": "i can't   stand cilantro",
        "importance": 6,
    },
    {
        "type": "Event",
        "data": {
            "kind": "flight",
            "summary": "Sam flies to Paris",
            "occurred_at": "2026-11-24T09:00",
        },
        "quote": "東京にも行きたい。",
    },
]


def _script(answer: Any) -> Any:
    seen: list[str] = []

    def llm(prompt: str) -> Any:
        seen.append(prompt)
        return answer

    llm.seen = seen  # type: ignore[attr-defined]
    return llm


def test_a_good_answer_becomes_typed_memories_with_spans() -> None:
    llm = _script(json.dumps(GOOD))
    ex = LLMExtractor(llm)
    assert isinstance(ex, Extractor)
    out = ex.extract(CONTENT, Context(occurred_at=datetime(2026, 11, 20, tzinfo=UTC), actor="sam"))
    assert isinstance(out, Extraction) and out.dropped == ()
    fact, pref, event = out.items
    assert isinstance(fact.memory.data, Fact) and fact.memory.data.object == "Lisbon"
    assert fact.memory.confidence == 0.9 and tuple(fact.memory.tags) == ("people",)
    raw = CONTENT.encode()
    assert (
        fact.span is not None
        and raw[fact.span[0] : fact.span[1]] == b"I moved to Lisbon last month"
    )
    assert isinstance(pref.memory.data, Preference) and pref.memory.importance == 6
    assert pref.span is not None and raw[pref.span[0] : pref.span[1]] == b"I can't stand cilantro"
    assert event.memory.data.occurred_at == datetime(2026, 11, 24, 9, tzinfo=UTC)  # type: ignore[union-attr]
    assert (
        event.span is not None
        and raw[event.span[0] : event.span[1]].decode() == "東京にも行きたい。"
    )
    prompt = llm.seen[0]
    assert CONTENT in prompt and '"speaker": "sam"' in prompt
    assert '"enum":["user_input","derived","observed","imported"]' in prompt  # labels
    assert "Identity" not in prompt  # only the types asked for


@pytest.mark.parametrize(
    "wrap",
    [
        lambda s: s,
        lambda s: "Here are the memories:\n```json\n" + s + "\n```\nDone.",
        lambda s: "Sure! " + s,
        lambda s: json.dumps({"memories": json.loads(s)}),
    ],
)
def test_answers_in_the_shapes_models_give(wrap: Any) -> None:
    out = LLMExtractor(_script(wrap(json.dumps(GOOD)))).extract(CONTENT)
    assert len(out.items) == 3


def test_an_empty_answer_is_no_memories() -> None:
    assert LLMExtractor(_script("[]")).extract(CONTENT).items == ()


def test_a_quote_the_content_does_not_hold_has_no_span() -> None:
    bad_quote = [{**GOOD[0], "quote": "Sam was born in Porto"}]
    [item] = LLMExtractor(_script(json.dumps(bad_quote))).extract(CONTENT).items
    assert item.span is None and item.quote == "Sam was born in Porto"


@pytest.mark.parametrize(
    ("answer", "field", "rule"),
    [
        ("I could not find anything.", "llm", "not_json"),
        ("[{'type': 'Fact'}]", "llm", "not_json"),
        ('[{"type": "Fact", "data": {', "llm", "not_json"),
        ('{"a": [], "b": []}', "llm", "not_array"),
        ('"just a string"', "llm", "not_json"),
        ("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), "llm", "too_deep"),
        ("[" + " " * MAX_OUTPUT_CHARS + "]", "llm", "too_long"),
        ('["text"]', "items[0]", "type"),
        ('[{"type": "Fact"}]', "items[0].data", "type"),
        ('[{"type": "Spell", "data": {}}]', "items[0].type", "enum"),
        ('[{"type": "Identity", "data": {"name": "x"}}]', "items[0].type", "not_asked"),
        ('[{"data": {}}]', "items[0].type", "required"),
        (
            '[{"type": "Fact", "data": {"statement": "s", "subject": "a"}}]',
            "items[0].data.predicate",
            "required",
        ),
        (
            '[{"type": "Preference", "data": {"topic": "t", "polarity": "love"}}]',
            "items[0].data.polarity",
            "enum",
        ),
        (
            ITEM + '"extra": 1}]',
            "items[0].extra",
            "unknown_field",
        ),
        (
            ITEM + '"confidence": 2}]',
            "items[0].confidence",
            "range",
        ),
        (
            ITEM + '"importance": 11}]',
            "items[0].importance",
            "range",
        ),
        (
            ITEM + '"tags": "x"}]',
            "items[0].tags",
            "type",
        ),
        (
            ITEM + '"quote": 5}]',
            "items[0].quote",
            "type",
        ),
    ],
)
def test_bad_answers_fail_whole_naming_the_item(answer: str, field: str, rule: str) -> None:
    with pytest.raises(ExtractionError) as info:
        LLMExtractor(_script(answer)).extract(CONTENT)
    assert (info.value.field, info.value.rule) == (field, rule)
    assert isinstance(info.value, ValidationError)


def test_a_partial_answer_fails_strict_and_is_reported_lenient() -> None:
    answer = json.dumps([GOOD[0], {"type": "Preference", "data": {"topic": "t"}}, GOOD[1]])
    with pytest.raises(ExtractionError) as info:
        LLMExtractor(_script(answer)).extract(CONTENT)
    assert info.value.field == "items[1].data.polarity"
    out = LLMExtractor(_script(answer), strict=False).extract(CONTENT)
    assert len(out.items) == 2
    [d] = out.dropped
    assert (d.index, d.field, d.rule) == (1, "items[1].data.polarity", "required")


def test_too_many_items() -> None:
    answer = json.dumps([GOOD[0]] * 4)
    with pytest.raises(ExtractionError) as info:
        LLMExtractor(_script(answer), max_items=3).extract(CONTENT)
    assert info.value.rule == "too_many"


@pytest.mark.parametrize("result", [None, 42, b"[]", ["a list"]])
def test_a_model_that_returns_no_text(result: Any) -> None:
    with pytest.raises(ExtractionError) as info:
        LLMExtractor(_script(result)).extract(CONTENT)
    assert (info.value.field, info.value.rule) == ("llm", "type")


@pytest.mark.parametrize("exc", [TimeoutError("slow"), RuntimeError("quota"), KeyError("k")])
def test_a_model_that_raises(exc: Exception) -> None:
    def llm(prompt: str) -> str:
        raise exc

    with pytest.raises(ExtractionError) as info:
        LLMExtractor(llm).extract(CONTENT)
    assert info.value.rule == "failed" and type(exc).__name__ in str(info.value)


def test_bad_arguments() -> None:
    for kw in ({"types": []}, {"types": "Fact"}, {"types": ["Nope"]}, {"max_items": 0}):
        with pytest.raises(ValidationError):
            LLMExtractor(_script("[]"), **kw)
    with pytest.raises(ValidationError):
        LLMExtractor("not callable")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        LLMExtractor(_script("[]")).extract(b"bytes")  # type: ignore[arg-type]


def test_types_asked_for() -> None:
    llm = _script("[]")
    LLMExtractor(llm, types=["Identity", MemoryType.CAPABILITY]).extract("x")
    assert "Identity, Capability" in llm.seen[0] and "Preference" not in llm.seen[0]


@given(st.text(max_size=300))
def test_any_text_answer_gives_memories_or_an_extraction_error(answer: str) -> None:
    try:
        out = LLMExtractor(_script(answer), strict=False).extract(CONTENT)
    except ExtractionError:
        return
    assert isinstance(out, Extraction)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
        max_leaves=30,
    )
)
def test_any_json_answer_gives_memories_or_a_cortex_error(value: Any) -> None:
    for strict in (True, False):
        with contextlib.suppress(CortexError):
            LLMExtractor(_script(json.dumps(value)), strict=strict).extract(CONTENT)


def test_locate() -> None:
    text = "Ünïcode first.  Then   the quote\nacross lines."
    span = locate(text, "then the quote across")
    assert span is not None
    assert text.encode()[span[0] : span[1]].decode() == "Then   the quote\nacross"
    assert locate(text, "absent") is None
    assert locate(text, "   ") is None
    assert locate(text, "Ünïcode") == (0, len("Ünïcode".encode()))
