"""Shared helpers for the find / salience / scope / context tests (specs/query.md)."""

from __future__ import annotations

import hashlib
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cortex import (
    Cortex,
    Fact,
    Forms,
    FrameRef,
    ObjKind,
    ValidationError,
    Verb,
)

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def dump_store(where: Any) -> dict[bytes, bytes]:
    """Every key and value of the store at ``where`` (a directory or a PostgreSQL URL)."""
    from cortex.storage.engines import open_kv

    kv = open_kv(where, create=False)
    try:
        with kv.read() as txn:
            return dict(txn.scan(b""))
    finally:
        kv.close()


def fixture_store(fixture: Path, tmp: Path, store_path: Any) -> Any:
    """A copy of the LMDB fixture directory ``fixture`` on the test's engine: a directory under
    ``tmp``, or, for PostgreSQL, the fixture's records copied into ``store_path``."""
    from cortex.storage.engines import copy_kv
    from cortex.storage.kv import LmdbKV

    src = tmp / fixture.name
    src.mkdir()
    shutil.copy(fixture / "data.mdb", src / "data.mdb")
    if not isinstance(store_path, str):
        return src
    kv = LmdbKV(src, readonly=True, create=False)
    try:
        copy_kv(kv, store_path)
    finally:
        kv.close()
    return store_path


def digest_of_store(cx: Cortex) -> str:
    """A digest of every key and value of the store (a failed call must leave it unchanged)."""
    h = hashlib.sha256()
    with cx._kv.read() as txn:
        for key, value in txn.scan(b""):
            h.update(len(key).to_bytes(4, "big") + key + len(value).to_bytes(4, "big") + value)
    return h.hexdigest()


DAY = timedelta(days=1)


class Clock:
    """A settable clock: it returns ``now`` until told otherwise."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def tick(self, seconds: float = 1.0) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now

    def advance(self, delta: timedelta) -> datetime:
        self.now += delta
        return self.now

    def at(self, when: datetime) -> datetime:
        self.now = when
        return when


def fact(i: int | str = 1, **kw: Any) -> Fact:
    kw.setdefault("subject", "user")
    kw.setdefault("predicate", "likes")
    return Fact(statement=f"statement {i}", **kw)


def frame(
    ref: str = "svc://a", verb: Verb | str = Verb.FIND, kind: ObjKind | str = ObjKind.SERVICE
) -> FrameRef:
    return FrameRef(verb=verb, obj_kind=kind, obj_ref=ref)  # type: ignore[arg-type]


def forms(tokens: int, tag: str = "x") -> Forms:
    """Forms whose short and medium texts are exactly ``tokens`` tokens (4 bytes each)."""
    text = (tag * (4 * tokens))[: 4 * tokens]
    return Forms(short=text, medium=text)


def trace(cx: Cortex) -> tuple[Any, ...]:
    """What a pure read must leave unchanged: the journal head, the counts, the use counters."""
    st = cx.stats()
    st = {k: v for k, v in st.items() if k not in ("used_bytes", "map_size")}
    last = next(cx.journal(reverse=True, start=2**62), None)
    with cx._kv.read() as txn:
        sal = list(txn.scan(b"sal/"))
    return (sorted(st.items(), key=str), last, sal)


def rejects(field: str, fn: Any, *args: Any, **kw: Any) -> ValidationError:
    """``fn(*args, **kw)`` raises a ValidationError naming ``field`` (or a sub-field of it)."""
    with pytest.raises(ValidationError) as info:
        fn(*args, **kw)
    err = info.value
    assert err.field == field or err.field.startswith(field + "."), (err.field, str(err))
    return err
