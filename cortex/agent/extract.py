"""Extraction: typed memories from verbatim content, behind a protocol (issue 13 item 4).

cortex never calls a model provider. A runtime that wants memories drawn from a conversation turn
or a document hands ``ingest`` an ``Extractor``: anything with ``extract(content, context)``
returning typed memories. ``LLMExtractor`` is the reference one: it wraps any
``llm(prompt) -> str`` callable (the runtime's own model client), builds the prompt from the nine
types' JSON Schemas (``cortex.model.schema``: enum labels, ISO-8601 times), and validates what comes
back: the JSON is parsed defensively (code fences, prose around it, size and depth limits), each
item becomes typed data through ``from_json``, and each item's ``quote`` is located in the
content so the memory can point at its exact span. A bad item fails the whole extraction with an
``ExtractionError`` naming it (``items[2].data.polarity``), so the episode and its memories are
written together or not at all; ``strict=False`` drops bad items instead and reports each one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, tzinfo
from typing import Any, Final, Protocol, runtime_checkable

import msgspec

from cortex.engine.values import NewMemory
from cortex.errors import CortexError, ValidationError
from cortex.model.enums import MemoryType
from cortex.model.records import Data
from cortex.model.schema import from_json, json_schema, memory_type_of

__all__ = [
    "DEFAULT_TYPES",
    "Context",
    "Dropped",
    "Extracted",
    "Extraction",
    "ExtractionError",
    "Extractor",
    "LLMExtractor",
    "locate",
]

DEFAULT_TYPES: Final = (
    MemoryType.FACT,
    MemoryType.PREFERENCE,
    MemoryType.EVENT,
    MemoryType.GOAL,
    MemoryType.BELIEF,
    MemoryType.CONSTRAINT,
)
"""What ``LLMExtractor`` asks for unless told otherwise: what conversations and documents say."""

MAX_OUTPUT_CHARS: Final = 1_000_000
"""The longest model output parsed; longer is refused (a runaway or hostile model)."""
MAX_JSON_DEPTH: Final = 32
"""The deepest nesting of arrays and objects accepted in a model's output."""


class ExtractionError(ValidationError):
    """An extraction that cannot be used: the model failed, or an item breaks a rule.

    ``field`` names the item and its field (``items[2].data.polarity``); nothing was written.
    """


class Context(msgspec.Struct, frozen=True, kw_only=True):
    """What an extractor knows of the content besides its text.

    ``occurred_at`` anchors relative times ("yesterday"); ``actor`` is who said or wrote it.
    """

    occurred_at: datetime | None = None
    source: str | None = None
    channel: str | None = None
    actor: str | None = None
    labels: tuple[str, ...] = ()


class Extracted(msgspec.Struct, frozen=True, kw_only=True):
    """One memory drawn from the content, and where in it.

    ``span`` is the ``[start, end)`` UTF-8 byte offsets of ``quote`` in the content when it was
    found there (``None`` when the model quoted something the content does not hold).
    """

    memory: NewMemory
    quote: str | None = None
    span: tuple[int, int] | None = None


class Dropped(msgspec.Struct, frozen=True, kw_only=True):
    """An item a lenient extraction left out, and why (the field and the rule it broke)."""

    index: int
    field: str
    rule: str
    message: str


class Extraction(msgspec.Struct, frozen=True, kw_only=True):
    """What an extractor returned: the memories, and (lenient mode) the items it dropped."""

    items: tuple[Extracted, ...]
    dropped: tuple[Dropped, ...] = ()


@runtime_checkable
class Extractor(Protocol):
    """Turns content into typed memories (the runtime's LLM, rules, or a script in tests)."""

    def extract(self, content: str, context: Context) -> Extraction:
        """The memories ``content`` holds.

        Raises:
            ExtractionError: the extraction failed; nothing is written.
        """
        ...  # pragma: no cover - a protocol


_FENCE: Final = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.S)
_ITEM_KEYS: Final = frozenset({"type", "data", "quote", "confidence", "importance", "tags"})

_INSTRUCTIONS: Final = """\
You extract memories for an AI agent from the content below. A memory is one typed, self-contained
claim worth knowing later: a fact about a person or thing, a preference, an event that happened,
a goal, a belief, a standing rule. Skip small talk, questions and anything not stated in the
content. Resolve pronouns to names and relative times to dates where the content allows.

Answer with a JSON array only (no prose). Each item is an object:
  {"type": <one of TYPES>, "data": <an object matching that type's schema>,
   "quote": <the exact words of the content it comes from>,
   "confidence": <0..1, optional>, "importance": <0..10, optional>, "tags": [<text>, optional]}
Use enum labels exactly as the schemas list them; write times as ISO-8601 with an offset.
Answer [] when there is nothing worth remembering.
"""


class LLMExtractor:
    """The reference extractor over any ``llm(prompt) -> str`` callable.

    Args:
        llm: called once per extraction with the prompt; returns the model's text.
        types: the memory types to ask for (default ``DEFAULT_TYPES``).
        strict: an invalid item fails the extraction (default); ``False`` drops it and lists it
            in ``Extraction.dropped``.
        max_items: the most memories one extraction may return.
        assume_tz: the zone of times the model gives without an offset (default UTC).
        instructions: replaces the built-in instructions (the schemas are still appended).
    """

    def __init__(
        self,
        llm: Callable[[str], str],
        *,
        types: Sequence[MemoryType | str] = DEFAULT_TYPES,
        strict: bool = True,
        max_items: int = 50,
        assume_tz: tzinfo = UTC,
        instructions: str | None = None,
    ) -> None:
        if not callable(llm):
            raise ValidationError("llm", "type", "must be a callable taking a prompt (str)")
        if isinstance(types, str) or not types:
            raise ValidationError("types", "type", "must be a non-empty list of memory types")
        self.types = tuple(dict.fromkeys(memory_type_of(t) for t in types))
        if type(max_items) is not int or not 1 <= max_items <= 10_000:
            raise ValidationError("max_items", "range", "must be an int in 1..10000")
        self.llm = llm
        self.strict = bool(strict)
        self.max_items = max_items
        self.assume_tz = assume_tz
        self.instructions = _INSTRUCTIONS if instructions is None else instructions

    def prompt(self, content: str, context: Context) -> str:
        """The prompt for ``content``: instructions, the types' schemas, the context, the text."""
        names = ", ".join(t.type_name for t in self.types)
        schemas = {t.type_name: _compact(json_schema(t)) for t in self.types}
        lines = [self.instructions.replace("TYPES", names), "Schemas (JSON Schema, by type):"]
        lines.append(json.dumps(schemas, ensure_ascii=False, separators=(",", ":")))
        about = {
            k: v
            for k, v in (
                ("occurred_at", context.occurred_at.isoformat() if context.occurred_at else None),
                ("source", context.source),
                ("channel", context.channel),
                ("speaker", context.actor),
            )
            if v
        }
        if about:
            lines.append("About the content: " + json.dumps(about, ensure_ascii=False))
        lines += ["Content:", "<<<", content, ">>>"]
        return "\n".join(lines)

    def extract(self, content: str, context: Context | None = None) -> Extraction:
        """Ask the model and validate its answer (see the class docs).

        Raises:
            ExtractionError: the model call failed, or its answer (or, when strict, an item) is
                unusable; ``field`` names where.
        """
        if not isinstance(content, str):
            raise ValidationError("content", "type", "must be text")
        ctx = context if context is not None else Context()
        try:
            text = self.llm(self.prompt(content, ctx))
        except CortexError:
            raise
        except Exception as exc:  # the runtime's model client: any failure is the model's
            raise ExtractionError(
                "llm", "failed", f"the model call failed: {type(exc).__name__}: {exc}"
            ) from exc
        return self.parse(text, content)

    def parse(self, text: object, content: str) -> Extraction:
        """Validate a model's answer ``text`` for ``content`` (``extract`` without the call).

        Raises:
            ExtractionError: as ``extract``.
        """
        raw = _json_array(text)
        if len(raw) > self.max_items:
            raise ExtractionError(
                "items", "too_many", f"{len(raw)} items; at most {self.max_items} are accepted"
            )
        items: list[Extracted] = []
        dropped: list[Dropped] = []
        for i, obj in enumerate(raw):
            try:
                items.append(self._item(obj, content, i))
            except ValidationError as exc:
                field = exc.field if exc.field.startswith("items[") else f"items[{i}].{exc.field}"
                if self.strict:
                    raise ExtractionError(field, exc.rule, exc.message) from None
                dropped.append(Dropped(index=i, field=field, rule=exc.rule, message=exc.message))
        return Extraction(items=tuple(items), dropped=tuple(dropped))

    def _item(self, obj: Any, content: str, i: int) -> Extracted:
        if not isinstance(obj, dict):
            raise ValidationError(f"items[{i}]", "type", "each item must be a JSON object")
        unknown = sorted(set(obj) - _ITEM_KEYS)
        if unknown:
            raise ValidationError(
                f"items[{i}].{unknown[0]}",
                "unknown_field",
                f"an item has only {', '.join(sorted(_ITEM_KEYS))}",
            )
        if not isinstance(obj.get("type"), str):
            raise ValidationError("type", "required", "each item needs a type name")
        mt = memory_type_of(obj["type"])
        if mt not in self.types:
            raise ValidationError("type", "not_asked", f"{mt.type_name} was not asked for here")
        data: Data = from_json(mt, obj.get("data"), assume_tz=self.assume_tz)
        options: dict[str, Any] = {}
        if obj.get("confidence") is not None:
            c = obj["confidence"]
            if isinstance(c, bool) or not isinstance(c, int | float) or not 0 <= c <= 1:
                raise ValidationError("confidence", "range", "must be a number in [0, 1]")
            options["confidence"] = float(c)
        if obj.get("importance") is not None:
            n = obj["importance"]
            if type(n) is not int or not 0 <= n <= 10:
                raise ValidationError("importance", "range", "must be an integer in 0..10")
            options["importance"] = n
        if obj.get("tags") is not None:
            tags = obj["tags"]
            if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
                raise ValidationError("tags", "type", "must be a list of text")
            options["tags"] = tuple(dict.fromkeys(tags))
        quote = obj.get("quote")
        if quote is not None and not isinstance(quote, str):
            raise ValidationError("quote", "type", "must be text")
        span = locate(content, quote) if quote else None
        return Extracted(memory=NewMemory(data=data, **options), quote=quote or None, span=span)


def locate(content: str, quote: str) -> tuple[int, int] | None:
    """The ``[start, end)`` UTF-8 byte span of ``quote`` in ``content``, or ``None``.

    The exact text first; then the same words with any white space between them, ignoring case
    (models re-flow lines and change capitals). The first occurrence wins.
    """
    if not quote.strip():
        return None
    at = content.find(quote)
    if at < 0:
        words = quote.split()
        if not words or len(words) > 512:
            return None
        m = re.search(r"\s+".join(map(re.escape, words)), content, re.IGNORECASE)
        if m is None:
            return None
        at, end = m.start(), m.end()
    else:
        end = at + len(quote)
    start = len(content[:at].encode("utf-8"))
    return start, start + len(content[at:end].encode("utf-8"))


def _json_array(text: object) -> list[Any]:
    """The JSON array in a model's answer: bare, in a code fence, or after some prose."""
    if not isinstance(text, str):
        raise ExtractionError("llm", "type", f"the model returned {type(text).__name__}, not text")
    if len(text) > MAX_OUTPUT_CHARS:
        raise ExtractionError(
            "llm", "too_long", f"the answer is {len(text)} characters; at most {MAX_OUTPUT_CHARS}"
        )
    fenced = _FENCE.search(text)
    body = fenced.group(1) if fenced else text
    starts = [i for i in (body.find("["), body.find("{")) if i >= 0]
    if not starts:
        raise ExtractionError("llm", "not_json", "the answer holds no JSON array")
    if _depth(body) > MAX_JSON_DEPTH:
        raise ExtractionError(
            "llm", "too_deep", f"the answer nests deeper than {MAX_JSON_DEPTH} levels"
        )
    try:
        value, _ = json.JSONDecoder().raw_decode(body, min(starts))
    except (ValueError, RecursionError) as exc:
        raise ExtractionError("llm", "not_json", f"the answer is not valid JSON: {exc}") from None
    if isinstance(value, dict):  # {"memories": [...]} and the like
        lists = [v for v in value.values() if isinstance(v, list)]
        if len(lists) != 1:
            raise ExtractionError("llm", "not_array", "the answer must be a JSON array of items")
        value = lists[0]
    if not isinstance(value, list):
        raise ExtractionError("llm", "not_array", "the answer must be a JSON array of items")
    return value


def _depth(text: str) -> int:
    """The deepest bracket nesting in ``text`` outside strings (a bound before parsing)."""
    deepest = depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _compact(schema: dict[str, Any]) -> dict[str, Any]:
    """A schema without what a prompt does not need (the dialect URI, generous size limits)."""
    out = {k: v for k, v in schema.items() if k not in ("$schema", "additionalProperties")}
    props = {}
    for name, prop in schema["properties"].items():
        p = {
            k: v
            for k, v in prop.items()
            if k not in ("maxLength", "maxItems") and not (k == "maximum" and v > 2**31)
        }
        if "items" in p and isinstance(p["items"], dict):
            p["items"] = {k: v for k, v in p["items"].items() if k != "maxLength"}
        props[name] = p
    out["properties"] = props
    return out
