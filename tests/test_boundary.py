"""The public boundary (issue 20): every reproducer of the issue's table is a CortexError now.

Each test is one row of the table (the rows of damaged files are in test_corruption.py and
test_damage.py): the input the issue tried, and the error it must give. The fuzz suite
(test_fuzz.py) tries far more inputs; these pin the named ones.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import cbor2
import msgspec
import pytest

from cortex import (
    Cortex,
    CortexError,
    Eq,
    Fact,
    FrameMatch,
    FrameRef,
    Gt,
    Identity,
    IntegrityError,
    Lt,
    MemoryType,
    Not,
    ObjKind,
    Provenance,
    Query,
    Reader,
    SourceKind,
    ValidationError,
    Verb,
    Window,
    content_hash,
    export_store,
    import_bundle,
    parse_where,
)
from cortex.argcheck import MAX_DEPTH
from cortex.cli import EXIT_INTERNAL, main
from cortex.errors import CodecError
from cortex.model.codec import cbor_extent
from cortex.model.jsonmap import json_depth, loads
from cortex.query.language import And
from tests.qsupport import Clock, digest_of_store, rejects

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def fact(i: int = 1) -> Fact:
    return Fact(statement=f"statement {i}", subject="ada", predicate="likes")


@pytest.fixture
def cx(tmp_path: Path) -> Any:
    with Cortex.open(tmp_path / "store", actor="owner", clock=Clock(T0)) as store:
        yield store


def unchanged(cx: Cortex, fn: Any, *args: Any, **kw: Any) -> ValidationError:
    """``fn`` raises a ValidationError and the store is exactly as before."""
    before = digest_of_store(cx)
    with pytest.raises(ValidationError) as info:
        fn(*args, **kw)
    assert digest_of_store(cx) == before
    return info.value


# ---------------------------------------------------------------------------------------------
# import


def _bundle(cx: Cortex, tmp_path: Path, encoding: str = "jsonl") -> bytes:
    path = tmp_path / f"b.{encoding}"
    export_store(cx, path, encoding=encoding)  # type: ignore[arg-type]
    return path.read_bytes()


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 1000, 100_000])
def test_import_jsonl_nested_too_deep(cx: Cortex, tmp_path: Path, depth: int) -> None:
    cx.write(fact())
    lines = _bundle(cx, tmp_path).split(b"\n")
    lines[1] = b'{"kind": "memory", "head": ' + b"[" * depth + b"]" * depth + b"}"
    (tmp_path / "deep.jsonl").write_bytes(b"\n".join(lines))
    with pytest.raises(IntegrityError, match="nests deeper than 64"):
        import_bundle(cx, tmp_path / "deep.jsonl")


@pytest.mark.parametrize(
    "item",
    [
        "d81c81d81d00",  # a shared-reference cycle
        "d8246178",  # tag 36 (a MIME message)
        "9f" * 3 + "ff" * 3,  # indefinite arrays
        "81" * 65 + "00",  # nested past the limit
    ],
)
def test_import_cbor_hostile_items(cx: Cortex, tmp_path: Path, item: str) -> None:
    cx.write(fact())
    data = _bundle(cx, tmp_path, "cbor")
    header_end = cbor_extent(data)
    bad = data[:header_end] + bytes.fromhex(item) + data[header_end:]
    (tmp_path / "bad.cbor").write_bytes(bad)
    before = digest_of_store(cx)
    with pytest.raises(IntegrityError, match="not CBOR"):
        import_bundle(cx, tmp_path / "bad.cbor")
    assert digest_of_store(cx) == before


def test_import_created_before_1970(tmp_path: Path) -> None:
    clock = Clock(T0)
    with Cortex.open(tmp_path / "a", actor="owner", clock=clock) as cx:
        cx.write(fact())
        lines = _bundle(cx, tmp_path).split(b"\n")
    # the head's created_at moved to 1969, the trailer's hash recomputed: a well-formed bundle
    obj = json.loads(lines[1])
    obj["head"]["created_at"] = "1969-12-31T23:59:59+00:00"
    lines[1] = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
    import hashlib

    body = b"".join(line + b"\n" for line in lines[:-2])
    trailer = json.loads(lines[-2])
    trailer["sha256"] = hashlib.sha256(body).hexdigest()
    data = body + json.dumps(trailer, separators=(",", ":")).encode() + b"\n"
    (tmp_path / "old.jsonl").write_bytes(data)
    with Cortex.open(tmp_path / "b", actor="owner", clock=clock) as cx:
        err = unchanged(cx, import_bundle, cx, tmp_path / "old.jsonl")
        assert err.field == "head.created_at" and "before 1970" in err.message


# ---------------------------------------------------------------------------------------------
# reads with lone surrogates


def test_surrogates_in_reads(cx: Cortex) -> None:
    cx.write(fact(), tags=["people"])
    rejects("frame.obj_ref", cx.context, "find", ["\ud800"])
    rejects("tags[0]", cx.find, Query(tags=["\ud800"], limit=3))
    rejects("frame.obj_ref", cx.find, Query(frames=["find:knowledge:\udcff"], limit=3))
    rejects("frame.obj_ref", FrameMatch, verb="find", obj_kind="knowledge", obj_ref="\udcff")
    rejects("reader.actor", Reader, actor="\ud800")


# ---------------------------------------------------------------------------------------------
# write: types and ranges


def test_write_types_and_ranges(cx: Cortex) -> None:
    before = digest_of_store(cx)
    rejects("version.confidence", cx.write, fact(), confidence=10**400)
    rejects("version.confidence", cx.write, fact(), confidence=math.nan)
    rejects("data.roles", cx.write, Identity(name="n", roles=1))  # type: ignore[arg-type]
    p = Provenance(source=SourceKind.USER_INPUT, derived_from=1)  # type: ignore[arg-type]
    rejects("version.provenance.derived_from", cx.write, fact(), provenance=p)
    rejects("head.tags", cx.write, fact(), tags=None)
    uri = cx.write(fact(2))
    before = digest_of_store(cx)
    rejects("head.tags", cx.update_head, uri, tags=0)
    rejects("head.frames", cx.update_head, uri, frames=0)
    assert digest_of_store(cx) == before


@pytest.mark.parametrize("falsy", [0, "", False, 0.0])
def test_falsy_wrong_types_are_not_stored_as_empty(cx: Cortex, falsy: Any) -> None:
    err = unchanged(cx, cx.write, Identity(name="n", roles=falsy))
    assert err.field == "data.roles" and err.rule == "type"
    p = Provenance(source=SourceKind.USER_INPUT, derived_from=falsy)
    assert unchanged(cx, cx.write, fact(), provenance=p).rule == "type"
    assert unchanged(cx, cx.write, Identity(name="n", profile=falsy)).field == "data.profile"


def test_empty_lists_still_mean_none(cx: Cortex) -> None:
    uri = cx.write(Identity(name="n", roles=[]), tags=[], frames=())
    assert cx.resolve(uri).data == Identity(name="n")


def test_unknown_write_option(cx: Cortex) -> None:
    err = unchanged(cx, cx.write, fact(), tag="x")
    assert err.field == "tag" and "tags" in err.message


# ---------------------------------------------------------------------------------------------
# query ranges


@pytest.mark.parametrize(
    "window",
    [Window.recent(1e7), Window(days=math.nan), Window(days=2**64), Window(days=math.inf)],
)
def test_window_out_of_range(cx: Cortex, window: Window) -> None:
    rejects("window.days", cx.find, Query(types=["Fact"], window=window, limit=3))
    rejects("window.days", cx.facets, window)


def test_compare_with_a_number_past_float(cx: Cortex) -> None:
    cx.write(fact())
    rejects("where", cx.find, Query(types=["Fact"], where=Lt("data.confidence", 10**400), limit=3))


# ---------------------------------------------------------------------------------------------
# the journal


@pytest.mark.parametrize("start", [2**64, -1, "x", 1.5, True, None])
def test_journal_start(cx: Cortex, start: Any) -> None:
    if start is None:
        assert [e.seq for e in cx.journal(start)] == [1]
    else:
        rejects("start", cx.journal, start)  # when called, before iterating


def test_journal_other_arguments(cx: Cortex) -> None:
    rejects("limit", cx.journal, limit=-1)
    rejects("limit", cx.journal, limit=1.0)
    rejects("reverse", cx.journal, reverse=1)
    assert len(list(cx.journal(limit=2**80))) == 1  # more than there can be: no limit


def test_journal_reverse_starts_at_the_end(cx: Cortex) -> None:
    for i in range(6):
        cx.write(fact(i))
    assert [e.seq for e in cx.journal(reverse=True, limit=3)] == [7, 6, 5]
    assert [e.seq for e in cx.journal(reverse=True)] == [7, 6, 5, 4, 3, 2, 1]
    assert [e.seq for e in cx.journal(limit=3)] == [1, 2, 3]
    assert [e.seq for e in cx.journal(4, reverse=True, limit=2)] == [4, 3]
    assert [e.seq for e in cx.journal(2**64 - 1, reverse=True, limit=1)] == [7]


# ---------------------------------------------------------------------------------------------
# parsers: explicit depth limits


def test_where_depth() -> None:
    ok = "not " * MAX_DEPTH + "head.importance > 1"
    assert isinstance(parse_where(ok), Not)
    for text in (
        "not " * (MAX_DEPTH + 1) + "head.importance > 1",
        "not " * 1000 + "head.importance > 1",
        "(" * 5000 + "head.importance > 1" + ")" * 5000,
    ):
        err = rejects("where", parse_where, text)
        assert err.rule == "syntax" and "deeper than 64" in err.message
    deep = "(" * MAX_DEPTH + "head.importance > 1" + ")" * MAX_DEPTH
    assert parse_where(deep) == Gt("head.importance", 1)


def test_where_number_too_long() -> None:
    rejects("where", parse_where, "data.x = " + "9" * 5000)


def test_predicates_built_too_deep(cx: Cortex) -> None:
    p: Any = Eq("head.importance", 1)
    for _ in range(MAX_DEPTH + 1):
        p = Not(p)
    err = rejects("where", cx.find, Query(types=["Fact"], where=p, limit=1))
    assert err.rule == "depth"
    q: Any = Eq("head.importance", 1)
    for _ in range(5000):
        q = And(q, Eq("head.importance", 2))
    assert rejects("where", cx.find, Query(types=["Fact"], where=q, limit=1)).rule == "depth"


def test_json_depth() -> None:
    assert json_depth("[" * 10) == 10
    assert json_depth('["[[[[[[[[[[[["]' * 10) == 1  # brackets in strings do not count
    assert json_depth(b'{"a": "\\"[[[["}' * 100) == 1  # escaped quotes end no string
    assert loads("[" * MAX_DEPTH + "]" * MAX_DEPTH, "x") is not None
    assert rejects("x", loads, "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "x").rule == "depth"
    assert rejects("x", loads, "[" * 100_000, "x").rule == "depth"
    assert rejects("x", loads, b"\xff", "x").rule == "json"


def test_cbor_extent() -> None:
    ok = cbor2.dumps(["memory", b"x" * 300, [b"a", {"k": [1, 2.5, None, True]}]])
    assert cbor_extent(ok + b"\x00") == len(ok)
    nested = bytes.fromhex("81" * MAX_DEPTH + "00")
    assert cbor_extent(nested) == len(nested)
    for bad in (
        "81" * (MAX_DEPTH + 1) + "00",
        "d81c81d81d00",
        "d8246178",
        "9f00ff",
        "5b" + "ff" * 8,
        "9bffffffffffffffff",
        "",
        "1c",
        "61",
    ):
        with pytest.raises(CodecError):
            cbor_extent(bytes.fromhex(bad))


# ---------------------------------------------------------------------------------------------
# misc


def test_misc_arguments(cx: Cortex) -> None:
    rejects("type", content_hash, None, b"")  # type: ignore[arg-type]
    rejects("data", content_hash, MemoryType.FACT, "text")  # type: ignore[arg-type]
    assert content_hash(MemoryType.FACT, bytearray(b"x")) == content_hash(MemoryType.FACT, b"x")
    rejects("reader.scopes", Reader, actor="b", scopes="x")  # type: ignore[arg-type]
    rejects("where", cx.find, Query(types=["Fact"], where=Eq(None, 1), limit=1))  # type: ignore[arg-type]
    rejects("uris", cx.attest, None)  # type: ignore[arg-type]
    rejects("items", cx.write_many, None)  # type: ignore[arg-type]
    rejects("types", cx.edges, cx.write(fact()), types=5)  # type: ignore[arg-type]
    rejects("objects", cx.context, "find", None)  # type: ignore[arg-type]


def test_paths_and_options(tmp_path: Path, cx: Cortex) -> None:
    for bad in (None, 5, ["a"], "", "a\x00b", "\ud800"):
        rejects("path", Cortex.open, bad, actor="x")  # type: ignore[arg-type]
        rejects("dest", cx.backup, bad)  # type: ignore[arg-type]
        rejects("path", export_store, cx, bad)  # type: ignore[arg-type]
        rejects("path", import_bundle, cx, bad)  # type: ignore[arg-type]
    rejects("colour", Cortex.open, tmp_path / "x", actor="x", colour=1)
    rejects("readonly", Cortex.open, tmp_path / "x", actor="x", readonly=1)
    rejects("map_size", Cortex.open, tmp_path / "x", actor="x", map_size=-1)
    rejects("progress", cx.verify, 5)
    (tmp_path / "file").write_text("x")
    with pytest.raises(CortexError, match="cannot open the store at"):
        Cortex.open(tmp_path / "file" / "under", actor="x")
    assert not (tmp_path / "x").exists()


# ---------------------------------------------------------------------------------------------
# CLI


def _cli(
    *argv: str, env: dict[str, str] | None = None, **kw: Any
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "cortex", *argv],
        capture_output=True,
        env={**os.environ, "CORTEX_ACTOR": "owner", **(env or {})},
        **kw,
    )


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "s"
    with Cortex.open(path, actor="owner") as cx:
        for i in range(200):
            cx.write(
                Fact(statement=f"statement {i} " + "words " * 40, subject="ada", predicate="p"),
                frames=[FrameRef(verb=Verb.FIND, obj_kind=ObjKind.KNOWLEDGE, obj_ref="ada")],
            )
    return path


def test_cli_hostile_arguments(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = [
        (["find", "--tag", "\udcff", "--limit", "1"], "tags[0]: contains a lone surrogate"),
        (["write", "Fact", "[" * 1000 + "]" * 1000], "nests deeper than 64"),
        (["facets", "--recent", "nan"], "window.days"),
        (["log", "--to", "99999999999999999999"], "--to: must be an integer"),
        (
            ["find", "--type", "fact", "--where", "not " * 1000 + "data.x = 1", "--limit", "1"],
            "deeper than 64",
        ),
    ]
    for argv, message in cases:
        before = _digest(store)
        assert main(["--store", str(store), *argv]) == 1
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
        assert _digest(store) == before


def test_cli_real_argv_bytes(store: Path) -> None:
    # $'\xff' as a shell passes it: Python decodes it to a lone surrogate
    r = _cli("--store", str(store), "find", "--tag", os.fsdecode(b"\xff"), "--limit", "1")
    assert r.returncode == 1 and b"lone surrogate" in r.stderr and r.stdout == b""


def _digest(path: Path) -> str:
    with Cortex.open(path, actor=None, readonly=True) as cx:
        return digest_of_store(cx)


def test_cli_broken_pipe_is_quiet(store: Path) -> None:
    # a reader that leaves after a few bytes: `cortex find ... | head -c 10`
    for argv in (
        ["find", "--type", "fact", "--limit", "200", "--form", "full"],
        ["--json", "log", "-n", "200"],
    ):
        proc = subprocess.Popen(
            [sys.executable, "-m", "cortex", "--store", str(store), *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.read(10)
        proc.stdout.close()  # the reader is gone
        err = proc.stderr.read()
        proc.stderr.close()
        assert proc.wait(timeout=60) == 0
        assert err == b"", err


def test_cli_internal_error_code(
    store: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: Any) -> Any:
        raise KeyError("bug")

    monkeypatch.setattr(Cortex, "stats", broken)
    assert main(["--store", str(store), "stats"]) == EXIT_INTERNAL == 70
    assert "internal error" in capsys.readouterr().err
    assert main(["--store", str(store), "show", "nope"]) == 1  # a user error stays 1


def test_cli_import_into_a_new_store_creates_nothing_on_failure(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = tmp_path / "new"
    assert main(["--store", str(new), "import", str(tmp_path / "missing.jsonl")]) == 1
    (tmp_path / "bad.jsonl").write_text('{"x": 1}\n')
    assert main(["--store", str(new), "import", str(tmp_path / "bad.jsonl")]) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "s"]
    with Cortex.open(store, actor=None) as cx:
        export_store(cx, tmp_path / "good.jsonl")
    assert main(["--store", str(new), "import", str(tmp_path / "good.jsonl")]) == 0
    assert main(["--store", str(new), "verify"]) == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["--store", str(empty), "import", str(tmp_path / "bad.jsonl")]) == 1
    assert list(empty.iterdir()) == []  # the directory the user made stays, empty
    assert main(["--store", str(empty), "import", str(tmp_path / "good.jsonl")]) == 0
    # the store, and the record of its page check (specs/storage.md §9)
    assert sorted(p.name for p in empty.iterdir()) == ["data.mdb", "lock.mdb", "pages.checked"]
    capsys.readouterr()


def _can_mount() -> bool:
    return sys.platform == "linux" and os.geteuid() == 0


@pytest.mark.skipif(not _can_mount(), reason="mounting a read-only tmpfs needs root on Linux")
def test_cli_reads_on_a_read_only_mount(store: Path, tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=32m", "none", str(mnt)], capture_output=True
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount: {r.stderr.decode().strip()}")
    try:
        subprocess.run(["cp", "-r", str(store), str(mnt / "s")], check=True)
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        s = str(mnt / "s")
        assert _cli("--store", s, "verify").returncode == 0
        found = _cli("--store", s, "--json", "find", "--type", "fact", "--limit", "1")
        assert found.returncode == 0, found.stderr
        uri = json.loads(found.stdout)["hits"][0]["uri"]
        for argv in (
            ["show", uri],
            ["history", uri],
            ["stats"],
            ["info"],
            ["log", "-n", "3"],
            ["context", "find", "knowledge:ada"],
            ["about", "ada"],
            ["facets"],
        ):
            r = _cli("--store", s, *argv)
            assert r.returncode == 0, (argv, r.stderr)
        w = _cli(
            "--store", s, "write", "Fact", '{"statement": "x", "subject": "a", "predicate": "b"}'
        )
        assert w.returncode == 1 and b"read-only" in w.stderr.lower()
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


# ---------------------------------------------------------------------------------------------
# found by make fuzz after the merges


def test_import_records_head_with_none_lists(cx: Cortex, tmp_path: Path) -> None:
    from cortex.model.records import Version
    from tests.strategies import FULL

    src = tmp_path / "src"
    with Cortex.open(src, actor="owner", clock=Clock(T0)) as other:
        uri = other.write(FULL[MemoryType.FACT])
        m = other.resolve(uri)
    head = msgspec.structs.replace(m.head, tags=None, frames=None)
    versions: list[Version] = [m.version]
    report = cx.import_records([(head, versions)])
    assert report.memories_added == 1 and cx.verify().ok


def test_confidential_export_to_a_directory_journals_nothing(cx: Cortex, tmp_path: Path) -> None:
    cx.write(fact(), sensitivity="confidential")
    before = digest_of_store(cx)
    with pytest.raises(CortexError, match="it is a directory"):
        export_store(cx, tmp_path, include_confidential=True)
    assert digest_of_store(cx) == before  # no export entry for an export that did not happen
