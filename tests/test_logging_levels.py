"""BUNDLE_MCP_LOG_LEVEL sets our own loggers' level; the libraries' stay at warning."""

from __future__ import annotations

import subprocess
import sys

import pytest

# Run in a child: logging's configuration is the process's, and pytest's own handlers would
# see (and keep) whatever this configures.
_PROBE = """
import logging, sys
from bundle_mcp.cli import _log_level, configure_logging
configure_logging(_log_level())
logging.getLogger("markdown_it.rules_block.code").debug("library debug")
logging.getLogger("mcp.server.lowlevel.server").info("library info")
logging.getLogger("mcp.server.lowlevel.server").warning("library warning")
logging.getLogger("bundle_mcp.readiness").debug("our debug")
logging.getLogger("bundle_mcp.readiness").info("our info")
logging.getLogger("bundle_mcp.readiness").warning("our warning")
"""


def _lines(level: str | None) -> list[str]:
    env = {"PYTHONPATH": ":".join(sys.path)}
    if level is not None:
        env["BUNDLE_MCP_LOG_LEVEL"] = level
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                          env=env, timeout=60, check=True)
    return done.stderr.splitlines()


@pytest.mark.parametrize(("level", "ours"), [
    ("debug", ["our debug", "our info", "our warning"]),
    ("info", ["our info", "our warning"]),
    (None, ["our warning"]),
])
def test_the_level_is_ours_and_a_library_speaks_from_warning(level: str | None,
                                                              ours: list[str]) -> None:
    lines = _lines(level)
    assert [line.rsplit(": ", 1)[1] for line in lines if "our " in line] == ours
    assert [line for line in lines if "library" in line] == [
        "bundle-mcp: WARNING: library warning"]


def test_error_silences_our_warnings_and_the_libraries_too() -> None:
    assert _lines("error") == []
