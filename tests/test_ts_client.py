"""Tool results and tool errors through the real TypeScript MCP SDK client, over stdio and HTTP.

The TypeScript SDK (``@modelcontextprotocol/sdk``, pinned in tests/ts/package.json) compiles every
advertised ``outputSchema`` with Ajv and checks each ``structuredContent`` against it, error
results included: an envelope the schema does not accept turns into ``-32602 Structured content
does not match the tool's output schema`` and the model never sees the message. Here
tests/ts/mcp_client.mjs lists the tools and makes every golden call (tests/golden/<tool>/*.json,
each on its own fresh copy of its bundle, so write tools never touch testdata) plus one call per
tool with an unknown argument, against ``bundle-mcp serve`` over stdio and over streamable HTTP.
Every success must pass the SDK's check and equal its golden; every failure must arrive as
``isError: true`` with the envelope intact and its message as the text block.

Needs node (18+) and npm. ``make test-all`` runs ``npm ci`` in tests/ts first; without node_modules
this test runs it itself, and skips (saying why) when node or npm is missing or the registry
cannot be reached.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bundle_mcp.contracts import ContractSet
from bundle_mcp.errors import BundleError
from served import stop, tools_served_here
from toolcall import fill_parse_cache

try:
    from tests import golden_runner
except ImportError:  # pytest run without the repository root on sys.path
    import golden_runner  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parent.parent
TS_DIR = REPO / "tests" / "ts"
SCRIPT = TS_DIR / "mcp_client.mjs"
SDK = "@modelcontextprotocol/sdk"
NPM_TIMEOUT = 180  # seconds for `npm ci` (about 4 s with a reachable registry)
RUN_TIMEOUT = 120  # seconds for one client run (about 10 s here)
TOKEN = "ts-test-token-3b9e"
# Goldens recorded without an embedding index; served with the model installed, these calls (a
# tool, or one case) may succeed or fail differently, or say a different ranking_note (index
# still building). Their outcome must still arrive intact.
MODEL_DEPENDENT = frozenset({
    "search_semantic", "context/hybrid_without_semantic", "search_sections/hybrid_without_semantic",
})
UNKNOWN_ARGUMENT = "zz_not_an_argument"
# npm's wording when the registry cannot be reached (offline CI, no proxy).
_NETWORK = re.compile(
    r"ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|"
    r"network|socket hang up|request to https?://\S+ failed",
    re.I,
)


# --------------------------------------------------------------------------------------------
# node, npm and the pinned SDK


def _pinned_version() -> str:
    package = json.loads((TS_DIR / "package.json").read_text(encoding="utf-8"))
    return str(package["dependencies"][SDK])


def _installed_version() -> str | None:
    manifest = TS_DIR / "node_modules" / SDK / "package.json"
    try:
        return str(json.loads(manifest.read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError):
        return None


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _npm_ci(npm: str) -> None:
    command = [npm, "ci", "--no-audit", "--no-fund", "--fetch-timeout=20000", "--fetch-retries=1"]
    try:
        done = subprocess.run(
            command, cwd=TS_DIR, capture_output=True, text=True, timeout=NPM_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.skip(f"`npm ci` in tests/ts took longer than {NPM_TIMEOUT} s (no registry access?)")
    output = done.stdout + done.stderr
    if done.returncode != 0:
        offline = _NETWORK.search(output)
        if offline:
            pytest.skip(f"`npm ci` in tests/ts cannot reach the npm registry ({offline.group(0)})")
        pytest.fail(f"`npm ci` in tests/ts failed:\n{_tail(output)}")
    if _installed_version() != _pinned_version():
        pytest.fail(f"`npm ci` did not install {SDK} {_pinned_version()}:\n{_tail(output)}")


@pytest.fixture(scope="module")
def node() -> str:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are needed for the TypeScript SDK client test; not on PATH")
    version = subprocess.run(
        [node, "--version"], capture_output=True, text=True, timeout=30, check=False
    ).stdout.strip()
    major = re.match(r"v(\d+)\.", version)
    if major is None or int(major.group(1)) < 18:
        pytest.skip(f"the TypeScript MCP SDK needs node 18 or newer, found {version or 'nothing'}")
    if _installed_version() != _pinned_version():
        _npm_ci(npm)
    return node


# --------------------------------------------------------------------------------------------
# The calls: every golden case, each on its own copy of its bundle, and one unknown argument


@dataclass(frozen=True)
class Call:
    id: str
    tool: str
    arguments: dict[str, Any]
    is_error: bool
    structured: dict[str, Any] | None  # the golden outcome; None when only the code is known
    code: str | None  # the error code a failure must have


SERVED_TOOLS = tools_served_here()


def _calls(workdir: Path) -> tuple[list[Call], list[str]]:
    calls: list[Call] = []
    bundles: list[str] = []
    unknown_done: set[str] = set()
    for path in golden_runner.golden_paths():
        tool, case = path.parent.name, golden_runner.load_case(path)
        if tool not in SERVED_TOOLS:
            continue  # not offered here: the unknown tool is a protocol error, not its golden
        if "reader" in case:
            continue  # made as a reader with its own scopes: this server serves one reader
        folder = workdir / f"{tool}.{path.stem}"
        folder.mkdir(parents=True)
        root = golden_runner.prepare_bundle(case, folder)
        bundles.append(root)
        expected = case["expected"]
        arguments = {**case["arguments"], "bundle_path": root}
        code = expected["structured"]["code"] if expected["is_error"] else None
        calls.append(
            Call(
                golden_runner.case_id(path),
                tool,
                arguments,
                expected["is_error"],
                expected["structured"],
                code,
            )
        )
        if not expected["is_error"] and tool not in unknown_done:
            # Valid arguments plus one the contract does not know: the envelope, not a -32602.
            unknown_done.add(tool)
            calls.append(
                Call(
                    f"{tool}/unknown_argument",
                    tool,
                    {**arguments, UNKNOWN_ARGUMENT: 1},
                    True,
                    None,
                    "invalid_request",
                )
            )
    return calls, bundles


def _serve_command() -> list[str]:
    script = Path(sys.executable).parent / "bundle-mcp"
    return [str(script)] if script.exists() else [sys.executable, "-m", "bundle_mcp.cli"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"serve --http exited early:\n{log.read_text(encoding='utf-8')}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    pytest.fail("serve --http did not start listening")


def _run_client(node: str, plan: dict[str, Any], workdir: Path,
                stderr: list[str] | None = None) -> dict[str, Any]:
    """The client's report; ``stderr`` gets what the client and a stdio server it spawned
    wrote there."""
    plan_file = workdir / "plan.json"
    plan_file.write_text(json.dumps(plan), encoding="utf-8")
    # The stdio server inherits this environment: no token from the caller's (HTTP only).
    env = {k: v for k, v in os.environ.items() if k != "BUNDLE_MCP_TOKEN"}
    done = subprocess.run(
        [node, str(SCRIPT), str(plan_file)],
        cwd=TS_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    if stderr is not None:
        stderr.append(done.stderr)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        pytest.fail(f"mcp_client.mjs failed ({done.returncode}):\n{_tail(done.stderr, 40)}")
    report: dict[str, Any] = json.loads(lines[-1])
    assert report["fatal"] is None, f"{report['fatal']}\n{_tail(done.stderr, 40)}"
    return report


@dataclass
class Run:
    transport: str
    calls: list[Call]
    report: dict[str, Any]


CONTROL_CASE = "search_concepts/error_limit_101"


@pytest.fixture(scope="module", params=["stdio", "http"])
def run(
    request: pytest.FixtureRequest, node: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Run]:
    transport = str(request.param)
    workdir = Path(os.path.realpath(tmp_path_factory.mktemp(f"ts-{transport}")))
    calls, bundles = _calls(workdir / "bundles")
    control = next(c for c in calls if c.id == CONTROL_CASE)
    plan: dict[str, Any] = {
        "timeout_ms": 30000,
        "calls": [{"id": c.id, "tool": c.tool, "arguments": c.arguments} for c in calls],
        "control": {
            "id": control.id,
            "tool": control.tool,
            "arguments": control.arguments,
            # The bare output contract, as advertised before the envelope branch was added.
            "output_schema": ContractSet().output_schema(control.tool),
        },
    }
    if transport == "stdio":
        command = _serve_command()
        plan["transport"] = {
            "kind": "stdio",
            "command": command[0],
            "args": [*command[1:], "serve", *bundles],
        }
        yield Run(transport, calls, _run_client(node, plan, workdir))
        return
    port = _free_port()
    log = workdir / "stderr.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [*_serve_command(), "serve", *bundles, "--http", f"127.0.0.1:{port}", "--token", TOKEN],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        _wait_for_port(port, process, log)
        plan["transport"] = {"kind": "http", "url": f"http://127.0.0.1:{port}/mcp", "token": TOKEN}
        yield Run(transport, calls, _run_client(node, plan, workdir))
    finally:
        stop(process)


# --------------------------------------------------------------------------------------------
# What the TypeScript client saw


def _text_blocks(seen: dict[str, Any]) -> list[str]:
    return [block.get("text") for block in seen["content"] if block.get("type") == "text"]


def _outcomes(run: Run, *, errors: bool) -> Iterator[tuple[Call, dict[str, Any], bool]]:
    """(call, what the client saw, compare with the golden) for the successes or the failures."""
    seen = {entry["id"]: entry for entry in run.report["calls"]}
    for call in run.calls:
        entry = seen[call.id]
        golden = (call.structured is not None and call.tool not in MODEL_DEPENDENT
                  and call.id not in MODEL_DEPENDENT)
        if golden or call.structured is None or entry["protocol_error"] is not None:
            is_error = call.is_error
        else:  # model-dependent: judge what did arrive
            is_error = bool(entry["isError"])
        if is_error == errors:
            yield call, entry, golden


def test_the_client_is_the_pinned_sdk_and_lists_every_tool(run: Run) -> None:
    report = run.report
    assert report["sdk_version"] == _pinned_version()
    assert report["server"]["name"] == "bundle-mcp"
    contracts = ContractSet()
    assert set(SERVED_TOOLS) <= set(contracts.tool_names())
    assert [t["name"] for t in report["tools"]] == list(SERVED_TOOLS)
    for tool in report["tools"]:
        name = tool["name"]
        assert tool["outputSchema"] == contracts.advertised_output_schema(name), name
    # Every served tool is called at least once with success and once with an envelope.
    for name in SERVED_TOOLS:
        assert any(c.tool == name and not c.is_error for c in run.calls), name
        assert any(c.tool == name and c.is_error for c in run.calls), name


def test_every_success_passes_the_sdk_check_and_equals_its_golden(run: Run) -> None:
    problems: list[str] = []
    for call, entry, golden in _outcomes(run, errors=False):
        if entry["protocol_error"] is not None:  # e.g. -32602 from the SDK's outputSchema check
            problems.append(f"{call.id}: {entry['protocol_error']}")
            continue
        if entry["isError"]:
            problems.append(f"{call.id}: isError with {entry['structuredContent']}")
            continue
        structured = entry["structuredContent"]
        if golden and structured != call.structured:
            problems.append(f"{call.id}: structuredContent differs from the golden")
        texts = _text_blocks(entry)
        # read_concept's text is the raw file, concept_diff's the diff (their SPEC.text).
        own_text = call.tool in ("read_concept", "concept_diff")
        if not own_text and [json.loads(t) for t in texts] != [structured]:
            problems.append(f"{call.id}: the text block is not the JSON of structuredContent")
    assert not problems, f"over {run.transport}:\n" + "\n".join(problems)


def test_every_failure_reaches_the_client_as_an_intact_envelope(run: Run) -> None:
    contracts = ContractSet()
    problems: list[str] = []
    for call, entry, golden in _outcomes(run, errors=True):
        if entry["protocol_error"] is not None:
            problems.append(f"{call.id}: {entry['protocol_error']}")
            continue
        envelope = entry["structuredContent"]
        if not entry["isError"] or not isinstance(envelope, dict):
            problems.append(f"{call.id}: not an error result: {entry}")
            continue
        try:
            contracts.check_envelope(envelope)
        except BundleError:
            problems.append(f"{call.id}: breaks error.schema.json: {envelope}")
            continue
        if golden and envelope != call.structured:
            problems.append(f"{call.id}: the envelope differs from the golden")
        if call.structured is None:  # the unknown argument: invalid_request, naming it
            fields = [d["field"] for d in envelope["diagnostics"]]
            if envelope["code"] != call.code or f"$.{UNKNOWN_ARGUMENT}" not in fields:
                problems.append(f"{call.id}: {envelope['code']} naming {fields}")
        message = envelope.get("message")
        if not isinstance(message, str) or not message or _text_blocks(entry) != [message]:
            problems.append(f"{call.id}: the text block is not the message: {entry['content']}")
    assert not problems, f"over {run.transport}:\n" + "\n".join(problems)


def test_with_the_bare_output_contract_this_sdk_drops_the_error(run: Run) -> None:
    """The control: why the envelope branch is advertised. Pinned SDK behaviour."""
    control = run.report["control"]
    assert control["protocol_error"] is not None, control
    assert control["protocol_error"]["code"] == -32602
    assert "Structured content does not match" in control["protocol_error"]["message"]


# --------------------------------------------------------------------------------------------
# A host slow to compile the output schemas keeps its first call (issue 25)


@pytest.mark.slow
def test_a_host_busy_for_8_s_after_listing_still_gets_its_first_call_answered(
    node: str, tmp_path: Path
) -> None:
    """The SDK compiles every outputSchema after tools/list with its event loop held (seconds on
    a busy laptop); a server that closed the idle connection meanwhile (uvicorn's default 5 s)
    made the next callTool fail with ``fetch failed … other side closed``."""
    workdir = Path(os.path.realpath(tmp_path))
    port = _free_port()
    log = workdir / "stderr.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [*_serve_command(), "serve", str(REPO / "examples" / "coffee-roastery"),
             "--http", f"127.0.0.1:{port}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
        )
    try:
        _wait_for_port(port, process, log)
        plan = {
            "timeout_ms": 30000,
            "transport": {"kind": "http", "url": f"http://127.0.0.1:{port}/mcp", "token": None},
            "block_after_list_ms": 8000,
            "calls": [{"id": "first", "tool": "list_concepts", "arguments": {}}],
        }
        report = _run_client(node, plan, workdir)
    finally:
        stop(process)
    (first,) = report["calls"]
    assert first["protocol_error"] is None, first["protocol_error"]
    assert not first["isError"] and first["structuredContent"]["concepts"]


@pytest.mark.slow
def test_a_restarted_server_lists_its_tools_before_the_sdk_and_the_client_takes_them(
    node: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a restart (the parse cache filled), the host's tools/list is answered before the
    SDK is imported (bundle_mcp.first_call), and so is its first call when it comes at once
    (this client compiles the listed output schemas first: its call comes later, to the SDK).
    The client checks every result against the output schema it was listed with."""
    example = str(REPO / "examples" / "coffee-roastery")
    cache = tmp_path / "cache"
    fill_parse_cache(example, str(cache))
    monkeypatch.setenv("BUNDLE_MCP_CACHE_DIR", str(cache))
    monkeypatch.setenv("BUNDLE_MCP_LOG_LEVEL", "debug")
    command = _serve_command()
    plan = {
        "timeout_ms": 30000,
        "transport": {"kind": "stdio", "command": command[0],
                      "args": [*command[1:], "serve", example]},
        "calls": [
            {"id": "read", "tool": "read_concept",
             "arguments": {"concept_id": "beans/ethiopia-guji"}},
            {"id": "list", "tool": "list_concepts", "arguments": {}},
        ],
    }
    stderr: list[str] = []
    report = _run_client(node, plan, Path(os.path.realpath(tmp_path)), stderr)
    assert "tools/list answered before the SDK was imported" in stderr[0]
    read, listed = report["calls"]
    assert read["protocol_error"] is None and listed["protocol_error"] is None
    assert not read["isError"] and read["structuredContent"]["id"] == "beans/ethiopia-guji"
    assert not listed["isError"] and listed["structuredContent"]["concepts"]


# --------------------------------------------------------------------------------------------
# Readers, as a TypeScript host meets them: each token is its own reader (docs/READERS.md)


def test_two_readers_through_the_typescript_client(node: str, tmp_path: Path) -> None:
    from bundle_mcp.readers import hash_token

    workdir = Path(os.path.realpath(tmp_path))
    example = REPO / "examples" / "coffee-roastery"
    readers = workdir / "readers.toml"
    readers.write_text(
        f'[[readers]]\nname = "roasting"\ntokens = ["{hash_token("roasting-token")}"]\n'
        'read = ["beans", "roast-profiles", "glossary", "/"]\n\n'
        f'[[readers]]\nname = "finance"\ntokens = ["{hash_token("finance-token")}"]\n'
        'read = ["pricing", "glossary", "/"]\n', encoding="utf-8")
    port = _free_port()
    log = workdir / "stderr.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [*_serve_command(), "serve", str(example), "--http", f"127.0.0.1:{port}",
             "--readers", str(readers)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
        )
    try:
        _wait_for_port(port, process, log)
        seen = {}
        for name in ("roasting", "finance"):
            plan = {
                "timeout_ms": 30000,
                "transport": {"kind": "http", "url": f"http://127.0.0.1:{port}/mcp",
                              "token": f"{name}-token"},
                "calls": [
                    {"id": "list", "tool": "list_concepts", "arguments": {}},
                    {"id": "cost", "tool": "read_concept",
                     "arguments": {"concept_id": "pricing/landed-cost"}},
                ],
            }
            report = _run_client(node, plan, workdir)
            seen[name] = {c["id"]: c for c in report["calls"]}
    finally:
        stop(process)

    def folders(name: str) -> set[str]:
        return {c["id"].split("/")[0] for c in seen[name]["list"]["structuredContent"]["concepts"]}

    assert folders("roasting") == {"beans", "roast-profiles", "glossary"}
    assert folders("finance") == {"pricing", "glossary"}
    assert seen["roasting"]["cost"]["isError"]
    assert seen["roasting"]["cost"]["structuredContent"]["code"] == "concept_not_found"
    assert not seen["finance"]["cost"]["isError"]
