"""The long fuzz profile (``make fuzz``): every public surface with many examples, then a report.

Runs ``tests/test_fuzz.py`` with ``CORTEX_FUZZ_EXAMPLES`` examples per surface (default 1,000)
and ``CORTEX_FUZZ_COLLECT=1``, so an escape is recorded and the run goes on, then prints the
calls tried per surface (ok, refused with a CortexError, escaped) and every distinct escape.
The counts go to ``fuzz-results/latest.json``. Exit status 1 when anything escaped.

    python tools/fuzz.py [--examples N] [-k EXPRESSION]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=1000, help="examples per surface (1000)")
    p.add_argument("-k", dest="select", help="only the surfaces pytest -k selects")
    p.add_argument("--out", default=str(ROOT / "fuzz-results" / "latest.json"))
    args = p.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "CORTEX_FUZZ_EXAMPLES": str(args.examples),
        "CORTEX_FUZZ_COLLECT": "1",
        "CORTEX_FUZZ_REPORT": str(out),
    }
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_fuzz.py"]
    if args.select:
        cmd += ["-k", args.select]
    started = time.monotonic()
    rc = subprocess.run(cmd, check=False, cwd=ROOT, env=env).returncode
    seconds = time.monotonic() - started
    report = json.loads(out.read_text())
    calls, escapes = report["calls"], report["escapes"]
    width = max(len(r["surface"]) for r in calls)
    print(f"\n{'surface':<{width}}  {'tried':>7} {'ok':>7} {'refused':>7} {'escaped':>7}")
    for r in calls:
        print(
            f"{r['surface']:<{width}}  {r['tried']:>7} {r['ok']:>7} {r['refused']:>7} "
            f"{r['escaped']:>7}"
        )
    total = {k: sum(r[k] for r in calls) for k in ("tried", "ok", "refused", "escaped")}
    print(
        f"{'total':<{width}}  {total['tried']:>7} {total['ok']:>7} {total['refused']:>7} "
        f"{total['escaped']:>7}"
    )
    print(f"\n{len(calls)} surfaces, {args.examples} examples each, {seconds:.0f} s")
    distinct = collections.Counter((e["surface"], e["where"], e["error"][:160]) for e in escapes)
    for (surface, where, error), n in distinct.most_common():
        print(f"ESCAPE x{n} {surface} at {where or '?'}: {error}")
    report["seconds"] = round(seconds)
    report["examples"] = args.examples
    out.write_text(json.dumps(report, indent=1))
    return 1 if escapes or rc != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
