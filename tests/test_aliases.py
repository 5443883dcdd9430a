"""Entity aliases (issue 14 item 5; ``specs/claims.md`` §10): ``alias``, ``unalias``,
``aliases``, ``suggest_aliases``; a write competes with every spelling of its entities and
``about`` finds them; nothing stored is rewritten; the journal names no alias."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cortex import (
    AliasChange,
    Cortex,
    Fact,
    JournalKind,
    Preference,
    Scope,
    ValidationError,
)
from cortex.index.embed import HashingEmbedder
from cortex.rules.aliases import (
    ALIAS_CODEC,
    ALIAS_DOMAIN,
    Aliases,
    AliasRecord,
    alias_hash,
    alias_key,
    read_aliases,
    suggest,
)
from cortex.rules.chains import claim_hash, lookup_key, lookup_keys
from cortex.storage.kv import seal

VECTORS = Path(__file__).resolve().parent.parent / "specs" / "vectors" / "claims.json"


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, days: float = 1) -> None:
        self.now += timedelta(days=days)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cx(store_path: Any, clock: Clock) -> Iterator[Cortex]:
    """A store on each engine (LMDB, and PostgreSQL when its server is installed)."""
    with Cortex.open(store_path, actor="agent", clock=clock, metasync=False) as c:
        yield c


def home(city: str, who: str = "Sarah Chen") -> Fact:
    return Fact(statement=f"{who} lives in {city}", subject=who, predicate="home_city")


def test_alias_groups_and_what_each_call_says(cx: Cortex) -> None:
    added = cx.alias("Sarah Chen", "@sarah")
    assert added == AliasChange(
        outcome="added", canonical="sarah chen", alias="sarah", group=("sarah chen", "sarah")
    )
    assert cx.alias("sarah chen", "SARAH").outcome == "unchanged"  # one spelling already
    assert cx.alias("sarah", "Dr Chen").canonical == "sarah chen"  # through an alias
    assert cx.aliases() == {"sarah chen": ("dr chen", "sarah")}
    assert cx.aliases("Sarah") == {"sarah chen": ("dr chen", "sarah")}
    assert cx.aliases("Bob") == {}
    with pytest.raises(ValidationError, match=r"taken|alias of"):
        cx.alias("Robert", "sarah")  # an alias of another entity: unalias it first
    with pytest.raises(ValidationError, match="same"):
        cx.alias("Bob", "@BOB")
    for bad in ("", "  @ ", None, "x" * 500):
        with pytest.raises(ValidationError):
            cx.alias("Bob", bad)  # type: ignore[arg-type]
    # an alias that has aliases of its own brings them along
    cx.alias("Robert", "Bob")
    cx.alias("bob", "Bobby")
    moved = cx.alias("Robert Smith", "robert")
    assert moved.outcome == "moved" and set(moved.moved) == {"bob", "bobby"}
    assert cx.aliases("bobby") == {"robert smith": ("bob", "bobby", "robert")}
    assert cx.unalias("Bobby").outcome == "removed"
    assert cx.unalias("Bobby").outcome == "absent"
    assert cx.aliases("robert smith") == {"robert smith": ("bob", "robert")}
    assert cx.verify().ok


def test_the_journal_names_no_alias(cx: Cortex) -> None:
    cx.alias("Sarah Chen", "sarah")
    cx.unalias("sarah")
    entries = [e for e in cx.journal() if e.kind is JournalKind.ALIAS]
    assert [e.reason for e in entries] == ["alias", "unalias"]
    assert all(e.hash == alias_hash("sarah") for e in entries)
    assert alias_hash("sarah") == hashlib.sha256(ALIAS_DOMAIN + b"sarah").digest()
    with cx._kv.read() as txn:
        raw = b"".join(v for _, v in txn.scan(b"j/"))
    assert b"sarah" not in raw.lower()


def test_a_write_competes_with_every_spelling(cx: Cortex, clock: Clock) -> None:
    berlin = cx.write(home("Berlin"))
    clock.advance()
    before = cx.write(home("Basel", who="sarah"))
    assert before.outcome == "created"  # two entities: two current truths
    clock.advance()
    cx.alias("Sarah Chen", "sarah")
    # nothing stored changed: both stay current until the next write of the claim
    assert {m.uri for m in cx.about("Sarah Chen").memories} == {berlin.uri, before.uri}
    clock.advance()
    lisbon = cx.write(home("Lisbon", who="@Sarah"))
    assert lisbon.outcome == "superseded"
    assert set(lisbon.supersedes) == {berlin.uri, before.uri}
    assert [m.uri for m in cx.about("sarah").memories] == [lisbon.uri]
    assert [m.uri for m in cx.about("sarah chen", "home city").memories] == [lisbon.uri]
    # the other way round: a write under the canonical name supersedes the alias's
    clock.advance()
    zurich = cx.write(home("Zürich"))
    assert zurich.supersedes == (lisbon.uri,)
    # after unalias, the names are two entities again
    cx.unalias("sarah")
    clock.advance()
    assert cx.write(home("Rome", who="sarah")).outcome == "created"
    assert cx.verify().ok


def test_objects_and_preference_subjects_are_respelled(cx: Cortex, clock: Clock) -> None:
    cx.alias("Sarah Chen", "sarah")
    likes = Fact(statement="Sam knows Sarah", subject="Sam", predicate="knows", object="Sarah")
    first = cx.write(likes)
    clock.advance()
    same = Fact(statement="Sam knows S.", subject="Sam", predicate="knows", object="Sarah Chen")
    assert cx.write(same).supersedes == (first.uri,)
    clock.advance()
    tea = cx.write(Preference(topic="tea", polarity="prefer", subject="sarah"))
    clock.advance()
    no_tea = cx.write(Preference(topic="tea", polarity="avoid", subject="Sarah Chen"))
    assert no_tea.supersedes == (tea.uri,)
    # a Preference's topic is not an entity: "sarah" as a topic is not respelled
    mine = Preference(topic="sarah", polarity="prefer")
    assert lookup_keys(mine, False, Aliases({}).group) == (lookup_key(mine),)


def test_lookup_keys_by_the_spec() -> None:
    """``lookup_keys`` spells the subject (and object) every way the group gives."""
    recs = {"sarah": AliasRecord(canonical="sarah chen", name="Sarah", at=_T, by="a")}
    names = Aliases(recs)
    single = home("Berlin", who="Sarah")
    assert lookup_keys(single, False, names.group) == (
        b"fact\x1fsarah chen\x1fhome_city",
        b"fact\x1fsarah\x1fhome_city",
    )
    assert lookup_keys(single) == (lookup_key(single),)
    knows = Fact(statement="x", subject="Sam", predicate="knows", object="Sarah Chen")
    assert lookup_keys(knows, False, names.group) == (
        b"fact\x1fsam\x1fknows\x1fsarah chen",
        b"fact\x1fsam\x1fknows\x1fsarah",
    )
    # without a group: the lookup key alone, not forced unless asked
    assert lookup_keys(knows) == (lookup_key(knows),) == (b"fact\x1fsam\x1fknows\x1fsarah chen",)
    forced = lookup_keys(knows, True, names.group)
    assert forced == (b"fact\x1fsam\x1fknows",)
    other = Fact(statement="x", subject="Sam", predicate="likes")  # no object, many-valued
    assert lookup_keys(other, False, names.group) == ()
    # a Preference's subject likewise; its topic as it is (§10)
    whose = Preference(topic="Tea", polarity="prefer", subject="Sarah")
    assert lookup_keys(whose, False, names.group) == (
        b"preference\x1ftea\x1fsarah chen",
        b"preference\x1ftea\x1fsarah",
    )
    anyone = Preference(topic="Tea", polarity="prefer")
    assert lookup_keys(anyone, False, names.group) == (b"preference\x1ftea",)


_T = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def test_restricted_handles_do_not_name_entities(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with Cortex.open(path, actor="owner") as cx:
        cx.alias("Sarah Chen", "sarah")
    shared = Scope(name="s", tags=frozenset({"shared"}), writable=True)
    with Cortex.open(path, actor="helper", scopes=[shared]) as h:
        with pytest.raises(ValidationError, match="only the owner"):
            h.alias("Bob", "Robert")
        with pytest.raises(ValidationError, match="only the owner"):
            h.unalias("sarah")
        with pytest.raises(ValidationError, match="only the owner"):
            h.aliases()
        assert h.aliases("sarah") == {"sarah chen": ("sarah",)}


def test_verify_reports_damaged_and_chained_aliases(cx: Cortex) -> None:
    cx.alias("Sarah Chen", "sarah")
    bad = AliasRecord(canonical="sarah", name="Chen", at=_T, by="x")  # canonical is an alias

    def put(txn: Any) -> None:
        txn.put(alias_key("chen"), seal(ALIAS_CODEC.encode(bad, "alias")))
        txn.put(alias_key("zed"), seal(b"\xa0"))  # an empty map: not a record

    cx._kv.write(put)
    report = cx.verify()
    assert not report.ok
    found = {p.record: p.what for p in report.problems}
    assert "canonical name is an alias" in found["ent/a/chen"]
    assert "ent/a/zed" in found


def test_golden_alias_vectors() -> None:
    """specs/vectors/claims.json ``aliases``, both ways: record bytes, key, journal hash and
    the lookup keys of a Fact under a group."""
    doc = json.loads(VECTORS.read_text())
    cases = doc["aliases"]
    assert len(cases) >= 2
    for case in cases:
        rec = AliasRecord(
            canonical=case["record"]["canonical"],
            name=case["record"]["name"],
            at=datetime.fromisoformat(case["record"]["at"]),
            by=case["record"]["by"],
        )
        payload = bytes.fromhex(case["payload_hex"])
        assert ALIAS_CODEC.encode(rec, "alias") == payload
        assert ALIAS_CODEC.decode(payload, "alias") == rec
        assert bytes.fromhex(case["key_hex"]) == b"ent/a/" + case["alias"].encode("utf-8")
        assert alias_key(case["alias"]).hex() == case["key_hex"]
        want = hashlib.sha256(b"matrix.cortex.alias.v1" + case["alias"].encode()).hexdigest()
        assert case["journal_hash_hex"] == want
    for case in doc["alias_lookups"]:
        recs = {
            a: AliasRecord(canonical=c, name=a, at=_T, by="x") for a, c in case["aliases"].items()
        }
        data = Fact(**case["input"])
        keys = lookup_keys(data, case["force"], Aliases(recs).group)
        assert [k.decode() for k in keys] == case["lookups"]
        assert [claim_hash(k).hex() for k in keys] == case["hashes"]


def test_suggestions_are_offered_never_merged(tmp_path: Path) -> None:
    with Cortex.open(tmp_path / "s", actor="agent", embedder=HashingEmbedder(256)) as cx:
        for who in ("Sarah Chen", "Sarah", "Bob", "Robert Smith", "Smith"):
            cx.write(home("Berlin", who=who))
        got = cx.suggest_aliases(threshold=0.99)
        words = {(s.a, s.b) for s in got if s.reason == "words"}
        assert ("sarah", "sarah chen") in words
        assert all(s.cosine >= 0.5 for s in got if s.reason == "words")
        assert cx.aliases() == {}  # nothing merged
        cx.alias("Sarah Chen", "Sarah")
        assert all({s.a, s.b} != {"sarah", "sarah chen"} for s in cx.suggest_aliases())
        assert cx.suggest_aliases(limit=0) == []
        with pytest.raises(ValidationError):
            cx.suggest_aliases(threshold=0)
    with (
        Cortex.open(tmp_path / "t", actor="agent") as plain,
        pytest.raises(ValidationError, match="embedder"),
    ):
        plain.suggest_aliases()


def test_suggest_by_hand() -> None:
    """The rule on three names and hand-made vectors: words within the other's at cosine
    >= 0.5, or cosine >= the threshold."""
    import numpy as np

    normals = ["nyc", "new york city", "sarah", "sarah chen"]
    v = np.array(
        [[1.0, 0.0, 0.0], [0.95, 0.3122, 0.0], [0.0, 0.6, 0.8], [0.0, 0.0, 1.0]],
        dtype=np.float32,
    )
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    got = suggest(normals, v, 0.9, Aliases({}))
    assert [(s.a, s.b, s.reason) for s in got] == [
        ("sarah", "sarah chen", "words"),
        ("nyc", "new york city", "cosine"),
    ]
    recs = {"nyc": AliasRecord(canonical="new york city", name="NYC", at=_T, by="x")}
    assert [s.reason for s in suggest(normals, v, 0.9, Aliases(recs))] == ["words"]
    assert [s.reason for s in suggest(normals, v, 0.99, Aliases({}))] == ["words"]


def test_read_aliases_matches_the_store(cx: Cortex) -> None:
    cx.alias("Sarah Chen", "sarah")
    with cx._kv.read() as txn:
        names = read_aliases(txn)
    assert names.group("sarah") == ("sarah chen", "sarah")
    assert names.canonical("bob") == "bob"


@pytest.mark.parametrize("encoding", ["jsonl", "cbor"])
def test_aliases_travel_in_bundles(tmp_path: Path, encoding: str) -> None:
    """Bundle version 4 (``export.md``): alias items after the episodes, an ``aliases`` count;
    export, import and export again give the same bytes; a store without aliases still writes
    the version it wrote before."""
    from cortex.transfer.bundle import export_store, import_bundle, read_bundle

    src = tmp_path / "src"
    with Cortex.open(src, actor="agent") as cx:
        cx.write(home("Berlin"))
        plain = export_store(cx, tmp_path / f"plain.{encoding}", encoding=encoding)
        assert plain.aliases == 0
        assert read_bundle((tmp_path / f"plain.{encoding}").read_bytes()).aliases == {}
        cx.alias("Sarah Chen", "@Sarah")
        cx.alias("Sarah Chen", "Dr. Chen")
        first = export_store(cx, tmp_path / f"a.{encoding}", encoding=encoding)
    assert first.aliases == 2
    data = (tmp_path / f"a.{encoding}").read_bytes()
    assert read_bundle(data).aliases.keys() == {"sarah", "dr. chen"}
    if encoding == "jsonl":
        assert b'"version":4' in data.split(b"\n")[0]
        assert b'"aliases":2' in data.split(b"\n")[-2]
    dst = tmp_path / "dst"
    with Cortex.open(dst, actor="agent") as cx:
        report = import_bundle(cx, tmp_path / f"a.{encoding}")
        assert report.aliases_added == 2
        assert cx.aliases() == {"sarah chen": ("dr. chen", "sarah")}
        again = import_bundle(cx, tmp_path / f"a.{encoding}")
        assert (again.aliases_added, again.aliases_unchanged) == (0, 2)
        second = export_store(cx, tmp_path / f"b.{encoding}", encoding=encoding)
        assert cx.verify().ok
    assert second.sha256 == first.sha256
    assert (tmp_path / f"b.{encoding}").read_bytes() == data


def test_an_imported_alias_that_conflicts_or_chains_is_refused(tmp_path: Path) -> None:
    from cortex import ConflictError
    from cortex.transfer.bundle import export_store, import_bundle

    with Cortex.open(tmp_path / "src", actor="agent") as cx:
        cx.alias("Sarah Chen", "sarah")
        export_store(cx, tmp_path / "a.jsonl")
    with Cortex.open(tmp_path / "other", actor="agent") as cx:
        cx.alias("Sarah Connor", "sarah")
        before = cx.aliases()
        with pytest.raises(ConflictError):
            import_bundle(cx, tmp_path / "a.jsonl")
        assert cx.aliases() == before
    with Cortex.open(tmp_path / "third", actor="agent") as cx:
        cx.alias("Chen Family", "sarah chen")  # the bundle's canonical name is an alias here
        with pytest.raises(ValidationError, match="canonical"):
            import_bundle(cx, tmp_path / "a.jsonl")
        assert cx.aliases() == {"chen family": ("sarah chen",)}
