"""``completion/complete`` values for concept IDs (and bundle names): ranked, capped, deterministic.

Transport-free. Matching is caseless with the one folding every search uses
(:func:`bundle_mcp.okf.folding.fold`): first the candidates that *start* with what was typed, then
those that merely contain it; within each group by folded ID, then by ID (so ``Beans`` and
``beans`` keep one order). At most :data:`MAX_VALUES` values go out (the protocol's cap), with
``total`` matches and ``has_more``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .derived import Slot, of_snapshot
from .model import Snapshot
from .okf.folding import fold

__all__ = ["COMPLETION_IDS", "MAX_VALUES", "SLOTS", "Completion", "complete", "folded_candidates",
           "concept_candidates"]

COMPLETION_IDS: Slot[tuple[tuple[str, str], ...]] = Slot(
    "completion_ids", "snapshot",
    "(folded ID, ID) pairs in ranking order, for argument completion",
)
SLOTS = (COMPLETION_IDS,)

MAX_VALUES = 100
# What was typed is an argument prefix; a longer one can match nothing an ID could hold.
MAX_TYPED_CHARS = 4096


@dataclass(frozen=True, slots=True)
class Completion:
    values: tuple[str, ...]
    total: int
    has_more: bool


def folded_candidates(values: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """(folded, value) pairs in ranking order: folded value, then the value itself."""
    return tuple(sorted({(fold(value), value) for value in values}))


def concept_candidates(snapshot: Snapshot) -> tuple[tuple[str, str], ...]:
    """The snapshot's concept IDs as candidates, folded once per snapshot."""
    return of_snapshot(snapshot, COMPLETION_IDS, lambda: folded_candidates(snapshot.concepts))


def complete(candidates: Sequence[tuple[str, str]], typed: str) -> Completion:
    """Rank ``candidates`` (from :func:`folded_candidates`) against what was typed."""
    needle = fold(typed[:MAX_TYPED_CHARS])
    prefix: list[str] = []
    inner: list[str] = []
    for folded, value in candidates:
        if folded.startswith(needle):
            prefix.append(value)
        elif needle in folded:
            inner.append(value)
    total = len(prefix) + len(inner)
    ranked = (prefix + inner)[:MAX_VALUES] if len(prefix) < MAX_VALUES else prefix[:MAX_VALUES]
    return Completion(values=tuple(ranked), total=total, has_more=total > len(ranked))
