"""The stdio wire's pipe buffer: a served process asks for 1 MiB on its stdout pipe, so a big
answer is written in fewer turns of waiting for the client to read (handshake.widen_pipe)."""

from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from bundle_mcp.handshake import PIPE_BYTES, widen_pipe

GET_PIPE_SIZE = getattr(fcntl, "F_GETPIPE_SZ", None)
MAX_PIPE = Path("/proc/sys/fs/pipe-max-size")

needs_pipe_sizes = pytest.mark.skipif(
    GET_PIPE_SIZE is None or not MAX_PIPE.exists()
    or int(MAX_PIPE.read_text()) < PIPE_BYTES,
    reason="pipe buffer sizes are a Linux setting, and this machine's ceiling is below 1 MiB",
)


@needs_pipe_sizes
def test_a_pipe_is_widened_to_a_mebibyte() -> None:
    read_end, write_end = os.pipe()
    try:
        assert widen_pipe(write_end) == PIPE_BYTES
        assert GET_PIPE_SIZE is not None
        assert fcntl.fcntl(read_end, GET_PIPE_SIZE) == PIPE_BYTES  # one buffer, both ends
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_file_or_a_socket_is_left_as_it_is(tmp_path: Path) -> None:
    with open(tmp_path / "out", "wb") as file:
        assert widen_pipe(file.fileno()) is None
    left, right = socket.socketpair()
    with left, right:
        assert widen_pipe(left.fileno()) is None


def test_a_closed_descriptor_is_no_error() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    os.close(write_end)
    assert widen_pipe(write_end) is None


@needs_pipe_sizes
def test_the_claimed_wire_out_is_the_widened_pipe() -> None:
    """In a process whose stdout is a pipe, the wire ``claimed_stdio`` hands the transport
    writes into that pipe with a 1 MiB buffer."""
    program = (
        "import fcntl\n"
        "from bundle_mcp.handshake import claimed_stdio\n"
        "with claimed_stdio() as (wire_in, wire_out):\n"
        "    size = fcntl.fcntl(wire_out.fileno(), fcntl.F_GETPIPE_SZ)\n"
        "    wire_out.write(str(size).encode())\n"
        "    wire_out.flush()\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, timeout=60,
                          check=True)
    assert int(done.stdout) == PIPE_BYTES
