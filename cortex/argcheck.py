"""Argument checks at the public boundary: the types and ranges callers pass, before any work.

The API and the CLI share these: a wrong type, an out-of-range number or text that is not
valid Unicode becomes a ``ValidationError`` naming the argument and the rule, never a raw
``TypeError``, ``OverflowError`` or ``UnicodeEncodeError`` from deeper down. Each function
returns the value in the form the caller goes on with (ints stay ints, numbers become floats,
lists become tuples).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Final

from cortex.errors import ValidationError

__all__ = [
    "MAX_DEPTH",
    "aware",
    "callback",
    "flag",
    "integer",
    "items",
    "mapping",
    "number",
    "path",
    "text",
    "texts",
    "unicode",
]

MAX_DEPTH: Final = 64
"""The deepest nesting any parser of cortex accepts (JSON, CBOR bundle items, where syntax).

Records nest a few levels at most; the limit stops hostile input (``[[[[...``) from exhausting
the stack (see the specs: encoding, export and the where syntax of query).
"""


def _kind(value: object) -> str:
    return type(value).__name__


def integer(value: object, field: str, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as an int within ``[lo, hi]`` (booleans and floats are refused).

    Raises:
        ValidationError: rule ``type`` or ``range``.
    """
    if type(value) is not int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValidationError(field, "type", f"must be an integer, got {_kind(value)}")
        value = int(value)  # an int subclass (an IntEnum member): its plain value
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ValidationError(field, "range", f"must be an integer in {_bounds(lo, hi)}")
    return value


def number(value: object, field: str, lo: float | None = None, hi: float | None = None) -> float:
    """``value`` as a finite float within ``[lo, hi]`` (ints are converted, booleans refused).

    Raises:
        ValidationError: rule ``type`` or ``range`` (NaN, infinities and ints too large for a
            float are out of range).
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(field, "type", f"must be a number, got {_kind(value)}")
    try:
        x = float(value)
    except OverflowError:
        raise ValidationError(field, "range", "is too large for a float") from None
    if not math.isfinite(x):
        raise ValidationError(field, "range", f"must be a finite number, got {x!r}")
    if (lo is not None and x < lo) or (hi is not None and x > hi):
        raise ValidationError(field, "range", f"must be a number in {_bounds(lo, hi)}, got {x!r}")
    return x


def _bounds(lo: float | None, hi: float | None) -> str:
    if lo is not None and hi is not None:
        return f"[{lo}, {hi}]"
    if lo is not None:
        return f"[{lo}, ...)"
    if hi is not None:
        return f"(..., {hi}]"
    return "range"  # pragma: no cover - never called without a bound


def unicode(value: str, field: str) -> str:
    """``value`` itself, if it is valid Unicode (no lone surrogate: it has a UTF-8 encoding).

    Raises:
        ValidationError: rule ``utf8``.
    """
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValidationError(
                field, "utf8", "contains a lone surrogate; text must be valid Unicode"
            ) from None
    return value


def text(value: object, field: str, *, empty: bool = False, max_bytes: int | None = None) -> str:
    """``value`` as text: a ``str`` of valid Unicode, non-empty unless ``empty``.

    Raises:
        ValidationError: rule ``type``, ``empty``, ``utf8`` or ``max_bytes``.
    """
    if not isinstance(value, str):
        raise ValidationError(field, "type", f"must be text, got {_kind(value)}")
    if not value and not empty:
        raise ValidationError(field, "empty", "must not be empty text")
    unicode(value, field)
    if max_bytes is not None and len(value) > max_bytes // 4:
        n = len(value.encode("utf-8"))
        if n > max_bytes:
            raise ValidationError(
                field, "max_bytes", f"is {n} bytes of UTF-8; the limit is {max_bytes}"
            )
    return value


def items(value: object, field: str) -> tuple[Any, ...]:
    """``value`` as a tuple of its items: a list, tuple, set or other iterable.

    Text, bytes, mappings and ``None`` are refused: a lone string is not a list of one.

    Raises:
        ValidationError: rule ``type``.
    """
    if type(value) is tuple:
        return value
    if type(value) is list:
        return tuple(value)
    if (
        value is None
        or isinstance(value, str | bytes | bytearray | memoryview | Mapping)
        or not isinstance(value, Iterable)
    ):
        raise ValidationError(field, "type", f"must be a list, got {_kind(value)}")
    return tuple(value)


def texts(value: object, field: str, *, empty: bool = False) -> tuple[str, ...]:
    """``value`` as a tuple of texts (see ``items`` and ``text``).

    Raises:
        ValidationError: rule ``type`` (naming ``field[i]`` for an item), ``empty`` or ``utf8``.
    """
    out = items(value, field)
    for i, t in enumerate(out):
        # non-empty ASCII text passes ``text`` as it is: no call, no field name built
        if type(t) is not str or not t or not t.isascii():
            text(t, f"{field}[{i}]", empty=empty)
    return out


def aware(value: object, field: str) -> datetime:
    """``value`` as an aware ``datetime``.

    Raises:
        ValidationError: rule ``type`` or ``naive``.
    """
    if not isinstance(value, datetime):
        raise ValidationError(field, "type", f"must be a datetime, got {_kind(value)}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(field, "naive", "must be an aware datetime (with a timezone)")
    return value


def flag(value: object, field: str) -> bool:
    """``value`` itself if it is ``True`` or ``False`` (no truthy stand-ins).

    Raises:
        ValidationError: rule ``type``.
    """
    if type(value) is not bool:
        raise ValidationError(field, "type", f"must be True or False, got {_kind(value)}")
    return value


def callback(value: object, field: str) -> Callable[..., object] | None:
    """``value`` if it is ``None`` or callable (a progress callback, a clock).

    Raises:
        ValidationError: rule ``type``.
    """
    if value is not None and not callable(value):
        raise ValidationError(field, "type", f"must be callable, got {_kind(value)}")
    return value


def mapping(value: object, field: str) -> Mapping[object, object]:
    """``value`` if it is a mapping (a dict).

    Raises:
        ValidationError: rule ``type``.
    """
    if not isinstance(value, Mapping):
        raise ValidationError(field, "type", f"must be a mapping, got {_kind(value)}")
    return value


def path(value: object, field: str) -> str:
    """``value`` as a file-system path (text or ``os.PathLike``).

    It must be non-empty, without NUL and encodable as UTF-8 (LMDB takes its paths as UTF-8).

    Raises:
        ValidationError: rule ``type``, ``empty`` or ``path``.
    """
    if isinstance(value, os.PathLike):
        try:
            value = os.fspath(value)
        except TypeError:
            raise ValidationError(field, "type", "its __fspath__ returns no path") from None
    if isinstance(value, bytes):
        value = os.fsdecode(value)
    if not isinstance(value, str):
        raise ValidationError(field, "type", f"must be a path (text), got {_kind(value)}")
    if not value:
        raise ValidationError(field, "empty", "must not be empty")
    if "\x00" in value:
        raise ValidationError(field, "path", "contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(
            field, "path", f"{value!r} is not valid UTF-8 (a lone surrogate or undecodable byte)"
        ) from None
    return value
