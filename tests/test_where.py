"""The ``where`` syntax: parsing, printing, precedence, errors, and a round trip over trees."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import cortex
from cortex import (
    And,
    Cortex,
    Eq,
    Fact,
    Ge,
    Gt,
    HasTag,
    In,
    Le,
    Lt,
    Matches,
    Ne,
    Not,
    Or,
    Outcome,
    Predicate,
    Query,
    ValidationError,
)
from cortex.model.ids import MemoryId
from cortex.query.where import format_where, parse_where

A = Eq("data.a", 1)
B = Eq("data.b", 2)
C = Eq("data.c", 3)


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        (
            'data.subject = "ada" and head.importance >= 5',
            And(Eq("data.subject", "ada"), Ge("head.importance", 5)),
        ),
        (
            "not (version.confidence < 0.5 or data.status in [active, paused])",
            Not(Or(Lt("version.confidence", 0.5), In("data.status", ("active", "paused")))),
        ),
        ("has_tag(urgent)", HasTag("urgent")),
        ('has_tag("two words")', HasTag("two words")),
        (r'data.statement ~ "^Ada\s+lives"', Matches("data.statement", r"^Ada\s+lives")),
        (r'data.x ~ "a\.b\\\\"', Matches("data.x", r"a\.b\\")),
        ("data.x != false", Ne("data.x", False)),
        ("data.x == true", Eq("data.x", True)),
        ("data.x <= -2", Le("data.x", -2)),
        ("data.x > 1e3", Gt("data.x", 1000.0)),
        ("data.x>.5", Gt("data.x", 0.5)),
        ("data.x in []", In("data.x", ())),
        ("data.x in [1, 2.5, 'a b', ok,]", In("data.x", (1, 2.5, "a b", "ok"))),
        ("data.x not in [a]", Not(In("data.x", ("a",)))),
        ("data.obj = person:ada", Eq("data.obj", "person:ada")),
        ("data.city = Zürich", Eq("data.city", "Zürich")),
        (
            "data.uri = cortex://Fact/01HWT0D7G00000000000000001#1",
            Eq("data.uri", "cortex://Fact/01HWT0D7G00000000000000001#1"),
        ),
        ('data.s = "say \\"hi\\"\\n\\t\\u00e9\\\\"', Eq("data.s", 'say "hi"\n\té\\')),
        ("data.s = 'it''s'", None),  # two strings in a row: an error (checked below)
        (
            "version.created_at >= 2026-11-22T09:30:00+01:00",
            Ge("version.created_at", datetime(2026, 11, 22, 8, 30, tzinfo=UTC)),
        ),
        (
            "data.occurred_at < 2026-11-22T09:30:00.250Z",
            Lt("data.occurred_at", datetime(2026, 11, 22, 9, 30, 0, 250000, tzinfo=UTC)),
        ),
        ("DATA.X = 1", None),  # a field is case-sensitive and must start head/version/data
        ("data.a = 1 AND NOT data.b = 2 Or data.c = 3", Or(And(A, Not(B)), C)),
    ],
)
def test_parses(text: str, tree: Predicate | None) -> None:
    if tree is None:
        with pytest.raises(ValidationError):
            parse_where(text)
        return
    assert parse_where(text) == tree


def test_precedence_not_over_and_over_or() -> None:
    p = "data.a = 1"
    q = "data.b = 2"
    r = "data.c = 3"
    assert parse_where(f"{p} or {q} and {r}") == Or(A, And(B, C))
    assert parse_where(f"{p} and {q} or {r}") == Or(And(A, B), C)
    assert parse_where(f"not {p} and {q}") == And(Not(A), B)
    assert parse_where(f"not not {p}") == Not(Not(A))
    assert parse_where(f"not ({p} or {q})") == Not(Or(A, B))
    assert parse_where(f"{p} and ({q} or {r})") == And(A, Or(B, C))
    # chains are flat, parentheses keep their group
    assert parse_where(f"{p} and {q} and {r}") == And(A, B, C)
    assert parse_where(f"({p} and {q}) and {r}") == And(And(A, B), C)
    assert parse_where(f"(({p}))") == A


def test_times_become_aware_datetimes() -> None:
    p = parse_where("data.t = 2026-01-02T03:04:05-05:30")
    assert isinstance(p, Eq) and isinstance(p.value, datetime)
    assert p.value.utcoffset() == -timedelta(hours=5, minutes=30)


@pytest.mark.parametrize(
    ("text", "column", "needle"),
    [
        ("", 1, "expected a condition"),
        ("data.x", 7, "expected an operator (= != < <= > >= ~ in), found the end"),
        ("data.x is 1", 8, "expected an operator"),
        ("data.x = ", 10, "expected a value"),
        ("data.x = and", 10, "expected a value"),
        ("subject = ada", 1, "'subject' is not a field: name head.<field>"),
        ("data. = 1", 1, "is not a field"),
        ("data.x = 1 data.y = 2", 12, "expected 'and', 'or' or the end, found 'data.y'"),
        ("(data.x = 1", 12, "expected ')' to close the '('"),
        ("data.x = 1)", 11, "expected 'and', 'or' or the end, found ')'"),
        ("data.x ! 1", 8, "not equal is !="),
        ('data.x = "abc', 10, 'unterminated string: add the closing "'),
        ("data.x = 2026-01-01", 10, "neither a number nor a time"),
        ("data.x = 12abc", 10, "neither a number nor a time"),
        ("data.x = 2026-01-01T00:00:00", 10, "has no offset"),
        ("data.x = 2026-13-01T00:00:00Z", 10, "is not an ISO-8601 time"),
        ("data.x ~ 5", 10, "~ takes a regular expression"),
        ("data.x in 5", 11, "expected '[' to start the list"),
        ("data.x in [1 2]", 14, "expected ',' or ']'"),
        ("data.x in [[1]]", 12, "expected a value"),
        ("data.x not = 1", 12, "expected 'in' after 'not'"),
        ("has_tag(1)", 9, "has_tag takes a tag"),
        ("has_tag(a", 10, "expected ')' to close has_tag("),
        ("data.x = 1 and", 15, "expected a field"),
        ("data.x = 1 or or", 15, "expected a field"),
        ("data.x = $", 10, "unexpected '$'"),
        ("and = 1", 1, "expected a field"),
    ],
)
def test_errors_name_the_column_and_what_was_expected(text: str, column: int, needle: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_where(text)
    err = info.value
    assert (err.field, err.rule) == ("where", "syntax")
    assert err.message.startswith(f"at column {column}: "), err.message
    assert needle in err.message
    assert "\n" not in str(err)


def test_not_text_is_refused() -> None:
    with pytest.raises(ValidationError, match="must be text"):
        parse_where(5)  # type: ignore[arg-type]


def test_format_prints_readably() -> None:
    p = Not(Or(Lt("version.confidence", 0.5), In("data.status", ("active", "paused"))))
    assert format_where(p) == "not (version.confidence < 0.5 or data.status in [active, paused])"
    assert format_where(And(A, Or(B, C))) == "data.a = 1 and (data.b = 2 or data.c = 3)"
    assert format_where(Eq("data.s", "and")) == 'data.s = "and"'
    assert format_where(Eq("data.s", "a b")) == 'data.s = "a b"'
    assert format_where(Eq("data.s", "x\x01")) == 'data.s = "x\\u0001"'
    assert format_where(Eq("data.outcome", Outcome.SUCCESS)) == "data.outcome = success"
    mid = MemoryId.parse("01HWT0D7G00000000000000001")
    assert format_where(Eq("head.id", mid)) == 'head.id = "01HWT0D7G00000000000000001"'
    assert format_where(And(A)) == "data.a = 1"
    odd = timezone(timedelta(seconds=30))
    t = datetime(2026, 1, 1, tzinfo=odd)
    assert parse_where(format_where(Eq("data.t", t))) == Eq("data.t", t)


@pytest.mark.parametrize(
    "p",
    [
        And(),
        Eq("data.x", float("nan")),
        Eq("data.x", datetime(2026, 1, 1)),
        Eq("data.x", b"raw"),
        Eq("data x", 1),
        "data.x = 1",
    ],
)
def test_format_refuses_what_has_no_syntax(p: Any) -> None:
    with pytest.raises(ValidationError):
        format_where(p)


# ---------------------------------------------------------------------------------------------
# Round trip: print any tree, parse it back, get the same tree

_fields = st.builds(
    lambda root, parts: ".".join([root, *parts]),
    st.sampled_from(["head", "version", "data"]),
    st.lists(st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True), min_size=1, max_size=2),
)
_times = st.datetimes(
    min_value=datetime(1, 1, 2),
    max_value=datetime(9999, 12, 30),
    timezones=st.builds(
        timezone, st.integers(-23 * 60 - 59, 23 * 60 + 59).map(lambda m: timedelta(minutes=m))
    ),
)
_scalars = st.one_of(
    st.text(),
    st.from_regex(r"[a-zA-Z_][\w.:/@#-]{0,10}", fullmatch=True),  # bare words
    st.sampled_from(["and", "OR", "Not", "in", "true", "False", "has_tag", "", " "]),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    _times,
)
_leaves = st.one_of(
    st.builds(
        lambda c, f, v: c(f, v), st.sampled_from([Eq, Ne, Lt, Le, Gt, Ge]), _fields, _scalars
    ),
    st.builds(In, _fields, st.lists(_scalars, max_size=4).map(tuple)),
    st.builds(HasTag, st.text()),
    st.builds(Matches, _fields, st.text()),
)
_trees = st.recursive(
    _leaves,
    lambda kids: st.one_of(
        st.builds(Not, kids),
        st.lists(kids, min_size=2, max_size=4).map(lambda ps: And(*ps)),
        st.lists(kids, min_size=2, max_size=4).map(lambda ps: Or(*ps)),
    ),
    max_leaves=12,
)


@given(_trees)
@example(Not(In("data.x", ())))
@example(Not(Not(In("data.x", ("in", "not")))))
@example(And(And(A, B), Or(C, Or(A, B))))
@example(Or(And(A, B), C))
@example(Eq("data.x", -0.0))
@example(Eq("data.x", 1e16))
@example(Eq("data.x", "2026-01-01T00:00:00Z"))
@example(Eq("data.x", "\"\\'\n\r\t\x00\x7f\U0001f600"))
@example(Matches("data.x", r"\d+ (a|b)"))
@example(HasTag("urgent"))
def test_round_trip(p: Predicate) -> None:
    text = format_where(p)
    assert "\n" not in text
    assert parse_where(text) == p
    assert format_where(parse_where(text)) == text


# ---------------------------------------------------------------------------------------------
# Parsed predicates run in a real find


def test_parsed_predicates_run_in_find(tmp_path: Path) -> None:
    with Cortex.open(tmp_path / "s", actor="t") as cx:
        cx.write(Fact(statement="Ada lives in Zürich", subject="ada", predicate="home_city"))
        cx.write(
            Fact(statement="Ada codes", subject="ada", predicate="skill", confidence=0.4),
            tags=("urgent",),
            importance=8,
        )
        cx.write(Fact(statement="Bob cooks", subject="bob", predicate="skill"))

        def statements(where: str) -> list[str]:
            res = cx.find(Query(types=["Fact"], where=parse_where(where), limit=10))
            return sorted(h.memory.data.statement for h in res)  # type: ignore[union-attr]

        assert statements('data.subject = "ada" and head.importance >= 5') == [
            "Ada codes",
            "Ada lives in Zürich",
        ]
        assert statements("has_tag(urgent) or data.subject = bob") == ["Ada codes", "Bob cooks"]
        assert statements("not (data.confidence < 0.5 or data.subject in [bob])") == [
            "Ada lives in Zürich"
        ]
        assert statements(r'data.statement ~ "^A.*s$"') == ["Ada codes"]
        assert statements("version.created_at < 2000-01-01T00:00:00Z") == []
        with pytest.raises(ValidationError, match=r"data\.nope is not a data field"):
            statements("data.nope = 1")


def test_the_package_exports_parse_where() -> None:
    assert cortex.parse_where is parse_where and cortex.format_where is format_where


def test_the_spec_examples_parse_as_documented() -> None:
    spec = (Path(__file__).resolve().parent.parent / "specs" / "query.md").read_text("utf-8")
    section = spec[spec.index("## 6. The where syntax") :]
    rows = re.findall(r"^\| `(.+?)` \| `(.+?)` \|$", section, re.M)
    assert len(rows) >= 4
    names = {n: getattr(cortex, n) for n in ("And", "Or", "Not", "Eq", "Ne", "Lt", "Le", "Gt")}
    names |= {n: getattr(cortex, n) for n in ("Ge", "In", "HasTag", "Matches")}
    for text, tree in rows:
        expected = eval(tree, {"datetime": datetime, "UTC": UTC, **names})
        assert parse_where(text) == expected, text
        assert parse_where(format_where(expected)) == expected


@pytest.mark.parametrize(
    ("open_", "close"), [("not ", ""), ("(", ")"), ("not (", ")")], ids=["not", "paren", "both"]
)
def test_the_syntax_refuses_more_than_64_nested_levels(open_: str, close: str) -> None:
    """specs/query.md: the where syntax refuses more than 64 nested ``not`` and ``(``."""
    per = open_.count("not") + open_.count("(")
    fits = 64 // per
    parse_where(open_ * fits + "data.a = 1" + close * fits)
    with pytest.raises(ValidationError) as e:
        parse_where(open_ * (fits + 1) + "data.a = 1" + close * (fits + 1))
    assert e.value.rule == "syntax" and "64" in str(e.value)


def test_the_depth_limit_counts_nesting_not_groups() -> None:
    # 100 parenthesised groups side by side nest one level each
    text = " and ".join(f"(data.a{i} = 1)" for i in range(100))
    assert parse_where(text) == And(*(Eq(f"data.a{i}", 1) for i in range(100)))


def test_format_writes_values_as_the_spec_says() -> None:
    """specs/query.md §1: booleans as words, Not(In) as ``not in``, offsets that are not whole
    minutes converted to UTC, a time without an offset refused."""
    from datetime import datetime, timedelta, timezone, tzinfo

    assert format_where(Eq("data.x", True)) == "data.x = true"
    assert format_where(Ne("data.x", False)) == "data.x != false"
    assert format_where(Not(In("data.s", ("a", "b")))) == "data.s not in [a, b]"
    odd = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=1, seconds=30)))
    text = format_where(Eq("head.created_at", odd))
    assert text == "head.created_at = 2026-01-02T02:03:35+00:00"
    assert parse_where(text) == Eq("head.created_at", odd)
    whole = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=5, minutes=30)))
    assert format_where(Eq("head.created_at", whole)).endswith("T03:04:05+05:30")

    class NoOffset(tzinfo):
        def utcoffset(self, dt: datetime | None) -> timedelta | None:
            return None

    with pytest.raises(ValidationError) as e:
        format_where(Eq("head.created_at", datetime(2026, 1, 1, tzinfo=NoOffset())))
    assert e.value.rule == "naive"


@pytest.mark.parametrize("word", ["and", "or", "not", "in", "true", "false", "In", "NOT"])
def test_a_keyword_as_a_value_is_quoted(word: str) -> None:
    """specs/query.md §1: a bare word is text except a keyword (any case); as a value, a
    keyword is written as a quoted string."""
    text = format_where(Eq("data.s", word))
    assert text == f'data.s = "{word}"'
    assert parse_where(text) == Eq("data.s", word)
    if word.lower() not in ("true", "false"):
        with pytest.raises(ValidationError):
            parse_where(f"data.s = {word}")
