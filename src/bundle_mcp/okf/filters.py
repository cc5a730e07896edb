"""Which concepts a search filter admits: the rule behind the filter arguments of the search
tools (``types``, ``tags``, ``project``, ``status``, ``min_trust``, ``exclude_stale``).

Each kind of filter reads a concept through the one rule that defines what it reads: the
folding every search uses (:func:`~bundle_mcp.okf.folding.fold`), folders
(:func:`~bundle_mcp.okf.graph.in_project`), the effective status
(:func:`~bundle_mcp.okf.properties.status_state`), the trust tier
(:func:`~bundle_mcp.okf.properties.trust`) and staleness
(:func:`~bundle_mcp.okf.properties.stale_after` with :meth:`Reference.stale`). Nothing here
re-decides any of those. Different kinds combine with AND; an empty set constrains nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..model import Document
from .folding import fold
from .graph import in_project
from .properties import STATUSES, TRUST_TIERS, stale_after, status_state, tags, text_field, trust
from .temporal import Reference


@dataclass(frozen=True)
class ConceptFilter:
    """One call's filter, already normalised (``types`` and ``tags`` folded).

    - ``types``: the concept's frontmatter ``type``, folded, is one of them (any of).
    - ``tags``: the concept carries every one of them, compared folded (all of: filters narrow).
    - ``project``: the concept's file is under this bundle folder.
    - ``status``: the effective status (absent means stable) is one of them; a concept whose
      status is invalid (effective ``None``) never passes a status filter.
    - ``min_trust``: the trust tier is this one or a more trusted one.
    - ``exclude_stale``: drop concepts stale under the call's ``as_of``; a concept whose
      staleness is unknown (no ``as_of``, no usable ``stale_after``) is kept.
    """

    types: frozenset[str] = frozenset()
    tags: frozenset[str] = frozenset()
    project: str | None = None
    status: frozenset[str] = frozenset()
    min_trust: str | None = None
    exclude_stale: bool = False

    def __post_init__(self) -> None:
        # A misspelt status or tier would silently admit nothing: refuse it where it is made.
        unknown = sorted(self.status.difference(STATUSES))
        if unknown:
            raise ValueError(f"unknown status {unknown[0]!r}; expected one of {STATUSES}")
        if self.min_trust is not None and self.min_trust not in TRUST_TIERS:
            raise ValueError(
                f"unknown trust tier {self.min_trust!r}; expected one of {TRUST_TIERS}"
            )

    def admits(self, doc: Document, ref: Reference) -> bool:
        """Whether the concept passes every kind of filter (the cheapest checks first)."""
        fm = doc.fm
        if self.project is not None and not in_project(doc.path, self.project):
            return False
        if self.types and fold(text_field(fm, "type")) not in self.types:
            return False
        if self.tags and not self.tags.issubset(fold(tag) for tag in tags(fm)):
            return False
        if self.status and status_state(fm)["effective"] not in self.status:
            return False
        if self.min_trust is not None and (
            TRUST_TIERS.index(trust(fm)) < TRUST_TIERS.index(self.min_trust)
        ):
            return False
        return not (self.exclude_stale and ref.stale(stale_after(fm, ref.profile)) is True)

    def echo(self) -> dict[str, Any]:
        """The filter as the answer reports it: every kind, lists in a stable order."""
        return {
            "types": sorted(self.types),
            "tags": sorted(self.tags),
            "project": self.project,
            "status": [s for s in STATUSES if s in self.status],
            "min_trust": self.min_trust,
            "exclude_stale": self.exclude_stale,
        }
