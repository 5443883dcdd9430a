"""``verify``: the whole store checked in one snapshot, record by record and entry by entry.

Every version re-hashed, every head against its versions and index entries, both halves of
every edge, the journal chain, vectors, the lexical index, episodes, sensitivity, aliases
and erasure records; damaged pages reported before anything is walked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cortex import argcheck
from cortex.engine import erasure
from cortex.engine.erasure import (
    ERASURE_CODEC,
    SCRUB_CODEC,
    SCRUB_KEY,
    ErasureKind,
    ErasureRecord,
)
from cortex.engine.heads import (
    FOREVER,
    claim_hashes,
    decode_counters,
    decode_row,
    index_keys_of,
    is_pinned,
    pin_key_of,
    superseder,
)
from cortex.engine.journal import JOURNAL_CODEC, ZERO_HASH, JournalEntry, JournalKind
from cortex.engine.values import (
    EDGE_CODEC,
    FORMAT_CODEC,
    Problem,
    VerifyReport,
)
from cortex.errors import (
    CodecError,
    IntegrityError,
)
from cortex.index import evidence, lexical
from cortex.index.vectors import VECTOR_RECORD, VECTORS_META, precision_of, stored_vector
from cortex.model.codec import (
    HEAD,
    VERSION,
    StructCodec,
    decode_data,
)
from cortex.model.episode import check_episode, decode_episode
from cortex.model.hashing import content_hash
from cortex.model.ids import MemoryId
from cortex.model.records import (
    Episode,
    Head,
)
from cortex.rules.aliases import (
    ALIAS_PREFIX,
    AliasRecord,
    alias_key,
    chained,
)
from cortex.rules.aliases import decode_record as decode_alias
from cortex.storage.keys import (
    EDGE_FROM,
    EDGE_TO,
    ID,
    IDX_ACTOR_OBJ,
    IDX_CLAIM,
    IDX_FRAME,
    IDX_PIN,
    IDX_TAG,
    IDX_TYPE,
    JOURNAL,
    META,
    META_RECORDS,
    MIGRATIONS_KEY,
    SALIENCE,
    SENS,
    TASK_PREFIX,
    VEC,
    claim_index_key,
    edge_from_key,
    edge_to_key,
    meta_key,
    parse_edge_key,
    parse_episode_key,
    parse_episode_memory_key,
    parse_erasure_key,
    parse_head_key,
    parse_id_key,
    parse_journal_key,
    parse_row_key,
    parse_version_key,
    show_key,
)
from cortex.storage.keys import EPISODE as EPISODE_PREFIX
from cortex.storage.keys import EPISODE_MEMORY as EPISODE_MEMORY_PREFIX
from cortex.storage.keys import ERASURE as ERASURE_PREFIX
from cortex.storage.keys import HEAD as _HEAD_KEY_PREFIX
from cortex.storage.keys import VERSION as _VERSION_KEY_PREFIX
from cortex.storage.kv import KV, ReadTxn, unseal
from cortex.storage.pages import PageProblem

_unseal = unseal
_show_key = show_key


def verify_store(kv: KV, progress: Callable[[int, int], None] | None = None) -> VerifyReport:
    """Check the whole store in one snapshot: what ``Store.verify`` documents."""
    argcheck.callback(progress, "progress")
    problems: list[Problem] = []
    add = problems.append
    heads: dict[MemoryId, Head] = {}
    by_row: dict[int, MemoryId] = {}  # format 21: each head's row and id
    row_ids: dict[MemoryId, int] = {}
    counts = {"versions": 0, "index": 0, "edges": 0, "journal": 0}
    current: dict[MemoryId, bytes] = {}  # the data of each memory's current version
    pinned: set[MemoryId] = set()  # memories whose current version's data is pinned
    claimed: set[bytes] = set()  # the idx/claim/ entries their current data implies
    claim_ids: set[MemoryId] = set()

    def tick(phase: int) -> None:
        if progress is not None:
            progress(phase, 7)

    def strict(codec: StructCodec[Any], key: bytes, value: bytes) -> Any:
        try:
            return codec.decode(_unseal(key, value), _show_key(key))
        except (IntegrityError, CodecError) as exc:
            add(Problem(_show_key(key), str(exc)))
            return None

    with kv.read_checked() as txn:
        if txn.damage:  # LMDB would abort walking the damaged pages: report them instead
            tick(7)
            return structural_report(txn.damage)
        fmt = txn.get(meta_key("format"))
        if fmt is None:
            add(Problem("meta/format", "missing"))
        else:
            strict(FORMAT_CODEC, meta_key("format"), fmt)
        tick(0)
        # format 21: heads by row; id/ and m/ are a bijection (each id/ record names the row
        # of a head of that id, each head's id has its record)
        for key, value in txn.scan(_HEAD_KEY_PREFIX):
            try:
                row = parse_head_key(key)
            except (CodecError, ValueError):
                add(Problem(key.hex(), "malformed head key"))
                continue
            head = strict(HEAD, key, value)
            if head is None:
                continue
            if head.id in heads:
                add(
                    Problem(
                        _show_key(key),
                        f"holds the head of {head.id}, which row {row_ids[head.id]} holds too",
                    )
                )
                continue
            heads[head.id] = head
            by_row[row] = head.id
            row_ids[head.id] = row
        named: set[MemoryId] = set()
        for key, value in txn.scan(ID):
            try:
                imid = parse_id_key(key)
                row = decode_row(key, value)
            except (CodecError, ValueError, IntegrityError) as exc:
                add(Problem(key.hex() if isinstance(exc, CodecError) else _show_key(key), str(exc)))
                continue
            owner = by_row.get(row)
            if owner != imid:
                add(
                    Problem(
                        _show_key(key),
                        f"names row {row}, "
                        + ("which has no head" if owner is None else f"the head of {owner}"),
                    )
                )
                continue
            named.add(imid)
        for hmid in heads.keys() - named:
            add(
                Problem(
                    f"m/{row_ids[hmid]}",
                    f"the head of {hmid} has no id/ record naming its row: reads by id miss it",
                )
            )
        seen_versions: dict[MemoryId, list[int]] = {}
        tick(1)
        for key, value in txn.scan(_VERSION_KEY_PREFIX):
            counts["versions"] += 1
            try:
                vrow, n = parse_version_key(key)
            except (CodecError, ValueError):
                add(Problem(key.hex(), "malformed version key"))
                continue
            v = strict(VERSION, key, value)
            if v is None:
                continue
            name = _show_key(key)
            owner = by_row.get(vrow)
            if owner is None:
                add(Problem(name, "has no head"))
                continue
            mid = owner
            seen_versions.setdefault(mid, []).append(n)
            if v.id != mid or v.version != n:
                add(Problem(name, f"holds version {v.id}#{v.version}"))
            head = heads[mid]
            if v.type is not head.type:
                add(Problem(name, f"type {v.type.type_name} differs from the head's"))
            purged = head.tombstone is not None and head.tombstone.purged_at is not None
            if v.data is None:
                if not purged:
                    add(Problem(name, "has no data but the memory was not purged"))
                continue
            if purged:
                add(Problem(name, "still holds data although the memory was purged"))
            if content_hash(v.type, v.data) != v.hash:
                add(Problem(name, "data does not match its hash"))
                continue
            try:
                data = decode_data(v.type, v.data)
            except CodecError as exc:
                add(Problem(name, f"data: {exc}"))
                continue
            if n == head.current_version:
                current[mid] = v.data
                if is_pinned(data):
                    pinned.add(mid)
                claimed.update(claim_index_key(c, mid) for c in claim_hashes(data))
                claim_ids.add(mid)
        for mid, head in heads.items():
            ns = seen_versions.get(mid, [])
            if ns != list(range(1, head.current_version + 1)):
                add(
                    Problem(
                        f"m/{row_ids[mid]}",
                        f"{mid} points at versions 1..{head.current_version} but the store "
                        f"holds {ns}",
                    )
                )
        expected: set[bytes] = set()
        for head in heads.values():
            expected.update(index_keys_of(head))
            if head.id in pinned:
                expected.add(pin_key_of(head))
        actual: set[bytes] = set()
        tick(2)
        # format 12: a memory a supersedes edge ends has no claim entry (claims.md section 5)
        superseded = {mid for mid in claim_ids if superseder(txn, mid, FOREVER) is not None}
        expected |= {key for key in claimed if MemoryId(key[-16:]) not in superseded}
        explained: set[bytes] = set()
        for key, value in txn.scan(IDX_CLAIM):
            if key in claimed and MemoryId(key[-16:]) in superseded:
                explained.add(key)
                add(
                    Problem(
                        f"index {key.hex()}",
                        "a claim entry of a superseded memory (the index holds current ones)",
                    )
                )
            elif value:
                add(Problem(f"index {key.hex()}", "index entries hold no value"))
        for key, value in txn.scan(TASK_PREFIX):
            try:
                if len(key) != len(TASK_PREFIX) + 16 or len(_unseal(key, value)) != 8:
                    add(Problem(key.hex(), "a task's write count is malformed"))
            except IntegrityError as exc:
                add(Problem(key.hex(), str(exc)))
        for prefix in (IDX_TYPE, IDX_TAG, IDX_FRAME, IDX_ACTOR_OBJ, IDX_PIN, IDX_CLAIM):
            for key, value in txn.scan(prefix):
                counts["index"] += 1
                actual.add(key)
                if value and prefix is not IDX_CLAIM:  # IDX_CLAIM: checked above
                    add(Problem(f"index {key.hex()}", "index entries hold no value"))
        for key in sorted(actual - expected - explained):
            add(Problem(f"index {key.hex()}", "matches no head (stale index entry)"))
        for key in sorted(expected - actual):
            add(Problem(f"index {key.hex()}", "missing for its head"))
        tick(3)
        for key, value in txn.scan(EDGE_FROM):
            counts["edges"] += 1
            try:
                s, et, d = parse_edge_key(key)
            except (CodecError, ValueError):
                add(Problem(key.hex(), "malformed edge key"))
                continue
            name = f"edge {s} {et.label} {d}"
            strict(EDGE_CODEC, key, value)
            if txn.get(edge_to_key(d, et, s)) != value:
                add(Problem(name, "its e/to half is missing or differs"))
            for mid in (s, d):
                if mid not in heads:
                    add(Problem(name, f"endpoint {mid} does not exist"))
        for key, _value in txn.scan(EDGE_TO):
            try:
                s, et, d = parse_edge_key(key)
            except (CodecError, ValueError):
                add(Problem(key.hex(), "malformed edge key"))
                continue
            if txn.get(edge_from_key(s, et, d)) is None:
                add(Problem(f"edge {s} {et.label} {d}", "its e/from half is missing"))
        prev: bytes | None = ZERO_HASH
        expect_seq = 1
        erasures: dict[int, tuple[JournalKind, MemoryId | None]] = {}
        migrations = 0  # journal entries of kind migration: meta/migrations must hold them
        tick(4)
        for key, value in txn.scan(JOURNAL):
            counts["journal"] += 1
            name = _show_key(key)
            try:
                payload = _unseal(key, value)
                entry: JournalEntry = JOURNAL_CODEC.decode(payload, name)
            except (IntegrityError, CodecError) as exc:
                add(Problem(name, str(exc)))
                prev, expect_seq = None, expect_seq + 1  # the next link cannot be checked
                continue
            if entry.seq != expect_seq or parse_journal_key(key) != entry.seq:
                add(Problem(name, f"sequence {entry.seq} where {expect_seq} was expected"))
            if prev is not None and entry.prev != prev:
                add(Problem(name, "chain broken: prev is not the hash of the previous entry"))
            if entry.kind in (JournalKind.PURGE, JournalKind.EPISODE_PURGE):
                erasures[entry.seq] = (entry.kind, entry.id)
            elif entry.kind is JournalKind.MIGRATION:
                migrations += 1
            prev, expect_seq = hashlib.sha256(payload).digest(), entry.seq + 1
        _verify_erasure_records(txn, erasures, add)
        raw_scrub = txn.get(SCRUB_KEY)
        if raw_scrub is not None:
            strict(SCRUB_CODEC, SCRUB_KEY, raw_scrub)
        counted: set[MemoryId] = set()
        for key, value in txn.scan(SALIENCE):
            srow = (
                by_row.get(parse_row_key(key, SALIENCE)) if len(key) == len(SALIENCE) + 4 else None
            )
            if srow is None:
                add(Problem(key.hex(), "salience state of no memory"))
                continue
            cmid = srow
            counted.add(cmid)
            if not heads[cmid].has_counters:  # format 11: the head records its counters
                add(
                    Problem(
                        _show_key(key),
                        f"use counters of memory {cmid}, whose head says it has none (reads "
                        "take it as never used)",
                    )
                )
            try:  # format 12: the record names its memory
                decode_counters(key, value, cmid)
            except IntegrityError as exc:
                add(Problem(_show_key(key), str(exc)))
        for hmid, h in heads.items():
            if h.has_counters and hmid not in counted:
                add(
                    Problem(
                        f"m/{row_ids[hmid]}",
                        f"the head of {hmid} says the memory has use counters but "
                        f"sal/{row_ids[hmid]} is missing (a damaged key moved it, or it was lost)",
                    )
                )
        vmeta_raw = txn.get(meta_key("vectors"))
        vmeta = None if vmeta_raw is None else strict(VECTORS_META, meta_key("vectors"), vmeta_raw)
        tick(5)
        for key, value in txn.scan(VEC):
            vmid = by_row.get(parse_row_key(key, VEC)) if len(key) == len(VEC) + 4 else None
            if vmid is None:
                add(Problem(key.hex(), "vector of no memory"))
                continue
            vhead = heads[vmid]
            rec = strict(VECTOR_RECORD, key, value)
            if rec is None:
                continue
            name = f"{_show_key(key)} ({vhead.id})"
            if vhead.tombstone is not None:
                add(Problem(name, "a tombstoned memory still has a vector"))
            if rec.version != vhead.current_version:
                add(Problem(name, f"embeds version {rec.version}, not the current one"))
            if vmeta is None or (rec.model_id, rec.dim) != (vmeta.model_id, vmeta.dim):
                add(
                    Problem(name, f"a {rec.model_id} vector the store's meta/vectors does not name")
                )
            width = 2 if rec.float16 else 4
            if len(rec.vector) != width * rec.dim:
                add(
                    Problem(
                        name,
                        f"holds {len(rec.vector)} bytes for {rec.dim} {precision_of(rec)} "
                        f"values ({width * rec.dim} bytes)",
                    )
                )
            elif not np.isfinite(stored_vector(rec)).all():
                add(Problem(name, f"holds a value that is not finite ({precision_of(rec)})"))
        live = {
            mid: (head.type, head.current_version, current[mid])
            for mid, head in heads.items()
            if head.tombstone is None and mid in current
        }
        tick(6)
        numbers = {row.to_bytes(4, "big"): mid.bytes for row, mid in by_row.items()}
        lex_problems, lex = lexical.check(txn, live, numbers)
        problems.extend(Problem(record, what) for record, what in lex_problems)
        n_episodes = _verify_episodes(txn, heads, add)
        _verify_sensitivity(txn, heads, add)
        _verify_meta(txn, migrations, add)
        _verify_aliases(txn, add)
        # A scan walks the leaves in order; a lookup descends the branch pages. A damaged
        # separator key in a branch page misroutes lookups while scans still see every
        # record, so every key must also be found by a lookup.
        for key, value in txn.scan(b""):
            if txn.get(key) != value:
                add(
                    Problem(
                        show_key(key),
                        "a lookup does not find this key that a scan finds: a branch page of "
                        "the file is damaged (run `cortex backup` from an intact copy, or "
                        "restore one)",
                    )
                )
    tick(7)
    return VerifyReport(
        problems=tuple(problems),
        memories=len(heads),
        versions=counts["versions"],
        index_entries=counts["index"],
        edges=counts["edges"],
        journal_entries=counts["journal"],
        lexical_documents=lex.documents,
        lexical_postings=lex.postings,
        episodes=n_episodes,
    )


def structural_report(damage: Sequence[PageProblem]) -> VerifyReport:
    """The verify report of a file whose pages LMDB cannot walk safely."""
    problems = [
        Problem("data.mdb" if p.page < 0 else f"data.mdb page {p.page}", p.what) for p in damage
    ]
    problems.append(
        Problem(
            "data.mdb",
            "the file is structurally damaged: LMDB would crash walking it, so its records "
            "were not checked; `cortex salvage` copies every record that still reads and "
            "checks into a new store",
        )
    )
    return VerifyReport(
        problems=tuple(problems),
        memories=0,
        versions=0,
        index_entries=0,
        edges=0,
        journal_entries=0,
        lexical_documents=0,
        lexical_postings=0,
        episodes=0,
    )


def _verify_aliases(txn: ReadTxn, add: Callable[[Problem], None]) -> None:
    """Check every ``ent/a/`` record (``claims.md`` §10).

    Each decodes, its key is its name normalised, and its canonical name is no alias itself.
    """
    records: dict[str, AliasRecord] = {}
    for key, value in txn.scan(ALIAS_PREFIX):
        try:
            records[key[len(ALIAS_PREFIX) :].decode("utf-8")] = decode_alias(key, value)
        except (IntegrityError, UnicodeDecodeError) as exc:
            add(Problem(_show_key(key), str(exc)))
    for alias in chained(records):
        add(
            Problem(
                _show_key(alias_key(alias)),
                "its canonical name is an alias itself (an entity has one canonical name)",
            )
        )


def _verify_episodes(txn: ReadTxn, heads: dict[MemoryId, Head], add: Callable[[Problem], None]
                     ) -> int:  # fmt: skip
    """Check every ``ep/`` record and ``prov/e/`` entry; returns how many episodes there are."""
    seen: set[MemoryId] = set()
    good: list[Episode] = []
    for key, value in txn.scan(EPISODE_PREFIX):
        name = _show_key(key)
        try:
            eid = parse_episode_key(key)
            ep = decode_episode(_unseal(key, value))
            check_episode(ep)
        except (CodecError, IntegrityError) as exc:
            add(Problem(name, str(exc)))
            continue
        if ep.id != eid:
            add(Problem(name, f"holds episode {ep.id}"))
        if ep.content is None and ep.sensitivity is not None:
            add(Problem(name, "a purged episode holds a level (a purge removes it)"))
        seen.add(eid)
        good.append(ep)
    for record, what in evidence.check(txn, good):
        add(Problem(record, what))
    for key, value in txn.scan(EPISODE_MEMORY_PREFIX):
        name = _show_key(key)
        try:
            eid, mid = parse_episode_memory_key(key)
        except CodecError as exc:
            add(Problem(name, str(exc)))
            continue
        if value:
            add(Problem(name, "an index entry holds a value"))
        if eid not in seen:
            add(Problem(name, "names an episode the store does not hold"))
        if mid not in heads:
            add(Problem(name, "names a memory the store does not hold"))
    return len(seen)


def _verify_erasure_records(
    txn: ReadTxn,
    purges: dict[int, tuple[JournalKind, MemoryId | None]],
    add: Callable[[Problem], None],
) -> None:
    """Every ``er/`` record decodes, is keyed by its seq and names a purge journalled there."""
    want = {JournalKind.PURGE: ErasureKind.MEMORY, JournalKind.EPISODE_PURGE: ErasureKind.EPISODE}
    for key, value in txn.scan(ERASURE_PREFIX):
        name = _show_key(key)
        try:
            seq = parse_erasure_key(key)
            rec: ErasureRecord = ERASURE_CODEC.decode(_unseal(key, value), name)
        except (IntegrityError, CodecError) as exc:
            add(Problem(name, str(exc)))
            continue
        if rec.seq != seq:
            add(Problem(name, f"holds the erasure record of journal entry {rec.seq}"))
            continue
        purge = purges.get(seq)
        if purge is None:
            add(Problem(name, "names no purge in the journal"))
        elif want[purge[0]] is not rec.kind or purge[1] != rec.id:
            add(Problem(name, f"does not match journal entry {seq} ({purge[0].label})"))
        if len(rec.needles or b"") % erasure.NEEDLE_SIZE:
            add(Problem(name, "its needles are not whole"))


def _verify_sensitivity(
    txn: ReadTxn, heads: dict[MemoryId, Head], add: Callable[[Problem], None]
) -> None:
    """Levels (``sensitivity.md`` §2): in the heads and episode records since format 9.

    No key may be left under ``sens/`` (format 8's keyspace, emptied by the migration), and a
    purged memory holds no level (a purged episode's record is checked in ``_verify_episodes``).
    """
    for key in txn.keys(SENS):
        add(
            Problem(
                _show_key(key),
                "a format-8 sensitivity entry in a format-9 store (levels are in the heads "
                "and episode records): a damaged key, or a store written by an older cortex",
            )
        )
    for mid, head in heads.items():
        purged = head.tombstone is not None and head.tombstone.purged_at is not None
        if purged and head.sensitivity is not None:
            add(Problem(f"m/{mid}", "a purged memory holds a level (a purge removes it)"))


def _verify_meta(txn: ReadTxn, migrations: int, add: Callable[[Problem], None]) -> None:
    """Every ``meta/`` key is a record this format names; ``meta/migrations`` is sealed.

    ``meta/migrations`` must be there when the journal records a migration: a damaged key of
    either reads as a missing record, which the store would otherwise take for none.
    """
    names = ", ".join(sorted(k.decode() for k in META_RECORDS))
    for key, value in txn.scan(META):
        if key not in META_RECORDS:
            what = f"not a meta record of this format ({names}): a damaged key"
            add(Problem(_show_key(key), what))
        elif key == MIGRATIONS_KEY:
            try:
                _unseal(key, value)
            except IntegrityError as exc:
                add(Problem(_show_key(key), str(exc)))
    if migrations and txn.get(MIGRATIONS_KEY) is None:
        add(
            Problem(
                "meta/migrations",
                f"missing, but the journal records {migrations} migration(s): the record of "
                "the migrations applied is lost or its key damaged",
            )
        )
