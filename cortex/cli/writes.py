"""Commands that write: write, update, head, tombstone, purge, scrub."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from cortex import (
    Cortex,
    MemoryId,
    Provenance,
    Sensitivity,
    SourceKind,
    TombstonedError,
    ValidationError,
    Visibility,
    WriteResult,
)
from cortex.cli.common import (
    command,
    emit,
    enum_arg,
    fmt_size,
    fmt_when,
    frame_arg,
    json_arg,
    open_store,
    time_arg,
    type_arg,
)
from cortex.model.jsonmap import from_plain, to_plain
from cortex.model.records import DATA_TYPES


def _version_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--confidence", type=float, default=1.0, help="0..1 (default 1)")
    p.add_argument("--valid-from", type=time_arg, metavar="TIME", help="ISO-8601 with offset")
    p.add_argument("--valid-until", type=time_arg, metavar="TIME", help="ISO-8601 with offset")
    p.add_argument("--expires-at", type=time_arg, metavar="TIME", help="ISO-8601 with offset")
    p.add_argument("--created-by", metavar="NAME", help="who made this version")
    p.add_argument(
        "--source", type=enum_arg(SourceKind), help=f"provenance source ({SourceKind.labels()})"
    )
    p.add_argument("--provenance", metavar="JSON", help="a Provenance object (overrides --source)")


def _provenance(args: argparse.Namespace) -> Provenance | None:
    if args.provenance is not None:
        return from_plain(Provenance, json_arg(args.provenance, "provenance"), "provenance")
    return Provenance(source=args.source) if args.source is not None else None


def _write_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("type", type=type_arg, metavar="TYPE", help="Fact, Event, Goal, ...")
    p.add_argument("data", metavar="JSON", help="the fields as JSON (or @FILE, or - for stdin)")
    p.add_argument("--tag", action="append", default=[], help="a tag (repeat for more)")
    p.add_argument(
        "--frame",
        action="append",
        type=frame_arg,
        default=[],
        metavar="VERB:KIND:REF",
        help="a frame, e.g. find:knowledge:ada (repeat for more)",
    )
    p.add_argument("--importance", type=int, default=5, help="0..10 (default 5)")
    p.add_argument(
        "--visibility",
        type=enum_arg(Visibility),
        default=Visibility.PRIVATE,
        help=f"{Visibility.labels()} (default private)",
    )
    p.add_argument("--id", help="a caller-chosen ULID")
    sensitivity_option(p)
    _version_options(p)
    _supersede_option(p)
    _task_options(p)


def sensitivity_option(p: argparse.ArgumentParser, what: str = "memory") -> None:
    """The ``--sensitivity`` option of a command that writes."""
    p.add_argument(
        "--sensitivity",
        type=enum_arg(Sensitivity),
        help=f"the {what}'s sensitivity: {Sensitivity.labels()} (default internal)",
    )


def _supersede_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--supersede",
        choices=("auto", "yes", "no"),
        default="auto",
        help="temporal chains (specs/claims.md): auto applies the rules; yes makes a Fact "
        "compete on subject and predicate whatever the predicate; no skips them",
    )


def _task_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--task",
        metavar="ID",
        help="count this write against task ID's write budget (kept in the store)",
    )
    p.add_argument(
        "--budget", type=int, default=50, metavar="N", help="the task's budget (default 50)"
    )


@contextmanager
def _in_task(cx: Cortex, args: argparse.Namespace) -> Iterator[None]:
    if args.task is None:
        yield
    else:
        with cx.task(args.task, limit=args.budget):
            yield


def _supersede(args: argparse.Namespace) -> bool | None:
    return {"auto": None, "yes": True, "no": False}[args.supersede]


def _emit_write(args: argparse.Namespace, result: WriteResult) -> None:
    """The URI on stdout (scripts read it); what else happened on stderr, or all in JSON."""
    if args.json:
        emit(
            args,
            {
                "uri": str(result),
                "outcome": result.outcome,
                "supersedes": [str(u) for u in result.supersedes],
                "superseded_by": [str(u) for u in result.superseded_by],
                "conflicts_with": [str(u) for u in result.conflicts_with],
                "reason": result.reason,
            },
            "",
        )
        return
    print(str(result))
    if result.outcome not in ("created", "new_version") or (
        result.supersedes or result.superseded_by or result.conflicts_with
    ):
        print(f"cortex: {result.summary()}", file=sys.stderr)


@command("write", _write_args)
def cmd_write(args: argparse.Namespace) -> int:
    """Write a new memory of TYPE from a JSON object of its fields; print its URI."""
    data = from_plain(DATA_TYPES[args.type], json_arg(args.data, "data"), "data")
    mid = from_plain(MemoryId, args.id, "id") if args.id is not None else None
    with open_store(args) as cx, _in_task(cx, args):
        uri = cx.write(
            data,
            tags=args.tag,
            frames=args.frame,
            importance=args.importance,
            visibility=args.visibility,
            created_by=args.created_by,
            confidence=args.confidence,
            provenance=_provenance(args),
            valid_from=args.valid_from,
            valid_until=args.valid_until,
            expires_at=args.expires_at,
            id=mid,
            supersede=_supersede(args),
            sensitivity=args.sensitivity,
        )
    _emit_write(args, uri)
    return 0


def _update_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("ref", metavar="URI", help="the memory (a URI of any version, or its id)")
    p.add_argument("data", metavar="JSON", help="the new fields as JSON (or @FILE, or -)")
    p.add_argument(
        "--merge", action="store_true", help="apply JSON over the current fields (a patch)"
    )
    p.add_argument(
        "--expected-version", type=int, metavar="N", help="fail unless N is the current version"
    )
    _version_options(p)
    _supersede_option(p)


@command("update", _update_args)
def cmd_update(args: argparse.Namespace) -> int:
    """Write a new version of a memory from JSON (whole, or with --merge a patch); print its URI."""
    given = json_arg(args.data, "data")
    with open_store(args) as cx:
        current = cx.resolve_latest(args.ref)
        if current.head.tombstone is not None:  # say so before judging the new data
            raise TombstonedError(
                f"memory {current.id} was tombstoned ({current.head.tombstone.reason}); it can "
                "be resolved for audit but not changed"
            )
        plain = given
        if args.merge:
            if not isinstance(given, dict):
                raise ValidationError("data", "type", "a --merge patch must be a JSON object")
            base = to_plain(current.data) if current.data is not None else {}
            plain = {**base, **given}
            plain = {k: v for k, v in plain.items() if v is not None}
        data = from_plain(DATA_TYPES[current.head.type], plain, "data")
        uri = cx.update(
            current.id,
            data,
            expected_version=args.expected_version,
            created_by=args.created_by,
            confidence=args.confidence,
            provenance=_provenance(args),
            valid_from=args.valid_from,
            valid_until=args.valid_until,
            expires_at=args.expires_at,
            supersede=_supersede(args),
        )
    _emit_write(args, uri)
    return 0


def _head_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("ref", metavar="URI", help="the memory (a URI or its id)")
    p.add_argument("--tag", action="append", help="set the tags (repeat for more)")
    p.add_argument("--clear-tags", action="store_true", help="remove every tag")
    p.add_argument(
        "--frame",
        action="append",
        type=frame_arg,
        metavar="VERB:KIND:REF",
        help="set the frames (repeat for more)",
    )
    p.add_argument("--clear-frames", action="store_true", help="remove every frame")
    p.add_argument("--importance", type=int, help="0..10")
    p.add_argument("--visibility", type=enum_arg(Visibility), help=Visibility.labels())
    p.add_argument("--sensitivity", type=enum_arg(Sensitivity), help=f"{Sensitivity.labels()}")


def head_lines(head: Any) -> list[str]:
    """A head's mutable parts as lines of text."""
    frames = ", ".join(f"{f.verb.label}:{f.obj_kind.label}:{f.obj_ref}" for f in head.frames)
    lines = [
        f"id          {head.id}  ({head.type.type_name}, current version {head.current_version})",
        f"tags        {', '.join(head.tags) or '-'}",
        f"frames      {frames or '-'}",
        f"importance  {head.importance}   visibility {head.visibility.label}",
        f"owner       {head.actor_scope}   created {fmt_when(head.created_at)}   "
        f"updated {fmt_when(head.last_updated_at)}",
    ]
    if head.tombstone is not None:
        t = head.tombstone
        purged = f", purged {fmt_when(t.purged_at)}" if t.purged_at else ""
        lines.append(f"tombstone   {t.reason!r} by {t.by} at {fmt_when(t.at)}{purged}")
    return lines


@command("head", _head_args)
def cmd_head(args: argparse.Namespace) -> int:
    """Change a memory's tags, frames, importance, visibility or sensitivity (no new version)."""
    tags = [] if args.clear_tags else args.tag
    frames = [] if args.clear_frames else args.frame
    with open_store(args) as cx:
        head = cx.update_head(
            args.ref,
            tags=tags,
            frames=frames,
            importance=args.importance,
            visibility=args.visibility,
            sensitivity=args.sensitivity,
        )
        level = cx.sensitivity(head.id)
    emit(
        args,
        {**to_plain(head), "sensitivity": level.label},
        [*head_lines(head), f"sensitivity {level.label}"],
    )
    return 0


def _retire_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("ref", metavar="URI", help="the memory (a URI or its id)")
    p.add_argument("--reason", required=True, help="why (kept in the audit trail)")


def _wait_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--wait",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long the erasure step waits for older read snapshots (default 30)",
    )


def _tombstone_args(p: argparse.ArgumentParser) -> None:
    _retire_args(p)
    p.add_argument(
        "--erase",
        action="store_true",
        help="erase the content too (a purge): gone from every record and every file",
    )
    _wait_arg(p)


def _purge_args(p: argparse.ArgumentParser) -> None:
    _retire_args(p)
    p.add_argument(
        "--no-scrub",
        dest="scrub",
        action="store_false",
        help="skip the erasure step: the bytes stay in freed pages until `cortex scrub`",
    )
    _wait_arg(p)


@command("tombstone", _tombstone_args)
def cmd_tombstone(args: argparse.Namespace) -> int:
    """Retire a memory: hidden from search, still resolvable for audit (idempotent)."""
    with open_store(args) as cx:
        stone = cx.tombstone(args.ref, args.reason, erase=args.erase, wait=args.wait)
    if stone.purged_at is not None:
        line = f"purged: {stone.reason!r} by {stone.by} at {fmt_when(stone.purged_at)}"
    else:
        line = f"tombstoned: {stone.reason!r} by {stone.by} at {fmt_when(stone.at)}"
    emit(args, to_plain(stone), line)
    return 0


@command("purge", _purge_args)
def cmd_purge(args: argparse.Namespace) -> int:
    """Erase a memory's content in every version and from the store's files; hashes remain."""
    with open_store(args) as cx:
        stone = cx.purge(args.ref, args.reason, scrub=args.scrub, wait=args.wait)
    line = f"purged: {stone.reason!r} by {stone.by} at {fmt_when(stone.purged_at)}"
    if not args.scrub:
        line += "; its bytes stay in freed pages until `cortex scrub`"
    emit(args, to_plain(stone), line)
    return 0


@command("scrub", _wait_arg)
def cmd_scrub(args: argparse.Namespace) -> int:
    """Zero every byte of the store's files no reader can read again (the erasure step)."""
    with open_store(args) as cx:
        report = cx.scrub(wait=args.wait)
    obj = to_plain(report)
    if not report.files_zeroed:  # PostgreSQL: VACUUM, the files are the operator's part
        lines = [
            f"{'complete' if report.complete else 'INCOMPLETE'}: VACUUM removed the dead rows "
            f"in {report.seconds:.2f} s; the server's files, WAL and replicas are the "
            "operator's part (specs/storage.md section 11)"
        ]
        if report.holding:
            pids = ", ".join(f"pid {pid} (xmin age {t})" for pid, t in report.holding)
            lines.append(f"transactions older than this scrub still open: {pids}; run it again")
        emit(args, obj, lines)
        return 0 if report.complete else 1
    lines = [
        f"{'complete' if report.complete else 'INCOMPLETE'}: {report.free_pages} free pages "
        f"({report.free_pages_zeroed} not yet zero), {report.gaps_zeroed} page gaps, "
        f"{report.tails_zeroed} value tails, {report.separators} stale separators; "
        f"{fmt_size(report.bytes_zeroed)} zeroed in {report.seconds:.2f} s",
    ]
    if report.sidecar_files:
        lines.append(f"vector index: {report.sidecar_files} files rewritten or removed")
    if report.held_pages:
        lines.append(
            f"{report.held_pages} free pages the previous commit or open readers may still read "
            "(zeroed by a later scrub)"
        )
    if report.holding:
        pids = ", ".join(f"pid {pid} (txn {t})" for pid, t in report.holding)
        lines.append(f"read snapshots older than this scrub still open: {pids}; run it again")
    emit(args, obj, lines)
    return 0 if report.complete else 1
