"""Commands on the store as a whole: init, info, stats."""

from __future__ import annotations

import argparse
from pathlib import Path

from cortex.cli.common import command, emit, fmt_size, fmt_when, open_store, store_path, table_lines
from cortex.storage.engines import exists as store_exists
from cortex.storage.engines import is_url
from cortex.storage.pages import CHECKED


@command("init")
def cmd_init(args: argparse.Namespace) -> int:
    """Create a store (the acting name becomes its owner); an existing store is left as is."""
    existed = store_exists(store_path(args))
    with open_store(args, create=True) as cx:
        obj = {
            "path": cx.path,
            "created": not existed,
            "format_version": cx.format.format_version,
            "owner": cx.owner,
        }
    what = "already a store" if existed else "created"
    emit(args, obj, f"{obj['path']}: {what} (format {obj['format_version']}, owner {cx.owner})")
    return 0


def store_files(path: str) -> dict[str, int]:
    """The store's files and their sizes in bytes."""
    if is_url(path):  # a PostgreSQL store has no files of its own
        return {}
    return {p.name: p.stat().st_size for p in sorted(Path(path).iterdir()) if p.is_file()}


@command("info")
def cmd_info(args: argparse.Namespace) -> int:
    """The store at a glance: format, owner, counts, sizes and sidecar files."""
    with open_store(args, readonly=True, check_pages=False) as cx:
        stats = cx.stats()
        fmt = cx.format
        files = store_files(cx.path)
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
            "sidecars": {
                k: v for k, v in files.items() if k not in ("data.mdb", "lock.mdb", CHECKED)
            },
            "pages_checked": CHECKED in files,
            "vectors": cx.vector_info(),
        }
    vec = obj["vectors"]
    vectors = (
        "none (never opened with an embedder)"
        if vec is None
        else f"{vec['vectors']} of {vec['model_id']} (dim {vec['dim']}, stored in "
        f"{vec['precision']}); index {vec['index']}"
    )
    sidecars = ", ".join(f"{k} ({fmt_size(v)})" for k, v in obj["sidecars"].items()) or "none"
    emit(
        args,
        obj,
        [
            f"store     {obj['path']}",
            f"format    {fmt.format_version} ({', '.join(fmt.features)})",
            f"created   {fmt_when(fmt.created_at)} by {fmt.created_by}",
            f"owner     {fmt.owner}  (acting as {cx.actor})",
            f"memories  {stats['memories']} ({stats['live']} live, {stats['tombstoned']} "
            f"tombstoned, {stats['purged']} purged) in {stats['versions']} versions",
            f"edges     {stats['edges']}",
            f"journal   {stats['journal_entries']} entries",
            f"size      {fmt_size(files.get('data.mdb', 0))} on disk, "
            f"{fmt_size(stats['used_bytes'])} used, map {fmt_size(stats['map_size'])}",
            f"sidecars  {sidecars}",
            "pages     "
            + (
                f"a clean check recorded ({CHECKED}): the next open skips it"
                if obj["pages_checked"]
                else "checked at the next open"
            ),
            f"vectors   {vectors}",
        ],
    )
    return 0


@command("stats")
def cmd_stats(args: argparse.Namespace) -> int:
    """Counts: memories by type and state, versions, edges, journal entries, sizes."""
    with open_store(args, readonly=True) as cx:
        stats = cx.stats()
    rows = [(name, n) for name, n in stats["by_type"].items()]
    lines = table_lines(["type", "memories"], rows)
    lines.append("")
    for key in ("memories", "live", "tombstoned", "purged", "versions", "edges"):
        lines.append(f"{key:<16}{stats[key]}")
    lines.append(f"{'journal_entries':<16}{stats['journal_entries']}")
    lines.append(f"{'used_bytes':<16}{stats['used_bytes']}")
    emit(args, stats, lines)
    return 0
