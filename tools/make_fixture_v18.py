"""Build the format-18 fixture store ``tests/data/format18.cortex/`` (a compacted LMDB copy).

Committed DATA, like ``make_fixture_v17.py``'s: built once at a commit where format 18 was
current (``cortex.engine.store.FORMAT_VERSION == 18``); newer code refuses to rebuild it. It
holds everything of the format-17 fixture (``make_fixture_v15.build`` and ``make_fixture_v17``'s
memories with medium references) written at format 18, then 100 more memories, so that the heads
(``m/``) fill several pages of LMDB's main database. Format 18 keeps the heads in the main
database: the migration ``0018-head-database`` moves them into a named database of their own,
and the tests (``tests/test_keyspace_databases.py``) check that every record is the same
before and after, every memory reads as before and the migrated store verifies.

    python tools/make_fixture_v18.py [--out tests/data/format18.cortex]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from make_fixture_v1 import START  # noqa: E402
from make_fixture_v15 import build  # noqa: E402
from make_fixture_v17 import populate_refs  # noqa: E402

from cortex import Cortex, Fact, MemoryId, NewMemory  # noqa: E402

FORMAT: int = 18
"""The format this fixture is of: the one before ``0018-head-database``."""

MANY: range = range(256, 356)
"""Memories 256..355 (``many_id``): enough heads for several pages of the main database."""


def many_id(n: int) -> MemoryId:
    """The caller-chosen id of memory ``n`` of ``MANY`` (``fid``'s time part, two bytes of n)."""
    ms = int(START.timestamp() * 1000)
    return MemoryId(ms.to_bytes(6, "big") + b"\x01" + bytes(7) + n.to_bytes(2, "big"))


def populate_many(cx: Cortex) -> None:
    """Memories ``MANY``, in one batch; 257 is then updated and 258 tombstoned."""
    cx.write_many(
        [
            NewMemory(
                data=Fact(statement=f"locker {n} is on floor {n % 7}", subject=f"locker {n}",
                          predicate="is on"),
                id=many_id(n),
                tags=(f"floor-{n % 7}",),
            )
            for n in MANY
        ]
    )  # fmt: skip
    cx.update(many_id(257), Fact(statement="locker 257 moved to the roof",
                                 subject="locker 257", predicate="is on"))  # fmt: skip
    cx.tombstone(many_id(258), reason="fixture")


def main() -> int:
    return build(FORMAT, populate_refs, populate_many)  # the format-17 fixture's steps, then these


if __name__ == "__main__":
    sys.exit(main())
