"""Where a v0.1 body ``# Citations`` section is: the one rule every reader and writer uses.

The section is a level-1 heading (ATX ``#`` or setext ``===``) whose text, trimmed, is
``Citations`` in any letter case, at the top level of the body's Markdown token stream (never in
a code block, block quote or list). It runs to the next level-1 heading or the end of the body.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..model import Document
from .markdown import markdown_parser

if TYPE_CHECKING:
    from markdown_it.token import Token

HEADING = "citations"  # compared case-folded


@dataclass(frozen=True, slots=True)
class CitationsSection:
    """0-based line numbers of the body: ``[heading, content)`` is the heading itself
    (two lines for a setext heading) and ``[content, end)`` what follows it."""

    heading: int
    content: int
    end: int


def is_citations_heading(text: str) -> bool:
    """Whether a level-1 heading's text names the citations section."""
    return text.strip().casefold() == HEADING


def citations_sections(tokens: list[Token], line_count: int) -> list[CitationsSection]:
    """Every citations section of a parsed body, in order (``line_count``: the body's lines)."""
    h1 = [
        (tok.map, tokens[i + 1].content if i + 1 < len(tokens) else "")
        for i, tok in enumerate(tokens)
        if tok.type == "heading_open" and tok.tag == "h1" and tok.level == 0 and tok.map
    ]
    out: list[CitationsSection] = []
    for k, (span, text) in enumerate(h1):
        if is_citations_heading(text):
            end = h1[k + 1][0][0] if k + 1 < len(h1) else line_count
            out.append(CitationsSection(span[0], span[1], end))
    return out


def citations_section(doc: Document) -> CitationsSection | None:
    """The first citations section of a concept's body, or ``None``."""
    body = doc.body
    if HEADING not in body.casefold():  # most bodies: no parse at all
        return None
    found = citations_sections(markdown_parser().parse(body), len(body.splitlines()))
    return found[0] if found else None


def file_lines(doc: Document, section: CitationsSection) -> tuple[int, int, int]:
    """The section as 1-based file lines: ``(heading, first content line, last line)``."""
    base = doc.body_line
    return base + section.heading, base + section.content, base + section.end - 1
