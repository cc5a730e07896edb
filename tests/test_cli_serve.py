"""What a host user meets when starting ``bundle-mcp serve``: a clear line for a taken port, the
client configuration only once the port is bound, a warning for a public address without a
token, OAuth discovery answered 404, and ``call`` options mixed with KEY=VALUE pairs."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

try:
    from tests.served import printed_url, start_serve
except ImportError:  # pytest run without the repository root on sys.path
    from served import printed_url, start_serve  # type: ignore[no-redef,import-not-found]

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = str(REPO / "examples" / "coffee-roastery")
SERVE = [sys.executable, "-m", "bundle_mcp.cli", "serve", EXAMPLE]
WAIT_SECONDS = 60


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "BUNDLE_MCP_TOKEN"}
    env.update(extra)
    return env


def _start(args: list[str], log: Path, **env: str) -> subprocess.Popen[bytes]:
    return start_serve(log, EXAMPLE, *args, **env)


def _wait_for_url(process: subprocess.Popen[bytes], log: Path) -> str:
    return printed_url(process, log, WAIT_SECONDS)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes], Path]]:
    log = tmp_path / "serve.log"
    process = _start(["--http", "127.0.0.1:0", "--token", "s3cret"], log)
    try:
        yield _wait_for_url(process, log), process, log
    finally:
        process.terminate()
        process.wait(timeout=WAIT_SECONDS)


def test_the_configuration_is_printed_once_the_port_is_bound(
    served: tuple[str, subprocess.Popen[bytes], Path],
) -> None:
    url, _process, log = served
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    assert port != 0
    # Printed means listening: a connection succeeds at once, no retry loop needed.
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    # The address line comes first; the configuration follows it in the same burst of writes.
    deadline = time.monotonic() + WAIT_SECONDS
    while '"url": "' + url + '"' not in (text := log.read_text()):
        assert time.monotonic() < deadline, text
        time.sleep(0.05)
    assert "s3cret" not in text  # the secret itself is never printed


def test_oauth_discovery_is_404_not_401(served: tuple[str, subprocess.Popen[bytes], Path]) -> None:
    url, _process, _log = served
    base = url.removesuffix("/mcp")
    for path in (
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
    ):
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(base + path, timeout=10)
        assert caught.value.code == 404, path
    with pytest.raises(urllib.error.HTTPError) as caught:  # the endpoint itself still wants it
        urllib.request.urlopen(urllib.request.Request(url, data=b"{}", method="POST"), timeout=10)
    assert caught.value.code == 401


def test_a_taken_port_is_one_clear_line_and_exit_2(
    served: tuple[str, subprocess.Popen[bytes], Path], tmp_path: Path
) -> None:
    url, _process, _log = served
    host_port = url.removeprefix("http://").removesuffix("/mcp")
    done = subprocess.run(
        [*SERVE, "--http", host_port], capture_output=True, text=True, timeout=WAIT_SECONDS,
        env=_env(),
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines == [
        f"bundle-mcp: --http {host_port}: cannot listen there (Address already in use)"
    ]


def test_a_public_address_without_a_token_warns(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    process = _start(["--http", "0.0.0.0:0"], log)
    try:
        _wait_for_url(process, log)
        text = log.read_text()
        assert "WARNING: serving 0.0.0.0:0 without a token" in text
    finally:
        process.terminate()
        process.wait(timeout=WAIT_SECONDS)
    quiet = tmp_path / "quiet.log"
    process = _start(["--http", "127.0.0.1:0"], quiet)
    try:
        _wait_for_url(process, quiet)
        assert "without a token" not in quiet.read_text()
    finally:
        process.terminate()
        process.wait(timeout=WAIT_SECONDS)


def test_stdio_starts_when_the_token_variable_is_set() -> None:
    request = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "0"}},
    }
    done = subprocess.run(
        SERVE, input=json.dumps(request) + "\n", capture_output=True, text=True,
        timeout=WAIT_SECONDS, env=_env(BUNDLE_MCP_TOKEN="from-the-environment"),
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["id"] == 1


@pytest.mark.parametrize(
    "argv",
    [
        ["call", "search_concepts", "--bundle", EXAMPLE, "query=guji", "limit=1"],
        ["call", "--bundle", EXAMPLE, "search_concepts", "query=guji", "limit=1"],
        ["call", "search_concepts", "query=guji", "--bundle", EXAMPLE, "limit=1"],
    ],
)
def test_call_mixes_options_and_pairs_in_any_order(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bundle_mcp.cli", *argv], capture_output=True, text=True,
        timeout=WAIT_SECONDS,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["query"] == "guji" and len(result["hits"]) == 1 and "total" in result
