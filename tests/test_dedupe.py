"""Dedupe on write (issue 5 item 5, issue 14 item 2): an exact content-hash match, or cosine >=
0.92 against a live memory of the same type *that states the same claim* (``cortex.rules.claims``),
returns the existing URI and records a confirmation; a near text that differs in negation,
numbers, times, entities, polarity or detail is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cortex import (
    Belief,
    Cortex,
    Data,
    Forms,
    JournalKind,
    Query,
    Uri,
    content_hash,
    encode_data,
    render,
)
from cortex.agent.api import DEDUPE_COSINE
from cortex.rules.claims import same_claim

from .vsupport import E, fact, open_store

BASE = "the user drinks green tea every morning before the long walk to the office in town"
# the same claim in other words (articles, order of the time phrase): confirmed
NEAR = "the user drinks the green tea every morning before a long walk to the office in town"
# near in the embedding but another claim: written
EDGE = BASE.replace("every morning", "on sundays")  # another time, cosine just above 0.92
DETAIL = BASE + " with a friend"  # says more
FAR = BASE.replace("green tea every morning", "black coffee on sundays")


def _cos(a: Data, b: Data) -> float:
    va, vb = E.embed([render(a).medium, render(b).medium])
    return float(va @ vb)


def test_the_texts_are_where_the_tests_need_them() -> None:
    assert DEDUPE_COSINE == 0.92
    assert _cos(fact(BASE), fact(NEAR)) >= 0.94
    assert same_claim(fact(BASE), fact(NEAR)).same
    assert DEDUPE_COSINE <= _cos(fact(BASE), fact(EDGE)) < 0.93
    assert same_claim(fact(BASE), fact(EDGE)).reason == "date_time"
    assert _cos(fact(BASE), fact(DETAIL)) >= 0.94
    assert same_claim(fact(BASE), fact(DETAIL)).reason == "detail"
    assert 0.85 <= _cos(fact(BASE), fact(FAR)) < DEDUPE_COSINE


def _count(cx: Cortex) -> int:
    return len(cx.find(Query(types=("Fact", "Belief"), limit=1000, include_tombstoned=True)))


def _confirms(cx: Cortex) -> list[Any]:
    return [e for e in cx.journal() if e.kind is JournalKind.CONFIRM]


def _assert_confirmed(cx: Cortex, got: Uri, existing: Uri, offered: Data, n: int = 1) -> None:
    assert got == existing
    entries = _confirms(cx)
    assert len(entries) == n
    last = entries[-1]
    assert (last.id, last.version, last.type) == (existing.id, existing.version, existing.type)
    assert last.hash == content_hash(offered.TYPE, encode_data(offered))
    st = cx.salience_state(existing)
    assert st.confirmations == n and st.last_used_at is not None


@pytest.mark.parametrize("embedder", [True, False])
def test_an_exact_duplicate_is_confirmed_not_written(tmp_path: Path, embedder: bool) -> None:
    kw: dict[str, Any] = {"embedder": E} if embedder else {}
    with open_store(tmp_path / "s", **kw) as cx:
        existing = cx.write(fact(BASE))
        cx.write(fact(FAR))
        before = _count(cx)
        journal_before = len(list(cx.journal()))
        got = cx.write(fact(BASE), dedupe=True)
        _assert_confirmed(cx, got, existing, fact(BASE))
        assert _count(cx) == before
        assert len(list(cx.journal())) == journal_before + 1  # the confirm entry only
        got = cx.write(fact(BASE), dedupe=True)
        _assert_confirmed(cx, got, existing, fact(BASE), n=2)
        assert cx.verify().ok


def test_a_near_duplicate_is_confirmed_not_written(tmp_path: Path) -> None:
    with open_store(tmp_path / "s", embedder=E) as cx:
        existing = cx.write(fact(BASE))
        before = _count(cx)
        got = cx.write(fact(NEAR), dedupe=True)
        _assert_confirmed(cx, got, existing, fact(NEAR))
        assert _count(cx) == before
        assert cx.resolve_latest(existing.id).data == fact(BASE)  # the old content stays
        assert cx.verify().ok


@pytest.mark.parametrize("text", [EDGE, DETAIL])
def test_a_near_text_with_another_claim_is_written(tmp_path: Path, text: str) -> None:
    with open_store(tmp_path / "s", embedder=E) as cx:
        existing = cx.write(fact(BASE))
        got = cx.write(fact(text), dedupe=True)  # cosine above the threshold, another claim
        assert got != existing and got.version == 1
        assert _count(cx) == 2 and _confirms(cx) == []
        assert cx.resolve(got).data == fact(text)
        assert cx.verify().ok


def test_below_the_threshold_writes_anew(tmp_path: Path) -> None:
    with open_store(tmp_path / "s", embedder=E) as cx:
        existing = cx.write(fact(BASE))
        got = cx.write(fact(FAR), dedupe=True)
        assert got != existing and got.version == 1
        assert _count(cx) == 2 and _confirms(cx) == []
        assert cx.salience_state(existing).confirmations == 0


def test_without_an_embedder_a_near_duplicate_is_written(tmp_path: Path) -> None:
    with open_store(tmp_path / "s") as cx:
        existing = cx.write(fact(BASE))
        got = cx.write(fact(NEAR), dedupe=True)
        assert got != existing and _count(cx) == 2 and _confirms(cx) == []


def test_another_type_is_not_a_duplicate(tmp_path: Path) -> None:
    with open_store(tmp_path / "s", embedder=E) as cx:
        # a Belief whose medium form (what is embedded) equals the Fact's: cosine 1
        medium = render(fact(BASE)).medium
        belief = cx.write(
            Belief(statement=BASE, subject="user", stance="believe"),
            forms=Forms(short=medium, medium=medium),
        )
        res = cx.find(Query(near_vector=E.embed([medium])[0], limit=1))
        assert res.uris == [belief] and res.hits[0].scores["vector"] == pytest.approx(1.0, abs=1e-6)
        got = cx.write(fact(BASE), dedupe=True)
        assert got != belief and got.type.type_name == "Fact"
        assert _confirms(cx) == []
        # and the Fact now is the duplicate of itself, not the Belief
        assert cx.write(fact(NEAR), dedupe=True) == got


@pytest.mark.parametrize("how", ["tombstone", "purge"])
def test_a_tombstoned_memory_is_not_a_duplicate(tmp_path: Path, how: str) -> None:
    with open_store(tmp_path / "s", embedder=E) as cx:
        old = cx.write(fact(BASE))
        getattr(cx, how)(old, "gone")
        got = cx.write(fact(BASE), dedupe=True)
        assert got.id != old.id and _confirms(cx) == []
        got2 = cx.write(fact(NEAR), dedupe=True)
        assert got2 == got  # the new live one is the duplicate now


def test_an_updated_memory_is_compared_by_its_current_version(tmp_path: Path) -> None:
    with open_store(tmp_path / "s", embedder=E) as cx:
        u = cx.write(fact("quantum lattice dynamics"))
        u2 = cx.update(u, fact(BASE))
        assert cx.write(fact(BASE), dedupe=True) == u2  # exact, returns the current URI
        assert cx.write(fact(NEAR), dedupe=True) == u2
        # the old version's content is no longer a duplicate (cosine to the current is low)
        assert _cos(fact("quantum lattice dynamics"), fact(BASE)) < DEDUPE_COSINE
        other = cx.write(fact("quantum lattice dynamics"), dedupe=True)
        assert other.id != u.id


def test_dedupe_per_call_overrides_the_store_default(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with open_store(path, embedder=E, dedupe=True) as cx:
        existing = cx.write(fact(BASE))
        assert cx.write(fact(BASE)) == existing  # the store default
        assert cx.write(fact(NEAR), dedupe=None) == existing
        dup = cx.write(fact(BASE), dedupe=False)
        assert dup != existing and _count(cx) == 2
        assert len(_confirms(cx)) == 2
    with open_store(path, embedder=E) as cx:  # default off
        third = cx.write(fact(BASE))
        assert third not in (existing, dup) and _count(cx) == 3
        assert cx.write(fact(BASE), dedupe=True) in (existing, dup, third)


def test_dedupe_sees_writes_of_another_process(tmp_path: Path) -> None:
    from cortex import MemoryId

    from .vsupport import run_child

    path = tmp_path / "s"
    with open_store(path, embedder=E) as cx:
        cx.write(fact(FAR))
        cx.find(Query(near="x", limit=1))  # the sidecar is loaded before the child writes
        [child] = run_child(path, [{"write": BASE}])
        got = cx.write(fact(NEAR), dedupe=True)
        assert got.id == MemoryId.parse(child)


def test_invalid_data_is_rejected_with_dedupe_too(tmp_path: Path) -> None:
    from cortex import ValidationError

    with open_store(tmp_path / "s", embedder=E) as cx:
        cx.write(fact(BASE))
        with pytest.raises(ValidationError):
            cx.write(fact(""), dedupe=True)
        with pytest.raises(ValidationError):
            cx.write(fact(BASE, confidence=7.0), dedupe=True)
        assert _confirms(cx) == []


@pytest.mark.parametrize("options", [{"importance": 99}, {"tags": ["", ""]}])
def test_invalid_options_are_rejected_with_dedupe_too(tmp_path: Path, options: Any) -> None:
    from cortex import ValidationError

    with open_store(tmp_path / "s", embedder=E) as cx:
        cx.write(fact(BASE))
        with pytest.raises(ValidationError):
            cx.write(fact(BASE), dedupe=True, **options)


def test_an_exact_duplicate_outranked_lexically_is_still_found(tmp_path: Path) -> None:
    target = fact("kiwi kiwi kiwi kiwi kiwi kiwi kiwi kiwi mango")
    with open_store(tmp_path / "s") as cx:
        existing = cx.write(target)
        for i in range(12):
            cx.write(fact("kiwi mango"), tags=[f"t{i}"])
        assert cx.write(target, dedupe=True) == existing


def test_dedupe_is_not_fooled_by_unit_scaling() -> None:
    """The threshold compares cosines of unit vectors (sanity of the test texts' arithmetic)."""
    va = E.embed([render(fact(BASE)).medium])[0]
    assert np.linalg.norm(va) == pytest.approx(1.0, abs=1e-6)


def test_a_view_write_is_not_deduplicated_against_what_the_reader_cannot_see(
    tmp_path: Path,
) -> None:
    from cortex import MemoryType, NotFoundError, Reader, Scope

    with open_store(tmp_path / "s", embedder=E, dedupe=True) as cx:
        secret = cx.write(fact(BASE), tags=["secret"])  # private to the owner
        eve = Reader(
            actor="eve",
            scopes=(
                Scope(
                    types=frozenset({MemoryType.FACT}),
                    tags=frozenset({"shared"}),
                    writable=True,
                ),
            ),
        )
        view = cx.view(eve)
        got = view.write(fact(NEAR), tags=["shared"])
        assert got.id != secret.id
        view.resolve(got)  # eve sees what she wrote
        with pytest.raises(NotFoundError):
            view.resolve(secret)


def test_an_expired_memory_is_not_a_duplicate(tmp_path: Path) -> None:
    from datetime import timedelta

    from .qsupport import Clock

    clock = Clock()
    with open_store(tmp_path / "s", embedder=E, clock=clock) as cx:
        old = cx.write(fact(BASE), expires_at=clock.now + timedelta(days=1))
        clock.advance(timedelta(days=2))
        assert cx.find(Query(types=("Fact",), limit=10)).uris == []
        got = cx.write(fact(BASE), dedupe=True)
        assert got != old
        assert cx.find(Query(types=("Fact",), limit=10)).uris == [got]


def test_a_confirmation_refreshes_recency(tmp_path: Path) -> None:
    from datetime import timedelta

    from .qsupport import Clock

    clock = Clock()
    with open_store(tmp_path / "s", embedder=E, clock=clock) as cx:
        u = cx.write(fact(BASE))
        clock.advance(timedelta(days=60))
        before = cx.find(Query(types=("Fact",), limit=1)).hits[0].salience
        assert cx.write(fact(NEAR), dedupe=True) == u
        assert cx.salience_state(u).last_used_at == clock.now
        after = cx.find(Query(types=("Fact",), limit=1)).hits[0].salience
        assert after > before


def test_a_near_duplicate_behind_ten_other_types_is_still_found(tmp_path: Path) -> None:
    medium = render(fact(NEAR)).medium
    with open_store(tmp_path / "s", embedder=E) as cx:
        existing = cx.write(fact(BASE))
        for i in range(10):  # Beliefs embedded exactly like the offered Fact: cosine 1
            cx.write(
                Belief(statement=f"belief {i}", stance="believe"),
                forms=Forms(short=medium, medium=medium),
            )
        assert _cos(fact(BASE), fact(NEAR)) >= DEDUPE_COSINE
        assert cx.write(fact(NEAR), dedupe=True) == existing


@pytest.mark.parametrize("duplicate", [True, False])
def test_without_an_embedder_dedupe_is_the_write_transaction_alone(
    tmp_path: Path, duplicate: bool
) -> None:
    """No cosine path to run first: the exact match is checked in the write's transaction only
    (no read transaction before it), so the write reads the clock once, like a plain write, and
    a confirmation carries that time."""
    from .qsupport import Clock

    class Stepping(Clock):
        reads = 0

        def __call__(self) -> Any:
            self.reads += 1
            return self.tick(1)

    clock = Stepping()
    with open_store(tmp_path / "s", clock=clock) as cx:
        existing = cx.write(fact(BASE))
        before = clock.reads
        got = cx.write(fact(BASE if duplicate else FAR), dedupe=True)
        assert clock.reads == before + 1
        if duplicate:
            _assert_confirmed(cx, got, existing, fact(BASE))
            assert _confirms(cx)[-1].at == clock.now
            assert cx.salience_state(existing).last_used_at == clock.now
        else:
            assert got.outcome == "created" and got != existing
            assert cx.resolve(got).version.created_at == clock.now
        assert cx.verify().ok
