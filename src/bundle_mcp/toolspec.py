"""What a tool module declares and what it receives: the one seam between the tools and dispatch.

Each module of :mod:`bundle_mcp.tools` ends with ``SPEC = ToolSpec(...)``: its name, how people and
hosts see it, what it needs, the function it runs and the limits on what it returns. The
dispatcher reads nothing else from the module. A call reaches ``run`` as a :class:`CallContext`
(the snapshot to answer from, the call's cancellation token, the bundle root a write publishes to,
the embedding index) and the arguments without ``bundle_path``, already checked against the input
contract.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .cancel import CancelToken
from .limits import DEFAULT_CAPS, Caps
from .model import Snapshot
from .okf.scopes import FULL_ACCESS, Access

if TYPE_CHECKING:
    from .remote.location import BundleSource
    from .semantic import SemanticIndex

__all__ = [
    "DEFAULT_OUTPUT_BUDGET",
    "SEMANTIC_TOOLSET",
    "TOOLSETS",
    "CallContext",
    "PartStore",
    "Runner",
    "TextRenderer",
    "ToolSpec",
]

MIB = 1024 * 1024
DEFAULT_OUTPUT_BUDGET = 64 * MIB

# What `serve --tools` selects from, in the order the help lists them.
TOOLSETS: dict[str, str] = {
    "read": "context, search, read and list concepts, their neighbours, the bundle summary",
    "walk": "bounded widening: expand_neighbors, fetch_slice, find_path, query_subgraph",
    "write": "write_concept and the preview_*/apply_* pairs",
    "compute": "Attested Computations (OKF v0.2 §10): get_computation, check_receipt",
    "semantic": "search_semantic (only with the semantic extra installed)",
    "views": "whole-bundle views for people and programs: validate_bundle, get_semantic_graph "
    "(JSON-LD), visualize_graph (Mermaid)",
    "history": "a concept's git history: concept_history, concept_diff (a bundle inside a git "
    "work tree)",
}

# The toolset whose tools need the semantic extra: a server without it does not offer them.
SEMANTIC_TOOLSET = "semantic"


class PartStore(Protocol):
    """Where what a tool computed for one query term over a whole snapshot (a term's postings),
    or a kept answer (``bundle_mcp.stored_answers``), outlives the process: the parse cache's
    ``parts`` rows, keyed by the snapshot's revision. Speed only: a part is a pure function of
    the snapshot and its key, and one that is not there is computed."""

    def read(self, revision: str, key: str) -> bytes | None:
        """The kept bytes, or ``None``."""
        ...

    def keep(self, revision: str, key: str, value: bytes) -> None:
        """Keep the bytes for the next process (written in the background)."""
        ...


@dataclass(frozen=True)
class CallContext:
    """Everything a tool may use besides its arguments."""

    snapshot: Snapshot  # the bundle as captured for this call (tools never read the disk)
    token: CancelToken  # checked between units of work; notices reach the caller through it
    bundle_path: str  # the pinned, served bundle root: where a write re-plans and publishes
    semantic: SemanticIndex | None = None  # the embedding index; None when semantic search is off
    # What the calling reader may read and write: ``snapshot`` is already its view; a write
    # passes this on so it publishes only inside the writable folders and compares the
    # reader's own revision.
    access: Access = FULL_ACCESS
    # The loader's caps the server was given: a write publishes only within them.
    caps: Caps = DEFAULT_CAPS
    # Where a remote bundle came from (a git URL and the commit served, an archive and its
    # digest); None for a folder served in place.
    source: BundleSource | None = None
    # Where a tool's parts for one query term are kept across restarts (None: the cache is off).
    parts: PartStore | None = None


Runner = Callable[[CallContext, dict[str, Any]], dict[str, Any]]
TextRenderer = Callable[[dict[str, Any], Snapshot], str]


@dataclass(frozen=True)
class ToolSpec:
    """One tool, as its module declares it."""

    name: str  # as in contracts/<name>.input.schema.json
    title: str  # for people: "Search concepts"
    toolset: str  # one of TOOLSETS
    description: str  # what the model reads (docs/TOOLS.md keeps these short)
    read_only: bool  # writes nothing: `serve --read-only` keeps only these; checked for
    #                  cancellation after they ran (a committed write is reported as done)
    run: Runner
    # Refused while a file cannot be parsed, unless --skip-unparseable: the strict default. A
    # tool that answers usefully about a broken bundle (validate_bundle) says False.
    needs_parseable: bool = True
    text: TextRenderer | None = None  # the text block, when it is not the JSON of the result
    output_budget: int = DEFAULT_OUTPUT_BUDGET  # bytes of the structured result's JSON
    # Keep the finished answer per snapshot and arguments, so a repeat costs no run, encode or
    # output check. Only for a read-only tool whose answer is a pure function of the snapshot
    # and the arguments (no clock, no server state such as the embedding index), and worth it:
    # answers of megabytes.
    cache_results: bool = False

    def __post_init__(self) -> None:
        if self.toolset not in TOOLSETS:
            raise ValueError(f"{self.name}: unknown toolset {self.toolset!r}")
        if self.cache_results and not self.read_only:
            raise ValueError(f"{self.name}: only a read-only tool's answers can be kept")
        if self.output_budget <= 0:
            raise ValueError(f"{self.name}: the output budget must be positive")
