"""A document's text, held compressed and decompressed each time it is read.

A served bundle's documents held their whole decoded text for as long as the process ran:
about the bundle's size again (60 MiB at 10,000 concepts), the largest single part of a
server's data. Most calls read one document's text, or the texts of the few an index names;
a text is read whole far less often than it is held. So a document keeps its text compressed
with Zstandard (about a third to a half of its size) and :meth:`PackedText.text` decompresses
it on each read, 5 to 10 µs for a 6 KB page: a pass over every text of a 10,000-concept bundle
costs about 0.1 s, which only the warm-up's builders and a search no index can narrow pay.

A short text is kept as it is: compressing it would save less than the bytes it costs.
Zstandard's contexts are not to be shared between threads at once, so each thread gets its own
(calls run in worker threads, the warm-up in its own).
"""

from __future__ import annotations

import threading

import zstandard

__all__ = ["PackedText"]

# Below this many characters a text is kept as it is (a README's one heading, a stub).
MIN_PACKED = 256
# Zstandard's own default level: 10,000 generated pages (60 MiB) compress to 26 MiB in about
# 0.3 s; level 1 saves 0.05 s of that for 0.3 MiB more, level 9 costs 0.8 s for 0.7 MiB less.
LEVEL = 3
# A compression context keeps the workspace of the largest input it has compressed (160 KB
# after a 6 KB page, 540 KB after 17 KB, 2.7 MB after 1.2 MB), and each thread keeps its own:
# a text longer than this is compressed with a context of its own, let go after (making one
# costs about 12 µs).
KEPT_CONTEXT_MAX = 16 * 1024


class _Contexts(threading.local):
    """One compression and one decompression context per thread, made on first use."""

    def __init__(self) -> None:
        self.compressor = zstandard.ZstdCompressor(level=LEVEL)
        self.decompressor = zstandard.ZstdDecompressor()


# Per-thread contexts, a cache of reusable C objects: no answer depends on them.
_CONTEXTS = _Contexts()


class PackedText:
    """A text kept compressed (``_data`` bytes) or, when short or incompressible, as it is
    (``_data`` a str). Immutable; equal when the texts are equal."""

    __slots__ = ("_ascii", "_data", "_length")

    def __init__(self, text: str) -> None:
        self._length = len(text)
        self._ascii = text.isascii()
        data: str | bytes = text
        if len(text) >= MIN_PACKED:
            encoded = text.encode("utf-8", "surrogatepass")
            compressor = (_CONTEXTS.compressor if len(encoded) <= KEPT_CONTEXT_MAX
                          else zstandard.ZstdCompressor(level=LEVEL))
            packed = compressor.compress(encoded)
            if len(packed) < len(encoded):
                # A copy of exactly its length: the compressor's own bytes object keeps the
                # block it was written into, as large as the worst case (the whole input).
                data = memoryview(packed).tobytes()
        self._data = data

    def text(self) -> str:
        """The text, decompressed now (the caller holds it only as long as it needs it)."""
        data = self._data
        if isinstance(data, str):
            return data
        return _CONTEXTS.decompressor.decompress(data).decode("utf-8", "surrogatepass")

    def __len__(self) -> int:
        """The text's length in characters, without decompressing it."""
        return self._length

    @property
    def ascii(self) -> bool:
        """``text().isascii()``, without decompressing it."""
        return self._ascii

    @property
    def packed_size(self) -> int:
        """The bytes held for the text (its characters when it is kept as it is)."""
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PackedText):
            return NotImplemented
        if self._length != other._length:
            return False
        mine, theirs = self._data, other._data
        if type(mine) is type(theirs) and mine == theirs:
            return True
        return self.text() == other.text()

    def __hash__(self) -> int:
        return hash(self.text())

    def __repr__(self) -> str:
        return f"PackedText({self._length} characters in {self.packed_size})"
