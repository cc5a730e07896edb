"""search_concepts: one literal, caseless substring over id, title, description, tags and body."""

from __future__ import annotations

from typing import Any

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


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    query = params["query"]
    if not query.strip():
        raise invalid_field("$.query", "query must contain a non-whitespace character")
    limit = limit_from(params)
    ref = reference_from(params)
    concept_filter = concept_filter_from(snapshot, params, ref)
    needle = fold(query)  # never trimmed: leading or trailing spaces are part of the literal
    matches: list[tuple[int, str]] = []
    for concept_id, doc in snapshot.concepts.items():
        token.check()
        # The filter comes before the match and the limit: total counts admitted matches only.
        if concept_filter is not None and not concept_filter.admits(doc, ref):
            continue
        priority = match_priority(needle, concept_id, doc)
        if priority:
            matches.append((priority, concept_id))
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

    The folded fields are computed once per document and kept with it (``Document.folded``).
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
