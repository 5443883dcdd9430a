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
import multiprocessing
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

ROOT = Path(__file__).resolve().parent.parent
FIXTURE13 = ROOT / "tests" / "data" / "format13.cortex"

LEX_I = b"lex/i/"
LEX_D = b"lex/d/"
LEX_P = b"lex/p/"
LEX_T = b"lex/t/"
LEX_S = b"lex/s/"
STATS = b"meta/lexical"
LIMIT = 2**32


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


def docno_key(n: int) -> bytes:
    return LEX_I + n.to_bytes(4, "big")


def cbor_map(value: bytes) -> dict[int, Any]:
    out: dict[int, Any] = cbor2.loads(unseal(value))
    assert out[0] == 1  # schema version
    return out


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


def numbers(items: dict[bytes, bytes]) -> dict[int, bytes]:
    """``lex/i/``: document number -> id16."""
    out = {}
    for k, v in items.items():
        if k.startswith(LEX_I):
            assert len(k) == len(LEX_I) + 4
            id16 = unseal(v)
            assert len(id16) == 16
            out[int.from_bytes(k[len(LEX_I) :], "big")] = id16
    return out


def lexdocs(items: dict[bytes, bytes]) -> dict[bytes, dict[int, Any]]:
    return {k[len(LEX_D) :]: cbor_map(v) for k, v in items.items() if k.startswith(LEX_D)}


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


def test_numbers_follow_the_writes_and_are_never_given_again(store_path: Any) -> None:
    rng = random.Random(14)
    ids = [rid(rng) for _ in range(12)]
    assert sorted(ids) != ids  # random ids: the write order is not the id order
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        cx.write(fact("first note about tea"), id=ids[0])
        cx.write_many(NewMemory(data=fact(f"note {i} about tea"), id=ids[i]) for i in (1, 2, 3))
        for i in range(4, 12):
            cx.write(fact(f"another note {i}"), id=ids[i])
        cx.merge_lexical()
        items = dump(cx)
        assert numbers(items) == {n: ids[n].bytes for n in range(12)}
        assert {m: d[4] for m, d in lexdocs(items).items()} == {ids[n].bytes: n for n in range(12)}
        assert next_docno(items) == 12
        # an update keeps the number
        cx.update(ids[5], fact("rewritten completely differently"))
        cx.merge_lexical()
        items = dump(cx)
        assert numbers(items)[5] == ids[5].bytes and lexdocs(items)[ids[5].bytes][4] == 5
        assert next_docno(items) == 12
        # tombstone and purge remove the entry; the numbers stay gaps
        cx.tombstone(ids[3], "gone")
        cx.purge(ids[7], "forget")
        cx.purge(ids[3], "forget it too")
        cx.merge_lexical()
        items = dump(cx)
        assert sorted(numbers(items)) == [n for n in range(12) if n not in (3, 7)]
        assert ids[3].bytes not in lexdocs(items) and ids[7].bytes not in lexdocs(items)
        late = rid(rng)
        cx.write(fact("a late note"), id=late)
        cx.merge_lexical()
        items = dump(cx)
        assert numbers(items)[12] == late.bytes and next_docno(items) == 13
        assert cx.verify().ok
        # a rebuild numbers the live memories from 0 in ascending id order
        live = sorted(m.bytes for m in [*ids, late] if m not in (ids[3], ids[7]))
        assert cx.reindex_lexical() == len(live)
        items = dump(cx)
        assert numbers(items) == dict(enumerate(live))
        assert next_docno(items) == len(live)
        assert {m: d[4] for m, d in lexdocs(items).items()} == {m: n for n, m in enumerate(live)}
        assert cx.verify().ok


# --- 2. purge erasure -----------------------------------------------------------------------


def test_a_purge_leaves_no_number_posting_or_lexdoc(store_path: Any, engine: str) -> None:
    rng = random.Random(2)
    keep = [rid(rng) for _ in range(6)]
    gone = rid(rng)
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        cx.write_many(NewMemory(data=fact(f"tea note {i}"), id=m) for i, m in enumerate(keep))
        cx.write(fact("tea zqxsecretterm held here"), id=gone)
        cx.write(fact("tea after"), id=rid(rng))
        cx.merge_lexical()
        before = dump(cx)
        [docno] = [n for n, m in numbers(before).items() if m == gone.bytes]
        doc_value = before[LEX_D + gone.bytes]
        i_value = before[docno_key(docno)]
        cx.purge(gone, "erase")
        after = dump(cx)
        assert docno_key(docno) not in after
        assert LEX_D + gone.bytes not in after
        assert docno not in {d for bl in blocks(after).values() for _, ps in bl for d, _, _ in ps}
        assert not any(m == gone.bytes for (_, m) in postings_by_id(after))
        for k, v in after.items():
            if k.startswith((b"lex/", STATS)):
                assert gone.bytes not in k and gone.bytes not in v, k
                assert b"zqxsecretterm" not in k and b"zqxsecretterm" not in v, k
        assert cx.verify().ok
        assert ids_of(cx._lexical_search("zqxsecretterm", 5)) == []
    if engine == "lmdb":
        data = (Path(store_path) / "data.mdb").read_bytes()
        assert data.count(i_value) == 0  # the lex/i/ record's sealed id16
        assert data.count(doc_value) == 0  # the LexDoc
        assert data.count(b"zqxsecretterm") == 0
        assert data.count(LEX_D + gone.bytes) == 0  # no LexDoc key, not even a stale copy
        # the id's bytes stay where live records hold them (the tombstone head, its versions,
        # the journal, the erasure record: storage.md §6, §11; LMDB keeps copies of those
        # pages for the previous commit), never in a lexical record
        assert gone.bytes in data


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


def test_ties_go_to_the_smaller_number_then_ids_after_a_rebuild(store_path: Any) -> None:
    a = MemoryId(b"\x01" * 16)
    b = MemoryId(b"\xf0" * 16)
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        cx.write(fact("filler about nothing in particular"), id=MemoryId(b"\x80" * 16))
        cx.write(fact("quiet harbour lights"), id=b)  # B first
        cx.write(fact("quiet harbour lights"), id=a)  # A, smaller id, second
        hits = cx._lexical_search("harbour lights", 10)
        assert ids_of(hits) == [b, a] and hits[0][1] == hits[1][1]
        cx.merge_lexical()
        assert ids_of(cx._lexical_search("harbour lights", 10)) == [b, a]
        cx.reindex_lexical()
        assert ids_of(cx._lexical_search("harbour lights", 10)) == [a, b]


# --- 5. verify ------------------------------------------------------------------------------


def _verify_store(cx: Cortex) -> tuple[list[MemoryId], int]:
    rng = random.Random(9)
    ids = [rid(rng) for _ in range(8)]
    cx.write_many(NewMemory(data=fact(f"verify note {i} harbour"), id=m) for i, m in enumerate(ids))
    cx.tombstone(ids[2], "gap")  # number 2 is a gap from now on
    cx.merge_lexical()
    report = cx.verify()
    assert report.ok, report.problems
    return ids, 2


DAMAGES = [
    "missing lex/i entry",
    "two LexDocs with one number",
    "orphan lex/i entry",
    "next_docno not above every number",
    "posting naming no memory",
]


WHERE = {
    "missing lex/i entry": "lex/i/",
    "two LexDocs with one number": "lex/d/",
    "orphan lex/i entry": "lex/i/",
    "next_docno not above every number": "meta/lexical",
    "posting naming no memory": "lex/p/zzorphan/#2",
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_verify_reports_damage_to_the_numbers(store_path: Any, damage: str) -> None:
    with Cortex.open(store_path, actor="t", as_owner=True) as cx:
        ids, gap = _verify_store(cx)
        items = dump(cx)
        docs = lexdocs(items)

        def harm(txn: Any) -> None:
            if damage == "missing lex/i entry":
                txn.delete(docno_key(docs[ids[4].bytes][4]))
            elif damage == "two LexDocs with one number":
                doc = dict(docs[ids[5].bytes])
                doc[4] = docs[ids[4].bytes][4]
                txn.put(LEX_D + ids[5].bytes, cbor_seal(doc))
            elif damage == "orphan lex/i entry":
                txn.put(docno_key(gap), seal(ids[2].bytes))  # names the tombstoned memory
            elif damage == "next_docno not above every number":
                stats = cbor_map(items[STATS])
                stats[5] = max(numbers(items))
                txn.put(STATS, cbor_seal(stats))
            elif damage == "posting naming no memory":
                txn.put(posting_key("zzorphan", gap), seal(encode_block([(gap, 1, 1)])))
                txn.put(LEX_T + b"zzorphan", seal(cbor2.dumps(1)))

        cx._kv.write(harm)
        report = cx.verify()
        assert not report.ok, damage
        records = [p.record for p in report.problems]
        assert any(r.startswith(WHERE[damage]) for r in records), report.problems


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
        cx.merge_lexical()
        items = dump(cx)
        assert numbers(items)[LIMIT - 1] == last.bytes and next_docno(items) == LIMIT
        assert cx.verify().ok
        before = digest(items)
        with pytest.raises(StoreFullError, match=r"reindex|rebuild"):
            cx.write(fact("one too many"), id=MemoryId(b"\x30" * 16))
        assert digest(dump(cx)) == before
        with pytest.raises(StoreFullError):
            cx.write_many([NewMemory(data=fact("two too many"))])
        assert digest(dump(cx)) == before
        # an update keeps its number and still works; the rebuild makes room again
        cx.update(last, fact("the very last number, changed"))
        assert cx.reindex_lexical() == 2
        cx.write(fact("room again"), id=MemoryId(b"\x30" * 16))
        assert next_docno(dump(cx)) == 3 and cx.verify().ok


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
            assert [m.bytes for m, _ in got] == [m for m, _ in want[q]], q
            for (_, s), (_, w) in zip(got, want[q], strict=True):
                assert abs(s - w) <= 1e-9 * max(1.0, abs(w))
        items = dump(cx)
        live = sorted(numbers(items).values())
        assert numbers(items) == dict(enumerate(live)) and next_docno(items) == len(live)


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
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    writers, n = 3, 30
    outs = [tmp_path / f"out-{k}.json" for k in range(writers)]
    procs = [
        ctx.Process(
            target=docno_writer, args=(path, k), kwargs={"n": n, "start": start, "out": str(o)}
        )
        for k, o in enumerate(outs)
    ]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
    results = [json.loads(o.read_text()) for o in outs]
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
        assert {m: d[4] for m, d in lexdocs(items).items()} == {m: d for d, m in names.items()}
        for r in results:
            for i, h in enumerate(r["ids"]):
                assert ids_of(cx._lexical_search(f"uq{r['k']}x{i}", 3)) == [
                    MemoryId(bytes.fromhex(h))
                ]
