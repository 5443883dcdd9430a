"""Commands on edges: edges, edge add, edge remove."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from cortex import (
    EdgeType,
)
from cortex.cli.common import command, emit, enum_arg, fmt_when, open_store, table_lines
from cortex.cli.reads import id_arg
from cortex.model.jsonmap import to_plain


def _edge_json(e: Any) -> dict[str, Any]:
    out: dict[str, Any] = to_plain(e)
    return out


def _edge_rows(edges: Sequence[Any]) -> list[str]:
    rows = [
        (str(e.src), e.type.label, str(e.dst), fmt_when(e.created_at), fmt_when(e.removed_at) or "")
        for e in edges
    ]
    return table_lines(["src", "type", "dst", "created", "removed"], rows) if rows else ["no edges"]


def _edges_args(p: argparse.ArgumentParser) -> None:
    id_arg(p)
    p.add_argument(
        "--direction", choices=("out", "in", "both"), default="both", help="default both"
    )
    p.add_argument(
        "--type", action="append", type=enum_arg(EdgeType), help="only this type (repeatable)"
    )
    p.add_argument("--include-removed", action="store_true", help="also softly removed edges")


@command("edges", _edges_args)
def cmd_edges(args: argparse.Namespace) -> int:
    """The edges of a memory: outgoing, incoming or both, optionally of some types."""
    with open_store(args, readonly=True) as cx:
        edges = cx.edges(
            args.ref,
            direction=args.direction,
            types=args.type,
            include_removed=args.include_removed,
        )
    emit(args, [_edge_json(e) for e in edges], _edge_rows(edges))
    return 0


def _edge_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("src", metavar="SRC", help="the source memory (id or URI)")
    p.add_argument("type", type=enum_arg(EdgeType), metavar="TYPE", help=EdgeType.labels())
    p.add_argument("dst", metavar="DST", help="the destination memory (id or URI)")


def _edge_add_args(p: argparse.ArgumentParser) -> None:
    _edge_args(p)
    p.add_argument("--weight", type=float, help="0..1")


@command("edge add", _edge_add_args)
def cmd_edge_add(args: argparse.Namespace) -> int:
    """Link SRC to DST with an edge of TYPE (adding a live edge again changes nothing)."""
    with open_store(args) as cx:
        edge = cx.add_edge(args.src, args.type, args.dst, weight=args.weight)
    emit(args, _edge_json(edge), _edge_rows([edge]))
    return 0


@command("edge remove", _edge_args)
def cmd_edge_remove(args: argparse.Namespace) -> int:
    """Softly remove an edge: it stays, marked removed (see edges --include-removed)."""
    with open_store(args) as cx:
        edge = cx.remove_edge(args.src, args.type, args.dst)
    emit(args, _edge_json(edge), _edge_rows([edge]))
    return 0
