"""Build the format-1 fixture store ``tests/data/format1.cortex/`` (a compacted LMDB copy).

The fixture is DATA, not a build product: it was generated once, at the commit where on-disk
format 1 was current (``cortex.engine.store.FORMAT_VERSION == 1``), and is committed. Code that
writes
a newer format cannot regenerate it, and this script refuses to try. The migration tests copy
the fixture to a temporary directory, migrate it, and compare the result with a store written
fresh by the current code through the same ``populate`` calls (which is why ``populate`` uses
caller-chosen ids and a fixed clock only, and stays importable).

What it holds: one memory of every type; updates (a Fact with three versions, a Goal with two);
``update_head`` (tags, frames, importance, visibility); a tombstoned Belief; a purged
Preference; edges, one of them removed; text with accents, non-Latin scripts and numbers.

    python tools/make_fixture_v1.py [--out tests/data/format1.cortex]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cortex import (  # noqa: E402  (the repository's cortex, not an installed one)
    Belief,
    Capability,
    Constraint,
    ConstraintSource,
    Cortex,
    Cost,
    EdgeType,
    Event,
    Fact,
    FrameRef,
    Goal,
    GoalStatus,
    Identity,
    MemoryId,
    NewMemory,
    ObjKind,
    Outcome,
    Pattern,
    Polarity,
    Preference,
    SourceKind,
    Stance,
    Strength,
    Verb,
)

ACTOR = "fixture-agent"
START = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


class FixedClock:
    """Each call is one millisecond after the last, from ``START``: reproducible times."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        """The next instant."""
        self.now += timedelta(milliseconds=1)
        return self.now


def fid(n: int) -> MemoryId:
    """The caller-chosen id of fixture memory ``n`` (ULID time part = ``START``)."""
    ms = int(START.timestamp() * 1000)
    return MemoryId(ms.to_bytes(6, "big") + bytes(9) + bytes([n]))


def populate(cx: Cortex) -> None:
    """Apply the fixture's operations to an open, empty store (its clock must be FixedClock)."""
    when = datetime(2025, 12, 24, 18, 30, tzinfo=UTC)
    frame = FrameRef(verb=Verb.FIND, obj_kind=ObjKind.KNOWLEDGE, obj_ref="topic:zürich")
    cx.write(
        Identity(name="Ada Lovelace", did="did:key:z6MkAda", roles=("researcher",)),
        id=fid(1),
        tags=["people"],
        importance=9,
    )
    cx.write_many(
        [
            NewMemory(
                data=Fact(
                    statement="Ada's home city is Zürich",
                    subject="ada",
                    predicate="home_city",
                    object="Zürich",
                    source=SourceKind.USER_INPUT,
                    confidence=0.95,
                ),
                id=fid(2),
                tags=["location"],
                frames=[frame],
            ),
            NewMemory(
                data=Preference(
                    topic="dark mode", polarity=Polarity.PREFER, strength=0.8, rationale="eyes"
                ),
                id=fid(3),
            ),
            NewMemory(
                data=Belief(
                    statement="the build is flaky on Fridays", stance=Stance.SUSPECT, confidence=0.4
                ),
                id=fid(4),
            ),
            NewMemory(
                data=Event(
                    kind="purchase",
                    outcome=Outcome.SUCCESS,
                    counterparty="gpu-vendor",
                    cost=Cost(asset="USD", amount="1299.99"),
                    occurred_at=when,
                    summary="bought a GPU (RTX 4090) for the lab; Straße café receipt",
                ),
                id=fid(5),
                frames=[FrameRef(verb=Verb.ACQUIRE, obj_kind=ObjKind.ASSET, obj_ref="gpu")],
                tags=["lab", "spend"],
            ),
            NewMemory(
                data=Goal(statement="ship cortex 1.0", status=GoalStatus.ACTIVE, horizon=when),
                id=fid(6),
            ),
            NewMemory(
                data=Constraint(
                    statement="spend more than 2000 USD without asking",
                    polarity=Polarity.DONT,
                    strength=Strength.HARD,
                    source=ConstraintSource.USER_DECLARED,
                ),
                id=fid(7),
            ),
            NewMemory(
                data=Capability(
                    subject="agent",
                    capability="run SQL queries",
                    verified=True,
                    parameters={"db": "postgres"},
                ),
                id=fid(8),
            ),
            NewMemory(
                data=Pattern(
                    statement="retry flaky network calls with backoff 3.5 times",
                    strength=0.7,
                    coverage=12,
                ),
                id=fid(9),
            ),
            NewMemory(
                data=Fact(statement="東京は日本の首都です", subject="東京", predicate="capital_of"),
                id=fid(10),
            ),
        ]
    )
    cx.update(
        fid(2),
        Fact(
            statement="Ada's home city is Basel",
            subject="ada",
            predicate="home_city",
            object="Basel",
        ),
        expected_version=1,
    )
    cx.update(
        fid(2),
        Fact(
            statement="Ada moved to Genève", subject="ada", predicate="home_city", object="Genève"
        ),
    )
    cx.update(fid(6), Goal(statement="ship cortex 1.0 with search", status=GoalStatus.ACTIVE))
    cx.update_head(fid(1), tags=["people", "founder"], importance=10, visibility="actor_public")
    cx.update_head(fid(9), frames=[frame])
    cx.tombstone(fid(4), "disproved by the CI logs")
    cx.purge(fid(3), "user asked to forget")
    cx.add_edge(fid(2), EdgeType.REFERENCES, fid(1))
    cx.add_edge(fid(5), EdgeType.CAUSED_BY, fid(6), weight=0.5)
    cx.add_edge(fid(9), EdgeType.DERIVED_FROM, fid(5))
    cx.remove_edge(fid(9), EdgeType.DERIVED_FROM, fid(5))
    cx.write(
        Fact(statement="café au lait costs 4.50 CHF", subject="café", predicate="price"),
        id=fid(11),
    )


def main() -> int:
    from cortex.engine.store import FORMAT_VERSION

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "tests" / "data" / "format1.cortex"))
    args = parser.parse_args()
    if FORMAT_VERSION != 1:
        print(
            f"this cortex writes format {FORMAT_VERSION}; the format-1 fixture can only be built "
            "at a commit where format 1 was current (it is committed data: do not rebuild it)",
            file=sys.stderr,
        )
        return 2
    write_fixture(Path(args.out))
    return 0


def write_fixture(out: Path) -> None:
    """``populate`` a store with the fixed clock, verify it, and copy it (compacted) to ``out``."""
    with (
        tempfile.TemporaryDirectory(prefix="cortex-fixture-") as tmp,
        Cortex.open(Path(tmp) / "s", actor=ACTOR, clock=FixedClock()) as cx,
    ):
        populate(cx)
        report = cx.verify()
        assert report.ok, report.problems
        if out.exists():
            shutil.rmtree(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        cx._kv.copy(out)  # compacted: small, and free of stale pages
    for f in sorted(out.iterdir()):
        print(f"{f}: {f.stat().st_size} bytes")


if __name__ == "__main__":
    sys.exit(main())
