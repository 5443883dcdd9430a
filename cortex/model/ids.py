"""Memory ids (16-byte ULIDs, monotonic within a millisecond) and version URIs."""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from typing import Final, Literal

from cortex.errors import ValidationError
from cortex.model.enums import MemoryType

__all__ = ["MemoryId", "Uri", "WriteResult", "new_id", "new_ids"]

_CROCKFORD: Final = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_DECODE: Final = {c: i for i, c in enumerate(_CROCKFORD)}
_ID_TEXT = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")
MAX_VERSION: Final = 2**63 - 1


class MemoryId:
    """A 16-byte ULID: 48-bit millisecond timestamp, then 80 bits of randomness.

    Raw bytes and text never mix: build one with ``MemoryId(raw16)`` or ``MemoryId.parse(text)``.
    Ids order by their bytes, which is creation order (to the millisecond).
    """

    __slots__ = ("_b",)
    _b: bytes

    def __init__(self, raw: bytes) -> None:
        if type(raw) is not bytes or len(raw) != 16:
            raise ValidationError("id", "type", "a MemoryId is exactly 16 raw bytes")
        object.__setattr__(self, "_b", raw)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("MemoryId is immutable")

    @classmethod
    def _trusted(cls, raw: bytes) -> MemoryId:
        """Wrap 16 raw bytes the caller has already checked (the decoders only): no validation."""
        self = _new(cls)
        _set_raw(self, raw)
        return self

    @classmethod
    def parse(cls, text: str) -> MemoryId:
        """Parse the 26-character Crockford base32 text form (upper case, as printed).

        Raises:
            ValidationError: the text is not a canonical ULID.
        """
        if not isinstance(text, str) or not _ID_TEXT.fullmatch(text):
            raise ValidationError(
                "id", "format", f"{text!r} is not a ULID: 26 upper-case Crockford base32 characters"
            )
        n = 0
        for c in text:
            n = (n << 5) | _DECODE[c]
        return cls(n.to_bytes(16, "big"))

    @property
    def bytes(self) -> bytes:
        """The 16 raw bytes."""
        return self._b

    @property
    def timestamp_ms(self) -> int:
        """Milliseconds since the Unix epoch when the id was made."""
        return int.from_bytes(self._b[:6], "big")

    def __str__(self) -> str:
        n = int.from_bytes(self._b, "big")
        return "".join(_CROCKFORD[(n >> s) & 31] for s in range(125, -1, -5))

    def __repr__(self) -> str:
        return f"MemoryId('{self}')"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MemoryId) and other._b == self._b

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, MemoryId):
            return NotImplemented
        return self._b < other._b

    def __le__(self, other: object) -> bool:
        if not isinstance(other, MemoryId):
            return NotImplemented
        return self._b <= other._b

    def __hash__(self) -> int:
        return hash(self._b)


_new = object.__new__
# the slot itself, past the immutability guard (one C call)
_set_raw: Callable[[MemoryId, bytes], None] = vars(MemoryId)["_b"].__set__

try:  # the hash and comparisons above in C (dicts and sets of ids are everywhere in a query)
    from cortex import _speedups as _sp

    _sp.id_slots(MemoryId)
except (ImportError, AttributeError):  # pragma: no cover - installed without a C compiler
    pass


class _Generator:
    """Monotonic ULIDs: within one millisecond the random part counts up by one."""

    _POOL: Final = 4096
    """Random bytes drawn from the OS at a time (one system call for ~400 milliseconds' ids)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._last_rand = 0
        self._pool = b""
        self._at = 0

    def _after_fork(self) -> None:
        # a forked child must not repeat the parent's sequence, nor draw the randomness the
        # parent drew (nor inherit a held lock)
        self._lock = threading.Lock()
        self._last_ms = -1
        self._pool = b""
        self._at = 0

    def _random(self) -> int:
        """79 random bits (the top one of 80 clear), from the pool (under the lock)."""
        at = self._at
        if at + 10 > len(self._pool):
            self._pool, at = os.urandom(self._POOL), 0
        self._at = at + 10
        return int.from_bytes(self._pool[at : at + 10], "big") >> 1

    def next(self) -> MemoryId:
        return self.take(1)[0]

    def take(self, n: int) -> list[MemoryId]:
        """``n`` fresh ids in ascending order, under one acquisition of the lock.

        They share one reading of the clock: made together, they are made in one millisecond,
        counting up from one draw of randomness (or from the last id, when the clock has not
        moved past it).
        """
        trusted = MemoryId._trusted
        with self._lock:
            ms = time.time_ns() // 1_000_000
            if ms <= self._last_ms:
                ms, rand = self._last_ms, self._last_rand + 1
            else:
                # the top bit clear leaves 2^79 increments of headroom in this millisecond
                rand = self._random()
            out = []
            for _ in range(n):
                if rand >= 1 << 80:  # 2^80 ids in one millisecond: borrow the next one
                    ms, rand = ms + 1, self._random()
                out.append(trusted(((ms << 80) | rand).to_bytes(16, "big")))
                rand += 1
            if out:
                self._last_ms, self._last_rand = ms, rand - 1
        return out


_generator = _Generator()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_generator._after_fork)


def new_id() -> MemoryId:
    """Return a fresh id, greater than every id this process made before."""
    return _generator.take(1)[0]


def new_ids(n: int) -> list[MemoryId]:
    """``n`` fresh ids, ascending, each greater than every id this process made before."""
    return _generator.take(n)


_URI = re.compile(r"cortex://([A-Za-z]+)/([0-9A-Za-z]{26})#(.*)", re.DOTALL)
_VERSION_TEXT = re.compile(r"[1-9][0-9]{0,18}")


class Uri:
    """The name of one exact version: ``cortex://<TypeName>/<ULID>#<n>``."""

    __slots__ = ("id", "type", "version")
    type: MemoryType
    id: MemoryId
    version: int

    def __init__(self, type: MemoryType, id: MemoryId, version: int) -> None:
        if (
            not isinstance(version, int)
            or isinstance(version, bool)
            or not 1 <= version <= MAX_VERSION
        ):
            raise ValidationError(
                "uri", "version", f"version must be an integer >= 1, got {version!r}"
            )
        if not isinstance(id, MemoryId):
            raise ValidationError("uri", "type", f"id must be a MemoryId, got {id!r}")
        try:
            mtype = MemoryType(type)
        except ValueError:
            raise ValidationError("uri", "type_name", f"{type!r} is not a memory type") from None
        object.__setattr__(self, "type", mtype)
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "version", version)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Uri is immutable")

    @classmethod
    def _trusted(cls, type: MemoryType, id: MemoryId, version: int) -> Uri:
        """A URI of parts the caller made itself (a member, an id, a version >= 1): unchecked."""
        self = _new(cls)
        _set_uri_type(self, type)
        _set_uri_id(self, id)
        _set_uri_version(self, version)
        return self

    @classmethod
    def parse(cls, text: str | Uri) -> Uri:
        """Parse a URI strictly.

        A URI must name one version: ``#latest``, a missing version, a version below 1, leading
        zeros, lower-case ids and type names in any other spelling are all rejected.

        Raises:
            ValidationError: naming what is wrong and the expected shape.
        """
        if isinstance(text, Uri):
            return text
        if not isinstance(text, str):
            raise ValidationError("uri", "type", f"a URI is a string, got {type(text).__name__}")
        m = _URI.fullmatch(text)
        if m is None:
            raise ValidationError(
                "uri", "format", f"{text!r} is not of the form cortex://<TypeName>/<ULID>#<version>"
            )
        tname, idtext, vtext = m.groups()
        mtype = MemoryType.from_name(tname)
        if mtype is None:
            names = ", ".join(t.type_name for t in MemoryType)
            raise ValidationError(
                "uri", "type_name", f"unknown type {tname!r} in {text!r}; one of {names}"
            )
        if vtext == "latest":
            raise ValidationError(
                "uri", "version", f"{text!r}: '#latest' is not a version; use resolve_latest(id)"
            )
        if not _VERSION_TEXT.fullmatch(vtext) or int(vtext) > MAX_VERSION:
            raise ValidationError(
                "uri",
                "version",
                f"{text!r}: the version must be a whole number >= 1 without leading zeros",
            )
        try:
            mid = MemoryId.parse(idtext)
        except ValidationError:
            raise ValidationError(
                "uri", "id", f"{text!r}: the id must be 26 upper-case Crockford base32 characters"
            ) from None
        return cls(mtype, mid, int(vtext))

    def __str__(self) -> str:
        return f"cortex://{self.type.type_name}/{self.id}#{self.version}"

    def __repr__(self) -> str:
        return f"Uri('{self}')"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Uri)
            and other.id == self.id
            and other.version == self.version
            and other.type == self.type
        )

    def __hash__(self) -> int:
        return hash((self.id, self.version))


# the slots themselves, past the immutability guard (one C call each: ``Uri._trusted``)
_set_uri_type: Final[Callable[[Uri, MemoryType], None]] = vars(Uri)["type"].__set__
_set_uri_id: Final[Callable[[Uri, MemoryId], None]] = vars(Uri)["id"].__set__
_set_uri_version: Final[Callable[[Uri, int], None]] = vars(Uri)["version"].__set__


WriteOutcome = Literal["created", "new_version", "confirmed", "superseded", "archived", "conflict"]
"""What a write did (``WriteResult.outcome``)."""


class WriteResult(Uri):
    """What a write did, and the URI of the version to hold on to (it *is* that ``Uri``).

    ``outcome`` is one of:

    - ``created``: a new memory was written;
    - ``new_version``: an update wrote a new version;
    - ``confirmed``: nothing was written; an existing memory (this URI) says the same and its
      confirmation was recorded (dedupe; ``reason`` says why it matched);
    - ``superseded``: a new memory was written and ended the time of the memories in
      ``supersedes`` as the current truth (``specs/claims.md`` §6, §8);
    - ``archived``: a new memory was written, but ``superseded_by`` stays the current truth (it
      is later or more confident): the new one is history from the start;
    - ``conflict``: a new memory was written and contradicts ``conflicts_with`` at equal
      confidence and time: both stay current, an open conflict (``Cortex.conflicts``).

    A write the store refuses raises instead (``ValidationError``, ``ConflictError``,
    ``WriteBudgetError``, ...): nothing is ever dropped silently.
    """

    __slots__ = ("conflicts_with", "outcome", "reason", "superseded_by", "supersedes")
    outcome: WriteOutcome
    supersedes: tuple[Uri, ...]
    superseded_by: tuple[Uri, ...]
    conflicts_with: tuple[Uri, ...]
    reason: str | None

    @classmethod
    def of(
        cls,
        uri: Uri,
        outcome: WriteOutcome,
        *,
        supersedes: tuple[Uri, ...] = (),
        superseded_by: tuple[Uri, ...] = (),
        conflicts_with: tuple[Uri, ...] = (),
        reason: str | None = None,
    ) -> WriteResult:
        """A result for ``uri``."""
        self = _new(cls)
        _set_uri_type(self, uri.type)
        _set_uri_id(self, uri.id)
        _set_uri_version(self, uri.version)
        for name, value in (
            ("outcome", outcome),
            ("supersedes", supersedes),
            ("superseded_by", superseded_by),
            ("conflicts_with", conflicts_with),
            ("reason", reason),
        ):
            object.__setattr__(self, name, value)
        return self

    @property
    def uri(self) -> Uri:
        """The plain ``Uri`` of the version."""
        return Uri._trusted(self.type, self.id, self.version)

    @property
    def written(self) -> bool:
        """Whether this write stored a new version (everything but ``confirmed``)."""
        return self.outcome != "confirmed"

    def __repr__(self) -> str:
        parts = [f"WriteResult('{Uri.__str__(self)}', outcome={self.outcome!r}"]
        for name in ("supersedes", "superseded_by", "conflicts_with"):
            value = getattr(self, name)
            if value:
                parts.append(f"{name}=[{', '.join(str(u) for u in value)}]")
        if self.reason:
            parts.append(f"reason={self.reason!r}")
        return ", ".join(parts) + ")"

    def summary(self) -> str:
        """One line that says what happened, for logs and agents."""
        text = {
            "created": "created",
            "new_version": "new version",
            "confirmed": "confirmed (nothing written)",
            "superseded": "created",
            "archived": "created as history",
            "conflict": "created",
        }[self.outcome]
        line = f"{text} {Uri.__str__(self)}"
        if self.supersedes:
            line += "; supersedes " + ", ".join(str(u) for u in self.supersedes)
        if self.superseded_by:
            line += "; superseded by " + ", ".join(str(u) for u in self.superseded_by)
        if self.conflicts_with:
            line += "; conflicts with " + ", ".join(str(u) for u in self.conflicts_with)
        if self.reason:
            line += f" ({self.reason})"
        return line
