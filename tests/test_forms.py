"""Forms: the short, medium and full templates, token counting, truncation and overrides."""

from __future__ import annotations

import math
import unicodedata
from datetime import UTC, datetime

import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cortex.errors import ValidationError
from cortex.model.enums import MemoryType, Outcome, Polarity
from cortex.model.forms import (
    ELLIPSIS,
    MEDIUM_TOKENS,
    SHORT_TOKENS,
    check_override,
    count_tokens,
    format_seconds,
    format_time,
    render,
    render_full,
    render_medium,
    render_short,
    truncate,
)
from cortex.model.records import Cost, Data, Event, Fact, Forms, Identity, Pattern, Preference
from tests.strategies import FULL, MINIMAL, any_data, respelled

T = MemoryType
SEP = " — "
AT = "2026-11-22T09:30:15Z"

SHORT = {
    T.IDENTITY: ("Ada Lovelace (did:key:z6MkAda)", "Ada"),
    T.FACT: ("home_city(ada)=Ada's home city is Zürich", "color(lawn)=grass is green"),
    T.PREFERENCE: ("prefers dark mode (prefer, strength=0.80)", "prefers tea (avoid)"),
    T.BELIEF: ("suspect the build is flaky on Fridays", "doubt it will rain"),
    T.EVENT: ("success purchase with gpu-vendor cost=1299.99USD", "login"),
    T.GOAL: ("[active] ship cortex 1.0", "[paused] learn Rust"),
    T.CONSTRAINT: ("[hard] dont spend more than 2000 USD without asking", "[soft] avoid use tabs"),
    T.CAPABILITY: ("agent can run SQL queries (verified)", "agent can send email (unverified)"),
    T.PATTERN: (
        "retry flaky network calls with backoff (strength=0.70, coverage=12)",
        "check the logs first",
    ),
}

DETAILS = {
    T.IDENTITY: (
        "roles: researcher, operator; profile: city=Zürich, lang=en; public keys: 2",
        None,
    ),
    T.FACT: (f"object: Zürich; source: user_input; observed {AT}; confidence 0.95", None),
    T.PREFERENCE: ("rationale: eye strain", None),
    T.BELIEF: ("about ci; confidence 0.40; evidence: 2 for, 1 against", None),
    T.EVENT: (
        f"at {AT}; took 1.5s; summary: bought a GPU for the lab; intent: intent-42; artifacts: 2",
        None,
    ),
    T.GOAL: (f"horizon {AT}; success criteria: 2; subgoals: 1", None),
    T.CONSTRAINT: ("trigger: a purchase is proposed; source: user_declared", "source: learned"),
    T.CAPABILITY: (f"parameters: dialect=sqlite, max_rows=1000; last observed {AT}", None),
    T.PATTERN: ("derived from: 2", None),
}

URI_A = "cortex://Fact/01HWT0D7G00000000000000001#1"
URI_B = "cortex://Event/01HWT0D7G00000000000000002#3"
PRECISE = "2026-11-22T09:30:15.250000Z"

FULL_FORM = {
    T.IDENTITY: [
        "Identity: Ada Lovelace (did:key:z6MkAda)",
        "name: Ada Lovelace",
        "did: did:key:z6MkAda",
        "roles: researcher, operator",
        "profile: city=Zürich, lang=en",
        "public_keys: " + "01" * 32 + ", fe00",
    ],
    T.FACT: [
        "Fact: home_city(ada)=Ada's home city is Zürich",
        "statement: Ada's home city is Zürich",
        "subject: ada",
        "predicate: home_city",
        "object: Zürich",
        "source: user_input",
        f"observed_at: {PRECISE}",
        "confidence: 0.95",
    ],
    T.PREFERENCE: [
        "Preference: prefers dark mode (prefer, strength=0.80)",
        "topic: dark mode",
        "polarity: prefer",
        "strength: 0.8",
        "rationale: eye strain",
    ],
    T.BELIEF: [
        "Belief: suspect the build is flaky on Fridays",
        "statement: the build is flaky on Fridays",
        "subject: ci",
        "stance: suspect",
        "confidence: 0.4",
        f"evidence_for: {URI_A}, {URI_B}",
        f"evidence_against: {URI_B}",
    ],
    T.EVENT: [
        "Event: success purchase with gpu-vendor cost=1299.99USD",
        "kind: purchase",
        "outcome: success",
        "counterparty: gpu-vendor",
        "cost: 1299.99 USD",
        "duration: 1.5s",
        f"occurred_at: {PRECISE}",
        "summary: bought a GPU for the lab",
        "intent_ref: intent-42",
        "artifacts: invoice.pdf, receipt.png",
    ],
    T.GOAL: [
        "Goal: [active] ship cortex 1.0",
        "statement: ship cortex 1.0",
        "status: active",
        f"horizon: {PRECISE}",
        "success_criteria: all tests pass, docs published",
        f"subgoals: {URI_A}",
    ],
    T.CONSTRAINT: [
        "Constraint: [hard] dont spend more than 2000 USD without asking",
        "statement: spend more than 2000 USD without asking",
        "polarity: dont",
        "strength: hard",
        "source: user_declared",
        "trigger: a purchase is proposed",
    ],
    T.CAPABILITY: [
        "Capability: agent can run SQL queries (verified)",
        "subject: agent",
        "capability: run SQL queries",
        "verified: true",
        "parameters: dialect=sqlite, max_rows=1000",
        f"last_observed: {PRECISE}",
    ],
    T.PATTERN: [
        "Pattern: retry flaky network calls with backoff (strength=0.70, coverage=12)",
        "statement: retry flaky network calls with backoff",
        "strength: 0.7",
        "coverage: 12",
        f"derived_from: {URI_A}, {URI_B}",
    ],
}

MINIMAL_FULL_FORM = {
    T.IDENTITY: ["Identity: Ada", "name: Ada"],
    T.FACT: [
        "Fact: color(lawn)=grass is green",
        "statement: grass is green",
        "subject: lawn",
        "predicate: color",
    ],
    T.PREFERENCE: ["Preference: prefers tea (avoid)", "topic: tea", "polarity: avoid"],
    T.BELIEF: ["Belief: doubt it will rain", "statement: it will rain", "stance: doubt"],
    T.EVENT: ["Event: login", "kind: login"],
    T.GOAL: ["Goal: [paused] learn Rust", "statement: learn Rust", "status: paused"],
    T.CONSTRAINT: [
        "Constraint: [soft] avoid use tabs",
        "statement: use tabs",
        "polarity: avoid",
        "strength: soft",
        "source: learned",
    ],
    T.CAPABILITY: [
        "Capability: agent can send email (unverified)",
        "subject: agent",
        "capability: send email",
    ],
    T.PATTERN: ["Pattern: check the logs first", "statement: check the logs first"],
}

TYPES = pytest.mark.parametrize("t", list(MemoryType), ids=lambda t: t.type_name)


# ---------------------------------------------------------------------------------------------
# Templates


@TYPES
def test_short_templates(t: MemoryType) -> None:
    assert render_short(FULL[t]) == SHORT[t][0]
    assert render_short(MINIMAL[t]) == SHORT[t][1]


@TYPES
def test_medium_is_short_then_details(t: MemoryType) -> None:
    full_details, minimal_details = DETAILS[t]
    assert render_medium(FULL[t]) == SHORT[t][0] + SEP + full_details
    if minimal_details is None:
        assert render_medium(MINIMAL[t]) == SHORT[t][1]  # no details: no separator either
    else:
        assert render_medium(MINIMAL[t]) == SHORT[t][1] + SEP + minimal_details


@TYPES
def test_render_gives_both_stored_forms(t: MemoryType) -> None:
    assert render(FULL[t]) == Forms(short=render_short(FULL[t]), medium=render_medium(FULL[t]))


@TYPES
def test_full_form_lines(t: MemoryType) -> None:
    assert render_full(FULL[t]).split("\n") == FULL_FORM[t]
    assert render_full(MINIMAL[t]).split("\n") == MINIMAL_FULL_FORM[t]


FACT = {"statement": "s", "subject": "x", "predicate": "p"}


@pytest.mark.parametrize(
    ("data", "short", "medium"),
    [
        pytest.param(Identity(name="Ada", did="did:x"), "Ada (did:x)", "Ada (did:x)", id="did"),
        pytest.param(
            Identity(name="Ada", profile={"bb": "2", "a": "1", "ä": "3", "c": "4"}),
            "Ada",
            "Ada — profile: a=1, c=4, bb=2, ä=3",  # canonical CBOR key order: shorter first
            id="profile-order",
        ),
        pytest.param(
            Event(kind="login", outcome=Outcome.FAILURE),
            "failure login",
            "failure login",
            id="outcome-only",
        ),
        pytest.param(
            Event(kind="call", counterparty="bob"), "call with bob", "call with bob", id="with"
        ),
        pytest.param(
            Event(kind="buy", cost=Cost(asset="EUR", amount="-0.5")),
            "buy cost=-0.5EUR",
            "buy cost=-0.5EUR",
            id="cost-only",
        ),
        pytest.param(
            Event(kind="k", duration_us=0, artifacts=("a",)),
            "k",
            "k — took 0s; artifacts: 1",
            id="zero-duration",
        ),
        pytest.param(
            Event(kind="k", duration_us=1), "k", "k — took 0.000001s", id="one-microsecond"
        ),
        pytest.param(
            Pattern(statement="p", strength=0.125), "p (strength=0.12)", "p (strength=0.12)"
        ),
        pytest.param(Pattern(statement="p", coverage=0), "p (coverage=0)", "p (coverage=0)"),
        pytest.param(
            Preference(topic="t", polarity=Polarity.DO, strength=1.0),
            "prefers t (do, strength=1.00)",
            "prefers t (do, strength=1.00)",
        ),
        pytest.param(
            Fact(**FACT, confidence=0.0),
            "p(x)=s",
            "p(x)=s — confidence 0.00",
            id="zero-confidence",
        ),
        pytest.param(
            Fact(statement="Zu\u0308rich", subject="x", predicate="p"),
            "p(x)=Zürich",
            "p(x)=Zürich",
            id="nfc",
        ),
    ],
)
def test_optional_parts(data: Data, short: str, medium: str) -> None:
    assert render_short(data) == short
    assert render_medium(data) == medium


def test_forms_accept_enum_codes_and_labels() -> None:
    as_label = Preference(topic="t", polarity="dont")
    as_code = Preference(topic="t", polarity=5)
    assert render_short(as_label) == render_short(as_code) == "prefers t (dont)"


def test_rendering_a_non_record_is_a_validation_error() -> None:
    with pytest.raises(ValidationError) as info:
        render_short(Forms(short="a", medium="b"))
    assert (info.value.field, info.value.rule) == ("data", "type")


def test_forms_are_a_function_of_the_canonical_value() -> None:
    assert render_medium(Fact(**FACT, confidence=-0.0)) == "p(x)=s — confidence 0.00"
    assert render_full(Fact(**FACT, confidence=1)).endswith("confidence: 1.0")


@settings(max_examples=60)
@given(any_data(), st.data())
def test_equivalent_inputs_render_identically(data: Data, draw: st.DataObject) -> None:
    twin = draw.draw(respelled(data))
    assert render(twin) == render(data)
    assert render_full(twin) == render_full(data)


def test_time_and_duration_formats() -> None:
    when = datetime(2026, 1, 2, 3, 4, 5, 60, tzinfo=UTC)
    assert format_time(when) == "2026-01-02T03:04:05Z"
    assert format_time(when, precise=True) == "2026-01-02T03:04:05.000060Z"
    assert format_time(when.replace(microsecond=0), precise=True) == "2026-01-02T03:04:05Z"
    assert format_time(datetime(1, 1, 1, tzinfo=UTC)) == "0001-01-01T00:00:00Z"
    assert [format_seconds(us) for us in (0, 1, 1_500_000, 3_000_000, 10_000_001)] == [
        "0s",
        "0.000001s",
        "1.5s",
        "3s",
        "10.000001s",
    ]


# ---------------------------------------------------------------------------------------------
# Tokens and truncation


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("a", 1),
        ("abcd", 1),
        ("abcde", 2),
        ("é", 1),
        ("€", 1),
        ("🎉", 1),
        ("🎉a", 2),
        ("x" * 200, 50),
        ("x" * 201, 51),
    ],
)
def test_count_tokens(text: str, tokens: int) -> None:
    assert count_tokens(text) == tokens


@given(st.text(st.characters(codec="utf-8")))
def test_count_tokens_is_ceil_of_bytes_over_four(text: str) -> None:
    assert count_tokens(text) == math.ceil(len(text.encode("utf-8")) / 4)


def test_budgets() -> None:
    assert (SHORT_TOKENS, MEDIUM_TOKENS) == (50, 200)
    assert ELLIPSIS == "…" and len(ELLIPSIS.encode()) == 3


@pytest.mark.parametrize(
    ("name", "short"),
    [
        ("a" * 200, "a" * 200),  # exactly the budget: untouched
        ("a" * 201, "a" * 197 + "…"),  # one byte over: cut to 197 bytes + 3 for "…"
        ("é" * 100, "é" * 100),  # 200 bytes
        ("é" * 101, "é" * 98 + "…"),  # 197 bytes would split an "é": cut to 196
        ("€" * 66 + "ab", "€" * 66 + "ab"),  # 200 bytes
        ("€" * 67, "€" * 65 + "…"),  # 201 bytes: cut to 195
        ("🎉" * 50, "🎉" * 50),
        ("🎉" * 50 + "a", "🎉" * 49 + "…"),
        ("a" * 196 + "🎉", "a" * 196 + "🎉"),
        ("a" * 196 + "🎉a", "a" * 196 + "…"),
    ],
)
def test_short_truncates_at_exactly_the_budget(name: str, short: str) -> None:
    assert render_short(Identity(name=name)) == short
    assert len(short.encode()) <= SHORT_TOKENS * 4
    assert short.endswith(ELLIPSIS) == (len(name.encode()) > SHORT_TOKENS * 4)


def test_medium_truncates_at_exactly_the_budget() -> None:
    # the medium form of a Preference with a rationale is "<short> — rationale: <text>"
    head = "prefers t (prefer)" + SEP + "rationale: "
    room = MEDIUM_TOKENS * 4 - len(head.encode())
    fits = Preference(topic="t", polarity="prefer", rationale="r" * room)
    assert render_medium(fits) == head + "r" * room
    assert count_tokens(render_medium(fits)) == MEDIUM_TOKENS
    over = Preference(topic="t", polarity="prefer", rationale="r" * (room + 1))
    assert render_medium(over) == head + "r" * (room - 3) + ELLIPSIS
    assert len(render_medium(over).encode()) == MEDIUM_TOKENS * 4


def test_an_ellipsis_in_the_text_is_kept_when_nothing_is_cut() -> None:
    assert render_short(Identity(name="wait…")) == "wait…"
    assert truncate("a" * 197 + "…", SHORT_TOKENS) == "a" * 197 + "…"


UNICODE = st.text(
    st.sampled_from(["a", "ß", "é", "€", "語", "🎉", "\u0301", "\U0010ffff"])
    | st.characters(codec="utf-8"),
    max_size=300,
)


@settings(max_examples=200)
@given(st.text(st.characters(codec="utf-8"), max_size=300) | UNICODE, st.integers(1, 80))
@example("é" * 101, SHORT_TOKENS)
@example("🎉" * 51, SHORT_TOKENS)
@example("a" * 5, 1)
@example("🎉🎉", 1)
def test_truncate_never_splits_a_character_nor_exceeds_the_budget(text: str, tokens: int) -> None:
    out = truncate(text, tokens)
    limit = tokens * 4
    assert len(out.encode("utf-8")) <= limit
    if len(text.encode("utf-8")) <= limit:
        assert out == text
        return
    assert out.endswith(ELLIPSIS)
    kept = out[: -len(ELLIPSIS)]
    assert text.startswith(kept)  # whole characters only
    assert len(kept.encode()) <= limit - 3
    # the cut is as late as possible: the next character would not have fit
    assert len(text[: len(kept) + 1].encode()) > limit - 3


@settings(max_examples=100)
@given(any_data())
def test_rendered_forms_fit_their_budgets(data: Data) -> None:
    forms = render(data)
    assert 0 < count_tokens(forms.short) <= SHORT_TOKENS
    assert 0 < count_tokens(forms.medium) <= MEDIUM_TOKENS
    if not forms.short.endswith(ELLIPSIS) and not forms.medium.endswith(ELLIPSIS):
        assert forms.medium == forms.short or forms.medium.startswith(forms.short + SEP)
    full = render_full(data)
    assert full.startswith(f"{data.TYPE.type_name}: ")
    assert unicodedata.is_normalized("NFC", full)


def test_full_form_is_never_truncated() -> None:
    data = Identity(name="x" * 5_000)
    assert render_full(data) == "Identity: " + "x" * 5_000 + "\nname: " + "x" * 5_000


# ---------------------------------------------------------------------------------------------
# Overrides


def test_override_within_budget_is_kept_verbatim() -> None:
    forms = Forms(short="s" * 200, medium="€" * 266 + "ab")  # exactly 50 and 200 tokens
    assert check_override(forms) == forms
    odd = Forms(short="  lead and trail  ", medium="…already has an ellipsis…")
    assert check_override(odd) == odd


def test_override_is_nfc_normalised() -> None:
    assert check_override(Forms(short="Zu\u0308rich", medium="e\u0301")) == Forms(
        short="Zürich", medium="é"
    )


@pytest.mark.parametrize(
    ("forms", "field", "tokens", "budget"),
    [
        (Forms(short="s" * 201, medium="m"), "forms.short", 51, 50),
        (Forms(short="s", medium="m" * 801), "forms.medium", 201, 200),
        (Forms(short="🎉" * 51, medium="m"), "forms.short", 51, 50),
    ],
)
def test_override_over_budget_is_rejected_not_truncated(
    forms: Forms, field: str, tokens: int, budget: int
) -> None:
    with pytest.raises(ValidationError) as info:
        check_override(forms)
    err = info.value
    assert (err.field, err.rule) == (field, "budget")
    assert f"is {tokens} tokens; the budget is {budget}" in err.message
    assert "never truncated" in err.message
    assert str(err).startswith(f"{field}: ")


def test_override_errors_name_the_path() -> None:
    with pytest.raises(ValidationError) as info:
        check_override(Forms(short="s", medium="m" * 801), "version.forms")
    assert info.value.field == "version.forms.medium"


@pytest.mark.parametrize(
    ("forms", "field", "rule"),
    [
        (Forms(short="", medium="m"), "forms.short", "empty"),
        (Forms(short="s", medium=""), "forms.medium", "empty"),
        (Forms(short="\ud800", medium="m"), "forms.short", "utf8"),
        (msgspec.structs.replace(Forms(short="s", medium="m"), medium=5), "forms.medium", "empty"),
        ({"short": "s", "medium": "m"}, "forms", "type"),
    ],
)
def test_override_rejects_bad_values(forms: object, field: str, rule: str) -> None:
    with pytest.raises(ValidationError) as info:
        check_override(forms)
    assert (info.value.field, info.value.rule) == (field, rule)


def _full_reference(data: Data) -> str:
    """The full form as ``specs/forms.md`` words it, field by field (``render_full`` is faster)."""
    from collections.abc import Mapping

    from cortex.model import forms
    from cortex.model.enums import CodedEnum

    def value(v: object) -> str:
        if isinstance(v, CodedEnum):
            return v.label
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, datetime):
            return format_time(v, precise=True)
        if isinstance(v, bytes):
            return v.hex()
        if isinstance(v, Cost):
            return f"{v.amount} {v.asset}"
        if isinstance(v, Mapping):
            return forms._pairs(v)
        if isinstance(v, list | tuple):
            return ", ".join(value(x) for x in v)
        if isinstance(v, float):
            return repr(v)
        return str(v)

    short, _ = forms._templates(data)
    lines = [f"{data.TYPE.type_name}: {short(data)}"]
    for name in data.__struct_fields__:
        v = getattr(data, name)
        if v is None or v is False or (isinstance(v, tuple | dict) and not v):
            continue
        if name == "duration_us":
            lines.append(f"duration: {format_seconds(int(v))}")
            continue
        lines.append(f"{name}: {value(v)}")
    return unicodedata.normalize("NFC", "\n".join(lines))


@given(any_data())
def test_full_form_and_render_with_short_agree_with_their_definitions(data: Data) -> None:
    from cortex.model.forms import render_with_short

    full = render_full(data)
    assert full == _full_reference(data)
    forms, short = render_with_short(data)
    assert forms == render(data) == Forms(short=render_short(data), medium=render_medium(data))
    assert render_full(data, short=short) == full


# --- the byte budget with non-ASCII details (specs/forms.md: fill, NFC, then cut) -------------


@pytest.mark.parametrize("letter", ["\u00e9", "\u2014", "\U0001f600", "e\u0301"])
@pytest.mark.parametrize("short_topic", ["tea", "th\u00e9"])
def test_medium_details_in_other_scripts_are_cut_to_the_byte_budget(
    letter: str, short_topic: str
) -> None:
    budget = MEDIUM_TOKENS * 4
    for n in range(budget // 4 - 8, budget + 8):
        d = Preference(topic=short_topic, polarity=Polarity.PREFER, rationale=letter * n)
        forms = render(d)
        filled = unicodedata.normalize("NFC", f"prefers {short_topic} (prefer) \u2014 rationale: ")
        filled += unicodedata.normalize("NFC", letter * n)
        assert forms.medium == truncate(filled, MEDIUM_TOKENS) == render_medium(d)
        assert len(forms.medium.encode()) <= budget
        assert unicodedata.is_normalized("NFC", forms.medium)
        assert forms.medium.endswith(ELLIPSIS) == (len(filled.encode()) > budget)
        assert forms.short == render_short(d)


# --- render(): the stored forms at the byte budgets (specs/forms.md §2-§3: fill, NFC, cut) ----


def _cut(text: str, tokens: int) -> str:
    """specs/forms.md §2.1, written out: at most tokens*4 bytes, else whole characters within
    tokens*4 - 3 bytes and "…"."""
    if len(text.encode()) <= tokens * 4:
        return text
    kept = ""
    for ch in text:
        if len((kept + ch).encode()) > tokens * 4 - 3:
            break
        kept += ch
    return kept + ELLIPSIS


def _spec_forms(short_text: str, details: str | None) -> Forms:
    medium = short_text if details is None else short_text + SEP + details
    return Forms(
        short=_cut(unicodedata.normalize("NFC", short_text), SHORT_TOKENS),
        medium=_cut(unicodedata.normalize("NFC", medium), MEDIUM_TOKENS),
    )


@pytest.mark.parametrize("letter", ["a", "\u00e9", "\u20ac", "\U0001f389"])
@pytest.mark.parametrize("extra", [-4, -1, 0, 1, 2, 3, 4, 5])
def test_render_cuts_a_short_text_at_its_byte_budget(letter: str, extra: int) -> None:
    # an Identity without details: short = medium text = the name (§4, §5)
    n = (SHORT_TOKENS * 4) // len(letter.encode()) + extra
    for name in (letter * n, letter * (4 * n)):  # around the short budget, and the medium one
        want = _spec_forms(name, None)
        assert render(Identity(name=name)) == want
        assert want.short == render_short(Identity(name=name))
        assert want.medium == render_medium(Identity(name=name))


@pytest.mark.parametrize("letter", ["r", "\u00e9", "\u20ac"])
@pytest.mark.parametrize("extra", [-5, -4, -3, -1, 0, 1, 2, 3, 4, 5])
def test_render_cuts_a_medium_text_at_its_byte_budget(letter: str, extra: int) -> None:
    # "<short> — rationale: <text>": the separator is 3 characters and 5 bytes
    head = "prefers t (prefer)" + SEP + "rationale: "
    room = MEDIUM_TOKENS * 4 - len(head.encode())
    n = room // len(letter.encode()) + extra
    d = Preference(topic="t", polarity=Polarity.PREFER, rationale=letter * n)
    want = _spec_forms("prefers t (prefer)", "rationale: " + letter * n)
    assert render(d) == want
    assert len(render(d).medium.encode()) <= MEDIUM_TOKENS * 4
    assert render(d).medium.endswith(ELLIPSIS) == (extra > 0)


def test_render_details_joined_in_order_and_none_without_details() -> None:
    # a Fact with an object and a confidence: its details joined by "; ", in order (§5)
    d = Fact(subject="ada", predicate="home_city", object="Zürich", statement="s", confidence=0.5)
    forms = render(d)
    details = forms.medium.removeprefix(forms.short + SEP).split("; ")
    assert details[0] == "object: Zürich" and details[-1].startswith("confidence ")
    assert render(Identity(name="Ada")) == Forms(short="Ada", medium="Ada")


def test_render_takes_the_canonical_value_of_what_it_is_given() -> None:
    # forms are defined on the canonical value (§1): text NFC, strings as enum members
    built = Preference(topic="the\u0301", polarity="prefer", strength=1)  # type: ignore[arg-type]
    same = Preference(topic="th\u00e9", polarity=Polarity.PREFER, strength=1.0)
    assert (
        render(built) == render(same) == Forms(short=render_short(same), medium=render_medium(same))
    )
    assert render(built).short == "prefers th\u00e9 (prefer, strength=1.00)"


def test_count_tokens_names_the_rule_it_refuses() -> None:
    with pytest.raises(ValidationError) as e:
        count_tokens(5)  # type: ignore[arg-type]
    assert (e.value.rule, e.value.field) == ("type", "text")
    with pytest.raises(ValidationError) as e:
        count_tokens("a\ud800")
    assert (e.value.rule, e.value.field) == ("utf8", "text")


def test_a_free_map_is_written_in_canonical_key_order() -> None:
    # §3 "free map": shortest UTF-8 key first, then bytewise by key (the order of the CBOR map)
    d = Identity(name="x", profile={"bb": "1", "b": "3", "ba": "2", "\u00e9": "0"})
    assert render(d).medium == "x" + SEP + "profile: b=3, ba=2, bb=1, \u00e9=0"


def test_forms_are_defined_on_the_canonical_value() -> None:
    # §1: -0.0 is canonically 0.0; invalid data is refused, not rendered
    from cortex.model.forms import render_with_short

    d = Preference(topic="t", polarity=Polarity.PREFER, strength=-0.0)
    want = "prefers t (prefer, strength=0.00)"
    assert render(d).short == render_short(d) == want
    assert render_with_short(d)[0] == Forms(short=want, medium=want)
    assert render_full(d).splitlines()[0] == "Preference: " + want
    for f in (render, render_short, render_medium, render_full):
        with pytest.raises(ValidationError):
            f(Identity(name=""))


def test_the_full_form_writes_a_duration_in_seconds() -> None:
    # §6: duration_us is written as "duration: <seconds>s", without trailing zeros
    d = Event(kind="e", duration_us=1_500_000)
    assert render_full(d) == "Event: e\nkind: e\nduration: 1.5s"
    assert render_full(Event(kind="e", duration_us=2_000_000)).endswith("\nduration: 2s")
