"""MCP wiring only: the low-level SDK server around a :class:`~bundle_mcp.dispatch.Dispatcher`.

Nothing here decides a result. ``tools/list`` advertises the dispatcher's tool specs (built
from the contract files) and ``tools/call`` runs the dispatcher in a worker thread, so a long
load or query never blocks the event loop (pings and cancellations still get through), and a
client cancellation reaches the worker through its :class:`~bundle_mcp.cancel.CancelToken`.
"""

from __future__ import annotations

import functools
import hmac
import logging
import signal
import socket
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import Any, BinaryIO

import anyio
import anyio.to_thread
import mcp.types as types
import uvicorn
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from ._version import __version__
from .answer_lines import AnswerLines, plain_result
from .cancel import CancelToken
from .contracts import internal_error
from .dispatch import Dispatcher, Outcome, ServedTool, UnknownTool
from .handshake import INSTRUCTIONS, SERVER_NAME, Opening
from .observe import CallObserver
from .okf.scopes import FolderScope
from .readers import ALL_READER, READER_STATE_KEY, Reader, ReaderBook
from .readiness import STOP_WAIT_SECONDS, Readiness
from .resources import DEFAULT_PAGE_SIZE
from .rest import RestApi, with_rest_api
from .stdio import stdio_transport
from .surfaces import DEFAULT_POLL_SECONDS, Surfaces, SurfaceServer, reader_of
from .wire_lines import LineSource

__all__ = [
    "INSTRUCTIONS",
    "BearerTokenMiddleware",
    "build_http_app",
    "build_server",
    "serve_http",
    "serve_stdio",
]

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
_MAX_NAME_IN_ERROR = 128



def _tool(spec: ServedTool) -> types.Tool:
    return types.Tool.model_validate(spec.listing(), by_alias=True)


def _unknown_tool(name: str) -> MCPError:
    # Echo a bounded, encodable name: a lone surrogate in the reply would break the stdio writer.
    shown = name[:_MAX_NAME_IN_ERROR].encode("utf-8", "backslashreplace").decode("utf-8")
    ellipsis = "…" if len(name) > _MAX_NAME_IN_ERROR else ""
    return MCPError(types.INVALID_PARAMS, f"Unknown tool: {shown}{ellipsis}")


async def _call_in_worker(
    dispatcher: Dispatcher,
    name: str,
    arguments: Mapping[str, Any] | None,
    observer: CallObserver | None = None,
    reader: Reader | None = None,
) -> Outcome:
    token = CancelToken(observer=observer)
    try:
        # abandon_on_cancel: the request task returns at once on cancellation; the worker sees
        # the cancelled token at its next check and stops without producing a reply.
        return await anyio.to_thread.run_sync(
            dispatcher.call, name, arguments, token, reader, abandon_on_cancel=True
        )
    except anyio.get_cancelled_exc_class():
        token.cancel()
        raise


def build_server(
    dispatcher: Dispatcher,
    *,
    streams: bool = True,
    page_size: int = DEFAULT_PAGE_SIZE,
    poll_seconds: float = DEFAULT_POLL_SECONDS,
    answer_lines: AnswerLines | None = None,
    told: frozenset[tuple[str, ...]] = frozenset(),
) -> Server[Any]:
    """The low-level server: the dispatcher's tools advertised, every call through it, plus
    resources, prompts, completions, logging and progress (:mod:`bundle_mcp.surfaces`).

    ``streams``: connections last (stdio, in memory); false for stateless HTTP, which then
    declares no subscriptions, list changes or logging of 2025 connections.
    ``answer_lines``: big answers leave as placeholders that the transport's writer puts back
    (:mod:`bundle_mcp.answer_lines`); only for a transport that does (stdio).
    ``told``: the keys of the notices a connection was told before the SDK served it
    (:mod:`bundle_mcp.first_call`).
    """
    surfaces = Surfaces(
        dispatcher, page_size=page_size, poll_seconds=poll_seconds, streams=streams, told=told
    )
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
            async with surfaces.reporting(ctx, params.name) as observer:
                outcome = await _call_in_worker(
                    dispatcher, params.name, params.arguments, observer, reader_of(ctx)
                )
        except UnknownTool:
            raise _unknown_tool(params.name) from None
        except Exception:
            # The dispatcher already turns failures into envelopes; this is the last line, so
            # that no raw exception reaches the SDK (which would send its text on 2025-era links).
            log.exception("tools/call %s failed outside the dispatcher", params.name)
            envelope = internal_error().envelope()
            outcome = Outcome(structured=envelope, text=envelope["message"], is_error=True)
        if answer_lines is not None and answer_lines.holds(outcome):
            return await anyio.to_thread.run_sync(answer_lines.hold, outcome)
        return plain_result(outcome)

    server = SurfaceServer(
        SERVER_NAME,
        version=__version__,
        instructions=INSTRUCTIONS,
        # Lets the HTTP transport check Mcp-Param headers without an internal tools/list.
        get_tool_input_schema=input_schemas.get,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        **surfaces.handlers(),
    )
    surfaces.install(server)
    return server


# --------------------------------------------------------------------------------------------
# Transports


@contextmanager
def reload_on_sighup(
    reload: Callable[[], object] | None, catch_up: Callable[[], object] | None = None
) -> Iterator[None]:
    """Run ``reload`` on SIGHUP while serving (the readers file, re-read without a restart).

    Only from the main thread, where Python runs signal handlers; elsewhere (a test serving
    from a thread) nothing is installed. The handler only starts a thread: a handler runs
    between two bytecodes of the main thread, which may hold the very lock the reload takes
    (the reader book's, read by every request), and the file is read off the event loop.
    Reloads run one at a time, each reading the file as it is then.
    """
    if reload is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    one_at_a_time = threading.Lock()

    def run() -> None:
        with one_at_a_time:
            reload()

    def handler(signum: int, frame: FrameType | None) -> None:
        threading.Thread(target=run, name="bundle-mcp-reload", daemon=True).start()
        # A handler installed before this one (the remote bundles' refresh) still runs.
        if callable(previous) and previous is not handler:
            previous(signum, frame)

    previous = signal.getsignal(signal.SIGHUP)
    signal.signal(signal.SIGHUP, handler)
    if catch_up is not None:
        # A SIGHUP sent before this handler existed was not seen (a --workers worker ignores
        # it until here): catch up with a change made meanwhile, once, like a reload.
        def caught_up() -> None:
            with one_at_a_time:
                catch_up()

        threading.Thread(target=caught_up, name="bundle-mcp-reload", daemon=True).start()
    try:
        yield
    finally:
        signal.signal(signal.SIGHUP, previous)


def serve_stdio(
    dispatcher: Dispatcher,
    on_reload: Callable[[], object] | None = None,
    *,
    wires: tuple[LineSource, BinaryIO] | None = None,
    opening: Opening | None = None,
    hung_up: Callable[[], bool] | None = None,
) -> None:
    """Serve one client on stdin/stdout (or on ``wires``, claimed already); ``on_reload`` runs
    on SIGHUP, and once more when its handler is in place if ``hung_up`` says a SIGHUP came
    before.

    ``opening``: the client's first line, read and perhaps answered before this module was
    imported (:mod:`bundle_mcp.handshake`), and the lines after it that a first call answered
    without the SDK leaves to replay (:mod:`bundle_mcp.first_call`). The served bundles are
    loaded and warmed in the background (:mod:`bundle_mcp.readiness`) from the moment the
    first answer is on the wire, never before: the warm-up must not delay the answer to
    ``initialize``.
    """
    answer_lines = AnswerLines()
    told = opening.told if opening is not None else frozenset()
    server = build_server(dispatcher, answer_lines=answer_lines, told=told)
    readiness = Readiness(dispatcher, freeze_memory=True)
    warm_up = _once(readiness.start)

    async def run() -> None:
        # Our transport, not the SDK's stdio_server: that one drops the lines it cannot parse
        # without a reply (see bundle_mcp.stdio).
        wire_in, wire_out = wires if wires is not None else (None, None)
        async with stdio_transport(wire_in, wire_out, opening=opening, on_first_reply=warm_up,
                                   answer_lines=answer_lines,
                                   answering=dispatcher.gate.call) as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    def reload() -> None:
        if on_reload is not None:
            on_reload()
            readiness.rescope()  # the reader, and so the view to keep warm, may have changed

    if opening is not None and opening.answered is not None:
        warm_up()  # initialize is answered already
    try:
        def catch_up() -> None:
            if hung_up is not None and hung_up():
                reload()

        with reload_on_sighup(reload if on_reload is not None else None, catch_up):
            anyio.run(run)
    finally:
        readiness.stop(wait=STOP_WAIT_SECONDS)


def _once(action: Callable[[], object]) -> Callable[[], None]:
    """``action``, run by the first call only, whichever thread makes it."""
    lock = threading.Lock()
    done: list[bool] = []

    def run() -> None:
        with lock:
            if done:
                return
            done.append(True)
        action()

    return run


class BearerTokenMiddleware:
    """Require ``Authorization: Bearer <token>`` on every HTTP request (401 otherwise), and
    leave the reader the token picks in the ASGI scope's state for the handlers.

    With ``token``: one token, the all-reading reader. With ``readers``: the token picks a
    reader of the readers file in force (reloaded on SIGHUP), by its SHA-256.

    The header is compared as the bytes that arrived, with the token's UTF-8 bytes: Starlette
    decodes header values as Latin-1, so comparing decoded text with a UTF-8 token never
    matched a token outside ASCII. Tokens should be printable ASCII anyway (the help says so);
    clients disagree on how they put other characters into a header.
    """

    def __init__(
        self, app: ASGIApp, token: str | None = None, *, readers: ReaderBook | None = None
    ) -> None:
        if (token is None) == (readers is None):
            raise ValueError("give exactly one of token and readers")
        self._app = app
        self._readers = readers
        # surrogateescape: a token from argv or the environment that was not UTF-8 keeps its
        # original bytes instead of failing to encode.
        self._token = token.encode("utf-8", "surrogateescape") if token is not None else b""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        reader = self._reader(scope["headers"])
        if reader is None:
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
        scope.setdefault("state", {})[READER_STATE_KEY] = reader
        await self._app(scope, receive, send)

    def _reader(self, raw_headers: Iterable[tuple[bytes, bytes]]) -> Reader | None:
        values = [value for name, value in raw_headers if name.lower() == b"authorization"]
        if len(values) != 1:  # none, or several that a proxy and we might read differently
            return None
        scheme, _, credentials = values[0].partition(b" ")
        if scheme.lower() != b"bearer":
            return None
        presented = credentials.strip(b" \t")
        if self._readers is not None:
            return self._readers.current().by_token(presented)
        # compare_digest: the time taken must not tell how much of a guess was right.
        return ALL_READER if hmac.compare_digest(presented, self._token) else None


def _allowed_hosts(host: str, port: int) -> list[str]:
    """The Host header values a local client sends; anything else is a rebinding attempt."""
    bound = f"[{host}]" if ":" in host else host  # an IPv6 literal travels in brackets
    names = sorted({bound, "127.0.0.1", "localhost", "[::1]"})
    hosts = [f"{name}:{port}" for name in names]
    if port == 80:  # clients omit the default port
        hosts += names
    return hosts


def build_http_app(
    dispatcher: Dispatcher,
    host: str,
    port: int,
    token: str | None,
    extra_hosts: Sequence[str] = (),
    readers: ReaderBook | None = None,
    ready: Callable[[], bool] | None = None,
) -> ASGIApp:
    """Stateless streamable HTTP with JSON responses, DNS-rebinding protection, optional token,
    and the REST endpoints under ``/api`` (:mod:`bundle_mcp.rest`) behind the same checks.

    ``extra_hosts``: Host header values accepted besides the bound address and the loopback
    names (``--allowed-host``: a Service name, a proxy's name; ``NAME:*`` for any port).
    ``ready``: the warm-up's ``is_ready``, for REST's 503 on a bundle not loaded yet.
    """
    server = build_server(dispatcher, streams=False)
    hosts = _allowed_hosts(host, port)
    extra = sorted(set(extra_hosts) - set(hosts))
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*hosts, *extra],
        # A named host is often reached through a TLS-terminating proxy: https origins too.
        allowed_origins=[f"http://{h}" for h in hosts]
        + [f"{scheme}://{h}" for h in extra for scheme in ("http", "https")],
    )
    app: ASGIApp = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        transport_security=security,
        host=host,
    )
    rest = RestApi(
        dispatcher,
        lambda name, arguments, reader: _call_in_worker(dispatcher, name, arguments, None, reader),
        security,
        ready=ready,
        secured=bool(token) or readers is not None,
    )
    app = with_rest_api(app, rest)
    if readers is not None:
        return BearerTokenMiddleware(app, readers=readers)
    return BearerTokenMiddleware(app, token) if token else app


def bind_http(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything is printed (port 0: the kernel picks one).

    Raises:
        OSError: the address is taken or cannot be bound; the caller reports it on one line.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=2048)


def serve_http(
    dispatcher: Dispatcher,
    sock: socket.socket,
    token: str | None,
    on_ready: Callable[[str, int], None] | None = None,
    allowed_hosts: Sequence[str] = (),
    readers: ReaderBook | None = None,
    *,
    keep_alive: int,
) -> None:
    """Serve on an already bound socket; ``on_ready(host, port)`` runs once it is listening.

    The served bundles are loaded and warmed in a background thread meanwhile
    (:mod:`bundle_mcp.readiness`); ``/readyz`` says when that is done. ``keep_alive``: the
    seconds an idle connection stays open (``serve --keep-alive``, whose help says why the
    default is far above uvicorn's own 5 s).
    """
    host, port = sock.getsockname()[:2]
    readiness = Readiness(dispatcher, freeze_memory=True,
                          scopes=served_scopes(readers) if readers is not None else None)

    def reload(only_if_changed: bool = False) -> None:
        if readers is not None and readers.reload(only_if_changed=only_if_changed):
            readiness.rescope()

    app = public_paths(
        build_http_app(dispatcher, host, port, token, allowed_hosts, readers, readiness.is_ready),
        readiness.is_ready,
    )
    # No access log: a line per request costs more than a cached read_concept itself; the
    # http and loop implementations stay "auto" (httptools and uvloop when installed).
    # The client must be the one that closes an idle connection: a server that closes first
    # races the client's next request, which then fails on a dead socket (issue 25).
    config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False,
                            timeout_keep_alive=keep_alive)
    readiness.start()
    try:
        with reload_on_sighup(reload if readers is not None else None,
                              catch_up=functools.partial(reload, only_if_changed=True)
                              if readers is not None else None):
            _Uvicorn(config, lambda: on_ready(host, port) if on_ready else None).run(
                sockets=[sock])
    finally:
        readiness.stop(wait=STOP_WAIT_SECONDS)


def served_scopes(readers: ReaderBook) -> Callable[[], list[FolderScope]]:
    """The read scopes of the readers in force, for the warm-up to keep warm."""
    return lambda: [reader.access.read for reader in readers.current().readers]


class _Uvicorn(uvicorn.Server):
    """uvicorn's server, telling once it listens (the client configuration is printed then)."""

    def __init__(self, config: uvicorn.Config, on_ready: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_ready = on_ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self._on_ready()


_NOT_FOUND = b'{"error":"not found"}'
HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"
_PROBE_METHODS = ("GET", "HEAD")


def public_paths(app: ASGIApp, ready: Callable[[], bool] | None = None) -> ASGIApp:
    """Paths answered before the token check.

    ``/healthz`` (the process serves: 200 ``{"status":"ok"}``) and ``/readyz`` (200 once every
    served bundle is loaded and warm, ``ready()``; 503 until then; always 200 without
    ``ready``) are for probes, which carry no token; neither says anything about a bundle.
    ``/.well-known/*`` (OAuth discovery among them) is 404: this server offers no OAuth, and a
    401 there makes hosts start an OAuth flow that cannot succeed instead of asking for the
    bearer token.
    """

    async def routed(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        path = scope["path"]
        if path.startswith("/.well-known/"):
            await _answer(send, 404, _NOT_FOUND)
        elif path in (HEALTH_PATH, READY_PATH):
            head = scope["method"] == "HEAD"
            if scope["method"] not in _PROBE_METHODS:
                await _answer(
                    send, 405, b'{"error":"method not allowed"}', [(b"allow", b"GET, HEAD")]
                )
            elif path == HEALTH_PATH:
                await _answer(send, 200, b'{"status":"ok"}', head=head)
            elif ready is None or ready():
                await _answer(send, 200, b'{"status":"ready"}', head=head)
            else:
                await _answer(send, 503, b'{"status":"not ready"}', head=head)
        else:
            await app(scope, receive, send)

    return routed


async def _answer(
    send: Send,
    status: int,
    body: bytes,
    headers: Sequence[tuple[bytes, bytes]] = (),
    *,
    head: bool = False,
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode("ascii")),
                (b"cache-control", b"no-store"),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": b"" if head else body})
