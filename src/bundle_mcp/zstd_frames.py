"""Bytes kept as one Zstandard frame behind their length: the parse cache's rows and parts.

A restarted server reads back thousands of small rows (each document's section words and
context words) and a few large parts (the stems' parts of context's scores, the packed words of
a revision, the kept edges and answers). Zstandard decompresses them three to four times faster
than zlib did at the same size (at 9,978 concepts: context's word rows 271 → 77 ms, the parts
261 → 73 ms), which is most of what reading them back costs besides decoding.

The form is the length of the bytes (8 bytes, little-endian), then one frame that does not
repeat it. The length bounds what decompressing may make (a frame cannot claim more, and no
header field of a damaged frame is trusted to size a buffer), and bytes that do not decompress
to exactly that length raise :class:`DamagedFrame`: a cut or damaged row is never taken for
a shorter one. Zstandard's contexts must not be used by two threads at once, and making one
costs about 20 µs, more than decompressing a small row: each thread keeps its own.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Iterable

import zstandard

from .errors import BundleMcpError

__all__ = ["LEVEL", "MAX_BYTES", "DamagedFrame", "packed", "unpacked"]

# Zstandard's own default level: of the kept rows of a 9,978-concept bundle it decompresses
# faster than level 1 (77 against 96 ms for context's word rows) at a slightly smaller size.
LEVEL = 3
# The most bytes a frame may stand for. SQLite keeps no value over 10^9 bytes (its default
# limit), and the largest part at 50,000 concepts is tens of megabytes.
MAX_BYTES = 1 << 30
_LENGTH = struct.Struct("<Q")


class DamagedFrame(BundleMcpError, ValueError):
    """Bytes that are not one whole frame of the length they say (a cut or damaged row)."""


class _Contexts(threading.local):
    """One compression and one decompression context per thread, made on first use."""

    def __init__(self) -> None:
        self.compressor = zstandard.ZstdCompressor(level=LEVEL, write_content_size=False)
        self.decompressor = zstandard.ZstdDecompressor()


# Per-thread contexts, a cache of reusable C objects: no value depends on them.
_CONTEXTS = _Contexts()


def packed(data: bytes | Iterable[bytes]) -> bytes:
    """``data`` (or the pieces that make it, compressed as they come: the whole is never held)
    as its length and one frame."""
    if isinstance(data, bytes):
        return _LENGTH.pack(len(data)) + _CONTEXTS.compressor.compress(data)
    stream = _CONTEXTS.compressor.compressobj()
    size = 0
    out = [b""]  # the length's place
    for piece in data:
        size += len(piece)
        out.append(stream.compress(piece))
    out.append(stream.flush())
    out[0] = _LENGTH.pack(size)
    return b"".join(out)


def unpacked(data: bytes) -> bytes:
    """The bytes :func:`packed` made; :class:`DamagedFrame` for anything else."""
    if len(data) < _LENGTH.size:
        raise DamagedFrame("shorter than its length")
    (size,) = _LENGTH.unpack_from(data)
    if size > MAX_BYTES:
        raise DamagedFrame(f"says {size} bytes, past {MAX_BYTES}")
    frame = data[_LENGTH.size:]
    try:
        # Written without it: a size in the header (a damaged one) would size the buffer.
        if zstandard.frame_content_size(frame) != -1:
            raise DamagedFrame("a frame that says its own size")
        # At most one byte past the length: a frame longer than it says shows as that byte.
        whole: bytes = _CONTEXTS.decompressor.decompress(frame, max_output_size=size + 1)
    except zstandard.ZstdError as exc:
        raise DamagedFrame(str(exc)) from exc
    if len(whole) != size:
        raise DamagedFrame(f"{len(whole)} bytes where it says {size}")
    return whole
