"""fetch_slice: a window of adjacent sections of one concept, under one character budget."""

from __future__ import annotations

from typing import Any

from ..cancel import CancelToken
from ..errors import BundleError
from ..model import Document, Section, Snapshot
from ..okf.graph import clip, project_id, resolve
from ..okf.names import concept_name
from ..okf.properties import text_field
from ..okf.sections import (
    body_text,
    breadcrumb,
    is_sliced,
    locator,
    parse_locator,
    section_name,
    section_text,
)
from ..toolspec import CallContext, ToolSpec
from ._common import MIB, concept_not_found, invalid_field
from ._walk_params import clamped, project_from

NAME = "fetch_slice"
DESCRIPTION = (
    "Adjacent sections of one concept: a locator centres the window, a concept ID starts at "
    "its first section. content_max_chars is shared by the window; a cut passage ends with "
    "'…'. covers_parent: the passages hold the whole body. Cite parent_id: locators change "
    "on edit (a stale one is concept_not_found)."
)

DEFAULT_WINDOW, MAX_WINDOW = 3, 64
# The window's budget: the default is the measured size of a worst-case span in the seed's
# system; the ceiling (~25k tokens) keeps one call well inside the output budget.
DEFAULT_CONTENT_CHARS, MAX_CONTENT_CHARS = 18_000, 100_000


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    token.check()
    entity_id = params["entity_id"]
    if not isinstance(entity_id, str) or not entity_id.strip():
        raise invalid_field("$.entity_id", "entity_id must be a concept ID or a section locator")
    window = clamped(params, "window", DEFAULT_WINDOW, 1, MAX_WINDOW)
    budget = clamped(params, "content_max_chars", DEFAULT_CONTENT_CHARS, 0, MAX_CONTENT_CHARS)
    project = project_from(snapshot, params)
    entity = resolve(snapshot, entity_id, project)
    if entity is None:
        raise _not_found(snapshot, entity_id, project, token)
    doc = entity.doc
    result: dict[str, Any] = {
        "entity_id": entity_id,
        "parent_id": entity.concept_id,
        "parent_name": concept_name(doc),
        "parent_type": text_field(doc.fm, "type"),
    }
    if not is_sliced(doc):
        content, cut = clip(body_text(doc), budget)
        passage = {
            "id": entity.concept_id,
            "name": result["parent_name"],
            "content": content,
            "passage_index": None,
            "passage_total": None,
            "breadcrumb": None,
            "truncated": cut,
        }
        return {**result, **_window_fields([passage], window, False, None, None, not cut, doc)}

    sections = doc.sections
    anchor = entity.section_number
    start = window_start(anchor, window, len(sections))
    selected = sections[start : start + window]
    passages = _passages(doc, selected, len(sections), budget, token)
    # Sections partition the body's non-blank lines (a preamble exists only when it holds
    # text, and every other section starts at its heading), so the window covers the body
    # exactly when it holds every section and nothing was cut.
    covers = (
        start == 0
        and len(selected) == len(sections)
        and not any(p["truncated"] for p in passages)
    )
    return {
        **result,
        **_window_fields(passages, window, True, start, len(sections), covers, doc),
    }


def window_start(anchor: int | None, window: int, count: int) -> int:
    """Where the window begins: centred on ``anchor`` (a 0-based section position), slid
    inward so it never runs past either end; at 0 without an anchor."""
    if anchor is None:
        return 0
    start = anchor - (window - 1) // 2
    return max(0, min(start, count - window))


def share(budget: int, lengths: list[int]) -> list[int]:
    """Split ``budget`` over texts of these lengths, shortest first, each at most its length.

    Each text in turn gets the smaller of its length and an even share of what is left, so a
    short section is never cut to make room and the long ones divide the remainder equally.
    The allowances never sum to more than the budget.
    """
    allowances = [0] * len(lengths)
    remaining, left = budget, len(lengths)
    for i in sorted(range(len(lengths)), key=lambda i: (lengths[i], i)):
        give = min(lengths[i], remaining // left)
        allowances[i] = give
        remaining -= give
        left -= 1
    return allowances


def _passages(
    doc: Document, selected: tuple[Section, ...], total: int, budget: int, token: CancelToken
) -> list[dict[str, Any]]:
    texts = []
    for section in selected:
        token.check()
        texts.append(section_text(doc, section))
    out = []
    for section, text, allowance in zip(
        selected, texts, share(budget, [len(t) for t in texts]), strict=True
    ):
        token.check()
        content, cut = clip(text, allowance)
        out.append(
            {
                "id": locator(doc.path, section.line_start, section.line_end),
                "name": section_name(section),
                "content": content,
                "passage_index": section.index,
                "passage_total": total,
                "breadcrumb": breadcrumb(section),
                "truncated": cut,
            }
        )
    return out


def _window_fields(
    passages: list[dict[str, Any]],
    window: int,
    sliced: bool,
    start: int | None,
    passage_total: int | None,
    covers: bool,
    doc: Document,
) -> dict[str, Any]:
    return {
        "passages": passages,
        "window": window,
        "sliced": sliced,
        "total": len(passages),
        "window_start": start,
        "passage_total": passage_total,
        "covers_parent": covers,
        "project_id": project_id(doc.path),
        "content_chars": sum(len(p["content"]) for p in passages),
    }


def _not_found(
    snapshot: Snapshot, entity_id: str, project: str | None, token: CancelToken
) -> BundleError:
    # A locator is looked up by its file: a stale one suggests its concept, whose window then
    # starts at the first section.
    parts = parse_locator(entity_id)
    requested = parts.path_readings()[0] if parts is not None else entity_id
    return concept_not_found(
        snapshot,
        requested,
        "$.entity_id",
        "no concept or section with this ID in the bundle",
        "find a concept ID with search_concepts, or a current section locator with "
        "search_sections (locators change when their file is edited), then retry",
        project=project,
        token=token,
    )


SPEC = ToolSpec(
    name=NAME,
    title="Fetch slice",
    toolset="walk",
    read_only=True,
    output_budget=4 * MIB,
    description=DESCRIPTION,
    run=run,
)
