"""CORTEX_NO_SPEEDUPS=1 (tests/conftest.py) turns the C accelerator off for a whole run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULES = (
    "model.codec",
    "storage.keys",
    "storage.kv",
    "index.lexical",
    "index.postings",
    "engine.store",
    "engine.journal",
    "index.text",
)

PROBE = f"""
import tests.conftest
import importlib
flags = [importlib.import_module("cortex." + m)._USE_SPEEDUPS for m in {MODULES!r}]
print(sum(map(bool, flags)))
"""


def _accelerated(switch: str | None) -> int:
    env = {k: v for k, v in os.environ.items() if k != "CORTEX_NO_SPEEDUPS"}
    if switch is not None:
        env["CORTEX_NO_SPEEDUPS"] = switch
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return int(out.stdout.strip())


def test_the_switch_leaves_no_module_accelerated() -> None:
    assert _accelerated("1") == 0


def test_without_the_switch_the_accelerator_is_used_when_built() -> None:
    built = subprocess.run(
        [sys.executable, "-c", "import cortex._speedups"], cwd=ROOT, capture_output=True
    )
    assert _accelerated(None) == (len(MODULES) if built.returncode == 0 else 0)
