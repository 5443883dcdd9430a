"""Ingest (issue 13 items 1, 3, 4): content kept verbatim as an episode, memories drawn from it
in the same transaction with their provenance both ways, failures leaving nothing behind."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from cortex import (
    ConflictError,
    Cortex,
    ExtractionError,
    Fact,
    JournalKind,
    LLMExtractor,
    NewMemory,
    NotFoundError,
    Query,
    Reader,
    ValidationError,
)
from cortex.agent.extract import Context, Extracted, Extraction
from cortex.model.episode import episode_text
from cortex.model.ids import new_id

from .qsupport import digest_of_store as digest

CHAT = (
    "Sam: I moved to Lisbon last month, and I can't stand cilantro.\n"
    "Ana: Noted! Flying to Paris on Tuesday?\n"
    "Sam: Yes, the flight is at 9am."
)
ANSWER = [
    {
        "type": "Fact",
        "data": {"statement": "Sam lives in Lisbon", "subject": "sam", "predicate": "home_city"},
        "quote": "I moved to Lisbon last month",
    },
    {
        "type": "Preference",
        "data": {"topic": "cilantro", "polarity": "avoid"},
        "quote": "I can't stand cilantro",
    },
]
T = datetime(2026, 11, 20, 9, 30, tzinfo=UTC)


def llm(answer: Any) -> Any:
    return lambda prompt: answer if isinstance(answer, str) else json.dumps(answer)


@pytest.fixture
def cx(tmp_path: Path) -> Any:
    with Cortex.open(tmp_path / "s", actor="agent") as store:
        yield store


def test_an_episode_alone(cx: Cortex) -> None:
    res = cx.ingest(CHAT, occurred_at=T, source="chat", channel="thread-7", labels=["travel"])
    ep = res.episode
    assert res.memories == () and res.dropped == ()
    assert episode_text(cx.episode(ep.id)) == CHAT
    assert ep.hash == hashlib.sha256(b"matrix.cortex.episode.v1" + CHAT.encode()).digest()
    assert ep.occurred_at == T and ep.created_by == "agent" and ep.channel == "thread-7"
    assert [e.id for e in cx.episodes()] == [ep.id]
    assert cx.episodes(source="upload") == [] and cx.episodes(label="travel")[0].id == ep.id
    last = list(cx.journal())[-1]
    assert (last.kind, last.id, last.hash) == (JournalKind.EPISODE, ep.id, ep.hash)
    report = cx.verify()
    assert report.ok and report.episodes == 1


def test_extracted_memories_link_both_ways(cx: Cortex) -> None:
    res = cx.ingest(CHAT, occurred_at=T, source="chat", extractor=LLMExtractor(llm(ANSWER)))
    fact_uri, pref_uri = res.memories
    assert cx.memories_from(res.episode.id) == sorted(res.memories, key=lambda u: u.id.bytes)
    link = cx.episode_of(fact_uri)
    assert link.episode == res.episode.id and link.quote == "I moved to Lisbon last month"
    assert cx.episode_of(pref_uri.id).quote == "I can't stand cilantro"
    v = cx.resolve(fact_uri).version
    assert v.provenance.source.label == "derived"
    assert v.provenance.sources[0].session_id == f"episode:{res.episode.id}"
    # the memories are ordinary memories: found, updated, tombstoned
    assert cx.find(Query(text="lisbon", limit=3)).hits[0].memory.id == fact_uri.id
    v2 = cx.update(fact_uri, Fact(statement="Sam lives in Porto", subject="sam", predicate="p"))
    assert cx.episode_of(v2.id).quote == "I moved to Lisbon last month"  # the newest naming it
    with pytest.raises(NotFoundError):
        cx.episode_of(v2)  # that exact version was not drawn from an episode
    cx.tombstone(pref_uri, "no longer true")
    assert pref_uri.id in [u.id for u in cx.memories_from(res.episode.id)]
    assert cx.verify().ok


def test_a_plain_memory_has_no_episode(cx: Cortex) -> None:
    uri = cx.write(Fact(statement="x", subject="s", predicate="p"))
    with pytest.raises(NotFoundError, match="not drawn from an episode"):
        cx.episode_of(uri)
    with pytest.raises(NotFoundError):
        cx.episode(new_id())


@pytest.mark.parametrize(
    ("extractor", "field"),
    [
        (LLMExtractor(llm("not json")), "llm"),
        (LLMExtractor(llm([{**ANSWER[0], "data": {"statement": "s"}}])), "items[0].data"),
        (
            LLMExtractor(llm([ANSWER[0], {"type": "Preference", "data": {"topic": "t"}}])),
            "items[1]",
        ),
    ],
)
def test_a_bad_extraction_writes_nothing(cx: Cortex, extractor: Any, field: str) -> None:
    cx.ingest("an earlier episode")
    before = digest(cx)
    with pytest.raises(ExtractionError) as info:
        cx.ingest(CHAT, extractor=extractor)
    assert info.value.field.startswith(field)
    assert digest(cx) == before


class Raising:
    def extract(self, content: str, context: Context) -> Extraction:
        raise RuntimeError("model quota")


class BadItems:
    def __init__(self, out: Any) -> None:
        self.out = out

    def extract(self, content: str, context: Context) -> Any:
        return self.out


def test_a_failing_or_odd_extractor_writes_nothing(cx: Cortex) -> None:
    before = digest(cx)
    with pytest.raises(ExtractionError, match="RuntimeError: model quota"):
        cx.ingest(CHAT, extractor=Raising())
    with pytest.raises(ExtractionError):
        cx.ingest(CHAT, extractor=BadItems([1, 2]))
    bad_memory = Extraction(
        items=(Extracted(memory=NewMemory(data=Fact(statement="s", subject="a", predicate="p"),
                                          importance=99)),)
    )  # fmt: skip
    with pytest.raises(ValidationError) as info:
        cx.ingest(CHAT, extractor=BadItems(bad_memory))
    assert info.value.field == "items[0].head.importance"
    with pytest.raises(ValidationError):
        cx.ingest(CHAT, extractor="not an extractor")  # type: ignore[arg-type]
    assert digest(cx) == before


def test_episode_fields_are_checked(cx: Cortex) -> None:
    before = digest(cx)
    for kw in ({"source": "Chat!"}, {"labels": "x"}, {"occurred_at": datetime(2026, 1, 1)}):
        with pytest.raises(ValidationError):
            cx.ingest(CHAT, **kw)
    for content in ("", "\ud800", b"bytes"):
        with pytest.raises(ValidationError):
            cx.ingest(content)  # type: ignore[arg-type]
    assert digest(cx) == before
    eid = new_id()
    cx.ingest(CHAT, id=eid)
    after = digest(cx)
    with pytest.raises(ConflictError):
        cx.ingest("again", id=eid)
    assert digest(cx) == after


def test_purge_erases_the_text_and_keeps_the_proof(cx: Cortex) -> None:
    res = cx.ingest(CHAT, extractor=LLMExtractor(llm(ANSWER)))
    eid = res.episode.id
    gone = cx.purge_episode(eid, "erasure request")
    assert gone.content is None and gone.chunks == () and gone.hash == res.episode.hash
    assert episode_text(cx.episode(eid)) is None
    assert cx.purge_episode(eid, "again") == gone  # idempotent: no second entry
    kinds = [e.kind for e in cx.journal()]
    assert kinds.count(JournalKind.EPISODE_PURGE) == 1
    link = cx.episode_of(res.memories[0])
    assert link.episode == eid and link.quote is None
    with cx._kv.read() as txn:
        assert not any(b"Lisbon last month" in v for _, v in txn.scan(b"ep/"))
    with pytest.raises(ValidationError):
        cx.purge_episode(eid, "")
    assert cx.verify().ok


def test_other_readers_see_only_public_episodes(cx: Cortex) -> None:
    private = cx.ingest("a private note").episode
    public = cx.ingest("a public note", visibility="actor_public").episode
    guest = Reader(actor="guest")
    with pytest.raises(NotFoundError):
        cx.episode(private.id, reader=guest)
    assert cx.episode(public.id, reader=guest).id == public.id
    assert [e.id for e in cx.episodes(reader=guest)] == [public.id]


def test_ten_megabytes_in_one_call(cx: Cortex) -> None:
    doc = (
        "# A long document\n\n"
        + ("A paragraph of the document, with words. " * 25 + "\n\n") * 10_000
    )
    assert len(doc.encode()) > 10_000_000
    ep = cx.ingest(doc, source="upload", media_type="text/markdown").episode
    assert len(ep.chunks) > 6000 and episode_text(cx.episode(ep.id)) == doc
    assert cx.verify().ok


@pytest.mark.parametrize("encoding", ["jsonl", "cbor"])
def test_export_import_carries_episodes_and_links(
    cx: Cortex, tmp_path: Path, encoding: str
) -> None:
    from cortex import export_store, import_bundle

    res = cx.ingest(CHAT, source="chat", labels=["t"], extractor=LLMExtractor(llm(ANSWER)))
    gone = cx.ingest("erase me: 4111 1111 1111 1111").episode
    cx.purge_episode(gone.id, "card number")
    cx.write(Fact(statement="plain", subject="s", predicate="p"))
    bundle = tmp_path / f"b.{encoding}"
    report = export_store(cx, bundle, encoding=encoding)  # type: ignore[arg-type]
    assert report.episodes == 2 and report.memories == 3
    assert b"4111" not in bundle.read_bytes()
    with Cortex.open(tmp_path / "copy", actor="agent") as other:
        got = import_bundle(other, bundle)
        assert (got.episodes_added, got.memories_added) == (2, 3)
        assert other.episode(res.episode.id) == cx.episode(res.episode.id)
        assert other.episode(gone.id).content is None
        assert other.memories_from(res.episode.id) == cx.memories_from(res.episode.id)
        assert other.episode_of(res.memories[0]).quote == "I moved to Lisbon last month"
        assert other.verify().ok and other.verify().episodes == 2
        again = import_bundle(other, bundle)
        assert (again.episodes_added, again.episodes_unchanged) == (0, 2)


def test_a_store_without_episodes_exports_a_version_1_bundle(cx: Cortex, tmp_path: Path) -> None:
    from cortex import export_store

    cx.write(Fact(statement="plain", subject="s", predicate="p"))
    export_store(cx, tmp_path / "b.jsonl")
    header = json.loads((tmp_path / "b.jsonl").read_text().splitlines()[0])
    assert header["version"] == 1


def test_an_altered_episode_is_refused(cx: Cortex, tmp_path: Path) -> None:
    from cortex import IntegrityError, export_store, import_bundle

    cx.ingest("Sam lives in Lisbon")
    path = tmp_path / "b.jsonl"
    export_store(cx, path)
    lines = path.read_text().splitlines()
    i = next(n for n, line in enumerate(lines) if '"kind":"episode"' in line)
    lines[i] = lines[i].replace("Lisbon", "Porto!")
    body = "\n".join(lines[:-1]) + "\n"
    trailer = json.loads(lines[-1])
    trailer["sha256"] = hashlib.sha256(body.encode()).hexdigest()  # a careful forger
    path.write_text(body + json.dumps(trailer, separators=(",", ":")) + "\n")
    with Cortex.open(tmp_path / "copy", actor="agent") as other:
        before = digest(other)
        with pytest.raises(IntegrityError, match="hash"):
            import_bundle(other, path)
        assert digest(other) == before


# -- the CLI -------------------------------------------------------------------------------------


def test_cli_ingest_episodes_and_show_quote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    from .test_cli import run, run_json

    path = tmp_path / "s.cortex"
    monkeypatch.setenv("CORTEX_STORE", str(path))
    monkeypatch.setenv("CORTEX_ACTOR", "agent")
    assert run(capsys, "init")[0] == 0
    doc = tmp_path / "notes.md"
    doc.write_text("# Notes\n\nSam moved to Lisbon.\n", encoding="utf-8")
    rc, out, err = run(capsys, "ingest", str(doc), "--label", "travel", "--channel", "t1")
    assert rc == 0 and err == "" and out.startswith("episode ") and "1 chunks" in out
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO("Ana: café at 9?\n".encode())))
    got = run_json(capsys, "ingest", "-", "--source", "chat")
    assert got["source"] == "chat" and got["bytes"] == len("Ana: café at 9?\n".encode())
    listed = run_json(capsys, "episodes")
    assert [e["source"] for e in listed] == ["chat", "upload"]
    assert listed[1]["media_type"] == "text/markdown" and listed[1]["labels"] == ["travel"]
    assert run_json(capsys, "episodes", "--label", "travel")[0]["id"] == listed[1]["id"]
    rc, out, _ = run(capsys, "episodes", listed[1]["id"], "--text")
    assert (rc, out) == (0, "# Notes\n\nSam moved to Lisbon.\n")
    # a memory drawn from an episode shows its source quote
    with Cortex.open(path, actor="agent") as cx:
        res = cx.ingest(CHAT, extractor=LLMExtractor(llm(ANSWER)))
    rc, out, _ = run(capsys, "show", str(res.memories[0]))
    assert rc == 0 and f"episode     {res.episode.id}" in out
    assert 'quote       "I moved to Lisbon last month"' in out
    shown = run_json(capsys, "show", str(res.memories[0]))
    assert shown["source"]["quote"] == "I moved to Lisbon last month"
    one = run_json(capsys, "episodes", str(res.episode.id))
    assert one["memories"] == [str(u) for u in cx_memories(path, res.episode.id)]
    rc, out, _ = run(capsys, "verify")
    assert rc == 0 and out.startswith("ok:") and "3 episodes" in out
    rc, _, err = run(capsys, "ingest", str(tmp_path / "missing.txt"))
    assert rc == 1 and "cannot read" in err
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe")
    rc, _, err = run(capsys, "ingest", str(tmp_path / "bad.txt"))
    assert rc == 1 and "not UTF-8" in err
    rc, _, err = run(capsys, "ingest", str(doc), "--source", "Bad Source")
    assert rc == 1 and "episode.source" in err


def cx_memories(path: Path, eid: Any) -> list[Any]:
    with Cortex.open(path, actor="agent") as cx:
        return cx.memories_from(eid)


def test_find_by_episode_source_channel_and_label(cx: Cortex) -> None:
    from cortex import EpisodeMatch

    chat = cx.ingest(CHAT, source="chat", channel="t1", labels=["travel"],
                     extractor=LLMExtractor(llm(ANSWER)))  # fmt: skip
    other_answer = [{**ANSWER[0], "data": {**ANSWER[0]["data"], "statement": "Sam owns a boat",
                                           "predicate": "owns"}, "quote": "Sam"}]  # fmt: skip
    mail = cx.ingest(
        "Sam: I bought a boat", source="email", extractor=LLMExtractor(llm(other_answer))
    )
    plain = cx.write(Fact(statement="Sam lives in Lisbon too", subject="sam", predicate="p"))

    def ids(**kw: Any) -> set[Any]:
        return {h.memory.id for h in cx.find(Query(limit=20, **kw)).hits}

    assert ids(episode=EpisodeMatch(source="chat")) == {u.id for u in chat.memories}
    assert ids(episode=mail.episode.id) == {u.id for u in mail.memories}
    assert ids(episode=str(mail.episode.id), types=("Fact",)) == {u.id for u in mail.memories}
    assert ids(episode=EpisodeMatch(label="travel", channel="t1")) == {u.id for u in chat.memories}
    assert ids(episode=EpisodeMatch(source="upload")) == set()
    assert ids(episode=new_id()) == set()
    lisbon = ids(text="lisbon", episode=EpisodeMatch(source="chat"))
    assert lisbon == {chat.memories[0].id} and plain.id not in lisbon
    with pytest.raises(ValidationError):
        cx.find(Query(limit=1, episode=5))  # type: ignore[arg-type]
