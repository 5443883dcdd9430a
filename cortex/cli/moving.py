"""Commands that move content in and out: ingest, episodes, export, import, backup, copy."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Literal

from cortex import (
    Cortex,
    CortexError,
    NotFoundError,
    Sensitivity,
    ValidationError,
    Visibility,
    export_digest,
    export_store,
    import_bundle,
)
from cortex.cli.common import (
    Progress,
    command,
    emit,
    enum_arg,
    fmt_size,
    fmt_when,
    new_or_existing,
    open_store,
    time_arg,
)
from cortex.cli.store import store_files
from cortex.cli.writes import sensitivity_option
from cortex.model.episode import episode_text
from cortex.model.jsonmap import to_plain
from cortex.model.records import Episode
from cortex.storage.engines import copy_kv, is_url, open_kv
from cortex.storage.engines import exists as store_exists


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
    p.add_argument("--at", type=time_arg, metavar="TIME", help="when it occurred (default: now)")
    p.add_argument("--media-type", help="e.g. text/markdown (default: by the file's suffix)")
    p.add_argument(
        "--visibility", type=enum_arg(Visibility), help="private (default), scoped, actor_public"
    )
    sensitivity_option(p, "episode")


@command("ingest", _ingest_args)
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
    with open_store(args) as cx:
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
    emit(
        args,
        _episode_json(ep),
        f"episode {ep.id}: {fmt_size(len(ep.content or b''))}, {len(ep.chunks)} chunks, "
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
        type=enum_arg(Sensitivity),
        metavar="LEVEL",
        help=f"change the episode's sensitivity ({Sensitivity.labels()}); needs ID",
    )


@command("episodes", _episodes_args)
def cmd_episodes(args: argparse.Namespace) -> int:
    """List episodes, newest first, or show one (with --text, its verbatim text)."""
    if args.set_sensitivity is not None and args.id is None:
        raise ValidationError("id", "required", "--set-sensitivity changes one episode: give ID")
    with open_store(args, readonly=args.set_sensitivity is None) as cx:
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
                f"occurred    {fmt_when(ep.occurred_at)}   stored {fmt_when(ep.created_at)} by "
                f"{ep.created_by}",
                f"source      {ep.source}{' / ' + ep.channel if ep.channel else ''}",
                f"size        {fmt_size(len(ep.content)) if ep.content is not None else '(purged)'}"
                f", {len(ep.chunks)} chunks, sha256 {ep.hash.hex()}",
            ]
            if ep.labels:
                lines.append(f"labels      {', '.join(ep.labels)}")
            lines.append(f"sensitivity {level.label}")
            lines += [f"memory      {u}" for u in drawn]
            emit(args, obj, lines)
            return 0
        eps = cx.episodes(
            limit=args.limit, source=args.source, channel=args.channel, label=args.label
        )
    rows = []
    for ep in eps:
        text = episode_text(ep)
        first = " ".join((text or "(purged)").split())[:60]
        rows.append(f"{ep.id}  {fmt_when(ep.occurred_at)}  {ep.source:<8} {first}")
    emit(args, [_episode_json(ep) for ep in eps], rows or ["no episodes"])
    return 0


@command("export", _export_args)
def cmd_export(args: argparse.Namespace) -> int:
    """Write every memory (all versions) and edge to one bundle (specs/export.md)."""
    encoding: Literal["jsonl", "cbor"] = args.format or (
        "cbor" if args.file.endswith(".cbor") else "jsonl"
    )
    bar = Progress("export")
    # an export with confidential records is journalled: only that one opens writable
    with open_store(args, readonly=not args.include_confidential, check_pages=False) as cx:
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
        f"{report.edges} edges ({report.encoding}, {fmt_size(report.bytes)}, sha256 "
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
    emit(args, to_plain(report), lines)
    return 0


def _import_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="a bundle written by export (either format)")


@command("import", _import_args)
def cmd_import(args: argparse.Namespace) -> int:
    """Import a bundle, all or nothing, verifying every hash (creates the store if needed)."""
    bar = Progress("verify", unit="bytes")
    with new_or_existing(args) as cx:
        try:
            report = import_bundle(cx, args.file, progress=bar)
        finally:
            bar.close()
    emit(
        args,
        to_plain(report),
        f"imported {report.memories_added} memories ({report.versions_added} versions) and "
        f"{report.edges_added} edges; {report.memories_unchanged} memories and "
        f"{report.edges_unchanged} edges were already there",
    )
    return 0


def _backup_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("dest", metavar="DEST", help="a new directory for the copy")


@command("backup", _backup_args)
def cmd_backup(args: argparse.Namespace) -> int:
    """Copy the store (consistent and compacted, writers may continue), then verify the copy."""
    with open_store(args, readonly=True, check_pages=False) as cx:
        report = cx.backup(args.dest)
    # a backup that does not verify is removed (Store.backup): no damaged copy is left
    size = sum(store_files(args.dest).values()) if report.ok else 0
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
            f"{args.dest}: {fmt_size(size)}, {report.memories} memories, {report.versions} "
            "versions; verify ok"
        ]
        if report.ok
        else [
            f"backup FAILED: the store does not verify, so no copy was kept at {args.dest}; "
            "`cortex salvage` copies what is intact into a new store"
        ]
    )
    lines += [f"  {p.record}: {p.what}" for p in report.problems]
    emit(args, obj, lines)
    return 0 if report.ok else 1


def _copy_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("src", metavar="SRC", help="the store to copy: a directory or a URL")
    p.add_argument(
        "dst", metavar="DST", help="a new directory, or a URL naming an absent or empty store"
    )


@command("copy", _copy_args)
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
    bar = Progress("copy")
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
    emit(
        args,
        obj,
        f"{args.dst}: {report.records} records ({fmt_size(report.bytes)}) copied from {args.src}; "
        f"exports identical (sha256 {digests[0][:16]}…)",
    )
    return 0
