"""Corruption: damage stored records and the data file; verify names it, reads refuse it."""

from __future__ import annotations

import itertools
import json
import random
import shutil
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

import cbor2
import pytest

from cortex import (
    Constraint,
    ConstraintSource,
    Cortex,
    CortexError,
    EdgeType,
    Fact,
    Follow,
    IntegrityError,
    MemoryId,
    MemoryType,
    ObjKind,
    Outcome,
    Polarity,
    Preference,
    Query,
    Strength,
    Uri,
    Verb,
)
from cortex.engine.store import _seal
from cortex.index.postings import block_encode, entry_tail
from cortex.model.codec import to_micros
from cortex.model.records import FrameRef
from cortex.storage.keys import (
    edge_from_key,
    edge_to_key,
    frame_key,
    head_key,
    journal_key,
    lex_doc_key,
    lex_segment_key,
    lex_term_key,
    meta_key,
    pin_key,
    posting_key,
    salience_key,
    show_key,
    tag_key,
    type_key,
    version_key,
)
from cortex.storage.kv import LmdbKV, WriteTxn
from cortex.storage.kv import unseal as _unseal
from tests import rows as R
from tests import workers

ACTOR = "builder"


class Small(NamedTuple):
    """A small store: ``a`` has two versions and an edge to ``b``; ``c`` is left untouched."""

    path: Path
    a: MemoryId
    b: MemoryId
    c: MemoryId
    created_a: int


def _build(path: Path) -> Small:
    with Cortex.open(path, actor=ACTOR) as cx:
        a = cx.write(
            Fact(statement="alpha statement one", subject="user", predicate="likes"),
            tags=["alpha", "shared"],
            frames=[FrameRef(verb=Verb.FIND, obj_kind=ObjKind.SERVICE, obj_ref="svc://a")],
        )  # j/2
        b = cx.write(Fact(statement="beta", subject="user", predicate="knows"))  # j/3
        c = cx.write(Preference(topic="tea", polarity=Polarity.PREFER), tags=["shared"])  # j/4
        cx.update(a, Fact(statement="alpha statement two", subject="user", predicate="likes"))
        cx.add_edge(a, EdgeType.REFERENCES, b)  # j/6
        cx.update_head(c, importance=8)  # j/7
        cx.merge_lexical()  # the postings in their blocks (the segments' damage: further down)
        assert cx.verify().ok
        created = to_micros(cx.resolve_latest(a).head.created_at)
    return Small(path, a.id, b.id, c.id, created)


def _row(path: Path, mid: MemoryId) -> int:
    """The row of ``mid`` in the (closed) store at ``path`` (format 21: its keys by row)."""
    kv = LmdbKV(path, check_pages=False)
    try:
        with kv.read() as txn:
            return R.row(txn, mid)
    finally:
        kv.close()


def _edit(path: Path, key: bytes, change: Callable[[bytes | None], bytes | None]) -> None:
    """Rewrite (or with ``None``, delete) the value under ``key`` through the KV layer (in the
    database its keyspace lives in), checks bypassed."""
    kv = LmdbKV(path, check_pages=False)

    def edit(txn: WriteTxn) -> None:
        new = change(txn.get(key))
        if new is None:
            assert txn.delete(key), f"no key {key!r} to delete"
        else:
            txn.put(key, new)

    try:
        kv.write(edit)
    finally:
        kv.close()


def _flip(value: bytes | None, at: int | None = None) -> bytes:
    assert value is not None
    i = len(value) // 2 if at is None else at
    return value[:i] + bytes([value[i] ^ 0x01]) + value[i + 1 :]


def _flip_resealed(needle: bytes) -> Callable[[bytes | None], bytes]:
    """Change one byte inside ``needle`` in the payload and recompute the CRC."""

    def change(value: bytes | None) -> bytes:
        assert value is not None
        payload = value[:-4]
        i = payload.index(needle)
        changed = payload[:i] + bytes([payload[i] ^ 0x01]) + payload[i + 1 :]
        cbor2.loads(changed)  # still well-formed: only the hash or the chain can tell
        return _seal(changed)

    return change


def _problems(cx: Cortex) -> dict[str, list[str]]:
    report = cx.verify()
    assert not report.ok
    out: dict[str, list[str]] = {}
    for p in report.problems:
        out.setdefault(p.record, []).append(p.what)
    return out


def _uri(mid: MemoryId, n: int) -> Uri:
    return Uri(MemoryType.FACT, mid, n)


@pytest.fixture
def small(tmp_path: Path) -> Small:
    return _build(tmp_path / "store")


def _assert_intact(cx: Cortex, s: Small) -> None:
    """Damage to one record leaves the others readable."""
    assert cx.resolve_latest(s.c).data == Preference(topic="tea", polarity=Polarity.PREFER)


def test_head_flip(small: Small) -> None:
    _edit(small.path, head_key(_row(small.path, small.a)), _flip)
    with Cortex.open(small.path, actor=ACTOR) as cx:
        problems = _problems(cx)
        assert "checksum" in problems[f"m/{R.of_kv(cx._kv, small.a)}"][0]
        for read in (
            lambda: cx.resolve_latest(small.a),
            lambda: cx.resolve(_uri(small.a, 1)),
            lambda: cx.history(small.a),
        ):
            with pytest.raises(IntegrityError):
                read()
        _assert_intact(cx, small)


def test_version_payload_flip(small: Small) -> None:
    _edit(small.path, version_key(_row(small.path, small.a), 1), _flip)
    with Cortex.open(small.path, actor=ACTOR) as cx:
        assert "checksum" in _problems(cx)[f"mv/{R.of_kv(cx._kv, small.a)}/1"][0]
        with pytest.raises(IntegrityError):
            cx.resolve(_uri(small.a, 1))
        with pytest.raises(IntegrityError):
            cx.history(small.a)
        assert cx.resolve_latest(small.a).version.version == 2  # the other version is whole
        _assert_intact(cx, small)


def test_version_data_flip_caught_by_content_hash(small: Small) -> None:
    """A version changed and resealed (a valid CRC: only a bug or a malicious writer makes one).

    The hot reads check each value's CRC, not the sha256 of the data (``specs/storage.md``,
    "What a read checks"): they return what is stored. ``verify`` and ``history`` (the audit
    read) check the sha256 and catch it.
    """
    key = version_key(_row(small.path, small.a), 2)
    _edit(small.path, key, _flip_resealed(b"alpha statement two"))
    with Cortex.open(small.path, actor=ACTOR) as cx:
        assert _problems(cx)[f"mv/{R.of_kv(cx._kv, small.a)}/2"] == ["data does not match its hash"]
        with pytest.raises(IntegrityError, match="hash"):
            cx.history(small.a)
        for read in (
            lambda: cx.resolve_latest(small.a),
            lambda: cx.resolve(_uri(small.a, 2)),
            lambda: cx.find(Query(tags=["alpha"], limit=10)).memories[0],
        ):
            m = read()
            assert m.id == small.a
            assert m.data.statement == "`lpha statement two"  # type: ignore[union-attr]
        assert cx.resolve(_uri(small.a, 1)).data.statement == "alpha statement one"  # type: ignore[union-attr]
        _assert_intact(cx, small)


def test_a_stray_version_past_the_heads_is_checked_where_the_spec_says(
    small: Small, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A version stored past the one its head points at (``specs/storage.md``, "What a read
    checks"): ``verify`` reports it and ``history`` (which reads every version) refuses it;
    ``resolve_latest``, ``resolve`` and a query read the version they name by its key and return
    it (the C path and the Python path alike); ``resolve_as_of``, which reads the range, refuses
    this one (a record of version 2 under version 3's key)."""
    import cortex.engine.store as engine_store

    with Cortex.open(small.path, actor=ACTOR) as cx, cx._kv.read() as txn:
        v2 = txn.get(R.version_key(txn, small.a, 2))
    _edit(small.path, version_key(_row(small.path, small.a), 3), lambda _: v2)
    with Cortex.open(small.path, actor=ACTOR) as cx:
        assert (
            f"{small.a} points at versions 1..2 but the store holds [1, 2, 3]"
            in _problems(cx)[f"m/{R.of_kv(cx._kv, small.a)}"]
        )
        for refused in (
            lambda: cx.resolve_as_of(small.a, datetime.now(UTC) + timedelta(days=1)),
            lambda: cx.history(small.a),
        ):
            with pytest.raises(IntegrityError):
                refused()
        assert cx.resolve(_uri(small.a, 2)).data.statement == "alpha statement two"  # type: ignore[union-attr]
        [m] = [m for m in cx.find(Query(tags=["alpha"], limit=10)).memories if m.id == small.a]
        assert m.version.version == 2
        for read_latest, read in ((True, True), (False, True), (False, False)):
            if not read_latest:
                monkeypatch.setattr(engine_store, "_READ_LATEST", None)
            if not read:
                monkeypatch.setattr(engine_store, "_READ", None)
            m = cx.resolve_latest(small.a)
            assert m.version.version == 2, (read_latest, read)
            assert m.data.statement == "alpha statement two"  # type: ignore[union-attr]


def test_version_payload_flip_refused_by_every_read(small: Small) -> None:
    """Damage a CRC catches (a flipped byte, not resealed) still fails every read of it."""
    _edit(small.path, version_key(_row(small.path, small.a), 2), _flip)
    with Cortex.open(small.path, actor=ACTOR) as cx:
        assert "checksum" in _problems(cx)[f"mv/{R.of_kv(cx._kv, small.a)}/2"][0]
        for read in (
            lambda: cx.resolve_latest(small.a),
            lambda: cx.resolve(_uri(small.a, 2)),
            lambda: cx.history(small.a),
            lambda: cx.find(Query(tags=["alpha"], limit=10)),
        ):
            with pytest.raises(IntegrityError, match="checksum"):
                read()
        _assert_intact(cx, small)


@pytest.mark.parametrize("half", ["from", "to"])
def test_edge_flip(small: Small, half: str) -> None:
    et = EdgeType.REFERENCES
    key = (
        edge_from_key(small.a, et, small.b) if half == "from" else edge_to_key(small.b, et, small.a)
    )
    _edit(small.path, key, _flip)
    with Cortex.open(small.path, actor=ACTOR) as cx:
        problems = _problems(cx)
        assert (
            "e/to half is missing or differs" in problems[f"edge {small.a} references {small.b}"][0]
        )
        if half == "from":
            assert "checksum" in problems[key.hex()][0]
        for read in (
            lambda: cx.edges(small.a),
            lambda: cx.edges(small.b, direction="in"),
            lambda: cx.edges(small.a, direction="both"),
        ):
            with pytest.raises(IntegrityError):
                read()
        _assert_intact(cx, small)


def test_edge_to_half_deleted(small: Small) -> None:
    _edit(small.path, edge_to_key(small.b, EdgeType.REFERENCES, small.a), lambda _: None)
    with Cortex.open(small.path, actor=ACTOR) as cx:
        problems = _problems(cx)
        assert problems == {
            f"edge {small.a} references {small.b}": ["its e/to half is missing or differs"]
        }
        with pytest.raises(IntegrityError):
            cx.edges(small.a)


def test_journal_flip(small: Small) -> None:
    _edit(small.path, journal_key(3), _flip)
    with Cortex.open(small.path, actor=ACTOR) as cx:
        assert "checksum" in _problems(cx)["j/3"][0]
        for read in (
            lambda: list(cx.journal()),
            lambda: list(cx.journal(3)),
            lambda: list(cx.journal(4)),  # the link from j/3 to j/4 is checked too
            lambda: list(cx.journal(7, reverse=True)),
        ):
            with pytest.raises(IntegrityError):
                read()
        assert [e.seq for e in cx.journal(5)] == [5, 6, 7]  # entries after the next one are fine
        _assert_intact(cx, small)


def test_journal_flip_with_a_fresh_crc_breaks_the_chain(small: Small) -> None:
    _edit(small.path, journal_key(3), _flip_resealed(ACTOR.encode()))
    with Cortex.open(small.path, actor=ACTOR) as cx:
        # the entry itself passes its checksum and decodes: the next link gives it away
        problems = _problems(cx)
        assert problems == {"j/4": ["chain broken: prev is not the hash of the previous entry"]}
        for read in (
            lambda: list(cx.journal()),
            lambda: list(cx.journal(3)),
            lambda: list(cx.journal(4)),
        ):
            with pytest.raises(IntegrityError, match="chain"):
                read()
        _assert_intact(cx, small)


def test_meta_format_flip(small: Small) -> None:
    key = meta_key("format")
    with Cortex.open(small.path, actor=ACTOR) as cx:
        # the store is open, so damage it from another process (never open an LMDB
        # environment twice in one process) and verify sees it
        subprocess.run(
            workers.command("edit_value", small.path, key.hex(), 3), check=True, timeout=60
        )
        problems = _problems(cx)
        assert "checksum" in problems["meta/format"][0]
    with pytest.raises(IntegrityError, match="meta/format"):
        Cortex.open(small.path, actor=ACTOR)


def test_index_entry_deleted(small: Small) -> None:
    key = type_key(MemoryType.FACT, small.created_a, small.a)
    _edit(small.path, key, lambda _: None)
    with Cortex.open(small.path, actor=ACTOR) as cx:
        assert _problems(cx) == {f"index {key.hex()}": ["missing for its head"]}


def test_frame_index_entry_deleted(small: Small) -> None:
    key = frame_key(Verb.FIND, ObjKind.SERVICE, "svc://a", small.created_a, small.a)
    _edit(small.path, key, lambda _: None)
    with Cortex.open(small.path, actor=ACTOR) as cx:
        assert _problems(cx) == {f"index {key.hex()}": ["missing for its head"]}


def test_stale_index_entry_added(small: Small) -> None:
    key = tag_key("ghost", MemoryType.FACT, small.created_a, small.a)
    _edit(small.path, key, lambda _: b"")
    with Cortex.open(small.path, actor=ACTOR) as cx:
        assert _problems(cx) == {f"index {key.hex()}": ["matches no head (stale index entry)"]}


def _pins(path: Path) -> tuple[bytes, bytes]:
    """A hard Constraint (pinned) and a soft one (not): the pin key of each."""
    keys = []
    with Cortex.open(path, actor=ACTOR) as cx:
        for strength in (Strength.HARD, Strength.SOFT):
            uri = cx.write(
                Constraint(
                    statement=f"a {strength.label} rule",
                    polarity=Polarity.DONT,
                    strength=strength,
                    source=ConstraintSource.USER_DECLARED,
                )
            )
            head = cx.resolve_latest(uri).head
            keys.append(pin_key(MemoryType.CONSTRAINT, to_micros(head.created_at), uri.id))
        assert cx.verify().ok
    return keys[0], keys[1]


def test_pin_entry_deleted(small: Small) -> None:
    hard, _ = _pins(small.path)
    _edit(small.path, hard, lambda _: None)
    with Cortex.open(small.path, actor=ACTOR) as cx:
        assert _problems(cx) == {f"index {hard.hex()}": ["missing for its head"]}


def test_stale_pin_entry_added(small: Small) -> None:
    _, soft = _pins(small.path)  # a soft Constraint is not pinned
    _edit(small.path, soft, lambda _: b"")
    with Cortex.open(small.path, actor=ACTOR) as cx:
        assert _problems(cx) == {f"index {soft.hex()}": ["matches no head (stale index entry)"]}


def test_damaged_pin_entry(small: Small) -> None:
    hard, _ = _pins(small.path)
    # index entries hold no value: format 20 keeps them in a database of duplicates, which
    # cannot hold one (verify still checks, for an engine that could)
    with pytest.raises(CortexError, match="empty values"):
        _edit(small.path, hard, lambda _: b"\x00")
    with Cortex.open(small.path, actor=ACTOR) as cx:
        assert cx.verify().ok
    moved = hard[:-1] + bytes([hard[-1] ^ 0x01])  # the id damaged: stale, and one missing
    _edit(small.path, hard, lambda _: None)
    _edit(small.path, moved, lambda _: b"")
    with Cortex.open(small.path, actor=ACTOR) as cx:
        assert _problems(cx) == {
            f"index {hard.hex()}": ["missing for its head"],
            f"index {moved.hex()}": ["matches no head (stale index entry)"],
        }


def test_older_version_deleted(small: Small) -> None:
    _edit(small.path, version_key(_row(small.path, small.a), 1), lambda _: None)
    with Cortex.open(small.path, actor=ACTOR) as cx:
        problems = _problems(cx)
        assert problems == {
            f"m/{R.of_kv(cx._kv, small.a)}": [
                f"{small.a} points at versions 1..2 but the store holds [2]"
            ],
        }
        with pytest.raises(IntegrityError):
            cx.resolve(_uri(small.a, 1))
        with pytest.raises(IntegrityError):
            cx.history(small.a)
        _assert_intact(cx, small)


def test_current_version_deleted(small: Small) -> None:
    _edit(small.path, version_key(_row(small.path, small.a), 2), lambda _: None)
    with Cortex.open(small.path, actor=ACTOR) as cx:
        assert f"m/{R.of_kv(cx._kv, small.a)}" in _problems(cx)
        with pytest.raises(IntegrityError):
            cx.resolve_latest(small.a)
        with pytest.raises(IntegrityError):
            cx.resolve(_uri(small.a, 2))
        with pytest.raises(IntegrityError):
            cx.history(small.a)
        _assert_intact(cx, small)


# ---------------------------------------------------------------------------------------------
# Damage to the data file itself, below the records


def _build_larger(path: Path) -> list[str]:
    """A store with small and multi-page values, several versions and edges; returns its ids."""
    rng = random.Random(99)
    start = datetime(2026, 1, 2, tzinfo=UTC)
    ticks = itertools.count()

    def clock() -> datetime:  # a fixed clock and fixed ids: the same file bytes every run
        return start + timedelta(milliseconds=next(ticks))

    with Cortex.open(path, actor=ACTOR, clock=clock) as cx:
        uris = [
            cx.write(
                Fact(
                    statement=f"fact {i} " + "z" * rng.choice([1, 50, 3000, 9000]),
                    subject=f"s{i % 7}",
                    predicate="p",
                ),
                tags=[f"t{i % 5}"],
                id=MemoryId(bytes.fromhex("019b7c0a8c00") + rng.randbytes(10)),
            )
            for i in range(40)
        ]
        for u in uris[::3]:
            cx.update(u, Fact(statement=f"new {u.id}", subject="s", predicate="p"))
        for x, y in itertools.pairwise(uris):
            cx.add_edge(x, EdgeType.PART_OF, y)
        cx.tombstone(uris[5], "retired")
        assert cx.verify().ok
    return [str(u.id) for u in uris]


def _probe(path: Path, ids_file: Path) -> dict[str, Any]:
    out = subprocess.run(workers.command("probe", path, ids_file), capture_output=True, timeout=120)
    # a negative return code is a signal: the interpreter crashed (e.g. a segfault in LMDB)
    assert out.returncode == 0, f"probe died with {out.returncode}: {out.stderr.decode()[-2000:]}"
    result: dict[str, Any] = json.loads(out.stdout)
    assert result["foreign"] == [], result["foreign"][0]
    return result


def _errors_or_equal(got: Any, want: Any, where: str) -> None:
    if isinstance(got, dict) and "error" in got:
        assert got["error"] in _CORTEX_ERRORS, (where, got)
    else:
        assert got == want, where


_CORTEX_ERRORS = {c.__name__ for c in (CortexError, *CortexError.__subclasses__())} | {
    c.__name__ for sub in CortexError.__subclasses__() for c in sub.__subclasses__()
}


def test_random_byte_flips_in_the_data_file(tmp_path: Path) -> None:
    original = tmp_path / "original"
    ids = _build_larger(original)
    ids_file = tmp_path / "ids.json"
    ids_file.write_text(json.dumps(ids))
    baseline = _probe(original, ids_file)
    assert baseline["open"] == "ok" and baseline["verify"] == []
    data = (original / "data.mdb").read_bytes()
    psize = 4096
    pages = len(data) // psize
    rng = random.Random(1234)
    outcomes = []
    for n in range(14):
        offset = rng.randrange(2 * psize, pages * psize)  # never the two meta pages
        damaged = tmp_path / f"damaged-{n}"
        shutil.copytree(original, damaged)
        with open(damaged / "data.mdb", "r+b") as f:
            f.seek(offset)
            byte = f.read(1)[0]
            f.seek(offset)
            f.write(bytes([byte ^ (1 << rng.randrange(8))]))
        got = _probe(damaged, ids_file)
        where = f"flip at {offset} (page {offset // psize})"
        if got["open"] != "ok":
            assert got["open"] in _CORTEX_ERRORS, where
            outcomes.append("open refused")
            continue
        _errors_or_equal(got["journal"], baseline["journal"], where + " journal")
        for mid in ids:
            for field in ("latest", "history", "edges"):
                _errors_or_equal(
                    got["memories"][mid][field],
                    baseline["memories"][mid][field],
                    f"{where} {mid} {field}",
                )
        clean = got["verify"] == []
        if clean:  # verify vouches for the store: then every read must have been right
            assert got["journal"] == baseline["journal"], where
            assert got["memories"] == baseline["memories"], where
        outcomes.append("clean" if clean else "reported")
    assert "reported" in outcomes or "open refused" in outcomes, outcomes


def test_damaged_edge_key(small: Small) -> None:
    # keys carry no checksum: the edge's e/from key names another source now; its e/to twin
    # still names small.a, so edges(small.a) knows one of its edges is damaged
    et = EdgeType.REFERENCES
    key = edge_from_key(small.a, et, small.b)
    value: dict[str, bytes] = {}

    def take(v: bytes | None) -> None:
        assert v is not None
        value["v"] = v

    _edit(small.path, key, take)  # moves the value: take() returns None, so the key goes
    bad = bytearray(key)
    bad[len(b"e/from/") + 15] ^= 0x01  # one bit of the source id, as a flip in the page would
    _edit(small.path, bytes(bad), lambda _: value["v"])
    with Cortex.open(small.path, actor=ACTOR) as cx:
        assert f"edge {small.a} references {small.b}" in _problems(cx)
        with pytest.raises(IntegrityError):
            cx.edges(small.a)


@pytest.mark.parametrize("half", ["from", "to"])
@pytest.mark.parametrize("byte", [0, 3, 7, 15])
def test_edge_key_flipped_in_place(small: Small, tmp_path: Path, half: str, byte: int) -> None:
    # the damage a bad page does: one byte of the id in the key flips where the key lies in
    # its page (LMDB does not re-sort it); the edge must not silently vanish from either end
    et = EdgeType.REFERENCES
    key = (
        edge_from_key(small.a, et, small.b) if half == "from" else edge_to_key(small.b, et, small.a)
    )
    compact = tmp_path / "compact"  # no freed pages holding old copies of the key
    with Cortex.open(small.path, actor=ACTOR) as cx:
        assert cx.backup(compact).ok
    data = bytearray((compact / "data.mdb").read_bytes())
    assert data.count(key) == 1
    at = data.find(key) + len(b"e/from/" if half == "from" else b"e/to/") + byte
    data[at] ^= 0x10
    (compact / "data.mdb").write_bytes(bytes(data))
    owner, direction = (small.a, "out") if half == "from" else (small.b, "in")
    with Cortex.open(compact, actor=ACTOR) as cx:
        with pytest.raises(IntegrityError, match=f"e/{half} key is damaged"):
            cx.edges(owner, direction=direction)  # type: ignore[arg-type]
        with pytest.raises(IntegrityError):
            cx.find(Query(from_=[str(owner)], follow=Follow(direction=direction), limit=5))  # type: ignore[arg-type]
        assert cx.edges(small.c) == []  # the others are fine
        assert not cx.verify().ok


# ---------------------------------------------------------------------------------------------
# Use counters (format 11: the head records that they exist)


def _flip_id(mid: MemoryId, byte: int) -> MemoryId:
    raw = bytearray(mid.bytes)
    raw[byte] ^= 0x10
    return MemoryId(bytes(raw))


@pytest.mark.parametrize("onto", ["no memory", "another memory"])
def test_a_moved_counters_key_raises_on_every_read_path(store_path: Any, onto: str) -> None:
    """A ``sal/`` key moved by damage (keys carry no checksum; the value is intact): the
    memory's head says it has counters, so ``find``, ``context`` and ``salience_state`` raise
    instead of reading it as never used (a different ranking without an error). Moved onto
    another memory's id, that memory's head says it has none: it reads as never used (its own,
    true state) without reading the stray record, and verify reports both ends. On both
    engines (the key is moved through the store's own KV layer)."""
    with Cortex.open(store_path, actor=ACTOR) as cx:
        a = cx.write(Fact(statement="alpha tea garden", subject="u", predicate="p"), tags=["t"])
        b = cx.write(Fact(statement="beta tea garden", subject="u", predicate="q"), tags=["t"])
        cx.write(Fact(statement="gamma tea garden", subject="u", predicate="r"), tags=["t"])
        cx.attest([a], Outcome.SUCCESS)
        cx.find(Query(text="alpha", limit=1, record_access=True))
        before = cx.salience_state(a)
        assert before.citations == before.accesses == 1
        assert cx.verify().ok
        ra = R.of_kv(cx._kv, a.id)
        old = salience_key(ra)  # format 21: by row; onto b's row, or a row of no memory
        new = salience_key(R.of_kv(cx._kv, b.id) if onto == "another memory" else 999)

        def move(txn: Any) -> None:
            value = txn.get(old)
            txn.delete(old)
            txn.put(new, value)

        cx._kv.write(move)
        for query in (
            Query(text="tea garden", limit=5),
            Query(tags=["t"], limit=5),
            Query(types=["Fact"], limit=5, order_by="salience"),
        ):
            with pytest.raises(IntegrityError, match=f"sal/{a.id} is missing"):
                cx.find(query)
        with pytest.raises(IntegrityError, match=f"sal/{a.id} is missing"):
            cx.context("find", [], query="alpha tea garden")
        with pytest.raises(IntegrityError):
            cx.salience_state(a)
        with pytest.raises(IntegrityError):  # a use is not counted on a guess either
            cx.attest([a], Outcome.SUCCESS)
        assert cx.salience_state(b).accesses == 0  # b's own state: never used
        problems = _problems(cx)
        assert any("sal/" in w and "is missing" in w for w in problems[f"m/{ra}"])
        stray = problems.get(show_key(new)) or problems.get(new.hex())
        assert stray, problems
        assert cx.resolve_latest(b).head.has_counters is False


def test_a_counters_key_flipped_in_place(small: Small, tmp_path: Path) -> None:
    """The damage a bad page does: one bit of the id in a ``sal/`` key flips where the key lies
    in its leaf page (LMDB does not re-sort it). The counters never read as "never used"."""
    with Cortex.open(small.path, actor=ACTOR) as cx:
        cx.attest([small.a], Outcome.SUCCESS)
        compact = tmp_path / "compact"
        assert cx.backup(compact).ok
    data = bytearray((compact / "data.mdb").read_bytes())
    key = salience_key(_row(small.path, small.a))  # format 21: by row
    assert data.count(key) == 1
    data[data.find(key) + len(b"sal/") + 3] ^= 0x04
    (compact / "data.mdb").write_bytes(bytes(data))
    with Cortex.open(compact, actor=ACTOR) as cx:
        with pytest.raises(IntegrityError, match="use counters"):
            cx.find(Query(text="alpha", limit=5))
        with pytest.raises(IntegrityError, match="use counters"):
            cx.salience_state(small.a)
        assert cx.salience_state(small.b).citations == 0  # the others read as they are
        _assert_intact(cx, small)
        shown = f"m/{R.of_kv(cx._kv, small.a)}"
        assert any("use counters" in w for w in _problems(cx)[shown])


# ---------------------------------------------------------------------------------------------
# The lexical index: damage to postings, document records, term entries and statistics


def _number(small: Small, mid: MemoryId) -> int:
    """The memory's document number: its postings' key (``lexical.md`` §4, format 14)."""
    from cortex.index.lexical import DOC_CODEC

    with Cortex.open(small.path, actor=ACTOR) as cx, cx._kv.read() as txn:
        dkey = R.lex_doc_key(txn, mid)
        value = txn.get(dkey)
    assert value is not None
    return int(DOC_CODEC.decode(_unseal(dkey, value), "lex/d").docno)


def _lex_problems(cx: Cortex) -> dict[str, list[str]]:
    return {k: v for k, v in _problems(cx).items() if k.startswith(("lex/", "meta/lexical"))}


def test_posting_flip(small: Small) -> None:
    n = _number(small, small.a)
    key = posting_key("alpha", n)
    _edit(small.path, key, _flip)
    with Cortex.open(small.path, actor=ACTOR) as cx:
        problems = _problems(cx)
        assert "checksum" in problems[f"lex/p/alpha/{n}"][0]
        with pytest.raises(IntegrityError, match="lex/p/alpha"):
            cx._lexical_search("alpha", 5)
        assert [m for m, _ in cx._lexical_search("beta", 5)] == [small.b]  # other terms work


def test_posting_deleted(small: Small) -> None:
    _edit(small.path, posting_key("alpha", _number(small, small.a)), lambda _: None)
    with Cortex.open(small.path, actor=ACTOR) as cx:
        problems = _lex_problems(cx)
        assert problems == {f"lex/p/alpha/{small.a}": ["posting missing"]}


def test_stale_posting_added(small: Small) -> None:
    # a posting for a word the memory does not hold, sealed properly
    n = _number(small, small.c)
    block = block_encode(n.to_bytes(4, "big") + entry_tail(1, 3))
    _edit(small.path, posting_key("ghost", n), lambda _: _seal(block))
    with Cortex.open(small.path, actor=ACTOR) as cx:
        problems = _lex_problems(cx)
        assert problems[f"lex/p/ghost/{small.c}"] == [
            "posting of no live memory or of a term it does not hold"
        ]


def test_posting_of_a_tombstoned_memory(small: Small) -> None:
    # a block under the key of a posting the tombstone removed (here: an old format's value)
    n = _number(small, small.b)
    with Cortex.open(small.path, actor=ACTOR) as cx:
        cx.tombstone(small.b, "gone")
        assert cx.verify().ok
        assert cx._lexical_search("beta", 5) == []
    _edit(small.path, posting_key("beta", n), lambda _: _seal(b"\x82\x01\x09"))
    with Cortex.open(small.path, actor=ACTOR) as cx:
        assert f"lex/p/beta/{n}" in _lex_problems(cx)


def test_term_frequency_resealed_wrong(small: Small) -> None:
    _edit(small.path, lex_term_key("user"), lambda _: _seal(b"\x07"))
    with Cortex.open(small.path, actor=ACTOR) as cx:
        assert _lex_problems(cx) == {"lex/t/user": ["document frequency 7, expected 2"]}


def test_document_record_flip(small: Small) -> None:
    _edit(small.path, lex_doc_key(_row(small.path, small.a)), _flip)
    with Cortex.open(small.path, actor=ACTOR) as cx:
        assert "checksum" in _lex_problems(cx)[f"lex/d/{R.of_kv(cx._kv, small.a)}"][0]
        # unindexing needs the record: a change to the memory refuses rather than guesses
        with pytest.raises(IntegrityError):
            cx.update(small.a, Fact(statement="three", subject="user", predicate="likes"))
        assert cx.resolve_latest(small.a).version.version == 2


def test_statistics_deleted(small: Small) -> None:
    _edit(small.path, meta_key("lexical"), lambda _: None)
    with Cortex.open(small.path, actor=ACTOR) as cx:
        assert list(_lex_problems(cx)) == ["meta/lexical"]


def _pending(small: Small) -> MemoryId:
    """One more small write: its postings wait in segment 0 (``lexical.md`` §4b)."""
    with Cortex.open(small.path, actor=ACTOR) as cx:
        d = cx.write(Fact(statement="gamma alpha", subject="user", predicate="sees")).id
        cx.tombstone(small.b, "gone")  # segment 1: DEL entries of b's postings
        assert cx.verify().ok
        with cx._kv.read() as txn:
            assert list(txn.keys(lex_segment_key(0)[:-8])) == [
                lex_segment_key(0),
                lex_segment_key(1),
            ]
    return d


def test_segment_flip(small: Small) -> None:
    """A damaged segment: verify names it; a search of any term and a write that changes the
    index fail with IntegrityError and change nothing; nothing is guessed."""
    d = _pending(small)
    _edit(small.path, lex_segment_key(0), _flip)
    with Cortex.open(small.path, actor=ACTOR) as cx:
        problems = _lex_problems(cx)
        assert "checksum" in problems["lex/s/0"][0]
        with pytest.raises(IntegrityError, match="lex/s/0"):
            cx._lexical_search("beta", 5)
        with cx._kv.read() as txn:
            before = dict(txn.scan(b""))
        with pytest.raises(IntegrityError, match="lex/s/0"):
            cx.write(Fact(statement="delta", subject="user", predicate="hears"))
        with cx._kv.read() as txn:
            assert dict(txn.scan(b"")) == before
        assert cx.resolve_latest(d).head.id == d  # the records themselves still read


def test_segment_resealed_with_a_wrong_frequency(small: Small) -> None:
    """A canonical segment holding a wrong tf: only the comparison with the text can tell."""
    d = _pending(small)
    n = _number(small, d).to_bytes(4, "big")
    with Cortex.open(small.path, actor=ACTOR) as cx, cx._kv.read() as txn:
        raw = txn.get(lex_segment_key(0))
    assert raw is not None
    i = raw.index(b"\x01" + n + (1).to_bytes(4, "big"))  # an ADD with tf 1
    changed = raw[: i + 5] + (2).to_bytes(4, "big") + raw[i + 9 : -4]
    _edit(small.path, lex_segment_key(0), lambda _: _seal(changed))
    with Cortex.open(small.path, actor=ACTOR) as cx:
        problems = _lex_problems(cx)
        assert len(problems) == 1
        ((name, what),) = problems.items()
        assert name.startswith("lex/p/") and name.endswith(str(d))
        assert what[0].startswith("holds tf=2 ")


def test_segment_contradicting_the_blocks(small: Small) -> None:
    """A segment that removes a posting no block holds, or adds one a block holds."""
    n = _number(small, small.b)
    _pending(small)
    with Cortex.open(small.path, actor=ACTOR) as cx, cx._kv.read() as txn:
        raw = txn.get(lex_segment_key(1))
    assert raw is not None and raw[4 + 2 + 4 + 4] == 3  # "beta": a DEL
    as_add = raw[:14] + b"\x01" + raw[15:19] + entry_tail(1, 9) + raw[19:-4]
    count = int.from_bytes(raw[:4], "big")
    assert raw[4:6] == (4).to_bytes(2, "big") and count >= 1
    _edit(small.path, lex_segment_key(1), lambda _: _seal(as_add))
    with Cortex.open(small.path, actor=ACTOR) as cx:
        problems = _lex_problems(cx)
        assert problems[f"lex/s/beta/{n}"] == ["a segment adds a posting the blocks hold"]
    # a segment key that is not 8 bytes of sequence number
    _edit(small.path, lex_segment_key(1)[:-1], lambda _: raw)
    with Cortex.open(small.path, actor=ACTOR) as cx:
        assert any(
            p.record.startswith("6c65782f732f") and "not a segment key" in p.what
            for p in cx.verify().problems
        )


def test_segment_renumbered(small: Small) -> None:
    """A flipped byte of a segment's sequence number leaves a well-formed key whose value reads
    alike: the numbers must run 0, 1, 2, ... (``lexical.md`` §7)."""
    _pending(small)
    with Cortex.open(small.path, actor=ACTOR) as cx, cx._kv.read() as txn:
        raw = txn.get(lex_segment_key(1))
    _edit(small.path, lex_segment_key(1), lambda _: None)
    _edit(small.path, lex_segment_key(5), lambda _: raw)
    with Cortex.open(small.path, actor=ACTOR) as cx:
        assert _lex_problems(cx) == {"lex/s/5": ["sequence number 5 where 1 belongs"]}


def test_posting_with_a_wrong_frequency_resealed(small: Small) -> None:
    # passes its checksum and decodes: only the comparison with the memory's text can tell
    key = posting_key("beta", _number(small, small.b))
    with Cortex.open(small.path, actor=ACTOR) as cx, cx._kv.read() as txn:
        raw = txn.get(key)
    # the block of "beta" holds one posting: varint(tf), varint(length) (its docno: the key's)
    assert raw is not None and len(raw) == 2 + 4
    assert raw[0] == 2  # "beta" is in the short line too
    _edit(small.path, key, lambda v: _seal(b"\x03" + raw[1:2]))
    with Cortex.open(small.path, actor=ACTOR) as cx:
        problems = _lex_problems(cx)
        assert list(problems) == [f"lex/p/beta/{small.b}"]
        assert problems[f"lex/p/beta/{small.b}"][0].startswith("holds tf=3 ")
