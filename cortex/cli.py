"""The ``cortex`` command: a thin shell over the public API."""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime

import msgspec

from cortex import (
    Belief,
    Capability,
    Constraint,
    ConstraintSource,
    Cortex,
    CortexError,
    Cost,
    Event,
    Fact,
    Goal,
    GoalStatus,
    Identity,
    NewMemory,
    Outcome,
    Pattern,
    Polarity,
    Preference,
    SourceKind,
    Stance,
    Strength,
    __version__,
)
from cortex.records import Data

__all__ = ["entry", "main"]


def _sample_records() -> list[Data]:
    when = datetime(2026, 11, 22, 9, 30, tzinfo=UTC)
    return [
        Identity(name="Ada", did="did:key:z6MkAda", roles=("researcher",), profile={"lang": "en"}),
        Fact(
            statement="Ada's home city is Zürich",
            subject="ada",
            predicate="home_city",
            object="Zürich",
            source=SourceKind.USER_INPUT,
            confidence=0.95,
        ),
        Preference(
            topic="dark mode", polarity=Polarity.PREFER, strength=0.8, rationale="eye strain"
        ),
        Belief(statement="the build is flaky on Fridays", stance=Stance.SUSPECT, confidence=0.4),
        Event(
            kind="purchase",
            outcome=Outcome.SUCCESS,
            counterparty="gpu-vendor",
            cost=Cost(asset="USD", amount="1299.99"),
            occurred_at=when,
            summary="bought a GPU for the lab",
        ),
        Goal(statement="ship cortex 1.0", status=GoalStatus.ACTIVE, horizon=when),
        Constraint(
            statement="spend more than 2000 USD without asking",
            polarity=Polarity.DONT,
            strength=Strength.HARD,
            source=ConstraintSource.USER_DECLARED,
        ),
        Capability(subject="agent", capability="run SQL queries", verified=True),
        Pattern(statement="retry flaky network calls with backoff", strength=0.7, coverage=12),
    ]


def cmd_demo(args: argparse.Namespace) -> int:
    """A tour on a real embedded store: write every type, update, history, tombstone, verify."""
    path = args.store or tempfile.mkdtemp(prefix="cortex-demo-")
    print(f"store: {path}\n")
    with Cortex.open(path, actor="demo-agent") as cx:
        print("1. write one memory of every type (canonical CBOR, content hash, forms)")
        uris = cx.write_many(
            NewMemory(data=d, tags=("demo",), importance=7) for d in _sample_records()
        )
        for uri in uris:
            m = cx.resolve(uri)
            print(f"   {uri}")
            print(f"      sha256 {m.version.hash.hex()[:32]}…  short: {m.version.forms.short}")  # type: ignore[union-attr]
        fact_uri = uris[1]
        print("\n2. update the Fact: a new immutable version; the head moves")
        fact = cx.resolve(fact_uri).data
        assert isinstance(fact, Fact)
        v2 = cx.update(
            fact_uri,
            msgspec.structs.replace(fact, statement="Ada's home city is Basel", object="Basel"),
            expected_version=1,
        )
        print(f"   {fact_uri} -> {v2}")
        print("\n3. history: every version, oldest first")
        for m in cx.history(v2.id):
            print(f"   #{m.version.version}  {m.version.forms.short}")  # type: ignore[union-attr]
        print("\n4. update_head: tags and importance change without a new version")
        head = cx.update_head(v2, tags=("demo", "location"), importance=9)
        print(
            f"   tags={list(head.tags)} importance={head.importance} version={head.current_version}"
        )
        print("\n5. tombstone the Belief: hidden from search, still resolvable for audit")
        stone = cx.tombstone(uris[3], reason="disproved by the CI logs")
        m = cx.resolve(uris[3])
        print(f"   {uris[3]} tombstoned={m.tombstoned} reason={stone.reason!r}")
        try:
            cx.update(uris[3], m.data)  # type: ignore[arg-type]
        except CortexError as exc:
            print(f"   update refused: {type(exc).__name__}: {exc}")
        print("\n6. resolve exact versions: an old URI still names the old content")
        print(f"   {fact_uri}: {cx.resolve(fact_uri).data.statement}")  # type: ignore[union-attr]
        print(f"   {v2}: {cx.resolve(v2).data.statement}")  # type: ignore[union-attr]
        print("\n7. the journal: one hash-chained entry per mutation")
        for e in cx.journal():
            what = f"{e.id}#{e.version}" if e.id is not None else e.reason
            print(f"   j/{e.seq:<3} {e.kind.label:<12} {what}  prev={e.prev.hex()[:12]}…")
        report = cx.verify()
        print(
            f"\n8. verify: ok={report.ok} memories={report.memories} versions={report.versions}"
            f" index entries={report.index_entries} journal={report.journal_entries}"
        )
        for p in report.problems:
            print(f"   problem: {p.record}: {p.what}")
        return 0 if report.ok else 1


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cortex", description="Inspect and use a cortex memory store.")
    p.add_argument("--version", action="version", version=f"cortex {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = sub.add_parser("demo", help="a tour of cortex on a real embedded store")
    demo.add_argument("--store", help="store directory (default: a new temporary one)")
    demo.set_defaults(func=cmd_demo)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit code (0 ok, 1 cortex error, 2 usage)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        rc: int = args.func(args)
    except CortexError as exc:
        print(f"cortex: {exc}", file=sys.stderr)
        return 1
    return rc


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())
