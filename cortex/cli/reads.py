"""Commands that read memories: show, history, chain, conflicts, aliases, diff."""

from __future__ import annotations

import argparse
import json
from typing import Any

from cortex import (
    Cortex,
    Memory,
    NotFoundError,
    ValidationError,
    render_full,
)
from cortex.cli.common import command, emit, fmt_when, open_store, table_lines, time_arg
from cortex.cli.writes import head_lines
from cortex.engine.importer import episode_source
from cortex.model.jsonmap import to_plain


def _memory_json(m: Memory, *, full: bool = False) -> dict[str, Any]:
    version = to_plain(m.version)
    if m.data is not None:
        version["data"] = to_plain(m.data)
    out = {"uri": str(m.uri), "head": to_plain(m.head), "version": version}
    if full:
        out["full"] = render_full(m.data) if m.data is not None else None
    return out


def _show_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("ref", metavar="URI|ID", help="a version URI, or an id for its current version")
    p.add_argument("--as-of", type=time_arg, metavar="TIME", help="the version current then")
    p.add_argument("--full", action="store_true", help="also print the full form")


@command("show", _show_args)
def cmd_show(args: argparse.Namespace) -> int:
    """Show one version: its forms, data, head, version record and provenance."""
    with open_store(args, readonly=True) as cx:
        if args.as_of is not None:
            m = cx.resolve_as_of(args.ref, args.as_of)
        elif args.ref.startswith("cortex://"):
            m = cx.resolve(args.ref)
        else:
            m = cx.resolve_latest(args.ref)
        source = _source_quote(cx, m)
        level = cx.sensitivity(m.id)
    v = m.version
    lines = [f"{m.uri}  (version {v.version} of {m.head.current_version})"]
    if v.forms is not None:
        lines += [f"short       {v.forms.short}", f"medium      {v.forms.medium}"]
    lines.append("data" if m.data is not None else "data        (purged)")
    if m.data is not None:
        lines += [
            f"  {k}: {json.dumps(x, ensure_ascii=False)}" for k, x in to_plain(m.data).items()
        ]
    lines.append("head")
    lines += ["  " + line for line in head_lines(m.head)]
    lines.append(f"  sensitivity {level.label}")
    lines += [
        "version",
        f"  hash        sha256 {v.hash.hex()}",
        f"  created     {fmt_when(v.created_at)} by {v.created_by}",
        f"  confidence  {v.confidence}",
    ]
    if v.valid_from or v.valid_until or v.expires_at:
        lines.append(
            f"  valid       from {fmt_when(v.valid_from) or '-'} "
            f"until {fmt_when(v.valid_until) or '-'}"
            f"   expires {fmt_when(v.expires_at) or '-'}"
        )
    prov = v.provenance
    lines += ["provenance", f"  source      {prov.source.label}"]
    if prov.derived_from:
        lines.append(f"  derived     {', '.join(prov.derived_from)}")
    for s in prov.sources:
        msgs = ", ".join(s.message_ids)
        span = f" span {s.span[0]}..{s.span[1]}" if s.span else ""
        lines.append(f"  session     {s.session_id}{' messages ' + msgs if msgs else ''}{span}")
    if source is not None:
        lines += ["source", f"  episode     {source.episode}"]
        if source.span is not None:
            lines.append(f"  span        bytes {source.span[0]}..{source.span[1]}")
        if source.quote is not None:
            lines.append(f"  quote       {json.dumps(source.quote, ensure_ascii=False)}")
        elif source.span is not None:
            lines.append("  quote       (the episode was purged)")
    if args.full and m.data is not None:
        lines += ["full", *("  " + line for line in render_full(m.data).splitlines())]
    obj = _memory_json(m, full=args.full)
    obj["sensitivity"] = level.label
    if source is not None:
        obj["source"] = to_plain(source)
    emit(args, obj, lines)
    return 0


def _source_quote(cx: Cortex, m: Memory) -> Any:
    """The episode a shown version was drawn from (``None`` when it names none)."""
    if episode_source(m.version.provenance) is None:
        return None
    try:
        return cx.episode_of(m.uri)
    except NotFoundError:
        return None


def id_arg(p: argparse.ArgumentParser) -> None:
    """The memory argument of a command."""
    p.add_argument("ref", metavar="ID", help="the memory id (or a URI of any version)")


@command("history", id_arg)
def cmd_history(args: argparse.Namespace) -> int:
    """Every version of a memory, oldest first."""
    with open_store(args, readonly=True) as cx:
        versions = cx.history(args.ref)
    rows = [
        (
            f"#{m.version.version}",
            fmt_when(m.version.created_at),
            m.version.created_by,
            m.version.hash.hex()[:16],
            m.version.forms.short if m.version.forms else "(purged)",
        )
        for m in versions
    ]
    emit(
        args,
        [_memory_json(m)["version"] for m in versions],
        table_lines(["version", "created", "by", "hash", "short form"], rows),
    )
    return 0


def _chain_args(p: argparse.ArgumentParser) -> None:
    id_arg(p)
    p.add_argument("--as-of", type=time_arg, metavar="TIME", help="the chain as it stood then")


@command("chain", _chain_args)
def cmd_chain(args: argparse.Namespace) -> int:
    """The temporal chain of a memory: the current truth first, then what it superseded."""
    with open_store(args) as cx:
        links = cx.chain(args.ref, as_of=args.as_of)
    rows = [
        (
            "current" if link.current else "history",
            fmt_when(link.since),
            fmt_when(link.until),
            str(link.memory.uri),
            link.memory.version.forms.short if link.memory.version.forms else "(purged)",
        )
        for link in links
    ]
    obj = [
        {
            "uri": str(link.memory.uri),
            "current": link.current,
            "since": fmt_when(link.since),
            "until": fmt_when(link.until) or None,
            "superseded_by": None if link.superseded_by is None else str(link.superseded_by),
        }
        for link in links
    ]
    emit(args, obj, table_lines(["", "since", "until", "uri", "short form"], rows))
    return 0


def _conflicts_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--resolve",
        nargs=2,
        metavar=("WINNER", "LOSER"),
        help="close a conflict: WINNER supersedes LOSER from now on (needs --reason)",
    )
    p.add_argument("--reason", help="why (journalled with the resolution)")


@command("conflicts", _conflicts_args)
def cmd_conflicts(args: argparse.Namespace) -> int:
    """Open conflicts (two current memories that contradict each other), or resolve one."""
    with open_store(args) as cx:
        if args.resolve:
            if not args.reason:
                raise ValidationError("reason", "required", "--resolve needs --reason TEXT")
            edge = cx.resolve_conflict(args.resolve[0], args.resolve[1], reason=args.reason)
            emit(
                args,
                {"winner": str(edge.src), "loser": str(edge.dst), "at": fmt_when(edge.created_at)},
                f"{edge.src} now supersedes {edge.dst}",
            )
            return 0
        found = cx.conflicts()
    rows = [
        (
            fmt_when(c.since),
            str(c.a.uri),
            str(c.b.uri),
            c.a.version.forms.short if c.a.version.forms else "",
            c.b.version.forms.short if c.b.version.forms else "",
        )
        for c in found
    ]
    obj = [{"since": fmt_when(c.since), "a": str(c.a.uri), "b": str(c.b.uri)} for c in found]
    lines = (
        table_lines(["since", "a", "b", "a says", "b says"], rows) if found else "no open conflicts"
    )
    emit(args, obj, lines)
    return 0


def _alias_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="the entity (its canonical name, or one of its aliases)")
    p.add_argument("alias", help="another name of it")


@command("alias", _alias_args)
def cmd_alias(args: argparse.Namespace) -> int:
    """Say that ALIAS is another name of the entity NAME (claims and about meet)."""
    with open_store(args) as cx:
        change = cx.alias(args.name, args.alias)
    said = {
        "added": f"{change.alias!r} now names {change.canonical!r}",
        "moved": f"{change.alias!r} and its aliases {', '.join(change.moved)} now name "
        f"{change.canonical!r}",
        "unchanged": f"{change.alias!r} names {change.canonical!r} already",
    }[change.outcome]
    emit(args, to_plain(change), [said, f"  {change.canonical}: {', '.join(change.group[1:])}"])
    return 0


def _unalias_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("alias", help="the alias to remove")


@command("unalias", _unalias_args)
def cmd_unalias(args: argparse.Namespace) -> int:
    """Remove an alias: the name names only itself again."""
    with open_store(args) as cx:
        change = cx.unalias(args.alias)
    said = (
        f"{change.alias!r} no longer names {change.canonical!r}"
        if change.outcome == "removed"
        else f"{change.alias!r} is no alias"
    )
    emit(args, to_plain(change), said)
    return 0


def _aliases_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="only this entity")
    p.add_argument(
        "--suggest",
        action="store_true",
        help="list pairs of entity names that may be one entity (needs --embedder); "
        "nothing is merged",
    )
    p.add_argument("--threshold", type=float, default=0.8, help="--suggest: the least cosine (0.8)")
    p.add_argument("-n", "--limit", type=int, default=20, help="--suggest: at most N pairs")


@command("aliases", _aliases_args)
def cmd_aliases(args: argparse.Namespace) -> int:
    """The entities that have aliases, or (--suggest) names that may be one entity."""
    with open_store(args, readonly=not args.suggest) as cx:
        if args.suggest:
            found = cx.suggest_aliases(threshold=args.threshold, limit=args.limit)
            rows = [(f"{s.cosine:.3f}", s.reason, s.a, s.b) for s in found]
            lines = (
                table_lines(["cosine", "why", "a", "b"], rows) if found else "no names to suggest"
            )
            emit(args, [to_plain(s) for s in found], lines)
            return 0
        groups = cx.aliases(args.name)
    pairs = [(c, ", ".join(a)) for c, a in groups.items()]
    emit(args, groups, table_lines(["entity", "aliases"], pairs) if groups else "no aliases")
    return 0


def _flatten(obj: Any, prefix: str, out: dict[str, Any]) -> dict[str, Any]:
    if isinstance(obj, dict) and obj:
        for k, v in obj.items():
            _flatten(v, f"{prefix}.{k}" if prefix else k, out)
    else:
        out[prefix] = obj
    return out


def _diffable(m: Memory) -> dict[str, Any]:
    v = m.version
    return _flatten(
        {
            "type": v.type.type_name,
            "data": to_plain(m.data) if m.data is not None else None,
            "forms": to_plain(v.forms),
            "provenance": to_plain(v.provenance),
            "confidence": v.confidence,
            "validity": to_plain(
                {"valid_from": v.valid_from, "valid_until": v.valid_until, "expires": v.expires_at}
            ),
            "created_at": to_plain(v.created_at),
            "created_by": v.created_by,
            "hash": v.hash.hex(),
        },
        "",
        {},
    )


def _diff_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", metavar="URI", help="the first version")
    p.add_argument("b", metavar="URI", help="the second version")


@command("diff", _diff_args)
def cmd_diff(args: argparse.Namespace) -> int:
    """Field by field, what differs between two versions (data, forms, provenance, validity)."""
    with open_store(args, readonly=True) as cx:
        a, b = _diffable(cx.resolve(args.a)), _diffable(cx.resolve(args.b))
    fields = list(dict.fromkeys([*a, *b]))
    changes = [{"field": f, "a": a.get(f), "b": b.get(f)} for f in fields if a.get(f) != b.get(f)]

    def show(x: Any) -> str:
        return "-" if x is None else json.dumps(x, ensure_ascii=False)

    rows = [(c["field"], show(c["a"]), show(c["b"])) for c in changes]
    lines = table_lines(["field", args.a, args.b], rows) if rows else ["no differences"]
    emit(args, {"a": args.a, "b": args.b, "changes": changes}, lines)
    return 0
