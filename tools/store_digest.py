"""A byte digest of a deterministic store and of the golden vectors: any stored-byte change shows.

    python tools/store_digest.py [--keep DIR] [--json] [--embedder hashing|none] [--still-clock]

The tool builds a store whose every input is fixed: the clock (one millisecond per call from
``START``), every id (caller-chosen where the API takes one; the id generator of
``cortex.model.ids``
replaced by a counter for the rest, e.g. dedupe's writes and extracted memories), the content
and the order of operations. It writes a few hundred memories of every type (``write_many``
batches, single writes, writes with dedupe), updates with and without ``expected_version``,
head changes (tags, frames, importance, visibility, sensitivity), edges (one removed),
tombstones, a purge, episodes with chunks and extracted memories (one purged), temporal chains
(superseding Facts, an archived lower-confidence write, an open conflict and its resolution),
sensitivity levels, core memory, attestations and a task's write budget; with the default
embedder (``HashingEmbedder``, pure numpy) every memory and chunk also has a stored vector.

It then reads the LMDB environment directly (py-lmdb, not cortex's KV layer) and hashes every
key and value in key order: ``sha256`` over ``len(key) u32be || key || len(value) u32be ||
value``. cortex keeps everything in LMDB's main (unnamed) database (``max_dbs=0``); the tool
fails if the environment holds a named database, so none is missed. It prints that digest, a
digest per keyspace (the key up to its first ``/``, to say where a change is), and the digest
of the golden vectors: ``specs/vectors/*.json`` as committed, and as ``tools/gen_vectors.py``
builds them now (the two must be equal).

The digests recorded on main with the erasure records and entity aliases of format 8 (the
same before and after the C accelerator's split), equal on the C accelerator
and on the pure-Python path (``CORTEX_NO_SPEEDUPS=1``); ``tests/test_store_digest.py`` asserts
them:

    store (6353 keys)          0ff6971af29f6bddb5eabf453d3ffd078b5c85856ff8d4cbb347dbc62e9a38a9
    store, --embedder none     ca0891ed299287691bcbf4fd27d71d6f537c14c4c623a626f77a2419172cb9da
    specs/vectors              069b09c672577c819947ffdb247f047e3085a87fb4ede0e291d95937ccad6141

(``--embedder none`` was 79ed87e0… until dedupe without an embedder read the clock less often,
issue 14.) With ``--still-clock`` (a clock that never moves: the digest does not depend on how
often the write paths read it) the store is ``66de81b4…`` (``ccbd4b70…`` with ``--embedder
none``), the same before and after that change.

Nothing in the store depends on the wall clock, the process or randomness once the clock and
the id generator are fixed (the tool builds the store twice in a row in the test and gets the
same bytes); LMDB's page layout is not hashed, only keys and values.
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# CORTEX_NO_SPEEDUPS=1: the pure-Python path (as tests/conftest.py does), before cortex loads
if os.environ.get("CORTEX_NO_SPEEDUPS"):
    sys.modules["cortex._speedups"] = None  # type: ignore[assignment]

import lmdb  # noqa: E402

from cortex import (  # noqa: E402
    Belief,
    Capability,
    Constraint,
    ConstraintSource,
    Cortex,
    Cost,
    EdgeType,
    Event,
    Fact,
    FrameRef,
    Goal,
    GoalStatus,
    Identity,
    MemoryId,
    NewMemory,
    ObjKind,
    Outcome,
    Pattern,
    Polarity,
    Preference,
    SourceKind,
    Stance,
    Strength,
    Verb,
)
from cortex.agent.extract import Context, Extracted, Extraction  # noqa: E402
from cortex.model import ids  # noqa: E402

ACTOR = "digest-agent"
START = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
PER_TYPE = 40
"""Memories of each of the nine types written in batches (more come from the other steps)."""

_TEXT = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november "
    "oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu zürich "
    "straße café naïve 東京 garden river mountain ledger budget invoice deploy server cluster "
    "network backup restore schedule meeting review release quarter report customer vendor"
)
WORDS = tuple(_TEXT.split())


class FixedClock:
    """Each call is one millisecond after the last, from ``START`` (``still``: ``START`` always).

    The stepping clock makes the times the store records depend on how often the write paths
    read the clock; the still one does not, so its digest shows that a change which only reads
    the clock more or less often keeps every other byte.
    """

    def __init__(self, still: bool = False) -> None:
        self.now = START
        self.still = still

    def __call__(self) -> datetime:
        """The next instant."""
        if not self.still:
            self.now += timedelta(milliseconds=1)
        return self.now


class CountingIds:
    """Stands in for the id generator: ascending ids from a counter, no randomness."""

    def __init__(self) -> None:
        self.ms = int(START.timestamp() * 1000) + 86_400_000  # a day after the chosen ids
        self.n = 0

    def take(self, n: int) -> list[MemoryId]:
        """``n`` fresh ids, ascending."""
        out = []
        for _ in range(n):
            self.n += 1
            out.append(MemoryId(self.ms.to_bytes(6, "big") + self.n.to_bytes(10, "big")))
        return out

    def next(self) -> MemoryId:
        """One fresh id."""
        return self.take(1)[0]


@contextmanager
def fixed_ids() -> Iterator[None]:
    """Replace the id generator of ``cortex.model.ids`` for the duration."""
    saved = ids._generator
    ids._generator = CountingIds()  # type: ignore[assignment]
    try:
        yield
    finally:
        ids._generator = saved


def fid(n: int) -> MemoryId:
    """The caller-chosen id ``n`` (time part ``START``)."""
    ms = int(START.timestamp() * 1000)
    return MemoryId(ms.to_bytes(6, "big") + n.to_bytes(10, "big"))


def words(i: int, n: int) -> str:
    """``n`` words picked by ``i`` (a fixed, varied text)."""
    return " ".join(WORDS[(i * 7 + k * 13 + (i * k) % 5) % len(WORDS)] for k in range(n))


def data_of(kind: int, i: int) -> Any:
    """The ``i``-th data of type number ``kind`` (0..8)."""
    when = START - timedelta(days=i, hours=kind)
    text = words(i + kind * 100, 6 + i % 9)
    if kind == 0:
        return Identity(name=f"Person {i} {text[:20]}", did=f"did:key:z6Mk{i:04d}", roles=("r",))
    if kind == 1:
        return Fact(
            statement=f"{text} fact {i}",
            subject=f"subject-{i % 17}",
            predicate=f"attribute_{i % 5}",
            object=WORDS[i % len(WORDS)],
            source=SourceKind.USER_INPUT,
            confidence=0.5 + (i % 5) / 10,
        )
    if kind == 2:
        return Preference(
            topic=f"topic {i} {WORDS[i % len(WORDS)]}",
            polarity=Polarity.PREFER if i % 2 else Polarity.AVOID,
            strength=(i % 10) / 10,
            rationale=text,
        )
    if kind == 3:
        return Belief(statement=f"{text} belief", stance=Stance.SUSPECT, confidence=0.25)
    if kind == 4:
        return Event(
            kind="purchase" if i % 2 else "meeting",
            outcome=Outcome.SUCCESS if i % 3 else Outcome.FAILURE,
            counterparty=f"party-{i % 7}",
            cost=Cost(asset="USD", amount=f"{i * 3 + 1}.{i % 9 + 1}"),
            occurred_at=when,
            summary=f"{text} event {i}",
        )
    if kind == 5:
        return Goal(statement=f"{text} goal {i}", status=GoalStatus.ACTIVE, horizon=when)
    if kind == 6:
        return Constraint(
            statement=f"never {text} {i}",
            polarity=Polarity.DONT,
            strength=Strength.HARD if i % 2 else Strength.SOFT,
            source=ConstraintSource.USER_DECLARED,
        )
    if kind == 7:
        return Capability(
            subject="agent",
            capability=f"{text} {i}",
            verified=bool(i % 2),
            parameters={"n": str(i)},
        )
    return Pattern(statement=f"{text} pattern {i}", strength=0.5, coverage=i + 1)


class RuleExtractor:
    """Turns each line ``Fact: subject predicate object`` of the content into a memory."""

    def extract(self, content: str, context: Context) -> Extraction:
        """The memories of the content's fact lines, each quoting its line."""
        items = []
        offset = 0
        for line in content.splitlines(keepends=True):
            start, offset = offset, offset + len(line.encode("utf-8"))
            if not line.startswith("Fact: "):
                continue
            subject, predicate, obj = line[6:].split()[:3]
            quote = line.rstrip("\n")
            items.append(
                Extracted(
                    memory=NewMemory(
                        data=Fact(
                            statement=quote[6:],
                            subject=subject,
                            predicate=predicate,
                            object=obj,
                        ),
                        tags=["extracted"],
                    ),
                    quote=quote,
                    span=(start, start + len(quote.encode("utf-8"))),
                )
            )
        return Extraction(items=tuple(items))


def episode_text(i: int) -> str:
    """A long markdown text (several chunks) with a few fact lines."""
    parts = [f"# Meeting notes {i}\n\n"]
    for p in range(12):
        parts.append(f"## Part {p}\n\n{words(i * 31 + p, 60)}.\n\n")
        if p % 4 == 1:
            parts.append(f"Fact: person{i}{p} home_city {WORDS[(i + p) % len(WORDS)]}\n\n")
    return "".join(parts)


def populate(cx: Cortex) -> None:
    """The store's operations, in order (the clock and the id generator must be fixed)."""
    n = 0
    frame = FrameRef(verb=Verb.FIND, obj_kind=ObjKind.KNOWLEDGE, obj_ref="topic:zürich")
    gpu = FrameRef(verb=Verb.ACQUIRE, obj_kind=ObjKind.ASSET, obj_ref="gpu")
    levels = (None, "public", None, "confidential", None, "restricted", None)
    # batches of every type, with tags, frames, levels, confidence, validity, importance
    for batch in range(4):
        items = []
        for kind in range(9):
            for i in range(batch * PER_TYPE // 4, (batch + 1) * PER_TYPE // 4):
                n += 1
                items.append(
                    NewMemory(
                        data=data_of(kind, i),
                        id=fid(n),
                        tags=[f"t{i % 11}", WORDS[kind]] if i % 3 else [],
                        frames=[frame] if i % 4 == 0 else [gpu] if i % 4 == 1 else [],
                        importance=i % 11,
                        visibility="actor_public" if i % 5 == 0 else "private",
                        confidence=0.5 + (i % 6) / 12,
                        valid_from=START - timedelta(days=i) if i % 7 == 0 else None,
                        sensitivity=levels[i % len(levels)],
                        supersede=False,
                    )
                )
        cx.write_many(items)
    # single durable writes, and writes the generator names (with dedupe: one is confirmed)
    for i in range(20):
        n += 1
        cx.write(data_of(i % 9, 1000 + i), id=fid(n), tags=["single"], importance=i % 11)
    for i in range(10):
        cx.write(data_of(i % 9, 2000 + i), dedupe=True, tags=["generated"])
    cx.write(data_of(3, 2000), dedupe=True)  # the same Belief: confirmed, nothing new
    # updates: a chain of versions, compare-and-swap, head changes
    for k in range(1, 30):
        cx.update(fid(k), data_of((k - 1) // (PER_TYPE // 4) % 9, 5000 + k))
    cx.update(fid(37), data_of(3, 6000), expected_version=1)
    cx.update(fid(37), data_of(3, 6001), expected_version=2)
    for k in range(40, 60):
        cx.update_head(
            fid(k),
            tags=["moved", f"t{k}"],
            frames=[frame],
            importance=10,
            visibility="actor_public",
            sensitivity="confidential" if k % 2 else "public",
        )
    # edges, one removed
    for k in range(60, 80):
        cx.add_edge(fid(k), EdgeType.REFERENCES, fid(k + 1))
    cx.add_edge(fid(81), EdgeType.CAUSED_BY, fid(82), weight=0.5)
    cx.add_edge(fid(83), EdgeType.DERIVED_FROM, fid(84))
    cx.remove_edge(fid(83), EdgeType.DERIVED_FROM, fid(84))
    # tombstones and a purge
    for k in range(90, 100):
        cx.tombstone(fid(k), f"retired {k}")
    cx.purge(fid(100), "user asked to forget")
    cx.purge(fid(101), "erasure request")
    # temporal chains: a supersede, an archived lower-confidence write, a conflict resolved
    base = cx.write(
        Fact(statement="Sam lives in Zürich", subject="Sam", predicate="home_city"),
        id=fid(5001),
        valid_from=START - timedelta(days=30),
    )
    cx.write(
        Fact(statement="Sam lives in Basel", subject="sam", predicate="home_city"),
        id=fid(5002),
        valid_from=START - timedelta(days=10),
    )
    cx.write(
        Fact(statement="Sam lives in Bern", subject="sam", predicate="home_city", confidence=0.2),
        id=fid(5003),
        valid_from=START - timedelta(days=5),
    )
    when = START - timedelta(days=2)
    cx.write(Preference(topic="tea", polarity=Polarity.PREFER), id=fid(5004), valid_from=when)
    cx.write(Preference(topic="Tea", polarity=Polarity.AVOID), id=fid(5005), valid_from=when)
    conflicts = cx.conflicts()
    if not conflicts:
        raise SystemExit("the conflict step opened no conflict: change populate()")
    for c in conflicts:
        cx.resolve_conflict(c.a.uri, c.b.uri, reason="asked the user")
    cx.tombstone(base.uri.id, "chains: tombstoning the old one")
    # episodes: chunks, extracted memories, levels, one purged
    for i in range(6):
        cx.ingest(
            episode_text(i),
            occurred_at=START - timedelta(hours=i),
            source="chat",
            channel=f"thread-{i % 2}",
            labels=[f"label{i % 3}"],
            media_type="text/markdown",
            extractor=RuleExtractor(),
            id=fid(7000 + i),
            sensitivity="confidential" if i == 4 else None,
        )
    cx.set_episode_sensitivity(fid(7001), "public")
    cx.purge_episode(fid(7003), "erasure request")
    # core memory, attestations, a task's budget
    cx.core_update("user", "name", "Ada")
    cx.core_update("user", "city", "Zürich")
    cx.core_update("agent", "style", "terse")
    cx.core_update("user", "city", "Basel")
    cx.core_delete("agent", "style")
    cx.attest([fid(k) for k in range(110, 120)], Outcome.SUCCESS)
    cx.attest([fid(120)], Outcome.FAILURE)
    with cx.task("task-1", limit=5):
        for i in range(3):
            n += 1
            cx.write(data_of(1, 3000 + i), id=fid(n))


def lmdb_pairs(path: Path) -> Iterator[tuple[bytes, bytes]]:
    """Every key and value of the store at ``path``, in key order, whatever database holds it.

    From format 17 the keyspaces of ``keys.DATABASES`` live in LMDB named databases of their
    own (keys unchanged): their pairs are merged with the main database's, whose records of
    those databases (under ``keys.DATABASE_PREFIX``) are not pairs of the store. From format 20
    the index keyspaces' databases hold duplicates: each pair (head, duplicate) is the key
    ``head || duplicate`` with an empty value, as the store reads it.
    """
    from cortex.storage.keys import DATABASE_PREFIX

    env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=16, subdir=True)
    try:
        with env.begin() as txn:
            main = [(bytes(k), bytes(v)) for k, v in txn.cursor()]
            parts = [[p for p in main if not p[0].startswith(DATABASE_PREFIX)]]
            for key, _ in main:
                if key.startswith(DATABASE_PREFIX):
                    db = env.open_db(key, txn=txn, create=False)
                    if db.flags(txn)["dupsort"]:
                        parts.append([(bytes(k) + bytes(v), b"") for k, v in txn.cursor(db=db)])
                    else:
                        parts.append([(bytes(k), bytes(v)) for k, v in txn.cursor(db=db)])
                    continue
                try:
                    env.open_db(key, txn=txn, create=False)
                except lmdb.Error:
                    pass  # an ordinary key (the usual case)
                else:
                    raise SystemExit(f"the store holds a named database {key!r}: hash it too")
        yield from heapq.merge(*parts)
    finally:
        env.close()


def digest_store(path: Path) -> tuple[str, dict[str, str], int]:
    """The digest of every key and value, the digests per keyspace, and the count of keys."""
    whole = hashlib.sha256()
    spaces: dict[str, Any] = {}
    count = 0
    for key, value in lmdb_pairs(path):
        record = len(key).to_bytes(4, "big") + key + len(value).to_bytes(4, "big") + value
        whole.update(record)
        space = key.split(b"/", 1)[0].decode("ascii", "backslashreplace")
        spaces.setdefault(space, hashlib.sha256()).update(record)
        count += 1
    return whole.hexdigest(), {k: h.hexdigest() for k, h in sorted(spaces.items())}, count


def digest_texts(texts: dict[str, str]) -> str:
    """sha256 over each name and text (sorted by name), length-prefixed."""
    h = hashlib.sha256()
    for name in sorted(texts):
        for part in (name.encode(), texts[name].encode("utf-8")):
            h.update(len(part).to_bytes(4, "big") + part)
    return h.hexdigest()


def vectors_digests() -> tuple[str, str]:
    """The digest of ``specs/vectors/*.json`` as committed and as built by the current code."""
    import importlib.util

    committed = {
        p.name: p.read_text(encoding="utf-8") for p in (ROOT / "specs" / "vectors").glob("*.json")
    }
    spec = importlib.util.spec_from_file_location("gen_vectors", ROOT / "tools" / "gen_vectors.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    built = {name: gen.dumps(doc) for name, doc in gen.build().items()}
    return digest_texts(committed), digest_texts(built)


def build_store(path: Path, embedder: str, still: bool = False) -> None:
    """Populate a new store at ``path`` with the clock and ids fixed, and verify it."""
    options: dict[str, Any] = {}
    if embedder == "hashing":
        from cortex.index.embed import HashingEmbedder

        options["embedder"] = HashingEmbedder()
    with (
        fixed_ids(),
        Cortex.open(path, actor=ACTOR, clock=FixedClock(still), **options) as cx,
    ):
        populate(cx)
        report = cx.verify()
        if not report.ok:
            raise SystemExit(f"the store does not verify: {report.problems}")


def measure(
    embedder: str = "hashing", keep: Path | None = None, still: bool = False
) -> dict[str, Any]:
    """Build the store (in ``keep`` or a temporary directory) and return every digest."""
    with tempfile.TemporaryDirectory(prefix="cortex-digest-") as tmp:
        path = (keep or Path(tmp)) / "store.cortex"
        build_store(path, embedder, still)
        store, spaces, count = digest_store(path)
    committed, built = vectors_digests()
    return {
        "store": store,
        "keys": count,
        "keyspaces": spaces,
        "vectors": committed,
        "vectors_built": built,
        "embedder": embedder,
        "accelerated": sys.modules.get("cortex._speedups") is not None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="build the store in this directory (kept)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--embedder", choices=("hashing", "none"), default="hashing")
    parser.add_argument(
        "--still-clock", action="store_true", help="a clock that never moves (FixedClock)"
    )
    args = parser.parse_args(argv)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    out = measure(args.embedder, args.keep, args.still_clock)
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        path = "the C accelerator" if out["accelerated"] else "the pure-Python path"
        print(f"store    {out['store']}  ({out['keys']} keys, embedder {out['embedder']}, {path})")
        for space, h in out["keyspaces"].items():
            print(f"  {space + '/':<12} {h}")
        print(f"vectors  {out['vectors']}  (specs/vectors as committed)")
        print(f"         {out['vectors_built']}  (as tools/gen_vectors.py builds them)")
    return 0 if out["vectors"] == out["vectors_built"] else 1


if __name__ == "__main__":
    sys.exit(main())
