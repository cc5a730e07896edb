"""search_concepts: one literal, caseless substring over id, title, description, tags and body."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from itertools import compress, repeat
from typing import Any

from ..cancel import CancelToken
from ..derived import Slot, of_snapshot
from ..model import Document, FoldedFields, Snapshot
from ..okf.folding import fold
from ..okf.temporal import reference_from
from ..toolspec import CallContext, ToolSpec
from ._common import Cards, invalid_field, limit_from
from ._filters import concept_filter_from

NAME = "search_concepts"
DESCRIPTION = (
    "Start here for a known term: concepts whose ID, title, description, a tag or body "
    "contains ONE literal substring, caseless: not an AND of words, not fuzzy. Ranked id > "
    "title > description > tags > body, then ID. If truncated, raise limit (up to 100) or "
    "refine: no cursor, an omitted hit was not inspected. Then read_concept; list_concepts "
    "if no term is known."
)

# Field priorities: the highest one that contains the query is the hit's match.
ID, TITLE_FIELD, DESCRIPTION_FIELD, TAGS, BODY = 6, 5, 4, 3, 1
MATCH_NAMES = {
    ID: "id", TITLE_FIELD: "title", DESCRIPTION_FIELD: "description", TAGS: "tags", BODY: "body"
}


@dataclass(frozen=True, slots=True)
class SearchFields:
    """Every concept's folded fields, one column per field, in concept ID order: a query scans
    each column in one pass of C (``map(operator.contains, …)``) instead of one Python step
    per concept and field, which took twice as long at the file cap. The columns hold the
    documents' own folded strings (``Document.folded``), not copies."""

    concept_ids: tuple[str, ...]
    documents: tuple[Document, ...]
    ids: tuple[str, ...]
    titles: tuple[str, ...]
    descriptions: tuple[str, ...]
    bodies: tuple[str, ...]
    tags: tuple[str, ...]  # every tag of every concept, each on its own
    tag_owners: tuple[int, ...]  # the position of the concept each tag belongs to

    def priorities(self, needle: str, token: CancelToken) -> list[int]:
        """Per concept, the priority of its highest field containing ``needle`` (0: none):
        the columns are scanned lowest priority first, so a higher field overwrites."""
        found = [0] * len(self.concept_ids)
        for priority, column in ((BODY, self.bodies), (DESCRIPTION_FIELD, self.descriptions),
                                 (TITLE_FIELD, self.titles), (ID, self.ids)):
            token.check()
            if priority == DESCRIPTION_FIELD:  # tags rank between body and description
                for n in compress(self.tag_owners,
                                  map(operator.contains, self.tags, repeat(needle))):
                    found[n] = TAGS
            for n in compress(range(len(column)), map(operator.contains, column, repeat(needle))):
                found[n] = priority
        return found


def _fields(snapshot: Snapshot, token: CancelToken) -> SearchFields:
    concept_ids: list[str] = []
    documents: list[Document] = []
    folded: list[FoldedFields] = []
    tags: list[str] = []
    owners: list[int] = []
    for n, (concept_id, doc) in enumerate(snapshot.concepts.items()):
        token.check()
        fields = doc.folded
        concept_ids.append(concept_id)
        documents.append(doc)
        folded.append(fields)
        tags.extend(fields.tags)
        owners.extend(repeat(n, len(fields.tags)))
    return SearchFields(
        tuple(concept_ids), tuple(documents),
        tuple(f.concept_id for f in folded), tuple(f.title for f in folded),
        tuple(f.description for f in folded), tuple(f.body for f in folded),
        tuple(tags), tuple(owners),
    )


def _warm_fields(snapshot: Snapshot, token: CancelToken) -> None:
    of_snapshot(snapshot, SEARCH_FIELDS, lambda: _fields(snapshot, token), check=token.check)


SEARCH_FIELDS: Slot[SearchFields] = Slot(
    "search_fields", "snapshot",
    "every concept's folded ID, title, description, tags and body as columns, for "
    "search_concepts",
    _warm_fields,
)
SLOTS = (SEARCH_FIELDS,)


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    query = params["query"]
    if not query.strip():
        raise invalid_field("$.query", "query must contain a non-whitespace character")
    limit = limit_from(params)
    ref = reference_from(params)
    concept_filter = concept_filter_from(snapshot, params, ref)
    needle = fold(query)  # never trimmed: leading or trailing spaces are part of the literal
    columns = of_snapshot(snapshot, SEARCH_FIELDS, lambda: _fields(snapshot, token),
                          check=token.check)
    priorities = columns.priorities(needle, token)
    matches: list[tuple[int, str]] = []
    for n in compress(range(len(priorities)), priorities):
        # The filter comes before the limit: total counts admitted matches only.
        if concept_filter is not None and not concept_filter.admits(columns.documents[n], ref):
            continue
        matches.append((priorities[n], columns.concept_ids[n]))
    matches.sort(key=lambda m: (-m[0], m[1]))
    cards = Cards(snapshot, ref)
    hits = []
    for priority, concept_id in matches[:limit]:
        token.check()
        hits.append({"concept": cards.get(concept_id), "match": MATCH_NAMES[priority]})
    answer: dict[str, Any] = {
        "query": query,
        "as_of": ref.as_of,
        "temporal_profile": ref.profile,
        "total": len(matches),
        "truncated": len(matches) > limit,
        "hits": hits,
    }
    if concept_filter is not None:  # without filters the answer keeps its old bytes
        answer["filters"] = concept_filter.echo()
    return answer


def match_priority(needle: str, concept_id: str, doc: Any) -> int:
    """The priority of the highest field containing ``needle``; 0 when none does.

    The rule in one concept's terms: :meth:`SearchFields.priorities` answers it for every
    concept at once, and ``tests/test_search_columns.py`` holds the two to the same answers.
    """
    folded = doc.folded
    if needle in folded.concept_id:
        return ID
    if needle in folded.title:
        return TITLE_FIELD
    if needle in folded.description:
        return DESCRIPTION_FIELD
    # Each tag on its own: a query never spans two tags.
    if any(needle in tag for tag in folded.tags):
        return TAGS
    if needle in folded.body:
        return BODY
    return 0


SPEC = ToolSpec(
    name=NAME,
    title="Search concepts",
    toolset="read",
    read_only=True,
    description=DESCRIPTION,
    run=run,
)
