"""The tokenizer: folding, term boundaries, limits, and the laws specs/lexical.md §2 states."""

from __future__ import annotations

import unicodedata
from concurrent.futures import ThreadPoolExecutor

import pytest
import Stemmer
from hypothesis import example, given
from hypothesis import strategies as st

from cortex.index.text import MAX_TOKEN_CHARS, STOP_WORDS, fold, query_terms, terms, tokenize


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("Where does Ada live?", ["where", "does", "ada", "live"]),
        ("Zürich ZURICH zürich", ["zurich", "zurich", "zurich"]),
        ("Crème Brûlée, naïve café", ["creme", "brulee", "naive", "cafe"]),
        ("Straße STRASSE", ["strasse", "strasse"]),  # casefold, not lower()
        ("ﬁnance ①", ["finance", "1"]),  # compatibility forms: ligature, circled digit
        (
            "costs 3.5 USD, 1,299.99 in 2023-05-08",
            ["costs", "3", "5", "usd", "1", "299", "99", "in", "2023", "05", "08"],
        ),
        ("RTX4090 v2 snake_case kebab-case", ["rtx4090", "v2", "snake", "case", "kebab", "case"]),
        ("東京は日本", ["東", "京", "は", "日", "本"]),  # one term per ideograph / kana
        ("Ελληνικά ΣΟΦΙΑ", ["ελληνικα", "σοφια"]),
        ("Москва москва", ["москва", "москва"]),
        ("한국어 텍스트", ["한국어", "텍스트"]),  # Hangul keeps its words, recomposed (NFC)
        ("", []),
        ("  ...  !!! ", []),
        ("don't", ["don", "t"]),
    ],
)
def test_examples(text: str, terms: list[str]) -> None:
    assert tokenize(text) == terms


def test_spacing_marks_stay_inside_words() -> None:
    # Devanagari vowel signs are spacing marks (Mc): they do not split a word
    (word,) = tokenize("हिन्दी")
    assert word.startswith("ह") and len(word) > 2


def test_long_tokens_are_cut() -> None:
    assert tokenize("a" * 200) == ["a" * MAX_TOKEN_CHARS]
    assert tokenize("é" * 100) == ["e" * MAX_TOKEN_CHARS]


def test_fold() -> None:
    assert fold("Ångström") == "angstrom"
    assert fold("İstanbul") == "istanbul"


words = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


@given(words)
@example("ß")
@example("ΐ")
@example("İ")
@example("ǰ̌")
@example("ᾈ")
@example("ﷺ")
@example("a" * 70 + "é")
def test_idempotent_on_its_own_output(text: str) -> None:
    terms = tokenize(text)
    assert all(terms), "no empty terms"
    assert all(len(t) <= MAX_TOKEN_CHARS for t in terms)
    assert tokenize(" ".join(terms)) == terms
    for t in terms:
        assert tokenize(t) == [t]
        assert unicodedata.is_normalized("NFC", t)
        assert "\x00" not in t
    assert fold(fold(text)) == fold(text)


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=60))
def test_the_ascii_path_agrees_with_the_general_one(text: str) -> None:
    # the general path, forced by a non-ASCII separator that is not part of any term
    assert tokenize(text + " \u00b7") == tokenize(text)


@given(words, words)
def test_separators_split(a: str, b: str) -> None:
    # terms never span a separator: tokenizing a concatenation with a space between is the
    # concatenation of the tokenizations
    assert tokenize(a + " " + b) == tokenize(a) + tokenize(b)


@given(words)
def test_case_and_accents_do_not_matter(text: str) -> None:
    assert tokenize(text.upper()) == tokenize(text.lower()) or _casing_changes_letters(text)
    stripped = "".join(
        c for c in unicodedata.normalize("NFKD", text) if unicodedata.category(c) != "Mn"
    )
    assert tokenize(stripped) == tokenize(text)


def _casing_changes_letters(text: str) -> bool:
    # upper() is not reversible for every letter (e.g. "ı".upper() == "I"): skip those texts
    return fold(text.upper()) != fold(text)


# -- the analyzer: stemmed index terms and query terms (lexical.md §2 steps 4-5)


@given(st.text(max_size=80))
def test_terms_are_stemmed_tokens(text: str) -> None:
    tokens, stemmed = tokenize(text), terms(text)
    assert len(stemmed) == len(tokens)
    for token, term in zip(tokens, stemmed, strict=True):
        assert term and "\x00" not in term and len(term) <= len(token) + 1
    assert terms(text.upper()) == stemmed or _casing_changes_letters(text)


@given(st.text(max_size=80))
def test_query_terms_are_distinct_stems_of_content_words(text: str) -> None:
    got = query_terms(text)
    assert len(got) == len(set(got))
    tokens = tokenize(text)
    content = [t for t in tokens if t not in STOP_WORDS]
    assert set(got) == set(terms(" ".join(content or tokens)))
    assert bool(got) == bool(tokens)


def test_query_terms_leave_function_words_out_unless_that_is_all() -> None:
    assert query_terms("What did Ada say about the meetings?") == ["ada", "say", "meet"]
    assert query_terms("Who are you?") == ["who", "are", "you"]
    assert query_terms("") == []


def test_stemming_is_thread_safe() -> None:
    words = [f"connections{i} running adoption" for i in range(200)]
    want = [terms(w) for w in words]
    with ThreadPoolExecutor(4) as pool:
        for _ in range(5):
            assert list(pool.map(terms, words)) == want


def test_the_stem_cache_is_bounded_and_never_changes_a_stem(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import cortex.index.text as T

    want = {w: Stemmer.Stemmer("english").stemWord(w) for w in ("running", "adoptions", "teas")}
    monkeypatch.setattr(T, "_STEMS_MAX", 4)
    T.STEMS.clear()
    for i in range(50):
        words = [f"word{i}", "running", f"x{i}s", "adoptions", "teas"]
        got = T._stem_words(words)
        assert got[1] == want["running"] and got[3:] == [want["adoptions"], want["teas"]]
        assert len(T.STEMS) <= 5  # emptied whenever a batch would pass the bound
    T.STEMS.clear()
