"""Build the format-17 fixture store ``tests/data/format17.cortex/`` (a compacted LMDB copy).

Committed DATA, like ``make_fixture_v16.py``'s: built once at a commit where format 17 was
current (``cortex.engine.store.FORMAT_VERSION == 17``); newer code refuses to rebuild it. It
holds everything of the format-16 fixture written at format 17 (``make_fixture_v15.build``),
then memories whose versions exercise the next format's change (a version's medium form as a
reference into its data): rendered forms of every type whose text occurs in the medium, texts
under the 12 bytes a reference needs, non-ASCII text, supplied forms that hold a data text and
ones that hold none, updates, a tombstone and a purge. Format 17 stores every version's medium
form as text: the migration ``0017-medium-references`` rewrites them, and the tests
(``tests/test_medium_refs.py``) check that the migrated store verifies and reads the same
values. It also writes the fixture's CBOR export, ``tests/data/format17.bundle.cbor`` (every
version's medium form as text, as bundles of formats 15-17 carry it), which the tests import.

    python tools/make_fixture_v17.py [--out tests/data/format17.cortex]
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

from make_fixture_v1 import fid  # noqa: E402
from make_fixture_v15 import build  # noqa: E402

from cortex import (  # noqa: E402
    Belief,
    Capability,
    Constraint,
    Cortex,
    Event,
    Fact,
    Forms,
    Goal,
    GoalStatus,
    Identity,
    NewMemory,
    Pattern,
    Preference,
)

FORMAT: int = 17
"""The format this fixture is of: the one before ``0017-medium-references``."""

REFS = {
    170: Preference(topic="a window seat on long-haul flights", polarity="prefer"),
    171: Preference(topic="tea", polarity="avoid"),
    172: Fact(statement="the harbour ferry leaves at eleven", subject="harbour ferry",
              predicate="departs"),
    173: Goal(statement="finish the crème brûlée recipe book", status=GoalStatus.ACTIVE),
    174: Event(kind="the lighthouse keeper's retirement party"),
    175: Belief(statement="the tide tables in the harbour office are out of date",
                stance="believe"),
    176: Constraint(statement="never book flights that land after midnight", polarity="avoid",
                    strength="hard", source="user_declared"),
    177: Capability(subject="the booking agent",
                    capability="booking ferries across the archipelago"),
    178: Identity(name="Ærøskøbing harbour master", roles=("harbour master of Ærøskøbing",)),
    179: Pattern(statement="asks about ferries every monday morning"),
}  # fmt: skip
"""Memories 170..179, written in one batch; 170 and 172 are then updated, 174 tombstoned,
175 updated and purged; 180 and 181 have supplied forms (one holding a data text, one not)."""


def populate_refs(cx: Cortex) -> None:
    """Memories 170..181 (``REFS`` and two with supplied forms), updates, a tombstone, a purge."""
    cx.write_many([NewMemory(data=d, id=fid(n)) for n, d in REFS.items()])
    cx.update(fid(170), Preference(topic="an aisle seat on long-haul flights", polarity="prefer"))
    cx.update(
        fid(172),
        Fact(statement="the harbour ferry leaves at noon", subject="harbour ferry", predicate="d"),
    )
    cx.tombstone(fid(174), reason="fixture")
    cx.update(fid(175), Belief(statement="the tide tables are current again", stance="doubt"))
    cx.purge(fid(175), reason="fixture")
    cx.write(
        Fact(statement="the night bus runs hourly", subject="bus", predicate="runs"),
        id=fid(180),
        forms=Forms(short="bus: hourly", medium="note — the night bus runs hourly, always"),
    )
    cx.write(
        Fact(statement="the night train runs daily", subject="train", predicate="runs"),
        id=fid(181),
        forms=Forms(short="train", medium="a summary of its own"),
    )


BUNDLE = ROOT / "tests" / "data" / f"format{FORMAT}.bundle.cbor"
"""The fixture exported (CBOR, confidential memories included), beside it."""


def export_bundle(store: Path) -> None:
    """Write ``BUNDLE`` from a copy of the fixture ``store`` (opening it writes a lock file)."""
    from cortex.transfer.bundle import export_store

    with tempfile.TemporaryDirectory(prefix="cortex-fixture-") as tmp:
        shutil.copy(store / "data.mdb", Path(tmp) / "data.mdb")
        with Cortex.open(Path(tmp), actor="fixture-agent", as_owner=True) as cx:
            export_store(cx, BUNDLE, encoding="cbor", include_confidential=True)
    print(f"{BUNDLE}: {BUNDLE.stat().st_size} bytes")


def main() -> int:
    code = build(FORMAT, populate_refs)  # the format-16 fixture's steps, then these
    if code == 0:
        parser = argparse.ArgumentParser()
        parser.add_argument("--out", default=str(BUNDLE.parent / f"format{FORMAT}.cortex"))
        export_bundle(Path(parser.parse_known_args()[0].out))
    return code


if __name__ == "__main__":
    sys.exit(main())
