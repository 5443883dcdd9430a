"""The package version (the on-disk format version is separate, in ``cortex.engine.store``)."""

__version__ = "0.1.0"
