"""The labelled dedupe pair set (issue 14 item 2): near misses that must stay apart, paraphrases
that may merge.

``tests/data/dedupe_pairs.jsonl`` was written independently of the code (by someone who had not
read ``cortex.rules.claims``): 129 ``distinct`` pairs (negation, number, date, time, entity,
polarity, quantifier, modality, unit, tense, role swap, condition, scope) and 70 ``same`` pairs
(paraphrases, easy to hard). The rule: a distinct pair never merges — not by the claim guard,
and not through ``write(..., dedupe=True)`` with the real model. The paraphrase merge rate is
reported, with a floor so it cannot silently fall to zero.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from cortex import (
    Belief,
    Constraint,
    Data,
    Event,
    Fact,
    Goal,
    Preference,
)
from cortex.rules.claims import same_claim

PAIRS = [
    json.loads(line)
    for line in (Path(__file__).parent / "data" / "dedupe_pairs.jsonl").read_text().splitlines()
]
PARAPHRASE_FLOOR = 0.08  # measured 6/70 = 0.086 for the guard alone (see the note below)


def data(side: dict[str, Any]) -> Data:
    """One side of a pair as the typed memory an agent would write."""
    text, subject, kind = side["text"], side.get("subject"), side["type"]
    if kind == "Fact":
        return Fact(statement=text, subject=subject or "user", predicate="note")
    if kind == "Belief":
        return Belief(statement=text, subject=subject, stance="believe")
    if kind == "Event":
        return Event(kind="note", summary=text, counterparty=subject)
    if kind == "Goal":
        return Goal(statement=text, status="active")
    if kind == "Constraint":
        return Constraint(
            statement=text, polarity="prefer", strength="soft", source="user_declared"
        )
    assert kind == "Preference", kind
    return Preference(topic=text, polarity="prefer")


def test_the_set_is_what_it_says() -> None:
    labels = Counter(p["label"] for p in PAIRS)
    assert labels["distinct"] >= 100 and labels["same"] >= 50
    assert len({(p["a"]["text"], p["b"]["text"]) for p in PAIRS}) == len(PAIRS)
    categories = Counter(p["reason"].split(":")[0] for p in PAIRS if p["label"] == "distinct")
    for needed in ("negation", "number", "entity", "polarity"):
        assert categories[needed] >= 8, categories
    assert categories["date"] + categories["time"] >= 8


def test_no_distinct_pair_is_the_same_claim() -> None:
    wrong = [
        (p["a"]["text"], p["b"]["text"], p["reason"])
        for p in PAIRS
        if p["label"] == "distinct" and same_claim(data(p["a"]), data(p["b"])).same
    ]
    assert wrong == []


def test_the_guard_merges_some_paraphrases() -> None:
    same = [p for p in PAIRS if p["label"] == "same"]
    merged = sum(same_claim(data(p["a"]), data(p["b"])).same for p in same)
    assert merged / len(same) >= PARAPHRASE_FLOOR, f"{merged}/{len(same)}"


def test_dedupe_with_minilm_never_merges_a_distinct_pair(tmp_path: Path) -> None:
    """End to end with the real model: the second of each pair written with ``dedupe=True``
    into a store holding the first must write a new memory when the pair is distinct.

    Only pairs whose cosine reaches ``DEDUPE_COSINE`` can merge at all, so those are written
    (measured: 105 of the 129 distinct pairs and 53 of the 70 paraphrases are that close —
    cosine alone would have merged 81% of the near misses; the guard merges none, and 6 of the
    paraphrases).
    """
    from cortex import Cortex, render
    from cortex.agent.api import DEDUPE_COSINE
    from cortex.index.embed import MiniLM

    model = MiniLM(batch_size=32)
    model.load()
    va = model.embed([render(data(p["a"])).medium for p in PAIRS])
    vb = model.embed([render(data(p["b"])).medium for p in PAIRS])
    near = [p for p, c in zip(PAIRS, (va * vb).sum(axis=1), strict=True) if c >= DEDUPE_COSINE]
    distinct = [p for p in near if p["label"] == "distinct"]
    assert len(distinct) >= 80  # the set is hard: most near misses are that close
    merging = [
        p for p in near if p["label"] == "same" and same_claim(data(p["a"]), data(p["b"])).same
    ]
    wrong, merged = [], 0
    with Cortex.open(tmp_path / "s", actor="agent", embedder=model) as cx:
        for p in distinct + merging:
            first = cx.write(data(p["a"]), supersede=False)
            second = cx.write(data(p["b"]), dedupe=True, supersede=False)
            if p["label"] == "distinct" and second.outcome == "confirmed":
                wrong.append((p["a"]["text"], p["b"]["text"], second.reason))
            if p["label"] == "same" and second.outcome == "confirmed":
                assert second.id == first.id and second.reason is not None
                merged += 1
            for u in {first.id, second.id}:
                cx.tombstone(u, "next pair")  # each pair on its own
    assert wrong == []
    assert merged >= 1  # measured 4 of the 6 (the others sit at the cosine threshold)


def _same_fact_writer(path: str, barrier: Any, out: Any) -> None:
    from cortex import Cortex

    fact = Fact(statement="Sam is allergic to peanuts", subject="Sam", predicate="note")
    with Cortex.open(path, actor="agent") as cx:
        barrier.wait()
        r = cx.write(fact, dedupe=True)
        out.put((str(r), r.outcome))


def test_processes_writing_the_same_fact_make_one_memory(tmp_path: Path) -> None:
    """The exact dedupe match is checked again inside the write transaction: four processes
    writing the same data at the same moment make one memory and three confirmations."""
    import multiprocessing as mp

    from cortex import Cortex, JournalKind, Query

    path = tmp_path / "s"
    with Cortex.open(path, actor="agent"):
        pass
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(4), ctx.Queue()
    procs = [
        ctx.Process(target=_same_fact_writer, args=(str(path), barrier, out)) for _ in range(4)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    results = [out.get(timeout=5) for _ in procs]
    assert sorted(o for _, o in results) == ["confirmed", "confirmed", "confirmed", "created"]
    assert len({uri for uri, _ in results}) == 1
    with Cortex.open(path, actor="agent") as cx:
        assert len(cx.find(Query(types=("Fact",), limit=10)).hits) == 1
        assert sum(e.kind is JournalKind.CONFIRM for e in cx.journal()) == 3
        assert cx.verify().ok


def test_a_paraphrase_written_between_check_and_write_is_confirmed(tmp_path: Path) -> None:
    """The cosine path is checked again inside the write transaction (issue 14 item 2): while
    one handle compares a paraphrase against the store, another handle writes the first of the
    pair; the comparison missed it (its snapshot is older), the transaction finds it among the
    memories written since and confirms it, so the two writers make one memory."""
    from cortex import Cortex, Query, render
    from cortex.agent.api import DEDUPE_COSINE
    from cortex.index.embed import MiniLM

    model = MiniLM(batch_size=32)
    model.load()
    pair = None
    for p in PAIRS:
        if p["label"] != "same" or not same_claim(data(p["a"]), data(p["b"])).same:
            continue
        va, vb = model.embed([render(data(p["a"])).medium, render(data(p["b"])).medium])
        if float(va @ vb) >= DEDUPE_COSINE + 0.01:  # clearly over: no rounding at the edge
            pair = p
            break
    assert pair is not None

    class Meanwhile:
        """The handle's vector index, but its first search (made inside the dedupe check's
        read snapshot) lets another handle write the first of the pair."""

        def __init__(self, inner: Any) -> None:
            self.inner = inner
            self.first: Any = None

        def search(self, txn: Any, vec: Any, n: int) -> Any:
            if self.first is None:
                with Cortex.open(tmp_path / "s", actor="agent", embedder=model) as other:
                    self.first = other.write(data(pair["a"]), supersede=False)
            return self.inner.search(txn, vec, n)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    with Cortex.open(tmp_path / "s", actor="agent", embedder=model) as cx:
        hook = Meanwhile(cx._sidecar)
        cx._sidecar = hook  # type: ignore[assignment]
        second = cx.write(data(pair["b"]), dedupe=True, supersede=False)
        assert hook.first is not None and hook.first.outcome == "created"
        assert second.outcome == "confirmed", second.summary()
        assert second.id == hook.first.id
        assert second.reason is not None and "written meanwhile" in second.reason
        assert len(cx.find(Query(types=(data(pair["a"]).TYPE,), limit=10)).hits) == 1
        assert cx.verify().ok
