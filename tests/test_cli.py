"""The ``cortex`` command: every command through ``main(argv)``, and once as a real process."""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import lmdb
import pytest

from cortex import (
    FORMAT_VERSION,
    Cortex,
    EdgeType,
    Event,
    Fact,
    FrameRef,
    Goal,
    GoalStatus,
    JournalKind,
    ObjKind,
    Uri,
    Verb,
    Visibility,
)
from cortex.cli import app as cli_main
from cortex.cli import journal as cli_journal
from cortex.cli import main
from cortex.storage.keys import LEX_POSTING, lex_term_key, version_key
from cortex.transfer.migrate import KEYSPACE_DATABASES_MIGRATION as KD
from tests import workers

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "data" / "format1.cortex"
FACT = '{"statement": "Ada lives in Zürich", "subject": "ada", "predicate": "home_city"}'


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    rc, out, err = run(capsys, "--json", *argv)
    assert rc == 0, err
    return json.loads(out)


@pytest.fixture
def store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Path:
    path = tmp_path / "agent.cortex"
    monkeypatch.setenv("CORTEX_STORE", str(path))
    monkeypatch.setenv("CORTEX_ACTOR", "tester")
    assert run(capsys, "init")[0] == 0
    return path


@pytest.fixture
def fact(store: Path, capsys: pytest.CaptureFixture[str]) -> Uri:
    obj = run_json(
        capsys,
        "write",
        "Fact",
        FACT,
        "--tag",
        "people",
        "--frame",
        "find:knowledge:person:ada",
        "--importance",
        "7",
        "--valid-from",
        "2026-01-01T00:00:00Z",
    )
    return Uri.parse(obj["uri"])


# ---------------------------------------------------------------------------------------------
# Store


def test_init_creates_and_is_idempotent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "s")
    rc, out, err = run(capsys, "--store", path, "--actor", "agent-1", "init")
    assert (rc, err) == (0, "")
    assert "created" in out and "owner agent-1" in out
    obj = run_json(capsys, "--store", path, "init")
    assert (
        obj["created"] is False
        and obj["owner"] == "agent-1"
        and obj["format_version"] == FORMAT_VERSION
    )


def test_store_may_follow_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "s")
    assert run(capsys, "init", "--store", path)[0] == 0
    assert run_json(capsys, "info", "--store", path)["memories"] == 0
    rc, out, _ = run(capsys, "info", "--store", path, "--json")
    assert rc == 0 and json.loads(out)["path"] == path


def test_info_and_stats(store: Path, fact: Uri, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "info")
    assert rc == 0
    assert "owner     tester" in out and "1 live" in out and "sidecars  none" in out
    info = run_json(capsys, "info")
    assert info["owner"] == "tester" and info["memories"] == 1 and info["versions"] == 1
    assert (
        info["format_version"] == FORMAT_VERSION
        and "data.mdb" in info["files"]
        and info["sidecars"] == {}
    )
    (store / "vectors.hnsw").write_bytes(b"x" * 10)  # a sidecar file shows up
    assert run_json(capsys, "info")["sidecars"] == {"vectors.hnsw": 10}
    stats = run_json(capsys, "stats")
    assert stats["by_type"]["Fact"] == 1 and stats["journal_entries"] == 2
    rc, out, _ = run(capsys, "stats")
    assert rc == 0 and re.search(r"Fact\s+1", out)


def test_no_store_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("CORTEX_STORE", raising=False)
    rc, out, err = run(capsys, "info")
    assert (rc, out) == (2, "") and "CORTEX_STORE" in err
    rc, _, err = run(capsys, "--store", str(tmp_path / "nowhere"), "info")
    assert rc == 1 and "init" in err and err.count("\n") == 1
    assert not (tmp_path / "nowhere").exists()  # reading never creates a store


# ---------------------------------------------------------------------------------------------
# Writes


def test_write_prints_the_uri(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, "write", "fact", FACT)
    assert (rc, err) == (0, "")
    uri = Uri.parse(out.strip())
    with Cortex.open(store, actor="x", as_owner=True) as cx:
        m = cx.resolve(uri)
    assert m.version.created_by == "tester" and m.head.actor_scope == "tester"


def test_write_takes_every_option(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = {
        "kind": "purchase",
        "outcome": "success",
        "cost": {"asset": "USD", "amount": "12.5"},
        "occurred_at": "2026-11-22T10:30:00+01:00",
    }
    (store.parent / "event.json").write_text(json.dumps(data))
    uri = run_json(
        capsys,
        "write",
        "Event",
        f"@{store.parent / 'event.json'}",
        "--tag",
        "a",
        "--tag",
        "b",
        "--frame",
        "acquire:asset:gpu",
        "--importance",
        "3",
        "--visibility",
        "actor_public",
        "--confidence",
        "0.5",
        "--valid-from",
        "2026-01-01T00:00:00Z",
        "--valid-until",
        "2027-01-01T00:00:00+00:00",
        "--expires-at",
        "2099-01-01T00:00:00Z",
        "--created-by",
        "someone",
        "--provenance",
        '{"source": "observed", "sources": [{"session_id": "s1", "span": [1, 2]}]}',
        "--id",
        "01HWT0D7G00000000000000001",
    )["uri"]
    assert uri == "cortex://Event/01HWT0D7G00000000000000001#1"
    shown = run_json(capsys, "show", uri)
    head, version = shown["head"], shown["version"]
    assert head["tags"] == ["a", "b"] and head["importance"] == 3
    assert head["visibility"] == "actor_public"
    assert head["frames"] == [{"verb": "acquire", "obj_kind": "asset", "obj_ref": "gpu"}]
    assert version["confidence"] == 0.5 and version["created_by"] == "someone"
    assert version["provenance"]["sources"][0]["span"] == [1, 2]
    assert version["data"]["occurred_at"] == "2026-11-22T09:30:00+00:00"
    assert version["valid_until"] == "2027-01-01T00:00:00+00:00"


def test_write_reads_stdin(
    store: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"topic": "tea", "polarity": "prefer"}'))
    rc, out, _ = run(capsys, "write", "Preference", "-")
    assert rc == 0 and out.startswith("cortex://Preference/")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["write", "Fact", '{"statement": "s", "subject": "u"}'], "data.predicate: is required"),
        (["write", "Fact", '{"statement": "s"'], "data: is not valid JSON"),
        (
            ["write", "Fact", FACT.replace("}", ', "confidence": 2}')],
            "data.confidence: must be within",
        ),
        (
            ["write", "Preference", '{"topic": "t", "polarity": "loves"}'],
            "data.polarity: must be one of prefer",
        ),
        (
            ["write", "Fact", FACT.replace("}", ', "observed_at": "2026-01-01T00:00:00"}')],
            "data.observed_at: '2026-01-01T00:00:00' has no offset",
        ),
        (["write", "Fact", FACT, "--importance", "11"], "head.importance"),
        (["write", "Fact", FACT, "--tag", "x" * 65], "head.tags[0]"),
        (["write", "Fact", "@/no/such/file.json"], "cannot read /no/such/file.json"),
    ],
)
def test_write_errors_name_the_field(
    store: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    rc, out, err = run(capsys, *argv)
    assert rc == 1 and out == ""
    assert err.startswith("cortex: ") and err.count("\n") == 1 and needle in err
    assert run_json(capsys, "info")["memories"] == 0  # nothing was written


@pytest.mark.parametrize(
    "argv",
    [
        ["write", "Fruit", "{}"],
        ["write", "Fact", FACT, "--frame", "find:knowledge"],
        ["write", "Fact", FACT, "--frame", "look:knowledge:x"],
        ["write", "Fact", FACT, "--visibility", "public"],
        ["write", "Fact", FACT, "--valid-from", "yesterday"],
        ["write", "Fact"],
        ["edges", "x", "--direction", "up"],
        ["log", "--kind", "nope"],
        ["frobnicate"],
        [],
    ],
)
def test_usage_errors_exit_2(
    store: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == "" and "usage: cortex" in err


def test_update_whole_and_merged(
    store: Path, fact: Uri, capsys: pytest.CaptureFixture[str]
) -> None:
    v2 = run_json(
        capsys,
        "update",
        str(fact),
        '{"statement": "Ada lives in Basel", "subject": "ada", "predicate": "home_city"}',
        "--expected-version",
        "1",
    )["uri"]
    assert v2 == str(Uri(fact.type, fact.id, 2))
    rc, out, _ = run(capsys, "update", str(fact.id), '{"object": "Basel"}', "--merge")
    assert rc == 0 and out.strip().endswith("#3")
    data = run_json(capsys, "show", str(fact.id))["version"]["data"]
    assert data == {
        "statement": "Ada lives in Basel",
        "subject": "ada",
        "predicate": "home_city",
        "object": "Basel",
    }
    rc, _, err = run(capsys, "update", str(fact), FACT, "--expected-version", "1")
    assert rc == 1 and "is at version 3, not 1" in err
    rc, _, err = run(capsys, "update", str(fact), "[1]", "--merge")
    assert rc == 1 and "must be a JSON object" in err


def test_head_changes_without_a_new_version(
    store: Path, fact: Uri, capsys: pytest.CaptureFixture[str]
) -> None:
    head = run_json(
        capsys,
        "head",
        str(fact),
        "--tag",
        "x",
        "--tag",
        "y",
        "--frame",
        "monitor:service:svc://a",
        "--importance",
        "9",
        "--visibility",
        "scoped",
    )
    assert head["tags"] == ["x", "y"] and head["importance"] == 9
    assert head["visibility"] == "scoped" and head["current_version"] == 1
    assert head["frames"] == [{"verb": "monitor", "obj_kind": "service", "obj_ref": "svc://a"}]
    rc, out, _ = run(capsys, "head", str(fact.id), "--clear-tags", "--clear-frames")
    assert rc == 0 and "tags        -" in out and "frames      -" in out
    rc, _, err = run(capsys, "head", str(fact))
    assert rc == 1 and "nothing to change" in err


def test_tombstone_and_purge(store: Path, fact: Uri, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "tombstone", str(fact), "--reason", "wrong person")
    assert rc == 0 and "tombstoned: 'wrong person' by tester" in out
    rc, _, err = run(capsys, "update", str(fact), FACT)
    assert rc == 1 and "tombstoned" in err
    stone = run_json(capsys, "purge", str(fact), "--reason", "asked to forget")
    assert stone["reason"] == "wrong person" and "purged_at" in stone
    shown = run_json(capsys, "show", str(fact))
    assert "data" not in shown["version"] and shown["version"]["hash"]
    rc, out, _ = run(capsys, "show", str(fact), "--full")
    assert rc == 0 and "(purged)" in out
    rc, _, err = run(capsys, "update", str(fact), '{"object": "x"}', "--merge")
    assert rc == 1 and "tombstoned" in err
    rc, _, err = run(capsys, "tombstone", str(fact))
    assert rc == 2 and "--reason" in err
    assert run(capsys, "verify")[0] == 0


def test_a_bug_is_one_line_too(
    store: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: Any) -> Any:
        raise TypeError("something\nunexpected")

    monkeypatch.setattr(Cortex, "stats", broken)
    rc, out, err = run(capsys, "stats")
    assert rc == 70 and out == "" and err.count("\n") == 1
    assert err.startswith("cortex: internal error (TypeError: something unexpected)")
    monkeypatch.setenv("CORTEX_DEBUG", "1")
    with pytest.raises(TypeError):
        main(["stats"])


# ---------------------------------------------------------------------------------------------
# Reads


def test_show_forms_head_version_provenance(
    store: Path, fact: Uri, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, _ = run(capsys, "show", str(fact), "--full")
    assert rc == 0
    for needle in (
        str(fact),
        "short       home_city(ada)=Ada lives in Zürich",
        "medium",
        'statement: "Ada lives in Zürich"',
        "tags        people",
        "frames      find:knowledge:person:ada",
        "hash        sha256 ",
        "created     ",
        "source      user_input",
        "full\n  Fact: home_city(ada)=Ada lives in Zürich",
        "valid       from 2026-01-01T00:00:00Z",
    ):
        assert needle in out, needle
    obj = run_json(capsys, "show", str(fact), "--full")
    assert obj["uri"] == str(fact) and obj["full"].startswith("Fact: ")
    assert obj["version"]["provenance"] == {"source": "user_input"}
    rc, _, err = run(capsys, "show", "cortex://Fact/01HWT0D7G00000000000000001#1")
    assert rc == 1 and "no memory" in err
    rc, _, err = run(capsys, "show", str(fact).replace("#1", "#latest"))
    assert rc == 1 and "cortex: " in err


def test_show_as_of(store: Path, fact: Uri, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "update", str(fact), '{"object": "Basel"}', "--merge")
    created = run_json(capsys, "history", str(fact.id))
    t1, t2 = created[0]["created_at"], created[1]["created_at"]
    assert run_json(capsys, "show", str(fact.id), "--as-of", t1)["uri"].endswith("#1")
    assert run_json(capsys, "show", str(fact.id), "--as-of", t2)["uri"].endswith("#2")
    assert run_json(capsys, "show", str(fact.id), "--as-of", "now")["uri"].endswith("#2")
    rc, _, err = run(capsys, "show", str(fact.id), "--as-of", "2000-01-01T00:00:00Z")
    assert rc == 1 and "no valid version" in err


def test_history_lists_every_version(
    store: Path, fact: Uri, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "update", str(fact), '{"object": "Basel"}', "--merge")
    rc, out, _ = run(capsys, "history", str(fact))
    lines = out.splitlines()
    assert rc == 0 and lines[0].split() == ["version", "created", "by", "hash", "short", "form"]
    assert lines[1].startswith("#1") and lines[2].startswith("#2") and len(lines) == 3
    versions = run_json(capsys, "history", str(fact.id))
    assert [v["version"] for v in versions] == [1, 2]
    assert versions[1]["data"]["object"] == "Basel"


def test_diff_is_field_level(store: Path, fact: Uri, capsys: pytest.CaptureFixture[str]) -> None:
    run(
        capsys,
        "update",
        str(fact),
        '{"statement": "Ada lives in Basel", "subject": "ada", "predicate": "home_city"}',
        "--confidence",
        "0.5",
        "--source",
        "derived",
        "--valid-until",
        "2030-01-01T00:00:00Z",
    )
    v2 = str(Uri(fact.type, fact.id, 2))
    obj = run_json(capsys, "diff", str(fact), v2)
    changes = {c["field"]: (c["a"], c["b"]) for c in obj["changes"]}
    assert changes["data.statement"] == ("Ada lives in Zürich", "Ada lives in Basel")
    assert changes["confidence"] == (1.0, 0.5)
    assert changes["provenance.source"] == ("user_input", "derived")
    assert changes["validity.valid_from"] == ("2026-01-01T00:00:00+00:00", None)
    assert changes["validity.valid_until"] == (None, "2030-01-01T00:00:00+00:00")
    assert {"forms.short", "forms.medium", "hash", "created_at"} <= set(changes)
    assert "data.subject" not in changes and "type" not in changes
    rc, out, _ = run(capsys, "diff", str(fact), str(fact))
    assert rc == 0 and out.strip() == "no differences"
    rc, out, _ = run(capsys, "diff", str(fact), v2)
    assert rc == 0 and "data.statement" in out and '"Ada lives in Basel"' in out


# ---------------------------------------------------------------------------------------------
# Find, context, facets, about, attest

NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
def world(store: Path) -> dict[str, Uri]:
    """A few memories of several types, tags, frames, times and edges (owner: tester)."""
    trip = FrameRef(verb=Verb.SCHEDULE, obj_kind=ObjKind.PLAN, obj_ref="trip")
    with Cortex.open(store, actor="tester") as cx:
        w = {
            "home": cx.write(
                Fact(statement="Ada lives in Zürich", subject="ada", predicate="home_city"),
                tags=("people",),
                importance=7,
            ),
            "job": cx.write(
                Fact(statement="Ada codes", subject="ada", predicate="skill", confidence=0.4),
                tags=("people", "urgent"),
                importance=3,
            ),
            "bob": cx.write(
                Fact(statement="Bob cooks", subject="bob", predicate="skill"),
                tags=("people",),
                visibility=Visibility.ACTOR_PUBLIC,
            ),
            "goal": cx.write(
                Goal(statement="plan the trip", status=GoalStatus.ACTIVE), frames=[trip]
            ),
            "old": cx.write(
                Event(kind="flight", occurred_at=NOW - timedelta(days=40), counterparty="ada"),
                frames=[trip],
            ),
            "new": cx.write(
                Event(kind="hotel", occurred_at=NOW - timedelta(days=2), counterparty="SWISS"),
                frames=[trip],
            ),
        }
        cx.add_edge(w["new"], EdgeType.PART_OF, w["goal"])
        cx.add_edge(w["goal"], EdgeType.REFERENCES, w["home"])
    return w


def _uris(obj: Any) -> list[str]:
    return [h["uri"] for h in obj["hits"]]


def test_find_json_and_table(
    store: Path, world: dict[str, Uri], capsys: pytest.CaptureFixture[str]
) -> None:
    obj = run_json(capsys, "find", "--type", "fact")
    assert _uris(obj) == [str(world[k]) for k in ("bob", "job", "home")]  # newest first
    assert obj["plan"] == "type index, order by created" and obj["dropped"] == []
    hit = obj["hits"][0]
    assert set(hit) == {"uri", "text", "tokens", "salience", "score", "hop", "ranks", "scores"}
    assert hit["text"] == "skill(bob)=Bob cooks" and hit["hop"] is None
    assert obj["tokens"] == sum(h["tokens"] for h in obj["hits"]) > 0
    rc, out, err = run(capsys, "find", "--type", "fact", "--tag", "urgent")
    assert (rc, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split() == ["#", "uri", "salience", "text"]
    assert lines[1].split()[:2] == ["1", str(world["job"])] and "skill(ada)=Ada codes" in lines[1]
    assert re.fullmatch(r"1 hit\(s\), \d+ tokens; tag index, order by created", lines[-1])
    rc, out, _ = run(capsys, "find", "--type", "pattern")
    assert rc == 0 and out == "no memories found (type index, order by created)\n"


def test_find_where_tags_frames(
    store: Path, world: dict[str, Uri], capsys: pytest.CaptureFixture[str]
) -> None:
    def find(*argv: str) -> list[str]:
        return _uris(run_json(capsys, "find", *argv))

    w = {k: str(v) for k, v in world.items()}
    assert find("--type", "fact", "--where", 'data.subject = "ada" and head.importance >= 5') == [
        w["home"]
    ]
    assert find(
        "--tag", "people", "--where", "not (data.confidence < 0.5 or data.subject in [bob])"
    ) == [w["home"]]
    assert find("--tag", "people", "--where", r'data.statement ~ "^A.*s$"') == [w["job"]]
    assert find("--tag", "people", "--tag", "urgent") == [w["job"]]
    assert find("--type", "fact", "--where", "has_tag(urgent) or data.subject = bob") == [
        w["bob"],
        w["job"],
    ]
    assert find("--frame", "schedule:plan:trip", "--type", "event") == [w["new"], w["old"]]
    assert find("--frame", "schedule", "--type", "goal") == [w["goal"]]
    assert find("--frame", "schedule:plan:other") == []


def test_find_windows(
    store: Path, world: dict[str, Uri], capsys: pytest.CaptureFixture[str]
) -> None:
    def find(*argv: str) -> list[str]:
        return _uris(run_json(capsys, "find", "--type", "event", *argv))

    new, old = str(world["new"]), str(world["old"])
    assert find("--recent", "7") == [new]  # own time: occurred_at
    assert find("--recent", "7", "--on", "created") == [new, old]
    assert find("--until", (NOW - timedelta(days=10)).isoformat()) == [old]
    assert find("--since", (NOW - timedelta(days=10)).isoformat(), "--until", "now") == [new]
    assert find("--recent", "1", "--on", "updated") == [new, old]
    rc, _, err = run(capsys, "find", "--type", "event", "--on", "created")
    assert rc == 2 and "--on needs a window" in err and err.count("\n") == 1
    rc, _, err = run(capsys, "find", "--type", "event", "--recent", "2", "--since", "now")
    assert rc == 1 and "window.days: give days or start, not both" in err


def test_find_order_limit_offset_budget_form(
    store: Path, world: dict[str, Uri], capsys: pytest.CaptureFixture[str]
) -> None:
    def find(*argv: str) -> Any:
        return run_json(capsys, "find", "--type", "fact", *argv)

    w = {k: str(v) for k, v in world.items()}
    assert _uris(find("--asc")) == [w["home"], w["job"], w["bob"]]
    assert _uris(find("--order-by", "importance")) == [w["home"], w["bob"], w["job"]]
    assert _uris(find("--order-by", "importance", "--asc", "--limit", "1")) == [w["job"]]
    assert _uris(find("--offset", "1", "--limit", "1")) == [w["job"]]
    rc, out, _ = run(capsys, "find", "--type", "fact", "--offset", "2")
    assert rc == 0 and out.splitlines()[1].startswith(f"3  {w['home']}")
    budgeted = find("--budget", "15")
    assert budgeted["tokens"] <= 15 and len(budgeted["dropped"]) >= 1
    assert set(_uris(budgeted)) | set(budgeted["dropped"]) == {w["home"], w["job"], w["bob"]}
    rc, out, _ = run(capsys, "find", "--type", "fact", "--budget", "15")
    assert rc == 0 and "the budget dropped" in out
    medium = find("--tag", "urgent", "--form", "medium")["hits"][0]["text"]
    assert medium.startswith("skill(ada)=Ada codes — ") and "confidence 0.40" in medium
    full = find("--form", "full", "--limit", "1")["hits"][0]["text"]
    assert full.startswith("Fact: ") and "\nsubject: bob" in full
    rc, out, _ = run(capsys, "find", "--type", "fact", "--form", "full", "--limit", "1")
    assert rc == 0 and "\n    subject: bob\n" in out
    rc, _, err = run(capsys, "find", "--type", "fact", "--order-by", "score")
    assert rc == 1 and "order_by: order_by='score' needs text or near" in err
    rc, _, err = run(capsys, "find", "--type", "fact", "--limit", "0")
    assert rc == 1 and "limit: must be an integer 1..100000" in err


def test_find_as_of_and_tombstoned(
    store: Path, world: dict[str, Uri], capsys: pytest.CaptureFixture[str]
) -> None:
    home = world["home"]
    created = run_json(capsys, "show", str(home))["version"]["created_at"]
    run(capsys, "update", str(home), '{"statement": "Ada lives in Basel"}', "--merge")
    run(capsys, "tombstone", str(world["job"]), "--reason", "wrong")
    w = {k: str(v) for k, v in world.items()}
    v2 = str(Uri(home.type, home.id, 2))
    assert _uris(run_json(capsys, "find", "--type", "fact")) == [w["bob"], v2]
    past = run_json(capsys, "find", "--type", "fact", "--as-of", created)
    assert str(home) in _uris(past) and w["job"] not in _uris(past)
    assert w["job"] in _uris(run_json(capsys, "find", "--type", "fact", "--include-tombstoned"))


def test_find_walks_edges(
    store: Path, world: dict[str, Uri], capsys: pytest.CaptureFixture[str]
) -> None:
    w = {k: str(v) for k, v in world.items()}
    obj = run_json(capsys, "find", "--from", w["new"])
    assert _uris(obj) == [w["goal"]] and obj["hits"][0]["hop"] == 1
    obj = run_json(capsys, "find", "--from", str(world["new"].id), "--hops", "2")
    assert _uris(obj) == [w["goal"], w["home"]] and [h["hop"] for h in obj["hits"]] == [1, 2]
    assert _uris(run_json(capsys, "find", "--from", w["new"], "--hops", "0..1")) == [
        w["new"],
        w["goal"],
    ]
    assert _uris(
        run_json(capsys, "find", "--from", w["home"], "--follow", "part_of,references",
                 "--direction", "in", "--hops", "1..2")
    ) == [w["goal"], w["new"]]  # fmt: skip
    assert _uris(run_json(capsys, "find", "--from", w["home"], "--follow", "supersedes")) == []
    assert _uris(run_json(capsys, "find", "--from", w["home"], "--hops", "0")) == [w["home"]]
    rc, out, _ = run(capsys, "find", "--from", w["new"], "--hops", "2")
    assert rc == 0 and out.splitlines()[0].split() == ["#", "uri", "salience", "hop", "text"]
    rc, _, err = run(capsys, "find", "--from", "01HWT0D7G00000000000000001")
    assert rc == 1 and "no memory" in err
    rc, _, err = run(capsys, "find", "--from", w["new"], "--hops", "1..9")
    assert rc == 1 and "follow.max_hops: must be an integer 0..6" in err


def test_find_record_access_counts_a_use(
    store: Path, world: dict[str, Uri], capsys: pytest.CaptureFixture[str]
) -> None:
    run_json(capsys, "find", "--type", "goal")
    with Cortex.open(store, actor="t", as_owner=True) as cx:
        assert cx.salience_state(world["goal"]).accesses == 0
    run_json(capsys, "find", "--type", "goal", "--record-access")
    with Cortex.open(store, actor="t", as_owner=True) as cx:
        assert cx.salience_state(world["goal"]).accesses == 1


def test_find_reads_as_the_actor_or_the_owner(
    store: Path,
    world: dict[str, Uri],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert len(run_json(capsys, "find", "--type", "fact")["hits"]) == 3  # tester owns the store
    # another actor sees only what is actor_public
    assert _uris(run_json(capsys, "--actor", "stranger", "find", "--type", "fact")) == [
        str(world["bob"])
    ]
    monkeypatch.delenv("CORTEX_ACTOR")  # no acting name given: read as the owner, like show
    assert len(run_json(capsys, "find", "--type", "fact")["hits"]) == 3


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--near", "ada"], "near: vector search needs an embedder"),
        (["--type", "fact", "--where", "data.x = "], "where: at column 10: expected a value"),
        (["--type", "fact", "--where", "subject = ada"], "'subject' is not a field"),
        (["--type", "fact", "--where", "data.nope = 1"], "data.nope is not a data field"),
        (["--type", "fact", "--where", "head.importance = high"], "head.importance holds int"),
        (["--type", "fact", "--where", "data.subject < [a]"], "expected a value"),
    ],
)
def test_find_errors_are_one_line(
    store: Path, world: dict[str, Uri], capsys: pytest.CaptureFixture[str], argv: list[str],
    needle: str,
) -> None:  # fmt: skip
    rc, out, err = run(capsys, "find", *argv)
    assert rc == 1 and out == "" and err.startswith("cortex: ") and err.count("\n") == 1
    assert needle in err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        ([], "a find starts from an index: add --type"),
        (["--where", "data.x = 1"], "a find starts from an index"),
        (["--type", "fact", "--follow", "part_of"], "add --from"),
        (["--type", "fact", "--hops", "2"], "add --from"),
        (["--frame", "look"], "argument --frame: 'look': must be one of find"),
        (["--frame", "find::x"], "a reference needs its kind"),
        (["--frame", "find:thing"], "'find:thing': must be one of service"),
        (["--from", "x", "--hops", "a..b"], "is not MIN..MAX"),
        (["--from", "x", "--follow", "likes"], "'likes' is not one of"),
        (["--type", "fact", "--asc", "--desc"], "not allowed with argument"),
        (["--type", "fruit"], "is not a memory type"),
    ],
)
def test_find_usage_errors_exit_2(
    store: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    rc, out, err = run(capsys, "find", *argv)
    assert rc == 2 and out == "" and needle in err


def test_context(store: Path, world: dict[str, Uri], capsys: pytest.CaptureFixture[str]) -> None:
    w = {k: str(v) for k, v in world.items()}
    rc, out, err = run(capsys, "context", "schedule", "plan:trip")
    assert (rc, err) == (0, "")
    assert out.startswith("## pinned\n- [active] plan the trip")
    assert "## outcomes\n- hotel with SWISS" in out and f"[{w['old']}]" in out
    obj = run_json(capsys, "context", "schedule", "trip", "--budget", "200", "--form", "short")
    assert obj["verb"] == "schedule" and obj["budget"] == 200 and obj["dropped"] == []
    assert list(obj["tiers"]) == ["pinned", "outcomes", "frame", "recall"]
    assert [h["uri"] for h in obj["tiers"]["pinned"]] == [w["goal"]]
    assert [h["uri"] for h in obj["tiers"]["outcomes"]] == [w["new"], w["old"]]
    assert obj["tiers"]["pinned"][0]["tier"] == "pinned"
    assert obj["tokens"] == sum(h["tokens"] for t in obj["tiers"].values() for h in t)
    tight = run_json(capsys, "context", "schedule", "trip", "--budget", "10")
    assert tight["dropped"] and len(tight["dropped"]) + sum(map(len, tight["tiers"].values())) == 3
    rc, out, _ = run(capsys, "context", "schedule", "trip", "--budget", "10")
    assert rc == 0 and "## dropped (" in out
    rc, out, _ = run(capsys, "--actor", "stranger", "context", "build", "nothing")
    assert rc == 0 and out == "nothing in context for build nothing\n"
    rc, out, err = run(capsys, "context", "schedule", "trip", "--query", "hotel")
    assert (rc, err) == (0, "") and "## " in out
    rc, _, err = run(capsys, "context", "schedule", "trip", "--budget", "5000")
    assert rc == 1 and "budget_tokens: must be an integer 1..4000" in err
    rc, _, err = run(capsys, "context", "look", "trip")
    assert rc == 2 and "'look' is not one of find" in err


def test_facets(store: Path, world: dict[str, Uri], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_json(capsys, "facets") == {"Event": 2, "Fact": 3, "Goal": 1}
    assert run_json(capsys, "facets", "--by", "tag") == {"people": 3, "urgent": 1}
    assert run_json(capsys, "facets", "--by", "subject") == {"ada": 2, "bob": 1}
    assert run_json(capsys, "facets", "--by", "counterparty", "--recent", "7") == {"SWISS": 1}
    assert run_json(capsys, "facets", "--type", "event", "--recent", "7", "--on", "created") == {
        "Event": 2
    }
    rc, out, _ = run(capsys, "facets", "--by", "tag")
    assert rc == 0 and out.splitlines()[0].split() == ["tag", "memories"]
    assert re.search(r"^people\s+3$", out, re.M)
    rc, out, _ = run(capsys, "facets", "--by", "counterparty", "--type", "goal")
    assert rc == 0 and out == "none\n"
    rc, _, err = run(capsys, "facets", "--by", "colour")
    assert rc == 2 and "invalid choice" in err


def test_about(store: Path, world: dict[str, Uri], capsys: pytest.CaptureFixture[str]) -> None:
    w = {k: str(v) for k, v in world.items()}
    assert _uris(run_json(capsys, "about", "ada")) == [w["old"], w["job"], w["home"]]
    assert _uris(run_json(capsys, "about", "ada", "home_city")) == [w["home"]]
    rc, out, _ = run(capsys, "about", "bob")
    assert rc == 0 and "skill(bob)=Bob cooks" in out
    rc, out, _ = run(capsys, "about", "nobody")
    assert rc == 0 and out.startswith("no memories found")
    rc, _, err = run(capsys, "about", "")
    assert rc == 1 and "subject: must be non-empty text" in err


def test_attest(store: Path, world: dict[str, Uri], capsys: pytest.CaptureFixture[str]) -> None:
    goal, home = str(world["goal"]), str(world["home"].id)
    rc, out, err = run(capsys, "attest", goal, home, "--outcome", "success")
    assert (rc, err) == (0, "") and out.startswith("attested 2 memories: success")
    obj = run_json(capsys, "attest", goal, "--outcome", "failure")
    assert obj["outcome"] == "failure"
    assert [(m["ref"], m["citations"], m["failures"]) for m in obj["memories"]] == [(goal, 1, 1)]
    with Cortex.open(store, actor="t", as_owner=True) as cx:
        assert cx.salience_state(home).citations == 1
        entries = [e for e in cx.journal(1) if e.kind is JournalKind.ATTEST]
    assert [e.reason for e in entries] == ["success", "success", "failure"]
    run(capsys, "tombstone", home, "--reason", "gone")
    rc, out, err = run(capsys, "attest", goal, home, "--outcome", "partial")
    assert rc == 1 and out == "" and "tombstoned" in err and err.count("\n") == 1
    with Cortex.open(store, actor="t", as_owner=True) as cx:
        assert cx.salience_state(goal).citations == 1  # all or nothing
    rc, _, err = run(capsys, "attest", goal)
    assert rc == 2 and "--outcome" in err
    rc, _, err = run(capsys, "attest", goal, "--outcome", "meh")
    assert rc == 2 and "'meh' is not one of success" in err


# ---------------------------------------------------------------------------------------------
# Edges


def test_edges(store: Path, fact: Uri, capsys: pytest.CaptureFixture[str]) -> None:
    other = run_json(capsys, "write", "Identity", '{"name": "Ada"}')["uri"]
    oid = str(Uri.parse(other).id)
    edge = run_json(capsys, "edge", "add", str(fact), "references", other, "--weight", "0.5")
    assert edge["type"] == "references" and edge["weight"] == 0.5 and edge["dst"] == oid
    run(capsys, "edge", "add", oid, "corroborates", str(fact.id))
    assert len(run_json(capsys, "edges", str(fact.id))) == 2
    out_only = run_json(capsys, "edges", str(fact.id), "--direction", "out")
    assert [e["type"] for e in out_only] == ["references"]
    typed = run_json(capsys, "edges", oid, "--type", "corroborates")
    assert [e["type"] for e in typed] == ["corroborates"]
    rc, out, _ = run(capsys, "edge", "remove", str(fact), "references", other)
    assert rc == 0 and "references" in out
    assert [e["type"] for e in run_json(capsys, "edges", str(fact.id))] == ["corroborates"]
    removed = run_json(capsys, "edges", str(fact.id), "--include-removed")
    assert [bool(e.get("removed_at")) for e in removed] == [True, False]
    rc, out, _ = run(capsys, "edges", oid, "--direction", "out", "--type", "part_of")
    assert rc == 0 and out.strip() == "no edges"
    rc, _, err = run(capsys, "edge", "add", str(fact), "references", str(fact))
    assert rc == 1 and "itself" in err
    rc, _, err = run(capsys, "edge", "remove", str(fact), "part_of", other)
    assert rc == 1 and "no part_of edge" in err
    rc, _, err = run(capsys, "edge")
    assert rc == 2


# ---------------------------------------------------------------------------------------------
# Journal


def _seqs(out: str) -> list[int]:
    return [int(line.split()[0]) for line in out.splitlines()]


def test_log_tail_range_and_kind(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for i in range(30):  # thirty people: no write supersedes another
        run(capsys, "write", "Fact", FACT.replace("Zürich", f"city {i}").replace("ada", f"p{i}"))
    rc, out, _ = run(capsys, "log")
    assert rc == 0 and _seqs(out) == list(range(12, 32))  # the last 20, oldest first
    assert _seqs(run(capsys, "log", "-n", "3")[1]) == [29, 30, 31]
    assert _seqs(run(capsys, "log", "--from", "5", "--to", "7")[1]) == [5, 6, 7]
    assert _seqs(run(capsys, "log", "--from", "30")[1]) == [30, 31]
    assert _seqs(run(capsys, "log", "--kind", "init")[1]) == [1]
    rc, out, _ = run(capsys, "--json", "log", "-n", "2")
    entries = [json.loads(line) for line in out.splitlines()]
    assert [e["seq"] for e in entries] == [30, 31] and entries[0]["kind"] == "write"
    assert len(entries[0]["prev"]) == 64


def test_log_tail_with_kind_reaches_back_past_a_chunk(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Cortex.open(store, actor="x", as_owner=True) as cx:
        cx.write_many(Fact(statement=f"s{i}", subject="u", predicate="p") for i in range(1200))
    assert _seqs(run(capsys, "log", "--kind", "init")[1]) == [1]
    assert _seqs(run(capsys, "log", "-n", "2", "--kind", "write")[1]) == [1200, 1201]


def test_log_follow_prints_new_entries_until_interrupted(
    store: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    polls = 0

    def sleep(seconds: float) -> None:
        nonlocal polls
        polls += 1
        if polls == 1:  # another process commits meanwhile (its actor is "after")
            subprocess.run(workers.command("write_one", store, "new"), check=True, timeout=60)
        elif polls == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(cli_journal, "_pause", sleep)
    rc, out, _ = run(capsys, "log", "--follow", "--kind", "write")
    assert rc == 0 and polls == 3
    lines = out.splitlines()
    assert len(lines) == 1 and "write" in lines[0] and " after " in lines[0]


# ---------------------------------------------------------------------------------------------
# Verify


def _flip_version_byte(store: Path, uri: Uri) -> None:
    env = lmdb.open(str(store), subdir=True, max_dbs=32)
    try:
        ids = env.open_db(b"\x01db/id/")  # format 21: the memory's row, in id/'s database
        with env.begin(write=True) as txn:
            row = int.from_bytes(txn.get(b"id/" + uri.id.bytes, db=ids)[:4], "big")
            key = version_key(row, uri.version)
            value = bytearray(txn.get(key))
            value[len(value) // 2] ^= 0x01
            txn.put(key, bytes(value))
    finally:
        env.close()


def test_verify_exit_codes(store: Path, fact: Uri, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "verify")
    assert rc == 0 and out.startswith("ok: 1 memories, 1 versions")
    assert run_json(capsys, "verify")["ok"] is True
    _flip_version_byte(store, fact)
    rc, out, err = run(capsys, "verify")
    assert rc == 1 and err == ""
    assert out.startswith("DAMAGED") and "mv/0/1" in out and "checksum" in out  # row 0
    rc, out, _ = run(capsys, "--json", "verify")
    report = json.loads(out)
    assert rc == 1 and report["ok"] is False
    assert report["problems"][0]["record"] == "mv/0/1"
    rc, out, err = run(capsys, "show", str(fact))
    assert rc == 1 and out == "" and "fails its checksum" in err and err.count("\n") == 1


# ---------------------------------------------------------------------------------------------
# Export, import, backup


def test_export_import_round_trip(
    store: Path, fact: Uri, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "update", str(fact), '{"object": "Basel"}', "--merge")
    for fmt, name in (("jsonl", "a.jsonl"), ("cbor", "a.cbor"), ("cbor", "b.bin")):
        args = ["export", str(tmp_path / name)] + (["--format", fmt] if name == "b.bin" else [])
        report = run_json(capsys, *args)
        assert (report["encoding"], report["memories"], report["versions"]) == (fmt, 1, 2)
    assert (tmp_path / "a.cbor").read_bytes() == (tmp_path / "b.bin").read_bytes()
    copy = str(tmp_path / "copy")
    rc, out, _ = run(capsys, "--store", copy, "import", str(tmp_path / "a.jsonl"))
    assert rc == 0 and out.startswith("imported 1 memories (2 versions)")
    again = run_json(capsys, "--store", copy, "import", str(tmp_path / "a.cbor"))
    assert again["memories_added"] == 0 and again["memories_unchanged"] == 1
    run(capsys, "--store", copy, "export", str(tmp_path / "c.jsonl"))
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "c.jsonl").read_bytes()
    rc, out, _ = run(capsys, "export", str(tmp_path / "d.jsonl"))
    assert rc == 0 and "1 memories, 2 versions, 0 edges (jsonl" in out


def test_import_refuses_a_tampered_bundle(
    store: Path, fact: Uri, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "export", str(tmp_path / "a.jsonl"))
    text = (tmp_path / "a.jsonl").read_text(encoding="utf-8")
    (tmp_path / "bad.jsonl").write_text(text.replace("Zürich", "Zurich"), encoding="utf-8")
    copy = tmp_path / "copy"
    rc, out, err = run(capsys, "--store", str(copy), "import", str(tmp_path / "bad.jsonl"))
    assert rc == 1 and out == "" and "nothing was imported" in err and err.count("\n") == 1
    assert not copy.exists()  # a failed import into a new store leaves nothing behind
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    rc, _, err = run(capsys, "import", str(tmp_path / "missing.jsonl"))
    assert rc == 1 and "cannot read" in err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bars_only_on_a_terminal(
    store: Path,
    fact: Uri,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run(capsys, "export", str(tmp_path / "a.jsonl"))
    assert capsys.readouterr().err == ""  # not a terminal: no bar
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    assert main(["export", str(tmp_path / "b.jsonl")]) == 0
    assert main(["--store", str(tmp_path / "c"), "import", str(tmp_path / "b.jsonl")]) == 0
    bars = term.getvalue()
    assert "\rexport [" in bars and "100% 1/1\n" in bars
    assert "\rverify [" in bars and "100%" in bars


def test_backup(store: Path, fact: Uri, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "backup", str(tmp_path / "b1"))
    assert rc == 0 and "verify ok" in out
    report = run_json(capsys, "backup", str(tmp_path / "b2"))
    assert report["ok"] is True and report["memories"] == 1 and report["bytes"] > 0
    assert run_json(capsys, "--store", str(tmp_path / "b2"), "show", str(fact))["uri"] == str(fact)
    rc, _, err = run(capsys, "backup", str(tmp_path / "b1"))
    assert rc == 1 and "exists" in err


# ---------------------------------------------------------------------------------------------
# Migrate and reindex


def _format1(dest: Path) -> Path:
    """A copy of the committed format-1 fixture (never use the fixture itself)."""
    dest.mkdir(parents=True)
    shutil.copy(FIXTURE / "data.mdb", dest / "data.mdb")
    return dest


@pytest.fixture
def v1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = _format1(tmp_path / "v1")
    monkeypatch.setenv("CORTEX_STORE", str(path))
    monkeypatch.setenv("CORTEX_ACTOR", "tester")
    return path


def test_a_format1_store_needs_migrate_then_works(
    v1: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["info"], ["verify"], ["find", "--text", "Genève"], ["reindex"]):
        rc, out, err = run(capsys, *argv)
        assert (rc, out) == (1, ""), argv
        assert f"has format 1; this cortex needs {FORMAT_VERSION}" in err
        assert f"run `cortex --store {v1} migrate`" in err and err.count("\n") == 1
    before = (v1 / "data.mdb").read_bytes()
    rc, out, err = run(capsys, "migrate", "--dry-run")
    assert (rc, err) == (0, "")
    assert out.splitlines()[0] == f"{v1}: format 1 → 21, 20 migrations"
    assert re.search(r"^0001-lexical-index\s+1 → 2\s+9\s+build the lexical", out, re.M)
    assert re.search(r"^0002-pinned-and-frame-time\s+2 → 3\s+11\s+rewrite frame", out, re.M)
    assert re.search(r"^0003-tag-index-by-type\s+3 → 4\s+11\s+rewrite tag", out, re.M)
    assert re.search(r"^0004-lexical-stemming\s+4 → 5\s+9\s+rebuild the lexical", out, re.M)
    assert re.search(r"^0005-posting-blocks\s+5 → 6\s+9\s+rebuild the lexical", out, re.M)
    assert re.search(r"^0006-episodes\s+6 → 7\s+0\s+allow episodes", out, re.M)
    assert re.search(r"^0007-claim-index\s+7 → 8\s+11\s+index Facts", out, re.M)
    assert out.endswith("dry run: nothing written\n")
    assert (v1 / "data.mdb").read_bytes() == before
    assert run(capsys, "info")[0] == 1  # still format 1
    rc, out, err = run(capsys, "migrate")
    assert (rc, err) == (0, "")  # not a terminal: no bar
    lines = out.splitlines()
    assert lines[0] == f"{v1}: format 1 → 21, 20 migrations" and "0001-lexical-index" in lines[2]
    assert lines[-6].startswith(f"applied {KD} (") and lines[-6].endswith(" records)")
    assert lines[-3].startswith("applied 0019-index-duplicates (")
    assert lines[-3].endswith(" records)")
    assert lines[:-6][-15:] + lines[-5:-3] + lines[-2:] == [
        "applied 0001-lexical-index (9 records)",
        "applied 0002-pinned-and-frame-time (11 records)",
        "applied 0003-tag-index-by-type (11 records)",
        "applied 0004-lexical-stemming (9 records)",
        "applied 0005-posting-blocks (9 records)",
        "applied 0006-episodes (0 records)",
        "applied 0007-claim-index (11 records)",
        "applied 0008-sensitivity-in-heads (0 records)",
        "applied 0009-posting-segments (0 records)",
        "applied 0010-counters-in-heads (0 records)",
        "applied 0011-current-claims-named-counters (0 records)",
        "applied 0012-half-vectors (0 records)",
        "applied 0013-posting-docnos (9 records)",
        "applied 0014-compact-forms (25 records)",
        "applied 0015-lean-lexical-documents (9 records)",
        "applied 0017-medium-references (14 records)",
        "applied 0018-head-database (11 records)",
        "applied 0020-memory-rows (11 records)",
        f"{v1}: now at format 21",
    ]
    info = run_json(capsys, "info")
    assert info["format_version"] == FORMAT_VERSION and "lexical-bm25" in info["features"]
    assert run(capsys, "verify")[1].startswith("ok: 11 memories, 14 versions")
    owner = ("--actor", "fixture-agent")  # the fixture's memories are private to its owner
    hits = run_json(capsys, *owner, "find", "--text", "Genève", "--limit", "3")["hits"]
    assert hits and "Genève" in hits[0]["text"]
    assert run(capsys, "write", "Fact", FACT)[0] == 0  # the store is writable again
    (
        entry,
        second,
        third,
        fourth,
        fifth,
        sixth,
        seventh,
        eighth,
        ninth,
        tenth,
        eleventh,
        twelfth,
        thirteenth,
        fourteenth,
        fifteenth,
        sixteenth,
        seventeenth,
        eighteenth,
        nineteenth,
        twentieth,
    ) = [
        json.loads(line)
        for line in run(capsys, "--json", "log", "--kind", "migration")[1].splitlines()
    ]
    assert entry["by"] == "tester" and entry["reason"] == "0001-lexical-index: format 1 -> 2"
    assert second["reason"] == "0002-pinned-and-frame-time: format 2 -> 3"
    assert third["reason"] == "0003-tag-index-by-type: format 3 -> 4"
    assert fourth["reason"] == "0004-lexical-stemming: format 4 -> 5"
    assert fifth["reason"] == "0005-posting-blocks: format 5 -> 6"
    assert sixth["reason"] == "0006-episodes: format 6 -> 7"
    assert seventh["reason"] == "0007-claim-index: format 7 -> 8"
    assert eighth["reason"] == "0008-sensitivity-in-heads: format 8 -> 9"
    assert ninth["reason"] == "0009-posting-segments: format 9 -> 10"
    assert tenth["reason"] == "0010-counters-in-heads: format 10 -> 11"
    assert eleventh["reason"] == "0011-current-claims-named-counters: format 11 -> 12"
    assert twelfth["reason"] == "0012-half-vectors: format 12 -> 13"
    assert thirteenth["reason"] == "0013-posting-docnos: format 13 -> 14"
    assert fourteenth["reason"] == "0014-compact-forms: format 14 -> 15"
    assert fifteenth["reason"] == "0015-lean-lexical-documents: format 15 -> 16"
    assert sixteenth["reason"] == f"{KD}: format 16 -> 17"
    assert seventeenth["reason"] == "0017-medium-references: format 17 -> 18"
    assert eighteenth["reason"] == "0018-head-database: format 18 -> 19"
    assert nineteenth["reason"] == "0019-index-duplicates: format 19 -> 20"
    assert twentieth["reason"] == "0020-memory-rows: format 20 -> 21"
    rc, out, err = run(capsys, "migrate")
    assert (rc, out, err) == (0, f"{v1}: up to date (format 21)\n", "")
    assert run(capsys, "migrate", "--dry-run")[1] == f"{v1}: up to date (format 21)\n"


def test_migrate_json_reports(v1: Path, capsys: pytest.CaptureFixture[str]) -> None:
    step = {
        "name": "0001-lexical-index",
        "from_version": 1,
        "to_version": 2,
        "description": "build the lexical (BM25) index for every live memory",
        "records": 9,
    }
    step2 = {
        "name": "0002-pinned-and-frame-time",
        "from_version": 2,
        "to_version": 3,
        "description": "rewrite frame index keys in created order; build the pinned index",
        "records": 11,
    }
    step3 = {
        "name": "0003-tag-index-by-type",
        "from_version": 3,
        "to_version": 4,
        "description": "rewrite tag index keys with the type after the tag",
        "records": 11,
    }
    step4 = {
        "name": "0004-lexical-stemming",
        "from_version": 4,
        "to_version": 5,
        "description": "rebuild the lexical index with stemmed (Snowball English) terms",
        "records": 9,
    }
    step5 = {
        "name": "0005-posting-blocks",
        "from_version": 5,
        "to_version": 6,
        "description": "rebuild the lexical index with its postings in blocks",
        "records": 9,
    }
    step6 = {
        "name": "0006-episodes",
        "from_version": 6,
        "to_version": 7,
        "description": "allow episodes (ep/, prov/e/); no record changes",
        "records": 0,
    }
    step7 = {
        "name": "0007-claim-index",
        "from_version": 7,
        "to_version": 8,
        "description": "index Facts and Preferences under their claim keys (temporal chains); "
        "allow write budgets, sensitivity levels, erasure records and aliases",
        "records": 11,
    }
    step8 = {
        "name": "0008-sensitivity-in-heads",
        "from_version": 8,
        "to_version": 9,
        "description": "move sensitivity levels from sens/ into the sealed head and episode "
        "records (a damaged key can no longer lower a level)",
        "records": 0,
    }
    step9 = {
        "name": "0009-posting-segments",
        "from_version": 9,
        "to_version": 10,
        "description": "allow lexical posting segments (lex/s/); a format-9 store is a "
        "format-10 store without segments: no record changes",
        "records": 0,
    }
    step10 = {
        "name": "0010-counters-in-heads",
        "from_version": 10,
        "to_version": 11,
        "description": "record in each head whether its memory has use counters (sal/): a "
        "damaged sal/ key raises instead of reading as never used",
        "records": 0,
    }
    step11 = {
        "name": "0011-current-claims-named-counters",
        "from_version": 11,
        "to_version": 12,
        "description": "keep only current memories in the claim index (idx/claim/), and name "
        "its memory in each use-counter record (sal/)",
        "records": 0,
    }
    step12 = {
        "name": "0012-half-vectors",
        "from_version": 12,
        "to_version": 13,
        "description": "allow vec/ records in float16 (the default for new vectors); every "
        "float32 record stays as it is and is read as before: no record changes",
        "records": 0,
    }
    step13 = {
        "name": "0013-posting-docnos",
        "from_version": 13,
        "to_version": 14,
        "description": "rebuild the lexical index with its postings keyed by per-store "
        "document numbers (lex/i/) in varint blocks",
        "records": 9,
    }
    step14 = {
        "name": "0014-compact-forms",
        "from_version": 14,
        "to_version": 15,
        "description": "rewrite every head and version with its forms compact: a short form "
        "that begins the medium form is stored as its length",
        "records": 25,
    }
    step15 = {
        "name": "0015-lean-lexical-documents",
        "from_version": 15,
        "to_version": 16,
        "description": "rewrite every lex/d/ record without its terms (a removal renders "
        "the indexed version again)",
        "records": 9,
    }
    step16 = {
        "name": KD,
        "from_version": 16,
        "to_version": 17,
        "description": "move each append-mostly keyspace (j/, lex/d/, lex/i/, vec/) into an "
        "LMDB named database of its own, keys unchanged (PostgreSQL: nothing)",
        "records": ANY,  # the dry run counts the records before the steps before it ran
    }
    step17 = {
        "name": "0017-medium-references",
        "from_version": 17,
        "to_version": 18,
        "description": "rewrite every version with its medium form a reference into its "
        "data where a text of the data occurs in it",
        "records": 14,
    }
    step18 = {
        "name": "0018-head-database",
        "from_version": 18,
        "to_version": 19,
        "description": "move the heads (m/) into an LMDB named database of their own, keys "
        "unchanged (PostgreSQL: nothing)",
        "records": 11,
    }
    step19 = {
        "name": "0019-index-duplicates",
        "from_version": 19,
        "to_version": 20,
        "description": "move the index keyspaces (idx/, prov/e/) into LMDB databases of "
        "duplicates, keys unchanged (PostgreSQL: nothing)",
        "records": ANY,  # the dry run counts the records before the steps before it ran
    }
    step20 = {
        "name": "0020-memory-rows",
        "from_version": 20,
        "to_version": 21,
        "description": "key every memory's head, versions, vector, use counters and lexical "
        "document by its row number (id/ maps ids to rows; lex/i/ goes; the postings are "
        "rebuilt under the rows)",
        "records": 11,
    }
    steps = (
        step,
        step2,
        step3,
        step4,
        step5,
        step6,
        step7,
        step8,
        step9,
        step10,
        step11,
        step12,
        step13,
        step14,
        step15,
        step16,
        step17,
        step18,
        step19,
        step20,
    )
    planned = run_json(capsys, "migrate", "--dry-run")
    assert planned == {
        "path": str(v1),
        "from_version": 1,
        "to_version": 21,
        "dry_run": True,
        "steps": [{**s, "applied": False} for s in steps],
    }
    done = run_json(capsys, "migrate")
    assert done == {
        **planned,
        "dry_run": False,
        "steps": [{**s, "applied": True} for s in steps],
    }
    again = run_json(capsys, "migrate")
    assert again == {**planned, "from_version": 21, "dry_run": False, "steps": []}


def test_migrate_to(v1: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, "migrate", "--to", "1")  # where it is: nothing to do
    assert (rc, err) == (
        0,
        "",
    ) and out == f"{v1}: already at format 1 (this cortex writes format 21)\n"
    rc, out, err = run(capsys, "migrate", "--to", "22")
    assert (rc, out) == (1, "") and err.count("\n") == 1
    assert err == "cortex: --to 22: format 22 is unknown: this cortex knows formats up to 21\n"
    assert run_json(capsys, "migrate", "--to", "2")["to_version"] == 2
    rc, out, err = run(capsys, "migrate", "--to", "1")
    assert (rc, out) == (1, "") and err.count("\n") == 1
    assert (
        err.startswith("cortex: --to 1: ") and "is at format 2; migrations only go forward" in err
    )
    assert run_json(capsys, "migrate")["to_version"] == 21
    assert run(capsys, "migrate", "--to", "two")[0] == 2


def test_migrate_list(v1: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "migrate", "--list")
    assert rc == 0 and out.splitlines()[0] == f"{v1}: format 1 (this cortex writes format 21)"
    assert re.search(r"^0001-lexical-index\s+1 → 2\s+pending\s+build", out, re.M)
    listed = run_json(capsys, "migrate", "--list")
    assert (listed["format_version"], listed["applied"]) == (1, [])
    assert [(k["name"], k["status"]) for k in listed["known"]] == [
        ("0001-lexical-index", "pending"),
        ("0002-pinned-and-frame-time", "pending"),
        ("0003-tag-index-by-type", "pending"),
        ("0004-lexical-stemming", "pending"),
        ("0005-posting-blocks", "pending"),
        ("0006-episodes", "pending"),
        ("0007-claim-index", "pending"),
        ("0008-sensitivity-in-heads", "pending"),
        ("0009-posting-segments", "pending"),
        ("0010-counters-in-heads", "pending"),
        ("0011-current-claims-named-counters", "pending"),
        ("0012-half-vectors", "pending"),
        ("0013-posting-docnos", "pending"),
        ("0014-compact-forms", "pending"),
        ("0015-lean-lexical-documents", "pending"),
        (KD, "pending"),
        ("0017-medium-references", "pending"),
        ("0018-head-database", "pending"),
        ("0019-index-duplicates", "pending"),
        ("0020-memory-rows", "pending"),
    ]
    run(capsys, "migrate")
    rc, out, _ = run(capsys, "migrate", "--list")
    assert re.search(
        r"^0001-lexical-index\s+1 → 2\s+applied \S+Z by tester \(9 records\)", out, re.M
    )
    listed = run_json(capsys, "migrate", "--list")
    assert listed["format_version"] == 21 and listed["known"][0]["status"] == "applied"
    applied, *_ = listed["applied"]
    assert len(listed["applied"]) == 20
    assert (applied["name"], applied["by"], applied["records"]) == (
        "0001-lexical-index",
        "tester",
        9,
    )
    fresh = str(tmp_path / "fresh")
    run(capsys, "--store", fresh, "init")
    listed = run_json(capsys, "--store", fresh, "migrate", "--list")
    assert listed["applied"] == [] and listed["known"][0]["status"] == "not needed"
    rc, _, err = run(capsys, "migrate", "--list", "--dry-run")
    assert rc == 2 and "--list" in err


def test_migrate_without_a_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nowhere = tmp_path / "nowhere"
    for argv in (["migrate"], ["migrate", "--list"], ["migrate", "--dry-run"]):
        rc, out, err = run(capsys, "--store", str(nowhere), *argv)
        assert (rc, out) == (1, "") and "init" in err and err.count("\n") == 1
    assert not nowhere.exists()
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "data.mdb").write_bytes(b"not lmdb" * 512)
    rc, _, err = run(capsys, "--store", str(tmp_path / "junk"), "migrate")
    assert rc == 1 and err.startswith("cortex: ") and err.count("\n") == 1


def _damage_lexical(store: Path) -> str:
    """Delete one posting, add a stray term record; return the deleted posting's name."""
    env = lmdb.open(str(store), subdir=True, max_dbs=0)
    try:
        with env.begin(write=True) as txn:
            cur = txn.cursor()
            assert cur.set_range(LEX_POSTING)
            key = bytes(cur.key())
            assert key.startswith(LEX_POSTING)
            txn.delete(key)
            txn.put(lex_term_key("ghost"), b"junk")
    finally:
        env.close()
    return key.decode("utf-8", "replace")


def test_reindex_repairs_the_lexical_index(
    store: Path, world: dict[str, Uri], capsys: pytest.CaptureFixture[str]
) -> None:
    journal = run(capsys, "log")[1]
    rc, out, err = run(capsys, "reindex", "--merge")  # the single writes' segments, folded
    assert (rc, err) == (0, "") and out.endswith(
        " posting segments folded into the lexical index\n"
    )
    assert run_json(capsys, "reindex", "--merge") == {"path": str(store), "merged": 0}
    assert run(capsys, "reindex", "--merge", "--vectors")[0] == 2
    _damage_lexical(store)
    rc, out, _ = run(capsys, "verify")
    assert rc == 1 and "lex/p/" in out and "lex/t/ghost" in out
    live = run_json(capsys, "info")["live"]
    rc, out, err = run(capsys, "reindex")
    assert (rc, err) == (0, "")
    assert out == f"{store}: lexical index rebuilt from {live} live memories\n"
    assert run(capsys, "verify")[0] == 0
    assert run(capsys, "log")[1] == journal  # a rebuild is not journalled
    _damage_lexical(store)
    assert run_json(capsys, "reindex", "--lexical") == {"path": str(store), "lexical": live}
    assert run_json(capsys, "verify")["ok"] is True
    hits = run_json(capsys, "find", "--text", "Zürich", "--limit", "5")["hits"]
    assert str(world["home"]) in [h["uri"] for h in hits]


def test_reindex_vectors(store: Path, fact: Uri, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, "reindex", "--vectors")
    assert (rc, out) == (1, "") and err.count("\n") == 1 and "holds no vectors yet" in err
    rc, out, err = run(capsys, "reindex", "--vectors", "--model", "m")
    assert (rc, out) == (1, "") and "no embedder 'm' ships with cortex" in err
    obj = run_json(capsys, "reindex", "--vectors", "--model", "hashing-v1-64")
    assert obj["model"] == "hashing-v1-64" and obj["vectors"] >= 1
    assert run(capsys, "verify")[0] == 0
    found = run_json(capsys, "find", "--near", "Ada", "--limit", "1")
    assert found["hits"][0]["uri"] == str(fact)  # auto: the store's own model
    again = run_json(capsys, "reindex", "--vectors")
    assert again == obj  # the same model: every live memory re-embedded once more
    rc, _, err = run(capsys, "--embedder", "hashing", "find", "--near", "Ada")
    assert rc == 1 and "holds hashing-v1-64 vectors" in err
    assert run_json(capsys, "info")["vectors"]["precision"] == "float16"  # the default
    # another precision: only by rewriting every vector
    rc, _, err = run(capsys, "--vector-precision", "float32", "find", "--near", "Ada")
    assert rc == 1 and "keeps its vectors in float16" in err
    again = run_json(capsys, "--vector-precision", "float32", "reindex", "--vectors")
    assert again == obj
    info = run_json(capsys, "info")["vectors"]
    assert (info["precision"], info["vectors"]) == ("float32", obj["vectors"])
    assert "(dim 64, stored in float32)" in run(capsys, "info")[1]
    assert run(capsys, "verify")[0] == 0
    rc, _, err = run(capsys, "reindex", "--model", "m")
    assert rc == 2 and "--model goes with --vectors" in err


def test_migrate_and_reindex_bars_only_on_a_terminal(
    v1: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    assert main(["migrate"]) == 0
    assert main(["reindex"]) == 0
    bars = term.getvalue()
    assert "\r0001-lexical-index [" in bars and "100% 9/9\n" in bars
    assert "\rlexical [" in bars and bars.endswith("100% 9/9\n")
    capsys.readouterr()


# ---------------------------------------------------------------------------------------------
# Help and docs


def _commands() -> list[tuple[list[str], argparse.ArgumentParser]]:
    """Every command (``edge add`` as two words) with its parser."""
    out = []

    def walk(parser: argparse.ArgumentParser, prefix: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    if any(isinstance(a, argparse._SubParsersAction) for a in sub._actions):
                        walk(sub, [*prefix, name])
                    else:
                        out.append(([*prefix, name], sub))

    walk(cli_main._parser(), [])
    return out


def test_the_command_list_is_complete() -> None:
    names = {" ".join(words) for words, _ in _commands()}
    assert names == {
        "init", "info", "stats", "write", "update", "head", "tombstone", "purge", "show",
        "history", "diff", "edges", "edge add", "edge remove", "log", "verify", "export",
        "import", "backup", "demo", "find", "context", "facets", "about", "attest", "migrate",
        "reindex", "ingest", "episodes", "search", "copy", "serve", "tokens", "chain",
        "conflicts", "salvage", "scrub", "alias", "unalias", "aliases",
    }  # fmt: skip


@pytest.mark.parametrize("words", [w for w, _ in _commands()], ids=" ".join)
def test_every_command_has_help(words: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, *words, "--help")
    assert rc == 0
    assert out.startswith(f"usage: cortex {' '.join(words)}")
    assert "--json" in out
    description = out.split("\n\n")[1]
    assert len(description.strip()) > 20, f"cortex {' '.join(words)} needs a description"


def _readme_cli_section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## CLI")
    return text[start : text.index("\n## ", start + 1)]


@pytest.mark.parametrize("words", [w for w, _ in _commands()], ids=" ".join)
def test_every_command_is_in_the_readme(words: list[str]) -> None:
    section = _readme_cli_section()
    assert re.search(rf"^\| `cortex {' '.join(words)}[ `]", section, re.M), (
        f"add a row for `cortex {' '.join(words)}` to the README's CLI table"
    )


def test_the_readme_cli_section_sits_before_specs() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text.index("## CLI") < text.index("## Specs")


# ---------------------------------------------------------------------------------------------
# Real processes


def _proc(*argv: str, env: dict[str, str] | None = None, input: str | None = None) -> Any:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "cortex", *argv],
        cwd=ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        input=input,
        timeout=60,
    )


def test_every_command_as_a_process(tmp_path: Path) -> None:
    env = {"CORTEX_STORE": str(tmp_path / "s"), "CORTEX_ACTOR": "proc"}

    def ok(*argv: str, input: str | None = None) -> str:
        p = _proc(*argv, env=env, input=input)
        assert p.returncode == 0, (argv, p.stderr)
        assert p.stderr == ""
        return str(p.stdout)

    ok("init")
    uri = ok("write", "Fact", "-", input=FACT).strip()
    other = json.loads(ok("--json", "write", "Identity", '{"name": "Ada"}'))["uri"]
    mid = str(Uri.parse(uri).id)
    v2 = ok("update", uri, '{"object": "Basel"}', "--merge").strip()
    assert "tags        t" in ok("head", uri, "--tag", "t")
    assert "2 live" in ok("info") and "Fact" in ok("stats")
    assert "Ada lives in Zürich" in ok("show", uri)
    assert "#2" in ok("history", mid)
    assert "data.object" in ok("diff", uri, v2)
    ok("edge", "add", uri, "references", other)
    assert "references" in ok("edges", mid)
    ok("edge", "remove", uri, "references", other)
    assert "edge" in ok("log", "-n", "3")
    assert ok("verify").startswith("ok:")
    ok("export", str(tmp_path / "x.cbor"))
    assert "imported 2 memories" in ok(
        "--store", str(tmp_path / "t"), "import", str(tmp_path / "x.cbor")
    )
    assert "verify ok" in ok("backup", str(tmp_path / "b"))
    assert "lexical index rebuilt from 2 live memories" in ok("reindex")
    assert "up to date" in ok("migrate")
    old = str(_format1(tmp_path / "v1"))
    refused = _proc("--store", old, "info", env=env)
    assert refused.returncode == 1 and refused.stdout == "" and refused.stderr.count("\n") == 1
    assert f"run `cortex --store {old} migrate`" in refused.stderr
    assert "now at format 21" in ok("--store", old, "migrate")
    assert ok("--store", old, "verify").startswith("ok:")
    assert v2 in ok("find", "--type", "fact", "--where", "data.subject = ada")
    assert "## pinned" in ok("context", "find", "ada")
    assert "Fact" in ok("facets")
    assert "Ada" in ok("about", "ada")
    assert "attested 1" in ok("attest", mid, "--outcome", "success")
    ok("tombstone", other, "--reason", "test")
    ok("purge", other, "--reason", "test")
    assert "Fact" in ok("demo", str(tmp_path / "demo"))
    bad = _proc("show", "cortex://Fact/01HWT0D7G00000000000000001#1", env=env)
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.startswith("cortex: no memory") and bad.stderr.count("\n") == 1
    assert "Traceback" not in bad.stderr
    usage = _proc("show", env=env)
    assert usage.returncode == 2 and "usage:" in usage.stderr


def test_log_follow_as_a_process_stops_on_interrupt(tmp_path: Path) -> None:
    store = tmp_path / "s"
    with Cortex.open(store, actor="a") as cx:
        cx.write(Fact(statement="first", subject="u", predicate="p"))
    p = subprocess.Popen(
        [sys.executable, "-m", "cortex", "--store", str(store), "--json", "log", "--follow",
         "--interval", "0.05"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert p.stdout is not None
        assert [json.loads(p.stdout.readline())["seq"] for _ in range(2)] == [1, 2]
        with Cortex.open(store, actor="b") as cx:
            cx.write(Fact(statement="second", subject="u", predicate="p"))
        entry = json.loads(p.stdout.readline())
        assert (entry["seq"], entry["by"], entry["kind"]) == (3, "b", "write")
    finally:
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=30)
    assert p.returncode == 0 and err == ""


def test_a_broken_pipe_is_not_an_error(tmp_path: Path) -> None:
    store = tmp_path / "s"
    with Cortex.open(store, actor="a") as cx:
        cx.write_many(Fact(statement=f"s{i}", subject="u", predicate="p") for i in range(3000))
    p = subprocess.Popen(
        [sys.executable, "-m", "cortex", "--store", str(store), "log", "-n", "3000"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert p.stdout is not None and p.stderr is not None
    p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read()
    p.wait(timeout=30)
    p.stderr.close()
    assert b"Traceback" not in err


def test_chain_conflicts_and_task_budget(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = run_json(capsys, "write", "Fact", FACT)["uri"]
    rc, out, err = run(capsys, "write", "Fact", FACT.replace("Zürich", "Basel"))
    assert rc == 0 and out.startswith("cortex://Fact/") and "supersedes " + first in err
    second = out.strip()
    links = run_json(capsys, "chain", first)
    assert [x["uri"] for x in links] == [second, first] and links[0]["current"]
    rc, out, _ = run(capsys, "chain", first)
    assert rc == 0 and "current" in out and "history" in out
    same = "2026-01-01T00:00:00Z"
    a = run_json(capsys, "write", "Fact", FACT.replace("ada", "bob"), "--valid-from", same)
    b = run_json(capsys, "write", "Fact", FACT.replace("ada", "bob").replace("Zürich", "Oslo"),
                 "--valid-from", same)  # fmt: skip
    assert b["outcome"] == "conflict" and b["conflicts_with"] == [a["uri"]]
    listed = run_json(capsys, "conflicts")
    assert len(listed) == 1 and {listed[0]["a"], listed[0]["b"]} == {a["uri"], b["uri"]}
    assert run(capsys, "conflicts", "--resolve", b["uri"], a["uri"])[0] == 1  # no --reason
    rc, out, _ = run(capsys, "conflicts", "--resolve", b["uri"], a["uri"], "--reason", "said so")
    assert rc == 0 and "now supersedes" in out
    assert run(capsys, "conflicts")[1] == "no open conflicts\n"
    for i in range(2):
        assert (
            run(capsys, "write", "Event", f'{{"kind": "n{i}"}}', "--task", "t", "--budget", "2")[0]
            == 0
        )
    rc, _, err = run(capsys, "write", "Event", '{"kind": "n3"}', "--task", "t", "--budget", "2")
    assert rc == 1 and "budget of 2 is spent" in err


def test_alias_commands(tmp_path: Path, capsys: Any) -> None:
    """cortex alias / unalias / aliases: say what happened, list, suggest with an embedder."""
    store = tmp_path / "s"
    base = ["--store", str(store)]
    assert main([*base, "init"]) == 0
    capsys.readouterr()
    assert main([*base, "alias", "Sarah Chen", "@sarah"]) == 0
    assert "'sarah' now names 'sarah chen'" in capsys.readouterr().out
    assert main([*base, "aliases"]) == 0
    assert "sarah chen  sarah" in capsys.readouterr().out
    assert main([*base, "--json", "aliases", "SARAH"]) == 0
    assert json.loads(capsys.readouterr().out) == {"sarah chen": ["sarah"]}
    assert main([*base, "alias", "Bob", "sarah"]) == 1
    assert "unalias it first" in capsys.readouterr().err
    assert main([*base, "unalias", "sarah"]) == 0
    assert "no longer names" in capsys.readouterr().out
    fact = '{"statement": "x", "subject": "Sarah", "predicate": "home_city"}'
    assert main([*base, "write", "Fact", fact]) == 0
    fact2 = '{"statement": "y", "subject": "Sarah Chen", "predicate": "home_city"}'
    assert main([*base, "write", "Fact", fact2]) == 0
    capsys.readouterr()
    assert main([*base, "--embedder", "hashing", "--json", "aliases", "--suggest"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert {(g["a"], g["b"], g["reason"]) for g in got} >= {("sarah", "sarah chen", "words")}
