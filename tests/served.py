"""Tests' helpers for a ``bundle-mcp serve`` child: where it listens, what it serves, stopping it.

``serve`` prints ``… streamable HTTP on http://HOST:PORT/mcp`` on stderr once it is listening, so
tests that start it on port 0 read the address from the log instead of guessing a free port.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.semantic import SemanticIndex


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
