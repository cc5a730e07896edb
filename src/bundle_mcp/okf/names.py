"""A concept's display name: the one rule every tool that names a concept uses (docs/DESIGN.md §3).

The frontmatter ``title``, trimmed, when it is a non-blank string; else the first non-blank
heading of the body, trimmed; else the last segment of the concept ID.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..model import Document
from .properties import text_field


def concept_name(doc: Document) -> str:
    return name_of(doc.fields, lambda: doc)


def name_of(fields: Mapping[str, Any], doc: Callable[[], Document]) -> str:
    """:func:`concept_name` from the concept's frontmatter (``Document.fields``), asking for
    its document only when the title does not name it."""
    title = text_field(fields, "title").strip()
    if title:
        return title
    document = doc()
    for section in document.sections:
        if section.heading and section.heading.strip():
            return section.heading.strip()
    return (document.concept_id or "").rsplit("/", 1)[-1]
