"""Build a fixture store of an older format: ``tests/data/format<N>.cortex/`` (LMDB, compacted).

Like the format-1 fixture (``make_fixture_v1.py``, whose ``write_fixture`` it reuses), these
fixtures are DATA, not build products: each was generated once, at a commit where its on-disk
format was current, by copying this script and ``make_fixture_v1.py`` into a checkout of that
commit and running it there:

- format 2: 49aca3f (``cortex.engine.store.FORMAT_VERSION == 2``);
- format 5: a564bb0 (postings one per key, before the posting blocks of format 6);
- format 6: 470d343 (posting blocks, before the episodes of format 7);
- format 7: 2a5fba8 (episodes, before the claim index, write budgets, sensitivity and erasure
  records of format 8).

Code that writes another format cannot regenerate them, and this script refuses to try. The
migration tests migrate a copy and compare it with a store written fresh by the current code
through the same ``populate`` calls.

    python tools/make_fixture_old.py --format 5 [--out tests/data/format5.cortex]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _v1_tool() -> Any:
    spec = importlib.util.spec_from_file_location(
        "make_fixture_v1", Path(__file__).resolve().parent / "make_fixture_v1.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    from cortex.engine.store import FORMAT_VERSION

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--format", type=int, default=2, help="the format to build (2, 5, 6 or 7)")
    parser.add_argument("--out", help="default: tests/data/format<N>.cortex")
    args = parser.parse_args()
    if args.format != FORMAT_VERSION:
        print(
            f"this cortex writes format {FORMAT_VERSION}; the format-{args.format} fixture can "
            f"only be built at a commit where format {args.format} was current (it is committed "
            "data: do not rebuild it)",
            file=sys.stderr,
        )
        return 2
    out = args.out or ROOT / "tests" / "data" / f"format{args.format}.cortex"
    _v1_tool().write_fixture(Path(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
