"""The lexical side of a write in C against its Python definition.

``cortex._speedups.ascii_term_counts`` (with its ``StemTable``) must give what
``count_terms(terms(text))`` gives, or None; ``index_doc`` must leave exactly what the Python
path of ``Indexer.add_counted`` leaves (the sealed document, the postings, the statistics), or
return None having changed nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cortex.errors import IntegrityError
from cortex.index import lexical, text
from cortex.index.lexical import DOC_CODEC, LexDoc, count_terms
from cortex.index.postings import entry_tail
from cortex.model.ids import MemoryId
from cortex.model.records import Data
from cortex.storage.keys import LEX_DOC, lex_term_key
from cortex.storage.kv import seal
from tests.strategies import any_data
from tests.test_speedups import _both, _module_speedups

sp = pytest.importorskip(
    "cortex._speedups",
    reason="the C accelerator cortex._speedups is not built (no C compiler at install time)",
)

_ASCII = st.characters(max_codepoint=127)
_WORDS = ["run", "Running", "RUNS", "ran", "the", "a", "x" * 64, "Y" * 70, "3", "5", "2023"]
# texts of repeated words (stems that merge, cut tokens) and of any characters
_DOC_TEXT = (
    st.lists(st.sampled_from(_WORDS) | st.text(_ASCII, max_size=8), max_size=40).map(" ".join)
    | st.text(_ASCII, max_size=200)
    | st.text(max_size=20)
)


def _definition(s: str) -> tuple[list[str], list[int]]:
    """``count_terms(terms(s))`` on the Python paths (it also stems new tokens into the cache)."""
    with _module_speedups(text, False), _module_speedups(lexical, False):
        return count_terms(text.terms(s))


@given(_DOC_TEXT)
@example("")
@example("Running runs RUN ran, the runner's run: 3.5 2023-05-08")
@example("x" * 64 + " " + "X" * 65 + " " + "x" * 200 + " " + "y" * 63)
@example("\x00A\x7fB\tc a_b")
@example("Zürich ZURICH")
@example(" ".join(f"w{i % 700}" for i in range(1500)))  # a long text: room for its tokens
def test_ascii_term_counts_is_count_terms_of_terms(s: str) -> None:
    table = sp.StemTable()
    first = sp.ascii_term_counts(s, text.STEMS, table)  # None when a token is not stemmed yet
    want = _definition(s)
    if not s.isascii():
        assert first is None
        assert sp.ascii_term_counts(s, text.STEMS, table) is None
        return
    assert first is None or first == want
    for t in (table, sp.StemTable()):  # from the table, and from the dict
        got = sp.ascii_term_counts(s, text.STEMS, t)
        assert got == want
        assert type(got) is tuple and [type(x) for x in got] == [list, list]
        assert all(type(x) is str for x in got[0]) and all(type(n) is int for n in got[1])


def test_ascii_term_counts_without_the_stem_is_none() -> None:
    assert sp.ascii_term_counts("abc def", {"abc": "abc"}, sp.StemTable()) is None
    assert sp.ascii_term_counts("", {}, sp.StemTable()) == ([], [])
    assert sp.ascii_term_counts("  ,. ", {}, sp.StemTable()) == ([], [])
    stems = {"runs": "run", "running": "run", "b": "b"}
    assert sp.ascii_term_counts("Running b RUNS b", stems, sp.StemTable()) == (
        ["b", "run"],
        [2, 2],
    )


@given(st.lists(st.integers(0, 10**12), min_size=1, max_size=6), st.sampled_from(["", "b "]))
@example([7, 7, 123], "b ")
def test_numbers_never_stemmed_before_are_counted_in_c(numbers: list[int], before: str) -> None:
    """A token of digits only is its own stem (Snowball English leaves digits alone), so the C
    path counts it without a pass through the Python stemmer; words still need the cache."""
    s = before + " ".join(f"{n:03d}" for n in numbers)
    stems = {"b": "b"}
    got = sp.ascii_term_counts(s, stems, sp.StemTable())
    assert got == count_terms(text.terms(s)) and stems == {"b": "b"}
    assert sp.ascii_term_counts(s + " x1", stems, sp.StemTable()) is None


@pytest.mark.parametrize("stem", ["", "é", "a\x00", 1, None, b"a"])
def test_ascii_term_counts_refuses_odd_stems(stem: object) -> None:
    table = sp.StemTable()
    assert sp.ascii_term_counts("abc", {"abc": stem}, table) is None
    assert len(table) == 0


def test_the_stem_table_stays_within_half_its_slots() -> None:
    words = [f"w{i}" for i in range(50)]
    stems = {w: w.upper().lower() for w in words}
    table = sp.StemTable(slots=4)
    for w in words:
        got = sp.ascii_term_counts(f"{w} {w} x{w}", {**stems, f"x{w}": "a"}, table)
        assert got == (["a", w], [1, 2])
        assert len(table) <= 2
    table.clear()
    assert len(table) == 0
    assert len(sp.StemTable()) == 0


def test_stem_table_and_term_count_arguments() -> None:
    for bad in (0, 1, 3, 6, 2**25, -4):
        with pytest.raises(ValueError):
            sp.StemTable(bad)
    with pytest.raises(TypeError):
        sp.StemTable("8")
    table = sp.StemTable(slots=8)
    for args in (
        ("a", {}),
        ("a", {}, table, 1),
        (b"a", {}, table),
        ("a", [], table),
        ("a", {}, {}),
    ):
        with pytest.raises(TypeError):
            sp.ascii_term_counts(*args)


@given(any_data())
def test_analyze_counts_paths_agree(data: Data) -> None:
    from cortex.model.forms import render_with_short

    _both(lexical, lambda d: lexical.analyze_counts(d, is_canonical=True), data)
    want = count_terms(lexical.analyze(data, is_canonical=True))
    assert lexical.analyze_counts(data, is_canonical=True) == want
    short = render_with_short(data, is_canonical=True)[1]
    assert lexical.analyze_counts(data, is_canonical=True, short=short) == want


def _full_counts(data: Data) -> Any:
    """``full_term_counts`` of canonical ``data``: (distinct, counts), or None (Python path)."""
    from cortex.model.forms import FULL_LABELS, FULL_SPECS, render_with_short

    head, getter, prefixes = FULL_SPECS[type(data)]
    short = render_with_short(data, is_canonical=True)[1]
    count_terms(lexical.analyze(data, is_canonical=True))  # stems every token into the cache
    return sp.full_term_counts(
        head, short, prefixes, getter(data), FULL_LABELS, text.STEMS, sp.StemTable()
    )


@given(any_data())
def test_full_term_counts_is_the_full_forms_counts(data: Data) -> None:
    got = _full_counts(data)
    if got is not None:
        assert got == count_terms(lexical.analyze(data, is_canonical=True))


def test_full_term_counts_takes_the_common_values() -> None:
    """Plain values and enum members in C; a duration, a time, a list or non-ASCII: None."""
    from datetime import UTC, datetime

    from cortex.model.enums import Outcome, Polarity, SourceKind, Stance
    from cortex.model.forms import canonical
    from cortex.model.records import Belief, Event, Fact, Identity, Pattern, Preference

    common = [
        Fact(
            statement="a b",
            subject="s",
            predicate="p",
            confidence=0.9,
            source=SourceKind.USER_INPUT,
        ),
        Event(kind="call", outcome=Outcome.SUCCESS, counterparty="bob", summary="went well"),
        Preference(topic="tea", polarity=Polarity.PREFER, strength=0.5),
        Belief(statement="x is y", stance=Stance.BELIEVE, confidence=0.7),
        Pattern(statement="mornings", strength=0.25, coverage=7),
    ]
    for data in map(canonical, common):
        got = _full_counts(data)
        assert got is not None, data
        assert got == count_terms(lexical.analyze(data, is_canonical=True))
    odd = [
        Event(kind="call", duration_us=1_500_000),
        Fact(
            statement="a", subject="s", predicate="p", observed_at=datetime(2026, 1, 1, tzinfo=UTC)
        ),
        Fact(statement="café", subject="s", predicate="p"),
        Identity(name="agent", roles=("admin",)),
    ]
    for data in map(canonical, odd):
        assert _full_counts(data) is None, data
        assert lexical.analyze_counts(data, is_canonical=True) == count_terms(
            lexical.analyze(data, is_canonical=True)
        )


def test_full_term_counts_arguments() -> None:
    table = sp.StemTable(slots=8)
    ok = ("Fact: ", "x", ("a: ",), ("b",), {}, {"fact": "fact", "x": "x", "a": "a", "b": "b"})
    assert sp.full_term_counts(*ok, table) == (["a", "b", "fact", "x"], [1, 1, 1, 1])
    assert sp.full_term_counts(*ok[:3], ("b", "c"), *ok[4:], table) is None  # lengths differ
    assert sp.full_term_counts(*ok[:3], (object(),), *ok[4:], table) is None

    class Code(int):
        pass

    stems = {**ok[5], "5": "5", "five": "five"}
    assert sp.full_term_counts(*ok[:3], (5,), {}, stems, table) == (
        ["5", "a", "fact", "x"],
        [1] * 4,
    )
    assert sp.full_term_counts(*ok[:3], (Code(5),), {}, stems, table) is None  # no labels
    assert sp.full_term_counts(*ok[:3], (Code(5),), {Code: []}, stems, table) is None
    got = sp.full_term_counts(*ok[:3], (Code(5),), {Code: {Code(5): "five"}}, stems, table)
    assert got == (["a", "fact", "five", "x"], [1] * 4)
    for i, bad in [(2, ["a: "]), (3, ["b"]), (4, []), (5, [])]:
        args = list(ok)
        args[i] = bad
        with pytest.raises(TypeError):
            sp.full_term_counts(*args, table)
    with pytest.raises(TypeError):
        sp.full_term_counts(*ok, {})
    with pytest.raises(TypeError):
        sp.full_term_counts(*ok)


# -- index_doc

_D7 = int.from_bytes(b"\x07" * 4, "big")
_D8 = int.from_bytes(b"\x08" * 4, "big")


class _NoTxn:
    """An empty store: no statistics, no memory."""

    def get(self, key: bytes) -> None:
        return None

    def keys(self, prefix: bytes) -> Iterator[bytes]:
        return iter(())


def _indexed(
    on: bool, docs: list[tuple[MemoryId, int, Any, Any]], *, new: bool = False
) -> tuple[Any, ...]:
    """What an Indexer holds after ``add_counted`` of each doc, on one path (or the error)."""
    with _module_speedups(lexical, on):
        lex = lexical.Indexer(_NoTxn())  # type: ignore[arg-type]
        lex.counted(0, 0, 0, 256)  # rows 0..255 given (format 21: a memory's row, its number)
        try:
            for mid, version, distinct, counts in docs:
                lex.add_counted(mid.bytes[0], version, distinct, counts, new=new)
        except Exception as exc:
            return (type(exc), str(exc))
        pending = {t: list(held.items()) for t, held in lex._pending.items()}
        return (
            list(lex._docs.items()),
            list(pending.items()),
            [(t, bytes(records)) for t, records in lex._fresh.items()],
            lex._documents,
            lex._total,
            lex._postings,
            lex._next,
        )


_TERMS = st.lists(
    st.text(_ASCII, max_size=30)
    | st.text(max_size=3)
    | st.sampled_from(["x" * 24, "x" * 255, "x" * 256, "é", "a\x00", "東"]),
    max_size=40,
)
_VERSIONS = st.sampled_from(
    [0, 1, 23, 24, 255, 256, 65535, 65536, 2**32, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -1]
)


@given(st.lists(st.tuples(_TERMS, _VERSIONS | st.integers(1, 2**70)), max_size=4))
@example([(["b", "a", "b"], 1), (["a"] * 30, 2)])
@example([([f"t{i:03d}" for i in range(300)] * 2, 2**40)])
@example([(["a"], 0)])
def test_index_doc_is_add_counted(batch: list[tuple[list[str], int]]) -> None:
    docs = []
    for i, (terms, version) in enumerate(batch):
        try:
            distinct, counts = count_terms(terms)
        except ValueError:
            continue
        docs.append((MemoryId(bytes([i % 2 + 1]) * 16), version, distinct, counts))
    assert _indexed(False, docs) == _indexed(True, docs)
    # as new memories (distinct ids): their postings appended as records
    docs = [(MemoryId(bytes([i + 1]) * 16), *doc[1:]) for i, doc in enumerate(docs)]
    assert _indexed(False, docs, new=True) == _indexed(True, docs, new=True)


def test_index_doc_leaves_a_length_over_32_bits_to_python() -> None:
    """A posting holds the length in 32 bits: nothing is held, Python raises."""
    docs: dict[bytes, bytes] = {}
    pending: dict[str, dict[bytes, bytes]] = {}
    raw = b"\x07" * 4
    args = (docs, LEX_DOC + b"\x07" * 16, pending, {}, raw, 1, ["x", "y"], [2**31, 2**31], _D7)
    assert sp.index_doc(*args) is None
    assert docs == {} and pending == {}
    with pytest.raises(ValueError, match="2\\*\\*32"):
        entry_tail(2**31, 2**32)


@pytest.mark.parametrize(
    ("distinct", "counts"),
    [
        ([], []),
        (["a"], [1]),
        (sorted(f"t{i}" for i in range(23)), [1] * 23),
        ([f"t{i:03d}" for i in range(24)], list(range(1, 25))),
        ([f"t{i:04d}" for i in range(256)], [1] * 256),
        ([f"t{i:05d}" for i in range(65536)], [1] * 65536),
        (["x" * 23, "y" * 24, "z" * 255], [2**30, 2**31 - 1, 2**30]),  # length 2**32 - 1
    ],
)
@pytest.mark.parametrize("version", [1, 23, 24, 255, 256, 65535, 65536, 2**32 - 1, 2**63 - 1])
def test_index_doc_encodes_the_document(
    distinct: list[str], counts: list[int], version: int
) -> None:
    docs: dict[bytes, bytes] = {}
    pending: dict[str, dict[bytes, bytes]] = {}
    memo: dict[int, dict[int, bytes]] = {}
    raw = b"\x07" * 4
    key = LEX_DOC + b"\x07" * 16
    length = sp.index_doc(docs, key, pending, memo, raw, version, distinct, counts, _D7)
    assert length == sum(counts)
    doc = LexDoc(version=version, length=length, docno=_D7)
    assert docs == {key: seal(DOC_CODEC.encode(doc, "lex/d"))}
    assert list(pending) == distinct
    for term, tf in zip(distinct, counts, strict=True):
        assert pending[term] == {raw: entry_tail(tf, length)}
    # one object per value: equal counts share it, and a second document reuses the memo
    if len(counts) > 1 and counts[0] == counts[1]:
        assert pending[distinct[0]][raw] is pending[distinct[1]][raw]
    other = b"\x08" * 4
    sp.index_doc(docs, LEX_DOC + other * 4, pending, memo, other, version, distinct, counts, _D8)
    for term in distinct:
        assert pending[term][other] is pending[term][raw]


@pytest.mark.parametrize(
    ("version", "distinct", "counts"),
    [
        (1, ["b", "a"], [1, 1]),  # not in order
        (1, ["a", "a"], [1, 1]),  # not distinct
        (1, ["a", "é"], [1, 1]),
        (1, ["a", "x" * 256], [1, 1]),
        (1, ["a\x00"], [1]),
        (1, [""], [1]),
        (1, [b"a"], [1]),
        (1, ["a"], [0]),
        (1, ["a"], [-1]),
        (1, ["a"], [True]),
        (1, ["a"], [1.0]),
        (1, ["a"], [2**63]),
        (1, ["a", "b"], [1]),
        (1, ("a",), [1]),
        (1, ["a"], (1,)),
        (0, ["a"], [1]),
        (-1, ["a"], [1]),
        (2**63, ["a"], [1]),
        (2**64, ["a"], [1]),
        (True, ["a"], [1]),
        (1.0, ["a"], [1]),
        ("1", ["a"], [1]),
    ],
)
def test_index_doc_leaves_the_unusual_to_python(version: Any, distinct: Any, counts: Any) -> None:
    docs: dict[bytes, bytes] = {}
    pending: dict[str, dict[bytes, bytes]] = {}
    memo: dict[int, dict[int, bytes]] = {}
    raw = b"\x07" * 4
    assert sp.index_doc(docs, b"k", pending, memo, raw, version, distinct, counts, _D7) is None
    assert docs == pending == memo == {}


def test_index_doc_leaves_a_docno_that_is_not_the_postings_to_python() -> None:
    for docno in (_D7 + 1, 2**32 + _D7, -1, 1.0, True):
        args = ({}, b"k", {}, {}, b"\x07" * 4, 1, ["a"], [1], docno)
        assert sp.index_doc(*args) is None


def test_index_doc_arguments() -> None:
    raw = b"\x07" * 4
    good: list[Any] = [{}, b"k", {}, {}, raw, 1, ["a"], [1], _D7]
    with pytest.raises(TypeError):
        sp.index_doc(*good[:-1])
    for i, bad in [
        (0, []),
        (1, "k"),
        (2, []),
        (3, []),
        (4, "r"),
        (4, bytearray(raw)),
        (4, raw * 4),
    ]:
        args = [*good]
        args[i] = bad
        with pytest.raises(TypeError):
            sp.index_doc(*args)
    with pytest.raises(TypeError):  # pending must map terms to dicts
        sp.index_doc({}, b"k", {"a": []}, {}, raw, 1, ["a"], [1], _D7)
    with pytest.raises(TypeError):  # memo must map lengths to dicts
        sp.index_doc({}, b"k", {}, {1: []}, raw, 1, ["a"], [1], _D7)


def test_add_counted_paths_write_the_same(tmp_path: Path) -> None:
    """Batches indexed (and re-indexed) with index_doc leave the store the Python path leaves."""
    from cortex.storage.kv import LmdbKV

    vocabulary = ["b", "a", "é", "x" * 40, "東", *(f"t{i}" for i in range(40))]
    docs = {
        MemoryId(bytes([i]) * 16): count_terms(
            [vocabulary[(i * k) % len(vocabulary)] for k in range(i * 3)]
        )
        for i in range(1, 30)
    }
    stores = []
    for on in (False, True):
        kv = LmdbKV(tmp_path / f"kv-{on}")
        indexed: dict[MemoryId, list[str]] = {}  # the terms of a re-indexed memory
        with _module_speedups(lexical, on):
            for part in (list(docs.items())[:15], list(docs.items())[15:]):

                def fn(txn: Any, part: Any = part, indexed: Any = indexed) -> None:
                    lex = lexical.Indexer(txn)
                    lex.counted(0, 0, 0, max(lex._next, 64))  # rows (format 21): id byte
                    for m, (distinct, counts) in part:
                        lex.add_counted(m.bytes[0], 1, distinct, counts)
                    for n in (3, 20):  # held, then stored
                        m = MemoryId(bytes([n]) * 16)
                        lex.remove(n, terms=indexed.get(m, docs[m][0]))
                    indexed[MemoryId(bytes([3]) * 16)] = ["a", "b"]
                    lex.add_counted(3, 2, ["a", "b"], [1, 2])
                    lex.flush()

                kv.write(fn)
        with kv.read() as txn:
            stores.append(list(txn.scan(b"")))
        kv.close()
    assert stores[0] == stores[1]


# -- document frequencies at flush (df_updates)


def _df_store(tmp_path: Path, counts: dict[str, int]) -> Any:
    from cortex.storage.kv import LmdbKV

    kv = LmdbKV(tmp_path / "df")
    kv.write(
        lambda txn: [txn.put(lex_term_key(t), lexical._df_value(n)) for t, n in counts.items()]
    )
    return kv


@given(
    st.dictionaries(st.sampled_from("abcdefgh"), st.integers(1, 2**40), max_size=6),
    st.dictionaries(st.sampled_from("abcdefghij"), st.integers(-3, 3), max_size=8),
)
def test_df_updates_agree(
    tmp_path_factory: Any, stored: dict[str, int], delta: dict[str, int]
) -> None:
    kv = _df_store(tmp_path_factory.mktemp("d"), stored)
    try:
        items = [(lex_term_key(t), d) for t, d in sorted(delta.items())]

        def fn(txn: Any) -> Any:
            return sp.df_updates(txn.cursor(), items)

        got = kv.write(fn)
        after = {t: stored.get(t, 0) + d for t, d in delta.items()}
        if any(n < 0 for n in after.values()):
            assert got is None
            return
        puts, deletes, added, removed = got
        assert puts == [
            (lex_term_key(t), lexical._df_value(after[t]))
            for t in sorted(delta)
            if after[t] and after[t] != stored.get(t, 0)
        ]
        assert deletes == [lex_term_key(t) for t in sorted(delta) if not after[t] and stored.get(t)]
        assert added == sum(1 for t in delta if after[t] and not stored.get(t))
        assert removed == len(deletes)
    finally:
        kv.close()


@given(
    st.dictionaries(st.sampled_from("abcdefgh"), st.integers(1, 2**40), max_size=6),
    st.lists(st.sampled_from("abcdefghij"), max_size=8),
)
def test_df_values_agree(tmp_path_factory: Any, stored: dict[str, int], terms: list[str]) -> None:
    """``df_values`` reads what ``lexical._main_df`` reads, term by term (0 for none)."""
    kv = _df_store(tmp_path_factory.mktemp("d"), stored)
    try:
        keys = [lex_term_key(t) for t in terms]
        got = kv.write(lambda txn: sp.df_values(txn.cursor(), keys))
        assert got == [stored.get(t, 0) for t in terms]
        assert got == kv.write(lambda txn: [lexical._main_df(txn, t) for t in terms])
    finally:
        kv.close()


def test_df_values_leave_damage_to_python(tmp_path: Path) -> None:
    kv = _df_store(tmp_path, {"a": 5, "b": 7})
    try:
        keys = [lex_term_key("b"), lex_term_key("a")]
        for bad in (b"\x05", seal(b"\x18\x05"), seal(b"\x00"), seal(b"\x05\x05"), seal(b"")):
            kv.write(lambda txn, bad=bad: txn.put(lex_term_key("a"), bad))
            assert kv.write(lambda txn: sp.df_values(txn.cursor(), keys)) is None
            with pytest.raises(IntegrityError):
                kv.write(lambda txn: lexical._main_dfs(txn, ["b", "a"]))
        with pytest.raises(TypeError):
            sp.df_values(None, ["a"])
        with pytest.raises(TypeError):
            sp.df_values(None, ())
    finally:
        kv.close()


def test_df_updates_leave_damage_to_python(tmp_path: Path) -> None:
    kv = _df_store(tmp_path, {"a": 5})
    try:
        for bad in (b"\x05", seal(b"\x18\x05"), seal(b"\x00"), seal(b"\x05\x05"), seal(b"")):
            kv.write(lambda txn, bad=bad: txn.put(lex_term_key("a"), bad))
            assert (
                kv.write(lambda txn: sp.df_updates(txn.cursor(), [(lex_term_key("a"), 1)])) is None
            )
        with pytest.raises(TypeError):
            sp.df_updates(None, [("a", 1)])
        with pytest.raises(TypeError):
            sp.df_updates(None, ())
    finally:
        kv.close()
