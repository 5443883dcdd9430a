"""FORMAT 16 (lexical documents without their terms) tested against its spec, not the code.

``specs/lexical.md`` version 6 (§3 documents, §4 LexDoc schema version 2, §5 removing, §7
verification) and ``specs/storage.md`` version 16 (format 16, migration
``0015-lean-lexical-documents``). The records are read here as the spec describes them: the
CRC envelope (storage.md §3) removed by hand and the payload decoded with cbor2, and the
index the live memories imply is computed here from their full forms (§3), so a disagreement
between the code and the spec shows even where the code's own helpers agree with each other.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import cbor2
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cortex import (
    Cortex,
    ErasurePendingError,
    Event,
    Fact,
    Forms,
    Goal,
    GoalStatus,
    IntegrityError,
    MemoryId,
    MemoryType,
    NewMemory,
    TombstonedError,
)
from cortex.cli.app import main
from cortex.index import lexical
from cortex.index.text import terms
from cortex.model.codec import decode_data
from cortex.model.forms import render_full
from cortex.storage.engines import copy_kv, open_kv
from cortex.storage.kv import LmdbKV

ROOT = Path(__file__).resolve().parent.parent
FIXTURE15 = ROOT / "tests" / "data" / "format15.cortex"
BUNDLE14 = ROOT / "tests" / "data" / "format14.bundle.cbor"

LEX_D = b"lex/d/"
LEX_I = b"lex/i/"
HEAD = b"m/"
VERSION = b"mv/"
MIGRATION = "0015-lean-lexical-documents"


# --- the spec's encodings, read by hand ----------------------------------------------------


def seal(payload: bytes) -> bytes:
    """storage.md §3: ``payload || crc32(payload)``, the CRC 4 bytes big-endian."""
    return payload + zlib.crc32(payload).to_bytes(4, "big")


def unseal(value: bytes) -> bytes:
    payload = value[:-4]
    assert zlib.crc32(payload).to_bytes(4, "big") == value[-4:], "a value fails its CRC"
    return payload


def canonical(value: bytes) -> dict[int, Any]:
    """A sealed record's CBOR map, checked to be the canonical encoding of what it holds."""
    payload = unseal(value)
    out: dict[int, Any] = cbor2.loads(payload)
    assert cbor2.dumps(out, canonical=True) == payload, "not canonical CBOR"
    return out


def cbor_seal(record: dict[int, Any]) -> bytes:
    return seal(cbor2.dumps(record, canonical=True))


ID = b"id/"


def rows(items: dict[bytes, bytes]) -> dict[bytes, bytes]:
    """storage.md §2 Rows (format 21): ``id/`` id16 -> the memory's row (4 bytes)."""
    return {k[len(ID) :]: unseal(v) for k, v in items.items() if k.startswith(ID)}


def doc_key(items: dict[bytes, bytes], id16: bytes) -> bytes:
    """The ``lex/d/`` key of a memory: by its row (format 21), by its id (formats 2-20)."""
    r = rows(items)
    return LEX_D + (r[id16] if r else id16)


def version_key(items: dict[bytes, bytes], mid: MemoryId, n: int) -> bytes:
    """storage.md §2: ``mv/`` u32(row) u64(n) (format 21)."""
    return VERSION + rows(items)[mid.bytes] + n.to_bytes(8, "big")


def dump(cx: Cortex) -> dict[bytes, bytes]:
    with cx._kv.read() as txn:
        return {bytes(k): bytes(v) for k, v in txn.scan(b"")}


def dump_at(where: Any) -> dict[bytes, bytes]:
    kv = open_kv(where, create=False)
    try:
        with kv.read() as txn:
            return {bytes(k): bytes(v) for k, v in txn.scan(b"")}
    finally:
        kv.close()


def digest(items: dict[bytes, bytes]) -> str:
    h = hashlib.sha256()
    for k in sorted(items):
        h.update(len(k).to_bytes(4, "big") + k + len(items[k]).to_bytes(4, "big") + items[k])
    return h.hexdigest()


def lexdocs(items: dict[bytes, bytes]) -> dict[bytes, dict[int, Any]]:
    """Every ``lex/d/`` record by its memory's id16 (format 21: keyed by row, mapped through
    ``id/``; formats 2-20: keyed by id)."""
    by_row = {r: m for m, r in rows(items).items()}
    out = {}
    for k, v in items.items():
        if k.startswith(LEX_D):
            tail = k[len(LEX_D) :]
            out[by_row.get(tail, tail)] = canonical(v)
    return out


def numbers(items: dict[bytes, bytes]) -> dict[int, bytes]:
    """Document number -> id16: format 21, the memory's row (``id/``); 14-20, ``lex/i/``."""
    r = rows(items)
    if r:
        return {int.from_bytes(row, "big"): m for m, row in r.items()}
    return {
        int.from_bytes(k[len(LEX_I) :], "big"): unseal(v)
        for k, v in items.items()
        if k.startswith(LEX_I)
    }


def head_ids(items: dict[bytes, bytes]) -> list[MemoryId]:
    r = rows(items)
    if r:
        return [MemoryId(m) for m in r]
    return [MemoryId(k[len(HEAD) :]) for k in items if k.startswith(HEAD) and len(k) == 18]


def live_ids(cx: Cortex) -> set[MemoryId]:
    """The memories whose head has no tombstone (lexical.md §1)."""
    return {m for m in head_ids(dump(cx)) if not cx.resolve_latest(m).tombstoned}


def document(cx: Cortex, mid: MemoryId) -> tuple[int, list[str]]:
    """lexical.md §3: the current version and the terms of its full form, with repeats."""
    mem = cx.resolve_latest(mid)
    assert mem.data is not None
    return mem.head.current_version, terms(render_full(mem.data))


# --- what a format-16 store must hold --------------------------------------------------------


def check_lean_docs(cx: Cortex) -> None:
    """Every ``lex/d/`` record is exactly ``{0: 2, 1: version, 2: length, 3: docno}`` sealed
    (lexical.md §4), for exactly the live memories, naming the current version, the full
    form's number of terms and a number whose ``lex/i/`` entry names the memory."""
    assert cx.format.format_version >= 16  # and on, once later formats keep it
    assert "lexical-lean-documents" in cx.format.features
    items = dump(cx)
    docs = lexdocs(items)
    names = numbers(items)
    assert set(docs) == {m.bytes for m in live_ids(cx)}
    seen: set[int] = set()
    for id16, doc in docs.items():
        assert sorted(doc) == [0, 1, 2, 3], doc
        version, ts = document(cx, MemoryId(id16))
        assert doc == {0: 2, 1: version, 2: len(ts), 3: doc[3]}
        assert isinstance(doc[3], int) and 0 <= doc[3] < 2**32
        assert names[doc[3]] == id16
        assert doc[3] not in seen
        seen.add(doc[3])
    # the exact bytes: the map of four unsigned integers, canonical, sealed
    for id16, doc in docs.items():
        assert items[doc_key(items, id16)] == cbor_seal(doc)


def implied_index(cx: Cortex) -> dict[str, Any]:
    """The index the live memories imply (lexical.md §3, §4), in ``lexical.logical``'s shape."""
    postings: dict[tuple[str, bytes], tuple[int, int]] = {}
    df: Counter[str] = Counter()
    docs: dict[bytes, tuple[int, int]] = {}
    total = 0
    for mid in live_ids(cx):
        version, ts = document(cx, mid)
        dl = len(ts)
        total += dl
        docs[mid.bytes] = (version, dl)
        for t, tf in Counter(ts).items():
            postings[t, mid.bytes] = (tf, dl)
            df[t] += 1
    stats = lexical.LexStats(
        documents=len(docs),
        total_length=total,
        terms=len(df),
        postings=len(postings),
        next_docno=0,
    )
    return {"postings": postings, "df": dict(df), "docs": docs, "stats": stats}


def logical(cx: Cortex) -> dict[str, Any]:
    with cx._kv.read() as txn:
        return lexical.logical(txn)


def check_exact(cx: Cortex) -> None:
    """The index is exactly what the live memories imply, and the store verifies."""
    got = logical(cx)
    want = implied_index(cx)
    assert got["docs"] == want["docs"]
    assert got["postings"] == want["postings"]
    assert got["df"] == want["df"]
    assert got["stats"] == want["stats"]
    report = cx.verify()
    assert report.ok, report.problems[:5]


def check_rebuilt_equal(cx: Cortex) -> None:
    """The index equals the one ``reindex`` builds from the same memories (by id)."""
    before = logical(cx)
    assert cx.verify().ok
    cx.reindex_lexical()
    assert logical(cx) == before
    check_lean_docs(cx)
    assert cx.verify().ok


def fact(text: str, subject: str = "s") -> Fact:
    return Fact(statement=text, subject=subject, predicate="p")


def mid_of(n: int) -> MemoryId:
    return MemoryId(bytes([n]) * 16)


# --- 1. the record, on every path that writes one --------------------------------------------


def test_every_write_path_writes_the_lean_record(
    store_path: Any, place: Callable[[str], Any], tmp_path: Path
) -> None:
    a, b, c = mid_of(0xA0), mid_of(0x10), mid_of(0x70)
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        cx.write(fact("Zürich ferries ferries at dawn"), id=a)
        check_lean_docs(cx)
        cx.write_many(
            [
                NewMemory(data=fact("東京 and 大阪 by train", subject="rail"), id=b),
                NewMemory(data=Goal(statement="learn the tides", status=GoalStatus.ACTIVE), id=c),
            ]
        )
        check_lean_docs(cx)
        cx.update(a, fact("Zürich in winter"))
        cx.update(a, fact("ZURICH, once more: Straße Straße"))
        assert lexdocs(dump(cx))[a.bytes][1] == 3
        check_lean_docs(cx)
        cx.merge_lexical()
        check_lean_docs(cx)
        cx.tombstone(b, "gone")
        check_lean_docs(cx)
        assert cx.reindex_lexical() == 2
        items = dump(cx)
        # format 21: a rebuild keeps the numbers (the rows: a, then b and c in write order)
        assert {d[3]: m for m, d in lexdocs(items).items()} == {0: a.bytes, 2: c.bytes}
        check_lean_docs(cx)
        check_exact(cx)
        # export, then `cortex import` into a new store of the same engine
        bundle = tmp_path / "b.cbor"
        path = str(store_path)
    assert main(["--store", path, "--actor", "t", "export", str(bundle)]) == 0
    other = str(place("imported"))
    assert main(["--store", other, "--actor", "t", "import", str(bundle)]) == 0
    with Cortex.open(other, actor="t", as_owner=True) as cx:
        check_lean_docs(cx)
        check_exact(cx)
        assert lexdocs(dump(cx))[a.bytes][1] == 3
        cx.update(a, fact("after the import"))
        check_exact(cx)
        check_rebuilt_equal(cx)


def test_an_imported_format_14_bundle_is_indexed_lean(place: Callable[[str], Any]) -> None:
    where = str(place("from14"))
    assert main(["--store", where, "--actor", "t", "import", str(BUNDLE14)]) == 0
    with Cortex.open(where, actor="t", as_owner=True) as cx:
        assert len(lexdocs(dump(cx))) > 10
        check_lean_docs(cx)
        check_exact(cx)


def test_length_counts_every_term_with_repeats(store_path: Any) -> None:
    """§3: ``dl`` is the number of the full form's terms with repeats; version the current."""
    m = mid_of(0x42)
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        cx.write(Fact(statement="zzz", subject="q", predicate="q"), id=m)
        cx.update(m, Fact(statement="q", subject="q", predicate="q"))
        cx.update(m, Fact(statement="tea tea tea", subject="tea", predicate="tea"))
        # Fact: tea(tea)=tea tea tea / statement: tea tea tea / subject: tea / predicate: tea
        data = cx.resolve_latest(m).data
        assert data is not None
        full = render_full(data)
        assert full.split("\n")[1:] == ["statement: tea tea tea", "subject: tea", "predicate: tea"]
        assert terms(full).count("tea") == 10
        [doc] = lexdocs(dump(cx)).values()
        assert doc == {0: 2, 1: 3, 2: 14, 3: 0}
        assert dump(cx)[doc_key(dump(cx), m.bytes)] == seal(bytes.fromhex("a400020103020e0300"))


# --- 2. removal paths ------------------------------------------------------------------------

TEXTS = [
    "Ærøskøbing ferries ferries ferries",
    "東京 and 大阪 by the night train",
    "किताब पढ़ना running runs",
    "the harbour's tide tables, by heart",
    "x",
    "ﬁne ligatures ǅ and Straße STRASSE",
]


def _seeded(cx: Cortex) -> list[MemoryId]:
    ids = [mid_of(0x20 + i) for i in range(len(TEXTS))]
    cx.write_many(NewMemory(data=fact(t), id=m) for t, m in zip(TEXTS, ids, strict=True))
    cx.write(Event(kind="the keeper's retirement party"), id=mid_of(0x90))
    cx.merge_lexical()
    return ids


SCENARIOS: dict[str, Callable[[Cortex, list[MemoryId]], Any]] = {
    "update": lambda cx, ids: cx.update(ids[0], fact("Ærøskøbing in winter")),
    "update keeping every term": lambda cx, ids: cx.update(ids[4], fact("x")),
    "tombstone": lambda cx, ids: cx.tombstone(ids[1], "gone"),
    "purge": lambda cx, ids: cx.purge(ids[2], "erase"),
    "tombstone then purge": lambda cx, ids: (
        cx.tombstone(ids[3], "gone"),
        cx.purge(ids[3], "erase"),
    ),
    "update then purge": lambda cx, ids: (
        cx.update(ids[5], fact("ﬁne again")),
        cx.purge(ids[5], "erase"),
    ),
    "update then purge after a merge": lambda cx, ids: (
        cx.update(ids[0], fact("Ærøskøbing in spring")),
        cx.merge_lexical(),
        cx.purge(ids[0], "erase"),
    ),
    "many updates then tombstone": lambda cx, ids: (
        [cx.update(ids[1], fact(f"東京 round {i} {'京' * i}")) for i in range(5)],
        cx.tombstone(ids[1], "gone"),
    ),
    "update a tombstoned-neighbour": lambda cx, ids: (
        cx.tombstone(ids[2], "gone"),
        cx.update(ids[3], fact("किताब pages")),
    ),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_a_removal_leaves_the_index_a_rebuild_gives(store_path: Any, scenario: str) -> None:
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        ids = _seeded(cx)
        check_exact(cx)
        SCENARIOS[scenario](cx, ids)
        check_lean_docs(cx)
        check_exact(cx)
        check_rebuilt_equal(cx)
        # and the same again once everything is folded
        cx.merge_lexical()
        check_exact(cx)


class _Held:
    """A write that holds the group-commit leadership until released: the writes started
    meanwhile run together in the next commit (one LMDB transaction)."""

    def __init__(self, kv: LmdbKV) -> None:
        self.kv = kv
        self.inside = threading.Event()
        self.go = threading.Event()
        self.thread = threading.Thread(target=kv.write, args=(self._fn,))
        self.thread.start()
        assert self.inside.wait(30)

    def _fn(self, txn: Any) -> None:
        self.inside.set()
        assert self.go.wait(30)

    def release_when_queued(self, n: int) -> None:
        deadline = time.monotonic() + 30
        while len(self.kv._shared.commits.queue) < n:
            assert time.monotonic() < deadline
            time.sleep(0.002)
        self.go.set()
        self.thread.join(30)


def test_many_updates_of_one_memory_in_one_commit(tmp_path: Path) -> None:
    """Several updates of one memory in one transaction (group commit): each removal renders
    the version the previous one indexed, uncommitted yet; a tombstone and a purge close it."""
    with Cortex.open(tmp_path / "s", actor="t", as_owner=True) as cx:
        ids = _seeded(cx)
        target, other = ids[0], ids[1]
        assert isinstance(cx._kv, LmdbKV)
        before = cx._kv.last_txnid()
        held = _Held(cx._kv)
        out: list[Any] = []
        lock = threading.Lock()

        def upd(i: int) -> None:
            try:
                r: Any = cx.update(target, fact(f"Ærø round {i} " + "ferries " * i))
            except BaseException as exc:
                r = exc
            with lock:
                out.append(r)

        threads = [threading.Thread(target=upd, args=(i,)) for i in range(6)]

        def purge() -> None:
            try:
                # no erasure step: it commits once more per round that found stale
                # separators in the file (their number depends on the trees' shapes)
                cx.purge(other, "erase", scrub=False)
            except ErasurePendingError:
                pass  # committed; its erasure step in a group (test_purges_queued_together...)
            except BaseException as exc:
                with lock:
                    out.append(exc)

        threads.append(threading.Thread(target=purge))
        for t in threads:
            t.start()
        held.release_when_queued(len(threads))
        for t in threads:
            t.join(60)
        assert not any(isinstance(r, BaseException) for r in out), out
        assert cx._kv.last_txnid() - before <= 2  # one or two groups (a purge ends one)
        assert cx.resolve_latest(target).head.current_version == 7
        check_lean_docs(cx)
        check_exact(cx)
        check_rebuilt_equal(cx)


# --- 3. random sequences ---------------------------------------------------------------------

WORDS = [
    "tea",
    "teas",
    "Zürich",
    "ZURICH",
    "Straße",
    "東京",
    "大阪",
    "で",
    "किताब",
    "ferries",
    "running",
    "3.5",
    "rtx4090",
    "ǅemal",
    "ﬁne",
    "Ærø",
    "the",
    "a" * 70,
]

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("write"), texts),
        st.tuples(st.just("write_many"), st.lists(texts, min_size=1, max_size=4)),
        st.tuples(st.just("update"), st.integers(0, 50), texts),
        st.tuples(st.just("tombstone"), st.integers(0, 50)),
        st.tuples(st.just("purge"), st.integers(0, 50)),
        st.tuples(st.just("merge")),
    ),
    min_size=1,
    max_size=14,
)


@settings(max_examples=40)
@given(ops)
@example([("write", "tea"), ("update", 0, "tea tea"), ("purge", 0)])
@example([("write_many", ["東京", "東京 東京"]), ("update", 1, "で"), ("tombstone", 0)])
@example([("write", "a"), ("tombstone", 0), ("purge", 0), ("write", "a a")])
def test_random_sequences_keep_the_index_exact(sequence: list[tuple[Any, ...]]) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="t16-") as tmp,
        Cortex.open(Path(tmp) / "s", actor="t", as_owner=True) as cx,
    ):
        made: list[MemoryId] = []
        state: dict[MemoryId, str] = {}  # live, tombstoned, purged
        for op in sequence:
            kind = op[0]
            if kind == "write":
                r = cx.write(fact(op[1]))
                made.append(r.id)
                state[r.id] = "live"
            elif kind == "write_many":
                rs = cx.write_many([NewMemory(data=fact(t)) for t in op[1]])
                for r in rs:
                    made.append(r.id)
                    state[r.id] = "live"
            elif kind == "merge":
                cx.merge_lexical()
            elif made:
                m = made[op[1] % len(made)]
                if kind == "update" and state[m] == "live":
                    cx.update(m, fact(op[2]))
                elif kind == "tombstone" and state[m] == "live":
                    cx.tombstone(m, "gone")
                    state[m] = "tombstoned"
                elif kind == "purge" and state[m] != "purged":
                    cx.purge(m, "erase")
                    state[m] = "purged"
            check_exact(cx)
        check_lean_docs(cx)
        assert {MemoryId(k) for k in logical(cx)["docs"]} == {
            m for m, s in state.items() if s == "live"
        }
        check_rebuilt_equal(cx)


# --- 4. what a removal must refuse ------------------------------------------------------------


def _erased_value(cx: Cortex, m: MemoryId, n: int) -> bytes:
    """The value a purge leaves for version ``n`` of ``m``; the store is then put back."""
    items = dump(cx)
    cx.purge(m, "to see the erased record")
    erased = dump(cx)[version_key(items, m, n)]

    def restore(txn: Any) -> None:
        for k, _ in list(txn.scan(b"")):
            if bytes(k) not in items:
                txn.delete(bytes(k))
        for k, v in items.items():
            txn.put(k, v)

    cx._kv.write(restore)
    assert digest(dump(cx)) == digest(items)
    return erased


# The LexDoc names the version a removal renders. Where that version is not the current one
# the memory is whole and only the index is wrong: the error must name `cortex reindex`, and
# a rebuild repairs it. Where it is the current version, the memory itself is damaged (and
# other reads of the mutation may meet it first): an integrity error, nothing written.
HARMS = {
    "LexDoc names a version not stored": True,
    "LexDoc names an older damaged version": True,
    "LexDoc names an older erased version": True,
    "LexDoc names an older version of other terms": False,
    "LexDoc names an older version of other terms, folded": False,
    "current version deleted": False,
    "current version damaged": False,
    "current version erased": False,
}
REMOVALS = ["update", "tombstone", "purge"]
HARM_PARAMS = list(HARMS)


def _remove(cx: Cortex, m: MemoryId, removal: str) -> None:
    if removal == "update":
        cx.update(m, fact("compass changed"))
    elif removal == "tombstone":
        cx.tombstone(m, "gone")
    else:
        cx.purge(m, "erase")


@pytest.mark.parametrize("removal", REMOVALS)
@pytest.mark.parametrize("harm", HARM_PARAMS)
def test_a_version_that_cannot_be_rendered_fails_the_removal(
    store_path: Any, harm: str, removal: str
) -> None:
    """§5: a version to render that is missing, damaged or erased fails the mutation with an
    integrity error naming ``cortex reindex``, and so does a posting to remove that is not
    there; nothing is written."""
    m, other = mid_of(0x33), mid_of(0x44)
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        cx.write(fact("compass needle north"), id=other)
        cx.write(fact("compass rose harbour"), id=m)
        cx.update(m, fact("compass rose, twice"))  # versions 1 and 2; the LexDoc names 2
        if harm.endswith("folded"):
            cx.merge_lexical()
        older = harm.startswith("LexDoc names an older")
        erased = b""
        if harm.endswith("erased version"):
            erased = _erased_value(cx, m, 1)
        elif harm == "current version erased":
            erased = _erased_value(cx, m, 2)
        items = dump(cx)
        doc = lexdocs(items)[m.bytes]
        assert doc[1] == 2
        vkey = version_key(items, m, 1 if older else 2)
        assert vkey in items
        flipped = bytearray(items[vkey])
        flipped[len(flipped) // 2] ^= 0x20

        def damage(txn: Any) -> None:
            if harm == "LexDoc names a version not stored":
                txn.put(doc_key(items, m.bytes), cbor_seal({**doc, 1: 7}))
                return
            if older:
                txn.put(doc_key(items, m.bytes), cbor_seal({**doc, 1: 1}))
            if harm == "current version deleted":
                txn.delete(vkey)
            elif harm.endswith("damaged version") or harm == "current version damaged":
                txn.put(vkey, bytes(flipped))
            elif erased:
                txn.put(vkey, erased)

        cx._kv.write(damage)
        damaged = digest(dump(cx))
        with pytest.raises(IntegrityError, match="cortex reindex" if HARMS[harm] else None):
            _remove(cx, m, removal)
        assert digest(dump(cx)) == damaged
        if harm.startswith("LexDoc"):
            # the memory itself is whole: verify names the record, a rebuild repairs the index
            # and the removal works
            report = cx.verify()
            shown = f"lex/d/{int.from_bytes(rows(dump(cx))[m.bytes], 'big')}"
            assert any(p.record == shown for p in report.problems), report.problems
            if "damaged" not in harm and "erased" not in harm:
                cx.reindex_lexical()
                _remove(cx, m, removal)
                check_exact(cx)


BAD_DOCS: dict[str, Callable[[dict[int, Any], list[str]], bytes]] = {
    # formats 14 and 15's record (schema version 1, with its terms) in a format-16 store
    "schema 1 with terms": lambda d, ts: cbor_seal(
        {0: 1, 1: d[1], 2: d[2], 3: sorted(set(ts), key=str.encode), 4: d[3]}
    ),
    "schema 1 without terms": lambda d, ts: cbor_seal({0: 1, 1: d[1], 2: d[2], 4: d[3]}),
    "schema 3": lambda d, ts: cbor_seal({**d, 0: 3}),
    "no docno": lambda d, ts: cbor_seal({0: 2, 1: d[1], 2: d[2]}),
    "a terms key 4 added": lambda d, ts: cbor_seal({**d, 4: sorted(set(ts))}),
    "version 0": lambda d, ts: cbor_seal({**d, 1: 0}),
    "not canonical": lambda d, ts: seal(
        b"\xa4\x00\x02\x01"
        + b"\x18"
        + bytes([d[1]])
        + b"\x02"
        + cbor2.dumps(d[2])
        + b"\x03"
        + cbor2.dumps(d[3])
    ),
    "bad CRC": lambda d, ts: cbor_seal(d)[:-1] + bytes([cbor_seal(d)[-1] ^ 1]),
}


@pytest.mark.parametrize("bad", list(BAD_DOCS))
def test_a_lexdoc_not_of_schema_2_is_damage(store_path: Any, bad: str) -> None:
    """§4: a format-16 store MUST NOT hold a schema-1 LexDoc (verify reports it); a damaged
    LexDoc fails the mutation that reads it (§5), nothing written."""
    m = mid_of(0x55)
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        cx.write(fact("lantern light"), id=mid_of(0x11))
        cx.write(fact("lantern oil and wick"), id=m)
        cx.merge_lexical()
        items = dump(cx)
        doc = lexdocs(items)[m.bytes]
        _, ts = document(cx, m)
        value = BAD_DOCS[bad](doc, ts)
        assert value != items[doc_key(items, m.bytes)]
        cx._kv.write(lambda txn: txn.put(doc_key(items, m.bytes), value))
        report = cx.verify()
        assert not report.ok
        shown = f"lex/d/{int.from_bytes(rows(dump(cx))[m.bytes], 'big')}"
        assert any(p.record == shown for p in report.problems), report.problems
        damaged = digest(dump(cx))
        if bad == "not canonical":
            # the values are unambiguous (a bit flip fails the CRC first, storage.md §3): a
            # removal may read them or refuse them, but what it leaves must be exact
            try:
                cx.update(m, fact("lantern changed"))
            except IntegrityError:
                assert digest(dump(cx)) == damaged
            else:
                check_lean_docs(cx)
                check_exact(cx)
            return
        for mutate in (
            lambda: cx.update(m, fact("lantern changed")),
            lambda: cx.tombstone(m, "gone"),
            lambda: cx.purge(m, "erase"),
        ):
            with pytest.raises(IntegrityError):
                mutate()
            assert digest(dump(cx)) == damaged
        cx.reindex_lexical()
        check_lean_docs(cx)
        check_exact(cx)


# --- 5. the migration from format 15 ---------------------------------------------------------


def _copy15(tmp_path: Path, store_path: Any) -> Any:
    dest = tmp_path / "v15"
    dest.mkdir()
    shutil.copy(FIXTURE15 / "data.mdb", dest / "data.mdb")
    if not isinstance(store_path, str):
        return dest
    src = LmdbKV(dest, readonly=True, create=False)
    try:
        copy_kv(src, store_path)
    finally:
        src.close()
    return store_path


def _format15_docs(items: dict[bytes, bytes]) -> dict[bytes, dict[int, Any]]:
    docs = lexdocs(items)
    for doc in docs.values():
        assert doc[0] == 1 and sorted(doc) in ([0, 1, 2, 3, 4], [0, 1, 2, 4])
    return docs


def test_migration_rewrites_every_lexdoc(tmp_path: Path, store_path: Any) -> None:
    from cortex.transfer import migrate as M

    where = _copy15(tmp_path, store_path)
    before = dump_at(where)
    assert canonical(before[b"meta/format"])[1] == 15
    old = _format15_docs(before)
    assert len(old) > 30
    assert any(sorted(d) == [0, 1, 2, 3, 4] for d in old.values())

    dry = M.migrate(where, to=16, dry_run=True)
    assert dump_at(where) == before
    [step] = dry.steps
    assert step.step.name == MIGRATION and not step.applied

    report = M.migrate(where, to=16)
    [done] = report.steps
    assert done.step.name == MIGRATION and done.applied
    after = dump_at(where)
    live = [m for m in old]
    assert done.records == step.records == len(live)
    # every record rewritten: the same version, length and number, without the terms
    new = lexdocs(after)
    assert new == {m: {0: 2, 1: d[1], 2: d[2], 3: d[4]} for m, d in old.items()}
    for m, d in new.items():
        assert after[LEX_D + m] == cbor_seal(d)
    # nothing else changed but the format, the migrations record and one journal entry
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    others = {k for k in changed if not k.startswith(LEX_D)}
    assert {k for k in others if not k.startswith(b"j/")} == {b"meta/format", b"meta/migrations"}
    assert len([k for k in others if k.startswith(b"j/")]) == 1
    applied = canonical(after[b"meta/migrations"])[1]
    assert applied[-1][1] == MIGRATION and applied[-1][6] == len(live)
    assert (applied[-1][2], applied[-1][3]) == (15, 16)
    # a second run changes nothing
    assert M.migrate(where, to=16).steps == ()
    assert dump_at(where) == after
    M.migrate(where)  # on to the newest format
    with Cortex.open(where, actor="checker", as_owner=True) as cx:
        assert {m.bytes for m in live_ids(cx)} == set(new)
        check_lean_docs(cx)
        check_exact(cx)
        # the fixture's memories: removal renders the indexed version of a migrated store
        rng = random.Random(16)
        ids = sorted(
            (m for m in live_ids(cx) if cx.resolve_latest(m).head.type is MemoryType.FACT),
            key=lambda m: m.bytes,
        )
        rng.shuffle(ids)
        cx.update(ids[0], fact("Ærøskøbing after the migration"))
        cx.tombstone(ids[1], "gone")
        cx.purge(ids[2], "erase")
        cx.update(ids[3], fact("東京 again"))
        cx.purge(ids[3], "erase again")
        check_exact(cx)
        check_rebuilt_equal(cx)


def test_a_failed_migration_leaves_format_15(tmp_path: Path, store_path: Any) -> None:
    from cortex.transfer import migrate as M

    where = _copy15(tmp_path, store_path)
    before = dump_at(where)
    calls: list[Any] = []

    class Stop(Exception):
        pass

    def progress(name: str, done: int, total: int) -> None:
        calls.append((name, done, total))
        if done > 0:
            raise Stop

    with pytest.raises(Stop):
        M.migrate(where, to=16, progress=progress)
    assert calls and calls[-1][0] == MIGRATION
    assert dump_at(where) == before
    report = M.migrate(where, to=16)
    assert [s.step.name for s in report.steps] == [MIGRATION]
    M.migrate(where)  # on to the newest format
    with Cortex.open(where, actor="checker", as_owner=True) as cx:
        check_lean_docs(cx)
        check_exact(cx)


_CHILD = """
import sys, time
from pathlib import Path
from cortex.transfer import migrate as M
marker = Path(sys.argv[2])
def progress(name, done, total):
    if done > 0 and not marker.exists():
        # written whole, then renamed into place: the parent never reads a marker half made
        part = marker.with_suffix(".part")
        part.write_text(name)
        part.rename(marker)
        time.sleep(120)
M.migrate(sys.argv[1], to=16, progress=progress)
"""


def test_a_killed_migration_leaves_format_15(tmp_path: Path, store_path: Any) -> None:
    """SIGKILL mid-migration (inside its transaction): the store is format 15 as it was, and a
    second run completes (storage.md §5: one transaction)."""
    from cortex.transfer import migrate as M

    where = _copy15(tmp_path, store_path)
    before = dump_at(where)
    marker = tmp_path / "inside"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(where), str(marker)], env=env)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert child.poll() is None, "the migration ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert marker.read_text() == MIGRATION
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(30)
    assert child.returncode == -signal.SIGKILL
    assert dump_at(where) == before
    report = M.migrate(where, to=16)
    assert [s.step.name for s in report.steps] == [MIGRATION]
    M.migrate(where)  # on to the newest format
    with Cortex.open(where, actor="checker", as_owner=True) as cx:
        check_lean_docs(cx)
        check_exact(cx)


def test_migrations_from_formats_13_and_14_count_what_they_apply(
    tmp_path: Path, store_path: Any
) -> None:
    """A dry run counts what the run applies, step by step; 0015 after 0013's rebuild (which
    writes lean records already) counts the live memories and leaves them alone."""
    from cortex.transfer import migrate as M

    for fmt in (13, 14):
        src = ROOT / "tests" / "data" / f"format{fmt}.cortex"
        dest = tmp_path / f"v{fmt}"
        dest.mkdir()
        shutil.copy(src / "data.mdb", dest / "data.mdb")
        where: Any = dest
        if isinstance(store_path, str):
            kv = LmdbKV(dest, readonly=True, create=False)
            try:
                where = store_path + f"_{fmt}"
                copy_kv(kv, where)
            finally:
                kv.close()
        before = dump_at(where)
        dry = M.migrate(where, to=16, dry_run=True)
        assert dump_at(where) == before
        done = M.migrate(where, to=16)
        assert [s.step.name for s in done.steps] == [s.step.name for s in dry.steps]
        assert [s.records for s in done.steps] == [s.records for s in dry.steps]
        assert done.steps[-1].step.name == MIGRATION and done.to_version == 16
        M.migrate(where)  # on to the newest format
        with Cortex.open(where, actor="checker", as_owner=True) as cx:
            assert done.steps[-1].records == len(live_ids(cx))
            check_lean_docs(cx)
            check_exact(cx)


def _format15_copy_with(tmp_path: Path, store_path: Any, harm: str) -> tuple[Any, bytes]:
    where = _copy15(tmp_path, store_path)
    items = dump_at(where)
    docs = _format15_docs(items)
    key = LEX_D + sorted(docs)[len(docs) // 2]
    d = docs[key[len(LEX_D) :]]
    if harm == "lean already":
        value = cbor_seal({0: 2, 1: d[1], 2: d[2], 3: d[4]})
    elif harm == "bad CRC":
        value = items[key][:-1] + bytes([items[key][-1] ^ 1])
    elif harm == "no docno":
        value = cbor_seal({k: v for k, v in d.items() if k != 4})
    elif harm == "schema 3":
        value = cbor_seal({**d, 0: 3})
    else:
        raise AssertionError(harm)
    kv = open_kv(where, create=False)
    try:
        kv.write(lambda txn: txn.put(key, value))
    finally:
        kv.close()
    return where, key


def test_migration_leaves_a_lean_record_alone(tmp_path: Path, store_path: Any) -> None:
    from cortex.transfer import migrate as M

    where, key = _format15_copy_with(tmp_path, store_path, "lean already")
    before = dump_at(where)
    dry = M.migrate(where, to=16, dry_run=True)
    done = M.migrate(where, to=16)
    after = dump_at(where)
    assert after[key] == before[key]
    M.migrate(where)  # on to the newest format
    with Cortex.open(where, actor="checker", as_owner=True) as cx:
        live = len(live_ids(cx))
        check_lean_docs(cx)
        check_exact(cx)
    # storage.md §5: "its records count is the number of live memories (one record each)"
    assert dry.steps[0].records == done.steps[0].records == live


@pytest.mark.parametrize("harm", ["bad CRC", "no docno", "schema 3"])
def test_migration_stops_at_a_record_that_does_not_decode(
    tmp_path: Path, store_path: Any, harm: str
) -> None:
    from cortex.transfer import migrate as M

    where, _ = _format15_copy_with(tmp_path, store_path, harm)
    before = dump_at(where)
    with pytest.raises(IntegrityError):
        M.migrate(where, to=16)
    assert dump_at(where) == before


LEXDOC_WRONG = ["length one more", "length one less", "older version of the same terms", "docno"]


@pytest.mark.parametrize("wrong", LEXDOC_WRONG)
def test_verify_compares_the_lexdoc_with_the_full_form(store_path: Any, wrong: str) -> None:
    """§7: every live memory has exactly the LexDoc its full form implies (version, length)."""
    m = mid_of(0x66)
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        cx.write(fact("kettle boils water"), id=mid_of(0x01))
        cx.write(fact("teapot water water"), id=m)
        cx.update(m, fact("water water teapot"))  # the same terms, version 2
        cx.merge_lexical()
        assert cx.verify().ok
        doc = lexdocs(dump(cx))[m.bytes]
        bad = {
            "length one more": {**doc, 2: doc[2] + 1},
            "length one less": {**doc, 2: doc[2] - 1},
            "older version of the same terms": {**doc, 1: 1},
            "docno": {**doc, 3: doc[3] + 5},
        }[wrong]
        dkey = doc_key(dump(cx), m.bytes)
        cx._kv.write(lambda txn: txn.put(dkey, cbor_seal(bad)))
        report = cx.verify()
        assert not report.ok
        # format 21: a wrong number shows as the LexDoc's (its number is not its row)
        named = (f"lex/d/{int.from_bytes(rows(dump(cx))[m.bytes], 'big')}",)
        assert any(p.record.startswith(named) for p in report.problems), report.problems
        cx.reindex_lexical()
        check_exact(cx)


def _grouped(
    cx: Cortex, calls: list[Callable[[], Any]], allowed: tuple[type[BaseException], ...] = ()
) -> tuple[list[Any], int]:
    """Run ``calls`` from threads queued behind a held commit; their outcomes and the number
    of commits made. The group runs them in one transaction, in an order of its choosing
    (the thread that leads runs its own first), so a call may meet what another did:
    ``allowed`` are the errors that may then follow."""
    assert isinstance(cx._kv, LmdbKV)
    first = cx._kv.last_txnid()
    held = _Held(cx._kv)
    out: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            out[i] = calls[i]()
        except BaseException as exc:
            out[i] = exc

    threads = []
    for i in range(len(calls)):
        t = threading.Thread(target=run, args=(i,))
        threads.append(t)
        t.start()
        deadline = time.monotonic() + 30
        while len(cx._kv._shared.commits.queue) < i + 1:
            assert time.monotonic() < deadline
            time.sleep(0.002)
    held.release_when_queued(len(calls))
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    errors = [
        (i, r)
        for i, r in enumerate(out)
        if isinstance(r, BaseException) and not isinstance(r, allowed)
    ]
    assert not errors, errors
    return out, cx._kv.last_txnid() - first


def test_writes_updates_and_purges_of_one_memory_in_one_commit(tmp_path: Path) -> None:
    """A memory updated three times in one transaction (each removal after the first renders
    the version the one before wrote, not committed yet), others updated and tombstoned; then
    updates and purges of the same memories queued together (a purge ends its group)."""
    with Cortex.open(tmp_path / "s", actor="t", as_owner=True) as cx:
        ids = _seeded(cx)
        x, y, z = ids[0], ids[1], mid_of(0xEE)
        cx.write(fact("Ærø new ferries"), id=z)  # (an update checks its memory before it queues)
        _, commits = _grouped(
            cx,
            [
                lambda: cx.write(fact("Ærø another ferries"), id=mid_of(0xEF)),
                lambda: cx.update(z, fact("Ærø newer ferries ferries")),
                lambda: cx.update(z, fact("東京 newest")),
                lambda: cx.update(z, fact("東京 newest 京 京")),
                lambda: cx.update(y, fact("東京 大阪 東京")),
                lambda: cx.tombstone(y, "gone"),
            ],
            allowed=(TombstonedError,),  # the update of y, when the tombstone ran first
        )
        assert commits == 1  # the held write changes nothing: the group is the one commit
        assert cx.resolve_latest(z).head.current_version == 4
        assert y not in live_ids(cx)
        check_lean_docs(cx)
        check_exact(cx)
        _grouped(
            cx,
            [
                lambda: cx.update(x, fact("Ærøskøbing once more")),
                lambda: cx.update(z, fact("Ærø last")),
                lambda: cx.purge(x, "erase"),
                lambda: cx.update(z, fact("Ærø after the purge")),
                lambda: cx.purge(y, "erase"),
                lambda: cx.purge(z, "erase"),
            ],
            # an update that meets its memory purged; a purge whose erasure step fails after
            # the commit (test_purges_queued_together_erase_their_bytes: not the index's)
            allowed=(TombstonedError, ErasurePendingError),
        )
        assert not live_ids(cx) & {x, y, z}
        check_lean_docs(cx)
        check_exact(cx)
        check_rebuilt_equal(cx)


def test_purges_queued_together_erase_their_bytes(tmp_path: Path) -> None:
    """Purges of different memories queued together by threads of one process all commit and
    all complete their erasure step (a purge's step once read LMDB's environment while another
    thread's write renewed it after an erasure: 'closed/deleted/dropped object')."""
    for trial in range(40):
        with Cortex.open(tmp_path / f"s{trial}", actor="t", as_owner=True) as cx:
            ids = [mid_of(0x20 + i) for i in range(3)]
            for m in ids:
                cx.write(fact("note"), id=m)
            _grouped(cx, [partial(cx.purge, m, "erase") for m in ids])
            assert not live_ids(cx) & set(ids)
            check_exact(cx)


# --- every type's golden cases, and caller forms ---------------------------------------------


def _golden_cases() -> dict[MemoryType, list[dict[str, Any]]]:
    out: dict[MemoryType, list[dict[str, Any]]] = {}
    for f in sorted((ROOT / "specs" / "vectors").glob("*.json")):
        doc = json.loads(f.read_text(encoding="utf-8"))
        if "type_code" in doc:
            out[MemoryType(doc["type_code"])] = doc["cases"]
    return out


def test_every_golden_case_is_indexed_and_removed_by_its_full_form(store_path: Any) -> None:
    """§3: the document is the full form, whatever the type and values (times, floats, costs,
    maps, enums): each LexDoc's length is the number of terms of the vector's own ``full``
    text, and the removal of each renders it again (an update to the next case of its type,
    then tombstones and purges) leaving the index exact."""
    cases = _golden_cases()
    assert len(cases) == 9
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        made: list[tuple[MemoryId, list[dict[str, Any]], int]] = []
        n = 0
        for mtype, cs in cases.items():
            batch = []
            for i, case in enumerate(cs):
                n += 1
                m = MemoryId(n.to_bytes(2, "big") * 8)
                data = decode_data(mtype, bytes.fromhex(case["cbor_hex"]))
                batch.append(NewMemory(data=data, id=m, supersede=False))
                made.append((m, cs, i))
            cx.write_many(batch)
        docs = lexdocs(dump(cx))
        for m, cs, i in made:
            assert docs[m.bytes][1] == 1
            assert docs[m.bytes][2] == len(terms(cs[i]["full"])), cs[i]["name"]
        check_lean_docs(cx)
        check_exact(cx)
        for m, cs, i in made:
            nxt = cs[(i + 1) % len(cs)]
            mtype = cx.resolve_latest(m).head.type
            cx.update(m, decode_data(mtype, bytes.fromhex(nxt["cbor_hex"])), supersede=False)
        docs = lexdocs(dump(cx))
        for m, cs, i in made:
            assert docs[m.bytes][1] == 2
            assert docs[m.bytes][2] == len(terms(cs[(i + 1) % len(cs)]["full"]))
        check_exact(cx)
        for k, (m, _, _) in enumerate(made):
            if k % 3 == 0:
                cx.tombstone(m, "gone")
            if k % 10 == 1:  # a purge per type or so (each is an erasure step)
                cx.purge(m, "erase")
        check_lean_docs(cx)
        check_exact(cx)
        check_rebuilt_equal(cx)


def test_caller_forms_play_no_part(store_path: Any) -> None:
    """§3: "Caller-supplied forms play no part": the document is the full form of the data."""
    m, k = mid_of(0x77), mid_of(0x78)
    override = Forms(short="zqshort override", medium="zqmedium override text")
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        cx.write(fact("plain words here"), id=m, forms=override)
        cx.write_many([NewMemory(data=fact("other plain words"), id=k, forms=override)])
        check_lean_docs(cx)
        check_exact(cx)
        cx.update(m, fact("changed words"), forms=Forms(short="zqshort two", medium="zqmedium two"))
        cx.update(k, fact("changed again"))
        check_exact(cx)
        assert not any(t.startswith("zq") for t, _ in logical(cx)["postings"])
        cx.tombstone(m, "gone")
        cx.purge(k, "erase")
        check_exact(cx)
        check_rebuilt_equal(cx)
