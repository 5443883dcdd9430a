"""Prototype: what one B-tree per append-only keyspace would save on disk (no format is changed).

Reads a closed store's keys and values and writes them into two scratch LMDB environments in
batches of 1,000 memories (in id order; the journal and the other keys spread evenly over the
batches), each batch one transaction with its keys sorted, as ``write_many`` does:

1. ``vec/`` in a tree of its own, appended (what the store does today: it is the last keyspace);
   everything else in the main tree;
2. each append-only keyspace (``m/``, ``mv/``, ``j/``, ``lex/d/``, ``vec/``) in a tree of its own,
   appended, so its newest keys are always at the end of its tree and a full page stays full.

The difference is what page splits in the middle of the single tree leave empty for those
keyspaces (``tools/disk_breakdown.py`` shows the fill). The posting blocks are written once in
their final form here, not rewritten batch after batch as the store does, so both figures are
below the store's own; only their difference is the estimate.

    python tools/disk_replay.py STORE
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import lmdb

APPEND_ONLY = (b"m/", b"mv/", b"j/", b"lex/d/", b"vec/")
ID_KEYED = {b"m/": 2, b"mv/": 3, b"lex/d/": 6, b"vec/": 4}  # prefix -> offset of the id16
Pair = tuple[bytes, bytes]


def keyspace(key: bytes) -> bytes | None:
    """The append-only keyspace of ``key``, or None (``m/`` is not ``meta/`` or ``mv/``)."""
    for p in (b"mv/", b"meta/", b"m/", b"j/", b"lex/d/", b"vec/"):
        if key.startswith(p):
            return p if p in APPEND_ONLY else None
    return None


def read(store: Path) -> tuple[list[bytes], dict[bytes, list[Pair]], list[Pair], list[Pair]]:
    """(ids in order, each id's keyed records, the journal, everything else) of ``store``."""
    env = lmdb.open(str(store), readonly=True, lock=False)
    by_id: dict[bytes, list[Pair]] = defaultdict(list)
    journal: list[Pair] = []
    other: list[Pair] = []
    try:
        with env.begin() as txn:
            for k, v in txn.cursor():
                pair = (bytes(k), bytes(v))
                p = keyspace(pair[0])
                if p in ID_KEYED:
                    at = ID_KEYED[p]
                    by_id[pair[0][at : at + 16]].append(pair)
                elif p == b"j/":
                    journal.append(pair)
                else:
                    other.append(pair)
    finally:
        env.close()
    return sorted(by_id), by_id, journal, other


def batches(
    ids: list[bytes], by_id: dict[bytes, list[Pair]], journal: list[Pair], other: list[Pair]
) -> Iterator[list[Pair]]:
    """The store's records in transactions of 1,000 memories, each sorted by key."""
    nb = max(1, (len(ids) + 999) // 1000)
    for b in range(nb):
        items = [kv for i in ids[b * 1000 : (b + 1) * 1000] for kv in by_id[i]]
        items += journal[b * len(journal) // nb : (b + 1) * len(journal) // nb]
        items += other[b::nb]
        items.sort()
        yield items


def replay(
    data: tuple[list[bytes], dict[bytes, list[Pair]], list[Pair], list[Pair]],
    own: tuple[bytes, ...],
    scratch: Path,
) -> int:
    """Bytes allocated to ``data.mdb`` when the keyspaces ``own`` have trees of their own."""
    shutil.rmtree(scratch, ignore_errors=True)
    env = lmdb.open(str(scratch), map_size=1 << 36, max_dbs=len(own) + 1)
    try:
        dbs = {p: env.open_db(p) for p in own}
        for items in batches(*data):
            with env.begin(write=True) as txn:
                groups: dict[bytes | None, list[Pair]] = defaultdict(list)
                for k, v in items:
                    p = keyspace(k)
                    groups[p if p in dbs else None].append((k, v))
                for p, pairs in groups.items():
                    with txn.cursor(db=dbs[p] if p is not None else None) as cur:
                        cur.putmulti(pairs, append=p is not None)
    finally:
        env.close()
    return os.stat(scratch / "data.mdb").st_blocks * 512


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("store", type=Path, help="a closed cortex store (LMDB directory)")
    args = ap.parse_args()
    data = read(args.store)
    n = len(data[0]) or 1
    with tempfile.TemporaryDirectory(prefix="disk-replay-") as tmp:
        one = replay(data, (b"vec/",), Path(tmp) / "a")
        each = replay(data, APPEND_ONLY, Path(tmp) / "b")
    print(f"{n:,} memories")
    print(f"vec/ in a tree of its own:            {one / n:,.0f} B per memory")
    print(f"every append-only keyspace in its own: {each / n:,.0f} B per memory")
    print(f"saving: {(one - each) / n:,.0f} B per memory ({100 * (one - each) / one:.1f}%)")


if __name__ == "__main__":
    main()
