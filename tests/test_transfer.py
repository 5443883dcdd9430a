"""Export and import bundles; the JSON form of records; backups under a concurrent writer."""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import cbor2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cortex import (
    FORMAT_VERSION,
    ConflictError,
    Cortex,
    Cost,
    EdgeType,
    Event,
    Fact,
    FormatError,
    FrameRef,
    Goal,
    Head,
    Identity,
    IntegrityError,
    NotFoundError,
    ObjKind,
    Polarity,
    Preference,
    Provenance,
    SourceKind,
    SourceRef,
    ValidationError,
    Verb,
    Version,
)
from cortex.engine.journal import JournalKind
from cortex.model.codec import HEAD, VERSION
from cortex.model.jsonmap import from_plain, parse_time, to_plain
from cortex.model.records import DATA_TYPES
from cortex.transfer.bundle import (
    _memory_from_json,
    _version_json,
    export_store,
    import_bundle,
    read_bundle,
)
from tests import strategies as S
from tests import workers

T0 = datetime(2026, 11, 22, 9, 30, tzinfo=UTC)


def _populate(cx: Cortex) -> dict[str, Any]:
    fact = cx.write(
        Fact(
            statement="Ada lives in Zürich",
            subject="ada",
            predicate="home_city",
            observed_at=T0,
            confidence=0.95,
        ),
        tags=["people", "städte"],
        frames=[FrameRef(verb=Verb.FIND, obj_kind=ObjKind.KNOWLEDGE, obj_ref="ada")],
        importance=7,
        valid_from=T0,
        provenance=Provenance(
            source=SourceKind.USER_INPUT,
            sources=(SourceRef(session_id="s1", message_ids=("m1", "m2"), span=(3, 9)),),
        ),
    )
    v2 = cx.update(fact, Fact(statement="Ada lives in Basel", subject="ada", predicate="home_city"))
    ident = cx.write(Identity(name="Ada", public_keys=(b"\x00\x01\xff",), profile={"lang": "en"}))
    event = cx.write(
        Event(kind="purchase", outcome="success", cost=Cost(asset="USD", amount="12.5")),
        frames=[FrameRef(verb=Verb.ACQUIRE, obj_kind=ObjKind.ASSET, obj_ref="gpu")],
    )
    gone = cx.write(Preference(topic="tea", polarity=Polarity.PREFER), tags=["drinks"])
    cx.purge(gone, reason="asked to forget")
    goal = cx.write(Goal(statement="ship 1.0", status="active", horizon=T0 + timedelta(days=9)))
    cx.tombstone(goal, reason="done")
    cx.add_edge(fact, EdgeType.REFERENCES, ident, weight=0.5)
    cx.add_edge(event, EdgeType.CAUSED_BY, goal)
    cx.remove_edge(event, EdgeType.CAUSED_BY, goal)
    cx.update_head(ident, visibility="actor_public", importance=9)
    return {"fact": fact, "v2": v2, "ident": ident, "event": event, "gone": gone, "goal": goal}


@pytest.fixture
def source(place: Any) -> Path:
    with Cortex.open(place("src"), actor="agent-1") as cx:
        _populate(cx)
    return place("src")  # type: ignore[no-any-return]


def _export(store: Path, out: Path, encoding: str) -> bytes:
    with Cortex.open(store, actor="exporter", as_owner=True, create=False) as cx:
        export_store(cx, out, encoding=encoding)  # type: ignore[arg-type]
    return out.read_bytes()


def _dump(where: Path | str | Cortex) -> dict[bytes, bytes]:
    """Every key and value but the journal, meta/ and erasure records (the store's own life
    story: a bundle carries memories, never what a purge erased)."""
    if isinstance(where, Path | str):
        with Cortex.open(where, actor="reader", as_owner=True, create=False) as cx:
            return _dump(cx)
    # the lexical index's bytes are those of the live memories once its posting segments are
    # folded (specs/lexical.md §4b); pending, they are those of the commits that wrote them
    where.merge_lexical()
    with where._kv.read() as txn:
        return {k: v for k, v in txn.scan(b"") if not k.startswith((b"j/", b"meta/", b"er/"))}


@pytest.mark.parametrize("encoding", ["jsonl", "cbor"])
def test_export_import_export_is_byte_identical(
    source: Path, tmp_path: Path, place: Any, encoding: str
) -> None:
    first = _export(source, tmp_path / f"a.{encoding}", encoding)
    with Cortex.open(place("dst"), actor="importer") as cx:
        report = import_bundle(cx, tmp_path / f"a.{encoding}")
        assert (report.memories_added, report.versions_added, report.edges_added) == (5, 6, 2)
        assert cx.verify().ok
    second = _export(place("dst"), tmp_path / f"b.{encoding}", encoding)
    assert first == second
    # the records themselves are byte for byte those of the source
    assert _dump(source) == _dump(place("dst"))


def test_both_encodings_carry_the_same_store(source: Path, tmp_path: Path, place: Any) -> None:
    _export(source, tmp_path / "a.jsonl", "jsonl")
    _export(source, tmp_path / "a.cbor", "cbor")
    for name in ("a.jsonl", "a.cbor"):
        with Cortex.open(place(name.replace(".", "_")), actor="x", as_owner=True) as cx:
            import_bundle(cx, tmp_path / name)
    assert _dump(place("a_jsonl")) == _dump(place("a_cbor"))


def test_import_keeps_ids_versions_heads_and_journals_it(
    source: Path, tmp_path: Path, place: Any
) -> None:
    _export(source, tmp_path / "a.cbor", "cbor")
    with Cortex.open(source, actor="x", as_owner=True) as cx:
        before = {m.id: cx.history(m.id) for m in _all(cx)}
        edges = {e for m in _all(cx) for e in _edge_keys(cx, m.id)}
    with Cortex.open(place("dst"), actor="importer") as cx:
        import_bundle(cx, tmp_path / "a.cbor")
        after = {m.id: cx.history(m.id) for m in _all(cx)}
        assert after == before
        assert {e for m in _all(cx) for e in _edge_keys(cx, m.id)} == edges
        kinds = [e.kind for e in cx.journal()]
        assert kinds == [JournalKind.INIT] + [JournalKind.IMPORT] * 7
        entries = list(cx.journal())[1:]
        assert all(e.by == "importer" for e in entries)
        assert {e.id for e in entries if e.edge is None} == set(before)


def _all(cx: Cortex) -> list[Any]:
    from cortex.storage.keys import ID, parse_id_key

    with cx._kv.read() as txn:  # format 21: the ids in id/, in id order
        ids = [parse_id_key(k) for k in txn.keys(ID)]
    return [cx.resolve_latest(i) for i in ids]


def _edge_keys(cx: Cortex, mid: Any) -> list[tuple[Any, ...]]:
    return [
        (e.src, e.type, e.dst, e.created_at, e.weight, e.removed_at)
        for e in cx.edges(mid, include_removed=True)
    ]


@pytest.mark.parametrize("encoding", ["jsonl", "cbor"])
def test_import_is_idempotent(source: Path, tmp_path: Path, place: Any, encoding: str) -> None:
    _export(source, tmp_path / "a", encoding)
    with Cortex.open(place("dst"), actor="importer") as cx:
        import_bundle(cx, tmp_path / "a")
        seq = cx.stats()["journal_entries"]
        again = import_bundle(cx, tmp_path / "a")
        assert (again.memories_added, again.edges_added) == (0, 0)
        assert (again.memories_unchanged, again.edges_unchanged) == (5, 2)
        assert cx.stats()["journal_entries"] == seq  # nothing was written
    # and into the store it came from
    with Cortex.open(source, actor="x", as_owner=True) as cx:
        assert import_bundle(cx, tmp_path / "a").memories_unchanged == 5


def test_import_refuses_a_conflicting_memory_and_writes_nothing(
    source: Path, tmp_path: Path, place: Any
) -> None:
    _export(source, tmp_path / "a.cbor", "cbor")
    with Cortex.open(place("dst"), actor="importer") as cx:
        import_bundle(cx, tmp_path / "a.cbor")
    with Cortex.open(source, actor="x", as_owner=True) as cx:
        mid = next(m.id for m in _all(cx) if m.head.type.type_name == "Event")
        cx.update_head(mid, tags=["changed"])
    _export(source, tmp_path / "b.cbor", "cbor")
    before = _dump(place("dst"))
    with Cortex.open(place("dst"), actor="importer") as cx, pytest.raises(ConflictError):
        import_bundle(cx, tmp_path / "b.cbor")
    assert _dump(place("dst")) == before


def _tampered_jsonl(data: bytes, change: Any) -> bytes:
    lines = data.decode().splitlines()
    objs = [json.loads(line) for line in lines]
    change(objs)
    return "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objs).encode()


def _resealed(lines: list[dict[str, Any]]) -> None:
    """Recompute the trailer's digest, as a forger would."""
    body = "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in lines[:-1]).encode()
    lines[-1]["sha256"] = hashlib.sha256(body).hexdigest()


def _change_statement(objs: list[dict[str, Any]]) -> None:
    objs[1]["versions"][0]["data"]["statement"] = "Ada lives in Bern"
    _resealed(objs)


def _change_hash(objs: list[dict[str, Any]]) -> None:
    h = objs[1]["versions"][0]["hash"]
    objs[1]["versions"][0]["hash"] = ("1" if h[0] == "0" else "0") + h[1:]
    _resealed(objs)


def _change_tag_only(objs: list[dict[str, Any]]) -> None:
    objs[1]["head"]["tags"] = ["forged"]  # no hash covers tags: the trailer digest does


def _drop_trailer(objs: list[dict[str, Any]]) -> None:
    objs.pop()


def _drop_a_version(objs: list[dict[str, Any]]) -> None:
    objs[1]["versions"].pop()
    _resealed(objs)


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (_change_statement, IntegrityError),
        (_change_hash, IntegrityError),
        (_change_tag_only, IntegrityError),
        (_drop_trailer, IntegrityError),
        (_drop_a_version, IntegrityError),
    ],
)
def test_a_tampered_jsonl_bundle_is_refused_with_nothing_written(
    source: Path, tmp_path: Path, place: Any, change: Any, error: type[Exception]
) -> None:
    data = _export(source, tmp_path / "a.jsonl", "jsonl")
    (tmp_path / "bad.jsonl").write_bytes(_tampered_jsonl(data, change))
    with Cortex.open(place("dst"), actor="importer") as cx:
        before = _dump(cx)
        with pytest.raises(error, match="nothing was imported"):
            import_bundle(cx, tmp_path / "bad.jsonl")
        assert _dump(cx) == before
        assert cx.stats()["memories"] == 0


def _cbor_items(data: bytes) -> list[Any]:
    import io

    stream = io.BytesIO(data)
    dec = cbor2.CBORDecoder(stream)
    items = []
    while stream.tell() < len(data):
        items.append(dec.decode())
    return items


def _cbor_bundle(items: list[Any], reseal: bool = True) -> bytes:
    body = b"".join(cbor2.dumps(i, canonical=True) for i in items[:-1])
    if reseal:
        items[-1][1]["sha256"] = hashlib.sha256(body).digest()
    return body + cbor2.dumps(items[-1], canonical=True)


def test_a_cbor_bundle_with_one_changed_data_byte_is_refused(
    source: Path, tmp_path: Path, place: Any
) -> None:
    data = _export(source, tmp_path / "a.cbor", "cbor")
    items = _cbor_items(data)
    version = cbor2.loads(items[1][2][0])
    raw = bytearray(version[4])  # Version key 4: the data bytes
    i = raw.index(b"Z")  # ... "Zürich" -> "[ürich"
    raw[i] ^= 0x01
    version[4] = bytes(raw)
    items[1][2][0] = cbor2.dumps(version, canonical=True)
    for reseal in (False, True):
        (tmp_path / "bad.cbor").write_bytes(_cbor_bundle(items, reseal=reseal))
        with Cortex.open(place("dst"), actor="importer") as cx:
            with pytest.raises(IntegrityError, match=r"hash|sha256"):
                import_bundle(cx, tmp_path / "bad.cbor")
            assert cx.stats()["memories"] == 0
            assert [e.kind for e in cx.journal()] == [JournalKind.INIT]


def test_a_cbor_bundle_with_a_changed_hash_is_refused(
    source: Path, tmp_path: Path, place: Any
) -> None:
    data = _export(source, tmp_path / "a.cbor", "cbor")
    items = _cbor_items(data)
    version = cbor2.loads(items[2][2][0])
    version[5] = bytes([version[5][0] ^ 0x80]) + version[5][1:]
    items[2][2][0] = cbor2.dumps(version, canonical=True)
    (tmp_path / "bad.cbor").write_bytes(_cbor_bundle(items))
    with Cortex.open(place("dst"), actor="importer") as cx:
        with pytest.raises(IntegrityError, match="does not match its hash"):
            import_bundle(cx, tmp_path / "bad.cbor")
        assert cx.stats()["memories"] == 0


def test_any_flipped_byte_of_a_cbor_bundle_is_refused(source: Path, tmp_path: Path) -> None:
    data = _export(source, tmp_path / "a.cbor", "cbor")
    for at in range(0, len(data), max(1, len(data) // 97)):
        bad = bytearray(data)
        bad[at] ^= 0x04
        with pytest.raises((IntegrityError, FormatError)):
            read_bundle(bytes(bad))


def test_cbor_bundle_layout(source: Path, tmp_path: Path) -> None:
    data = _export(source, tmp_path / "a.cbor", "cbor")
    items = _cbor_items(data)
    assert items[0] == {
        "format": "cortex-export",
        "version": 1,
        "encoding": "cbor",
        "store_format": FORMAT_VERSION,
    }
    kinds = [i[0] for i in items[1:]]
    assert kinds == ["memory"] * 5 + ["edge"] * 2 + ["end"]
    head = HEAD.decode(items[1][1], "head")
    assert [VERSION.decode(b, "v").version for b in items[1][2]] == [1, 2]
    assert head.current_version == 2
    end = items[-1][1]
    assert end["memories"] == 5 and end["versions"] == 6 and end["edges"] == 2
    assert end["sha256"] == hashlib.sha256(data[: data.rindex(cbor2.dumps("end")) - 1]).digest()


def test_non_bundles_and_other_versions_are_refused(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="not a cortex export"):
        read_bundle(b'{"hello": 1}\n')
    with pytest.raises(FormatError, match="bundle version"):
        read_bundle(b'{"format":"cortex-export","version":9,"encoding":"jsonl"}\n')
    with pytest.raises(FormatError, match="store format"):
        read_bundle(
            b'{"format":"cortex-export","version":1,"encoding":"jsonl","store_format":99}\n'
        )
    with pytest.raises(IntegrityError, match="cut short"):
        read_bundle(b'{"format":"cortex-export","version":1,"encoding":"jsonl","store_format":1}')
    with pytest.raises(IntegrityError, match=r"not CBOR|not canonical|cortex export"):
        read_bundle(b"\xff\x00")
    with (
        Cortex.open(tmp_path / "s", actor="x", as_owner=True) as cx,
        pytest.raises(Exception, match="cannot read"),
    ):
        import_bundle(cx, tmp_path / "missing.jsonl")


def test_an_edge_to_a_missing_memory_is_refused(source: Path, tmp_path: Path, place: Any) -> None:
    data = _export(source, tmp_path / "a.jsonl", "jsonl")

    def drop_ident(objs: list[dict[str, Any]]) -> None:
        del objs[2]  # the Identity, which an edge points at
        objs[-1]["memories"] -= 1
        objs[-1]["versions"] -= 1
        _resealed(objs)

    (tmp_path / "bad.jsonl").write_bytes(_tampered_jsonl(data, drop_ident))
    with Cortex.open(place("dst"), actor="importer") as cx:
        with pytest.raises(NotFoundError, match="does not exist"):
            import_bundle(cx, tmp_path / "bad.jsonl")
        assert cx.stats()["memories"] == 0


def test_jsonl_errors_name_the_line_and_field(source: Path, tmp_path: Path) -> None:
    data = _export(source, tmp_path / "a.jsonl", "jsonl")

    def bad_enum(objs: list[dict[str, Any]]) -> None:
        objs[1]["head"]["visibility"] = "everyone"
        _resealed(objs)

    with pytest.raises(ValidationError) as info:
        read_bundle(_tampered_jsonl(data, bad_enum))
    assert info.value.field == "line 2: memory.head.visibility"


def test_export_is_atomic_and_replaces(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "a.jsonl"
    out.write_text("old")
    _export(source, out, "jsonl")
    assert out.read_bytes().startswith(b'{"format":"cortex-export"')
    src = [] if isinstance(source, str) else ["src"]  # a URL store has no directory
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl", *src]


# ---------------------------------------------------------------------------------------------
# The JSON form of records


@given(S.memories())
def test_json_form_round_trips_records(memory: tuple[Head, Version, Any]) -> None:
    head, version, _ = memory
    obj = json.loads(json.dumps({"head": to_plain(head), "versions": [_version_json(version)]}))
    got_head, [got_version] = _memory_from_json(obj, "memory")
    assert HEAD.encode(got_head, "h") == HEAD.encode(head, "h")
    assert VERSION.encode(got_version, "v") == VERSION.encode(version, "v")


@given(S.any_data())
def test_json_form_round_trips_data(data: Any) -> None:
    from cortex import encode_data

    plain = json.loads(json.dumps(to_plain(data)))
    assert encode_data(from_plain(DATA_TYPES[data.TYPE], plain, "data")) == encode_data(data)


def test_json_form_uses_labels_iso_times_and_hex() -> None:
    plain = to_plain(
        Event(kind="k", outcome="failure", occurred_at=T0, cost=Cost(asset="EUR", amount="1"))
    )
    assert plain == {
        "kind": "k",
        "outcome": "failure",
        "cost": {"asset": "EUR", "amount": "1"},
        "occurred_at": "2026-11-22T09:30:00+00:00",
    }
    assert to_plain(Identity(name="a", public_keys=(b"\x0a\xff",)))["public_keys"] == ["0aff"]


@pytest.mark.parametrize(
    ("plain", "field", "rule"),
    [
        ({"statement": "s", "subject": "u"}, "data.predicate", "required"),
        ({"statement": "s", "subject": "u", "predicate": "p", "colour": 1}, "data.colour", None),
        ({"statement": 1, "subject": "u", "predicate": "p"}, "data.statement", "type"),
        ({"statement": "s", "subject": "u", "predicate": "p", "source": 1}, "data.source", "enum"),
        (
            {"statement": "s", "subject": "u", "predicate": "p", "source": "USER_INPUT"},
            "data.source",
            "enum",
        ),
        (
            {"statement": "s", "subject": "u", "predicate": "p", "observed_at": "2026-01-01"},
            "data.observed_at",
            "naive_time",
        ),
        (
            {"statement": "s", "subject": "u", "predicate": "p", "confidence": True},
            "data.confidence",
            "type",
        ),
        ([], "data", "type"),
    ],
)
def test_from_plain_names_the_field(plain: Any, field: str, rule: str | None) -> None:
    with pytest.raises(ValidationError) as info:
        from_plain(Fact, plain, "data")
    assert info.value.field == field
    if rule is not None:
        assert info.value.rule == rule


def test_from_plain_accepts_ints_for_floats_and_offsets() -> None:
    f = from_plain(
        Fact,
        {
            "statement": "s",
            "subject": "u",
            "predicate": "p",
            "confidence": 1,
            "observed_at": "2026-11-22T10:30:00+01:00",
        },
        "data",
    )
    assert f.confidence == 1.0 and isinstance(f.confidence, float)
    assert f.observed_at == T0 + timedelta(hours=0)  # same instant
    assert parse_time("2026-11-22T09:30:00Z", "t") == T0


@given(st.datetimes(timezones=st.just(UTC)))
def test_times_round_trip(when: datetime) -> None:
    assert parse_time(to_plain(when), "t") == when


# ---------------------------------------------------------------------------------------------
# Backup


def test_backup_under_a_concurrent_writer_opens_and_verifies(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with Cortex.open(store, actor="a") as cx:
        cx.write(Fact(statement="seed", subject="s", predicate="p"))
    stop = tmp_path / "stop"
    writer = subprocess.Popen(
        workers.command("steady_writer", store, stop), stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout is not None
        assert json.loads(writer.stdout.readline())["op"] == "started"
        with Cortex.open(store, actor="a") as cx:
            reports = []
            for i in range(3):
                time.sleep(0.05)
                reports.append((cx.backup(tmp_path / f"backup{i}"), cx.stats()["memories"]))
    finally:
        stop.touch()
        out = workers.rest_of_output(writer, 30)
    assert writer.returncode == 0, out
    written = json.loads(out.splitlines()[-1])["n"]
    assert written > 0
    counts = []
    for i, (report, _) in enumerate(reports):
        assert report.ok, report.problems
        with Cortex.open(tmp_path / f"backup{i}", actor="r", create=False) as copy:
            assert copy.verify().ok
            counts.append(copy.stats()["memories"])
    assert counts == sorted(counts) and counts[0] >= 1
    with pytest.raises(Exception, match="exists"), Cortex.open(store, actor="a") as cx:
        cx.backup(tmp_path / "backup0")


@pytest.mark.lmdb_only
def test_backup_is_compacted(tmp_path: Path) -> None:
    with Cortex.open(tmp_path / "s", actor="a") as cx:
        uris = cx.write_many(
            [Fact(statement="x" * 4000, subject=str(i), predicate="p") for i in range(60)]
        )
        for u in uris:
            cx.purge(u, reason="shrink")
        assert cx.backup(tmp_path / "b").ok
    size = (tmp_path / "b" / "data.mdb").stat().st_size
    assert size < (tmp_path / "s" / "data.mdb").stat().st_size


# ---------------------------------------------------------------------------------------------
# Store.import_records on its own


def _records(cx: Cortex, uri: Any) -> tuple[Head, list[Version]]:
    history = cx.history(uri)
    return history[-1].head, [m.version for m in history]


def test_import_records_checks_each_memory(source: Path, tmp_path: Path, place: Any) -> None:
    import msgspec

    with Cortex.open(source, actor="x", as_owner=True) as cx:
        memories = {m.head.type.type_name: _records(cx, m.id) for m in _all(cx)}
    head, versions = memories["Fact"]
    with Cortex.open(place("dst"), actor="importer") as cx:
        cases: list[tuple[Any, type[Exception], str]] = [
            ([(head, versions[:1])], ValidationError, "versions"),
            ([(head, versions[::-1])], ValidationError, "versions"),
            ([(head, versions), (head, versions)], ValidationError, "memories"),
            (
                [(head, [versions[0], msgspec.structs.replace(versions[1], data=None)])],
                ValidationError,
                "version.data",
            ),
            (
                [(head, [versions[0], msgspec.structs.replace(versions[1], hash=bytes(32))])],
                IntegrityError,
                "",
            ),
            (
                [(msgspec.structs.replace(head, importance=11), versions)],
                ValidationError,
                "head.importance",
            ),
        ]
        for memories_arg, error, field in cases:
            with pytest.raises(error) as info:
                cx.import_records(memories_arg)
            if field:
                assert getattr(info.value, "field", "") == field
        purged_head, purged_versions = memories["Preference"]
        with pytest.raises(ValidationError, match="holds data"):
            cx.import_records(
                [(purged_head, [msgspec.structs.replace(purged_versions[0], data=b"\xa0")])]
            )
        assert cx.stats()["memories"] == 0
        assert cx.import_records([(head, versions)]).memories_added == 1
        assert cx.verify().ok


def test_import_records_refuses_bad_edges(source: Path, tmp_path: Path, place: Any) -> None:
    import msgspec

    with Cortex.open(source, actor="x", as_owner=True) as cx:
        memories = [_records(cx, m.id) for m in _all(cx)]
        edges = [e for m in _all(cx) for e in cx.edges(m.id, direction="out", include_removed=True)]
    with Cortex.open(place("dst"), actor="importer") as cx:
        selfie = msgspec.structs.replace(edges[0], dst=edges[0].src)
        with pytest.raises(ValidationError, match="itself"):
            cx.import_records(memories, [selfie])
        with pytest.raises(ValidationError, match="twice"):
            cx.import_records(memories, [edges[0], edges[0]])
        with pytest.raises(NotFoundError):
            cx.import_records([], edges[:1])
        changed = msgspec.structs.replace(edges[0], weight=0.25)
        cx.import_records(memories, edges)
        with pytest.raises(ConflictError, match="another record"):
            cx.import_records([], [changed])
        assert cx.import_records(memories, edges).edges_unchanged == len(edges)
