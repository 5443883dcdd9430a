"""The ``cortex demo`` tour: a store built from a scripted agent session, toured by the CLI."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from cortex import Cortex, MemoryType
from cortex.cli import main
from cortex.model.ids import Uri

URI = re.compile(r"cortex://[A-Za-z]+/[0-9A-Z]{26}#[0-9]+")


@pytest.fixture(autouse=True)
def _temp_in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the demo makes a temporary directory by default: keep it inside pytest's tmp_path
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def test_demo_tours_the_main_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", str(tmp_path / "tour")]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    # the write under Ada's other name says what it superseded, in line with the tour
    assert re.search(r"\ncortex: created \S+; supersedes \S+\n", out)
    for command in ("info", "show", "history", "diff", "edges", "find", "context", "log",
                    "verify", "export", "import", "backup"):  # fmt: skip
        assert f" {command} " in out or out.count(f" {command}\n"), command
    assert "ok: 12 memories, 13 versions" in out
    assert "12 memories and 3 edges were already there" in out  # the second import
    assert "'ada' now names 'ada lovelace'" in out  # the alias, then the chain across names
    assert re.search(r"current .* home_city\(Ada Lovelace\)=Ada lives in Zurich", out)
    assert re.search(r"history .* home_city\(ada\)=Ada lives in Basel", out)
    assert "verify ok" in out
    assert "home_city(ada)=Ada lives in Basel" in out  # the find with --where
    assert "walk index, order by hop" in out  # the walk from the booking
    assert "## pinned\n- Ada Lovelace" in out and "## outcomes\n- success flight_booking" in out
    assert {Uri.parse(u).type for u in URI.findall(out)} >= {MemoryType.FACT, MemoryType.GOAL}
    # the session wrote every type, an update and a tombstone
    with Cortex.open(tmp_path / "tour" / "agent.cortex", actor="t", create=False) as cx:
        stats = cx.stats()
    assert all(n >= 1 for n in stats["by_type"].values())
    # and the agent loop over MCP a Preference and the core user block
    assert (stats["versions"], stats["tombstoned"]) == (15, 1)
    assert sorted(p.name for p in (tmp_path / "tour").iterdir()) == [
        "agent.cbor",
        "agent.cortex",
        "agent.jsonl",
        "backup.cortex",
        "copy.cortex",
        "notes.cortex",
        "trip-notes.md",
    ]
    # episodes: a conversation and a document go in, memories come out with their quotes
    assert "3 memories drawn from it" in out
    assert 'quote       "Please keep me off red-eye flights."' in out
    assert "ok: 3 memories, 3 versions" in out and "2 episodes" in out
    # an agent loop over MCP: cortex serve on stdio, driven by the SDK's client
    assert "16 tools: memory_search" in out
    assert "memory_write" in out and "→ tool error: memory_write: data:" in out
    assert '"writes_left": 48' in out


def test_demo_defaults_to_a_new_temporary_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo"]) == 0
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("cortex-demo-")]
    capsys.readouterr()


def test_demo_refuses_to_reuse_a_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", str(tmp_path / "d")]) == 0
    capsys.readouterr()
    assert main(["demo", str(tmp_path / "d")]) == 1
    assert "exists" in capsys.readouterr().err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert main(["no-such-command"]) == 2
    assert "usage: cortex" in capsys.readouterr().err


def test_help_and_version_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "demo" in capsys.readouterr().out
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("cortex ")
