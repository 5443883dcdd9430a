"""cortex serve, driven with the MCP SDK's own client: stdio as a subprocess, HTTP with tokens.

Every tool is called, with good and bad arguments; a scoped helper's token sees exactly what
its scope selects on every tool (checked against the in-process ReaderView); a bad or missing
token gets nothing; eight sessions write and search at once and nothing is lost.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from cortex import (
    Cortex,
    Fact,
    FrameRef,
    ObjKind,
    Preference,
    Query,
    Reader,
    Scope,
    Verb,
    parse_where,
)
from cortex.serve.tokens import TokenFile
from cortex.serve.tools import TOOLS

PY = sys.executable
OWNER = "agent-1"
SHARED = Scope(name="shared", tags=frozenset({"shared"}), writable=True)
EVERY_TYPE = ["Identity", "Fact", "Preference", "Belief", "Event", "Goal", "Constraint"]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
    env.update(extra)
    return env


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store with memories of every visibility: what a helper scoped to 'shared' may see."""
    path = tmp_path / "agent.cortex"
    with Cortex.open(path, actor=OWNER) as cx:
        f = Fact
        cx.write(f(statement="Ada lives in Zurich", subject="ada", predicate="home"))  # private
        cx.write(
            f(statement="Ada speaks Italian", subject="ada", predicate="language"),
            tags=["shared"],
            visibility="scoped",
        )
        cx.write(
            f(statement="Ada earns a lot of money", subject="ada", predicate="salary"),
            tags=["finance"],
            visibility="scoped",
        )
        cx.write(
            f(statement="Ada works at Acme", subject="ada", predicate="employer"),
            visibility="actor_public",
            tags=["shared"],
        )
        cx.write(
            Preference(topic="green tea", polarity="prefer"),
            tags=["shared"],
            visibility="scoped",
            frames=[FrameRef(verb=Verb.FIND, obj_kind=ObjKind.KNOWLEDGE, obj_ref="ada")],
        )
        cx.core_update("user", "timezone", "Europe/Zurich")
    return path


# ---------------------------------------------------------------------------------------------
# stdio


def _stdio(store: Path, *argv: str, actor: str | None = None) -> Client:
    env = _env(**({"CORTEX_ACTOR": actor} if actor else {}))
    params = StdioServerParameters(
        command=PY, args=["-m", "cortex", "--store", str(store), "serve", *argv], env=env
    )
    return Client(params)


def _calls() -> list[tuple[str, dict[str, Any]]]:
    fact = {"statement": "Bob likes chess", "subject": "bob", "predicate": "hobby"}
    return [
        ("memory_status", {}),
        ("memory_search", {"query": "where does ada live", "topK": 5}),
        ("memory_search", {"query": "ada", "labelIds": ["shared"]}),
        ("memory_write", {"type": "Fact", "data": fact, "tags": ["shared"], "importance": 7}),
        ("memory_find", {"text": "bob chess"}),
        ("memory_find", {"types": ["Fact"], "where": "data.subject = ada", "limit": 2}),
        ("memory_find", {"tags": ["shared"], "window": {"recent_days": 30}, "form": "medium"}),
        ("memory_about", {"subject": "ada"}),
        ("memory_context", {"verb": "find", "objects": ["knowledge:ada"], "query": "ada"}),
        ("memory_core_get", {}),
        ("memory_core_update", {"section": "agent", "key": "tone", "value": "brief"}),
        ("memory_core_delete", {"section": "agent", "key": "tone"}),
        ("memory_about_user", {}),
        ("memory_save", {"content": "Ada's birthday is in May", "source": "chat"}),
        ("memory_ingest", {"content": "# Notes\n\nAda moved to Basel.", "labels": ["notes"]}),
    ]


def test_stdio_every_tool(store: Path) -> None:
    async def main() -> None:
        async with _stdio(store) as c:
            listed = {t.name: t for t in (await c.list_tools()).tools}
            assert set(listed) == set(TOOLS)
            assert "memory_clear" not in listed and not any("clear" in n for n in listed)
            assert listed["memory_find"].annotations.read_only_hint is True
            assert listed["memory_forget"].annotations.destructive_hint is True
            assert listed["memory_write"].annotations.read_only_hint is False
            assert all(t.output_schema for t in listed.values())
            out: dict[str, Any] = {}
            for name, args in _calls():
                r = await c.call_tool(name, args)  # the client checks the output schema
                assert not r.is_error, (name, r.content)
                out.setdefault(name, []).append(r.structured_content)
            uri = out["memory_write"][0]["uri"]
            assert uri.startswith("cortex://Fact/") and uri.endswith("#1")
            assert any(h["uri"] == uri for h in out["memory_find"][0]["hits"])
            assert out["memory_core_get"][0]["user"] == {"timezone": "Europe/Zurich"}
            r = await c.call_tool(
                "memory_update",
                {"ref": uri, "data": {"statement": "Bob loves chess"}, "merge": True},
            )
            v2 = r.structured_content["uri"]
            assert v2.endswith("#2")
            got = (await c.call_tool("memory_get", {"ref": uri})).structured_content
            assert got["data"]["statement"] == "Bob likes chess" and got["version"] == 1
            latest = (await c.call_tool("memory_get", {"ref": got["id"]})).structured_content
            assert latest["version"] == 2
            old = await c.call_tool(
                "memory_get", {"ref": got["id"], "as_of": "2000-01-01T00:00:00Z"}
            )
            assert (old.is_error and "before" in old.content[0].text.lower()) or old.is_error
            hist = await c.call_tool("memory_history", {"ref": got["id"], "limit": 1})
            assert hist.structured_content["total"] == 2
            assert hist.structured_content["next_offset"] == 1
            gone = await c.call_tool("memory_forget", {"ref": v2, "reason": "test"})
            assert gone.structured_content["by"] == OWNER
            found = await c.call_tool("memory_find", {"text": "bob chess"})
            assert found.structured_content["hits"] == []
            # the episode saved over stdio is searchable as evidence
            st = (await c.call_tool("memory_status", {})).structured_content
            # the store's budget counts what was stored (memories, versions, episodes); the
            # tombstone of memory_forget is not a write
            assert st["owner_access"] and st["writes_used"] == 6

    anyio.run(main)
    with Cortex.open(store, actor=None) as cx:
        assert cx.verify().ok
        by = {e.by for e in cx.journal()}
        assert by == {OWNER}


BAD = [
    ("memory_write", {"type": "Fact", "data": {"statement": "x"}}, "subject"),
    ("memory_write", {"type": "Nope", "data": {}}, "type"),
    ("memory_write", {"data": {}}, "type"),
    (
        "memory_write",
        {
            "type": "Fact",
            "data": {"statement": "x", "subject": "s", "predicate": "p"},
            "importance": 11,
        },
        "importance",
    ),
    (
        "memory_write",
        {
            "type": "Fact",
            "data": {"statement": "x", "subject": "s", "predicate": "p"},
            "frames": ["nope"],
        },
        "frames",
    ),
    ("memory_find", {"limit": 0}, "limit"),
    ("memory_find", {"where": "data.subject ="}, "where"),
    ("memory_find", {"types": ["Fact"], "as_of": "yesterday"}, "as_of"),
    ("memory_get", {"ref": "not-an-id"}, "ref"),
    ("memory_get", {"ref": "01K0000000000000000000000X"}, "no memory"),
    ("memory_core_update", {"section": "boss", "key": "k", "value": "v"}, "section"),
    ("memory_core_delete", {"section": "user", "key": "missing"}, "missing"),
    ("memory_context", {"verb": "fly"}, "verb"),
    ("memory_search", {}, "query"),
    ("memory_forget", {"ref": "01K0000000000000000000000X"}, "reason"),
    ("memory_nope", {}, "no tool"),
]


def test_stdio_bad_arguments_are_tool_errors(store: Path) -> None:
    async def main() -> None:
        async with _stdio(store) as c:
            for name, args, word in BAD:
                r = await c.call_tool(name, args)
                assert r.is_error, (name, args)
                assert word.lower() in r.content[0].text.lower(), (name, r.content[0].text)

    with Cortex.open(store, actor=None) as cx:
        before = cx.stats()
    anyio.run(main)
    with Cortex.open(store, actor=None) as cx:
        assert cx.stats() == before  # nothing was written


def test_stdio_write_budget(store: Path) -> None:
    fact = {"statement": "x", "subject": "s", "predicate": "p"}

    async def main() -> None:
        async with _stdio(store, "--write-budget", "3") as c:
            for i in range(3):
                args = {"type": "Fact", "data": {**fact, "statement": f"x{i}"}}
                r = await c.call_tool("memory_write", args)
                assert not r.is_error
                assert r.structured_content["writes_left"] == 2 - i
            r = await c.call_tool("memory_write", {"type": "Fact", "data": fact})
            assert r.is_error and "write budget spent" in r.content[0].text
            # a refused write (bad data) does not count
            st = (await c.call_tool("memory_status", {})).structured_content
            assert st["writes_used"] == 3 and st["writes_left"] == 0

    anyio.run(main)


def test_stdio_binds_the_configured_actor_and_scopes(store: Path) -> None:
    scope = json.dumps({"name": "shared", "tags": ["shared"], "writable": True})

    async def main() -> None:
        async with _stdio(store, "--scope", scope, actor="helper") as c:
            st = (await c.call_tool("memory_status", {})).structured_content
            assert (st["actor"], st["owner_access"], st["scopes"]) == ("helper", False, ["shared"])
            r = await c.call_tool("memory_find", {"types": ["Fact"]})
            texts = sorted(h["text"] for h in r.structured_content["hits"])
            assert texts == ["employer(ada)=Ada works at Acme", "language(ada)=Ada speaks Italian"]

    anyio.run(main)


# ---------------------------------------------------------------------------------------------
# HTTP


class HttpServer:
    def __init__(self, proc: subprocess.Popen[str], url: str, tokens: TokenFile) -> None:
        self.proc, self.url, self.tokens = proc, url, tokens

    def client(self, token: str | None, *, mode: str = "auto") -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        http = httpx2.AsyncClient(headers=headers, timeout=60)
        return http, Client(streamable_http_client(self.url, http_client=http), mode=mode)


@pytest.fixture
def http(store: Path, tmp_path: Path) -> Iterator[HttpServer]:
    tokens = TokenFile(tmp_path / "tokens.json")
    proc = subprocess.Popen(
        [
            PY,
            "-m",
            "cortex",
            "--store",
            str(store),
            "serve",
            "--http",
            "--port",
            "0",
            "--tokens",
            str(tokens.path),
            "--init-tokens",
            "--write-budget",
            "200",
        ],
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = owner = None
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    lines = []
    while time.monotonic() < deadline and url is None:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("ctx_"):
            owner = line.strip()
        if "serving" in line:
            url = line.split(" at ", 1)[1].split(" ", 1)[0]
    assert url and owner, "".join(lines)
    drain = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)  # type: ignore[arg-type]
    drain.start()
    srv = HttpServer(proc, url, tokens)
    srv.owner = owner  # type: ignore[attr-defined]
    srv.helper = tokens.add("helper", "helper", scopes=[SHARED])  # type: ignore[attr-defined]
    try:
        yield srv
    finally:
        proc.terminate()
        proc.wait(30)
        drain.join(30)
        assert proc.stdout is not None
        stdout = proc.stdout.read()
        proc.stdout.close()
        proc.stderr.close()
        assert stdout == ""  # the HTTP server prints nothing on stdout
        assert "Traceback" not in "".join(lines), "".join(lines)


def test_the_token_file_keeps_only_hashes(http: HttpServer) -> None:
    text = http.tokens.path.read_text()
    assert http.owner not in text and http.helper not in text  # type: ignore[attr-defined]
    assert oct(http.tokens.path.stat().st_mode & 0o777) == "0o600"
    assert {e.name for e in http.tokens.entries()} == {"owner", "helper"}


def test_http_bad_or_missing_token_gets_nothing(http: HttpServer) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    hdr = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

    async def main() -> None:
        async with httpx2.AsyncClient(timeout=30) as h:
            for auth in ({}, {"Authorization": "Bearer ctx_wrong"}, {"Authorization": "Basic x"}):
                r = await h.post(http.url, json=init, headers={**hdr, **auth})
                assert r.status_code == 401, (auth, r.status_code)
                assert "memory" not in r.text
            for token in (None, "ctx_wrong"):
                http_client, client = http.client(token)
                async with http_client:
                    with pytest.raises(BaseException):  # noqa: B017 - any failure: nothing served
                        async with client as c:
                            await c.list_tools()
            r = await h.post(
                http.url, json=init, headers={**hdr, "Authorization": f"Bearer {http.owner}"}
            )  # type: ignore[attr-defined]
            assert r.status_code == 200

    anyio.run(main)


def test_http_a_rotated_token_stops_working(http: HttpServer) -> None:
    async def main() -> None:
        new = http.tokens.rotate("helper")
        for token, works in ((http.helper, False), (new, True)):  # type: ignore[attr-defined]
            http_client, client = http.client(token)
            async with http_client:
                if works:
                    async with client as c:
                        r = await c.call_tool("memory_status", {})
                        assert r.structured_content["actor"] == "helper"
                else:
                    with pytest.raises(BaseException):  # noqa: B017
                        async with client as c:
                            await c.call_tool("memory_status", {})

    anyio.run(main)


def _uris(result: Any, key: str = "hits") -> set[str]:
    return {h["uri"] for h in result.structured_content[key]}


def test_http_a_scoped_helper_sees_exactly_its_scope_on_every_tool(
    http: HttpServer, store: Path
) -> None:
    helper = Reader(actor="helper", scopes=(SHARED,))
    with Cortex.open(store, actor=None) as cx:
        owner_ids = {m.id for m in cx.find(Query(types=EVERY_TYPE, limit=100)).memories}
        view = cx.view(helper)
        allowed = {str(m.uri) for m in view.find(Query(types=EVERY_TYPE, limit=100)).memories}
        hidden = [
            m
            for m in cx.find(Query(types=EVERY_TYPE, limit=100)).memories
            if str(m.uri) not in allowed
        ]
    assert len(allowed) == 3 and len(hidden) == 3 and len(owner_ids) == 6

    async def main() -> None:
        http_client, client = http.client(http.helper)  # type: ignore[attr-defined]
        async with http_client, client as c:
            call = c.call_tool
            st = (await call("memory_status", {})).structured_content
            assert st["total"] == 3 and not st["owner_access"]
            assert _uris(await call("memory_find", {})) == allowed
            assert _uris(await call("memory_find", {"text": "ada"})) <= allowed
            assert (
                _uris(await call("memory_find", {"types": EVERY_TYPE, "include_tombstoned": True}))
                == allowed
            )
            assert _uris(await call("memory_about", {"subject": "ada"})) <= allowed
            assert _uris(await call("memory_search", {"query": "ada money"}), "results") <= allowed
            assert (
                _uris(
                    await call("memory_search", {"query": "ada", "labelIds": ["finance"]}),
                    "results",
                )
                == set()
            )
            ctx = await call("memory_context", {"verb": "find", "objects": ["ada"], "query": "ada"})
            assert _uris(ctx) <= allowed and "money" not in ctx.structured_content["text"]
            core = (await call("memory_core_get", {})).structured_content
            assert core["user"] == {} and "Zurich" not in core["yaml"]  # the block is private
            about = (await call("memory_about_user", {})).structured_content
            assert about["user"] == {} and {h["uri"] for h in about["memories"]} <= allowed
            for m in hidden:  # hidden looks exactly like missing, on every tool that names one
                for name, args in (
                    ("memory_get", {"ref": str(m.uri)}),
                    ("memory_get", {"ref": str(m.id)}),
                    ("memory_history", {"ref": str(m.id)}),
                    (
                        "memory_update",
                        {"ref": str(m.id), "data": {"statement": "x"}, "merge": True},
                    ),
                    ("memory_forget", {"ref": str(m.id), "reason": "x"}),
                ):
                    r = await call(name, args)
                    assert r.is_error and "no memory" in r.content[0].text, (name, r.content)
                    assert str(m.data) not in r.content[0].text
            bad = await call("memory_core_update", {"section": "user", "key": "k", "value": "v"})
            assert bad.is_error
            fact = {"statement": "Ada plays piano", "subject": "ada", "predicate": "hobby"}
            refused = await call(
                "memory_write", {"type": "Fact", "data": fact, "tags": ["finance"]}
            )
            assert refused.is_error and "writable scope" in refused.content[0].text
            private = await call(
                "memory_write",
                {"type": "Fact", "data": fact, "tags": ["shared"], "visibility": "private"},
            )
            assert private.is_error
            ok = await call("memory_write", {"type": "Fact", "data": fact, "tags": ["shared"]})
            assert not ok.is_error
            new = ok.structured_content["uri"]
            assert new in _uris(await call("memory_find", {"text": "piano"}))
            shown = (await call("memory_get", {"ref": new})).structured_content
            assert shown["created_by"] == "helper" and shown["visibility"] == "scoped"
            up = await call(
                "memory_update",
                {"ref": new, "data": {"statement": "Ada plays the piano"}, "merge": True},
            )
            assert not up.is_error
            gone = await call("memory_forget", {"ref": new, "reason": "test"})
            assert gone.structured_content["by"] == "helper"
            saved = await call("memory_save", {"content": "a note from the helper"})
            assert not saved.is_error

    anyio.run(main)
    with Cortex.open(store, actor=None) as cx:
        assert cx.verify().ok
        mine = [e for e in cx.journal() if e.by == "helper"]
        assert len(mine) == 4  # write, update, tombstone, episode: journalled as the helper
        written = cx.resolve_latest(mine[0].id)  # into the owner's memories, by the helper
        assert written.head.actor_scope == OWNER and written.version.created_by == "helper"


def test_http_eight_sessions_write_and_search_at_once(http: HttpServer, store: Path) -> None:
    n = 10

    async def session(k: int, token: str, results: dict[int, list[str]]) -> None:
        http_client, client = http.client(token, mode="legacy" if k % 2 else "auto")
        async with http_client, client as c:
            uris = []
            for i in range(n):
                data = {
                    "statement": f"session {k} fact {i}",
                    "subject": f"s{k}",
                    "predicate": "note",
                }
                r = await c.call_tool(
                    "memory_write", {"type": "Fact", "data": data, "tags": ["shared"]}
                )
                assert not r.is_error, r.content
                uris.append(r.structured_content["uri"])
                f = await c.call_tool("memory_find", {"text": f"session {k} fact"})
                assert not f.is_error
            results[k] = uris

    async def main() -> None:
        results: dict[int, list[str]] = {}
        tokens = [http.owner if k < 4 else http.helper for k in range(8)]  # type: ignore[attr-defined]
        async with anyio.create_task_group() as tg:
            for k in range(8):
                tg.start_soon(session, k, tokens[k], results)
        assert sorted(results) == list(range(8))
        all_uris = [u for us in results.values() for u in us]
        assert len(set(all_uris)) == 8 * n
        http_client, client = http.client(http.owner)  # type: ignore[attr-defined]
        async with http_client, client as c:
            for k in range(8):
                r = await c.call_tool(
                    "memory_find",
                    {"tags": ["shared"], "where": f"data.subject = s{k}", "limit": 100},
                )
                assert len(r.structured_content["hits"]) == n

    anyio.run(main)
    with Cortex.open(store, actor=None) as cx:
        assert cx.verify().ok
        notes = cx.find(
            Query(types=["Fact"], where=parse_where("data.predicate = note"), limit=200)
        )
        assert len(notes.hits) == 8 * n


def test_http_write_budget_is_per_session(http: HttpServer, store: Path) -> None:
    http.tokens.add("tight", "helper", scopes=[SHARED], write_budget=2)
    token = http.tokens.rotate("tight")
    fact = {"statement": "x", "subject": "s", "predicate": "p"}

    async def one_session() -> list[bool]:
        http_client, client = http.client(token, mode="legacy")
        out = []
        async with http_client, client as c:
            for i in range(3):
                r = await c.call_tool(
                    "memory_write",
                    {"type": "Fact", "data": {**fact, "statement": f"x{i}"}, "tags": ["shared"]},
                )
                out.append(r.is_error)
        return out

    async def main() -> None:
        assert await one_session() == [False, False, True]
        assert await one_session() == [False, False, True]  # a new session, a new budget

    anyio.run(main)


# ---------------------------------------------------------------------------------------------
# the token commands


def test_the_tokens_command(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cortex.cli import main

    base = ["--store", str(store), "--json"]
    assert main([*base, "tokens"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    scope = json.dumps({"name": "shared", "tags": ["shared"], "writable": True})
    assert main([*base, "tokens", "add", "helper", "--for", "helper", "--scope", scope,
                 "--write-budget", "5"]) == 0  # fmt: skip
    made = json.loads(capsys.readouterr().out)
    assert made["token"].startswith("ctx_") and made["name"] == "helper"
    path = Path(made["file"])
    assert path == store / "mcp-tokens.json" and made["token"] not in path.read_text()
    assert main([*base, "tokens", "add", "owner"]) == 0
    capsys.readouterr()
    assert main([*base, "tokens", "list"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(e["name"], e["actor"], e["write_budget"]) for e in listed] == [
        ("helper", "helper", 5),
        ("owner", OWNER, None),
    ]
    assert listed[0]["scopes"] == [json.loads(scope)]
    tokens = TokenFile(path)
    assert tokens.verify(made["token"]).name == "helper"  # type: ignore[union-attr]
    assert main([*base, "tokens", "rotate", "helper"]) == 0
    rotated = json.loads(capsys.readouterr().out)["token"]
    assert tokens.verify(made["token"]) is None and tokens.verify(rotated) is not None
    assert main([*base, "tokens", "add", "helper"]) == 1  # the name is taken
    assert "exists" in capsys.readouterr().err
    assert main([*base, "tokens", "add", "x", "--scope", '{"colour": "red"}']) == 1
    assert "scope[0].colour" in capsys.readouterr().err
    assert main([*base, "tokens", "remove", "helper"]) == 0
    assert main([*base, "tokens", "remove", "helper"]) == 1
    assert main([*base, "tokens", "rotate"]) == 2  # no name
    capsys.readouterr()
    assert main([*base, "serve", "--http", "--init-tokens", "--port", "1"]) == 1  # file exists
    assert "rotate" in capsys.readouterr().err


def test_a_token_file_with_a_clearance_is_refused(tmp_path: Path) -> None:
    from cortex import CortexError

    tokens = TokenFile(tmp_path / "t.json")
    tokens.add("a", "helper")
    body = json.loads(tokens.path.read_text())
    body["tokens"][0]["clearance"] = "secret"
    tokens.path.write_text(json.dumps(body))
    with pytest.raises(CortexError, match="clearance"):
        tokens.entries()
