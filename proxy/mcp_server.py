"""moim's memory as an MCP server: the in-proxy memory tools, for agents that speak MCP.

Four tools, the same functions as the model's tools of `proxy/tools.py` (same schemas, same
JSON results, run by `run_tool`), under MCP names: the client names the server, so no prefix.

    search_memory   {query, k?}                        ranked excerpts of past messages
    remember_fact   {key, value, category?, policy?}   upsert a fact (source "model_tool")
    recall_facts    {key?}                             the user's active facts
    forget_fact     {key}                              archive a fact

Two transports, built on the official `mcp` SDK (the `moim[mcp]` extra):

- stdio (`moim mcp`, for desktop agents): one process, one user, named by `--user`/MOIM_USER.
- streamable HTTP at `/mcp` (and `/u/{user_id}/mcp`) on the running proxy: stateless, JSON
  responses, so any replica answers any request. Each request is authenticated and
  identified as the memory API's are (`proxy/auth.py`, `proxy/identity.py`): a proxy key
  bound to a user is that user, else the user headers or the path. `X-Memory-Mode: read`
  offers the reading tools only, `write` the writing ones, `off` none. When moim listens on
  loopback without proxy keys, the SDK's DNS-rebinding guard admits loopback Host and Origin
  only, so a web page cannot drive a local moim's memory through a rebound name.

A result is the tool's JSON as text; one holding `"error"` is marked `is_error`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from memory import MemoryLayer
from proxy.auth import authenticate
from proxy.identity import Identity, identify
from proxy.mcp_drain import AnsweringWriter, DrainingReader, Unanswered
from proxy.tools import FORGET, NAMES, RECALL, REMEMBER, SCHEMAS, SEARCH, offered, run_tool

if TYPE_CHECKING:
    from proxy.config import Config

SERVER_NAME = "moim"
# MCP name → the in-proxy tool it runs.
TOOLS = {
    "search_memory": SEARCH,
    "remember_fact": REMEMBER,
    "recall_facts": RECALL,
    "forget_fact": FORGET,
}
_SCOPE_KEY = "moim.identity"  # where the HTTP endpoint leaves the request's identity
_LOOPBACK = TransportSecuritySettings(
    enable_dns_rebinding_protection=True,
    allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"],
    allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
)
_OPEN = TransportSecuritySettings(enable_dns_rebinding_protection=False)


@dataclass(frozen=True, slots=True)
class _Caller:
    """Whose memory a tool call uses, and which tools its mode allows (`proxy/tools.py`)."""

    user_id: str
    allowed: tuple[str, ...]


def build_server(layer: MemoryLayer, user_id: str | None = None) -> Server[Any]:
    """The MCP server over `layer`: tools for `user_id` (stdio), or for the HTTP request's user.

    Without `user_id`, a call must come through `McpEndpoint`, which puts the request's
    identity where the server finds it; a call that arrives otherwise is refused.
    """
    fixed = None if user_id is None else _Caller(user_id, NAMES)

    def caller_of(ctx: ServerRequestContext[Any]) -> _Caller | None:
        request = ctx.request
        who = request.scope.get(_SCOPE_KEY) if isinstance(request, Request) else None
        if isinstance(who, Identity):
            return _Caller(who.user_id, offered(who.mode))
        return fixed

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        caller = caller_of(ctx)
        allowed = caller.allowed if caller is not None else ()
        return types.ListToolsResult(tools=[_tool(n) for n, i in TOOLS.items() if i in allowed])

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        caller = caller_of(ctx)
        name = TOOLS.get(params.name)
        if caller is None:
            return _result(json.dumps({"error": "no user: call through moim's /mcp endpoint"}))
        if name is None or name not in caller.allowed:
            return _result(json.dumps({"error": f"unknown tool {params.name!r}"}))
        arguments = dict(params.arguments or {})
        text = await anyio.to_thread.run_sync(run_tool, layer, caller.user_id, name, arguments)
        return _result(text)

    return Server(
        SERVER_NAME,
        version=_version(),
        instructions="Long-term memory of one user: search past conversations, and remember, "
        "recall or forget facts about the user.",
        get_tool_input_schema=_input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _tool(mcp_name: str) -> types.Tool:
    function = SCHEMAS[TOOLS[mcp_name]]["function"]
    return types.Tool(
        name=mcp_name, description=function["description"], input_schema=function["parameters"]
    )


def _input_schema(mcp_name: str) -> dict[str, Any] | None:
    """The schema the SDK checks a call's arguments against (None: an unknown tool)."""
    name = TOOLS.get(mcp_name)
    return None if name is None else dict(SCHEMAS[name]["function"]["parameters"])


def _result(text: str) -> types.CallToolResult:
    try:
        failed = "error" in json.loads(text)
    except ValueError:
        failed = True
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=failed
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("moim")
    except PackageNotFoundError:
        return "0"


async def serve_stdio(layer: MemoryLayer, user_id: str) -> None:
    """Answer MCP on stdin/stdout for `user_id` until the client closes stdin (`moim mcp`),
    and every request read by then is answered (proxy/mcp_drain.py)."""
    server = build_server(layer, user_id)
    unanswered = Unanswered()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(
            DrainingReader(read_stream, unanswered),
            AnsweringWriter(write_stream, unanswered),
            server.create_initialization_options(),
        )


class McpEndpoint:
    """The ASGI app behind `/mcp`: authenticate and identify, then the SDK's transport.

    `run()` must be entered (the app's lifespan does) before requests arrive. A refused
    request raises the `ProxyError` that `proxy/app.py` turns into OpenAI's error shape.
    """

    def __init__(self, layer: MemoryLayer, config: Config, loopback: bool) -> None:
        self._config = config
        self._manager = StreamableHTTPSessionManager(
            app=build_server(layer),
            json_response=True,
            stateless=True,
            security_settings=_LOOPBACK if loopback and not config.keys else _OPEN,
            max_request_body_size=config.max_body_bytes,
        )

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        async with self._manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Request(scope).headers
        caller = authenticate(headers, self._config)
        path_user = scope.get("path_params", {}).get("user_id")
        who = identify(headers, {}, path_user, caller.bound_user)
        caller.check_user(who.user_id)
        scope[_SCOPE_KEY] = who
        await self._manager.handle_request(scope, receive, send)
