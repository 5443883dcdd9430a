"""``cortex serve``: cortex as an MCP server, with identity bound per connection.

``cortex.serve.tokens`` holds the bearer-token file (no MCP SDK needed); ``cortex.serve.tools``
the tools (their JSON Schemas and what each does for a caller); ``cortex.serve.server`` the
stdio and streamable HTTP transports over the MCP SDK (``pip install 'cortex-store[mcp]'``).
"""

from __future__ import annotations

from cortex.serve.tokens import TokenEntry, TokenFile, scope_from_json, scope_to_json

__all__ = ["TokenEntry", "TokenFile", "scope_from_json", "scope_to_json"]
