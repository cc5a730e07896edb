"""Big answers on stdio are put back into the SDK's line by the writer (bundle_mcp.answer_lines).

Each test serves the same answers twice over real OS pipes, once through the SDK's own path and
once held, and compares the lines byte for byte.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

import anyio
import mcp.types as types
import pytest
from mcp.server import Server, ServerRequestContext
from pydantic_core import to_json

from bundle_mcp.answer_lines import MAX_PENDING, MIN_HELD_CHARS, AnswerLines, plain_result
from bundle_mcp.dispatch import (
    CallGate,
    Dispatcher,
    JsonStringPieces,
    Outcome,
    ServeConfig,
    WireJson,
    _json_string_of,
)
from bundle_mcp.loader.parse_cache import ParseCache
from bundle_mcp.okf.temporal import DATE_PROFILE
from bundle_mcp.pieces import PackedBytes, Whole
from bundle_mcp.server import build_server
from bundle_mcp.snapshots import SnapshotCache
from stdio_pipes import Pipes, in_process

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "coffee-roastery"


async def _call(pipes: Pipes, request_id: int, name: str, arguments: dict[str, Any]) -> bytes:
    """The line the server wrote in answer to one ``tools/call``."""
    pipes.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                "params": {"name": name, "arguments": arguments}})
    return await pipes.line()


def _answering(outcomes: list[Outcome], answer_lines: AnswerLines | None) -> Server[Any]:
    """A server whose call ``n`` answers ``outcomes[n]``, held when ``answer_lines`` is given."""

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        outcome = outcomes[int(params.name)]
        if answer_lines is None:
            return plain_result(outcome)
        return answer_lines.hold(outcome)

    return Server("t", on_call_tool=on_call_tool)


def _outcome(structured: dict[str, Any], *, text: str | None = None,
             is_error: bool = False) -> Outcome:
    shown = json.dumps(structured, ensure_ascii=False) if text is None else text
    return Outcome(structured=structured, text=shown, is_error=is_error)


# Every kind of value a result holds, and those whose JSON two encoders could write apart:
# floats Python's json writes in exponent form, control characters, line separators, escapes.
TRICKY = [
    _outcome({"score": 1e-05, "tiny": 5e-324, "big": 1e16, "zero": -0.0, "third": 1 / 3,
              "int": 10**20, "negative": -7, "flag": True, "none": None}),
    _outcome({"text": 'quote " backslash \\ slash / nul \x00 unit \x1f del \x7f',
              "lines": "a\nb\r\nc\t\b\f", "unicode": "\u2028\u2029 é 漢字 🙂 \ufeff"}),
    _outcome({"nested": [[{"a": [1, 2.5, "x"]}, []], {}], "empty": ""},
             text='not the JSON: "quoted" \\ and \n lines'),
    _outcome({"code": "not_found", "message": "no such concept"}, text="no such concept",
             is_error=True),
]


@pytest.mark.anyio
async def test_a_held_answer_is_the_line_the_sdk_writes() -> None:
    lines: dict[bool, list[bytes]] = {}
    for held in (False, True):
        answer_lines = AnswerLines(min_chars=0) if held else None
        with anyio.fail_after(30):
            async with in_process(_answering(TRICKY, answer_lines), answer_lines) as pipes:
                lines[held] = [await _call(pipes, n, str(n), {}) for n in range(len(TRICKY))]
    assert lines[True] == lines[False]
    first = json.loads(lines[True][0])
    assert first["result"]["structuredContent"]["score"] == 1e-05


class _Watched:
    """A wire that notes, at each write, whether a call is in flight on ``gate``."""

    def __init__(self, wire: IO[bytes], gate: CallGate, seen: list[bool]) -> None:
        self._wire, self._gate, self._seen = wire, gate, seen

    def write(self, data: bytes) -> int:
        self._seen.append(self._gate.busy())
        return self._wire.write(data)

    def flush(self) -> None:
        self._seen.append(self._gate.busy())
        self._wire.flush()


@pytest.mark.anyio
async def test_an_answer_is_written_while_the_call_gate_is_held() -> None:
    """The warm-up stands aside while a call is in flight (``CallGate``), and a call is in
    flight until its answer is on the wire: written beside the warm-up, each piece of a 30 MB
    answer waited for the interpreter lock, 0.1 → 0.7 s. Held answers (expanded, then written
    piece by piece) and plain ones alike; between answers the gate is free."""
    gate = CallGate()
    seen: list[bool] = []
    big = _outcome({"text": "x" * (2 * MIN_HELD_CHARS)})
    answer_lines = AnswerLines()
    def watched(wire: IO[bytes]) -> IO[bytes]:
        return _Watched(wire, gate, seen)  # type: ignore[return-value]  # write and flush only

    async with in_process(_answering([big, TRICKY[0]], answer_lines), answer_lines,
                          answering=gate.call, sink=watched) as pipes:
        for n in range(2):
            assert gate.wait_quiet(5)  # the line before (initialize's, then the last answer)
            seen.clear()
            await _call(pipes, n, str(n), {})
            assert seen and all(seen)


@pytest.mark.anyio
async def test_an_unencodable_answer_takes_the_sdks_path_to_an_internal_error() -> None:
    outcomes = [_outcome({"text": "x\ud800"}, text="x\ud800")]
    answer_lines = AnswerLines(min_chars=0)
    with anyio.fail_after(30):
        async with in_process(_answering(outcomes, answer_lines), answer_lines) as pipes:
            reply = json.loads(await _call(pipes, 1, "0", {}))
    assert reply["id"] == 1 and reply["error"]["code"] == types.INTERNAL_ERROR


def _tool_calls() -> list[tuple[str, dict[str, Any]]]:
    return [
        ("list_concepts", {}),
        ("list_concepts", {}),  # a kept answer: its encoding is used again
        ("get_semantic_graph", {}),
        ("read_concept", {"concept_id": "beans/ethiopia-guji"}),
        ("search_concepts", {"query": "roast", "limit": 5}),
        ("context", {"question": "how dark do we roast espresso beans?"}),
        ("read_concept", {"concept_id": "no/such/concept"}),
    ]


@pytest.mark.anyio
async def test_every_tool_answer_is_the_same_line_held_or_not() -> None:
    lines: dict[bool, list[bytes]] = {}
    for held in (False, True):
        answer_lines = AnswerLines(min_chars=0) if held else None
        dispatcher = Dispatcher(ServeConfig(bundles=(str(EXAMPLE),)))
        server = build_server(dispatcher, answer_lines=answer_lines)
        with anyio.fail_after(60):
            async with in_process(server, answer_lines) as pipes:
                lines[held] = [await _call(pipes, n, name, arguments)
                               for n, (name, arguments) in enumerate(_tool_calls())]
    assert lines[True] == lines[False]
    assert all(b"bundle-mcp-answer-" not in line for line in lines[True])
    replies = [json.loads(line) for line in lines[True]]
    assert not replies[0]["result"]["isError"] and replies[-1]["result"]["isError"]


def _response(request_id: int, result: types.CallToolResult) -> types.JSONRPCResponse:
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result=dumped)


def _line(message: types.JSONRPCResponse) -> bytes:
    return message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"


def test_a_placeholder_whose_answer_was_dropped_is_not_put_back() -> None:
    answer_lines = AnswerLines(min_chars=0)
    held = [_response(n, answer_lines.hold(TRICKY[0])) for n in range(MAX_PENDING + 1)]
    assert answer_lines.expand(held[0], _line(held[0])) is None  # the writer sends -32603
    newest_line = answer_lines.expand(held[-1], _line(held[-1]))
    assert newest_line is not None
    newest = json.loads(b"".join(newest_line))
    assert newest["result"]["structuredContent"] == TRICKY[0].structured


def test_only_this_connections_placeholders_are_expanded() -> None:
    ours, theirs = AnswerLines(min_chars=0), AnswerLines(min_chars=0)
    message = _response(1, theirs.hold(TRICKY[1]))
    assert not ours.is_held(message)
    line = _line(message)
    assert ours.expand(message, line) == (line,)


def test_a_held_answers_values_are_written_as_kept_never_copied_into_one_line() -> None:
    """Issue 29: the line was the pieces joined, a copy of the whole answer (28.6 MiB for the
    bench's get_semantic_graph) alive while it was written. The writer now writes the pieces
    in turn: the values are the kept encodings themselves, and the pieces make the line."""
    answer_lines = AnswerLines(min_chars=0)
    outcome = TRICKY[1]
    structured, text = Whole(to_json(outcome.structured)), Whole(to_json(outcome.text))
    wire = WireJson(structured, text)
    kept = Outcome(outcome.structured, outcome.text, outcome.is_error, wire=wire)
    message = _response(7, answer_lines.hold(kept))
    expanded = answer_lines.expand(message, _line(message))
    assert expanded is not None
    pieces = tuple(expanded)
    assert any(piece is structured.data for piece in pieces)
    assert any(piece is text.data for piece in pieces)
    plain = _response(7, plain_result(outcome))
    assert b"".join(pieces) == _line(plain)


def test_a_small_answer_is_not_held() -> None:
    answer_lines = AnswerLines()
    assert not answer_lines.holds(TRICKY[2])
    assert answer_lines.hold(TRICKY[2]) == plain_result(TRICKY[2])


def test_a_kept_answer_is_encoded_once_when_it_is_kept() -> None:
    dispatcher = Dispatcher(ServeConfig(bundles=(str(EXAMPLE),)))
    first = dispatcher.call("get_semantic_graph", {})
    again = dispatcher.call("get_semantic_graph", {})
    assert again is first and first.wire is not None
    assert first.wire.structured.joined() == to_json(first.structured)
    assert b"".join(first.wire.structured) == to_json(first.structured)
    assert first.wire.structured.size == len(to_json(first.structured))
    assert b"".join(first.wire.text) == to_json(first.text)
    assert first.wire.text.size == len(to_json(first.text))
    read = dispatcher.call("read_concept", {"concept_id": "beans/ethiopia-guji"})
    assert read.wire is None  # not kept: encoded only if a transport holds it


def _held_by(root: object) -> list[object]:
    """Every value a kept outcome holds: its fields, and what its dicts, lists and tuples hold."""
    held, seen, stack = [], set(), [root]
    while stack:
        value = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        held.append(value)
        if isinstance(value, Outcome | WireJson):
            stack.extend(vars(value).values())
        elif isinstance(value, JsonStringPieces):
            stack.append(value.source)
        elif isinstance(value, PackedBytes):
            stack.append(value._compressed)
        elif isinstance(value, dict):
            stack.extend((*value.keys(), *value.values()))
        elif isinstance(value, list | tuple):
            stack.extend(value)
    return held


@pytest.mark.parametrize("tool", ["get_semantic_graph", "list_concepts"])
def test_a_kept_answer_holds_its_json_once_and_compressed(tool: str) -> None:
    """Issue 29: a kept answer held its JSON three times, as the text block (a str), the
    structured encoding and the text's JSON string (14.2, 14.2 and 15.8 MB for the bench's
    get_semantic_graph). The text is now the structured encoding decoded when asked, its JSON
    string is escaped from the encoding as it is written, and the encoding is held compressed
    (2.1 MB at that size): no string or bytes as long as a tenth of the answer is held but the
    compressed encoding."""
    dispatcher = Dispatcher(ServeConfig(bundles=(str(EXAMPLE),)))
    kept = dispatcher.call(tool, {})
    assert dispatcher.call(tool, {}) is kept and kept.wire is not None
    encoded = to_json(kept.structured)
    assert len(encoded) > 10_000
    packed = kept.wire.structured
    assert isinstance(packed, PackedBytes) and packed.compressed_size < len(encoded) // 3
    big = [value for value in _held_by(kept)
           if isinstance(value, str | bytes) and len(value) >= len(encoded) // 10]
    assert len(big) <= 1 and all(len(value) == packed.compressed_size for value in big)
    assert isinstance(kept.wire.text, JsonStringPieces) and kept.wire.text.source is packed
    assert kept.text == json.dumps(kept.structured, ensure_ascii=False, separators=(",", ":"))
    assert kept.text.encode() == packed.joined() == encoded
    assert b"".join(kept.wire.text) == to_json(kept.text)
    assert kept == Outcome(kept.structured, kept.text, kept.is_error)


def test_a_kept_answer_shares_the_kept_nodes_and_entries() -> None:
    """The default calls' results are the kept nodes (get_semantic_graph) and entries
    (list_concepts) themselves, not a copy of each; a call with as_of still gets its own.
    Without a parse cache: an answer an earlier test stored there is read back as its
    encoding, with no result object to share."""
    dispatcher = Dispatcher(ServeConfig(bundles=(str(EXAMPLE),)),
                            cache=SnapshotCache(parse_cache=ParseCache(None)))
    nodes = dispatcher.call("get_semantic_graph", {}).structured["@graph"][1:]
    dated = dispatcher.call("get_semantic_graph", {"as_of": "2099-01-01"}).structured["@graph"]
    assert [node["id"] for node in nodes] == [node["id"] for node in dated[1:]]
    stale = [node["stale"] is not None for node in dated[1:]]
    assert any(stale) and not all(stale)
    # Only the nodes whose `stale` the call sets are copies.
    assert [a is b for a, b in zip(nodes, dated[1:], strict=True)] == [not s for s in stale]
    concepts = dispatcher.call("list_concepts", {}).structured["concepts"]
    repeated = dispatcher.call("list_concepts", {"temporal_profile": DATE_PROFILE})
    assert all(a is b for a, b in zip(concepts, repeated.structured["concepts"], strict=True))


@pytest.mark.parametrize("outcome", TRICKY)
def test_a_kept_texts_json_string_is_the_sdks(outcome: Outcome) -> None:
    """A kept text's JSON string is made from its UTF-8 bytes (dispatch._json_string_of) as
    pydantic_core writes it; a control character, which JSON text never holds raw, is left to
    the encoder."""
    for text in (outcome.text, json.dumps(outcome.structured, ensure_ascii=False),
                 "".join(chr(c) for c in range(0x20, 0x80)) + "é\u2028漢🙂\ufeff"):
        data = text.encode()
        pieces = _json_string_of(data, PackedBytes(data))
        if any(ord(c) < 0x20 for c in text):
            assert pieces is None
        else:
            assert pieces is not None and b"".join(pieces) == to_json(text)
            assert pieces.size == len(to_json(text))


def test_a_kept_texts_json_string_is_the_sdks_across_its_pieces() -> None:
    """The JSON string is escaped a piece at a time as it is written: quotes, backslashes and
    multi-byte characters on each side of a piece's edge come out as the SDK's encoder writes
    the whole, on every pass."""
    edge = 256 * 1024
    filler = "a" * (edge - 3)
    text = "".join([filler, '"\\', "é", filler, "漢", '"', filler[:-2], "🙂\\", "x" * 10])
    data = text.encode()
    assert len(data) > 3 * edge
    pieces = _json_string_of(data, PackedBytes(data))
    assert pieces is not None
    assert b"".join(pieces) == to_json(text)
    assert b"".join(pieces) == to_json(text)  # a second pass makes them again
    assert pieces.size == len(to_json(text))
    assert max(len(piece) for piece in pieces) <= 2 * edge
