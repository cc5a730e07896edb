"""The on-disk vector cache: one file per (model, embedded text), keyed by content hash.

An entry is ``MAGIC | key (32 bytes) | dimension (uint32 LE) | float32 LE values | sha256 of
everything before it``. Reading checks all of it, so a truncated, corrupt or foreign file (another
model's, another text's, another program's) is ignored and the vector is recomputed and written
again. Writes go to a temporary file in the same folder and are published with ``os.replace``:
a concurrent reader sees the old entry or the new one, never half of one.
"""

from __future__ import annotations

import hashlib
import logging
import os
import struct
import sys
import tempfile
from array import array
from pathlib import Path

from .embedder import EmbedderSource
from .vectors import Vector, unit

log = logging.getLogger(__name__)

MAGIC = b"BMCPVEC1"
_HEADER = struct.Struct("<8s32sI")
_DIGEST = 32
MAX_DIMENSION = 4096


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/bundle-mcp/embeddings`` (an absolute XDG path only), else ``~/.cache``."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "bundle-mcp" / "embeddings"


def text_key(model_key: str, text: str) -> bytes:
    """The content hash an entry is stored under: model and exact embedded text."""
    return hashlib.sha256(model_key.encode("utf-8") + b"\0" + text.encode("utf-8")).digest()


class VectorCache:
    """Vectors of one model under ``root/<model_key>/``; every failure degrades to a miss."""

    def __init__(self, root: Path, model_key: str, dimension: int) -> None:
        self._folder = root / model_key
        self._dimension = dimension

    @classmethod
    def for_source(cls, root: Path, source: EmbedderSource) -> VectorCache:
        return cls(root, source.model_key, source.dimension)

    def _path(self, key: bytes) -> Path:
        name = key.hex()
        return self._folder / name[:2] / f"{name}.vec"

    def get(self, key: bytes) -> Vector | None:
        try:
            data = self._path(key).read_bytes()
        except OSError:
            return None
        return self._decode(key, data)

    def put(self, key: bytes, vector: Vector) -> None:
        path = self._path(key)
        payload = _HEADER.pack(MAGIC, key, len(vector)) + _le_bytes(vector)
        data = payload + hashlib.sha256(payload).digest()
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                os.replace(tmp, path)
            except OSError:
                os.unlink(tmp)
                raise
        except OSError as exc:
            # A cache that cannot be written (read-only home, full disk) only costs speed.
            log.debug("embedding cache write failed: %s", exc.strerror)

    def _decode(self, key: bytes, data: bytes) -> Vector | None:
        if len(data) < _HEADER.size + _DIGEST:
            return None
        payload, digest = data[:-_DIGEST], data[-_DIGEST:]
        if hashlib.sha256(payload).digest() != digest:
            return None
        magic, stored_key, dimension = _HEADER.unpack_from(payload)
        if magic != MAGIC or stored_key != key or dimension != self._dimension:
            return None  # foreign: another format, text or model
        if len(payload) != _HEADER.size + 4 * dimension or dimension > MAX_DIMENSION:
            return None
        values = array("f")
        values.frombytes(payload[_HEADER.size :])
        if sys.byteorder == "big":
            values.byteswap()
        return unit(values)


def _le_bytes(vector: Vector) -> bytes:
    if sys.byteorder == "big":
        swapped = array("f", vector)
        swapped.byteswap()
        return swapped.tobytes()
    return vector.tobytes()
