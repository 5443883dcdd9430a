"""Rendered forms of typed data: short (<= 50 tokens), medium (<= 200 tokens) and full.

The templates are normative (``specs/forms.md``): another implementation rendering the same
data must produce the same text, byte for byte. Rendering is: fill the template, NFC-normalise,
then truncate to the budget at a UTF-8 boundary with "…".
"""

from __future__ import annotations

import operator
import unicodedata
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from cortex.errors import ValidationError
from cortex.model.codec import decode_data_trusted, encode_data
from cortex.model.enums import (
    CodedEnum,
    ConstraintSource,
    GoalStatus,
    Outcome,
    Polarity,
    SourceKind,
    Stance,
    Strength,
)
from cortex.model.records import (
    Belief,
    Capability,
    Constraint,
    Cost,
    Data,
    Event,
    Fact,
    Forms,
    Goal,
    Identity,
    Pattern,
    Preference,
)

__all__ = [
    "ELLIPSIS",
    "MEDIUM_TOKENS",
    "SHORT_TOKENS",
    "check_override",
    "count_tokens",
    "render",
    "render_full",
    "render_medium",
    "render_short",
    "render_with_short",
    "truncate",
]

SHORT_TOKENS: Final = 50
MEDIUM_TOKENS: Final = 200
ELLIPSIS: Final = "\u2026"
_SEP: Final = " \u2014 "  # " — " between the short form and the medium details


try:
    from cortex import _speedups as _sp
except ImportError:  # pragma: no cover - installed without a C compiler
    _sp = None  # type: ignore[assignment]

_UTF8_LEN: Callable[[str], int] | None = getattr(_sp, "utf8_len", None)
"""``len(text.encode("utf-8"))`` counted in C (-1: a lone surrogate), or None: encode it.
Tests set it to None to compare."""


def count_tokens(text: str) -> int:
    """Tokens as cortex counts them: ``ceil(utf8_bytes / 4)``.

    Raises:
        ValidationError: ``text`` is not text, or holds a lone surrogate.
    """
    if type(text) is str:
        if text.isascii():  # one byte a character: no encoding needed
            return -(-len(text) // 4)
        if _UTF8_LEN is not None and (n := _UTF8_LEN(text)) >= 0:  # counted, not encoded
            return -(-n // 4)
    try:
        return -(-len(text.encode("utf-8")) // 4)
    except (AttributeError, TypeError, UnicodeEncodeError):  # the rare case: say which
        if not isinstance(text, str):
            raise ValidationError(
                "text", "type", f"must be text, got {type(text).__name__}"
            ) from None
        raise ValidationError("text", "utf8", "contains a lone surrogate") from None


_SHORT_BYTES: Final = SHORT_TOKENS * 4
_MEDIUM_BYTES: Final = MEDIUM_TOKENS * 4
_SEP_EXTRA: Final = len(_SEP.encode()) - len(_SEP)  # the separator's bytes beyond its characters


def truncate(text: str, max_tokens: int) -> str:
    """Fit ``text`` into ``max_tokens`` tokens.

    Over budget, the text is cut to ``max_tokens*4 - 3`` bytes at a UTF-8 character boundary
    and "…" (3 bytes) is appended, so the result never exceeds the budget.
    """
    b = text.encode("utf-8")
    limit = max_tokens * 4
    if len(b) <= limit:
        return text
    return b[: limit - 3].decode("utf-8", errors="ignore") + ELLIPSIS


def _nfc(s: str) -> str:
    return s if s.isascii() else unicodedata.normalize("NFC", s)


def format_time(when: datetime, *, precise: bool = False) -> str:
    """``YYYY-MM-DDTHH:MM:SSZ`` in UTC; with ``precise``, ``.ffffff`` when microseconds are set."""
    u = when.astimezone(UTC)
    s = f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:{u.second:02d}"
    if precise and u.microsecond:
        s += f".{u.microsecond:06d}"
    return s + "Z"


def format_seconds(us: int) -> str:
    """Microseconds as decimal seconds without trailing zeros: ``1500000`` -> ``1.5s``."""
    whole, frac = divmod(us, 1_000_000)
    return (f"{whole}.{frac:06d}".rstrip("0").rstrip(".") if frac else str(whole)) + "s"


# each enum's labels by the id of their member: a member lives as long as its class, so an id
# found here is that member's (``label`` builds its text on every call)
_LABELS: Final[dict[type[CodedEnum], dict[int, str]]] = {}


def _label(v: object, cls: type[CodedEnum]) -> str:
    by_id = _LABELS.get(cls)
    if by_id is None:
        by_id = _LABELS[cls] = {id(m): m.label for m in cls}
    label = by_id.get(id(v))
    if label is not None:
        return label
    # callers may pass a member, its code or its label; the codec has already validated it
    m = cls.coerce(v)
    if m is None:
        raise ValidationError("data", "enum", f"{v!r} is not a {cls.__name__}")
    return m.label


def _canonical_items(m: Mapping[str, str]) -> list[tuple[str, str]]:
    # the order of the canonical CBOR map: shorter UTF-8 first, then bytewise
    return sorted(
        ((_nfc(k), v) for k, v in m.items()), key=lambda kv: (len(kv[0].encode()), kv[0].encode())
    )


def _pairs(m: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in _canonical_items(m))


def _cost(c: Cost) -> str:
    return f"{c.amount}{c.asset}"


# ---------------------------------------------------------------------------------------------
# Short templates


def _short_identity(d: Identity) -> str:
    return f"{d.name} ({d.did})" if d.did else d.name


def _short_fact(d: Fact) -> str:
    return f"{d.predicate}({d.subject})={d.statement}"


def _short_preference(d: Preference) -> str:
    if d.strength is None:
        return f"prefers {d.topic} ({_label(d.polarity, Polarity)})"
    return f"prefers {d.topic} ({_label(d.polarity, Polarity)}, strength={d.strength:.2f})"


def _short_belief(d: Belief) -> str:
    return f"{_label(d.stance, Stance)} {d.statement}"


def _short_event(d: Event) -> str:
    s = f"{_label(d.outcome, Outcome)} {d.kind}" if d.outcome is not None else d.kind
    if d.counterparty:
        s += f" with {d.counterparty}"
    if d.cost is not None:
        s += f" cost={_cost(d.cost)}"
    return s


def _short_goal(d: Goal) -> str:
    return f"[{_label(d.status, GoalStatus)}] {d.statement}"


def _short_constraint(d: Constraint) -> str:
    return f"[{_label(d.strength, Strength)}] {_label(d.polarity, Polarity)} {d.statement}"


def _short_capability(d: Capability) -> str:
    return f"{d.subject} can {d.capability} ({'verified' if d.verified else 'unverified'})"


def _short_pattern(d: Pattern) -> str:
    extra = []
    if d.strength is not None:
        extra.append(f"strength={d.strength:.2f}")
    if d.coverage is not None:
        extra.append(f"coverage={int(d.coverage)}")
    return f"{d.statement} ({', '.join(extra)})" if extra else d.statement


# ---------------------------------------------------------------------------------------------
# Medium details: appended after " — ", joined by "; "


def _details_identity(d: Identity) -> list[str]:
    out = []
    if d.roles:
        out.append("roles: " + ", ".join(d.roles))
    if d.profile:
        out.append("profile: " + _pairs(d.profile))
    if d.public_keys:
        out.append(f"public keys: {len(d.public_keys)}")
    return out


def _details_fact(d: Fact) -> list[str]:
    out = []
    if d.object:
        out.append(f"object: {d.object}")
    if d.source is not None:
        out.append(f"source: {_label(d.source, SourceKind)}")
    if d.observed_at is not None:
        out.append(f"observed {format_time(d.observed_at)}")
    if d.confidence is not None:
        out.append(f"confidence {d.confidence:.2f}")
    return out


def _details_preference(d: Preference) -> list[str]:
    out = [f"about {d.subject}"] if d.subject else []
    return out + ([f"rationale: {d.rationale}"] if d.rationale else [])


def _details_belief(d: Belief) -> list[str]:
    out = []
    if d.subject:
        out.append(f"about {d.subject}")
    if d.confidence is not None:
        out.append(f"confidence {d.confidence:.2f}")
    if d.evidence_for or d.evidence_against:
        out.append(f"evidence: {len(d.evidence_for)} for, {len(d.evidence_against)} against")
    return out


def _details_event(d: Event) -> list[str]:
    out = []
    if d.occurred_at is not None:
        out.append(f"at {format_time(d.occurred_at)}")
    if d.duration_us is not None:
        out.append(f"took {format_seconds(int(d.duration_us))}")
    if d.summary:
        out.append(f"summary: {d.summary}")
    if d.intent_ref:
        out.append(f"intent: {d.intent_ref}")
    if d.artifacts:
        out.append(f"artifacts: {len(d.artifacts)}")
    return out


def _details_goal(d: Goal) -> list[str]:
    out = [f"about {d.subject}"] if d.subject else []
    if d.horizon is not None:
        out.append(f"horizon {format_time(d.horizon)}")
    if d.success_criteria:
        out.append(f"success criteria: {len(d.success_criteria)}")
    if d.subgoals:
        out.append(f"subgoals: {len(d.subgoals)}")
    return out


def _details_constraint(d: Constraint) -> list[str]:
    out = [f"source: {_label(d.source, ConstraintSource)}"]
    if d.trigger:
        out.insert(0, f"trigger: {d.trigger}")
    return out


def _details_capability(d: Capability) -> list[str]:
    out = []
    if d.parameters:
        out.append("parameters: " + _pairs(d.parameters))
    if d.last_observed is not None:
        out.append(f"last observed {format_time(d.last_observed)}")
    return out


def _details_pattern(d: Pattern) -> list[str]:
    return [f"derived from: {len(d.derived_from)}"] if d.derived_from else []


_TEMPLATES: Final[dict[type[Any], tuple[Callable[[Any], str], Callable[[Any], list[str]]]]] = {
    Identity: (_short_identity, _details_identity),
    Fact: (_short_fact, _details_fact),
    Preference: (_short_preference, _details_preference),
    Belief: (_short_belief, _details_belief),
    Event: (_short_event, _details_event),
    Goal: (_short_goal, _details_goal),
    Constraint: (_short_constraint, _details_constraint),
    Capability: (_short_capability, _details_capability),
    Pattern: (_short_pattern, _details_pattern),
}


def _templates(data: Data) -> tuple[Callable[[Any], str], Callable[[Any], list[str]]]:
    t = _TEMPLATES.get(type(data))
    if t is None:
        raise ValidationError(
            "data", "type", f"cannot render {type(data).__name__}: not a memory type"
        )
    return t


def canonical(data: Data) -> Data:
    """``data`` as it decodes from its canonical encoding.

    That is: enum members, NFC text, coerced numbers (``1`` -> ``1.0`` in a float field,
    ``-0.0`` -> ``0.0``), tuples. Forms are defined on this value, so equal records render
    equally however they were built.

    Raises:
        ValidationError: ``data`` is not valid.
    """
    encoded = encode_data(data)  # raises ValidationError first for a non-record
    return decode_data_trusted(data.TYPE, encoded)


def _short(d: Data) -> str:
    return truncate(_nfc(_templates(d)[0](d)), SHORT_TOKENS)


def _medium(d: Data) -> str:
    short, details = _templates(d)
    text = short(d)
    parts = details(d)
    if parts:
        text += _SEP + "; ".join(parts)
    return truncate(_nfc(text), MEDIUM_TOKENS)


def render_short(data: Data) -> str:
    """The short form (at most 50 tokens)."""
    return _short(canonical(data))


def render_medium(data: Data) -> str:
    """The medium form (at most 200 tokens): the short text, then " — " and the details."""
    return _medium(canonical(data))


def render(data: Data, *, is_canonical: bool = False) -> Forms:
    """Both stored forms of ``data``.

    Args:
        data: the typed data.
        is_canonical: ``data`` came from decoding (see ``canonical``); skips re-normalising.
    """
    return render_with_short(data, is_canonical=is_canonical)[0]


def render_with_short(data: Data, *, is_canonical: bool = False) -> tuple[Forms, str]:
    """``render(data)`` and the filled short template, which ``render_full`` takes as ``short``.

    The template is filled once for both forms (and the full form), not once for each.
    """
    d = data if is_canonical else canonical(data)
    short, details = _templates(d)
    text = short(d)
    parts = details(d)
    # ASCII text within its budget (the common case) is NFC already and needs no cut; so is
    # ASCII joined by the separator (" — ": U+2014, 3 bytes of UTF-8, composes with nothing)
    plain = text.isascii()
    short_form = text if plain and len(text) <= _SHORT_BYTES else truncate(_nfc(text), SHORT_TOKENS)
    if parts:
        detail = "; ".join(parts)
        medium = text + _SEP + detail
        n = len(medium) + _SEP_EXTRA if plain and detail.isascii() else _MEDIUM_BYTES + 1
    else:
        medium, n = text, len(text) if plain else _MEDIUM_BYTES + 1
    medium_form = medium if n <= _MEDIUM_BYTES else truncate(_nfc(medium), MEDIUM_TOKENS)
    return Forms(short=short_form, medium=medium_form), text


def _full_value(v: Any) -> str:
    t = type(v)
    if t is str:
        return v  # type: ignore[no-any-return]  # the most common value
    if t is float:
        return repr(v)
    if t is int:
        return str(v)
    if isinstance(v, CodedEnum):
        return _label(v, type(v))
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, datetime):
        return format_time(v, precise=True)
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, Cost):
        return f"{v.amount} {v.asset}"
    if isinstance(v, Mapping):
        return _pairs(v)
    if isinstance(v, list | tuple):
        return ", ".join(_full_value(x) for x in v)
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _full_spec(cls: type[Any]) -> tuple[str, Callable[[Any], tuple[Any, ...]], tuple[Any, ...]]:
    """What ``render_full`` needs of a memory type.

    ``"TypeName: "``, a getter of every field's value in key order, and each field's line
    prefix ``"name: "`` (``None`` for ``duration_us``, written as ``duration: <seconds>``).
    """
    names = cls.__struct_fields__
    get = operator.attrgetter(*names)
    getter = get if len(names) > 1 else lambda d: (get(d),)
    prefixes = tuple(None if n == "duration_us" else f"{n}: " for n in names)
    return f"{cls.TYPE.type_name}: ", getter, prefixes


FULL_SPECS: Final = {cls: _full_spec(cls) for cls in _TEMPLATES}


def _coded_enums() -> list[type[CodedEnum]]:
    found, todo = [], list(CodedEnum.__subclasses__())
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return found


# each enum class's {member: label}: what ``_full_value`` writes for a member (the C
# ``full_term_counts`` looks labels up here)
FULL_LABELS: Final = {cls: {m: m.label for m in cls} for cls in _coded_enums()}


def render_full(data: Data, *, is_canonical: bool = False, short: str | None = None) -> str:
    """The full form, never truncated.

    The first line is ``TypeName: <short text>``, then one ``field: value`` line for every field
    that is set, in key order.

    Args:
        data: the typed data.
        is_canonical: ``data`` came from decoding (see ``canonical``); skips re-normalising.
        short: the text of the short template for ``data`` (before NFC and truncation), when
            the caller has it (``render_with_short``); else it is filled here.
    """
    if not is_canonical:
        data = canonical(data)
    spec = FULL_SPECS.get(type(data))
    if spec is None:
        _templates(data)  # raises: not a memory type
    assert spec is not None
    head, getter, prefixes = spec
    if short is None:
        short = _templates(data)[0](data)
    lines = [head + short]
    append = lines.append
    for prefix, v in zip(prefixes, getter(data), strict=True):
        if v is None or v is False:
            continue
        if type(v) is str and prefix is not None:
            append(prefix + v)  # the most common value
        elif isinstance(v, tuple | dict) and not v:
            continue
        elif prefix is None:
            append(f"duration: {format_seconds(int(v))}")
        else:
            append(prefix + _full_value(v))
    return _nfc("\n".join(lines))


def check_override(forms: Forms, path: str = "forms") -> Forms:
    """Validate caller-supplied forms: non-empty text within the budgets; never truncated.

    Returns:
        The forms, NFC-normalised.

    Raises:
        ValidationError: naming ``forms.short`` or ``forms.medium`` and the rule.
    """
    if not isinstance(forms, Forms):
        raise ValidationError(
            path, "type", f"must be Forms(short=..., medium=...), got {type(forms).__name__}"
        )
    out = []
    for name, budget in (("short", SHORT_TOKENS), ("medium", MEDIUM_TOKENS)):
        text = getattr(forms, name)
        if not isinstance(text, str) or not text:
            raise ValidationError(f"{path}.{name}", "empty", "must be non-empty text")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ValidationError(f"{path}.{name}", "utf8", "contains a lone surrogate") from None
        text = _nfc(text)
        n = count_tokens(text)
        if n > budget:
            raise ValidationError(
                f"{path}.{name}",
                "budget",
                f"is {n} tokens; the budget is {budget} (tokens = ceil(UTF-8 bytes / 4)); "
                "an override is never truncated, so shorten it",
            )
        out.append(text)
    return Forms(short=out[0], medium=out[1])
