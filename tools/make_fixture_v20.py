"""Build the format-20 fixture store ``tests/data/format20.cortex/`` (a compacted LMDB copy).

Committed DATA, like ``make_fixture_v19.py``'s: built once at a commit where format 20 was
current (``cortex.engine.store.FORMAT_VERSION == 20``); newer code refuses to rebuild it. It
holds everything of the format-19 fixture (``make_fixture_v15.build``, ``make_fixture_v17``'s
memories with medium references and ``make_fixture_v18``'s hundred lockers) written at format
20, then forty memories with caller-chosen ids in no order (``random_id``), written in two
batches, with use counters on some, one updated, one tombstoned and one purged. Format 20 keys
every per-memory record by the memory's id (``m/``, ``mv/``, ``vec/``, ``sal/``, ``lex/d/``) and
maps document numbers to ids in ``lex/i/``: the migration ``0020-memory-rows`` keys them by the
memory's row number (the live indexed memories keep their document number as their row) and
writes ``id/``; the tests (``tests/test_migrate.py``) check that every memory reads as before
and the migrated store verifies.

    python tools/make_fixture_v20.py [--out tests/data/format20.cortex]
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from make_fixture_v15 import build  # noqa: E402
from make_fixture_v17 import populate_refs  # noqa: E402
from make_fixture_v18 import populate_many  # noqa: E402

from cortex import Cortex, Fact, MemoryId, NewMemory, Outcome  # noqa: E402

FORMAT: int = 20
"""The format this fixture is of: the one before ``0020-memory-rows``."""

RANDOM: range = range(400, 440)
"""Memories 400..439 (``random_id``): caller-chosen ids in no order."""


def random_id(n: int) -> MemoryId:
    """The caller-chosen id of memory ``n`` of ``RANDOM``: 16 bytes of sha256, in no order."""
    return MemoryId(hashlib.sha256(f"fixture-20/{n}".encode()).digest()[:16])


def populate_random(cx: Cortex) -> None:
    """Memories ``RANDOM`` in two batches; uses, an update, a tombstone and a purge of some."""
    for part in (RANDOM[:20], RANDOM[20:]):
        cx.write_many(
            [
                NewMemory(
                    data=Fact(statement=f"crate {n} holds {n % 5} barrels of tar",
                              subject=f"crate {n}", predicate="holds"),
                    id=random_id(n),
                    tags=(f"hold-{n % 3}",),
                )
                for n in part
            ]
        )  # fmt: skip
    cx.attest([random_id(401), random_id(402), random_id(404)], Outcome.SUCCESS)
    cx.update(random_id(403), Fact(statement="crate 403 holds rope now", subject="crate 403",
                                   predicate="holds"))  # fmt: skip
    cx.tombstone(random_id(404), reason="fixture")
    cx.purge(random_id(405), reason="fixture")


def main() -> int:
    return build(FORMAT, populate_refs, populate_many, populate_random)


if __name__ == "__main__":
    sys.exit(main())
