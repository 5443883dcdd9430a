"""The ``cortex`` command: a thin shell over the public API."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, datetime

from cortex import (
    Belief,
    Capability,
    Constraint,
    ConstraintSource,
    CortexError,
    Cost,
    Event,
    Fact,
    Goal,
    GoalStatus,
    Identity,
    Outcome,
    Pattern,
    Polarity,
    Preference,
    SourceKind,
    Stance,
    Strength,
    Uri,
    __version__,
    content_hash,
    encode_data,
    new_id,
    render,
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
    """Build a record of every type and show its URI-to-be, hash and forms."""
    for data in _sample_records():
        encoded = encode_data(data)
        uri = Uri(data.TYPE, new_id(), 1)
        forms = render(data)
        print(uri)
        print(f"  bytes  {len(encoded)}  sha256 {content_hash(data.TYPE, encoded).hex()}")
        print(f"  short  {forms.short}")
        print(f"  medium {forms.medium}")
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cortex", description="Inspect and use a cortex memory store.")
    p.add_argument("--version", action="version", version=f"cortex {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = sub.add_parser("demo", help="show records of every type with their hashes and forms")
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
