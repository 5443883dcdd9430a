"""FORMAT 14 (document numbers) tested against its spec, not against the code.

``specs/lexical.md`` version 5 (§4 document numbers, §4a varint blocks, §4b segments by
number, §5 maintenance, §6 tie order, §7 verification) and ``specs/storage.md`` format 14.
The helpers here read and write the stored bytes as the spec describes them (their own varint
and block codecs, the records as plain CBOR maps), so a disagreement between the code and the
spec shows here even when the code's own codecs agree with each other.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import traceback
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import cbor2
import pytest

from cortex import Cortex, CortexError, Fact, MemoryId, NewMemory, StoreFullError
from cortex.index.text import query_terms
from cortex.storage.engines import copy_kv, open_kv
from cortex.storage.kv import LmdbKV
from tests.test_concurrency import _run_spawned

ROOT = Path(__file__).resolve().parent.parent
FIXTURE13 = ROOT / "tests" / "data" / "format13.cortex"

LEX_I = b"lex/i/"
LEX_D = b"lex/d/"
LEX_P = b"lex/p/"
LEX_T = b"lex/t/"
LEX_S = b"lex/s/"
STATS = b"meta/lexical"
LIMIT = 2**32


# Format 21 (storage.md §2 Rows, lexical.md §4 v7) made the document number the memory's row,
# given to every memory and kept by a tombstone, a purge and a rebuild (no renumbering, no
# lex/i/): the format-14 rules it replaced (numbers dropped by a purge, renumbering rebuilds,
# lex/i/ damage, ties by id after a rebuild) are gone from here; tests/test_rows_spec.py and
# tests/test_memory_rows.py test the new ones.

# --- the spec's encodings, written out here ---------------------------------------------------


def seal(payload: bytes) -> bytes:
    return payload + zlib.crc32(payload).to_bytes(4, "big")


def unseal(value: bytes) -> bytes:
    payload = value[:-4]
    assert zlib.crc32(payload).to_bytes(4, "big") == value[-4:]
    return payload


def varint(n: int) -> bytes:
    """Unsigned LEB128, shortest form (lexical.md §4a)."""
    out = bytearray()
    while True:
        low = n & 0x7F
        n >>= 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def read_varint(p: bytes, i: int) -> tuple[int, int]:
    """Decode one varint strictly: the shortest form only, at most 5 bytes."""
    n = shift = 0
    start = i
    while True:
        b = p[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            break
        assert i - start < 5, "a varint longer than 5 bytes"
    assert p[start:i] == varint(n), "a varint not in its shortest form"
    return n, i


def encode_block(postings: list[tuple[int, int, int]]) -> bytes:
    """``block := varint(tf) varint(dl) ( varint(delta) varint(tf) varint(dl) )*``."""
    out = bytearray()
    prev = None
    for docno, tf, dl in postings:
        if prev is not None:
            out += varint(docno - prev)
        out += varint(tf) + varint(dl)
        prev = docno
    return bytes(out)


def decode_block(first: int, payload: bytes) -> list[tuple[int, int, int]]:
    """A block's postings ``(docno, tf, dl)``, checked as §4a says."""
    out: list[tuple[int, int, int]] = []
    i = 0
    docno = first
    while i < len(payload):
        if out:
            delta, i = read_varint(payload, i)
            assert delta >= 1
            docno += delta
        tf, i = read_varint(payload, i)
        dl, i = read_varint(payload, i)
        assert 1 <= tf <= dl < LIMIT and docno < LIMIT
        out.append((docno, tf, dl))
    assert 1 <= len(out) <= 128
    assert encode_block(out) == payload  # one encoding per content
    return out


def posting_key(term: str, docno: int) -> bytes:
    return LEX_P + term.encode() + b"\x00" + docno.to_bytes(4, "big")


def cbor_map(value: bytes, schema: int = 1) -> dict[int, Any]:
    out: dict[int, Any] = cbor2.loads(unseal(value))
    assert out[0] == schema  # schema version
    return out


DOCNO = 3
"""The LexDoc key of the document number: 4 in formats 14 and 15, 3 since format 16 (LexDoc
schema version 2, without the terms: ``lexical.md`` v6)."""


def cbor_seal(record: dict[int, Any]) -> bytes:
    return seal(cbor2.dumps(dict(sorted(record.items())), canonical=True))


def dump(cx: Cortex) -> dict[bytes, bytes]:
    with cx._kv.read() as txn:
        return {bytes(k): bytes(v) for k, v in txn.scan(b"")}


def digest(items: dict[bytes, bytes]) -> str:
    h = hashlib.sha256()
    for k in sorted(items):
        h.update(len(k).to_bytes(4, "big") + k + len(items[k]).to_bytes(4, "big") + items[k])
    return h.hexdigest()


ID = b"id/"


def rows(items: dict[bytes, bytes]) -> dict[bytes, int]:
    """``id/`` (format 21, storage.md §2 Rows): id16 -> the memory's row, its number."""
    out = {}
    for k, v in items.items():
        if k.startswith(ID):
            assert len(k) == len(ID) + 16
            row = unseal(v)
            assert len(row) == 4
            out[k[len(ID) :]] = int.from_bytes(row, "big")
    return out


def numbers(items: dict[bytes, bytes]) -> dict[int, bytes]:
    """The indexed memories' document numbers -> id16 (format 21: a ``LexDoc`` is keyed by
    its memory's row, which is its number; ``id/`` names the memory of each row)."""
    assert not any(k.startswith(LEX_I) for k in items)  # format 21: no lex/i/
    by_row = {row: m for m, row in rows(items).items()}
    out = {}
    for k in items:
        if k.startswith(LEX_D):
            assert len(k) == len(LEX_D) + 4
            n = int.from_bytes(k[len(LEX_D) :], "big")
            out[n] = by_row[n]
    return out


def lexdocs(items: dict[bytes, bytes]) -> dict[bytes, dict[int, Any]]:
    """Every ``LexDoc`` by its memory's id16 (format 21: keyed by row)."""
    by_row = {row: m for m, row in rows(items).items()}
    return {
        by_row[int.from_bytes(k[len(LEX_D) :], "big")]: cbor_map(v, schema=2)
        for k, v in items.items()
        if k.startswith(LEX_D)
    }


def next_docno(items: dict[bytes, bytes]) -> int:
    return int(cbor_map(items[STATS])[5])


def blocks(items: dict[bytes, bytes]) -> dict[str, list[tuple[int, list[tuple[int, int, int]]]]]:
    """Every term's blocks, in key order: ``(key number, postings)``."""
    out: dict[str, list[tuple[int, list[tuple[int, int, int]]]]] = {}
    for k in sorted(items):
        if k.startswith(LEX_P):
            term, first = k[len(LEX_P) : -5].decode(), int.from_bytes(k[-4:], "big")
            assert k[-5] == 0
            out.setdefault(term, []).append((first, decode_block(first, unseal(items[k]))))
    return out


def postings_by_id(items: dict[bytes, bytes]) -> dict[tuple[str, bytes], tuple[int, int]]:
    """The main index by memory id (segments must be folded)."""
    assert not any(k.startswith(LEX_S) for k in items)
    names = numbers(items)
    return {
        (term, names[d]): (tf, dl)
        for term, bl in blocks(items).items()
        for _, ps in bl
        for d, tf, dl in ps
    }


def fact(text: str, subject: str = "s") -> Fact:
    return Fact(statement=text, subject=subject, predicate="p")


def rid(rng: random.Random) -> MemoryId:
    return MemoryId(rng.randbytes(16))


def ids_of(hits: list[tuple[MemoryId, float]]) -> list[MemoryId]:
    return [m for m, _ in hits]


# --- 1. numbers -----------------------------------------------------------------------------


# --- 2. purge erasure -----------------------------------------------------------------------


# --- 3. blocks ------------------------------------------------------------------------------


def _three_blocks(cx: Cortex, rng: random.Random) -> list[MemoryId]:
    ids = [rid(rng) for _ in range(300)]
    cx.write_many(NewMemory(data=fact(f"alpha item {i}"), id=m) for i, m in enumerate(ids))
    cx.merge_lexical()
    return ids


def test_varint_blocks_are_canonical_and_cut_every_128(store_path: Any) -> None:
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        ids = _three_blocks(cx, random.Random(3))
        items = dump(cx)
        bl = blocks(items)  # decoding checks the shortest form and re-encodes each value
        assert [(first, len(ps)) for first, ps in bl["alpha"]] == [(0, 128), (128, 128), (256, 44)]
        for term, term_blocks in bl.items():
            flat = [d for _, ps in term_blocks for d, _, _ in ps]
            assert flat == sorted(set(flat)), term
            for first, ps in term_blocks:
                assert ps[0][0] == first
            df = int(cbor2.loads(unseal(items[LEX_T + term.encode()])))
            assert df == len(flat)
        names = numbers(items)
        docs = lexdocs(items)
        for _, ps in bl["alpha"]:
            for d, tf, dl in ps:
                assert docs[names[d]][2] == dl and 1 <= tf <= dl
        assert names[0] == ids[0].bytes and names[299] == ids[299].bytes
        # later writes append past the last block, whatever the ids
        more = [MemoryId(bytes(16)), MemoryId(b"\x00" * 15 + b"\x01")]
        cx.write_many(NewMemory(data=fact(f"alpha low id {i}"), id=m) for i, m in enumerate(more))
        cx.merge_lexical()
        bl2 = blocks(dump(cx))["alpha"]
        assert [(first, len(ps)) for first, ps in bl2] == [(0, 128), (128, 128), (256, 46)]
        assert bl2[:2] == bl["alpha"][:2]


def _last_alpha(items: dict[bytes, bytes]) -> tuple[bytes, list[tuple[int, int, int]]]:
    key = max(k for k in items if k.startswith(LEX_P + b"alpha\x00"))
    return key, decode_block(int.from_bytes(key[-4:], "big"), unseal(items[key]))


def _bad_payload(kind: str, ps: list[tuple[int, int, int]]) -> bytes:
    good = encode_block(ps)
    d0, tf0, dl0 = ps[0]
    rest = encode_block(ps)[len(varint(tf0) + varint(dl0)) :]
    if kind == "non-canonical varint":
        return bytes([tf0 | 0x80, 0x00]) + varint(dl0) + rest  # tf in two bytes
    if kind == "zero delta":
        return varint(tf0) + varint(dl0) + varint(0) + varint(tf0) + varint(dl0) + rest
    if kind == "trailing byte":
        return good + b"\x00"
    if kind == "tf above dl":
        return varint(dl0 + 1) + varint(dl0) + rest
    if kind == "129 postings":
        return encode_block([(d0 + i, 1, 3) for i in range(129)])
    if kind == "dl of 2**35 - 1":
        return varint(tf0) + b"\xff\xff\xff\xff\x7f" + rest
    if kind == "number 2**32":
        return varint(tf0) + varint(dl0) + varint(LIMIT - d0) + varint(tf0) + varint(dl0)
    if kind == "varint of 6 bytes":
        return b"\x81\x80\x80\x80\x80\x00" + varint(dl0) + rest
    raise AssertionError(kind)


BAD = [
    "non-canonical varint",
    "zero delta",
    "trailing byte",
    "tf above dl",
    "129 postings",
    "varint of 6 bytes",
    "dl of 2**35 - 1",
    "number 2**32",
]


@pytest.mark.parametrize("kind", BAD)
def test_a_damaged_block_is_refused(store_path: Any, kind: str) -> None:
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        ids = _three_blocks(cx, random.Random(4))
        items = dump(cx)
        key, ps = _last_alpha(items)
        bad = seal(_bad_payload(kind, ps))
        cx._kv.write(lambda txn: txn.put(key, bad))
        shown = "lex/p/alpha/256"
        report = cx.verify()
        assert not report.ok
        assert any(p.record == shown for p in report.problems), report.problems[:5]
        damaged = dump(cx)
        with pytest.raises(CortexError):
            cx._lexical_search("alpha", 10)
        # a write that meets the block (a purge folds; a merge rewrites the last block)
        with pytest.raises(CortexError):
            cx.purge(ids[-1], "erase")
        assert digest(dump(cx)) == digest(damaged)
        cx.write(fact("alpha one more"), id=rid(random.Random(5)))  # a segment: may pass
        pending = dump(cx)
        with pytest.raises(CortexError):
            cx.merge_lexical()
        assert digest(dump(cx)) == digest(pending)


def test_a_block_not_at_its_keys_number_is_refused(store_path: Any) -> None:
    """The second block moved to the number of the first block's last posting: the runs
    overlap, and its postings are not those its key names."""
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        _three_blocks(cx, random.Random(6))
        items = dump(cx)
        old = posting_key("alpha", 128)

        def move(txn: Any) -> None:
            txn.delete(old)
            txn.put(posting_key("alpha", 127), items[old])

        cx._kv.write(move)
        report = cx.verify()
        assert not report.ok
        assert any(p.record.startswith("lex/p/alpha/") for p in report.problems)


# --- 4. ties --------------------------------------------------------------------------------


# --- 5. verify ------------------------------------------------------------------------------


# --- 6. the limit ---------------------------------------------------------------------------


def test_the_last_number_and_then_store_full(store_path: Any) -> None:
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        cx.write(fact("one ordinary note"), id=MemoryId(b"\x10" * 16))
        cx.merge_lexical()
        items = dump(cx)
        stats = cbor_map(items[STATS])
        stats[5] = LIMIT - 1
        cx._kv.write(lambda txn: txn.put(STATS, cbor_seal(stats)))
        assert cx.verify().ok
        last = MemoryId(b"\x20" * 16)
        cx.write(fact("the very last number"), id=last)
        [(_, groups)] = segments(dump(cx))  # its ADDs name the number as a u32
        assert {(k, d) for _, es in groups for k, d, _, _ in es} == {(1, LIMIT - 1)}
        cx.merge_lexical()
        items = dump(cx)
        assert numbers(items)[LIMIT - 1] == last.bytes and next_docno(items) == LIMIT
        # one block holds numbers 0 and 2**32 - 1: a delta of 5 varint bytes
        [(first, ps)] = blocks(items)["fact"]
        assert first == 0 and [d for d, _, _ in ps] == [0, LIMIT - 1]
        assert len(varint(LIMIT - 1)) == 5
        assert cx.verify().ok
        before = digest(items)
        with pytest.raises(StoreFullError, match=r"row number"):  # format 21: rows, never reused
            cx.write(fact("one too many"), id=MemoryId(b"\x30" * 16))
        assert digest(dump(cx)) == before
        with pytest.raises(StoreFullError):
            cx.write_many([NewMemory(data=fact("two too many"))])
        assert digest(dump(cx)) == before
        # an update keeps its number and still works; a rebuild keeps the rows (format 21):
        # no room is made, the next write still fails
        cx.update(last, fact("the very last number, changed"))
        assert cx.reindex_lexical() == 2
        assert next_docno(dump(cx)) == LIMIT and cx.verify().ok
        with pytest.raises(StoreFullError, match=r"row number"):
            cx.write(fact("no room"), id=MemoryId(b"\x30" * 16))


# --- 7. migration from format 13 ------------------------------------------------------------


def _format13_index(
    items: dict[bytes, bytes],
) -> tuple[dict[str, dict[bytes, tuple[int, int]]], int, int]:
    """The format-13 combined index by the spec: blocks of 24-byte postings keyed by id, then
    the segments by id; and N, total length."""
    post: dict[str, dict[bytes, tuple[int, int]]] = {}
    for k in sorted(items):
        if k.startswith(LEX_P):
            term = k[len(LEX_P) : -17].decode()
            assert k[-17] == 0
            p = unseal(items[k])
            assert len(p) % 24 == 0
            for i in range(0, len(p), 24):
                m = p[i : i + 16]
                post.setdefault(term, {})[m] = (
                    int.from_bytes(p[i + 16 : i + 20], "big"),
                    int.from_bytes(p[i + 20 : i + 24], "big"),
                )
    for k in sorted(k for k in items if k.startswith(LEX_S)):
        p = unseal(items[k])
        i = 4
        while i < len(p):
            n = int.from_bytes(p[i : i + 2], "big")
            term = p[i + 2 : i + 2 + n].decode()
            i += 2 + n
            count = int.from_bytes(p[i : i + 4], "big")
            i += 4
            for _ in range(count):
                kind, m = p[i], p[i + 1 : i + 17]
                i += 17
                if kind in (1, 2):
                    tf, dl = (
                        int.from_bytes(p[i : i + 4], "big"),
                        int.from_bytes(p[i + 4 : i + 8], "big"),
                    )
                    i += 8
                    post.setdefault(term, {})[m] = (tf, dl)
                else:
                    assert kind == 3
                    del post[term][m]
    stats = cbor_map(items[STATS])
    return post, int(stats[1]), int(stats[2])


def _bm25(
    index: dict[str, dict[bytes, tuple[int, int]]], n: int, total: int, q: str
) -> list[tuple[bytes, float]]:
    import math

    avgdl = total / n
    scores: dict[bytes, float] = {}
    for t in query_terms(q):
        ps = index.get(t, {})
        df = len(ps)
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for m, (tf, dl) in ps.items():
            norm = 1 - 0.75 + 0.75 * dl / avgdl
            scores[m] = scores.get(m, 0.0) + idf * tf * 2.2 / (tf + 1.2 * norm)
    return sorted(scores.items(), key=lambda x: (-x[1], x[0]))


def _copy13(tmp_path: Path, store_path: Any) -> Any:
    dest = tmp_path / "v13"
    dest.mkdir()
    shutil.copy(FIXTURE13 / "data.mdb", dest / "data.mdb")
    if not isinstance(store_path, str):
        return dest
    src = LmdbKV(dest, readonly=True, create=False)
    try:
        copy_kv(src, store_path)
    finally:
        src.close()
    return store_path


def test_migrating_format_13_keeps_every_search(tmp_path: Path, store_path: Any) -> None:
    from cortex.transfer import migrate as M

    where = _copy13(tmp_path, store_path)
    kv = open_kv(where, create=False)
    try:
        with kv.read() as txn:
            before = {bytes(k): bytes(v) for k, v in txn.scan(b"")}
    finally:
        kv.close()
    index, n, total = _format13_index(before)
    assert n > 30
    vocab = Counter({t: len(ps) for t, ps in index.items() if ps})
    queries = ["ferry", "tea garden", "Genève", "ferry rewritten", "ada lives", "note"]
    queries += [t for t, _ in vocab.most_common(8)]
    queries += [
        f"{a} {b}"
        for (a, _), (b, _) in zip(vocab.most_common(6), vocab.most_common(12)[6:], strict=True)
    ]
    want = {q: _bm25(index, n, total, q)[:15] for q in queries}
    assert sum(len(w) for w in want.values()) > 50
    M.migrate(where)
    with Cortex.open(where, actor="checker", as_owner=True) as cx:
        report = cx.verify()
        assert report.ok, report.problems
        for q in queries:
            got = cx._lexical_search(q, 15)
            # the same scores in the same order; ties (equal scores) by row since format 21,
            # by id before: compared as sets of equal scores
            assert len(got) == len(want[q]), q
            for (_, s), (_, w) in zip(got, want[q], strict=True):
                assert abs(s - w) <= 1e-9 * max(1.0, abs(w))

            def groups(pairs: Any) -> list[set[bytes]]:
                out: list[tuple[float, set[bytes]]] = []
                for m, sc in pairs:
                    if out and abs(out[-1][0] - sc) <= 1e-9 * max(1.0, abs(sc)):
                        out[-1][1].add(m)
                    else:
                        out.append((sc, {m}))
                return [ms for _, ms in out]

            g_got = groups([(m.bytes, sc) for m, sc in got])
            g_want = groups(want[q])
            assert g_got[:-1] == g_want[:-1], q  # the last group may be cut at the limit


# --- 8. several processes -------------------------------------------------------------------


def docno_writer(path: str, k: int, *, n: int, start: Any, out: str) -> None:
    """A spawned process: write ``n`` memories with random ids, singly and in batches."""
    result: dict[str, Any]
    try:
        rng = random.Random(1000 + k)
        written: list[str] = []
        with Cortex.open(path, actor=f"w{k}", as_owner=True) as cx:
            if not start.wait(60):
                raise RuntimeError("no start signal")
            i = 0
            while i < n:
                if i % 3 == 0:
                    batch = [(rid(rng), i + j) for j in range(min(3, n - i))]
                    cx.write_many(
                        NewMemory(data=fact(f"shared word uq{k}x{j}"), id=m) for m, j in batch
                    )
                    written += [m.bytes.hex() for m, _ in batch]
                    i += len(batch)
                else:
                    m = rid(rng)
                    cx.write(fact(f"shared word uq{k}x{i}"), id=m)
                    written.append(m.bytes.hex())
                    i += 1
        result = {"k": k, "ids": written}
    except BaseException:
        result = {"k": k, "error": traceback.format_exc()}
    Path(out).write_text(json.dumps(result))


def test_processes_writing_at_once_get_distinct_numbers(tmp_path: Path, store_path: Any) -> None:
    path = str(store_path)
    Cortex.open(path, actor="owner", as_owner=True).close()
    writers, n = 3, 30
    results = _run_spawned(docno_writer, path, writers, tmp_path, n=n)
    errors = [r["error"] for r in results if "error" in r]
    assert not errors, errors[0]
    with Cortex.open(path, actor="checker", as_owner=True) as cx:
        report = cx.verify()
        assert report.ok, report.problems
        cx.merge_lexical()
        items = dump(cx)
        names = numbers(items)
        total = writers * n
        assert sorted(names) == list(range(total)) and next_docno(items) == total
        assert len(set(names.values())) == total
        assert {m: d[DOCNO] for m, d in lexdocs(items).items()} == {m: d for d, m in names.items()}
        for r in results:
            for i, h in enumerate(r["ids"]):
                assert ids_of(cx._lexical_search(f"uq{r['k']}x{i}", 3)) == [
                    MemoryId(bytes.fromhex(h))
                ]


# --- segments by document number (lexical.md §4b) -------------------------------------------


def encode_segment(groups: list[tuple[str, list[tuple[int, int, int, int]]]]) -> bytes:
    """``count:u32 group+``; a group ``term_len:u16 term n:u32 entry[n]``; an entry
    ``kind:u8 docno:u32 (tf:u32 dl:u32)`` (tf and dl for kinds 1 and 2)."""
    body = bytearray()
    count = 0
    for term, entries in groups:
        t = term.encode()
        body += len(t).to_bytes(2, "big") + t + len(entries).to_bytes(4, "big")
        for kind, docno, tf, dl in entries:
            body += bytes([kind]) + docno.to_bytes(4, "big")
            if kind in (1, 2):
                body += tf.to_bytes(4, "big") + dl.to_bytes(4, "big")
            count += 1
    return count.to_bytes(4, "big") + bytes(body)


def decode_segment(p: bytes) -> list[tuple[str, list[tuple[int, int, int, int]]]]:
    """A segment's groups, checked as §4b says (and re-encoded to the same bytes)."""
    count = int.from_bytes(p[:4], "big")
    i = 4
    groups: list[tuple[str, list[tuple[int, int, int, int]]]] = []
    while i < len(p):
        n = int.from_bytes(p[i : i + 2], "big")
        term = p[i + 2 : i + 2 + n].decode()
        assert 1 <= n <= 256 and "\x00" not in term
        i += 2 + n
        k = int.from_bytes(p[i : i + 4], "big")
        i += 4
        assert k >= 1
        entries = []
        for _ in range(k):
            kind, docno = p[i], int.from_bytes(p[i + 1 : i + 5], "big")
            i += 5
            tf = dl = 0
            if kind in (1, 2):
                tf, dl = (
                    int.from_bytes(p[i : i + 4], "big"),
                    int.from_bytes(p[i + 4 : i + 8], "big"),
                )
                i += 8
                assert 1 <= tf <= dl
            else:
                assert kind == 3
            entries.append((kind, docno, tf, dl))
        assert [e[1] for e in entries] == sorted({e[1] for e in entries})
        groups.append((term, entries))
    assert [g[0].encode() for g in groups] == sorted({g[0].encode() for g in groups})
    assert count == sum(len(e) for _, e in groups) >= 1
    assert encode_segment(groups) == p
    return groups


def segments(items: dict[bytes, bytes]) -> list[tuple[int, list[tuple[str, list[Any]]]]]:
    out = []
    for k in sorted(items):
        if k.startswith(LEX_S):
            assert len(k) == len(LEX_S) + 8
            out.append((int.from_bytes(k[len(LEX_S) :], "big"), decode_segment(unseal(items[k]))))
    return out


def combined(items: dict[bytes, bytes]) -> dict[tuple[str, bytes], tuple[int, int]]:
    """The combined index by id: the blocks, then every segment in order (§4b)."""
    names = numbers(items)
    held: dict[tuple[str, int], tuple[int, int]] = {
        (term, d): (tf, dl)
        for term, bl in blocks(items).items()
        for _, ps in bl
        for d, tf, dl in ps
    }
    for _, groups in segments(items):
        for term, entries in groups:
            for kind, d, tf, dl in entries:
                if kind == 1:
                    assert (term, d) not in held
                    held[(term, d)] = (tf, dl)
                elif kind == 2:
                    assert (term, d) in held
                    held[(term, d)] = (tf, dl)
                else:
                    del held[(term, d)]
    return {(term, names[d]): v for (term, d), v in held.items()}


def test_segments_name_document_numbers(store_path: Any) -> None:
    x, y, z = MemoryId(b"\xee" * 16), MemoryId(b"\x11" * 16), MemoryId(b"\x77" * 16)
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        items = dump(cx)
        assert cbor_map(items[STATS]) == {0: 1, 1: 0, 2: 0, 3: 0, 4: 0, 5: 0}
        cx.write(fact("kettle boils water"), id=x)
        cx.write(fact("kettle whistles loudly"), id=y)
        cx.write(fact("teapot water"), id=z)
        items = dump(cx)
        segs = segments(items)
        assert [s for s, _ in segs] == [0, 1, 2]
        for seq, groups in segs:
            assert {d for _, es in groups for _, d, _, _ in es} == {seq}  # x 0, y 1, z 2
            assert {k for _, es in groups for k, _, _, _ in es} == {1}  # ADDs only
        docs = lexdocs(items)
        for m, n in ((x, 0), (y, 1), (z, 2)):
            assert docs[m.bytes][DOCNO] == n
            assert all(dl == docs[m.bytes][2] for _, es in segs[n][1] for _, _, _, dl in es)
        cx.update(x, fact("kettle boils milk"))  # keeps kettle, boil; drops water; adds milk
        cx.tombstone(y, "gone")
        items = dump(cx)
        segs = segments(items)
        assert [s for s, _ in segs] == [0, 1, 2, 3, 4]
        upd = {t: es for t, es in segs[3][1]}
        assert [e[:2] for e in upd["milk"]] == [(1, 0)]
        assert [e[:2] for e in upd["water"]] == [(3, 0)]
        assert [e[:2] for e in upd["kettl"]] == [(2, 0)]
        assert {(k, d) for _, es in segs[4][1] for k, d, _, _ in es} == {(3, 1)}
        pending = combined(items)
        # df: the lex/t/ value (none yet) + ADDs - DELs
        assert cx.merge_lexical() == 5
        items = dump(cx)
        assert segments(items) == []
        assert postings_by_id(items) == pending
        assert next_docno(items) == 3 and sorted(numbers(items)) == [0, 2]
        df = {
            t: int(cbor2.loads(unseal(v)))
            for k, v in items.items()
            if k.startswith(LEX_T)
            for t in [k[len(LEX_T) :].decode()]
        }
        assert df == Counter(t for t, _ in pending)
        assert cx.verify().ok
        cx.write(fact("a new kettle"), id=MemoryId(b"\x05" * 16))
        assert [s for s, _ in segments(dump(cx))] == [0]  # numbered from 0 again after a fold


SEG_DAMAGES = [
    "numbers not ascending",
    "kind 4",
    "trailing byte",
    "count wrong",
    "tf above dl",
    "ADD over a posting",
    "DEL of none",
    "SET of none",
    "a gap in the numbers",
    "a key of 7 bytes",
]


@pytest.mark.parametrize("damage", SEG_DAMAGES)
def test_a_damaged_segment_is_refused(store_path: Any, damage: str) -> None:
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        cx.write_many(
            NewMemory(data=fact(f"lantern {i}"), id=MemoryId(bytes([i]) * 16)) for i in range(1, 5)
        )
        cx.merge_lexical()
        cx.write(fact("lantern five"), id=MemoryId(b"\x09" * 16))  # segment 0, number 4
        items = dump(cx)
        [(_, groups)] = segments(items)
        key = LEX_S + (0).to_bytes(8, "big")
        lantern = dict(groups)["lantern"]
        (_, d4, tf, dl) = lantern[0]
        assert d4 == 4
        structural = damage in (
            "numbers not ascending",
            "kind 4",
            "trailing byte",
            "count wrong",
            "tf above dl",
        )
        if damage == "numbers not ascending":
            bad = encode_segment([("lantern", [(1, 4, tf, dl), (1, 3, tf, dl)])])
        elif damage == "kind 4":
            bad = encode_segment([("lantern", [(1, 4, tf, dl)])])
            bad = bad[: 4 + 2 + 7 + 4] + b"\x04" + bad[4 + 2 + 7 + 4 + 1 :]
        elif damage == "trailing byte":
            bad = unseal(items[key]) + b"\x00"
        elif damage == "count wrong":
            p = unseal(items[key])
            bad = (int.from_bytes(p[:4], "big") + 1).to_bytes(4, "big") + p[4:]
        elif damage == "tf above dl":
            bad = encode_segment([("lantern", [(1, 4, dl + 1, dl)])])
        elif damage == "ADD over a posting":
            bad = encode_segment([("lantern", [(1, 0, tf, dl), (1, 4, tf, dl)])])
        elif damage == "DEL of none":
            bad = encode_segment([("lantern", [(1, 4, tf, dl)]), ("zzghost", [(3, 1, 0, 0)])])
        elif damage == "SET of none":
            bad = encode_segment([("lantern", [(1, 4, tf, dl)]), ("zzghost", [(2, 1, 1, dl)])])
        else:
            bad = b""

        def harm(txn: Any) -> None:
            if damage == "a gap in the numbers":
                txn.delete(key)
                txn.put(LEX_S + (1).to_bytes(8, "big"), items[key])
            elif damage == "a key of 7 bytes":
                txn.delete(key)
                txn.put(LEX_S + (0).to_bytes(7, "big"), items[key])
            else:
                txn.put(key, seal(bad))

        cx._kv.write(harm)
        report = cx.verify()
        assert not report.ok
        named = ("lex/s/", LEX_S.hex())  # a key that does not parse is shown in hex
        assert any(p.record.startswith(named) for p in report.problems), report.problems
        if structural:
            damaged = dump(cx)
            with pytest.raises(CortexError):
                cx._lexical_search("lantern", 10)
            with pytest.raises(CortexError):
                cx.merge_lexical()
            assert digest(dump(cx)) == digest(damaged)


# --- blocks cut again where a change falls (lexical.md §4a) ---------------------------------


def test_a_change_cuts_only_its_block_again(store_path: Any) -> None:
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        ids = _three_blocks(cx, random.Random(8))
        items = dump(cx)
        by_no = {n: MemoryId(m) for n, m in numbers(items).items()}
        cx.tombstone(by_no[0], "first of the first block")
        cx.tombstone(by_no[130], "inside the second")
        cx.merge_lexical()
        bl = blocks(dump(cx))["alpha"]
        assert [(f, len(ps)) for f, ps in bl] == [(1, 127), (128, 127), (256, 44)]
        cx.write_many(
            NewMemory(data=fact(f"alpha more {i}"), id=rid(random.Random(1000 + i)))
            for i in range(100)
        )
        cx.merge_lexical()
        bl2 = blocks(dump(cx))["alpha"]
        assert [(f, len(ps)) for f, ps in bl2] == [(1, 127), (128, 127), (256, 128), (384, 16)]
        assert bl2[:2] == bl[:2]
        for n in range(128, 256):
            if n != 130:
                cx.tombstone(by_no[n], "empty the second block")
        cx.merge_lexical()
        bl3 = blocks(dump(cx))["alpha"]
        assert [(f, len(ps)) for f, ps in bl3] == [(1, 127), (256, 128), (384, 16)]
        assert cx.verify().ok
        assert len(ids) == 300


# --- more of the limit and of damaged numbers -----------------------------------------------


def test_a_batch_that_would_need_number_2_32_writes_nothing(store_path: Any) -> None:
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        cx.write(fact("ordinary"), id=MemoryId(b"\x10" * 16))
        cx.merge_lexical()
        stats = cbor_map(dump(cx)[STATS])
        stats[5] = LIMIT - 1
        cx._kv.write(lambda txn: txn.put(STATS, cbor_seal(stats)))
        before = digest(dump(cx))
        with pytest.raises(StoreFullError):
            cx.write_many([NewMemory(data=fact(f"batch {i}")) for i in range(2)])
        assert digest(dump(cx)) == before
        cx.write_many([NewMemory(data=fact("just one"), id=MemoryId(b"\x40" * 16))])
        cx.merge_lexical()
        assert numbers(dump(cx))[LIMIT - 1] == b"\x40" * 16 and cx.verify().ok


def test_a_text_query_breaks_ties_by_id(store_path: Any) -> None:
    """query.md §1.8: ``score`` order breaks ties by id ascending, above the lexical list's own
    tie order (the document number): the two layers differ on purpose."""
    from cortex import Query

    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        ms = [MemoryId(bytes([b]) * 16) for b in (0xC0, 0x90, 0x30, 0x60)]
        for m in ms:
            cx.write(fact("identical words here"), id=m)
        assert ids_of(cx._lexical_search("identical words", 10)) == ms
        hits = cx.find(Query(text="identical words", limit=10)).hits
        assert [h.memory.id for h in hits] == sorted(ms)
