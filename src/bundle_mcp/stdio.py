"""The stdio transport: one JSON-RPC message per line, and an answer for every request line.

The SDK's ``stdio_server`` hands a line it cannot validate to the session as an exception,
and the session only logs it, so a client whose line was malformed, or merely outside what
pydantic's JSON parser takes (a lone surrogate escape, about 200 levels of nesting, an
integer of thousands of digits), waits for an answer until its own timeout. This transport
parses each line itself and answers what it cannot accept with the JSON-RPC error the spec
names:

* not JSON (also ``NaN``/``Infinity``, or nesting deeper than the parser's recursion bound):
  ``-32700`` with ``id: null``, as the HTTP transport answers;
* JSON that is not one request or notification object: ``-32600``, with the ``id`` when the
  line has a usable one (an integer or a string that is Unicode text), ``null`` otherwise;
* a request whose ``params`` hold something no tool can be given: ``-32602`` with the ``id``.
  That is a string that is not Unicode text (a lone surrogate escape such as ``"\\ud800"``,
  or bytes that are not UTF-8) or a number Python cannot hold exactly (an integer over the
  interpreter's digit limit, a float that overflows to infinity). Rejecting beats repairing:
  replacing the code point would silently search for something else, and a surrogate that
  reached a reply would make the reply unencodable.

Notifications and responses are never answered (JSON-RPC forbids it), so a flawed one is
logged and dropped. The writer never dies on a reply it cannot encode: a result that pydantic
cannot serialize (a surrogate, or nesting past its depth limit) becomes ``-32603`` for that id.

While serving, fd 0 reads the null device and fd 1 writes to stderr, so a tool or a child
process that reads stdin or prints cannot touch the wire; both are restored on exit
(:func:`bundle_mcp.handshake.claimed_stdio`).

``serve`` reads the client's first line before the SDK is imported and may have answered it
already (:mod:`bundle_mcp.handshake`): the transport then starts by handing that line to the
session, and drops the session's own reply to it after comparing the two. The
``notifications/initialized`` read after it, before a first call answered without the SDK
(:mod:`bundle_mcp.first_call`), is handed on next.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, BinaryIO, Final, TypeVar

import anyio
import anyio.to_thread
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from .answer_lines import AnswerLines
from .handshake import EarlyAnswer, Opening, claimed_stdio
from .wire_lines import LineSource

__all__ = ["LineVerdict", "encode_message", "read_line", "stdio_transport", "unencodable_reply"]

log = logging.getLogger(__name__)
_T = TypeVar("_T")

_SURROGATE = re.compile("[\ud800-\udfff]")
_BLANK = re.compile(r"[ \t\r\n]*\Z")  # JSON's whitespace only: "\x0b" is not blank


class _OutOfRange:
    """Stands in for a JSON number that has no exact Python value."""

    def __repr__(self) -> str:
        return "<number out of range>"


_OUT_OF_RANGE: Final = _OutOfRange()


@dataclass(frozen=True, slots=True)
class LineVerdict:
    """What one input line becomes: a message for the session, an immediate reply, or nothing."""

    message: types.JSONRPCMessage | None = None
    reply: types.JSONRPCError | None = None


def _int(digits: str) -> int | _OutOfRange:
    try:
        return int(digits)
    except ValueError:  # only the interpreter's int digit limit fails on a JSON integer
        return _OUT_OF_RANGE


def _float(text: str) -> float | _OutOfRange:
    value = float(text)
    return value if math.isfinite(value) else _OUT_OF_RANGE


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _flaw(value: Any) -> str | None:
    """Why ``value`` cannot be handed on, or None. Iterative: the depth is the client's."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return "a string is not Unicode text (a lone surrogate or bytes not UTF-8)"
        elif item is _OUT_OF_RANGE:
            return "a number is out of range"
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def _usable_id(message: dict[str, Any]) -> types.RequestId | None:
    """The request's id if it can be echoed as is; None means the reply says ``id: null``."""
    value = message.get("id")
    if isinstance(value, bool):
        return None
    if isinstance(value, int) or (isinstance(value, str) and not _SURROGATE.search(value)):
        return value
    return None


def _error(request_id: types.RequestId | None, code: int, message: str) -> LineVerdict:
    error = types.ErrorData(code=code, message=message)
    return LineVerdict(reply=types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def read_line(line: bytes) -> LineVerdict:
    """Parse and check one line of input; never raises."""
    # surrogateescape keeps bytes that are not UTF-8 visible as lone surrogates: outside a
    # string they fail the JSON parse, inside one they are the same flaw as "\\ud800".
    text = line.decode("utf-8", "surrogateescape")
    if _BLANK.match(text):
        return LineVerdict()  # an empty line is framing, not a message
    try:
        value = json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        return _error(None, types.PARSE_ERROR, "Parse error")
    if not isinstance(value, dict):
        return _error(
            None, types.INVALID_REQUEST, "Invalid Request: expected one JSON-RPC object"
        )

    if "method" not in value and ("result" in value or "error" in value):
        return _response(value)
    request_id = _usable_id(value)
    envelope_flaw = _flaw({k: v for k, v in value.items() if k != "params"})
    if envelope_flaw is not None:
        return _error(request_id, types.INVALID_REQUEST, f"Invalid Request: {envelope_flaw}")
    message: types.JSONRPCRequest | types.JSONRPCNotification
    try:
        # With an "id" the line is a request and must be answered, so it must validate as one:
        # the message union would take {"id": 1.5, "method": ...} as a notification and stay
        # silent (MCP ids are integers or strings, never null or fractional).
        if "id" in value:
            message = types.JSONRPCRequest.model_validate(value)
        else:
            message = types.JSONRPCNotification.model_validate(value)
    except ValidationError:
        return _error(request_id, types.INVALID_REQUEST, "Invalid Request")
    params_flaw = _flaw(value.get("params"))
    if params_flaw is None:
        return LineVerdict(message=message)
    if isinstance(message, types.JSONRPCRequest):
        return _error(message.id, types.INVALID_PARAMS, f"Invalid params: {params_flaw}")
    log.warning("dropped notification %r: %s", message.method[:64], params_flaw)
    return LineVerdict()


def _response(value: dict[str, Any]) -> LineVerdict:
    """A client's response to a server request: handed on when sound, never answered."""
    flaw = _flaw(value)
    if flaw is None:
        try:
            return LineVerdict(
                message=types.jsonrpc_message_adapter.validate_python(value, by_name=False)
            )
        except ValidationError:
            flaw = "not a valid JSON-RPC response"
    log.warning("dropped a response from the client: %s", flaw)
    return LineVerdict()


def encode_message(message: types.JSONRPCMessage) -> bytes | None:
    """The wire line for ``message``; a reply that cannot be encoded becomes ``-32603``."""
    text = _dump(message)
    if text is None and isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
        return unencodable_reply(message)
    if text is None:
        log.error("dropped an outgoing %s that could not be encoded", type(message).__name__)
        return None
    return text.encode("utf-8") + b"\n"


def unencodable_reply(message: types.JSONRPCResponse | types.JSONRPCError) -> bytes:
    """The ``-32603`` line sent for a reply to ``message.id`` that could not be encoded."""
    log.error("reply to request %r could not be encoded; sent -32603 instead", message.id)
    error = types.ErrorData(
        code=types.INTERNAL_ERROR, message="Internal error: the reply could not be encoded"
    )
    return types.JSONRPCError(jsonrpc="2.0", id=message.id, error=error).model_dump_json(
        by_alias=True, exclude_unset=True
    ).encode("utf-8") + b"\n"


def _dump(message: types.JSONRPCMessage) -> str | None:
    try:
        # The same call the SDK's own stdio writer makes, so the wire bytes do not change.
        return message.model_dump_json(by_alias=True, exclude_unset=True)
    except PydanticSerializationError:
        return None


# --------------------------------------------------------------------------------------------
# The transport


ReadStream = MemoryObjectReceiveStream[SessionMessage | Exception]
WriteStream = MemoryObjectSendStream[SessionMessage]


@asynccontextmanager
async def stdio_transport(
    wire_in: LineSource | None = None,
    wire_out: BinaryIO | None = None,
    *,
    opening: Opening | None = None,
    on_first_reply: Callable[[], object] | None = None,
    answer_lines: AnswerLines | None = None,
    answering: Callable[[], AbstractContextManager[object]] = nullcontext,
) -> AsyncIterator[tuple[ReadStream, WriteStream]]:
    """The streams for ``Server.run``; without wires, the process's own stdin and stdout.

    ``opening``: the first lines, read (and perhaps answered) before the transport started.
    ``on_first_reply``: runs once, in a worker thread, after the first line is written.
    ``answer_lines``: the server's held big answers, put back into their lines as they are
    written (:mod:`bundle_mcp.answer_lines`). ``answering``: held while a line is encoded and
    written (the dispatcher's :class:`~bundle_mcp.dispatch.CallGate`, so that the warm-up
    stands aside for an answer's delivery as for its call).
    """
    if wire_in is None or wire_out is None:
        with claimed_stdio() as (claimed_in, claimed_out):
            async with stdio_transport(claimed_in, claimed_out, opening=opening,
                                       on_first_reply=on_first_reply,
                                       answer_lines=answer_lines,
                                       answering=answering) as streams:
                yield streams
        return

    inbound_send, inbound = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outbound, outbound_receive = anyio.create_memory_object_stream[SessionMessage](0)
    replayed = opening.replayed if opening is not None else ()
    sent = opening.answered if opening is not None else None
    async with anyio.create_task_group() as tg:
        tg.start_soon(_read_lines, wire_in, inbound_send, outbound.clone(), replayed)
        tg.start_soon(_write_lines, wire_out, outbound_receive, tg.cancel_scope, sent,
                      on_first_reply, answer_lines, answering)
        try:
            yield inbound, outbound
        finally:
            # The session may leave its end open; the writer stops once every sender is closed.
            outbound.close()


async def _read_lines(
    source: LineSource,
    inbound: MemoryObjectSendStream[SessionMessage | Exception],
    replies: MemoryObjectSendStream[SessionMessage],
    replayed: tuple[bytes, ...] = (),
) -> None:
    # A thread limiter of its own: with anyio's default one, 40 busy tool workers would stop
    # pings and cancellations from being read.
    limiter = anyio.CapacityLimiter(1)
    pending = list(replayed)
    async with inbound, replies:
        while True:
            if pending:  # the opening lines, read before the transport started
                line = pending.pop(0)
            else:
                # abandon_on_cancel: a blocked read must not hold up shutdown; the descriptor
                # is never closed under it (see handshake.claimed_stdio).
                line = await anyio.to_thread.run_sync(
                    source.readline, abandon_on_cancel=True, limiter=limiter
                )
            if not line:
                return
            verdict = read_line(line)
            try:
                if verdict.reply is not None:
                    await replies.send(SessionMessage(verdict.reply))
                elif verdict.message is not None:
                    await inbound.send(SessionMessage(verdict.message))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return  # the session is over; later lines have no one to go to


async def _write_lines(
    sink: BinaryIO,
    outbound: MemoryObjectReceiveStream[SessionMessage],
    transport_scope: anyio.CancelScope,
    sent: EarlyAnswer | None = None,
    on_first_reply: Callable[[], object] | None = None,
    answer_lines: AnswerLines | None = None,
    answering: Callable[[], AbstractContextManager[object]] = nullcontext,
) -> None:
    limiter = anyio.CapacityLimiter(1)  # not the default one: replies must not wait for tools
    async with outbound:
        async for item in outbound:
            data = encode_message(item.message)
            if data is None:
                continue
            if sent is not None and _replies_to(item.message, sent.request_id):
                # The session's own answer to the opening request, which was answered
                # already: never sent twice, and it must be what was sent.
                if data != sent.reply:
                    log.error("the SDK's answer to initialize differs from the one sent before "
                              "it was loaded: %r", data[:300])
                sent = None
                continue
            if answer_lines is not None and answer_lines.is_held(item.message):
                # A held answer's values are put back in the writer's thread, as pieces of
                # the line written one after the other (answer_lines: never joined).
                expanded = await anyio.to_thread.run_sync(
                    _held, answering, answer_lines.expand, item.message, data, limiter=limiter
                )
                assert isinstance(item.message, types.JSONRPCResponse)  # is_held says so
                pieces = (unencodable_reply(item.message),) if expanded is None else expanded
            else:
                pieces = (data,)
            try:
                await anyio.to_thread.run_sync(_held, answering, _write_line, sink, pieces,
                                               limiter=limiter)
            except OSError as exc:  # the client closed its end (usually BrokenPipeError)
                log.info("stdout closed (%s); ending the session", exc.__class__.__name__)
                transport_scope.cancel()
                return
            if on_first_reply is not None:
                await anyio.to_thread.run_sync(on_first_reply, limiter=limiter)
                on_first_reply = None


def _replies_to(message: types.JSONRPCMessage, request_id: int | str) -> bool:
    """Whether ``message`` is a reply to the request ``request_id`` (1 and "1" differ)."""
    if not isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
        return False
    return type(message.id) is type(request_id) and message.id == request_id


def _held(answering: Callable[[], AbstractContextManager[object]],
          work: Callable[..., _T], *args: Any) -> _T:
    """``work(*args)`` while ``answering`` is held. An answer is the call's last part: while
    the warm-up ran beside it, each piece written waited for the interpreter lock (the warm-up
    holds it up to the switch interval every time the writer gives it up for a write), and a
    30 MB answer took 0.7 s where it takes 0.1 s alone."""
    with answering():
        return work(*args)


def _write_line(sink: BinaryIO, pieces: Iterable[bytes]) -> None:
    """One line, written piece by piece (a big answer's pieces are kept encodings: joining
    them would copy the answer), then flushed."""
    for piece in pieces:
        sink.write(piece)
    sink.flush()
