"""The key layout (cortex.storage.keys): round trips, byte order = logical order, prefix freedom."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cortex.errors import CodecError
from cortex.model.enums import EdgeType, MemoryType, ObjKind, Verb
from cortex.model.ids import MemoryId
from cortex.model.records import FrameRef
from cortex.storage import keys

U64 = 2**64 - 1

ids = st.binary(min_size=16, max_size=16).map(MemoryId)
u64s = st.integers(0, U64)
micros = st.one_of(st.sampled_from([0, 1, 255, 256, 2**32, U64 - 1, U64]), u64s)
mtypes = st.sampled_from(list(MemoryType))
etypes = st.sampled_from(list(EdgeType))
verbs = st.sampled_from(list(Verb))
kinds = st.sampled_from(list(ObjKind))
tag_text = st.text(min_size=1, max_size=20)
obj_refs = st.text(max_size=40)

ALL_PREFIXES = [
    keys.HEAD,
    keys.ID,
    keys.VERSION,
    keys.IDX_TYPE,
    keys.IDX_TAG,
    keys.IDX_FRAME,
    keys.IDX_ACTOR_OBJ,
    keys.IDX_PIN,
    keys.EDGE_FROM,
    keys.EDGE_TO,
    keys.JOURNAL,
    keys.VEC,
    keys.META,
]


def keyspace_of(key: bytes) -> list[bytes]:
    """Every keyspace prefix ``key`` starts with (the layout demands exactly one)."""
    return [p for p in ALL_PREFIXES if key.startswith(p)]


# one built key of each keyspace, from drawn parts
rows = st.integers(0, 2**32 - 1)

any_key = st.one_of(
    rows.map(keys.head_key),
    ids.map(keys.id_key),
    st.tuples(rows, st.integers(0, U64)).map(lambda a: keys.version_key(*a)),
    st.tuples(mtypes, micros, ids).map(lambda a: keys.type_key(*a)),
    st.tuples(tag_text, mtypes, micros, ids).map(lambda a: keys.tag_key(*a)),
    st.tuples(verbs, kinds, obj_refs, micros, ids).map(lambda a: keys.frame_key(*a)),
    st.tuples(mtypes, micros, ids).map(lambda a: keys.pin_key(*a)),
    st.tuples(verbs, obj_refs, micros, ids).map(lambda a: keys.actor_obj_key(*a)),
    st.tuples(ids, etypes, ids).map(lambda a: keys.edge_from_key(*a)),
    st.tuples(ids, etypes, ids).map(lambda a: keys.edge_to_key(*a)),
    u64s.map(keys.journal_key),
    rows.map(keys.vec_key),
    st.sampled_from(["format", "owner", "cursor.vec"]).map(keys.meta_key),
)


# --- round trips --------------------------------------------------------------------------------


@given(rows)
@example(0)
@example(2**32 - 1)
def test_head_key_round_trip(r: int) -> None:
    """storage.md §2 (format 21): ``m/`` u32(row)."""
    k = keys.head_key(r)
    assert k == b"m/" + r.to_bytes(4, "big")
    assert keys.parse_head_key(k) == r


@given(ids)
def test_id_key_round_trip(i: MemoryId) -> None:
    """storage.md §2 (format 21): ``id/`` id16 -> the memory's row."""
    k = keys.id_key(i)
    assert k == b"id/" + i.bytes
    assert keys.parse_id_key(k) == i


@pytest.mark.parametrize("r", [-1, 2**32])
def test_rows_out_of_u32_range_are_rejected(r: int) -> None:
    for build in (keys.head_key, keys.vec_key, keys.salience_key, keys.lex_doc_key):
        with pytest.raises(ValueError):
            build(r)


@given(rows, u64s)
@example(0, 0).via("smallest")
@example(2**32 - 1, U64).via("largest")
def test_version_key_round_trip(r: int, n: int) -> None:
    k = keys.version_key(r, n)
    assert len(k) == 3 + 4 + 8
    assert k.startswith(keys.version_prefix(r))
    assert keys.parse_version_key(k) == (r, n)


@given(mtypes, micros, ids)
def test_type_key_round_trip(t: MemoryType, us: int, i: MemoryId) -> None:
    entry = keys.parse_type_key(keys.type_key(t, us, i))
    assert entry == (t, us, i)
    assert entry.type is t and entry.created_us == us and entry.id == i


@given(tag_text, mtypes, micros, ids)
def test_tag_key_round_trip(tag: str, t: MemoryType, us: int, i: MemoryId) -> None:
    assert keys.parse_tag_key(keys.tag_key(tag, t, us, i)) == (keys.tag_hash(tag), t, us, i)
    assert keys.tag_key(tag, t, us, i).startswith(keys.tag_prefix(tag, t))
    assert keys.tag_prefix(tag, t).startswith(keys.tag_prefix(tag))


@given(verbs, kinds, obj_refs, micros, ids)
def test_frame_key_round_trip(v: Verb, kind: ObjKind, ref: str, us: int, i: MemoryId) -> None:
    k = keys.frame_key(v, kind, ref, us, i)
    assert k.startswith(keys.frame_prefix(v, kind, ref))
    entry = keys.parse_frame_key(k)
    assert entry == (v, kind, keys.obj_hash(ref), us, i)
    assert entry.created_us == us and entry.id == i


@given(mtypes, micros, ids)
def test_pin_key_round_trip(t: MemoryType, us: int, i: MemoryId) -> None:
    k = keys.pin_key(t, us, i)
    assert k == b"idx/pin/" + bytes((t,)) + us.to_bytes(8, "big") + i.bytes
    entry = keys.parse_pin_key(k)
    assert entry == (t, us, i)
    assert entry.type is t and entry.created_us == us and entry.id == i


@given(verbs, obj_refs, micros, ids)
def test_actor_obj_key_round_trip(v: Verb, ref: str, us: int, i: MemoryId) -> None:
    assert keys.parse_actor_obj_key(keys.actor_obj_key(v, ref, us, i)) == (
        v,
        keys.obj_hash(ref),
        us,
        i,
    )


@given(ids, etypes, ids)
def test_edge_keys_round_trip(src: MemoryId, et: EdgeType, dst: MemoryId) -> None:
    fk, tk = keys.edge_from_key(src, et, dst), keys.edge_to_key(dst, et, src)
    assert fk.startswith(keys.EDGE_FROM + src.bytes)
    assert tk.startswith(keys.EDGE_TO + dst.bytes)
    assert keys.parse_edge_key(fk) == (src, et, dst)
    assert keys.parse_edge_key(tk) == (src, et, dst)


@given(u64s)
@example(0)
@example(U64)
def test_journal_key_round_trip(seq: int) -> None:
    assert keys.parse_journal_key(keys.journal_key(seq)) == seq


def test_vec_and_meta_keys() -> None:
    assert keys.vec_key(258) == b"vec/\x00\x00\x01\x02"
    assert keys.salience_key(258) == b"sal/\x00\x00\x01\x02"
    assert keys.meta_key("format") == b"meta/format"


@pytest.mark.parametrize("name", ["", "a/b", "fermé"])
def test_meta_key_rejects_bad_names(name: str) -> None:
    with pytest.raises(ValueError):
        keys.meta_key(name)


@pytest.mark.parametrize("n", [-1, 2**64])
def test_integers_out_of_u64_range_are_rejected(n: int) -> None:
    with pytest.raises(ValueError):
        keys.journal_key(n)
    with pytest.raises(ValueError):
        keys.version_key(0, n)


def test_hashes_are_sha256_prefixes() -> None:
    import hashlib

    assert keys.tag_hash("a") == hashlib.sha256(b"a").digest()[:8]
    assert keys.obj_hash("svc") == hashlib.sha256(b"svc").digest()[:16]


# --- byte order equals logical order ----------------------------------------------------------


def _agrees(build: Callable[..., bytes], a: tuple[object, ...], b: tuple[object, ...]) -> None:
    ka, kb = build(*a), build(*b)
    la = tuple(x.bytes if isinstance(x, MemoryId) else x for x in a)
    lb = tuple(x.bytes if isinstance(x, MemoryId) else x for x in b)
    assert (ka < kb) == (la < lb)
    assert (ka == kb) == (la == lb)


@given(st.tuples(mtypes, micros, ids), st.tuples(mtypes, micros, ids))
@example((MemoryType.FACT, 255, MemoryId(bytes(16))), (MemoryType.FACT, 256, MemoryId(bytes(16))))
def test_type_keys_order_by_type_created_id(a: tuple[object, ...], b: tuple[object, ...]) -> None:
    _agrees(keys.type_key, a, b)


@given(u64s, u64s)
@example(255, 256)
@example(2**32 - 1, 2**32)
def test_journal_keys_order_by_seq(a: int, b: int) -> None:
    _agrees(keys.journal_key, (a,), (b,))


@given(st.tuples(rows, u64s), st.tuples(rows, u64s))
@example((0, 9), (0, 10))
@example((0, U64), (1, 0))
@example((255, 0), (256, 0))
def test_version_keys_order_by_row_then_n(a: tuple[object, ...], b: tuple[object, ...]) -> None:
    _agrees(keys.version_key, a, b)


@given(rows, rows)
@example(255, 256)
def test_row_keys_order_by_row(a: int, b: int) -> None:
    """Format 21: a new memory's keys come after every other memory's (its row is the next)."""
    for build in (keys.head_key, keys.vec_key, keys.salience_key, keys.lex_doc_key):
        _agrees(build, (a,), (b,))


@given(st.tuples(tag_text, mtypes, micros, ids), st.tuples(tag_text, mtypes, micros, ids))
def test_tag_keys_order_by_hash_type_created_id(
    a: tuple[str, MemoryType, int, MemoryId], b: tuple[str, MemoryType, int, MemoryId]
) -> None:
    ka, kb = keys.tag_key(*a), keys.tag_key(*b)
    la = (keys.tag_hash(a[0]), int(a[1]), a[2], a[3].bytes)
    lb = (keys.tag_hash(b[0]), int(b[1]), b[2], b[3].bytes)
    assert (ka < kb) == (la < lb)


@given(tag_text, mtypes, st.lists(st.tuples(micros, ids), min_size=2, max_size=8))
def test_one_tag_and_type_scans_in_created_order(
    tag: str, t: MemoryType, entries: list[tuple[int, MemoryId]]
) -> None:
    built = sorted(keys.tag_key(tag, t, us, i) for us, i in entries)
    logical = sorted((us, i.bytes) for us, i in entries)
    assert [keys.parse_tag_key(k)[2:] for k in built] == [(us, MemoryId(b)) for us, b in logical]


@given(st.tuples(ids, etypes, ids), st.tuples(ids, etypes, ids))
def test_edge_keys_order_by_src_type_dst(
    a: tuple[MemoryId, EdgeType, MemoryId], b: tuple[MemoryId, EdgeType, MemoryId]
) -> None:
    _agrees(keys.edge_from_key, a, b)
    _agrees(keys.edge_to_key, a, b)


@given(
    st.tuples(verbs, kinds, obj_refs, micros, ids), st.tuples(verbs, kinds, obj_refs, micros, ids)
)
@example(
    (Verb.FIND, ObjKind.SERVICE, "a", 255, MemoryId(bytes(16))),
    (Verb.FIND, ObjKind.SERVICE, "a", 256, MemoryId(bytes(16))),
)
def test_frame_keys_order_by_verb_kind_obj_created_id(
    a: tuple[Verb, ObjKind, str, int, MemoryId], b: tuple[Verb, ObjKind, str, int, MemoryId]
) -> None:
    ka, kb = keys.frame_key(*a), keys.frame_key(*b)
    la = (a[0], a[1], keys.obj_hash(a[2]), a[3], a[4].bytes)
    lb = (b[0], b[1], keys.obj_hash(b[2]), b[3], b[4].bytes)
    assert (ka < kb) == (la < lb)
    assert (ka == kb) == (la == lb)


@given(verbs, kinds, obj_refs, st.lists(st.tuples(micros, ids), min_size=2, max_size=8))
def test_one_frame_scans_in_created_order(
    v: Verb, kind: ObjKind, ref: str, entries: list[tuple[int, MemoryId]]
) -> None:
    built = sorted(keys.frame_key(v, kind, ref, us, i) for us, i in entries)
    logical = sorted(set((us, i.bytes) for us, i in entries))
    assert [keys.parse_frame_key(k)[3:] for k in dict.fromkeys(built)] == [
        (us, MemoryId(b)) for us, b in logical
    ]


@given(st.tuples(mtypes, micros, ids), st.tuples(mtypes, micros, ids))
@example((MemoryType.GOAL, 255, MemoryId(bytes(16))), (MemoryType.GOAL, 256, MemoryId(bytes(16))))
def test_pin_keys_order_by_type_created_id(a: tuple[object, ...], b: tuple[object, ...]) -> None:
    _agrees(keys.pin_key, a, b)


@given(st.tuples(verbs, obj_refs, micros, ids), st.tuples(verbs, obj_refs, micros, ids))
def test_actor_obj_keys_order_by_verb_obj_created_id(
    a: tuple[Verb, str, int, MemoryId], b: tuple[Verb, str, int, MemoryId]
) -> None:
    ka, kb = keys.actor_obj_key(*a), keys.actor_obj_key(*b)
    la = (a[0], keys.obj_hash(a[1]), a[2], a[3].bytes)
    lb = (b[0], keys.obj_hash(b[1]), b[2], b[3].bytes)
    assert (ka < kb) == (la < lb)


# --- prefix freedom ---------------------------------------------------------------------------


def test_keyspace_prefixes_are_prefix_free() -> None:
    for p, q in itertools.permutations(ALL_PREFIXES, 2):
        assert not q.startswith(p), (p, q)
    # the near-misses called out by the layout
    assert not keys.VERSION.startswith(keys.HEAD)
    assert not keys.META.startswith(keys.HEAD)
    assert not keys.EDGE_TO.startswith(keys.EDGE_FROM)
    assert not keys.IDX_TAG.startswith(keys.IDX_TYPE)


@given(any_key)
def test_every_key_belongs_to_exactly_one_keyspace(k: bytes) -> None:
    assert len(keyspace_of(k)) == 1
    assert len(k) <= 511  # LMDB's default maximum key size


@given(rows, rows, u64s)
def test_version_prefix_matches_only_its_own_memory(a: int, b: int, n: int) -> None:
    assert keys.version_key(a, n).startswith(keys.version_prefix(a))
    if a != b:
        assert not keys.version_key(b, n).startswith(keys.version_prefix(a))
    assert not keys.head_key(a).startswith(keys.version_prefix(a))


@given(ids, ids, etypes, ids)
def test_edge_scan_prefixes_match_only_their_endpoint(
    a: MemoryId, b: MemoryId, et: EdgeType, other: MemoryId
) -> None:
    # the store scans EDGE_FROM + id and EDGE_TO + id
    if a != b:
        assert not keys.edge_from_key(b, et, other).startswith(keys.EDGE_FROM + a.bytes)
        assert not keys.edge_to_key(b, et, other).startswith(keys.EDGE_TO + a.bytes)
    assert not keys.edge_to_key(a, et, other).startswith(keys.EDGE_FROM)
    assert not keys.edge_from_key(a, et, other).startswith(keys.EDGE_TO)


@given(any_key, any_key)
def test_no_key_is_a_proper_prefix_of_another(a: bytes, b: bytes) -> None:
    if a != b:
        assert not b.startswith(a)


# --- prefix_end -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prefix", "end"),
    [
        (b"a", b"b"),
        (b"m/", b"m0"),
        (b"a\xff", b"b"),
        (b"a\xfe\xff\xff", b"a\xff"),
        (b"\x00", b"\x01"),
        (b"\xfe", b"\xff"),
    ],
)
def test_prefix_end_examples(prefix: bytes, end: bytes) -> None:
    assert keys.prefix_end(prefix) == end


@pytest.mark.parametrize("prefix", [b"", b"\xff", b"\xff\xff\xff"])
def test_prefix_end_of_nothing_or_all_ff_is_an_error(prefix: bytes) -> None:
    with pytest.raises(ValueError):
        keys.prefix_end(prefix)


@given(st.binary(min_size=1, max_size=8).filter(lambda p: p.strip(b"\xff")), st.binary())
def test_prefix_end_bounds_every_key_with_the_prefix(prefix: bytes, rest: bytes) -> None:
    end = keys.prefix_end(prefix)
    assert prefix < end
    assert prefix + rest < end
    assert not end.startswith(prefix)
    # nothing between the prefix's keys and the end lacks the prefix...
    assert not (end + rest).startswith(prefix)


@given(st.binary(min_size=1, max_size=6).filter(lambda p: p.strip(b"\xff")), st.binary(max_size=8))
def test_prefix_end_is_the_least_upper_bound(prefix: bytes, k: bytes) -> None:
    # every key < end either has the prefix or sorts before it
    end = keys.prefix_end(prefix)
    if k < end:
        assert k.startswith(prefix) or k < prefix
    else:
        assert not k.startswith(prefix)


# --- malformed keys ---------------------------------------------------------------------------

Z = bytes(16)
D = bytes(4)


@pytest.mark.parametrize(
    ("parse", "key"),
    [
        (keys.parse_head_key, b"m/" + bytes(3)),
        (keys.parse_head_key, b"m/" + bytes(5)),
        (keys.parse_head_key, b"m/" + Z),  # format 20: an id16
        (keys.parse_head_key, b"mv/" + bytes(4)),
        (keys.parse_head_key, b""),
        (keys.parse_id_key, b"id/" + bytes(15)),
        (keys.parse_id_key, b"id/" + bytes(4)),
        (keys.parse_version_key, b"mv/" + D + bytes(7)),
        (keys.parse_version_key, b"mv/" + Z + b"/v/" + bytes(8)),  # format 20
        (keys.parse_version_key, b"m/" + D + bytes(9)),
        (keys.parse_type_key, b"idx/type/" + b"\x02" + bytes(8) + bytes(15)),
        (keys.parse_type_key, b"idx/type/" + b"\x00" + bytes(8) + Z),
        (keys.parse_type_key, b"idx/type/" + b"\xff" + bytes(8) + Z),
        (keys.parse_type_key, b"idx/tag/" + b"\x02" + bytes(8) + Z),
        (keys.parse_tag_key, b"idx/tag/" + bytes(8) + b"\x02" + bytes(8) + bytes(17)),
        (keys.parse_tag_key, b"idx/type/" + bytes(8) + b"\x02" + bytes(8) + Z),
        (keys.parse_tag_key, b"idx/tag/" + bytes(8) + bytes(8) + Z),  # format 3: no type
        (keys.parse_tag_key, b"idx/tag/" + bytes(8) + b"\x00" + bytes(8) + Z),
        (keys.parse_frame_key, b"idx/frame/" + b"\x01\x01" + Z),
        (keys.parse_frame_key, b"idx/frame/" + b"\x01\x01" + Z + Z),  # format 2: no time
        (keys.parse_frame_key, b"idx/frame/" + b"\x00\x01" + Z + bytes(8) + Z),
        (keys.parse_frame_key, b"idx/frame/" + b"\x01\x00" + Z + bytes(8) + Z),
        (keys.parse_pin_key, b"idx/pin/" + b"\x02" + bytes(8) + bytes(15)),
        (keys.parse_pin_key, b"idx/pin/" + b"\x00" + bytes(8) + Z),
        (keys.parse_pin_key, b"idx/type/" + b"\x02" + bytes(8) + Z),
        (keys.parse_actor_obj_key, b"idx/actor_obj/" + b"\x01" + Z + bytes(8)),
        (keys.parse_actor_obj_key, b"idx/actor_obj/" + b"\x00" + Z + bytes(8) + Z),
        (keys.parse_edge_key, b"e/from/" + Z + b"\x01" + bytes(15)),
        (keys.parse_edge_key, b"e/to/" + Z + b"\x01" + bytes(17)),
        (keys.parse_edge_key, b"e/from/" + Z + b"\x00" + Z),
        (keys.parse_edge_key, b"e/to/" + Z + b"\xee" + Z),
        (keys.parse_edge_key, b"e/x/" + Z + b"\x01" + Z),
        (keys.parse_journal_key, b"j/" + bytes(7)),
        (keys.parse_journal_key, b"j/" + bytes(9)),
        (keys.parse_journal_key, b"k/" + bytes(8)),
    ],
)
def test_malformed_keys_raise_codec_error(parse: Callable[[bytes], object], key: bytes) -> None:
    with pytest.raises(CodecError):
        parse(key)


@given(any_key, st.data())
def test_truncated_or_extended_keys_never_parse_silently(k: bytes, data: st.DataObject) -> None:
    parsers: dict[bytes, Callable[[bytes], object]] = {
        keys.HEAD: keys.parse_head_key,
        keys.ID: keys.parse_id_key,
        keys.VERSION: keys.parse_version_key,
        keys.IDX_TYPE: keys.parse_type_key,
        keys.IDX_TAG: keys.parse_tag_key,
        keys.IDX_FRAME: keys.parse_frame_key,
        keys.IDX_PIN: keys.parse_pin_key,
        keys.IDX_ACTOR_OBJ: keys.parse_actor_obj_key,
        keys.EDGE_FROM: keys.parse_edge_key,
        keys.EDGE_TO: keys.parse_edge_key,
        keys.JOURNAL: keys.parse_journal_key,
    }
    (space,) = keyspace_of(k)
    parse = parsers.get(space)
    if parse is None:
        return
    parse(k)  # the key as built parses
    cut = data.draw(st.integers(0, len(k) - 1), label="cut")
    with pytest.raises(CodecError):
        parse(k[:cut])
    with pytest.raises(CodecError):
        parse(k + data.draw(st.binary(min_size=1, max_size=4), label="extra"))


_FRAMES = st.lists(
    st.builds(
        FrameRef,
        verb=st.sampled_from(list(Verb)),
        obj_kind=st.sampled_from(list(ObjKind)),
        obj_ref=st.text(min_size=1, max_size=8),
    ),
    max_size=3,
)


@given(
    st.sampled_from(list(MemoryType)),
    st.integers(0, 2**63 - 1),
    st.binary(min_size=16, max_size=16),
    st.tuples(st.lists(st.text(min_size=1, max_size=8), max_size=4), _FRAMES, st.booleans()),
)
def test_index_keys_are_the_single_key_builders(
    t: MemoryType, created: int, raw: bytes, entries: tuple[list[str], list[FrameRef], bool]
) -> None:
    tags, frames, actor_obj = entries
    mid = MemoryId(raw)
    expected = [keys.type_key(t, created, mid)]
    expected += [keys.tag_key(tag, t, created, mid) for tag in tags]
    for f in frames:
        expected.append(keys.frame_key(f.verb, f.obj_kind, f.obj_ref, created, mid))
        if actor_obj:
            expected.append(keys.actor_obj_key(f.verb, f.obj_ref, created, mid))
    assert keys.index_keys(t, created, mid, tags, frames, actor_obj=actor_obj) == expected


# --- the lexical keyspaces: lex/p/ term 0x00 docno, lex/d/ id16, lex/t/ term, lex/i/ docno -----

terms = st.text(
    st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), min_size=1
)


docnos = st.integers(0, 2**32 - 1)


@given(terms, docnos)
@example("a", 0)
@example("caf\u00e9", 2**32 - 1)
def test_lexical_keys_round_trip(term: str, d: int) -> None:
    assert keys.parse_posting_key(keys.posting_key(term, d)) == (term, d)
    assert keys.posting_key(term, d).startswith(keys.posting_prefix(term))
    assert keys.parse_lex_term_key(keys.lex_term_key(term)) == term
    assert keys.parse_lex_doc_key(keys.lex_doc_key(d)) == d


def test_the_lexical_keys_are_the_spec_bytes() -> None:
    """lexical.md §4: ``lex/p/`` term 0x00 u32be(docno), ``lex/d/`` u32be(row) (format 21: the
    document number is the memory's row), ``lex/t/`` term (UTF-8)."""
    assert keys.posting_key("caf\u00e9", 258) == b"lex/p/caf\xc3\xa9\x00\x00\x00\x01\x02"
    assert keys.posting_prefix("caf\u00e9") == b"lex/p/caf\xc3\xa9\x00"
    assert keys.lex_doc_key(258) == b"lex/d/\x00\x00\x01\x02"
    assert keys.lex_term_key("caf\u00e9") == b"lex/t/caf\xc3\xa9"


def test_an_alias_key_is_shown_as_its_text() -> None:
    """storage.md §2: ``ent/a/`` + the normalised alias in UTF-8 (claims.md §10)."""
    assert keys.ENTITY_ALIAS == b"ent/a/"
    assert keys.show_key(b"ent/a/z\xc3\xbcrich") == "ent/a/z\u00fcrich"


@pytest.mark.parametrize("term", ["", "a\x00b"])
def test_lexical_keys_refuse_terms_that_cannot_end_at_a_nul(term: str) -> None:
    with pytest.raises(ValueError):
        keys.posting_prefix(term)
    with pytest.raises(ValueError):
        keys.lex_term_key(term)
    with pytest.raises(ValueError):
        keys.posting_key(term, 0)


@pytest.mark.parametrize(
    "key",
    [
        b"",
        b"lex/p/" + D,  # no term, no NUL
        b"lex/p/" + b"\x00" + D,  # an empty term
        b"lex/p/" + b"a" + D,  # no NUL before the docno
        b"lex/p/" + b"a\x00" + bytes(3),  # a short docno
        b"lex/p/" + b"a\x00" + Z,  # an id where the docno belongs (format 13)
        b"lex/p/" + b"a\x00b\x00" + D,  # a NUL inside the term
        b"lex/p/" + b"\xff\xfe\x00" + D,  # not UTF-8
        b"lex/t/" + b"a\x00" + D,  # another keyspace
        b"lex/x/" + b"a\x00" + D,
    ],
)
def test_malformed_posting_keys_raise_codec_error(key: bytes) -> None:
    """(``D``: a docno's 4 bytes.)"""
    with pytest.raises(CodecError):
        keys.parse_posting_key(key)


@pytest.mark.parametrize(
    "key",
    [b"", b"lex/t/", b"lex/t/a\x00", b"lex/t/\x00a", b"lex/t/\xff", b"lex/p/abc", b"lex/abc"],
)
def test_malformed_term_keys_raise_codec_error(key: bytes) -> None:
    with pytest.raises(CodecError):
        keys.parse_lex_term_key(key)


@pytest.mark.parametrize("key", [b"lex/d/" + bytes(3), b"lex/d/" + Z, b"lex/t/" + D])
def test_malformed_doc_keys_raise_codec_error(key: bytes) -> None:
    with pytest.raises(CodecError):
        keys.parse_lex_doc_key(key)


def test_show_key_reads_every_named_keyspace() -> None:
    i = MemoryId(bytes(range(16)))
    assert keys.show_key(keys.head_key(5)) == "m/5"
    assert keys.show_key(keys.id_key(i)) == f"id/{i}"
    assert keys.show_key(keys.version_key(5, 7)) == "mv/5/7"
    assert keys.show_key(keys.vec_key(5)) == "vec/5"
    assert keys.show_key(keys.salience_key(5)) == "sal/5"
    assert keys.show_key(keys.journal_key(42)) == "j/42"
    assert keys.show_key(keys.posting_key("caf\u00e9", 7)) == "lex/p/caf\u00e9/7"
    assert keys.show_key(keys.lex_docno_key(7)) == "lex/i/7"
    assert keys.show_key(keys.lex_doc_key(5)) == "lex/d/5"
    assert keys.show_key(keys.lex_term_key("word")) == "lex/t/word"
    assert keys.show_key(keys.meta_key("format")) == "meta/format"


@pytest.mark.parametrize(
    "key",
    [
        b"m/" + bytes(15),
        b"mv/" + Z + b"/x/" + bytes(8),
        b"j/" + bytes(3),
        b"lex/p/a" + Z,
        b"lex/i/" + bytes(5),
        b"lex/d/" + bytes(3),
        b"lex/t/a\x00",
        b"meta/caf\xc3\xa9",
        b"vec/" + Z,  # a keyspace show_key does not name
        b"\xff\x00",
        b"",
    ],
)
def test_show_key_falls_back_to_hex(key: bytes) -> None:
    assert keys.show_key(key) == key.hex()


def test_the_keyspaces_of_formats_7_and_8() -> None:
    """``storage.md`` §2: ``ep/`` id16, ``prov/e/`` episode16 memory16, ``idx/claim/`` claim16
    id16, ``sens/m/`` and ``sens/e/`` id16, ``er/`` u64(seq): built, parsed back, shown, and
    a key of the wrong length or prefix refused."""
    e, m = MemoryId(bytes(range(16))), MemoryId(bytes(range(16, 32)))
    claim = bytes(range(100, 116))
    ep = keys.episode_key(e)
    assert ep == b"ep/" + e.bytes and keys.parse_episode_key(ep) == e
    assert keys.show_key(ep) == f"ep/{e}"
    prov = keys.episode_memory_key(e, m)
    assert prov == b"prov/e/" + e.bytes + m.bytes
    assert keys.parse_episode_memory_key(prov) == (e, m)
    assert keys.show_key(prov) == f"prov/e/{e}/{m}"
    ci = keys.claim_index_key(claim, m)
    assert ci == b"idx/claim/" + claim + m.bytes == keys.claim_index_prefix(claim) + m.bytes
    assert keys.parse_claim_index_key(ci) == (claim, m)
    assert keys.show_key(ci) == f"idx/claim/{claim.hex()}/{m}"
    for episode, prefix in ((False, b"sens/m/"), (True, b"sens/e/")):
        sk = keys.sens_key(m, episode=episode)
        assert sk == prefix + m.bytes and keys.parse_sens_key(sk) == (episode, m)
        assert keys.show_key(sk) == f"{prefix.decode()}{m}"
    er = keys.erasure_key(7)
    assert er == b"er/" + (7).to_bytes(8, "big") and keys.show_key(er) == "er/7"
    assert keys.type_key(MemoryType.FACT, 5, m).startswith(b"idx/type/")
    for bad in (claim[:15], claim + b"x"):
        with pytest.raises(ValueError):
            keys.claim_index_prefix(bad)
    parsers: list[tuple[Callable[[bytes], object], bytes]] = [
        (keys.parse_episode_key, ep),
        (keys.parse_episode_memory_key, prov),
        (keys.parse_claim_index_key, ci),
        (keys.parse_sens_key, keys.sens_key(m)),
        (keys.parse_sens_key, keys.sens_key(m, episode=True)),
    ]
    for parse, key in parsers:
        for broken in (key[:-1], key + b"\x00", b"zz/" + key[3:]):
            with pytest.raises(CodecError):
                parse(broken)
            assert keys.show_key(broken) in (broken.hex(), keys.show_key(broken))
        assert keys.show_key(key[:-1]) == key[:-1].hex()  # a damaged key is shown as hex
