"""A concept's display name: the one rule every tool that names a concept uses (docs/DESIGN.md §3).

The frontmatter ``title``, trimmed, when it is a non-blank string; else the first non-blank
heading of the body, trimmed; else the last segment of the concept ID.
"""

from __future__ import annotations

from ..model import Document
from .properties import text_field


def concept_name(doc: Document) -> str:
    title = text_field(doc.fields, "title").strip()
    if title:
        return title
    for section in doc.sections:
        if section.heading and section.heading.strip():
            return section.heading.strip()
    return (doc.concept_id or "").rsplit("/", 1)[-1]
