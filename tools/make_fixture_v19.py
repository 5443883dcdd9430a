"""Build the format-19 fixture store ``tests/data/format19.cortex/`` (a compacted LMDB copy).

Committed DATA, like ``make_fixture_v18.py``'s: built once at a commit where format 19 was
current (``cortex.engine.store.FORMAT_VERSION == 19``); newer code refuses to rebuild it. It
holds everything of the format-18 fixture (``make_fixture_v15.build``, ``make_fixture_v17``'s
memories with medium references and ``make_fixture_v18``'s hundred lockers) written at format
19. Format 19 keeps the index keyspaces (``idx/``, ``prov/e/``) in the main database: the
migration ``0019-index-duplicates`` moves them into LMDB databases of duplicates (a type range
of more than a page of entries becomes a tree of duplicates, a tag's few an inline page), and
the tests (``tests/test_keyspace_databases.py``) check that every record is the same before and
after, every memory reads as before and the migrated store verifies.

    python tools/make_fixture_v19.py [--out tests/data/format19.cortex]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from make_fixture_v15 import build  # noqa: E402
from make_fixture_v17 import populate_refs  # noqa: E402
from make_fixture_v18 import populate_many  # noqa: E402

FORMAT: int = 19
"""The format this fixture is of: the one before ``0019-index-duplicates``."""


def main() -> int:
    return build(FORMAT, populate_refs, populate_many)  # the format-18 fixture's steps


if __name__ == "__main__":
    sys.exit(main())
