"""Build the optional C accelerator; all metadata lives in pyproject.toml.

``cortex._speedups`` is one extension module built from the files of ``cortex/_c/`` (one
concern each, beside the shared header ``common.h``; see its comment for the parts).
"""

from pathlib import Path

from setuptools import Extension, setup

HERE = Path(__file__).resolve().parent
SOURCES = sorted(p.relative_to(HERE).as_posix() for p in (HERE / "cortex" / "_c").glob("*.c"))
HEADERS = sorted(p.relative_to(HERE).as_posix() for p in (HERE / "cortex" / "_c").glob("*.h"))

setup(
    ext_modules=[Extension("cortex._speedups", SOURCES, depends=HEADERS, optional=True)]
)
