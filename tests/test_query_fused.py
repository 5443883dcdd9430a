"""The fused streaming loop of find (``Executor._stream``) gives exactly what the general path
gives: the same hits in the same order, the same salience, scores, texts and budget drops.

The general path (``created_scan``, chunks, ``accept``) is the definition; the fused one runs for
a newest-first find of one type, or of one tag and one type, on an engine with the C read.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cortex import (
    Cortex,
    CortexError,
    Event,
    Gt,
    IntegrityError,
    MemoryId,
    MemoryType,
    NewMemory,
    Query,
    Reader,
    ValidationError,
    Window,
)
from cortex.query import planner
from cortex.storage import keys as K

from .qsupport import T0, Clock, fact

_TYPES = [MemoryType.FACT, MemoryType.EVENT]
_TAGS = ["a", "b"]


def _data(t: MemoryType, i: int) -> Any:
    return fact(i) if t is MemoryType.FACT else Event(kind=f"k{i}")


@contextmanager
def _fused(on: bool) -> Iterator[None]:
    old, planner._FUSED = planner._FUSED, on
    try:
        yield
    finally:
        planner._FUSED = old


def _seen(res: Any) -> tuple[Any, ...]:
    """Everything a find returns that the two loops could make differ."""
    hits = tuple(
        (h.memory.uri, h.memory.data, h.salience, h.score, h.text, h.tokens, h.hop)
        for h in res.hits
    )
    return hits, res.tokens, res.dropped, res.plan


@contextmanager
def _switched(scan_in_c: bool, accept_in_c: bool) -> Iterator[None]:
    """The fused loop with or without the C scan of the index and the C filters."""
    old = planner._NEWEST, planner._ACCEPTED
    planner._NEWEST = old[0] if scan_in_c else None
    planner._ACCEPTED = accept_in_c
    try:
        yield
    finally:
        planner._NEWEST, planner._ACCEPTED = old


def _both(cx: Cortex, q: Query) -> tuple[Any, Any]:
    """The general path's result and the fused loop's (which must be the same with and without
    the C scan of the index and the C filters)."""
    with _fused(False):
        general = _seen(cx.find(q))
        old, planner._SALIENCE = planner._SALIENCE, None
        try:  # salience by its definition, not in C
            assert _seen(cx.find(q)) == general
        finally:
            planner._SALIENCE = old
    with _fused(True):
        fused = _seen(cx.find(q))
        for scan_in_c, accept_in_c in ((False, True), (True, False), (False, False)):
            with _switched(scan_in_c, accept_in_c):
                assert _seen(cx.find(q)) == fused
        old, planner._FAST = planner._FAST, False
        try:  # the fused loop in the Executor, not newest_first
            assert _seen(cx.find(q)) == fused
        finally:
            planner._FAST = old
        page, planner._READ_PAGE = planner._READ_PAGE, None
        try:  # newest_first one id at a time, not a page in one C call
            assert _seen(cx.find(q)) == fused
        finally:
            planner._READ_PAGE = page
        whole, planner._READ_NEWEST = planner._READ_NEWEST, None
        try:  # newest_first a page at a time, not every page and its hits in one C call
            assert _seen(cx.find(q)) == fused
        finally:
            planner._READ_NEWEST = whole
        cx._newest.clear()  # find's checks, then newest_first; then the kept find without them
        assert _seen(cx.find(q)) == fused
        assert _seen(cx.find(msgspec.structs.replace(q))) == fused
    return general, fused


item_st = st.tuples(
    st.sampled_from(_TYPES),
    st.lists(st.sampled_from(_TAGS), unique=True, max_size=2),
    st.integers(0, 10),
    st.sampled_from([0, 0, 1, 5]),  # seconds to advance after: 0 gives created-time ties
    st.sampled_from(
        ["none", "none", "tomb", "update", "head", "supersede", "expired", "expires", "public"]
    ),
    st.integers(0, 20),  # which earlier memory a supersedes edge points at
)

query_st = st.fixed_dictionaries(
    {
        "type": st.sampled_from(_TYPES),
        "tags": st.sampled_from([(), ("a",), ("b",)]),
        "limit": st.integers(1, 8),
        "offset": st.integers(0, 3),
        "descending": st.sampled_from([None, None, True, False]),
        "include_tombstoned": st.booleans(),
        "include_superseded": st.booleans(),
        "include_expired": st.booleans(),
        "other_reader": st.booleans(),
    },
    optional={
        "window": st.tuples(
            st.integers(0, 60), st.integers(1, 60), st.sampled_from(["own", "updated"])
        ),
        "budget": st.integers(1, 40),
        "where": st.integers(0, 10),
    },
)


def _fill(cx: Cortex, clock: Clock, items: list[tuple[Any, ...]]) -> list[MemoryId]:
    """Write ``items`` (``item_st``): tombstones, updates, supersedes edges, expiries."""
    mids: list[MemoryId] = []
    for i, (t, tags, imp, step, change, other) in enumerate(items):
        kw: dict[str, Any] = {"tags": tags, "importance": imp}
        if change == "expired":
            kw["expires_at"] = clock.now + timedelta(seconds=1)
        elif change == "expires":
            kw["expires_at"] = clock.now + timedelta(days=3)
        elif change == "public":
            kw["visibility"] = "actor_public"
        mid = cx.write(_data(t, i), **kw).id
        if change == "tomb":
            clock.tick(2)
            cx.tombstone(mid, "x")
        elif change == "update":
            clock.tick(2)
            cx.update(mid, _data(t, i + 100))
        elif change == "head":
            clock.tick(3)
            cx.update_head(mid, importance=10 - imp, tags=tags[:1])
        elif change == "supersede" and mids:
            cx.add_edge(mid, "supersedes", mids[other % len(mids)])
        mids.append(mid)
        clock.tick(step)
    clock.tick(2)
    return mids


@settings(max_examples=80)
@given(items=st.lists(item_st, max_size=16), queries=st.lists(query_st, min_size=1, max_size=5))
def test_the_fused_loop_is_the_general_path(
    items: list[tuple[Any, ...]], queries: list[dict[str, Any]]
) -> None:
    clock = Clock()
    with (
        tempfile.TemporaryDirectory() as d,
        Cortex.open(Path(d) / "s", actor="m", clock=clock, metasync=False) as cx,
    ):
        _fill(cx, clock, items)
        for q in queries:
            kw = {
                "types": (q["type"],),
                "tags": q["tags"],
                "limit": q["limit"],
                "offset": q["offset"],
                "descending": q["descending"],
                "include_tombstoned": q["include_tombstoned"],
                "include_superseded": q["include_superseded"],
                "include_expired": q["include_expired"],
            }
            if q["other_reader"]:
                kw["reader"] = Reader(actor="someone-else")
            if "window" in q:
                lo = T0 + timedelta(seconds=q["window"][0])
                kw["window"] = Window.between(
                    lo, lo + timedelta(seconds=q["window"][1]), on=q["window"][2]
                )
            if "budget" in q:
                kw["budget_tokens"] = q["budget"]
            if "where" in q:
                kw["where"] = Gt("head.importance", q["where"])
            general, fused = _both(cx, Query(**kw))
            assert fused == general, q


@pytest.mark.parametrize("limit", [1, 10, 63, 64, 65, 100, 200])
def test_the_fused_loop_across_long_runs_of_one_time(limit: int) -> None:
    """``write_many`` gives a batch one created time: runs longer than ``_RUN`` are read forward."""
    clock = Clock()
    with (
        tempfile.TemporaryDirectory() as d,
        Cortex.open(Path(d) / "s", actor="m", clock=clock, metasync=False) as cx,
    ):
        for batch in range(3):
            cx.write_many(
                [
                    NewMemory(data=fact(f"{batch}-{i}"), tags=["a"] if i % 3 else ["b"])
                    for i in range(90)
                ]
            )
            cx.write(fact(f"alone-{batch}"), tags=["a"])
            clock.tick(1)
        for q in (
            Query(types=("Fact",), limit=limit),
            Query(types=("Fact",), tags=("a",), limit=limit),
            Query(types=("Fact",), tags=("b",), limit=limit, offset=3),
        ):
            general, fused = _both(cx, q)
            assert fused == general
            every = cx.find(msgspec.structs.replace(q, limit=999, offset=0)).hits
            assert len(fused[0]) == max(0, min(limit, len(every) - q.offset))


def test_the_fused_loop_runs_where_it_applies() -> None:
    """The fused loop is taken for the plans it names, and declines the others."""
    with tempfile.TemporaryDirectory() as d, Cortex.open(Path(d) / "s", actor="m") as cx:
        cx.write(fact(1), tags=["a"])
        with cx._kv.read() as txn:

            def one(q: Query) -> bytes | None:
                from cortex.query.language import compile_query

                plan = compile_query(q, cx._now())
                return cx._executor(txn, plan, cx._reader(None), cx._now())._one_prefix()

            # only where the C read is built (LMDB): else every plan takes the general path
            c_read = cx._engine.current_reader(txn) is not None
            assert (one(Query(types=("Fact",), limit=3)) is not None) == c_read
            assert (one(Query(types=("Fact",), tags=("a",), limit=3)) is not None) == c_read
            assert one(Query(types=("Fact", "Event"), limit=3)) is None
            assert one(Query(tags=("a",), limit=3)) is None
            assert one(Query(types=("Fact",), tags=("a", "b"), limit=3)) is None
            assert one(Query(types=("Fact",), limit=3, descending=False)) is None
            assert one(Query(types=("Fact",), limit=3, as_of=T0)) is None


# -- newest_ids: created_scan of one prefix, newest first, in pages from C -----------------------

try:
    from cortex import _speedups as sp
except ImportError:  # CORTEX_NO_SPEEDUPS=1, or installed without a C compiler
    sp = None

needs_c = pytest.mark.skipif(sp is None, reason="the C accelerator is not built")

_PREFIX = b"idx/q/"


def _keys_st() -> st.SearchStrategy[list[bytes]]:
    """Keys ``prefix || u64 created || id16`` with few distinct times (runs, long ones too)."""
    one = st.tuples(
        st.sampled_from([0, 1, 2, 7, 2**64 - 1, 5_000_000]),
        st.binary(min_size=16, max_size=16),
    )
    runs = st.lists(one, max_size=40) | st.builds(
        lambda t, n: [(t, i.to_bytes(16, "big")) for i in range(n)],
        st.sampled_from([0, 3, 2**64 - 1]),
        st.integers(60, 140),
    )
    return st.builds(
        lambda a, b: sorted({_PREFIX + t.to_bytes(8, "big") + i for t, i in a + b}), runs, runs
    )


@contextmanager
def _index(keys: list[bytes], extra: tuple[bytes, ...] = ()) -> Iterator[Any]:
    """A read snapshot of an LMDB store holding ``keys`` and neighbours around the prefix."""
    from cortex.storage.kv import LmdbKV

    with tempfile.TemporaryDirectory() as d:
        kv = LmdbKV(Path(d) / "kv")
        try:
            around = (b"idx/p\xff", b"idx/q", b"idx/q.", b"idx/q0", b"idx/r", *extra)
            kv.write(lambda t: [t.put(k, b"") for k in (*keys, *around)])
            with kv.read() as txn:
                yield txn
        finally:
            kv.close()


def _scan(txn: Any, prefix: bytes) -> list[bytes]:
    """``created_scan(prefix, True)``'s ids: the definition."""
    from cortex.query.language import compile_query

    plan = compile_query(Query(types=("Fact",), limit=1), T0)
    ex = planner.Executor.__new__(planner.Executor)
    ex.txn, ex.plan = txn, plan
    return [m.bytes for _, m in ex.created_scan(prefix, True)]


def _paged(txn: Any, prefix: bytes, size: int) -> list[bytes] | None:
    out: list[bytes] = []
    after = None
    while True:
        got = sp.newest_ids(txn.cursor(), prefix, after, size)
        if got is None:
            return None
        ids, after = got
        assert type(ids) is list and all(type(i) is bytes and len(i) == 16 for i in ids)
        if after is None:
            assert len(ids) <= size
            return out + ids
        assert len(ids) == size and type(after) is bytes and len(after) == 24
        assert after[8:] == ids[-1]
        out += ids


@needs_c
@settings(max_examples=150)
@given(_keys_st(), st.sampled_from([1, 2, 3, 8, 10, 63, 64, 65, 200]))
def test_newest_ids_is_created_scan(keys: list[bytes], size: int) -> None:
    with _index(keys) as txn:
        want = _scan(txn, _PREFIX)
        assert len(want) == len(keys)
        assert _paged(txn, _PREFIX, size) == want
        # the Python generator of the fused loop (without the C scan) gives the same
        from cortex.query.language import compile_query

        ex = planner.Executor.__new__(planner.Executor)
        ex.txn, ex.plan = txn, compile_query(Query(types=("Fact",), limit=1), T0)
        assert list(ex._newest(_PREFIX)) == want
        # an empty prefix, and prefixes at the ends of the key space
        assert sp.newest_ids(txn.cursor(), b"idx/none/", None, size) == ([], None)
        assert sp.newest_ids(txn.cursor(), b"\xff\xff", None, size) == ([], None)
        assert sp.newest_ids(txn.cursor(), b"\x00", None, size) == ([], None)


@needs_c
@pytest.mark.parametrize("bad", [_PREFIX + b"short", _PREFIX + bytes(25), _PREFIX + bytes(23)])
def test_newest_ids_declines_a_key_of_another_length(bad: bytes) -> None:
    keys = [_PREFIX + t.to_bytes(8, "big") + bytes(15) + bytes((t,)) for t in range(5)]
    with _index(keys, (bad,)) as txn:
        assert _paged(txn, _PREFIX, 2) is None


@needs_c
def test_newest_ids_refuses_bad_arguments() -> None:
    with _index([]) as txn:
        cur = txn.cursor()
        for args in (
            (cur, "idx/q/", None, 3),
            (cur, _PREFIX, b"x" * 23, 3),
            (cur, _PREFIX, "x" * 24, 3),
        ):
            with pytest.raises(TypeError):
                sp.newest_ids(*args)
        for limit in (0, -1, 2**80, 1.5, None):
            with pytest.raises((ValueError, TypeError)):
                sp.newest_ids(cur, _PREFIX, None, limit)
        with pytest.raises(TypeError):
            sp.newest_ids(cur, _PREFIX, None)
        with pytest.raises(AttributeError):  # the cursor's error is raised, not declined
            sp.newest_ids(object(), _PREFIX, None, 3)


def test_a_declined_scan_takes_the_general_path() -> None:
    """A damaged index key of another length: the fused loop declines, the general path runs."""
    from cortex.storage.keys import tag_prefix

    with tempfile.TemporaryDirectory() as d, Cortex.open(Path(d) / "s", actor="m") as cx:
        for i in range(5):
            cx.write(fact(i), tags=["a"])
        bad = tag_prefix("a", MemoryType.FACT) + b"\xff" * 10
        cx._kv.write(lambda t: t.put(bad, b""))
        q = Query(types=("Fact",), tags=("a",), limit=3)
        with _fused(False):
            try:
                general: Any = _seen(cx.find(q))
            except Exception as exc:
                general = (type(exc), str(exc))
        with _fused(True):
            try:
                fused: Any = _seen(cx.find(q))
            except Exception as exc:
                fused = (type(exc), str(exc))
        assert fused == general
        assert general[0] is IntegrityError and "index key is damaged" in general[1]


# -- damage: a flipped byte fails the fused loop as it fails the general path --------------------


def _outcome(cx: Cortex, q: Query) -> Any:
    """What a find gives: its result, or the CortexError it raises (anything else fails)."""
    try:
        return _seen(cx.find(q))
    except CortexError as exc:
        return (type(exc), str(exc))


def _replace(cx: Cortex, gone: bytes | None, key: bytes, value: bytes) -> None:
    """Delete ``gone`` (if any) and put ``key``: damage written behind the store's back."""

    def fn(t: Any) -> None:
        if gone is not None:
            t.delete(gone)
        t.put(key, value)

    cx._kv.write(fn)


@pytest.mark.parametrize("resealed", [False, True], ids=["flipped", "flipped-and-resealed"])
def test_a_flipped_byte_fails_the_fused_loop_as_the_general_path(resealed: bool) -> None:
    from cortex.storage.keys import EDGE_TO, IDX_TAG, IDX_TYPE
    from cortex.storage.kv import seal

    clock = Clock()
    with (
        tempfile.TemporaryDirectory() as d,
        Cortex.open(Path(d) / "s", actor="m", clock=clock, metasync=False) as cx,
    ):
        mids = []
        for i in range(5):
            kw: dict[str, Any] = {"tags": ["a"] if i % 2 else ["a", "b"]}
            if i == 3:
                kw["expires_at"] = clock.now + timedelta(seconds=30)
            mids.append(cx.write(fact(i), **kw).id)
            clock.tick(1 if i != 1 else 0)
        cx.tombstone(mids[0], "x")
        cx.add_edge(mids[4], "supersedes", mids[2])
        clock.tick(60)
        queries = [
            Query(types=("Fact",), limit=3),
            Query(types=("Fact",), tags=("a",), limit=10, include_superseded=True),
            Query(types=("Fact",), tags=("b",), limit=2, include_tombstoned=True),
        ]
        with cx._kv.read() as txn:
            stored = [
                (k, v)
                for k, v in txn.scan(b"")
                if k.startswith((b"m/", b"mv/", IDX_TYPE, IDX_TAG, EDGE_TO))
            ]
        trials = 0
        for key, value in stored:
            indexed = key.startswith((IDX_TYPE, IDX_TAG))
            body = key if indexed else (value[:-4] if resealed else value)
            for at in range(0, len(body), 3):
                flipped = body[:at] + bytes((body[at] ^ 0x5A,)) + body[at + 1 :]

                if indexed:  # the key itself damaged
                    _replace(cx, key, flipped, value)
                else:
                    _replace(cx, None, key, seal(flipped) if resealed else flipped)
                try:
                    for q in queries:
                        with _fused(False):
                            general = _outcome(cx, q)
                        with _fused(True):
                            assert _outcome(cx, q) == general, (key, at, q)
                        trials += 1
                finally:
                    _replace(cx, flipped if indexed else None, key, value)
        assert trials > 1000


# -- read_accepted: read_current and the first filters of passes in one C call -----------------


@needs_c
@settings(max_examples=60)
@given(
    items=st.lists(item_st, min_size=1, max_size=12),
    types=st.sets(st.sampled_from(_TYPES), min_size=1),
    tags=st.sampled_from([(), ("a",), ("b",), ("a", "b")]),
    superseded=st.booleans(),
)
def test_read_accepted_is_passes(
    items: list[tuple[Any, ...]],
    types: set[MemoryType],
    tags: tuple[str, ...],
    superseded: bool,
) -> None:
    from cortex.query.language import compile_query

    clock = Clock()
    with (
        tempfile.TemporaryDirectory() as d,
        Cortex.open(Path(d) / "s", actor="m", clock=clock, metasync=False) as cx,
    ):
        mids = _fill(cx, clock, items)
        q = Query(types=tuple(types), tags=tags, limit=5, include_superseded=superseded)
        with cx._kv.read() as txn:
            ex = cx._executor(txn, compile_query(q, cx._now()), cx._reader(None), cx._now())
            accepted = cx._engine.accepted_reader(txn, frozenset(types), tags, superseded)
            assert accepted is not None
            for mid in [*mids, MemoryId(bytes(16))]:
                got = accepted(mid.bytes)
                pair = ex._current(mid.bytes)
                want = ex.accept(mid)
                if got is None:  # the C read declines alike
                    assert pair is None
                    continue
                assert pair is not None
                if got is False:
                    assert want is None
                    continue
                head, version, passed = got
                assert (head, version) == pair
                if passed:
                    assert want is not None
                    assert (want.head, want.version) == (head, version)
                    again = ex.passes(head, version)
                    assert again is not None and again.data == want.data
                else:
                    # left to passes: a tombstone, a supersedes edge or an expiry is there
                    assert (
                        head.tombstone is not None
                        or version.expires_at is not None
                        or cx._engine.superseder(txn, mid, ex.at_us) is not None
                        or (not superseded and _has_into(txn, mid))
                    )


def _has_into(txn: Any, mid: MemoryId) -> bool:
    from cortex.storage.keys import EDGE_TO

    into = EDGE_TO + mid.bytes + bytes((2,))
    return next(txn.keys(into), None) is not None


@needs_c
def test_read_accepted_refuses_bad_arguments() -> None:
    from cortex.engine.store import _READ

    with tempfile.TemporaryDirectory() as d, Cortex.open(Path(d) / "s", actor="m") as cx:
        mid = cx.write(fact(1), tags=["a"]).id
        with cx._kv.read() as txn:
            get, cur = txn.raw_get, txn.cursor()
            ok = (_READ, get, cur, b"e/to/", b"\x02", frozenset(_TYPES), ("a",), mid.bytes)
            assert sp.read_accepted(*ok)[2] is True
            for i, bad in (
                (0, None),
                (3, "e/to/"),
                (4, None),
                (5, list(_TYPES)),
                (6, ["a"]),
                (7, mid.bytes[:15]),
                (7, str(mid)),
            ):
                args = list(ok)
                args[i] = bad
                with pytest.raises(TypeError):
                    sp.read_accepted(*args)
            with pytest.raises(TypeError):
                sp.read_accepted(*ok[:7])
            with pytest.raises(AttributeError):  # the cursor's error is raised, not declined
                sp.read_accepted(*ok[:2], object(), *ok[3:])
            with pytest.raises(KeyError):  # and get's
                sp.read_accepted(ok[0], {}.__getitem__, *ok[2:])
            # no such memory: declined
            assert sp.read_accepted(*ok[:7], bytes(16)) is None


_TAG_PREFIX = b"idx/tag/" + bytes(range(1, 9)) + b"\x03"
"""A tag's head (``idx/tag/`` and the tag's hash) and a type byte: in a database of duplicates
(format 20) the head is LMDB's key, the type byte the first of each duplicate."""


@contextmanager
def _dup_index(keys: list[bytes], prefix: bytes) -> Iterator[Any]:
    """A read snapshot of an LMDB store holding ``keys`` in the database of duplicates of the
    keyspace ``prefix`` is of, with neighbours under the same head and beside it."""
    from cortex.storage.kv import LmdbKV

    head = prefix[: K.DUP_DATABASES[next(p for p in K.DUP_DATABASES if prefix.startswith(p))]]
    pad = len(prefix) - len(head)
    tail = bytes(24)
    around = [head[:-1] + bytes((head[-1] - 1,)) + bytes(pad) + tail]
    around += [head[:-1] + bytes((head[-1] + 1,)) + bytes(pad) + tail]
    if pad:  # other types under the same head, before and after the prefix's
        around += [head + bytes((prefix[-1] - 1,)) + b"\xff" * 24]
        around += [head + bytes((prefix[-1] + 1,)) + bytes(24)]
    with tempfile.TemporaryDirectory() as d:
        kv = LmdbKV(Path(d) / "kv")
        try:
            kv.write(lambda t: [t.put(k, b"") for k in (*keys, *around)])
            with kv.read() as txn:
                yield txn
        finally:
            kv.close()


def _dup_paged(txn: Any, prefix: bytes, size: int) -> list[bytes] | None:
    got = txn.dup_cursor(prefix)
    assert got is not None
    cur, head = got
    out: list[bytes] = []
    after = None
    while True:
        page = sp.newest_ids(cur, prefix, after, size, head)
        if page is None:
            return None
        ids, after = page
        if after is None:
            return out + ids
        assert len(ids) == size and after[8:] == ids[-1]
        out += ids


@needs_c
@settings(max_examples=60)
@given(
    _keys_st(),
    st.sampled_from([1, 3, 10, 64, 65, 200]),
    st.sampled_from([K.IDX_TYPE + b"\x02", K.IDX_PIN + b"\x02", _TAG_PREFIX]),
)
def test_newest_ids_over_duplicates_is_created_scan(
    keys: list[bytes], size: int, prefix: bytes
) -> None:
    """Format 20: over a head's duplicates (``head`` > 0), the pages are ``created_scan``'s."""
    keys = [prefix + k[len(_PREFIX) :] for k in keys]
    with _dup_index(keys, prefix) as txn:
        want = _scan(txn, prefix)
        assert len(want) == len(keys)
        assert _dup_paged(txn, prefix, size) == want
        assert txn.dup_cursor(b"idx/none/") is None and txn.dup_cursor(_PREFIX) is None


# -- newest_first: a plain find newest first by the owner, without an Executor ------------------


@needs_c
@settings(max_examples=60)
@given(
    items=st.lists(item_st, min_size=1, max_size=14),
    tags=st.sampled_from([(), ("a",), ("b",)]),
    superseded=st.booleans(),
    want=st.integers(1, 16),
    damaged=st.booleans(),
)
def test_read_page_is_read_accepted(
    items: list[tuple[Any, ...]],
    tags: tuple[str, ...],
    superseded: bool,
    want: int,
    damaged: bool,
) -> None:
    """``read_page`` is ``read_accepted``, ``salience`` and ``memory_of`` of each id in turn."""
    from cortex.engine.store import _READ
    from cortex.model.codec import to_micros
    from cortex.model.enums import DecayClass
    from cortex.rules.salience import HALF_LIFE_DAYS

    clock = Clock()
    with (
        tempfile.TemporaryDirectory() as d,
        Cortex.open(Path(d) / "s", actor="m", clock=clock, metasync=False) as cx,
    ):
        mids = _fill(cx, clock, items)
        types = frozenset({MemoryType.FACT})
        ids = [m.bytes for m in reversed(mids)] + [bytes(16)]
        if damaged:  # an id off a damaged index key: declined
            ids.insert(len(ids) // 2, b"\x01" * 15)
        w = cx.weights
        weights = (w.recency, w.access, w.citation, w.importance)
        now_us = to_micros(cx._now())
        rest = (now_us, cx.decay, DecayClass.PERMANENT, HALF_LIFE_DAYS, weights)
        with cx._kv.read() as txn:
            args = cx._engine.accepted_args(txn, types, tags, superseded)
            assert args is not None
            got = sp.read_page(*args, ids, want, *rest)
            expected: list[Any] | None = []
            for raw in ids:
                if len(raw) != 16:
                    expected = None
                    break
                row = sp.read_accepted(*args, raw)
                if row is False:
                    continue
                if row is None or not row[2]:
                    expected = None
                    break
                head, version, _ = row
                memory = sp.memory_of(_READ, head, version)
                assert expected is not None
                expected.append((head, version, memory, sp.salience(head, *rest)))
                if len(expected) >= want:
                    break
            assert got == expected


@needs_c
def test_read_page_refuses_bad_arguments() -> None:
    from cortex.model.enums import DecayClass
    from cortex.rules.salience import HALF_LIFE_DAYS

    with tempfile.TemporaryDirectory() as d, Cortex.open(Path(d) / "s", actor="m") as cx:
        mid = cx.write(fact(1), tags=["a"]).id
        with cx._kv.read() as txn:
            args = cx._engine.accepted_args(txn, frozenset(_TYPES), ("a",), False)
            assert args is not None
            rest = [1, cx.decay, DecayClass.PERMANENT, HALF_LIFE_DAYS, (1.0, 1.0, 1.0, 1.0)]
            ok = [*args, [mid.bytes], 3, *rest]
            (row,) = sp.read_page(*ok)
            assert row[0].id == mid and row[2].id == mid and type(row[3]) is float
            assert sp.read_page(*ok[:7], [], 3, *rest) == []
            for i, bad in ((7, (mid.bytes,)), (8, 1.5), (9, 1.5), (10, list(cx.decay.items()))):
                wrong = list(ok)
                wrong[i] = bad
                with pytest.raises(TypeError):
                    sp.read_page(*wrong)
            for want in (0, -1):
                with pytest.raises(ValueError):
                    sp.read_page(*ok[:8], want, *rest)
            with pytest.raises(TypeError):
                sp.read_page(*ok[:13])
            with pytest.raises(AttributeError):  # the cursor's error is raised, not declined
                sp.read_page(*ok[:2], object(), *ok[3:])
            # a string among the ids, or an id of another length: declined
            assert sp.read_page(*ok[:7], [str(mid)], 3, *rest) is None
            assert sp.read_page(*ok[:7], [mid.bytes[:15]], 3, *rest) is None


@needs_c
@settings(max_examples=60)
@given(
    items=st.lists(item_st, min_size=1, max_size=14),
    tags=st.sampled_from([(), ("a",), ("b",)]),
    superseded=st.booleans(),
    want=st.integers(1, 16),
    form=st.sampled_from([-1, 0, 1]),
    size=st.sampled_from([1, 2, 8]),
)
def test_read_newest_is_newest_ids_and_read_page(  # noqa: PLR0917 - hypothesis's draws
    items: list[tuple[Any, ...]],
    tags: tuple[str, ...],
    superseded: bool,
    want: int,
    form: int,
    size: int,
) -> None:
    """``read_newest`` is ``newest_ids`` in pages and ``read_page`` of each, with the hits of
    ``newest_first`` (a page's size changes nothing)."""
    from cortex.model.codec import to_micros
    from cortex.model.enums import DecayClass
    from cortex.query.language import Hit
    from cortex.rules.salience import HALF_LIFE_DAYS

    clock = Clock()
    with (
        tempfile.TemporaryDirectory() as d,
        Cortex.open(Path(d) / "s", actor="m", clock=clock, metasync=False) as cx,
    ):
        _fill(cx, clock, items)
        t = MemoryType.FACT
        prefix = K.tag_prefix(tags[0], t) if tags else K.IDX_TYPE + bytes((t,))
        types = frozenset({t})
        w = cx.weights
        weights = (w.recency, w.access, w.citation, w.importance)
        now_us = to_micros(cx._now())
        rest = (now_us, cx.decay, DecayClass.PERMANENT, HALF_LIFE_DAYS, weights)
        with cx._kv.read() as txn:
            args = cx._engine.accepted_args(txn, types, tags, superseded)
            assert args is not None
            got = txn.dup_cursor(prefix)
            cur, head = got if got is not None else (txn.cursor(), 0)
            done = sp.read_newest(*args, cur, prefix, head, want, *rest, Hit, form)
            rows: list[Any] | None = []
            after = None
            while rows is not None:  # newest_ids and read_page by their own definitions
                pg = sp.newest_ids(cur, prefix, after, size, head)
                if pg is None:
                    rows = None
                    break
                ids, after = pg
                some = sp.read_page(*args, ids, want - len(rows), *rest)
                if some is None:
                    rows = None
                    break
                rows += some
                if after is None or len(rows) >= want:
                    break
            if rows is None:
                assert done is None
                return
            assert done is not None
            items_, total, left = done
            assert len(items_) == len(rows)
            assert left == sum(type(i) is tuple for i in items_)
            assert total == sum(i.tokens for i in items_ if type(i) is not tuple)
            for item, (h, v, m, sal) in zip(items_, rows, strict=True):
                if form < 0 or m is None or sal is None:
                    assert item == (h, v, m, sal)
                    continue
                forms = m.version.forms or m.head.forms
                text = "" if forms is None else forms.medium if form else forms.short
                n = -(-len(text.encode()) // 4)
                assert item == Hit(memory=m, text=text, tokens=n, salience=sal, score=sal)


@needs_c
def test_read_newest_refuses_bad_arguments() -> None:
    from cortex.model.enums import DecayClass
    from cortex.query.language import Hit
    from cortex.rules.salience import HALF_LIFE_DAYS

    with tempfile.TemporaryDirectory() as d, Cortex.open(Path(d) / "s", actor="m") as cx:
        mid = cx.write(fact(1), tags=["a"]).id
        prefix = K.tag_prefix("a", MemoryType.FACT)
        with cx._kv.read() as txn:
            args = cx._engine.accepted_args(txn, frozenset(_TYPES), ("a",), False)
            assert args is not None
            got = txn.dup_cursor(prefix)
            cur, head = got if got is not None else (txn.cursor(), 0)
            rest = [1, cx.decay, DecayClass.PERMANENT, HALF_LIFE_DAYS, (1.0, 1.0, 1.0, 1.0)]
            ok = [*args, cur, prefix, head, 3, *rest, Hit, 0]
            (hit,), total, left = sp.read_newest(*ok)
            assert type(hit) is Hit and hit.memory.id == mid and total == hit.tokens and not left
            ((h, _, m, sal),), total, left = sp.read_newest(*ok[:-1], -1)
            assert (
                h.id == mid
                and m == hit.memory
                and sal == hit.salience
                and (total, left)
                == (
                    0,
                    1,
                )
            )
            for i, bad in ((10, 1.5), (16, "Hit"), (17, 0.0), (8, "idx")):
                wrong = list(ok)
                wrong[i] = bad
                with pytest.raises(TypeError):
                    sp.read_newest(*wrong)
            for i, bad in ((10, 0), (17, 2), (17, -2), (9, 99)):
                wrong = list(ok)
                wrong[i] = bad
                with pytest.raises(ValueError):
                    sp.read_newest(*wrong)
            with pytest.raises(TypeError):
                sp.read_newest(*ok[:17])
            # an index key of another length under the prefix: declined (newest_ids's None)
            assert sp.read_newest(*ok[:8], prefix[:-1], 0, *ok[10:]) in (None, ([], 0, 0))


def test_the_kept_find_gives_what_find_gives() -> None:
    """A find kept by query (``Cortex._newest``) gives what a find compiled afresh gives: the
    forms, texts of more than ASCII, memories with use counters, a changed weighting."""
    from cortex.rules.salience import DEFAULT_WEIGHTS, Weights

    clock = Clock()
    with (
        tempfile.TemporaryDirectory() as d,
        Cortex.open(Path(d) / "s", actor="m", clock=clock, metasync=False) as cx,
    ):
        mids = []
        for i in range(6):
            mids.append(cx.write(fact(f"caf\u00e9 \u2014 {i} \U0001f600"), tags=["a"]).id)
            clock.tick(1)
        cx.find(Query(types=("Fact",), limit=2, record_access=True))  # counters on two
        cx.attest([mids[0]])
        clock.tick(5)
        for q in (
            Query(types=("Fact",), tags=("a",), limit=4),
            Query(types=("Fact",), tags=("a",), limit=10, form="medium"),
            Query(types=("Fact",), limit=10, form="full"),
        ):
            cx._newest.clear()
            first = _seen(cx.find(q))
            assert q in cx._newest
            assert _seen(cx.find(q)) == first
            with _fused(False):
                assert _seen(cx.find(q)) == first
            cx.weights = Weights(recency=0.5, access=0.1, citation=0.1, importance=0.3)
            changed = _seen(cx.find(q))
            cx._newest.clear()
            assert _seen(cx.find(q)) == changed
            cx.weights = DEFAULT_WEIGHTS


def test_newest_first_runs_where_it_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    """A find of one type (and one tag) newest first by the owner takes it; others do not."""
    from cortex.agent import api

    ran: list[bool] = []

    def spy(*args: Any, **kw: Any) -> Any:
        got = planner.newest_first(*args, **kw)
        ran.append(got is not None)
        return got

    monkeypatch.setattr(api, "newest_first", spy)
    with tempfile.TemporaryDirectory() as d, Cortex.open(Path(d) / "s", actor="m") as cx:
        for i in range(4):
            cx.write(fact(i), tags=["a"])
        c_read = sp is not None
        for q, takes in (
            (Query(types=("Fact",), limit=3), True),
            (Query(types=("Fact",), tags=("a",), limit=3), True),
            (Query(types=("Fact",), tags=("a",), limit=3, include_superseded=True), True),
            (Query(types=("Fact",), tags=("a",), limit=3, offset=1), False),
            (Query(types=("Fact",), tags=("a",), limit=3, budget_tokens=5), False),
            (Query(types=("Fact",), tags=("a",), limit=3, descending=False), False),
            (Query(types=("Fact", "Event"), limit=3), False),
            (Query(types=("Fact",), tags=("a", "b"), limit=3), False),
            (Query(types=("Fact",), limit=3, reader=Reader(actor="someone")), False),
            (Query(types=("Fact",), limit=3, where=Gt("head.importance", 1)), False),
        ):
            ran.clear()
            cx.find(q)
            assert ran == ([c_read] if takes else []), q


@pytest.mark.parametrize(
    "odd",
    [
        {"limit": True},
        {"limit": 1.0},
        {"offset": False},
        {"offset": 0.0},
        {"types": (MemoryType.FACT,)},
        {"types": ("fact",)},
        {"tags": (type("Tag", (str,), {})("a"),)},
        {"types": ["Fact"]},  # a list: cannot be hashed, never kept
    ],
)
def test_a_kept_plan_serves_only_the_kinds_it_was_compiled_from(odd: dict[str, Any]) -> None:
    """``1 == True == 1.0``: a query equal to a kept one but of other kinds compiles again."""
    with (
        tempfile.TemporaryDirectory() as d,
        Cortex.open(Path(d) / "s", actor="m", clock=Clock()) as cx,
    ):
        cx.write(fact(1), tags=["a"])
        base = {"types": ("Fact",), "tags": ("a",), "limit": 1}
        plain = _seen(cx.find(Query(**base)))
        assert len(cx._plans) == 1
        assert _seen(cx.find(Query(**base))) == plain  # the kept plan
        q = Query(**{**base, **odd})
        kept = _outcome(cx, q)
        cx._plans.clear()
        assert _outcome(cx, q) == kept  # as compiled afresh
        if isinstance(kept, tuple) and kept and kept[0] is ValidationError:
            return
        assert kept == plain


def test_kept_plans_are_bounded() -> None:
    from cortex.agent.api import _PLANS_KEPT

    with tempfile.TemporaryDirectory() as d, Cortex.open(Path(d) / "s", actor="m") as cx:
        cx.write(fact(1), tags=["a"])
        for n in range(1, _PLANS_KEPT + 10):
            cx.find(Query(types=("Fact",), limit=n))
            assert 1 <= len(cx._plans) <= _PLANS_KEPT
