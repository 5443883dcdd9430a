"""Erasure (issue 21): after a purge no byte of the erased content is left in any file.

The checks here do not trust cortex's own audit: they read every file of the store directory
and count the secret byte strings themselves, per file and per page of ``data.mdb``.
``verify_erasure`` is then checked against the same stores.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cortex import (
    Cortex,
    CortexError,
    ErasurePendingError,
    Fact,
    FrameRef,
    JournalKind,
    NewMemory,
    NotFoundError,
    Query,
    ValidationError,
)
from cortex.engine.erasure import ERASURE_CODEC, ErasureKind, sidecar_copy
from cortex.engine.values import decode_trusted
from cortex.index.vectors import VECTOR_RECORD, stored_vector
from cortex.model.records import Forms, Provenance, SourceRef
from cortex.storage.keys import ERASURE, vec_key
from tests import rows as R
from tests import workers
from tests.test_crash import Child, occurrences
from tests.vsupport import E

pytestmark = pytest.mark.skipif(os.name != "posix", reason="subprocesses and SIGKILL on POSIX")


def vector_bytes(cx: Cortex, mid: Any) -> list[bytes]:
    """A memory's stored vector and the copy the hnswlib cache holds, as needles (whole: the
    test embedder's vectors are sparse, so a slice of one may be a slice of another's)."""
    with cx._kv.read() as txn:
        key = vec_key(R.row(txn, mid))  # format 21: by the memory's row
        raw = txn.get(key)
        assert raw is not None
        rec = decode_trusted(VECTOR_RECORD, key, raw)
    return [rec.vector, sidecar_copy(stored_vector(rec).astype("<f4").tobytes())]


def stop(root: Path) -> Path:
    return root.parent / f"{root.name}.stop"


# ---------------------------------------------------------------------------------------------
# The whole promise, on a 1,000-memory store under concurrent readers and writers


def test_purge_leaves_no_byte_of_any_kind_of_record_in_any_file(tmp_path: Path) -> None:
    root = tmp_path / "s.cortex"
    secrets: list[bytes] = []
    purge_ids: list[Any] = []
    with Cortex.open(root, actor="agent", as_owner=True, embedder=E) as cx:
        cx.write_many(
            NewMemory(
                data=Fact(
                    statement=f"note {i} about tea and hills", subject=f"s{i}", predicate="p"
                ),
                tags=["filler"],
            )
            for i in range(1000)
        )
        for i in range(12):
            data = workers.secret_fact("data", i)
            tag, frame, session, message = (
                f"zqx{k}{i:04d}" for k in ("tag", "frame", "ses", "msg")
            )
            uri = cx.write(
                data,
                tags=[tag, "keep"],
                frames=[FrameRef(verb="find", obj_kind="knowledge", obj_ref=frame)],
                provenance=Provenance(
                    source="user_input",
                    sources=(SourceRef(session_id=session, message_ids=(message,)),),
                ),
            )
            cx.update(
                uri, workers.secret_fact("newdata", i), forms=_forms(i)
            )  # a second version, with forms given by the caller
            purge_ids.append(uri.id)
            secrets += [f"zqx{k}{i:04d}".encode() for k in ("data", "newdata", "tag", "frame")]
            secrets += [f"zqx{k}{i:04d}".encode() for k in ("ses", "msg", "short", "medium")]
            secrets += vector_bytes(cx, uri.id)
        text = "\n\n".join(f"zqxepisode{i:04d} said something private" * 8 for i in range(40))
        ep = cx.ingest(text, source="chat").episode
        secrets += [f"zqxepisode{i:04d}".encode() for i in range(40)]
        with cx._kv.read() as txn:
            chunk_vectors = [v[:-4] for _, v in txn.scan(b"cv/" + ep.id.bytes)]
        assert chunk_vectors, "the episode's chunks have vectors"
        secrets += chunk_vectors
        assert cx.find(Query(near="private", limit=3)).hits  # the vector cache exists
    assert occurrences(root, secrets)  # the secrets are there, in data.mdb and vectors/

    done = stop(root)
    with (
        Child(workers.command("erasure_writer", root, done, 1, 6)) as w1,
        Child(workers.command("erasure_writer", root, done, 2, 0)) as w2,
        Child(workers.command("erasure_reader", root, done, 3)) as r1,
        Child(workers.command("erasure_reader", root, done, 4)) as r2,
    ):
        for child, op in ((w1, "secrets"), (w2, "secrets"), (r1, "started"), (r2, "started")):
            child.wait_for(op)
        written = next(line for line in w1.lines if line["op"] == "secrets")["ids"]
        secrets += [f"zqxw1x{i:04d}".encode() for i in range(6)]
        with Cortex.open(
            root, actor="agent", as_owner=True
        ) as cx:  # no embedder: the files still go
            for mid in purge_ids + written:
                cx.purge(mid, "erasure request")
            cx.purge_episode(ep.id, "erasure request")
        purged_at = time.time()
        for w in (w1, w2):  # the writers go on committing after the purges
            while not any(x["op"] == "wrote" and x["at"] > purged_at + 0.2 for x in w.lines):
                w.wait_for("wrote", count=sum(x["op"] == "wrote" for x in w.lines) + 1)
        time.sleep(0.5)
        done.touch()
        for child in (w1, w2, r1, r2):
            child.wait_for("done", timeout=120)
            assert child.proc.wait(60) == 0
    assert occurrences(root, secrets) == {}

    with Cortex.open(root, actor="agent", as_owner=True, embedder=E) as cx:
        assert cx.verify().ok
        audit = cx.verify_erasure()
        assert audit.ok and not audit.residues and not audit.problems, audit
        assert audit.records == len(purge_ids) + len(written) + 1
        assert "data.mdb" in audit.files and any(f.startswith("vectors/") for f in audit.files)
        for mid in purge_ids:
            assert cx.resolve_latest(mid).data is None
        assert cx.find(Query(near="private", limit=3)).hits  # the cache still works
    assert occurrences(root, secrets) == {}  # and the cache saved on close brought none back


def _forms(i: int) -> Forms:
    return Forms(short=f"zqxshort{i:04d} secret", medium=f"zqxmedium{i:04d} secret detail")


def test_purged_provenance_keeps_only_the_episode_links(tmp_path: Path) -> None:
    with Cortex.open(tmp_path / "s", actor="a", as_owner=True) as cx:
        ep = cx.ingest("the quote zqxquote0001 lives here", source="chat").episode
        prov = Provenance(
            source="user_input",
            derived_from=(),
            sources=(
                SourceRef(session_id="zqxsession", message_ids=("m1",)),
                SourceRef(session_id=f"episode:{ep.id}", message_ids=("m2",), span=(0, 9)),
            ),
        )
        uri = cx.write(
            Fact(statement="x zqxquote0001", subject="u", predicate="p"), provenance=prov
        )
        cx.purge(uri, "erase")
        version = cx.resolve(uri).version
        assert version.provenance.sources == (
            SourceRef(session_id=f"episode:{ep.id}", span=(0, 9)),
        )
        link = cx.episode_of(uri)  # the link to the episode stays
        assert link is not None and link.episode == ep.id and link.span == (0, 9)
        entry = [e for e in cx.journal() if e.kind is JournalKind.PURGE][-1]
        assert entry.hash == version.hash  # the journal names what was erased by its hash


# ---------------------------------------------------------------------------------------------
# The erasure step and its edges


def test_purge_without_scrub_leaves_bytes_until_the_scrub(tmp_path: Path) -> None:
    root = tmp_path / "s"
    secret = b"zqxlater0001"
    with Cortex.open(root, actor="a", as_owner=True) as cx:
        for i in range(200):
            cx.write(Fact(statement=f"filler {i}", subject="s", predicate="p"))
        uri = cx.write(Fact(statement=f"{secret.decode()} here", subject="u", predicate="p"))
        cx.purge(uri, "erase", scrub=False)
        assert occurrences(root, [secret])  # freed pages, not yet reused
        audit = cx.verify_erasure()
        assert not audit.ok and audit.residues
        assert {r.region for r in audit.residues} <= {"free", "held", "gap", "tail"}
        assert all(r.id == str(uri.id) for r in audit.residues)
        report = cx.scrub()
        assert report.complete and report.bytes_zeroed > 0
        assert occurrences(root, [secret]) == {}
        assert cx.verify_erasure().ok
        again = cx.scrub()  # only the pages the first step's own commit freed are left
        assert again.complete and again.free_pages_zeroed <= report.held_pages


def test_tombstone_with_erase_is_a_purge(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with Cortex.open(root, actor="a", as_owner=True) as cx:
        uri = cx.write(Fact(statement="zqxtomb0001 private", subject="u", predicate="p"))
        other = cx.write(Fact(statement="zqxtomb0002 private", subject="u", predicate="p"))
        stone = cx.tombstone(uri, "gone", erase=True)
        assert stone.purged_at is not None
        assert cx.resolve(uri).data is None
        cx.tombstone(other, "retired")  # a plain tombstone keeps the content
        assert cx.resolve(other).data is not None
        cx.tombstone(other, "now erase it", erase=True)  # and erasing it later works
        assert cx.resolve(other).data is None
    assert occurrences(root, [b"zqxtomb0001", b"zqxtomb0002"]) == {}


def test_a_reader_snapshot_older_than_the_purge_delays_the_erasure(tmp_path: Path) -> None:
    root = tmp_path / "s"
    secret = b"zqxheld0001"
    with Cortex.open(root, actor="a", as_owner=True) as cx:
        for i in range(100):
            cx.write(Fact(statement=f"filler {i}", subject="s", predicate="p"))
        uri = cx.write(Fact(statement=f"{secret.decode()} private", subject="u", predicate="p"))
        with Child(workers.command("snapshot_holder", root)) as holder:
            holder.wait_for("holding")
            with pytest.raises(ErasurePendingError, match=r"read snapshots opened before") as err:
                cx.purge(uri, "erase", wait=0.3)
            report = err.value.report
            assert report is not None and not report.complete
            assert [pid for pid, _ in report.holding] == [holder.proc.pid]
            assert cx.resolve(uri).data is None  # the purge itself is done
            # the snapshot still reads what it read: the pages it holds are untouched
            assert occurrences(root, [secret])
            assert cx.verify().ok
        # the holder is killed: its reader slot is cleared and the next scrub completes
        assert cx.scrub(wait=5).complete
        assert occurrences(root, [secret]) == {}
        cx.purge(uri, "again")  # idempotent, and it runs the erasure step again


def test_zeroing_never_touches_what_a_snapshot_reads(tmp_path: Path) -> None:
    """A snapshot opened before many rewrites reads every value it saw, byte for byte, while
    the erasure step zeroes everything around it."""
    root = tmp_path / "s"
    rng = np.random.default_rng(5)
    with Cortex.open(root, actor="a", as_owner=True) as cx:
        uris = cx.write_many(
            Fact(
                statement=f"v1 {i} " + "x" * int(rng.integers(1, 3000)), subject="s", predicate="p"
            )
            for i in range(300)
        )
        with cx._kv.read() as snap:
            before = dict(snap.scan(b""))
            for i, uri in enumerate(uris):
                cx.update(uri, Fact(statement=f"v2 {i}", subject="s", predicate="p"))
                if i % 3 == 0:
                    cx.purge(uri, "erase", scrub=False)
            counts, _ = cx._kv.zero_unused()
            assert counts.held_pages > 0  # the snapshot holds the pages of its tree
            assert dict(snap.scan(b"")) == before
        assert cx.verify().ok
        assert cx.scrub().complete
        assert cx.verify().ok and cx.verify_erasure().ok


def test_the_vector_cache_keeps_no_vector_of_a_purged_memory(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with Cortex.open(root, actor="a", as_owner=True, embedder=E) as cx:
        uris = cx.write_many(
            Fact(statement=f"topic {i} zqxvec{i:04d}", subject="s", predicate="p")
            for i in range(50)
        )
        needles = [b for u in uris[:10] for b in vector_bytes(cx, u.id)]
        cx.find(Query(near="topic", limit=3))
    assert any(f.startswith("vectors/") for f in occurrences(root, needles))
    # this handle has the cache loaded before another process purges, and saves it after: its
    # save catches up under the cache's lock, and a saved file holds no deleted vector
    with Cortex.open(root, actor="b", as_owner=True, embedder=E) as other:
        other.find(Query(near="topic", limit=3))
        with Child(
            workers.command("purge_these", root, ",".join(str(u.id) for u in uris[:10]))
        ) as p:
            p.wait_for("scrubbed")
        assert occurrences(root, needles) == {}
        other.save_vectors()
    assert occurrences(root, needles) == {}
    with Cortex.open(root, actor="a", as_owner=True, embedder=E) as cx:
        hits = cx.find(Query(near="topic 20", limit=50)).hits
        assert {h.uri.id for h in hits} <= {u.id for u in uris[10:]}
        assert cx.vector_state() == "loaded"  # the rewritten cache is used, not rebuilt


def test_the_vector_cache_with_minilm(tmp_path: Path) -> None:
    from cortex.index.embed import MiniLM

    root = tmp_path / "s"
    model = MiniLM()
    with Cortex.open(root, actor="a", as_owner=True, embedder=model) as cx:
        keep = cx.write(Fact(statement="the user likes green tea", subject="u", predicate="likes"))
        gone = cx.write(
            Fact(statement="the user's passport is zqxminilm0001", subject="u", predicate="id")
        )
        needles = [*vector_bytes(cx, gone.id), b"zqxminilm0001"]
        assert cx.find(Query(near="passport number", limit=1)).hits[0].uri == gone
    assert "vectors/" in "".join(occurrences(root, needles))
    with Cortex.open(root, actor="a", as_owner=True, embedder=model) as cx:
        cx.purge(gone, "erasure request")
        assert [h.uri for h in cx.find(Query(near="passport number", limit=2)).hits] == [keep]
    assert occurrences(root, needles) == {}


def test_stale_separators_of_deleted_terms_are_rewritten(tmp_path: Path) -> None:
    """LMDB keeps a deleted key's copy in a branch page; the erasure step removes it."""
    from cortex.storage import scrub as S

    root = tmp_path / "s"
    with Cortex.open(root, actor="a", as_owner=True) as cx:
        uris = cx.write_many(
            Fact(statement=f"zqxsep{i:05d} filler", subject="s", predicate="p") for i in range(3000)
        )
        seps = [k for k, _ in cx._kv.inspect(lambda b, lay: S.separators(b, lay, (b"lex/p/zqx",)))]
        assert seps
        victims = {k[len(b"lex/p/") : k.index(b"\x00")] for k in seps[:20]}
        by_word = {f"zqxsep{i:05d}".encode(): u for i, u in enumerate(uris)}
        doomed = [by_word[w] for w in victims]
        for u in doomed:
            cx.purge(u.id, "erase", scrub=False)
        assert occurrences(root, sorted(victims))  # at least in the branch pages
        audit = cx.verify_erasure()
        assert "separator" in {r.region for r in audit.residues}
        assert audit.stale_separators >= len(victims)
        report = cx.scrub()
        assert report.separators >= len(victims)
        assert occurrences(root, sorted(victims)) == {}
        audit = cx.verify_erasure()
        assert audit.ok and audit.stale_separators == 0


# ---------------------------------------------------------------------------------------------
# Page buffers: a writer that held the secrets must not write them back


def _buffer_run(root: Path, epoch_prefix: bytes | None) -> int:
    """At the key-value level: this process writes filler, then secrets; another one deletes
    the secrets and zeroes the unused bytes; this process writes on. How many copies of a
    secret the file holds at the end."""
    from cortex.storage.kv import LmdbKV

    kv = LmdbKV(root, epoch_prefix=epoch_prefix)
    try:
        kv.write(
            lambda txn: [txn.put(b"f%06d" % i, b"filler" * (i % 100 + 1)) for i in range(3000)]
        )
        for i in range(200):
            kv.write(lambda txn, i=i: txn.put(b"s%06d" % i, b"QQLEAKQQ" * 40))
        with Child(workers.command("kv_erase", root)) as p:
            p.wait_for("zeroed")
        assert occurrences(root, [b"QQLEAKQQ"]) == {}
        for i in range(300):
            kv.write(lambda txn, i=i: txn.put(b"f%06d" % (i * 7 % 3000), b"later" * (i % 100 + 1)))
    finally:
        kv.close()
    return sum(sum(c.values()) for c in occurrences(root, [b"QQLEAKQQ"]).values())


def test_a_writer_renews_its_page_buffers_after_an_erasure(tmp_path: Path) -> None:
    """LMDB builds each page in a buffer it recycles and writes the page's unused middle as
    the buffer left it: a process that wrote the secrets writes them back after another one
    erased them, unless it renews its environment first (the control run shows the leak)."""
    assert _buffer_run(tmp_path / "control", None) > 0, "the control should leak"
    assert _buffer_run(tmp_path / "renewed", b"er/") == 0


def test_a_cortex_writer_that_held_the_secrets_writes_none_back(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with Cortex.open(root, actor="a", as_owner=True) as cx:
        fillers = [
            cx.write(Fact(statement=f"filler {i} " + "y" * (i % 200), subject="s", predicate="p"))
            for i in range(300)
        ]
        ids = [
            cx.write(Fact(statement=f"zqxbuf{i:04d} " * 20, subject="u", predicate="p")).id
            for i in range(100)
        ]
        with Child(workers.command("purge_these", root, ",".join(map(str, ids)))) as p:
            p.wait_for("scrubbed")  # another process, with its own buffers
        assert occurrences(root, [b"zqxbuf"]) == {}
        for i, uri in enumerate(fillers):  # updates all over the tree
            cx.update(
                uri, Fact(statement=f"later {i} " + "z" * (i % 200), subject="s", predicate="p")
            )
    assert occurrences(root, [b"zqxbuf"]) == {}


# ---------------------------------------------------------------------------------------------
# The audit


def test_verify_erasure_finds_a_copy_in_any_file(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with Cortex.open(root, actor="a", as_owner=True) as cx:
        uri = cx.write(Fact(statement="zqxaudit0001 " * 10, subject="u", predicate="p"))
        raw = cx.resolve(uri).version.data
        assert raw is not None
        cx.purge(uri, "erase")
        assert cx.verify_erasure().ok
        (root / "notes.tmp").write_bytes(b"junk" + raw + b"junk")  # a copy someone left
        audit = cx.verify_erasure()
        assert not audit.ok
        assert {(r.file, r.region, r.id) for r in audit.residues} == {
            ("notes.tmp", "file", str(uri.id))
        }
        assert "notes.tmp" in audit.files


def test_the_erasure_record_names_the_purge_and_holds_no_content(tmp_path: Path) -> None:
    with Cortex.open(tmp_path / "s", actor="a", as_owner=True) as cx:
        uri = cx.write(Fact(statement="zqxrecord0001 " * 4, subject="u", predicate="p"))
        cx.update(uri, Fact(statement="zqxrecord0002 " * 4, subject="u", predicate="p"))
        hashes = [m.version.hash for m in cx.history(uri.id)]
        cx.purge(uri, "erase", by="dpo")
        with cx._kv.read() as txn:
            [(key, value)] = list(txn.scan(ERASURE))
        rec = decode_trusted(ERASURE_CODEC, key, value)
        entry = next(e for e in cx.journal() if e.kind is JournalKind.PURGE)
        assert (rec.seq, rec.kind, rec.id, rec.by) == (entry.seq, ErasureKind.MEMORY, uri.id, "dpo")
        assert list(rec.hashes) == hashes and rec.window == 16
        assert rec.needles and len(rec.needles) % 12 == 0 and rec.records >= 3
        assert b"zqxrecord" not in value and b"zqxrecord" not in key


def test_verify_reports_a_damaged_or_orphan_erasure_record(tmp_path: Path) -> None:
    with Cortex.open(tmp_path / "s", actor="a", as_owner=True) as cx:
        uri = cx.write(Fact(statement="zqxorphan0001", subject="u", predicate="p"))
        cx.purge(uri, "erase")
        with cx._kv.read() as txn:
            [(key, value)] = list(txn.scan(ERASURE))

        def tamper(txn: Any) -> None:
            txn.put(ERASURE + (999).to_bytes(8, "big"), value)  # names seq 999: no purge there
            txn.put(key, value[:-1] + bytes([value[-1] ^ 1]))  # fails its checksum

        cx._kv.write(tamper)
        problems = [p.record for p in cx.verify().problems]
        assert sorted(problems) == sorted([f"er/{int.from_bytes(key[3:], 'big')}", "er/999"])


def test_argument_checks(tmp_path: Path) -> None:
    with Cortex.open(tmp_path / "s", actor="a", as_owner=True) as cx:
        uri = cx.write(Fact(statement="x", subject="u", predicate="p"))
        for bad in (-1, "1", True, float("nan")):
            with pytest.raises(ValidationError, match="wait"):
                cx.purge(uri, "erase", wait=bad)  # type: ignore[arg-type]
            with pytest.raises(ValidationError, match="wait"):
                cx.scrub(wait=bad)  # type: ignore[arg-type]
        assert cx.resolve(uri).data is not None  # nothing was purged
        with pytest.raises(NotFoundError):
            cx.purge_episode("01K0000000000000000000000A", "erase")
    with Cortex.open(tmp_path / "s", actor="a", as_owner=True, readonly=True) as ro:
        with pytest.raises(CortexError, match="read-only"):
            ro.scrub()
        with pytest.raises(CortexError, match="read-only"):
            ro.verify_erasure()


def test_a_store_copied_elsewhere_is_not_touched(tmp_path: Path) -> None:
    """The erasure is of this store's files: a backup made before the purge keeps the content
    (the README says so); one made after holds none."""
    root = tmp_path / "s"
    with Cortex.open(root, actor="a", as_owner=True) as cx:
        uri = cx.write(Fact(statement="zqxbackup0001 private", subject="u", predicate="p"))
        cx.backup(tmp_path / "before")
        cx.purge(uri, "erase")
        cx.backup(tmp_path / "after")
    assert occurrences(tmp_path / "before", [b"zqxbackup0001"])
    assert occurrences(tmp_path / "after", [b"zqxbackup0001"]) == {}
    assert occurrences(root, [b"zqxbackup0001"]) == {}
    shutil.rmtree(tmp_path / "before")


# ---------------------------------------------------------------------------------------------
# PostgreSQL: the records and VACUUM are cortex's part; the server's files are the operator's


def test_a_purge_on_postgresql_vacuums_and_waits_for_older_transactions(pg_url: Any) -> None:
    """On PostgreSQL the erasure step is ``VACUUM`` of the store's table (``storage.md`` §11):
    no live row holds the secret after the purge, a transaction older than the purge makes it
    raise ``ErasurePendingError`` naming that backend, and the audit checks the records but says
    it searched no file."""
    import psycopg

    secret = "ZEBRA-PASSPORT-7781-QUIXOTE"
    url = pg_url()
    with Cortex.open(url, actor="a") as cx:
        table = cx._kv.table
        conninfo = cx._kv.url.conninfo
        first = cx.write(
            Fact(statement=f"passport number is {secret}", subject="sam", predicate="passport"),
            tags=[secret.lower()],
        )
        kept = cx.write(Fact(statement="Sam likes tea", subject="sam", predicate="likes"))
        stone = cx.purge(first, "erasure request")
        assert stone.purged_at is not None
        with psycopg.connect(conninfo, autocommit=True) as conn:
            rows = conn.execute(
                f'SELECT count(*) FROM "{table}" WHERE position(%s::bytea in v) > 0 '
                "OR position(%s::bytea in k) > 0",
                (secret.encode(), secret.lower().encode()),
            ).fetchone()
            assert rows == (0,)
        report = cx.scrub()
        assert report.complete and not report.files_zeroed and report.holding == ()
        audit = cx.verify_erasure()
        assert audit.ok and audit.records == 1 and not audit.files_searched
        assert audit.files == () and audit.residues == ()

        # a transaction whose snapshot is older than the next purge keeps its dead rows
        second = cx.write(Fact(statement=f"visa {secret}", subject="sam", predicate="visa"))
        with psycopg.connect(conninfo) as old:
            old.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            old.execute(f'SELECT count(*) FROM "{table}"').fetchone()
            pid = old.info.backend_pid
            with pytest.raises(ErasurePendingError) as caught:
                cx.purge(second, "erasure request", wait=0.2)
            assert f"pid {pid}" in str(caught.value)
            assert cx.resolve(second).data is None  # the purge itself is committed
            old.execute("ROLLBACK")
        assert cx.scrub(wait=5).complete
        assert cx.resolve(kept).data is not None
        assert cx.verify().ok
