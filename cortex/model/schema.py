"""The nine memory types as JSON Schemas, and ``from_json``: typed data from what a tool call gives.

Runtimes hand memories to cortex as JSON: an LLM's extraction, an MCP tool call, a REST body. The
schemas here are built from the codec's own field rules (``StructCodec.json_schema``: lengths,
ranges, enum labels, URI and decimal patterns), so they never drift from what the store accepts;
this module adds what an LLM needs to fill them well: a description of every type and field.

``from_json`` accepts what such callers produce and the strict JSON form (``cortex.model.jsonmap``)
does not: ``null`` for an absent optional field, enum labels in any case or with spaces or
hyphens (``"Prefer"``, ``"user-declared"``), a date without a time (midnight) and times without
an offset when the caller names the zone to assume, numbers written as text. Everything else is
checked as a write checks it, and an error names the field (``data.polarity``) and the rule.
"""

from __future__ import annotations

import copy
import re
from datetime import date, datetime, tzinfo
from typing import Any, Final

from cortex.errors import ValidationError
from cortex.model.codec import DATA_CODECS, encode_data
from cortex.model.enums import CodedEnum, MemoryType
from cortex.model.jsonmap import from_plain
from cortex.model.records import DATA_TYPES, Data

__all__ = ["DESCRIPTIONS", "from_json", "json_schema", "json_schemas", "memory_type_of"]

DESCRIPTIONS: Final[dict[MemoryType, tuple[str, dict[str, str]]]] = {
    MemoryType.IDENTITY: (
        "Who an actor is: a person's or agent's name, roles and profile.",
        {
            "name": "the actor's name",
            "did": "a decentralised identifier, if one is known",
            "roles": "roles the actor holds (e.g. 'owner', 'reviewer')",
            "profile": "short key-value facts about the actor (e.g. timezone, language)",
            "public_keys": "public keys, hex",
        },
    ),
    MemoryType.FACT: (
        "Something stated or observed to be true: predicate(subject) = statement. One claim per "
        "fact, written so that it reads on its own.",
        {
            "statement": "the fact as one self-contained sentence ('Ada lives in Zurich')",
            "subject": "the entity it is about, as its name ('Ada'); lower-case is fine",
            "predicate": "the attribute, snake_case ('home_city', 'employer', 'allergy')",
            "object": "the value, when it is a single thing ('Zurich')",
            "source": "where it came from: user_input (said by the user), observed, derived "
            "(inferred), imported",
            "observed_at": "when it was observed or said, ISO-8601",
            "confidence": "how sure, 0..1",
        },
    ),
    MemoryType.PREFERENCE: (
        "A like or dislike, of the user or the agent.",
        {
            "topic": "what the preference is about ('green tea', 'meetings before 10am')",
            "polarity": "prefer, avoid or neutral (do / dont for instructions)",
            "strength": "how strong, 0..1",
            "rationale": "why, when it was said",
            "subject": "whose preference it is, when not the user's (a name)",
        },
    ),
    MemoryType.BELIEF: (
        "An uncertain claim, held with a stance.",
        {
            "statement": "the claim",
            "subject": "the entity it is about",
            "stance": "believe, suspect or doubt",
            "confidence": "how sure, 0..1",
            "evidence_for": "URIs of memories that support it",
            "evidence_against": "URIs of memories that undercut it",
        },
    ),
    MemoryType.EVENT: (
        "Something that happened, at a time, with an outcome.",
        {
            "kind": "a short snake_case kind ('meeting', 'trip', 'purchase', 'user_message')",
            "outcome": "success, failure or partial, when it ended",
            "counterparty": "who else took part",
            "cost": "what it cost: asset code and a decimal amount as text ('12.5')",
            "duration_us": "how long it took, microseconds",
            "occurred_at": "when it happened, ISO-8601",
            "summary": "what happened, in a sentence or two",
            "intent_ref": "an id of the intent it served",
            "artifacts": "references to what it produced (file names, links)",
        },
    ),
    MemoryType.GOAL: (
        "An objective to pursue.",
        {
            "statement": "the goal as one sentence",
            "status": "active, paused, completed or abandoned",
            "horizon": "by when, ISO-8601",
            "success_criteria": "how to tell it is reached",
            "subgoals": "URIs of sub-goals",
            "subject": "whose goal it is, when not the user's (a name)",
        },
    ),
    MemoryType.CONSTRAINT: (
        "A standing rule or guardrail for the agent.",
        {
            "statement": "the rule as one sentence ('never book flights before 8am')",
            "polarity": "do or dont (prefer / avoid for soft rules)",
            "strength": "soft, firm or hard",
            "source": "user_declared, learned or inferred",
            "trigger": "when the rule applies",
        },
    ),
    MemoryType.CAPABILITY: (
        "Something a subject can do, declared or verified.",
        {
            "subject": "who or what has the capability",
            "capability": "what it can do",
            "verified": "true once it has been seen to work",
            "parameters": "key-value settings of the capability",
            "last_observed": "when it was last seen to work, ISO-8601",
        },
    ),
    MemoryType.PATTERN: (
        "A reusable how-to learned from experience.",
        {
            "statement": "the pattern as text",
            "strength": "how reliable, 0..1",
            "coverage": "how many cases it was seen in",
            "derived_from": "URIs of the memories it was learned from",
        },
    ),
}


def memory_type_of(t: MemoryType | str | type[Data]) -> MemoryType:
    """The memory type named by a ``MemoryType``, a type name (``"Fact"``, ``"fact"``) or a class.

    Raises:
        ValidationError: none of the nine types.
    """
    if isinstance(t, MemoryType):
        return t
    if isinstance(t, type) and getattr(t, "TYPE", None) in DATA_TYPES:
        return t.TYPE
    if isinstance(t, str):
        found = MemoryType.from_name(t.strip().capitalize())
        if found is not None:
            return found
    names = ", ".join(m.type_name for m in MemoryType)
    raise ValidationError("type", "enum", f"must be one of the nine types ({names}), got {t!r}")


def json_schema(t: MemoryType | str | type[Data]) -> dict[str, Any]:
    """The JSON Schema (2020-12) of one memory type's data, with descriptions.

    Raises:
        ValidationError: ``t`` is none of the nine types.
    """
    mt = memory_type_of(t)
    out = copy.deepcopy(DATA_CODECS[mt].json_schema())
    what, fields = DESCRIPTIONS[mt]
    out["title"] = mt.type_name
    out["description"] = what
    for name, prop in out["properties"].items():
        note = fields[name]
        prop["description"] = f"{note}; {prop['description']}" if "description" in prop else note
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **out}


def json_schemas() -> dict[str, dict[str, Any]]:
    """Every type's schema by type name, in type order."""
    return {t.type_name: json_schema(t) for t in MemoryType}


_WORD_SEP: Final = re.compile(r"[\s\-]+")
_NUMBER: Final = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def from_json(
    t: MemoryType | str | type[Data], obj: Any, *, assume_tz: tzinfo | None = None
) -> Data:
    """Typed data from its JSON form, as an LLM tool call or an API body gives it.

    Args:
        t: the memory type (a ``MemoryType``, a type name or a data class).
        obj: the decoded JSON object of the data's fields (see ``json_schema``).
        assume_tz: the zone of times given without an offset (and of dates without a time);
            without it such times are refused, since they are ambiguous.

    Returns:
        The data, checked by every rule a write applies (sizes, ranges, patterns).

    Raises:
        ValidationError: naming the field (``data.polarity``) and what is wrong.
    """
    mt = memory_type_of(t)
    cls = DATA_TYPES[mt]
    if not isinstance(obj, dict):
        raise ValidationError(
            "data", "type", f"a {mt.type_name} must be a JSON object, got {type(obj).__name__}"
        )
    fields = DATA_CODECS[mt].fields
    required = {n for _, _, n, _, r in fields if r}
    kinds = {n: f for _, _, n, f, _ in fields}
    plain: dict[str, Any] = {}
    for key, value in obj.items():
        if not isinstance(key, str):
            raise ValidationError("data", "type", f"field names must be text, got {key!r}")
        if value is None and key not in required:
            continue  # an LLM's null for an absent optional field
        f = kinds.get(key)
        plain[key] = value if f is None else _lenient(f, value, assume_tz, f"data.{key}")
    data: Data = from_plain(cls, plain, "data")
    encode_data(data)  # every rule of a write: lengths, ranges, URIs, decimals
    return data


def _lenient(f: Any, value: Any, tz: tzinfo | None, path: str) -> Any:
    """``value`` in the strict JSON form where an LLM's usual variation is unambiguous."""
    kind = getattr(f, "kind", "")
    if kind == "enum" and isinstance(value, str):
        label = _WORD_SEP.sub("_", value.strip()).lower()
        cls: type[CodedEnum] = f.cls
        return label if cls.coerce(label) is not None else value
    if kind == "time" and isinstance(value, str):
        return _time_text(value.strip(), tz, path)
    if kind == "unit" and isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        return float(value)
    if kind == "int" and isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if kind == "list" and isinstance(value, list):
        return [_lenient(f.item, v, tz, f"{path}[{i}]") for i, v in enumerate(value)]
    if kind == "record" and isinstance(value, dict):
        inner = {n: g for _, _, n, g, _ in f.fields}
        return {
            k: (v if k not in inner else _lenient(inner[k], v, tz, f"{path}.{k}"))
            for k, v in value.items()
            if v is not None
        }
    return value


def _time_text(text: str, tz: tzinfo | None, path: str) -> str:
    """ISO-8601 text with an offset: a bare date is its midnight, a naive time is in ``tz``."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return text  # the strict parser names the problem
    if when.tzinfo is not None and when.utcoffset() is not None:
        return text
    if tz is None:
        raise ValidationError(
            path,
            "naive_time",
            f"{text!r} has no offset; add one (e.g. {text}Z) or pass assume_tz=",
        )
    if len(text) <= 10:  # a date: its midnight in tz
        d = date.fromisoformat(text)
        when = datetime(d.year, d.month, d.day)
    return when.replace(tzinfo=tz).isoformat()
