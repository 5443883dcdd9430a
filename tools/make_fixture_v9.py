"""Build the format-9 fixture store ``tests/data/format9.cortex/`` (a compacted LMDB copy).

Committed DATA, like ``make_fixture_v8.py``'s: built once at the commit where format 9 was
current (``cortex.engine.store.FORMAT_VERSION == 9``); newer code refuses to rebuild it. It
holds ``make_fixture_v1.populate``, ``make_fixture_v8.populate_labels`` and then
``populate_text``: single writes, an update, a tombstone and a purge that change the lexical
index one memory at a time (format 9 rewrote each term's posting block and its ``lex/t/`` entry
in every such commit). The migration to format 10 (``0009-posting-segments``) changes no
record: a format-9 store is a format-10 store without ``lex/s/`` segments; the tests check that
it verifies, searches the same, and that writes after it use segments.

    python tools/make_fixture_v9.py [--out tests/data/format9.cortex]
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
from make_fixture_v8 import populate_labels  # noqa: E402

from cortex import Belief, Cortex, Fact, Stance  # noqa: E402


def populate_text(cx: Cortex) -> None:
    """Single writes and changes of the lexical index, on top of ``populate_labels``."""
    for i in range(8):
        cx.write(
            Belief(statement=f"segment note {i} about the tea garden and plan {i % 3}",
                   stance=Stance.SUSPECT, confidence=0.5),
            id=fid(60 + i),
        )  # fmt: skip
    cx.update(
        fid(61),
        Belief(statement="segment note 1 rewritten: coffee instead of tea", stance=Stance.BELIEVE,
               confidence=0.7),
    )  # fmt: skip
    cx.tombstone(fid(62), "fixture")
    cx.purge(fid(63), "fixture")
    cx.write(
        Fact(statement="the tea garden opens at nine", subject="garden", predicate="opens"),
        id=fid(68),
    )


def main() -> int:
    from cortex.engine.store import FORMAT_VERSION

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "tests" / "data" / "format9.cortex"))
    args = parser.parse_args()
    if FORMAT_VERSION != 9:
        print(
            f"this cortex writes format {FORMAT_VERSION}; the format-9 fixture can only be built "
            "at a commit where format 9 was current (it is committed data: do not rebuild it)",
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
        populate_text(cx)
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
