"""The bytes a deterministic store holds, and the golden vectors, are pinned by digest.

``tools/store_digest.py`` builds a store with a fixed clock and fixed ids through every kind of
write and hashes every key and value of its LMDB environment. Any change to a stored byte —
meant (a FORMAT change: record the new digests with its migration) or not — fails here, on the
C accelerator and on the pure-Python path alike.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "store_digest.py"

# FORMAT 9 (issue 20: sensitivity levels in the sealed heads and episode records). Was
# 0ff6971a… with 6353 keys at format 8; what changed, keyspace by keyspace (compared with
# main's code): sens/ is gone (165 keys), the heads and episodes it labelled hold the level
# (m/, ep/), meta/format names format 9, and the journal's init entry says "format 9" (so
# every later entry's prev hash moved; the entries are otherwise equal). Equal on both paths.
STORE_DIGEST = "6e5195604e736b4a72e831ad20a7f46da15afd485d5075d8bc1a36190906a129"
STORE_KEYS = 6188
# Was 79ed87e0… until dedupe without an embedder stopped checking in a read transaction before
# the write's (issue 14): such a write reads the clock once instead of twice (three times when it
# confirms), so the stepping clock's later times moved. Every other byte is the same: the
# digests with a clock that never moves (below) are those of the code before that change.
# At format 8 (before the FORMAT 9 change above, which moves these three for the same reasons)
# ca0891ed…, still clock 66de81b4… and ccbd4b70….
STORE_DIGEST_NO_EMBEDDER = "7b5cca457d9e28b7ff0dc4c8bf585e3f81f2ccb35a431474f5991506b8a1d5eb"
STILL_CLOCK_DIGESTS = {
    "hashing": "bf823f0a43be6f432fd709da44b022cd715ba562bbbb110171f8078538538339",
    "none": "2b44114d2a192ec4cabeb2b3414112d352d1b000af2112b71f30317ec9bec1cf",
}
# specs/vectors/sensitivity.json now holds head and episode records with their levels (was
# 069b09c6… with format 8's sens/ values); every other vector file is unchanged.
VECTORS_DIGEST = "025b327f226c5043cb6b6ed815c935c010141970546b6469a7a5ac9a82d5dfb4"


def _tool() -> Any:
    spec = importlib.util.spec_from_file_location("store_digest", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_store_and_vectors_digests_are_the_recorded_ones(tmp_path: Path) -> None:
    out = _tool().measure("hashing", tmp_path)
    assert (out["store"], out["keys"]) == (STORE_DIGEST, STORE_KEYS), out["keyspaces"]
    assert out["vectors"] == out["vectors_built"] == VECTORS_DIGEST


def test_the_store_without_vectors(tmp_path: Path) -> None:
    assert _tool().measure("none", tmp_path)["store"] == STORE_DIGEST_NO_EMBEDDER


@pytest.mark.parametrize("embedder", ["hashing", "none"])
def test_with_a_still_clock_the_bytes_do_not_depend_on_how_often_the_clock_is_read(
    tmp_path: Path, embedder: str
) -> None:
    assert _tool().measure(embedder, tmp_path, still=True)["store"] == STILL_CLOCK_DIGESTS[embedder]


@pytest.mark.parametrize("switch", ["1", None], ids=["pure-python", "accelerated"])
def test_both_paths_store_the_same_bytes(switch: str | None) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CORTEX_NO_SPEEDUPS"}
    if switch is not None:
        env["CORTEX_NO_SPEEDUPS"] = switch
    run = subprocess.run(
        [sys.executable, str(TOOL), "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    out = json.loads(run.stdout)
    assert out["store"] == STORE_DIGEST, out["keyspaces"]
    built = subprocess.run(
        [sys.executable, "-c", "import cortex._speedups"], cwd=ROOT, capture_output=True
    )
    assert out["accelerated"] is (switch is None and built.returncode == 0)
