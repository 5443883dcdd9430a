"""Build the format-12 fixture store ``tests/data/format12.cortex/`` (a compacted LMDB copy).

Committed DATA, like ``make_fixture_v11.py``'s: built once at the commit where format 12 was
current (``cortex.engine.store.FORMAT_VERSION == 12``); newer code refuses to rebuild it. It
holds everything of the format-11 fixture (``make_fixture_v11``: records, labels, text,
counters, chains) written at format 12, and then vectors: the store opened with
``HashingEmbedder(64)`` (model ``hashing-v1-64``, small so the fixture stays small) embeds every
live memory, and two more memories are written with that embedder, one with a caller's vector.
Every ``vec/`` record is float32, the only element type format 12 knows. Format 13 stores new
vectors as float16 and reads the old records as they are: the migration ``0012-half-vectors``
rewrites no record, and the tests check that a store holding both element types verifies and
that search finds memories of both.

    python tools/make_fixture_v12.py [--out tests/data/format12.cortex]
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

from cortex import Cortex, Fact  # noqa: E402
from cortex.index.embed import HashingEmbedder  # noqa: E402

DIM = 64
"""The fixture's vector length (model ``hashing-v1-64``)."""
GIVEN = [((i * 7) % 11) - 5.0 for i in range(DIM)]
"""The caller's vector of memory 101 (scaled to unit length when stored)."""


def populate_vectors(cx: Cortex) -> None:
    """Two memories written with the embedder open (``cx``): 100 embedded, 101 a given vector."""
    res = cx.write(
        Fact(statement="the lighthouse keeper paints boats", subject="keeper", predicate="hobby"),
        id=fid(100),
    )
    assert res.outcome == "created"
    res = cx.write(
        Fact(statement="a caller's vector for the harbour", subject="harbour", predicate="note"),
        id=fid(101),
        vector=GIVEN,
    )
    assert res.outcome == "created"


def main() -> int:
    from cortex.engine.store import FORMAT_VERSION

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "tests" / "data" / "format12.cortex"))
    args = parser.parse_args()
    if FORMAT_VERSION != 12:
        print(
            f"this cortex writes format {FORMAT_VERSION}; the format-12 fixture can only be "
            "built at a commit where format 12 was current (it is committed data: do not "
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
            info = cx.vector_info()
            assert info is not None and info["model_id"] == f"hashing-v1-{DIM}", info
            with cx._kv.read() as txn:
                records = [v for _, v in txn.scan(b"vec/")]
            assert records and all(len(v) > 4 * DIM for v in records)
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
