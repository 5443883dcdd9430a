"""The token file of ``cortex serve --http``: bearer tokens mapped to an actor and its scopes.

A token is shown once, when it is made; the file keeps only its SHA-256 (tokens are 256 random
bits, so a plain hash is enough to make a stolen file useless), the name it was given, the
actor it acts as, the scopes that actor holds (``cortex.Scope`` in JSON), its sensitivity
clearance (a level label; ``null`` reads as ``internal``) and an optional write budget. The
file is written atomically with mode 0600; the server re-reads it when it changes, so
``cortex tokens rotate`` or ``remove`` takes effect at the next request.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import tempfile
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import msgspec

from cortex.errors import CortexError, NotFoundError, ValidationError
from cortex.model.enums import Sensitivity
from cortex.model.ids import MemoryId
from cortex.model.jsonmap import parse_time
from cortex.rules.scope import FrameMatch, Scope

__all__ = [
    "FILE_VERSION",
    "TOKEN_PREFIX",
    "TokenEntry",
    "TokenFile",
    "scope_from_json",
    "scope_to_json",
]

FILE_VERSION: Final = 1
TOKEN_PREFIX: Final = "ctx_"
_NAME_MAX: Final = 64


class TokenEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One token: its name, the SHA-256 of its secret, and who it acts as.

    Attributes:
        name: a label, unique in the file (``cortex tokens rotate NAME``).
        sha256: hex SHA-256 of the token (the token itself is never stored).
        actor: the actor the token acts as; the store's owner sees everything.
        scopes: what a non-owner may see and (``writable``) write.
        clearance: the most sensitive level the token's reader sees (``internal`` by default;
            the store's owner sees every level whatever it says).
        write_budget: writes allowed per MCP session (``None``: the server's default).
        created_at: when the token was made or last rotated.
    """

    name: str
    sha256: str
    actor: str
    scopes: tuple[Scope, ...] = ()
    clearance: Sensitivity = Sensitivity.INTERNAL
    write_budget: int | None = None
    created_at: datetime


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def _frame_text(f: FrameMatch) -> str:
    parts = [f.verb.label]
    if f.obj_kind is not None:
        parts.append(f.obj_kind.label)
        if f.obj_ref is not None:
            parts.append(f.obj_ref)
    return ":".join(parts)


def scope_to_json(scope: Scope) -> dict[str, Any]:
    """A scope as JSON: the fields that differ from the defaults, lists sorted."""
    out: dict[str, Any] = {"name": scope.name}
    for name in ("types", "exclude_types"):
        values = getattr(scope, name)
        if values:
            out[name] = sorted(t.type_name for t in values)
    for name in ("tags", "exclude_tags"):
        values = getattr(scope, name)
        if values:
            out[name] = sorted(values)
    for name in ("ids", "exclude_ids"):
        values = getattr(scope, name)
        if values:
            out[name] = sorted(str(i) for i in values)
    for name in ("frames", "exclude_frames"):
        values = getattr(scope, name)
        if values:
            out[name] = [_frame_text(f) for f in values]
    if scope.expires_at is not None:
        out["expires_at"] = scope.expires_at.isoformat()
    if scope.writable:
        out["writable"] = True
    if scope.token_budget is not None:
        out["token_budget"] = scope.token_budget
    return out


_SCOPE_KEYS: Final = frozenset(
    {
        "name",
        "types",
        "exclude_types",
        "tags",
        "exclude_tags",
        "ids",
        "exclude_ids",
        "frames",
        "exclude_frames",
        "expires_at",
        "writable",
        "token_budget",
    }
)


def _text_list(obj: dict[str, Any], key: str, field: str) -> list[str]:
    value = obj.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValidationError(f"{field}.{key}", "type", "must be a list of non-empty strings")
    return value


def scope_from_json(obj: Any, field: str = "scope") -> Scope:
    """A ``cortex.Scope`` from its JSON form (see ``scope_to_json``).

    Raises:
        ValidationError: an unknown key or a bad value, naming it.
    """
    if not isinstance(obj, dict):
        raise ValidationError(field, "type", "a scope is a JSON object")
    unknown = sorted(set(obj) - _SCOPE_KEYS)
    if unknown:
        raise ValidationError(
            f"{field}.{unknown[0]}", "unknown", f"not a scope field; use {sorted(_SCOPE_KEYS)}"
        )
    name = obj.get("name", "scope")
    if not isinstance(name, str) or not name:
        raise ValidationError(f"{field}.name", "type", "must be non-empty text")
    writable = obj.get("writable", False)
    if not isinstance(writable, bool):
        raise ValidationError(f"{field}.writable", "type", "must be true or false")
    expires = obj.get("expires_at")
    budget = obj.get("token_budget")
    if budget is not None and (type(budget) is not int or budget < 1):
        raise ValidationError(f"{field}.token_budget", "range", "must be a positive integer")
    try:
        return Scope(
            name=name,
            types=frozenset(_text_list(obj, "types", field)),  # type: ignore[arg-type]
            exclude_types=frozenset(_text_list(obj, "exclude_types", field)),  # type: ignore[arg-type]
            tags=frozenset(_text_list(obj, "tags", field)),
            exclude_tags=frozenset(_text_list(obj, "exclude_tags", field)),
            ids=frozenset(MemoryId.parse(i) for i in _text_list(obj, "ids", field)),
            exclude_ids=frozenset(MemoryId.parse(i) for i in _text_list(obj, "exclude_ids", field)),
            frames=tuple(FrameMatch.of(f) for f in _text_list(obj, "frames", field)),
            exclude_frames=tuple(
                FrameMatch.of(f) for f in _text_list(obj, "exclude_frames", field)
            ),
            expires_at=None if expires is None else parse_time(expires, f"{field}.expires_at"),
            writable=writable,
            token_budget=budget,
        )
    except ValidationError as exc:
        if exc.field.startswith(field):
            raise
        raise ValidationError(f"{field}.{exc.field}", exc.rule, exc.message) from None


def _entry_json(e: TokenEntry) -> dict[str, Any]:
    return {
        "name": e.name,
        "sha256": e.sha256,
        "actor": e.actor,
        "scopes": [scope_to_json(s) for s in e.scopes],
        "clearance": e.clearance.label,
        "write_budget": e.write_budget,
        "created_at": e.created_at.isoformat(),
    }


def _entry_from_json(obj: Any, i: int) -> TokenEntry:
    field = f"tokens[{i}]"
    if not isinstance(obj, dict):
        raise ValidationError(field, "type", "a token entry is a JSON object")
    for key in ("name", "sha256", "actor"):
        if not isinstance(obj.get(key), str) or not obj[key]:
            raise ValidationError(f"{field}.{key}", "required", "must be non-empty text")
    clearance = Sensitivity.INTERNAL
    if obj.get("clearance") is not None:  # null (files written before labels): internal
        given = obj["clearance"]
        found = Sensitivity.coerce(given) if isinstance(given, str) else None
        if found is None:
            raise ValidationError(
                f"{field}.clearance", "enum", f"must be one of {Sensitivity.labels()} or null"
            )
        clearance = found
    budget = obj.get("write_budget")
    if budget is not None and (type(budget) is not int or budget < 0):
        raise ValidationError(f"{field}.write_budget", "range", "must be an integer >= 0")
    scopes = obj.get("scopes", [])
    if not isinstance(scopes, list):
        raise ValidationError(f"{field}.scopes", "type", "must be a list of scopes")
    return TokenEntry(
        name=obj["name"],
        sha256=obj["sha256"],
        actor=obj["actor"],
        scopes=tuple(scope_from_json(s, f"{field}.scopes[{j}]") for j, s in enumerate(scopes)),
        clearance=clearance,
        write_budget=budget,
        created_at=parse_time(obj.get("created_at"), f"{field}.created_at"),
    )


class TokenFile:
    """The token file at ``path``: create, add, rotate, remove, list, and check a token.

    Every change rewrites the file atomically (a temporary file, fsync, rename) with mode 0600.
    ``verify`` re-reads the file when its modification time or size changed.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._seen: tuple[int, int] | None = None
        self._entries: tuple[TokenEntry, ...] = ()

    # -- reading -------------------------------------------------------------------------

    def exists(self) -> bool:
        """Whether the file exists."""
        return self.path.exists()

    def entries(self) -> tuple[TokenEntry, ...]:
        """Every entry, re-read if the file changed.

        Raises:
            CortexError: the file is missing or unreadable (the message says which and why).
            ValidationError: an entry is malformed (named).
        """
        try:
            st = self.path.stat()
        except OSError as exc:
            raise CortexError(
                f"no token file at {self.path} ({exc.strerror}): create one with "
                "`cortex serve --init-tokens` or `cortex tokens add NAME`"
            ) from None
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp != self._seen:
            self._entries = self._read()
            self._seen = stamp
        return self._entries

    def _read(self) -> tuple[TokenEntry, ...]:
        try:
            obj = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CortexError(f"cannot read the token file {self.path}: {exc}") from None
        if not isinstance(obj, dict) or obj.get("cortex_tokens") != FILE_VERSION:
            raise CortexError(
                f"{self.path} is not a cortex token file (version {FILE_VERSION}): it needs "
                '{"cortex_tokens": 1, "tokens": [...]}'
            )
        raw = obj.get("tokens")
        if not isinstance(raw, list):
            raise ValidationError("tokens", "type", f"{self.path}: 'tokens' must be a list")
        entries = tuple(_entry_from_json(e, i) for i, e in enumerate(raw))
        names = [e.name for e in entries]
        if len(set(names)) != len(names):
            raise ValidationError("tokens", "unique", f"{self.path}: token names repeat")
        return entries

    def verify(self, token: str) -> TokenEntry | None:
        """The entry of ``token``, or ``None`` (every entry is compared in constant time)."""
        digest = _digest(token)
        found = None
        for e in self.entries():
            if hmac.compare_digest(e.sha256, digest):
                found = e
        return found

    # -- changing ------------------------------------------------------------------------

    def _write(self, entries: Iterable[TokenEntry]) -> None:
        body = {"cortex_tokens": FILE_VERSION, "tokens": [_entry_json(e) for e in entries]}
        text = json.dumps(body, ensure_ascii=False, indent=2) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tokens-", dir=self.path.parent)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._seen = None

    def _current(self) -> list[TokenEntry]:
        return list(self.entries()) if self.exists() else []

    def add(
        self,
        name: str,
        actor: str,
        *,
        scopes: Sequence[Scope] = (),
        write_budget: int | None = None,
        clearance: Sensitivity | str = Sensitivity.INTERNAL,
    ) -> str:
        """Add a token; returns it (shown once: only its hash is kept).

        Raises:
            ValidationError: a bad or taken name, an empty actor, a bad budget or clearance.
        """
        level = Sensitivity.coerce(clearance)
        if level is None:
            raise ValidationError(
                "clearance", "enum", f"must be one of {Sensitivity.labels()}, got {clearance!r}"
            )
        if not isinstance(name, str) or not name or len(name) > _NAME_MAX or name.strip() != name:
            raise ValidationError("name", "type", f"must be 1..{_NAME_MAX} characters, trimmed")
        if not isinstance(actor, str) or not actor:
            raise ValidationError("actor", "required", "must be non-empty text")
        if write_budget is not None and (type(write_budget) is not int or write_budget < 0):
            raise ValidationError("write_budget", "range", "must be an integer >= 0")
        entries = self._current()
        if any(e.name == name for e in entries):
            raise ValidationError(
                "name", "unique", f"a token named {name!r} exists: rotate or remove it"
            )
        token = _new_token()
        entries.append(
            TokenEntry(
                name=name,
                sha256=_digest(token),
                actor=actor,
                scopes=tuple(scopes),
                clearance=level,
                write_budget=write_budget,
                created_at=datetime.now(UTC),
            )
        )
        self._write(entries)
        return token

    def rotate(self, name: str) -> str:
        """Replace a token's secret; the old one stops working. Returns the new token.

        Raises:
            NotFoundError: no token of that name.
        """
        entries = self._current()
        for i, e in enumerate(entries):
            if e.name == name:
                token = _new_token()
                entries[i] = msgspec.structs.replace(
                    e, sha256=_digest(token), created_at=datetime.now(UTC)
                )
                self._write(entries)
                return token
        raise NotFoundError(f"no token named {name!r} in {self.path}")

    def remove(self, name: str) -> None:
        """Remove a token.

        Raises:
            NotFoundError: no token of that name.
        """
        entries = self._current()
        kept = [e for e in entries if e.name != name]
        if len(kept) == len(entries):
            raise NotFoundError(f"no token named {name!r} in {self.path}")
        self._write(kept)
