"""The MCP server (cortex.serve): serve, tokens."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from cortex import (
    Cortex,
    CortexError,
    Sensitivity,
)
from cortex.cli.common import (
    UsageError,
    command,
    emit,
    enum_arg,
    fmt_when,
    json_arg,
    make_embedder,
    open_store,
    store_path,
    table_lines,
)


def _tokens_path(args: argparse.Namespace) -> Path:
    given = getattr(args, "tokens", None) or os.environ.get("CORTEX_TOKENS")
    return Path(given) if given else Path(store_path(args)) / "mcp-tokens.json"


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
        scope_from_json(json_arg(text, f"scope[{i}]"), f"scope[{i}]")
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
        type=enum_arg(Sensitivity),
        help="stdio: the most sensitive level the acting name sees and may set "
        f"({Sensitivity.labels()}; default internal; the owner sees every level)",
    )


@command("serve", _serve_args)
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
    path = store_path(args)
    if not (Path(path) / "data.mdb").exists():
        raise CortexError(f"no store at {path}; create one with `cortex --store {path} init`")
    if args.http and (args.scope or args.clearance is not None):
        raise UsageError(
            "--scope and --clearance are for stdio; over HTTP each token carries its own"
        )
    tokens = TokenFile(_tokens_path(args))
    with Cortex.open(path, actor=None, create=False, embedder=make_embedder(args)) as cx:
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
            raise UsageError("--scope restricts another actor than the owner: pass --actor")
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
        type=enum_arg(Sensitivity),
        help=f"add: the most sensitive level the token sees ({Sensitivity.labels()}; "
        "default internal; the owner sees every level)",
    )
    p.add_argument(
        "--tokens", metavar="FILE", help="the token file (default: STORE/mcp-tokens.json)"
    )


@command("tokens", _tokens_args)
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
                fmt_when(e.created_at),
            ]
            for e in entries
        ]
        lines = table_lines(
            ["name", "actor", "scopes", "clearance", "write budget", "created"], rows
        )
        emit(args, obj, lines if entries else f"no tokens in {tokens.path}")
        return 0
    if not args.name:
        raise UsageError(f"tokens {args.action} needs a NAME")
    if args.action == "remove":
        tokens.remove(args.name)
        emit(args, {"removed": args.name}, f"removed token {args.name!r}")
        return 0
    if args.action == "rotate":
        token = tokens.rotate(args.name)
    else:
        actor = args.for_actor
        if actor is None:
            with open_store(args) as cx:
                actor = cx.owner
        token = tokens.add(
            args.name,
            actor,
            scopes=_scopes(args),
            write_budget=args.write_budget,
            clearance=args.clearance or Sensitivity.INTERNAL,
        )
    emit(
        args,
        {"name": args.name, "token": token, "file": str(tokens.path)},
        [f"token {args.name!r} (shown only now; {tokens.path} keeps its hash):", token],
    )
    return 0
