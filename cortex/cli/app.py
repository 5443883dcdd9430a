"""Parsing and running: the parser built from the command table, ``main`` and ``entry``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from cortex import (
    CortexError,
    __version__,
)
from cortex.cli import demo, edges, find, journal, moving, reads, repair, serve, store, writes  # noqa: F401  (each registers its commands)
from cortex.cli.common import (
    COMMANDS,
    EDGE_COMMANDS,
    EXIT_ERROR,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    one_line,
)


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
    p.add_argument(
        "--vector-precision",
        choices=("float16", "float32"),
        help="the element type a new store keeps its vectors in (default float16; recorded "
        "with its model; another one needs `cortex reindex --vectors`)",
    )
    common = _common()
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for cmd in COMMANDS:
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
    for cmd in EDGE_COMMANDS:
        sp = edge_sub.add_parser(
            cmd.name, parents=[common], help=_summary(cmd.func), description=cmd.func.__doc__
        )
        cmd.configure(sp)
        sp.set_defaults(func=cmd.func)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit code (0 ok, 1 cortex error, 2 usage, 70 internal error)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        rc: int = args.func(args)
    except UsageError as exc:
        print(f"cortex: {one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except CortexError as exc:
        print(f"cortex: {one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except (KeyboardInterrupt, BrokenPipeError):  # entry() ends quietly on both
        raise
    except OSError as exc:
        print(f"cortex: {one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:  # a bug: still one line, unless asked for the traceback
        if os.environ.get("CORTEX_DEBUG"):
            raise
        print(
            f"cortex: internal error ({type(exc).__name__}: {one_line(exc)}); "
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
