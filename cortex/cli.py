"""The ``cortex`` command: a thin shell over the public API.

``main(argv)`` parses, runs one small function per command and returns the exit code: 0 ok,
1 a cortex error (one line on stderr), 2 a usage error, 70 an internal error (a bug in cortex,
so scripts can tell it from a problem with their input). Every command takes ``--json``; the
store comes from ``--store`` or ``CORTEX_STORE``, the acting name from ``--actor`` or
``CORTEX_ACTOR``. A new command is one ``@_command`` function (its docstring is its help).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, NamedTuple, TypeVar

from cortex import (
    FORMAT_VERSION,
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
    Follow,
    FrameMatch,
    FrameRef,
    Goal,
    GoalStatus,
    Hit,
    Identity,
    IntegrityError,
    JournalEntry,
    JournalKind,
    LLMExtractor,
    Memory,
    MemoryId,
    MemoryType,
    NewMemory,
    NotFoundError,
    ObjKind,
    Outcome,
    Pattern,
    Polarity,
    Preference,
    Provenance,
    Query,
    Reader,
    Result,
    Sensitivity,
    SourceKind,
    SourceRef,
    Stance,
    Strength,
    TombstonedError,
    ValidationError,
    Verb,
    Visibility,
    Window,
    WriteResult,
    __version__,
    argcheck,
    export_digest,
    export_store,
    import_bundle,
    parse_where,
    render_full,
)
from cortex import migrate as migrations
from cortex.context import TIERS
from cortex.embed import HashingEmbedder, MiniLM, embedder_for
from cortex.engines import copy_kv, is_url, open_kv
from cortex.engines import exists as store_exists
from cortex.enums import CodedEnum
from cortex.episode import episode_text
from cortex.erasure import ErasureReport
from cortex.forms import format_time
from cortex.jsonmap import from_plain, loads, parse_time, to_plain
from cortex.records import DATA_TYPES, Episode
from cortex.salvage import salvage
from cortex.store import episode_source

__all__ = [
    "EXIT_ERROR",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "entry",
    "main",
]

EXIT_OK = 0
EXIT_ERROR = 1
"""A cortex error: bad input, a missing memory, a damaged store (one line on stderr)."""
EXIT_USAGE = 2
"""A bad invocation: an unknown option, a missing argument."""
EXIT_INTERNAL = 70
"""An internal error, a bug in cortex (``EX_SOFTWARE`` of sysexits.h); please report it."""
EXIT_INTERRUPTED = 130
"""Interrupted (Ctrl-C)."""

E = TypeVar("E", bound=CodedEnum)

# ---------------------------------------------------------------------------------------------
# The command table


class _Command(NamedTuple):
    name: str
    func: Callable[[argparse.Namespace], int]
    configure: Callable[[argparse.ArgumentParser], None]


_COMMANDS: list[_Command] = []
_EDGE_COMMANDS: list[_Command] = []


def _command(
    name: str, configure: Callable[[argparse.ArgumentParser], None] = lambda p: None
) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    """Register ``func`` as ``cortex NAME`` (``edge NAME`` when the name starts with ``edge ``)."""

    def register(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        table = _EDGE_COMMANDS if name.startswith("edge ") else _COMMANDS
        table.append(_Command(name.removeprefix("edge "), func, configure))
        return func

    return register


class _UsageError(Exception):
    """Bad invocation found after parsing (exit 2)."""


# ---------------------------------------------------------------------------------------------
# Arguments


def _enum_arg(cls: type[E]) -> Callable[[str], E]:
    def parse(text: str) -> E:
        m = cls.coerce(text)
        if m is None:
            raise argparse.ArgumentTypeError(f"{text!r} is not one of {cls.labels()}")
        return m

    parse.__name__ = cls.__name__
    return parse


def _time_arg(text: str) -> datetime:
    if text == "now":
        return datetime.now(UTC)
    try:
        return parse_time(text, "time")
    except ValidationError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


def _frame_arg(text: str) -> FrameRef:
    parts = text.split(":", 2)
    if len(parts) != 3 or not parts[2]:
        raise argparse.ArgumentTypeError(f"{text!r} is not VERB:KIND:REF, e.g. find:knowledge:ada")
    verb, kind = Verb.coerce(parts[0]), ObjKind.coerce(parts[1])
    if verb is None:
        raise argparse.ArgumentTypeError(f"verb {parts[0]!r} is not one of {Verb.labels()}")
    if kind is None:
        raise argparse.ArgumentTypeError(f"kind {parts[1]!r} is not one of {ObjKind.labels()}")
    return FrameRef(verb=verb, obj_kind=kind, obj_ref=parts[2])


def _type_arg(text: str) -> MemoryType:
    m = MemoryType.from_name(text.capitalize())
    if m is None:
        names = ", ".join(t.type_name for t in MemoryType)
        raise argparse.ArgumentTypeError(f"{text!r} is not a memory type ({names})")
    return m


def _json_arg(text: str, field: str) -> Any:
    """JSON given inline, as ``@FILE``, or as ``-`` (standard input)."""
    if text == "-":
        text = sys.stdin.read()
    elif text.startswith("@"):
        try:
            text = Path(text[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise CortexError(f"cannot read {text[1:]}: {exc}") from exc
    return loads(text, field)  # nesting bounded (MAX_DEPTH), errors as ValidationError


def _store_path(args: argparse.Namespace) -> str:
    path: str | None = args.store or os.environ.get("CORTEX_STORE")
    if not path:
        raise _UsageError("no store given: pass --store PATH or set CORTEX_STORE")
    return path


@contextmanager
def _open(
    args: argparse.Namespace,
    *,
    create: bool = False,
    readonly: bool = False,
    check_pages: bool = True,
) -> Iterator[Cortex]:
    """The store of ``--store``, opened read-only for commands that only read.

    So they work on a store the user may not write (a read-only mount, another user's files).
    ``check_pages=False`` for the whole-file walks (``verify``, ``stats``, ``export``,
    ``backup``): each checks the pages it walks itself and reports damage its own way.
    """
    path = _store_path(args)
    if not create and not store_exists(path):
        raise CortexError(f"no store at {path}; create one with `cortex --store {path} init`")
    actor = args.actor or os.environ.get("CORTEX_ACTOR") or "cli"
    # the CLI administers the store: it reads as the owner unless a command passes a reader
    with Cortex.open(
        path,
        actor=actor,
        create=create,
        readonly=readonly,
        embedder=_embedder(args),
        as_owner=True,
        check_pages=check_pages,
    ) as cx:
        yield cx


@contextmanager
def _new_or_existing(args: argparse.Namespace) -> Iterator[Cortex]:
    """The store of ``--store``, created if missing, but only if the block succeeds.

    A new store is built in a hidden directory beside the path and moved into place when the
    block returns; when it raises, the hidden directory goes and nothing is left at the path.
    """
    target = _store_path(args)
    if is_url(target) or store_exists(target):  # a server's store: its import is one transaction
        with _open(args, create=True) as cx:
            yield cx
        return
    path = Path(target)
    if path.exists() and not path.is_dir():
        raise CortexError(f"{path} is a file, not a store directory")
    tmp = path.parent / f".{path.name}.new-{os.getpid()}"
    actor = args.actor or os.environ.get("CORTEX_ACTOR") or "cli"
    try:
        with Cortex.open(tmp, actor=actor, embedder=_embedder(args), as_owner=True) as cx:
            yield cx
        if path.exists():  # an empty directory the user made: the store's files go into it
            for item in tmp.iterdir():
                item.rename(path / item.name)
            tmp.rmdir()
        else:
            tmp.rename(path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _embedder(args: argparse.Namespace) -> Any:
    """The embedder the store is opened with: ``auto`` (default) picks the store's own model."""
    name = getattr(args, "embedder", None) or os.environ.get("CORTEX_EMBEDDER") or "auto"
    if name == "auto":
        return "auto"
    if name == "none":
        return None
    return embedder_for(name)


# ---------------------------------------------------------------------------------------------
# Output


def _emit(args: argparse.Namespace, obj: Any, lines: Sequence[str] | str) -> None:
    """Print ``obj`` as JSON with ``--json``, otherwise the readable ``lines``."""
    if args.json:
        print(json.dumps(obj, ensure_ascii=False, indent=2))
    else:
        print(lines if isinstance(lines, str) else "\n".join(lines))


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    cells = [[str(c) for c in headers], *[["" if c is None else str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]


def _when(t: datetime | None) -> str:
    return "" if t is None else format_time(t)


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover - the loop always returns


class _Progress:
    """A progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, label: str, unit: str = "") -> None:
        self.label = label
        self.unit = unit
        self.on = sys.stderr.isatty()
        self.drawn = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if not self.on or (done < total and now - self.drawn < 0.1):
            return
        self.drawn = now
        frac = done / total if total else 1.0
        bar = "#" * int(frac * 30)
        amount = f"{_size(done)}/{_size(total)}" if self.unit == "bytes" else f"{done}/{total}"
        sys.stderr.write(f"\r{self.label} [{bar:<30}] {frac:4.0%} {amount}")
        sys.stderr.flush()

    def close(self) -> None:
        if self.on and self.drawn:
            sys.stderr.write("\n")


# ---------------------------------------------------------------------------------------------
# Store


@_command("init")
def cmd_init(args: argparse.Namespace) -> int:
    """Create a store (the acting name becomes its owner); an existing store is left as is."""
    existed = store_exists(_store_path(args))
    with _open(args, create=True) as cx:
        obj = {
            "path": cx.path,
            "created": not existed,
            "format_version": cx.format.format_version,
            "owner": cx.owner,
        }
    what = "already a store" if existed else "created"
    _emit(args, obj, f"{obj['path']}: {what} (format {obj['format_version']}, owner {cx.owner})")
    return 0


def _files(path: str) -> dict[str, int]:
    if is_url(path):  # a PostgreSQL store has no files of its own
        return {}
    return {p.name: p.stat().st_size for p in sorted(Path(path).iterdir()) if p.is_file()}


@_command("info")
def cmd_info(args: argparse.Namespace) -> int:
    """The store at a glance: format, owner, counts, sizes and sidecar files."""
    with _open(args, readonly=True) as cx:
        stats = cx.stats()
        fmt = cx.format
        files = _files(cx.path)
        obj = {
            "path": cx.path,
            "format_version": fmt.format_version,
            "features": list(fmt.features),
            "created_at": fmt.created_at.isoformat(),
            "created_by": fmt.created_by,
            "owner": fmt.owner,
            "actor": cx.actor,
            **{k: stats[k] for k in ("memories", "live", "tombstoned", "purged", "versions")},
            "edges": stats["edges"],
            "journal_entries": stats["journal_entries"],
            "map_size": stats["map_size"],
            "used_bytes": stats["used_bytes"],
            "files": files,
            "sidecars": {k: v for k, v in files.items() if k not in ("data.mdb", "lock.mdb")},
            "vectors": cx.vector_info(),
        }
    vec = obj["vectors"]
    vectors = (
        "none (never opened with an embedder)"
        if vec is None
        else f"{vec['vectors']} of {vec['model_id']} (dim {vec['dim']}); index {vec['index']}"
    )
    sidecars = ", ".join(f"{k} ({_size(v)})" for k, v in obj["sidecars"].items()) or "none"
    _emit(
        args,
        obj,
        [
            f"store     {obj['path']}",
            f"format    {fmt.format_version} ({', '.join(fmt.features)})",
            f"created   {_when(fmt.created_at)} by {fmt.created_by}",
            f"owner     {fmt.owner}  (acting as {cx.actor})",
            f"memories  {stats['memories']} ({stats['live']} live, {stats['tombstoned']} "
            f"tombstoned, {stats['purged']} purged) in {stats['versions']} versions",
            f"edges     {stats['edges']}",
            f"journal   {stats['journal_entries']} entries",
            f"size      {_size(files.get('data.mdb', 0))} on disk, {_size(stats['used_bytes'])} "
            f"used, map {_size(stats['map_size'])}",
            f"sidecars  {sidecars}",
            f"vectors   {vectors}",
        ],
    )
    return 0


@_command("stats")
def cmd_stats(args: argparse.Namespace) -> int:
    """Counts: memories by type and state, versions, edges, journal entries, sizes."""
    with _open(args, readonly=True, check_pages=False) as cx:
        stats = cx.stats()
    rows = [(name, n) for name, n in stats["by_type"].items()]
    lines = _table(["type", "memories"], rows)
    lines.append("")
    for key in ("memories", "live", "tombstoned", "purged", "versions", "edges"):
        lines.append(f"{key:<16}{stats[key]}")
    lines.append(f"{'journal_entries':<16}{stats['journal_entries']}")
    lines.append(f"{'used_bytes':<16}{stats['used_bytes']}")
    _emit(args, stats, lines)
    return 0


# ---------------------------------------------------------------------------------------------
# Writes


def _version_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--confidence", type=float, default=1.0, help="0..1 (default 1)")
    p.add_argument("--valid-from", type=_time_arg, metavar="TIME", help="ISO-8601 with offset")
    p.add_argument("--valid-until", type=_time_arg, metavar="TIME", help="ISO-8601 with offset")
    p.add_argument("--expires-at", type=_time_arg, metavar="TIME", help="ISO-8601 with offset")
    p.add_argument("--created-by", metavar="NAME", help="who made this version")
    p.add_argument(
        "--source", type=_enum_arg(SourceKind), help=f"provenance source ({SourceKind.labels()})"
    )
    p.add_argument("--provenance", metavar="JSON", help="a Provenance object (overrides --source)")


def _provenance(args: argparse.Namespace) -> Provenance | None:
    if args.provenance is not None:
        return from_plain(Provenance, _json_arg(args.provenance, "provenance"), "provenance")
    return Provenance(source=args.source) if args.source is not None else None


def _write_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("type", type=_type_arg, metavar="TYPE", help="Fact, Event, Goal, ...")
    p.add_argument("data", metavar="JSON", help="the fields as JSON (or @FILE, or - for stdin)")
    p.add_argument("--tag", action="append", default=[], help="a tag (repeat for more)")
    p.add_argument(
        "--frame",
        action="append",
        type=_frame_arg,
        default=[],
        metavar="VERB:KIND:REF",
        help="a frame, e.g. find:knowledge:ada (repeat for more)",
    )
    p.add_argument("--importance", type=int, default=5, help="0..10 (default 5)")
    p.add_argument(
        "--visibility",
        type=_enum_arg(Visibility),
        default=Visibility.PRIVATE,
        help=f"{Visibility.labels()} (default private)",
    )
    p.add_argument("--id", help="a caller-chosen ULID")
    _sensitivity_option(p)
    _version_options(p)
    _supersede_option(p)
    _task_options(p)


def _sensitivity_option(p: argparse.ArgumentParser, what: str = "memory") -> None:
    p.add_argument(
        "--sensitivity",
        type=_enum_arg(Sensitivity),
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
        _emit(
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


@_command("write", _write_args)
def cmd_write(args: argparse.Namespace) -> int:
    """Write a new memory of TYPE from a JSON object of its fields; print its URI."""
    data = from_plain(DATA_TYPES[args.type], _json_arg(args.data, "data"), "data")
    mid = from_plain(MemoryId, args.id, "id") if args.id is not None else None
    with _open(args) as cx, _in_task(cx, args):
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


@_command("update", _update_args)
def cmd_update(args: argparse.Namespace) -> int:
    """Write a new version of a memory from JSON (whole, or with --merge a patch); print its URI."""
    given = _json_arg(args.data, "data")
    with _open(args) as cx:
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
        type=_frame_arg,
        metavar="VERB:KIND:REF",
        help="set the frames (repeat for more)",
    )
    p.add_argument("--clear-frames", action="store_true", help="remove every frame")
    p.add_argument("--importance", type=int, help="0..10")
    p.add_argument("--visibility", type=_enum_arg(Visibility), help=Visibility.labels())
    p.add_argument("--sensitivity", type=_enum_arg(Sensitivity), help=f"{Sensitivity.labels()}")


def _head_lines(head: Any) -> list[str]:
    frames = ", ".join(f"{f.verb.label}:{f.obj_kind.label}:{f.obj_ref}" for f in head.frames)
    lines = [
        f"id          {head.id}  ({head.type.type_name}, current version {head.current_version})",
        f"tags        {', '.join(head.tags) or '-'}",
        f"frames      {frames or '-'}",
        f"importance  {head.importance}   visibility {head.visibility.label}",
        f"owner       {head.actor_scope}   created {_when(head.created_at)}   "
        f"updated {_when(head.last_updated_at)}",
    ]
    if head.tombstone is not None:
        t = head.tombstone
        purged = f", purged {_when(t.purged_at)}" if t.purged_at else ""
        lines.append(f"tombstone   {t.reason!r} by {t.by} at {_when(t.at)}{purged}")
    return lines


@_command("head", _head_args)
def cmd_head(args: argparse.Namespace) -> int:
    """Change a memory's tags, frames, importance, visibility or sensitivity (no new version)."""
    tags = [] if args.clear_tags else args.tag
    frames = [] if args.clear_frames else args.frame
    with _open(args) as cx:
        head = cx.update_head(
            args.ref,
            tags=tags,
            frames=frames,
            importance=args.importance,
            visibility=args.visibility,
            sensitivity=args.sensitivity,
        )
        level = cx.sensitivity(head.id)
    _emit(
        args,
        {**to_plain(head), "sensitivity": level.label},
        [*_head_lines(head), f"sensitivity {level.label}"],
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


@_command("tombstone", _tombstone_args)
def cmd_tombstone(args: argparse.Namespace) -> int:
    """Retire a memory: hidden from search, still resolvable for audit (idempotent)."""
    with _open(args) as cx:
        stone = cx.tombstone(args.ref, args.reason, erase=args.erase, wait=args.wait)
    if stone.purged_at is not None:
        line = f"purged: {stone.reason!r} by {stone.by} at {_when(stone.purged_at)}"
    else:
        line = f"tombstoned: {stone.reason!r} by {stone.by} at {_when(stone.at)}"
    _emit(args, to_plain(stone), line)
    return 0


@_command("purge", _purge_args)
def cmd_purge(args: argparse.Namespace) -> int:
    """Erase a memory's content in every version and from the store's files; hashes remain."""
    with _open(args) as cx:
        stone = cx.purge(args.ref, args.reason, scrub=args.scrub, wait=args.wait)
    line = f"purged: {stone.reason!r} by {stone.by} at {_when(stone.purged_at)}"
    if not args.scrub:
        line += "; its bytes stay in freed pages until `cortex scrub`"
    _emit(args, to_plain(stone), line)
    return 0


@_command("scrub", _wait_arg)
def cmd_scrub(args: argparse.Namespace) -> int:
    """Zero every byte of the store's files no reader can read again (the erasure step)."""
    with _open(args) as cx:
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
        _emit(args, obj, lines)
        return 0 if report.complete else 1
    lines = [
        f"{'complete' if report.complete else 'INCOMPLETE'}: {report.free_pages} free pages "
        f"({report.free_pages_zeroed} not yet zero), {report.gaps_zeroed} page gaps, "
        f"{report.tails_zeroed} value tails, {report.separators} stale separators; "
        f"{_size(report.bytes_zeroed)} zeroed in {report.seconds:.2f} s",
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
    _emit(args, obj, lines)
    return 0 if report.complete else 1


# ---------------------------------------------------------------------------------------------
# Reads


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
    p.add_argument("--as-of", type=_time_arg, metavar="TIME", help="the version current then")
    p.add_argument("--full", action="store_true", help="also print the full form")


@_command("show", _show_args)
def cmd_show(args: argparse.Namespace) -> int:
    """Show one version: its forms, data, head, version record and provenance."""
    with _open(args, readonly=True) as cx:
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
    lines += ["  " + line for line in _head_lines(m.head)]
    lines.append(f"  sensitivity {level.label}")
    lines += [
        "version",
        f"  hash        sha256 {v.hash.hex()}",
        f"  created     {_when(v.created_at)} by {v.created_by}",
        f"  confidence  {v.confidence}",
    ]
    if v.valid_from or v.valid_until or v.expires_at:
        lines.append(
            f"  valid       from {_when(v.valid_from) or '-'} until {_when(v.valid_until) or '-'}"
            f"   expires {_when(v.expires_at) or '-'}"
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
    _emit(args, obj, lines)
    return 0


def _source_quote(cx: Cortex, m: Memory) -> Any:
    """The episode a shown version was drawn from (``None`` when it names none)."""
    if episode_source(m.version.provenance) is None:
        return None
    try:
        return cx.episode_of(m.uri)
    except NotFoundError:
        return None


def _id_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("ref", metavar="ID", help="the memory id (or a URI of any version)")


@_command("history", _id_arg)
def cmd_history(args: argparse.Namespace) -> int:
    """Every version of a memory, oldest first."""
    with _open(args, readonly=True) as cx:
        versions = cx.history(args.ref)
    rows = [
        (
            f"#{m.version.version}",
            _when(m.version.created_at),
            m.version.created_by,
            m.version.hash.hex()[:16],
            m.version.forms.short if m.version.forms else "(purged)",
        )
        for m in versions
    ]
    _emit(
        args,
        [_memory_json(m)["version"] for m in versions],
        _table(["version", "created", "by", "hash", "short form"], rows),
    )
    return 0


def _chain_args(p: argparse.ArgumentParser) -> None:
    _id_arg(p)
    p.add_argument("--as-of", type=_time_arg, metavar="TIME", help="the chain as it stood then")


@_command("chain", _chain_args)
def cmd_chain(args: argparse.Namespace) -> int:
    """The temporal chain of a memory: the current truth first, then what it superseded."""
    with _open(args) as cx:
        links = cx.chain(args.ref, as_of=args.as_of)
    rows = [
        (
            "current" if link.current else "history",
            _when(link.since),
            _when(link.until),
            str(link.memory.uri),
            link.memory.version.forms.short if link.memory.version.forms else "(purged)",
        )
        for link in links
    ]
    obj = [
        {
            "uri": str(link.memory.uri),
            "current": link.current,
            "since": _when(link.since),
            "until": _when(link.until) or None,
            "superseded_by": None if link.superseded_by is None else str(link.superseded_by),
        }
        for link in links
    ]
    _emit(args, obj, _table(["", "since", "until", "uri", "short form"], rows))
    return 0


def _conflicts_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--resolve",
        nargs=2,
        metavar=("WINNER", "LOSER"),
        help="close a conflict: WINNER supersedes LOSER from now on (needs --reason)",
    )
    p.add_argument("--reason", help="why (journalled with the resolution)")


@_command("conflicts", _conflicts_args)
def cmd_conflicts(args: argparse.Namespace) -> int:
    """Open conflicts (two current memories that contradict each other), or resolve one."""
    with _open(args) as cx:
        if args.resolve:
            if not args.reason:
                raise ValidationError("reason", "required", "--resolve needs --reason TEXT")
            edge = cx.resolve_conflict(args.resolve[0], args.resolve[1], reason=args.reason)
            _emit(
                args,
                {"winner": str(edge.src), "loser": str(edge.dst), "at": _when(edge.created_at)},
                f"{edge.src} now supersedes {edge.dst}",
            )
            return 0
        found = cx.conflicts()
    rows = [
        (
            _when(c.since),
            str(c.a.uri),
            str(c.b.uri),
            c.a.version.forms.short if c.a.version.forms else "",
            c.b.version.forms.short if c.b.version.forms else "",
        )
        for c in found
    ]
    obj = [{"since": _when(c.since), "a": str(c.a.uri), "b": str(c.b.uri)} for c in found]
    lines = _table(["since", "a", "b", "a says", "b says"], rows) if found else "no open conflicts"
    _emit(args, obj, lines)
    return 0


def _alias_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="the entity (its canonical name, or one of its aliases)")
    p.add_argument("alias", help="another name of it")


@_command("alias", _alias_args)
def cmd_alias(args: argparse.Namespace) -> int:
    """Say that ALIAS is another name of the entity NAME (claims and about meet)."""
    with _open(args) as cx:
        change = cx.alias(args.name, args.alias)
    said = {
        "added": f"{change.alias!r} now names {change.canonical!r}",
        "moved": f"{change.alias!r} and its aliases {', '.join(change.moved)} now name "
        f"{change.canonical!r}",
        "unchanged": f"{change.alias!r} names {change.canonical!r} already",
    }[change.outcome]
    _emit(args, to_plain(change), [said, f"  {change.canonical}: {', '.join(change.group[1:])}"])
    return 0


def _unalias_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("alias", help="the alias to remove")


@_command("unalias", _unalias_args)
def cmd_unalias(args: argparse.Namespace) -> int:
    """Remove an alias: the name names only itself again."""
    with _open(args) as cx:
        change = cx.unalias(args.alias)
    said = (
        f"{change.alias!r} no longer names {change.canonical!r}"
        if change.outcome == "removed"
        else f"{change.alias!r} is no alias"
    )
    _emit(args, to_plain(change), said)
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


@_command("aliases", _aliases_args)
def cmd_aliases(args: argparse.Namespace) -> int:
    """The entities that have aliases, or (--suggest) names that may be one entity."""
    with _open(args, readonly=not args.suggest) as cx:
        if args.suggest:
            found = cx.suggest_aliases(threshold=args.threshold, limit=args.limit)
            rows = [(f"{s.cosine:.3f}", s.reason, s.a, s.b) for s in found]
            lines = _table(["cosine", "why", "a", "b"], rows) if found else "no names to suggest"
            _emit(args, [to_plain(s) for s in found], lines)
            return 0
        groups = cx.aliases(args.name)
    pairs = [(c, ", ".join(a)) for c, a in groups.items()]
    _emit(args, groups, _table(["entity", "aliases"], pairs) if groups else "no aliases")
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


@_command("diff", _diff_args)
def cmd_diff(args: argparse.Namespace) -> int:
    """Field by field, what differs between two versions (data, forms, provenance, validity)."""
    with _open(args, readonly=True) as cx:
        a, b = _diffable(cx.resolve(args.a)), _diffable(cx.resolve(args.b))
    fields = list(dict.fromkeys([*a, *b]))
    changes = [{"field": f, "a": a.get(f), "b": b.get(f)} for f in fields if a.get(f) != b.get(f)]

    def show(x: Any) -> str:
        return "-" if x is None else json.dumps(x, ensure_ascii=False)

    rows = [(c["field"], show(c["a"]), show(c["b"])) for c in changes]
    lines = _table(["field", args.a, args.b], rows) if rows else ["no differences"]
    _emit(args, {"a": args.a, "b": args.b, "changes": changes}, lines)
    return 0


# ---------------------------------------------------------------------------------------------
# Find and context


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
    lines = _table(headers, rows)
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
    g.add_argument("--type", action="append", type=_type_arg, default=[], help="a memory type")
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
    f.add_argument("--since", type=_time_arg, metavar="TIME", help="at or after TIME")
    f.add_argument("--until", type=_time_arg, metavar="TIME", help="before TIME")
    f.add_argument(
        "--on",
        choices=("own", "created", "updated"),
        help="which time the window compares (default own: e.g. an Event's occurred_at)",
    )
    f.add_argument("--as-of", type=_time_arg, metavar="TIME", help="what the store held then")
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
            raise _UsageError("--on needs a window: --recent, --since or --until")
        return None
    return Window(start=args.since, end=args.until, days=args.recent, on=args.on or "own")


def _follow(args: argparse.Namespace) -> Follow | None:
    given = args.follow is not None or args.hops is not None or args.direction is not None
    if not args.from_:
        if given:
            raise _UsageError("--follow, --hops and --direction walk from memories: add --from")
        return None
    low, high = args.hops or (1, 1)
    return Follow(
        types=args.follow or (), min_hops=low, max_hops=high, direction=args.direction or "out"
    )


@_command("find", _find_args)
def cmd_find(args: argparse.Namespace) -> int:
    """Find memories: from an index, filtered, ordered, limited and fit to a token budget.

    A find starts from --type, --tag, --frame, --text, --near or --from (an edge walk) and
    filters with the rest. --where takes the readable predicate syntax of specs/query.md §6:
    data.subject = ada and not (version.confidence < 0.5 or has_tag(old)).
    """
    starts = (args.type, args.tag, args.frame, args.text, args.near, args.from_)
    if not any(starts):
        raise _UsageError(
            "a find starts from an index: add --type, --tag, --frame, --text, --near or --from "
            "(a blind scan of the whole store is refused)"
        )
    where = parse_where(args.where) if args.where is not None else None
    window, follow = _window(args), _follow(args)
    with _open(args, readonly=not args.record_access) as cx:
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
    _emit(args, _result_json(res), _result_lines(res, args.form, first=args.offset + 1))
    return 0


def _search_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("question", metavar="QUESTION", help="a question in plain words")
    p.add_argument("-n", "--limit", type=int, default=10, help="how many hits (default 10)")


@_command("search", _search_args)
def cmd_search(args: argparse.Namespace) -> int:
    """Ask in plain words: the router reads the question, its handler finds the memories.

    Prints how the question was routed (type, entities, attribute, time window, confidence),
    then the hits. See specs/router.md.
    """
    with _open(args, readonly=True) as cx:
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
    _emit(args, obj, lines)
    return 0


def _context_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("verb", type=_enum_arg(Verb), metavar="VERB", help=Verb.labels())
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


@_command("context", _context_args)
def cmd_context(args: argparse.Namespace) -> int:
    """The working set for doing VERB to OBJECTs, ready for a prompt, under one token budget.

    Tiers: pinned (identity, hard constraints, active goals), outcomes (the latest events
    framed with the verb and each object), frame (memories framed so) and recall (--query).
    A pure read: nothing is recorded.
    """
    with _open(args, readonly=True) as cx:
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
    _emit(args, obj, text.rstrip())
    return 0


def _facets_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--by",
        choices=("type", "tag", "subject", "counterparty"),
        default="type",
        help="what to count by (default type)",
    )
    p.add_argument("--type", action="append", type=_type_arg, default=[], help="only this type")
    p.add_argument("--recent", type=float, metavar="DAYS", help="only the last DAYS days")
    p.add_argument(
        "--on",
        choices=("own", "created", "updated"),
        default="own",
        help="which time --recent compares (default own)",
    )


@_command("facets", _facets_args)
def cmd_facets(args: argparse.Namespace) -> int:
    """Count live memories by type, tag, subject or counterparty, largest first."""
    window = Window.recent(args.recent, on=args.on) if args.recent is not None else None
    with _open(args, readonly=True) as cx:
        counts = cx.facets(window, args.by, types=args.type, reader=_reader(args, cx))
    lines = _table([args.by, "memories"], list(counts.items())) if counts else ["none"]
    _emit(args, counts, lines)
    return 0


def _about_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("subject", metavar="SUBJECT", help="an entity, e.g. ada")
    p.add_argument(
        "attribute", nargs="?", metavar="ATTRIBUTE", help="a Fact predicate or a capability"
    )
    p.add_argument("--limit", type=int, default=100, help="at most N (default 100)")
    p.add_argument("--as-of", type=_time_arg, metavar="TIME", help="what the store held then")


@_command("about", _about_args)
def cmd_about(args: argparse.Namespace) -> int:
    """Everything about an entity (SUBJECT), or one ATTRIBUTE of it, newest first.

    That is Identities named SUBJECT, Facts, Beliefs and Capabilities with it as subject, and
    Events with it as counterparty; with ATTRIBUTE, Facts with that predicate and Capabilities
    with that capability.
    """
    with _open(args, readonly=True) as cx:
        res = cx.about(
            args.subject,
            args.attribute,
            limit=args.limit,
            as_of=args.as_of,
            reader=_reader(args, cx),
        )
    _emit(args, _result_json(res), _result_lines(res, "short"))
    return 0


def _attest_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("refs", nargs="+", metavar="URI", help="the memories used (URIs or ids)")
    p.add_argument("--outcome", required=True, type=_enum_arg(Outcome), help=f"{Outcome.labels()}")


@_command("attest", _attest_args)
def cmd_attest(args: argparse.Namespace) -> int:
    """Record that memories were used to act, and how it went (raises their salience).

    success and partial count as citations, failure is counted apart; all or nothing, one
    journal entry per memory.
    """
    with _open(args) as cx:
        cx.attest(args.refs, args.outcome)
        states = {ref: cx.salience_state(ref) for ref in dict.fromkeys(args.refs)}
    rows = [(ref, s.accesses, s.citations, s.failures) for ref, s in states.items()]
    _emit(
        args,
        {
            "outcome": args.outcome.label,
            "memories": [{"ref": ref, **to_plain(s)} for ref, s in states.items()],
        },
        [
            f"attested {len(states)} memories: {args.outcome.label}",
            *_table(["memory", "accesses", "citations", "failures"], rows),
        ],
    )
    return 0


# ---------------------------------------------------------------------------------------------
# Edges


def _edge_json(e: Any) -> dict[str, Any]:
    out: dict[str, Any] = to_plain(e)
    return out


def _edge_rows(edges: Sequence[Any]) -> list[str]:
    rows = [
        (str(e.src), e.type.label, str(e.dst), _when(e.created_at), _when(e.removed_at) or "")
        for e in edges
    ]
    return _table(["src", "type", "dst", "created", "removed"], rows) if rows else ["no edges"]


def _edges_args(p: argparse.ArgumentParser) -> None:
    _id_arg(p)
    p.add_argument(
        "--direction", choices=("out", "in", "both"), default="both", help="default both"
    )
    p.add_argument(
        "--type", action="append", type=_enum_arg(EdgeType), help="only this type (repeatable)"
    )
    p.add_argument("--include-removed", action="store_true", help="also softly removed edges")


@_command("edges", _edges_args)
def cmd_edges(args: argparse.Namespace) -> int:
    """The edges of a memory: outgoing, incoming or both, optionally of some types."""
    with _open(args, readonly=True) as cx:
        edges = cx.edges(
            args.ref,
            direction=args.direction,
            types=args.type,
            include_removed=args.include_removed,
        )
    _emit(args, [_edge_json(e) for e in edges], _edge_rows(edges))
    return 0


def _edge_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("src", metavar="SRC", help="the source memory (id or URI)")
    p.add_argument("type", type=_enum_arg(EdgeType), metavar="TYPE", help=EdgeType.labels())
    p.add_argument("dst", metavar="DST", help="the destination memory (id or URI)")


def _edge_add_args(p: argparse.ArgumentParser) -> None:
    _edge_args(p)
    p.add_argument("--weight", type=float, help="0..1")


@_command("edge add", _edge_add_args)
def cmd_edge_add(args: argparse.Namespace) -> int:
    """Link SRC to DST with an edge of TYPE (adding a live edge again changes nothing)."""
    with _open(args) as cx:
        edge = cx.add_edge(args.src, args.type, args.dst, weight=args.weight)
    _emit(args, _edge_json(edge), _edge_rows([edge]))
    return 0


@_command("edge remove", _edge_args)
def cmd_edge_remove(args: argparse.Namespace) -> int:
    """Softly remove an edge: it stays, marked removed (see edges --include-removed)."""
    with _open(args) as cx:
        edge = cx.remove_edge(args.src, args.type, args.dst)
    _emit(args, _edge_json(edge), _edge_rows([edge]))
    return 0


# ---------------------------------------------------------------------------------------------
# Journal and verify


def _log_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", "--tail", type=int, default=20, metavar="N", help="the last N (20)")
    p.add_argument("--from", dest="start", type=int, metavar="SEQ", help="from this entry on")
    p.add_argument("--to", dest="end", type=int, metavar="SEQ", help="up to this entry")
    p.add_argument(
        "--kind", action="append", type=_enum_arg(JournalKind), help="only this kind (repeatable)"
    )
    p.add_argument("--follow", action="store_true", help="keep printing new entries (Ctrl-C)")
    p.add_argument("--interval", type=float, default=0.5, help="seconds between polls (0.5)")


def _entry_line(e: JournalEntry) -> str:
    if e.edge is not None:
        what = f"{e.id} {e.edge.label} {e.dst}"
    elif e.id is not None and e.type is None:  # an episode (format 7)
        what = f"ep/{e.id}"
    elif e.id is not None:
        what = f"{e.type.type_name if e.type else ''}/{e.id}#{e.version}"
    else:
        what = ""
    extra = f" [{', '.join(e.fields)}]" if e.fields else ""
    extra += f" ({e.reason})" if e.reason else ""
    return f"{e.seq:>6}  {_when(e.at)}  {e.by:<12} {e.kind.label:<12} {what}{extra}"


def _print_entries(args: argparse.Namespace, entries: Sequence[JournalEntry]) -> None:
    for e in entries:
        if args.json:
            print(json.dumps(to_plain(e), ensure_ascii=False))
        else:
            print(_entry_line(e))
    sys.stdout.flush()


def _pause(seconds: float) -> None:
    """Wait between polls of ``log --follow`` (a seam for tests)."""
    time.sleep(seconds)


@_command("log", _log_args)
def cmd_log(args: argparse.Namespace) -> int:
    """The journal: the last N entries, a range, or --follow; with --json one object per line."""
    kinds = set(args.kind or ())
    for name, value in (("--from", args.start), ("--to", args.end)):
        if value is not None:
            argcheck.integer(value, name, 0, 2**64 - 1)  # journal sequence numbers are u64
    argcheck.integer(args.tail, "--tail", 0)
    argcheck.number(args.interval, "--interval", 0.01, 3600.0)

    def wanted(e: JournalEntry) -> bool:
        return not kinds or e.kind in kinds

    with _open(args, readonly=True) as cx:
        if args.start is not None or args.end is not None:
            start = args.start or 1
            limit = None if args.end is None else max(args.end - start + 1, 0)
            entries = [e for e in cx.journal(start, limit=limit) if wanted(e)]
        else:
            entries = []
            cursor = 2**63 - 1
            while len(entries) < args.tail and cursor >= 1:
                chunk = list(cx.journal(cursor, reverse=True, limit=1000))
                if not chunk:
                    break
                entries += [e for e in chunk if wanted(e)]  # newest first
                cursor = chunk[-1].seq - 1
            entries = entries[: args.tail][::-1]
        _print_entries(args, entries)
        if not args.follow:
            return 0
        last = next(cx.journal(2**63 - 1, reverse=True, limit=1), None)
        seen = last.seq if last is not None else 0
        # Ctrl-C sets a flag checked between polls: a KeyboardInterrupt raised inside a read
        # (between taking the store's transaction gate and releasing it) would leave the gate
        # held, and closing the store would then wait for it forever
        stop: list[int] = []
        main_thread = threading.current_thread() is threading.main_thread()
        previous = (
            signal.signal(signal.SIGINT, lambda signum, frame: stop.append(signum))
            if main_thread
            else None
        )
        try:
            while not stop:
                _pause(args.interval)
                if stop:
                    break
                new = list(cx.journal(seen + 1))
                if new:
                    seen = new[-1].seq
                    _print_entries(args, [e for e in new if wanted(e)])
        except KeyboardInterrupt:  # from the pause, or before the handler took over
            pass
        finally:
            if main_thread:
                signal.signal(signal.SIGINT, previous)
        return 0


def _verify_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--erasure",
        action="store_true",
        help="also audit every purge: search every file of the store for what it erased",
    )


@_command("verify", _verify_args)
def cmd_verify(args: argparse.Namespace) -> int:
    """Check the whole store (hashes, heads, indexes, edges, journal); exit 1 if damaged."""
    bar = _Progress("verify")
    audit = None
    try:
        # the erasure audit reads data.mdb under the writer lock: it needs a writable handle
        with _open(args, readonly=not args.erasure, check_pages=False) as cx:
            try:
                report = cx.verify(progress=bar)
            finally:
                bar.close()
            if args.erasure:
                audit = cx.verify_erasure()
    except IntegrityError as exc:  # damage met opening it (a truncated file, a damaged page)
        bar.close()
        _emit(
            args,
            {"ok": False, "problems": [{"record": "data.mdb", "what": _one_line(exc)}]},
            ["DAMAGED: the store cannot be opened", f"  {_one_line(exc)}"],
        )
        return 1
    obj = {
        "ok": report.ok,
        "memories": report.memories,
        "versions": report.versions,
        "index_entries": report.index_entries,
        "edges": report.edges,
        "journal_entries": report.journal_entries,
        "episodes": report.episodes,
        "problems": [{"record": p.record, "what": p.what} for p in report.problems],
    }
    head = (
        f"{'ok' if report.ok else 'DAMAGED'}: {report.memories} memories, {report.versions} "
        f"versions, {report.index_entries} index entries, {report.edges} edges, "
        f"{report.journal_entries} journal entries"
        + (f", {report.episodes} episodes" if report.episodes else "")
    )
    lines = [head]
    if report.problems:
        lines.append(f"{len(report.problems)} problem(s):")
        lines += [f"  {p.record}: {p.what}" for p in report.problems]
    if audit is not None:
        obj["erasure"] = to_plain(audit)
        lines += _erasure_lines(audit)
    _emit(args, obj, lines)
    return 0 if report.ok and (audit is None or audit.ok) else 1


def _erasure_lines(audit: ErasureReport) -> list[str]:
    lines = [
        f"erasure {'ok' if audit.ok else 'FAILED'}: {audit.records} erasure records, "
        f"{audit.needles} needles, {len(audit.files)} files ({_size(audit.scanned)}) scanned "
        f"in {audit.seconds:.2f} s: {len(audit.residues)} residues, {len(audit.shared)} "
        "matches shared with live records"
    ]
    if not audit.files_searched:
        lines.append(
            "  the records were checked; the files are the PostgreSQL server's and were not "
            "searched (specs/storage.md section 11)"
        )
    for r in audit.residues[:20]:
        lines.append(f"  residue of {r.id} (er/{r.seq}) in {r.file} at {r.offset} ({r.region})")
    if len(audit.residues) > 20:
        lines.append(f"  ... and {len(audit.residues) - 20} more")
    lines += [f"  {record}: {what}" for record, what in audit.problems]
    if audit.unscrubbed or audit.stale_separators:
        lines.append(
            f"  not yet scrubbed: {_size(audit.unscrubbed)} of unused bytes and "
            f"{audit.stale_separators} stale separators, written since the last scrub "
            "(`cortex scrub` clears them)"
        )
    return lines


# ---------------------------------------------------------------------------------------------
# Moving stores


def _export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--format",
        choices=("jsonl", "cbor"),
        help="jsonl (readable) or cbor (bit-exact records); default from the file name",
    )
    p.add_argument(
        "--include-confidential",
        action="store_true",
        help="let confidential memories and episodes leave too (journalled); restricted ones "
        "never leave",
    )
    p.add_argument("file", metavar="FILE", help="the bundle to write (replaced if it exists)")


def _ingest_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="the content (UTF-8 text); - reads stdin")
    p.add_argument("--source", default="upload", help="the entry point (default: upload)")
    p.add_argument("--channel", help="the sub-source: thread, repository, session id")
    p.add_argument("--label", action="append", help="a label (repeat for more)")
    p.add_argument("--at", type=_time_arg, metavar="TIME", help="when it occurred (default: now)")
    p.add_argument("--media-type", help="e.g. text/markdown (default: by the file's suffix)")
    p.add_argument(
        "--visibility", type=_enum_arg(Visibility), help="private (default), scoped, actor_public"
    )
    _sensitivity_option(p, "episode")


@_command("ingest", _ingest_args)
def cmd_ingest(args: argparse.Namespace) -> int:
    """Keep a file (or stdin) verbatim as an episode, chunked for search (no extraction)."""
    try:
        raw = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    except OSError as exc:
        raise CortexError(f"cannot read {args.file}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(
            "content", "utf8", f"{args.file} is not UTF-8 text (byte {exc.start})"
        ) from None
    media = args.media_type
    if media is None and args.file.endswith((".md", ".markdown")):
        media = "text/markdown"
    with _open(args) as cx:
        res = cx.ingest(
            text,
            occurred_at=args.at,
            source=args.source,
            channel=args.channel,
            labels=args.label or (),
            visibility=args.visibility or Visibility.PRIVATE,
            media_type=media,
            sensitivity=args.sensitivity,
        )
    ep = res.episode
    _emit(
        args,
        _episode_json(ep),
        f"episode {ep.id}: {_size(len(ep.content or b''))}, {len(ep.chunks)} chunks, "
        f"sha256 {ep.hash.hex()[:16]}…",
    )
    return 0


def _episode_json(ep: Episode) -> dict[str, Any]:
    obj: dict[str, Any] = {k: v for k, v in to_plain(ep).items() if k != "content"}
    obj["bytes"] = len(ep.content) if ep.content is not None else None
    return obj


def _episodes_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", nargs="?", metavar="ID", help="show one episode (its text with --text)")
    p.add_argument("--source", help="only this source")
    p.add_argument("--channel", help="only this channel")
    p.add_argument("--label", help="only episodes with this label")
    p.add_argument("-n", "--limit", type=int, default=20, help="how many (default 20)")
    p.add_argument("--text", action="store_true", help="print the episode's text")
    p.add_argument(
        "--set-sensitivity",
        type=_enum_arg(Sensitivity),
        metavar="LEVEL",
        help=f"change the episode's sensitivity ({Sensitivity.labels()}); needs ID",
    )


@_command("episodes", _episodes_args)
def cmd_episodes(args: argparse.Namespace) -> int:
    """List episodes, newest first, or show one (with --text, its verbatim text)."""
    if args.set_sensitivity is not None and args.id is None:
        raise ValidationError("id", "required", "--set-sensitivity changes one episode: give ID")
    with _open(args, readonly=args.set_sensitivity is None) as cx:
        if args.id is not None:
            if args.set_sensitivity is not None:
                cx.set_episode_sensitivity(args.id, args.set_sensitivity)
            ep = cx.episode(args.id)
            drawn = cx.memories_from(ep.id)
            level = cx.episode_sensitivity(ep.id)
            if args.text:
                text = episode_text(ep)
                if text is None:
                    raise NotFoundError(f"episode {ep.id} was purged: its text is gone")
                sys.stdout.write(text)
                return 0
            obj = {
                **_episode_json(ep),
                "sensitivity": level.label,
                "memories": [str(u) for u in drawn],
            }
            lines = [
                f"episode     {ep.id}",
                f"occurred    {_when(ep.occurred_at)}   stored {_when(ep.created_at)} by "
                f"{ep.created_by}",
                f"source      {ep.source}{' / ' + ep.channel if ep.channel else ''}",
                f"size        {_size(len(ep.content)) if ep.content is not None else '(purged)'}"
                f", {len(ep.chunks)} chunks, sha256 {ep.hash.hex()}",
            ]
            if ep.labels:
                lines.append(f"labels      {', '.join(ep.labels)}")
            lines.append(f"sensitivity {level.label}")
            lines += [f"memory      {u}" for u in drawn]
            _emit(args, obj, lines)
            return 0
        eps = cx.episodes(
            limit=args.limit, source=args.source, channel=args.channel, label=args.label
        )
    rows = []
    for ep in eps:
        text = episode_text(ep)
        first = " ".join((text or "(purged)").split())[:60]
        rows.append(f"{ep.id}  {_when(ep.occurred_at)}  {ep.source:<8} {first}")
    _emit(args, [_episode_json(ep) for ep in eps], rows or ["no episodes"])
    return 0


@_command("export", _export_args)
def cmd_export(args: argparse.Namespace) -> int:
    """Write every memory (all versions) and edge to one bundle (specs/export.md)."""
    encoding: Literal["jsonl", "cbor"] = args.format or (
        "cbor" if args.file.endswith(".cbor") else "jsonl"
    )
    bar = _Progress("export")
    # an export with confidential records is journalled: only that one opens writable
    with _open(args, readonly=not args.include_confidential, check_pages=False) as cx:
        try:
            report = export_store(
                cx,
                args.file,
                encoding=encoding,
                progress=bar,
                include_confidential=args.include_confidential,
            )
        finally:
            bar.close()
    lines = [
        f"{report.path}: {report.memories} memories, {report.versions} versions, "
        f"{report.edges} edges ({report.encoding}, {_size(report.bytes)}, sha256 "
        f"{report.sha256[:16]}…)"
    ]
    if report.confidential:
        lines.append(f"included {report.confidential} confidential (recorded in the journal)")
    if report.withheld:
        lines.append(
            f"withheld {report.withheld} restricted"
            f"{'' if args.include_confidential else ' or confidential'} memories and episodes "
            "(and their edges)"
        )
    _emit(args, to_plain(report), lines)
    return 0


def _import_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="a bundle written by export (either format)")


@_command("import", _import_args)
def cmd_import(args: argparse.Namespace) -> int:
    """Import a bundle, all or nothing, verifying every hash (creates the store if needed)."""
    bar = _Progress("verify", unit="bytes")
    with _new_or_existing(args) as cx:
        try:
            report = import_bundle(cx, args.file, progress=bar)
        finally:
            bar.close()
    _emit(
        args,
        to_plain(report),
        f"imported {report.memories_added} memories ({report.versions_added} versions) and "
        f"{report.edges_added} edges; {report.memories_unchanged} memories and "
        f"{report.edges_unchanged} edges were already there",
    )
    return 0


def _backup_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("dest", metavar="DEST", help="a new directory for the copy")


@_command("backup", _backup_args)
def cmd_backup(args: argparse.Namespace) -> int:
    """Copy the store (consistent and compacted, writers may continue), then verify the copy."""
    with _open(args, readonly=True, check_pages=False) as cx:
        report = cx.backup(args.dest)
    # a backup that does not verify is removed (Store.backup): no damaged copy is left
    size = sum(_files(args.dest).values()) if report.ok else 0
    obj = {
        "dest": args.dest,
        "bytes": size,
        "ok": report.ok,
        "kept": report.ok,
        "memories": report.memories,
        "versions": report.versions,
        "problems": [{"record": p.record, "what": p.what} for p in report.problems],
    }
    lines = (
        [
            f"{args.dest}: {_size(size)}, {report.memories} memories, {report.versions} "
            "versions; verify ok"
        ]
        if report.ok
        else [
            f"backup FAILED: the store does not verify, so no copy was kept at {args.dest}; "
            "`cortex salvage` copies what is intact into a new store"
        ]
    )
    lines += [f"  {p.record}: {p.what}" for p in report.problems]
    _emit(args, obj, lines)
    return 0 if report.ok else 1


def _copy_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("src", metavar="SRC", help="the store to copy: a directory or a URL")
    p.add_argument(
        "dst", metavar="DST", help="a new directory, or a URL naming an absent or empty store"
    )


@_command("copy", _copy_args)
def cmd_copy(args: argparse.Namespace) -> int:
    """Copy a store between LMDB and PostgreSQL (either way), all or nothing, then verify it.

    Every record is copied from one read snapshot of SRC and read back; then the bundles of both
    stores (every sensitivity level, digested in memory: nothing is written) must be byte for
    byte the same.
    """
    if not store_exists(args.src):
        raise CortexError(f"no store at {args.src}")
    if store_exists(args.dst) and not is_url(args.dst):
        raise CortexError(f"{args.dst} exists; a copy goes into a new directory")
    bar = _Progress("copy")
    src = open_kv(args.src, readonly=True, create=False)
    try:
        report = copy_kv(src, args.dst, progress=bar)
    finally:
        src.close()
        bar.close()
    digests = []
    for where in (args.src, args.dst):
        with Cortex.open(where, actor=None, readonly=True, create=False) as cx:
            digests.append(export_digest(cx))  # every level: nothing leaves the process
    if digests[0] != digests[1]:
        raise CortexError(
            f"the exports of {args.src} and {args.dst} differ; the copy is not faithful: "
            "remove it and copy again"
        )
    obj = {
        "src": args.src,
        "dst": args.dst,
        "records": report.records,
        "bytes": report.bytes,
        "export_sha256": digests[0],
    }
    _emit(
        args,
        obj,
        f"{args.dst}: {report.records} records ({_size(report.bytes)}) copied from {args.src}; "
        f"exports identical (sha256 {digests[0][:16]}…)",
    )
    return 0


# ---------------------------------------------------------------------------------------------
# Upgrading and repairing


def _existing_store(args: argparse.Namespace) -> str:
    """The store's path, for commands that open it without ``Cortex.open`` (its format check)."""
    path = _store_path(args)
    if not store_exists(path):
        raise CortexError(f"no store at {path}; create one with `cortex --store {path} init`")
    return path


class _StepBars:
    """One progress bar per migration step, as ``migrate`` reports ``(step, done, total)``."""

    def __init__(self) -> None:
        self.bar: _Progress | None = None

    def __call__(self, step: str, done: int, total: int) -> None:
        if self.bar is None or self.bar.label != step:
            self.close()
            self.bar = _Progress(step)
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
    return [head, *_table(["migration", "format", "records", "what"], rows)]


@_command("migrate", _migrate_args)
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
            raise _UsageError("--list takes neither --dry-run nor --to")
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
        _emit(args, {**_migration_json(planned), "dry_run": args.dry_run}, text)
        return 0
    if args.dry_run:
        _emit(args, _migration_json(planned), [*_plan_lines(planned), "dry run: nothing written"])
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
    _emit(args, _migration_json(report), lines)
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
            state, status = "applied", f"applied {_when(a.at)} by {a.by} ({a.records} records)"
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
    lines += _table(["migration", "format", "status", "what"], rows)
    _emit(args, obj, lines)
    return 0


def _reindex_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--lexical", action="store_true", help="rebuild the lexical (BM25) index (the default)"
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


@_command("reindex", _reindex_args)
def cmd_reindex(args: argparse.Namespace) -> int:
    """Rebuild an index from the records: the lexical index (the default) or the vectors.

    Indexes are derived data; this repairs one that `cortex verify` reports damaged. Memories
    and edges are not changed. The lexical rebuild is not journalled; re-embedding writes one
    `embed` journal entry per memory (the vectors are stored records).
    """
    if args.model is not None and not args.vectors:
        raise _UsageError("--model goes with --vectors")
    if args.vectors:
        return _reindex_vectors(args)
    bar = _Progress("lexical")
    with _open(args) as cx:
        try:
            n = cx.reindex_lexical(progress=bar)
        finally:
            bar.close()
        path = cx.path
    _emit(
        args,
        {"path": path, "lexical": n},
        f"{path}: lexical index rebuilt from {n} live memories",
    )
    return 0


def _reindex_vectors(args: argparse.Namespace) -> int:
    path = _store_path(args)
    if not store_exists(path):
        raise CortexError(f"no store at {path}; create one with `cortex --store {path} init`")
    embedder: Any = embedder_for(args.model) if args.model else "auto"
    bar = _Progress("embedding")
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
    _emit(
        args,
        {"path": path, "vectors": n, "model": model},
        f"{path}: {n} live memories embedded with {model}",
    )
    return 0


def _salvage_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("damaged", metavar="DAMAGED", help="the damaged store's directory (only read)")
    p.add_argument("new", metavar="NEW", help="a new directory for the recovered store")


@_command("salvage", _salvage_args)
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
        lines += _table(
            ["kind", "id", "type", "why", "named in"],
            [(x.kind, x.id, x.type or "", x.why, ", ".join(x.seen_in)) for x in report.lost],
        )
    else:
        lines.append("nothing lost")
    lines += [f"note: {n}" for n in report.notes]
    _emit(args, obj, lines)
    return 0 if report.verify_ok else 1


# ---------------------------------------------------------------------------------------------
# The MCP server (cortex.serve)


def _tokens_path(args: argparse.Namespace) -> Path:
    given = getattr(args, "tokens", None) or os.environ.get("CORTEX_TOKENS")
    return Path(given) if given else Path(_store_path(args)) / "mcp-tokens.json"


def _budget_arg(text: str) -> int | None:
    if text in ("none", "off"):
        return None
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count >= 0 or 'none'")
    return n


def _scopes(args: argparse.Namespace) -> tuple[Any, ...]:
    from cortex.serve.tokens import scope_from_json

    return tuple(
        scope_from_json(_json_arg(text, f"scope[{i}]"), f"scope[{i}]")
        for i, text in enumerate(args.scope or ())
    )


def _serve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--http", action="store_true", help="serve streamable HTTP (default: stdio)")
    p.add_argument("--host", default="127.0.0.1", help="HTTP address (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="HTTP port (default: 8765)")
    p.add_argument(
        "--tokens",
        metavar="FILE",
        help="HTTP bearer-token file (or CORTEX_TOKENS; default: STORE/mcp-tokens.json)",
    )
    p.add_argument(
        "--init-tokens",
        action="store_true",
        help="create the token file with an owner token (printed once on stderr), then serve",
    )
    p.add_argument(
        "--write-budget",
        type=_budget_arg,
        default=50,
        metavar="N",
        help="writes per session (task) unless a token says otherwise; 'none': no limit "
        "(default: 50)",
    )
    p.add_argument(
        "--scope",
        action="append",
        metavar="JSON",
        help='stdio: a scope of the acting name, e.g. \'{"tags": ["shared"], '
        '"writable": true}\' (repeat for more)',
    )
    p.add_argument(
        "--clearance",
        type=_enum_arg(Sensitivity),
        help="stdio: the most sensitive level the acting name sees and may set "
        f"({Sensitivity.labels()}; default internal; the owner sees every level)",
    )


@_command("serve", _serve_args)
def cmd_serve(args: argparse.Namespace) -> int:
    """Serve the store's memory tools over MCP: stdio (one client), or HTTP with tokens."""
    from cortex.serve.tokens import TokenFile
    from cortex.serve.tools import Identity

    try:
        from cortex.serve.server import serve_http, serve_stdio
    except ImportError as exc:
        raise CortexError(
            f"cortex serve needs the MCP SDK ({exc.name} is missing): "
            "pip install 'cortex-store[mcp]'"
        ) from None
    path = _store_path(args)
    if not (Path(path) / "data.mdb").exists():
        raise CortexError(f"no store at {path}; create one with `cortex --store {path} init`")
    if args.http and (args.scope or args.clearance is not None):
        raise _UsageError(
            "--scope and --clearance are for stdio; over HTTP each token carries its own"
        )
    tokens = TokenFile(_tokens_path(args))
    with Cortex.open(path, actor=None, create=False, embedder=_embedder(args)) as cx:
        if args.init_tokens:
            if tokens.exists():
                raise CortexError(
                    f"{tokens.path} exists: rotate a token with `cortex tokens rotate NAME`"
                )
            token = tokens.add("owner", cx.owner)
            print(
                f"cortex: created {tokens.path} with token 'owner' (acts as {cx.owner}); "
                f"it is shown only now:\n{token}",
                file=sys.stderr,
            )
        if args.http:

            def ready(url: str) -> None:
                print(
                    f"cortex: serving {path} at {url} (bearer tokens: {tokens.path})",
                    file=sys.stderr,
                    flush=True,
                )

            serve_http(
                cx,
                tokens,
                host=args.host,
                port=args.port,
                write_budget=args.write_budget,
                ready=ready,
            )
            return 0
        actor = args.actor or os.environ.get("CORTEX_ACTOR") or cx.owner
        identity = Identity(
            name="stdio",
            actor=actor,
            scopes=_scopes(args),
            clearance=args.clearance or Sensitivity.INTERNAL,
        )
        if identity.scopes and actor == cx.owner:
            raise _UsageError("--scope restricts another actor than the owner: pass --actor")
        serve_stdio(cx, identity, write_budget=args.write_budget)
    return 0


def _tokens_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action",
        nargs="?",
        default="list",
        choices=("list", "add", "rotate", "remove"),
        help="list (default), add NAME, rotate NAME or remove NAME",
    )
    p.add_argument("name", nargs="?", metavar="NAME", help="the token's name")
    p.add_argument(
        "--for",
        dest="for_actor",
        metavar="ACTOR",
        help="add: the actor the token acts as (default: the store's owner)",
    )
    p.add_argument("--scope", action="append", metavar="JSON", help="add: a scope (repeat)")
    p.add_argument("--write-budget", type=_budget_arg, metavar="N", help="add: writes per session")
    p.add_argument(
        "--clearance",
        type=_enum_arg(Sensitivity),
        help=f"add: the most sensitive level the token sees ({Sensitivity.labels()}; "
        "default internal; the owner sees every level)",
    )
    p.add_argument(
        "--tokens", metavar="FILE", help="the token file (default: STORE/mcp-tokens.json)"
    )


@_command("tokens", _tokens_args)
def cmd_tokens(args: argparse.Namespace) -> int:
    """List, add, rotate or remove the bearer tokens of `cortex serve --http` (hashes only)."""
    from cortex.serve.tokens import TokenFile, scope_to_json

    tokens = TokenFile(_tokens_path(args))
    if args.action == "list":
        entries = tokens.entries() if tokens.exists() else ()
        obj = [
            {
                "name": e.name,
                "actor": e.actor,
                "scopes": [scope_to_json(s) for s in e.scopes],
                "clearance": e.clearance.label,
                "write_budget": e.write_budget,
                "created_at": e.created_at.isoformat(),
            }
            for e in entries
        ]
        rows = [
            [
                e.name,
                e.actor,
                ", ".join(s.name for s in e.scopes) or "-",
                e.clearance.label,
                "default" if e.write_budget is None else e.write_budget,
                _when(e.created_at),
            ]
            for e in entries
        ]
        lines = _table(["name", "actor", "scopes", "clearance", "write budget", "created"], rows)
        _emit(args, obj, lines if entries else f"no tokens in {tokens.path}")
        return 0
    if not args.name:
        raise _UsageError(f"tokens {args.action} needs a NAME")
    if args.action == "remove":
        tokens.remove(args.name)
        _emit(args, {"removed": args.name}, f"removed token {args.name!r}")
        return 0
    if args.action == "rotate":
        token = tokens.rotate(args.name)
    else:
        actor = args.for_actor
        if actor is None:
            with _open(args) as cx:
                actor = cx.owner
        token = tokens.add(
            args.name,
            actor,
            scopes=_scopes(args),
            write_budget=args.write_budget,
            clearance=args.clearance or Sensitivity.INTERNAL,
        )
    _emit(
        args,
        {"name": args.name, "token": token, "file": str(tokens.path)},
        [f"token {args.name!r} (shown only now; {tokens.path} keeps its hash):", token],
    )
    return 0


# ---------------------------------------------------------------------------------------------
# The tour


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


@_command("demo", _demo_args)
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
        rc = main(argv)
    print()
    return rc


# ---------------------------------------------------------------------------------------------
# Parsing and running


def _common() -> argparse.ArgumentParser:
    """Options every command also takes after its name (they default to the global ones)."""
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("common options")
    g.add_argument("--store", default=argparse.SUPPRESS, metavar="PATH", help=argparse.SUPPRESS)
    g.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
    g.add_argument("--actor", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    g.add_argument("--embedder", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return p


def _summary(func: Callable[..., Any]) -> str:
    doc = func.__doc__ or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cortex",
        description="Inspect, change, verify and move a cortex memory store.",
        epilog="The store may also come from CORTEX_STORE, the acting name from CORTEX_ACTOR. "
        "Exit codes: 0 ok, 1 error, 2 usage, 70 internal error (a bug: please report it).",
    )
    p.add_argument("--version", action="version", version=f"cortex {__version__}")
    p.add_argument("--store", metavar="PATH", help="the store directory (or CORTEX_STORE)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument(
        "--actor",
        help="who is acting (or CORTEX_ACTOR; default 'cli')",
    )
    p.add_argument(
        "--embedder",
        metavar="NAME",
        help="vectors: auto (the store's own model, the default), none, hashing, "
        "hashing-v1-<dim>, minilm, minilm-numpy or minilm-onnx (or CORTEX_EMBEDDER)",
    )
    common = _common()
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for cmd in _COMMANDS:
        sp = sub.add_parser(
            cmd.name, parents=[common], help=_summary(cmd.func), description=cmd.func.__doc__
        )
        cmd.configure(sp)
        sp.set_defaults(func=cmd.func)
    edge = sub.add_parser(
        "edge",
        help="add or remove an edge",
        description="Add or softly remove a typed edge between two memories.",
    )
    edge_sub = edge.add_subparsers(dest="edge_command", required=True, metavar="ACTION")
    for cmd in _EDGE_COMMANDS:
        sp = edge_sub.add_parser(
            cmd.name, parents=[common], help=_summary(cmd.func), description=cmd.func.__doc__
        )
        cmd.configure(sp)
        sp.set_defaults(func=cmd.func)
    return p


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit code (0 ok, 1 cortex error, 2 usage, 70 internal error)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        rc: int = args.func(args)
    except _UsageError as exc:
        print(f"cortex: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except CortexError as exc:
        print(f"cortex: {_one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except (KeyboardInterrupt, BrokenPipeError):  # entry() ends quietly on both
        raise
    except OSError as exc:
        print(f"cortex: {_one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:  # a bug: still one line, unless asked for the traceback
        if os.environ.get("CORTEX_DEBUG"):
            raise
        print(
            f"cortex: internal error ({type(exc).__name__}: {_one_line(exc)}); "
            "set CORTEX_DEBUG=1 for the traceback and please report it",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    return rc


def entry() -> None:
    """Console-script entry point."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. `cortex log | head`: the reader left; that is not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing more to flush at exit, and no message
        code = EXIT_OK
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    sys.exit(code)
