"""The query router, without an LLM: a question's type, entities, attribute and time window.

Seed 000 routes every memory question to one of six handlers: ``aspect_query`` (preferences,
goals, beliefs, habits, tasks, rules, decisions as a category), ``entity_lookup`` (one entity,
broad or one attribute), ``temporal`` (what happened in a window), ``temporal_facets`` (an
aggregate over a window), ``relationship`` (how entities connect) and ``exploratory``
(everything else). ``route`` decides by rules over the words of the question and the store's
own entity names (``entities``): each rule adds weight to a type, the heaviest type wins, and the
margin over the runner-up is the confidence. Time phrases ("last week", "in May 2023", "since
Tuesday", "before the trip", "between March and June") become a ``Temporal`` window resolved
against ``now``. Pure and deterministic: the same question, entities and ``now`` give the same
``RouterOutput`` (but ``routing_time_ms``). ``specs/router.md`` lists the rules.
"""

from __future__ import annotations

import calendar
import re
import time
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta
from typing import Final, Literal

import msgspec

from cortex.errors import ValidationError

__all__ = ["QUERY_TYPES", "RouterOutput", "Temporal", "route"]

QueryType = Literal[
    "aspect_query", "entity_lookup", "temporal", "temporal_facets", "exploratory", "relationship"
]
QUERY_TYPES: Final[tuple[QueryType, ...]] = (
    "aspect_query",
    "entity_lookup",
    "temporal",
    "temporal_facets",
    "exploratory",
    "relationship",
)


class Temporal(msgspec.Struct, frozen=True, kw_only=True):
    """A time filter (seed 000): recent, range, before, after or all.

    ``recent`` is the ``days`` ending now; ``range`` runs from ``start`` to ``end`` (both
    inclusive dates); ``before`` ends at ``end``, ``after`` starts at ``start``.

    ``phrase`` is the words it was read from; ``anchor`` names an event the bound is relative to
    ("the trip" in "before the trip") when the date is not in the words (the search resolves it).
    """

    type: Literal["recent", "range", "before", "after", "all"] = "all"
    days: int | None = None
    start: date | None = None
    end: date | None = None
    phrase: str | None = None
    anchor: str | None = None


class RouterOutput(msgspec.Struct, frozen=True, kw_only=True):
    """What the router decided (seed 000's ``RouterOutput``, in Python's spelling).

    ``text`` is the question without its time phrase: what the handlers search for.
    """

    query_type: QueryType
    temporal: Temporal
    entity_hints: tuple[str, ...] = ()
    lookup_mode: Literal["broad", "attribute"] | None = None
    attribute_hint: str | None = None
    facets: tuple[str, ...] = ()
    aspects: tuple[str, ...] = ()
    should_search: bool = True
    matched_labels: tuple[str, ...] = ()
    selected_labels: tuple[str, ...] = ()
    confidence: float = 0.0
    routing_time_ms: float = 0.0
    text: str = ""


# -- words ---------------------------------------------------------------------------------------

_MONTHS: Final = {
    **{m.lower(): i for i, m in enumerate(calendar.month_abbr) if m},
    **{m.lower(): i for i, m in enumerate(calendar.month_name) if m},
    "sept": 9,
}
_WEEKDAYS: Final = {
    **{d.lower(): i for i, d in enumerate(calendar.day_abbr)},
    **{d.lower(): i for i, d in enumerate(calendar.day_name)},
}
_NUMBERS: Final = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple of": 2,
    "few": 3, "a few": 3, "several": 3,
}  # fmt: skip
_UNIT_DAYS: Final = {"day": 1, "week": 7, "month": 30, "year": 365, "quarter": 91}

_MONTH_RE: Final = "|".join(sorted(_MONTHS, key=len, reverse=True))
_DAY_RE: Final = "|".join(sorted(_WEEKDAYS, key=len, reverse=True))
_NUM_RE: Final = r"\d+|" + "|".join(sorted(_NUMBERS, key=len, reverse=True))
_UNIT_RE: Final = r"(day|week|month|year|quarter)s?"
_DATE_RE: Final = (
    rf"(?:\d{{4}}-\d{{2}}-\d{{2}}"
    rf"|(?:{_MONTH_RE})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?"
    rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTH_RE})(?:,?\s+\d{{4}})?"
    rf"|(?:{_MONTH_RE})(?:\s+\d{{4}})?"
    rf"|(?:last\s+|this\s+)?(?:{_DAY_RE})"
    rf"|\d{{4}}|yesterday|today)"
)

# Words that are capitalised without naming an entity.
_NOT_ENTITIES: Final = (
    frozenset(
        [
            "i",
            "i'm",
            "i've",
            "i'd",
            "me",
            "my",
            "mine",
            "we",
            "our",
            "us",
            "you",
            "your",
            "what",
            "who",
            "whom",
            "whose",
            "when",
            "where",
            "why",
            "how",
            "which",
            "is",
            "are",
            "was",
            "were",
            "do",
            "does",
            "did",
            "can",
            "could",
            "should",
            "would",
            "will",
            "tell",
            "show",
            "give",
            "list",
            "find",
            "any",
            "anything",
            "something",
            "everything",
            "the",
            "a",
            "an",
            "and",
            "or",
            "of",
            "in",
            "on",
            "at",
            "for",
            "to",
            "from",
            "with",
            "about",
            "summarize",
            "summarise",
            "recap",
            "remind",
            "please",
            "hey",
            "hi",
            "ok",
            "okay",
            "so",
            "has",
            "have",
            "had",
            "any",
            "all",
            "every",
            "last",
            "this",
            "next",
            "since",
            "before",
            "after",
            "between",
            "during",
            "ago",
            "today",
            "yesterday",
            "tomorrow",
            "tonight",
            "morning",
            "evening",
            "q1",
            "q2",
            "q3",
            "q4",
            "memory",
            "memories",
        ]
    )
    | frozenset(_MONTHS)
    | frozenset(_WEEKDAYS)
)

_ATTRIBUTES: Final = (
    (r"phone(?: number)?|cell(?: number)?|mobile(?: number)?|number", "phone"),
    (r"e-?mail(?: address)?", "email"),
    (r"(?:home |postal |street )?address", "address"),
    (r"birthday|birth ?date|date of birth|born", "birthday"),
    (r"age|how old", "age"),
    (r"live|lives|living|home city|hometown|based|located|from", "home_city"),
    (r"employer|company|works? (?:at|for)|job|workplace", "employer"),
    (r"(?:job )?title|role|position|occupation|profession|do for (?:a )?living", "role"),
    (r"team|department", "team"),
    (r"timezone|time zone", "timezone"),
    (r"nationality|citizenship", "nationality"),
    (r"website|url|homepage", "website"),
    (r"github|twitter|linkedin|handle|username", "handle"),
    (r"allerg(?:y|ies|ic)", "allergy"),
    (r"salary|pay|rate", "salary"),
    (r"favou?rite \w+", "favorite"),
    (r"name", "name"),
)

_ASPECTS: Final = (
    (r"prefer\w*|like[sd]?|love[sd]?|hates?|dislike[sd]?|favou?rites?|enjoys?|taste|"
     r"into\b|fan of|can'?t stand", "Preference"),
    (r"goals?|aims?|objectives?|ambitions?|aspirations?|plans? to|want(?:s|ed)? to (?:achieve|"
     r"learn|become|get)|trying to|okrs?|targets?|resolutions?", "Goal"),
    (r"believes?|beliefs?|opinions?|views? on|think(?:s)? (?:about|of)|stance|convinced|"
     r"feel(?:s)? about", "Belief"),
    (r"habits?|routines?|usually|typically|normally|tend to|every (?:morning|day|night|week)|"
     r"daily|regularly", "Habit"),
    (r"tasks?|to-?dos?|todo list|action items?|open items|need to do|pending|backlog|"
     r"assignments?|errands?", "Task"),
    (r"rules?|instructions?|directives?|guidelines?|polic(?:y|ies)|always|never|must not|"
     r"should(?:n't| not)? i|told you to|asked you to|constraints?|boundar(?:y|ies)", "Directive"),
    (r"decid\w*|decisions?|chose|choose|picked|settled on|went with|committed to", "Decision"),
    (r"problems?|issues?|struggl\w*|blockers?|pain points?|bugs?|complain\w*|frustrat\w*|"
     r"worr(?:y|ies|ied)", "Problem"),
)  # fmt: skip

_KIN: Final = re.compile(
    r"(?:'s|s') (?:\w+ )?(?:manager|boss|wife|husband|partner|sister|brother|mother|father|mom|"
    r"dad|son|daughter|colleague|coworker|friend|cousin|mentor|cofounder|co-founder|"
    r"team ?mates?|roommate|girlfriend|boyfriend|parents?|kids?|children|siblings?|direct "
    r"reports|investors?)\b",
    re.IGNORECASE,
)
"""A possessive before a relational noun (one adjective allowed): "Emily's college roommate"."""

_RELATIONSHIP: Final = re.compile(
    r"\b(related to|relationship|relation to|connection|connected|connects?|link(?:ed)? between|"
    r"know each other|how do(?:es)? (?:i|we|\w+) know|how did (?:i|we|\w+) meet|reports? to|"
    r"manages?|managed by|works? with|worked with|working with|collaborat\w*|married|"
    r"friends? with|introduced|between \w+(?: \w+)? and|in common|partners? with|"
    r"(?:'s|s') (?:manager|boss|wife|husband|partner|sister|brother|mother|father|mom|dad|"
    r"son|daughter|colleague|coworker|friend|cousin|mentor|cofounder|co-founder|team ?mates?|"
    r"girlfriend|boyfriend|parents?|kids?|children|siblings?|family|reports|investors?|"
    r"clients?|customers?)|who (?:else )?(?:is|are) on|members? of|who (?:works|worked) (?:at|on|"
    r"for)|works? on)\b",
    re.IGNORECASE,
)
_FACETS: Final = re.compile(
    r"\b(topics?|themes?|summar\w+|overview|recap|breakdown|trends?|most|top \d*|how many|"
    r"how often|count|frequen\w*|which (?:people|projects|topics|things|entities|clients)|"
    r"who (?:did|have|has) (?:i|we) (?:talk|talked|spoken|speak|met|meet|worked|work)\w*|"
    r"what (?:kinds?|sorts?|types?|categories)|categories|by project|by person|by topic|"
    r"busiest|stats|statistics|tally|digest|highlights|main things|what was i (?:busy|"
    r"working) on|what (?:have|did) (?:i|we) (?:been )?(?:working|focus\w*) on)\b",
    re.IGNORECASE,
)
_TEMPORAL_ASK: Final = re.compile(
    r"\b(happen\w*|did (?:i|we|you|\w+)|discuss\w*|talk\w*|said|say|mention\w*|meetings?|"
    r"events?|went|go|done|do|was|were|occurred|took place|conversations?|calls?|messages?|"
    r"wrote|sent|received|log|timeline|activity|new)\b",
    re.IGNORECASE,
)
_ENTITY_ASK: Final = re.compile(
    r"^(?:who(?:'s| is| was)|tell me (?:about|everything about)|what do (?:you|i|we) know about|"
    r"what is|what's|whats|info(?:rmation)? (?:on|about)|details (?:on|about)|describe|"
    r"look up|lookup|profile of|background on|anything on)\b",
    re.IGNORECASE,
)
_EXPLORE: Final = re.compile(
    r"\b(anything|ideas?|thoughts|notes|stuff|things|related|brainstorm|options|"
    r"suggestions|recommendations?|everything)\b",
    re.IGNORECASE,
)


def _weekday_before(now: date, wd: int, strict: bool = True) -> date:
    back = (now.weekday() - wd) % 7
    if back == 0 and strict:
        back = 7
    return now - timedelta(days=back)


def _month_range(year: int, month: int) -> tuple[date, date]:
    return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])


def _past_month(now: date, month: int) -> int:
    """The year of the most recent ``month`` not after ``now``'s month."""
    return now.year if month <= now.month else now.year - 1


def _parse_date(text: str, now: date) -> tuple[date, date] | None:
    """The span of days a date phrase names (a day, a month, a year), or ``None``."""
    t = text.strip().lower().rstrip(".,")
    if t == "today":
        return now, now
    if t == "yesterday":
        d = now - timedelta(days=1)
        return d, d
    m = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})", t)
    if m:
        try:
            d = date(int(m[1]), int(m[2]), int(m[3]))
        except ValueError:
            return None
        return d, d
    if re.fullmatch(r"\d{4}", t):
        y = int(t)
        return (date(y, 1, 1), date(y, 12, 31)) if 1900 <= y <= 2200 else None
    m = re.fullmatch(rf"(?:(last|this)\s+)?({_DAY_RE})", t)
    if m:
        d = _weekday_before(now, _WEEKDAYS[m[2]], strict=m[1] == "last")
        return d, d
    m = re.fullmatch(rf"({_MONTH_RE})\.?(?:\s+(\d{{4}}))?", t)
    if m:
        mo = _MONTHS[m[1]]
        y = int(m[2]) if m[2] else _past_month(now, mo)
        return _month_range(y, mo)
    m = re.fullmatch(
        rf"(?:({_MONTH_RE})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?|(\d{{1,2}})(?:st|nd|rd|th)?\s+"
        rf"(?:of\s+)?({_MONTH_RE}))(?:,?\s+(\d{{4}}))?",
        t,
    )
    if m:
        mo = _MONTHS[m[1] or m[4]]
        day = int(m[2] or m[3])
        y = int(m[5]) if m[5] else _past_month(now, mo)
        try:
            d = date(y, mo, day)
        except ValueError:
            return None
        if not m[5] and d > now:
            d = d.replace(year=d.year - 1)
        return d, d
    return None


def _count(word: str) -> int:
    w = word.lower().strip()
    return int(w) if w.isdigit() else _NUMBERS.get(w, 1)


def _temporal(q: str, now: datetime) -> tuple[Temporal, tuple[int, int] | None]:
    """The time filter a question states, and where its phrase is (to cut it from the text)."""
    today = now.astimezone(UTC).date()
    found: list[tuple[int, int, Temporal]] = []

    def add(m: re.Match[str], t: Temporal) -> None:
        found.append((m.start(), m.end(), t))

    def rng(m: re.Match[str], a: date, b: date) -> None:
        add(m, Temporal(type="range", start=a, end=b, phrase=m[0].strip()))

    for m in re.finditer(
        rf"\b(?:between|from)\s+({_DATE_RE})\s+(?:and|to|until|till)\s+({_DATE_RE})\b",
        q,
        re.IGNORECASE,
    ):
        first, last = m[1], m[2]
        year = re.search(r"\b(\d{4})$", last)
        if year and not re.search(r"\d{4}", first):  # "between March and June 2024"
            first = f"{first} {year[1]}"
        a, b = _parse_date(first, today), _parse_date(last, today)
        if a and b:
            rng(m, min(a[0], b[0]), max(a[1], b[1]))
    for m in re.finditer(
        rf"\b(?:in|over|during|within|for)?\s*(?:the\s+)?(?:last|past|previous)\s+({_NUM_RE})\s+"
        rf"{_UNIT_RE}\b",
        q,
        re.IGNORECASE,
    ):
        days = _count(m[1]) * _UNIT_DAYS[m[2].lower()]
        add(m, Temporal(type="recent", days=days, phrase=m[0].strip()))
    for m in re.finditer(rf"\b({_NUM_RE})\s+{_UNIT_RE}\s+ago\b", q, re.IGNORECASE):
        n, unit = _count(m[1]), m[2].lower()
        back = today - timedelta(days=n * _UNIT_DAYS[unit])
        span = _UNIT_DAYS[unit] if unit != "day" else 1
        rng(
            m,
            back - timedelta(days=span // 2) if span > 1 else back,
            back + timedelta(days=span // 2),
        )
    for m in re.finditer(
        r"\b(?:(?:in|over|during)\s+)?(?:the\s+)?(last|past|previous|this)\s+(week|month|year|"
        r"quarter|weekend)\b",
        q,
        re.IGNORECASE,
    ):
        which, unit = m[1].lower(), m[2].lower()
        if unit == "year" and which in ("last", "previous"):
            rng(m, date(today.year - 1, 1, 1), date(today.year - 1, 12, 31))
        elif unit == "year" and which == "this":
            add(m, Temporal(type="after", start=date(today.year, 1, 1), phrase=m[0]))
        elif unit == "month" and which == "this":
            add(m, Temporal(type="after", start=today.replace(day=1), phrase=m[0]))
        elif unit == "weekend":
            sat = _weekday_before(today, 5, strict=which != "this")
            rng(m, sat, sat + timedelta(days=1))
        else:
            days = {"week": 7, "month": 30, "quarter": 91, "year": 365}[unit]
            add(m, Temporal(type="recent", days=days, phrase=m[0].strip()))
    for m in re.finditer(
        r"\b(today|this morning|this afternoon|this evening|tonight|earlier today|"
        r"recently|lately|these days|the other day)\b",
        q,
        re.IGNORECASE,
    ):
        word = m[1].lower()
        days = (
            30
            if word in ("recently", "lately", "these days")
            else (7 if word == "the other day" else 1)
        )
        add(m, Temporal(type="recent", days=days, phrase=m[0]))
    for m in re.finditer(r"\b(yesterday|last night)\b", q, re.IGNORECASE):
        d = today - timedelta(days=1)
        rng(m, d, d)
    for m in re.finditer(r"\b(since|after|from)\s+(.+?)(?=[?.!,;]|$)", q, re.IGNORECASE):
        _bound(m, "after", today, found)
    for m in re.finditer(r"\b(before|until|till|prior to)\s+(.+?)(?=[?.!,;]|$)", q, re.IGNORECASE):
        _bound(m, "before", today, found)
    for m in re.finditer(rf"\b(?:in|on|during|for|of)\s+(?:early\s+|late\s+|mid-?)?({_DATE_RE})\b",
                         q, re.IGNORECASE):  # fmt: skip
        named = _parse_date(m[1], today)
        if named is not None:
            rng(m, named[0], named[1])
    for m in re.finditer(r"\b(?:in\s+)?(q[1-4])\s*(\d{4})?\b", q, re.IGNORECASE):
        quarter = int(m[1][1])
        y = int(m[2]) if m[2] else today.year
        rng(m, date(y, 3 * quarter - 2, 1), _month_range(y, 3 * quarter)[1])
    for m in re.finditer(rf"\blast\s+({_DAY_RE})\b", q, re.IGNORECASE):
        d = _weekday_before(today, _WEEKDAYS[m[1].lower()])
        rng(m, d, d)
    if not found:
        return Temporal(), None
    # the longest phrase wins (``between May and June`` over ``May``), then the first
    lo, hi, best = max(found, key=lambda f: (f[1] - f[0], -f[0]))
    return best, (lo, hi)


def _bound(m: re.Match[str], kind: str, today: date, found: list[tuple[int, int, Temporal]]
           ) -> None:  # fmt: skip
    """``since X`` / ``before X``: a date, or an event named by the words (an anchor)."""
    words = m[2].strip()
    head = re.match(rf"({_DATE_RE})\b", words, re.IGNORECASE)
    span = _parse_date(head[1], today) if head else None
    if head is not None and span is not None:
        end = m.start(2) + head.end()
        phrase = m.string[m.start() : end]
        t = (
            Temporal(type="after", start=span[0], phrase=phrase)
            if kind == "after"
            else Temporal(type="before", end=span[0] - timedelta(days=1), phrase=phrase)
        )
        found.append((m.start(), end, t))
        return
    anchor = re.match(r"((?:the|my|our|his|her|their|that|we|i|\w+'s)\s+[\w\s'-]{1,40}?)\s*$",
                      words, re.IGNORECASE)  # fmt: skip
    if anchor and m[1].lower() != "from" and not _TEMPORAL_ASK.fullmatch(anchor[1].split()[-1]):
        t = Temporal(type=kind, phrase=m[0].strip(), anchor=anchor[1].strip())  # type: ignore[arg-type]
        found.append((m.start(), m.end(), t))


def _entities(q: str, known: Iterable[str]) -> list[str]:
    """Entity names in the question: known names, @mentions, possessives, capitalised words."""
    out: dict[str, None] = {}
    lower = q.lower()
    for name in sorted({k for k in known if k}, key=len, reverse=True):
        n = name.lower()
        if n not in lower:  # most names of a store: no pattern made (and cached) for them
            continue
        if re.search(rf"(?<![\w@]){re.escape(n)}(?![\w])", lower) and not any(
            n in o.lower() for o in out
        ):
            out[name] = None
    for m in re.finditer(r"@([\w.-]+)", q):
        out.setdefault(m[1], None)
    words = list(re.finditer(r"[A-Za-z][\w&.-]*(?:'s|s')?", q))
    i = 0
    while i < len(words):
        w = words[i][0]
        base = re.sub(r"(?:'s|')$", "", w).rstrip(".")
        cap = base[:1].isupper() and base.lower() not in _NOT_ENTITIES
        if cap and (i > 0 or base.lower() not in _NOT_ENTITIES):
            parts = [base]
            j = i + 1
            while j < len(words) and words[j].start() - words[j - 1].end() <= 1:
                nxt = re.sub(r"(?:'s|')$", "", words[j][0]).rstrip(".")
                if not nxt[:1].isupper() or nxt.lower() in _NOT_ENTITIES:
                    break
                parts.append(nxt)
                if words[j][0] != nxt:
                    j += 1
                    break
                j += 1
            name = " ".join(parts)
            if not any(name.lower() == o.lower() or name.lower() in o.lower() for o in out):
                out[name] = None
            i = j
            continue
        if (
            w.lower().endswith("'s")
            and base.lower() not in _NOT_ENTITIES
            and not any(base.lower() in o.lower() for o in out)
        ):
            out[base] = None
        i += 1
    return list(out)


def _attribute(q: str) -> str | None:
    lower = q.lower()
    for pattern, name in _ATTRIBUTES:
        if re.search(rf"\b(?:{pattern})\b", lower):
            return name
    return None


def route(
    question: str, *, now: datetime | None = None, entities: Iterable[str] = ()
) -> RouterOutput:
    """Route ``question`` (see the module docs).

    Args:
        question: the user's question.
        now: the time relative phrases are read against (default: the current UTC time).
        entities: entity names the store knows (subjects, counterparties, identity names),
            matched case-insensitively as whole words.

    Raises:
        ValidationError: ``question`` is not text, or ``now`` is naive.
    """
    started = time.perf_counter()
    if not isinstance(question, str):
        raise ValidationError("question", "type", f"must be text, got {type(question).__name__}")
    if now is None:
        now = datetime.now(UTC)
    elif not isinstance(now, datetime) or now.tzinfo is None:
        raise ValidationError("now", "naive", "must be an aware datetime")
    q = " ".join(question.split())[:2000]
    temporal, cut = _temporal(q, now)
    text = q if cut is None else (q[: cut[0]] + q[cut[1] :])
    text = " ".join(text.split())
    ents = _entities(text, entities)
    aspects = [name for pattern, name in _ASPECTS if re.search(rf"\b(?:{pattern})", text, re.I)]
    attribute = _attribute(text) if ents else None
    score = dict.fromkeys(QUERY_TYPES, 0.0)
    score["exploratory"] = 0.5
    rel = _RELATIONSHIP.search(text)
    if rel:
        score["relationship"] += 2.0 + (0.5 if len(ents) >= 2 else 0.0)
        if _KIN.search(text):
            # "who is Sam's manager": the answer is whoever stands in that relation to the
            # entity, not the entity itself
            score["relationship"] += 1.0
    if len(ents) >= 2 and re.search(r"\b(and|between|with)\b", text, re.I):
        score["relationship"] += 1.0
    facets = _FACETS.search(q)
    if facets:
        score["temporal_facets"] += 1.5 + (1.5 if temporal.type != "all" else 0.0)
    if aspects:
        score["aspect_query"] += 1.8 + 0.2 * len(aspects)
        if re.search(r"\b(my|i|me|the user|user's|our|we)\b", text, re.I):
            score["aspect_query"] += 0.5
    if ents:
        score["entity_lookup"] += 1.2
        if _ENTITY_ASK.search(text):
            score["entity_lookup"] += 1.2
        if attribute:
            score["entity_lookup"] += 1.0
            score["relationship"] -= 0.5
    if temporal.type != "all":
        score["temporal"] += 1.5
        if _TEMPORAL_ASK.search(text):
            score["temporal"] += 1.0
        score["entity_lookup"] -= 0.6
        score["aspect_query"] -= 0.4
    if _EXPLORE.search(text) and not ents:
        score["exploratory"] += 1.0
    ranked = sorted(QUERY_TYPES, key=lambda t: (-score[t], QUERY_TYPES.index(t)))
    best, second = ranked[0], ranked[1]
    margin = score[best] - score[second]
    confidence = round(min(0.99, 0.5 + margin / 4), 3)
    facet_dims: tuple[str, ...] = ()
    if best == "temporal_facets":
        dims = []
        if re.search(
            r"\b(topics?|themes?|subjects?|projects?|categor\w+|kinds?|things)\b", q, re.I
        ):
            dims.append("topics")
        if re.search(r"\b(who|people|person|persons|entities|clients|contacts|talk\w*|spoke|"
                     r"met)\b", q, re.I):  # fmt: skip
            dims.append("entities")
        if aspects or re.search(r"\b(aspects?|decisions|goals|preferences)\b", q, re.I):
            dims.append("aspects")
        facet_dims = tuple(dims) or ("topics",)
    mode: Literal["broad", "attribute"] | None = None
    if best == "entity_lookup":
        mode = "attribute" if attribute else "broad"
    return RouterOutput(
        query_type=best,
        temporal=temporal,
        entity_hints=tuple(ents),
        lookup_mode=mode,
        attribute_hint=attribute if mode == "attribute" else None,
        facets=facet_dims,
        aspects=tuple(aspects),
        should_search=bool(text.strip()) or temporal.type != "all",
        confidence=confidence,
        routing_time_ms=round((time.perf_counter() - started) * 1000, 3),
        text=text,
    )
