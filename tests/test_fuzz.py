"""Fuzzing of the whole public surface (issue 20): every call returns or raises a CortexError.

``tests/fuzz.py`` holds the strategies and the harness. ``make test`` runs a quick
derandomized profile (``QUICK`` examples per surface); ``make fuzz`` runs the long one
(``CORTEX_FUZZ_EXAMPLES``, default 2,000 there) and prints the calls tried per surface and the
escapes (``CORTEX_FUZZ_REPORT`` names the JSON file the counts go to).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tests.fuzz import (
    CLI_COMMANDS,
    COUNTS,
    ESCAPES,
    PG_SURFACES,
    SAMPLES,
    SURFACES,
    Calls,
    CliWorld,
    drawn_calls,
    fuzz_examples,
    new_world,
)

# hypothesis reprs a strategy now and then (labels, reports); some hold long hostile values
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")

QUICK = 30
"""Examples per surface in ``make test`` (about 20 s for every surface on 2 cores)."""

_SETTINGS = settings(
    max_examples=fuzz_examples(QUICK),
    deadline=None,
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    path = os.environ.get("CORTEX_FUZZ_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump(
                {"calls": COUNTS.table(), "escapes": ESCAPES, "samples": SAMPLES}, f, indent=1
            )
    path = os.environ.get("CORTEX_FUZZ_ESCAPES")
    if path:
        with open(path, "w") as f:
            json.dump(ESCAPES, f, indent=1)


@pytest.mark.parametrize("name", sorted(SURFACES))
def test_api(name: str) -> None:
    world = new_world(name)

    @_SETTINGS
    @given(drawn_calls(world, SURFACES[name]))
    def run(calls: Calls) -> None:
        for fn, args, kw in calls.calls:
            world.execute(fn, *args, **kw)

    try:
        run()
    finally:
        world.close()
        shutil.rmtree(world.root, ignore_errors=True)


PG_QUICK = 10
"""Examples per PostgreSQL surface in ``make test`` (each call makes round trips)."""


@pytest.mark.postgres
@pytest.mark.parametrize("name", PG_SURFACES)
def test_api_postgres(name: str, pg_url: Any) -> None:
    """The same calls on a PostgreSQL store: its reads preload in round trips."""
    world = new_world(f"pg {name}", url=pg_url())

    @settings(_SETTINGS, max_examples=max(PG_QUICK, fuzz_examples(QUICK) // 5))
    @given(drawn_calls(world, SURFACES[name]))
    def run(calls: Calls) -> None:
        for fn, args, kw in calls.calls:
            world.execute(fn, *args, **kw)

    try:
        run()
    finally:
        world.close()
        shutil.rmtree(world.root, ignore_errors=True)


@pytest.mark.parametrize("command", [c for c, _ in CLI_COMMANDS])
def test_cli(command: str) -> None:
    world = new_world(f"cli {command}")
    assert isinstance(world, CliWorld)
    parser = dict(CLI_COMMANDS)[command]
    from tests.fuzz import argvs

    @_SETTINGS
    @given(argvs(world, command, parser))
    def run(argv: list[str]) -> None:
        world.run(argv)

    try:
        run()
    finally:
        shutil.rmtree(world.root, ignore_errors=True)
