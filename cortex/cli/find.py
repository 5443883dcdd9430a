"""Commands that query: find, search, context, facets, about, attest."""

from __future__ import annotations

import argparse
import os
from typing import Any

from cortex import (
    Cortex,
    EdgeType,
    Follow,
    FrameMatch,
    Hit,
    Outcome,
    Query,
    Reader,
    Result,
    ValidationError,
    Verb,
    Window,
    parse_where,
)
from cortex.cli.common import (
    UsageError,
    command,
    emit,
    enum_arg,
    open_store,
    table_lines,
    time_arg,
    type_arg,
)
from cortex.model.jsonmap import to_plain
from cortex.query.context import TIERS


def _frame_pattern_arg(text: str) -> FrameMatch:
    try:
        m = FrameMatch.of(text)
    except ValidationError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc.message}") from None
    if m.obj_ref is not None and m.obj_kind is None:
        raise argparse.ArgumentTypeError(f"{text!r}: a reference needs its kind, VERB:KIND:REF")
    return m


def _edge_types_arg(text: str) -> tuple[EdgeType, ...]:
    out = []
    for part in text.split(","):
        m = EdgeType.coerce(part.strip())
        if m is None:
            raise argparse.ArgumentTypeError(f"{part!r} is not one of {EdgeType.labels()}")
        out.append(m)
    return tuple(out)


def _hops_arg(text: str) -> tuple[int, int]:
    low, sep, high = text.partition("..")
    try:
        return (int(low), int(high)) if sep else (min(1, int(low)), int(low))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not MIN..MAX or N (1..N)") from None


def _reader(args: argparse.Namespace, cx: Cortex) -> Reader:
    """Who reads: the acting name when one is given, else the store's owner (who sees all)."""
    given = args.actor or os.environ.get("CORTEX_ACTOR")
    return Reader(actor=cx.actor if given else cx.owner)


def _hit_json(h: Hit) -> dict[str, Any]:
    out: dict[str, Any] = {
        "uri": str(h.uri),
        "text": h.text,
        "tokens": h.tokens,
        "salience": h.salience,
        "score": h.score,
        "hop": h.hop,
        "ranks": dict(h.ranks),
        "scores": dict(h.scores),
    }
    if h.tier is not None:
        out["tier"] = h.tier
    return out


def _result_json(res: Result) -> dict[str, Any]:
    return {
        "hits": [_hit_json(h) for h in res.hits],
        "dropped": [str(u) for u in res.dropped],
        "tokens": res.tokens,
        "plan": res.plan,
    }


def _result_lines(res: Result, form: str, first: int = 1) -> list[str]:
    """Rank, URI, score (text and vector plans), salience, hop (walks) and the form text."""
    if not res.hits:
        return [f"no memories found ({res.plan})"]
    scored = res.plan.startswith(("text", "vector"))
    walked = res.plan.startswith("walk")
    headers = ["#", "uri", *(["score"] if scored else []), "salience"]
    headers += [*(["hop"] if walked else []), *(["text"] if form != "full" else [])]
    rows = []
    for rank, h in enumerate(res.hits, start=first):
        row: list[object] = [rank, str(h.uri), *([f"{h.score:.4f}"] if scored else [])]
        row += [f"{h.salience:.3f}", *([h.hop] if walked else [])]
        rows.append(row + ([" ".join(h.text.split())] if form != "full" else []))
    lines = table_lines(headers, rows)
    if form == "full":  # the full form is several lines: print it below each row
        body = lines[:1]
        for row_line, h in zip(lines[1:], res.hits, strict=True):
            body += [row_line, *("    " + line for line in h.text.splitlines()), ""]
        lines = body[:-1]
    lines.append(f"{len(res.hits)} hit(s), {res.tokens} tokens; {res.plan}")
    if res.dropped:
        lines.append(f"the budget dropped {len(res.dropped)}: {', '.join(map(str, res.dropped))}")
    return lines


def _find_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("what to start from (at least one)")
    g.add_argument("--type", action="append", type=type_arg, default=[], help="a memory type")
    g.add_argument("--tag", action="append", default=[], help="a tag the memory carries")
    g.add_argument(
        "--frame",
        action="append",
        type=_frame_pattern_arg,
        default=[],
        metavar="VERB[:KIND[:REF]]",
        help="a frame pattern the memory matches (repeat for more)",
    )
    g.add_argument("--text", help="lexical search (needs the store's lexical index)")
    g.add_argument("--near", metavar="TEXT", help="vector search (needs an embedder)")
    g.add_argument(
        "--from",
        dest="from_",
        action="append",
        default=[],
        metavar="URI|ID",
        help="walk edges from this memory (repeat for more)",
    )
    w = p.add_argument_group("walks (with --from)")
    w.add_argument(
        "--follow",
        type=_edge_types_arg,
        metavar="TYPES",
        help="edge types to follow, comma-separated (default: any)",
    )
    w.add_argument("--hops", type=_hops_arg, metavar="MIN..MAX", help="hops, or N for 1..N (1)")
    w.add_argument("--direction", choices=("out", "in", "both"), help="default out")
    f = p.add_argument_group("filters")
    f.add_argument(
        "--where",
        metavar="EXPR",
        help="a predicate, e.g. 'data.subject = ada and head.importance >= 5' (specs/query.md)",
    )
    f.add_argument("--recent", type=float, metavar="DAYS", help="only the last DAYS days")
    f.add_argument("--since", type=time_arg, metavar="TIME", help="at or after TIME")
    f.add_argument("--until", type=time_arg, metavar="TIME", help="before TIME")
    f.add_argument(
        "--on",
        choices=("own", "created", "updated"),
        help="which time the window compares (default own: e.g. an Event's occurred_at)",
    )
    f.add_argument("--as-of", type=time_arg, metavar="TIME", help="what the store held then")
    f.add_argument("--include-tombstoned", action="store_true", help="also tombstoned memories")
    f.add_argument("--include-expired", action="store_true", help="also expired versions")
    o = p.add_argument_group("order and size")
    o.add_argument(
        "--order-by",
        choices=("salience", "created", "updated", "importance", "hop", "score"),
        help="default score for --text/--near, hop for walks, created otherwise",
    )
    d = o.add_mutually_exclusive_group()
    d.add_argument("--asc", dest="descending", action="store_false", default=None, help="ascending")
    d.add_argument(
        "--desc",
        dest="descending",
        action="store_true",
        help="descending (the default but for hop)",
    )
    o.add_argument("--limit", type=int, default=10, help="at most N hits (default 10)")
    o.add_argument("--offset", type=int, default=0, help="skip N ordered hits")
    o.add_argument("--budget", type=int, metavar="TOKENS", help="fit the forms in TOKENS")
    o.add_argument(
        "--form", choices=("short", "medium", "full"), default="short", help="default short"
    )
    o.add_argument(
        "--record-access", action="store_true", help="count this find as a use (salience)"
    )


def _window(args: argparse.Namespace) -> Window | None:
    if args.recent is None and args.since is None and args.until is None:
        if args.on is not None:
            raise UsageError("--on needs a window: --recent, --since or --until")
        return None
    return Window(start=args.since, end=args.until, days=args.recent, on=args.on or "own")


def _follow(args: argparse.Namespace) -> Follow | None:
    given = args.follow is not None or args.hops is not None or args.direction is not None
    if not args.from_:
        if given:
            raise UsageError("--follow, --hops and --direction walk from memories: add --from")
        return None
    low, high = args.hops or (1, 1)
    return Follow(
        types=args.follow or (), min_hops=low, max_hops=high, direction=args.direction or "out"
    )


@command("find", _find_args)
def cmd_find(args: argparse.Namespace) -> int:
    """Find memories: from an index, filtered, ordered, limited and fit to a token budget.

    A find starts from --type, --tag, --frame, --text, --near or --from (an edge walk) and
    filters with the rest. --where takes the readable predicate syntax of specs/query.md §6:
    data.subject = ada and not (version.confidence < 0.5 or has_tag(old)).
    """
    starts = (args.type, args.tag, args.frame, args.text, args.near, args.from_)
    if not any(starts):
        raise UsageError(
            "a find starts from an index: add --type, --tag, --frame, --text, --near or --from "
            "(a blind scan of the whole store is refused)"
        )
    where = parse_where(args.where) if args.where is not None else None
    window, follow = _window(args), _follow(args)
    with open_store(args, readonly=not args.record_access) as cx:
        query = Query(
            types=tuple(args.type),
            tags=tuple(args.tag),
            frames=tuple(args.frame),
            text=args.text,
            near=args.near,
            where=where,
            window=window,
            as_of=args.as_of,
            include_tombstoned=args.include_tombstoned,
            include_expired=args.include_expired,
            order_by=args.order_by,
            descending=args.descending,
            limit=args.limit,
            offset=args.offset,
            budget_tokens=args.budget,
            form=args.form,
            from_=tuple(args.from_),
            follow=follow,
            record_access=args.record_access,
            reader=_reader(args, cx),
        )
        res = cx.find(query)
    emit(args, _result_json(res), _result_lines(res, args.form, first=args.offset + 1))
    return 0


def _search_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("question", metavar="QUESTION", help="a question in plain words")
    p.add_argument("-n", "--limit", type=int, default=10, help="how many hits (default 10)")


@command("search", _search_args)
def cmd_search(args: argparse.Namespace) -> int:
    """Ask in plain words: the router reads the question, its handler finds the memories.

    Prints how the question was routed (type, entities, attribute, time window, confidence),
    then the hits. See specs/router.md.
    """
    with open_store(args, readonly=True) as cx:
        res = cx.search(args.question, limit=args.limit, reader=_reader(args, cx))
    r = res.route
    t = r.temporal
    window = t.type if t.type == "all" else (
        f"{t.type} {t.days or ''}{' days' if t.days else ''}"
        f"{' from ' + str(t.start) if t.start else ''}{' to ' + str(t.end) if t.end else ''}"
        f"{' (' + t.anchor + ')' if t.anchor else ''}"
    )  # fmt: skip
    lines = [
        f"route       {r.query_type} (confidence {r.confidence:.2f}, {r.routing_time_ms:.2f} ms)",
        f"entities    {', '.join(r.entity_hints) or '-'}"
        + (f"   attribute {r.attribute_hint}" if r.attribute_hint else ""),
        f"window      {window}" + (f"   aspects {', '.join(r.aspects)}" if r.aspects else ""),
    ]
    lines += [f"note        {n}" for n in res.notes]
    for dim, counts in res.facets.items():
        top = ", ".join(f"{k} {v}" for k, v in list(counts.items())[:5])
        lines.append(f"facet       {dim}: {top}")
    lines += [f"{i:>3}. {h.memory.uri}  {h.text}" for i, h in enumerate(res.hits, start=1)]
    if not res.hits:
        lines.append("no memories found")
    obj = {
        "route": to_plain(r),
        "notes": list(res.notes),
        "facets": res.facets,
        "hits": [{"uri": str(h.memory.uri), "text": h.text, "score": h.score} for h in res.hits],
    }
    emit(args, obj, lines)
    return 0


def _context_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("verb", type=enum_arg(Verb), metavar="VERB", help=Verb.labels())
    p.add_argument(
        "objects",
        nargs="*",
        metavar="OBJECT",
        help="what the verb acts on: a reference (any kind) or KIND:REF, e.g. knowledge:ada",
    )
    p.add_argument("--budget", type=int, default=3000, help="tokens, 1..4000 (default 3000)")
    p.add_argument("--query", metavar="TEXT", help="recall by text too (needs the lexical index)")
    p.add_argument(
        "--form", choices=("short", "medium", "full"), default="medium", help="default medium"
    )


@command("context", _context_args)
def cmd_context(args: argparse.Namespace) -> int:
    """The working set for doing VERB to OBJECTs, ready for a prompt, under one token budget.

    Tiers: pinned (identity, hard constraints, active goals), outcomes (the latest events
    framed with the verb and each object), frame (memories framed so) and recall (--query).
    A pure read: nothing is recorded.
    """
    with open_store(args, readonly=True) as cx:
        bundle = cx.context(
            args.verb,
            args.objects,
            args.budget,
            query=args.query,
            form=args.form,
            reader=_reader(args, cx),
        )
    obj = {
        "verb": bundle.verb.label,
        "budget": bundle.budget,
        "tokens": bundle.tokens,
        "tiers": {name: [_hit_json(h) for h in bundle.tier(name)] for name in TIERS},
        "dropped": [str(u) for u in bundle.dropped],
    }
    text = bundle.render() or f"nothing in context for {args.verb.label} {' '.join(args.objects)}"
    emit(args, obj, text.rstrip())
    return 0


def _facets_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--by",
        choices=("type", "tag", "subject", "counterparty"),
        default="type",
        help="what to count by (default type)",
    )
    p.add_argument("--type", action="append", type=type_arg, default=[], help="only this type")
    p.add_argument("--recent", type=float, metavar="DAYS", help="only the last DAYS days")
    p.add_argument(
        "--on",
        choices=("own", "created", "updated"),
        default="own",
        help="which time --recent compares (default own)",
    )


@command("facets", _facets_args)
def cmd_facets(args: argparse.Namespace) -> int:
    """Count live memories by type, tag, subject or counterparty, largest first."""
    window = Window.recent(args.recent, on=args.on) if args.recent is not None else None
    with open_store(args, readonly=True) as cx:
        counts = cx.facets(window, args.by, types=args.type, reader=_reader(args, cx))
    lines = table_lines([args.by, "memories"], list(counts.items())) if counts else ["none"]
    emit(args, counts, lines)
    return 0


def _about_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("subject", metavar="SUBJECT", help="an entity, e.g. ada")
    p.add_argument(
        "attribute", nargs="?", metavar="ATTRIBUTE", help="a Fact predicate or a capability"
    )
    p.add_argument("--limit", type=int, default=100, help="at most N (default 100)")
    p.add_argument("--as-of", type=time_arg, metavar="TIME", help="what the store held then")


@command("about", _about_args)
def cmd_about(args: argparse.Namespace) -> int:
    """Everything about an entity (SUBJECT), or one ATTRIBUTE of it, newest first.

    That is Identities named SUBJECT, Facts, Beliefs and Capabilities with it as subject, and
    Events with it as counterparty; with ATTRIBUTE, Facts with that predicate and Capabilities
    with that capability.
    """
    with open_store(args, readonly=True) as cx:
        res = cx.about(
            args.subject,
            args.attribute,
            limit=args.limit,
            as_of=args.as_of,
            reader=_reader(args, cx),
        )
    emit(args, _result_json(res), _result_lines(res, "short"))
    return 0


def _attest_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("refs", nargs="+", metavar="URI", help="the memories used (URIs or ids)")
    p.add_argument("--outcome", required=True, type=enum_arg(Outcome), help=f"{Outcome.labels()}")


@command("attest", _attest_args)
def cmd_attest(args: argparse.Namespace) -> int:
    """Record that memories were used to act, and how it went (raises their salience).

    success and partial count as citations, failure is counted apart; all or nothing, one
    journal entry per memory.
    """
    with open_store(args) as cx:
        cx.attest(args.refs, args.outcome)
        states = {ref: cx.salience_state(ref) for ref in dict.fromkeys(args.refs)}
    rows = [(ref, s.accesses, s.citations, s.failures) for ref, s in states.items()]
    emit(
        args,
        {
            "outcome": args.outcome.label,
            "memories": [{"ref": ref, **to_plain(s)} for ref, s in states.items()],
        },
        [
            f"attested {len(states)} memories: {args.outcome.label}",
            *table_lines(["memory", "accesses", "citations", "failures"], rows),
        ],
    )
    return 0
