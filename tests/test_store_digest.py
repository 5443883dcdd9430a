"""The bytes a deterministic store holds, and the golden vectors, are pinned by digest.

``tools/store_digest.py`` builds a store with a fixed clock and fixed ids through every kind of
write and hashes every key and value of its LMDB environment. Any change to a stored byte —
meant (a FORMAT change: record the new digests with its migration) or not — fails here, on the
C accelerator and on the pure-Python path alike.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "store_digest.py"

# FORMAT 21 (issue 18: memories keyed by a row number). Was 81d79d7a… at format 20 (main's
# code), 6276 keys; now 6289: every memory has an id/ record (id16 -> its row) and lex/i/ is
# gone; m/, mv/, vec/, sal/ and lex/d/ are keyed by the memory's row (the same values: a head
# still names its memory, a LexDoc's number is its row); the postings, segments and lex/t/ are
# those of the same numbers (the rows of the live memories are the numbers they had);
# meta/format names format 21 and the feature memory-rows; the journal's init entry says
# "format 21" (so every later entry's prev hash moved). The same keyspaces move in the three
# digests below (at format 20: no embedder ebf3d542…, still clock 923e5fad… and 5824962f…)
# and the folded lex/ digest (15765c4c…: lex/d/ keys by row, no lex/i/). Equal on both paths.
# specs/vectors: counters.json, sensitivity.json and stored_vectors.json give their keys by
# row (VECTORS_DIGEST was d3b5d3f0…).
# FORMAT 20 (issue 18: the index keyspaces in LMDB databases of duplicates). Was 7bcba4ae… at
# format 19 (main's code, dda5dde), with the same 6276 keys (a duplicate read as its head and
# itself joined, with an empty value, as the store reads it); what changed, keyspace by keyspace:
# meta/format names format 20 and the feature index-duplicates; the journal's init entry says
# "format 20" (so every later entry's prev hash moved). idx/ and prov/ are equal, key for key
# (only the B-trees holding them changed). The same two keyspaces move in the three digests
# below (at format 19: no embedder 6c488641…, still clock 739e0278… and 89f32ac8…). Equal on
# both paths.
# FORMAT 19 (issue 18: the heads in an LMDB named database of their own). Was 58869543… at
# format 18 (main's code, c5d767d), with the same 6276 keys, every key and value read from the
# main database and the named ones together; what changed, keyspace by keyspace: meta/format
# names format 19 and the feature head-database; the journal's init entry says "format 19" (so
# every later entry's prev hash moved: the 533 later entries differ only in it and their
# checksum). m/ is equal, value for value (only the B-tree holding it changed). The same two
# keyspaces move in the three digests below (at format 18: no embedder 83461d4e…, still clock
# 67a9b352… and 859a7cae…). Equal on both paths.
# FORMAT 17 (issue 18: a version's medium form as a reference into its data). Was ab25130f… at
# format 16 (main's code, b3e209c), with the same 6276 keys; what changed, keyspace by keyspace:
# mv/ — every version whose medium form holds a text of its data of at least 12 bytes holds the
# medium as [prefix, at, suffix] (Forms key 5) instead of its text, each otherwise equal field for
# field (the 453 versions 143,877 -> 115,938 B); meta/format names format 17 and the feature
# medium-references; the journal's init entry says "format 17" (so every later entry's prev hash
# moved). Every other keyspace (m/ too: heads keep their forms) is equal. The same three
# keyspaces move in the three digests below (at format 16: no embedder f2261ae2…, still clock
# 2bb99a47… and 3256bd42…). Equal on both paths.
# FORMAT 15 (issue 18: compact forms). Was 14641215… at format 14, with the same 6276 keys; what
# changed, keyspace by keyspace (compared with main's code at format 14, be07dbb): m/ and mv/ —
# every head and version whose short form begins its medium form holds the short form as its
# length (Forms key 4, or key 3 when cut with "…") instead of its text, each otherwise equal
# field for field (the 419 heads 117,192 -> 86,194 B, the 453 versions 176,936 -> 143,877 B);
# meta/format names format 15 and the feature compact-forms; the journal's init entry says
# "format 15" (so every later entry's prev hash moved; the entries are otherwise equal). Every
# other keyspace is equal. The same four keyspaces move in the three digests below (no embedder
# 91c2a0fb…, still clock bc291b9d… and 4d52ad60… at format 14). Equal on both paths.
# FORMAT 14 (issue 18: lexical postings keyed by per-store document numbers). Was 17f942f7… at
# format 13 with 6133 keys, now 6276; what changed, keyspace by keyspace (compared with main's
# code at format 13, e01f682): lex/ — 406 new lex/i/ entries (docno -> id16, 30 B each), each
# lex/d/ LexDoc holds its docno (key 4), the posting blocks are keyed by term + first docno and
# hold varint postings, up to 128 (645 blocks and 203,297 B of keys and values at format 13, now
# 382 and 29,958 B), the 20 pending lex/s/ segments name docnos (u32) instead of ids (11,120 ->
# 7,232 B), lex/t/ is equal; meta/ — meta/lexical holds next_docno (key 5) and meta/format names
# format 14 and the feature lexical-docnos; the journal's init entry says "format 14" (so every
# later entry's prev hash moved; the entries are otherwise equal). Every other keyspace (er/
# too: a purge's erasure record holds no posting bytes) is equal. The same three keyspaces move
# in the three digests below (no embedder b6296d39…, still clock 88f27cc3… and 657ea774… at
# format 13). Equal on both paths.
# FORMAT 13 (issue 18: vec/ records in float16 by default). Was d3171f43… at format 12, with
# the same 6133 keys; what changed, keyspace by keyspace (compared with the code at format 12,
# bced963): vec/ — each of the 406 records holds float16 (key 5, true) and its vector's bytes are
# the format-12 float32 values rounded to float16 (numpy's round to nearest even), the other
# fields equal; er/ — the two erasure records of purged memories that had a vector hold other
# needles (windows of the float16 bytes; the copy the index cache holds is built from the
# widened values) and so another size, the other fields equal; meta/format names format 13 and
# the feature vectors-float16 (meta/vectors is unchanged: a float16 store writes no key 4); the
# journal's init entry says "format 13" (so every later entry's prev hash moved; the entries are
# otherwise equal). Every other keyspace is equal. Without an embedder only meta/format and the
# journal move (no embedder 2df01f05…, still clock 0b47db7a… and 2222c419… at format 12). Equal
# on both paths.
# FORMAT 12 (issue 14: the claim index holds only current memories; issue 20: a use-counter
# record names its memory). Was 1aa578c4… at format 11 with 6136 keys, now 6133; what changed,
# keyspace by keyspace (compared with the code at format 11, 0ea9b0f): idx/ — the 3 idx/claim/
# entries marked superseded ("s") are gone, every other entry is equal; sal/ — each record's
# payload is its memory's id16 followed by the same CBOR as before; meta/format names format 12
# and the features claim-index-current and counters-name-their-memory; the journal's
# init entry says "format 12" (so every later entry's prev hash moved; the entries are otherwise
# equal). Every other keyspace is equal. The same four keyspaces move in the three digests below
# (no embedder dd1d1f64…, still clock 8c728ccb… and 2f45f3fa… at format 11). Equal on both paths.
# FORMAT 11 (issue 20: a head records that its memory has use counters). Was 8b338fcf… at
# format 10, with the same 6136 keys; what changed, keyspace by keyspace (compared with main's
# code at format 10): m/ — the 11 heads of the memories with a sal/ record (attested, accessed
# or confirmed) hold has_counters (key 15, true), each otherwise equal field for field; sal/ is
# unchanged; meta/format names format 11 and the feature counters-in-heads; the journal's init
# entry says "format 11" (so every later entry's prev hash moved; the entries are otherwise
# equal). Every other keyspace is equal. The same three keyspaces move in the three digests
# below (no embedder 62d60609…, still clock 98ad896d… and dbd6163f… at format 10). Equal on
# both paths.
# FORMAT 10 (issue 18: lexical posting segments). Was 6e519560… with 6188 keys at format 9;
# what changed, keyspace by keyspace (compared with main's code at format 9): lex/ holds the
# writes' posting segments (lex/s/) and, below them, the blocks and lex/t/ entries of the
# commits that folded (6136 keys: the pending segments stand for postings not yet in blocks);
# meta/format names format 10 (meta/lexical is unchanged: it counts the combined index); the
# journal's init entry says "format 10" (so every later entry's prev hash moved; the entries are
# otherwise equal). Every other keyspace (er/ too: a purge folds before it records what it
# erases) is equal. Folded (``merge_lexical``), lex/ is byte for byte format 9's: see
# ``test_a_folded_index_is_the_format_9_one`` below. Equal on both paths.
# FORMAT 9 (issue 20): was 0ff6971a… with 6353 keys at format 8: sens/ went (165 keys), the
# heads and episodes it labelled hold the level (m/, ep/).
# FORMAT 16 (issue 18: lex/d/ records without their terms). Was 323762ea… at format 15, with
# the same 6276 keys; what changed, keyspace by keyspace (compared with the code at format 15,
# c61251b, key by key): lex/d/ — all 406 records, now {0: 2, 1: version, 2: length, 3: docno}
# (no terms); meta/format names format 16 and the feature lexical-lean-documents; the journal's
# init entry says "format 16" (so every later entry's prev hash moved: 534 j/ records). Every
# other key is equal, lex/ included. The same keyspaces move in the three digests below
# (no embedder de827ba4…, still clock 02ba5ae0… and cec5865c… at format 15) and in the folded
# lex/ digest (354637c9… at format 15).
# FORMAT 17 (issue 18: j/, lex/d/, lex/i/ and vec/ in LMDB named databases). Was ab25130f… at
# format 16 with the same 6276 keys (the tool reads every database, merged in key order);
# compared keyspace by keyspace with the code at format 16 (c4f4588): meta/format names format
# 17 and the feature keyspace-databases, the journal's init entry says "format 17" (so every
# later entry's prev hash moved); every other keyspace is equal. The same two move in the three
# digests below (no embedder f2261ae2…, still clock 2bb99a47… and 3256bd42… at format 16); the
# folded lex/ digest does not move.
# FORMAT 18 (issue 18: a version's medium form as a reference into its data). Was 644e130e… at
# format 17 with the same 6276 keys; compared key by key with main's code at format 17
# (173b729): mv/ — 444 of the 453 versions, each decoding to the same value (VERSION_V17 before,
# VERSION after) and shorter (27,939 B in all): only their forms' bytes; meta/format names
# format 18 and the feature medium-references; the journal's init entry says "format 18" (so
# every later entry's prev hash moved: 533 j/ records, nothing else in them). Every other key is
# equal, lex/ included. The same keyspaces, the same way, in the three digests below (no
# embedder 6fc27415…, still clock c8dcebef… and c75d229f… at format 17); the folded lex/ digest
# does not move.
# Not a format change: segments hold up to 4,096 entries before a fold (was 1,024, an
# implementation choice, issue 18). The same keys and every keyspace but meta/ equal, lex/
# included; meta/scrub's count moves (5 -> 4): the erasure step commits its mark again while
# branch pages hold separators of erased keys (``refresh_separators``), which depends on where
# the trees' pages split, not on what they hold. Was 220a4fd7… (no embedder 0676c89d…, still
# clock 13f89217… and df01c3ed…); the folded lex/ digest does not move.
STORE_DIGEST = "c78e805dfea3f4b6312ed116d46f915bd3985f7e596794a2fee0eec541ad3a53"
STORE_KEYS = 6289
FOLDED_LEX_DIGEST = "a7539db16d1f3415b5824b454409cb60bfc8b80af383df953ff5779dbb2f1389"
"""The lex/ keyspace once every segment is folded (format 9 to 13: 61213a43…, the same bytes as
a rebuilt index; since format 14 the bytes follow the order of the writes, and a rebuild, which
numbers the live memories in id order, is equal by id only)."""
# Was 79ed87e0… until dedupe without an embedder stopped checking in a read transaction before
# the write's (issue 14): such a write reads the clock once instead of twice (three times when it
# confirms), so the stepping clock's later times moved. Every other byte is the same: the
# digests with a clock that never moves (below) are those of the code before that change.
# At format 8 (before the FORMAT 9 change above, which moves these three for the same reasons)
# ca0891ed…, still clock 66de81b4… and ccbd4b70…; at format 9 7b5cca45…, bf823f0a… and
# 2b44114d… (FORMAT 10 moves them as it moves the store's digest above).
STORE_DIGEST_NO_EMBEDDER = "9f7f9d0a92cfeab58218b8cfc54812ffd86219b7e2ad3ddd5fa26d46902408f4"
STILL_CLOCK_DIGESTS = {
    "hashing": "00f4339ebefb5e162554703dd762612e7b7c6a129cf075d617297d40d11edb45",
    "none": "99a45b7c9517421a10862cc4d1916b22db51430b44b87a857cb2950ea2f221c7",
}
# FORMAT 18 adds specs/vectors/medium_refs.json and notes in forms.json's conventions that its
# versions are as formats 15-17 encode them (was 93e59781…); FORMAT 15 adds
# specs/vectors/forms.json (was bcb84d5e… without it); FORMAT 14 rewrites
# specs/vectors/postings.json (blocks by docno, varints) and segments.json
# (entries by docno) (was 7b546fc7… before); FORMAT 13 adds specs/vectors/stored_vectors.json
# (was 92c68445… without it); FORMAT 11 added
# specs/vectors/counters.json (was 1f24825e… without it); FORMAT 10 added
# segments.json (was 025b327f… without it); every other vector file is unchanged.
VECTORS_DIGEST = "00d9faa959461e987f4986b29d08f190437ee43eb461cda9210fe84ac969f897"


def _tool() -> Any:
    spec = importlib.util.spec_from_file_location("store_digest", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_store_and_vectors_digests_are_the_recorded_ones(tmp_path: Path) -> None:
    out = _tool().measure("hashing", tmp_path)
    assert (out["store"], out["keys"]) == (STORE_DIGEST, STORE_KEYS), out["keyspaces"]
    assert out["vectors"] == out["vectors_built"] == VECTORS_DIGEST


def test_the_store_without_vectors(tmp_path: Path) -> None:
    assert _tool().measure("none", tmp_path)["store"] == STORE_DIGEST_NO_EMBEDDER


@pytest.mark.parametrize("embedder", ["hashing", "none"])
def test_with_a_still_clock_the_bytes_do_not_depend_on_how_often_the_clock_is_read(
    tmp_path: Path, embedder: str
) -> None:
    assert _tool().measure(embedder, tmp_path, still=True)["store"] == STILL_CLOCK_DIGESTS[embedder]


@pytest.mark.parametrize("switch", ["1", None], ids=["pure-python", "accelerated"])
def test_both_paths_store_the_same_bytes(switch: str | None) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CORTEX_NO_SPEEDUPS"}
    if switch is not None:
        env["CORTEX_NO_SPEEDUPS"] = switch
    run = subprocess.run(
        [sys.executable, str(TOOL), "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    out = json.loads(run.stdout)
    assert out["store"] == STORE_DIGEST, out["keyspaces"]
    built = subprocess.run(
        [sys.executable, "-c", "import cortex._speedups"], cwd=ROOT, capture_output=True
    )
    assert out["accelerated"] is (switch is None and built.returncode == 0)


def test_a_folded_index_is_the_pending_one_and_a_rebuilt_one_by_id(tmp_path: Path) -> None:
    """Folding every pending segment (``merge_lexical``) changes the index's keys, not what it
    holds: by memory id it is the combined index before, and the index a rebuild writes."""
    from cortex.index import lexical
    from cortex.storage.kv import LmdbKV

    tool = _tool()
    path = tmp_path / "store.cortex"
    tool.build_store(path, "hashing", False)
    kv = LmdbKV(path, create=False)
    try:
        with kv.read() as txn:
            before = lexical.read_stats(txn)
            pending = lexical.logical(txn)
        assert kv.write(lexical.fold) > 0
        with kv.read() as txn:
            assert lexical.read_stats(txn) == before  # the statistics of the combined index
            assert lexical.logical(txn) == pending
    finally:
        kv.close()
    _, spaces, _ = tool.digest_store(path)
    assert spaces["lex"] == FOLDED_LEX_DIGEST
    from cortex.engine.store import rebuild_lexical

    kv = LmdbKV(path, create=False)
    try:
        kv.write(rebuild_lexical)
        with kv.read() as txn:
            assert lexical.logical(txn) == pending
    finally:
        kv.close()
