"""What the layer above decides for the engine: vectors, a handle's access, the erasure step.

``cortex.engine.store.Store`` is usable on its own: it embeds nothing, refuses no change and
competes every write with everything. ``cortex.agent.api.Cortex`` composes a ``Store`` and gives
it ``Hooks``: its embedder's vectors, its restricted reader's checks (run inside the change's
write transaction) and the vector cache's part of the erasure step. Each hook left ``None`` keeps
the plain store's behaviour (the functions below). The store binds each hook once, when it is
made: a hook costs one call where the engine needs the decision, no layer per memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from cortex.errors import CortexError, ValidationError
from cortex.model.ids import MemoryId
from cortex.model.records import Episode, Head
from cortex.storage.kv import ReadTxn

if TYPE_CHECKING:
    from cortex.engine.erasure import ScrubReport

__all__ = [
    "EmbedPrepared",
    "GuardChange",
    "Hooks",
    "Visible",
    "after_scrub",
    "chunk_vectors",
    "embed_prepared",
    "given_vector",
    "guard_change",
    "guard_see",
    "vector_value",
    "writer_sees",
]

Visible = Callable[[ReadTxn, Head], bool]
"""Whether a write may compete with a memory (its head, read in the write's transaction)."""


class EmbedPrepared(Protocol):
    """``Hooks.embed_prepared``."""

    def __call__(  # noqa: D102 - the class says
        self, prepared: Sequence[Any], chunks: Sequence[str] | None = None, /
    ) -> list[bytes] | None: ...


class GuardChange(Protocol):
    """``Hooks.guard_change``."""

    def __call__(  # noqa: D102 - the class says
        self, txn: ReadTxn, mid: MemoryId, head: Head | None = None, /
    ) -> None: ...


class Hooks(NamedTuple):
    """The decisions a ``Store`` leaves to its owner (``None``: the plain store's).

    - ``embed_prepared(prepared, chunks=None)``: set ``p.vector`` of each prepared version before
      its transaction; with ``chunks`` (an episode's chunk texts), return their vectors too.
    - ``chunk_vectors(episode)``: the vectors of an imported episode's chunks.
    - ``given_vector(vector)``: a caller's vector for a new version, checked (``bytes``).
    - ``vector_value(version, vector)``: the sealed ``vec/`` value of an embedding.
    - ``writer_sees(now)``: what a batch or an ingest may compete with (``None``: everything).
    - ``guard_change(txn, mid, head=None)`` / ``guard_see(txn, mid)``: refuse, inside a change's
      write transaction, a change (a link) the handle may not make.
    - ``after_scrub(report, now)``: the owner's part of the erasure step; returns the report.
    """

    embed_prepared: EmbedPrepared | None = None
    chunk_vectors: Callable[[Episode], list[bytes] | None] | None = None
    given_vector: Callable[[Any], bytes] | None = None
    vector_value: Callable[[int, bytes], bytes] | None = None
    writer_sees: Callable[[datetime], Visible | None] | None = None
    guard_change: GuardChange | None = None
    guard_see: Callable[[ReadTxn, MemoryId], None] | None = None
    after_scrub: Callable[[ScrubReport, datetime], ScrubReport] | None = None


# -- the plain store's behaviour ---------------------------------------------------------------


def embed_prepared(prepared: Sequence[Any], chunks: Sequence[str] | None = None, /) -> None:
    """The plain store embeds nothing: no vector is set, no chunk vector returned."""


def chunk_vectors(ep: Episode) -> None:
    """The plain store embeds no episode chunk."""


def given_vector(vector: Any) -> bytes:
    """The plain store declares no vector model: a caller's vector is refused."""
    raise ValidationError(
        "vector",
        "no_model",
        "this store declares no vector model: open it with embedder=… (or "
        "embedder=cortex.index.embed.External(model_id, dim) for vectors computed elsewhere)",
    )


def vector_value(version: int, vector: bytes) -> bytes:
    """Never reached: the plain store sets no vector."""
    raise CortexError("this store has no embedder")  # pragma: no cover - never reached


def writer_sees(now: datetime) -> None:
    """The plain store's writes compete with every memory."""


def guard_change(txn: ReadTxn, mid: MemoryId, head: Head | None = None, /) -> None:
    """The plain store refuses no change."""


def guard_see(txn: ReadTxn, mid: MemoryId) -> None:
    """The plain store refuses no link."""


def after_scrub(report: ScrubReport, now: datetime) -> ScrubReport:
    """The plain store keeps nothing beside its files: the report as it is."""
    return report
