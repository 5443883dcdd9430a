"""Build the format-11 fixture store ``tests/data/format11.cortex/`` (a compacted LMDB copy).

Committed DATA, like ``make_fixture_v10.py``'s: built once at the commit where format 11 was
current (``cortex.engine.store.FORMAT_VERSION == 11``); newer code refuses to rebuild it. It
holds everything of the format-10 fixture (``make_fixture_v10``) and then ``populate_chains``:
temporal chains (``claims.md`` §6) in every state the claim index knew in format 11, where a
superseded memory kept its ``idx/claim/`` entries marked ``s`` — a chain of four home cities
(three superseded), an archived write (a lower confidence than the memory it met), an open
conflict (two current memories), a conflict closed by ``resolve_conflict``, a superseder
tombstoned (the memory it ended is current again) and a superseded memory tombstoned itself.
Format 12 keeps only the current memories in the index; the migration
``0011-current-claims-named-counters`` deletes the marked entries (and names each use-counter
record's memory), and the tests check that the chains read the same after it and that the
store verifies.

    python tools/make_fixture_v11.py [--out tests/data/format11.cortex]
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

from cortex import Cortex, Fact  # noqa: E402

SUPERSEDED = (80, 81, 82, 85, 88, 90)
"""The fixture numbers of the memories a ``supersedes`` edge ends (marked ``s`` in format 11)."""
CURRENT = (83, 84, 86, 87, 89, 91)
"""The fixture numbers of the chains' current memories."""


def populate_chains(cx: Cortex) -> None:
    """The chains on top of ``populate_counters`` (see the module's docstring)."""

    def fact(n: int, statement: str, subject: str, predicate: str, **kw: object) -> str:
        res = cx.write(
            Fact(statement=statement, subject=subject, predicate=predicate), id=fid(n), **kw
        )
        return res.outcome

    # a chain of four home cities: each supersedes the one before
    assert fact(80, "Ida lives in Zurich", "ida", "home_city") == "created"
    for n, city in ((81, "Basel"), (82, "Bern"), (83, "Geneva")):
        assert fact(n, f"Ida lives in {city}", "ida", "home_city") == "superseded"
    # an archived write: a lower confidence than the memory it meets
    assert fact(84, "Bo works at Acme", "bo", "employer") == "created"
    assert fact(85, "Bo works at Initech", "bo", "employer", confidence=0.4) == "archived"
    # an open conflict: the same time and confidence (valid_from given)
    when = cx._now()
    assert fact(86, "Cy's budget is 400", "cy", "budget", valid_from=when) == "created"
    assert fact(87, "Cy's budget is 4000", "cy", "budget", valid_from=when) == "conflict"
    # a conflict closed by the caller
    assert fact(88, "Di's deadline is May", "di", "deadline", valid_from=when) == "created"
    assert fact(89, "Di's deadline is June", "di", "deadline", valid_from=when) == "conflict"
    cx.resolve_conflict(fid(89), fid(88), reason="fixture: June was confirmed")
    # a superseder tombstoned: the memory it ended is current again
    assert fact(90, "Eve's title is engineer", "eve", "title") == "created"
    assert fact(91, "Eve's title is manager", "eve", "title") == "superseded"
    assert fact(92, "Eve's title is director", "eve", "title") == "superseded"
    cx.tombstone(fid(92), "fixture: a mistake")  # 91 is current again, 90 stays superseded
    # a superseded memory tombstoned itself keeps its (marked) entry
    cx.tombstone(fid(80), "fixture: retired")


def main() -> int:
    from cortex.engine.store import FORMAT_VERSION

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "tests" / "data" / "format11.cortex"))
    args = parser.parse_args()
    if FORMAT_VERSION != 11:
        print(
            f"this cortex writes format {FORMAT_VERSION}; the format-11 fixture can only be "
            "built at a commit where format 11 was current (it is committed data: do not "
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
        populate_chains(cx)
        with cx._kv.read() as txn:
            marked = {
                n
                for n in range(80, 93)
                for k, v in txn.scan(b"idx/claim/")
                if k.endswith(fid(n).bytes) and v == b"s"
            }
        assert marked == set(SUPERSEDED), sorted(marked)
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
