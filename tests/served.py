"""Waiting for a ``bundle-mcp serve --http`` child to say where it listens (tests' helper).

``serve`` prints ``… streamable HTTP on http://HOST:PORT/mcp`` on stderr once it is listening, so
tests that start it on port 0 read the address from the log instead of guessing a free port.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path


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
