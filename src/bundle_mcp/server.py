"""MCP wiring only: the low-level SDK server around a :class:`~bundle_mcp.dispatch.Dispatcher`.

Nothing here decides a result. ``tools/list`` advertises the contract files verbatim and
``tools/call`` runs the dispatcher in a worker thread, so a long load or query never blocks the
event loop (pings and cancellations still get through), and a client cancellation reaches the
worker through its :class:`~bundle_mcp.cancel.CancelToken`.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Mapping
from typing import Any

import anyio
import anyio.to_thread
import mcp.types as types
import uvicorn
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from . import __version__
from .cancel import CancelToken
from .contracts import internal_error
from .dispatch import Dispatcher, Outcome, ToolSpec, UnknownTool

__all__ = [
    "INSTRUCTIONS",
    "BearerTokenMiddleware",
    "build_http_app",
    "build_server",
    "serve_http",
    "serve_stdio",
]

log = logging.getLogger(__name__)

SERVER_NAME = "bundle-mcp"
MCP_PATH = "/mcp"
_MAX_NAME_IN_ERROR = 128

INSTRUCTIONS = """\
This server answers questions from an Open Knowledge Format bundle (Markdown concepts with YAML \
frontmatter). Work in this loop:
1. Search first: search_concepts with one distinctive literal substring from the question (an ID, \
title, tag or phrase; not several words joined by AND), or search_sections for passages.
2. Read only the selected IDs with read_concept.
3. Widen at most twice: get_neighbors or expand_neighbors for what sits next to a concept, \
fetch_slice for the sections around a search_sections hit (cite its parent_id), query_subgraph \
or visualize_graph for a bounded neighbourhood. Never walk the whole graph; then answer.
When a result says truncated: true, narrow the query or raise limit (max 100) instead of \
guessing. Never claim that an omitted hit or edge was inspected; report the limit instead.
"""

_READ_ANNOTATIONS = types.ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
_WRITE_ANNOTATIONS = types.ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)


def _tool(spec: ToolSpec) -> types.Tool:
    return types.Tool(
        name=spec.name,
        description=spec.description,
        input_schema=dict(spec.input_schema),
        output_schema=dict(spec.output_schema),
        annotations=_READ_ANNOTATIONS if spec.read_only else _WRITE_ANNOTATIONS,
    )


def _result(outcome: Outcome) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=outcome.text)],
        structured_content=outcome.structured,
        is_error=outcome.is_error,
    )


def _unknown_tool(name: str) -> MCPError:
    # Echo a bounded, encodable name: a lone surrogate in the reply would break the stdio writer.
    shown = name[:_MAX_NAME_IN_ERROR].encode("utf-8", "backslashreplace").decode("utf-8")
    ellipsis = "…" if len(name) > _MAX_NAME_IN_ERROR else ""
    return MCPError(types.INVALID_PARAMS, f"Unknown tool: {shown}{ellipsis}")


async def _call_in_worker(
    dispatcher: Dispatcher, name: str, arguments: Mapping[str, Any] | None
) -> Outcome:
    token = CancelToken()
    try:
        # abandon_on_cancel: the request task returns at once on cancellation; the worker sees
        # the cancelled token at its next check and stops without producing a reply.
        return await anyio.to_thread.run_sync(
            dispatcher.call, name, arguments, token, abandon_on_cancel=True
        )
    except anyio.get_cancelled_exc_class():
        token.cancel()
        raise


def build_server(dispatcher: Dispatcher) -> Server[Any]:
    """The low-level server: contracts advertised verbatim, every call through the dispatcher."""
    specs = dispatcher.tools()
    listed = types.ListToolsResult(tools=[_tool(spec) for spec in specs])
    input_schemas = {spec.name: dict(spec.input_schema) for spec in specs}

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return listed

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name not in input_schemas:
            raise _unknown_tool(params.name)
        try:
            outcome = await _call_in_worker(dispatcher, params.name, params.arguments)
        except UnknownTool:
            raise _unknown_tool(params.name) from None
        except Exception:
            # The dispatcher already turns failures into envelopes; this is the last line, so
            # that no raw exception reaches the SDK (which would send its text on 2025-era links).
            log.exception("tools/call %s failed outside the dispatcher", params.name)
            envelope = internal_error().envelope()
            outcome = Outcome(structured=envelope, text=envelope["message"], is_error=True)
        return _result(outcome)

    return Server(
        SERVER_NAME,
        version=__version__,
        instructions=INSTRUCTIONS,
        # Lets the HTTP transport check Mcp-Param headers without an internal tools/list.
        get_tool_input_schema=input_schemas.get,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


# --------------------------------------------------------------------------------------------
# Transports


def serve_stdio(dispatcher: Dispatcher) -> None:
    server = build_server(dispatcher)

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(run)


class BearerTokenMiddleware:
    """Require ``Authorization: Bearer <token>`` on every HTTP request (401 otherwise)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._token = token.encode("utf-8")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self._authorized(Headers(scope=scope)):
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer realm="bundle-mcp"'),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": b'{"error":"unauthorized"}'})
            return
        await self._app(scope, receive, send)

    def _authorized(self, headers: Headers) -> bool:
        scheme, _, credentials = headers.get("authorization", "").partition(" ")
        # compare_digest: the time taken must not tell how much of a guess was right.
        return scheme.lower() == "bearer" and hmac.compare_digest(
            credentials.strip().encode("utf-8"), self._token
        )


def _allowed_hosts(host: str, port: int) -> list[str]:
    """The Host header values a local client sends; anything else is a rebinding attempt."""
    bound = f"[{host}]" if ":" in host else host  # an IPv6 literal travels in brackets
    names = sorted({bound, "127.0.0.1", "localhost", "[::1]"})
    hosts = [f"{name}:{port}" for name in names]
    if port == 80:  # clients omit the default port
        hosts += names
    return hosts


def build_http_app(dispatcher: Dispatcher, host: str, port: int, token: str | None) -> ASGIApp:
    """Stateless streamable HTTP with JSON responses, DNS-rebinding protection, optional token."""
    server = build_server(dispatcher)
    hosts = _allowed_hosts(host, port)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[f"http://{h}" for h in hosts],
    )
    app: ASGIApp = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        transport_security=security,
        host=host,
    )
    return BearerTokenMiddleware(app, token) if token else app


def serve_http(dispatcher: Dispatcher, host: str, port: int, token: str | None) -> None:
    app = build_http_app(dispatcher, host, port, token)
    uvicorn.run(app, host=host, port=port, log_level="warning", lifespan="on")
