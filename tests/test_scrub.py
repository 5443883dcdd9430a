"""cortex.storage.scrub: LMDB pages read directly, zeroed without changing what LMDB reads."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from cortex.storage import scrub as S
from cortex.storage.kv import LmdbKV, WriteTxn


def _mutate(kv: LmdbKV, model: dict[bytes, bytes], rng: random.Random, rounds: int) -> None:
    """Puts (some of them large: overflow pages), overwrites and deletes, one txn each round."""

    def step(txn: WriteTxn) -> None:
        for _ in range(rng.randint(1, 60)):
            r = rng.random()
            key = b"k%05d" % rng.randrange(3000)
            if r < 0.55:
                size = rng.choice((5, 40, 300, 1500)) if rng.random() < 0.95 else 9000
                value = bytes([rng.randrange(1, 256)]) * size
                txn.put(key, value)
                model[key] = value
            elif key in model:
                txn.delete(key)
                del model[key]

    for _ in range(rounds):
        kv.write(step)


def _layout(kv: LmdbKV) -> S.Layout:
    return kv.inspect(lambda buf, layout: layout)


def test_the_layout_accounts_for_every_page(tmp_path: Path) -> None:
    kv = LmdbKV(tmp_path / "kv")
    try:
        _mutate(kv, {}, random.Random(1), 80)
        layout = _layout(kv)
        info = kv._env.info()
        assert layout.meta.txnid == info["last_txnid"]
        assert layout.meta.last_pg == info["last_pgno"]
        stat = kv._env.stat()
        assert layout.meta.main.entries == stat["entries"]
        assert layout.meta.main.leaf == stat["leaf_pages"]
        assert layout.meta.main.overflow == stat["overflow_pages"]
        pages = [p for ps in layout.free.values() for p in ps]
        pages += layout.branch.tolist() + layout.leaf.tolist()
        pages += [p for first, n in layout.runs for p in range(first, first + n)]
        assert sorted(pages) == list(range(2, layout.meta.last_pg + 1))
        assert layout.runs and len(layout.values) == sum(
            1 for first, _ in layout.runs if first in {v for v, _ in layout.values}
        )
    finally:
        kv.close()


@pytest.mark.parametrize("seed", range(6))
def test_zeroing_keeps_every_value_and_clears_every_unused_byte(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    kv = LmdbKV(tmp_path / "kv")
    model: dict[bytes, bytes] = {}
    try:
        for _ in range(5):
            _mutate(kv, model, rng, rng.randint(1, 30))
            counts, _ = kv.zero_unused()
            assert counts.free_pages > 0 or counts.held_pages > 0
            with kv.read() as txn:
                assert dict(txn.scan(b"")) == model
            # nothing unused is left but pages the previous meta page's tree may still read
            assert kv.inspect(lambda buf, layout: S.unused_ranges(buf, layout)) == []
    finally:
        kv.close()
    again = LmdbKV(tmp_path / "kv")  # and LMDB opens it as before
    try:
        with again.read() as txn:
            assert dict(txn.scan(b"")) == model
    finally:
        again.close()


def test_regions(tmp_path: Path) -> None:
    kv = LmdbKV(tmp_path / "kv")
    try:
        kv.write(lambda txn: [txn.put(b"a%04d" % i, b"small-%04d" % i) for i in range(500)])
        kv.write(lambda txn: txn.put(b"big", b"B" * 20000))
        data = (tmp_path / "kv" / "data.mdb").read_bytes()

        def regions(buf: Any, layout: S.Layout) -> tuple[str, str, bytes | None, str]:
            small = data.index(b"small-0250")
            big = data.index(b"B" * 100)
            return (
                layout.region(buf, small),
                layout.region(buf, big),
                layout.node_key(buf, small),
                layout.region(buf, 10),
            )

        assert kv.inspect(regions) == ("node", "overflow", b"a0250", "meta")
    finally:
        kv.close()


def test_a_file_that_does_not_parse_is_refused(tmp_path: Path) -> None:
    kv = LmdbKV(tmp_path / "kv")
    try:
        _mutate(kv, {}, random.Random(3), 20)
        leaf = int(_layout(kv).leaf[0])
    finally:
        kv.close()
    raw = bytearray((tmp_path / "kv" / "data.mdb").read_bytes())
    psize = 4096
    S.read_layout(bytes(raw), psize, len(raw), 1)  # as it is, it parses
    raw[psize * leaf + 10] = 0x80  # a page in use that is neither branch, leaf nor overflow
    with pytest.raises(S.LayoutError, match="neither branch, leaf nor overflow"):
        S.read_layout(bytes(raw), psize, len(raw), 1)
    raw[16:20] = b"\0\0\0\0"  # the first meta page's magic
    with pytest.raises(S.LayoutError, match="meta pages"):
        S.read_layout(bytes(raw), psize, len(raw), 1)
