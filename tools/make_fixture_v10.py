"""Build the format-10 fixture store ``tests/data/format10.cortex/`` (a compacted LMDB copy).

Committed DATA, like ``make_fixture_v9.py``'s: built once at the commit where format 10 was
current (``cortex.engine.store.FORMAT_VERSION == 10``); newer code refuses to rebuild it. It
holds ``make_fixture_v1.populate``, ``make_fixture_v8.populate_labels``,
``make_fixture_v9.populate_text`` and then ``populate_counters``: memories with use counters
(``sal/``) written every way a store writes them — a find with ``record_access``, ``attest``
with a success and a failure, and a dedupe confirmation — plus a tombstoned memory that keeps
its counters and a purged one whose counters went with it. Format 11 records in each head
whether its memory has counters; the migration ``0010-counters-in-heads`` sets the flag on
every head with a ``sal/`` record, and the tests check that the counters read the same after
it, that the flags are set exactly there, and that the store verifies.

    python tools/make_fixture_v10.py [--out tests/data/format10.cortex]
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

from cortex import Cortex, Fact, Outcome, Query  # noqa: E402

COUNTED = (1, 2, 5, 60, 64, 68, 70, 71)
"""The fixture numbers (``fid``) of the memories that have use counters in the fixture."""


def populate_counters(cx: Cortex) -> None:
    """Use counters on top of ``populate_text`` (``COUNTED`` ends with them)."""
    hits = cx.find(Query(text="tea garden", limit=3, record_access=True)).hits
    assert hits, "the fixture's text find returned nothing"
    cx.attest([fid(1), fid(2)], Outcome.SUCCESS)
    cx.attest([fid(5)], Outcome.FAILURE)
    cx.write(
        Fact(statement="the lab kettle boils in 90 seconds", subject="kettle", predicate="boils"),
        id=fid(70),
    )
    again = cx.write(
        Fact(statement="the lab kettle boils in 90 seconds", subject="kettle", predicate="boils"),
        dedupe=True,
    )
    assert again.outcome == "confirmed", again
    cx.write(Fact(statement="an attested memory, later retired", subject="x", predicate="y"),
             id=fid(71))  # fmt: skip
    cx.attest([fid(71)], Outcome.PARTIAL)
    cx.tombstone(fid(71), "fixture")  # keeps its counters
    cx.write(Fact(statement="an attested memory, later erased", subject="x", predicate="z"),
             id=fid(72))  # fmt: skip
    cx.attest([fid(72)], Outcome.SUCCESS)
    cx.purge(fid(72), "fixture")  # its counters go with it


def main() -> int:
    from cortex.engine.store import FORMAT_VERSION

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "tests" / "data" / "format10.cortex"))
    args = parser.parse_args()
    if FORMAT_VERSION != 10:
        print(
            f"this cortex writes format {FORMAT_VERSION}; the format-10 fixture can only be "
            "built at a commit where format 10 was current (it is committed data: do not "
            "rebuild it)",
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
        populate_counters(cx)
        with cx._kv.read() as txn:
            counted = {n for n in range(1, 80) if txn.get(b"sal/" + fid(n).bytes) is not None}
        assert counted == set(COUNTED), sorted(counted)
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
