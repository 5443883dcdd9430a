"""Build the format-14 fixture store ``tests/data/format14.cortex/`` (a compacted LMDB copy).

Committed DATA, like ``make_fixture_v13.py``'s: built once at a commit where format 14 was
current (``cortex.engine.store.FORMAT_VERSION == 14``); newer code refuses to rebuild it. It
holds everything of the format-13 fixture (records, labels, text, counters, chains, vectors,
postings by document number) written at format 14, then memories whose forms take each of
format 15's encodings: rendered forms (a short form that is the medium's first bytes, cut with
"…" or whole), caller-supplied forms whose short form begins the medium form (with and without
"…", in non-ASCII text) and caller-supplied forms whose short form does not, an update (two
versions sharing nothing) and a purged version (no forms). Format 14 stores every ``Forms`` as
``{1: short, 2: medium}``: the migration ``0014-compact-forms`` rewrites the heads and versions,
and the tests check that every memory reads as before and the migrated store verifies.

    python tools/make_fixture_v14.py [--out tests/data/format14.cortex]
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
from make_fixture_v13 import populate_docnos  # noqa: E402

from cortex import Cortex, Fact, Forms, NewMemory, Preference  # noqa: E402
from cortex.index.embed import HashingEmbedder  # noqa: E402

LONG = (
    "the night ferry to the northern islands leaves from the harbour wall at eleven, "
    "calls at every pier on the way and reaches the last island a little before dawn "
    "when the sea is calm; in winter storms it waits in the sound until the wind drops "
    "and the harbour master has logged the weather"
)
OVERRIDES = [
    Forms(short="Zoë prefers tea", medium="Zoë prefers tea with lemon, never milk"),
    Forms(short="Zoë prefers cof…", medium="Zoë prefers coffee in the morning"),
    Forms(short="a summary of its own", medium="a medium form the short form does not begin"),
    Forms(short="exact", medium="exact"),
    Forms(short="naïve …", medium="naïve café"),
]
"""Caller-supplied forms (memories 150..154): keys 4, 3, 1, 4 (whole), 3 (non-ASCII)."""


def populate_forms(cx: Cortex) -> None:
    """Memories 140..143 with rendered forms, 150..154 with supplied ones, an update, a purge."""
    cx.write_many(
        [
            NewMemory(
                data=Fact(statement=LONG, subject="ferry", predicate="timetable"), id=fid(140)
            ),
            NewMemory(data=Preference(topic="window seats", polarity="prefer"), id=fid(141)),
            NewMemory(
                data=Fact(
                    statement="Ünïcödé ferry notes — déjà vu", subject="ferry", predicate="n"
                ),
                id=fid(142),
            ),
            NewMemory(data=Fact(statement="short one", subject="s", predicate="p"), id=fid(143)),
        ]
    )
    for i, forms in enumerate(OVERRIDES):
        res = cx.write(
            Fact(statement=f"supplied forms {i}", subject="forms", predicate="given"),
            id=fid(150 + i),
            forms=forms,
        )
        assert res.outcome == "created"
    cx.update(fid(143), Fact(statement=LONG + " (updated)", subject="s", predicate="p"))
    cx.update(fid(141), Preference(topic="aisle seats", polarity="prefer"))
    cx.purge(fid(141), reason="fixture")


def main() -> int:
    from cortex.engine.store import FORMAT_VERSION

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "tests" / "data" / "format14.cortex"))
    args = parser.parse_args()
    if FORMAT_VERSION != 14:
        print(
            f"this cortex writes format {FORMAT_VERSION}; the format-14 fixture can only be "
            "built at a commit where format 14 was current (it is committed data: do not "
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
