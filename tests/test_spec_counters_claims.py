"""Independent tests, written from the specs, of use counters (formats 11/12) and the claim index
(format 12).

Sources: ``specs/query.md`` §2 (``has_counters``, reads when the flag and ``sal/`` disagree, a
record naming another memory), ``specs/format.md`` §5 (Head key 15), ``specs/storage.md``
(Changes 11 and 12, the key table, §7 verification, §10 salvage) and ``specs/claims.md`` §5-§7
(``idx/claim/`` holds exactly the memories no live ``supersedes`` edge from a live memory
ends, values empty). The claim-index model below computes the expected entries from the spec's
hash (sha256(``matrix.cortex.claim.v1`` ‖ key)[:16]) and the spec's claim keys, not from the
code's helpers. Raw key access is used only to damage or inspect a store.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import random
import re
import unicodedata
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from cortex import (
    Cortex,
    CortexError,
    EdgeType,
    Fact,
    IntegrityError,
    MemoryId,
    Outcome,
    Polarity,
    Preference,
    Query,
    export_store,
    import_bundle,
)
from cortex.model.codec import HEAD as HEAD_CODEC
from cortex.storage import keys as key_layout
from cortex.storage.keys import IDX_CLAIM, SALIENCE
from cortex.storage.kv import seal, unseal
from cortex.transfer.salvage import salvage
from tests import rows as R

from .qsupport import Clock, dump_store

OWNER = "me"


# --- helpers --------------------------------------------------------------------------------


def _raw(cx: Cortex, key: bytes) -> bytes | None:
    with cx._kv.read() as txn:
        value: bytes | None = txn.get(key)
    return value


def hk(cx: Cortex, mid: MemoryId) -> bytes:
    """The head key of ``mid`` (format 21: ``m/`` and its row)."""
    return key_layout.head_key(R.of_kv(cx._kv, mid))


def sk(cx: Cortex, mid: MemoryId) -> bytes:
    """The ``sal/`` key of ``mid`` (format 21: by its row)."""
    return key_layout.salience_key(R.of_kv(cx._kv, mid))


def _flags(cx: Cortex) -> tuple[set[bytes], set[bytes]]:
    """(ids whose head has ``has_counters``, ids with a ``sal/`` record), as raw id16."""
    with cx._kv.read() as txn:
        heads = {k[2:]: HEAD_CODEC.decode(v[:-4], "h") for k, v in txn.scan(b"m/")}
        flagged = {h.id.bytes for h in heads.values() if h.has_counters}
        records = {heads[k[len(SALIENCE) :]].id.bytes for k in txn.keys(SALIENCE)}
    return flagged, records


def _note(i: int) -> Fact:
    return Fact(statement=f"note {i} about gardening", subject=f"s{i}", predicate=f"p{i}")


def _uses(cx: Cortex, ids: list[Any]) -> dict[str, Any]:
    """Each of the four ways a use is counted, on its own memory; returns the one find hit."""
    cx.attest([ids[0]], Outcome.SUCCESS)
    cx.attest([ids[1]], Outcome.PARTIAL)
    cx.attest([ids[2]], Outcome.FAILURE)
    again = cx.write(_note(3), dedupe=True)
    assert again.outcome == "confirmed" and again.id == ids[3].id
    hit = cx.find(Query(text="note 4", limit=1, record_access=True)).hits[0].memory.id
    return {"hit": hit}


# --- use counters: writes -------------------------------------------------------------------


def test_each_way_of_counting_sets_the_flag_once_and_verify_stays_clean(store_path: Any) -> None:
    """query.md §2 / storage.md Change 11: attest (success, partial, failure), find with
    record_access and a dedupe confirmation each write counters and set ``has_counters`` in the
    same transaction; the head is rewritten once, at the first use (later uses leave its bytes
    alone); a plain write touches no counters; flag ⇔ record and verify is clean."""
    with Cortex.open(store_path, actor=OWNER) as cx:
        ids = [cx.write(_note(i)) for i in range(6)]
        assert _flags(cx) == (set(), set())
        heads0 = {u.id: _raw(cx, hk(cx, u.id)) for u in ids}
        hit = _uses(cx, ids)["hit"]
        used = {ids[0].id.bytes, ids[1].id.bytes, ids[2].id.bytes, ids[3].id.bytes, hit.bytes}
        assert len(used) == 5
        assert _flags(cx) == (used, used)
        assert cx.verify().ok
        # the first use rewrote each used head; a never-used head is untouched
        heads1 = {u.id: _raw(cx, hk(cx, u.id)) for u in ids}
        for u in ids:
            assert (heads1[u.id] != heads0[u.id]) == (u.id.bytes in used)
        # decode: only the flag changed (last_updated_at kept: a use is not a change)
        for u in ids:
            if u.id.bytes in used:
                a = HEAD_CODEC.decode(heads0[u.id][:-4], "h")  # type: ignore[index]
                b = HEAD_CODEC.decode(heads1[u.id][:-4], "h")  # type: ignore[index]
                assert b.has_counters and not a.has_counters
                assert b.last_updated_at == a.last_updated_at
        # later uses of every kind: the heads stay byte for byte, the counters move
        _uses(cx, ids)
        cx.find(Query(text="note", limit=6, record_access=True))
        assert {u.id: _raw(cx, hk(cx, u.id)) for u in ids if u.id.bytes in used} == {
            u.id: heads1[u.id] for u in ids if u.id.bytes in used
        }
        st = [cx.salience_state(u) for u in ids]
        assert st[0].citations >= 2 and st[1].citations >= 2  # success and partial cite
        assert st[2].citations == 0 and st[2].failures == 2  # failure counted apart
        assert _flags(cx)[0] == _flags(cx)[1]
        cx.write(_note(9))
        assert cx.verify().ok


def test_failure_does_not_raise_salience(store_path: Any) -> None:
    """query.md §2: a failure is counted apart and does not raise salience (C is citations)."""
    with Cortex.open(store_path, actor=OWNER) as cx:
        a, b = cx.write(_note(1)), cx.write(_note(2))
        for _ in range(5):
            cx.attest([a], Outcome.FAILURE)
        sa, sb = cx.salience_state(a), cx.salience_state(b)
        assert sa.citations == sb.citations == 0 and sa.failures == 5


def test_attest_journals_one_entry_per_memory_and_access_none(store_path: Any) -> None:
    """query.md §2: attest writes one ``attest`` journal entry per memory; access counting is
    not journalled."""
    with Cortex.open(store_path, actor=OWNER) as cx:
        a, b = cx.write(_note(1)), cx.write(_note(2))
        n0 = len(list(cx.journal()))
        cx.find(Query(text="note", limit=5, record_access=True))
        assert len(list(cx.journal())) == n0
        cx.attest([a, b], Outcome.SUCCESS)
        assert len(list(cx.journal())) == n0 + 2


def test_purge_clears_record_and_flag_tombstone_keeps_them(store_path: Any) -> None:
    with Cortex.open(store_path, actor=OWNER) as cx:
        a, b, c = (cx.write(_note(i)) for i in range(3))
        cx.attest([a, b, c], Outcome.SUCCESS)
        cx.tombstone(b, "retired")
        cx.purge(a, "erasure")
        cx.purge(c, "erasure")
        assert _flags(cx) == ({b.id.bytes}, {b.id.bytes})
        assert _raw(cx, sk(cx, a.id)) is None
        assert cx.verify().ok


def test_bundles_carry_no_counters_and_no_flag(store_path: Any, place: Any, tmp_path: Path) -> None:
    with Cortex.open(store_path, actor=OWNER) as cx:
        ids = [cx.write(_note(i)) for i in range(6)]
        _uses(cx, ids)
        export_store(cx, tmp_path / "b.jsonl")
    assert b"has_counters" not in (tmp_path / "b.jsonl").read_bytes()
    with Cortex.open(place("dst"), actor=OWNER) as dst:
        import_bundle(dst, tmp_path / "b.jsonl")
        assert _flags(dst) == (set(), set())
        assert all(dst.salience_state(u).citations == 0 for u in ids)
        assert dst.verify().ok


# --- use counters: damage -------------------------------------------------------------------


def _reads(cx: Cortex, target: Any, idx: int) -> dict[str, Any]:
    """Every read path query.md §2 names, each a thunk."""
    return {
        "salience_state": lambda: cx.salience_state(target),
        "find": lambda: cx.find(Query(text="note gardening", limit=10)),
        "context": lambda: cx.context("analyze", query="note gardening"),
        "search": lambda: cx.search("note gardening"),
        "attest": lambda: cx.attest([target], Outcome.SUCCESS),
        "dedupe": lambda: cx.write(_note(idx), dedupe=True),
        "find_record_access": lambda: cx.find(
            Query(text="note gardening", limit=10, record_access=True)
        ),
    }


def _damage(cx: Cortex, kind: str, a: Any, b: Any) -> None:
    """a and b both used. missing: a's record gone. moved: a's record moved to a key no memory
    has. foreign: a's record sealed at b's key (b's own record overwritten). crc: a's record
    fails its checksum. unnamed: a's record without the id16 that format 12 puts first."""
    ka, kb = sk(cx, a.id), sk(cx, b.id)
    va = _raw(cx, ka)
    assert va is not None
    if kind == "missing":
        cx._kv.write(lambda txn: txn.delete(ka))
    elif kind == "moved":
        kx = key_layout.salience_key(999)  # a row no memory has
        cx._kv.write(lambda txn: (txn.delete(ka), txn.put(kx, seal(unseal(ka, va)))))
    elif kind == "foreign":
        cx._kv.write(lambda txn: txn.put(kb, seal(unseal(ka, va))))
    elif kind == "crc":  # one payload bit flipped under the old checksum
        cx._kv.write(lambda txn: txn.put(ka, bytes([va[0] ^ 1]) + va[1:]))
    else:  # unnamed: the format-11 payload (no id16 first), sealed correctly
        cx._kv.write(lambda txn: txn.put(ka, seal(unseal(ka, va)[16:])))


@pytest.mark.parametrize("kind", ["missing", "moved", "foreign", "crc", "unnamed"])
def test_damaged_counters_are_an_error_on_every_read_path(store_path: Any, kind: str) -> None:
    """query.md §2: a flagged head whose record is missing (or moved away), or whose record
    names another memory, is an IntegrityError on find, context, search, salience_state and the
    next use of the memory — never a ranking on a guess; a failed use writes nothing."""
    with Cortex.open(store_path, actor=OWNER) as cx:
        ids = [cx.write(_note(i)) for i in range(4)]
        a, b = ids[0], ids[1]
        for _ in range(3):
            cx.attest([a], Outcome.SUCCESS)
        cx.attest([b], Outcome.SUCCESS)
        _damage(cx, kind, a, b)
        victim = b if kind == "foreign" else a
        before = dump_store(store_path)
        for name, read in _reads(cx, victim, ids.index(victim)).items():
            with pytest.raises(IntegrityError) as err:
                read()
            msg = str(err.value)
            if kind == "foreign":
                assert str(a.id) in msg and str(b.id) in msg, name
            elif kind in ("missing", "moved"):
                assert f"sal/{a.id}" in msg, name
            elif kind == "unnamed":
                assert str(a.id) in msg, (name, msg)
            # crc: storage.md §3 asks only for an integrity error (the message names the key)
            assert dump_store(store_path) == before, name  # nothing written


@pytest.mark.parametrize("kind", ["missing", "moved", "foreign", "crc", "unnamed"])
def test_verify_names_each_disagreement(store_path: Any, kind: str) -> None:
    """storage.md §7: flag without record, record without flag (each its own line), and a
    record naming another memory, are each reported naming the key."""
    with Cortex.open(store_path, actor=OWNER) as cx:
        a, b, _c = (cx.write(_note(i)) for i in range(3))
        cx.attest([a, b], Outcome.SUCCESS)
        assert cx.verify().ok
        _damage(cx, kind, a, b)
        problems = cx.verify().problems
        text = " | ".join(f"{p.record}: {p.what}" for p in problems)
        if kind == "missing":
            assert len(problems) == 1 and str(a.id) in text and "sal/" in text
        elif kind == "moved":
            # the flagged head without a record, and the record without a head: two lines
            assert len(problems) == 2, text
            assert str(a.id) in text and key_layout.salience_key(999).hex() in text
        elif kind == "foreign":
            assert str(a.id) in text and str(b.id) in text, text
        else:
            assert problems and any(
                p.record in (f"sal/{R.of_kv(cx._kv, a.id)}", sk(cx, a.id).hex())
                or str(a.id) in p.what
                for p in problems
            ), text


def test_a_stray_record_beside_an_unflagged_head_is_not_read(store_path: Any) -> None:
    """query.md §2: flag clear means never used without reading sal/; the stray record does not
    change the ranking nor raise; verify reports it."""
    with Cortex.open(store_path, actor=OWNER) as cx:
        ids = [cx.write(_note(i)) for i in range(3)]
        baseline = [h.memory.id for h in cx.find(Query(text="note gardening", limit=3)).hits]
        used = next(u for u in ids if u.id == baseline[0])
        other = next(u for u in ids if u.id == baseline[-1])
        cx.attest([used], Outcome.SUCCESS)
        ranked = [h.memory.id for h in cx.find(Query(text="note gardening", limit=3)).hits]
        ks, ko = sk(cx, used.id), sk(cx, other.id)
        v = _raw(cx, ks)
        assert v is not None
        # a copy of a much-cited record, relabelled for ``other``: only damage puts it there
        for _ in range(20):
            cx.attest([used], Outcome.SUCCESS)
        big = _raw(cx, ks)
        assert big is not None
        payload = other.id.bytes + unseal(ks, big)[16:]
        cx._kv.write(lambda txn: txn.put(ko, seal(payload)))
        assert cx.salience_state(other).citations == 0
        ranked2 = [h.memory.id for h in cx.find(Query(text="note gardening", limit=3)).hits]
        assert ranked2[0] == used.id and ranked2[-1] == ranked[-1] == other.id
        cx.context("analyze", query="note gardening")
        shown = f"sal/{R.of_kv(cx._kv, other.id)}"
        assert any(p.record == shown for p in cx.verify().problems)


def test_salvage_reports_lost_counters_and_drops_unflagged_records(tmp_path: Path) -> None:
    """storage.md §10: a recovered head whose record was lost keeps the flag clear and is
    reported as kind ``counters``; a record whose head has no flag is left out with a note;
    intact counters are carried with their flag; NEW verifies."""
    path = tmp_path / "s"
    with Cortex.open(path, actor=OWNER) as cx:
        a, b, c, d = (cx.write(_note(i)) for i in range(4))
        cx.attest([a, b], Outcome.SUCCESS)
        cx.attest([b], Outcome.FAILURE)
        kc, kb = sk(cx, c.id), sk(cx, b.id)
        vb = _raw(cx, kb)
        assert vb is not None
        cx._kv.write(
            lambda txn: (
                txn.delete(sk(cx, a.id)),
                txn.put(kc, seal(c.id.bytes + unseal(kb, vb)[16:])),
            )
        )
    rep = salvage(path, tmp_path / "new")
    assert rep.verify_ok
    assert ("counters", str(a.id)) in [(x.kind, x.id) for x in rep.lost]
    assert rep.notes
    with Cortex.open(tmp_path / "new", actor=OWNER) as cx:
        assert _flags(cx) == ({b.id.bytes}, {b.id.bytes})
        sb = cx.salience_state(b)
        assert (sb.citations, sb.failures) == (1, 1)
        assert cx.salience_state(c).citations == 0 and cx.salience_state(d).citations == 0
        assert cx.verify().ok


def test_salvage_never_hands_a_memory_another_memorys_counters(tmp_path: Path) -> None:
    """storage.md §10 does not say what salvage does with a format-12 record naming another
    memory (spec gap); whatever it does, NEW must verify and b must not read a's counters."""
    path = tmp_path / "s"
    with Cortex.open(path, actor=OWNER) as cx:
        a, b = cx.write(_note(1)), cx.write(_note(2))
        for _ in range(7):
            cx.attest([a], Outcome.SUCCESS)
        cx.attest([b], Outcome.FAILURE)
        _damage(cx, "foreign", a, b)
    rep = salvage(path, tmp_path / "new")
    assert rep.verify_ok
    with Cortex.open(tmp_path / "new", actor=OWNER) as cx:
        assert cx.salience_state(b).citations == 0
        assert cx.verify().ok


# --- claim index ----------------------------------------------------------------------------


def _h(key: str) -> bytes:
    return hashlib.sha256(b"matrix.cortex.claim.v1" + key.encode()).digest()[:16]


def _keys(data: Any) -> list[str]:
    """claims.md §5 for the already-normalised inputs this file writes."""
    if isinstance(data, Fact):
        base = f"fact\x1f{data.subject}\x1f{data.predicate}"
        return [base] + ([f"{base}\x1f{data.object}"] if data.object else [])
    if isinstance(data, Preference):
        return [f"preference\x1f{data.topic}" + (f"\x1f{data.subject}" if data.subject else "")]
    return []


_NEG = ("not_", "no_", "never_", "is_not_", "are_not_", "does_not_", "do_not_", "isnt_", "doesnt_")


def _norm_entity(text: str | None) -> str:
    """claims.md §5: NFKC, case folding, one space between words, a leading ``@`` and
    punctuation at either end dropped."""
    if text is None:
        return ""
    t = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    t = t.lstrip("@")
    while t and unicodedata.category(t[0]).startswith("P"):
        t = t[1:]
    while t and unicodedata.category(t[-1]).startswith("P"):
        t = t[:-1]
    return t.strip()


def _norm_predicate(text: str) -> str:
    t = unicodedata.normalize("NFKC", text).casefold()
    t = re.sub(r"[^\w]|_", "_", t)
    t = re.sub(r"_+", "_", t).strip("_")
    changed = True
    while changed:
        changed = False
        for neg in _NEG:
            if t.startswith(neg):
                t, changed = t[len(neg) :], True
    return t


def _spec_keys(data: Any) -> list[str]:
    """claims.md §5 claim keys of any Fact or Preference (other types: none)."""
    if isinstance(data, Fact):
        subj, pred = _norm_entity(data.subject), _norm_predicate(data.predicate)
        if not subj or not pred:
            return []
        base = f"fact\x1f{subj}\x1f{pred}"
        obj = _norm_entity(data.object)
        return [base] + ([f"{base}\x1f{obj}"] if obj else [])
    if isinstance(data, Preference):
        topic = _norm_entity(data.topic)
        if not topic:
            return []
        subj = _norm_entity(data.subject)
        return [f"preference\x1f{topic}" + (f"\x1f{subj}" if subj else "")]
    return []


def _expected_from_store(cx: Cortex) -> set[bytes]:
    """The entries the spec implies for the store as it reads through the public API: every
    memory whose current version has data, unless a live ``supersedes`` edge from a memory that
    holds data and is not tombstoned ends it."""
    with cx._kv.read() as txn:
        heads = [HEAD_CODEC.decode(v[:-4], "h") for _, v in txn.scan(b"m/")]
    data: dict[bytes, Any] = {}
    alive: set[bytes] = set()
    for h in heads:
        mem = cx.resolve_latest(h.id)
        if mem.data is None:
            continue
        data[h.id.bytes] = mem.data
        if h.tombstone is None:
            alive.add(h.id.bytes)
    out: set[bytes] = set()
    for mid, d in data.items():
        edges = cx.edges(MemoryId(mid), direction="in")
        if not any(e.type == EdgeType.SUPERSEDES and e.src.bytes in alive for e in edges):
            out |= {IDX_CLAIM + _h(k) + mid for k in _spec_keys(d)}
    return out


class Model:
    """What the spec says ``idx/claim/`` holds: every non-purged memory with content, under its
    current version's claim keys, unless a live ``supersedes`` edge from a memory that exists
    and is not tombstoned ends it."""

    def __init__(self) -> None:
        self.data: dict[bytes, Any] = {}
        self.tomb: set[bytes] = set()
        self.purged: set[bytes] = set()
        self.ids: dict[bytes, Any] = {}
        self.used: set[bytes] = set()

    def expected(self, cx: Cortex) -> set[bytes]:
        out: set[bytes] = set()
        for mid, data in self.data.items():
            if mid in self.purged:
                continue
            ended = any(
                e.type == EdgeType.SUPERSEDES
                and e.src.bytes not in self.tomb
                and e.src.bytes not in self.purged
                for e in cx.edges(self.ids[mid], direction="in")
            )
            if not ended:
                out |= {IDX_CLAIM + _h(k) + mid for k in _keys(data)}
        return out


def _index(cx: Cortex) -> tuple[set[bytes], set[bytes]]:
    with cx._kv.read() as txn:
        items = list(txn.scan(IDX_CLAIM))
    return {k for k, _ in items}, {v for _, v in items}


def _check(cx: Cortex, model: Model, step: str) -> None:
    keys, values = _index(cx)
    assert keys == model.expected(cx), step
    assert keys == _expected_from_store(cx), step
    assert values <= {b""}, step
    assert _flags(cx) == (model.used, model.used), step
    report = cx.verify()
    assert report.ok, (step, [(p.record, p.what) for p in report.problems])


SUBJECTS = ("sam", "ada")
CITIES = ("berlin", "paris", "oslo")


def _fact(rng: random.Random) -> Fact:
    who = rng.choice(SUBJECTS)
    if rng.random() < 0.7:
        city = rng.choice(CITIES)
        return Fact(
            statement=f"{who} lives in {city}",
            subject=who,
            predicate="home_city",
            object=city,
            confidence=rng.choice((0.4, 0.9)),
        )
    obj = rng.choice(("tea", "coffee", None))
    return Fact(statement=f"{who} likes {obj}", subject=who, predicate="likes", object=obj)


def _data(rng: random.Random) -> Any:
    if rng.random() < 0.15:
        return Preference(topic=rng.choice(("tea", "music")), polarity=Polarity.PREFER)
    return _fact(rng)


def _tick(rng: random.Random, clock: Clock) -> None:
    """Mostly later, sometimes the same instant (ties), sometimes earlier (archives)."""
    clock.tick(rng.choice((0.0, 0.0, 3600.0, 86400.0, -86400.0 * 3)))


OPS = (
    "write", "write", "write", "nosupersede", "batch", "update", "update", "tomb", "tomb",
    "erase", "add", "add", "remove", "resolve", "resolve", "attest", "access",
)  # fmt: skip


def _op(cx: Cortex, model: Model, rng: random.Random, clock: Clock) -> str:
    live = [m for m in model.data if m not in model.purged]
    kind = rng.choice(OPS)
    if kind in ("write", "nosupersede", "batch") or not live:
        _tick(rng, clock)
        items = [_data(rng) for _ in range(rng.randint(2, 3) if kind == "batch" else 1)]
        if kind == "batch":
            results = cx.write_many(items)
        elif kind == "nosupersede":
            results = [cx.write(items[0], supersede=False)]
        else:
            results = [cx.write(items[0])]
        for r, data in zip(results, items, strict=True):
            model.data[r.id.bytes], model.ids[r.id.bytes] = data, r.id
        return f"{kind} " + ",".join(r.outcome for r in results)
    mid = rng.choice(live)
    ref = model.ids[mid]
    try:
        if kind == "update":
            if isinstance(model.data[mid], Preference):
                return "skip"
            _tick(rng, clock)
            data = _fact(rng)
            r = cx.update(ref, data)
            model.data[mid] = data
            return f"update {r.outcome}"
        if kind == "attest":
            cx.attest([ref], rng.choice((Outcome.SUCCESS, Outcome.PARTIAL, Outcome.FAILURE)))
            model.used.add(mid)
        elif kind == "access":
            hits = cx.find(Query(text=rng.choice(SUBJECTS), limit=3, record_access=True)).hits
            model.used |= {h.memory.id.bytes for h in hits}
        elif kind == "tomb":
            if mid in model.tomb:
                return "skip"
            cx.tombstone(ref, "done")
            model.tomb.add(mid)
        elif kind == "erase":
            if rng.random() < 0.5:
                cx.purge(ref, "erase")
            else:
                cx.tombstone(ref, "erase", erase=True)
            model.purged.add(mid)
            model.used.discard(mid)
        elif kind == "add":
            other = rng.choice(live)
            if other == mid:
                return "skip"
            cx.add_edge(ref, EdgeType.SUPERSEDES, model.ids[other])
        elif kind == "remove":
            ins = [e for e in cx.edges(ref, direction="both") if e.type == EdgeType.SUPERSEDES]
            if not ins:
                return "skip"
            e = rng.choice(ins)
            cx.remove_edge(e.src, EdgeType.SUPERSEDES, e.dst)
        elif kind == "resolve":
            conflicts = cx.conflicts()
            if not conflicts:
                return "skip"
            c = rng.choice(conflicts)
            w, lo = (c.a.id, c.b.id) if rng.random() < 0.5 else (c.b.id, c.a.id)
            cx.resolve_conflict(w, lo, reason="checked")
    except CortexError as exc:  # refused: _check then sees the store as the model left it
        return f"{kind} refused: {type(exc).__name__}: {exc}"[:80]
    return kind


@pytest.mark.parametrize("seed", range(6))
def test_claim_index_equals_the_spec_model_after_every_step(
    store_path: Any, place: Any, tmp_path: Path, seed: int
) -> None:
    """claims.md §5-§7 / storage.md Change 12: after each write, update (subject changed),
    tombstone, purge, add/remove of a supersedes edge, resolve_conflict and archived write, the
    ``idx/claim/`` keys are exactly the model's, every value is empty and verify is clean."""
    rng = random.Random(seed)
    clock = Clock()
    model = Model()
    with Cortex.open(store_path, actor=OWNER, clock=clock) as cx:
        steps = []
        for i in range(30):
            steps.append(_op(cx, model, rng, clock))
            _check(cx, model, f"seed {seed} step {i}: {steps}")
        expected = _index(cx)[0]
        export_store(cx, tmp_path / "b.jsonl")
    # storage.md §8/§10: an import and a salvage rebuild the index of the current memories
    # (the bundle carries no counters); both copies hold the same entries as the source
    with Cortex.open(place("copy"), actor=OWNER) as dst:
        import_bundle(dst, tmp_path / "b.jsonl")
        assert _index(dst) == (expected, {b""} if expected else set())
        assert _flags(dst) == (set(), set()) and dst.verify().ok
    if isinstance(store_path, Path):
        rep = salvage(store_path, tmp_path / "salvaged")
        assert rep.verify_ok and not rep.lost
        with Cortex.open(tmp_path / "salvaged", actor=OWNER) as sv:
            assert _index(sv)[0] == expected == _expected_from_store(sv)
            assert _flags(sv) == (model.used, model.used)


def test_claim_index_named_steps(store_path: Any) -> None:
    """The sequence the brief names, deterministically: chain, archive, conflict + resolve,
    tombstone of the superseder (the old one returns), update moving a memory's subject out of
    a chain, hand-made supersedes edge and its removal, purge of the superseder."""
    clock = Clock()
    model = Model()
    with Cortex.open(store_path, actor=OWNER, clock=clock) as cx:

        def w(f: Any) -> Any:
            r = cx.write(f)
            model.data[r.id.bytes], model.ids[r.id.bytes] = f, r.id
            _check(cx, model, f"write {f}")
            return r

        a = w(
            Fact(
                statement="sam lives in berlin",
                subject="sam",
                predicate="home_city",
                object="berlin",
                confidence=0.9,
            )
        )
        clock.advance(timedelta(days=1))
        b = w(
            Fact(
                statement="sam lives in paris",
                subject="sam",
                predicate="home_city",
                object="paris",
                confidence=0.9,
            )
        )
        assert b.outcome == "superseded" and b.supersedes == (a.uri,)
        clock.advance(timedelta(days=1))
        arch = w(
            Fact(
                statement="sam lives in oslo",
                subject="sam",
                predicate="home_city",
                object="oslo",
                confidence=0.2,
            )
        )
        assert arch.outcome == "archived"
        tie = w(
            Fact(
                statement="sam lives in rome",
                subject="sam",
                predicate="home_city",
                object="rome",
                confidence=0.2,
            )
        )
        c = w(
            Fact(
                statement="ada lives in rome",
                subject="ada",
                predicate="home_city",
                object="rome",
                confidence=0.5,
            )
        )
        d = w(
            Fact(
                statement="ada lives in lima",
                subject="ada",
                predicate="home_city",
                object="lima",
                confidence=0.5,
            )
        )
        assert d.outcome == "conflict", d.outcome
        cx.resolve_conflict(d, c, reason="asked ada")
        _check(cx, model, "resolve")
        cx.tombstone(b, "wrong")  # a returns (b's entries kept: tombstoned, not superseded)
        model.tomb.add(b.id.bytes)
        _check(cx, model, "tombstone superseder")
        nf = Fact(
            statement="bob lives in berlin", subject="bob", predicate="home_city", object="berlin"
        )
        cx.update(a, nf)  # a leaves sam's chain: its entries move to bob's keys
        model.data[a.id.bytes] = nf
        _check(cx, model, "update changes subject")
        cx.add_edge(c, EdgeType.SUPERSEDES, a)
        _check(cx, model, "add_edge")
        cx.remove_edge(c, EdgeType.SUPERSEDES, a)
        _check(cx, model, "remove_edge")
        cx.purge(d, "erase")  # c loses its superseder
        model.purged.add(d.id.bytes)
        _check(cx, model, "purge superseder")
        del tie, arch


def _false_flag(cx: Cortex, a: Any) -> None:
    """Rewrite a's (flagged) head with key 15 = ``false``, resealed, and drop its record."""
    key = hk(cx, a.id)
    value = _raw(cx, key)
    assert value is not None
    payload = unseal(key, value)
    assert payload.endswith(b"\x0f\xf5")  # canonical CBOR: key 15 (the highest) -> true
    bad = seal(payload[:-1] + b"\xf4")  # -> false
    cx._kv.write(lambda txn: (txn.put(key, bad), txn.delete(sk(cx, a.id))))


def test_verify_refuses_an_explicit_false_has_counters(store_path: Any) -> None:
    """format.md §5 key 15: an explicit ``false`` MUST be refused; verify names the head."""
    with Cortex.open(store_path, actor=OWNER) as cx:
        a = cx.write(_note(1))
        cx.attest([a], Outcome.SUCCESS)
        _false_flag(cx, a)
        shown = f"m/{R.of_kv(cx._kv, a.id)}"
        assert any(p.record == shown for p in cx.verify().problems)


def test_reads_refuse_an_explicit_false_has_counters(store_path: Any) -> None:
    """format.md §5: an explicit ``false`` for key 15 MUST be refused, by reads too (found by
    this file as a strict xfail: the read path's fallback decoder accepted it)."""
    with Cortex.open(store_path, actor=OWNER) as cx:
        a = cx.write(_note(1))
        cx.attest([a], Outcome.SUCCESS)
        _false_flag(cx, a)
        with pytest.raises(CortexError):
            cx.resolve_latest(a)
        with pytest.raises(CortexError):
            cx.salience_state(a)


def test_the_migrated_format_11_fixture_matches_the_spec_index(tmp_path: Path) -> None:
    """storage.md §5 (0011): after the migration ``idx/claim/`` holds exactly the current
    memories' entries by the spec's rule, values empty; every ``sal/`` payload starts with its
    memory's id16 and its head has the flag."""
    from cortex.transfer import migrate as M

    src = tmp_path / "v11"
    src.mkdir()
    (src / "data.mdb").write_bytes(
        (Path(__file__).resolve().parent / "data" / "format11.cortex" / "data.mdb").read_bytes()
    )
    M.migrate(src)
    with Cortex.open(src, actor="fixture-agent", as_owner=True) as cx:
        keys, values = _index(cx)
        assert keys and keys == _expected_from_store(cx) and values == {b""}
        flagged, records = _flags(cx)
        assert flagged == records
        with cx._kv.read() as txn:
            for k, v in txn.scan(SALIENCE):  # format 21: the key names the row
                assert unseal(k, v)[:16] == R.id_at_row(txn, k[len(SALIENCE) :])
        assert cx.verify().ok


def test_reads_write_no_counters(store_path: Any) -> None:
    """query.md §2: counters change only by find(record_access=True), attest and a dedupe
    confirmation: a plain find, context (a pure read) and search write nothing."""
    with Cortex.open(store_path, actor=OWNER) as cx:
        for i in range(3):
            cx.write(_note(i))
        before = dump_store(store_path)
        cx.find(Query(text="note gardening", limit=5))
        cx.context("analyze", query="note gardening")
        cx.search("note gardening")
        assert dump_store(store_path) == before


def _city(who: str, city: str, conf: float = 0.9) -> Fact:
    return Fact(
        statement=f"{who} lives in {city}",
        subject=who,
        predicate="home_city",
        object=city,
        confidence=conf,
    )


def test_two_superseders_one_tombstoned_then_both(store_path: Any) -> None:
    """claims.md §6: a memory is superseded while ANY live supersedes edge from a memory that
    is not tombstoned ends it; it returns to the index only when the last such one goes, and a
    purge of an already tombstoned superseder changes nothing for it."""
    clock = Clock()
    with Cortex.open(store_path, actor=OWNER, clock=clock) as cx:
        x = cx.write(_city("sam", "berlin"))
        clock.advance(timedelta(days=1))
        a = cx.write(_city("sam", "paris"))
        assert a.supersedes == (x.uri,)
        b = cx.write(_city("ada", "oslo"))
        cx.add_edge(b, EdgeType.SUPERSEDES, x)

        def has(u: Any) -> bool:
            return any(k.endswith(u.id.bytes) for k in _index(cx)[0])

        def ok() -> None:
            assert _index(cx)[0] == _expected_from_store(cx)
            assert cx.verify().ok

        assert not has(x)
        cx.tombstone(a, "wrong")
        ok()
        assert not has(x)  # b still ends it
        cx.tombstone(b, "wrong")
        ok()
        assert has(x)
        cx.purge(a, "erase")
        ok()
        assert has(x)
        # a superseded memory moved to another subject by an update stays out of the index
        clock.advance(timedelta(days=1))
        y = cx.write(_city("sam", "rome"))
        clock.advance(timedelta(days=1))
        z = cx.write(_city("sam", "lima"))
        assert y.supersedes == (x.uri,) and z.supersedes == (y.uri,)
        cx.update(y, _city("eve", "kyiv"))
        ok()
        assert not has(y)
        # an archived write is history from the start: never in the index
        clock.advance(timedelta(days=-30))
        old = cx.write(_city("sam", "quito", 0.5))
        assert old.outcome == "archived"
        ok()
        assert not has(old)
        # supersede=False: indexed, no edge, later writes meet it
        clock.advance(timedelta(days=60))
        free = cx.write(_city("bob", "nice"), supersede=False)
        ok()
        assert has(free)
        clock.advance(timedelta(days=1))
        later = cx.write(_city("bob", "cannes"))
        assert free.uri in later.supersedes
        ok()
        assert not has(free)


def test_salvage_rebuilds_the_index_from_what_it_recovered(tmp_path: Path) -> None:
    """storage.md §10 step 3: the claim index of NEW holds the current memories of what was
    recovered: when the superseder's head is lost, its edge is not recovered (an endpoint is
    missing) and the memory it superseded is current again in NEW."""
    path = tmp_path / "s"
    clock = Clock()
    with Cortex.open(path, actor=OWNER, clock=clock) as cx:
        x = cx.write(_city("sam", "berlin"))
        clock.advance(timedelta(days=1))
        a = cx.write(_city("sam", "paris"))
        assert a.supersedes == (x.uri,)
        cx.attest([a, x], Outcome.SUCCESS)
        cx._kv.write(lambda txn: txn.delete(hk(cx, a.id)))
    rep = salvage(path, tmp_path / "new")
    assert rep.verify_ok
    assert str(a.id) in {x_.id for x_ in rep.lost}
    with Cortex.open(tmp_path / "new", actor=OWNER) as cx:
        keys = _index(cx)[0]
        assert keys == _expected_from_store(cx)
        assert {k[-16:] for k in keys} == {x.id.bytes}
        assert _flags(cx) == ({x.id.bytes}, {x.id.bytes})
        assert cx.verify().ok


def _flag_bundle(src: Path, dst: Path) -> None:
    """A bundle whose heads carry ``has_counters`` (export.md: a writer never puts it there),
    with its trailer digest recomputed so that only the flag differs."""
    lines = src.read_bytes().split(b"\n")
    body = []
    for line in lines[:-2]:
        item = json.loads(line)
        if item.get("kind") == "memory":
            item["head"]["has_counters"] = True
            line = json.dumps(item, separators=(",", ":")).encode()
        body.append(line)
    data = b"\n".join(body) + b"\n"
    trailer = json.loads(lines[-2])
    trailer["sha256"] = hashlib.sha256(data).hexdigest()
    dst.write_bytes(data + json.dumps(trailer, separators=(",", ":")).encode() + b"\n")


def test_an_import_clears_a_flag_a_bundle_carries(
    store_path: Any, place: Any, tmp_path: Path
) -> None:
    """export.md (addendum, format 11): an import writes every head with the flag clear, and a
    memory the store already holds is unchanged when its head differs only by the flag."""
    with Cortex.open(store_path, actor=OWNER) as cx:
        a, b = cx.write(_note(1)), cx.write(_note(2))
        cx.attest([a], Outcome.SUCCESS)
        export_store(cx, tmp_path / "plain.jsonl")
        _flag_bundle(tmp_path / "plain.jsonl", tmp_path / "flagged.jsonl")
        before = dump_store(store_path)
        report = import_bundle(cx, tmp_path / "flagged.jsonl")
        assert (report.memories_added, report.memories_unchanged) == (0, 2)
        assert dump_store(store_path) == before
    with Cortex.open(place("dst"), actor=OWNER) as dst:
        import_bundle(dst, tmp_path / "flagged.jsonl")
        assert _flags(dst) == (set(), set())
        assert dst.salience_state(a) == dst.salience_state(b)
        assert dst.salience_state(a).citations == 0
        assert dst.verify().ok


def test_resolve_conflict_with_a_tombstoned_winner(store_path: Any) -> None:
    """claims.md §6-§7: resolve_conflict adds ``winner supersedes loser``; an edge from a
    tombstoned memory ends nothing, so the loser stays in the index. Either the store refuses
    (a CortexError, nothing written) or the index is what the spec implies."""
    clock = Clock()
    with Cortex.open(store_path, actor=OWNER, clock=clock) as cx:
        c = cx.write(_city("ada", "rome", 0.5))
        d = cx.write(_city("ada", "lima", 0.5))
        assert d.outcome == "conflict" and len(cx.conflicts()) == 1
        cx.tombstone(d, "wrong")
        assert cx.conflicts() == []
        before = dump_store(store_path)
        try:
            cx.resolve_conflict(d, c, reason="late")
        except CortexError:
            assert dump_store(store_path) == before
        keys = _index(cx)[0]
        assert keys == _expected_from_store(cx)
        assert any(k.endswith(c.id.bytes) for k in keys)
        assert cx.verify().ok
        # and the other way round: the live one wins, the tombstoned one leaves the index
        cx.resolve_conflict(c, d, reason="c is right")
        keys = _index(cx)[0]
        assert keys == _expected_from_store(cx)
        assert not any(k.endswith(d.id.bytes) for k in keys)
        assert cx.verify().ok


def _attester(path: str, ref: str, barrier: Any, n: int) -> None:
    with Cortex.open(path, actor=OWNER) as cx:
        barrier.wait()
        for _ in range(n):
            cx.attest([ref], Outcome.SUCCESS)
            cx.find(Query(text="note gardening", limit=1, record_access=True))


def test_two_processes_counting_a_first_use_at_once(tmp_path: Path) -> None:
    """storage.md Change 11: the flag is set in the transaction that first writes counters, so
    two processes racing to the first use leave one flagged head, one record, every use counted
    and verify clean."""
    path = tmp_path / "s"
    with Cortex.open(path, actor=OWNER) as cx:
        a = cx.write(_note(1))
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_attester, args=(str(path), str(a), barrier, 5)) for _ in "ab"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with Cortex.open(path, actor=OWNER) as cx:
        st = cx.salience_state(a)
        assert (st.citations, st.accesses) == (10, 10)
        assert _flags(cx) == ({a.id.bytes}, {a.id.bytes})
        assert cx.verify().ok
