"""Posting blocks by document number against a plain model: contents, layout, damage, appends."""

from __future__ import annotations

import random
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cortex.errors import IntegrityError
from cortex.index import postings
from cortex.index.postings import (
    BLOCK_MAX,
    ENTRY,
    apply,
    block_encode,
    block_entries,
    block_records,
    decode_varint,
    encode_varint,
    entry_tail,
    find,
)
from cortex.storage.keys import LEX_POSTING, posting_prefix
from cortex.storage.kv import LmdbKV, seal

TERMS = ["a", "b", "zürich"]


def _raw(n: int) -> bytes:
    return n.to_bytes(4, "big")


def _layout(kv: LmdbKV, term: str) -> list[tuple[bytes, list[tuple[int, int, int]]]]:
    with kv.read() as txn:
        return [(k, block_entries(k, v)) for k, v in txn.scan(posting_prefix(term))]


def _check(kv: LmdbKV, model: dict[str, dict[bytes, tuple[int, int]]]) -> None:
    for term in TERMS:
        layout = _layout(kv, term)
        got = [e for _, entries in layout for e in entries]
        want = sorted(
            (int.from_bytes(raw, "big"), tf, n) for raw, (tf, n) in model.get(term, {}).items()
        )
        assert got == want
        docnos = [d for d, _, _ in got]
        assert docnos == sorted(set(docnos))  # ascending, disjoint across blocks
        for key, entries in layout:
            assert 1 <= len(entries) <= BLOCK_MAX
            assert key == posting_prefix(term) + _raw(entries[0][0])
        with kv.read() as txn:
            for d, tf, n in want[:5] + want[-5:]:
                assert find(txn, posting_prefix(term), _raw(d)) == entry_tail(tf, n)
            assert find(txn, posting_prefix(term), _raw(10**6)) is None


changes_st = st.lists(
    st.tuples(
        st.sampled_from(TERMS),
        st.dictionaries(
            st.integers(0, 400),
            st.one_of(st.none(), st.tuples(st.integers(1, 5), st.integers(5, 200))),
            max_size=150,
        ),
    ),
    max_size=12,
)


@settings(max_examples=60)
@given(changes_st)
def test_blocks_follow_a_model(tmp_path_factory: Any, batches: Any) -> None:
    kv = LmdbKV(tmp_path_factory.mktemp("p") / "kv")
    model: dict[str, dict[bytes, tuple[int, int]]] = {}
    try:
        for term, change in batches:
            held = model.setdefault(term, {})
            # only remove what is there (a missing one is an integrity error, tested below)
            ch = {
                _raw(i): (None if v is None else entry_tail(*v))
                for i, v in change.items()
                if v is not None or _raw(i) in held
            }

            def fn(txn: Any, term: str = term, ch: dict[bytes, bytes | None] = ch) -> int:
                return apply(txn, term, ch)

            before = len(held)
            delta = kv.write(fn)
            for raw, tail in ch.items():
                if tail is None:
                    del held[raw]
                else:
                    held[raw] = (int.from_bytes(tail[:4], "big"), int.from_bytes(tail[4:], "big"))
            assert delta == len(held) - before
            _check(kv, model)
    finally:
        kv.close()


def test_appending_a_batch_rewrites_only_the_last_block(tmp_path: Path) -> None:
    kv = LmdbKV(tmp_path / "kv")
    tail = entry_tail(1, 3)
    kv.write(lambda txn: apply(txn, "a", {_raw(i): tail for i in range(300)}))
    before = _layout(kv, "a")
    assert [len(e) for _, e in before] == [128, 128, 44]
    puts: list[bytes] = []

    class Recording:
        def __init__(self, txn: Any) -> None:
            self.txn = txn

        def __getattr__(self, name: str) -> Any:
            return getattr(self.txn, name)

        def put(self, key: bytes, value: bytes, **kw: Any) -> bool:
            puts.append(key)
            return bool(self.txn.put(key, value, **kw))

    def fn(txn: Any) -> None:
        apply(Recording(txn), "a", {_raw(i): tail for i in range(300, 600)})

    kv.write(fn)
    after = _layout(kv, "a")
    assert after[:2] == before[:2]  # untouched
    changed = [k for k, _ in after[2:]]
    assert puts == changed  # the last block again, then the new ones
    assert [len(e) for _, e in after] == [128, 128, 128, 128, 88]
    kv.close()


def test_a_change_in_the_middle_rewrites_its_block_only(tmp_path: Path) -> None:
    kv = LmdbKV(tmp_path / "kv")
    tail = entry_tail(1, 3)
    kv.write(lambda txn: apply(txn, "a", {_raw(2 * i): tail for i in range(300)}))
    before = _layout(kv, "a")
    # an update adding the term to an old memory (an odd docno in the second block), removing
    # the first posting of the third block
    kv.write(lambda txn: apply(txn, "a", {_raw(301): tail, _raw(512): None}))
    after = _layout(kv, "a")
    assert after[0] == before[0]
    assert [len(e) for _, e in after] == [128, 128, 1, 43]  # a full block + 1 splits
    assert after[3][0] == posting_prefix("a") + _raw(514)
    kv.close()


def test_removing_what_is_not_there_is_an_integrity_error(tmp_path: Path) -> None:
    kv = LmdbKV(tmp_path / "kv")
    kv.write(lambda txn: apply(txn, "a", {_raw(1): entry_tail(1, 1)}))
    with pytest.raises(IntegrityError, match="missing"):
        kv.write(lambda txn: apply(txn, "a", {_raw(2): None}))
    kv.close()


def test_damaged_blocks_are_integrity_errors(tmp_path: Path) -> None:
    kv = LmdbKV(tmp_path / "kv")
    kv.write(lambda txn: apply(txn, "a", {_raw(i): entry_tail(1, 2) for i in range(3)}))
    key = posting_prefix("a") + _raw(0)
    with kv.read() as txn:
        good = txn.get(key)
    assert good is not None
    payload = good[:-4]
    assert payload == bytes([1, 2, 1, 1, 2, 1, 1, 2])
    bad_payloads = [
        payload[:-1],  # a posting cut
        payload + b"\x00",  # trailing byte
        payload[:2] + b"\x00" + payload[3:],  # a delta of 0: a docno repeated
        b"\x00\x02",  # tf 0
        b"\x03\x02",  # tf > length
        b"\x81\x00\x02",  # a varint not in its shortest form
        b"\x01\x02" + b"\x01\x01\x02" * BLOCK_MAX,  # one posting too many
    ]
    for bad in [*bad_payloads, b""]:
        with pytest.raises(IntegrityError):
            block_entries(key, seal(bad))
    flipped = bytearray(good)
    flipped[2] ^= 1
    with pytest.raises(IntegrityError, match="checksum"):
        block_entries(key, bytes(flipped))
    kv.write(lambda txn: txn.put(key, bytes(flipped)))
    with kv.read() as txn, pytest.raises(IntegrityError):
        find(txn, posting_prefix("a"), _raw(1))
    kv.close()


def test_entry_tail_limits() -> None:
    assert entry_tail(2, 7) == bytes([0, 0, 0, 2, 0, 0, 0, 7])
    for tf, n in [(0, 1), (2, 1), (1, 2**32)]:
        with pytest.raises(ValueError):
            entry_tail(tf, n)
    assert LEX_POSTING == b"lex/p/"
    assert postings.ENTRY == 12


@given(st.integers(0, 2**35 - 1))
def test_varints_round_trip(n: int) -> None:
    out = bytearray()
    encode_varint(n, out)
    assert decode_varint(bytes(out) + b"\x7f", 0) == (n, len(out))
    assert len(out) == max(1, (n.bit_length() + 6) // 7)


@given(
    st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=BLOCK_MAX, unique=True),
    st.integers(0, 2**31),
)
def test_blocks_round_trip(docnos: list[int], seed: int) -> None:
    rng = random.Random(seed)
    rows = []
    for d in sorted(docnos):
        dl = rng.choice([1, 5, 200, 2**32 - 1])
        rows.append(_raw(d) + entry_tail(rng.randint(1, min(dl, 300)), dl))
    records = b"".join(rows)
    key = posting_prefix("t") + records[:4]
    assert block_records(key, seal(block_encode(records))) == records
    assert len(records) % ENTRY == 0


def test_block_encode_refuses_what_is_not_a_block() -> None:
    one = _raw(3) + entry_tail(1, 2)
    for bad in (b"", one + one, one * (BLOCK_MAX + 1), _raw(4) + one + one[:-1]):
        with pytest.raises(ValueError):
            block_encode(bad)


def test_new_postings_that_are_not_records_are_refused(tmp_path: Path) -> None:
    tail = entry_tail(1, 2)
    kv = LmdbKV(tmp_path / "kv")
    try:
        for bad in (_raw(1) + tail + _raw(1) + tail, _raw(1) + tail[:4]):
            with pytest.raises(ValueError, match=r"whole records|twice"):
                kv.write(lambda txn, bad=bad: postings.apply_many(txn, [("a", bad)], []))
        kv.write(lambda txn: postings.apply_many(txn, [("a", bytearray())], []))  # nothing
        with kv.read() as txn:
            assert list(txn.scan(b"")) == []
    finally:
        kv.close()
    assert postings.fresh_changes(_raw(2) + tail + _raw(1) + tail) == {
        _raw(2): tail,
        _raw(1): tail,
    }


# -- the C paths (cortex._speedups) against the Python definitions

sp = pytest.importorskip("cortex._speedups")


def _python_encode(records: bytes) -> bytes | None:
    old = postings._USE_SPEEDUPS
    postings._USE_SPEEDUPS = False
    try:
        return block_encode(records)
    except ValueError:
        return None
    finally:
        postings._USE_SPEEDUPS = old


_RECORDS = st.lists(
    st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)),
    max_size=BLOCK_MAX + 2,
).map(lambda rows: b"".join(d.to_bytes(4, "big") + tf.to_bytes(4, "big") + dl.to_bytes(4, "big")
                            for d, tf, dl in rows))  # fmt: skip
_GOOD = st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=BLOCK_MAX, unique=True).map(
    lambda ds: b"".join(
        d.to_bytes(4, "big") + entry_tail(1 + d % 3, 3 + d % 1000) for d in sorted(ds)
    )
)


@settings(max_examples=300)
@given(st.one_of(_RECORDS, _GOOD, st.binary(max_size=40)))
def test_block_encode_is_the_python_definition(records: bytes) -> None:
    """The C ``block_encode`` gives the Python definition's payload, or None where it raises."""
    assert sp.block_encode(records, BLOCK_MAX) == _python_encode(records)


@settings(max_examples=300)
@given(
    st.integers(0, 2**32 - 1),
    st.one_of(_GOOD.map(lambda r: block_encode(r)), st.binary(max_size=60)),
    st.data(),
)
def test_block_decode_is_the_python_definition(first: int, payload: bytes, data: Any) -> None:
    """The C ``block_decode`` gives the Python definition's records, or None where it raises
    (a payload mutated byte by byte, cut or extended included)."""
    if payload and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(payload) - 1))
        payload = payload[:i] + bytes([data.draw(st.integers(0, 255))]) + payload[i + 1 :]
    try:
        want: bytes | None = postings._decode_payload(first, payload)
    except ValueError:
        want = None
    assert sp.block_decode(first, payload, BLOCK_MAX) == want


def test_the_c_block_functions_check_their_arguments() -> None:
    with pytest.raises(TypeError):
        sp.block_encode(bytearray(12), BLOCK_MAX)
    with pytest.raises(TypeError):
        sp.block_encode(b"")
    with pytest.raises(TypeError):
        sp.block_decode(0, bytearray(b"\x01\x01"), BLOCK_MAX)
    with pytest.raises(OverflowError):
        sp.block_decode(-1, b"\x01\x01", BLOCK_MAX)
    assert sp.block_decode(2**32, b"\x01\x01", BLOCK_MAX) is None
    assert sp.block_decode(0, b"\x01\x01", 0) is None


_BATCHES = st.lists(
    st.dictionaries(
        st.sampled_from(TERMS),
        st.tuples(
            st.lists(st.integers(0, 600), min_size=1, max_size=200, unique=True),
            st.sampled_from(["ascending", "shuffled", "dict"]),
        ),
        max_size=3,
    ),
    max_size=6,
)


@settings(max_examples=80)
@given(_BATCHES)
def test_append_fresh_is_the_python_append(tmp_path_factory: Any, batches: Any) -> None:
    """``apply_many`` with the C ``append_fresh`` (new postings after a term's last block, many
    terms in one call; the rest left to ``apply``) leaves the store the Python path leaves:
    appends, postings before or among the stored ones, records out of order, dicts."""
    kvs = [LmdbKV(tmp_path_factory.mktemp("m") / f"kv{on}") for on in (0, 1)]
    live: dict[str, set[int]] = {}
    try:
        for batch in batches:
            items: list[tuple[str, Any]] = []
            for term in sorted(batch):
                docnos, how = batch[term]
                new = [d for d in docnos if d not in live.get(term, set())]
                if not new:
                    continue
                live.setdefault(term, set()).update(new)
                rows = [(_raw(d), entry_tail(1 + d % 3, 5 + d % 7)) for d in new]
                if how == "dict":
                    items.append((term, dict(rows)))
                else:
                    order = sorted(rows) if how == "ascending" else rows
                    items.append((term, bytearray(b"".join(r + t for r, t in order))))
            for on, kv in zip((False, True), kvs, strict=True):

                def fn(txn: Any, on: bool = on, items: Any = items) -> None:
                    puts: list[tuple[bytes, bytes]] = []
                    old = postings._USE_SPEEDUPS
                    postings._USE_SPEEDUPS = on and old
                    try:
                        postings.apply_many(txn, list(items), puts)
                    finally:
                        postings._USE_SPEEDUPS = old
                    txn.put_many(puts)

                kv.write(fn)
        dumps = []
        for kv in kvs:
            with kv.read() as txn:
                dumps.append(list(txn.scan(b"")))
        assert dumps[0] == dumps[1]
        for term, docnos in live.items():
            assert [e[0] for _, es in _layout(kvs[1], term) for e in es] == sorted(docnos)
    finally:
        for kv in kvs:
            kv.close()


def test_append_fresh_extends_the_last_block_as_python_cuts_it(tmp_path: Path) -> None:
    """The C append extends the stored last block's bytes with the new postings' varints (it
    does not decode and encode the block again): the same blocks as the Python path's, across
    a block filled exactly, a full block that stays, and appends that cut several blocks."""
    kvs = [LmdbKV(tmp_path / f"kv{on}") for on in (0, 1)]
    at = 0
    try:
        for size in (1, 126, 1, 1, 127, 128, 300, 2, 255, 129):
            rows = b"".join(
                _raw(d) + entry_tail(1 + d % 4, 7 + d % 5) for d in range(at, at + size * 3, 3)
            )
            at += size * 3
            for on, kv in zip((False, True), kvs, strict=True):

                def fn(txn: Any, on: bool = on, rows: bytes = rows) -> None:
                    puts: list[tuple[bytes, bytes]] = []
                    old = postings._USE_SPEEDUPS
                    postings._USE_SPEEDUPS = on and old
                    try:
                        postings.apply_many(txn, [("t", bytearray(rows))], puts)
                    finally:
                        postings._USE_SPEEDUPS = old
                    txn.put_many(puts)

                kv.write(fn)
            dumps = []
            for kv in kvs:
                with kv.read() as txn:
                    dumps.append(list(txn.scan(b"")))
            assert dumps[0] == dumps[1]
        layout = _layout(kvs[1], "t")
        assert [len(es) for _, es in layout][:-1] == [BLOCK_MAX] * (len(layout) - 1)
        assert [e[0] for _, es in layout for e in es] == list(range(0, at, 3))
    finally:
        for kv in kvs:
            kv.close()


def test_append_fresh_leaves_the_unusual_to_python(tmp_path: Path) -> None:
    """A damaged last block, records out of order or cut, a block after the new postings: left
    over (the Python path then names the fault or does the general change)."""
    kv = LmdbKV(tmp_path / "kv")
    tail = entry_tail(1, 2)
    kv.write(lambda txn: apply(txn, "a", {_raw(i): tail for i in (5, 9)}))
    kv.write(lambda txn: apply(txn, "b", {_raw(i): tail for i in (5, 9)}))
    kv.write(lambda txn: txn.put(posting_prefix("b") + _raw(5), b"\x00" * 7))  # damaged
    try:

        def fn(txn: Any) -> Any:
            items = [
                (posting_prefix("a"), _raw(12) + tail + _raw(11) + tail),  # out of order
                (posting_prefix("a"), _raw(7) + tail),  # before the last posting
                (posting_prefix("a"), _raw(12) + tail[:4]),  # cut
                (posting_prefix("b"), _raw(12) + tail),  # the block fails its checksum
                (posting_prefix("a"), bytearray(_raw(3) + tail)),  # a block after it
                (posting_prefix("c"), _raw(3) + tail + _raw(4) + tail),  # a new term: done
                (posting_prefix("a"), _raw(10) + tail + _raw(11) + tail),  # an append: done
                (posting_prefix("a"), {_raw(12): None}),  # a removal
                (posting_prefix("d"), {_raw(4): tail, _raw(3): tail}),  # additions: done
                (posting_prefix("a"), MappingProxyType({_raw(12): tail})),  # another mapping
                (posting_prefix("a"), {_raw(12): tail[:4]}),  # a cut tail
            ]
            return sp.append_fresh(txn.cursor(), items, BLOCK_MAX)

        puts, left = kv.write(fn)
        assert left == [0, 1, 2, 3, 4, 7, 9, 10]
        assert [k for k, _ in puts] == [
            posting_prefix("c") + _raw(3),
            posting_prefix("a") + _raw(5),
            posting_prefix("d") + _raw(3),
        ]
        assert block_records(*puts[2]) == _raw(3) + tail + _raw(4) + tail
        with pytest.raises(TypeError):
            kv.write(lambda txn: sp.append_fresh(txn.cursor(), [("a", b"")], BLOCK_MAX))
        with pytest.raises(ValueError):
            kv.write(lambda txn: sp.append_fresh(txn.cursor(), [], 0))
    finally:
        kv.close()
