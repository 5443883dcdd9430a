"""A text query's context and entity terms (``cortex.query.rerank``, ``specs/query.md`` §1.9).

The pure parts by hand on small inputs, then the store: the answer after a matching turn comes
in with its neighbour's score, a long pause, a Fact or a hidden memory lends nothing, a named
counterparty counts, and with both weights 0 the ranking is fusion's alone.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cortex import Cortex, Event, Fact, Fusion, Identity, Query, Reader, ValidationError
from cortex.index.text import fold, tokenize
from cortex.query.rerank import (
    CONTEXT_GAP,
    combine,
    context_scores,
    entity_names,
    names_any,
    unnamed,
)

from .vsupport import E, open_store

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)
PLAIN = Fusion(context_weight=0.0, entity_weight=0.0)


def _q(text: str) -> list[str]:
    return tokenize(fold(text))


# -- pure parts, by hand -----------------------------------------------------------------------


def test_names_any_matches_whole_words_in_a_row() -> None:
    assert names_any(_q("What do Melanie's kids like?"), ["Melanie"])
    assert names_any(_q("what did ADA LOVELACE write"), ["Ada Lovelace"])
    assert names_any(_q("where did Zoë go"), ["zoe"])  # folded both ways
    assert not names_any(_q("what did Anabel say"), ["Ana"])  # part of a word
    assert not names_any(_q("Lovelace and Ada"), ["Ada Lovelace"])  # not in a row
    assert not names_any(_q("anything"), [""])
    assert names_any(_q("Jon and Gina"), ["Gina", "Jon"])


def test_unnamed_cuts_whole_names_by_hand() -> None:
    assert unnamed("What do Melanie's kids like?", ["Melanie"]) == "What do kids like?"
    assert unnamed("Where has Melanie camped?", ["melanie"]) == "Where has camped?"
    assert unnamed("What did Jon tell Gina?", ["Gina", "Jon"]) == "What did tell?"
    assert unnamed("what did ADA LOVELACE write", ["Ada Lovelace"]) == "what did write"
    assert unnamed("where did Zoë go", ["zoe"]) == "where did go"  # folded both ways
    assert unnamed("Ada’s cat and Ada", ["Ada"]) == "cat and"  # typographic apostrophe
    # the longest name first: "Ada Lovelace" goes whole, not only "Ada"
    assert unnamed("did Ada Lovelace code", ["Ada", "Ada Lovelace"]) == "did code"


def test_unnamed_leaves_what_is_not_a_whole_name() -> None:
    assert unnamed("What did Anabel say", ["Ana"]) == "What did Anabel say"  # part of a word
    assert unnamed("Lovelace and Ada", ["Ada Lovelace"]) == "Lovelace and Ada"  # not in a row
    assert unnamed("Melanie?", ["Melanie"]) == "Melanie?"  # nothing else to ask
    assert unnamed("Jon, Gina!", ["Jon", "Gina"]) == "Jon, Gina!"
    assert unnamed("kids of Jon", []) == "kids of Jon"
    assert unnamed("kids of Jon", [""]) == "kids of Jon"
    assert unnamed("the Jones family", ["Jon"]) == "the Jones family"


def test_entity_names_are_the_entity_fields() -> None:
    assert entity_names(Event(kind="interaction", counterparty="Gina")) == ("Gina",)
    assert entity_names(Fact(statement="s", subject="Ada", predicate="p")) == ("Ada",)
    assert entity_names(Identity(name="Ada Lovelace")) == ("Ada Lovelace",)
    assert entity_names(Event(kind="interaction")) == ()
    assert entity_names(None) == ()


def test_context_is_the_best_neighbouring_source() -> None:
    sources = {"a": 0.5, "b": 0.2, "c": 0.0}
    links = {"a": ["x", "b"], "b": ["a", "y", "x"], "c": ["z"]}
    # x is next to a (0.5) and b (0.2): the best; c lends nothing (score 0); a source's own
    # score is not its context
    assert context_scores(sources, links) == {"x": 0.5, "b": 0.5, "a": 0.2, "y": 0.2}
    assert context_scores({"a": 1.0}, {"a": ["a"]}) == {}


def test_combine_by_hand() -> None:
    assert combine(0.6, True, 0.5, 0.3, 0.1) == pytest.approx(0.6 + 0.1 + 0.3 * 0.5)
    assert combine(0.6, False, 0.0, 0.3, 0.1) == 0.6
    # a named memory no list returned gains nothing for its name: only its context counts
    assert combine(0.0, True, 0.5, 0.3, 0.1) == pytest.approx(0.15)


@pytest.mark.parametrize(
    "kw",
    [
        {"context": -1},
        {"context": 9},
        {"context": 1.0},
        {"context_weight": 1.5},
        {"context_weight": float("nan")},
        {"entity_weight": -0.1},
        {"entity_weight": "0.1"},
        {"context_weight": True},
    ],
)
def test_the_new_fusion_fields_are_validated(kw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as info:
        Fusion(**kw)
    assert info.value.field == "fusion"


# -- in the store ------------------------------------------------------------------------------


def _turn(who: str, text: str, at: datetime = T0) -> Event:
    return Event(kind="interaction", counterparty=who, summary=text, occurred_at=at)


def _chat(cx: Cortex, turns: list[tuple[str, str]], at: datetime = T0, **kw: Any) -> list[Any]:
    return [cx.write(_turn(who, text, at), **kw).id for who, text in turns]


CHAT = [
    ("Gina", "Good morning, how was the weekend?"),
    ("Jon", "How is the sourdough bakery going?"),
    ("Gina", "Great, we sold out by noon on Saturday!"),
    ("Jon", "Congratulations, that is wonderful news."),
    ("Gina", "Thanks! Next I want to try rye loaves."),
]


def test_the_answer_after_a_matching_turn_comes_in_with_its_context(tmp_path: Path) -> None:
    with open_store(tmp_path / "s") as cx:
        ids = _chat(cx, CHAT)
        res = cx.find(Query(text="sourdough bakery", limit=10))
        by = {h.memory.id: h for h in res.hits}
        q = by[ids[1]]
        assert q.ranks == {"lexical": 1}
        hi = q.scores["lexical"]
        # lexical only: the scores stay on BM25's scale; the turns around the match (two on
        # each side, the default) gain 0.3 times its base (1, the best), times its best score
        assert [h.memory.id for h in res.hits] == [ids[1], ids[0], ids[2], ids[3]]
        for n in (ids[0], ids[2], ids[3]):
            assert "lexical" not in by[n].ranks
            assert by[n].scores["context"] == pytest.approx(1.0)
            assert by[n].score == pytest.approx(0.3 * hi)
        assert ids[4] not in by  # three turns away
        # lexical matches lend context to each other, their own score first
        assert q.score == pytest.approx(hi)
        with open_store(tmp_path / "s", fusion=PLAIN) as plain:
            got = plain.find(Query(text="sourdough bakery", limit=10))
            assert [h.memory.id for h in got.hits] == [ids[1]]
            assert all("context" not in h.scores for h in got.hits)


def test_hybrid_context_is_added_to_the_fused_score(tmp_path: Path) -> None:
    with open_store(tmp_path / "s", embedder=E, salience_blend=0.0) as cx:
        ids = _chat(cx, CHAT)
        with open_store(tmp_path / "s", embedder=E, salience_blend=0.0, fusion=PLAIN) as plain:
            fused = {
                h.memory.id: h.scores["fused"]
                for h in plain.find(Query(text="sourdough bakery", limit=10)).hits
            }
        res = cx.find(Query(text="sourdough bakery", limit=10))
        by = {h.memory.id: h for h in res.hits}
        for mid, h in by.items():
            i = ids.index(mid)
            near = [ids[j] for j in range(max(0, i - 2), min(len(ids), i + 3)) if j != i]
            ctx = max(fused.get(n, 0.0) for n in near)
            assert h.scores.get("context", 0.0) == pytest.approx(ctx)
            assert h.score == pytest.approx(fused.get(mid, 0.0) + 0.3 * ctx)
        assert [h.ranks["fused"] for h in res.hits] == list(range(1, len(res.hits) + 1))


def test_a_long_pause_ends_the_context(tmp_path: Path) -> None:
    with open_store(tmp_path / "s") as cx:
        before = _chat(cx, [("Gina", "Shall we talk about the bakery?")])[0]
        later = T0 + CONTEXT_GAP + timedelta(seconds=1)
        after = _chat(cx, [("Jon", "Yes, tell me everything.")], at=later)[0]
        close = _chat(cx, [("Gina", "Where to begin!")], at=later - timedelta(minutes=31))[0]
        hits = {h.memory.id for h in cx.find(Query(text="bakery", limit=10)).hits}
        # ``after`` is next in the index but 30 minutes and a second later: the context stops
        # there, so ``close`` (written after it) is not reached either
        assert hits == {before}
        assert after != close


def test_facts_lend_no_context(tmp_path: Path) -> None:
    with open_store(tmp_path / "s") as cx:
        cx.write(Fact(statement="Gina runs a bakery", subject="Gina", predicate="runs"))
        other = cx.write(Fact(statement="Jon likes rye", subject="Jon", predicate="likes")).id
        hits = [h.memory.id for h in cx.find(Query(text="bakery", limit=10)).hits]
        assert other not in hits and len(hits) == 1


def test_a_hidden_memory_neither_appears_nor_lends_context(tmp_path: Path) -> None:
    with open_store(tmp_path / "s") as cx:
        a = cx.write(_turn("Gina", "Hello there"), visibility="actor_public").id
        secret = cx.write(_turn("Jon", "The bakery password is rye")).id  # private
        b = cx.write(_turn("Gina", "Good to know"), visibility="actor_public").id
        eve = Reader(actor="eve")
        assert cx.find(Query(text="bakery password", limit=10, reader=eve)).hits == ()
        owner = {h.memory.id for h in cx.find(Query(text="bakery password", limit=10)).hits}
        assert owner == {a, secret, b}


def test_a_filter_keeps_the_unfiltered_order(tmp_path: Path) -> None:
    with open_store(tmp_path / "s") as cx:
        ids = _chat(cx, CHAT, tags=["chat"])
        extra = _chat(cx, [("Jon", "Any sourdough left?")], tags=["other"])
        everything = cx.find(Query(text="sourdough bakery", limit=20)).hits
        tagged = [h.memory.id for h in everything if "chat" in h.memory.head.tags]
        got = cx.find(Query(text="sourdough bakery", tags=["chat"], limit=20)).hits
        assert [h.memory.id for h in got] == tagged
        assert extra[0] in {h.memory.id for h in everything} and set(tagged) <= set(ids)


def test_a_named_counterparty_counts(tmp_path: Path) -> None:
    assert Fusion().entity_weight == 0.3  # on by default (README, "Retrieval quality")
    with open_store(tmp_path / "s", fusion=Fusion(entity_weight=0.1)) as cx:
        far = T0 + timedelta(days=3)
        bob = cx.write(_turn("Bob", "I baked rye bread today")).id
        ana = cx.write(_turn("Ana", "I baked rye bread today", at=far)).id
        res = cx.find(Query(text="what bread did Ana bake?", limit=10))
        assert [h.memory.id for h in res.hits] == [ana, bob]
        top = res.hits[0]
        assert top.scores["entity"] == 0.1
        assert top.score == pytest.approx(top.scores["lexical"] * 1.1)
        assert "entity" not in res.hits[1].scores
        with open_store(tmp_path / "s", fusion=PLAIN) as plain:
            # without the term: BM25 alone (the name is a word of the counterparty's line)
            hits = plain.find(Query(text="what bread did Ana bake?", limit=10)).hits
            assert [h.memory.id for h in hits] == [ana, bob]
            assert hits[0].score == hits[0].scores["lexical"] == top.scores["lexical"]


class Recording:
    """The tests' hashing embedder, keeping the texts it was given (to see the query's)."""

    def __init__(self) -> None:
        self.model_id, self.dim, self.texts = E.model_id, E.dim, list[str]()

    def embed(self, texts: Any) -> Any:
        self.texts.extend(texts)
        return E.embed(texts)


def test_the_vector_ranking_embeds_the_question_without_the_named_entity(
    tmp_path: Path,
) -> None:
    rec = Recording()
    with open_store(tmp_path / "s", embedder=rec) as cx:
        _chat(cx, CHAT)
        rec.texts.clear()
        cx.find(Query(text="What bread does Gina bake?", limit=5))
        # Gina is the counterparty of a lexical hit and named as a whole word: the vector
        # ranking embeds the rest; the entity term counts her turns instead
        assert rec.texts == ["What bread does bake?"]
        rec.texts.clear()
        cx.find(Query(text="What does Ginah bake?", limit=5))  # names nobody
        assert rec.texts == ["What does Ginah bake?"]
        rec.texts.clear()
        cx.find(Query(text="Gina", limit=5))  # only a name: asked as it is
        assert rec.texts == ["Gina"]
    with open_store(tmp_path / "s", embedder=rec, fusion=Fusion(entity_weight=0.0)) as cx:
        rec.texts.clear()
        cx.find(Query(text="What bread does Gina bake?", limit=5))
        assert rec.texts == ["What bread does Gina bake?"]  # the term off: the whole text


def test_a_hidden_memory_names_nobody_to_the_vector_ranking(tmp_path: Path) -> None:
    rec = Recording()
    with open_store(tmp_path / "s", embedder=rec) as cx:
        cx.write(_turn("Gina", "Good morning"), visibility="actor_public")
        cx.write(_turn("Zed", "The bakery password is rye"))  # private to the owner
        eve = Reader(actor="eve")
        rec.texts.clear()
        cx.find(Query(text="what did Zed say about the bakery", limit=5, reader=eve))
        assert rec.texts == ["what did Zed say about the bakery"]
        rec.texts.clear()
        cx.find(Query(text="what did Zed say about the bakery", limit=5))
        assert rec.texts == ["what did say about the bakery"]


def test_a_near_query_is_embedded_as_given(tmp_path: Path) -> None:
    rec = Recording()
    with open_store(tmp_path / "s", embedder=rec) as cx:
        _chat(cx, CHAT)
        rec.texts.clear()
        cx.find(Query(text="Gina bakery", near="Gina bakery", limit=5))
        assert rec.texts == ["Gina bakery"]
