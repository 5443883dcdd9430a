"""Build the format-16 fixture store ``tests/data/format16.cortex/`` (a compacted LMDB copy).

Committed DATA, like ``make_fixture_v15.py``'s: built once at a commit where format 16 was
current (``cortex.engine.store.FORMAT_VERSION == 16``); newer code refuses to rebuild it. It
holds everything of the format-15 fixture (records, labels, text, counters, chains, vectors,
postings by document number, every kind of forms, lean lexical documents) written at format 16,
where every keyspace is in LMDB's main database: the migration ``0016-keyspace-databases`` moves
``j/``, ``lex/d/``, ``lex/i/`` and ``vec/`` into named databases of their own, and the tests
check that every record is the same before and after, every memory reads as before and the
migrated store verifies.

    python tools/make_fixture_v16.py [--out tests/data/format16.cortex]
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

from make_fixture_v1 import ACTOR, FixedClock, populate  # noqa: E402
from make_fixture_v8 import populate_labels  # noqa: E402
from make_fixture_v9 import populate_text  # noqa: E402
from make_fixture_v10 import populate_counters  # noqa: E402
from make_fixture_v11 import populate_chains  # noqa: E402
from make_fixture_v12 import DIM, populate_vectors  # noqa: E402
from make_fixture_v13 import populate_docnos  # noqa: E402
from make_fixture_v14 import populate_forms  # noqa: E402
from make_fixture_v15 import populate_lean  # noqa: E402

from cortex import Cortex  # noqa: E402
from cortex.index.embed import HashingEmbedder  # noqa: E402

FORMAT: int = 16
"""The format this fixture is of: the one before ``0016-keyspace-databases``."""


def main() -> int:
    from cortex.engine.store import FORMAT_VERSION

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "tests" / "data" / f"format{FORMAT}.cortex"))
    args = parser.parse_args()
    if FORMAT_VERSION != FORMAT:
        print(
            f"this cortex writes format {FORMAT_VERSION}; the format-{FORMAT} fixture can only "
            f"be built at a commit where format {FORMAT} was current (it is committed data: do "
            "not rebuild it)",
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
