"""Upgrading and repairing: migrate, reindex, salvage."""

from __future__ import annotations

import argparse
import os
from typing import Any

from cortex import (
    FORMAT_VERSION,
    Cortex,
    CortexError,
    ValidationError,
)
from cortex.cli.common import (
    Progress,
    UsageError,
    command,
    emit,
    fmt_when,
    open_store,
    precision_of,
    store_path,
    table_lines,
)
from cortex.index.embed import embedder_for
from cortex.model.jsonmap import to_plain
from cortex.storage.engines import exists as store_exists
from cortex.transfer import migrate as migrations
from cortex.transfer.salvage import salvage


def _existing_store(args: argparse.Namespace) -> str:
    """The store's path, for commands that open it without ``Cortex.open`` (its format check)."""
    path = store_path(args)
    if not store_exists(path):
        raise CortexError(f"no store at {path}; create one with `cortex --store {path} init`")
    return path


class _StepBars:
    """One progress bar per migration step, as ``migrate`` reports ``(step, done, total)``."""

    def __init__(self) -> None:
        self.bar: Progress | None = None

    def __call__(self, step: str, done: int, total: int) -> None:
        if self.bar is None or self.bar.label != step:
            self.close()
            self.bar = Progress(step)
        self.bar(done, total)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _migrate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dry-run", action="store_true", help="print the plan and what it touches; write nothing"
    )
    p.add_argument(
        "--to", type=int, metavar="N", help=f"the target format (default {FORMAT_VERSION})"
    )
    p.add_argument(
        "--list", action="store_true", help="the migrations the store went through and those known"
    )


def _migration_json(report: migrations.Report) -> dict[str, Any]:
    return {
        "path": report.path,
        "from_version": report.from_version,
        "to_version": report.to_version,
        "dry_run": report.dry_run,
        "steps": [
            {
                "name": s.step.name,
                "from_version": s.step.from_version,
                "to_version": s.step.to_version,
                "description": s.step.description,
                "records": s.records,
                "applied": s.applied,
            }
            for s in report.steps
        ],
    }


def _plan_lines(report: migrations.Report) -> list[str]:
    rows = [
        (s.step.name, f"{s.step.from_version} → {s.step.to_version}", s.records, s.step.description)
        for s in report.steps
    ]
    n = len(rows)
    head = (
        f"{report.path}: format {report.from_version} → {report.to_version}, "
        f"{n} migration{'' if n == 1 else 's'}"
    )
    return [head, *table_lines(["migration", "format", "records", "what"], rows)]


@command("migrate", _migrate_args)
def cmd_migrate(args: argparse.Namespace) -> int:
    """Upgrade the store's on-disk format: named, ordered migrations, one transaction each.

    Prints the plan (each migration, the formats it goes between and how many records it
    touches), applies it unless --dry-run and records every migration in the store and its
    journal, under the acting name (default cortex-migrate). Nothing else may use the store
    meanwhile. A store at the newest format is left as it is.
    """
    path = _existing_store(args)
    if args.list:
        if args.dry_run or args.to is not None:
            raise UsageError("--list takes neither --dry-run nor --to")
        return _list_migrations(args, path)
    try:
        planned = migrations.migrate(path, to=args.to, dry_run=True)
    except ValidationError as exc:
        if exc.field != "to":
            raise
        raise CortexError(f"--to {args.to}: {exc.message}") from None
    if not planned.steps:
        at = planned.from_version
        text = (
            f"{path}: up to date (format {at})"
            if at == FORMAT_VERSION
            else f"{path}: already at format {at} (this cortex writes format {FORMAT_VERSION})"
        )
        emit(args, {**_migration_json(planned), "dry_run": args.dry_run}, text)
        return 0
    if args.dry_run:
        emit(args, _migration_json(planned), [*_plan_lines(planned), "dry run: nothing written"])
        return 0
    if not args.json:
        print("\n".join(_plan_lines(planned)), flush=True)
    actor = args.actor or os.environ.get("CORTEX_ACTOR") or "cortex-migrate"
    bars = _StepBars()
    try:
        report = migrations.migrate(path, to=args.to, progress=bars, actor=actor)
    finally:
        bars.close()
    lines = [f"applied {s.step.name} ({s.records} records)" for s in report.steps]
    lines.append(f"{path}: now at format {report.to_version}")
    emit(args, _migration_json(report), lines)
    return 0


def _list_migrations(args: argparse.Namespace, path: str) -> int:
    history = migrations.applied(path)
    done = {a.name: a for a in history}
    pending = migrations.plan(path)
    at = pending[0].from_version if pending else FORMAT_VERSION
    rows: list[tuple[str, str, str, str]] = []
    known: list[dict[str, Any]] = []
    for step in migrations.known():
        a = done.get(step.name)
        if a is not None:
            state, status = "applied", f"applied {fmt_when(a.at)} by {a.by} ({a.records} records)"
        elif step in pending:
            state = status = "pending"
        else:
            state, status = "not needed", "not needed (the store was created at a later format)"
        rows.append(
            (step.name, f"{step.from_version} → {step.to_version}", status, step.description)
        )
        known.append({**to_plain(step), "status": state})
    obj = {
        "path": path,
        "format_version": at,
        "applied": [to_plain(a) for a in history],
        "known": known,
    }
    lines = [f"{path}: format {at} (this cortex writes format {FORMAT_VERSION})"]
    lines += table_lines(["migration", "format", "status", "what"], rows)
    emit(args, obj, lines)
    return 0


def _reindex_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--lexical", action="store_true", help="rebuild the lexical (BM25) index (the default)"
    )
    p.add_argument(
        "--merge",
        action="store_true",
        help="only fold the lexical index's pending posting segments into its blocks "
        "(specs/lexical.md §4b): no rebuild",
    )
    p.add_argument(
        "--vectors",
        action="store_true",
        help="re-embed every live memory into the vector index",
    )
    p.add_argument(
        "--model",
        metavar="NAME",
        help="with --vectors: the embedder (hashing, hashing-v1-<dim>, minilm); another "
        "model than the store's replaces all its vectors; default: the store's own",
    )


@command("reindex", _reindex_args)
def cmd_reindex(args: argparse.Namespace) -> int:
    """Rebuild an index from the records: the lexical index (the default) or the vectors.

    Indexes are derived data; this repairs one that `cortex verify` reports damaged. Memories
    and edges are not changed. The lexical rebuild is not journalled; re-embedding writes one
    `embed` journal entry per memory (the vectors are stored records).
    """
    if args.model is not None and not args.vectors:
        raise UsageError("--model goes with --vectors")
    if args.merge and (args.vectors or args.lexical):
        raise UsageError("--merge goes alone")
    if args.vectors:
        return _reindex_vectors(args)
    if args.merge:
        with open_store(args) as cx:
            folded = cx.merge_lexical()
            path = cx.path
        emit(
            args,
            {"path": path, "merged": folded},
            f"{path}: {folded} posting segments folded into the lexical index",
        )
        return 0
    bar = Progress("lexical")
    with open_store(args) as cx:
        try:
            n = cx.reindex_lexical(progress=bar)
        finally:
            bar.close()
        path = cx.path
    emit(
        args,
        {"path": path, "lexical": n},
        f"{path}: lexical index rebuilt from {n} live memories",
    )
    return 0


def _reindex_vectors(args: argparse.Namespace) -> int:
    path = store_path(args)
    if not store_exists(path):
        raise CortexError(f"no store at {path}; create one with `cortex --store {path} init`")
    embedder: Any = embedder_for(args.model) if args.model else "auto"
    bar = Progress("embedding")
    actor = args.actor or os.environ.get("CORTEX_ACTOR") or "cli"
    try:
        with Cortex.open(
            path,
            actor=actor,
            create=False,
            embedder=embedder,
            reembed=True,
            progress=bar,
            as_owner=True,
            vector_precision=precision_of(args),
        ) as cx:
            if cx.embedder is None:
                raise CortexError(
                    f"{path} holds no vectors yet: name the embedder with --model "
                    "(hashing, hashing-v1-<dim> or minilm)"
                )
            n = cx.reembedded if cx.reembedded is not None else cx.reindex_vectors(progress=bar)
            model = cx.embedder.model_id
    finally:
        bar.close()
    emit(
        args,
        {"path": path, "vectors": n, "model": model},
        f"{path}: {n} live memories embedded with {model}",
    )
    return 0


def _salvage_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("damaged", metavar="DAMAGED", help="the damaged store's directory (only read)")
    p.add_argument("new", metavar="NEW", help="a new directory for the recovered store")


@command("salvage", _salvage_args)
def cmd_salvage(args: argparse.Namespace) -> int:
    """Copy every record of a damaged store that still checks into a new store; name the rest."""
    bars = _StepBars()
    try:
        report = salvage(args.damaged, args.new, actor=args.actor, progress=bars)
    finally:
        bars.close()
    obj = to_plain(report)
    lines = [
        f"{args.new}: recovered {report.memories} memories ({report.versions} versions), "
        f"{report.edges} edges, {report.episodes} episodes, {report.vectors} vectors; "
        f"verify {'ok' if report.verify_ok else 'FAILED'}",
        f"read {report.records_read} records from {report.pages} pages of {args.damaged}: "
        f"{report.records_bad} failed their checks, {len(report.damaged_pages)} page problems",
    ]
    lines += [f"  {p}" for p in report.damaged_pages]
    if report.lost:
        lines.append(f"lost {len(report.lost)}:")
        lines += table_lines(
            ["kind", "id", "type", "why", "named in"],
            [(x.kind, x.id, x.type or "", x.why, ", ".join(x.seen_in)) for x in report.lost],
        )
    else:
        lines.append("nothing lost")
    lines += [f"note: {n}" for n in report.notes]
    emit(args, obj, lines)
    return 0 if report.verify_ok else 1
