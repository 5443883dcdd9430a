"""Posting blocks against a plain model: contents, layout invariants, damage, appends."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cortex.errors import IntegrityError
from cortex.index import postings
from cortex.index.postings import (
    BLOCK_MAX,
    ENTRY,
    apply,
    block_entries,
    blocks,
    entry_tail,
    find,
    is_boundary,
)
from cortex.storage.keys import LEX_POSTING, posting_prefix
from cortex.storage.kv import LmdbKV, seal

TERMS = ["a", "b", "zürich"]


@contextmanager
def accelerated(on: bool) -> Iterator[None]:
    old = postings._USE_SPEEDUPS
    postings._USE_SPEEDUPS = on and old
    try:
        yield
    finally:
        postings._USE_SPEEDUPS = old


def _raw(n: int) -> bytes:
    return n.to_bytes(16, "big")


def _layout(kv: LmdbKV, term: str) -> list[tuple[bytes, list[tuple[bytes, int, int]]]]:
    with kv.read() as txn:
        return [(k, block_entries(k, v)) for k, v in txn.scan(posting_prefix(term))]


def _cut(run: bytes) -> list[bytes]:
    return blocks(run) if run else []


def _check(kv: LmdbKV, model: dict[str, dict[bytes, tuple[int, int]]]) -> None:
    for term in TERMS:
        layout = _layout(kv, term)
        got = [e for _, entries in layout for e in entries]
        want = sorted((raw, tf, n) for raw, (tf, n) in model.get(term, {}).items())
        assert got == want
        ids = [raw for raw, _, _ in got]
        assert ids == sorted(set(ids))  # ascending, disjoint across blocks
        for key, entries in layout:
            assert 1 <= len(entries) <= BLOCK_MAX
            assert key == posting_prefix(term) + entries[0][0]
        # the layout is the one cut from scratch, whatever the history of changes
        run = b"".join(raw + entry_tail(tf, n) for raw, tf, n in want)
        assert [len(e) for _, e in layout] == [len(b) // ENTRY for b in _cut(run)]
        with kv.read() as txn:
            for raw, tf, n in want[:5] + want[-5:]:
                assert find(txn, posting_prefix(term), raw) == entry_tail(tf, n)
            assert find(txn, posting_prefix(term), _raw(10**6)) is None


changes_st = st.lists(
    st.tuples(
        st.sampled_from(TERMS),
        st.dictionaries(
            st.integers(0, 400),
            st.one_of(st.none(), st.tuples(st.integers(1, 5), st.integers(5, 9))),
            max_size=150,
        ),
    ),
    max_size=12,
)


@settings(max_examples=60)
@given(changes_st, st.booleans())
def test_blocks_follow_a_model(tmp_path_factory: Any, batches: Any, fast: bool) -> None:
    with accelerated(fast):
        _follow(tmp_path_factory, batches)


def _follow(tmp_path_factory: Any, batches: Any) -> None:
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
    kv.write(lambda txn: apply(txn, "a", {_raw(i): tail for i in range(100)}))
    before = _layout(kv, "a")
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
        apply(Recording(txn), "a", {_raw(i): tail for i in range(100, 400)})

    kv.write(fn)
    after = _layout(kv, "a")
    assert after[: len(before) - 1] == before[:-1]  # untouched
    changed = [k for k, _ in after[len(before) - 1 :]]
    assert puts == changed  # the last block again, then the new ones
    assert len(changed) < 300 // 8  # far fewer puts than postings
    kv.close()


def test_blocks_split_at_boundaries_and_when_full() -> None:
    ids = [_raw(i) for i in range(2000)]
    run = b"".join(raw + entry_tail(1, 1) for raw in ids)
    cut = blocks(run)
    assert b"".join(cut) == run
    for block in cut:
        assert 1 <= len(block) // ENTRY <= BLOCK_MAX
        inner = [block[i : i + 16] for i in range(ENTRY, len(block), ENTRY)]
        assert not any(is_boundary(raw) for raw in inner)
    starts = [block[:16] for block in cut]
    for raw, nxt in zip(ids[1:], ids[:-1], strict=True):
        if is_boundary(raw):
            assert raw in starts, nxt
    # continuing a block: the first payload is what the run adds to it
    assert blocks(run[:ENTRY], BLOCK_MAX) == [b"", run[:ENTRY]]
    assert blocks(run[ENTRY : 2 * ENTRY], 1)[0] in (b"", run[ENTRY : 2 * ENTRY])


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
    bad_payloads = [
        good[:-4][:-1],  # not a whole number of postings
        _raw(5) + good[16:-4],  # the first id is not the key's
        good[:-4][:ENTRY] * 2,  # repeated id
        good[:-4][:16] + (0).to_bytes(4, "big") + (2).to_bytes(4, "big"),  # tf 0
        good[:-4][:16] + (3).to_bytes(4, "big") + (2).to_bytes(4, "big"),  # tf > length
    ]
    for payload in [*bad_payloads, b""]:
        with pytest.raises(IntegrityError):
            block_entries(key, seal(payload))
    flipped = bytearray(good)
    flipped[20] ^= 1
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
    assert postings.ENTRY == 24


# -- the C paths (cortex._speedups) against the Python definitions

sp = pytest.importorskip("cortex._speedups")
_ids = st.binary(min_size=16, max_size=16)


@given(
    st.lists(_ids, unique=True, max_size=300).map(sorted),
    st.integers(0, 70),
    st.sampled_from([(64, 32), (1, 1), (3, 2), (64, 1), (5, 1000)]),
)
@example([], 0, (64, 32))
@example([bytes(16)], 64, (64, 32))
def test_cut_blocks_agrees(ids: list[bytes], held: int, shape: tuple[int, int]) -> None:
    block_max, spread = shape
    run = b"".join(raw + entry_tail(1, 2) for raw in ids)
    c = sp.cut_blocks(run, held, block_max, spread)
    old = postings.BLOCK_MAX, postings.SPREAD
    try:
        postings.BLOCK_MAX, postings.SPREAD = block_max, spread  # type: ignore[misc]
        py = postings._blocks(run, held)
    finally:
        postings.BLOCK_MAX, postings.SPREAD = old  # type: ignore[misc]
    assert c == py
    assert b"".join(c) == run


def test_is_boundary_is_zlib_crc32() -> None:
    run = b"".join(_raw(i) + entry_tail(1, 1) for i in range(5000))
    starts = {b[:16] for b in sp.cut_blocks(run, 0, 10**6, postings.SPREAD)[1:]}
    assert starts == {_raw(i) for i in range(1, 5000) if is_boundary(_raw(i))}


@given(
    st.dictionaries(
        _ids,
        st.one_of(st.binary(min_size=8, max_size=8), st.none(), st.binary(max_size=9)),
        max_size=100,
    )
)
@example({})
@example({b"x": b"12345678"})
def test_posting_run_agrees(changes: dict[bytes, Any]) -> None:
    c = sp.posting_run(changes)
    usual = changes and all(
        len(k) == 16 and type(v) is bytes and len(v) == 8 for k, v in changes.items()
    )
    if not usual:
        assert c is None
        return
    assert c == b"".join(k + changes[k] for k in sorted(changes))
    with accelerated(False):
        assert postings._run(changes) == c


def test_c_arguments_are_checked() -> None:
    with pytest.raises(TypeError):
        sp.posting_run([])
    with pytest.raises(TypeError):
        sp.cut_blocks("x", 0, 1, 1)
    with pytest.raises(ValueError):
        sp.cut_blocks(b"x", 0, 64, 32)
    for args in [(-1, 64, 32), (0, 0, 32), (0, 64, 0), (0, 64, 2**40)]:
        with pytest.raises(ValueError):
            sp.cut_blocks(b"", *args)
    with pytest.raises(TypeError):
        sp.cut_blocks(b"", "0", 64, 32)


def _python_append(prefix: bytes, run: bytes, payload: bytes) -> list[tuple[bytes, bytes]]:
    """What ``apply`` writes when it appends ``run`` to the block ``payload`` (Python path)."""
    cut = postings._blocks(run, len(payload) // ENTRY)
    cut[0] = payload + cut[0]
    out = []
    for i, block in enumerate(cut):
        if i == 0 and block == payload:
            continue  # unchanged
        out.append((prefix + block[:16], seal(block)))
    return out


@given(
    st.lists(_ids, unique=True, min_size=2, max_size=200).map(sorted),
    st.integers(1, BLOCK_MAX),
    st.sampled_from([(64, 32), (3, 2), (64, 1), (5, 1000)]),
)
def test_block_append_agrees(ids: list[bytes], stored: int, shape: tuple[int, int]) -> None:
    block_max, spread = shape
    stored = min(stored, len(ids) - 1, block_max)
    prefix = posting_prefix("tea")
    old = b"".join(raw + entry_tail(1, 2) for raw in ids[:stored])
    run = b"".join(raw + entry_tail(2, 3) for raw in ids[stored:])
    key = prefix + old[:16]
    got = sp.block_append(prefix, run, key, seal(old), block_max, spread)
    saved = postings.BLOCK_MAX, postings.SPREAD
    try:
        postings.BLOCK_MAX, postings.SPREAD = block_max, spread  # type: ignore[misc]
        want = _python_append(prefix, run, old)
    finally:
        postings.BLOCK_MAX, postings.SPREAD = saved  # type: ignore[misc]
    assert got == want


def test_block_append_leaves_anything_unusual_to_python() -> None:
    prefix = posting_prefix("tea")
    old = b"".join(_raw(i) + entry_tail(1, 2) for i in (1, 2))
    run = _raw(9) + entry_tail(1, 1)
    key = prefix + _raw(1)
    assert sp.block_append(prefix, run, key, seal(old), 64, 32)  # the usual case works
    damaged = bytearray(seal(old))
    damaged[3] ^= 1
    for args in [
        (prefix, run, key, bytes(damaged)),  # fails its checksum
        (prefix, _raw(2) + entry_tail(1, 1), key, seal(old)),  # not after the block
        (prefix, b"", key, seal(old)),  # nothing to append
        (prefix, run[:-1], key, seal(old)),  # not whole postings
        (prefix, run, prefix + _raw(2), seal(old)),  # the key is not the first id
        (posting_prefix("teas"), run, key, seal(old)),  # another term's key
        (prefix, run, key, seal(old[:-1])),  # not whole postings stored
        (prefix, run, key, seal(b"")),  # an empty block
    ]:
        assert sp.block_append(*args, 64, 32) is None, args
    assert sp.block_append(prefix, run, key, seal(old * 0 + old), 1, 32) is None  # over full
    with pytest.raises(TypeError):
        sp.block_append(prefix, run, key, "x", 64, 32)
    with pytest.raises(ValueError):
        sp.block_append(prefix, run, key, seal(old), 0, 32)


batches_st = st.lists(
    st.dictionaries(
        st.sampled_from([*TERMS, "c", "d"]),
        st.dictionaries(st.integers(0, 300), st.tuples(st.integers(1, 3), st.integers(3, 5))),
        max_size=4,
    ),
    max_size=8,
)


@settings(max_examples=60)
@given(batches_st, st.data())
def test_apply_many_writes_what_apply_writes(
    tmp_path_factory: Any, batches: Any, data: st.DataObject
) -> None:
    """The C walk over many terms (appends, first blocks, the rest left to ``apply``) leaves
    the store the Python path leaves, removals between batches included."""
    kvs = [LmdbKV(tmp_path_factory.mktemp("m") / f"kv{on}") for on in (0, 1)]
    live: dict[str, set[int]] = {}
    try:
        for batch in batches:
            changes = []
            for term in sorted(batch):
                held: dict[bytes, bytes] = {}
                for i, (tf, dl) in batch[term].items():
                    if i not in live.get(term, set()):
                        held[_raw(i)] = entry_tail(tf, dl)
                if held:
                    changes.append((term, held))
                    live.setdefault(term, set()).update(int.from_bytes(r, "big") for r in held)
            # new postings held as records (a write's), in any order, or as a mapping
            held_as = [data.draw(st.sampled_from(["dict", "records", "shuffled"])) for _ in changes]
            for on, kv in zip((False, True), kvs, strict=True):

                def fn(
                    txn: Any, on: bool = on, changes: Any = changes, held_as: Any = held_as
                ) -> None:
                    puts: list[tuple[bytes, bytes]] = []
                    items = [
                        (t, dict(h) if how == "dict" else _records(h, how == "shuffled"))
                        for (t, h), how in zip(changes, held_as, strict=True)
                    ]
                    with accelerated(on):
                        postings.apply_many(txn, items, puts)
                    txn.put_many(puts)

                kv.write(fn)
            # some removals, the same on both sides
            gone = [
                (t, i) for t in sorted(live) for i in sorted(live[t]) if data.draw(st.booleans())
            ][:5]
            for t, i in gone:
                live[t].discard(i)
                for kv in kvs:
                    kv.write(lambda txn, t=t, i=i: apply(txn, t, {_raw(i): None}))
        dumps = []
        for kv in kvs:
            with kv.read() as txn:
                dumps.append(list(txn.scan(b"")))
        assert dumps[0] == dumps[1]
        for term, ids in live.items():
            assert [e[0] for _, es in _layout(kvs[1], term) for e in es] == [
                _raw(i) for i in sorted(ids)
            ]
    finally:
        for kv in kvs:
            kv.close()


def _records(held: dict[bytes, bytes], shuffled: bool) -> bytearray:
    """New postings as ``Indexer.add_counted(new=True)`` holds them: id16 + tail8 records."""
    order = sorted(held, reverse=shuffled)  # reversed: the C path sorts them
    return bytearray(b"".join(raw + held[raw] for raw in order))


@pytest.mark.parametrize("on", [False, True])
def test_new_postings_that_are_not_records_are_refused(tmp_path: Path, on: bool) -> None:
    tail = entry_tail(1, 2)
    kv = LmdbKV(tmp_path / "kv")
    try:
        for bad in (_raw(1) + tail + _raw(1) + tail, _raw(1) + tail[:4]):
            with accelerated(on), pytest.raises(ValueError, match=r"whole records|twice"):
                kv.write(lambda txn, bad=bad: postings.apply_many(txn, [("a", bad)], []))
        with accelerated(on):
            kv.write(lambda txn: postings.apply_many(txn, [("a", bytearray())], []))  # nothing
        with kv.read() as txn:
            assert list(txn.scan(b"")) == []
    finally:
        kv.close()
    assert postings.fresh_changes(_raw(2) + tail + _raw(1) + tail) == {
        _raw(2): tail,
        _raw(1): tail,
    }


def test_append_runs_arguments() -> None:
    with pytest.raises(TypeError):
        sp.append_runs(None, (), 64, 32)
    with pytest.raises(ValueError):
        sp.append_runs(None, [], 0, 32)
    with pytest.raises(TypeError):
        sp.append_runs(None, [("x", {})], 64, 32)


@given(
    st.lists(st.integers(0, 200), unique=True, max_size=150).map(sorted),
    st.integers(1, 64),
    st.dictionaries(st.integers(0, 220), st.one_of(st.none(), st.integers(1, 3)), max_size=40),
)
def test_merge_run_agrees(stored: list[int], size: int, change: dict[int, int | None]) -> None:
    run = b"".join(_raw(i) + entry_tail(1, 4) for i in stored)
    payloads = [run[j : j + size * ENTRY] for j in range(0, len(run), size * ENTRY)]
    changes = {_raw(i): None if v is None else entry_tail(v, 4) for i, v in change.items()}
    got = sp.merge_run(payloads, changes)
    if any(v is None and i not in stored for i, v in change.items()):
        assert got is None  # a removal of a posting that is not there
        return
    held = {_raw(i): entry_tail(1, 4) for i in stored}
    for raw, tail in changes.items():
        if tail is None:
            del held[raw]
        else:
            held[raw] = tail
    assert got == (
        b"".join(raw + held[raw] for raw in sorted(held)),
        len(held) - len(stored),
    )


def test_merge_run_leaves_the_unusual_to_python() -> None:
    a, b = _raw(1) + entry_tail(1, 1), _raw(2) + entry_tail(1, 1)
    assert sp.merge_run([a + b], {}) == (a + b, 0)
    assert sp.merge_run([b + a], {}) is None  # stored out of order
    assert sp.merge_run([a[:-1]], {}) is None
    assert sp.merge_run([a], {_raw(1)[:15]: None}) is None
    assert sp.merge_run([a], {_raw(1): b"short"}) is None
    with pytest.raises(TypeError):
        sp.merge_run((a,), {})
