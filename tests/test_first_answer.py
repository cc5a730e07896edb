"""``initialize`` over stdio is answered before the SDK and the dispatcher are imported.

:mod:`bundle_mcp.handshake` writes the answer itself; these tests hold it to the SDK's own answer
byte for byte (for every request it takes on, and it declines the rest), check that the
transport hands the opening line to the SDK and drops the SDK's duplicate answer, and, in a
served child, that no heavy module was imported when the answer was written.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.shared.message import SessionMessage
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.handshake import (
    HANDSHAKE_VERSIONS,
    EarlyAnswer,
    Opening,
    early_answer,
    open_stdio,
)
from bundle_mcp.server import build_server
from bundle_mcp.stdio import encode_message, stdio_transport
from stdio_pipes import initialize, line_of
from toolcall import fill_parse_cache

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = str(REPO / "examples" / "coffee-roastery")


@pytest.fixture(scope="module")
def dispatcher() -> Dispatcher:
    return Dispatcher(ServeConfig(bundles=(EXAMPLE,)))


def sdk_answer(dispatcher: Dispatcher, request: dict[str, Any]) -> bytes:
    """The stdio server's own answer to ``request``, as its transport would write it."""
    server = build_server(dispatcher)
    reply: list[bytes] = []

    async def run() -> None:
        inbound_send, inbound = anyio.create_memory_object_stream[SessionMessage | Exception](1)
        outbound, outbound_receive = anyio.create_memory_object_stream[SessionMessage](1)
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.run, inbound, outbound, server.create_initialization_options())
            message = types.JSONRPCRequest.model_validate(request)
            await inbound_send.send(SessionMessage(message))
            with anyio.fail_after(30):
                item = await outbound_receive.receive()
            data = encode_message(item.message)
            assert data is not None
            reply.append(data)
            inbound_send.close()
            tg.cancel_scope.cancel()

    anyio.run(run)
    return reply[0]


TAKEN = [
    *(initialize(version) for version in (*HANDSHAKE_PROTOCOL_VERSIONS, "2026-07-28",
                                          "1999-01-01", "", "latest")),
    initialize(request_id=1), initialize(request_id=-7), initialize(request_id=2**53 - 1),
    initialize(request_id="init"), initialize(request_id="a b/c-1"),
    initialize(request_id="x" * 128),
    initialize(capabilities={"roots": {"listChanged": True}, "sampling": {},
                             "elicitation": {"form": {}, "url": {}}}),
    initialize(capabilities={"roots": {"listChanged": False, "other": [1]}}),
    initialize(capabilities={"sampling": {"tools": {}, "context": {"x": 1}}}),
    initialize(capabilities={"experimental": {"x": {"y": 1}}, "extensions": {"e": {}}}),
    initialize(capabilities={"unknown": 5, "roots": None}),
    initialize(clientInfo={"name": "t", "version": "0", "title": "T", "description": None,
                           "websiteUrl": "https://example.org", "extra": [1, 2]}),
    initialize(clientInfo={"name": "ü", "version": "0"}, extra="ignored"),
]

DECLINED = [
    {**initialize(), "method": "ping"},
    initialize(request_id=True), initialize(request_id=1.0), initialize(request_id=None),
    initialize(request_id=2**53), initialize(request_id='a"b'), initialize(request_id="é"),
    initialize(request_id=""),
    initialize(_meta={"progressToken": 1}),
    initialize(version=20251125),
    initialize(capabilities={"tasks": {}}),
    initialize(capabilities={"roots": {"listChanged": "yes"}}),
    initialize(capabilities={"sampling": []}),
    initialize(capabilities={"elicitation": {"form": True}}),
    initialize(capabilities=[]),
    initialize(clientInfo={"name": "t"}),
    initialize(clientInfo={"name": "t", "version": 1}),
    initialize(clientInfo={"name": "t", "version": "0", "icons": []}),
    {**initialize(), "extra": 1},
    {**initialize(), "jsonrpc": "1.0"},
    {k: v for k, v in initialize().items() if k != "params"},
]


def test_the_versions_are_the_sdks() -> None:
    assert HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS


@pytest.mark.parametrize("request_", TAKEN, ids=range(len(TAKEN)))
def test_an_early_answer_is_the_sdks_answer(dispatcher: Dispatcher,
                                            request_: dict[str, Any]) -> None:
    answer = early_answer(line_of(request_))
    assert answer is not None
    assert answer.request_id == request_["id"]
    assert answer.reply == sdk_answer(dispatcher, request_)


@pytest.mark.parametrize("request_", DECLINED, ids=range(len(DECLINED)))
def test_what_it_cannot_vouch_for_waits_for_the_sdk(request_: dict[str, Any]) -> None:
    assert early_answer(line_of(request_)) is None


@pytest.mark.parametrize("line", [b"", b"\n", b"not json\n", b"[1]\n", b"\xff\n",
                                  b'{"jsonrpc":"2.0","id":NaN,"method":"initialize"}\n'])
def test_a_line_that_is_no_request_waits_for_the_sdk(line: bytes) -> None:
    assert early_answer(line) is None


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["", "x", "é"]),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(
        st.sampled_from(["listChanged", "form", "tools", "x"]), inner, max_size=2),
    max_leaves=4,
)
_CAPABILITY = st.sampled_from(["roots", "sampling", "elicitation", "experimental",
                               "extensions", "tasks", "other"])


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(capabilities=st.dictionaries(_CAPABILITY, _JSON, max_size=3),
       info=st.dictionaries(st.sampled_from(["name", "version", "title", "websiteUrl",
                                             "icons", "other"]),
                            st.none() | st.sampled_from(["a", "0"]) | st.integers(0, 1),
                            max_size=4),
       version=st.sampled_from([*HANDSHAKE_PROTOCOL_VERSIONS, "2026-07-28", "zzz"]))
def test_any_answer_it_gives_is_the_sdks(dispatcher: Dispatcher, capabilities: dict[str, Any],
                                         info: dict[str, Any], version: str) -> None:
    """Random capabilities and client infos, most of them near misses: whenever the early
    path answers, its bytes are the SDK's."""
    request = initialize(version, capabilities=capabilities, clientInfo=info)
    answer = early_answer(line_of(request))
    if answer is not None:
        assert answer.reply == sdk_answer(dispatcher, request)


# --------------------------------------------------------------------------------------------
# The transport after an early answer


class Wire:
    """Two OS pipes: the server's ends (wire_in, wire_out) and the client's."""

    def __init__(self) -> None:
        in_read, in_write = os.pipe()
        out_read, out_write = os.pipe()
        self.wire_in = os.fdopen(in_read, "rb")
        self.client_out = os.fdopen(in_write, "wb")
        self.client_in = os.fdopen(out_read, "rb")
        self.wire_out = os.fdopen(out_write, "wb")

    def send(self, message: dict[str, Any]) -> None:
        self.client_out.write(line_of(message))
        self.client_out.flush()

    def close(self) -> None:
        for f in (self.wire_in, self.client_out, self.client_in, self.wire_out):
            f.close()


@pytest.fixture
def wire() -> Iterator[Wire]:
    pipes = Wire()
    try:
        yield pipes
    finally:
        pipes.close()


def serve_session(dispatcher: Dispatcher, wire: Wire, opening: Opening,
                  first_replies: list[str]) -> list[dict[str, Any]]:
    """Serve ``wire`` after ``opening``; the client sends initialized and tools/list and ends.
    Returns every line the client read after the opening answer."""
    server = build_server(dispatcher)
    lines: list[dict[str, Any]] = []

    async def run() -> None:
        async with stdio_transport(wire.wire_in, wire.wire_out, opening=opening,
                                   on_first_reply=lambda: first_replies.append("warm")) as (
                read_stream, write_stream):
            async with anyio.create_task_group() as tg:
                tg.start_soon(server.run, read_stream, write_stream,
                              server.create_initialization_options())
                wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
                wire.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
                with anyio.fail_after(60):
                    while True:
                        raw = await anyio.to_thread.run_sync(wire.client_in.readline)
                        lines.append(json.loads(raw))
                        if lines[-1].get("id") == 1:
                            break
                wire.client_out.close()  # EOF: the session ends

    anyio.run(run)
    return lines


def test_the_opening_is_replayed_to_the_sdk_and_its_answer_is_not_sent_twice(
        dispatcher: Dispatcher, wire: Wire) -> None:
    request = initialize(request_id="init")
    wire.send(request)
    opening = open_stdio(wire.wire_in, wire.wire_out)
    assert opening.answered is not None and opening.line == line_of(request)
    assert wire.client_in.readline() == opening.answered.reply
    warm: list[str] = []
    lines = serve_session(dispatcher, wire, opening, warm)
    # Only the tools/list answer: the SDK's answer to "init" was dropped. tools/list succeeds,
    # so the SDK's session took the replayed initialize as its handshake.
    assert [line["id"] for line in lines] == [1]
    assert "tools" in lines[0]["result"]
    assert warm == ["warm"]


def test_a_different_sdk_answer_is_logged_and_still_not_sent(
        dispatcher: Dispatcher, wire: Wire, caplog: pytest.LogCaptureFixture) -> None:
    request = initialize(request_id=5)
    wire.send(request)
    line = wire.wire_in.readline()
    # As if the early answer had been written wrong: the SDK's is dropped, with an error.
    opening = Opening(line, EarlyAnswer(5, b'{"jsonrpc":"2.0","id":5,"result":{}}\n'))
    with caplog.at_level(logging.ERROR, logger="bundle_mcp.stdio"):
        lines = serve_session(dispatcher, wire, opening, [])
    assert [line["id"] for line in lines] == [1]
    assert "differs from the one sent" in caplog.text


def test_an_opening_the_early_path_declines_is_answered_by_the_sdk(
        dispatcher: Dispatcher, wire: Wire) -> None:
    request = initialize(request_id=3, _meta={"progressToken": 1})
    wire.send(request)
    opening = open_stdio(wire.wire_in, wire.wire_out)
    assert opening.answered is None
    warm: list[str] = []
    lines = serve_session(dispatcher, wire, opening, warm)
    assert [line["id"] for line in lines] == [3, 1]
    assert lines[0]["result"]["serverInfo"]["name"] == "bundle-mcp"
    assert warm == ["warm"]  # the warm-up starts once the SDK's first answer is out


# --------------------------------------------------------------------------------------------
# A served child: what was imported when the answer was written

# Imported only for calls, the HTTP transport or the semantic extra; none may be imported
# before the answer to initialize (bundle_mcp.readiness: the warm-up has not started either).
HEAVY = ("mcp", "mcp_types", "pydantic", "anyio", "uvicorn", "starlette", "jsonschema",
         "jsonschema_rs", "markdown_it", "yaml", "torch", "sentence_transformers", "numpy",
         "bundle_mcp.dispatch", "bundle_mcp.loader", "bundle_mcp.contracts",
         "bundle_mcp.readiness", "bundle_mcp.server", "bundle_mcp.semantic")
MARK = b"initialize answered before the SDK and the bundles were loaded"
_IMPORTED = re.compile(rb"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)\s*$")


def _imported(lines: list[bytes]) -> set[str]:
    return {m.group(1).decode() for line in lines if (m := _IMPORTED.match(line))}


def _is_heavy(module: str) -> bool:
    return any(module == h or module.startswith(h + ".") for h in HEAVY)


# What the first call waits for: the dispatcher and the tools, never the SDK or HTTP.
SDK = ("mcp", "mcp_types", "pydantic", "uvicorn", "starlette", "bundle_mcp.server",
       "bundle_mcp.readiness")
CALL_MARK = b"tools/call read_concept answered before the SDK was imported"


@pytest.mark.slow
@pytest.mark.parametrize("restart", [True, False], ids=["restart", "cold"])
def test_no_heavy_module_is_imported_when_initialize_is_answered(tmp_path: Path,
                                                                 restart: bool) -> None:
    """``-X importtime`` writes each import to stderr as it ends, and the server logs (at
    debug) the moment each early answer is on the wire, on the same stream: the imports before
    that line are those the answer waited for. After a restart (the parse cache filled) the
    first call (bundle_mcp.first_call) waits for the dispatcher, not for the SDK; a later
    request is the SDK's. On a cold bundle the SDK answers the first call too."""
    log = tmp_path / "stderr.log"
    cache = str(tmp_path / "cache") if restart else "off"
    if restart:
        fill_parse_cache(EXAMPLE, cache)
    env = {**os.environ, "BUNDLE_MCP_LOG_LEVEL": "debug", "BUNDLE_MCP_CACHE_DIR": cache}
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-X", "importtime", "-m", "bundle_mcp.cli", "serve", EXAMPLE],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env)
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(line_of(initialize()))
        process.stdin.flush()
        answer = json.loads(process.stdout.readline())
        assert answer["result"]["serverInfo"]["name"] == "bundle-mcp"
        process.stdin.write(line_of({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        read = {"name": "read_concept", "arguments": {"concept_id": "beans/ethiopia-guji"}}
        process.stdin.write(line_of({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                     "params": read}))
        process.stdin.flush()
        reply = json.loads(process.stdout.readline())
        assert reply["id"] == 1 and not reply["result"].get("isError"), reply
        # A request answered by the SDK: by then it is imported (the control).
        process.stdin.write(line_of({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        process.stdin.flush()
        listed = json.loads(process.stdout.readline())
        assert listed["id"] == 2 and listed["result"]["tools"], listed
    finally:
        process.kill()
        process.wait(30)
        process.stdin.close()
        process.stdout.close()
    lines = log.read_bytes().splitlines()
    marks = [n for n, line in enumerate(lines) if MARK in line]
    calls = [n for n, line in enumerate(lines) if CALL_MARK in line]
    assert marks, "the server did not say when it answered initialize"
    if not restart:
        assert calls == []  # the SDK answered it
        return
    assert calls, "the server did not say when it answered the first call"
    before = _imported(lines[:marks[0]])
    for_the_call = _imported(lines[marks[0]:calls[0]])
    after = _imported(lines[calls[0]:])
    assert "bundle_mcp.handshake" in before  # the parse sees the imports
    assert sorted(m for m in before if _is_heavy(m)) == []
    assert {"bundle_mcp.dispatch", "bundle_mcp.first_call"} <= for_the_call
    assert sorted(m for m in for_the_call
                  if any(m == s or m.startswith(s + ".") for s in SDK)) == []
    assert {"mcp", "bundle_mcp.server", "bundle_mcp.readiness"} <= after
    # Only the called tool is imported for it (the dispatcher's registry): the modules of the
    # others (context's index here) come with the SDK. And its document is read from the
    # parse cache, so neither parser's package is imported for it.
    assert "bundle_mcp.tools._context_index" in after
    assert sorted(m for m in for_the_call if m.startswith("bundle_mcp.tools._context")
                  or m.split(".")[0] in ("markdown_it", "yaml", "mdit_py_plugins")) == []


def test_the_tools_import_no_stemmer_until_a_word_is_stemmed() -> None:
    """The server imports every tool before its first answer, and that answer never stems:
    the stemmer package (every language's stemmer, about 50 ms) waits for the first stem."""
    probe = (
        "import sys\n"
        "from bundle_mcp.tools import load_tools\n"
        "load_tools()\n"
        "print('snowballstemmer' in sys.modules)\n"
        "from bundle_mcp.tools._context_index import stem\n"
        "print(stem('threads'), 'snowballstemmer' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=120).stdout.split("\n")
    assert out[:2] == ["False", "thread True"]
