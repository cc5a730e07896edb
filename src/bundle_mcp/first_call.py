"""The session's first tool call over stdio (and a ``tools/list`` before it), answered before
the MCP SDK is imported.

Once ``initialize`` is answered (:mod:`bundle_mcp.handshake`), importing the SDK takes about
0.4 s (the ``mcp`` package imports its client, its server and their pydantic models), and a
host that calls a tool as soon as the session opens waited that long before the call even
started: after a restart on the generated 10,000-concept bundle the import was two thirds of
the first answer's 0.6 s. The dispatcher needs none of the SDK. So ``serve`` imports the
dispatcher and the tools first, and when the client's next lines have come by then (within
:data:`WAIT_SECONDS` of the look) and are the ``notifications/initialized`` that opens the
session and a plain call of a read-only tool, it runs that call through the dispatcher and
writes the answer itself, byte for byte the line the SDK writes (``tests/test_first_call.py``
compares the two on every kind of answer). Only then is the SDK imported. A host that lists the
tools first (most do) gets that answer the same way, and its first call after it too.

What the SDK must still know is handed to it: the ``initialized`` notification is replayed to
its session after the opening ``initialize`` (so the session is initialized as before), and
the keys of the notices already sent, so that its connection does not tell them twice. The
listing and the call are not replayed: they are answered. Every other line (a second
listing, a ping, a call with ``_meta``, a write, anything this module cannot vouch for) is left
unread for the SDK, which answers it as it always did; so is a call whose answer its encoder
would refuse (it then runs again there, on the snapshot this one built).

While it runs, no other line is read: a ping or a cancellation waits for the answer, as every
line waited for the SDK's import before. So ``serve`` takes this path only after a restart,
when every served bundle folder has its parse cache and a first call costs about a tenth of a
second at 10,000 concepts (:func:`bundle_mcp.cli._serve_stdio`); a cold first load, seconds on
a big bundle, runs where the SDK answers pings and cancellations meanwhile. The call runs on
the main thread before the warm-up starts (the warm-up starts once the SDK is imported,
:func:`bundle_mcp.server.serve_stdio`).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, BinaryIO

from pydantic_core import to_json

from .cancel import CancelToken
from .dispatch import Dispatcher, Outcome
from .handshake import Opening, plain_id
from .observe import DEFAULT_LOG_LEVEL, LOGGER_NAME, Notice, level_at_least, notice_text
from .resources import serve_bundles
from .wire_lines import WireLines

__all__ = [
    "INITIALIZED",
    "WAIT_SECONDS",
    "FirstCall",
    "answer_first_call",
    "first_call",
    "is_initialized",
    "listing_line",
    "listing_request",
    "reply_pieces",
]

log = logging.getLogger(__name__)

# How long the first lines may still take, from the moment the dispatcher is ready: a host
# that does not call at once delays the SDK's import by at most twice this.
WAIT_SECONDS = 0.02
INITIALIZED = "notifications/initialized"

_CALL_KEYS = frozenset({"jsonrpc", "id", "method", "params"})


@dataclass(frozen=True)
class FirstCall:
    """A ``tools/call`` request this module can answer as the SDK would."""

    request_id: int | str
    name: str
    arguments: Mapping[str, Any] | None


def _message(line: bytes) -> dict[str, Any] | None:
    """``line`` as a JSON object when nothing in it could make the SDK's transport read it
    otherwise (:func:`bundle_mcp.stdio.read_line`): strict UTF-8, no lone surrogate, no number
    without an exact value; else None."""
    try:
        text = line.decode("utf-8")
        value = json.loads(text, parse_int=_exact_int, parse_float=_finite_float,
                           parse_constant=_refuse)
        if "\\u" in text:  # only an escape makes a lone surrogate, which the transport refuses
            json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (ValueError, RecursionError):  # UnicodeError and JSONDecodeError included
        return None
    return value if isinstance(value, dict) else None


def _exact_int(digits: str) -> int:
    return int(digits)  # ValueError past the interpreter's digit limit


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("a number out of range")
    return value


def _refuse(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def is_initialized(line: bytes) -> bool:
    """Whether ``line`` is the plain ``notifications/initialized`` that opens a session."""
    message = _message(line)
    if message is None or message.get("jsonrpc") != "2.0" or message.get("method") != INITIALIZED:
        return False
    return set(message) <= {"jsonrpc", "method", "params"} and message.get("params") in (None, {})


def listing_request(line: bytes) -> int | str | None:
    """The id of ``line`` when it is a plain ``tools/list`` (no cursor, no ``_meta``)."""
    message = _message(line)
    if message is None or not {"jsonrpc", "id", "method"} <= set(message) <= _CALL_KEYS:
        return None
    if message["jsonrpc"] != "2.0" or message["method"] != "tools/list":
        return None
    if message.get("params") not in (None, {}) or not plain_id(message["id"]):
        return None
    request_id: int | str = message["id"]
    return request_id


def listing_line(request_id: int | str, dispatcher: Dispatcher) -> bytes:
    """The SDK's answer to ``tools/list`` (every served tool, in one page)."""
    tools = [tool.listing() for tool in dispatcher.tools()]
    return (b'{"jsonrpc":"2.0","id":' + to_json(request_id) + b',"result":'
            + to_json({"tools": tools}) + b"}\n")


def first_call(line: bytes, answerable: Callable[[str], bool]) -> FirstCall | None:
    """``line`` as a call of a tool whose name is ``answerable`` when the SDK would hand the
    dispatcher exactly its name and arguments (no ``_meta``: no progress token, no log level
    of its own; an id echoed without doubt), else None."""
    message = _message(line)
    if message is None or set(message) != _CALL_KEYS:
        return None
    if message["jsonrpc"] != "2.0" or message["method"] != "tools/call":
        return None
    request_id, params = message["id"], message["params"]
    if not plain_id(request_id) or not isinstance(params, dict):
        return None
    name = params.get("name")
    if not set(params) <= {"name", "arguments"} or not isinstance(name, str):
        return None
    if not answerable(name):
        return None
    arguments = params.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        return None
    return FirstCall(request_id, name, arguments)


def reply_pieces(request_id: int | str, outcome: Outcome) -> tuple[bytes, ...] | None:
    """The SDK's line for ``outcome`` as the answer to ``request_id``, in pieces to write in
    turn; None when its encoder would refuse a value (a lone surrogate)."""
    encoded = outcome.encoded()
    if encoded is None:
        return None
    head = b'{"jsonrpc":"2.0","id":' + to_json(request_id) + b',"result":{"content":[{"text":'
    middle = b',"type":"text"}],"isError":' + to_json(outcome.is_error)
    return (head, *encoded.text, middle + b',"structuredContent":', *encoded.structured,
            b"}}\n")


def _notice_line(notice: Notice, labels: Mapping[str, str]) -> bytes:
    params = {"level": notice.level, "logger": LOGGER_NAME, "data": notice_text(notice, labels)}
    return to_json({"jsonrpc": "2.0", "method": "notifications/message",
                    "params": params}) + b"\n"


@dataclass
class _Heard:
    """The call's observer: its notices kept to be written before its answer; progress is
    only ever sent for a request with a progress token, which is never answered here."""

    notices: list[Notice] = field(default_factory=list)

    def progress(self, done: int, total: int) -> None:
        pass

    def notice(self, notice: Notice) -> None:
        self.notices.append(notice)


def answer_first_call(opening: Opening, lines: WireLines, wire_out: BinaryIO,
                      dispatcher: Dispatcher) -> Opening:
    """Answer the session's first call if it has come and can be answered here (the module
    docstring); the opening to hand the SDK, with what it must replay and know."""
    if opening.answered is None or not lines.has_line(WAIT_SECONDS):
        return opening
    line = lines.readline()
    if not is_initialized(line):
        lines.push_back(line)
        return opening
    opening = replace(opening, then=(line,))
    if not lines.has_line(WAIT_SECONDS):
        return opening
    line = lines.readline()
    listed = listing_request(line)
    if listed is not None:
        if not _written(wire_out, [listing_line(listed, dispatcher)]):
            return opening
        log.debug("tools/list answered before the SDK was imported")
        if not lines.has_line(WAIT_SECONDS):
            return opening
        line = lines.readline()
    # Asks for the called tool alone: only its module is imported (the others are imported
    # with the SDK, after this answer).
    call = first_call(line, dispatcher.is_read_only_tool)
    if call is None:
        lines.push_back(line)
        return opening
    heard = _Heard()
    outcome = dispatcher.call(call.name, call.arguments, CancelToken(observer=heard))
    labels = {served.path: served.label for served in serve_bundles(dispatcher.config.bundles)}
    told = set(opening.told)
    out: list[bytes] = []
    for notice in heard.notices:
        # As the connection's own state would: at its default level, each key told once.
        if not level_at_least(notice.level, DEFAULT_LOG_LEVEL) or notice.key in told:
            continue
        if notice.key is not None:
            told.add(notice.key)
        out.append(_notice_line(notice, labels))
    pieces = reply_pieces(call.request_id, outcome)
    if pieces is None:
        lines.push_back(line)  # the SDK answers it again, with -32603 as it always did
    else:
        out += pieces
    if _written(wire_out, out) and pieces is not None:
        log.debug("tools/call %s answered before the SDK was imported", call.name)
    return replace(opening, told=frozenset(told))


def _written(sink: BinaryIO, pieces: Iterable[bytes]) -> bool:
    """Whether ``pieces`` were written as one line; False when the client closed its end
    (the transport finds out too, and ends the session)."""
    try:
        for piece in pieces:
            sink.write(piece)
        sink.flush()
    except OSError as exc:
        log.info("stdout closed (%s) before an early answer was written", type(exc).__name__)
        return False
    return True
