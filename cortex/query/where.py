"""The ``where`` syntax: a small readable predicate language, parsed to and printed from predicates.

``parse_where('data.subject = ada and head.importance >= 5')`` returns
``And(Eq("data.subject", "ada"), Ge("head.importance", 5))``; ``format_where`` prints a
predicate back in the syntax, so ``parse_where(format_where(p)) == p``. The grammar is in
``specs/query.md`` §6::

    expr       := or_expr
    or_expr    := and_expr ("or" and_expr)*
    and_expr   := not_expr ("and" not_expr)*
    not_expr   := "not" not_expr | atom
    atom       := "(" expr ")" | "has_tag" "(" scalar ")" | field op scalar
                | field ["not"] "in" list
    op         := "=" | "==" | "!=" | "<" | "<=" | ">" | ">=" | "~"
    list       := "[" [scalar ("," scalar)* [","]] "]"
    scalar     := string | number | "true" | "false" | time | word

Keywords are case-insensitive. Parsing is pure: whether a field exists and a value fits it is
checked when the query is planned (``field_names``), the syntax only here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from cortex import argcheck
from cortex.argcheck import MAX_DEPTH
from cortex.errors import ValidationError
from cortex.model.enums import CodedEnum
from cortex.model.ids import MemoryId, Uri
from cortex.model.jsonmap import parse_time
from cortex.query.language import (
    And,
    Eq,
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
    Predicate,
    check_depth,
)

__all__ = ["format_where", "parse_where"]

_KEYWORDS: Final = frozenset({"and", "or", "not", "in", "true", "false"})
_ROOTS: Final = ("head", "version", "data")
_COMPARE: Final[dict[str, Callable[[str, Any], Predicate]]] = {
    "=": Eq,
    "==": Eq,
    "!=": Ne,
    "<": Lt,
    "<=": Le,
    ">": Gt,
    ">=": Ge,
}
_SYMBOL: Final[dict[type, str]] = {Eq: "=", Ne: "!=", Lt: "<", Le: "<=", Gt: ">", Ge: ">="}
_OPERATORS: Final = "= != < <= > >= ~ in"

# A bare word starts with a letter or "_" and runs over letters, digits and _ . : / @ # -
_WORD: Final = re.compile(r"[^\W\d][\w.:/@#-]*")
# Numbers, and the times that also start with digits (checked by parse_time)
_NUMBER: Final = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_TIME: Final = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d[0-9:.,]*(?:Z|[+-]\d\d(?::?\d\d)*)?")
_SPACE: Final = re.compile(r"\s+")
_ESCAPES: Final = {'"': '"', "'": "'", "\\": "\\", "n": "\n", "t": "\t", "r": "\r", "/": "/"}


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # word, string, number, time, op, punct, end
    text: str  # as written (for messages)
    value: Any
    pos: int  # 0-based offset


def _error(pos: int, message: str) -> ValidationError:
    return ValidationError("where", "syntax", f"at column {pos + 1}: {message}")


def _tokens(src: str) -> list[_Token]:
    out: list[_Token] = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        m = _SPACE.match(src, i)
        if m:
            i = m.end()
            continue
        if c in "\"'":
            value, end = _string(src, i)
            out.append(_Token("string", src[i:end], value, i))
            i = end
            continue
        if c in "()[],":
            out.append(_Token("punct", c, c, i))
            i += 1
            continue
        if c in "=!<>~":
            two = src[i : i + 2]
            op = two if two in ("==", "!=", "<=", ">=") else c
            if op == "!":
                raise _error(i, "'!' must be followed by '=' (not equal is !=)")
            out.append(_Token("op", op, op, i))
            i += len(op)
            continue
        m = _TIME.match(src, i)
        if m and (m.end() == n or not (src[m.end()].isalnum() or src[m.end()] in "_.:")):
            text = m.group()
            try:
                when = parse_time(text, "where")
            except ValidationError as exc:
                raise _error(i, exc.message) from None
            out.append(_Token("time", text, when, i))
            i = m.end()
            continue
        m = _NUMBER.match(src, i)
        if m:
            end = m.end()
            if end < n and (src[end].isalnum() or src[end] in "_.:-"):
                bad = re.match(r"[\w.:+-]+", src[i:]) or m
                raise _error(
                    i,
                    f"{bad.group()!r} is neither a number nor a time "
                    "(times are ISO-8601 with an offset, e.g. 2026-11-22T09:30:00Z); "
                    "quote it if it is text",
                )
            text = m.group()
            try:
                number: int | float = (
                    int(text) if re.fullmatch(r"-?\d+", text) else float(text)  # 1, -2 vs 1.5
                )
            except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
                raise _error(i, f"the number has {len(text)} digits; too long") from None
            out.append(_Token("number", text, number, i))
            i = end
            continue
        m = _WORD.match(src, i)
        if m:
            text = m.group()
            out.append(_Token("word", text, text, i))
            i = m.end()
            continue
        raise _error(i, f"unexpected {c!r}")
    out.append(_Token("end", "the end", None, n))
    return out


def _string(src: str, start: int) -> tuple[str, int]:
    quote = src[start]
    i = start + 1
    parts: list[str] = []
    while i < len(src):
        c = src[i]
        if c == quote:
            return "".join(parts), i + 1
        if c == "\\":
            nxt = src[i + 1 : i + 2]
            if nxt in _ESCAPES:
                parts.append(_ESCAPES[nxt])
                i += 2
                continue
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", src[i + 2 : i + 6]):
                parts.append(chr(int(src[i + 2 : i + 6], 16)))
                i += 6
                continue
            parts.append(c)  # any other backslash is kept, so "\d+" is the regex \d+
            i += 1
            continue
        parts.append(c)
        i += 1
    raise _error(start, f"unterminated string: add the closing {quote}")


class _Parser:
    def __init__(self, src: str) -> None:
        self.toks = _tokens(src)
        self.i = 0
        self.depth = 0  # open "(" and "not" around the current token (argcheck.MAX_DEPTH)

    def nest(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _error(self.tok.pos, f"nested deeper than {MAX_DEPTH} levels of 'not' and '('")

    @property
    def tok(self) -> _Token:
        return self.toks[self.i]

    def keyword(self, word: str) -> bool:
        t = self.tok
        if t.kind == "word" and t.text.lower() == word:
            self.i += 1
            return True
        return False

    def punct(self, c: str) -> bool:
        if self.tok.kind == "punct" and self.tok.text == c:
            self.i += 1
            return True
        return False

    def expect(self, c: str, what: str) -> None:
        if not self.punct(c):
            raise self.fail(what)

    def fail(self, expected: str) -> ValidationError:
        t = self.tok
        found = "the end" if t.kind == "end" else repr(t.text)
        return _error(t.pos, f"expected {expected}, found {found}")

    def parse(self) -> Predicate:
        if self.tok.kind == "end":
            raise self.fail("a condition, e.g. data.subject = ada")
        p = self.or_expr()
        if self.tok.kind != "end":
            raise self.fail("'and', 'or' or the end")
        return p

    def or_expr(self) -> Predicate:
        parts = [self.and_expr()]
        while self.keyword("or"):
            parts.append(self.and_expr())
        return parts[0] if len(parts) == 1 else Or(*parts)

    def and_expr(self) -> Predicate:
        parts = [self.not_expr()]
        while self.keyword("and"):
            parts.append(self.not_expr())
        return parts[0] if len(parts) == 1 else And(*parts)

    def not_expr(self) -> Predicate:
        if self.keyword("not"):
            self.nest()
            p: Predicate = Not(self.not_expr())
            self.depth -= 1
            return p
        return self.atom()

    def atom(self) -> Predicate:
        if self.punct("("):
            self.nest()
            p = self.or_expr()
            self.expect(")", "')' to close the '('")
            self.depth -= 1
            return p
        t = self.tok
        if t.kind != "word" or t.text.lower() in _KEYWORDS:
            raise self.fail("a field (head.…, version.… or data.…), has_tag(…), 'not' or '('")
        self.i += 1
        if t.text.lower() == "has_tag" and self.punct("("):
            tag = self.scalar()
            if not isinstance(tag, str):
                raise _error(self.toks[self.i - 1].pos, "has_tag takes a tag (text)")
            self.expect(")", "')' to close has_tag(")
            return HasTag(tag)
        field = t.text
        if field.split(".", 1)[0] not in _ROOTS or "." not in field or field.endswith("."):
            raise _error(
                t.pos,
                f"{field!r} is not a field: name head.<field>, version.<field> or data.<field>",
            )
        return self.comparison(field)

    def comparison(self, field: str) -> Predicate:
        t = self.tok
        if t.kind == "op":
            self.i += 1
            value_pos = self.tok.pos
            value = self.scalar()
            if t.text == "~":
                if not isinstance(value, str):
                    raise _error(value_pos, "~ takes a regular expression (text)")
                return Matches(field, value)
            return _COMPARE[t.text](field, value)
        negate = self.keyword("not")
        if self.keyword("in"):
            p: Predicate = In(field, self.list())
            return Not(p) if negate else p
        raise self.fail("'in' after 'not'" if negate else f"an operator ({_OPERATORS})")

    def list(self) -> tuple[Any, ...]:
        self.expect("[", "'[' to start the list, e.g. [active, paused]")
        items: list[Any] = []
        while not self.punct("]"):
            items.append(self.scalar())
            if not self.punct(","):
                self.expect("]", "',' or ']'")
                break
        return tuple(items)

    def scalar(self) -> Any:
        t = self.tok
        if t.kind in ("string", "number", "time"):
            self.i += 1
            return t.value
        if t.kind == "word":
            low = t.text.lower()
            if low in ("true", "false"):
                self.i += 1
                return low == "true"
            if low not in _KEYWORDS:
                self.i += 1
                return t.text
        raise self.fail("a value (a quoted string, word, number, true/false or time)")


def parse_where(text: str) -> Predicate:
    """Parse the ``where`` syntax into a predicate.

    Args:
        text: e.g. ``data.subject = "ada" and not (version.confidence < 0.5 or has_tag(old))``.

    Returns:
        The predicate (``And``/``Or`` chains are flat: ``a and b and c`` is ``And(a, b, c)``).

    Raises:
        ValidationError: field ``where``, rule ``syntax``; the message names the column and
            what was expected there.
    """
    if not isinstance(text, str):
        raise ValidationError("where", "type", f"must be text, got {type(text).__name__}")
    return _Parser(text).parse()


def format_where(p: Predicate) -> str:
    """Print a predicate in the ``where`` syntax (``parse_where`` reads it back equal).

    Raises:
        ValidationError: the predicate holds something the syntax cannot write: an empty
            ``And``/``Or``, a value that is not text, a number, a bool or an aware time
            (enum members print as their labels), or a NaN or infinite number.
    """
    check_depth(p)
    return _format(p)


def _format(p: Predicate) -> str:
    if isinstance(p, And | Or):
        if len(p.parts) < 2:
            if len(p.parts) == 1:
                return _format(p.parts[0])
            raise ValidationError("where", "empty", f"an empty {type(p).__name__}() has no syntax")
        word = " and " if isinstance(p, And) else " or "
        return word.join(_grouped(part) for part in p.parts)
    if isinstance(p, Not):
        inner = p.part
        if isinstance(inner, In):
            return f"{_field(inner.field)} not in {_list(inner.values)}"
        return f"not {_grouped(inner)}"
    if isinstance(p, HasTag):
        return f"has_tag({_scalar(p.tag)})"
    if isinstance(p, Matches):
        return f"{_field(p.field)} ~ {_scalar(p.pattern)}"
    if isinstance(p, In):
        return f"{_field(p.field)} in {_list(p.values)}"
    symbol = _SYMBOL.get(type(p))
    if symbol is not None:
        return f"{_field(p.field)} {symbol} {_scalar(p.value)}"  # type: ignore[attr-defined]
    raise ValidationError("where", "type", f"not a predicate: {p!r}")


def _grouped(p: Predicate) -> str:
    text = _format(p)
    return f"({text})" if isinstance(p, And | Or) and len(p.parts) > 1 else text


def _field(field: str) -> str:
    if not isinstance(field, str) or not _WORD.fullmatch(field) or "." not in field:
        raise ValidationError("where", "field", f"{field!r} cannot be written as a field")
    return field


def _list(values: Any) -> str:
    return "[" + ", ".join(_scalar(v) for v in argcheck.items(values, "where")) + "]"


def _scalar(value: Any) -> str:
    v: object = value
    if isinstance(v, CodedEnum):  # an enum member prints as its label
        v = v.label
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValidationError("where", "value", f"{v!r} has no syntax")
        return repr(v)
    if isinstance(v, datetime):
        if v.tzinfo is None or v.utcoffset() is None:
            raise ValidationError("where", "naive", f"{v!r}: times must be aware")
        offset = v.utcoffset()
        if offset is not None and (offset.seconds % 60 or offset.microseconds):
            v = v.astimezone(UTC)  # ISO-8601 offsets are whole minutes
        return v.isoformat()
    if isinstance(v, MemoryId | Uri):
        v = str(v)
    if not isinstance(v, str):
        raise ValidationError("where", "value", f"{v!r} has no syntax")
    if _WORD.fullmatch(v) and v.lower() not in _KEYWORDS:
        return v
    return '"' + "".join(_escape(c) for c in v) + '"'


def _escape(c: str) -> str:
    if c in '"\\':
        return "\\" + c
    if c == "\n":
        return "\\n"
    if c == "\t":
        return "\\t"
    if c == "\r":
        return "\\r"
    if ord(c) < 0x20 or ord(c) == 0x7F:
        return f"\\u{ord(c):04x}"
    return c
