"""The journal and the checks: log, verify."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections.abc import Sequence

from cortex import (
    IntegrityError,
    JournalEntry,
    JournalKind,
    argcheck,
)
from cortex.cli.common import (
    Progress,
    command,
    emit,
    enum_arg,
    fmt_size,
    fmt_when,
    one_line,
    open_store,
)
from cortex.engine.erasure import ErasureReport
from cortex.model.jsonmap import to_plain


def _log_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", "--tail", type=int, default=20, metavar="N", help="the last N (20)")
    p.add_argument("--from", dest="start", type=int, metavar="SEQ", help="from this entry on")
    p.add_argument("--to", dest="end", type=int, metavar="SEQ", help="up to this entry")
    p.add_argument(
        "--kind", action="append", type=enum_arg(JournalKind), help="only this kind (repeatable)"
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
    return f"{e.seq:>6}  {fmt_when(e.at)}  {e.by:<12} {e.kind.label:<12} {what}{extra}"


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


@command("log", _log_args)
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

    with open_store(args, readonly=True) as cx:
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


@command("verify", _verify_args)
def cmd_verify(args: argparse.Namespace) -> int:
    """Check the whole store (hashes, heads, indexes, edges, journal); exit 1 if damaged."""
    bar = Progress("verify")
    audit = None
    try:
        # the erasure audit reads data.mdb under the writer lock: it needs a writable handle
        with open_store(args, readonly=not args.erasure, check_pages=False) as cx:
            try:
                report = cx.verify(progress=bar)
            finally:
                bar.close()
            if args.erasure:
                audit = cx.verify_erasure()
    except IntegrityError as exc:  # damage met opening it (a truncated file, a damaged page)
        bar.close()
        emit(
            args,
            {"ok": False, "problems": [{"record": "data.mdb", "what": one_line(exc)}]},
            ["DAMAGED: the store cannot be opened", f"  {one_line(exc)}"],
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
    emit(args, obj, lines)
    return 0 if report.ok and (audit is None or audit.ok) else 1


def _erasure_lines(audit: ErasureReport) -> list[str]:
    lines = [
        f"erasure {'ok' if audit.ok else 'FAILED'}: {audit.records} erasure records, "
        f"{audit.needles} needles, {len(audit.files)} files ({fmt_size(audit.scanned)}) scanned "
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
            f"  not yet scrubbed: {fmt_size(audit.unscrubbed)} of unused bytes and "
            f"{audit.stale_separators} stale separators, written since the last scrub "
            "(`cortex scrub` clears them)"
        )
    return lines
