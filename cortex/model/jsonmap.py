"""The JSON form of records: spec field names, enum labels, ISO-8601 times, hex bytes.

``to_plain`` turns a record into JSON-ready values and ``from_plain`` builds a record back from
them, naming the offending field on bad input. The mapping is lossless for every record the
store holds (``specs/export.md`` §3): a record that goes out and comes back encodes to the same
canonical bytes.
"""

from __future__ import annotations

import functools
import json
import re
import types
import typing
from datetime import datetime
from typing import Any, TypeVar

import msgspec

from cortex.argcheck import MAX_DEPTH
from cortex.errors import ValidationError
from cortex.model.enums import CodedEnum
from cortex.model.ids import MemoryId, Uri

__all__ = ["from_plain", "json_depth", "loads", "parse_time", "to_plain"]

T = TypeVar("T")

# a JSON string (skipped whole, escapes and all) or a bracket; what lies between is flat
_NESTING_STR: Any = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
_NESTING_BYTES: Any = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def json_depth(text: str | bytes, limit: int = MAX_DEPTH) -> int:
    """How deep the arrays and objects of JSON ``text`` nest, counted up to ``limit + 1``.

    Brackets inside strings do not count. Runs in one pass without recursion, so it may look
    at text ``json.loads`` would not survive.
    """
    opening = (
        (text.count("[") + text.count("{"))
        if isinstance(text, str)
        else (text.count(b"[") + text.count(b"{"))
    )
    if opening <= limit:  # the common case: too few brackets to nest too deep
        return opening
    depth = deepest = 0
    pattern = _NESTING_STR if isinstance(text, str) else _NESTING_BYTES
    for m in pattern.finditer(text):
        c = m.group()[0]
        if c in ("[", "{", 0x5B, 0x7B):
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    break
        elif c in ("]", "}", 0x5D, 0x7D):
            depth -= 1
    return deepest


def loads(text: str | bytes, field: str, max_depth: int = MAX_DEPTH) -> Any:
    """Parse JSON text whose arrays and objects nest at most ``max_depth`` levels.

    Raises:
        ValidationError: rule ``json`` (not JSON, or not UTF-8) or ``depth`` (checked before
            parsing, so deep input never reaches the recursive parser).
    """
    if json_depth(text, max_depth) > max_depth:
        raise ValidationError(
            field, "depth", f"JSON nests deeper than {max_depth} levels of arrays and objects"
        )
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise ValidationError(field, "json", f"is not valid JSON ({exc})") from None


def to_plain(value: Any) -> Any:
    """``value`` as JSON-ready builtins.

    Structs become objects with their fields in declaration order, leaving out empty optional
    values (``None``, ``false``, empty lists and maps) as the CBOR encoding does; enum members
    become their labels, times ISO-8601 text with their offset, ids and URIs their text, and
    bytes lower-case hex.

    Raises:
        TypeError: ``value`` holds something that has no JSON form.
    """
    if value is None or isinstance(value, str | bool):
        return value
    if isinstance(value, CodedEnum):  # before int: the enums are IntEnums
        return value.label
    if isinstance(value, int | float):
        return value
    if isinstance(value, msgspec.Struct):
        out = {}
        for name in value.__struct_fields__:
            v = getattr(value, name)
            if v is None or v is False or (isinstance(v, tuple | list | dict) and not v):
                continue
            out[name] = to_plain(v)
        return out
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, MemoryId | Uri):
        return str(value)
    if isinstance(value, tuple | list):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    raise TypeError(f"{type(value).__name__} has no JSON form")


def parse_time(text: object, field: str) -> datetime:
    """An ISO-8601 time with an offset (``Z`` or ``+02:00``), e.g. ``2026-11-22T09:30:00Z``.

    Raises:
        ValidationError: not ISO-8601 text, or no offset (naive times are ambiguous).
    """
    if not isinstance(text, str):
        raise ValidationError(field, "type", f"must be ISO-8601 text, got {_kind(text)}")
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValidationError(
            field, "time", f"{text!r} is not an ISO-8601 time like 2026-11-22T09:30:00+00:00"
        ) from None
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValidationError(
            field, "naive_time", f"{text!r} has no offset; add one, e.g. {text}+00:00 or {text}Z"
        )
    return when


def from_plain(tp: type[T], obj: Any, path: str) -> T:
    """Build a value of type ``tp`` (a record struct or a field type) from its JSON form.

    Enum values are given by their labels, times as ISO-8601 text with an offset, bytes as hex,
    ids as their text; an integer is accepted where a float belongs.

    Args:
        tp: the type to build, e.g. ``Fact`` or ``Head``.
        obj: the decoded JSON.
        path: the name of ``obj`` in error messages, e.g. ``data``.

    Raises:
        ValidationError: naming the field (``data.polarity``) and what is wrong with it.
    """
    value: T = _convert(tp, obj, path)
    return value


def _kind(obj: object) -> str:
    names = {dict: "an object", list: "a list", str: "text", bool: "a boolean"}
    if obj is None:
        return "null"
    return names.get(type(obj), f"a {type(obj).__name__}")


@functools.cache
def _schema(cls: type[msgspec.Struct]) -> tuple[frozenset[str], tuple[str, ...], dict[str, Any]]:
    """Field names, required field names and resolved field types (slow to work out: cached)."""
    fields = msgspec.structs.fields(cls)
    hints = typing.get_type_hints(cls)
    return (
        frozenset(f.name for f in fields),
        tuple(f.name for f in fields if f.required),
        {f.name: hints[f.name] for f in fields},
    )


def _convert(tp: Any, obj: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    if origin is types.UnionType or origin is typing.Union:
        args = typing.get_args(tp)
        if obj is None and type(None) in args:
            return None
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return _convert(rest[0], obj, path)
        raise TypeError(f"no JSON form for {tp}")  # pragma: no cover - no such record field
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return _struct(tp, obj, path)
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(obj, list):
            raise ValidationError(path, "type", f"must be a list, got {_kind(obj)}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], x, f"{path}[{i}]") for i, x in enumerate(obj))
        if len(obj) != len(args):
            raise ValidationError(path, "type", f"must be a list of {len(args)} items")
        return tuple(
            _convert(a, x, f"{path}[{i}]") for i, (a, x) in enumerate(zip(args, obj, strict=True))
        )
    if origin is dict:
        if not isinstance(obj, dict):
            raise ValidationError(path, "type", f"must be an object, got {_kind(obj)}")
        kt, vt = typing.get_args(tp)
        return {
            _convert(kt, k, f"{path}.{k}"): _convert(vt, v, f"{path}.{k}") for k, v in obj.items()
        }
    if isinstance(tp, type) and issubclass(tp, CodedEnum):
        m = tp.coerce(obj) if isinstance(obj, str) else None
        if m is None:
            raise ValidationError(path, "enum", f"must be one of {tp.labels()}, got {obj!r}")
        return m
    if tp is datetime:
        return parse_time(obj, path)
    if tp is MemoryId:
        if not isinstance(obj, str):
            raise ValidationError(path, "type", f"must be id text, got {_kind(obj)}")
        try:
            return MemoryId.parse(obj)
        except ValidationError as exc:
            raise ValidationError(path, exc.rule, exc.message) from None
    if tp is bytes:
        if not isinstance(obj, str):
            raise ValidationError(path, "type", f"must be hex text, got {_kind(obj)}")
        try:
            return bytes.fromhex(obj)
        except ValueError:
            raise ValidationError(path, "hex", "must be hex digits (two per byte)") from None
    if tp is float:
        if isinstance(obj, bool) or not isinstance(obj, int | float):
            raise ValidationError(path, "type", f"must be a number, got {_kind(obj)}")
        return float(obj)
    if tp is int:
        if isinstance(obj, bool) or not isinstance(obj, int):
            raise ValidationError(path, "type", f"must be an integer, got {_kind(obj)}")
        return obj
    if tp is bool or tp is str:
        if type(obj) is not tp:
            want = "a boolean" if tp is bool else "text"
            raise ValidationError(path, "type", f"must be {want}, got {_kind(obj)}")
        return obj
    raise TypeError(f"no JSON form for {tp}")  # pragma: no cover - no such record field


def _struct(cls: type[msgspec.Struct], obj: Any, path: str) -> Any:
    if not isinstance(obj, dict):
        raise ValidationError(path, "type", f"a {cls.__name__} must be an object, got {_kind(obj)}")
    names, required, hints = _schema(cls)
    for key in obj:
        if key not in names:
            raise ValidationError(
                f"{path}.{key}",
                "unknown_field",
                f"{cls.__name__} has no field {key!r}; its fields are {', '.join(sorted(names))}",
            )
    for name in required:
        if name not in obj:
            raise ValidationError(f"{path}.{name}", "required", "is required")
    kwargs = {k: _convert(hints[k], v, f"{path}.{k}") for k, v in obj.items()}
    return cls(**kwargs)
