"""cortex.argcheck: each check accepts what it should, returns it in the caller's form, and
refuses the rest with a ValidationError naming the argument and the rule."""

from __future__ import annotations

import math
import os
from datetime import UTC, datetime, timedelta, timezone
from enum import IntEnum
from pathlib import Path
from typing import Any

import pytest

from cortex import ValidationError, argcheck


def rule(fn: Any, *args: Any, **kw: Any) -> str:
    with pytest.raises(ValidationError) as info:
        fn(*args, **kw)
    assert info.value.field == "x", info.value
    return info.value.rule


class Small(IntEnum):
    ONE = 1


def test_integer() -> None:
    assert argcheck.integer(5, "x", 0, 10) == 5
    assert argcheck.integer(2**80, "x") == 2**80
    assert type(argcheck.integer(Small.ONE, "x")) is int
    for bad in (True, 1.0, "1", None, math.nan):
        assert rule(argcheck.integer, bad, "x") == "type"
    assert rule(argcheck.integer, -1, "x", 0) == "range"
    assert rule(argcheck.integer, 11, "x", 0, 10) == "range"


def test_number() -> None:
    assert argcheck.number(1, "x") == 1.0 and type(argcheck.number(1, "x")) is float
    assert argcheck.number(0.5, "x", 0, 1) == 0.5
    for bad in (True, "1", None, [1]):
        assert rule(argcheck.number, bad, "x") == "type"
    for bad in (10**400, math.nan, math.inf, -math.inf):
        assert rule(argcheck.number, bad, "x") == "range"
    assert rule(argcheck.number, 1.5, "x", 0, 1) == "range"


def test_text_and_unicode() -> None:
    assert argcheck.text("é", "x") == "é"
    assert argcheck.text("", "x", empty=True) == ""
    assert rule(argcheck.text, "", "x") == "empty"
    assert rule(argcheck.text, b"a", "x") == "type"
    for bad in ("\ud800", "a\udcffb", "\udfff"):
        assert rule(argcheck.text, bad, "x") == "utf8"
        assert rule(argcheck.unicode, bad, "x") == "utf8"
    assert argcheck.text("ab", "x", max_bytes=2) == "ab"
    assert rule(argcheck.text, "é" * 3, "x", max_bytes=5) == "max_bytes"


def test_items_and_texts() -> None:
    assert argcheck.items([1, 2], "x") == (1, 2)
    t = (1,)
    assert argcheck.items(t, "x") is t
    assert argcheck.items(iter([3]), "x") == (3,)
    assert argcheck.items({4}, "x") == (4,)
    for bad in (None, "ab", b"ab", {"a": 1}, 3, object()):
        assert rule(argcheck.items, bad, "x") == "type"
    assert argcheck.texts(["a"], "x") == ("a",)
    with pytest.raises(ValidationError) as info:
        argcheck.texts(["a", 1], "x")
    assert info.value.field == "x[1]"


def test_aware() -> None:
    now = datetime(2030, 1, 1, tzinfo=timezone(timedelta(hours=2)))
    assert argcheck.aware(now, "x") is now
    assert rule(argcheck.aware, datetime(2030, 1, 1), "x") == "naive"
    assert rule(argcheck.aware, "2030-01-01T00:00:00Z", "x") == "type"
    assert argcheck.aware(datetime.max.replace(tzinfo=UTC), "x").year == 9999


def test_flag_callback_mapping() -> None:
    assert argcheck.flag(False, "x") is False
    for bad in (0, 1, None, "true"):
        assert rule(argcheck.flag, bad, "x") == "type"
    assert argcheck.callback(None, "x") is None
    assert argcheck.callback(print, "x") is print
    assert rule(argcheck.callback, 5, "x") == "type"
    assert argcheck.mapping({}, "x") == {}
    assert rule(argcheck.mapping, [], "x") == "type"


def test_path(tmp_path: Path) -> None:
    assert argcheck.path(tmp_path, "x") == str(tmp_path)
    assert argcheck.path(os.fsencode(str(tmp_path)), "x") == str(tmp_path)
    for bad, why in ((None, "type"), (5, "type"), ("", "empty"), ("a\x00b", "path")):
        assert rule(argcheck.path, bad, "x") == why
    assert rule(argcheck.path, "\ud800", "x") == "path"
    assert rule(argcheck.path, b"\xff", "x") == "path"  # not UTF-8: LMDB cannot take it


def test_max_depth() -> None:
    assert argcheck.MAX_DEPTH == 64
