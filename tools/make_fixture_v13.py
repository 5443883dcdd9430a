"""Build the format-13 fixture store ``tests/data/format13.cortex/`` (a compacted LMDB copy).

Committed DATA, like ``make_fixture_v12.py``'s: built once at a commit where format 13 was
current (``cortex.engine.store.FORMAT_VERSION == 13``); newer code refuses to rebuild it. It
holds everything of the format-12 fixture (records, labels, text, counters, chains, vectors)
written at format 13 (its new vectors float16), then more text in the lexical index's format-13
layout: posting blocks keyed by memory id, and pending posting segments (single writes, an
update and a tombstone after a fold). Format 14 keys postings by document number: the migration
``0013-posting-docnos`` rebuilds the lexical index, and the tests check that the migrated
store verifies and ranks as before.

    python tools/make_fixture_v13.py [--out tests/data/format13.cortex]
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
from make_fixture_v9 import populate_text  # noqa: E402
from make_fixture_v10 import populate_counters  # noqa: E402
from make_fixture_v11 import populate_chains  # noqa: E402
from make_fixture_v12 import DIM, populate_vectors  # noqa: E402

from cortex import Cortex, Fact, NewMemory  # noqa: E402
from cortex.index.embed import HashingEmbedder  # noqa: E402

PENDING = [
    "the harbour master logs every ferry",
    "ferry timetables change in winter",
    "a lighthouse keeper logs the storms",
]
"""Single writes left in posting segments (memories 110, 111, 112)."""


def populate_docnos(cx: Cortex) -> None:
    """A batch folded into the blocks (120..139), then pending segments.

    Single writes (110..112), an update and a tombstone after the fold stay in segments.
    """
    cx.write_many(
        [
            NewMemory(
                data=Fact(statement=f"ferry log entry {i} harbour", subject="log", predicate="e"),
                id=fid(120 + i),
            )
            for i in range(20)
        ]
    )
    cx.merge_lexical()
    for i, text in enumerate(PENDING):
        res = cx.write(Fact(statement=text, subject="harbour", predicate="note"), id=fid(110 + i))
        assert res.outcome == "created"
    cx.update(fid(121), Fact(statement="ferry log entry rewritten", subject="log", predicate="e"))
    cx.tombstone(fid(122), "fixture")


def main() -> int:
    from cortex.engine.store import FORMAT_VERSION

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "tests" / "data" / "format13.cortex"))
    args = parser.parse_args()
    if FORMAT_VERSION != 13:
        print(
            f"this cortex writes format {FORMAT_VERSION}; the format-13 fixture can only be "
            "built at a commit where format 13 was current (it is committed data: do not "
            "rebuild it)",
            file=sys.stderr,
        )
        return 2
    out = Path(args.out)
    with tempfile.TemporaryDirectory(prefix="cortex-fixture-") as tmp:
        path = Path(tmp) / "s"
        clock = FixedClock()
        with Cortex.open(path, actor=ACTOR, clock=clock) as cx:
            populate(cx)
            populate_labels(cx)
            populate_text(cx)
            populate_counters(cx)
            populate_chains(cx)
        with Cortex.open(path, actor=ACTOR, clock=clock, embedder=HashingEmbedder(DIM)) as cx:
            populate_vectors(cx)
            populate_docnos(cx)
            with cx._kv.read() as txn:
                assert list(txn.keys(b"lex/s/")), "no pending segment"
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
