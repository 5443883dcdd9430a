"""Type stub of the optional C accelerator (built from cortex/_c/*.c, see common.h)."""

from collections.abc import Callable, Mapping
from typing import Any

class Reject(ValueError):
    """The bytes are not a canonical record of the plan (the Python decoder says why)."""

class Plan:
    """How to decode one record struct: built by ``StructCodec`` from its field list.

    ``forms``: 1, the Forms record in its compact encoding (format 15, ``codec.FormsCodec``);
    2, a version's, whose medium form may refer into the enclosing record's data, key 4
    (format 18, ``codec.VersionFormsCodec``).
    """

    def __init__(
        self,
        cls: type[Any],
        kwnames: tuple[str, ...],
        schema_version: int | None,
        fields: tuple[tuple[Any, ...], ...],
        *,
        forms: int = 0,
    ) -> None: ...

def decode(plan: Plan, data: bytes | bytearray | memoryview, /) -> Any:
    """Decode canonical CBOR ``data`` into the record ``plan`` describes; raise ``Reject``."""

def read_head(ctx: tuple[Any, ...], mid: bytes, hraw: Any, /) -> Any | None:
    """``Store._head_from`` from a stored value; None where the Python path must decide."""

def read_version(ctx: tuple[Any, ...], mid: bytes, n: Any, vraw: Any, /) -> Any | None:
    """``Store._checked_version`` of version ``n`` (no sha256); None: the Python path decides."""

def read_memory(
    ctx: tuple[Any, ...], mid: bytes, hraw: Any, vkey: Any, vraw: Any, n: Any, /
) -> Any | None:
    """``resolve`` (``n`` >= 1) / ``resolve_latest`` (0) from the values read, or None."""

def read_current(
    ctx: tuple[Any, ...],
    get: Callable[[bytes], Any] | tuple[Any, ...],
    mid: bytes,
    /,
) -> tuple[Any, Any] | None:
    """A memory's head and the version it points at, read with ``get``; or None.

    ``get`` is key -> bytes or None, or a pair ``(get, heads)``: heads read as
    ``get(key, None, heads)`` (their LMDB named database, format 19), versions as ``get(key)``;
    or a triple ``(get, heads, ids)``: the rows (``id/``, format 21) read in ``ids`` too.
    """

def read_rows(
    ctx: tuple[Any, ...],
    get: Callable[[bytes], Any] | tuple[Any, ...],
    rows: list[bytes],
    /,
) -> list[tuple[Any, Any]] | None:
    """The ``(head, version)`` of the memory at each row (its ``id/`` naming it back); or None."""

def memory_of(ctx: tuple[Any, ...], head: Any, version: Any, /) -> Any | None:
    """``Store._memory``: the Memory of a head and a version, data decoded; or None."""

def read_accepted(
    ctx: tuple[Any, ...],
    get: Callable[[bytes], Any] | tuple[Any, ...],
    cursor: Any,
    edge_to: bytes,
    into: bytes,
    types: frozenset[Any],
    tags: tuple[str, ...],
    mid: bytes,
    /,
) -> tuple[Any, Any, bool] | bool | None:
    """``read_current`` and the first filters of a find (``Store._accepted_reader``)."""

def read_page(
    ctx: tuple[Any, ...],
    get: Callable[[bytes], Any] | tuple[Any, ...],
    cursor: Any,
    edge_to: bytes,
    into: bytes,
    types: frozenset[Any],
    tags: tuple[str, ...],
    ids: list[bytes],
    want: int,
    now_us: int,
    decay: dict[Any, Any],
    permanent: Any,
    half_lives: dict[Any, float],
    weights: tuple[float, float, float, float],
    /,
) -> list[tuple[Any, Any, Any | None, float | None]] | None:
    """``read_accepted``, ``salience`` and ``memory_of`` of a page of ids (``newest_first``)."""

def micros(when: Any, /) -> int | None:
    """``to_micros`` of a UTC datetime; None for anything else."""

def salience(
    head: Any,
    now_us: int,
    decay: dict[Any, Any],
    permanent: Any,
    half_lives: dict[Any, Any],
    weights: tuple[Any, Any, Any, Any],
    w_vector: float | None = None,
    vector: float | None = None,
    /,
) -> float | None:
    """``salience_at`` of a head without use counters; None where it declines."""

def newest_ids(
    cursor: Any, prefix: bytes, after: bytes | None, limit: int, head: int = 0, /
) -> tuple[list[bytes], bytes | None] | None:
    """A page of ``created_scan(prefix, True)``'s raw ids and where to go on; None: declined.

    ``head`` > 0: ``cursor`` is of a database of duplicates and ``prefix`` begins with one of
    its keys, ``head`` bytes long.
    """

def ascii_tokens(text: str, /) -> list[str] | None:
    """``tokenize(text)`` for ASCII text; ``None`` when ``text`` is not ASCII."""

def count_terms(terms: list[str], /) -> tuple[list[str], list[int]] | None:
    """Distinct terms in code point order and their counts; ``None`` for a bad item."""

def encode_ascii_texts(items: object, max_chars: int, /) -> bytes | None:
    """The CBOR array of short ASCII text strings ``items``; ``None`` when one is not such."""

def add_postings(
    pending: dict[str, dict[bytes, bytes | None]],
    terms: list[str],
    values: list[bytes],
    raw: bytes,
    /,
) -> None:
    """``pending[term][raw] = value`` for each term and value."""

def block_encode(records: bytes, block_max: int, /) -> bytes | None:
    """A posting block's varint payload from 12-byte records (``postings.block_encode``)."""

def bm25_top(
    plan: list[tuple[float, float, int, list[bytes], list[tuple[bytes, bytes | None]] | None]],
    limit: int,
    k1: float,
    norm_a: float,
    norm_b: float,
    /,
) -> list[tuple[bytes, float]] | None:
    """A text query's ``limit`` best ``(docno4, score)`` (``search_terms``); None if unsure."""

def block_decode(first: int, payload: bytes, block_max: int, /) -> bytes | None:
    """A posting block's 12-byte records from its payload; None when it is not canonical."""

def append_fresh(
    cursor: Any,
    items: list[tuple[bytes, Mapping[bytes, bytes | None] | bytes | bytearray]],
    block_max: int,
    /,
) -> tuple[list[tuple[bytes, bytes]], list[int]]:
    """New postings appended to their terms' last blocks; the puts and the items left over."""

def df_values(cursor: Any, keys: list[bytes], /) -> list[int] | None:
    """The df entries stored under ``keys`` (0 where none); None if one fails its checks."""

def df_updates(
    cursor: Any, items: list[tuple[bytes, int]], /
) -> tuple[list[tuple[bytes, bytes]], list[bytes], int, int] | None:
    """New df entries of a flush: puts, deletes, entries created, deleted; None if unsure."""

def segment_fresh(
    fresh: Mapping[str, bytes | bytearray], /
) -> tuple[bytes, list[tuple[str, list[tuple[int, bytes, bytes | None]]]]] | None:
    """A segment of new postings, payload and groups (``encode_fresh``); None if unsure."""

def segments_folded(
    segments: list[Mapping[str, list[tuple[int, bytes, bytes | None]]]], /
) -> dict[str, tuple[dict[bytes, bytes | None], int, set[bytes] | None]] | None:
    """Every term of the segments combined for a fold (``Overlay.folded``); None if unsure."""

def segment_decode(
    payload: object, /
) -> list[tuple[str, list[tuple[int, bytes, bytes | None]]]] | None:
    """A canonical segment payload's groups (``decode``); None if it is not one."""

def segments_added(
    segments: list[Mapping[str, list[tuple[int, bytes, bytes | None]]]], /
) -> tuple[dict[str, bytearray], dict[str, int]] | None:
    """Segments of additions only as each term's records and count (``Overlay.added``)."""

class StemTable:
    """The token -> stem table of ``ascii_term_counts`` (what it found in the stem cache)."""

    def __init__(self, slots: int = 65536) -> None: ...
    def __len__(self) -> int: ...
    def clear(self) -> None:
        """Forget every entry."""

def ascii_term_counts(
    text: str, stems: dict[str, str], table: StemTable, /
) -> tuple[list[str], list[int]] | None:
    """``count_terms(terms(text))`` for ASCII text whose tokens are all in ``stems``; else None."""

def full_term_counts(
    head: str,
    short: str,
    prefixes: tuple[str | None, ...],
    values: tuple[Any, ...],
    labels: dict[type, dict[Any, str]],
    stems: dict[str, str],
    table: StemTable,
    /,
) -> tuple[list[str], list[int]] | None:
    """``ascii_term_counts(render_full(data))`` from the full form's parts; else None."""

def index_doc(
    docs: dict[bytes, bytes],
    doc_key: bytes,
    pending: dict[str, dict[bytes, bytes | None]],
    memo: dict[int, dict[int, bytes]],
    raw: bytes,
    version: int,
    distinct: list[str],
    counts: list[int],
    docno: int,
    /,
) -> int | None:
    """Hold one memory's sealed document and postings; its length, or None (nothing changed)."""

def index_new(
    docs: dict[bytes, bytes],
    doc_key: bytes,
    fresh: dict[str, bytearray],
    memo: dict[int, dict[int, bytes]],
    raw: bytes,
    version: int,
    distinct: list[str],
    counts: list[int],
    docno: int,
    /,
) -> int | None:
    """``index_doc`` for a memory new to the index: its postings appended to ``fresh``."""

def encode_new_pair(
    head: Any, version: Any, plan: tuple[Any, ...], /
) -> tuple[bytes, bytes] | None:
    """The sealed head and version of a new memory in the common case; ``None`` otherwise."""

def index_keys(
    plan: tuple[Any, ...],
    type: Any,
    created_us: int,
    id_bytes: bytes,
    tags: Any,
    frames: Any,
    actor_obj: bool,
    /,
) -> list[bytes] | None:
    """``cortex.storage.keys.index_keys`` for str tags and FrameRefs; ``None`` when not sure."""

def journal_entry(
    prefix: bytes,
    shared: bytes,
    seq: int,
    prev: bytes,
    id_bytes: bytes,
    type: Any,
    version: int,
    hash: bytes,
    /,
) -> tuple[bytes, bytes, bytes] | None:
    """The key, sealed value and digest of a ``write`` journal entry; ``None`` when not sure."""

def encode(plan: Plan, value: Any, /) -> bytes | None:
    """``StructCodec.encode`` of ``value`` in the common case; else None."""

def sort_pairs(pairs: list[tuple[bytes, Any]], /) -> None:
    """Sort ``(key, value)`` tuples in place by key, stably."""

def unseal(value: bytes, /) -> bytes | None:
    """The payload of a sealed value whose checksum holds; else None."""

def float16(data: bytes, scalar: bool = False, /) -> bytes | None:
    """``numpy.frombuffer(data, '<f4').astype('<f2').tobytes()``; None: numpy decides."""

def seal(payload: bytes, /) -> bytes:
    """``payload + zlib.crc32(payload).to_bytes(4, "big")`` (``cortex.storage.kv.seal``)."""

def stage_new(
    plan: tuple[Any, ...],
    prepared: list[Any],
    start: int,
    puts: list[tuple[bytes, bytes]],
    docs: dict[bytes, bytes],
    fresh: dict[str, bytearray],
    memo: dict[int, dict[int, bytes]],
    shared: bytes,
    seq: int,
    prev: bytes,
    /,
) -> tuple[int, int, bytes, int, int, int]:
    """``Store._stage_new``'s loop: what it staged and the journal's last seq and hash.

    ``(next, seq, prev, documents, total_length, postings)``; each memory under its ``row``.
    """

def id_slots(cls: type, /) -> None:
    """``MemoryId``'s hash and comparisons in C, as its methods define them (once, at import)."""

class MapFile:
    """An LMDB data file mapped read-only (mapread.c; ``specs/storage.md`` "Reads from the map")."""

    def __init__(self, path: str, length: int) -> None: ...
    @property
    def length(self) -> int: ...
    def txn(self, txn: Any, names: dict[Any, bytes], /) -> MapTxn | bool | None: ...

class MapTxn:
    """LMDB's read transaction whose gets and cursors read the map; the rest is LMDB's."""

    txn: Any
    def get(self, key: bytes, default: Any = None, db: Any = None) -> Any: ...
    def cursor(self, db: Any = None) -> Any: ...
    def abort(self) -> None: ...
    def __getattr__(self, name: str) -> Any: ...

class MapCursor:
    """LMDB's cursor over the map (``MapTxn.cursor``); what it does not make is LMDB's."""

    def __getattr__(self, name: str) -> Any: ...
