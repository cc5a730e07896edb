"""Bytes written a piece at a time: as they are, or kept deflated and inflated on each pass.

A kept answer (``ToolSpec.cache_results``) is written over and over for as long as its
snapshot serves, and at the file cap it is megabytes of JSON (14.2 MB for get_semantic_graph's
default call at 10,000 concepts, 4.7 MB for list_concepts'). Such JSON deflates to a sixth or
less, and inflating it is a few milliseconds a megabyte, so a kept answer holds its encoding
deflated (:class:`PackedBytes`) and each write inflates it again, a piece at a time, never
whole: what is held while it is written is one piece, not another copy of the answer.
"""

from __future__ import annotations

import abc
import zlib
from collections.abc import Iterable, Iterator

__all__ = ["PIECE", "PackedBytes", "Pieces", "Whole"]

# The most a piece holds. Below the 1 MiB from which a serving process maps blocks on their own
# (bundle_mcp.heap): a piece reuses the heap's free space, where mebibyte pieces were mapped and
# faulted in at every pass (get_semantic_graph's warm stdio call 42 → 66 ms in make bench).
PIECE = 256 * 1024
# zlib's own default: at 10,000 concepts get_semantic_graph's 14.2 MB deflate to 2.1 MB in
# 0.16 s (level 1: 2.8 MB in 0.07 s), once per snapshot in the warm-up; inflating takes about
# 22 ms a pass (level 1: 26 ms), on every call.
LEVEL = 6
# Deflated input handed to the inflater at a time: its unconsumed tail (copied at each call)
# stays this small.
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
    """Bytes kept deflated (zlib), inflated on each pass in pieces of at most :data:`PIECE`
    bytes."""

    __slots__ = ("_deflated", "_size")

    def __init__(self, data: bytes | Iterable[bytes], level: int = LEVEL) -> None:
        """``data``: the bytes, or pieces that make them, deflated as they come (the whole is
        never held)."""
        deflater = zlib.compressobj(level)
        deflated: list[bytes] = []
        size = 0
        for piece in (data,) if isinstance(data, bytes) else data:
            size += len(piece)
            out = deflater.compress(piece)
            if out:  # mostly empty: the deflater holds its input until it has a block
                deflated.append(out)
        deflated.append(deflater.flush())
        self._deflated = b"".join(deflated)
        self._size = size

    @classmethod
    def of_deflated(cls, deflated: bytes, size: int) -> PackedBytes:
        """What another :class:`PackedBytes` held (:attr:`deflated`, read back from a store),
        ``size`` bytes inflated: taken as given, so the caller checks them first."""
        packed = cls.__new__(cls)
        packed._deflated = deflated
        packed._size = size
        return packed

    @property
    def size(self) -> int:
        return self._size

    @property
    def deflated(self) -> bytes:
        """The deflated bytes held (one zlib stream)."""
        return self._deflated

    @property
    def deflated_size(self) -> int:
        """What is held: the deflated bytes' length."""
        return len(self._deflated)

    def __iter__(self) -> Iterator[bytes]:
        inflater = zlib.decompressobj()
        deflated = memoryview(self._deflated)
        for start in range(0, len(deflated), _FED):
            fed: bytes | memoryview = deflated[start:start + _FED]
            while fed:
                piece = inflater.decompress(fed, PIECE)
                if piece:
                    yield piece
                fed = inflater.unconsumed_tail
        rest = inflater.flush()
        if rest:
            yield rest

    def joined(self) -> bytes:
        return zlib.decompress(self._deflated)
