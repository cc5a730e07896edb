"""The session's first call over stdio, answered before the SDK is imported.

:mod:`bundle_mcp.first_call` writes the answer itself: these tests hold its lines (the answer,
and the notices before it) to the lines the SDK's own session writes for the same call, byte
for byte, on every kind of answer; check that it declines what it cannot vouch for and leaves
it unread for the SDK; and that the SDK's session then goes on as if it had answered the call
itself (initialized, the call not answered twice, a notice not told twice).
:mod:`bundle_mcp.wire_lines`, the reader under both, is tested first.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from bundle_mcp.answer_lines import MIN_HELD_CHARS, AnswerLines
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.first_call import (
    WAIT_SECONDS,
    answer_first_call,
    first_call,
    is_initialized,
    listing_line,
    listing_request,
    reply_pieces,
)
from bundle_mcp.handshake import HANDSHAKE_VERSIONS, Opening, open_stdio
from bundle_mcp.server import build_server
from bundle_mcp.stdio import stdio_transport
from bundle_mcp.wire_lines import CHUNK, WireLines
from stdio_pipes import initialize, line_of

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = str(REPO / "examples" / "coffee-roastery")
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def call(name: str, arguments: Any = None, request_id: Any = 1, **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, **extra}
    if arguments is not None:
        params["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


class Wire:
    """Two OS pipes: the server's ends (a WireLines and a file) and the client's."""

    def __init__(self) -> None:
        in_read, in_write = os.pipe()
        out_read, out_write = os.pipe()
        self._in_read = in_read
        self.lines = WireLines(in_read)
        self.client_out = os.fdopen(in_write, "wb")
        self.client_in = os.fdopen(out_read, "rb")
        self.wire_out = os.fdopen(out_write, "wb")

    def send(self, *messages: Any) -> None:
        for message in messages:
            self.client_out.write(message if isinstance(message, bytes) else line_of(message))
        self.client_out.flush()

    def close(self) -> None:
        for f in (self.client_out, self.client_in, self.wire_out):
            f.close()
        os.close(self._in_read)


@pytest.fixture
def wire() -> Iterator[Wire]:
    pipes = Wire()
    try:
        yield pipes
    finally:
        pipes.close()


def sdk_session(dispatcher: Dispatcher, wire: Wire, requests: list[dict[str, Any]],
                opening: Opening | None = None, min_chars: int = MIN_HELD_CHARS,
                awaiting: list[Any] | None = None) -> list[list[bytes]]:
    """Serve ``wire`` as ``serve_stdio`` does (held big answers included), send ``requests``
    one at a time and collect, for each request with an id, the lines written up to its
    reply (notices included); first for the ids ``awaiting``, of requests sent already. The
    client's end is closed after the last."""
    answer_lines = AnswerLines(min_chars)
    server = build_server(dispatcher, answer_lines=answer_lines,
                          told=opening.told if opening is not None else frozenset())
    replies: list[list[bytes]] = []

    async def run() -> None:
        async with stdio_transport(wire.lines, wire.wire_out, opening=opening,
                                   answer_lines=answer_lines) as (read_stream, write_stream):
            async with anyio.create_task_group() as tg:
                tg.start_soon(server.run, read_stream, write_stream,
                              server.create_initialization_options())
                for request in [*({"id": i} for i in awaiting or ()), *requests]:
                    if "method" in request:
                        wire.send(request)
                    if "id" not in request:
                        continue
                    lines: list[bytes] = []
                    with anyio.fail_after(60):
                        while not lines or json.loads(lines[-1]).get("id") != request["id"]:
                            lines.append(await anyio.to_thread.run_sync(wire.client_in.readline))
                    replies.append(lines)
                wire.client_out.close()  # EOF: the session ends

    anyio.run(run)
    return replies


def early_session(dispatcher: Dispatcher, wire: Wire, first: Any,
                  version: str = "2025-11-25") -> tuple[Opening, bytes]:
    """initialize answered by the handshake, then ``initialized`` and ``first`` (a message or
    a list of them) sent at once and offered to :func:`answer_first_call`: the opening it
    returns and what it wrote."""
    wire.send(initialize(version))
    opening = open_stdio(wire.lines, wire.wire_out)
    assert opening.answered is not None
    assert wire.client_in.readline() == opening.answered.reply
    wire.send(INITIALIZED, *(first if isinstance(first, list) else [first]))
    read: list[bytes] = []

    def client() -> None:  # reads as it is written: an answer can be more than a pipe holds
        while not read or read[-1] != b"END\n":
            read.append(wire.client_in.readline())

    reader = threading.Thread(target=client)
    reader.start()
    opened = answer_first_call(opening, wire.lines, wire.wire_out, dispatcher)
    wire.wire_out.write(b"END\n")  # marks the end of what the early path wrote
    wire.wire_out.flush()
    reader.join(60)
    assert read and read[-1] == b"END\n"
    return opened, b"".join(read[:-1])


@pytest.fixture(scope="module")
def dispatcher() -> Dispatcher:
    return Dispatcher(ServeConfig(bundles=(EXAMPLE,)))


# --------------------------------------------------------------------------------------------
# The reader


def test_lines_come_whole_across_reads_and_the_rest_at_the_end(wire: Wire) -> None:
    long = b"x" * (3 * CHUNK + 17)  # more than a pipe holds: written while it is read

    def client() -> None:
        wire.send(b"a\nb", b"c\n" + long + b"\n", b"tail")
        wire.client_out.close()

    writer = threading.Thread(target=client)
    writer.start()
    assert [wire.lines.readline() for _ in range(5)] == [b"a\n", b"bc\n", long + b"\n",
                                                         b"tail", b""]
    writer.join()


def test_has_line_waits_only_so_long_and_sees_a_line_that_comes(wire: Wire) -> None:
    wire.send(b"partial")
    assert not wire.lines.has_line(0.05)
    threading.Timer(0.05, wire.send, (b" line\nnext",)).start()
    assert wire.lines.has_line(5.0)
    assert wire.lines.readline() == b"partial line\n"
    assert not wire.lines.has_line(0.0)
    wire.client_out.close()
    assert wire.lines.has_line(5.0)  # the end of input: readline returns at once
    assert wire.lines.readline() == b"next"


def test_a_line_pushed_back_is_read_again_first(wire: Wire) -> None:
    wire.send(b"one\ntwo\n")
    line = wire.lines.readline()
    wire.lines.push_back(line)
    assert wire.lines.has_line(0.0)
    assert [wire.lines.readline(), wire.lines.readline()] == [b"one\n", b"two\n"]


# --------------------------------------------------------------------------------------------
# What is taken, and what is left for the SDK

READ_ONLY = frozenset({"read_concept", "list_concepts"})


@pytest.mark.parametrize("message", [
    call("read_concept", {"concept_id": "a"}),
    call("read_concept", {"concept_id": "é \u2028"}, request_id="r-1"),
    call("list_concepts"),
    call("list_concepts", {}, request_id=-(2**53 - 1)),
    {**call("list_concepts"), "params": {"name": "list_concepts", "arguments": None}},
])
def test_a_plain_call_of_a_read_only_tool_is_taken(message: dict[str, Any]) -> None:
    taken = first_call(line_of(message), READ_ONLY.__contains__)
    assert taken is not None
    assert (taken.request_id, taken.name) == (message["id"], message["params"]["name"])
    assert taken.arguments == message["params"].get("arguments")


@pytest.mark.parametrize("line", [
    line_of(call("write_concept", {"concept_id": "a", "content": "x"})),  # not read-only
    line_of(call("no_such_tool")),
    line_of(call("read_concept", {"concept_id": "a"}, _meta={"progressToken": 1})),
    line_of(call("read_concept", {"concept_id": "a"}, task={"ttl": 1})),
    line_of(call("read_concept", ["a"])),
    line_of(call("read_concept", {"concept_id": "a"}, request_id=True)),
    line_of(call("read_concept", {"concept_id": "a"}, request_id=1.0)),
    line_of(call("read_concept", {"concept_id": "a"}, request_id='a"b')),
    line_of({**call("read_concept", {"concept_id": "a"}), "extra": 1}),
    line_of({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    line_of({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_concept",'
    b'"arguments":{"concept_id":"\\ud800"}}}\n',  # a lone surrogate
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_concept",'
    b'"arguments":{"concept_id":"a","limit":1e999}}}\n',  # no exact value
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_concept",'
    b'"arguments":{"concept_id":"\xff"}}}\n',  # not UTF-8
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":["read_concept"]}}\n',
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7}}\n',
    b"not json\n", b"\n", b"",
])
def test_anything_else_is_left_to_the_sdk(line: bytes) -> None:
    assert first_call(line, (READ_ONLY | {"no_such_tool_not_served"}).__contains__) is None


def test_only_the_plain_initialized_notification_opens_the_session() -> None:
    assert is_initialized(line_of(INITIALIZED))
    assert is_initialized(line_of({**INITIALIZED, "params": {}}))
    assert not is_initialized(line_of({**INITIALIZED, "params": {"_meta": {}}}))
    assert not is_initialized(line_of({**INITIALIZED, "id": 1}))
    assert not is_initialized(line_of(call("list_concepts")))


# --------------------------------------------------------------------------------------------
# The answer is the SDK's

CALLS = [
    call("read_concept", {"concept_id": "beans/ethiopia-guji"}),
    call("read_concept", {"concept_id": "beans/ethiopia-gujj"}, request_id="x-2"),  # an error
    call("read_concept", {"concept_id": 5}, request_id=0),  # invalid input
    call("list_concepts", request_id=-3),
    call("list_concepts", {"limit": 2}),
    call("search_concepts", {"query": "Guji"}),
    call("context", {"query": "which roast for the natural lot?"}),
    call("get_semantic_graph"),
    call("bundle_summary", {}),
    call("get_neighbors", {"concept_id": "beans/ethiopia-guji"}),
    call("search_sections", {"query": "é ü \u2028 \"quoted\" \\ </script>"}),
]


@pytest.mark.parametrize("min_chars", [MIN_HELD_CHARS, 1], ids=["plain", "held"])
@pytest.mark.parametrize("message", CALLS, ids=lambda m: f"{m['params']['name']}-{m['id']}")
def test_the_answer_is_the_sdks_line(dispatcher: Dispatcher, message: dict[str, Any],
                                     min_chars: int) -> None:
    """``held``: the SDK's line made as it is for a big answer, from placeholders the writer
    fills (bundle_mcp.answer_lines), for every answer."""
    wire = Wire()
    try:
        (_, (sdk_line,)) = sdk_session(dispatcher, wire, [initialize(), INITIALIZED, message],
                                       min_chars=min_chars)
    finally:
        wire.close()
    outcome = dispatcher.call(message["params"]["name"], message["params"].get("arguments"))
    pieces = reply_pieces(message["id"], outcome)
    assert pieces is not None
    assert b"".join(pieces) == sdk_line


@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
def test_every_protocol_version_gets_the_sdks_line(dispatcher: Dispatcher,
                                                   version: str) -> None:
    message = call("read_concept", {"concept_id": "beans/ethiopia-guji"}, request_id=9)
    wire = Wire()
    try:
        opened, written = early_session(dispatcher, wire, message, version)
    finally:
        wire.close()
    wire = Wire()
    try:
        (_, (sdk_line,)) = sdk_session(dispatcher, wire, [initialize(version), INITIALIZED,
                                                          message])
    finally:
        wire.close()
    assert written == sdk_line
    assert opened.then == (line_of(INITIALIZED),)


def test_a_kept_answer_is_written_from_its_kept_encoding(dispatcher: Dispatcher) -> None:
    """The warm-up keeps the default calls' answers encoded (Outcome.wire): the early path
    writes that encoding, and it is the SDK's line too."""
    kept = Dispatcher(ServeConfig(bundles=(EXAMPLE,)))
    kept.call("list_concepts", {})
    outcome = kept.call("list_concepts", {})
    assert outcome.wire is not None, "list_concepts' default answer is not kept any more"
    pieces = reply_pieces(4, outcome)
    assert pieces is not None
    wire = Wire()
    try:
        (_, (sdk_line,)) = sdk_session(kept, wire, [initialize(), INITIALIZED,
                                                    call("list_concepts", {}, request_id=4)])
    finally:
        wire.close()
    assert b"".join(pieces) == sdk_line


# --------------------------------------------------------------------------------------------
# The session after it


def test_the_sdk_takes_over_initialized_and_never_answers_the_call_twice(
        dispatcher: Dispatcher, wire: Wire) -> None:
    message = call("read_concept", {"concept_id": "beans/ethiopia-guji"}, request_id=7)
    opened, written = early_session(dispatcher, wire, message)
    assert json.loads(written)["id"] == 7
    assert opened.then == (line_of(INITIALIZED),) and opened.told == frozenset()
    replies = sdk_session(dispatcher, wire, [{"jsonrpc": "2.0", "id": 8, "method": "tools/list"},
                                            call("list_concepts", request_id=9)], opened)
    # tools/list works: the replayed initialize and initialized made the session; nothing
    # else came before its answer (the SDK never saw request 7).
    assert [[json.loads(line)["id"] for line in lines] for lines in replies] == [[8], [9]]
    assert json.loads(replies[0][0])["result"]["tools"]


@pytest.mark.parametrize("second", [
    {"jsonrpc": "2.0", "id": 1, "method": "prompts/list"},
    {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"cursor": "x"}},
    call("write_concept", {}),  # invalid input: it never writes
    call("read_concept", {"concept_id": "beans/ethiopia-guji"}, _meta={"progressToken": "p"}),
], ids=["prompts-list", "tools-list-cursor", "a-write", "progress"])
def test_a_line_it_declines_is_left_unread_and_the_sdk_answers_it(
        dispatcher: Dispatcher, wire: Wire, second: dict[str, Any]) -> None:
    opened, written = early_session(dispatcher, wire, second)
    assert written == b"" and opened.then == (line_of(INITIALIZED),)
    (lines,) = sdk_session(dispatcher, wire, [], opened, awaiting=[1])
    reply = json.loads(lines[-1])
    assert reply["id"] == 1 and ("result" in reply or "error" in reply), reply
    if second.get("params", {}).get("_meta"):  # progress: the SDK reports it, never this path
        assert any(b"notifications/progress" in line for line in lines[:-1])


def test_without_initialized_first_nothing_is_answered(dispatcher: Dispatcher,
                                                      wire: Wire) -> None:
    wire.send(initialize())
    opening = open_stdio(wire.lines, wire.wire_out)
    wire.client_in.readline()
    wire.send(call("list_concepts"))
    opened = answer_first_call(opening, wire.lines, wire.wire_out, dispatcher)
    assert opened == opening
    assert wire.lines.readline() == line_of(call("list_concepts"))  # still unread


def test_a_client_that_does_not_call_at_once_is_not_waited_for(dispatcher: Dispatcher,
                                                               wire: Wire) -> None:
    """Nothing within WAIT_SECONDS: the SDK is imported. The initialized notification alone
    is handed on."""
    wire.send(initialize())
    opening = open_stdio(wire.lines, wire.wire_out)
    wire.client_in.readline()
    assert answer_first_call(opening, wire.lines, wire.wire_out, dispatcher) == opening
    wire.send(INITIALIZED)
    opened = answer_first_call(opening, wire.lines, wire.wire_out, dispatcher)
    assert opened.then == (line_of(INITIALIZED),)
    assert not wire.lines.has_line(WAIT_SECONDS)


def test_an_opening_the_handshake_did_not_answer_is_left_alone(dispatcher: Dispatcher,
                                                               wire: Wire) -> None:
    wire.send({**initialize(), "id": True}, INITIALIZED, call("list_concepts"))
    opening = open_stdio(wire.lines, wire.wire_out)
    assert opening.answered is None
    assert answer_first_call(opening, wire.lines, wire.wire_out, dispatcher) == opening
    assert wire.lines.readline() == line_of(INITIALIZED)


# --------------------------------------------------------------------------------------------
# Notices


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Dispatcher:
    """A bundle with one unparseable file, served without it: every call tells so."""
    root = tmp_path_factory.mktemp("broken") / "roastery"
    shutil.copytree(EXAMPLE, root)
    (root / "bad.md").write_text("---\ntitle: [unclosed\n---\nbody\n")
    return Dispatcher(ServeConfig(bundles=(str(root),), skip_unparseable=True))


def test_notices_are_written_as_the_sdk_writes_them_and_told_once(broken: Dispatcher) -> None:
    first = call("read_concept", {"concept_id": "beans/ethiopia-guji"}, request_id=1)
    again = call("list_concepts", request_id=2)
    wire = Wire()
    try:
        sdk_first, sdk_again = sdk_session(broken, wire, [initialize(), INITIALIZED, first,
                                                          again])[1:]
    finally:
        wire.close()
    assert len(sdk_first) == 2 and b"notifications/message" in sdk_first[0]
    assert len(sdk_again) == 1  # the SDK's connection tells a notice once
    wire = Wire()
    try:
        opened, written = early_session(broken, wire, first)
        assert written == b"".join(sdk_first)
        assert len(opened.told) == 1
        (early_again,) = sdk_session(broken, wire, [again], opened)
    finally:
        wire.close()
    assert early_again == sdk_again  # told before the SDK served: not told again


# --------------------------------------------------------------------------------------------
# tools/list before the call

LIST = {"jsonrpc": "2.0", "id": "tools", "method": "tools/list"}


@pytest.mark.parametrize("message", [
    LIST, {**LIST, "id": 3}, {**LIST, "params": {}}, {**LIST, "params": None},
])
def test_a_plain_listing_is_taken(message: dict[str, Any]) -> None:
    assert listing_request(line_of(message)) == message["id"]


@pytest.mark.parametrize("message", [
    {**LIST, "params": {"cursor": "abc"}}, {**LIST, "params": {"_meta": {"progressToken": 1}}},
    {**LIST, "id": 1.5}, {**LIST, "id": None}, {k: v for k, v in LIST.items() if k != "id"},
    {**LIST, "method": "prompts/list"}, {**LIST, "extra": 1},
])
def test_any_other_listing_is_left_to_the_sdk(message: dict[str, Any]) -> None:
    assert listing_request(line_of(message)) is None


@pytest.mark.parametrize("read_only", [False, True], ids=["writes", "read-only"])
@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
def test_the_listing_is_the_sdks_line(version: str, read_only: bool) -> None:
    served = Dispatcher(ServeConfig(bundles=(EXAMPLE,), read_only=read_only))
    wire = Wire()
    try:
        (_, (sdk_line,)) = sdk_session(served, wire, [initialize(version), INITIALIZED, LIST])
    finally:
        wire.close()
    assert listing_line(LIST["id"], served) == sdk_line


def test_a_listing_then_a_call_are_both_answered_before_the_sdk(dispatcher: Dispatcher,
                                                                 wire: Wire) -> None:
    first = call("read_concept", {"concept_id": "beans/ethiopia-guji"}, request_id=2)
    opened, written = early_session(dispatcher, wire, [LIST, first])
    listed, answered = written.splitlines(keepends=True)
    assert listed == listing_line(LIST["id"], dispatcher)
    outcome = dispatcher.call("read_concept", first["params"]["arguments"])
    assert answered == b"".join(reply_pieces(2, outcome) or ())
    assert opened.then == (line_of(INITIALIZED),)
    # The SDK's session goes on from there: a second listing is its own, and the same.
    (again,) = sdk_session(dispatcher, wire, [{**LIST, "id": "again"}], opened)
    assert again == [listed.replace(b'"id":"tools"', b'"id":"again"', 1)]
