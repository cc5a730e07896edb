"""The six filter arguments of the search tools, parsed into an :class:`okf.filters.ConceptFilter`.

``search_concepts``, ``search_sections`` and ``search_semantic`` take the same arguments and
read them here (as should any other tool that takes them, such as ``context``); which concept
a filter admits is the format's rule (:mod:`bundle_mcp.okf.filters`). The input contracts
already check the shapes; these checks guard direct callers and add what a schema cannot say
(a folder of this snapshot, ``as_of`` required by ``exclude_stale``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..cancel import CancelToken
from ..errors import resource_limit
from ..model import Snapshot
from ..okf.filters import ConceptFilter
from ..okf.folding import fold
from ..okf.properties import STATUSES, TRUST_TIERS
from ..okf.temporal import Reference
from ._common import invalid_field
from ._walk_params import name_list, project_from

FILTER_ARGUMENTS = ("types", "tags", "project", "status", "min_trust", "exclude_stale")
MAX_FILTER_NAMES = 32


def concept_filter_from(
    snapshot: Snapshot, params: Mapping[str, Any], ref: Reference
) -> ConceptFilter | None:
    """The call's filter; ``None`` when none of the six arguments is given, so that a call
    without filters keeps its old code path and its answer byte for byte.

    Raises:
        BundleError: ``invalid_request`` naming the argument for a malformed value, a
            ``project`` that is not a folder of this bundle, or ``exclude_stale: true`` without
            ``as_of`` (named ``$.as_of``: the server never reads the clock);
            ``resource_limit`` for more than 32 types or tags.
    """
    if all(params.get(name) is None for name in FILTER_ARGUMENTS):
        return None
    statuses = _names(params, "status")
    unknown = [s for s in statuses if s not in STATUSES]
    if unknown:
        raise invalid_field("$.status", f"status must list only {', '.join(STATUSES)}")
    min_trust = params.get("min_trust")
    if min_trust is not None and min_trust not in TRUST_TIERS:
        raise invalid_field("$.min_trust", f"min_trust must be one of {', '.join(TRUST_TIERS)}")
    exclude_stale = params.get("exclude_stale", False)
    if not isinstance(exclude_stale, bool):
        raise invalid_field("$.exclude_stale", "exclude_stale must be a boolean")
    if exclude_stale and ref.as_of is None:
        raise invalid_field(
            "$.as_of",
            "exclude_stale needs as_of (the server never reads the clock): pass the date or "
            "instant to judge staleness at",
        )
    return ConceptFilter(
        types=frozenset(fold(name) for name in _names(params, "types")),
        tags=frozenset(fold(name) for name in _names(params, "tags")),
        project=project_from(snapshot, params),
        status=frozenset(statuses),
        min_trust=min_trust,
        exclude_stale=exclude_stale,
    )


def admitted_concepts(
    snapshot: Snapshot, concept_filter: ConceptFilter, ref: Reference, token: CancelToken
) -> frozenset[str]:
    """The IDs of the concepts the filter admits: computed once per call, so that the tool
    skips every other concept before it scores anything."""
    admitted = []
    for concept_id, doc in snapshot.concepts.items():
        token.check()
        if concept_filter.admits(doc, ref):
            admitted.append(concept_id)
    return frozenset(admitted)


def _names(params: Mapping[str, Any], name: str) -> list[str]:
    value = name_list(params, name) or []
    if len(value) > MAX_FILTER_NAMES:
        raise resource_limit(
            f"{name} lists {len(value)} values, more than {MAX_FILTER_NAMES}",
            f"list at most {MAX_FILTER_NAMES} values in {name}",
        )
    return value
