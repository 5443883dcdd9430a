"""Build the format-2 fixture store ``tests/data/format2.cortex/`` (a compacted LMDB copy).

Like the format-1 fixture (``make_fixture_v1.py``, whose ``write_fixture`` it reuses), the
fixture is DATA, not a build product: it was generated once, at a commit where on-disk format 2
was current (``cortex.store.FORMAT_VERSION == 2``; 49aca3f), by copying this script and
``make_fixture_v1.py`` into a checkout of that commit and running it there. Code that writes a
newer format cannot regenerate it, and this script refuses to try. The migration tests migrate a
copy (``0002-pinned-and-frame-time``) and compare it with a store written fresh by the current
code through the same ``populate`` calls.

    python tools/make_fixture_v2.py [--out tests/data/format2.cortex]
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
    from cortex.store import FORMAT_VERSION

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "tests" / "data" / "format2.cortex"))
    args = parser.parse_args()
    if FORMAT_VERSION != 2:
        print(
            f"this cortex writes format {FORMAT_VERSION}; the format-2 fixture can only be built "
            "at a commit where format 2 was current (it is committed data: do not rebuild it)",
            file=sys.stderr,
        )
        return 2
    _v1_tool().write_fixture(Path(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
