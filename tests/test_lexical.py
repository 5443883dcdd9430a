"""The lexical index: BM25 scores, pruning that never changes the ranking, and consistency."""

from __future__ import annotations

import math
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import Stemmer
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cortex import (
    Cortex,
    CortexError,
    Event,
    Fact,
    MemoryId,
    NewMemory,
    Outcome,
    Pattern,
    Query,
    ValidationError,
    render_full,
)
from cortex.engine.heads import encode_row
from cortex.errors import IntegrityError
from cortex.index.lexical import (
    STATS_KEY,
    Indexer,
    LexStats,
    analyze,
    count_terms,
    document_frequencies,
    fold,
    idf,
    logical,
    read_stats,
    search,
    search_terms,
)
from cortex.index.text import tokenize
from cortex.model.codec import HEAD as HEAD_CODEC
from cortex.model.enums import MemoryType
from cortex.model.records import Head
from cortex.storage.keys import (
    head_key,
    id_key,
    lex_doc_key,
    lex_docno_key,
    lex_term_key,
    parse_lex_doc_key,
    parse_lex_docno_key,
    parse_lex_term_key,
    parse_posting_key,
    posting_key,
    posting_prefix,
    show_key,
)
from cortex.storage.kv import LmdbKV, seal
from tests.bm25 import check_ranking, scores

STEM = Stemmer.Stemmer("english").stemWord

T0 = datetime(2030, 6, 1, tzinfo=UTC)


def mid(n: int) -> MemoryId:
    return MemoryId(bytes(15) + bytes([n]))


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


@pytest.fixture
def kv(tmp_path: Path) -> Iterator[LmdbKV]:
    k = LmdbKV(tmp_path / "kv")
    yield k
    k.close()


def put_head(txn: object, row: int, m: MemoryId) -> None:
    """A bare head of ``m`` at ``row`` and its ``id/`` record: the index maps numbers (rows) to
    ids through the heads, ids to numbers through ``id/``."""
    h = Head(
        id=m,
        type=MemoryType.FACT,
        current_version=1,
        actor_scope="t",
        created_at=T0,
        last_updated_at=T0,
    )
    txn.put(head_key(row), seal(HEAD_CODEC.encode(h, "head")))  # type: ignore[attr-defined]
    txn.put(id_key(m), encode_row(row))  # type: ignore[attr-defined]


def new_row(lex: Indexer, m: MemoryId) -> int:
    """Give ``m`` the next row (format 21: its document number) and a head there."""
    row = lex.take_row()
    put_head(lex.txn, row, m)
    return row


def index(kv: LmdbKV, docs: dict[MemoryId, list[str]]) -> None:
    def fn(txn: object) -> None:
        lex = Indexer(txn)  # type: ignore[arg-type]
        for m, terms in docs.items():
            lex.add(new_row(lex, m), 1, terms)
        lex.flush()

    kv.write(fn)


def run(
    kv: LmdbKV, query: str, limit: int = 10, allow: object = None
) -> list[tuple[MemoryId, float]]:
    with kv.read() as txn:
        return search(txn, query, limit=limit, allow=allow)  # type: ignore[arg-type]


# --- scores against hand-computed values ------------------------------------------------------
# d1 = "the cat sat" (3 terms), d2 = "the dog sat on the mat" (6), d3 = "cat cat dog" (3).
# N = 3, avgdl = 4; idf(df=2) = ln(1 + 1.5/2.5) = ln 1.6 = 0.470003629...; idf(df=1) = ln(8/3).
# A 3-term document has norm = 1 - 0.75 + 0.75 * 3/4 = 0.8125; a 6-term one 1.375.
TINY = {
    mid(1): ["the", "cat", "sat"],
    mid(2): ["the", "dog", "sat", "on", "the", "mat"],
    mid(3): ["cat", "cat", "dog"],
}


def test_idf() -> None:
    assert idf(3, 2) == pytest.approx(0.47000362924573563)
    assert idf(3, 1) == pytest.approx(math.log(8 / 3))
    assert idf(10, 10) > 0  # never negative, even for a term in every document


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # cat: d3 tf=2 -> 0.4700 * 2*2.2 / (2 + 1.2*0.8125) = 0.695131; d1 tf=1 -> 0.523548
        ("cat", [(3, 0.6951314180441133), (1, 0.523548346501579)]),
        # dog: d3 (short) 0.523548 beats d2 (long) 0.4700 * 2.2 / (1 + 1.2*1.375) = 0.390192
        ("dog", [(3, 0.523548346501579), (2, 0.39019169220400696)]),
        # "the" is a function word, left out beside "sat": d1 0.523548, d2 (long) 0.390192
        ("The SAT", [(1, 0.523548346501579), (2, 0.39019169220400696)]),
        # a query of function words only keeps them: d2 the(tf=2) 0.566580, d1 0.523548
        ("the", [(2, 0.5665797174469143), (1, 0.523548346501579)]),
        # queries are stemmed like documents: "cats" searches "cat"
        ("cats", [(3, 0.6951314180441133), (1, 0.523548346501579)]),
        # mat: df=1, idf = ln(8/3); only d2 (long): 0.980829 * 2.2 / 2.65 = 0.814273
        ("mat mat", [(2, 0.8142733421229427)]),
        ("unicorn", []),
        ("", []),
    ],
)
def test_bm25_by_hand(kv: LmdbKV, query: str, expected: list[tuple[int, float]]) -> None:
    index(kv, TINY)
    got = run(kv, query)
    assert [m for m, _ in got] == [mid(n) for n, _ in expected]
    for (_, s), (_, want) in zip(got, expected, strict=True):
        assert s == pytest.approx(want, rel=1e-12)


def test_ties_go_to_the_memory_indexed_first(kv: LmdbKV) -> None:
    # ties by document number ascending: the order the memories entered the index (format 14)
    index(kv, {mid(9): ["x", "y"], mid(2): ["x", "z"], mid(5): ["x", "w"]})
    got = run(kv, "x")
    assert [m for m, _ in got] == [mid(9), mid(2), mid(5)]
    assert len({s for _, s in got}) == 1
    assert run(kv, "x", limit=2) == got[:2]


def test_limit_and_allow(kv: LmdbKV) -> None:
    index(kv, TINY)
    assert run(kv, "cat", limit=1) == run(kv, "cat")[:1]
    assert run(kv, "cat", limit=0) == []
    only1 = run(kv, "cat", allow={mid(1)})
    assert [m for m, _ in only1] == [mid(1)]
    assert only1[0][1] == pytest.approx(0.523548346501579)  # statistics stay the collection's
    assert run(kv, "cat", allow=lambda m: m != mid(3)) == only1
    assert run(kv, "cat", allow=set()) == []


def test_search_terms_and_document_frequencies(kv: LmdbKV) -> None:
    index(kv, TINY)
    with kv.read() as txn:
        # terms as given, each once: "cat" twice counts once; "the" is not dropped as a
        # function word is from a text query; an unindexed term adds nothing
        assert search_terms(txn, ["cat", "cat"], limit=10) == search(txn, "cat", limit=10)
        got = dict(search_terms(txn, ["the", "unicorn"], limit=10))
        assert got == pytest.approx({mid(2): 0.5665797174469143, mid(1): 0.523548346501579})
        assert search_terms(txn, [], limit=10) == []
        assert search_terms(txn, ["cat"], limit=0) == []
        assert document_frequencies(txn, ["cat", "the", "mat", "unicorn", "cat"]) == (
            3,
            {"cat": 2, "the": 2, "mat": 1, "unicorn": 0},
        )


def test_an_empty_index(kv: LmdbKV) -> None:
    assert run(kv, "anything") == []
    with kv.read() as txn:
        assert read_stats(txn) == LexStats(next_docno=0)


# --- pruning gives exactly the full evaluation ------------------------------------------------

VOCAB = [f"w{i}" for i in range(30)]
# a skewed vocabulary: low words are common, high ones rare, as in text
skewed = st.integers(0, 29).map(lambda i: VOCAB[min(i, int(i * i / 29))])


@settings(max_examples=60, deadline=None)
@given(
    docs=st.lists(st.lists(skewed, min_size=0, max_size=12), min_size=1, max_size=40),
    query=st.lists(skewed, min_size=1, max_size=5).map(" ".join),
    limit=st.integers(1, 12),
    allow_mode=st.sampled_from(["none", "predicate", "small_set", "large_set"]),
)
def test_pruned_search_equals_brute_force(
    docs: list[list[str]], query: str, limit: int, allow_mode: str
) -> None:
    corpus = {mid(i + 1): terms for i, terms in enumerate(docs)}
    reference = scores(corpus, query)
    allow: object = None
    if allow_mode == "predicate":
        allow = lambda m: m.bytes[-1] % 2 == 0  # noqa: E731
    elif allow_mode == "small_set":
        allow = {mid(1), mid(2), mid(99)}
    elif allow_mode == "large_set":
        allow = {mid(i + 1) for i in range(0, len(docs), 2)} | {mid(200)}
    if allow is not None:
        ok = allow if callable(allow) else allow.__contains__  # type: ignore[attr-defined]
        reference = {m: s for m, s in reference.items() if ok(m)}
    with tempfile.TemporaryDirectory() as tmp:
        kv = LmdbKV(Path(tmp) / "kv")
        try:
            index(kv, corpus)
            got = run(kv, query, limit, allow)
        finally:
            kv.close()
    check_ranking(got, reference, limit)


# --- the index in the store ------------------------------------------------------------------


def lex_state(cx: Cortex, *, with_docs: bool = True) -> dict[str, object]:
    """The lexical index by memory id (``lexical.logical``: a function of the live memories
    only, whatever the document numbers), with every segment folded."""
    cx.merge_lexical()
    with cx._kv.read() as txn:
        out = logical(txn)
        assert txn.get(STATS_KEY) is not None
    if not with_docs:
        del out["docs"]
    return out


def fact(s: str) -> Fact:
    return Fact(statement=s, subject="ada", predicate="said")


def test_writes_updates_tombstones_and_purges_keep_the_index_exact(tmp_path: Path) -> None:
    a, b, c, d, e = (mid(n) for n in range(1, 6))
    with Cortex.open(tmp_path / "x", actor="t", clock=Clock()) as cx:
        cx.write(fact("Ada lives in Zürich"), id=a)
        cx.write_many(
            [
                NewMemory(data=fact("Bob lives in Paris"), id=b),
                NewMemory(data=fact("Cleo visited Zürich twice"), id=c),
                NewMemory(data=fact("temporary note"), id=d),
                NewMemory(data=Pattern(statement="retry with backoff", coverage=3), id=e),
            ]
        )
        cx.update(a, fact("Ada lives in Basel"))
        cx.update(a, fact("Ada lives in Genève now"))
        cx.update_head(b, tags=["x"])  # no reindex, nothing changes
        cx.tombstone(c, "wrong")
        cx.purge(d, "forget")
        cx.purge(c, "forget too")  # purge after tombstone
        assert cx.verify().ok
        assert [m for m, _ in cx._lexical_search("zurich", 10)] == []
        assert [m for m, _ in cx._lexical_search("geneve", 10)] == [a]
        assert [m for m, _ in cx._lexical_search("GENÈVE basel", 10)] == [a]
        assert cx._lexical_search("temporary", 10) == []
        live = {m: analyze(cx.resolve_latest(m).data) for m in (a, b, e)}  # type: ignore[arg-type]
        check_ranking(cx._lexical_search("ada lives", 10), scores(live, "ada lives"), 10)
        stats = cx.stats()["lexical"]
        assert stats["documents"] == 3
        got = lex_state(cx, with_docs=False)
        with_docs = lex_state(cx)
    # a fresh store holding only the live content has the same postings, terms and statistics
    with Cortex.open(tmp_path / "y", actor="t", clock=Clock()) as fresh:
        fresh.write(fact("Ada lives in Genève now"), id=a)
        fresh.write(fact("Bob lives in Paris"), id=b)
        fresh.write(Pattern(statement="retry with backoff", coverage=3), id=e)
        assert lex_state(fresh, with_docs=False) == got
        docs = lex_state(fresh)["docs"]
    # the document records differ only in the version indexed (a is at version 3 there)
    assert docs.keys() == with_docs["docs"].keys()  # type: ignore[attr-defined]
    assert docs[b.bytes] == with_docs["docs"][b.bytes]  # type: ignore[index]
    assert docs[a.bytes] != with_docs["docs"][a.bytes]  # type: ignore[index]


def test_the_full_form_is_what_is_indexed(tmp_path: Path) -> None:
    ev = Event(kind="purchase", outcome=Outcome.SUCCESS, counterparty="gpu-vendor", summary="GPU")
    with Cortex.open(tmp_path / "x", actor="t") as cx:
        uri = cx.write(ev)
        terms = analyze(ev)
        assert terms == [STEM(t) for t in tokenize(render_full(ev))]
        assert cx.merge_lexical() == 1  # the write's postings wait in a segment (lexical.md §4b)
        with cx._kv.read() as txn:
            held = logical(txn)["postings"]
            for term in set(terms):
                assert (term, uri.id.bytes) in held
            assert read_stats(txn).total_length == len(terms)
        assert [m for m, _ in cx._lexical_search("vendor", 5)] == [uri.id]


def test_a_failed_write_leaves_the_index_untouched(tmp_path: Path) -> None:
    with Cortex.open(tmp_path / "x", actor="t") as cx:
        cx.write(fact("one two three"), id=mid(1))
        before = lex_state(cx)
        with pytest.raises(Exception, match="exists"):
            cx.write_many([NewMemory(data=fact("four")), NewMemory(data=fact("x"), id=mid(1))])
        assert lex_state(cx) == before


# --- keys ------------------------------------------------------------------------------------


@given(
    st.text(
        alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=64
    )
)
def test_posting_keys_round_trip(term: str) -> None:
    m = mid(7)
    key = posting_key(term, 70000)
    assert key.startswith(posting_prefix(term))
    assert parse_posting_key(key) == (term, 70000)
    assert parse_lex_term_key(lex_term_key(term)) == term
    assert parse_lex_doc_key(lex_doc_key(7)) == 7 and m.bytes[-1] == 7
    assert show_key(key) == f"lex/p/{term}/70000"
    assert parse_lex_docno_key(lex_docno_key(2**32 - 1)) == 2**32 - 1
    assert show_key(lex_docno_key(5)) == "lex/i/5"


def test_a_term_prefix_is_not_a_longer_terms_prefix() -> None:
    assert not posting_key("abc", 1).startswith(posting_prefix("ab"))
    with pytest.raises(ValueError):
        posting_key("", 1)
    with pytest.raises(ValueError):
        lex_term_key("a\x00b")


def test_reindex_rebuilds_a_damaged_index(tmp_path: Path) -> None:
    with Cortex.open(tmp_path / "x", actor="t", clock=Clock()) as cx:
        cx.write_many([NewMemory(data=fact(f"note number {i}"), id=mid(i)) for i in range(1, 8)])
        cx.update(mid(2), fact("changed note"))
        cx.tombstone(mid(3), "gone")
        good = lex_state(cx)

        def damage(txn: object) -> None:
            first = next(iter(txn.keys(posting_prefix("note"))))  # type: ignore[attr-defined]
            txn.delete(first)  # type: ignore[attr-defined]
            txn.put(lex_term_key("ghost"), b"junk")  # type: ignore[attr-defined]

        cx._kv.write(damage)
        assert not cx.verify().ok
        seen: list[tuple[int, int]] = []
        assert cx.engine._reindex_lexical(lambda done, total: seen.append((done, total))) == 6
        assert seen[-1] == (6, 6)
        assert cx.verify().ok
        assert lex_state(cx) == good


def test_the_public_reindex_changes_only_the_index(tmp_path: Path) -> None:
    with Cortex.open(tmp_path / "x", actor="t", clock=Clock()) as cx:
        cx.write_many([NewMemory(data=fact(f"note number {i}"), id=mid(i)) for i in range(1, 4)])
        cx.tombstone(mid(3), "gone")
        good = lex_state(cx)
        with cx._kv.read() as txn:
            records = {k: v for k, v in txn.scan(b"") if not k.startswith((b"lex/", STATS_KEY))}
        cx._kv.write(lambda txn: txn.delete(next(iter(txn.keys(posting_prefix("note"))))))
        assert cx.reindex_lexical() == 2  # live memories only; no progress needed
        assert lex_state(cx) == good and cx.verify().ok
        with cx._kv.read() as txn:  # no record and no journal entry changed: not journalled
            after = {k: v for k, v in txn.scan(b"") if not k.startswith((b"lex/", STATS_KEY))}
        assert after == records
        with pytest.raises(ValidationError, match="progress"):
            cx.reindex_lexical(progress=3)  # type: ignore[arg-type]
    ro = Cortex.open(tmp_path / "x", actor="t", readonly=True, create=False)
    with ro, pytest.raises(CortexError, match="read-only"):
        ro.reindex_lexical()


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "remove", "flush"]),
        st.integers(1, 6),
        st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), min_size=1, max_size=4),
    ),
    max_size=30,
)


@settings(max_examples=80)
@given(_OPS)
@example([("add", 1, ["a", "b"]), ("add", 1, ["b", "c"]), ("remove", 1, ["a"])])  # split 1 | 2
@example([("add", 1, ["a"]), ("add", 2, ["a"]), ("add", 1, ["a", "b"]), ("add", 1, ["c"])])
@example([("add", 2, ["a"]), ("add", 1, ["a"]), ("remove", 2, ["a"]), ("add", 3, ["a", "b"])])
@example([("add", 1, ["a", "b"]), ("flush", 1, ["a"]), ("add", 2, ["b"]), ("add", 1, ["b"])])
def test_removals_and_additions_held_in_one_transaction(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int, list[str]]]
) -> None:
    """Removals wait for ``flush`` beside the additions (an update rewrites each block once):
    any mix of adds (of new memories, held as new postings, and of updates), removes and
    flushes, in one transaction or several, leaves the index a fresh one of the memories left
    would have, byte for byte."""
    root = tmp_path_factory.mktemp("held")
    kv = LmdbKV(root / "mixed")
    live: dict[int, list[str]] = {}
    version: dict[int, int] = {}
    rows: dict[int, int] = {}  # each memory's row, given when it is first added

    def row_of(lex: Indexer, n: int) -> int:
        if n not in rows:
            rows[n] = new_row(lex, mid(n))
        return rows[n]

    def run(txn: object, batch: list[tuple[str, int, list[str]]]) -> None:
        lex = Indexer(txn)  # type: ignore[arg-type]
        for op, n, terms in batch:
            if op == "flush":
                lex.flush()
            elif op == "remove":
                row = row_of(lex, n)
                assert lex.remove(row, terms=sorted(set(live.get(n, [])))) == (n in live)
                live.pop(n, None)
            else:  # add, replacing the memory if it is indexed (an update)
                new = n not in version  # never indexed: held as new postings (a write)
                row = row_of(lex, n)
                if not new:
                    lex.remove(row, terms=sorted(set(live.get(n, []))))
                version[n] = version.get(n, 0) + 1
                lex.add_counted(row, version[n], *count_terms(terms), new=new)
                live[n] = terms
        lex.flush()

    try:
        # the ops in two transactions, split in the middle
        half = len(ops) // 2
        kv.write(lambda txn: run(txn, ops[:half]))
        kv.write(lambda txn: run(txn, ops[half:]))
        kv.write(fold)
        with kv.read() as txn:
            got = logical(txn)
    finally:
        kv.close()
    fresh = LmdbKV(root / "fresh")
    try:

        def build(txn: object) -> None:
            lex = Indexer(txn)  # type: ignore[arg-type]
            for n in sorted(live):
                row = new_row(lex, mid(n))
                lex.add_counted(row, version[n], *count_terms(live[n]), new=n % 2 == 0)
            lex.flush()

        fresh.write(build)
        fresh.write(fold)
        with fresh.read() as txn:
            want = logical(txn)
    finally:
        fresh.close()
    assert got == want


def test_the_last_document_number_and_then_a_clear_error(kv: LmdbKV) -> None:
    """Numbers are u32 (format 21: the rows): the memory that would need 2**32 fails its write
    (nothing written), and the error says what to do."""
    from cortex.errors import StoreFullError
    from cortex.index.lexical import STATS_CODEC
    from cortex.index.postings import DOCNO_LIMIT
    from cortex.storage.kv import seal

    stats = LexStats(next_docno=DOCNO_LIMIT - 1)
    kv.write(lambda txn: txn.put(STATS_KEY, seal(STATS_CODEC.encode(stats, "meta/lexical"))))

    def add(n: int) -> None:
        def fn(txn: object) -> None:
            lex = Indexer(txn)  # type: ignore[arg-type]
            lex.add(new_row(lex, mid(n)), 1, ["x", "y"])
            lex.flush()

        kv.write(fn)

    add(1)
    with kv.read() as txn:
        assert read_stats(txn).next_docno == DOCNO_LIMIT
        assert [m for m, _ in search(txn, "x", limit=3)] == [mid(1)]
        before = dict(txn.scan(b""))
    with pytest.raises(StoreFullError, match="row number"):
        add(2)
    with kv.read() as txn:
        assert dict(txn.scan(b"")) == before


def test_a_memory_keeps_its_number_and_numbers_are_not_given_again(tmp_path: Path) -> None:
    """lexical.md §4 (format 21): a memory's number is its row, given at its creation in write
    order and kept for its life: an update keeps it, a tombstone or a purge takes it out of
    the index (its lex/d/ record goes) and leaves a gap; a rebuild keeps the rows."""
    from cortex.engine.heads import id_at
    from cortex.index.lexical import DOC_CODEC
    from cortex.storage.keys import LEX_DOC
    from cortex.storage.kv import unseal

    def numbers(cx: Cortex) -> dict[int, MemoryId]:
        with cx._kv.read() as txn:
            out: dict[int, MemoryId] = {}
            for k, v in txn.scan(LEX_DOC):  # each LexDoc holds its number: its row
                row = parse_lex_doc_key(k)
                assert DOC_CODEC.decode(unseal(k, v), "d").docno == row
                m = id_at(txn, k[len(LEX_DOC) :])
                assert m is not None
                out[row] = m
            return out

    with Cortex.open(tmp_path / "x", actor="t", clock=Clock()) as cx:
        a, b, c, d = (mid(n) for n in (9, 3, 7, 1))  # ids in no order
        for m in (a, b, c):
            cx.write(fact(f"note {m}"), id=m)
        assert numbers(cx) == {0: a, 1: b, 2: c}
        cx.update(b, fact("note changed"))
        cx.tombstone(c, "gone")
        cx.write(fact("another note"), id=d)
        assert numbers(cx) == {0: a, 1: b, 3: d}
        cx.purge(a, "forget")
        assert numbers(cx) == {1: b, 3: d}
        assert cx.merge_lexical() >= 0 and numbers(cx) == {1: b, 3: d}
        assert [m for m, _ in cx._lexical_search("note", 5)] == [b, d]
        assert cx.verify().ok
        cx.reindex_lexical()
        assert numbers(cx) == {1: b, 3: d}  # the rows stay
        cx.write(fact("a last note"), id=mid(2))
        assert numbers(cx)[4] == mid(2)  # past every row given, never a gap's
        assert cx.verify().ok


def test_missing_statistics_where_memories_exist_are_damage_not_an_empty_index(
    tmp_path: Path,
) -> None:
    """A store has ``meta/lexical`` from its creation (lexical.md §4): a missing one (its key
    damaged) with memories in the store is an integrity error for a text search, ``stats`` and
    a write (which would otherwise give a row another memory has), never an empty index;
    ``verify`` names it and a rebuild writes it again."""
    with Cortex.open(tmp_path / "s", actor="t") as cx:
        cx.write(Fact(statement="the heron fishes", subject="heron", predicate="fishes"))
        cx._kv.write(lambda txn: txn.delete(STATS_KEY))
        with pytest.raises(IntegrityError, match="meta/lexical"):
            cx.find(Query(text="heron", limit=5))
        with pytest.raises(IntegrityError, match="meta/lexical"):
            cx.stats()
        with pytest.raises(IntegrityError, match="meta/lexical"):
            cx.write(Fact(statement="the egret waits", subject="egret", predicate="waits"))
        report = cx.verify()
        assert any(p.record == "meta/lexical" for p in report.problems), report.problems
        cx.reindex_lexical()
        assert [h.memory.data.subject for h in cx.find(Query(text="heron", limit=5)).hits] == [
            "heron"
        ]
        cx.write(Fact(statement="the egret waits", subject="egret", predicate="waits"))
        assert cx.verify().ok
