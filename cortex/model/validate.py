"""Validation of a whole memory: head, version and data together, beyond each field's rules.

Field rules (types, ranges, sizes, closed values) are enforced by the codec as it encodes; this
module adds the rules that span records: matching ids and types, the content hash, form budgets
and time ordering.
"""

from __future__ import annotations

from cortex.errors import ValidationError
from cortex.model.codec import data_codec, encode_head, encode_version
from cortex.model.forms import MEDIUM_TOKENS, SHORT_TOKENS, count_tokens
from cortex.model.hashing import content_hash
from cortex.model.records import Data, Forms, Head, Version

__all__ = ["validate_memory"]


def validate_memory(head: Head, version: Version, data: Data) -> None:
    """Check that ``head``, ``version`` and ``data`` form one valid memory.

    Raises:
        ValidationError: naming the field (``head.*``, ``version.*``, ``data.*``) and the rule.
    """
    data_bytes = data_codec(data).encode(data, "data")
    encode_head(head)
    encode_version(version)
    if head.id != version.id:
        raise ValidationError("version.id", "match", f"is {version.id}, but the head is {head.id}")
    if not head.type == version.type == data.TYPE:
        raise ValidationError(
            "version.type",
            "match",
            f"head type {head.type.type_name}, version type {version.type.type_name} and data "
            f"type {data.TYPE.type_name} must agree",
        )
    if version.version > head.current_version:
        raise ValidationError(
            "version.version",
            "range",
            f"{version.version} is past the head's {head.current_version}",
        )
    if version.data is not None:
        if version.data != data_bytes:
            raise ValidationError(
                "version.data", "match", "is not the canonical encoding of the data"
            )
        if version.hash != content_hash(version.type, version.data):
            raise ValidationError("version.hash", "match", "is not sha256(domain || type || data)")
    for path, forms in (("version.forms", version.forms), ("head.forms", head.forms)):
        if forms is not None:
            check_budgets(forms, path)
    if version.valid_from and version.valid_until and version.valid_from > version.valid_until:
        raise ValidationError("version.valid_until", "order", "is before valid_from")
    if version.expires_at and version.expires_at < version.created_at:
        raise ValidationError("version.expires_at", "order", "is before created_at")


def check_budgets(forms: Forms, path: str) -> None:
    """Raise ``ValidationError`` if a stored form exceeds its token budget."""
    for name, budget in (("short", SHORT_TOKENS), ("medium", MEDIUM_TOKENS)):
        n = count_tokens(getattr(forms, name))
        if n > budget:
            raise ValidationError(
                f"{path}.{name}", "budget", f"is {n} tokens; the budget is {budget}"
            )
