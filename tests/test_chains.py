"""Temporal chains (issue 14 item 3, seeds 001 and 003; ``specs/claims.md`` §5-§8).

Written from the rules: a new Fact for the same subject and single-valued predicate (or the same
subject, predicate and object), or a Preference on the same topic, ends the older one's time as
the current truth; the later one wins unless its confidence is lower; equal time and confidence
is an open conflict. Writes say what happened.
"""

from __future__ import annotations

import multiprocessing as mp
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cortex import (
    Cortex,
    CortexError,
    EdgeType,
    Event,
    Fact,
    JournalKind,
    MemoryId,
    Polarity,
    Preference,
    Query,
    Reader,
    Scope,
    ValidationError,
    WriteResult,
    export_store,
    import_bundle,
)
from cortex.engine.heads import SUPERSEDED
from cortex.rules.chains import (
    SINGLE_VALUED,
    _key,
    claim_keys,
    lookup_key,
    norm_entity,
    norm_predicate,
    single_valued,
    winner,
)
from cortex.storage.keys import IDX_CLAIM, SALIENCE, meta_key
from cortex.storage.kv import LmdbKV, unseal

from .qsupport import Clock, dump_store, fixture_store

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cx(store_path: Any, clock: Clock) -> Any:
    """A store on each engine (LMDB, PostgreSQL): the chain rules hold alike on both."""
    with Cortex.open(store_path, actor="agent", clock=clock) as store:
        yield store


def home(city: str, who: str = "Sam", **kw: Any) -> Fact:
    return Fact(statement=f"{who} lives in {city}", subject=who, predicate="home_city", **kw)


def current(cx: Cortex, **kw: Any) -> set[str]:
    hits = cx.find(Query(types=("Fact", "Preference"), limit=50, **kw)).hits
    return {
        str(h.memory.data.statement if isinstance(h.memory.data, Fact) else h.memory.data.topic)
        for h in hits
    }  # type: ignore[union-attr]


# --- the pure rules -----------------------------------------------------------------------------


def test_normalisation() -> None:
    assert norm_entity("  @Sam ") == norm_entity("sam") == norm_entity("SAM.") == "sam"
    assert norm_entity("Sarah   Chen") == "sarah chen"
    assert norm_predicate("Home City") == norm_predicate("home-city") == "home_city"
    assert norm_predicate("not allergic to") == norm_predicate("allergic_to") == "allergic_to"
    assert norm_predicate("is_not_allergic_to") == "allergic_to"


def test_claim_keys_and_lookup() -> None:
    single = home("Berlin")
    assert claim_keys(single) == (b"fact\x1fsam\x1fhome_city",)
    assert lookup_key(single) == claim_keys(single)[0]
    many = Fact(statement="Sam likes tea", subject="Sam", predicate="likes", object="Tea")
    assert claim_keys(many) == (b"fact\x1fsam\x1flikes", b"fact\x1fsam\x1flikes\x1ftea")
    assert lookup_key(many) == b"fact\x1fsam\x1flikes\x1ftea"  # many-valued: with the object
    assert lookup_key(many, force=True) == b"fact\x1fsam\x1flikes"
    no_object = Fact(statement="Sam likes things", subject="Sam", predicate="likes")
    assert lookup_key(no_object) is None  # many-valued and no object: no competitor
    assert lookup_key(Fact(statement="x", subject="Sam", predicate="favorite_color")) is not None
    pref = Preference(topic=" Coffee ", polarity=Polarity.PREFER)
    assert claim_keys(pref) == (b"preference\x1fcoffee",)
    assert claim_keys(Event(kind="note", summary="x")) == ()


def _spec_single_valued() -> tuple[list[str], list[str]]:
    """The single-valued predicates and prefixes as ``specs/claims.md`` §5 lists them."""
    text = (Path(__file__).parent.parent / "specs" / "claims.md").read_text(encoding="utf-8")
    start = text.index("Single-valued predicates (after normalisation):")
    listed = text[start : text.index(", and any starting", start)]
    words = " ".join(re.findall(r"`([^`]*)`", listed)).split()
    end = text.index("\n- ", start)
    prefixes = re.findall(r"`([a-z]+_)`", text[text.index("any starting", start) : end])
    return words, prefixes


def test_the_single_valued_predicates_are_those_of_the_spec() -> None:
    words, prefixes = _spec_single_valued()
    assert len(words) == len(set(words)) == len(SINGLE_VALUED) and len(words) > 40
    assert prefixes == ["favorite_", "favourite_", "current_", "preferred_"]
    for p in words:  # each competes on subject and predicate: the object does not matter
        fact = Fact(statement="x", subject="Sam", predicate=p, object="one")
        assert single_valued(p), p
        assert lookup_key(fact) == _key("fact", "sam", p), p
        # spelled as a writer might: case, spaces or dashes for the underscores
        assert single_valued(norm_predicate(p.upper().replace("_", " "))), p
    for prefix in prefixes:
        assert single_valued(prefix + "colour") and single_valued(prefix + "x_y")
        assert not single_valued("x" + prefix + "colour")
    for p in ("likes", "knows", "allergic_to", "name_of", "favorite", "ages"):
        assert not single_valued(p), p
        assert lookup_key(Fact(statement="x", subject="Sam", predicate=p)) is None


def test_parts_that_normalise_to_nothing() -> None:
    """``claims.md`` §5: no subject, predicate or topic left: no key; no object left: absent."""
    for subject, predicate in (("@", "home_city"), ("Sam", "--"), (" ", "not"), ("...", "?")):
        assert claim_keys(Fact(statement="x", subject=subject, predicate=predicate)) == ()
    assert claim_keys(Preference(topic="!!", polarity=Polarity.PREFER)) == ()
    with_nothing = Fact(statement="x", subject="Sam", predicate="likes", object="?!")
    assert claim_keys(with_nothing) == (b"fact\x1fsam\x1flikes",)
    assert lookup_key(with_nothing) is None  # many-valued without an object
    pref = Preference(topic="tea", polarity=Polarity.PREFER, subject="@")
    assert claim_keys(pref) == (b"preference\x1ftea",)


def test_effective_time_and_confidence() -> None:
    """``claims.md`` §6: valid_from, else a Fact's observed_at, else when written; a Fact's own
    confidence, else the version's."""
    from cortex.rules.chains import effective_confidence, effective_time

    seen, valid, made = T0, T0 + timedelta(days=1), T0 + timedelta(days=2)
    observed = Fact(statement="x", subject="s", predicate="p", observed_at=seen, confidence=0.3)
    plain = Fact(statement="x", subject="s", predicate="p")
    assert effective_time(observed, valid, made) == valid
    assert effective_time(observed, None, made) == seen
    assert effective_time(plain, None, made) == made
    assert effective_time(Preference(topic="t", polarity=Polarity.PREFER), None, made) == made
    assert effective_confidence(observed, 0.9) == 0.3
    assert effective_confidence(plain, 0.9) == 0.9


def test_winner() -> None:
    assert winner(2, 1.0, 1, 1.0) == "new"  # later, as confident
    assert winner(1, 1.0, 2, 1.0) == "old"  # an earlier observation arrives late: history
    assert winner(2, 0.5, 1, 0.9) == "old"  # later but less confident: archived
    assert winner(1, 0.9, 2, 0.5) == "new"  # earlier but the later one is less confident
    assert winner(1, 0.9, 1, 0.5) == "new"  # same time: confidence
    assert winner(1, 0.5, 1, 0.9) == "old"
    assert winner(1, 0.7, 1, 0.7) == "tie"


# --- writes say what happened ------------------------------------------------------------------


def test_a_later_fact_supersedes_and_find_returns_the_current_one(cx: Cortex, clock: Clock) -> None:
    berlin = cx.write(home("Berlin"))
    assert isinstance(berlin, WriteResult) and berlin.outcome == "created"
    clock.advance(timedelta(days=30))
    lisbon = cx.write(home("Lisbon"))
    assert lisbon.outcome == "superseded" and lisbon.supersedes == (berlin.uri,)
    assert "supersedes" in lisbon.summary() and str(berlin) in lisbon.summary()
    assert current(cx) == {"Sam lives in Lisbon"}
    assert current(cx, include_superseded=True) == {"Sam lives in Berlin", "Sam lives in Lisbon"}
    # the edge and the journal record it
    (edge,) = cx.edges(lisbon, types=[EdgeType.SUPERSEDES])
    assert (edge.src, edge.dst) == (lisbon.id, berlin.id)
    kinds = [(e.kind, e.edge) for e in cx.journal()][-3:]
    assert kinds[-1] == (JournalKind.ADD_EDGE, EdgeType.SUPERSEDES)
    # about() and context() see the current truth only
    assert [h.memory.id for h in cx.about("Sam").hits] == [lisbon.id]
    assert [h.memory.id for h in cx.about("Sam", "home_city").hits] == [lisbon.id]
    # the superseded one is still resolvable, unchanged (its values preserved)
    assert cx.resolve(berlin).data == home("Berlin")
    assert cx.verify().ok


def test_as_of_reads_the_chain_as_it_stood(cx: Cortex, clock: Clock) -> None:
    cx.write(home("Zürich"))
    before_change = clock.now
    clock.advance(timedelta(days=40))
    cx.write(home("Basel"))
    assert current(cx) == {"Sam lives in Basel"}
    assert current(cx, as_of=before_change) == {"Sam lives in Zürich"}
    assert current(cx, as_of=clock.now) == {"Sam lives in Basel"}


def test_chain_lists_the_history_with_validity(cx: Cortex, clock: Clock) -> None:
    z = cx.write(home("Zürich"))
    t1 = clock.now
    clock.advance(timedelta(days=40))
    b = cx.write(home("Basel"))
    t2 = clock.now
    clock.advance(timedelta(days=40))
    g = cx.write(home("Genève"))
    links = cx.chain(z)
    assert [lk.memory.id for lk in links] == [g.id, b.id, z.id]
    assert links[0].current and links[0].until is None
    assert (links[1].since, links[1].until, links[1].superseded_by) == (t2, clock.now, g.id)
    assert (links[2].since, links[2].until) == (t1, t2)
    assert cx.chain(g) == links  # the same chain from any member
    assert [lk.memory.id for lk in cx.chain(b, as_of=t2)] == [b.id, z.id]


def test_less_confident_news_is_archived(cx: Cortex, clock: Clock) -> None:
    sure = cx.write(home("Berlin"), confidence=0.95)
    clock.advance(timedelta(days=1))
    rumour = cx.write(home("Lisbon"), confidence=0.4)
    assert rumour.outcome == "archived" and rumour.superseded_by == (sure.uri,)
    assert current(cx) == {"Sam lives in Berlin"}
    # the data's own confidence counts for a Fact
    clock.advance(timedelta(days=1))
    doubt = cx.write(home("Porto", confidence=0.2))
    assert doubt.outcome == "archived"
    # an archived write is out of the claim index as it is written (format 12: the index
    # holds only current memories, so a long chain's history is never scanned)
    from cortex.storage.keys import parse_claim_index_key

    with cx._kv.read() as txn:
        marks = {parse_claim_index_key(k)[1]: v for k, v in txn.scan(IDX_CLAIM)}
    assert rumour.id not in marks and doubt.id not in marks and marks[sure.id] == b""
    assert cx.verify().ok


def test_equal_time_and_confidence_is_an_open_conflict(cx: Cortex, clock: Clock) -> None:
    when = T0 + timedelta(days=3)
    a = cx.write(home("Berlin"), valid_from=when)
    b = cx.write(home("Lisbon"), valid_from=when)
    assert b.outcome == "conflict" and b.conflicts_with == (a.uri,)
    assert current(cx) == {"Sam lives in Berlin", "Sam lives in Lisbon"}  # both stay current
    (c,) = cx.conflicts()
    assert {c.a.id, c.b.id} == {a.id, b.id}
    cx.resolve_conflict(b, a, reason="Sam confirmed Lisbon")
    assert cx.conflicts() == [] and current(cx) == {"Sam lives in Lisbon"}
    last = list(cx.journal())[-1]
    assert last.kind is JournalKind.ADD_EDGE and last.reason == "conflict: Sam confirmed Lisbon"
    with pytest.raises(ValidationError):
        cx.resolve_conflict(a, a, reason="x")
    with pytest.raises(ValidationError):
        cx.resolve_conflict(a, b, reason=" ")


def test_a_batch_applies_the_rules_in_order(cx: Cortex) -> None:
    from cortex import NewMemory

    one, two = cx.write_many(
        [NewMemory(data=home("Berlin"), valid_from=T0), NewMemory(data=home("Lisbon"))]
    )
    assert (one.outcome, two.outcome) == ("created", "superseded")
    assert two.supersedes == (one.uri,)


def test_negation_competes_with_the_claim_it_negates(cx: Cortex, clock: Clock) -> None:
    yes = cx.write(
        Fact(
            statement="Sam is allergic to peanuts",
            subject="Sam",
            predicate="allergic_to",
            object="peanuts",
        )
    )
    other = cx.write(
        Fact(
            statement="Sam is allergic to shellfish",
            subject="Sam",
            predicate="allergic_to",
            object="shellfish",
        )
    )
    assert other.outcome == "created"  # many-valued: another allergy is not a contradiction
    clock.advance(timedelta(hours=1))
    no = cx.write(
        Fact(
            statement="Sam is not allergic to peanuts",
            subject="sam",
            predicate="not_allergic_to",
            object="Peanuts",
        )
    )
    assert no.outcome == "superseded" and no.supersedes == (yes.uri,)
    assert current(cx) == {"Sam is allergic to shellfish", "Sam is not allergic to peanuts"}


def test_preferences_on_one_topic_chain(cx: Cortex, clock: Clock) -> None:
    rest = cx.write(Preference(topic="API style: REST", polarity=Polarity.PREFER))
    clock.advance(timedelta(days=1))
    same_topic = cx.write(Preference(topic="api style: rest", polarity=Polarity.AVOID))
    assert same_topic.outcome == "superseded" and same_topic.supersedes == (rest.uri,)


def test_supersede_option(cx: Cortex, clock: Clock) -> None:
    tea = cx.write(
        Fact(statement="Sam drinks tea", subject="Sam", predicate="drinks", object="tea")
    )
    clock.advance(timedelta(hours=1))
    plain = cx.write(
        Fact(statement="Sam drinks coffee", subject="Sam", predicate="drinks", object="coffee")
    )
    assert plain.outcome == "created"  # many-valued predicate, another object
    clock.advance(timedelta(hours=1))
    forced = cx.write(
        Fact(statement="Sam drinks water", subject="Sam", predicate="drinks", object="water"),
        supersede=True,
    )
    assert forced.outcome == "superseded" and set(forced.supersedes) == {tea.uri, plain.uri}
    clock.advance(timedelta(hours=1))
    off = cx.write(home("Oslo"))
    skipped = cx.write(home("Rome"), supersede=False)
    assert off.outcome == skipped.outcome == "created"
    with pytest.raises(ValidationError, match="supersede"):
        cx.write(Event(kind="note", summary="x"), supersede=True)


def test_update_tombstone_and_revival(cx: Cortex, clock: Clock) -> None:
    berlin = cx.write(home("Berlin"))
    clock.advance(timedelta(days=1))
    lisbon = cx.write(home("Lisbon"))
    # tombstoning the current truth (it was a mistake) makes the one before current again
    cx.tombstone(lisbon, "wrong person")
    assert current(cx) == {"Sam lives in Berlin"}
    # an update that changes the subject leaves the chain and may meet another one
    clock.advance(timedelta(days=1))
    ada = cx.write(home("Rome", who="Ada"))
    clock.advance(timedelta(days=1))
    moved = cx.update(berlin, home("Paris", who="Ada"))
    assert moved.outcome == "new_version" and moved.supersedes == (ada.uri,)
    assert current(cx) == {"Ada lives in Paris"}
    assert cx.verify().ok


def test_competitors_the_writer_cannot_see_are_not_touched(cx: Cortex, clock: Clock) -> None:
    private = cx.write(home("Berlin"))  # private to the owner
    clock.advance(timedelta(days=1))
    helper = cx.view(
        Reader(actor="helper", scopes=(Scope(name="w", types=("Fact",), writable=True),))
    )
    w = helper.write(home("Lisbon"))
    assert w.outcome == "created" and w.supersedes == ()  # no leak, no change
    assert current(cx) == {"Sam lives in Berlin", "Sam lives in Lisbon"}
    assert cx.edges(private, direction="in") == []


def test_export_import_keeps_the_chain(cx: Cortex, clock: Clock, tmp_path: Path) -> None:
    cx.write(home("Berlin"))
    clock.advance(timedelta(days=1))
    cx.write(home("Lisbon"))
    export_store(cx, tmp_path / "b.jsonl")
    with Cortex.open(tmp_path / "copy", actor="agent", clock=clock) as other:
        import_bundle(other, tmp_path / "b.jsonl")
        assert current(other) == {"Sam lives in Lisbon"}
        assert other.verify().ok
        clock.advance(timedelta(days=1))
        # the claim index came with it: a later write joins the chain
        assert other.write(home("Porto")).outcome == "superseded"


def test_purge_removes_the_claim_index_entries(cx: Cortex) -> None:
    from cortex.storage.keys import IDX_CLAIM

    u = cx.write(home("Berlin"))
    with cx._kv.read() as txn:
        assert len(list(txn.keys(IDX_CLAIM))) == 1
    cx.purge(u, "asked to forget")
    with cx._kv.read() as txn:
        assert list(txn.keys(IDX_CLAIM)) == []
    assert cx.verify().ok


def test_verify_reports_a_missing_or_stale_claim_entry(cx: Cortex) -> None:
    from cortex.storage.keys import IDX_CLAIM

    cx.write(home("Berlin"))
    with cx._kv.read() as txn:
        (key,) = list(txn.keys(IDX_CLAIM))
    cx._kv.write(lambda txn: txn.delete(key))
    assert any("missing" in p.what for p in cx.verify().problems)
    cx._kv.write(lambda txn: txn.put(key, b""))
    # another key (its last byte flipped: never the key itself, whatever the byte)
    cx._kv.write(lambda txn: txn.put(key[:-1] + bytes((key[-1] ^ 0xFF,)), b""))
    assert any("stale" in p.what for p in cx.verify().problems)


# --- two processes, one truth --------------------------------------------------------------


def _writer(path: str, city: str, barrier: Any, out: Any) -> None:
    with Cortex.open(path, actor="agent") as cx:
        barrier.wait()
        r = cx.write(home(city))
        out.put(
            (city, r.outcome, [str(u) for u in r.supersedes], [str(u) for u in r.conflicts_with])
        )


def test_concurrent_writers_leave_one_current_truth(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with Cortex.open(path, actor="agent"):
        pass
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(4), ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(str(path), c, barrier, out))
        for c in ("Berlin", "Lisbon", "Porto", "Oslo")
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    results = [out.get(timeout=5) for _ in procs]
    with Cortex.open(path, actor="agent") as cx:
        # the writes were serialised: each later one superseded the current one, or (same
        # microsecond) opened a conflict; never two current truths without a recorded reason
        cur = cx.find(Query(types=("Fact",), limit=10)).hits
        assert len(cur) == 1 + 2 * len(cx.conflicts()) or len(cur) == 1
        assert sum(1 for r in results if r[1] == "created") == 1
        assert cx.verify().ok


def test_golden_claim_keys() -> None:
    """specs/vectors/claims.json, both ways: the code gives the keys, and the hashes are
    recomputed here from the spec's definition with hashlib alone."""
    import hashlib
    import json
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    import gen_vectors

    from cortex.rules.chains import claim_hash

    doc = json.loads((Path(__file__).parent.parent / "specs/vectors/claims.json").read_text())
    assert len(doc["cases"]) >= 8
    for case in doc["cases"]:
        data = gen_vectors.parse_input(case["type"], case["input"])
        keys = [k.encode("utf-8") for k in case["keys"]]
        assert list(claim_keys(data)) == keys, case["name"]
        assert case["hashes"] == [
            hashlib.sha256(b"matrix.cortex.claim.v1" + k).digest()[:16].hex() for k in keys
        ]
        assert [claim_hash(k).hex() for k in keys] == case["hashes"]
        want = None if case["lookup"] is None else case["lookup"].encode("utf-8")
        assert lookup_key(data) == want, case["name"]


def test_only_current_memories_are_in_the_claim_index(cx: Cortex, clock: Clock) -> None:
    """Format 12: a superseded memory leaves ``idx/claim/`` (a long chain costs a write
    nothing), and comes back when what superseded it goes."""
    from cortex.storage.keys import parse_claim_index_key

    def marks() -> dict[Any, set[bytes]]:
        out: dict[Any, set[bytes]] = {}
        with cx._kv.read() as txn:
            for key, value in txn.scan(IDX_CLAIM):
                out.setdefault(parse_claim_index_key(key)[1], set()).add(value)
        return out

    uris = []
    for city in ("A", "B", "C"):
        uris.append(cx.write(home(city)))
        clock.advance(timedelta(days=1))
    assert marks() == {uris[2].id: {b""}}
    cx.tombstone(uris[2], "wrong")  # B is the truth again, and competes again
    assert marks() == {uris[1].id: {b""}, uris[2].id: {b""}}  # a tombstone keeps its entry
    d = cx.write(home("D"))
    assert d.supersedes == (uris[1].uri,)
    # a hand-made supersedes edge takes the memory out too, and removing it puts it back
    other = cx.write(home("X", who="Ada"))
    cx.add_edge(d, EdgeType.SUPERSEDES, other)
    assert other.id not in marks()
    cx.remove_edge(d, EdgeType.SUPERSEDES, other)
    assert marks()[other.id] == {b""}
    assert cx.verify().ok
    # an entry of a superseded memory, or a value, is a problem verify names
    with cx._kv.read() as txn:
        key = next(k for k, _ in txn.scan(IDX_CLAIM) if k.endswith(other.id.bytes))
    if isinstance(cx._kv, LmdbKV):  # format 20: a database of duplicates holds no value
        with pytest.raises(CortexError, match="empty values"):
            cx._kv.write(lambda txn: txn.put(key, SUPERSEDED))
    else:
        cx._kv.write(lambda txn: txn.put(key, SUPERSEDED))
        assert any("hold no value" in p.what for p in cx.verify().problems)
        cx._kv.write(lambda txn: txn.put(key, b""))
    assert cx.verify().ok
    with cx._kv.read() as txn:  # D's entry: the claim A shares with it
        d_key = next(k for k, _ in txn.scan(IDX_CLAIM) if k.endswith(d.id.bytes))
    stale = d_key[:-16] + uris[0].id.bytes  # A: superseded by B
    cx._kv.write(lambda txn: txn.put(stale, b""))
    assert any("superseded memory" in p.what for p in cx.verify().problems)


def test_a_long_chain_costs_a_write_no_scan_of_its_history(cx: Cortex, clock: Clock) -> None:
    """However long a claim's chain, the write reads one claim entry: the current one."""
    from cortex.storage.keys import claim_index_prefix

    for i in range(60):
        cx.write(home(f"City{i}"))
        clock.advance(timedelta(hours=1))
    with cx._kv.read() as txn:
        entries = [k for k, _ in txn.scan(IDX_CLAIM)]
    assert len(entries) == 1
    last = cx.write(home("Final"))
    assert last.outcome == "superseded" and len(last.supersedes) == 1
    assert claim_index_prefix(b"\x00" * 16)  # the prefix helper the index uses


def test_about_meets_every_spelling_of_a_name(cx: Cortex, clock: Clock) -> None:
    from cortex import Belief, Identity

    f = cx.write(home("Lisbon", who="Sarah Chen"))
    b = cx.write(Belief(statement="sarah chen likes tea", subject="sarah  chen", stance="believe"))
    e = cx.write(Event(kind="call", summary="called", counterparty="@Sarah Chen"))
    i = cx.write(Identity(name="SARAH CHEN."))
    cx.write(home("Oslo", who="Sarah"))  # another person: not her
    everything = {f.id, b.id, e.id, i.id}
    for spelling in ("Sarah Chen", "sarah chen", "@sarah   chen", " Sarah Chen! "):
        assert {h.memory.id for h in cx.about(spelling).hits} == everything, spelling
    assert [h.memory.id for h in cx.about("@sarah chen", "Home City").hits] == [f.id]
    assert {h.memory.id for h in cx.about("sarah chen", types=["Fact", "event"]).hits} == {
        f.id,
        e.id,
    }
    with pytest.raises(ValidationError, match="about"):
        cx.about("sarah chen", types=["Pattern"])
    with pytest.raises(ValidationError):
        cx.about(" @ ")
    with pytest.raises(ValidationError):
        cx.about("sarah", " ")


def test_preferences_and_goals_say_whom_they_are_about(cx: Cortex, clock: Clock) -> None:
    from cortex import Goal

    mine = cx.write(Preference(topic="window seats", polarity=Polarity.PREFER))
    clock.advance(timedelta(hours=1))
    anas = cx.write(Preference(topic="window seats", polarity=Polarity.AVOID, subject="Ana"))
    assert anas.outcome == "created"  # Ana's preference does not compete with the user's
    clock.advance(timedelta(hours=1))
    again = cx.write(Preference(topic="Window Seats", polarity=Polarity.PREFER, subject="@ana"))
    assert again.supersedes == (anas.uri,)
    goal = cx.write(Goal(statement="run a marathon", status="active", subject="Ana"))
    assert {h.memory.id for h in cx.about("ana").hits} == {again.id, goal.id}
    assert cx.resolve_latest(mine).head.tombstone is None
    assert "about Ana" in cx.resolve(goal).version.forms.medium


# ---------------------------------------------------------------------------------------------
# Format 12: the claim index holds only current memories (migration 0011 from format 11)

FIXTURE11 = Path(__file__).resolve().parent / "data" / "format11.cortex"
MARKED11 = (80, 81, 82, 85, 88, 90)
"""tools/make_fixture_v11.py's superseded memories, whose entries format 11 marked ``s``."""


def _fid(n: int) -> MemoryId:
    ms = int(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC).timestamp() * 1000)
    return MemoryId(ms.to_bytes(6, "big") + bytes(9) + bytes([n]))


def test_migrating_the_format_11_fixture_keeps_only_current_claims(
    tmp_path: Path, store_path: Any
) -> None:
    from cortex.transfer import migrate as M

    where = fixture_store(FIXTURE11, tmp_path, store_path)
    before = dump_store(where)
    marked = {k for k, v in before.items() if k.startswith(IDX_CLAIM) and v == SUPERSEDED}
    assert {MemoryId(k[-16:]) for k in marked} == {_fid(n) for n in MARKED11}
    counters = {k for k in before if k.startswith(SALIENCE)}
    report = M.migrate(where, to=14)
    assert [(s.step.name, s.records, s.applied) for s in report.steps] == [
        ("0011-current-claims-named-counters", len(marked) + len(counters), True),
        ("0012-half-vectors", 0, True),
        ("0013-posting-docnos", 32, True),  # the lexical index rebuilt: the live memories
    ]
    after = dump_store(where)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert {k for k in changed if not k.startswith((b"j/", b"lex/"))} == marked | counters | {
        meta_key("format"),
        meta_key("lexical"),
        M.MIGRATIONS_KEY,
    }
    for k in counters:  # each counter record now starts with its memory's id
        assert unseal(k, after[k]) == k[len(SALIENCE) :] + unseal(k, before[k])
    assert not any(k.startswith(IDX_CLAIM) and v for k, v in after.items())
    M.migrate(where)  # 0014: the forms compact (test_migrate)
    with Cortex.open(where, actor="fixture-agent", as_owner=True) as cx:
        report_v = cx.verify()
        assert report_v.ok, report_v.problems
        # the chains read as before: the open conflict stays open, a new home city ends only
        # the current one, and the chain's history is all there
        assert [{c.a.id, c.b.id} for c in cx.conflicts()] == [{_fid(86), _fid(87)}]
        res = cx.write(Fact(statement="Ida lives in Lugano", subject="ida", predicate="home_city"))
        assert res.outcome == "superseded" and [u.id for u in res.supersedes] == [_fid(83)]
        res = cx.write(Fact(statement="Eve's title is CTO", subject="eve", predicate="title"))
        assert [u.id for u in res.supersedes] == [_fid(91)]  # not 90, nor the tombstoned 92
        assert cx.verify().ok
