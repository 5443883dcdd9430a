"""Whether two memories state the same claim: the guard of semantic dedupe (``specs/claims.md``).

Embeddings put "Sam is allergic to peanuts" and "Sam is not allergic to peanuts" side by side;
a dedupe that trusted cosine alone confirmed the first when the second was written, and lost it.
``same_claim`` decides instead, and errs towards *different*: two data values of one type are
the same claim only when every field agrees after normalisation —

- non-text fields (enums, numbers, times, booleans, ids) are equal;
- text fields say the same words: after case and compatibility folding, contractions expanded
  (``doesn't`` → ``does not``), number words and formats unified (``twenty`` → ``20``,
  ``4,000`` → ``4000``, ``$`` → ``usd``), clock times unified (``9am``, ``9:00 am``, ``09:00``
  → one token; ``9pm`` another), ordinals and month abbreviations unified, a short list of
  synonyms mapped (``begins`` → ``start``), words stemmed, and a few function words left out,
  the remaining words are the same sequence — except that time expressions (weekdays, months,
  dates, clock times, ``today``) may move within the sentence.

Otherwise ``Verdict.reason`` says why, in the first matching class: ``negation``, ``number``,
``date_time``, ``unit``, ``entity``, ``polarity``, ``modality``, ``tense``, ``detail`` (one
says more than the other) or ``wording`` (any other change of words), or ``field:<name>`` for a
non-text field. Pure and deterministic.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime
from functools import lru_cache
from typing import Any, Final

import msgspec

from cortex.index.text import terms
from cortex.model.records import Data

__all__ = ["Verdict", "claim_tokens", "same_claim"]


def _words(text: str) -> list[str]:
    return text.split()


class Verdict(msgspec.Struct, frozen=True):
    """``same`` or not, and why not (``None`` when the same)."""

    same: bool
    reason: str | None = None


_CONTRACTIONS: Final = (
    (re.compile(r"\bcan'?t\b"), "can not"),
    (re.compile(r"\bcannot\b"), "can not"),
    (re.compile(r"\bwon'?t\b"), "will not"),
    (re.compile(r"\bshan'?t\b"), "shall not"),
    (re.compile(r"\b(\w+)n't\b"), r"\1 not"),
    (re.compile(r"\b(\w+)'re\b"), r"\1 are"),
    (re.compile(r"\b(i)'m\b"), r"\1 am"),
    (re.compile(r"\b(\w+)'ve\b"), r"\1 have"),
    (re.compile(r"\b(\w+)'ll\b"), r"\1 will"),
    (re.compile(r"\b(\w+)'d\b"), r"\1 would"),
    (re.compile(r"\b(it|that|there|what|who|he|she)'s\b"), r"\1 is"),
    (re.compile(r"'s\b"), ""),
)
_UNITS: Final = {
    "$": "usd", "usd": "usd", "dollar": "usd", "dollars": "usd", "bucks": "usd",
    "€": "eur", "eur": "eur", "euro": "eur", "euros": "eur",
    "£": "gbp", "gbp": "gbp", "pound": "gbp", "pounds": "gbp",
    "chf": "chf", "franc": "chf", "francs": "chf", "¥": "jpy", "yen": "jpy",
    "km": "km", "kilometer": "km", "kilometers": "km", "kilometre": "km", "kilometres": "km",
    "mi": "mile", "mile": "mile", "miles": "mile", "m": "meter", "meter": "meter",
    "meters": "meter", "metre": "meter", "metres": "meter", "ft": "foot", "foot": "foot",
    "feet": "foot", "kg": "kg", "kilo": "kg", "kilos": "kg", "kilogram": "kg", "kilograms": "kg",
    "lb": "lb", "lbs": "lb", "pound-weight": "lb", "g": "gram", "gram": "gram", "grams": "gram",
    "l": "liter", "liter": "liter", "liters": "liter", "litre": "liter", "litres": "liter",
    "ml": "ml", "%": "percent", "percent": "percent", "°c": "celsius", "celsius": "celsius",
    "°f": "fahrenheit", "fahrenheit": "fahrenheit", "gb": "gb", "mb": "mb", "tb": "tb",
    "hour": "hour", "hours": "hour", "hr": "hour", "hrs": "hour", "minute": "minute",
    "minutes": "minute", "min": "minute", "mins": "minute", "second": "second",
    "seconds": "second", "sec": "second", "secs": "second",
}  # fmt: skip
_NUMBER_WORDS: Final = {
    w: i
    for i, w in enumerate(
        _words(
            "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
            "fifteen sixteen seventeen eighteen nineteen twenty"
        )
    )
} | {"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
      "ninety": 90, "hundred": 100, "thousand": 1000, "million": 1_000_000, "dozen": 12,
      "a couple": 2, "once": 1, "twice": 2, "half": 0.5}  # fmt: skip
_MONTHS: Final = {
    m: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"),
            ("may",), ("june", "jun"), ("july", "jul"), ("august", "aug"),
            ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for m in names
}  # fmt: skip
_WEEKDAYS: Final = {
    d: i
    for i, names in enumerate(
        [("monday", "mon", "mondays"), ("tuesday", "tue", "tues", "tuesdays"),
         ("wednesday", "wed", "wednesdays"), ("thursday", "thu", "thur", "thurs", "thursdays"),
         ("friday", "fri", "fridays"), ("saturday", "sat", "saturdays"),
         ("sunday", "sun", "sundays")]
    )
    for d in names
}  # fmt: skip
_TIME_WORDS: Final = frozenset(
    _words(
        "today tomorrow yesterday tonight morning mornings afternoon afternoons evening evenings "
        "night nights noon midnight weekend weekends weekday weekdays daily weekly monthly yearly "
        "annually spring summer autumn fall winter"
    )
)
_NEGATIONS: Final = frozenset(
    _words("not no never none nobody nothing neither nor without nowhere longer")
)
_MODALS: Final = frozenset(_words("must may might should could can will would shall need"))
_PAST: Final = frozenset(_words("was were had did used formerly previously former once ex"))
"""Words that put a claim in the past ("Anna was the CTO" is not "Anna is the CTO")."""
_NOT_PAST: Final = frozenset(_words("need seed feed speed bed red shed bleed breed weed"))
"""Words ending in -ed that are not past forms."""
_DROP: Final = frozenset(
    _words(
        "a an the is are was were be been being am do does did to of at on in for by that this "
        "these those it its very really just also so then there here please currently now"
    )
)  # "now", "currently": the present tense says it already
_SYNONYMS: Final = {
    "begin": "start", "begins": "start", "began": "start", "commence": "start",
    "commences": "start", "starts": "start", "finish": "end", "finishes": "end",
    "ends": "end", "purchase": "buy", "purchased": "bought", "automobile": "car",
    "e-mail": "email", "okay": "ok", "phone": "phone", "telephone": "phone",
    "mobile": "phone", "cellphone": "phone", "enjoy": "like", "enjoys": "like",
    "fond": "like", "adore": "love", "adores": "love", "detest": "hate", "detests": "hate",
    "loathe": "hate", "loathes": "hate", "reside": "live", "resides": "live", "living": "live",
    "home": "home", "employer": "work", "employed": "work", "job": "work", "works": "work",
}  # fmt: skip
_ANTONYMS: Final = [
    ("like", "dislik"), ("love", "hate"), ("prefer", "avoid"), ("increas", "decreas"),
    ("approv", "reject"), ("pass", "fail"), ("accept", "declin"), ("win", "lose"),
    ("won", "lost"), ("allow", "forbid"), ("enabl", "disabl"), ("buy", "sell"),
    ("bought", "sold"), ("arriv", "depart"), ("before", "after"), ("earli", "later"),
    ("earli", "late"), ("open", "close"), ("on", "off"), ("in", "out"), ("up", "down"),
    ("more", "less"), ("more", "fewer"), ("higher", "lower"), ("high", "low"),
    ("window", "aisl"), ("alway", "never"), ("start", "stop"), ("start", "end"),
    ("first", "last"), ("add", "remov"), ("hire", "fire"), ("join", "leav"),
    ("agre", "disagre"), ("trust", "distrust"), ("success", "failur"), ("true", "fals"),
    ("yes", "no"), ("hot", "cold"), ("cheap", "expens"), ("big", "small"),
    ("larg", "small"), ("fast", "slow"), ("full", "empti"), ("above", "below"),
    ("over", "under"), ("max", "min"), ("maximum", "minimum"), ("north", "south"),
    ("east", "west"), ("left", "right"), ("import", "export"), ("sweet", "sour"),
    ("vegetarian", "meat"), ("morn", "even"), ("am", "pm"),
]  # fmt: skip

_TOKEN: Final = re.compile(
    r"\d{1,2}:\d{2}(?:\s*[ap]\.?m\.?)?|\d+(?:[.,]\d+)*(?:st|nd|rd|th)?|[$€£¥%]|°[cf]|[\w'-]+"
)
_CLOCK: Final = re.compile(r"(\d{1,2})(?::(\d{2}))?\s*([ap])\.?m\.?$")


class _Tok(msgspec.Struct, frozen=True):
    text: str
    kind: str  # word, number, time, unit, neg, modal
    capital: bool = False


def _fold(text: str) -> str:
    t = unicodedata.normalize("NFKC", text).replace("’", "'").replace("‘", "'")
    return t


def _number(s: str) -> str | None:
    raw = re.sub(r"(st|nd|rd|th)$", "", s)
    if re.fullmatch(r"\d{1,3}(,\d{3})+(\.\d+)?", raw):
        raw = raw.replace(",", "")
    raw = raw.replace(",", ".")
    try:
        v = float(raw)
    except ValueError:
        return None
    return str(int(v)) if v == int(v) else repr(v)


@lru_cache(maxsize=4096)
def _stem(word: str) -> str:
    return " ".join(terms(word)) or word


def _tokens(text: str) -> list[_Tok]:
    s = _fold(text)
    out: list[_Tok] = []
    lower = s.lower()
    for pattern, repl in _CONTRACTIONS:
        lower = pattern.sub(repl, lower)
    # positions of capitalised words in the original text (entities), by lower-case form
    capitals = {
        m.group(0).lower()
        for m in re.finditer(r"(?<![.!?]\s)(?<!^)\b[A-Z][\w'-]*", s)
        if m.start() > 0
    }
    raw = _TOKEN.findall(lower)
    i = 0
    while i < len(raw):
        w = raw[i].strip("'-")
        nxt = raw[i + 1] if i + 1 < len(raw) else ""
        if not w:
            i += 1
            continue
        clock = _CLOCK.match(w) or (
            re.fullmatch(r"\d{1,2}(?::\d{2})?", w) and _CLOCK.match(f"{w} {nxt}")
        )
        if clock:
            hour = int(clock.group(1)) % 12 + (12 if clock.group(3) == "p" else 0)
            out.append(_Tok(f"t{hour:02d}:{clock.group(2) or '00'}", "time"))
            i += 1 if _CLOCK.match(w) else 2
            continue
        if re.fullmatch(r"\d{1,2}:\d{2}", w):
            hh, mm = w.split(":")
            out.append(_Tok(f"t{int(hh):02d}:{mm}", "time"))
            i += 1
            continue
        if w in ("every", "each") and (nxt in _TIME_WORDS or nxt in _WEEKDAYS or nxt in _MONTHS):
            out.append(_Tok("every", "time"))  # "every morning" moves as one time expression
        elif w == "may" and not (
            "may" in capitals
            or nxt[:1].isdigit()
            or (
                i > 0
                and (raw[i - 1] in ("in", "of", "early", "late", "mid") or raw[i - 1][:1].isdigit())
            )
        ):
            out.append(_Tok("may", "modal"))  # the verb, not the month
        elif w in _MONTHS:
            out.append(_Tok(f"month{_MONTHS[w]}", "time"))
        elif w in _WEEKDAYS:
            out.append(_Tok(f"day{_WEEKDAYS[w]}", "time"))
        elif w in _TIME_WORDS:
            out.append(_Tok(_stem(w), "time"))
        elif w in _UNITS:
            out.append(_Tok(_UNITS[w], "unit"))
        elif w in _NEGATIONS:
            out.append(_Tok("not", "neg"))
        elif w in _MODALS:
            out.append(_Tok(w, "modal"))
        elif w in _NUMBER_WORDS:
            out.append(_Tok(str(_NUMBER_WORDS[w]), "number"))
        elif w[0].isdigit():
            n = _number(w)
            if n is not None and re.fullmatch(r"(19|20)\d\d", n):
                out.append(_Tok(f"year{n}", "time"))
            elif n is not None:
                out.append(_Tok(n, "number"))
            else:
                out.append(_Tok(w, "word"))
        elif w in _PAST:
            out.append(_Tok("past", "tense"))
        elif w in _DROP:
            pass
        else:
            syn = _SYNONYMS.get(w, w)
            out.append(_Tok(_stem(syn), "word", capital=w in capitals))
            if len(w) > 4 and w.endswith("ed") and w not in _NOT_PAST:
                out.append(_Tok("past", "tense"))  # "lived": the stem alone reads as "lives"
        i += 1
    # a unit before its number ("$ 4000") reads as after it ("4000 dollars")
    for k in range(len(out) - 1):
        if out[k].kind == "unit" and out[k + 1].kind == "number":
            out[k], out[k + 1] = out[k + 1], out[k]
    return out


def claim_tokens(text: str) -> tuple[str, ...]:
    """The normalised tokens ``same_claim`` compares (for tests and explanations)."""
    return tuple(t.text for t in _tokens(text))


def _text_verdict(a: str, b: str) -> str | None:
    """``None`` when ``a`` and ``b`` say the same, else the class of the difference."""
    ta, tb = _tokens(a), _tokens(b)
    core_a = [t.text for t in ta if t.kind != "time"]
    core_b = [t.text for t in tb if t.kind != "time"]
    times_a = sorted(t.text for t in ta if t.kind == "time")
    times_b = sorted(t.text for t in tb if t.kind == "time")
    if core_a == core_b and times_a == times_b:
        return None
    sa, sb = {t.text for t in ta}, {t.text for t in tb}

    def differs(kind: str) -> bool:
        return sorted(t.text for t in ta if t.kind == kind) != sorted(
            t.text for t in tb if t.kind == kind
        )

    if differs("neg"):
        return "negation"
    if differs("number"):
        return "number"
    if differs("time"):
        return "date_time"
    if differs("unit"):
        return "unit"
    caps_a = {t.text for t in ta if t.capital}
    caps_b = {t.text for t in tb if t.capital}
    if (caps_a - sb) or (caps_b - sa):
        return "entity"
    only_a, only_b = sa - sb, sb - sa
    for x, y in _ANTONYMS:
        if (any(w.startswith(x) for w in only_a) and any(w.startswith(y) for w in only_b)) or (
            any(w.startswith(y) for w in only_a) and any(w.startswith(x) for w in only_b)
        ):
            return "polarity"
    if differs("modal"):
        return "modality"
    if differs("tense"):
        return "tense"
    if not only_a or not only_b:
        return "detail" if only_a or only_b else "wording"  # same words, another order
    return "wording"


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, datetime) and isinstance(b, datetime):
        return a == b
    return bool(a == b)


def same_claim(a: Data, b: Data) -> Verdict:
    """Whether ``a`` and ``b`` state the same claim (see the module docs)."""
    if type(a) is not type(b):
        return Verdict(False, "type")
    for name in a.__struct_fields__:
        va, vb = getattr(a, name), getattr(b, name)
        if isinstance(va, str) and isinstance(vb, str):
            why = _text_verdict(va, vb)
            if why is not None:
                return Verdict(False, why)
        elif (
            isinstance(va, tuple)
            and isinstance(vb, tuple)
            and len(va) == len(vb)
            and all(isinstance(x, str) for x in (*va, *vb))
        ):
            for x, y in zip(va, vb, strict=True):
                why = _text_verdict(x, y)
                if why is not None:
                    return Verdict(False, why)
        elif not _equal(va, vb):
            return Verdict(False, f"field:{name}")
    return Verdict(True)
