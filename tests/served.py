"""Tests' helpers for a ``bundle-mcp serve`` child: starting it, where it listens, what it serves,
stopping it.

``serve`` prints ``… streamable HTTP on http://HOST:PORT/mcp`` on stderr once it is listening, so
tests that start it on port 0 read the address from the log instead of guessing a free port.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.semantic import SemanticIndex

# Settings of the developer's shell that would change what a served child does.
_SHELL_SETTINGS = ("BUNDLE_MCP_TOKEN", "BUNDLE_MCP_ALLOWED_HOSTS")


def start_serve(log: Path, *args: str, **env: str) -> subprocess.Popen[bytes]:
    """``bundle-mcp serve ARGS`` as a child of this interpreter, its stderr into ``log``, its
    environment this one's without a token or allowed hosts, plus ``env``."""
    environment = {k: v for k, v in os.environ.items() if k not in _SHELL_SETTINGS}
    environment.update(env)
    with log.open("wb") as stderr:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "bundle_mcp.cli", "serve", *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
            env=environment,
        )


def tools_served_here() -> tuple[str, ...]:
    """The tools ``bundle-mcp serve`` (all toolsets) offers on this machine, sorted: every
    tool, less search_semantic when the semantic extra is not installed (issue 25 §5). Asked
    of a dispatcher with the index the command gives it, so it holds whichever way the machine
    is."""
    index = SemanticIndex.default()
    try:
        dispatcher = Dispatcher(ServeConfig(allow_any_bundle=True), semantic=index)
        return tuple(sorted(tool.name for tool in dispatcher.tools()))
    finally:
        index.close()


def printed_url(process: subprocess.Popen[bytes], log: Path, seconds: float = 60) -> str:
    """The ``/mcp`` URL the server printed into ``log``; fails if it exits or stays silent."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            if "streamable HTTP on " in line:
                return line.rsplit(" ", 1)[1]
        assert process.poll() is None, log.read_text()
        time.sleep(0.05)
    raise AssertionError("the server never printed its address: " + log.read_text())


def stop(process: subprocess.Popen[bytes], seconds: float = 10) -> None:
    """End a served child: SIGTERM, then SIGKILL if it has not exited within ``seconds``."""
    process.terminate()
    try:
        process.wait(seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
