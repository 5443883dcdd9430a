"""``cortex serve``: the tools on the wire, over the official MCP Python SDK (stdio and HTTP).

The server holds one handle of the store, opened as its owner; each call runs as the caller's
identity (``tools.Caller``), bound when the connection is made: over stdio the configured actor
and scopes, over streamable HTTP the bearer token's entry in the token file (checked on every
request; a missing, unknown or rotated token gets HTTP 401 and nothing else). Cortex calls run
in worker threads so one slow call never stalls the others, and a call whose client cancels it
still finishes its write first: every write is committed whole or not at all, and a tool
returns only after its commit.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, Final

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server import Server
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

from cortex import Cortex, CortexError, ReaderView, __version__
from cortex.serve import tools
from cortex.serve.tokens import TokenFile

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "MCPServer", "serve_http", "serve_stdio"]

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8765
_THREADS: Final = 8
_log = logging.getLogger("cortex.serve")

IdentityOf = Callable[[ServerRequestContext[Any, Any]], tuple[tools.Identity, str]]
"""Who a request is from: its identity and its task (the write budget's key)."""


class MCPServer:
    """The cortex tools as an MCP server over one store handle (opened as the owner).

    Args:
        cx: the store, opened as its owner (``Cortex.open(path, actor=None)``).
        identity_of: who each request is from (never from a tool argument).
        write_budget: writes per task unless a token says otherwise (``None``: unlimited).
    """

    def __init__(
        self,
        cx: Cortex,
        identity_of: IdentityOf,
        *,
        write_budget: int | None = tools.DEFAULT_WRITE_BUDGET,
    ) -> None:
        self.cx = cx
        self.identity_of = identity_of
        self.write_budget = write_budget
        self.budget = tools.WriteBudget()
        self.limiter = anyio.CapacityLimiter(_THREADS)
        self._views: dict[tools.Identity, ReaderView] = {}
        self.server: Server[Any] = Server(
            "cortex",
            version=__version__,
            instructions=(
                "Long-term typed memory. memory_search before answering from memory; "
                "memory_write (typed) or memory_save (text) to remember; memory_context for "
                "the working set of an action; memory_core_* for the user/agent blocks."
            ),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self.identity_of(ctx)  # an unbound connection lists nothing
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=t.name,
                    description=t.description,
                    input_schema=t.input_schema,
                    output_schema=t.output_schema,
                    annotations=types.ToolAnnotations(
                        read_only_hint=t.read_only,
                        destructive_hint=t.destructive if not t.read_only else None,
                        idempotent_hint=t.idempotent if not t.read_only else None,
                        open_world_hint=False,
                    ),
                )
                for t in tools.TOOLS.values()
            ]
        )

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        name, args = params.name, params.arguments
        try:
            identity, task = self.identity_of(ctx)
        except CortexError as exc:
            return _error(str(exc))

        def run() -> dict[str, Any]:
            view = self._views.get(identity)
            if view is None:  # one view per identity: its caches live as long as the server
                view = self._views[identity] = tools.view_of(self.cx, identity)
            caller = tools.Caller(
                self.cx, identity, self.budget, task, default_budget=self.write_budget, view=view
            )
            return tools.call(caller, name, args)

        try:
            # not abandoned on cancel: a write the client gave up on still commits whole (or
            # fails whole) before this task ends
            result = await anyio.to_thread.run_sync(run, limiter=self.limiter)
        except CortexError as exc:
            return _error(str(exc))
        except Exception as exc:  # a bug: say so without a traceback to the agent
            _log.exception("tool %s failed", name)
            return _error(f"internal error in {name}: {type(exc).__name__}: {exc}")
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(result, ensure_ascii=False))],
            structured_content=result,
        )


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


# ---------------------------------------------------------------------------------------------
# stdio


def serve_stdio(
    cx: Cortex, identity: tools.Identity, *, write_budget: int | None = tools.DEFAULT_WRITE_BUDGET
) -> None:
    """Serve over standard input and output until the client closes it.

    One process is one connection, one identity and one task (one write budget).
    """

    def identity_of(ctx: ServerRequestContext[Any, Any]) -> tuple[tools.Identity, str]:
        return identity, "stdio"

    mcp = MCPServer(cx, identity_of, write_budget=write_budget)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await mcp.server.run(read, write, mcp.server.create_initialization_options())

    anyio.run(main)


# ---------------------------------------------------------------------------------------------
# streamable HTTP


class _Verifier:
    """Bearer tokens checked against the token file (re-read when it changes)."""

    def __init__(self, tokens: TokenFile) -> None:
        self.tokens = tokens

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            entry = self.tokens.verify(token)
        except CortexError:
            _log.exception("the token file cannot be read")
            return None
        if entry is None:
            return None
        return AccessToken(token=token, client_id=entry.name, scopes=[])


def http_app(
    cx: Cortex,
    tokens: TokenFile,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    write_budget: int | None = tools.DEFAULT_WRITE_BUDGET,
) -> Any:
    """The ASGI application of ``serve_http`` (for tests and for mounting elsewhere)."""

    def identity_of(ctx: ServerRequestContext[Any, Any]) -> tuple[tools.Identity, str]:
        request = ctx.request
        user = None if request is None else request.scope.get("user")
        if not isinstance(user, AuthenticatedUser):
            raise CortexError("no bearer token: this server needs one for every request")
        entry = tokens.verify(user.access_token.token)
        if entry is None:  # rotated or removed since the request was let in
            raise CortexError("the bearer token is no longer valid")
        identity = tools.Identity(
            name=entry.name,
            actor=entry.actor,
            scopes=entry.scopes,
            write_budget=entry.write_budget,
            clearance=entry.clearance,
        )
        session = request.headers.get("mcp-session-id") if request is not None else None
        task = f"session:{session}" if session else f"token:{entry.sha256}"
        return identity, task

    mcp = MCPServer(cx, identity_of, write_budget=write_budget)
    return mcp.server.streamable_http_app(
        host=host,
        token_verifier=_Verifier(tokens),
        auth=AuthSettings.model_validate(
            {"issuer_url": f"http://{host}:{port}", "resource_server_url": None}
        ),
    )


def serve_http(
    cx: Cortex,
    tokens: TokenFile,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    write_budget: int | None = tools.DEFAULT_WRITE_BUDGET,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp`` until interrupted.

    Args:
        cx: the store, opened as its owner.
        tokens: the token file; every request needs a bearer token listed there.
        host: the address to bind (loopback by default: put TLS in front for anything else).
        port: the TCP port (0: any free one; ``ready`` is told the URL).
        write_budget: writes per task unless a token says otherwise.
        ready: called with the server's URL once it listens.
    """
    import uvicorn

    tokens.entries()  # fail now, not at the first request, if the file is missing or bad
    app = http_app(cx, tokens, host=host, port=port, write_budget=write_budget)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve)
            while not server.started:
                await anyio.sleep(0.02)
                if server.should_exit:
                    return
            if ready is not None:
                bound = port
                for s in server.servers:
                    for sock in s.sockets:
                        bound = sock.getsockname()[1]
                ready(f"http://{host}:{bound}/mcp")

    anyio.run(main)
