"""Optional embedding search: a per-server index of concept vectors, filled in the background.

Everything that needs the ``semantic`` extra (sentence-transformers, torch, the packaged
all-MiniLM-L6-v2 model) is imported lazily on the worker thread, so this package imports on a
plain install and reports ``unavailable`` there.
"""

from __future__ import annotations

from .cache import VectorCache, default_cache_dir
from .embedder import MINILM, Embedder, EmbedderSource
from .index import NOT_READY, PARTIAL, READY, UNAVAILABLE, Matches, SemanticIndex

__all__ = [
    "MINILM",
    "NOT_READY",
    "PARTIAL",
    "READY",
    "UNAVAILABLE",
    "Embedder",
    "EmbedderSource",
    "Matches",
    "SemanticIndex",
    "VectorCache",
    "default_cache_dir",
]
