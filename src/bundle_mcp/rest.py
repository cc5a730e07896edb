"""REST beside MCP over ``serve --http``: ``POST /api/tools/<tool>`` for every served tool.

Nothing here decides a result either. A request's JSON body is the tool's ``arguments`` object,
exactly what a ``tools/call`` carries; it goes through the same :class:`~bundle_mcp.dispatch.
Dispatcher` in a worker thread (the MCP server's own worker call, handed in by
:func:`bundle_mcp.server.build_http_app`), as the reader the bearer token picked, and the answer
is the envelope a ``tools/call`` result carries, written by the same JSON serializer as the SDK's
HTTP transport (pydantic-core), so that ``structuredContent`` is byte for byte the one MCP sends::

    {"content": [{"type": "text", "text": ...}], "structuredContent": ..., "isError": false}

The HTTP status says what ``isError`` and the envelope's code say (:func:`status_of`);
every answer other than 200 carries an error envelope (``contracts/error.schema.json``) as its
``structuredContent``, including the ones this module gives itself (a malformed body, an unknown
tool, a rebinding ``Host``, not ready yet). ``POST /api/search/expand`` and
``POST /api/search/slice`` are the traversal seed's paths for ``expand_neighbors`` and
``fetch_slice``. ``GET /api/openapi.json`` is an OpenAPI 3.1 document built at start from the
served tools' contracts (:func:`openapi_document`). docs/REST.md has the endpoints and the table.
"""

from __future__ import annotations

import copy
import itertools
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import anyio
import anyio.to_thread
import pydantic_core
from mcp.server.transport_security import (
    DEFAULT_MAX_REQUEST_BODY_SIZE,
    TransportSecurityMiddleware,
    TransportSecuritySettings,
)
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._version import __version__
from .cancel import CancelToken
from .contracts import ERROR_SCHEMA, contracts_dir, internal_error
from .dispatch import Dispatcher, Outcome, ServedTool, UnknownTool, to_json
from .errors import (
    CONCEPT_NOT_FOUND,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    INVALID_YAML_GRAPH,
    OPERATION_CANCELLED,
    OPERATION_REJECTED,
    PLAN_MISMATCH,
    RESOURCE_LIMIT,
    REVISION_CONFLICT,
    BundleError,
    invalid_request,
    recovery_step,
)
from .pieces import Pieces
from .readers import Reader, reader_in

__all__ = [
    "ALIASES",
    "API_PREFIX",
    "MAX_BODY_BYTES",
    "OPENAPI_PATH",
    "TOOLS_PREFIX",
    "CallInWorker",
    "RestApi",
    "openapi_document",
    "status_of",
    "with_rest_api",
]

log = logging.getLogger(__name__)

API_PREFIX = "/api"
TOOLS_PREFIX = "/api/tools/"
OPENAPI_PATH = "/api/openapi.json"
# The traversal seed's REST paths (docs/DESIGN.md §7): the same tools, other names.
ALIASES: Mapping[str, str] = MappingProxyType({
    "/api/search/expand": "expand_neighbors",
    "/api/search/slice": "fetch_slice",
})
# The cap the SDK puts on a /mcp request body: the same arguments fit through either door.
MAX_BODY_BYTES = DEFAULT_MAX_REQUEST_BODY_SIZE
# Retry-After for a call refused because its bundle has not been loaded yet, and for a
# cancelled one (the one retryable code).
NOT_READY_RETRY_SECONDS = 5
CANCELLED_RETRY_SECONDS = 1
# The envelope diagnostic that names an argument the input contract refused.
INVALID_INPUT = "invalid_input"

# Runs one call in a worker thread with a CancelToken that a cancellation of the awaiting task
# cancels (server._call_in_worker, bound to the dispatcher): name, arguments, reader.
CallInWorker = Callable[[str, Mapping[str, Any], Reader | None], Awaitable[Outcome]]

_STATUS: Mapping[str, int] = MappingProxyType({
    INVALID_REQUEST: 400,
    CONCEPT_NOT_FOUND: 404,
    REVISION_CONFLICT: 409,
    PLAN_MISMATCH: 409,
    OPERATION_REJECTED: 422,
    INVALID_YAML_GRAPH: 422,
    OPERATION_CANCELLED: 503,
    INTERNAL_ERROR: 500,
})
_JSON = b"application/json"
_POST = "POST"
_DOCUMENT_METHODS = ("GET", "HEAD")


def status_of(outcome: Outcome) -> int:
    """The HTTP status of a finished call: 200 for a result, else by the envelope's code.

    ``resource_limit`` is 413 when the request itself is over a limit its input contract states
    (the envelope has an ``invalid_input`` diagnostic naming the argument: ``limit`` 101, a
    string past its ``maxLength``) and 422 when a cap was met while answering (the bundle's size,
    a concept's lists, an output budget, the query's distinct terms). An unknown code is 500.
    """
    if not outcome.is_error:
        return 200
    code = outcome.structured.get("code")
    if code == RESOURCE_LIMIT:
        diagnostics = outcome.structured.get("diagnostics") or []
        named = any(isinstance(d, Mapping) and d.get("code") == INVALID_INPUT for d in diagnostics)
        return 413 if named else 422
    return _STATUS.get(code, 500) if isinstance(code, str) else 500


def with_rest_api(app: ASGIApp, api: ASGIApp) -> ASGIApp:
    """``app`` with the HTTP requests for ``/api`` and below answered by ``api`` instead."""

    async def routed(scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path == API_PREFIX or path.startswith(API_PREFIX + "/"):
            await api(scope, receive, send)
        else:
            await app(scope, receive, send)

    return routed


class RestApi:
    """The ``/api`` ASGI app (the module docstring).

    ``call`` runs a call in a worker thread; ``security`` is the MCP app's DNS-rebinding
    settings (the same Host and Origin checks, the same 421 and 403); ``ready`` is the
    warm-up's ``is_ready`` (``None``: always ready); ``secured``: a bearer token or readers are
    required, which the OpenAPI document declares.

    Before the warm-up is done, a call whose bundle has not been loaded at all yet is answered
    503 with ``Retry-After`` at once instead of waiting for the load; a call on a bundle that is
    loaded is served as over MCP (it waits only for the structures it needs).
    """

    def __init__(
        self,
        dispatcher: Dispatcher,
        call: CallInWorker,
        security: TransportSecuritySettings,
        *,
        ready: Callable[[], bool] | None = None,
        secured: bool = False,
    ) -> None:
        self._dispatcher = dispatcher
        self._call = call
        self._security = TransportSecurityMiddleware(security)
        self._ready = ready
        self._tools = {tool.name: tool for tool in dispatcher.tools()}
        self._document = to_json(openapi_document(dispatcher, secured=secured)).encode("utf-8")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # pragma: no cover - with_rest_api routes only http here
            return
        refused = await self._security.validate_request(Request(scope, receive))
        if refused is not None:
            # The SDK's status (421 Host, 403 Origin) and wording, in an envelope.
            message = bytes(refused.body).decode("utf-8", "replace") or "request refused"
            await _error(send, refused.status_code, invalid_request(message))
            return
        path, method = scope["path"], scope["method"]
        if path == OPENAPI_PATH:
            if method not in _DOCUMENT_METHODS:
                await _method_not_allowed(send, "GET, HEAD")
            else:
                await _send(send, 200, self._document, head=method == "HEAD")
            return
        name = ALIASES.get(path) or (
            path[len(TOOLS_PREFIX):] if path.startswith(TOOLS_PREFIX) else None
        )
        if name is None or name not in self._tools:
            await _error(send, 404, _not_served(name))
            return
        if method != _POST:
            await _method_not_allowed(send, _POST)
            return
        arguments = await _arguments(scope, receive, send)
        if arguments is None:
            return  # answered (400, 413), or the client left
        if self._ready is not None and not self._ready():
            if await anyio.to_thread.run_sync(self._cold, arguments):
                await _error(send, 503, _not_ready(), retry_after=NOT_READY_RETRY_SECONDS)
                return
        outcome = await self._run(name, arguments, reader_in(scope), receive)
        if outcome is None:
            return  # the client disconnected: the call was cancelled, nobody to answer
        status = status_of(outcome)
        retry = CANCELLED_RETRY_SECONDS if status == 503 else None
        await _send(send, status, _body(outcome), retry_after=retry)

    async def _run(
        self, name: str, arguments: Mapping[str, Any], reader: Reader | None, receive: Receive
    ) -> Outcome | None:
        """The call's outcome, or ``None`` when the client disconnected first (the worker's
        token is cancelled then, as for an MCP cancellation)."""
        done: list[Outcome] = []
        async with anyio.create_task_group() as group:

            async def run() -> None:
                try:
                    done.append(await self._call(name, arguments, reader))
                except UnknownTool:
                    # Served at start, so not reachable; answered as any other unknown name.
                    done.append(_outcome(_not_served(name)))
                except Exception:
                    # The boundary, like server.on_call_tool: no raw exception reaches the client.
                    log.exception("REST call %s failed outside the dispatcher", name)
                    done.append(_outcome(internal_error()))
                group.cancel_scope.cancel()

            group.start_soon(run)
            while (await receive())["type"] != "http.disconnect":
                pass
            group.cancel_scope.cancel()
        return done[0] if done else None

    def _cold(self, arguments: Mapping[str, Any]) -> bool:
        """Whether the call's bundle is one the warm-up has not loaded yet (runs in a thread)."""
        bundles = self._dispatcher.config.bundles
        bundle = arguments.get("bundle_path", bundles[0] if len(bundles) == 1 else None)
        if not isinstance(bundle, str) or bundle not in bundles:
            return False  # the dispatcher answers it (an error, or a bundle no warm-up covers)
        try:
            return self._dispatcher.refreshed_snapshot(bundle, CancelToken()) is None
        except BundleError:
            return False  # loaded before and failing now: the call reports why


# --------------------------------------------------------------------------------------------
# The request body


async def _arguments(scope: Scope, receive: Receive, send: Send) -> dict[str, Any] | None:
    """The JSON object of the body, or ``None`` once a refusal is sent (or the client left)."""
    headers = Headers(scope=scope)
    media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        await _error(send, 400, _malformed("the body must be a JSON object sent as "
                                           "Content-Type: application/json"))
        return None
    declared = headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        await _error(send, 413, _too_large())
        return None
    body = bytearray()
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            return None
        body += message.get("body", b"")
        if len(body) > MAX_BODY_BYTES:
            await _error(send, 413, _too_large())
            return None
        if not message.get("more_body", False):
            break
    try:
        value = json.loads(bytes(body).decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        # ValueError: not JSON, NaN/Infinity, an integer of more digits than Python converts.
        await _error(send, 400, _malformed("the body is not valid UTF-8 JSON"))
        return None
    if not isinstance(value, dict):
        await _error(send, 400, _malformed("the body must be a JSON object: the tool's arguments"))
        return None
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# --------------------------------------------------------------------------------------------
# Answers


def _body(outcome: Outcome) -> tuple[bytes | Pieces, ...]:
    """The answer's body, as parts sent in turn (a kept answer's encodings as the pieces they
    are made in)."""
    if outcome.wire is not None:
        # A kept answer, encoded when it was kept (dispatch.WireJson): its encodings are put
        # between the keys, as the encoder below writes them, rather than encoded again (30 MB
        # of get_semantic_graph at 10,000 concepts: 0.2 s on the event loop) or joined.
        closing = b',"isError":true}' if outcome.is_error else b',"isError":false}'
        return (b'{"content":[{"type":"text","text":', outcome.wire.text,
                b'}],"structuredContent":', outcome.wire.structured, closing)
    # pydantic-core writes JSON as the SDK's HTTP transport does (number forms, raw UTF-8), so
    # structuredContent here is the same bytes as in a /mcp answer.
    return (pydantic_core.to_json(
        {
            "content": [{"type": "text", "text": outcome.text}],
            "structuredContent": outcome.structured,
            "isError": outcome.is_error,
        }
    ),)


def _outcome(error: BundleError) -> Outcome:
    envelope = error.envelope()
    return Outcome(structured=envelope, text=envelope["message"], is_error=True)


async def _error(
    send: Send, status: int, error: BundleError, *, retry_after: int | None = None
) -> None:
    await _send(send, status, _body(_outcome(error)), retry_after=retry_after)


async def _method_not_allowed(send: Send, allow: str) -> None:
    error = invalid_request(f"method not allowed here; use {allow}")
    await _send(send, 405, _body(_outcome(error)), [(b"allow", allow.encode("ascii"))])


async def _send(
    send: Send,
    status: int,
    body: bytes | tuple[bytes | Pieces, ...],
    headers: Sequence[tuple[bytes, bytes]] = (),
    *,
    retry_after: int | None = None,
    head: bool = False,
) -> None:
    parts = (body,) if isinstance(body, bytes) else body
    extra = [*headers]
    if retry_after is not None:
        extra.append((b"retry-after", str(retry_after).encode("ascii")))
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", _JSON),
                (b"content-length", str(sum(map(_length, parts))).encode("ascii")),
                (b"cache-control", b"no-store"),
                *extra,
            ],
        }
    )
    if head:
        await send({"type": "http.response.body", "body": b""})
        return
    pieces = itertools.chain.from_iterable((part,) if isinstance(part, bytes) else part
                                           for part in parts)
    piece = next(pieces, b"")
    for following in pieces:
        await send({"type": "http.response.body", "body": piece, "more_body": True})
        piece = following
    await send({"type": "http.response.body", "body": piece, "more_body": False})


def _length(part: bytes | Pieces) -> int:
    return len(part) if isinstance(part, bytes) else part.size


_MAX_NAME_SHOWN = 128


def _not_served(name: str | None) -> BundleError:
    if name:
        # Bounded and encodable, as server._unknown_tool shows it: repr escapes a lone surrogate.
        shown = repr(name[:_MAX_NAME_SHOWN]) + ("…" if len(name) > _MAX_NAME_SHOWN else "")
        what = f"no tool named {shown} is served here"
    else:
        what = f"no such endpoint under {API_PREFIX}"
    return invalid_request(
        what,
        recovery_step(f"GET {OPENAPI_PATH} lists every served tool as POST {TOOLS_PREFIX}<tool>"),
    )


def _malformed(message: str) -> BundleError:
    return invalid_request(
        message,
        recovery_step("send the tool's arguments object as the JSON body, {} for none"),
    )


def _too_large() -> BundleError:
    return BundleError(
        RESOURCE_LIMIT,
        f"the request body is larger than {MAX_BODY_BYTES} bytes",
        (recovery_step("send smaller arguments"),),
    )


def _not_ready() -> BundleError:
    return BundleError(
        OPERATION_CANCELLED,
        "the server is still loading this bundle; nothing was run",
        (recovery_step("retry the same call after Retry-After seconds; GET /readyz says when "
                       "every bundle is loaded"),),
    )


# --------------------------------------------------------------------------------------------
# The OpenAPI document

OPENAPI_VERSION = "3.1.0"
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
_SCHEMAS = "#/components/schemas/"
_RESPONSES = "#/components/responses/"
_VALUE_KEYWORDS = frozenset({"enum", "const", "default", "examples"})
_HEADER_KEYS = ("$schema", "$id")
_ERROR_RESPONSES: Mapping[str, tuple[int, str]] = MappingProxyType({
    "bad_request": (400, "invalid_request: malformed body, arguments outside the input "
                         "contract, an unknown bundle_path"),
    "not_found": (404, "concept_not_found (an absent concept and one the reader may not see "
                       "are answered alike), or no such tool served here"),
    "conflict": (409, "revision_conflict or plan_mismatch: preview again"),
    "too_large": (413, "resource_limit on the request: the body, or an argument over a limit "
                       "of the input contract"),
    "unprocessable": (422, "operation_rejected, invalid_yaml_graph, or resource_limit met while "
                           "answering (a cap of the bundle or of the answer)"),
    "internal": (500, "internal_error: see the server log"),
    "unavailable": (503, "operation_cancelled (retryable), or the bundle is not loaded yet; "
                         "see Retry-After"),
})


def openapi_document(dispatcher: Dispatcher, *, secured: bool) -> dict[str, Any]:
    """An OpenAPI 3.1 document of the served tools, from their contracts.

    Each served tool is one ``POST /api/tools/<tool>`` operation (operationId: the tool's name,
    summary: its title): the request body is the input schema ``tools/list`` advertises, a 200
    answer carries the tool's output contract as ``structuredContent``, every error status the
    envelope of ``error.schema.json``. Schemas are the contracts' JSON Schema 2020-12 (OpenAPI
    3.1's own dialect) under ``components/schemas``, each ``$defs`` entry moved beside its
    schema as ``<schema>.<definition>`` with the ``$ref`` rewritten. ``secured``: a bearer
    scheme, required on every operation.
    """
    tools = dispatcher.tools()
    schemas: dict[str, Any] = {}
    envelope = json.loads((contracts_dir() / ERROR_SCHEMA).read_text(encoding="utf-8"))
    _hoist("error", envelope, schemas)
    schemas["content"] = {
        "type": "array",
        "minItems": 1,
        "maxItems": 1,
        "description": "One text block: the result as JSON text (read_concept: the concept's "
        "file), or on an error the envelope's message.",
        "items": {
            "type": "object",
            "additionalProperties": False,
            "required": ["type", "text"],
            "properties": {"type": {"const": "text"}, "text": {"type": "string"}},
        },
    }
    schemas["error_response"] = _answer_schema(_SCHEMAS + "error", is_error=True)
    responses: dict[str, Any] = {
        name: _response(description, "error_response", retry=status == 503)
        for name, (status, description) in _ERROR_RESPONSES.items()
    }
    if secured:
        schemas["unauthorized"] = {
            "type": "object",
            "required": ["error"],
            "properties": {"error": {"const": "unauthorized"}},
        }
        responses["unauthorized"] = _response(
            "no bearer token, or one that picks no reader", "unauthorized"
        )
    paths: dict[str, Any] = {}
    for tool in tools:
        _hoist(f"{tool.name}.input", tool.input_schema, schemas)
        _hoist(f"{tool.name}.output", dispatcher.contracts.output_schema(tool.name), schemas)
        schemas[f"{tool.name}.response"] = _answer_schema(
            f"{_SCHEMAS}{tool.name}.output", is_error=False
        )
        paths[TOOLS_PREFIX + tool.name] = {"post": _operation(tool, tool.name, secured)}
    served = {tool.name: tool for tool in tools}
    for path, name in ALIASES.items():
        if name in served:
            alias = path.rsplit("/", 1)[1]
            paths[path] = {"post": _operation(served[name], f"search_{alias}", secured, path)}
    paths[OPENAPI_PATH] = {
        "get": {
            "operationId": "openapi",
            "summary": "This document",
            "responses": {
                "200": {
                    "description": "The OpenAPI 3.1 document of this server's REST endpoints",
                    "content": {"application/json": {"schema": {"type": "object"}}},
                },
                **({"401": {"$ref": _RESPONSES + "unauthorized"}} if secured else {}),
            },
        }
    }
    components: dict[str, Any] = {"schemas": schemas, "responses": responses}
    document: dict[str, Any] = {
        "openapi": OPENAPI_VERSION,
        "jsonSchemaDialect": JSON_SCHEMA_DIALECT,
        "info": {
            "title": "bundle-mcp REST",
            "version": __version__,
            "description": "The MCP tools of this server as plain HTTP: POST the tool's "
            "arguments as a JSON object, get the tools/call result envelope back (docs/REST.md).",
        },
        "paths": paths,
        "components": components,
    }
    if secured:
        components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        document["security"] = [{"bearer": []}]
    return document


def _operation(
    tool: ServedTool, operation_id: str, secured: bool, alias: str | None = None
) -> dict[str, Any]:
    description = tool.description
    if alias is not None:
        seed = f"{alias} is {TOOLS_PREFIX}{tool.name} under the traversal seed's name."
        description = f"{seed}\n\n{description}"
    answer = {"$ref": f"{_SCHEMAS}{tool.name}.response"}
    responses: dict[str, Any] = {
        "200": {
            "description": "The result: isError false, the output contract as structuredContent",
            "content": {"application/json": {"schema": answer}},
        },
    }
    for name, (status, _) in _ERROR_RESPONSES.items():
        if status == 409 and tool.read_only:
            continue  # only the writes compare revisions and plans
        responses[str(status)] = {"$ref": _RESPONSES + name}
    if secured:
        responses["401"] = {"$ref": _RESPONSES + "unauthorized"}
    return {
        "operationId": operation_id,
        "summary": tool.title,
        "description": description,
        "tags": ["read" if tool.read_only else "write"],
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"{_SCHEMAS}{tool.name}.input"}}},
        },
        "responses": dict(sorted(responses.items())),
    }


def _answer_schema(structured: str, *, is_error: bool) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["content", "structuredContent", "isError"],
        "properties": {
            "content": {"$ref": _SCHEMAS + "content"},
            "structuredContent": {"$ref": structured},
            "isError": {"const": is_error},
        },
    }


def _response(description: str, schema: str, *, retry: bool = False) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": _SCHEMAS + schema}}},
    }
    if retry:
        response["headers"] = {
            "Retry-After": {
                "description": "Seconds to wait before retrying the same call",
                "schema": {"type": "integer", "minimum": 0},
            }
        }
    return response


def _hoist(name: str, schema: Mapping[str, Any], schemas: dict[str, Any]) -> None:
    """Put ``schema`` under ``name`` and each of its ``$defs`` under ``name.<def>``.

    Raises:
        ValueError: a ``$ref`` other than ``#/$defs/<name>`` (the contracts use no other).
    """
    body = copy.deepcopy(dict(schema))
    for key in _HEADER_KEYS:
        body.pop(key, None)
    defs: dict[str, Any] = body.pop("$defs", {})
    renamed = {definition: f"{name}.{definition}" for definition in defs}
    schemas[name] = _point(body, renamed)
    for definition, sub in defs.items():
        schemas[renamed[definition]] = _point(sub, renamed)


def _point(node: Any, renamed: Mapping[str, str]) -> Any:
    if isinstance(node, list):
        return [_point(item, renamed) for item in node]
    if not isinstance(node, dict):
        return node
    out = {
        key: value if key in _VALUE_KEYWORDS else _point(value, renamed)
        for key, value in node.items()
    }
    ref = node.get("$ref")
    if isinstance(ref, str):
        definition = ref.removeprefix("#/$defs/")
        if definition == ref or definition not in renamed:
            raise ValueError(f"$ref {ref} is not one of the schema's own $defs")
        out["$ref"] = _SCHEMAS + renamed[definition]
    return out
