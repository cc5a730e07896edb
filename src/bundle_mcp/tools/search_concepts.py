"""search_concepts: one literal, caseless substring over id, title, description, tags and body."""

from __future__ import annotations

from typing import Any

from ..cancel import CancelToken
from ..folding import fold
from ..model import Snapshot
from ..temporal import reference_from
from ._common import MIB, Cards, invalid_field, limit_from

NAME = "search_concepts"
READ_ONLY = True
NEEDS_PARSEABLE = True
OUTPUT_BUDGET = 64 * MIB
DESCRIPTION = (
    "Find concepts whose canonical ID, title, description, one tag, or Markdown body contains "
    "ONE literal substring (compared after Unicode case folding and NFC). It is not word, "
    "fuzzy, regex, semantic or embedding search, and a query is one substring, not an AND of "
    "words: 'roast profile' only matches that exact phrase. Start here with a distinctive "
    "literal taken from the question (an ID, title, tag or phrase). Hits sort by the matched "
    "field (id > title > description > tags > body), then by ID. total counts every match and "
    "truncated says some were left out: then raise limit (up to 100) or send a more specific "
    "query; there is no cursor or page. Read only the IDs you select with read_concept, then "
    "ask get_neighbors for their bounded neighbourhood. A concept beyond the first hits is "
    "still reachable by its canonical ID or a distinguishing query. Never claim that an omitted "
    "hit was inspected. list_concepts exposes every ID when no query term is known, but returns "
    "the whole list at once. Cards report status, trust, stale_after and stale (null without "
    "as_of)."
)

# Field priorities: the highest one that contains the query is the hit's match.
ID, TITLE, DESCRIPTION_FIELD, TAGS, BODY = 6, 5, 4, 3, 1
MATCH_NAMES = {
    ID: "id", TITLE: "title", DESCRIPTION_FIELD: "description", TAGS: "tags", BODY: "body"
}


def run(snapshot: Snapshot, params: dict[str, Any], token: CancelToken) -> dict[str, Any]:
    query = params["query"]
    if not query.strip():
        raise invalid_field("$.query", "query must contain a non-whitespace character")
    limit = limit_from(params)
    ref = reference_from(params)
    needle = fold(query)  # never trimmed: leading or trailing spaces are part of the literal
    matches: list[tuple[int, str]] = []
    for concept_id, doc in snapshot.concepts.items():
        token.check()
        priority = match_priority(needle, concept_id, doc)
        if priority:
            matches.append((priority, concept_id))
    matches.sort(key=lambda m: (-m[0], m[1]))
    cards = Cards(snapshot, ref)
    hits = []
    for priority, concept_id in matches[:limit]:
        token.check()
        hits.append({"concept": cards.get(concept_id), "match": MATCH_NAMES[priority]})
    return {
        "query": query,
        "as_of": ref.as_of,
        "temporal_profile": ref.profile,
        "total": len(matches),
        "truncated": len(matches) > limit,
        "hits": hits,
    }


def match_priority(needle: str, concept_id: str, doc: Any) -> int:
    """The priority of the highest field containing ``needle``; 0 when none does.

    The folded fields are computed once per document and kept with it (``Document.folded``).
    """
    folded = doc.folded
    if needle in folded.concept_id:
        return ID
    if needle in folded.title:
        return TITLE
    if needle in folded.description:
        return DESCRIPTION_FIELD
    # Each tag on its own: a query never spans two tags.
    if any(needle in tag for tag in folded.tags):
        return TAGS
    if needle in folded.body:
        return BODY
    return 0
