"""Every fast path of the write path leaves exactly the store the reference paths leave.

The write path has accelerated paths (the C extension ``cortex._speedups`` and hand-built
encoders in Python) beside the generic code that stays the definition. These tests write the
same deterministic workload (a fixed clock, caller-chosen ids) with every accelerator switched
on and with every module flag ``_USE_SPEEDUPS`` switched off, and compare every key and value.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta, timezone
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import cortex
from cortex import (
    Cortex,
    Fact,
    FrameRef,
    NewMemory,
)
from cortex.errors import ConflictError
from cortex.index import lexical, text
from cortex.model.enums import ObjKind, SourceKind, Verb, Visibility
from cortex.model.ids import MemoryId
from cortex.model.records import Forms, Provenance

ROOT = Path(__file__).resolve().parent.parent


def _tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


FIXTURE = _tool("make_fixture_v1")
BENCH = _tool("bench_store")


def _flagged_modules() -> list[ModuleType]:
    """Every cortex module with a ``_USE_SPEEDUPS`` switch."""
    import pkgutil

    found = []
    for info in pkgutil.walk_packages(cortex.__path__, "cortex."):
        if info.name == "cortex.__main__" or info.name.startswith(("cortex.cli", "cortex.serve")):
            continue
        module = importlib.import_module(info.name)
        if hasattr(module, "_USE_SPEEDUPS"):
            found.append(module)
    return found


@contextmanager
def accelerators(on: bool) -> Iterator[None]:
    """Leave every ``_USE_SPEEDUPS`` flag as built (``on``) or switch them all off."""
    modules = _flagged_modules()
    saved = [m._USE_SPEEDUPS for m in modules]  # type: ignore[attr-defined]
    try:
        if not on:
            for m in modules:
                m._USE_SPEEDUPS = False  # type: ignore[attr-defined]
        yield
    finally:
        for m, flag in zip(modules, saved, strict=True):
            m._USE_SPEEDUPS = flag  # type: ignore[attr-defined]


def _dump(cx: Cortex) -> list[tuple[bytes, bytes]]:
    with cx._kv.read() as txn:
        return list(txn.scan(b""))


def _bench_workload(cx: Cortex) -> None:
    """Batches of the benchmark's memories, then updates, head patches and tombstones."""
    rng = random.Random(7)
    # the stem caches start empty, so the first texts take the lexical index's slow path
    text.STEMS.clear()
    if lexical._STEM_TABLE is not None:
        lexical._STEM_TABLE.clear()
    items = []
    for i in range(600):
        item = BENCH.make_item(rng, i)
        if i % 42 == 24:  # (a Fact) the lexical index's slow paths: non-ASCII, unseen words
            words = f"Zoë's café №{i} 東京 Ελλάδα"
            if i // 42 % 2:
                words = f"Unseen{i}a ascii ONLY {'long' * 20}"
            item = NewMemory(
                data=Fact(statement=words, subject=f"s{i}", predicate="says"),
                tags=item.tags,
                frames=item.frames,
                importance=item.importance,
            )
        if i % 7 == 0:  # non-ASCII text, references and tags on the slow paths
            item = NewMemory(
                data=item.data,
                tags=[*item.tags, f"ünï-{i % 5}"],
                frames=[
                    *item.frames,
                    FrameRef(verb=Verb.FIND, obj_kind=ObjKind.AGENT, obj_ref=f"Zoë {i % 3}"),
                ],
                importance=item.importance,
            )
        items.append(NewMemory(**{**_fields(item), "id": _id(i)}))
    for b in range(0, len(items), 250):
        cx.write_many(items[b : b + 250])
    # options off the accelerated paths: a provenance, other confidences and visibilities, a
    # created_by to normalize, validity and expiry times, caller forms, times at an offset
    later = FIXTURE.START + timedelta(days=400)
    cx.write_many(
        [
            NewMemory(
                data=BENCH.make_data(rng, i),
                id=_id(2000 + i),
                tags=[f"o{i % 3}"],
                confidence=[0.3, 1, 0.5, 0.1][i % 4],
                visibility=["scoped", Visibility.ACTOR_PUBLIC, "private"][i % 3],
                created_by=["agént", "Ω", None, "bot"][i % 4],
                provenance=[None, Provenance(source=SourceKind.DERIVED)][i % 2],
                valid_from=[None, FIXTURE.START][i % 2],
                valid_until=[None, later.astimezone(timezone(timedelta(hours=3)))][i % 3 % 2],
                expires_at=[None, later][i % 2],
                forms=[None, Forms(short=f"s{i}", medium="caller’s words")][i % 5 % 2],
            )
            for i in range(30)
        ]
    )
    # a taken id, and an id given twice: nothing is written, the error names the id
    for batch in (
        [NewMemory(data=BENCH.make_data(rng, 1), id=_id(3000)), items[5]],
        [NewMemory(data=BENCH.make_data(rng, 2), id=_id(3001))] * 2,
    ):
        with pytest.raises(ConflictError, match="already exists") as info:
            cx.write_many(batch)
        assert str(batch[-1].id) in str(info.value)
    for i in range(0, 600, 11):
        cx.update(_id(i), BENCH.make_data(rng, i + 6))
    for i in range(3, 600, 13):
        cx.update_head(_id(i), tags=["patched", f"t{i % 4}"], importance=i % 11)
    for i in range(5, 600, 17):
        cx.tombstone(_id(i), reason="test")
    for i in range(0, 600, 97):
        cx.write(BENCH.make_data(rng, i), id=_id(1000 + i), tags=["single"])


def _fields(item: NewMemory) -> dict[str, Any]:
    return {name: getattr(item, name) for name in item.__struct_fields__}


def _id(n: int) -> MemoryId:
    return MemoryId(bytes.fromhex("019a0000000000000000") + n.to_bytes(6, "big"))


@pytest.mark.parametrize("workload", ["fixture", "bench"])
def test_accelerated_and_reference_paths_write_the_same_bytes(
    tmp_path: Path, workload: str
) -> None:
    fill = FIXTURE.populate if workload == "fixture" else _bench_workload
    dumps = []
    for on in (True, False):
        with (
            accelerators(on),
            Cortex.open(
                tmp_path / f"s-{on}", actor=FIXTURE.ACTOR, clock=FIXTURE.FixedClock()
            ) as cx,
        ):
            fill(cx)
            assert cx.verify().ok
            dumps.append(_dump(cx))
    fast, reference = dumps
    assert len(fast) == len(reference)
    for (kf, vf), (kr, vr) in zip(fast, reference, strict=True):
        assert kf == kr
        assert vf == vr, kf


def test_every_flag_is_switched(tmp_path: Path) -> None:
    """The switch reaches the modules that have accelerators (a new one is picked up)."""
    names = {m.__name__ for m in _flagged_modules()}
    assert {"cortex.model.codec", "cortex.index.text", "cortex.index.lexical"} <= names
    with accelerators(False):
        assert not any(m._USE_SPEEDUPS for m in _flagged_modules())  # type: ignore[attr-defined]
