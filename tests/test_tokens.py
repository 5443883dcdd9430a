"""The MCP identity binding in process: the token file (``specs/mcp.md`` §3) and scopes in JSON.

A token is ``ctx_`` and 43 URL-safe characters; the file keeps only its SHA-256, mode 0600,
written atomically; names are unique; a scope's keys are those of ``cortex.Scope`` and any
other is an error; ``clearance`` is a level label (``null`` reads as ``internal``). The server
re-reads the file when its modification time or size changes, so a rotated or removed token
stops working at the next request (``specs/mcp.md`` §2–3). ``tests/test_serve.py`` drives a
real server over these; this file checks the rules directly.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from cortex import (
    CortexError,
    FrameMatch,
    MemoryId,
    NotFoundError,
    Scope,
    Sensitivity,
    ValidationError,
)
from cortex.serve.server import _Verifier
from cortex.serve.tokens import (
    FILE_VERSION,
    TOKEN_PREFIX,
    TokenEntry,
    TokenFile,
    scope_from_json,
    scope_to_json,
)

ID1 = "01J0000000000000000000000A"
ID2 = "01J0000000000000000000000B"


def _body(path: Path) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return body


def _entry(**over: Any) -> dict[str, Any]:
    e: dict[str, Any] = {
        "name": "helper",
        "sha256": "ab" * 32,
        "actor": "helper",
        "scopes": [],
        "clearance": "internal",
        "write_budget": None,
        "created_at": "2026-11-22T09:30:00+00:00",
    }
    e.update(over)
    return e


def _file(tmp_path: Path, *entries: Any, version: object = FILE_VERSION) -> TokenFile:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"cortex_tokens": version, "tokens": list(entries)}))
    return TokenFile(path)


def _error(tokens: TokenFile) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        tokens.entries()
    return info.value


# ---------------------------------------------------------------------------------------------
# tokens: made once, kept as hashes


def test_a_token_is_ctx_and_256_random_bits_kept_only_as_its_sha256(tmp_path: Path) -> None:
    tokens = TokenFile(tmp_path / "t.json")
    token = tokens.add("helper", "helper")
    assert token.startswith(TOKEN_PREFIX) and TOKEN_PREFIX == "ctx_"
    assert re.fullmatch(r"ctx_[A-Za-z0-9_-]{43}", token)  # 32 bytes, URL-safe base64
    text = tokens.path.read_text(encoding="utf-8")
    assert token not in text and token[4:] not in text
    (entry,) = _body(tokens.path)["tokens"]
    assert entry["sha256"] == hashlib.sha256(token.encode()).hexdigest()
    assert tokens.add("other", "helper") != token


def test_the_file_is_mode_0600_written_whole(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "tokens.json"  # the directories are made
    tokens = TokenFile(path)
    assert not tokens.exists()
    tokens.add("a", "helper")
    tokens.add("b", "helper")  # the directory exists now
    assert tokens.exists()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in path.parent.iterdir()) == ["tokens.json"]  # no temp file left
    body = _body(path)
    assert body["cortex_tokens"] == FILE_VERSION == 1
    assert [e["name"] for e in body["tokens"]] == ["a", "b"]
    assert path.read_text(encoding="utf-8").endswith("}\n")


def test_a_write_that_fails_leaves_the_file_and_no_temp_file(tmp_path: Path) -> None:
    tokens = TokenFile(tmp_path / "tokens.json")
    tokens.path.mkdir()  # the rename onto a directory fails
    with pytest.raises(OSError):
        tokens._write([])
    assert [p.name for p in tmp_path.iterdir()] == ["tokens.json"]
    assert tokens.path.is_dir()


def test_the_file_round_trips_every_field(tmp_path: Path) -> None:
    tokens = TokenFile(tmp_path / "tokens.json")
    scope = Scope(name="shared", tags=frozenset({"shared"}), writable=True)
    before = datetime.now(UTC)
    token = tokens.add(
        "helper",
        "helper-actor",
        scopes=[scope],
        write_budget=0,
        clearance=Sensitivity.CONFIDENTIAL,
    )
    entry = tokens.verify(token)
    assert entry is not None
    assert (entry.name, entry.actor, entry.scopes) == ("helper", "helper-actor", (scope,))
    assert (entry.write_budget, entry.clearance) == (0, Sensitivity.CONFIDENTIAL)
    assert before <= entry.created_at <= datetime.now(UTC)
    raw = _body(tokens.path)["tokens"][0]
    assert raw["clearance"] == "confidential" and raw["write_budget"] == 0
    assert raw["scopes"] == [{"name": "shared", "tags": ["shared"], "writable": True}]
    assert datetime.fromisoformat(raw["created_at"]) == entry.created_at
    # a new TokenFile of the same path reads the same entries
    assert TokenFile(tokens.path).entries() == tokens.entries()


# ---------------------------------------------------------------------------------------------
# verify: the entry of a listed token, nothing for any other


def test_verify_finds_each_token_and_nothing_else(tmp_path: Path) -> None:
    tokens = TokenFile(tmp_path / "t.json")
    made = {name: tokens.add(name, f"actor-{name}") for name in ("a", "b", "c")}
    for name, token in made.items():
        entry = tokens.verify(token)
        assert entry is not None and (entry.name, entry.actor) == (name, f"actor-{name}")
    assert tokens.verify(made["a"] + "x") is None
    assert tokens.verify("") is None
    assert tokens.verify(hashlib.sha256(made["a"].encode()).hexdigest()) is None  # not the hash


def test_a_missing_file_lets_nobody_in(tmp_path: Path) -> None:
    tokens = TokenFile(tmp_path / "none.json")
    with pytest.raises(CortexError, match="no token file") as info:
        tokens.verify("ctx_x")
    assert type(info.value) is CortexError and "--init-tokens" in str(info.value)


def test_a_rotated_or_removed_token_stops_at_the_next_check(tmp_path: Path) -> None:
    writer = TokenFile(tmp_path / "t.json")
    old = writer.add("helper", "helper")
    keep = writer.add("other", "other")
    server = TokenFile(tmp_path / "t.json")  # the server's own reader of the file
    first = server.verify(old)
    assert first is not None
    new = writer.rotate("helper")
    assert new != old
    assert server.verify(old) is None  # re-read: the file changed
    rotated = server.verify(new)
    assert rotated is not None and rotated.name == "helper" and rotated.actor == "helper"
    assert rotated.created_at >= first.created_at
    other = server.verify(keep)
    assert other is not None and other.name == "other"  # rotation touches one entry
    writer.remove("helper")
    assert server.verify(new) is None
    assert server.verify(keep) is not None
    assert [e.name for e in server.entries()] == ["other"]


def test_rotate_and_remove_of_an_unknown_name(tmp_path: Path) -> None:
    tokens = TokenFile(tmp_path / "t.json")
    tokens.add("a", "helper")
    with pytest.raises(NotFoundError, match="'b'"):
        tokens.rotate("b")
    with pytest.raises(NotFoundError, match="'b'"):
        tokens.remove("b")
    assert [e.name for e in tokens.entries()] == ["a"]


def test_the_server_verifier_binds_the_token_entry(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tokens = TokenFile(tmp_path / "t.json")
    token = tokens.add("helper", "helper", clearance="public")
    verifier = _Verifier(tokens)
    got = anyio.run(verifier.verify_token, token)
    assert got is not None and got.client_id == "helper" and got.token == token
    assert anyio.run(verifier.verify_token, token + "x") is None
    tokens.path.write_text("{broken")  # a damaged file lets nobody in, and says so
    with caplog.at_level(logging.ERROR, logger="cortex.serve"):
        assert anyio.run(verifier.verify_token, token) is None
    (record,) = caplog.records
    assert record.name == "cortex.serve" and record.levelno == logging.ERROR
    assert "token file cannot be read" in record.getMessage()
    assert "cannot read the token file" in record.exc_text  # type: ignore[operator]


# ---------------------------------------------------------------------------------------------
# add: the rules of a new entry


@pytest.mark.parametrize("name", ["", " a", "a ", "x" * 65, 5, None])
def test_add_refuses_a_bad_name(tmp_path: Path, name: Any) -> None:
    tokens = TokenFile(tmp_path / "t.json")
    with pytest.raises(ValidationError) as info:
        tokens.add(name, "helper")
    assert info.value.field == "name" and not tokens.exists()


def test_add_takes_a_name_of_64_characters(tmp_path: Path) -> None:
    tokens = TokenFile(tmp_path / "t.json")
    tokens.add("x" * 64, "helper")
    tokens.add("é", "helper")
    assert [e.name for e in tokens.entries()] == ["x" * 64, "é"]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"actor": ""}, "actor"),
        ({"actor": None}, "actor"),
        ({"write_budget": -1}, "write_budget"),
        ({"write_budget": True}, "write_budget"),
        ({"write_budget": 1.0}, "write_budget"),
        ({"clearance": "secret"}, "clearance"),
        ({"clearance": None}, "clearance"),
    ],
)
def test_add_refuses_bad_values(tmp_path: Path, kwargs: dict[str, Any], field: str) -> None:
    tokens = TokenFile(tmp_path / "t.json")
    args: dict[str, Any] = {"actor": "helper", **kwargs}
    actor = args.pop("actor")
    with pytest.raises(ValidationError) as info:
        tokens.add("a", actor, **args)
    assert info.value.field == field and not tokens.exists()


def test_names_are_unique(tmp_path: Path) -> None:
    tokens = TokenFile(tmp_path / "t.json")
    tokens.add("a", "helper")
    with pytest.raises(ValidationError, match="exists") as info:
        tokens.add("a", "other")
    assert info.value.rule == "unique"
    assert [e.actor for e in tokens.entries()] == ["helper"]


def test_a_clearance_is_a_level_or_its_label(tmp_path: Path) -> None:
    tokens = TokenFile(tmp_path / "t.json")
    tokens.add("a", "helper", clearance="restricted")
    tokens.add("b", "helper", clearance=Sensitivity.PUBLIC)
    tokens.add("c", "helper")
    assert [e.clearance for e in tokens.entries()] == [
        Sensitivity.RESTRICTED,
        Sensitivity.PUBLIC,
        Sensitivity.INTERNAL,
    ]


# ---------------------------------------------------------------------------------------------
# reading a file someone wrote by hand


@pytest.mark.parametrize(
    "text",
    [
        "{broken",
        "[]",
        '{"tokens": []}',
        '{"cortex_tokens": 2, "tokens": []}',
        '{"cortex_tokens": "1", "tokens": []}',
    ],
)
def test_a_file_that_is_not_a_token_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(CortexError) as info:
        TokenFile(path).entries()
    assert type(info.value) is CortexError and str(path) in str(info.value)


def test_an_empty_file_of_the_version_is_no_tokens(tmp_path: Path) -> None:
    assert _file(tmp_path).entries() == ()
    assert _file(tmp_path).verify("ctx_x") is None


def test_tokens_must_be_a_list(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"cortex_tokens": 1, "tokens": {}}')
    assert _error(TokenFile(path)).field == "tokens"
    path.write_text('{"cortex_tokens": 1}')
    assert _error(TokenFile(path)).field == "tokens"


def test_a_file_whose_names_repeat_is_refused(tmp_path: Path) -> None:
    err = _error(_file(tmp_path, _entry(), _entry(sha256="cd" * 32)))
    assert (err.field, err.rule) == ("tokens", "unique")


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"name": ""}, "tokens[1].name"),
        ({"name": None}, "tokens[1].name"),
        ({"sha256": ""}, "tokens[1].sha256"),
        ({"actor": 5}, "tokens[1].actor"),
        ({"clearance": "secret"}, "tokens[1].clearance"),
        ({"clearance": 3}, "tokens[1].clearance"),  # a label, not a code
        ({"clearance": ""}, "tokens[1].clearance"),
        ({"write_budget": -1}, "tokens[1].write_budget"),
        ({"write_budget": True}, "tokens[1].write_budget"),
        ({"write_budget": "5"}, "tokens[1].write_budget"),
        ({"scopes": {"name": "x"}}, "tokens[1].scopes"),
        ({"scopes": [{"name": "x"}, {"colour": "red"}]}, "tokens[1].scopes[1].colour"),
        ({"created_at": "yesterday"}, "tokens[1].created_at"),
        ({"created_at": "2026-11-22T09:30:00"}, "tokens[1].created_at"),
    ],
)
def test_a_bad_entry_is_named(tmp_path: Path, bad: dict[str, Any], field: str) -> None:
    good = _entry(name="first", sha256="cd" * 32)
    assert _error(_file(tmp_path, good, _entry(**bad))).field == field


def test_an_entry_that_is_not_an_object(tmp_path: Path) -> None:
    assert _error(_file(tmp_path, _entry(), "helper")).field == "tokens[1]"


def test_an_entry_with_only_the_required_keys(tmp_path: Path) -> None:
    raw = {
        "name": "n",
        "sha256": "ab" * 32,
        "actor": "a",
        "created_at": "2026-11-22T09:30:00Z",
    }
    (e,) = _file(tmp_path, raw).entries()
    assert e == TokenEntry(
        name="n",
        sha256="ab" * 32,
        actor="a",
        scopes=(),
        clearance=Sensitivity.INTERNAL,
        write_budget=None,
        created_at=datetime(2026, 11, 22, 9, 30, tzinfo=UTC),
    )


@pytest.mark.parametrize(
    ("given", "level"),
    [
        (None, Sensitivity.INTERNAL),  # files written before labels
        ("public", Sensitivity.PUBLIC),
        ("confidential", Sensitivity.CONFIDENTIAL),
        ("restricted", Sensitivity.RESTRICTED),
    ],
)
def test_an_entry_clearance(tmp_path: Path, given: str | None, level: Sensitivity) -> None:
    (e,) = _file(tmp_path, _entry(clearance=given, write_budget=0)).entries()
    assert e.clearance is level and e.write_budget == 0


def test_the_file_is_re_read_only_when_it_changes(tmp_path: Path) -> None:
    writer = TokenFile(tmp_path / "t.json")
    token = writer.add("a", "helper")
    reader = TokenFile(writer.path)
    assert reader.verify(token) is not None
    st = writer.path.stat()
    text = writer.path.read_text(encoding="utf-8")
    # the same size and modification time: the entries read before stand
    writer.path.write_text(text.replace('"helper"', '"xelper"'), encoding="utf-8")
    os.utime(writer.path, ns=(st.st_atime_ns, st.st_mtime_ns))
    entry = reader.verify(token)
    assert entry is not None and entry.actor == "helper"
    os.utime(writer.path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    entry = reader.verify(token)
    assert entry is not None and entry.actor == "xelper"


# ---------------------------------------------------------------------------------------------
# scopes in JSON: the keys of cortex.Scope, nothing else


def test_a_scope_with_every_field_round_trips() -> None:
    scope = Scope(
        name="helper",
        types=frozenset({"Preference", "Fact"}),  # type: ignore[arg-type]
        exclude_types=frozenset({"Goal"}),  # type: ignore[arg-type]
        tags=frozenset({"b", "a"}),
        exclude_tags=frozenset({"secret"}),
        ids=frozenset({MemoryId.parse(ID2), MemoryId.parse(ID1)}),
        exclude_ids=frozenset({MemoryId.parse(ID1)}),
        frames=tuple(FrameMatch.of(f) for f in ("find", "find:knowledge", "find:knowledge:ada")),
        exclude_frames=(FrameMatch.of("find:knowledge:bob"),),
        expires_at=datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC),
        writable=True,
        token_budget=1,
    )
    text = scope_to_json(scope)
    assert text == {
        "name": "helper",
        "types": ["Fact", "Preference"],
        "exclude_types": ["Goal"],
        "tags": ["a", "b"],
        "exclude_tags": ["secret"],
        "ids": [ID1, ID2],
        "exclude_ids": [ID1],
        "frames": ["find", "find:knowledge", "find:knowledge:ada"],
        "exclude_frames": ["find:knowledge:bob"],
        "expires_at": "2030-01-02T03:04:05+00:00",
        "writable": True,
        "token_budget": 1,
    }
    assert scope_from_json(json.loads(json.dumps(text))) == scope


def test_a_default_scope_is_its_name() -> None:
    assert scope_to_json(Scope()) == {"name": "scope"}
    assert scope_to_json(Scope(name="x", writable=False)) == {"name": "x"}
    assert scope_from_json({}) == Scope()
    assert scope_from_json({"writable": False}) == Scope(name="scope")
    assert scope_from_json({"name": "x", "writable": True}) == Scope(name="x", writable=True)


@pytest.mark.parametrize(
    ("obj", "field", "rule"),
    [
        ([], "s", "type"),
        ("shared", "s", "type"),
        ({"colour": "red"}, "s.colour", "unknown"),
        ({"tags": ["a"], "Tags": ["b"], "zz": 1}, "s.Tags", "unknown"),  # the first, sorted
        ({"name": ""}, "s.name", "type"),
        ({"name": 5}, "s.name", "type"),
        ({"writable": "true"}, "s.writable", "type"),
        ({"writable": 1}, "s.writable", "type"),
        ({"token_budget": 0}, "s.token_budget", "range"),
        ({"token_budget": True}, "s.token_budget", "range"),
        ({"token_budget": 1.5}, "s.token_budget", "range"),
        ({"tags": "shared"}, "s.tags", "type"),
        ({"tags": ["a", ""]}, "s.tags", "type"),
        ({"exclude_tags": [1]}, "s.exclude_tags", "type"),
        ({"types": ["Fact", None]}, "s.types", "type"),
        ({"exclude_types": {}}, "s.exclude_types", "type"),
        ({"ids": [""]}, "s.ids", "type"),
        ({"exclude_ids": "x"}, "s.exclude_ids", "type"),
        ({"frames": [5]}, "s.frames", "type"),
        ({"exclude_frames": [""]}, "s.exclude_frames", "type"),
        ({"expires_at": "2030-01-01"}, "s.expires_at", "naive_time"),
        ({"expires_at": 5}, "s.expires_at", "type"),
    ],
)
def test_a_bad_scope_is_named(obj: Any, field: str, rule: str) -> None:
    with pytest.raises(ValidationError) as info:
        scope_from_json(obj, "s")
    assert (info.value.field, info.value.rule) == (field, rule)


def test_a_scope_s_errors_are_named_under_scope_unless_told() -> None:
    with pytest.raises(ValidationError) as info:
        scope_from_json({"colour": "red"})
    assert info.value.field == "scope.colour"
    with pytest.raises(ValidationError) as info:
        scope_from_json([])
    assert info.value.field == "scope"


def test_a_value_the_scope_refuses_is_named_under_the_scope() -> None:
    # the field a Scope's own check names is put under the scope's field
    with pytest.raises(ValidationError) as info:
        scope_from_json({"types": ["Recipe"]}, "tokens[0].scopes[2]")
    assert info.value.field.startswith("tokens[0].scopes[2].")
    with pytest.raises(ValidationError) as info:
        scope_from_json({"ids": ["not-an-id"]}, "s")
    assert info.value.field.startswith("s.")
    with pytest.raises(ValidationError) as info:
        scope_from_json({"frames": ["fly"]}, "s")
    assert info.value.field.startswith("s.")
    with pytest.raises(ValidationError) as info:
        scope_from_json({"frames": ["find:planet"]}, "s")
    assert info.value.field.startswith("s.")
    with pytest.raises(ValidationError) as info:  # a field already under the scope's name
        scope_from_json({"name": "x\ud800"}, "scope")
    assert info.value.field == "scope.name"


# ---------------------------------------------------------------------------------------------
# the HTTP server's identity binding, in process (specs/mcp.md §2, §5)

BASE = "http://127.0.0.1:8765"


def _serve(
    tmp_path: Path, calls: Any, *tokens_kw: dict[str, Any], write_budget: int | None = 50
) -> Any:
    """Run ``calls(connect, tokens)`` against ``http_app`` over an in-process transport.

    ``connect(token, mode=)`` is an MCP client whose requests carry ``token`` (or none).
    """
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from cortex import Cortex, Fact
    from cortex.serve.server import http_app

    with Cortex.open(tmp_path / "s", actor="owner") as cx:
        cx.write(Fact(statement="seen", subject="s", predicate="p"), visibility="actor_public")
        cx.write(Fact(statement="private", subject="s", predicate="q"))
        tokens = TokenFile(tmp_path / "tokens.json")
        made = [tokens.add(**kw) for kw in tokens_kw]
        app = http_app(cx, tokens, write_budget=write_budget)

        async def main() -> Any:
            async with app.router.lifespan_context(app):
                clients: list[Any] = []

                def connect(token: str | None, mode: str = "auto") -> Any:
                    headers = {"Authorization": f"Bearer {token}"} if token else {}
                    transport = httpx2.ASGITransport(app=app)
                    h = httpx2.AsyncClient(transport=transport, base_url=BASE, headers=headers)
                    clients.append(h)
                    return Client(streamable_http_client(f"{BASE}/mcp", http_client=h), mode=mode)

                try:
                    return await calls(connect, tokens, made)
                finally:
                    for h in clients:
                        await h.aclose()

        return anyio.run(main)


def test_a_token_binds_its_actor_scopes_clearance_and_budget(tmp_path: Path) -> None:
    shared = Scope(name="shared", tags=frozenset({"shared"}), writable=True)

    async def calls(connect: Any, tokens: TokenFile, made: list[str]) -> list[Any]:
        out = []
        for token in made:
            async with connect(token) as c:
                r = await c.call_tool("memory_status", {})
                assert not r.is_error, r
                out.append(r.structured_content)
        return out

    helper, owner = _serve(
        tmp_path,
        calls,
        {"name": "h", "actor": "helper", "scopes": [shared], "clearance": "public",
         "write_budget": 3},
        {"name": "o", "actor": "owner"},
    )  # fmt: skip
    assert (helper["actor"], helper["identity"], helper["owner_access"]) == ("helper", "h", False)
    assert (helper["scopes"], helper["clearance"]) == (["shared"], "public")
    assert (helper["write_budget"], helper["writes_left"]) == (3, 3)
    assert helper["total"] == 0  # the actor_public memory is internal: above a public clearance
    assert (owner["actor"], owner["identity"], owner["owner_access"]) == ("owner", "o", True)
    assert (owner["clearance"], owner["write_budget"], owner["total"]) == ("restricted", 50, 2)


def test_no_token_or_an_unknown_one_gets_nothing(tmp_path: Path) -> None:
    async def calls(connect: Any, tokens: TokenFile, made: list[str]) -> str:
        for token in (None, made[0] + "x", "ctx_" + "A" * 43):
            with pytest.raises(BaseException):  # noqa: B017 - any failure: nothing served
                async with connect(token) as c:
                    await c.list_tools()
        async with connect(made[0]) as c:  # the listed token is let in
            got: str = (await c.call_tool("memory_status", {})).structured_content["actor"]
        return got

    assert _serve(tmp_path, calls, {"name": "a", "actor": "a"}) == "a"


def test_a_rotated_token_stops_at_the_next_request(tmp_path: Path) -> None:
    async def calls(connect: Any, tokens: TokenFile, made: list[str]) -> str:
        async with connect(made[0], mode="legacy") as c:
            assert not (await c.call_tool("memory_status", {})).is_error
            new = tokens.rotate("a")
            with pytest.raises(BaseException):  # noqa: B017 - the old token is refused
                await c.call_tool("memory_status", {})
        async with connect(new) as c:
            got: str = (await c.call_tool("memory_status", {})).structured_content["identity"]
        return got

    assert _serve(tmp_path, calls, {"name": "a", "actor": "a"}) == "a"


def test_the_write_budget_is_per_session(tmp_path: Path) -> None:
    shared = Scope(name="shared", tags=frozenset({"shared"}), writable=True)
    fact = {"type": "Fact", "data": {"statement": "x", "subject": "s", "predicate": "p"},
            "tags": ["shared"]}  # fmt: skip

    async def calls(connect: Any, tokens: TokenFile, made: list[str]) -> list[list[bool]]:
        out = []
        for _ in range(2):  # two sessions of one token: a budget each
            async with connect(made[0], mode="legacy") as c:
                out.append([(await c.call_tool("memory_write", fact)).is_error for _ in range(3)])
        return out

    got = _serve(
        tmp_path, calls, {"name": "a", "actor": "helper", "scopes": [shared], "write_budget": 2}
    )
    assert got == [[False, False, True], [False, False, True]]


def test_without_sessions_the_budget_is_the_token_s(tmp_path: Path) -> None:
    shared = Scope(name="shared", tags=frozenset({"shared"}), writable=True)
    fact = {"type": "Fact", "data": {"statement": "x", "subject": "s", "predicate": "p"},
            "tags": ["shared"]}  # fmt: skip

    async def calls(connect: Any, tokens: TokenFile, made: list[str]) -> list[list[bool]]:
        out = []
        for token in (made[0], made[0], made[1]):  # a connection without a session each
            async with connect(token) as c:
                out.append([(await c.call_tool("memory_write", fact)).is_error for _ in range(2)])
        return out

    budget = {"actor": "helper", "scopes": [shared], "write_budget": 3}
    got = _serve(tmp_path, calls, {"name": "a", **budget}, {"name": "b", **budget})
    assert got == [[False, False], [False, True], [False, False]]


class _RemovedInFlight(TokenFile):
    """A token file whose token is removed just after the server let its request in."""

    armed = False

    def verify(self, token: str) -> TokenEntry | None:
        entry = super().verify(token)
        if self.armed and entry is not None:
            self.armed = False
            self.remove(entry.name)
        return entry


def test_a_token_removed_while_its_request_is_in_flight_gets_an_error(tmp_path: Path) -> None:
    """The identity is read from the file again for the call: a removed token runs nothing."""
    from cortex import Cortex
    from cortex.serve.server import http_app

    tokens = _RemovedInFlight(tmp_path / "tokens.json")
    token = tokens.add("a", "helper")
    with Cortex.open(tmp_path / "s", actor="owner") as cx:
        app = http_app(cx, tokens)

        async def main() -> Any:
            async with app.router.lifespan_context(app):
                from mcp import Client
                from mcp.client.streamable_http import streamable_http_client

                h = httpx2.AsyncClient(
                    transport=httpx2.ASGITransport(app=app),
                    base_url=BASE,
                    headers={"Authorization": f"Bearer {token}"},
                )
                async with h, Client(streamable_http_client(f"{BASE}/mcp", http_client=h)) as c:
                    tokens.armed = True
                    return await c.call_tool("memory_status", {})

        r = anyio.run(main)
    assert r.is_error and "no longer valid" in r.content[0].text
    assert tokens.entries() == ()
