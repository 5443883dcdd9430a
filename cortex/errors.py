"""The error hierarchy: one root, split by what the caller can do about it."""

from __future__ import annotations

__all__ = [
    "CodecError",
    "ConflictError",
    "CortexError",
    "ErasurePendingError",
    "FormatError",
    "IndexCacheError",
    "IntegrityError",
    "MigrationRequiredError",
    "MissingDependencyError",
    "NonCanonicalError",
    "NotFoundError",
    "StoreFullError",
    "TombstonedError",
    "ValidationError",
]


class CortexError(Exception):
    """Root of every error cortex raises; no third-party exception escapes the API."""


class ValidationError(CortexError, ValueError):
    """Input breaks a rule; nothing was written.

    Attributes:
        field: dotted path of the offending field, e.g. ``data.confidence`` or ``head.tags[3]``.
        rule: short name of the broken rule, e.g. ``range``, ``required``, ``max_bytes``.
    """

    def __init__(self, field: str, rule: str, message: str) -> None:
        self.field = field
        self.rule = rule
        self.message = message
        super().__init__(f"{field}: {message}")


class CodecError(CortexError, ValueError):
    """Bytes are not a valid encoding of the expected record (wrong type, unknown key, bad CBOR)."""


class NonCanonicalError(CodecError):
    """Bytes decode, but are not the canonical encoding of what they decode to."""


class NotFoundError(CortexError, KeyError):
    """No memory, version or edge with that name is visible to the caller."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else "not found"


class ConflictError(CortexError):
    """The write lost a race or contradicts the current state; re-read and retry."""


class TombstonedError(ConflictError):
    """The memory is tombstoned; it can be resolved for audit but not changed."""


class ErasurePendingError(CortexError):
    """The purge is done, but some bytes it erased are still in the store's files.

    The content is gone from every record (no read returns it); pages that held it are still
    read by a snapshot opened before the purge, or the erasure step failed. ``cortex scrub``
    (``Store.scrub()``) zeroes them once the snapshot ends; calling ``purge`` again does too.

    Attributes:
        report: the erasure step's ``ScrubReport`` (``None`` when it failed before one).
    """

    def __init__(self, message: str, report: object | None = None) -> None:
        self.report = report
        super().__init__(message)


class IntegrityError(CortexError):
    """Stored bytes fail their checksum or hash: the store is damaged; run ``cortex verify``."""


class FormatError(CortexError):
    """The store's on-disk format is unknown or newer than this version of cortex."""


class MigrationRequiredError(FormatError):
    """The store was written by an older format; run ``cortex migrate`` to upgrade it."""


class StoreFullError(CortexError):
    """The store cannot grow (disk full or the map size limit reached)."""


class WriteBudgetError(CortexError):
    """A write was dropped: the task's write budget is spent (seed 003: 50 writes per task).

    Nothing of the write was stored; the journal records the drop (``budget_drop``).
    """


class EngineError(CortexError):
    """The storage server failed or cannot be reached (a PostgreSQL store).

    The message says whether anything was written and what to do.
    """


class MissingDependencyError(CortexError):
    """An optional package or model file is not installed; the message says what to install."""


class IndexCacheError(CortexError):
    """A saved vector index cannot be used as it is; rebuild it from the stored vectors.

    Attributes:
        reason: what is wrong, one of ``missing``, ``truncated``, ``corrupt`` (a digest
            mismatch), ``wrong_dim``, ``other_model``, ``bad_metadata``, ``format`` (a format
            version this cortex does not read).
    """

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        self.message = message
        super().__init__(f"vector index cache ({reason}): {message}")
