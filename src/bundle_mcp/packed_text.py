"""How a document holds its text: compressed in memory, or left in its file and read back.

A served bundle's documents held their whole decoded text for as long as the process ran:
about the bundle's size again (60 MiB at 10,000 concepts), the largest single part of a
server's data. Most calls read one document's text, or the texts of the few an index names;
a text is read whole far less often than it is held. So a document holds a :class:`HeldText`:

- :class:`FileText`, for a document the loader built from a bundle folder: nothing of the text
  but its length, and whether it is ASCII. Each read opens the file again (through the pinned
  root, no symlink followed), checks its bytes against the SHA-256 the snapshot counted and
  decodes them: about 30 µs for a 6 KB page, from the page cache the operating system keeps
  for the bundle anyway. Bytes that moved raise ``FileMoved``, and a call is answered again
  from a new capture, as for a document built after its file changed.
- :class:`PackedText`, for a text with no file to read back (a write's planned bytes, a test's
  documents, a broken file's replacement text): compressed with Zstandard (about a third to a
  half of its size) and decompressed on each read, 5 to 10 µs for a 6 KB page.

A short text is kept as it is: compressing it would save less than the bytes it costs.
Zstandard's contexts are not to be shared between threads at once, so each thread gets its own
(calls run in worker threads, the warm-up in its own).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Generic, TypeVar

import zstandard

__all__ = ["FileText", "HeldText", "PackedText"]

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


_Source = TypeVar("_Source")


class _Recent(threading.local):
    """The text a thread last read back from a file, and what it was read for: a builder reads
    a document's lines and then its body, and the second read is this one again. The text is
    the snapshot's (its bytes were checked when read), so no answer depends on this."""

    def __init__(self) -> None:
        self.held: object = None  # the FileText, compared by identity only
        self.text = ""


# Per-thread, like the Zstandard contexts below: a cache of one text that no answer depends on.
_RECENT = _Recent()


class HeldText(ABC):
    """A document's text as it holds it; immutable, equal to another when the texts are."""

    __slots__ = ()

    @abstractmethod
    def text(self) -> str:
        """The text, made now (the caller holds it only as long as it needs it)."""

    @abstractmethod
    def __len__(self) -> int:
        """The text's length in characters, without making it."""

    @property
    @abstractmethod
    def ascii(self) -> bool:
        """``text().isascii()``, without making it."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HeldText):
            return NotImplemented
        return len(self) == len(other) and self.text() == other.text()

    def __hash__(self) -> int:
        # The length only: equal texts have equal lengths, and hashing a document (its
        # dataclass hash covers this field) must not read its file.
        return hash(len(self))


class FileText(HeldText, Generic[_Source]):
    """A text left in its file: ``read(source)`` gives the file's bytes, checked against what
    the snapshot counted (raising when they moved), and they are decoded as UTF-8 on each read.
    Only the length and the ASCII flag are kept, taken from the text the document was built
    from."""

    __slots__ = ("_ascii", "_length", "_read", "_source")

    def __init__(self, text: str, source: _Source, read: Callable[[_Source], bytes]) -> None:
        self._length = len(text)
        self._ascii = text.isascii()
        self._source = source
        self._read = read

    @classmethod
    def known(cls, length: int, ascii: bool, source: _Source,
              read: Callable[[_Source], bytes]) -> FileText[_Source]:
        """The text of ``source`` whose length and ASCII flag are known without decoding it
        (an earlier process counted them for these checked bytes)."""
        held = cls.__new__(cls)
        held._length, held._ascii, held._source, held._read = length, ascii, source, read
        return held

    def text(self) -> str:
        recent = _RECENT
        if recent.held is self:
            return recent.text
        text = self._read(self._source).decode("utf-8")
        recent.held, recent.text = self, text
        return text

    def __len__(self) -> int:
        return self._length

    @property
    def ascii(self) -> bool:
        return self._ascii

    def __eq__(self, other: object) -> bool:
        if (isinstance(other, FileText) and other._source == self._source
                and other._read is self._read):
            return True  # the same checked bytes
        return super().__eq__(other)

    __hash__ = HeldText.__hash__

    def __repr__(self) -> str:
        return f"FileText({self._length} characters in {self._source!r})"


class PackedText(HeldText):
    """A text kept compressed (``_data`` bytes) or, when short or incompressible, as it is
    (``_data`` a str)."""

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
        if isinstance(other, PackedText):
            if self._length != other._length:
                return False
            mine, theirs = self._data, other._data
            if type(mine) is type(theirs) and mine == theirs:
                return True
        return super().__eq__(other)

    __hash__ = HeldText.__hash__

    def __repr__(self) -> str:
        return f"PackedText({self._length} characters in {self.packed_size})"
