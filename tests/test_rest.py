"""REST beside MCP over ``serve --http`` (``bundle_mcp.rest``, docs/REST.md).

Every golden case is called twice against the app ``build_http_app`` builds, in process: as a
JSON-RPC ``tools/call`` on ``/mcp`` (what a 2025-11-25 streamable HTTP client sends) and as
``POST /api/tools/<tool>`` from a plain HTTP client. The raw JSON text of ``structuredContent``
must be the same bytes in both answers, ``isError`` the same, the outcome the golden one, the
status the one docs/REST.md's table gives, and the REST body valid against the OpenAPI
document the server serves. Read cases share one app per bundle; a write case gets a fresh
copy of its bundle, and an app, for each surface.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
import pydantic_core
import pytest
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate as validate_openapi
from starlette.types import Message

from bundle_mcp.contracts import ContractSet
from bundle_mcp.dispatch import Dispatcher, Outcome, ServeConfig
from bundle_mcp.okf.scopes import NOTHING, Access, FolderScope
from bundle_mcp.readers import Reader, ReaderBook, Readers, hash_token
from bundle_mcp.readiness import Readiness
from bundle_mcp.rest import MAX_BODY_BYTES, _body, status_of
from bundle_mcp.server import build_http_app, public_paths
from bundle_mcp.tools import load_tools
from bundle_mcp.toolspec import ToolSpec

try:
    from tests import golden_runner
    from tests.served import printed_url
except ImportError:  # pytest run without the repository root on sys.path
    import golden_runner  # type: ignore[no-redef]
    from served import printed_url  # type: ignore[no-redef,import-not-found]

if TYPE_CHECKING:  # fixtures' types only; pytest provides the objects
    from conftest import BundleFactory, FakeTools

pytestmark = pytest.mark.anyio

HOST, PORT = "127.0.0.1", 8765
BASE = f"http://{HOST}:{PORT}"
MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}
WRITE_TOOLS = frozenset(name for name, spec in load_tools().items() if not spec.read_only)
ERROR_VALIDATOR = Draft202012Validator(
    json.loads((golden_runner.REPO / "contracts" / "error.schema.json").read_text("utf-8"))
)
EXAMPLE = str(golden_runner.REPO / "examples" / "coffee-roastery")


# --------------------------------------------------------------------------------------------
# Serving in process


@asynccontextmanager
async def serving(
    dispatcher: Dispatcher,
    *,
    token: str | None = None,
    readers: ReaderBook | None = None,
    ready: Callable[[], bool] | None = None,
) -> AsyncIterator[httpx2.AsyncClient]:
    """A client of ``public_paths(build_http_app(...))``, its lifespan run as uvicorn would."""
    app = public_paths(
        build_http_app(dispatcher, HOST, PORT, token, readers=readers, ready=ready), ready
    )
    to_app, app_reads = anyio.create_memory_object_stream[Message](4)
    app_writes, from_app = anyio.create_memory_object_stream[Message](4)
    async with anyio.create_task_group() as group:
        scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
        group.start_soon(app, scope, app_reads.receive, app_writes.send)
        await to_app.send({"type": "lifespan.startup"})
        assert (await from_app.receive())["type"] == "lifespan.startup.complete"
        try:
            transport = httpx2.ASGITransport(app=app)
            async with httpx2.AsyncClient(transport=transport, base_url=BASE, timeout=120) as c:
                yield c
        finally:
            await to_app.send({"type": "lifespan.shutdown"})
            assert (await from_app.receive())["type"] == "lifespan.shutdown.complete"


def bearer(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


async def mcp_call(
    client: httpx2.AsyncClient, tool: str, arguments: Any, token: str | None = None
) -> tuple[str, bool]:
    """(raw JSON text of structuredContent, isError) of a tools/call on /mcp."""
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": tool, "arguments": arguments}}
    response = await client.post("/mcp", json=request, headers={**MCP_HEADERS, **bearer(token)})
    assert response.status_code == 200, response.text
    text = response.content.decode("utf-8")
    return raw_member(text, "result", "structuredContent"), json.loads(text)["result"]["isError"]


async def rest_call(
    client: httpx2.AsyncClient, path: str, arguments: Any, token: str | None = None
) -> httpx2.Response:
    return await client.post(path, json=arguments, headers=bearer(token))


def raw_member(text: str, *keys: str) -> str:
    """The exact text of the value at ``keys`` (object members) in the JSON document ``text``."""
    decoder = json.JSONDecoder()

    def skip(at: int) -> int:
        while text[at] in " \t\r\n":
            at += 1
        return at

    start = end = 0
    for key in keys:
        at = skip(start)
        assert text[at] == "{", f"no object at {at}"
        at = skip(at + 1)
        while True:
            name, at = decoder.raw_decode(text, at)
            at = skip(at)
            assert text[at] == ":"
            start = skip(at + 1)
            _, end = decoder.raw_decode(text, start)
            if name == key:
                break
            at = skip(end)
            assert text[at] == ",", f"no member {key!r}"
            at = skip(at + 1)
    return text[start:end]


def envelope_of(response: httpx2.Response) -> dict[str, Any]:
    """The error envelope of a REST answer, checked against contracts/error.schema.json."""
    body = response.json()
    assert body["isError"] is True
    envelope: dict[str, Any] = body["structuredContent"]
    assert list(ERROR_VALIDATOR.iter_errors(envelope)) == []
    assert body["content"] == [{"type": "text", "text": envelope["message"]}]
    assert response.headers["content-type"] == "application/json"
    return envelope


# --------------------------------------------------------------------------------------------
# Every golden case: REST and MCP, byte for byte


class OpenApi:
    """The served OpenAPI document as a validator of REST answers and request bodies."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self._validators: dict[str, Draft202012Validator] = {}

    def _validator(self, ref: str) -> Draft202012Validator:
        if ref not in self._validators:
            # The document itself is the root resource, so its #/components/... refs resolve.
            self._validators[ref] = Draft202012Validator({**self.document, "$ref": ref})
        return self._validators[ref]

    def answer_errors(self, path: str, status: int, body: Any) -> list[str]:
        responses = self.document["paths"][path]["post"]["responses"]
        assert str(status) in responses, f"{path} does not document {status}"
        response = responses[str(status)]
        if "$ref" in response:
            response = self.document["components"]["responses"][response["$ref"].split("/")[-1]]
        ref = response["content"]["application/json"]["schema"]["$ref"]
        return [e.message[:200] for e in self._validator(ref).iter_errors(body)]

    def input_errors(self, path: str, arguments: Any) -> list[str]:
        body = self.document["paths"][path]["post"]["requestBody"]
        ref = body["content"]["application/json"]["schema"]["$ref"]
        return [e.message[:200] for e in self._validator(ref).iter_errors(arguments)]


async def compare(
    mcp: httpx2.AsyncClient, rest: httpx2.AsyncClient, tool: str, case: dict[str, Any],
    openapi: OpenApi,
) -> list[str]:
    """What differs between the two surfaces (and the golden) for one case; [] when nothing."""
    arguments = case["arguments"]
    expected = case["expected"]
    mcp_raw, mcp_is_error = await mcp_call(mcp, tool, arguments)
    path = f"/api/tools/{tool}"
    response = await rest_call(rest, path, arguments)
    text = response.content.decode("utf-8")
    problems = []
    if raw_member(text, "structuredContent") != mcp_raw:
        problems.append("structuredContent bytes differ")
    body = json.loads(text)
    if not body["isError"] is mcp_is_error is expected["is_error"]:
        problems.append(f"isError REST {body['isError']} MCP {mcp_is_error}")
    if body["structuredContent"] != expected["structured"]:
        problems.append("not the golden outcome")
    status = status_of(Outcome(expected["structured"], "", expected["is_error"]))
    if response.status_code != status:
        problems.append(f"status {response.status_code}, expected {status}")
    if not expected["is_error"] and openapi.input_errors(path, arguments):
        problems.append("the OpenAPI request schema refuses arguments the tool accepts")
    problems += openapi.answer_errors(path, response.status_code, body)
    return problems


# Cases made as a reader with its own scopes (a write tool's scope refusal): the REST app here
# serves every request as the all-reader, so they are left out, as in the TypeScript test.
READER_CASES = [p for p in golden_runner.golden_paths()
                if "reader" in golden_runner.load_case(p)]


def _read_groups() -> dict[str, list[Path]]:
    groups: dict[str, list[Path]] = {}
    for path in golden_runner.golden_paths():
        if path.parent.name in WRITE_TOOLS or path in READER_CASES:
            continue
        case = golden_runner.load_case(path)
        if "reader" in case:
            continue  # made as a reader of a readers file; these servers serve without one
        key = json.dumps([case["bundle"], case.get("setup")], sort_keys=True)
        groups.setdefault(key, []).append(path)
    return groups


READ_GROUPS = _read_groups()
WRITE_CASES = [p for p in golden_runner.golden_paths()
               if p.parent.name in WRITE_TOOLS and p not in READER_CASES]


def test_the_goldens_are_all_here() -> None:
    grouped = (sum(len(paths) for paths in READ_GROUPS.values()) + len(WRITE_CASES)
               + len(READER_CASES))
    assert grouped == len(golden_runner.golden_paths()) > 200
    assert WRITE_CASES and {"write_concept", "apply_concept_patch"} <= WRITE_TOOLS


def _group_id(key: str) -> str:
    bundle, setup = json.loads(key)
    if isinstance(bundle, dict):
        count = f"-{bundle['count']}" if "count" in bundle else ""
        bundle = f"generated-{bundle['generate']}{count}"
    return f"{bundle}+{setup}" if setup else str(bundle)


@pytest.mark.parametrize("group", sorted(READ_GROUPS), ids=_group_id)
async def test_read_goldens_answer_alike_over_rest_and_mcp(group: str, tmp_path: Path) -> None:
    paths = READ_GROUPS[group]
    root = golden_runner.prepare_bundle(golden_runner.load_case(paths[0]), tmp_path)
    async with serving(Dispatcher(ServeConfig(bundles=(root,)))) as client:
        openapi = OpenApi((await client.get("/api/openapi.json")).json())
        failures = {}
        for path in paths:
            case = golden_runner.load_case(path)
            problems = await compare(client, client, path.parent.name, case, openapi)
            if problems:
                failures[golden_runner.case_id(path)] = problems
    assert failures == {}


@pytest.mark.parametrize("path", WRITE_CASES, ids=golden_runner.case_id)
async def test_write_goldens_answer_alike_over_rest_and_mcp(path: Path, tmp_path: Path) -> None:
    case = golden_runner.load_case(path)
    roots = []
    for surface in ("mcp", "rest"):
        (tmp_path / surface).mkdir()
        roots.append(golden_runner.prepare_bundle(case, tmp_path / surface))
    async with serving(Dispatcher(ServeConfig(bundles=(roots[0],)))) as mcp, serving(
        Dispatcher(ServeConfig(bundles=(roots[1],)))
    ) as rest:
        openapi = OpenApi((await rest.get("/api/openapi.json")).json())
        assert await compare(mcp, rest, path.parent.name, case, openapi) == []


NUMBERS = {
    # Where Python's json and pydantic-core (the SDK's serializer) write different text.
    "small": 1e-05, "large": 1e21, "tenth": 0.1, "negative_zero": -0.0, "whole": 2.0,
    "huge": 10**30, "text": "é\u2028\u2029\x7f\U0001f600<>&'\"\\/\n\t\x01",
    "nested": [{"x": None, "y": [True, False]}],
}


async def test_numbers_and_text_are_written_as_the_mcp_transport_writes_them(
    tmp_path: Path, simple_bundle: str
) -> None:
    folder = tmp_path / "contracts"
    folder.mkdir()
    shutil.copy(golden_runner.REPO / "contracts" / "error.schema.json", folder)
    (folder / "numbers.input.schema.json").write_text(json.dumps({"type": "object"}), "utf-8")
    (folder / "numbers.output.schema.json").write_text(json.dumps({"type": "object"}), "utf-8")
    spec = ToolSpec(name="numbers", title="Numbers", toolset="read", description="Numbers.",
                    read_only=True, needs_parseable=False, run=lambda call, params: NUMBERS)
    dispatcher = Dispatcher(ServeConfig(bundles=(simple_bundle,)), ContractSet(folder),
                            tools={"numbers": spec})
    async with serving(dispatcher) as client:
        raw, is_error = await mcp_call(client, "numbers", {})
        response = await rest_call(client, "/api/tools/numbers", {})
        assert response.status_code == 200 and not is_error
        assert raw_member(response.text, "structuredContent") == raw
        assert json.loads(raw) == NUMBERS
        assert raw != json.dumps(NUMBERS, ensure_ascii=False, separators=(",", ":"))


async def test_a_kept_answer_is_sent_as_its_kept_encodings() -> None:
    """A kept answer's body is its kept encodings put between the keys (rest._body), sent as
    pieces: the bytes pydantic-core writes for the whole body, and the /mcp answer's values."""
    dispatcher = Dispatcher(ServeConfig(bundles=(EXAMPLE,)))
    async with serving(dispatcher) as client:
        for tool in ("list_concepts", "get_semantic_graph"):
            kept = dispatcher.call(tool, {})
            assert kept.wire is not None and dispatcher.call(tool, {}) is kept
            response = await rest_call(client, f"/api/tools/{tool}", {})
            assert response.status_code == 200
            assert response.content == pydantic_core.to_json({
                "content": [{"type": "text", "text": kept.text}],
                "structuredContent": kept.structured, "isError": False})
            raw, is_error = await mcp_call(client, tool, {})
            assert raw_member(response.text, "structuredContent") == raw and not is_error
            assert json.loads(response.content)["content"][0]["text"] == kept.text
            assert any(part is kept.wire.structured for part in _body(kept))
            assert int(response.headers["content-length"]) == len(response.content)


# --------------------------------------------------------------------------------------------
# Status codes


def _envelope(code: str, *diagnostic_codes: str) -> dict[str, Any]:
    return {"code": code, "message": "m", "retryable": code == "operation_cancelled",
            "diagnostics": [{"code": c} for c in diagnostic_codes]}


@pytest.mark.parametrize(
    ("envelope", "status"),
    [
        (_envelope("invalid_request", "invalid_input"), 400),
        (_envelope("concept_not_found", "recovery_step", "did_you_mean"), 404),
        (_envelope("revision_conflict"), 409),
        (_envelope("plan_mismatch"), 409),
        (_envelope("resource_limit", "invalid_input", "recovery_step"), 413),
        (_envelope("resource_limit", "recovery_step"), 422),
        (_envelope("operation_rejected", "invalid_frontmatter"), 422),
        (_envelope("invalid_yaml_graph"), 422),
        (_envelope("operation_cancelled", "recovery_step"), 503),
        (_envelope("internal_error"), 500),
        (_envelope("a_code_of_tomorrow"), 500),
    ],
)
def test_the_status_follows_the_envelope_code(envelope: dict[str, Any], status: int) -> None:
    assert status_of(Outcome(envelope, "m", True)) == status
    assert status_of(Outcome({"code": "resource_limit"}, "{}", False)) == 200


@pytest.fixture
async def example() -> AsyncIterator[httpx2.AsyncClient]:
    async with serving(Dispatcher(ServeConfig(bundles=(EXAMPLE,)))) as client:
        yield client


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        (b"{", {"content-type": "application/json"}),
        (b"", {"content-type": "application/json"}),
        (b"[]", {"content-type": "application/json"}),
        (b'"limit"', {"content-type": "application/json"}),
        (b"null", {"content-type": "application/json; charset=utf-8"}),
        (b'{"limit": NaN}', {"content-type": "application/json"}),
        (b'{"limit": Infinity}', {"content-type": "application/json"}),
        (b'{"query": "\xff"}', {"content-type": "application/json"}),
        (b'{"limit": 1' + b"0" * 5000 + b"}", {"content-type": "application/json"}),
        (b"[" * 100_000 + b"]" * 100_000, {"content-type": "application/json"}),
        (b"{}", {"content-type": "text/plain"}),
        (b"{}", {"content-type": "application/jsonx"}),
        (b"{}", {}),
    ],
    ids=["truncated", "empty", "array", "string", "null", "nan", "infinity", "not-utf8",
         "huge-int", "deep", "text-plain", "jsonx", "no-content-type"],
)
async def test_a_malformed_request_is_400_invalid_request(
    example: httpx2.AsyncClient, body: bytes, headers: dict[str, str]
) -> None:
    response = await example.post("/api/tools/list_concepts", content=body, headers=headers)
    assert response.status_code == 400
    assert envelope_of(response)["code"] == "invalid_request"


async def test_arguments_outside_the_contract_are_400_with_the_field_named(
    example: httpx2.AsyncClient,
) -> None:
    response = await rest_call(example, "/api/tools/search_concepts", {"query": 5, "color": 1})
    assert response.status_code == 400
    envelope = envelope_of(response)
    assert {d["field"] for d in envelope["diagnostics"]} == {"$.query", "$.color"}
    # Exactly what MCP answers to the same arguments.
    raw, is_error = await mcp_call(example, "search_concepts", {"query": 5, "color": 1})
    assert is_error and raw == raw_member(response.text, "structuredContent")


async def test_a_body_over_the_cap_is_413(example: httpx2.AsyncClient) -> None:
    big = b'{"query": "' + b"a" * MAX_BODY_BYTES + b'"}'
    declared = await example.post(
        "/api/tools/search_concepts", content=big, headers={"content-type": "application/json"}
    )
    assert declared.status_code == 413
    assert envelope_of(declared)["code"] == "resource_limit"

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it arrives
        for start in range(0, len(big), 1 << 20):
            yield big[start:start + (1 << 20)]

    streamed = await example.post(
        "/api/tools/search_concepts", content=chunks(), headers={"content-type": "application/json"}
    )
    assert "content-length" not in streamed.request.headers
    assert streamed.status_code == 413
    assert envelope_of(streamed) == envelope_of(declared)


async def test_unknown_tools_and_paths_are_404_and_other_methods_405(
    example: httpx2.AsyncClient,
) -> None:
    for path in ("/api/tools/nope", "/api/tools/", "/api/tools/list_concepts/x", "/api",
                 "/api/search", "/api/search/other", "/api/tools/%F0%9F%98%80"):
        response = await rest_call(example, path, {})
        assert response.status_code == 404, path
        assert envelope_of(response)["code"] == "invalid_request"
    assert (await example.get("/api/tools/nope")).status_code == 404
    for method in ("GET", "PUT", "DELETE", "HEAD", "OPTIONS"):
        for path in ("/api/tools/list_concepts", "/api/search/expand"):
            response = await example.request(method, path)
            assert response.status_code == 405, (method, path)
            assert response.headers["allow"] == "POST"
    response = await example.post("/api/openapi.json", json={})
    assert (response.status_code, response.headers["allow"]) == (405, "GET, HEAD")
    envelope_of(response)
    head = await example.head("/api/openapi.json")
    assert head.status_code == 200 and head.content == b""
    assert int(head.headers["content-length"]) == len((await example.get("/api/openapi.json"))
                                                      .content)


async def test_the_seed_paths_are_the_traversal_tools(example: httpx2.AsyncClient) -> None:
    listed = (await rest_call(example, "/api/tools/list_concepts", {})).json()
    first = listed["structuredContent"]["concepts"][0]["id"]
    for alias, tool, arguments in (
        ("/api/search/expand", "expand_neighbors", {"entity_ids": [first], "depth": 9}),
        ("/api/search/slice", "fetch_slice", {"entity_id": first, "window": 999}),
        ("/api/search/slice", "fetch_slice", {"entity_id": "no/such/concept"}),
        ("/api/search/expand", "expand_neighbors", {"entity_ids": [" "]}),
    ):
        by_alias = await rest_call(example, alias, arguments)
        by_name = await rest_call(example, f"/api/tools/{tool}", arguments)
        assert (by_alias.status_code, by_alias.content) == (by_name.status_code, by_name.content)
        raw, _ = await mcp_call(example, tool, arguments)
        assert raw_member(by_alias.text, "structuredContent") == raw
    # Budgets clamp on both surfaces (the seed): the applied values are echoed, not refused.
    expand = await rest_call(example, "/api/search/expand", {"entity_ids": [first], "depth": 9})
    assert expand.status_code == 200 and expand.json()["structuredContent"]["depth"] == 3
    absent = await rest_call(example, "/api/search/slice", {"entity_id": "no/such/concept"})
    assert absent.status_code == 404
    assert envelope_of(absent)["code"] == "concept_not_found"


async def test_a_rebinding_host_or_a_foreign_origin_is_refused_as_on_mcp(
    example: httpx2.AsyncClient,
) -> None:
    for headers, status in (({"Host": "evil.example"}, 421),
                            ({"Origin": "http://evil.example"}, 403)):
        rest = await example.post("/api/tools/list_concepts", json={}, headers=headers)
        mcp = await example.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                 headers={**MCP_HEADERS, **headers})
        assert rest.status_code == mcp.status_code == status
        assert envelope_of(rest)["code"] == "invalid_request"
        assert (await example.get("/api/openapi.json", headers=headers)).status_code == status
    for host in (f"localhost:{PORT}", f"[::1]:{PORT}"):
        response = await example.post("/api/tools/list_concepts", json={}, headers={"Host": host})
        assert response.status_code == 200, host


async def test_a_failure_outside_the_dispatcher_is_500_without_details(
    fake_tools: FakeTools, simple_bundle: str
) -> None:
    async with serving(fake_tools.dispatcher(bundles=(simple_bundle,))) as client:
        response = await rest_call(client, "/api/tools/boom", {})
        assert response.status_code == 500
        assert envelope_of(response)["code"] == "internal_error"
        assert "shadow" not in response.text
        ok = await rest_call(client, "/api/tools/echo", {"word": "hi"})
        assert ok.status_code == 200 and ok.json()["structuredContent"]["word"] == "hi"
        assert ok.json()["content"][0]["text"] == raw_member(ok.text, "structuredContent")


async def test_a_client_that_leaves_cancels_its_call(
    fake_tools: FakeTools, simple_bundle: str
) -> None:
    """No lifespan needed: /api never reaches the MCP app."""
    app = build_http_app(fake_tools.dispatcher(bundles=(simple_bundle,)), HOST, PORT, None)
    left = anyio.Event()
    pending: list[Message] = [
        {"type": "http.request", "body": b'{"seconds": 20}', "more_body": False}
    ]
    sent: list[Message] = []

    async def receive() -> Message:
        if pending:
            return pending.pop()
        await left.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/api/tools/slow", "query_string": b"",
             "headers": [(b"host", f"{HOST}:{PORT}".encode()),
                         (b"content-type", b"application/json")]}
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(app, scope, receive, send)
            assert await anyio.to_thread.run_sync(fake_tools.started.wait, 20)
            left.set()
        assert await anyio.to_thread.run_sync(fake_tools.stopped_by_cancel.wait, 20)
    assert sent == []  # nobody to answer


# --------------------------------------------------------------------------------------------
# Not ready yet


async def test_a_bundle_not_loaded_before_the_warm_up_is_503(simple_bundle: str) -> None:
    dispatcher = Dispatcher(ServeConfig(bundles=(simple_bundle,)))
    async with serving(dispatcher, ready=lambda: False) as client:
        assert (await client.get("/readyz")).status_code == 503
        response = await rest_call(client, "/api/tools/list_concepts", {})
        assert response.status_code == 503
        assert response.headers["retry-after"] == "5"
        envelope = envelope_of(response)
        assert (envelope["code"], envelope["retryable"]) == ("operation_cancelled", True)
        # MCP waits for the load instead; once the bundle is loaded REST serves too, warm or not.
        raw, is_error = await mcp_call(client, "list_concepts", {})
        assert not is_error
        served = await rest_call(client, "/api/tools/list_concepts", {})
        assert served.status_code == 200
        assert raw_member(served.text, "structuredContent") == raw
        # A bundle the server does not serve is the dispatcher's answer, not a 503.
        other = await rest_call(client, "/api/tools/list_concepts", {"bundle_path": "/nowhere"})
        assert other.status_code == 400


async def test_a_bundle_that_never_gets_ready_still_answers_once_loaded(
    tmp_bundle: BundleFactory,
) -> None:
    """Broken files keep the warm-up from finishing; REST answers what MCP would all the same."""
    bundle = tmp_bundle({**SCOPED, "public/broken.md": "---\ntype: note\n# no closing fence\n"})
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)))
    readiness = Readiness(dispatcher, retry_seconds=0.05)
    readiness.start()
    try:
        async with serving(dispatcher, ready=readiness.is_ready) as client:
            with anyio.fail_after(60):
                while (response := await rest_call(
                        client, "/api/tools/validate_bundle", {})).status_code == 503:
                    await anyio.sleep(0.02)
            assert not readiness.is_ready()
            assert response.status_code == 200
            assert response.json()["structuredContent"]["conformance"]["conformant"] is False
            listed = await rest_call(client, "/api/tools/list_concepts", {})
            assert listed.status_code == 422
            assert envelope_of(listed)["code"] == "operation_rejected"
    finally:
        readiness.stop()


async def test_once_ready_a_cold_bundle_is_loaded_by_the_call(simple_bundle: str) -> None:
    async with serving(Dispatcher(ServeConfig(bundles=(simple_bundle,))), ready=lambda: True) as c:
        assert (await rest_call(c, "/api/tools/list_concepts", {})).status_code == 200


def test_a_real_server_answers_rest_once_its_bundle_is_loaded(tmp_path: Path) -> None:
    """``serve --http`` itself: uvicorn, the warm-up's readiness, the token."""
    env = {k: v for k, v in os.environ.items() if k != "BUNDLE_MCP_TOKEN"}
    log = tmp_path / "serve.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "bundle_mcp.cli", "serve", EXAMPLE, "--http", "127.0.0.1:0",
             "--token", "s3cret"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, env=env,
        )
    try:
        base = printed_url(process, log, 60).removesuffix("/mcp")
        headers = bearer("s3cret")
        deadline = time.monotonic() + 60
        while (response := httpx2.post(f"{base}/api/tools/list_concepts", json={},
                                       headers=headers, timeout=30)).status_code == 503:
            assert response.headers["retry-after"] == "5"
            assert time.monotonic() < deadline, "the bundle never loaded"
            time.sleep(0.05)
        assert response.status_code == 200, response.text
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "list_concepts", "arguments": {}}}
        mcp = httpx2.post(f"{base}/mcp", json=request, headers={**MCP_HEADERS, **headers},
                          timeout=30)
        assert raw_member(response.text, "structuredContent") == raw_member(
            mcp.text, "result", "structuredContent")
        assert httpx2.post(f"{base}/api/tools/list_concepts", json={}).status_code == 401
        document = httpx2.get(f"{base}/api/openapi.json", headers=headers, timeout=30)
        assert document.status_code == 200 and document.json()["openapi"] == "3.1.0"
    finally:
        process.terminate()
        process.wait(30)


# --------------------------------------------------------------------------------------------
# Which tools are served


async def test_read_only_and_toolsets_leave_their_tools_out(simple_bundle: str) -> None:
    async with serving(Dispatcher(ServeConfig(bundles=(simple_bundle,), read_only=True))) as c:
        response = await rest_call(c, "/api/tools/write_concept", {"concept_id": "x"})
        assert response.status_code == 404
        paths = (await c.get("/api/openapi.json")).json()["paths"]
        assert not [p for p in paths if p.rsplit("/", 1)[1] in WRITE_TOOLS]
        assert "/api/tools/preview_concept_patch" in paths  # previews write nothing
    toolsets = frozenset({"read"})
    async with serving(Dispatcher(ServeConfig(bundles=(simple_bundle,), toolsets=toolsets))) as c:
        for path in ("/api/tools/expand_neighbors", "/api/search/expand", "/api/search/slice"):
            assert (await rest_call(c, path, {"entity_ids": ["roast"]})).status_code == 404
        assert (await rest_call(c, "/api/tools/list_concepts", {})).status_code == 200
        paths = (await c.get("/api/openapi.json")).json()["paths"]
        assert "/api/search/expand" not in paths and "/api/tools/list_concepts" in paths


# --------------------------------------------------------------------------------------------
# Readers and tokens

SCOPED = {
    "index.md": "# Shop\n\n- [Menu](public/menu.md)\n",
    "public/menu.md": "---\ntype: note\ntitle: Menu\n---\n# Menu\n\nEspresso.\n",
    "public/hours.md": "---\ntype: note\ntitle: Hours\n---\n# Hours\n\nSeven to five.\n",
    "finance/plan.md": "---\ntype: note\ntitle: Plan\n---\n# Plan\n\nMargins.\n",
}
PUBLIC_TOKEN, ALL_TOKEN = "token-of-the-public", "token-of-finance"


@pytest.fixture
def scoped_readers() -> ReaderBook:
    public = Reader("public", Access(FolderScope.of(["/", "public"]), NOTHING),
                    frozenset({hash_token(PUBLIC_TOKEN)}))
    finance = Reader("finance", Access(FolderScope.of(["**"]), NOTHING),
                     frozenset({hash_token(ALL_TOKEN)}))
    return ReaderBook(Readers("", (public, finance)))


async def test_each_token_gets_its_readers_answer_on_both_surfaces(
    tmp_bundle: BundleFactory, scoped_readers: ReaderBook
) -> None:
    bundle = tmp_bundle(SCOPED)
    async with serving(Dispatcher(ServeConfig(bundles=(bundle,))), readers=scoped_readers) as c:
        for path in ("/api/tools/list_concepts", "/api/openapi.json", "/api/nothing"):
            assert (await c.post(path, json={})).status_code == 401
            assert (await c.post(path, json={}, headers=bearer("guess"))).status_code == 401
        assert (await c.get("/healthz")).status_code == 200  # probes stay public
        seen = {}
        for token in (PUBLIC_TOKEN, ALL_TOKEN):
            response = await rest_call(c, "/api/tools/list_concepts", {}, token)
            assert response.status_code == 200
            raw, _ = await mcp_call(c, "list_concepts", {}, token)
            assert raw_member(response.text, "structuredContent") == raw
            seen[token] = sorted(x["id"] for x in response.json()["structuredContent"]["concepts"])
        assert seen[PUBLIC_TOKEN] == ["public/hours", "public/menu"]
        assert seen[ALL_TOKEN] == ["finance/plan", "public/hours", "public/menu"]
        document = (await c.get("/api/openapi.json", headers=bearer(PUBLIC_TOKEN))).json()
        assert document["security"] == [{"bearer": []}]


async def test_a_forbidden_concept_is_the_same_404_as_an_absent_one(
    tmp_bundle: BundleFactory, scoped_readers: ReaderBook
) -> None:
    bundle = tmp_bundle(SCOPED)
    calls = (
        ("/api/tools/read_concept", "read_concept", {"concept_id": "finance/plan"}),
        ("/api/search/slice", "fetch_slice", {"entity_id": "finance/plan"}),
        ("/api/tools/get_neighbors", "get_neighbors", {"concept_id": "finance/plan"}),
    )
    async with serving(Dispatcher(ServeConfig(bundles=(bundle,))), readers=scoped_readers) as c:
        for path, _, arguments in calls:
            assert (await rest_call(c, path, arguments, ALL_TOKEN)).status_code == 200
        forbidden = []
        for path, tool, arguments in calls:
            response = await rest_call(c, path, arguments, PUBLIC_TOKEN)
            assert response.status_code == 404, path
            assert envelope_of(response)["code"] == "concept_not_found"
            raw, _ = await mcp_call(c, tool, arguments, PUBLIC_TOKEN)
            assert raw_member(response.text, "structuredContent") == raw
            forbidden.append(response.content)
        os.remove(Path(bundle, "finance", "plan.md"))
        absent = [(await rest_call(c, path, arguments, PUBLIC_TOKEN)).content
                  for path, _, arguments in calls]
        assert absent == forbidden
        for path, _, arguments in calls:  # and now absent for everyone
            assert (await rest_call(c, path, arguments, ALL_TOKEN)).status_code == 404


async def test_a_folder_named_as_a_bundle_is_refused_to_a_reader_on_both_surfaces(
    tmp_bundle: BundleFactory, scoped_readers: ReaderBook
) -> None:
    """Issue 25, item 1: under --allow-any-bundle a reader of "/" named a folder as its bundle
    and read that folder's concepts as root files. `serve` refuses the combination; a server
    built in process anyway refuses every reader's call, over REST and MCP alike."""
    bundle = tmp_bundle(SCOPED)
    inner = {"bundle_path": str(Path(bundle, "finance"))}
    async with serving(Dispatcher(ServeConfig(allow_any_bundle=True)),
                       readers=scoped_readers) as c:
        response = await rest_call(c, "/api/tools/list_concepts", inner, PUBLIC_TOKEN)
        assert response.status_code == 422, response.text
        assert envelope_of(response)["code"] == "operation_rejected"
        assert "plan" not in response.text
        raw, is_error = await mcp_call(c, "list_concepts", inner, PUBLIC_TOKEN)
        assert is_error and raw_member(response.text, "structuredContent") == raw


async def test_a_single_token_guards_the_api_too(simple_bundle: str) -> None:
    async with serving(Dispatcher(ServeConfig(bundles=(simple_bundle,))), token="s3cret") as c:
        assert (await c.get("/api/openapi.json")).status_code == 401
        response = await c.get("/api/openapi.json", headers=bearer("s3cret"))
        assert response.status_code == 200
        assert response.json()["components"]["securitySchemes"] == {
            "bearer": {"type": "http", "scheme": "bearer"}
        }


# --------------------------------------------------------------------------------------------
# The OpenAPI document


@pytest.fixture(scope="module")
def documents() -> Iterator[dict[str, dict[str, Any]]]:
    from bundle_mcp.rest import openapi_document

    with tempfile.TemporaryDirectory() as tmp:
        dispatcher = Dispatcher(ServeConfig(bundles=(os.path.realpath(tmp),)))
        yield {
            "open": openapi_document(dispatcher, secured=False),
            "secured": openapi_document(dispatcher, secured=True),
        }


@pytest.mark.parametrize("kind", ["open", "secured"])
def test_the_openapi_document_is_valid_openapi_3_1(
    documents: dict[str, dict[str, Any]], kind: str
) -> None:
    document = documents[kind]
    assert document["openapi"] == "3.1.0"
    validate_openapi(document)  # raises on anything OpenAPI 3.1 does not allow
    assert ("security" in document) is (kind == "secured")


def test_the_openapi_document_has_one_operation_per_served_tool(
    documents: dict[str, dict[str, Any]],
) -> None:
    document = documents["open"]
    dispatcher = Dispatcher(ServeConfig(allow_any_bundle=True))
    served = {tool.name: tool for tool in dispatcher.tools()}
    operations = {path: ops["post"] for path, ops in document["paths"].items() if "post" in ops}
    tools = {p.removeprefix("/api/tools/"): op for p, op in operations.items()
             if p.startswith("/api/tools/")}
    assert sorted(tools) == sorted(served)
    for name, operation in tools.items():
        assert operation["operationId"] == name
        assert operation["summary"] == served[name].title
        assert operation["description"] == served[name].description
        assert ("409" in operation["responses"]) is (not served[name].read_only)
        assert {"200", "400", "404", "413", "422", "500", "503"} <= set(operation["responses"])
    assert operations["/api/search/expand"]["operationId"] == "search_expand"
    assert operations["/api/search/slice"]["operationId"] == "search_slice"
    ids = [op["operationId"] for ops in document["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))
    schemas = document["components"]["schemas"]
    error = json.loads((golden_runner.REPO / "contracts" / "error.schema.json").read_text("utf-8"))
    code = {"$ref": "#/components/schemas/error.error_code"}
    assert schemas["error"]["properties"]["code"] == code
    assert schemas["error.error_code"] == error["$defs"]["error_code"]
    # Every $ref points at a component that is there.
    refs = {m for m in _refs(document)}
    assert refs and all(ref.split("/")[-1] in document["components"][ref.split("/")[2]]
                        for ref in refs)


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def test_a_schema_with_a_foreign_ref_is_refused() -> None:
    from bundle_mcp.rest import _hoist

    schemas: dict[str, Mapping[str, Any]] = {}
    _hoist("t", {"$defs": {"a": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/a"},
             "e": {"const": {"$ref": "kept"}}}}, schemas)
    assert schemas["t"] == {"properties": {"x": {"$ref": "#/components/schemas/t.a"},
                                           "e": {"const": {"$ref": "kept"}}}}
    with pytest.raises(ValueError):
        _hoist("u", {"properties": {"x": {"$ref": "other.json"}}}, schemas)
