"""Content hashes of versions: sha256 over a domain tag, the type byte and the canonical data."""

from __future__ import annotations

import hashlib
from typing import Final

from cortex.errors import ValidationError
from cortex.model.enums import MemoryType

__all__ = ["DOMAIN", "EPISODE_DOMAIN", "content_hash", "episode_hash"]

DOMAIN: Final = b"matrix.cortex.memory.v1"
"""Domain separation tag: a hash of a cortex memory never equals a hash of anything else."""

EPISODE_DOMAIN: Final = b"matrix.cortex.episode.v1"
"""The domain of episode hashes (``specs/episodes.md``): never equal to a memory's."""


def content_hash(type_: MemoryType, data: bytes) -> bytes:
    """``sha256(DOMAIN || type_byte || data)`` where ``data`` is the canonical CBOR of the data.

    Args:
        type_: the memory type; its code is the type byte.
        data: canonical CBOR of the typed data, exactly as stored.

    Returns:
        The 32-byte digest.

    Raises:
        ValidationError: ``type_`` is not a memory type, or ``data`` not bytes.
    """
    if type(type_) is MemoryType and type(data) is bytes:
        h = _SEEDED[type_].copy()  # a copy skips OpenSSL's set-up of a new hash object
        h.update(data)
        return h.digest()
    t = MemoryType.coerce(type_) if isinstance(type_, int) and not isinstance(type_, bool) else None
    if t is None:
        raise ValidationError("type", "enum", f"must be a MemoryType, got {type(type_).__name__}")
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ValidationError("data", "type", f"must be bytes, got {type(data).__name__}")
    return hashlib.sha256(_PREFIXES[t] + bytes(data)).digest()


_TYPE_BYTES: Final = {t: bytes((t.value,)) for t in MemoryType}
_PREFIXES: Final = {t: DOMAIN + b for t, b in _TYPE_BYTES.items()}
_SEEDED: Final = {t: hashlib.sha256(p) for t, p in _PREFIXES.items()}
"""hashlib objects that have hashed each type's prefix: copied, never updated themselves."""


def episode_hash(content: bytes) -> bytes:
    """``sha256(EPISODE_DOMAIN || content)``: the content hash of an episode's UTF-8 bytes."""
    return hashlib.sha256(EPISODE_DOMAIN + content).digest()
