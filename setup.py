"""Build the optional C accelerator; all metadata lives in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("cortex._speedups", ["cortex/_speedups.c"], optional=True)])
