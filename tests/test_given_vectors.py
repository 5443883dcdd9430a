"""Vectors from elsewhere (issue 17): ``write(..., vector=)``, ``NewMemory(vector=)``,
``update(..., vector=)`` with the store's declared model, and ``cortex.index.embed.External`` for a
model cortex cannot run (a hosted API): checked for dimension and finiteness, scaled to unit
length, stored exactly as an embedder's output would be, searched by ``near_vector``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cortex import Cortex, NewMemory, Query, ValidationError
from cortex.index.embed import External

from .qsupport import digest_of_store
from .vsupport import DIM, HALF, E, fact, open_store, stored_vector, vec_record

MODEL = "example/hosted-embedding-3"


def _unit(seed: int, dim: int = 8) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(dim)
    return v / np.linalg.norm(v)


def _stored(cx: Cortex, uri: Any) -> np.ndarray:
    rec = vec_record(cx, uri.id)
    assert rec is not None
    return stored_vector(rec)


# -- a store with a local embedder takes a caller's vector instead of computing one -----------


def test_given_vector_is_stored_instead_of_the_embedders(tmp_path: Path) -> None:
    with open_store(tmp_path / "s", embedder=E) as cx:
        mine = E.embed(["something else entirely"])[0]
        u = cx.write(fact("Ada lives in Zurich"), vector=(3.0 * mine).tolist())
        assert _stored(cx, u) == pytest.approx(mine, abs=HALF)  # scaled to unit length
        plain = cx.write(fact("Ada lives in Zurich", subject="ada"))
        assert _stored(cx, plain) == pytest.approx(
            E.embed([cx.resolve(plain).version.forms.medium])[0], abs=HALF
        )
        hits = cx.find(Query(near_vector=mine, limit=1)).hits
        assert hits[0].memory.id == u.id


@pytest.mark.parametrize("scale", [1e-310, 1e-30, 1.0, 1e30, 1e308])
def test_any_length_is_scaled_to_unit(tmp_path: Path, scale: float) -> None:
    with open_store(tmp_path / "s", embedder=E) as cx:
        v = _unit(4, DIM)
        u = cx.write(fact("scaled"), vector=(v * scale).tolist())
        assert _stored(cx, u) == pytest.approx(v, abs=HALF)


def test_given_vector_on_update_and_write_many(tmp_path: Path) -> None:
    with open_store(tmp_path / "s", embedder=E) as cx:
        a, b = _unit(1, DIM), _unit(2, DIM)
        [u1, u2] = cx.write_many(
            [NewMemory(data=fact("one"), vector=a), fact("two")]  # the second is embedded
        )
        assert _stored(cx, u1) == pytest.approx(a, abs=HALF)
        assert vec_record(cx, u2.id) is not None
        v2 = cx.update(u1, fact("one, revised"), vector=b)
        rec = vec_record(cx, u1.id)
        assert rec is not None and rec.version == v2.version == 2
        assert _stored(cx, v2) == pytest.approx(b, abs=HALF)


@pytest.mark.parametrize(
    ("bad", "rule"),
    [
        ([1.0] * (DIM - 1), "shape"),
        ([[1.0] * DIM], "shape"),
        ([0.0] * DIM, "value"),
        ([float("nan")] + [1.0] * (DIM - 1), "value"),
        ([float("inf")] + [1.0] * (DIM - 1), "value"),
        ("a text", "type"),
        (b"\x00" * 4 * DIM, "type"),
        (["x"] * DIM, "type"),
        ({"a": 1}, "type"),
    ],
)
def test_bad_vectors_are_rejected_and_nothing_is_written(
    tmp_path: Path, bad: Any, rule: str
) -> None:
    with open_store(tmp_path / "s", embedder=E) as cx:
        cx.write(fact("before"))
        before = digest_of_store(cx)
        for call in (
            lambda: cx.write(fact("x"), vector=bad),
            lambda: cx.write_many([NewMemory(data=fact("x"), vector=bad)]),
        ):
            with pytest.raises(ValidationError) as info:
                call()
            assert info.value.field.endswith("vector")
            assert info.value.rule == rule
        assert digest_of_store(cx) == before


def test_a_vector_without_a_declared_model_is_refused(tmp_path: Path) -> None:
    with open_store(tmp_path / "s") as cx:
        with pytest.raises(ValidationError, match="declares no vector model") as info:
            cx.write(fact("x"), vector=[1.0, 0.0])
        assert (info.value.field, info.value.rule) == ("vector", "no_model")
        with pytest.raises(ValidationError, match="declares no vector model"):
            cx.write_many([NewMemory(data=fact("x"), vector=[1.0, 0.0])])
        assert cx.verify().memories == 0


# -- External: a model cortex cannot run ------------------------------------------------------


def test_external_model_keeps_and_searches_callers_vectors(tmp_path: Path) -> None:
    ext = External(MODEL, 8)
    with open_store(tmp_path / "s", embedder=ext) as cx:
        uris = [cx.write(fact(f"memory {i}"), vector=_unit(i)) for i in range(10)]
        assert cx.vector_info()["model_id"] == MODEL  # type: ignore[index]
        res = cx.find(Query(near_vector=_unit(3), limit=3))
        assert res.hits[0].memory.id == uris[3].id
        assert res.hits[0].scores["vector"] == pytest.approx(1.0, abs=1e-5)
        # text alone ranks lexically; with near_vector it is hybrid
        lex = cx.find(Query(text="memory 7", limit=3))
        assert set(lex.hits[0].ranks) == {"lexical"}
        both = cx.find(Query(text="memory", near_vector=_unit(7), limit=3))
        assert both.hits[0].memory.id == uris[7].id
        assert "vector" in both.hits[0].ranks
    # reopened with "auto", the store names its own model back
    with open_store(tmp_path / "s", embedder="auto") as cx:
        assert isinstance(cx.embedder, External)
        assert (cx.embedder.model_id, cx.embedder.dim) == (MODEL, 8)
        assert cx.find(Query(near_vector=_unit(5), limit=1)).hits[0].memory.id == uris[5].id
        assert cx.verify().ok


def test_external_model_needs_a_vector_on_every_write(tmp_path: Path) -> None:
    with open_store(tmp_path / "s", embedder=External(MODEL, 8)) as cx:
        u = cx.write(fact("kept"), vector=_unit(0))
        before = digest_of_store(cx)
        with pytest.raises(ValidationError, match="computed outside cortex") as info:
            cx.write(fact("no vector"))
        assert (info.value.field, info.value.rule) == ("vector", "required")
        with pytest.raises(ValidationError, match="computed outside cortex") as info:
            cx.write_many([NewMemory(data=fact("a"), vector=_unit(1)), fact("b")])
        assert info.value.field == "items[1].vector"
        with pytest.raises(ValidationError, match="computed outside cortex"):
            cx.update(u, fact("changed"))
        with pytest.raises(ValidationError, match="near_vector"):
            cx.find(Query(near="anything", limit=1))
        with pytest.raises(ValidationError):
            cx.reindex_vectors()
        assert digest_of_store(cx) == before


def test_external_model_refuses_another_model_or_dimension(tmp_path: Path) -> None:
    with open_store(tmp_path / "s", embedder=External(MODEL, 8)) as cx:
        cx.write(fact("x"), vector=_unit(0))
    for other in (External(MODEL, 16), External("another/model", 8), E):
        with pytest.raises(ValidationError, match="this store holds"):
            open_store(tmp_path / "s", embedder=other)


def test_external_dedupe_compares_the_given_vectors(tmp_path: Path) -> None:
    with open_store(tmp_path / "s", embedder=External(MODEL, 8), dedupe=True) as cx:
        u = cx.write(fact("Ada lives in Zurich"), vector=_unit(0))
        again = cx.write(fact("Ada resides in Zurich"), vector=_unit(0) + 1e-4)
        assert again == u  # cosine ~1: confirmed, nothing new
        other = cx.write(fact("Bob lives in Rome"), vector=_unit(9))
        assert other != u


@pytest.mark.parametrize(
    ("model_id", "dim"), [("", 8), ("   ", 8), (None, 8), ("m", 0), ("m", 4097), ("m", 8.0)]
)
def test_external_declaration_is_checked(model_id: Any, dim: Any) -> None:
    with pytest.raises(ValidationError):
        External(model_id, dim)
