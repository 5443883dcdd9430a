"""Build the format-15 fixture store ``tests/data/format15.cortex/`` (a compacted LMDB copy).

Committed DATA, like ``make_fixture_v14.py``'s: built once at a commit where format 15 was
current (``cortex.engine.store.FORMAT_VERSION == 15``); newer code refuses to rebuild it. It
holds everything of the format-14 fixture (records, labels, text, counters, chains, vectors,
postings by document number, forms of every encoding) written at format 15, then memories
whose lexical documents exercise format 16's change: text with non-ASCII and repeated terms,
a memory with an empty full form's worth of terms beyond its labels, updates (a removal that
must find the old version's terms), a tombstone and a purge after an update. Format 15 stores
each ``lex/d/`` record with its distinct terms (``LexDoc`` schema version 1): the migration
``0015-lean-lexical-documents`` rewrites them without, and the tests check that the migrated
store verifies and that updating, tombstoning and purging its memories keeps the index exact.

    python tools/make_fixture_v15.py [--out tests/data/format15.cortex]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Callable
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
from make_fixture_v13 import populate_docnos  # noqa: E402
from make_fixture_v14 import populate_forms  # noqa: E402

from cortex import Cortex, Event, Fact, Goal, GoalStatus, NewMemory  # noqa: E402
from cortex.index.embed import HashingEmbedder  # noqa: E402

DOCS = {
    160: Fact(statement="Ærøskøbing ferries ferries ferries", subject="ærø", predicate="sails"),
    161: Fact(statement="東京 and 大阪 by the night train", subject="rail", predicate="route"),
    162: Goal(statement="learn the harbour's tide tables by heart", status=GoalStatus.ACTIVE),
    163: Event(kind="the lighthouse keeper's retirement party"),
    164: Fact(statement="x", subject="y", predicate="z"),
}
"""Memories 160..164, written in one batch; 160 and 161 are then updated, 162 tombstoned,
163 updated and purged."""


def populate_lean(cx: Cortex) -> None:
    """Memories 160..164 (``DOCS``), then updates, a tombstone and a purge of some of them."""
    cx.write_many([NewMemory(data=d, id=fid(n)) for n, d in DOCS.items()])
    cx.update(
        fid(160), Fact(statement="Ærøskøbing ferries in winter", subject="ærø", predicate="sails")
    )
    cx.update(
        fid(161), Fact(statement="東京 by the morning train", subject="rail", predicate="route")
    )
    cx.tombstone(fid(162), reason="fixture")
    cx.update(fid(163), Event(kind="the lighthouse keeper's farewell dinner"))
    cx.purge(fid(163), reason="fixture")


def build(fmt: int, *more: Callable[[Cortex], None]) -> int:
    """Build the fixture of format ``fmt`` (15; 16 and 17 by ``make_fixture_v16/v17.py``).

    Every populate step up to ``populate_lean``, then ``more`` (the later fixtures' own steps),
    then a compacted copy of ``data.mdb`` alone in ``--out``. Returns the exit code: 2 when this
    cortex does not write format ``fmt``.
    """
    from cortex.engine.store import FORMAT_VERSION

    parser = argparse.ArgumentParser(description=f"Build the format-{fmt} fixture store.")
    parser.add_argument("--out", default=str(ROOT / "tests" / "data" / f"format{fmt}.cortex"))
    args = parser.parse_args()
    if fmt != FORMAT_VERSION:
        print(
            f"this cortex writes format {FORMAT_VERSION}; the format-{fmt} fixture can only be "
            f"built at a commit where format {fmt} was current (it is committed data: do not "
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
            populate_forms(cx)
            populate_lean(cx)
            for step in more:
                step(cx)
            report = cx.verify()
            assert report.ok, report.problems
            if out.exists():
                shutil.rmtree(out)
            out.parent.mkdir(parents=True, exist_ok=True)
            if fmt >= 20:  # LMDB's compacting copy cannot copy databases of duplicates
                from cortex.storage.engines import copy_kv

                copy_kv(cx._kv, out)
            else:
                cx._kv.copy(out)
    for f in sorted(out.iterdir()):
        if f.name != "data.mdb":
            f.unlink()  # the fixture is data.mdb only
    for f in sorted(out.iterdir()):
        print(f"{f}: {f.stat().st_size} bytes")
    return 0


def main() -> int:
    return build(15)


if __name__ == "__main__":
    sys.exit(main())
