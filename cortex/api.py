"""The public entry point: ``Cortex``, the store with everything built on it."""

from __future__ import annotations

from cortex.store import Store

__all__ = ["Cortex"]


class Cortex(Store):
    """One actor's memory store: a directory holding one LMDB environment.

    Open it with ``Cortex.open(path, actor=...)`` and use it as a context manager::

        with Cortex.open("agent.cortex", actor="agent-1") as cx:
            uri = cx.write(Fact(statement="...", subject="user", predicate="likes"))
            cx.resolve(uri)
    """
