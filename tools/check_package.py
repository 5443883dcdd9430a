"""Build the sdist and wheel, install the wheel in a fresh virtualenv outside the tree, use it.

    python tools/check_package.py [--keep DIR] [--git]

``python -m build`` makes the sdist and then the wheel from the sdist, so a file the sdist
leaves out fails here. The wheel (with the ``embed`` extra) goes into a new virtualenv in a
temporary directory; a smoke script then runs there, with that directory as the working
directory so nothing of the source tree can be imported: it opens a store, writes, finds,
verifies and exports, and runs the ``cortex`` command. A second wheel is built from the sdist
with no working C compiler (``CC=false``) and must install and pass the same smoke test on the
pure-Python path. ``--git`` also installs from a
``git+file://`` URL of this checkout (the README's git form). Exits non-zero on any failure.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import time
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Files a user's install needs that setuptools could silently leave out: every source and header
# of the C accelerator (cortex/_c/, built by setup.py into cortex._speedups) among them.
SDIST_MUST_HOLD = (
    "pyproject.toml",
    "setup.py",
    "README.md",
    "cortex/_speedups.pyi",
    "cortex/py.typed",
    "cortex/__init__.py",
    *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "cortex" / "_c").glob("*.[ch]")),
)

SMOKE = textwrap.dedent(
    """
    import json, os, subprocess, sys, tempfile
    from pathlib import Path

    import cortex
    from cortex import Cortex, Fact, Query

    site = Path(cortex.__file__).resolve()
    assert "site-packages" in site.parts, f"cortex imported from {site}, not the install"
    try:
        from cortex import _speedups
        accelerated = True
    except ImportError:
        accelerated = False
    want = os.environ.get("EXPECT_SPEEDUPS", "1") == "1"
    assert accelerated == want, f"C accelerator present: {accelerated}, expected {want}"
    assert (site.parent / "py.typed").exists(), "py.typed is missing from the wheel"

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "smoke.cortex"
        with Cortex.open(path, actor="smoke") as cx:
            uri = cx.write(Fact(statement="Ada lives in Zurich", subject="ada",
                                predicate="home_city"), tags=["people"])
            assert cx.resolve(uri).data.statement == "Ada lives in Zurich"
            hits = cx.find(Query(text="where does ada live", limit=5)).hits
            assert [h.uri for h in hits] == [uri], hits
            assert cx.verify().ok
        out = subprocess.run(
            ["cortex", "--store", str(path), "verify"], capture_output=True, text=True
        )
        assert out.returncode == 0, out.stdout + out.stderr
        out = subprocess.run(
            ["cortex", "--store", str(path), "find", "--text", "zurich", "--limit", "3"],
            capture_output=True, text=True,
        )
        assert out.returncode == 0 and "Zurich" in out.stdout, out.stdout + out.stderr
        bundle = Path(tmp) / "b.jsonl"
        out = subprocess.run(
            ["cortex", "--store", str(path), "export", str(bundle)],
            capture_output=True, text=True,
        )
        assert out.returncode == 0 and bundle.stat().st_size > 0, out.stdout + out.stderr
    print(json.dumps({"cortex": cortex.__version__, "accelerated": accelerated,
                      "from": str(site.parent)}))
    """
)


def run(cmd: list[str], **kw: object) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)  # type: ignore[call-overload]


def fresh_venv(where: Path) -> Path:
    venv.EnvBuilder(with_pip=True, clear=True).create(where)
    return where / "bin" / "python"


def smoke(python: Path, cwd: Path, *, accelerated: bool = True) -> None:
    script = cwd / "smoke.py"
    script.write_text(SMOKE, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
    env["EXPECT_SPEEDUPS"] = "1" if accelerated else "0"
    run([str(python), str(script)], cwd=cwd, env=env)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", type=Path, help="build and install here (kept) instead of a temp")
    ap.add_argument("--git", action="store_true", help="also install from a git+file:// URL")
    args = ap.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="cortex-package-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        dist = work / "dist"
        run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)])
        [sdist] = dist.glob("*.tar.gz")
        [wheel] = dist.glob("*.whl")
        with tarfile.open(sdist) as tar:
            names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
        missing = [f for f in SDIST_MUST_HOLD if f not in names]
        if missing:
            print(f"the sdist {sdist.name} lacks {missing}", file=sys.stderr)
            return 1
        with zipfile.ZipFile(wheel) as whl:
            shipped = set(whl.namelist())
            sources = [n for n in shipped if n.startswith("cortex/_c/")]
        # every module of every layer package (a package setuptools' find missed fails here)
        modules = sorted(
            p.relative_to(ROOT).as_posix()
            for p in (ROOT / "cortex").rglob("*.py")
            if "_c" not in p.relative_to(ROOT).parts
        )
        lost = [m for m in modules if m not in shipped]
        if lost:
            print(f"the wheel {wheel.name} lacks {lost}", file=sys.stderr)
            return 1
        if sources:
            print(f"the wheel {wheel.name} ships the C sources {sources}", file=sys.stderr)
            return 1
        py = fresh_venv(work / "venv")
        run([str(py), "-m", "pip", "install", "--quiet", f"{wheel}[embed]"])
        smoke(py, work)
        # no C compiler: the accelerator is optional, the wheel is pure Python and still works
        pure = work / "dist-pure"
        run(
            [
                str(py),
                "-m",
                "pip",
                "wheel",
                "--quiet",
                "--no-deps",
                "--no-cache-dir",
                "--wheel-dir",
                str(pure),
                str(sdist),
            ],
            env={**os.environ, "CC": "false", "LDSHARED": "false"},
        )
        [pure_wheel] = pure.glob("*.whl")
        py = fresh_venv(work / "venv-pure")
        run([str(py), "-m", "pip", "install", "--quiet", str(pure_wheel)])
        smoke(py, work, accelerated=False)
        if args.git:
            if not (ROOT / ".git").exists():
                print("--git: this tree is not a git checkout", file=sys.stderr)
                return 1
            py = fresh_venv(work / "venv-git")
            # pip 23.2 (Python 3.11's bundled one) misreads "name @ git+file://…" as a path
            run([str(py), "-m", "pip", "install", "--quiet", "--upgrade", "pip"])
            url = f"cortex-store[embed] @ git+file://{ROOT}"
            run([str(py), "-m", "pip", "install", "--quiet", url])
            smoke(py, work)
        print(
            f"package ok: {sdist.name}, {wheel.name}, installed and used outside the tree "
            f"in {time.monotonic() - started:.0f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
