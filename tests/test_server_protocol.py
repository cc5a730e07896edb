"""The MCP wiring, through real SDK client sessions: in memory (both protocol eras), over a
``bundle-mcp serve`` stdio subprocess, and over streamable HTTP."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
import mcp.types as types
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from bundle_mcp import __version__
from bundle_mcp.contracts import ContractSet, advertised_input_schema, advertised_output_schema
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.server import INSTRUCTIONS, _allowed_hosts, build_server
from bundle_mcp.tools import load_tools
from served import tools_served_here

if TYPE_CHECKING:  # fixtures' types only; pytest provides the objects
    from conftest import BundleFactory, FakeTools

pytestmark = pytest.mark.anyio

CONTRACTS = Path(__file__).resolve().parent.parent / "contracts"
REAL_TOOLS = load_tools()
READ_ANNOTATIONS = {
    "read_only_hint": True,
    "destructive_hint": False,
    "idempotent_hint": True,
    "open_world_hint": False,
}
# Writes replay an identical request from its receipt: idempotent, and still destructive.
WRITE_ANNOTATIONS = {
    "read_only_hint": False,
    "destructive_hint": True,
    "idempotent_hint": True,
    "open_world_hint": False,
}


def contract(name: str) -> dict[str, Any]:
    return json.loads((CONTRACTS / name).read_text(encoding="utf-8"))


def envelope(result: types.CallToolResult) -> dict[str, Any]:
    """The error envelope of a failed call, checked against the error contract."""
    assert result.is_error
    env = result.structured_content
    assert env is not None
    ContractSet().check_envelope(env)
    assert [c.text for c in result.content if isinstance(c, types.TextContent)] == [env["message"]]
    return env


def no_host_path(result: types.CallToolResult, *paths: str) -> None:
    wire = json.dumps(result.model_dump(mode="json", by_alias=True))
    for path in paths:
        assert path not in wire


def text_of(result: types.CallToolResult) -> str:
    [block] = result.content
    assert isinstance(block, types.TextContent)
    return block.text


@pytest.fixture(params=["auto", "legacy"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def fake_client(
    fake_tools: FakeTools, simple_bundle: str, mode: str
) -> AsyncIterator[Client]:
    server = build_server(fake_tools.dispatcher(bundles=(simple_bundle,)))
    async with Client(server, mode=mode) as client:
        yield client


@pytest.fixture
async def real_client(simple_bundle: str, mode: str) -> AsyncIterator[Client]:
    server = build_server(Dispatcher(ServeConfig(bundles=(simple_bundle,))))
    async with Client(server, mode=mode) as client:
        yield client


# --------------------------------------------------------------------------------------------
# In memory, fake tools: the wiring itself


async def test_server_identifies_itself_and_teaches_the_loop(fake_client: Client) -> None:
    assert fake_client.server_info is not None
    assert fake_client.server_info.name == "bundle-mcp"
    assert fake_client.server_info.version == __version__
    assert fake_client.instructions == INSTRUCTIONS
    assert "search_concepts" in INSTRUCTIONS and "get_neighbors" in INSTRUCTIONS


async def test_tools_list_is_sorted_with_annotations_and_verbatim_schemas(
    fake_client: Client, fake_tools: FakeTools
) -> None:
    listed = (await fake_client.list_tools()).tools
    names = [t.name for t in listed]
    assert names == sorted(fake_tools.modules)
    for tool in listed:
        assert tool.input_schema == fake_tools.contracts.advertised_input_schema(tool.name)
        assert tool.output_schema == fake_tools.contracts.advertised_output_schema(tool.name)
        assert tool.annotations is not None
        expected = WRITE_ANNOTATIONS if tool.name == "write_thing" else READ_ANNOTATIONS
        title = tool.name.replace("_", " ").capitalize()
        assert tool.title == title
        assert tool.annotations.model_dump(exclude_none=True) == {"title": title, **expected}
        assert tool.description == f"Fake tool {tool.name} for tests."


async def test_success_carries_structured_content_and_its_json_text(fake_client: Client) -> None:
    result = await fake_client.call_tool("echo", {"word": "ünï"})
    assert not result.is_error
    assert result.structured_content is not None
    assert result.structured_content["word"] == "ünï"
    assert json.loads(text_of(result)) == result.structured_content


async def test_tool_errors_are_envelopes_not_protocol_errors(fake_client: Client) -> None:
    assert envelope(await fake_client.call_tool("echo", {"bogus": 1}))["code"] == "invalid_request"
    too_long = envelope(await fake_client.call_tool("echo", {"word": "w" * 17}))
    assert too_long["code"] == "resource_limit"


async def test_unknown_tool_is_a_protocol_error(fake_client: Client) -> None:
    with pytest.raises(MCPError) as info:
        await fake_client.call_tool("nosuch", {})
    assert info.value.error.code == types.INVALID_PARAMS
    assert "Unknown tool: nosuch" in info.value.error.message


async def test_an_exception_in_a_tool_never_leaks(fake_client: Client) -> None:
    result = await fake_client.call_tool("boom", {})
    assert envelope(result)["code"] == "internal_error"
    no_host_path(result, "secret", "/etc/shadow")


async def test_client_timeout_cancels_the_worker_and_the_server_stays_usable(
    fake_client: Client, fake_tools: FakeTools
) -> None:
    with anyio.fail_after(10):
        with pytest.raises(MCPError):
            await fake_client.call_tool("slow", {"seconds": 10}, read_timeout_seconds=0.3)
        assert fake_tools.started.is_set()
        # The worker thread notices the cancelled token and stops without a result.
        assert await anyio.to_thread.run_sync(fake_tools.stopped_by_cancel.wait, 5)
        result = await fake_client.call_tool("echo", {"word": "after"})
    assert result.structured_content is not None
    assert result.structured_content["word"] == "after"


async def test_read_only_hides_write_tools(
    fake_tools: FakeTools, simple_bundle: str, mode: str
) -> None:
    server = build_server(fake_tools.dispatcher(bundles=(simple_bundle,), read_only=True))
    async with Client(server, mode=mode) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert "write_thing" not in names
        with pytest.raises(MCPError):
            await client.call_tool("write_thing", {})


# --------------------------------------------------------------------------------------------
# In memory, real tools


async def test_real_tools_advertise_their_contract_files(real_client: Client) -> None:
    listed = (await real_client.list_tools()).tools
    assert [t.name for t in listed] == sorted(REAL_TOOLS)
    for tool in listed:
        # The input contract without header, hints and folds (test_tool_surface.py).
        assert tool.input_schema == advertised_input_schema(
            contract(f"{tool.name}.input.schema.json")
        )
        assert tool.title == REAL_TOOLS[tool.name].title
        # The output contract OR the envelope, both from their files (test_advertised_schemas.py).
        assert tool.output_schema == advertised_output_schema(
            contract(f"{tool.name}.output.schema.json"), contract("error.schema.json")
        )
        assert tool.annotations is not None
        expected = READ_ANNOTATIONS if REAL_TOOLS[tool.name].read_only else WRITE_ANNOTATIONS
        assert tool.annotations.model_dump(exclude_none=True) == {"title": tool.title, **expected}


async def test_list_concepts_over_mcp(real_client: Client, simple_bundle: str) -> None:
    for args in ({}, {"bundle_path": simple_bundle}):
        result = await real_client.call_tool("list_concepts", args)
        assert not result.is_error, result.structured_content
        assert result.structured_content is not None
        ids = [c["id"] for c in result.structured_content["concepts"]]
        assert ids == ["beans", "roast"]
        assert json.loads(text_of(result)) == result.structured_content


async def test_limit_101_is_resource_limit(real_client: Client) -> None:
    result = await real_client.call_tool("search_concepts", {"query": "roast", "limit": 101})
    env = envelope(result)
    assert env["code"] == "resource_limit"
    assert {d["code"] for d in env["diagnostics"]} == {"invalid_input", "recovery_step"}


async def test_bundle_off_the_allow_list_is_rejected_without_naming_paths(
    real_client: Client, tmp_bundle: BundleFactory, simple_bundle: str
) -> None:
    other = tmp_bundle({"private.md": "---\ntype: t\n---\n"})
    result = await real_client.call_tool("list_concepts", {"bundle_path": other})
    assert envelope(result)["code"] == "invalid_request"
    no_host_path(result, other, simple_bundle)


# --------------------------------------------------------------------------------------------
# A real `bundle-mcp serve` over stdio


@pytest.mark.parametrize("stdio_mode", ["auto", "legacy"])
async def test_stdio_subprocess_serves_the_bundle(
    simple_bundle: str, tmp_bundle: BundleFactory, stdio_mode: str
) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "bundle_mcp.cli", "serve", simple_bundle]
    )
    other = tmp_bundle({"private.md": "---\ntype: t\n---\n"})
    with anyio.fail_after(30):
        async with Client(params, mode=stdio_mode) as client:
            listed = (await client.list_tools()).tools
            assert tuple(t.name for t in listed) == tools_served_here()
            with pytest.raises(MCPError) as info:
                await client.call_tool("nosuch", {})
            assert info.value.error.code == types.INVALID_PARAMS
            result = await client.call_tool("list_concepts", {})
            assert result.structured_content is not None
            assert [c["id"] for c in result.structured_content["concepts"]] == ["beans", "roast"]
            rejected = await client.call_tool("list_concepts", {"bundle_path": other})
            assert envelope(rejected)["code"] == "invalid_request"
            no_host_path(rejected, other, simple_bundle)


# --------------------------------------------------------------------------------------------
# A real `bundle-mcp serve --http` subprocess

TOKEN = "test-token-5f0c"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"serve --http exited early:\n{log.read_text(encoding='utf-8')}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    pytest.fail("serve --http did not start listening")


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    base = Path(os.path.realpath(tmp_path_factory.mktemp("http")))
    bundle = base / "bundle"
    bundle.mkdir()
    (bundle / "roast.md").write_text("---\ntype: process\n---\n# Roast\n", encoding="utf-8")
    port = _free_port()
    log = base / "stderr.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "bundle_mcp.cli", "serve", str(bundle)]
            + ["--http", f"127.0.0.1:{port}", "--token", TOKEN],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        _wait_for_port(port, process, log)
        yield f"http://127.0.0.1:{port}/mcp", str(bundle), log
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
RAW_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}


def test_http_prints_client_configuration(http_server: tuple[str, str, Path]) -> None:
    url, _, log = http_server
    # The socket listens (and queues connections) a moment before the configuration is printed.
    deadline = time.monotonic() + 20
    while '"mcpServers"' not in (text := log.read_text(encoding="utf-8")):
        assert time.monotonic() < deadline, text
        time.sleep(0.05)
    assert url in text
    assert TOKEN not in text  # the secret is never echoed into a log


def test_http_requires_the_bearer_token(http_server: tuple[str, str, Path]) -> None:
    url, _, _ = http_server
    for auth in (None, "Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x"):
        headers = dict(RAW_HEADERS)
        if auth is not None:
            headers["Authorization"] = auth
        response = httpx2.post(url, json=LIST_TOOLS, headers=headers, timeout=10)
        assert response.status_code == 401, auth


def test_http_rejects_rebinding_host_and_foreign_origin(
    http_server: tuple[str, str, Path],
) -> None:
    url, _, _ = http_server
    authorized = {**RAW_HEADERS, "Authorization": f"Bearer {TOKEN}"}
    response = httpx2.post(
        url, json=LIST_TOOLS, headers={**authorized, "Host": "evil.example"}, timeout=10
    )
    assert response.status_code == 421
    response = httpx2.post(
        url, json=LIST_TOOLS, headers={**authorized, "Origin": "http://evil.example"}, timeout=10
    )
    assert response.status_code == 403
    port = url.split(":")[2].split("/")[0]
    for host in (f"localhost:{port}", f"127.0.0.1:{port}"):
        response = httpx2.post(
            url, json=LIST_TOOLS, headers={**authorized, "Host": host}, timeout=10
        )
        assert response.status_code == 200, host


@pytest.mark.parametrize("http_mode", ["auto", "legacy"])
async def test_http_client_session(http_server: tuple[str, str, Path], http_mode: str) -> None:
    url, bundle, _ = http_server
    with anyio.fail_after(30):
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            async with Client(streamable_http_client(url, http_client=http), mode=http_mode) as c:
                assert tuple(t.name for t in (await c.list_tools()).tools) == tools_served_here()
                result = await c.call_tool("list_concepts", {"bundle_path": bundle})
                assert result.structured_content is not None
                assert [x["id"] for x in result.structured_content["concepts"]] == ["roast"]
                bad = await c.call_tool("list_concepts", {"as_of": "yesterday"})
                assert envelope(bad)["code"] == "invalid_request"


def test_allowed_hosts_are_the_bound_address_and_loopback_names() -> None:
    assert _allowed_hosts("127.0.0.1", 8765) == [
        "127.0.0.1:8765",
        "[::1]:8765",
        "localhost:8765",
    ]
    assert "[::1]:9000" in _allowed_hosts("::1", 9000)
    assert "docs.internal:80" in _allowed_hosts("docs.internal", 80)
    assert "docs.internal" in _allowed_hosts("docs.internal", 80)
