"""Build the format-16 fixture store ``tests/data/format16.cortex/`` (a compacted LMDB copy).

Committed DATA, like ``make_fixture_v15.py``'s: built once at a commit where format 16 was
current (``cortex.engine.store.FORMAT_VERSION == 16``); newer code refuses to rebuild it. It
holds everything of the format-15 fixture (records, labels, text, counters, chains, vectors,
postings by document number, every kind of forms, lean lexical documents) written at format 16,
where every keyspace is in LMDB's main database: the migration ``0016-keyspace-databases`` moves
``j/``, ``lex/d/``, ``lex/i/`` and ``vec/`` into named databases of their own, and the tests
check that every record is the same before and after, every memory reads as before and the
migrated store verifies.

    python tools/make_fixture_v16.py [--out tests/data/format16.cortex]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from make_fixture_v15 import build  # noqa: E402

FORMAT: int = 16
"""The format this fixture is of: the one before ``0016-keyspace-databases``."""


def main() -> int:
    return build(FORMAT)  # the format-15 fixture's steps, written at format 16


if __name__ == "__main__":
    sys.exit(main())
