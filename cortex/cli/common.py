"""What every command shares: the command table, argument parsers, output, opening the store."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from cortex import (
    Cortex,
    CortexError,
    FrameRef,
    MemoryType,
    ObjKind,
    ValidationError,
    Verb,
)
from cortex.index.embed import embedder_for
from cortex.model.enums import CodedEnum
from cortex.model.forms import format_time
from cortex.model.jsonmap import loads, parse_time
from cortex.storage.engines import exists as store_exists
from cortex.storage.engines import is_url

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


COMMANDS: list[_Command] = []
EDGE_COMMANDS: list[_Command] = []


def command(
    name: str, configure: Callable[[argparse.ArgumentParser], None] = lambda p: None
) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    """Register ``func`` as ``cortex NAME`` (``edge NAME`` when the name starts with ``edge ``)."""

    def register(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        table = EDGE_COMMANDS if name.startswith("edge ") else COMMANDS
        table.append(_Command(name.removeprefix("edge "), func, configure))
        return func

    return register


class UsageError(Exception):
    """Bad invocation found after parsing (exit 2)."""


# ---------------------------------------------------------------------------------------------
# Arguments


def enum_arg(cls: type[E]) -> Callable[[str], E]:
    """An argparse type for a coded enum, by its label."""

    def parse(text: str) -> E:
        m = cls.coerce(text)
        if m is None:
            raise argparse.ArgumentTypeError(f"{text!r} is not one of {cls.labels()}")
        return m

    parse.__name__ = cls.__name__
    return parse


def time_arg(text: str) -> datetime:
    """An argparse type for an ISO-8601 time."""
    if text == "now":
        return datetime.now(UTC)
    try:
        return parse_time(text, "time")
    except ValidationError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


def frame_arg(text: str) -> FrameRef:
    """An argparse type for a frame reference."""
    parts = text.split(":", 2)
    if len(parts) != 3 or not parts[2]:
        raise argparse.ArgumentTypeError(f"{text!r} is not VERB:KIND:REF, e.g. find:knowledge:ada")
    verb, kind = Verb.coerce(parts[0]), ObjKind.coerce(parts[1])
    if verb is None:
        raise argparse.ArgumentTypeError(f"verb {parts[0]!r} is not one of {Verb.labels()}")
    if kind is None:
        raise argparse.ArgumentTypeError(f"kind {parts[1]!r} is not one of {ObjKind.labels()}")
    return FrameRef(verb=verb, obj_kind=kind, obj_ref=parts[2])


def type_arg(text: str) -> MemoryType:
    """An argparse type for a memory type, by name."""
    m = MemoryType.from_name(text.capitalize())
    if m is None:
        names = ", ".join(t.type_name for t in MemoryType)
        raise argparse.ArgumentTypeError(f"{text!r} is not a memory type ({names})")
    return m


def json_arg(text: str, field: str) -> Any:
    """JSON given inline, as ``@FILE``, or as ``-`` (standard input)."""
    if text == "-":
        text = sys.stdin.read()
    elif text.startswith("@"):
        try:
            text = Path(text[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise CortexError(f"cannot read {text[1:]}: {exc}") from exc
    return loads(text, field)  # nesting bounded (MAX_DEPTH), errors as ValidationError


def store_path(args: argparse.Namespace) -> str:
    """The store from ``--store`` or ``CORTEX_STORE``."""
    path: str | None = args.store or os.environ.get("CORTEX_STORE")
    if not path:
        raise UsageError("no store given: pass --store PATH or set CORTEX_STORE")
    return path


@contextmanager
def open_store(
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
    path = store_path(args)
    if not create and not store_exists(path):
        raise CortexError(f"no store at {path}; create one with `cortex --store {path} init`")
    actor = args.actor or os.environ.get("CORTEX_ACTOR") or "cli"
    # the CLI administers the store: it reads as the owner unless a command passes a reader
    with Cortex.open(
        path,
        actor=actor,
        create=create,
        readonly=readonly,
        embedder=make_embedder(args),
        as_owner=True,
        check_pages=check_pages,
        vector_precision=precision_of(args),
    ) as cx:
        yield cx


@contextmanager
def new_or_existing(args: argparse.Namespace) -> Iterator[Cortex]:
    """The store of ``--store``, created if missing, but only if the block succeeds.

    A new store is built in a hidden directory beside the path and moved into place when the
    block returns; when it raises, the hidden directory goes and nothing is left at the path.
    """
    target = store_path(args)
    if is_url(target) or store_exists(target):  # a server's store: its import is one transaction
        with open_store(args, create=True) as cx:
            yield cx
        return
    path = Path(target)
    if path.exists() and not path.is_dir():
        raise CortexError(f"{path} is a file, not a store directory")
    tmp = path.parent / f".{path.name}.new-{os.getpid()}"
    actor = args.actor or os.environ.get("CORTEX_ACTOR") or "cli"
    try:
        with Cortex.open(
            tmp,
            actor=actor,
            embedder=make_embedder(args),
            as_owner=True,
            vector_precision=precision_of(args),
        ) as cx:
            yield cx
        if path.exists():  # an empty directory the user made: the store's files go into it
            for item in tmp.iterdir():
                item.rename(path / item.name)
            tmp.rmdir()
        else:
            tmp.rename(path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def precision_of(args: argparse.Namespace) -> Any:
    """``--vector-precision`` (``Cortex.open``'s ``vector_precision``; ``None``: the store's)."""
    return getattr(args, "vector_precision", None)


def make_embedder(args: argparse.Namespace) -> Any:
    """The embedder the store is opened with: ``auto`` (default) picks the store's own model."""
    name = getattr(args, "embedder", None) or os.environ.get("CORTEX_EMBEDDER") or "auto"
    if name == "auto":
        return "auto"
    if name == "none":
        return None
    return embedder_for(name)


# ---------------------------------------------------------------------------------------------
# Output


def emit(args: argparse.Namespace, obj: Any, lines: Sequence[str] | str) -> None:
    """Print ``obj`` as JSON with ``--json``, otherwise the readable ``lines``."""
    if args.json:
        print(json.dumps(obj, ensure_ascii=False, indent=2))
    else:
        print(lines if isinstance(lines, str) else "\n".join(lines))


def table_lines(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """Rows under headers, in aligned columns."""
    cells = [[str(c) for c in headers], *[["" if c is None else str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]


def fmt_when(t: datetime | None) -> str:
    """A time as the CLI prints it (empty for none)."""
    return "" if t is None else format_time(t)


def fmt_size(n: int) -> str:
    """A byte count in human units."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover - the loop always returns


class Progress:
    """A progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, label: str, unit: str = "") -> None:
        self.label = label
        self.unit = unit
        self.on = sys.stderr.isatty()
        self.drawn = 0.0

    def __call__(self, done: int, total: int) -> None:
        """Show ``done`` of ``total``."""
        now = time.monotonic()
        if not self.on or (done < total and now - self.drawn < 0.1):
            return
        self.drawn = now
        frac = done / total if total else 1.0
        bar = "#" * int(frac * 30)
        amount = (
            f"{fmt_size(done)}/{fmt_size(total)}" if self.unit == "bytes" else f"{done}/{total}"
        )
        sys.stderr.write(f"\r{self.label} [{bar:<30}] {frac:4.0%} {amount}")
        sys.stderr.flush()

    def close(self) -> None:
        """End the bar's line."""
        if self.on and self.drawn:
            sys.stderr.write("\n")


def one_line(exc: BaseException) -> str:
    """An exception's message on one line."""
    return " ".join(str(exc).split()) or type(exc).__name__
