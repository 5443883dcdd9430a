"""Posting segments (``specs/lexical.md`` §4b, format 10): small commits store their posting
changes as one ``lex/s/`` key; readers combine them with the blocks; folding gives the index a
store written from scratch holds."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortex import Belief, Cortex, MemoryId, NewMemory, Stance
from cortex.errors import IntegrityError
from cortex.index import lexical, segments
from cortex.index.lexical import STATS_KEY
from cortex.storage.keys import LEX_DOC, LEX_SEGMENT, lex_segment_key
from tests import workers
from tests.test_crash import Child

WORDS = ["tea", "garden", "rust", "chess", "lisbon", "river", "tea garden", "plan"]
QUERIES = ["tea", "garden plan", "rust chess river", "lisbon", "tea garden lisbon plan"]


def _belief(words: list[str]) -> Belief:
    return Belief(statement=" ".join(words), stance=Stance.SUSPECT)


def _segments(cx: Cortex) -> int:
    with cx._kv.read() as txn:
        return len(list(txn.keys(LEX_SEGMENT)))


def _lex(cx: Cortex) -> dict[str, Any]:
    """The index by memory id (its document numbers follow the order of the writes)."""
    with cx._kv.read() as txn:
        return lexical.logical(txn)


def _raw_lex(cx: Cortex) -> dict[bytes, bytes]:
    with cx._kv.read() as txn:
        out = dict(txn.scan(b"lex/"))
        out[STATS_KEY] = txn.get(STATS_KEY) or b""
    return out


def _rankings(cx: Cortex) -> list[list[tuple[MemoryId, float]]]:
    return [cx._lexical_search(q, 50) for q in QUERIES]


def _same(a: list[list[tuple[MemoryId, float]]], b: list[list[tuple[MemoryId, float]]]) -> None:
    assert [[m for m, _ in r] for r in a] == [[m for m, _ in r] for r in b]
    for ra, rb in zip(a, b, strict=True):
        for (_, sa), (_, sb) in zip(ra, rb, strict=True):
            assert sa == pytest.approx(sb, rel=1e-12)


def _needs_c() -> None:
    """A comparison with the C accelerator: skipped on the pure-Python run that switches it off
    (``CORTEX_NO_SPEEDUPS=1``, as ``tests/test_speedups.py`` is), failed where it is not built."""
    if segments._sp is None:
        if os.environ.get("CORTEX_NO_SPEEDUPS"):
            pytest.skip("CORTEX_NO_SPEEDUPS=1: the C accelerator is switched off")
        pytest.fail("the C accelerator is not built")


_OP = st.one_of(
    st.tuples(st.just("write"), st.lists(st.sampled_from(WORDS), min_size=1, max_size=4)),
    st.tuples(st.just("write_many"), st.integers(1, 4)),
    st.tuples(st.just("update"), st.integers(0, 50), st.lists(st.sampled_from(WORDS), max_size=3)),
    st.tuples(st.just("tombstone"), st.integers(0, 50)),
    st.tuples(st.just("purge"), st.integers(0, 50)),
    st.tuples(st.just("merge")),
)


@pytest.mark.parametrize(
    "limits", [(lexical.SEGMENT_MAX, lexical.SEGMENT_POSTINGS), (3, 40)], ids=["default", "tight"]
)
@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(_OP, min_size=1, max_size=14))
def test_the_combined_index_is_a_fresh_one_of_the_live_set(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    limits: tuple[int, int],
    ops: list[Any],
) -> None:
    """After any mix of write, write_many, update, tombstone, purge and merge: ``verify``
    (which compares the combined index with the live memories both ways) passes; the rankings
    are the same with the segments pending as folded; and the folded index is byte for byte
    the one a rebuild from the live memories writes."""
    monkeypatch.setattr(lexical, "SEGMENT_MAX", limits[0])
    monkeypatch.setattr(lexical, "SEGMENT_POSTINGS", limits[1])
    root = tmp_path_factory.mktemp("seg")
    with Cortex.open(root / "s", actor="t") as cx:
        live: list[MemoryId] = []
        for op in ops:
            if op[0] == "write":
                live.append(cx.write(_belief(op[1])).id)
            elif op[0] == "write_many":
                items = [NewMemory(data=_belief([WORDS[i], f"n{i}"])) for i in range(op[1])]
                live += [r.id for r in cx.write_many(items)]
            elif op[0] == "merge":
                cx.merge_lexical()
                assert _segments(cx) == 0
            elif live:
                target = live[op[1] % len(live)]
                if op[0] == "update":
                    cx.update(target, _belief([*op[2], "updated"]))
                else:
                    live.remove(target)
                    if op[0] == "tombstone":
                        cx.tombstone(target, "t")
                    else:
                        cx.purge(target, "p", scrub=False)
            assert _segments(cx) <= limits[0]
        report = cx.verify()
        assert report.ok, report.problems
        assert report.lexical_documents == len(live)
        pending = _rankings(cx)
        stats = cx.stats()["lexical"]
        cx.merge_lexical()
        assert _segments(cx) == 0 and cx.stats()["lexical"] == stats
        _same(pending, _rankings(cx))
        folded = _lex(cx)
        cx.reindex_lexical()
        assert _lex(cx) == folded
        assert cx.verify().ok


def test_a_single_write_puts_one_segment_and_no_block(tmp_path: Path) -> None:
    """What a small commit changes in the index: its LexDoc, one segment, the statistics."""
    with Cortex.open(tmp_path / "s", actor="t") as cx:
        cx.write_many([NewMemory(data=_belief([w, "seed"])) for w in WORDS])  # blocks
        cx.merge_lexical()
        before = _raw_lex(cx)
        uri = cx.write(_belief(["tea", "garden", "new"]))
        after = _raw_lex(cx)
        changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
        docno = len(WORDS).to_bytes(4, "big")  # the next number
        assert changed == {  # format 21: the LexDoc by the memory's row, its number
            LEX_DOC + docno,
            LEX_SEGMENT + bytes(8),
            STATS_KEY,
        }
        assert [m for m, _ in cx._lexical_search("new", 5)] == [uri.id]


def test_a_large_commit_folds_every_segment(tmp_path: Path) -> None:
    with Cortex.open(tmp_path / "s", actor="t") as cx:
        for w in WORDS:
            cx.write(_belief([w, "single"]))
        assert _segments(cx) == len(WORDS)
        n = lexical.SEGMENT_POSTINGS // 10  # n memories x ~12 terms: more than SEGMENT_POSTINGS
        cx.write_many([NewMemory(data=_belief([f"bulk{i}", *WORDS])) for i in range(n)])
        assert _segments(cx) == 0
        assert cx.verify().ok


def test_segments_are_folded_when_too_many(tmp_path: Path) -> None:
    with Cortex.open(tmp_path / "s", actor="t") as cx:
        for i in range(lexical.SEGMENT_MAX):
            cx.write(_belief([f"w{i}"]))
        assert _segments(cx) == lexical.SEGMENT_MAX
        cx.write(_belief(["one", "more"]))  # would leave SEGMENT_MAX + 1: folds them all
        assert _segments(cx) == 0 and cx.verify().ok


def test_exact_duplicates_are_found_in_segments(tmp_path: Path) -> None:
    """``dedupe`` finds an exact duplicate whose postings wait in a segment (``same_terms``)."""
    with Cortex.open(tmp_path / "s", actor="t") as cx:
        first = cx.write(_belief(["tea", "garden", "plan"]))
        assert _segments(cx) == 1
        again = cx.write(_belief(["tea", "garden", "plan"]), dedupe=True)
        assert again.id == first.id and again.outcome == "confirmed"
        cx.tombstone(first.id, "t")
        third = cx.write(_belief(["tea", "garden", "plan"]), dedupe=True)
        assert third.id != first.id and third.outcome == "created"


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_a_kill_inside_a_folding_commit_loses_nothing_acknowledged(tmp_path: Path) -> None:
    """SIGKILL while a commit folds the segments (after the blocks are rewritten, before the
    commit): the store verifies, every acknowledged write is there and found, the segments are
    as before, and the next commit folds them."""
    path = tmp_path / "s"
    n = lexical.SEGMENT_MAX
    with Child(workers.command("merge_crasher", path, n)) as child:
        child.wait_for("merging")
        reports = child.kill()
    assert child.proc.returncode == -signal.SIGKILL
    wrote = [r for r in reports if r["op"] == "wrote"]
    assert len(wrote) == n and not any(r["op"] == "unexpected" for r in reports)
    with Cortex.open(path, actor="checker", as_owner=True) as cx:
        assert cx.verify().ok
        assert _segments(cx) == n  # the folding commit never happened
        for r in wrote:
            hits = [m for m, _ in cx._lexical_search(f"word{r['i']}", 3)]
            assert hits == [cx.resolve(r["uri"]).head.id]
        assert cx._lexical_search(f"word{n}", 3) == []
        cx.write(_belief(["after", "the", "kill"]))
        assert _segments(cx) == 0 and cx.verify().ok
        assert len(cx._lexical_search("tea garden", 100)) == n


_TAILS = st.tuples(st.integers(1, 5), st.integers(0, 5)).map(
    lambda t: (t[0]).to_bytes(4, "big") + (t[0] + t[1]).to_bytes(4, "big")
)
_ENTRY = st.one_of(
    st.tuples(st.sampled_from([segments.ADD, segments.SET]), _TAILS),
    st.tuples(st.just(segments.DEL), st.none()),
)
_TERM = st.text(
    st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), min_size=1, max_size=6
)
_ID = st.binary(min_size=4, max_size=4)
_T = (1).to_bytes(4, "big") * 2


def _groups_of(entry: Any) -> Any:
    """Segments' groups: term -> docno4 -> ``entry``."""
    return st.dictionaries(
        _TERM, st.dictionaries(_ID, entry, min_size=1, max_size=4), min_size=1, max_size=5
    )


@settings(max_examples=100)
@given(groups=_groups_of(_ENTRY))
def test_a_writer_keeps_what_decoding_its_segment_gives(groups: Any) -> None:
    """``encode_groups`` hands the writer the groups ``decode`` reads back (``remember``)."""
    payload, decoded = segments.encode_groups(groups)
    assert payload == segments.encode(groups)
    assert decoded == segments.decode(payload)


@settings(max_examples=100)
@given(fresh=_groups_of(_TAILS))
def test_new_postings_encode_as_the_general_encoder_does(fresh: Any) -> None:
    """``encode_fresh`` (a write of new memories) gives ``encode_groups``'s bytes and groups."""
    records = {t: b"".join(raw + tail for raw, tail in ps.items()) for t, ps in fresh.items()}
    general = {
        t: {raw: (segments.ADD, tail) for raw, tail in ps.items()} for t, ps in fresh.items()
    }
    assert segments.encode_fresh(records) == segments.encode_groups(general)


@pytest.mark.parametrize("accelerated", [False, True])
def test_new_postings_that_are_not_canonical_are_refused(
    monkeypatch: pytest.MonkeyPatch, accelerated: bool
) -> None:
    if accelerated:
        _needs_c()
    monkeypatch.setattr(segments, "_USE_SPEEDUPS", accelerated)
    raw, tail = bytes(4), (2).to_bytes(4, "big") + (1).to_bytes(4, "big")  # tf > dl
    ok = (1).to_bytes(4, "big") * 2
    for bad in (
        {"tea": raw + tail},
        {"tea": raw + ok + raw + ok},  # a docno twice
        {"tea": raw + ok[:4]},  # a cut record
        {"tea": b""},  # no record
        {"": raw + ok},  # no term
        {"t\x00a": raw + ok},  # a NUL in the term
        {"x" * 257: raw + ok},  # a term of 257 bytes
        {"\ud800": raw + ok},  # not UTF-8
        {},  # nothing at all
    ):
        with pytest.raises(ValueError):
            segments.encode_fresh(bad)


_BAD_RECORDS = st.one_of(
    _TAILS.map(lambda t: bytes(4) + t),
    st.binary(max_size=60),
    st.tuples(st.integers(0, 3), st.integers(0, 3)).map(
        lambda t: bytes(4) + t[0].to_bytes(4, "big") + t[1].to_bytes(4, "big")
    ),
)


@settings(max_examples=200)
@given(
    fresh=_groups_of(_TAILS),
    odd=st.dictionaries(
        st.one_of(_TERM, st.sampled_from(["", "a\x00", "y" * 257, "\udfff"])),
        _BAD_RECORDS,
        max_size=2,
    ),
    as_bytearray=st.booleans(),
)
def test_segment_fresh_is_encode_fresh(fresh: Any, odd: Any, as_bytearray: bool) -> None:
    """The C ``segment_fresh`` gives the Python definition's payload and groups, or None where
    that raises; it takes every input the definition accepts (it is the path writes use)."""
    _needs_c()
    records: dict[str, Any] = {
        t: b"".join(raw + tail for raw, tail in sorted(ps.items(), reverse=True))
        for t, ps in fresh.items()
    }
    records.update(odd)
    if as_bytearray:
        records = {t: bytearray(r) for t, r in records.items()}
    segments._USE_SPEEDUPS = False
    try:
        want = segments.encode_fresh(records)
    except ValueError:
        want = None
    finally:
        segments._USE_SPEEDUPS = True
    assert segments._sp.segment_fresh(records) == want


def _decoded_by_definition(payload: Any) -> Any:
    """``decode``'s Python definition: the groups, or None where it refuses the payload."""
    saved, segments._HAS_DECODE = segments._HAS_DECODE, False
    try:
        return segments.decode(payload)
    except segments.SegmentError:
        return None
    finally:
        segments._HAS_DECODE = saved


@pytest.mark.parametrize("which", ["cases", "refused"])
def test_segment_decode_agrees_with_the_definition_on_the_vectors(which: str) -> None:
    """The C ``segment_decode`` reads every golden segment as the definition does, and refuses
    (None) every payload the vectors list as refused."""
    _needs_c()
    import json

    doc = json.loads((Path(__file__).parent.parent / "specs/vectors/segments.json").read_text())
    for case in doc[which]:
        payload = bytes.fromhex(case["value"])[:-4]  # the checksum off: unseal's part
        want = _decoded_by_definition(payload)
        assert (want is None) == (which == "refused"), case
        assert segments._sp.segment_decode(payload) == want, case


@settings(max_examples=300)
@given(
    groups=_groups_of(_ENTRY),
    flips=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=3),
    cut=st.one_of(st.none(), st.integers(0, 1 << 16)),
    extra=st.binary(max_size=14),
)
def test_segment_decode_is_decode(groups: Any, flips: Any, cut: Any, extra: bytes) -> None:
    """On canonical payloads and on payloads with bytes changed, cut or added, the C
    ``segment_decode`` gives the definition's groups, or None exactly where it refuses."""
    _needs_c()
    payload = bytearray(segments.encode(groups))
    for at, byte in flips:
        payload[at % len(payload)] = byte
    if cut is not None:
        del payload[cut % (len(payload) + 1) :]
    data = bytes(payload) + extra
    assert segments._sp.segment_decode(data) == _decoded_by_definition(data)


def test_segment_decode_leaves_other_inputs_to_the_definition() -> None:
    """Anything but ``bytes`` gets None from C (the definition then reads it or says why)."""
    _needs_c()
    payload = segments.encode({"tea": {bytes(4): (segments.ADD, _T)}})
    assert segments._sp.segment_decode(payload) == [("tea", [(segments.ADD, bytes(4), _T)])]
    for other in (bytearray(payload), memoryview(payload), None, 7):
        assert segments._sp.segment_decode(other) is None
    assert segments.decode(bytearray(payload)) == segments.decode(payload)
    # a count of entries past the payload's end is refused before anything is allocated
    huge = b"\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff" + bytes(5)
    assert segments._sp.segment_decode(huge) is None
    with pytest.raises(segments.SegmentError):
        segments.decode(huge)


def _overlay_view(ov: segments.Overlay, terms: list[str]) -> Any:
    """Everything an overlay answers, for ``terms`` and as a whole (or the error it raises)."""
    out: list[Any] = [list(ov.keys), ov.postings, ov.next_key]
    for t in terms:
        try:
            out.append((ov.term(t), ov.delta(t), ov.items(t), t in ov))
        except IntegrityError as exc:
            out.append(str(exc))
    try:
        out.append((ov.state, ov.df_delta))
    except IntegrityError as exc:
        out.append(str(exc))
    return out


@settings(max_examples=100)
@given(
    stack=st.lists(_groups_of(_ENTRY), min_size=1, max_size=5),
    asked=st.lists(_TERM, max_size=4),
    probe=st.lists(_TERM, max_size=4),
)
def test_an_extended_overlay_is_the_overlay_of_its_segments(
    stack: list[Any], asked: list[str], probe: list[str]
) -> None:
    """``Overlay.extended`` (what a writer keeps for the next write) answers as an overlay
    built from scratch of the same segments, whatever the first had combined already."""
    segs = [
        (lex_segment_key(i), segments.Segment(segments.encode_groups(g)[1]))
        for i, g in enumerate(stack)
    ]
    before = segments.Overlay(segs[:-1])
    _overlay_view(before, asked)  # combine some terms first (and maybe fail on some)
    got = before.extended(*segs[-1])
    terms = [*asked, *probe, *(t for g in stack for t in g)]
    assert _overlay_view(got, terms) == _overlay_view(segments.Overlay(segs), terms)


def test_a_write_hands_the_next_its_overlay(tmp_path: Path) -> None:
    """After a segment write, the next transaction's overlay is the one the writer kept (no
    rebuild); a write that did not commit leaves nothing the next one would take."""
    with Cortex.open(tmp_path / "s", actor="t") as cx:
        for i in range(3):
            cx.write(_belief(["tea", f"w{i}"]))
        with cx._kv.read() as txn:
            kept = segments.overlay(txn)
        assert len(kept.keys) == 3
        cx.write(_belief(["tea", "w3"]))
        kept = segments._LAST[0][1]
        with cx._kv.read() as txn:
            assert segments.overlay(txn) is kept and len(kept.keys) == 4

        def fail(txn: Any) -> None:
            ix = lexical.Indexer(txn)
            ix.add(ix.take_row(), 1, ["never"])
            ix.flush()
            raise RuntimeError("abort")

        with pytest.raises(RuntimeError):
            cx._kv.write(fail)
        assert len(segments._LAST[0][1].keys) == 5  # what the aborted write would have left
        with cx._kv.read() as txn:
            ov = segments.overlay(txn)
        assert ov is not kept and len(ov.keys) == 4
        assert [m for m, _ in cx._lexical_search("never", 3)] == []
        assert len(cx._lexical_search("tea", 10)) == 4


def test_the_empty_overlay_remembers_nothing() -> None:
    """The overlay of every snapshot without segments is one shared object: asking it about
    terms (a search of a folded index, a write's counts) leaves nothing behind in it, and an
    overlay extended from it starts with nothing combined."""
    empty = segments.overlay_empty()
    for i in range(50):
        assert empty.term(f"t{i}") is None and empty.delta(f"t{i}") == 0
        assert f"t{i}" not in empty and empty.items(f"t{i}") == []
    assert not empty._by_term and not empty._states and not empty._sorted
    seg = segments.Segment(segments.encode_groups({"t1": {bytes(4): (segments.ADD, _T)}})[1])
    got = empty.extended(lex_segment_key(0), seg)
    assert got.delta("t1") == 1 and got.delta("t2") == 0 and not empty._by_term


def _combined(segs: list[tuple[bytes, segments.Segment]]) -> Any:
    """Each term combined on its own (``Overlay.term``) by a fresh overlay, or the error."""
    terms = list(dict.fromkeys(t for _, s in segs for t in s))
    try:
        ov = segments.Overlay(segs)
        return {t: (ov.term(t), ov.delta(t)) for t in terms}
    except IntegrityError:
        return IntegrityError


@settings(max_examples=200)
@given(stack=st.lists(_groups_of(_ENTRY), min_size=1, max_size=5))
def test_every_term_combined_at_once_is_each_combined_alone(stack: list[Any]) -> None:
    """``Overlay.state`` (one pass over the segments) and ``Overlay.folded`` (what a fold
    takes) say what ``term`` and ``delta`` say of each term, or raise where one of them does."""
    segs = [
        (lex_segment_key(i), segments.Segment(segments.encode_groups(g)[1]))
        for i, g in enumerate(stack)
    ]
    want = _combined(segs)
    try:
        ov = segments.Overlay(segs)
        got = {t: (st_, ov.df_delta[t]) for t, st_ in ov.state.items()}
    except IntegrityError:
        got = IntegrityError
    assert got == want
    try:
        folded = segments.Overlay(segs).folded()
    except IntegrityError:
        assert want is IntegrityError
        return
    assert want is not IntegrityError
    assert {
        t: (
            {raw: (tail, in_main is not None and raw in in_main) for raw, tail in final.items()},
            d,
        )
        for t, (final, d, in_main) in folded.items()
    } == want


@settings(max_examples=200)
@given(stack=st.lists(_groups_of(_ENTRY), min_size=1, max_size=5))
def test_segments_folded_is_overlay_folded(stack: list[Any]) -> None:
    """The C ``segments_folded`` gives what the Python ``Overlay.folded`` gives, or None where
    that raises (a fold then runs the Python definition, which names the fault)."""
    _needs_c()
    segs = [
        (lex_segment_key(i), segments.Segment(segments.encode_groups(g)[1]))
        for i, g in enumerate(stack)
    ]
    fast = segments._sp.segments_folded([s for _, s in segs])
    with pytest.MonkeyPatch.context() as m:
        m.setattr(segments, "_USE_SPEEDUPS", False)
        try:
            want = segments.Overlay(segs).folded()
        except IntegrityError:
            want = None
    assert fast == want
    if want is not None:
        with_c = segments.Overlay(segs).folded()
        assert with_c == want


def _ascending(stack: list[Any]) -> list[Any]:
    """``stack`` with each segment's docnos renumbered past the earlier segments' (their order
    in each group kept): a run of writes of new memories."""
    out = []
    for i, groups in enumerate(stack):
        out.append(
            {
                t: {(i * 8 + k).to_bytes(4, "big"): e for k, (_, e) in enumerate(sorted(g.items()))}
                for t, g in groups.items()
            }
        )
    return out


_ADD = st.tuples(st.just(segments.ADD), _TAILS)


@settings(max_examples=200)
@given(
    stack=st.lists(_groups_of(st.one_of(_ENTRY, _ADD, _ADD)), min_size=1, max_size=5),
    ascending=st.booleans(),
)
def test_overlay_added_is_overlay_folded_of_additions(stack: list[Any], ascending: bool) -> None:
    """``Overlay.added`` (a fold of segments of new memories' postings) gives each term's
    records in docno order and its count, as ``folded`` combines them, or None: for a SET, a
    DEL, or a docno not after the term's earlier ones. The C ``segments_added`` gives the
    same as the Python definition."""
    if ascending:
        stack = _ascending(stack)
    segs = [
        (lex_segment_key(i), segments.Segment(segments.encode_groups(g)[1]))
        for i, g in enumerate(stack)
    ]
    with pytest.MonkeyPatch.context() as m:
        m.setattr(segments, "_USE_SPEEDUPS", False)
        want = segments.Overlay(segs).added()
    if segments._sp is not None and segments._HAS_ADDED:
        assert segments._sp.segments_added([s for _, s in segs]) == want
        assert segments.Overlay(segs).added() == want
    every = [(t, k) for _, s in segs for t, es in s.items() for k, _, _ in es]
    if all(k == segments.ADD for _, k in every) and ascending:
        assert want is not None
    if want is None:
        return
    records, counts = want
    folded = segments.Overlay(segs).folded()
    assert set(records) == set(folded) == set(counts)
    for t, (final, d, in_main) in folded.items():
        assert in_main is None and d == counts[t] == len(final)
        assert bytes(records[t]) == b"".join(raw + tail for raw, tail in sorted(final.items()))  # type: ignore[operator]


def test_a_fold_of_additions_writes_what_the_general_fold_writes(tmp_path: Path) -> None:
    """A fold whose segments hold only new memories' postings takes them as records
    (``Overlay.added``) instead of combining them entry by entry: the index's bytes are those
    the general fold writes, across folds after updates and removals too."""
    stores = []
    for general in (False, True):
        with pytest.MonkeyPatch.context() as m:
            if general:
                m.setattr(segments.Overlay, "added", lambda self: None)
            cx = Cortex.open(tmp_path / f"s{general}", actor="t")
            ids = [MemoryId((1000 + i).to_bytes(16, "big")) for i in range(150)]  # both alike
            for i, mid in enumerate(ids):
                cx.write(
                    _belief([WORDS[(i * 7 + j) % len(WORDS)] for j in range(1 + i % 4)]), id=mid
                )
                if i in (40, 100):
                    cx.update(ids[i // 2], _belief(["tea", WORDS[i % len(WORDS)]]))
                if i in (41, 101):
                    cx.tombstone(ids[i // 3], "t")
            stores.append(cx)
    try:
        assert _raw_lex(stores[0]) == _raw_lex(stores[1])
        assert all(cx.verify().ok for cx in stores)
        _same(_rankings(stores[0]), _rankings(stores[1]))
    finally:
        for cx in stores:
            cx.close()


@settings(max_examples=100)
@given(stack=st.lists(_groups_of(_ENTRY), min_size=1, max_size=6), probe=st.lists(_TERM))
def test_the_counts_a_writer_keeps_are_the_combined_ones(
    stack: list[Any], probe: list[str]
) -> None:
    """An overlay extended write by write with each segment's counts (``remember``'s ``dfs``)
    answers ``df_change`` as ``delta`` does, wherever the segments do not contradict."""
    kind_df = {segments.ADD: 1, segments.SET: 0, segments.DEL: -1}
    ov = segments.overlay_empty()
    segs = []
    for i, groups in enumerate(stack):
        segs.append((lex_segment_key(i), segments.Segment(segments.encode_groups(groups)[1])))
        counts = {t: sum(kind_df[k] for k, _ in e.values()) for t, e in groups.items()}
        ov = ov.extended(*segs[-1], counts)
    assert ov.df_changes() is not None
    fresh = segments.Overlay(segs)
    assert fresh.df_changes() is None
    for t in [*probe, *(t for g in stack for t in g)]:
        try:
            want = fresh.delta(t)
        except IntegrityError:
            continue
        assert ov.df_change(t) == want == fresh.df_change(t)


def test_the_counts_a_write_keeps_are_its_segments_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The document frequency changes a write hands ``remember`` (``_write_segment``'s
    ``delta``, which later writes take instead of combining) are its segment's ADDs less DELs,
    for writes, updates, tombstones and purges, new terms and old; and the overlay the next
    write takes answers ``df_change`` as the stored segments combined do."""
    kind_df = {segments.ADD: 1, segments.SET: 0, segments.DEL: -1}
    seen: list[int] = []
    remember = segments.remember

    def checked(key: bytes, value: bytes, groups: Any, on: Any, dfs: Any = None) -> None:
        want = {t: sum(kind_df[k] for k, _, _ in e) for t, e in groups}
        assert dfs is not None and {t: dfs.get(t, 0) for t in want} == want
        assert not {t: d for t, d in dfs.items() if t not in want and d}
        seen.append(len(want))
        remember(key, value, groups, on, dfs)

    monkeypatch.setattr(segments, "remember", checked)
    monkeypatch.setattr(lexical, "SEGMENT_MAX", 6)
    with Cortex.open(tmp_path / "s", actor="t") as cx:
        live: list[MemoryId] = []
        for i in range(40):
            words = [WORDS[(i * 3 + j) % len(WORDS)] for j in range(1 + i % 3)]
            if i % 5 == 3 and live:
                cx.update(live[i % len(live)], _belief([*words, f"u{i}"]))
            elif i % 7 == 4 and live:
                cx.tombstone(live.pop(i % len(live)), "t")
            elif i % 11 == 6 and live:
                cx.purge(live.pop(i % len(live)), "p", scrub=False)
            elif i % 6 == 5:
                cx.write_many([NewMemory(data=_belief([w, f"n{i}"])) for w in words])
            else:
                live.append(cx.write(_belief([*words, f"w{i}"])).id)
            last = segments._LAST[0] if segments._LAST else None
            with cx._kv.read() as txn:
                pairs = tuple(txn.scan(LEX_SEGMENT))
            if last is not None and last[0] == pairs and last[1].df_changes() is not None:
                stored = segments.Overlay(
                    [(k, segments.Segment(segments.decode_value(k, v))) for k, v in pairs]
                )
                for term in {t for _, s in stored._segs for t in s}:
                    assert last[1].df_change(term) == stored.delta(term), (i, term)
        assert cx.verify().ok
    assert len(seen) > 20
