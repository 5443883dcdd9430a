"""Type stub of the optional C accelerator (cortex/_speedups.c)."""

from typing import Any

class Reject(ValueError):
    """The bytes are not a canonical record of the plan (the Python decoder says why)."""

class Plan:
    """How to decode one record struct: built by ``StructCodec`` from its field list."""

    def __init__(
        self,
        cls: type[Any],
        kwnames: tuple[str, ...],
        schema_version: int | None,
        fields: tuple[tuple[Any, ...], ...],
    ) -> None: ...

def decode(plan: Plan, data: bytes | bytearray | memoryview, /) -> Any:
    """Decode canonical CBOR ``data`` into the record ``plan`` describes; raise ``Reject``."""
