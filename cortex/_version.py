"""The package version (the on-disk format version is separate, in ``cortex.store``)."""

__version__ = "0.1.0"
