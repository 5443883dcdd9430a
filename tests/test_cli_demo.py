"""The ``cortex demo`` command."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from cortex.cli import main
from cortex.enums import MemoryType
from cortex.ids import Uri

URI = re.compile(r"cortex://[A-Za-z]+/[0-9A-Z]{26}#[0-9]+")


@pytest.fixture(autouse=True)
def _temp_in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the demo may make a temporary store: keep it inside pytest's tmp_path
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def test_demo_prints_a_uri_for_every_type(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    uris = [Uri.parse(text) for text in URI.findall(out)]
    assert {u.type for u in uris} == set(MemoryType)
    # the first URI of each type appears in type-code order, one memory per type
    first: dict[MemoryType, Uri] = {}
    for u in uris:
        first.setdefault(u.type, u)
    assert list(first) == list(MemoryType)
    assert len({u.id for u in first.values()}) == len(MemoryType)
    assert all(u.version == 1 for u in first.values())


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert main(["no-such-command"]) == 2
    assert "usage: cortex" in capsys.readouterr().err


def test_help_and_version_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "demo" in capsys.readouterr().out
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("cortex ")
