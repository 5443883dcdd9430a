"""Build the format-8 fixture store ``tests/data/format8.cortex/`` (a compacted LMDB copy).

Committed DATA, like ``make_fixture_v1.py``'s: built once at the commit where format 8 was
current (``cortex.engine.store.FORMAT_VERSION == 8``); newer code refuses to rebuild it. It
holds ``make_fixture_v1.populate`` and then ``populate_labels``: memories and episodes at every
level other than ``internal`` (format 8 kept those under ``sens/m/`` and ``sens/e/``), a level
changed by ``update_head`` and by ``set_episode_sensitivity``, one set back to ``internal``,
and a purged labelled memory. The migration to format 9 (``0008-sensitivity-in-heads``) moves
each level into its head or episode record; the tests compare the result with a store written
fresh through the same two calls.

    python tools/make_fixture_v8.py [--out tests/data/format8.cortex]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from make_fixture_v1 import ACTOR, FixedClock, fid, populate  # noqa: E402

from cortex import Cortex, Fact, MemoryId  # noqa: E402


def eid(n: int) -> MemoryId:
    """The caller-chosen id of fixture episode ``n``."""
    return MemoryId(fid(0).bytes[:6] + bytes(8) + bytes([1, n]))


def populate_labels(cx: Cortex) -> None:
    """Labelled memories and episodes, on top of ``populate`` (same store, same clock)."""
    levels = ["public", "confidential", "restricted"]
    for i, level in enumerate(levels):
        cx.write(
            Fact(statement=f"labelled fact {level}", subject="label", predicate=f"p{i}"),
            id=fid(40 + i),
            sensitivity=level,
        )
        cx.ingest(f"episode at level {level}", id=eid(i), sensitivity=level)
    cx.write(Fact(statement="later restricted", subject="label", predicate="q"), id=fid(43))
    cx.update_head(fid(43), sensitivity="restricted")  # internal -> restricted by a head change
    cx.update_head(fid(40), sensitivity="internal")  # public -> internal: no entry left
    cx.set_episode_sensitivity(eid(0), "confidential")
    cx.write(Fact(statement="purged secret", subject="label", predicate="r"), id=fid(44),
             sensitivity="confidential")  # fmt: skip
    cx.purge(fid(44), "fixture")


def main() -> int:
    from cortex.engine.store import FORMAT_VERSION

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "tests" / "data" / "format8.cortex"))
    args = parser.parse_args()
    if FORMAT_VERSION != 8:
        print(
            f"this cortex writes format {FORMAT_VERSION}; the format-8 fixture can only be built "
            "at a commit where format 8 was current (it is committed data: do not rebuild it)",
            file=sys.stderr,
        )
        return 2
    out = Path(args.out)
    with (
        tempfile.TemporaryDirectory(prefix="cortex-fixture-") as tmp,
        Cortex.open(Path(tmp) / "s", actor=ACTOR, clock=FixedClock()) as cx,
    ):
        populate(cx)
        populate_labels(cx)
        report = cx.verify()
        assert report.ok, report.problems
        if out.exists():
            shutil.rmtree(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        cx._kv.copy(out)
    for f in sorted(out.iterdir()):
        print(f"{f}: {f.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
