"""Bytes written a piece at a time: as they are, or kept compressed and decompressed on each
pass.

A kept answer (``ToolSpec.cache_results``) is written over and over for as long as its
snapshot serves, and at the file cap it is megabytes of JSON (14.2 MB for get_semantic_graph's
default call at 10,000 concepts, 4.7 MB for list_concepts'). Such JSON compresses to a sixth or
less, and decompressing it is about a millisecond a megabyte, so a kept answer holds its
encoding compressed (:class:`PackedBytes`, Zstandard) and each write decompresses it again, a
piece at a time, never whole: what is held while it is written is one piece, not another copy
of the answer.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Iterator

import zstandard

__all__ = ["PIECE", "PackedBytes", "Pieces", "Whole"]

# The most a piece holds. Below the 1 MiB from which a serving process maps blocks on their own
# (bundle_mcp.heap): a piece reuses the heap's free space, where mebibyte pieces were mapped and
# faulted in at every pass (get_semantic_graph's warm stdio call 42 → 66 ms in make bench).
PIECE = 256 * 1024
# Zstandard's own default: at 10,000 concepts get_semantic_graph's 14.2 MB compress to 2.1 MB
# in 34 ms, once per snapshot in the warm-up, and decompress in 11 ms, on every call. zlib
# (level 6, which this replaced) made the same size in 0.2 s and took 33 ms a pass.
LEVEL = 3
# Compressed input handed to the decompressor at a time.
_FED = 32 * 1024


class Pieces(abc.ABC):
    """Bytes as pieces, made anew on each pass (iterate as often as needed, from any thread),
    and their total length."""

    __slots__ = ()

    @property
    @abc.abstractmethod
    def size(self) -> int:
        """The length of the pieces joined."""

    @abc.abstractmethod
    def __iter__(self) -> Iterator[bytes]:
        """The pieces in order."""

    def joined(self) -> bytes:
        """The pieces as one ``bytes`` (a copy of the whole: for the paths that need one)."""
        return b"".join(self)


class Whole(Pieces):
    """Bytes kept as they are: one piece, the bytes themselves (no copy is made)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    @property
    def size(self) -> int:
        return len(self.data)

    def __iter__(self) -> Iterator[bytes]:
        yield self.data

    def joined(self) -> bytes:
        return self.data


class PackedBytes(Pieces):
    """Bytes kept compressed (one Zstandard frame), decompressed on each pass in pieces of at
    most :data:`PIECE` bytes."""

    __slots__ = ("_compressed", "_size")

    def __init__(self, data: bytes | Iterable[bytes], level: int = LEVEL) -> None:
        """``data``: the bytes, or pieces that make them, compressed as they come (the whole is
        never held)."""
        compressor = zstandard.ZstdCompressor(level=level).compressobj()
        compressed: list[bytes] = []
        size = 0
        for piece in (data,) if isinstance(data, bytes) else data:
            size += len(piece)
            out = compressor.compress(piece)
            if out:  # mostly empty: the compressor holds its input until it has a block
                compressed.append(out)
        compressed.append(compressor.flush())
        self._compressed = b"".join(compressed)
        self._size = size

    @classmethod
    def of_compressed(cls, compressed: bytes, size: int) -> PackedBytes:
        """What another :class:`PackedBytes` held (:attr:`compressed`, read back from a store),
        ``size`` bytes decompressed: taken as given, so the caller checks them first (a
        truncated frame ends the pieces early, a damaged one raises ``zstandard.ZstdError``)."""
        packed = cls.__new__(cls)
        packed._compressed = compressed
        packed._size = size
        return packed

    @property
    def size(self) -> int:
        return self._size

    @property
    def compressed(self) -> bytes:
        """The compressed bytes held (one Zstandard frame)."""
        return self._compressed

    @property
    def compressed_size(self) -> int:
        """What is held: the compressed bytes' length."""
        return len(self._compressed)

    def __iter__(self) -> Iterator[bytes]:
        # A decompressor per pass: passes may run at once in several threads.
        pieces: Iterator[bytes] = zstandard.ZstdDecompressor().read_to_iter(
            self._compressed, read_size=_FED, write_size=PIECE)
        return pieces

    def joined(self) -> bytes:
        whole: bytes = zstandard.ZstdDecompressor().decompress(
            self._compressed, max_output_size=self._size)
        return whole
