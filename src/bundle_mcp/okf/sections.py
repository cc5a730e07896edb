"""Sections and their locators: the one rule for naming and reading a span of a concept.

A *section* is a span of a concept's file as :mod:`bundle_mcp.okf.markdown` cuts it: the
preamble (the text before the first heading, present only when it holds text) or one heading and
everything up to the next one. Sections partition the body's non-blank lines, so none is blank,
and a concept of a single section was never cut (:func:`is_sliced`).

A section's ID is its *locator*, ``<percent-encoded path>#L<start>-L<end>``, with the 1-based
physical line numbers of the whole file: search_sections returns it, expand_neighbors and
query_subgraph use it as an entity ID, fetch_slice takes it back. A locator changes when its file
is edited, and one whose range no longer spans exactly one section names nothing
(:func:`section_number_at`).

Nothing here is cached: every function is a pure function of its arguments, and the documents
keep their own parse.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

from ..model import Document, Section

PREAMBLE_NAME = "(preamble)"
BREADCRUMB_SEPARATOR = " > "

# Line numbers as locator() writes them: no sign, no leading zero, at most ten digits.
_LOCATOR_SUFFIX = re.compile(r"#L([1-9][0-9]{0,9})-L([1-9][0-9]{0,9})\Z")


def locator(path: str, line_start: int, line_end: int) -> str:
    """``<percent-encoded path>#L<start>-L<end>``: '/' kept, every other reserved byte escaped."""
    return f"{quote(path, safe='/')}#L{line_start}-L{line_end}"


@dataclass(frozen=True, slots=True)
class LocatorParts:
    """A locator taken apart: the path part as written, and the line range."""

    path_text: str
    line_start: int
    line_end: int

    def path_readings(self) -> tuple[str, ...]:
        """The paths the path part may name: percent-decoded first, then the text as written.

        A client may send the path encoded (as :func:`locator` writes it) or plain, and a file
        name may itself hold ``%``; a part that does not decode (``%FF``) is only itself.
        """
        try:
            decoded = unquote(self.path_text, errors="strict")
        except UnicodeDecodeError:
            return (self.path_text,)
        return (decoded,) if decoded == self.path_text else (decoded, self.path_text)


def parse_locator(value: str) -> LocatorParts | None:
    """The parts of ``value`` read as a locator, or ``None`` when it has no ``#L<a>-L<b>`` end."""
    match = _LOCATOR_SUFFIX.search(value)
    if match is None:
        return None
    return LocatorParts(value[: match.start()], int(match.group(1)), int(match.group(2)))


def section_number_at(doc: Document, line_start: int, line_end: int) -> int | None:
    """The place in ``doc.sections`` of the section spanning exactly these lines, read from
    the sections' spans (sorted by start line), no section decoded."""
    spans = doc.section_spans
    starts = spans[0::2]
    at = bisect.bisect_left(starts, line_start)
    if at < len(starts) and starts[at] == line_start and spans[2 * at + 1] == line_end:
        return at
    return None


def is_sliced(doc: Document) -> bool:
    """A concept with fewer than two sections was never cut: it is its own only span."""
    return doc.sliced


def section_name(section: Section, untitled: str = PREAMBLE_NAME) -> str:
    """A section's heading (stored trimmed), or ``untitled`` for the preamble or an empty
    heading. expand_neighbors and fetch_slice say ``(preamble)``; query_subgraph names such a
    section after its concept."""
    return section.heading if section.heading else untitled


def breadcrumb(section: Section) -> str | None:
    """The headings from the top level down to this one, ``" > "``-joined; none for a preamble."""
    return BREADCRUMB_SEPARATOR.join(section.breadcrumb) if section.breadcrumb else None


def span_text(doc: Document, line_start: int, line_end: int) -> str:
    """Physical lines ``line_start..line_end`` (1-based, inclusive), joined with ``\\n``."""
    return doc.lines.span(line_start - 1, line_end)


def section_text(doc: Document, section: Section) -> str:
    """The physical lines of a section, heading line included (as search_sections reads it)."""
    return span_text(doc, section.line_start, section.line_end)


def body_text(doc: Document) -> str:
    """The body's physical lines (after the frontmatter), line ends normalised to ``\\n``."""
    lines = doc.lines
    return lines.span(doc.body_line - 1, len(lines))
