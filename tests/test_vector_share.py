"""A typed vector search sizes its first round by the types' share (written as an independent
review of the change, against the spec).

Against ``specs/query.md`` v13 §1.8 and ``specs/vector-index.md`` §2 "Tags": the hits of a
query of the vector list alone with a type filter are those of the rounds (``type_share``
returning None: 40/32 deep, then four times deeper), for several type sets (one held rarely, a
type with no memories), limits and offsets, ``near`` and ``near_vector``, after tombstones,
purges and updates, and on an index loaded from its cache; the first round is fetched as deep
as the spec says and never more rounds run; ``VectorIndex.share`` against a model.
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cortex import Event, MemoryId, MemoryType, Preference, Query
from cortex.engine.sidecar import VectorSidecar
from cortex.index.ann import UNTAGGED, VectorIndex
from tests.vsupport import E, fact, open_store

WHEN = datetime(2026, 11, 1, tzinfo=UTC)
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "omicron",
    "pi",
    "rho",
    "sigma",
    "tau",
    "upsilon",
]
TYPE_SETS = (
    ("event",),  # rare: about a tenth
    ("preference",),
    ("fact",),
    ("event", "preference"),
    ("goal",),  # no memory of it: share 0, the rounds
    ("event", "goal"),
    ("fact", "preference", "event"),  # every held type, not every type
)
WINDOWS = ((1, 0), (10, 0), (7, 5), (25, 0), (3, 40))  # (limit, offset)
NAME = {"event": MemoryType.EVENT, "preference": MemoryType.PREFERENCE, "fact": MemoryType.FACT}


def _items(n: int, seed: int) -> tuple[list[Any], list[str]]:
    """``n`` memories of random words: a tenth Events, three tenths Preferences, the rest
    Facts (so the types are mixed through the vector list), and their type names."""
    rng = random.Random(seed)
    items, kinds = [], []
    for _ in range(n):
        text = " ".join(rng.choice(WORDS) for _ in range(4))
        r = rng.random()
        if r < 0.1:
            items.append(Event(kind="note", summary=text, occurred_at=WHEN))
            kinds.append("event")
        elif r < 0.4:
            items.append(Preference(topic=text, polarity="prefer"))
            kinds.append("preference")
        else:
            items.append(fact(text))
            kinds.append("fact")
    return items, kinds


class Fetches:
    """The depths ``VectorSidecar.search`` is asked for, per query."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.depths: list[int] = []
        real = VectorSidecar.search

        def counted(sidecar: Any, txn: Any, query: Any, n: int) -> Any:
            self.depths.append(n)
            return real(sidecar, txn, query, n)

        monkeypatch.setattr(VectorSidecar, "search", counted)

    def take(self) -> list[int]:
        out, self.depths = self.depths, []
        return out


def _hits(cx: Any, q: Query) -> list[tuple[str, float, dict[str, int]]]:
    return [(str(h.uri), h.scores["vector"], dict(h.ranks)) for h in cx.find(q).hits]


def _rounds(monkeypatch: pytest.MonkeyPatch, fn: Callable[[], Any]) -> Any:
    """``fn`` with the share unknown: the rounds of ``query.md`` v12."""
    with monkeypatch.context() as m:
        m.setattr(VectorSidecar, "type_share", lambda self, types: None)
        return fn()


def _queries(texts: tuple[str, ...], **kw: Any) -> Iterator[Query]:
    for text in texts:
        for types in TYPE_SETS:
            for limit, offset in WINDOWS:
                yield Query(near=text, types=types, limit=limit, offset=offset, **kw)


def _compare(
    cx: Any, monkeypatch: pytest.MonkeyPatch, fetches: Fetches, queries: list[Query]
) -> int:
    """Each query answers as the rounds do, its first round no shallower and no more rounds;
    returns how many queries the share made shallower in rounds."""
    fewer = 0
    for q in queries:
        fetches.take()
        got = _hits(cx, q)
        new = fetches.take()
        want = _rounds(monkeypatch, lambda q=q: _hits(cx, q))
        old = fetches.take()
        assert got == want, (q.near, q.types, q.limit, q.offset)
        assert new[0] >= old[0] and len(new) <= len(old), (new, old, q)
        fewer += len(new) < len(old)
    return fewer


def _true_share(cx: Any, types: tuple[str, ...]) -> Fraction | None:
    """The spec's ``s`` from the index itself: among its ids whose type it knows."""
    index = cx._sidecar.index
    tags = index.tags(index.ids())
    known = [t for t in tags if t is not None]
    if not tags or 2 * len(known) < len(tags):
        return None
    wanted = {int(NAME[t]) for t in types if t in NAME}
    return Fraction(sum(t in wanted for t in known), len(known))


def _spec_depth(cx: Any, q: Query, s: Fraction | None) -> int:
    want = q.offset + (q.limit or 0)
    n = max(32, cx.fusion.depth, 4 * want)
    if s is None or s == 0:
        return n
    return max(n, min(1024, math.ceil(Fraction(2 * want) / s)))


# -- a store of mixed types, as built --------------------------------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    items, _ = _items(400, seed=7)
    with open_store(tmp_path_factory.mktemp("built") / "s", embedder=E) as cx:
        cx.write_many(items)
        cx.find(Query(near="alpha", limit=1))  # the index built: every type known
        yield cx


def test_typed_near_answers_as_the_rounds(built: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fetches = Fetches(monkeypatch)
    fewer = _compare(built, monkeypatch, fetches, list(_queries(("alpha beta", "kappa", "rho"))))
    assert fewer > 0  # the change does something here


def test_typed_near_vector_answers_as_the_rounds(
    built: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    fetches = Fetches(monkeypatch)
    vectors = [E.embed([t])[0] for t in ("gamma delta", "sigma")]
    vectors.append(np.ones(E.dim, dtype=np.float32))  # a query near nothing in particular
    qs = [
        Query(near_vector=v, types=types, limit=limit, offset=offset)
        for v in vectors
        for types in TYPE_SETS
        for limit, offset in WINDOWS
    ]
    _compare(built, monkeypatch, fetches, qs)


def test_first_round_is_as_deep_as_the_spec_says(
    built: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``max(n, min(1024, ⌈2 × (offset + limit) / s⌉))``; one more where float division
    rounds ``2w/s`` up past an integer (e.g. 2/(1/49) = 98.00000000000001)."""
    fetches = Fetches(monkeypatch)
    for q in _queries(("epsilon",)):
        fetches.take()
        built.find(q)
        first = fetches.take()[0]
        spec = _spec_depth(built, q, _true_share(built, q.types))
        assert spec <= first <= spec + 1, (q.types, q.limit, q.offset, first, spec)


def test_share_only_for_the_vector_list_alone(built: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``text`` query (fused with the vector list) and an untyped one keep ``n``."""
    fetches = Fetches(monkeypatch)
    for q in (
        Query(text="alpha", types=("event",), limit=10),
        Query(near="alpha", limit=10),
        Query(near="alpha", text="alpha", types=("event",), limit=10),
    ):
        fetches.take()
        built.find(q)
        assert fetches.take()[0] == max(32, built.fusion.depth, 40), q


# -- after tombstones, purges and updates; loaded from the cache ----------------------------


def test_after_tombstones_purges_updates_and_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    items, kinds = _items(240, seed=11)
    path = tmp_path / "s"
    texts = ("alpha", "mu nu")
    qs = [q for q in _queries(texts) if q.types in (("event",), ("preference",), ("goal",))]
    fetches = Fetches(monkeypatch)
    with open_store(path, embedder=E) as cx:
        ids = [w.id for w in cx.write_many(items)]
        events = [m for m, k in zip(ids, kinds, strict=True) if k == "event"]
        prefs = [m for m, k in zip(ids, kinds, strict=True) if k == "preference"]
        _compare(cx, monkeypatch, fetches, qs)
        # most events go: the share of "event" falls, a stale one would fetch too shallow
        for m in events[: len(events) * 2 // 3]:
            cx.tombstone(m, "gone")
        cx.purge(events[-1], "erase")
        for m in prefs[:10]:
            cx.update(m, Preference(topic="alpha alpha alpha", polarity="avoid"))
        cx.write(Event(kind="note", summary="alpha mu nu", occurred_at=WHEN))
        _compare(cx, monkeypatch, fetches, qs)
        gone = len(events) * 2 // 3  # tombstoned; one more purged and one more written
        s = cx._sidecar.type_share([int(MemoryType.EVENT)])
        assert s == (len(events) - gone) / (240 - gone)  # kept right by the catch-up
    with open_store(path, embedder=E) as cx:  # loaded: no type known at first
        assert cx._sidecar.type_share([int(MemoryType.EVENT)]) is None
        _compare(cx, monkeypatch, fetches, qs)
        assert cx.vector_state() == "loaded"
        for _ in range(3):  # queries note the types they read, until half are known
            _compare(cx, monkeypatch, fetches, qs[:20])
        s = cx._sidecar.type_share([int(MemoryType.EVENT)])
        true = _true_share(cx, ("event",))
        assert s is not None  # half the types noted by now
        assert (s is None and true is None) or (true is not None and s == float(true))
        # a share over the noted types only (a biased sample) still answers as the rounds
        _compare(cx, monkeypatch, fetches, qs)


def test_concurrent_writes_and_typed_searches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The unlocked reads of ``share``: typed searches while another thread writes and
    tombstones; nothing raises and the answers then are the rounds'."""
    items, _ = _items(150, seed=3)
    errors: list[BaseException] = []
    with open_store(tmp_path / "s", embedder=E) as cx:
        ids = [w.id for w in cx.write_many(items)]
        cx.find(Query(near="alpha", limit=1))

        def writer() -> None:
            try:
                rng = random.Random(5)
                for i in range(40):
                    more, _ = _items(3, seed=100 + i)
                    cx.write_many(more)
                    if i % 4 == 0:
                        cx.tombstone(ids[rng.randrange(len(ids))], "x")
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        def reader() -> None:
            try:
                for i in range(60):
                    cx.find(Query(near=WORDS[i % len(WORDS)], types=("event",), limit=10))
            except BaseException as exc:  # pragma: no cover
                errors.append(exc)

        threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        fetches = Fetches(monkeypatch)
        _compare(cx, monkeypatch, fetches, [q for q in _queries(("beta",))][:15])


@pytest.mark.parametrize(("order_by", "descending"), [("created", None), ("score", False)])
def test_non_final_orders_answer_as_the_rounds(
    built: Any, monkeypatch: pytest.MonkeyPatch, order_by: str, descending: bool | None
) -> None:
    """In another order than score, descending, the rounds decide the candidates (§1.8 v13):
    the hits are the rounds' (the share is not used there)."""
    fetches = Fetches(monkeypatch)
    _compare(
        built,
        monkeypatch,
        fetches,
        list(_queries(("alpha", "kappa"), order_by=order_by, descending=descending)),
    )


# -- VectorIndex.share -----------------------------------------------------------------------


def _mid(i: int) -> MemoryId:
    return MemoryId(i.to_bytes(16, "big"))


def _vec(i: int) -> np.ndarray:
    v = np.random.default_rng(i).standard_normal(8).astype(np.float32)
    return v


def _expected(model: dict[int, int | None], tags: set[int]) -> float | None:
    live = len(model)
    known = [t for t in model.values() if t is not None]
    if not live or 2 * len(known) < live:
        return None
    return sum(t in tags for t in known) / len(known)


OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("add"), st.lists(st.integers(0, 11), min_size=1, max_size=4, unique=True)
        ),
        st.tuples(st.just("remove"), st.integers(0, 11)),
        st.tuples(st.just("tag"), st.integers(0, 11), st.integers(0, 4)),
        st.tuples(st.just("note"), st.integers(0, 11), st.integers(0, 4)),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(ops=OPS, asked=st.lists(st.integers(0, 4), max_size=4))
def test_share_matches_a_model(ops: list[tuple[Any, ...]], asked: list[int]) -> None:
    """Adds (new and again), removals, ``set_tags`` and ``note_tag`` of held and not held ids:
    ``share`` is the held ids tagged one of the tags over the held ids tagged, None below half."""
    idx = VectorIndex(8)
    model: dict[int, int | None] = {}
    for op in ops:
        if op[0] == "add":
            idx.add([_mid(i) for i in op[1]], np.stack([_vec(i) for i in op[1]]))
            for i in op[1]:
                model.setdefault(i, None)  # add again keeps the tag
        elif op[0] == "remove":
            idx.remove(_mid(op[1]))
            model.pop(op[1], None)
        elif op[0] == "tag":
            idx.set_tags([_mid(op[1])], [op[2]])
            if op[1] in model:
                model[op[1]] = op[2]
        else:
            idx.note_tag(_mid(op[1]), op[2])
            if op[1] in model:
                model[op[1]] = op[2]
        for tags in (set(asked), {0}, set(range(5))):
            assert idx.share(tags) == _expected(model, tags), (op, tags)


def test_share_edges(tmp_path: Path) -> None:
    idx = VectorIndex(8)
    assert idx.share([]) is None and idx.share([1]) is None  # nothing held
    idx.add([_mid(i) for i in range(4)], np.stack([_vec(i) for i in range(4)]))
    idx.set_tags([_mid(0), _mid(1)], [1, 2])  # exactly half: known
    assert idx.share([1]) == 0.5 and idx.share([1, 1]) == 0.5 and idx.share(()) == 0.0
    assert idx.share([1, 2, 3]) == 1.0 and idx.share([254]) == 0.0
    idx.remove(_mid(0))
    idx.remove(_mid(1))  # no tagged id left: 0 of 2 known
    assert idx.share([1]) is None
    idx.add([_mid(0)], _vec(0)[None, :])  # back under a new label, untagged
    assert idx.tags([_mid(0)]) == [None] and idx.share([1]) is None
    idx.set_tags([_mid(0), _mid(2)], [1, 1])
    assert idx.share([1]) == 1.0
    idx.save(tmp_path, model_id="m", watermark=0)
    loaded, _ = VectorIndex.load(tmp_path, model_id="m", dim=8)
    assert loaded.share([1]) is None  # tags are not saved
    loaded.set_tags([_mid(0)], [1])
    assert loaded.share([1]) is None  # 1 of 3
    loaded.set_tags([_mid(2)], [3])
    assert loaded.share([1]) == 0.5
    for m in (_mid(0), _mid(2), _mid(3)):
        loaded.remove(m)
    assert len(loaded) == 0 and loaded.share([1]) is None


def test_share_of_the_untagged_marker_is_not_a_tag() -> None:
    """255 (``UNTAGGED``) and tags out of range are no tag: they count for nothing."""
    idx = VectorIndex(8)
    idx.add([_mid(i) for i in range(3)], np.stack([_vec(i) for i in range(3)]))
    idx.set_tags([_mid(0), _mid(1)], [1, 1])
    assert idx.share([UNTAGGED]) == 0.0
    assert idx.share([1, UNTAGGED, 256, -1]) == 1.0
