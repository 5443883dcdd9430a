"""The tour: ``cortex demo``."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cortex import (
    Belief,
    Capability,
    Constraint,
    ConstraintSource,
    Cortex,
    CortexError,
    Cost,
    EdgeType,
    Event,
    Fact,
    FrameRef,
    Goal,
    GoalStatus,
    Identity,
    LLMExtractor,
    NewMemory,
    ObjKind,
    Outcome,
    Pattern,
    Polarity,
    Preference,
    Provenance,
    SourceKind,
    SourceRef,
    Stance,
    Strength,
    Verb,
)
from cortex.cli.common import command
from cortex.index.embed import HashingEmbedder, MiniLM


def _session(cx: Cortex, start: datetime) -> dict[str, Any]:
    """A short scripted agent session, written the way an agent runtime would write it."""

    def said(*messages: str) -> Provenance:
        return Provenance(
            source=SourceKind.USER_INPUT,
            sources=(SourceRef(session_id="session-42", message_ids=messages),),
        )

    trip = FrameRef(verb=Verb.SCHEDULE, obj_kind=ObjKind.PLAN, obj_ref="trip:lisbon-2026")
    ada = FrameRef(verb=Verb.FIND, obj_kind=ObjKind.KNOWLEDGE, obj_ref="person:ada")
    # turn 1-3: who the user is, what she likes, what the agent learns
    ident, concise, early, home, employer = cx.write_many(
        [
            NewMemory(
                data=Identity(name="Ada Lovelace", did="did:key:z6MkAda", roles=("user",)),
                importance=9,
                frames=[ada],
                provenance=said("m1"),
            ),
            NewMemory(
                data=Preference(
                    topic="concise answers",
                    polarity=Polarity.PREFER,
                    strength=0.9,
                    rationale="asked to keep replies short",
                ),
                tags=("style",),
                provenance=said("m2"),
            ),
            NewMemory(
                data=Preference(topic="meetings before 10:00", polarity=Polarity.AVOID),
                tags=("calendar",),
                provenance=said("m2"),
            ),
            NewMemory(
                data=Fact(
                    statement="Ada lives in Zürich",
                    subject="ada",
                    predicate="home_city",
                    object="Zürich",
                    source=SourceKind.USER_INPUT,
                ),
                tags=("people",),
                frames=[ada],
                importance=7,
                provenance=said("m3"),
            ),
            NewMemory(
                data=Fact(
                    statement="Ada works at the Analytical Engines Ltd",
                    subject="ada",
                    predicate="employer",
                    source=SourceKind.DERIVED,
                    confidence=0.6,
                ),
                tags=("people",),
                provenance=Provenance(source=SourceKind.DERIVED),
            ),
        ]
    )
    # turn 4-6: a goal, a hard constraint, and the booking that serves the goal
    goal = cx.write(
        Goal(
            statement="plan Ada's trip to the Lisbon conference",
            status=GoalStatus.ACTIVE,
            horizon=start + timedelta(days=30),
            success_criteria=("flight booked", "hotel within 15 minutes of the venue"),
        ),
        frames=[trip],
        importance=8,
        provenance=said("m4"),
    )
    limit = cx.write(
        Constraint(
            statement="book anything over 600 CHF without asking",
            polarity=Polarity.DONT,
            strength=Strength.HARD,
            source=ConstraintSource.USER_DECLARED,
            trigger="purchase",
        ),
        importance=10,
        provenance=said("m5"),
    )
    flight = cx.write(
        Event(
            kind="flight_booking",
            outcome=Outcome.SUCCESS,
            counterparty="SWISS",
            cost=Cost(asset="CHF", amount="412.5"),
            occurred_at=start,
            summary="ZRH→LIS, 14 May, aisle seat",
        ),
        frames=[trip],
        provenance=Provenance(source=SourceKind.OBSERVED),
    )
    cx.add_edge(flight, EdgeType.PART_OF, goal)
    cx.add_edge(flight, EdgeType.REFERENCES, limit)
    cx.write_many(
        [
            Capability(subject="agent", capability="book flights", verified=True),
            Belief(
                statement="Ada prefers aisle seats",
                stance=Stance.SUSPECT,
                evidence_for=(str(flight),),
            ),
            Pattern(statement="confirm the fare before paying", strength=0.8, coverage=3),
        ]
    )
    # turn 7-8: Ada moved (an update), and the employer was a wrong guess (a tombstone)
    moved = cx.update(
        home,
        Fact(
            statement="Ada lives in Basel",
            subject="ada",
            predicate="home_city",
            object="Basel",
            source=SourceKind.USER_INPUT,
        ),
        expected_version=1,
        provenance=said("m7"),
        valid_from=start,
    )
    cx.update_head(moved, tags=("people", "moved"))
    cx.tombstone(employer, reason="Ada said she is self-employed")
    return {
        "identity": ident,
        "home": home,
        "moved": moved,
        "goal": goal,
        "flight": flight,
        "preference": concise,
        "early": early,
    }


def _demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", nargs="?", metavar="DIR", help="where to build (default: a new temp dir)")


@command("demo", _demo_args)
def cmd_demo(args: argparse.Namespace) -> int:
    """A tour: build a store from a scripted agent session and run the main commands on it."""
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="cortex-demo-"))
    store = root / "agent.cortex"
    if (store / "data.mdb").exists():
        raise CortexError(f"{store} exists; give the demo a new directory")
    embedder = _demo_embedder()
    with Cortex.open(store, actor="travel-agent", embedder=embedder) as cx:
        w = _session(cx, datetime.now(UTC).replace(microsecond=0))
    print(
        f"A travel agent's session, written to {store} through the Python API, "
        f"embedded with {embedder.model_id}.\n"
    )
    # act as the session's agent: the finds below see what it sees, whatever CORTEX_ACTOR says
    base = ["--store", str(store), "--actor", "travel-agent"] + (["--json"] if args.json else [])
    steps: list[tuple[str, list[str]]] = [
        ("the store at a glance", ["info"]),
        ("the fact after Ada moved (version 2)", ["show", str(w["moved"])]),
        ("every version of it", ["history", str(w["home"].id)]),
        ("what changed between the versions", ["diff", str(w["home"]), str(w["moved"])]),
        ("the edges of the flight booking", ["edges", str(w["flight"].id)]),
        (
            "find the important facts about Ada (a --where predicate)",
            ["find", "--type", "fact", "--where", "data.subject = ada and head.importance >= 5"],
        ),
        (
            "search by words and meaning: BM25 and vectors fused (the store's own embedder)",
            ["find", "--text", "where does Ada live now", "--limit", "3"],
        ),
        (
            "search by meaning alone",
            ["find", "--near", "keeping the trip cheap", "--limit", "3"],
        ),
        (
            "what the booking serves: a walk along its edges",
            ["find", "--from", str(w["flight"].id), "--hops", "1..2", "--direction", "both"],
        ),
        (
            "the working set for scheduling the trip, under 400 tokens",
            ["context", "schedule", "plan:trip:lisbon-2026", "--budget", "400"],
        ),
        ("one person, two names: say so once", ["alias", "Ada Lovelace", "ada"]),
        (
            "a fact under the other name ends the old one's time as the truth",
            [
                "write",
                "Fact",
                '{"statement": "Ada lives in Zurich", "subject": "Ada Lovelace", '
                '"predicate": "home_city", "object": "Zurich"}',
            ],
        ),
        ("where Ada lived, through time", ["chain", str(w["home"].id)]),
        ("the last entries of the journal", ["log", "-n", "6"]),
        ("prove the store intact", ["verify"]),
        ("export it, readable", ["export", str(root / "agent.jsonl")]),
        ("export it, bit-exact", ["export", str(root / "agent.cbor")]),
    ]
    rc = 0
    for what, argv in steps:
        rc |= _demo_step(what, [*base, *argv])
    copy = ["--store", str(root / "copy.cortex")] + (["--json"] if args.json else [])
    rc |= _demo_step(
        "import the export into a second store", [*copy, "import", str(root / "agent.cbor")]
    )
    rc |= _demo_step(
        "importing again changes nothing", [*copy, "import", str(root / "agent.jsonl")]
    )
    rc |= _demo_step("a backup, verified", [*base, "backup", str(root / "backup.cortex")])
    rc |= _demo_ingest(root, args.json)
    rc |= _demo_mcp(store)
    print(f"\nEverything is in {root}; try `cortex --store {store} show {w['goal']}`.")
    return rc


_DEMO_CHAT = (
    "Ada: I'm flying to Lisbon on the 12th. Please keep me off red-eye flights.\n"
    "Agent: Noted. Any preference for the hotel?\n"
    "Ada: Somewhere quiet near Alfama. And I'm vegetarian, so dinners need to work for that."
)
_DEMO_DOC = """# Lisbon trip notes

## Budget

The whole trip should stay under 1,800 EUR, flights included.

## Checklist

- book the airport transfer
- reserve the fado evening in Alfama

```text
confirmation: LIS-4471
```
"""


def _demo_model(prompt: str) -> str:
    """A scripted stand-in for the runtime's LLM: what a model would extract from the chat."""
    return json.dumps(
        [
            {
                "type": "Constraint",
                "data": {
                    "statement": "Never book red-eye flights for Ada",
                    "polarity": "dont",
                    "strength": "hard",
                    "source": "user_declared",
                },
                "quote": "Please keep me off red-eye flights.",
            },
            {
                "type": "Preference",
                "data": {"topic": "a quiet hotel near Alfama", "polarity": "prefer"},
                "quote": "Somewhere quiet near Alfama.",
            },
            {
                "type": "Fact",
                "data": {
                    "statement": "Ada is vegetarian",
                    "subject": "ada",
                    "predicate": "diet",
                    "object": "vegetarian",
                    "source": "user_input",
                },
                "quote": "I'm vegetarian",
            },
        ]
    )


def _demo_ingest(root: Path, as_json: bool) -> int:
    """Episodes: a conversation with an extractor, then a document through the CLI."""
    notes = root / "notes.cortex"
    with Cortex.open(notes, actor="travel-agent") as cx:
        res = cx.ingest(
            _DEMO_CHAT,
            source="chat",
            channel="trip-planning",
            extractor=LLMExtractor(_demo_model),
        )
    print(
        f"\nA conversation ingested into {notes} with an extractor (a scripted stand-in for your "
        f"LLM): episode {res.episode.id}, {len(res.memories)} memories drawn from it.\n"
    )
    doc = root / "trip-notes.md"
    doc.write_text(_DEMO_DOC, encoding="utf-8")
    base = ["--store", str(notes), "--actor", "travel-agent"] + (["--json"] if as_json else [])
    rc = _demo_step("a document, kept verbatim and chunked", [*base, "ingest", str(doc)])
    rc |= _demo_step("the episodes, newest first", [*base, "episodes"])
    rc |= _demo_step(
        "a memory drawn from the conversation, with its source quote",
        [*base, "show", str(res.memories[0])],
    )
    rc |= _demo_step(
        "the conversation and what came out of it", [*base, "episodes", str(res.episode.id)]
    )
    rc |= _demo_step("prove it intact", [*base, "verify"])
    return rc


_DEMO_AGENT: list[tuple[str, str, dict[str, Any]]] = [
    ("recall before answering", "memory_search", {"query": "where does Ada live?", "topK": 3}),
    ("the working set for the task", "memory_context",
     {"verb": "schedule", "objects": ["plan:trip:lisbon-2026"], "budget_tokens": 300}),
    ("remember what the user just said", "memory_write",
     {"type": "Preference", "data": {"topic": "aisle seats", "polarity": "prefer"},
      "tags": ["travel"], "importance": 6}),
    ("keep a key in core memory", "memory_core_update",
     {"section": "user", "key": "seat", "value": "aisle"}),
    ("check it is there", "memory_find", {"text": "aisle seats", "limit": 3}),
    ("a bad call comes back as a tool error", "memory_write", {"type": "Fact", "data": {}}),
    ("who am I, and what is left of my write budget", "memory_status", {}),
]  # fmt: skip


def _demo_mcp(store: Path) -> int:
    """An agent loop over MCP: `cortex serve` on stdio, driven by the SDK's client."""
    print("\n── an agent loop over MCP: `cortex serve` (stdio) driven by the MCP SDK's client")
    try:
        import anyio
        from mcp import Client, StdioServerParameters, stdio_client
    except ImportError:
        print("skipped: the MCP SDK is not installed (pip install 'cortex-store[mcp]')")
        return 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "cortex", "--store", str(store), "serve"], env=env
    )

    def brief(obj: Any) -> str:
        text = json.dumps(obj, ensure_ascii=False)
        return text if len(text) <= 160 else text[:157] + "..."

    errlog: Any = sys.stderr
    try:
        errlog.fileno()  # the server's stderr goes to ours, when ours is a real file
    except (OSError, ValueError):
        errlog = tempfile.TemporaryFile("w+")  # noqa: SIM115 - kept open for the server

    async def agent() -> int:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            tools = (await client.list_tools()).tools
            print(f"{len(tools)} tools: {', '.join(t.name for t in tools)}")
            errors = 0
            for why, name, arguments in _DEMO_AGENT:
                r = await client.call_tool(name, arguments)
                print(f"· {why}\n  {name} {brief(arguments)}")
                if r.is_error:
                    errors += 1
                    text = r.content[0].text if r.content else ""  # type: ignore[union-attr]
                    print(f"  → tool error: {text}")
                else:
                    print(f"  → {brief(r.structured_content)}")
            return 0 if errors == 1 else 1

    try:
        rc: int = anyio.run(agent)
    finally:
        if errlog is not sys.stderr:
            errlog.close()
    return rc


def _demo_embedder() -> Any:
    """MiniLM when its weights are installed (``make`` installs them), else the hashing one."""
    try:
        model = MiniLM()
        model.load()
    except CortexError:
        return HashingEmbedder()
    return model


def _demo_step(what: str, argv: list[str]) -> int:
    shown = " ".join(a if " " not in a else repr(a) for a in argv)
    print(f"── {what}\n$ cortex {shown}")
    # what a command says on stderr (a write's summary) belongs to the tour: in line, on stdout
    with contextlib.redirect_stderr(sys.stdout):
        from cortex.cli.app import main

        rc = main(argv)
    print()
    return rc
