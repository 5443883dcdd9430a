"""Canonical CBOR for every record: a schema-driven encoder that validates as it writes.

Encoding follows RFC 8949 §4.2.1 (core deterministic encoding): definite lengths, shortest
integer and length heads, floats in the shortest IEEE width that keeps the value, map keys in
bytewise order of their encodings, no tags. Record maps have small unsigned-integer keys (the
field's position, see ``specs/format.md``); free maps have text keys. Text is NFC-normalised,
times are integer microseconds since the Unix epoch (UTC), and numbers are coerced to the
field's kind first, so ``1`` and ``1.0`` give the same bytes.

Decoding is strict: bytes that do not re-encode to themselves raise ``NonCanonicalError``;
unknown keys, wrong types and bad values raise ``CodecError``.
"""

from __future__ import annotations

import itertools
import math
import re
import struct
import unicodedata
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Generic, TypeVar

import cbor2
import msgspec

from cortex.argcheck import MAX_DEPTH
from cortex.errors import CodecError, NonCanonicalError, ValidationError
from cortex.model.enums import (
    CodedEnum,
    ConstraintSource,
    GoalStatus,
    MemoryType,
    ObjKind,
    Outcome,
    Polarity,
    Sensitivity,
    SourceKind,
    Stance,
    Strength,
    Verb,
    Visibility,
)
from cortex.model.ids import MemoryId, Uri
from cortex.model.records import (
    DATA_TYPES,
    Belief,
    Capability,
    Constraint,
    Cost,
    Data,
    Episode,
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
    VectorRef,
    Version,
)

try:
    from cortex import _speedups as _sp
except ImportError:  # pragma: no cover - installed without a C compiler
    _sp = None  # type: ignore[assignment]

_USE_SPEEDUPS: bool = _sp is not None
# an extension built from an older _speedups.c lacks it: then the Python path runs
_HAS_ASCII_TEXTS: Final = _sp is not None and hasattr(_sp, "encode_ascii_texts")
_HAS_ENCODE: Final = _sp is not None and hasattr(_sp, "encode")
_MICROS: Callable[[Any], int | None] | None = getattr(_sp, "micros", None)
"""``to_micros`` of a UTC datetime in C (None: the Python path; tests set it to compare)."""
"""Decode through the C accelerator ``cortex._speedups`` when it is built.

Only the success path is accelerated: whatever it rejects is decoded again by the Python path,
which raises exactly its own error. Tests switch this off to compare the two paths.
"""

__all__ = [
    "DATA_SCHEMA_VERSION",
    "EPISODE",
    "EPISODE_MAX_BYTES",
    "LIMITS",
    "StructCodec",
    "TrueOnlyField",
    "decode_data",
    "decode_head",
    "decode_version",
    "encode_data",
    "encode_head",
    "encode_version",
    "from_micros",
    "to_micros",
]

T = TypeVar("T")
S = TypeVar("S", bound=msgspec.Struct)

DATA_SCHEMA_VERSION: Final = 1
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_US: Final = timedelta(microseconds=1)


class LIMITS:
    """Size limits every record obeys (bytes are UTF-8 bytes after NFC normalisation)."""

    TEXT_BYTES: Final = 16_384
    """Any text field of typed data."""
    SHORT_TEXT_BYTES: Final = 256
    """Names, keys, ids and labels: actor, created_by, asset, profile keys, session ids."""
    ITEMS: Final = 256
    """Items in any list or entries in any map of typed data."""
    TAGS: Final = 16
    TAG_BYTES: Final = 64
    FRAMES: Final = 16
    OBJ_REF_BYTES: Final = 256
    PUBLIC_KEY_BYTES: Final = 1_024
    IMPORTANCE_MAX: Final = 10


class Invalid(Exception):
    """A rule broken at ``where`` (path relative to the value being encoded)."""

    def __init__(self, rule: str, message: str, where: str = "") -> None:
        super().__init__(message)
        self.rule = rule
        self.message = message
        self.where = where

    def at(self, part: str) -> Invalid:
        self.where = part + self.where
        return self


# ---------------------------------------------------------------------------------------------
# Primitive heads


def _head(major: int, n: int) -> bytes:
    mt = major << 5
    if n < 24:
        return bytes((mt | n,))
    if n < 0x100:
        return bytes((mt | 24, n))
    if n < 0x10000:
        return bytes((mt | 25,)) + n.to_bytes(2, "big")
    if n < 0x100000000:
        return bytes((mt | 26,)) + n.to_bytes(4, "big")
    return bytes((mt | 27,)) + n.to_bytes(8, "big")


_SMALL_UINT: Final = tuple(_head(0, i) for i in range(256))
_TEXT_HEAD: Final = tuple(_head(3, i) for i in range(256))
_SMALL_ARRAY_HEAD: Final = tuple(_head(4, i) for i in range(24))
_TEXT_HEAD_CHR: Final = tuple(h.decode("latin-1") for h in _TEXT_HEAD)  # a head as 1-2 chars
_pack_e = struct.Struct(">e").pack
_unpack_e = struct.Struct(">e").unpack
_pack_f = struct.Struct(">f").pack
_unpack_f = struct.Struct(">f").unpack
_pack_d = struct.Struct(">d").pack


def encode_uint(n: int) -> bytes:
    return _SMALL_UINT[n] if n < 256 else _head(0, n)


def _int(n: int) -> bytes:
    return encode_uint(n) if n >= 0 else _head(1, -1 - n)


def _float(x: float) -> bytes:
    try:
        h = _pack_e(x)
        if _unpack_e(h)[0] == x:
            return b"\xf9" + h
    except OverflowError:
        pass
    try:
        f = _pack_f(x)
        if _unpack_f(f)[0] == x:
            return b"\xfa" + f
    except OverflowError:
        pass
    return b"\xfb" + _pack_d(x)


def _nfc(s: str) -> str:
    if s.isascii() or unicodedata.is_normalized("NFC", s):
        return s
    return unicodedata.normalize("NFC", s)


def to_micros(when: datetime) -> int:
    """Microseconds since the Unix epoch for an aware datetime.

    Raises:
        ValidationError: ``when`` is naive or not a datetime.
    """
    fast = _MICROS
    if fast is not None:  # a UTC datetime (every time a record holds) in one C call
        us: int | None = fast(when)
        if us is not None:
            return us
    try:
        return TIME_FIELD.micros(when)
    except Invalid as exc:
        raise ValidationError("time", exc.rule, exc.message) from None


def from_micros(us: int) -> datetime:
    """The aware UTC datetime for microseconds since the Unix epoch."""
    return _EPOCH + timedelta(microseconds=us)


# ---------------------------------------------------------------------------------------------
# Field codecs: ``enc`` validates, normalises and returns canonical bytes; ``dec`` checks the
# Python type of a cbor2-decoded value and builds the API value. ``empty`` says the value is
# omitted from its map.


class _Field(ABC, Generic[T]):
    kind = "value"

    def json_schema(self) -> dict[str, Any]:
        """This field's rules as JSON Schema (``schema`` builds the records' schemas)."""
        raise NotImplementedError(type(self).__name__)  # pragma: no cover - every kind has one

    @abstractmethod
    def enc(self, v: Any) -> bytes:
        """Canonical bytes of ``v`` (raises ``Invalid``)."""

    @abstractmethod
    def dec(self, v: Any) -> T:
        """The API value of a cbor2-decoded ``v`` (raises ``Invalid``)."""

    def empty(self, v: Any) -> bool:
        return v is None

    def fast(self, x: str, k: int, ns: dict[str, Any]) -> list[str]:
        """Source lines that check (and convert) variable ``x`` for a generated decoder.

        The lines raise ``_Fallback`` on any doubt; the generic ``dec`` then names the error.
        """
        ns[f"F{k}"] = self
        return [f"{x} = F{k}.dec({x})"]


class _Fallback(Exception):
    """The generated decoder declined; the generic one will explain why."""


def _type_name(v: object) -> str:
    return type(v).__name__


class TextField(_Field[str]):
    kind = "text"

    def __init__(
        self, max_bytes: int = LIMITS.TEXT_BYTES, check: Callable[[str], str | None] | None = None
    ):
        self.max_bytes = max_bytes
        self.check = check

    def json_schema(self) -> dict[str, Any]:
        """This field's rules as JSON Schema (the byte limit as ``maxLength``, an upper bound)."""
        out: dict[str, Any] = {"type": "string", "maxLength": self.max_bytes}
        if self.check is _check_uri:
            out["pattern"] = "^cortex://[A-Za-z]+/[0-9A-HJKMNP-TV-Z]{26}#[1-9][0-9]*$"
            out["description"] = "a version URI: cortex://<Type>/<ULID>#<n>"
        elif self.check is _check_decimal:
            out["pattern"] = _DECIMAL.pattern.join("^$")
        return out

    def enc(self, v: Any) -> bytes:
        if type(v) is not str:
            if not isinstance(v, str):
                raise Invalid("type", f"must be text, got {_type_name(v)}")
            v = str(v)
        if not v:
            raise Invalid("empty", "must not be empty text (leave an optional field unset instead)")
        try:
            b = _nfc(v).encode("utf-8")
        except UnicodeEncodeError:
            raise Invalid("utf8", "contains a lone surrogate; text must be valid Unicode") from None
        n = len(b)
        if n > self.max_bytes:
            raise Invalid("max_bytes", f"is {n} bytes of UTF-8; the limit is {self.max_bytes}")
        if self.check is not None:
            problem = self.check(v)
            if problem:
                raise Invalid("format", problem)
        return (_TEXT_HEAD[n] if n < 256 else _head(3, n)) + b

    def dec(self, v: Any) -> str:
        if type(v) is not str:
            raise Invalid("type", f"must be text, got {_type_name(v)}")
        return v

    def fast(self, x: str, k: int, ns: dict[str, Any]) -> list[str]:
        return [f"if type({x}) is not str: raise _FB"]


_CANONICAL_URI = re.compile(
    r"cortex://(?:"
    + "|".join(t.type_name for t in MemoryType)
    + r")/[0-7][0-9A-HJKMNP-TV-Z]{25}#[1-9][0-9]{0,17}"
)


def _check_uri(s: str) -> str | None:
    if _CANONICAL_URI.fullmatch(s):  # the common case; versions < 10^18 fit in 63 bits
        return None
    try:
        Uri.parse(s)
    except ValidationError as exc:
        return f"must be a version URI: {exc}"
    return None


_DECIMAL = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]*[1-9])?")


def _check_decimal(s: str) -> str | None:
    if _DECIMAL.fullmatch(s) is None:
        return (
            "must be a decimal number like '12.5' (no exponent, no '+', no trailing zeros), "
            f"got {s!r}"
        )
    if s == "-0":
        return "must not be negative zero"
    return None


class BytesField(_Field[bytes]):
    kind = "bytes"

    def __init__(self, max_len: int, exact: int | None = None):
        self.max_len = max_len
        self.exact = exact

    def json_schema(self) -> dict[str, Any]:
        """Bytes as lower-case hex text."""
        n = self.exact if self.exact is not None else self.max_len
        return {"type": "string", "pattern": "^([0-9a-f]{2})*$", "maxLength": 2 * n}

    def enc(self, v: Any) -> bytes:
        if not isinstance(v, bytes | bytearray | memoryview):
            raise Invalid("type", f"must be bytes, got {_type_name(v)}")
        b = bytes(v)
        n = len(b)
        if self.exact is not None and n != self.exact:
            raise Invalid("length", f"must be exactly {self.exact} bytes, got {n}")
        if n > self.max_len:
            raise Invalid("max_bytes", f"is {n} bytes; the limit is {self.max_len}")
        if self.exact is None and n == 0:
            raise Invalid("empty", "must not be empty")
        return _head(2, n) + b

    def dec(self, v: Any) -> bytes:
        if type(v) is not bytes:
            raise Invalid("type", f"must be bytes, got {_type_name(v)}")
        if self.exact is not None and len(v) != self.exact:
            raise Invalid("length", f"must be exactly {self.exact} bytes, got {len(v)}")
        if len(v) > self.max_len:
            raise Invalid("max_bytes", f"is {len(v)} bytes; the limit is {self.max_len}")
        return v

    def fast(self, x: str, k: int, ns: dict[str, Any]) -> list[str]:
        if self.exact is not None:
            return [f"if type({x}) is not bytes or len({x}) != {self.exact}: raise _FB"]
        return [f"if type({x}) is not bytes or len({x}) > {self.max_len}: raise _FB"]


class IntField(_Field[int]):
    kind = "int"

    def __init__(self, lo: int = 0, hi: int = 2**63 - 1):
        self.lo = lo
        self.hi = hi

    def json_schema(self) -> dict[str, Any]:
        """An integer in its range."""
        return {"type": "integer", "minimum": self.lo, "maximum": self.hi}

    def enc(self, v: Any) -> bytes:
        if type(v) is not int:
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise Invalid("type", f"must be an integer, got {_type_name(v)}")
            if isinstance(v, float) and not v.is_integer():
                raise Invalid("type", f"must be a whole number, got {v!r}")
            v = int(v)
        if not self.lo <= v <= self.hi:
            raise Invalid("range", f"must be within [{self.lo}, {self.hi}], got {v}")
        return _int(v)

    def dec(self, v: Any) -> int:
        if type(v) is not int:
            raise Invalid("type", f"must be an integer, got {_type_name(v)}")
        if not self.lo <= v <= self.hi:
            raise Invalid("range", f"must be within [{self.lo}, {self.hi}], got {v}")
        return v

    def fast(self, x: str, k: int, ns: dict[str, Any]) -> list[str]:
        return [f"if type({x}) is not int or not {self.lo} <= {x} <= {self.hi}: raise _FB"]


class UnitField(_Field[float]):
    """A float in [0, 1] (confidence, strength)."""

    kind = "unit"

    def json_schema(self) -> dict[str, Any]:
        """A number in [0, 1]."""
        return {"type": "number", "minimum": 0, "maximum": 1}

    def enc(self, v: Any) -> bytes:
        if type(v) is not float:
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise Invalid("type", f"must be a number in [0, 1], got {_type_name(v)}")
            try:
                v = float(v)
            except OverflowError:  # an int past the float range
                raise Invalid(
                    "range", "must be within [0, 1], got an int too large for a float"
                ) from None
        if not 0.0 <= v <= 1.0:  # also rejects NaN
            raise Invalid("range", f"must be within [0, 1], got {v!r}")
        return _float(v + 0.0)  # -0.0 becomes 0.0: equal values, equal bytes

    def dec(self, v: Any) -> float:
        if type(v) is not float:
            raise Invalid("type", f"must be a float, got {_type_name(v)}")
        if not 0.0 <= v <= 1.0:
            raise Invalid("range", f"must be within [0, 1], got {v!r}")
        return v

    def fast(self, x: str, k: int, ns: dict[str, Any]) -> list[str]:
        return [f"if type({x}) is not float or not 0.0 <= {x} <= 1.0: raise _FB"]


class _Bool(_Field[bool]):
    kind = "bool"

    def json_schema(self) -> dict[str, Any]:
        """A boolean."""
        return {"type": "boolean"}

    def enc(self, v: Any) -> bytes:
        if type(v) is not bool:
            raise Invalid("type", f"must be true or false, got {_type_name(v)}")
        return b"\xf5" if v else b"\xf4"

    def dec(self, v: Any) -> bool:
        if type(v) is not bool:
            raise Invalid("type", f"must be a boolean, got {_type_name(v)}")
        return v

    def fast(self, x: str, k: int, ns: dict[str, Any]) -> list[str]:
        return [f"if type({x}) is not bool: raise _FB"]

    def empty(self, v: Any) -> bool:
        return v is None or v is False


class _Time(_Field[datetime]):
    kind = "time"
    _MIN: Final = (datetime(1, 1, 1, tzinfo=UTC) - _EPOCH) // _ONE_US
    _MAX: Final = (datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC) - _EPOCH) // _ONE_US

    # the last time converted: one write converts the same ``now`` for the head, the version,
    # the index keys and the journal (datetimes are immutable, and the reference held here keeps
    # the object alive, so identity means the same value)
    _last: tuple[Any, int] = (None, 0)

    def micros(self, v: Any) -> int:
        last = self._last
        if last[0] is v:
            return last[1]
        if not isinstance(v, datetime):
            raise Invalid("type", f"must be a datetime, got {_type_name(v)}")
        if v.tzinfo is None or v.utcoffset() is None:
            raise Invalid(
                "naive_time",
                "is a naive datetime; pass an aware one, e.g. datetime.now(timezone.utc)",
            )
        try:
            us: int = (v - _EPOCH) // _ONE_US
        except OverflowError:
            raise Invalid("range", "is outside the years 1..9999 in UTC") from None
        # an offset can push a local year-1 or year-9999 time outside them in UTC, and ``dec``
        # rejects what lies outside: never write bytes that cannot be read back
        if not self._MIN <= us <= self._MAX:
            raise Invalid("range", "is outside the years 1..9999 in UTC")
        self._last = (v, us)
        return us

    def json_schema(self) -> dict[str, Any]:
        """An ISO-8601 time with an offset."""
        return {"type": "string", "format": "date-time"}

    def enc(self, v: Any) -> bytes:
        return _int(self.micros(v))

    def dec(self, v: Any) -> datetime:
        if type(v) is not int:
            raise Invalid("type", f"must be integer microseconds, got {_type_name(v)}")
        if not self._MIN <= v <= self._MAX:
            raise Invalid("range", "is outside the years 1..9999")
        return _EPOCH + timedelta(microseconds=v)

    def fast(self, x: str, k: int, ns: dict[str, Any]) -> list[str]:
        ns["_EPOCH"], ns["_td"] = _EPOCH, timedelta
        return [
            f"if type({x}) is not int or not {self._MIN} <= {x} <= {self._MAX}: raise _FB",
            f"{x} = _EPOCH + _td(0, 0, {x})",
        ]


class EnumField(_Field[CodedEnum]):
    kind = "enum"

    def __init__(self, cls: type[CodedEnum]):
        self.cls = cls

    def json_schema(self) -> dict[str, Any]:
        """One of the enum's labels (never its integer code)."""
        return {"type": "string", "enum": [m.label for m in self.cls]}

    def enc(self, v: Any) -> bytes:
        m = self.cls.coerce(v)
        if m is None:
            raise Invalid("enum", f"must be one of {self.cls.labels()}, got {v!r}")
        return _SMALL_UINT[m.value]

    def dec(self, v: Any) -> CodedEnum:
        m = self.cls.coerce(v) if type(v) is int else None
        if m is None:
            raise Invalid("enum", f"{v!r} is not a {self.cls.__name__} code")
        return m

    def fast(self, x: str, k: int, ns: dict[str, Any]) -> list[str]:
        ns[f"E{k}"] = {m.value: m for m in self.cls}
        return [f"{x} = E{k}.get({x}) if type({x}) is int else None", f"if {x} is None: raise _FB"]


class _TrueOnly(_Bool):
    """A flag whose ``false`` is the field's absence (``Head.has_counters``).

    An explicit ``false`` is not the canonical encoding and every decoder refuses it, the read
    path's trusted one included.
    """

    def dec(self, v: Any) -> bool:
        if v is not True:
            raise Invalid("type", "must be true (false is written as the field's absence)")
        return True

    def fast(self, x: str, k: int, ns: dict[str, Any]) -> list[str]:
        return [f"if {x} is not True: raise _FB"]


TrueOnlyField: Final = _TrueOnly
"""A flag whose ``false`` is the field's absence, for records of other modules
(``VectorRecord.float16``): the same class, so the C decoder knows it."""


class LevelField(EnumField):
    """A ``Sensitivity`` other than ``internal``: ``internal`` is the field's absence."""

    def __init__(self) -> None:
        super().__init__(Sensitivity)

    def enc(self, v: Any) -> bytes:
        if self.cls.coerce(v) is Sensitivity.INTERNAL:
            raise Invalid("enum", "internal is written as the field's absence, never as a code")
        return super().enc(v)

    def dec(self, v: Any) -> CodedEnum:
        m = super().dec(v)
        if m is Sensitivity.INTERNAL:
            raise Invalid("enum", "internal is written as the field's absence, never as a code")
        return m

    def fast(self, x: str, k: int, ns: dict[str, Any]) -> list[str]:
        ns[f"E{k}"] = {m.value: m for m in self.cls if m is not Sensitivity.INTERNAL}
        return [f"{x} = E{k}.get({x}) if type({x}) is int else None", f"if {x} is None: raise _FB"]


class IdField(_Field[MemoryId]):
    kind = "id"

    def json_schema(self) -> dict[str, Any]:
        """A memory id: 26 characters of Crockford base32 (a ULID)."""
        return {"type": "string", "pattern": "^[0-9A-HJKMNP-TV-Z]{26}$"}

    def enc(self, v: Any) -> bytes:
        if not isinstance(v, MemoryId):
            raise Invalid("type", f"must be a MemoryId, got {_type_name(v)}")
        return b"\x50" + v.bytes

    def dec(self, v: Any) -> MemoryId:
        if type(v) is not bytes or len(v) != 16:
            raise Invalid("type", "must be 16 bytes")
        return MemoryId(v)

    def fast(self, x: str, k: int, ns: dict[str, Any]) -> list[str]:
        ns["MemoryId"] = MemoryId
        return [f"if type({x}) is not bytes or len({x}) != 16: raise _FB", f"{x} = MemoryId({x})"]


def _ascii_texts(v: list[Any] | tuple[Any, ...], max_chars: int) -> bytes | None:
    """The CBOR array of ``v`` when every item is a str of 1..max_chars ASCII characters.

    ``None`` otherwise (the generic encoder then checks and explains). ``max_chars`` <= 255:
    each item's head is then ``_TEXT_HEAD``, one or two bytes, which latin-1 keeps as they are.
    The C accelerator's ``encode_ascii_texts`` returns the same.
    """
    if not v:
        return b"\x80"
    if set(map(type, v)) != {str} or not "".join(v).isascii():
        return None
    lens = [*map(len, v)]
    if min(lens) < 1 or max(lens) > max_chars:
        return None
    th = _TEXT_HEAD_CHR
    return _head(4, len(v)) + "".join([th[len(x)] + x for x in v]).encode("latin-1")


class ListField(_Field[tuple[Any, ...]]):
    kind = "list"

    def __init__(self, item: _Field[Any], max_items: int = LIMITS.ITEMS, unique: bool = False):
        self.item = item
        self.max_items = max_items
        self.unique = unique
        # plain text items that are short ASCII need no per-item call (the common case)
        self._ascii_max = (
            min(item.max_bytes, 255) if isinstance(item, TextField) and item.check is None else 0
        )
        # record items (frames) go through the record's generated encoder (StructCodec is
        # defined below; it marks itself with ``kind = "record"``)
        self._struct_item: Callable[[Any], bytes] | None = (
            getattr(item, "_fast_enc", None) if item.kind == "record" and max_items < 24 else None
        )

    def json_schema(self) -> dict[str, Any]:
        """An array of its items, within its length (and unique when the rule says so)."""
        out: dict[str, Any] = {
            "type": "array",
            "items": self.item.json_schema(),
            "maxItems": self.max_items,
        }
        if self.unique:
            out["uniqueItems"] = True
        return out

    def enc(self, v: Any) -> bytes:
        m = self._ascii_max
        if m and type(v) in (tuple, list) and len(v) <= self.max_items:
            # tags and the lexical document's terms are such lists on every write
            fast = (
                _sp.encode_ascii_texts(v, m)
                if _USE_SPEEDUPS and _HAS_ASCII_TEXTS
                else _ascii_texts(v, m)
            )
            if fast is not None and (not self.unique or len(set(v)) == len(v)):
                return fast
        elif self._struct_item and type(v) is tuple and len(v) <= self.max_items:
            # a head's frames: each through the record's generated encoder
            try:
                parts = [*map(self._struct_item, v)]
            except _Fallback:
                pass
            else:
                if not self.unique or len(set(parts)) == len(parts):
                    return _SMALL_ARRAY_HEAD[len(parts)] + b"".join(parts)
        return self._enc_generic(v)

    def _enc_generic(self, v: Any) -> bytes:
        if not isinstance(v, list | tuple):
            raise Invalid("type", f"must be a list, got {_type_name(v)}")
        n = len(v)
        if n > self.max_items:
            raise Invalid("max_items", f"has {n} items; the limit is {self.max_items}")
        enc = self.item.enc
        parts = [_head(4, n)]
        for i, x in enumerate(v):
            try:
                parts.append(enc(x))
            except Invalid as exc:
                raise exc.at(f"[{i}]") from None
        if self.unique and len(set(parts)) != n + 1:
            seen: set[bytes] = set()
            for i, p in enumerate(parts[1:]):
                if p in seen:
                    raise Invalid("duplicate", f"item {v[i]!r} appears twice").at(f"[{i}]")
                seen.add(p)
        return b"".join(parts)

    def fast(self, x: str, k: int, ns: dict[str, Any]) -> list[str]:
        if not isinstance(self.item, TextField):
            return super().fast(x, k, ns)
        return [
            f"if type({x}) is not list or len({x}) > {self.max_items}: raise _FB",
            f"for _i in {x}:",
            "    if type(_i) is not str: raise _FB",
            f"{x} = tuple({x})",
        ]

    def dec(self, v: Any) -> tuple[Any, ...]:
        if type(v) is not list:
            raise Invalid("type", f"must be an array, got {_type_name(v)}")
        dec = self.item.dec
        out = []
        for i, x in enumerate(v):
            try:
                out.append(dec(x))
            except Invalid as exc:
                raise exc.at(f"[{i}]") from None
        return tuple(out)

    def empty(self, v: Any) -> bool:
        # only None and an empty list or tuple are left out: another falsy value (0, "")
        # is a wrong type, and enc says so
        return v is None or (type(v) in (list, tuple) and not v)


class _Pair(_Field[tuple[int, int]]):
    """A ``(start, end)`` span of non-negative integers with start <= end."""

    kind = "span"
    _int = IntField()

    def json_schema(self) -> dict[str, Any]:
        """Two non-negative integers."""
        return {
            "type": "array",
            "items": {"type": "integer", "minimum": 0},
            "minItems": 2,
            "maxItems": 2,
        }

    def enc(self, v: Any) -> bytes:
        if not isinstance(v, list | tuple) or len(v) != 2:
            raise Invalid("type", "must be a (start, end) pair")
        a, b = self._int.enc(v[0]), self._int.enc(v[1])
        if int(v[0]) > int(v[1]):
            raise Invalid("range", f"start {v[0]} is after end {v[1]}")
        return b"\x82" + a + b

    def dec(self, v: Any) -> tuple[int, int]:
        if type(v) is not list or len(v) != 2:
            raise Invalid("type", "must be an array of two integers")
        a, b = self._int.dec(v[0]), self._int.dec(v[1])
        if a > b:
            raise Invalid("range", f"start {a} is after end {b}")
        return (a, b)


class _TextMap(_Field[dict[str, str]]):
    """A free map of text keys to text values, keys sorted by their encoded bytes."""

    kind = "map"

    def __init__(self, key: TextField, value: TextField, max_items: int = LIMITS.ITEMS):
        self.key = key
        self.value = value
        self.max_items = max_items

    def json_schema(self) -> dict[str, Any]:
        """An object of text values, within its size."""
        return {
            "type": "object",
            "additionalProperties": self.value.json_schema(),
            "propertyNames": self.key.json_schema(),
            "maxProperties": self.max_items,
        }

    def enc(self, v: Any) -> bytes:
        if not isinstance(v, Mapping):
            raise Invalid("type", f"must be a mapping of text to text, got {_type_name(v)}")
        n = len(v)
        if n > self.max_items:
            raise Invalid("max_items", f"has {n} entries; the limit is {self.max_items}")
        items = []
        for k, x in v.items():
            try:
                kb = self.key.enc(k)
            except Invalid as exc:
                raise exc.at(f"[{k!r}] (key)") from None
            try:
                items.append((kb, self.value.enc(x)))
            except Invalid as exc:
                raise exc.at(f"[{k!r}]") from None
        items.sort()
        for a, b in itertools.pairwise(items):
            if a[0] == b[0]:
                raise Invalid("duplicate", "two keys are equal after NFC normalisation")
        return _head(5, n) + b"".join(k + x for k, x in items)

    def dec(self, v: Any) -> dict[str, str]:
        if type(v) is not dict:
            raise Invalid("type", f"must be a map, got {_type_name(v)}")
        out = {}
        for k, x in v.items():
            try:
                out[self.key.dec(k)] = self.value.dec(x)
            except Invalid as exc:
                raise exc.at(f"[{k!r}]") from None
        return out

    def empty(self, v: Any) -> bool:
        return v is None or (isinstance(v, Mapping) and not v)


def _speedup_spec(f: _Field[Any]) -> tuple[Any, ...] | None:
    """How ``cortex._speedups`` decodes a value of field ``f``; ``None`` if it cannot.

    Exact types only: a subclass may have rules the C decoder does not know. The C decoder
    mirrors the rules of each field's ``dec`` and ``enc`` (it accepts exactly the bytes that
    decode and re-encode to themselves): a rule added to a field here must be added there too
    (tests/test_speedups.py compares the two paths on generated, mutated and random input).
    """
    t = type(f)
    if t is TextField:
        assert isinstance(f, TextField)
        if f.check is None:
            return ("text", f.max_bytes, 0, ())
        if f.check is _check_uri:
            return ("text", f.max_bytes, 1, tuple(m.type_name.encode() for m in MemoryType))
        if f.check is _check_decimal:
            return ("text", f.max_bytes, 2, ())
        return None
    if t is BytesField:
        assert isinstance(f, BytesField)
        return ("bytes", f.max_len, f.exact)
    if t is IntField:
        assert isinstance(f, IntField)
        return ("int", f.lo, f.hi)
    if t is UnitField:
        return ("unit",)
    if t is _Bool or t is _TrueOnly:  # the C decoder refuses an explicit false (a default)
        return ("bool",)
    if t is _Time:
        return ("time", _Time._MIN, _Time._MAX)
    if t is EnumField:
        assert isinstance(f, EnumField)
        return ("enum", {m.value: m for m in f.cls}, {m.label: m.value for m in f.cls})
    if t is LevelField:  # internal is the field's absence: its code is no value
        assert isinstance(f, LevelField)
        levels = [m for m in f.cls if m is not Sensitivity.INTERNAL]
        return ("enum", {m.value: m for m in levels}, {m.label: m.value for m in levels})
    if t is IdField:
        # the slot of the raw bytes: the C decoder fills a new MemoryId's as ``_trusted`` does
        return ("id", MemoryId._trusted, MemoryId, vars(MemoryId)["_b"])
    if t is _Pair:
        assert isinstance(f, _Pair)
        return ("pair", f._int.lo, f._int.hi)
    if t is ListField:
        assert isinstance(f, ListField)
        item = _speedup_spec(f.item)
        return None if item is None else ("list", item, f.max_items, f.unique)
    if t is _TextMap:
        assert isinstance(f, _TextMap)
        key, value = _speedup_spec(f.key), _speedup_spec(f.value)
        if key is None or value is None:
            return None
        return ("map", key, value, f.max_items)
    if t is StructCodec or t is FormsCodec or t is VersionFormsCodec:
        assert isinstance(f, StructCodec)
        return None if f._plan is None else ("record", f._plan)
    return None


class StructCodec(_Field[S]):
    """Encodes one record struct as a map with unsigned-integer keys.

    Field ``i`` of ``fields`` gets key ``i + 1``; a top-level record (``schema_version`` set)
    also carries key 0 = its schema version. Fields absent from the map take their defaults.

    Args:
        cls: the frozen struct type.
        fields: ``(attribute name, field codec)`` in key order; must name every attribute.
        schema_version: the value of key 0, or ``None`` for a nested record without key 0.
    """

    kind = "record"
    data_attr: str | None = None
    """The attribute of the enclosing record this nested record refers into (a version's forms
    into its data, ``VersionFormsCodec``), or ``None``."""

    def __init__(
        self,
        cls: type[S],
        fields: Sequence[tuple[str, _Field[Any]]],
        schema_version: int | None = None,
        *,
        memo_last: bool = False,
    ) -> None:
        names = [n for n, _ in fields]
        # a write encodes the same nested value twice (the forms of the head and the version):
        # the last one encoded is remembered by identity (only for records of immutable fields;
        # the reference held keeps the object alive, so identity means the same value)
        self.memo_last = memo_last
        self._last_enc: tuple[Any, bytes] = (None, b"")
        declared = list(cls.__struct_fields__)
        if sorted(names) != sorted(declared):
            raise TypeError(f"codec for {cls.__name__} names {names}, struct has {declared}")
        self.cls = cls
        self.name = cls.__name__
        self.schema_version = schema_version
        required = set(declared) - _omittable(cls)
        self.fields = tuple(
            (i + 1, encode_uint(i + 1), n, f, n in required) for i, (n, f) in enumerate(fields)
        )
        self._by_key = {k: (n, f) for k, _, n, f, _ in self.fields}
        self._required = tuple((k, n) for k, _, n, _, r in self.fields if r)
        self._sv = b"\x00" + encode_uint(schema_version) if schema_version is not None else b""
        self._fast = self._compile()
        self._fast_encoder = self._compile_enc()
        self._plan: Any = self._speedup_plan()

    def _speedup_plan(self) -> Any:
        """The ``cortex._speedups.Plan`` of this record, or ``None``.

        ``None`` when the extension is not built, or a field is of a kind the C decoder does
        not know: such records always take the Python path.
        """
        if _sp is None:
            return None
        declared = tuple(self.cls.__struct_fields__)
        struct_fields = {f.name: f for f in msgspec.structs.fields(self.cls)}
        fields = []
        for k, _, name, f, req in self.fields:
            spec = _speedup_spec(f)
            if spec is None:
                return None
            d = struct_fields[name]
            factory = None if d.default_factory is msgspec.NODEFAULT else d.default_factory
            default = None if d.default is msgspec.NODEFAULT else d.default
            # absent is canonical only where the encoder omits the default
            absent_ok = not req and f.empty(factory() if factory is not None else default)
            fields.append((k, declared.index(name), absent_ok, default, factory, spec))
        try:
            return _sp.Plan(self.cls, declared, self.schema_version, tuple(fields))
        except (TypeError, ValueError, OverflowError):  # pragma: no cover - schema tables
            return None

    def _compile(self) -> Callable[[Any], S]:
        """Generate a straight-line decoder for this record (the read path's hot loop).

        It performs the same checks as the generic decoder but raises ``_Fallback`` instead
        of explaining; ``dec`` then re-runs the generic one for the message.
        """
        ns: dict[str, Any] = {"_FB": _Fallback, "Invalid": Invalid, "cls": self.cls}
        allowed = {k for k, *_ in self.fields}
        if self.schema_version is not None:
            allowed.add(0)
        ns["ALLOWED"] = frozenset(allowed)
        defaults = {f.name: f for f in msgspec.structs.fields(self.cls)}
        src = ["def fast(m):", "  try:"]
        src.append("    if type(m) is not dict or not m.keys() <= ALLOWED: raise _FB")
        if self.schema_version is not None:
            src.append(
                f"    if type(m.get(0)) is not int or m[0] != {self.schema_version}: raise _FB"
            )
        args = []
        for k, _, name, f, req in self.fields:
            x = f"v{k}"
            check = f.fast(x, k, ns)
            src.append(f"    {x} = m.get({k})")
            if req:
                src.append(f"    if {x} is None: raise _FB")
                src.extend("    " + line for line in check)
            else:
                d = defaults[name]
                if d.default_factory is not msgspec.NODEFAULT:
                    ns[f"D{k}"] = d.default_factory
                    default = f"D{k}()"
                else:
                    ns[f"D{k}"] = d.default
                    default = f"D{k}"
                src.append(f"    if {x} is None: {x} = {default}")
                src.append("    else:")
                src.extend("      " + line for line in check)
            args.append(f"{name}={x}")
        src.append(f"    return cls({', '.join(args)})")
        src.append("  except Invalid: raise _FB from None")
        exec("\n".join(src), ns)  # generated from the fixed schema tables in this module
        fast: Callable[[Any], S] = ns["fast"]
        return fast

    def _compile_enc(self) -> Callable[[Any], bytes]:
        """Generate a straight-line encoder for this record (the write path's hot loop).

        Common cases (ASCII text, small ints, enum members, floats in range) are inlined;
        anything else goes through the field's own ``enc``. On any doubt it raises
        ``_Fallback`` and ``enc`` re-runs the generic encoder, which names the error.
        """
        ns: dict[str, Any] = {
            "_FB": _Fallback,
            "Invalid": Invalid,
            "cls": self.cls,
            "SU": _SMALL_UINT,
            "TH": _TEXT_HEAD,
            "_head": _head,
            "_int": _int,
            "_float": _float,
            "MemoryId": MemoryId,
            "SV": self._sv,
            "MH": tuple(bytes((0xA0 | i,)) for i in range(24)),
            "J": b"".join,
        }
        src = ["def fast(v):", "  try:", "    if type(v) is not cls: raise _FB", "    p = [SV]"]
        ap = "p.append"
        for k, kb, name, f, req in self.fields:
            ns[f"K{k}"], ns[f"F{k}"] = kb, f
            x = f"x{k}"
            src.append(f"    {x} = v.{name}")
            if isinstance(f, ListField):
                empty = f"{x} is None or (type({x}) in (list, tuple) and not {x})"
            elif isinstance(f, _TextMap):
                empty = f"{x} is None or (type({x}) is dict and not {x})"
            elif isinstance(f, _Bool):
                empty = f"{x} is None or {x} is False"
            else:
                empty = f"{x} is None"
            body: list[str]
            if isinstance(f, TextField) and f.check is None:
                body = [
                    f"if type({x}) is str and {x}.isascii() and 0 < len({x}) < 256"
                    f" and len({x}) <= {f.max_bytes}:",
                    f"  {ap}(K{k}); {ap}(TH[len({x})] + {x}.encode())",
                    f"else: {ap}(K{k}); {ap}(F{k}.enc({x}))",
                ]
            elif isinstance(f, IntField):
                body = [
                    f"if type({x}) is int and {f.lo} <= {x} <= {f.hi}:",
                    f"  {ap}(K{k}); {ap}(SU[{x}] if 0 <= {x} < 256 else _int({x}))",
                    f"else: {ap}(K{k}); {ap}(F{k}.enc({x}))",
                ]
            elif isinstance(f, EnumField):
                level = isinstance(f, LevelField)  # internal is the field's absence
                members = [m for m in f.cls if not (level and m is Sensitivity.INTERNAL)]
                codes: dict[Any, bytes] = {m.value: _SMALL_UINT[m.value] for m in members}
                codes.update({m.label: _SMALL_UINT[m.value] for m in members})
                ns[f"E{k}"] = codes
                ns[f"ET{k}"] = frozenset({int, str, f.cls})  # not bool, float, Decimal, ...
                body = [
                    f"b = E{k}.get({x}) if type({x}) in ET{k} else None",
                    "if b is None: raise _FB",
                    f"{ap}(K{k}); {ap}(b)",
                ]
            elif isinstance(f, UnitField):
                body = [
                    f"if type({x}) is float and 0.0 <= {x} <= 1.0:",
                    f"  {ap}(K{k}); {ap}(_float({x} + 0.0))",
                    f"else: {ap}(K{k}); {ap}(F{k}.enc({x}))",
                ]
            elif isinstance(f, _Time):
                body = [f"{ap}(K{k}); {ap}(_int(F{k}.micros({x})))"]
            elif isinstance(f, _Bool):
                body = [f"if {x} is not True: raise _FB", f"{ap}(K{k}); {ap}(b'\\xf5')"]
            elif isinstance(f, IdField):
                body = [
                    f"if type({x}) is not MemoryId: raise _FB",
                    f"{ap}(K{k}); {ap}(b'\\x50' + {x}.bytes)",
                ]
            elif isinstance(f, StructCodec) and f.data_attr is not None:  # forms into data (17)
                body = [f"{ap}(K{k}); {ap}(F{k}.enc_in({x}, v.{f.data_attr}))"]
            elif isinstance(f, StructCodec):
                body = [f"{ap}(K{k}); {ap}(F{k}._fast_enc({x}))"]
            else:
                body = [f"{ap}(K{k}); {ap}(F{k}.enc({x}))"]
            if req:
                src.append(f"    if {empty}: raise _FB")
                src.extend("    " + line for line in body)
            else:
                src.append(f"    if not ({empty}):")
                src.extend("      " + line for line in body)
        extra = 1 if self.schema_version is not None else 0
        src.append(f"    n = (len(p) - 1) // 2 + {extra}")
        src.append("    return (MH[n] if n < 24 else _head(5, n)) + J(p)")
        src.append("  except Invalid: raise _FB from None")
        exec("\n".join(src), ns)  # generated from the fixed schema tables in this module
        fast: Callable[[Any], bytes] = ns["fast"]
        return fast

    def _fast_enc(self, v: Any) -> bytes:
        if self.memo_last:
            last = self._last_enc
            if last[0] is v:
                return last[1]
            b = self._fast_encoder(v)
            self._last_enc = (v, b)
            return b
        return self._fast_encoder(v)

    def json_schema(self) -> dict[str, Any]:
        """The record as a JSON Schema object: every field's rules, the required ones named."""
        return {
            "type": "object",
            "properties": {n: f.json_schema() for _, _, n, f, _ in self.fields},
            "required": [n for _, _, n, _, r in self.fields if r],
            "additionalProperties": False,
        }

    def enc(self, v: Any) -> bytes:
        """Encode a struct (internal: raises ``Invalid``; use ``encode``)."""
        try:
            return self._fast_encoder(v)
        except _Fallback:
            return self._enc_generic(v)

    def _enc_generic(self, v: Any) -> bytes:
        if type(v) is not self.cls:
            raise Invalid("type", f"must be a {self.name}, got {_type_name(v)}")
        parts = [self._sv]
        for _, kb, name, f, req in self.fields:
            x = getattr(v, name)
            if f.empty(x):
                if req:
                    raise Invalid("required", "is required").at(f".{name}")
                continue
            try:
                parts.append(kb)
                if isinstance(f, StructCodec) and f.data_attr is not None:
                    assert isinstance(f, VersionFormsCodec)
                    parts.append(f.enc_in(x, getattr(v, f.data_attr)))
                else:
                    parts.append(f.enc(x))
            except Invalid as exc:
                raise exc.at(f".{name}") from None
        return _head(5, (len(parts) - 1) // 2 + (self.schema_version is not None)) + b"".join(parts)

    def dec(self, v: Any) -> S:
        """Build a struct from decoded CBOR (internal: raises ``Invalid``; use ``decode``)."""
        try:
            return self._fast(v)
        except _Fallback:
            return self._dec_generic(v)

    def fast(self, x: str, k: int, ns: dict[str, Any]) -> list[str]:
        """Nested records call their own generated decoder."""
        ns[f"F{k}"] = self
        return [f"{x} = F{k}._fast({x})"]

    def _dec_generic(self, v: Any) -> S:
        if type(v) is not dict:
            raise Invalid("type", f"a {self.name} must be a map, got {_type_name(v)}")
        kw = {}
        sv = self.schema_version
        for k, x in v.items():
            if type(k) is int and k == 0 and sv is not None:
                if x != sv or type(x) is not int:
                    raise Invalid("schema_version", f"{self.name} schema version {x!r} is not {sv}")
                continue
            spec = self._by_key.get(k) if type(k) is int else None
            if spec is None:
                raise Invalid("unknown_key", f"{self.name} has no field with key {k!r}")
            name, f = spec
            try:
                if isinstance(f, StructCodec) and f.data_attr is not None:
                    assert isinstance(f, VersionFormsCodec)
                    kw[name] = f.dec_in(x, v.get(f.data_key))
                else:
                    kw[name] = f.dec(x)
            except Invalid as exc:
                raise exc.at(f".{name}") from None
        if sv is not None and 0 not in v:
            raise Invalid("schema_version", f"{self.name} lacks its schema version (key 0)")
        for k, name in self._required:
            if name not in kw:
                raise Invalid("required", f"{self.name} lacks required field {name} (key {k})")
        return self.cls(**kw)

    # -- public entry points -------------------------------------------------------------

    def encode(self, value: S, path: str) -> bytes:
        """Validate and encode ``value``.

        Raises:
            ValidationError: naming the field (under ``path``) and the rule it breaks.
        """
        if _USE_SPEEDUPS and _HAS_ENCODE and self._plan is not None:
            fast: bytes | None = _sp.encode(self._plan, value)  # the common case, in C
            if fast is not None:
                return fast
        try:
            return self.enc(value)
        except Invalid as exc:
            raise ValidationError(path + exc.where, exc.rule, exc.message) from None

    def decode_trusted(self, data: bytes) -> S:
        """Decode bytes this code wrote (their checksum vouches for them), as fast as possible.

        The C decoder, when built, is strict and still the fastest path; otherwise the
        generated Python decoder runs without the re-encoding check.

        Raises:
            Invalid, cbor2.CBORDecodeError, ValueError, TypeError: the bytes are not a record.
        """
        if _USE_SPEEDUPS and self._plan is not None:
            try:
                fast: S = _sp.decode(self._plan, data)
            except _sp.Reject:
                pass
            else:
                return fast
        return self.dec(cbor2.loads(data))

    def decode(self, data: bytes, path: str) -> S:
        """Decode canonical bytes strictly.

        Raises:
            CodecError: not CBOR, or wrong keys, types or values.
            NonCanonicalError: valid, but not the canonical encoding.
        """
        if _USE_SPEEDUPS and self._plan is not None:
            try:
                fast: S = _sp.decode(self._plan, data)
            except _sp.Reject:
                pass  # not canonical, or not valid: the Python path says which and why
            else:
                return fast
        obj = _loads(data, path)
        try:
            value = self.dec(obj)
        except Invalid as exc:
            raise CodecError(f"{path}{exc.where}: {exc.message}") from None
        try:
            again = self.enc(value)
        except Invalid as exc:
            raise CodecError(f"{path}{exc.where}: {exc.message}") from None
        if again != data:
            # the generated decoder is lenient where the bytes are never ours (a null for an
            # absent field, a key 1.0 for 1): the generic one classifies those as CodecError
            try:
                self._dec_generic(obj)
            except Invalid as exc:
                raise CodecError(f"{path}{exc.where}: {exc.message}") from None
            raise NonCanonicalError(f"{path}: {explain_noncanonical(data)}")
        return value


def _omittable(cls: type[msgspec.Struct]) -> set[str]:
    """Fields left out of the map when empty: those whose default is None, (), {} or False.

    A field with any other default (visibility, importance, confidence) is always written,
    so ``None`` there is an error, not an omission.
    """
    return {
        f.name
        for f in msgspec.structs.fields(cls)
        if f.default_factory is not msgspec.NODEFAULT
        or (f.default is not msgspec.NODEFAULT and f.default in (None, (), False))
    }


def _loads(data: bytes, path: str) -> Any:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise CodecError(f"{path}: expected bytes, got {_type_name(data)}")
    try:
        return cbor2.loads(data)
    except cbor2.CBORDecodeError as exc:
        raise CodecError(f"{path}: not valid CBOR ({exc})") from exc
    except (ValueError, TypeError, OverflowError, RecursionError, MemoryError) as exc:
        raise CodecError(f"{path}: not valid CBOR ({exc})") from exc


# ---------------------------------------------------------------------------------------------
# The extent of one untrusted CBOR item, checked without recursion (bundles)


def cbor_extent(
    data: bytes,
    pos: int = 0,
    max_depth: int = MAX_DEPTH,
    texts: list[tuple[int, int, int]] | None = None,
) -> int:
    """The end offset of the CBOR item at ``pos``, after checking its structure.

    The item must be well formed with definite lengths, hold no tags (so no shared references,
    cycles, big numbers or MIME messages) and nest at most ``max_depth`` arrays and maps. The
    walk keeps its own stack, so no input can exhaust Python's. Values (UTF-8 of text, the
    shortest forms) are left to the decoder and the canonical check. ``texts``, when given,
    receives ``(at, body, length)`` of every text item met (``data_texts``).

    Raises:
        CodecError: naming the offset and what is wrong.
    """
    n = len(data)
    remaining = [1]  # items still to read at each open level
    while remaining:
        if remaining[-1] == 0:
            remaining.pop()
            continue
        remaining[-1] -= 1
        if pos >= n:
            raise CodecError(f"CBOR cut short at offset {pos}")
        at = pos
        ib = data[pos]
        major, info = ib >> 5, ib & 31
        if info < 24:
            arg, pos = info, pos + 1
        elif info <= 27:
            size = 1 << (info - 24)
            if pos + 1 + size > n:
                raise CodecError(f"CBOR cut short at offset {pos}")
            arg = int.from_bytes(data[pos + 1 : pos + 1 + size], "big")
            pos += 1 + size
        elif info == 31:
            raise CodecError(f"indefinite-length CBOR item at offset {pos}")
        else:
            raise CodecError(f"reserved CBOR additional information {info} at offset {pos}")
        if major in (2, 3):
            if arg > n - pos:
                raise CodecError(f"CBOR string at offset {pos} runs past the end")
            if major == 3 and texts is not None:
                texts.append((at, pos, arg))
            pos += arg
        elif major in (4, 5):
            if arg:
                if len(remaining) > max_depth:
                    raise CodecError(
                        f"CBOR nested deeper than {max_depth} arrays and maps at offset {pos}"
                    )
                count = arg if major == 4 else 2 * arg
                if count > n - pos:  # every item takes at least one byte
                    raise CodecError(f"CBOR array or map at offset {pos} runs past the end")
                remaining.append(count)
        elif major == 6:
            raise CodecError(f"CBOR tag {arg} at offset {pos}: bundles and records hold no tags")
    return pos


# ---------------------------------------------------------------------------------------------
# Diagnosis of non-canonical input (the slow path, only on failure)


def explain_noncanonical(data: bytes) -> str:
    """Say what makes ``data`` non-canonical: the first offending item and its offset."""
    try:
        end = _Walker(bytes(data)).item(0)
    except _Explained as exc:
        return str(exc)
    if end != len(data):
        return f"{len(data) - end} bytes of trailing data after the item at offset {end}"
    return "does not re-encode to the same bytes"


class _Explained(Exception):
    pass


class _Walker:
    def __init__(self, b: bytes) -> None:
        self.b = b

    def _arg(self, pos: int) -> tuple[int, int, int, int]:
        b = self.b
        if pos >= len(b):
            raise _Explained(f"truncated at offset {pos}")
        ib = b[pos]
        major, info = ib >> 5, ib & 31
        if info < 24:
            return major, info, info, pos + 1
        if info == 31:
            if major in (2, 3, 4, 5):
                raise _Explained(f"indefinite-length item at offset {pos}")
            if major == 7:
                raise _Explained(f"stray break byte at offset {pos}")
        if info > 27:
            raise _Explained(f"reserved additional information {info} at offset {pos}")
        size = 1 << (info - 24)
        if major == 7:
            return major, info, 0, pos + 1 + size
        n = int.from_bytes(b[pos + 1 : pos + 1 + size], "big")
        minimal = 24 if size == 1 else 1 << (8 * (size >> 1))
        if n < minimal:
            raise _Explained(f"non-shortest integer or length head at offset {pos}")
        return major, info, n, pos + 1 + size

    def item(self, pos: int) -> int:
        major, info, n, nxt = self._arg(pos)
        if major in (0, 1):
            return nxt
        if major in (2, 3):
            if major == 3:
                try:
                    s = self.b[nxt : nxt + n].decode("utf-8")
                except UnicodeDecodeError:
                    raise _Explained(f"invalid UTF-8 in text at offset {pos}") from None
                if not unicodedata.is_normalized("NFC", s):
                    raise _Explained(f"text at offset {pos} is not NFC-normalised")
            return nxt + n
        if major == 4:
            for _ in range(n):
                nxt = self.item(nxt)
            return nxt
        if major == 5:
            prev: bytes | None = None
            seen = set()
            for _ in range(n):
                kstart = nxt
                nxt = self.item(nxt)
                key = self.b[kstart:nxt]
                if key in seen:
                    raise _Explained(f"duplicate map key at offset {kstart}")
                if prev is not None and key < prev:
                    raise _Explained(f"map keys out of order at offset {kstart}")
                seen.add(key)
                prev = key
                nxt = self.item(nxt)
            return nxt
        if major == 6:
            raise _Explained(f"tag {n} at offset {pos}; tags are not allowed")
        if info in (25, 26, 27):
            x = struct.unpack({25: ">e", 26: ">f", 27: ">d"}[info], self.b[pos + 1 : nxt])[0]
            if math.isnan(x) or _float(x) != self.b[pos:nxt]:
                raise _Explained(f"float at offset {pos} is not in its shortest form")
        return nxt


# ---------------------------------------------------------------------------------------------
# The record schemas (normative; mirrored in specs/format.md)

_text = TextField()
_short = TextField(LIMITS.SHORT_TEXT_BYTES)
_uri = TextField(LIMITS.SHORT_TEXT_BYTES, _check_uri)
_uris = ListField(_uri, unique=True)
_texts = ListField(_text)
TIME_FIELD = _Time()
_unit = UnitField()
_uint64 = IntField()
_str_map = _TextMap(_short, _text)

COST = StructCodec(Cost, [("asset", _short), ("amount", TextField(64, _check_decimal))])
_ELLIPSIS: Final = "\u2026".encode()


def _text_body(item: bytes) -> bytes:
    """The UTF-8 of a text item ``TextField.enc`` returned (its CBOR head dropped)."""
    info = item[0] & 31
    return item[1 + (0 if info < 24 else 1 << (info - 24)) :]


class FormsCodec(StructCodec[Forms]):
    """Forms in their compact encoding (store format 15, ``specs/format.md``).

    The medium form is always key 2. The short form is key 1 (its text) unless its UTF-8 is
    the medium's first ``n`` bytes — key 4 = ``n`` — or the medium's first ``n`` bytes then
    ``…`` — key 3 = ``n``; exactly one of 1, 3, 4 is present, and the encoder always takes the
    first of 4, 3, 1 that applies, so each value has one encoding. ``n`` must end on a
    character of the medium; the decoder refuses anything else.
    """

    def __init__(self) -> None:
        super().__init__(Forms, [("short", _text), ("medium", _text)], memo_last=True)

    def _speedup_plan(self) -> Any:
        if _sp is None:
            return None
        try:
            return _sp.Plan(self.cls, ("short", "medium"), None, self._plan_fields(), forms=1)
        except (TypeError, ValueError, OverflowError):  # pragma: no cover - an old extension
            return None

    def _plan_fields(self) -> tuple[Any, ...]:
        spec = _speedup_spec(_text)
        return ((1, 0, True, None, None, spec), (2, 1, False, None, None, spec))

    def _compile(self) -> Callable[[Any], Forms]:
        dec = self._dec_map

        def fast(m: Any) -> Forms:
            try:
                return dec(m)
            except Invalid:
                raise _Fallback from None

        return fast

    def _compile_enc(self) -> Callable[[Any], bytes]:
        return self._enc_forms

    def enc(self, v: Any) -> bytes:
        return self._enc_forms(v)

    def _enc_generic(self, v: Any) -> bytes:
        return self._enc_forms(v)

    def _dec_generic(self, v: Any) -> Forms:
        return self._dec_map(v)

    def _enc_forms(self, v: Any) -> bytes:
        short, m = self._parts(v)
        if short[0] == 1:
            return b"\xa2" + short + b"\x02" + m
        return b"\xa2\x02" + m + short

    def _parts(self, v: Any) -> tuple[bytes, bytes]:
        """The short form's key and value, and the medium form's text item (raises ``Invalid``)."""
        if type(v) is not Forms:
            raise Invalid("type", f"must be a Forms, got {_type_name(v)}")
        try:
            s = _text.enc(v.short)
        except Invalid as exc:
            raise exc.at(".short") from None
        try:
            m = _text.enc(v.medium)
        except Invalid as exc:
            raise exc.at(".medium") from None
        sb, mb = _text_body(s), _text_body(m)
        if mb.startswith(sb):
            return b"\x04" + encode_uint(len(sb)), m
        if sb.endswith(_ELLIPSIS) and mb.startswith(sb[:-3]):
            return b"\x03" + encode_uint(len(sb) - 3), m
        return b"\x01" + s, m

    def _dec_map(self, v: Any) -> Forms:
        if type(v) is not dict:
            raise Invalid("type", f"a Forms must be a map, got {_type_name(v)}")
        medium = v.get(2)
        if medium is None:
            raise Invalid("required", "Forms lacks required field medium (key 2)")
        if type(medium) is not str:
            raise Invalid("type", f"must be text, got {_type_name(medium)}").at(".medium")
        rest = [k for k in v if k != 2]
        for k in rest:
            if type(k) is not int or k not in (1, 3, 4):
                raise Invalid("unknown_key", f"Forms has no field with key {k!r}")
        if len(rest) != 1:
            raise Invalid(
                "short",
                "Forms must hold its short form exactly once: as text (key 1), or as a length "
                f"of the medium form (key 3 with '…', key 4 without); keys given: {sorted(rest)}",
            )
        k = rest[0]
        x = v[k]
        if k == 1:
            if type(x) is not str:
                raise Invalid("type", f"must be text, got {_type_name(x)}").at(".short")
            return Forms(short=x, medium=medium)
        mb = medium.encode("utf-8", "surrogatepass")
        lo = 1 if k == 4 else 0
        if type(x) is not int or not lo <= x <= len(mb):
            raise Invalid(
                "short_length",
                f"the short form's length {x!r} (key {k}) must be an integer in {lo}.."
                f"{len(mb)}, within the medium form's UTF-8",
            ).at(".short")
        if x < len(mb) and mb[x] & 0xC0 == 0x80:
            raise Invalid(
                "short_length",
                f"the short form's length {x} (key {k}) ends inside a character of the medium "
                "form; it must fall on a UTF-8 character boundary",
            ).at(".short")
        short = mb[:x].decode("utf-8", "surrogatepass")
        return Forms(short=short + "\u2026" if k == 3 else short, medium=medium)


FORMS = FormsCodec()
MEDIUM_REF_MIN: Final = 12
"""The fewest UTF-8 bytes a data text a version's medium form refers to holds (format 18).

A reference ``[prefix, at, suffix]`` costs at most 11 bytes more than the text it stands for
saves from the literal medium (``specs/format.md`` Forms), so from 12 bytes on it is shorter."""
_REF_DEPTH: Final = 32


def data_texts(data: bytes) -> list[tuple[int, int, int]]:
    """The text items of ``data``: ``(at, body, length)`` for each, in encoding order.

    ``at`` is the offset of the item's head, ``body`` of its UTF-8, ``length`` its byte count.
    Empty when ``data`` is not one well-formed CBOR item (definite lengths, no tags, at most 32
    nested arrays and maps, no trailing bytes): such data has no text a medium form may refer
    to (``specs/format.md`` Forms). Every item, map keys included, at any depth.
    """
    out: list[tuple[int, int, int]] = []
    try:
        end = cbor_extent(data, 0, _REF_DEPTH, out)
    except CodecError:
        return []
    return out if end == len(data) else []


def _occurs(m: bytes, t: bytes) -> int:
    """The first offset where ``t`` is in ``m`` on character boundaries of ``m``, or -1."""
    i = m.find(t)
    while i >= 0:
        j = i + len(t)
        if m[i] & 0xC0 != 0x80 and (j == len(m) or m[j] & 0xC0 != 0x80):
            return i
        i = m.find(t, i + 1)
    return -1


def medium_ref(data: bytes, medium: bytes) -> tuple[int, int, int] | None:
    """The reference a version's medium form takes: ``(at, i, length)``, or ``None``.

    Among the text items of ``data`` (``data_texts``) of at least ``MEDIUM_REF_MIN`` bytes
    that occur in ``medium`` (its UTF-8) on character boundaries: the longest, the first in
    ``data`` of equal length; ``at`` is its head's offset in ``data``, ``i`` where it first so
    occurs in ``medium``, ``length`` its byte count.
    """
    best: tuple[int, int, int] | None = None
    for at, body, length in data_texts(data):
        if length < MEDIUM_REF_MIN or length > len(medium):
            continue
        if best is not None and length <= best[2]:
            continue
        i = _occurs(medium, data[body : body + length])
        if i >= 0:
            best = (at, i, length)
    return best


class VersionFormsCodec(FormsCodec):
    """A version's forms (store format 18): the medium form may refer into the version's data.

    The medium form is key 2 (its text) unless a text of the version's data occurs in it
    (``medium_ref``); then key 5 = ``[prefix, at, suffix]``: the medium is ``prefix``, the
    text of the data item at offset ``at``, then ``suffix``. The short form keeps keys 1, 3, 4,
    relative to the medium's text. Heads keep ``FormsCodec`` (format 15): they have no data.
    """

    def __init__(self) -> None:
        super().__init__()
        self.data_key = 4  # the Version's data key; it precedes forms (key 11) in the map
        self.data_attr: str | None = "data"

    def _speedup_plan(self) -> Any:
        if _sp is None:
            return None
        try:
            return _sp.Plan(self.cls, ("short", "medium"), None, self._plan_fields(), forms=2)
        except (TypeError, ValueError, OverflowError):  # pragma: no cover - an old extension
            return None

    def fast(self, x: str, k: int, ns: dict[str, Any]) -> list[str]:
        ns[f"F{k}"] = self
        return [f"{x} = F{k}.dec_in({x}, m.get({self.data_key}))"]

    def enc_in(self, v: Any, data: Any) -> bytes:
        """The forms ``v`` of a version whose data is ``data`` (raises ``Invalid``)."""
        short, m = self._parts(v)
        ref = medium_ref(data, _text_body(m)) if type(data) is bytes else None
        if ref is None:
            if short[0] == 1:
                return b"\xa2" + short + b"\x02" + m
            return b"\xa2\x02" + m + short
        at, i, length = ref
        mb = _text_body(m)
        return b"".join(
            (
                b"\xa2",
                short,
                b"\x05\x83",
                _head(3, i),
                mb[:i],
                encode_uint(at),
                _head(3, len(mb) - i - length),
                mb[i + length :],
            )
        )

    def dec_in(self, v: Any, data: Any) -> Forms:
        """Forms from decoded CBOR ``v`` in a version whose data is ``data`` (raises Invalid)."""
        if type(v) is dict and 5 in v:
            if 2 in v:
                raise Invalid(
                    "medium",
                    "Forms must hold its medium form once: as text (key 2) or as a reference "
                    "into the version's data (key 5), not both",
                )
            rest = dict(v)
            rest[2] = self._referred(rest.pop(5), data)
            return self._dec_map(rest)
        return self._dec_map(v)

    def _referred(self, ref: Any, data: Any) -> str:
        if type(ref) is not list or len(ref) != 3:
            raise Invalid(
                "medium_ref", "the medium form's reference (key 5) must be [prefix, at, suffix]"
            ).at(".medium")
        prefix, at, suffix = ref
        if type(prefix) is not str or type(suffix) is not str:
            raise Invalid(
                "medium_ref", "the medium form's reference (key 5) has text prefix and suffix"
            ).at(".medium")
        if type(data) is not bytes:
            raise Invalid(
                "medium_ref",
                "the medium form refers into the version's data (key 5), which is absent",
            ).at(".medium")
        item = next((t for t in data_texts(data) if t[0] == at), None) if type(at) is int else None
        if item is None:
            raise Invalid(
                "medium_ref",
                f"the medium form's reference (key 5) names offset {at!r}, which is not where "
                "a text item of the version's data begins",
            ).at(".medium")
        _, body, length = item
        try:
            text = data[body : body + length].decode("utf-8")
        except UnicodeDecodeError:
            raise Invalid("medium_ref", f"the data's text at offset {at} is not UTF-8").at(
                ".medium"
            ) from None
        return prefix + text + suffix


VERSION_FORMS = VersionFormsCodec()
FORMS_V14: Final = StructCodec(Forms, [("short", _text), ("medium", _text)])
"""Forms as store formats 1-14 and bundles of those formats encode them: ``{1: short, 2:
medium}`` always. Read only where records of those formats arrive: bundles and salvage."""
FRAME_REF = StructCodec(
    FrameRef,
    [
        ("verb", EnumField(Verb)),
        ("obj_kind", EnumField(ObjKind)),
        ("obj_ref", TextField(LIMITS.OBJ_REF_BYTES)),
    ],
)
TOMBSTONE = StructCodec(
    Tombstone, [("reason", _text), ("at", TIME_FIELD), ("by", _short), ("purged_at", TIME_FIELD)]
)
SOURCE_REF = StructCodec(
    SourceRef, [("session_id", _short), ("message_ids", ListField(_short)), ("span", _Pair())]
)
PROVENANCE = StructCodec(
    Provenance,
    [
        ("source", EnumField(SourceKind)),
        ("derived_from", _uris),
        ("sources", ListField(SOURCE_REF)),
    ],
)
VECTOR_REF = StructCodec(
    VectorRef, [("model_id", _short), ("dim", IntField(1, 65_536)), ("version", IntField(1))]
)

_DATA_FIELDS: dict[type[Any], list[tuple[str, _Field[Any]]]] = {
    Identity: [
        ("name", _text),
        ("did", _short),
        ("roles", ListField(_short)),
        ("profile", _str_map),
        ("public_keys", ListField(BytesField(LIMITS.PUBLIC_KEY_BYTES))),
    ],
    Fact: [
        ("statement", _text),
        ("subject", _text),
        ("predicate", _text),
        ("object", _text),
        ("source", EnumField(SourceKind)),
        ("observed_at", TIME_FIELD),
        ("confidence", _unit),
    ],
    Preference: [
        ("topic", _text),
        ("polarity", EnumField(Polarity)),
        ("strength", _unit),
        ("rationale", _text),
        ("subject", _text),
    ],
    Belief: [
        ("statement", _text),
        ("subject", _text),
        ("stance", EnumField(Stance)),
        ("confidence", _unit),
        ("evidence_for", _uris),
        ("evidence_against", _uris),
    ],
    Event: [
        ("kind", _short),
        ("outcome", EnumField(Outcome)),
        ("counterparty", _short),
        ("cost", COST),
        ("duration_us", _uint64),
        ("occurred_at", TIME_FIELD),
        ("summary", _text),
        ("intent_ref", _short),
        ("artifacts", _texts),
    ],
    Goal: [
        ("statement", _text),
        ("status", EnumField(GoalStatus)),
        ("horizon", TIME_FIELD),
        ("success_criteria", _texts),
        ("subgoals", _uris),
        ("subject", _text),
    ],
    Constraint: [
        ("statement", _text),
        ("polarity", EnumField(Polarity)),
        ("strength", EnumField(Strength)),
        ("source", EnumField(ConstraintSource)),
        ("trigger", _text),
    ],
    Capability: [
        ("subject", _text),
        ("capability", _text),
        ("verified", _Bool()),
        ("parameters", _str_map),
        ("last_observed", TIME_FIELD),
    ],
    Pattern: [
        ("statement", _text),
        ("strength", _unit),
        ("coverage", _uint64),
        ("derived_from", _uris),
    ],
}

DATA_CODECS: dict[MemoryType, StructCodec[Any]] = {
    t: StructCodec(cls, _DATA_FIELDS[cls], DATA_SCHEMA_VERSION) for t, cls in DATA_TYPES.items()
}
_CODEC_OF_CLASS: Final[dict[type, StructCodec[Any]]] = {c.cls: c for c in DATA_CODECS.values()}

TAGS = ListField(TextField(LIMITS.TAG_BYTES), max_items=LIMITS.TAGS, unique=True)
FRAMES = ListField(FRAME_REF, max_items=LIMITS.FRAMES, unique=True)


def _head_fields(forms: StructCodec[Forms]) -> list[tuple[str, _Field[Any]]]:
    return [
        ("id", IdField()),
        ("type", EnumField(MemoryType)),
        ("current_version", IntField(1)),
        ("actor_scope", _short),
        ("visibility", EnumField(Visibility)),
        ("importance", IntField(0, LIMITS.IMPORTANCE_MAX)),
        ("tags", TAGS),
        ("frames", FRAMES),
        ("tombstone", TOMBSTONE),
        ("created_at", TIME_FIELD),
        ("last_updated_at", TIME_FIELD),
        ("embedding_ref", VECTOR_REF),
        ("forms", forms),
        ("sensitivity", LevelField()),
        ("has_counters", _TrueOnly()),
    ]


def _version_fields(forms: StructCodec[Forms]) -> list[tuple[str, _Field[Any]]]:
    return [
        ("id", IdField()),
        ("version", IntField(1)),
        ("type", EnumField(MemoryType)),
        ("data", BytesField(2**31)),
        ("hash", BytesField(32, exact=32)),
        ("created_at", TIME_FIELD),
        ("created_by", _short),
        ("expires_at", TIME_FIELD),
        ("confidence", _unit),
        ("provenance", PROVENANCE),
        ("forms", forms),
        ("forms_override", _Bool()),
        ("valid_from", TIME_FIELD),
        ("valid_until", TIME_FIELD),
    ]


HEAD = StructCodec(Head, _head_fields(FORMS), schema_version=1)
VERSION = StructCodec(Version, _version_fields(VERSION_FORMS), schema_version=1)
VERSION_V17: Final = StructCodec(Version, _version_fields(FORMS), schema_version=1)
"""Versions as store formats 15-17 encode them (``FORMS``, the medium form always text): old
bundles, salvage, the migration to format 18."""
HEAD_V14: Final = StructCodec(Head, _head_fields(FORMS_V14), schema_version=1)
"""Heads as store formats 1-14 encode them (``FORMS_V14``): old bundles, salvage, the migrations
to those formats."""
VERSION_V14: Final = StructCodec(Version, _version_fields(FORMS_V14), schema_version=1)
"""Versions as store formats 1-14 encode them (``FORMS_V14``): old bundles and salvage."""


EPISODE_MAX_BYTES: Final = 64 * 1024 * 1024
"""The longest episode content, in UTF-8 bytes (64 MiB)."""
_SOURCE = re.compile(r"[a-z][a-z0-9_.-]{0,63}")


def _check_source(s: str) -> str | None:
    if _SOURCE.fullmatch(s) is None:
        return (
            "must be a short lower-case name like 'chat', 'mcp', 'upload', 'api' or 'tool' "
            f"(letters, digits, '_', '.', '-'; at most 64), got {s!r}"
        )
    return None


EPISODE = StructCodec(
    Episode,
    [
        ("id", IdField()),
        ("content", BytesField(EPISODE_MAX_BYTES)),
        ("hash", BytesField(32, exact=32)),
        ("occurred_at", TIME_FIELD),
        ("created_at", TIME_FIELD),
        ("created_by", _short),
        ("source", TextField(64, _check_source)),
        ("channel", _short),
        ("labels", ListField(TextField(LIMITS.TAG_BYTES), max_items=LIMITS.TAGS, unique=True)),
        ("visibility", EnumField(Visibility)),
        ("media_type", TextField(128)),
        ("chunks", ListField(_Pair(), max_items=2**31)),
        ("chunker", IntField(0, 255)),
        ("purged_at", TIME_FIELD),
        ("sensitivity", LevelField()),
    ],
    schema_version=1,
)


# ---------------------------------------------------------------------------------------------
# Entry points


def data_codec(data: object) -> StructCodec[Any]:
    """The codec for a typed data value.

    Raises:
        ValidationError: ``data`` is not one of the nine typed data structs.
    """
    codec = _CODEC_OF_CLASS.get(type(data))
    if codec is None:
        raise ValidationError(
            "data",
            "type",
            f"must be one of the nine memory types (Fact, Event, ...), got {_type_name(data)}",
        )
    return codec


def encode_data(data: Data) -> bytes:
    """Validate typed data and return its canonical CBOR (the bytes that are hashed).

    Raises:
        ValidationError: naming the field (``data.<name>``) and the rule it breaks.
    """
    codec = data_codec(data)
    try:
        return codec.enc(data)
    except Invalid as exc:
        raise ValidationError("data" + exc.where, exc.rule, exc.message) from None


def decode_data(type_: MemoryType, data: bytes) -> Data:
    """Decode canonical typed data of ``type_`` strictly.

    Raises:
        CodecError: the bytes are not a valid record of that type.
        NonCanonicalError: the bytes are valid but not canonical.
    """
    try:
        codec = DATA_CODECS.get(type_)
    except TypeError:  # unhashable: no type at all
        codec = None
    if codec is None:
        raise CodecError(f"unknown memory type code {type_!r:.100}")
    value: Data = codec.decode(data, "data")
    return value


def decode_data_trusted(type_: MemoryType, data: bytes) -> Data:
    """Decode typed data already known to be canonical (its hash was just checked).

    Skips the re-encoding check of ``decode_data``; every type and value check still runs.
    """
    codec = DATA_CODECS[type_]
    if _USE_SPEEDUPS and codec._plan is not None:
        try:
            fast: Data = _sp.decode(codec._plan, data)
        except _sp.Reject:
            pass  # the strict C decoder declined: maybe only non-canonical, decode as before
        else:
            return fast
    try:
        value: Data = codec.dec(_loads(data, "data"))
    except Invalid as exc:
        raise CodecError(f"data{exc.where}: {exc.message}") from None
    return value


def encode_head(head: Head) -> bytes:
    """Validate and encode a head (``m/<id>``)."""
    return HEAD.encode(head, "head")


def decode_head(data: bytes) -> Head:
    """Decode a head strictly."""
    return HEAD.decode(data, "head")


def encode_version(version: Version) -> bytes:
    """Validate and encode a version (``mv/<id>/v/<n>``)."""
    return VERSION.encode(version, "version")


def decode_version(data: bytes) -> Version:
    """Decode a version strictly."""
    return VERSION.decode(data, "version")


def encode_tags(tags: Iterable[str]) -> tuple[str, ...]:
    """Return tags NFC-normalised, in the caller's order (the head's encoder validates them).

    Raises:
        ValidationError: naming ``head.tags[i]`` and the rule.
    """
    if type(tags) is not tuple:
        if isinstance(tags, str):
            tags = (tags,)
        elif tags is None or isinstance(tags, bytes | Mapping) or not isinstance(tags, Iterable):
            raise ValidationError("head.tags", "type", f"must be a list, got {_type_name(tags)}")
        else:
            tags = tuple(tags)
    for t in tags:
        if type(t) is not str or not t.isascii():
            break
    else:
        return tags  # the head's encoder checks the rules; ASCII needs no normalising
    try:
        TAGS.enc(tags)
    except Invalid as exc:
        raise ValidationError("head.tags" + exc.where, exc.rule, exc.message) from None
    return tuple(_nfc(t) for t in tags)


# ---------------------------------------------------------------------------------------------
# A new memory's head and version, encoded together


DEFAULT_PROVENANCE: Final = Provenance(source=SourceKind.USER_INPUT)
"""The provenance of a version written without one (its bytes are encoded once, below)."""

_DEFAULT_PROVENANCE_BYTES: Final = PROVENANCE.enc(DEFAULT_PROVENANCE)
_HEAD_SV: Final = HEAD._sv
_VERSION_SV: Final = VERSION._sv
_ONE_F16: Final = _float(1.0)
_DATA_MAX: Final = 2**31
_UINT63: Final = 2**63 - 1


class _ShortMemo:
    """``_short.enc``, remembering the last text (the actor of every write) by identity.

    One tuple, replaced whole, so a thread never sees one text with another's bytes; the
    reference held keeps the text alive, so identity means the same value.
    """

    last: tuple[Any, bytes] = (None, b"")

    def enc(self, s: Any) -> bytes:
        last = self.last
        if last[0] is s:
            return last[1]
        b = _short.enc(s)
        self.last = (s, b)
        return b


_short_bytes = _ShortMemo().enc


def _micros_bytes(v: Any) -> bytes:
    us = TIME_FIELD.micros(v)
    return _SMALL_UINT[us] if 0 <= us < 256 else _int(us)


def encode_new_pair(head: Head, version: Version) -> tuple[bytes, bytes]:
    """``(encode_head(head), encode_version(version))`` for a new memory, sharing their parts.

    A memory written or updated through the store has a head and a version that share the id,
    the type, the forms and a time: these are checked and encoded once, and the fields the
    store made itself (the version number, the data it just encoded, its hash, no tombstone
    or vector) only have their Python types checked. Every field a caller supplied is checked
    here by its own field codec, once. Anything else — an unusual type, a value breaking a
    rule — goes through ``HEAD.encode`` and ``VERSION.encode``, which stay the definition:
    they give the same bytes (tests compare the two on generated records) and name the
    field and rule of any error.

    Raises:
        ValidationError: naming the field (``head.…`` or ``version.…``) and the rule it breaks.
    """
    try:
        return _encode_new_pair(head, version)
    except (_Fallback, Invalid):
        return HEAD.encode(head, "head"), VERSION.encode(version, "version")


def _encode_new_pair(h: Head, v: Version) -> tuple[bytes, bytes]:
    # raises _Fallback (or Invalid from a field codec) for anything the generic encoders
    # must look at; never an error of its own
    if type(h) is not Head or type(v) is not Version:
        raise _Fallback
    mid, mtype, n = h.id, h.type, h.current_version
    if (
        type(mid) is not MemoryId
        or v.id is not mid
        or type(mtype) is not MemoryType
        or v.type is not mtype
        or type(n) is not int
        or v.version != n
        or not 1 <= n <= _UINT63
        or h.tombstone is not None
        or h.embedding_ref is not None
    ):
        raise _Fallback
    id_part = b"\x01\x50" + mid.bytes
    type_code = _SMALL_UINT[mtype.value]
    version_part = _SMALL_UINT[n] if n < 256 else encode_uint(n)
    forms = h.forms
    forms_part = b"" if forms is None else b"\x0d" + FORMS._fast_enc(forms)
    if v.forms is not forms:
        raise _Fallback

    # the head, field by field in key order (the generic encoder's order, so the first bad
    # field found is the one it would name)
    vis, imp, tags, frames = h.visibility, h.importance, h.tags, h.frames
    if type(vis) is not Visibility or type(imp) is not int or not 0 <= imp <= LIMITS.IMPORTANCE_MAX:
        raise _Fallback
    created = _micros_bytes(h.created_at)
    updated = created if h.last_updated_at is h.created_at else _micros_bytes(h.last_updated_at)
    parts = [
        id_part,
        b"\x02",
        type_code,
        b"\x03",
        version_part,
        b"\x04",
        _short_bytes(h.actor_scope),
        b"\x05",
        _SMALL_UINT[vis.value],
        b"\x06",
        _SMALL_UINT[imp],
    ]
    count = 7  # the schema version and the six fields above
    if tags:
        parts += (b"\x07", TAGS.enc(tags))
        count += 1
    if frames:
        parts += (b"\x08", FRAMES.enc(frames))
        count += 1
    parts += (b"\x0a", created, b"\x0b", updated, forms_part)
    count += 3 if forms_part else 2
    level = h.sensitivity
    if level is not None:
        if type(level) is not Sensitivity or level is Sensitivity.INTERNAL:
            raise _Fallback
        parts += (b"\x0e", _SMALL_UINT[level.value])
        count += 1
    counted = h.has_counters
    if counted is True:  # an update of a memory with use counters keeps the flag (format 11)
        parts += (b"\x0f\xf5",)
        count += 1
    elif counted is not False:
        raise _Fallback
    head_bytes = _SMALL_MAP_HEAD[count] + _HEAD_SV + b"".join(parts)

    # the version
    data, digest, conf, prov = v.data, v.hash, v.confidence, v.provenance
    if (
        type(data) is not bytes
        or not 0 < len(data) <= _DATA_MAX
        or type(digest) is not bytes
        or len(digest) != 32
        or type(v.forms_override) is not bool
    ):
        raise _Fallback
    at = v.created_at
    vcreated = updated if at is h.last_updated_at else _micros_bytes(at)
    parts = [
        id_part,
        b"\x02",
        version_part,
        b"\x03",
        type_code,
        b"\x04",
        _head(2, len(data)),
        data,
        b"\x05\x58\x20",
        digest,
        b"\x06",
        vcreated,
        b"\x07",
        _short_bytes(v.created_by),
    ]
    count = 10  # the schema version, the seven fields above, confidence and provenance
    if v.expires_at is not None:
        parts += (b"\x08", _micros_bytes(v.expires_at))
        count += 1
    parts += (
        b"\x09",
        _ONE_F16 if conf == 1.0 and type(conf) is float else _unit.enc(conf),
        b"\x0a",
        _DEFAULT_PROVENANCE_BYTES if prov is DEFAULT_PROVENANCE else PROVENANCE.enc(prov),
    )
    if forms_part:  # the head's forms, the medium form a reference into data (format 18)
        parts += (b"\x0b", VERSION_FORMS.enc_in(forms, data))
        count += 1
    if v.forms_override:
        parts.append(b"\x0c\xf5")
        count += 1
    if v.valid_from is not None:
        parts += (b"\x0d", _micros_bytes(v.valid_from))
        count += 1
    if v.valid_until is not None:
        parts += (b"\x0e", _micros_bytes(v.valid_until))
        count += 1
    return head_bytes, _SMALL_MAP_HEAD[count] + _VERSION_SV + b"".join(parts)


_SMALL_MAP_HEAD: Final = tuple(_head(5, i) for i in range(24))

NEW_PAIR_PLAN: Final = (
    Head,
    Version,
    MemoryId,
    MemoryType,
    Visibility,
    Forms,
    FrameRef,
    Verb,
    ObjKind,
    Sensitivity,
    DEFAULT_PROVENANCE,
    _DEFAULT_PROVENANCE_BYTES,
    _HEAD_SV,
    _VERSION_SV,
    Head.__struct_fields__,
    Version.__struct_fields__,
    msgspec.structs.astuple,
    LIMITS.SHORT_TEXT_BYTES,
    LIMITS.TEXT_BYTES,
    LIMITS.TAGS,
    LIMITS.TAG_BYTES,
    LIMITS.FRAMES,
    LIMITS.OBJ_REF_BYTES,
    LIMITS.IMPORTANCE_MAX,
    _DATA_MAX,
)
"""What ``cortex._speedups.encode_new_pair`` needs to know of the records and their rules (the
classes, the shared constant parts, the limits of the fields it encodes), in its order."""
