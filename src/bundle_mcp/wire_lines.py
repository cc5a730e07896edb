"""The lines a stdio client sends, read from its descriptor with a buffer this module owns.

``serve`` reads the client's first lines before the MCP SDK is imported
(:mod:`bundle_mcp.handshake`, :mod:`bundle_mcp.first_calls`) and must know whether another
line has come without blocking for it: a buffered file object cannot say whether its own
buffer holds one. So the bytes are read here, with ``os.read`` after ``select``, and the same
object goes on feeding the transport (:func:`bundle_mcp.stdio.stdio_transport` calls
:meth:`WireLines.readline` from its reader thread) with whatever the early reads left over.
Standard library only: it is imported before the answer to ``initialize``.
"""

from __future__ import annotations

import os
import select
import threading
import time
from typing import Protocol

__all__ = ["CHUNK", "LineSource", "WireLines"]

CHUNK = 64 * 1024  # bytes asked of the descriptor per read


class LineSource(Protocol):
    """What the stdio transport reads lines from: :class:`WireLines`, or a binary file."""

    def readline(self) -> bytes:
        """The next line with its newline, or what is left at the end of input, then b""."""


class WireLines:
    """Newline-ended lines from a readable descriptor (never closed here)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = bytearray()
        self._scanned = 0  # the buffer's first bytes, known to hold no newline
        self._ended = False
        # One reader at a time: the transport's reader thread, or the main thread before it.
        self._lock = threading.Lock()

    def fileno(self) -> int:
        return self._fd

    def readline(self) -> bytes:
        """The next line with its newline; at the end of input the rest without one, then
        ``b""``. Blocks until a line is whole or the input ends."""
        with self._lock:
            while True:
                line = self._take_line()
                if line is not None:
                    return line
                if self._ended or not self._fill():
                    rest = bytes(self._buffer)
                    self._buffer.clear()
                    self._scanned = 0
                    return rest

    def has_line(self, timeout: float) -> bool:
        """Whether :meth:`readline` would return at once (a whole line, or the input's end)
        within ``timeout`` seconds; reads what has come meanwhile, never more than is there."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not self._ended and self._buffer.find(b"\n", self._scanned) < 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not select.select([self._fd], [], [], remaining)[0]:
                    return False
                self._fill()
            return True

    def push_back(self, line: bytes) -> None:
        """Put ``line`` (read by :meth:`readline`) back before everything still unread."""
        with self._lock:
            self._buffer[:0] = line
            self._scanned = 0

    def _take_line(self) -> bytes | None:
        end = self._buffer.find(b"\n", self._scanned)
        if end < 0:
            self._scanned = len(self._buffer)
            return None
        line = bytes(self._buffer[:end + 1])
        del self._buffer[:end + 1]
        self._scanned = 0
        return line

    def _fill(self) -> bool:
        """One read into the buffer; False at the end of input."""
        chunk = os.read(self._fd, CHUNK)
        if not chunk:
            self._ended = True
            return False
        self._buffer += chunk
        return True
