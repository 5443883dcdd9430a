"""The claim guard of semantic dedupe (issue 14 item 2, specs/claims.md): hand cases for every
class, the labelled pair set (0 wrong merges), and the structured fields."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cortex import Belief, Constraint, Event, Fact, Goal, Preference
from cortex.rules.claims import claim_tokens, same_claim


def f(text: str, subject: str = "user") -> Fact:
    return Fact(statement=text, subject=subject, predicate="said")


@pytest.mark.parametrize(
    ("a", "b", "why"),
    [
        ("Sam is not allergic to peanuts", "Sam is allergic to peanuts", "negation"),
        ("Sam never drinks coffee", "Sam drinks coffee", "negation"),
        ("the budget is 4000 CHF", "the budget is 400 CHF", "number"),
        ("version 2.1 is deployed", "version 2.2 is deployed", "number"),
        ("I fly to Paris on Tuesday", "I fly to Paris on Monday", "date_time"),
        ("the meeting is at 9pm", "the meeting is at 9am", "date_time"),
        ("we moved in 2023", "we moved in 2024", "date_time"),
        ("the run is 5 km", "the run is 5 miles", "unit"),
        ("Ada lives in Berlin", "Ada lives in Lisbon", "entity"),
        ("Bob dislikes tea", "Bob likes tea", "polarity"),
        ("prefers window seats", "prefers aisle seats", "polarity"),
        ("the invoice was approved", "the invoice was rejected", "polarity"),
        ("you must ask first", "you may ask first", "modality"),
        ("drinks tea", "drinks tea with milk", "detail"),
        ("Alice pays Bob", "Bob pays Alice", "wording"),
    ],
)
def test_different_claims(a: str, b: str, why: str) -> None:
    assert same_claim(f(a), f(b)).reason == why
    assert same_claim(f(b), f(a)).reason == why  # symmetric


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Sam doesn't eat meat", "Sam does not eat meat"),
        ("On Tuesday I fly to Paris", "I fly to Paris on Tuesday"),
        ("the meeting starts at 9am", "The meeting begins at 9 am."),
        ("the meeting is at 9:00", "the meeting is at 9 AM"),
        ("the budget is $4,000", "the budget is 4000 dollars"),
        ("I have twenty books", "I have 20 books"),
        ("the flight is on March 3rd", "the flight is on 3 March"),
        ("The cat sleeps on the sofa", "the cat is sleeping on the sofa"),
        ("every morning she runs", "she runs every morning"),
    ],
)
def test_same_claims(a: str, b: str) -> None:
    assert same_claim(f(a), f(b)).same
    assert same_claim(f(b), f(a)).same


def test_structured_fields_must_agree() -> None:
    when = datetime(2026, 1, 1, tzinfo=UTC)
    assert same_claim(f("x", "sam"), f("x", "bob")).reason == "wording"
    assert not same_claim(
        Preference(topic="tea", polarity="prefer"), Preference(topic="tea", polarity="avoid")
    ).same
    assert same_claim(
        Event(kind="trip", occurred_at=when), Event(kind="trip", occurred_at=when)
    ).same
    assert (
        same_claim(Event(kind="trip", occurred_at=when), Event(kind="trip")).reason
        == "field:occurred_at"
    )
    assert same_claim(f("x"), Belief(statement="x", stance="believe")).reason == "type"
    assert not same_claim(
        Goal(statement="g", status="active", success_criteria=("ship it",)),
        Goal(statement="g", status="active", success_criteria=("ship it", "test it")),
    ).same
    c = Constraint(statement="no calls", polarity="dont", strength="hard", source="learned")
    assert same_claim(c, c).same


def test_tokens() -> None:
    assert claim_tokens("The meeting is at 9:00 am on Tuesday, March 3rd 2024 with $4,000") == (
        "meet", "t09:00", "day1", "month3", "3", "year2024", "with", "4000", "usd",
    )  # fmt: skip


@given(st.text(max_size=120), st.text(max_size=120))
def test_total_and_reflexive(a: str, b: str) -> None:
    assert same_claim(f(a), f(a)).same
    assert same_claim(f(a), f(b)).same == same_claim(f(b), f(a)).same
