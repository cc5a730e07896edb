"""Links, sections, heading anchors and footnotes from the markdown-it-py token stream.

Only what the parser owns counts: a link inside a code span, fenced or indented code, or raw HTML
is a code-owned pseudo-link and never reaches the token stream as a link. The parser is told not to
rewrite destinations (no percent-encoding, no dropping of unusual schemes), so every destination is
classified here exactly as written, then percent-decoded.
"""

from __future__ import annotations

import functools
import posixpath
import re
import sys
import unicodedata
from typing import TYPE_CHECKING
from urllib.parse import unquote

from ..model import (
    Document,
    FootnoteDef,
    FootnoteRef,
    Link,
    MarkdownFacts,
    Section,
    anchors_of,
)
from .ids import concept_id_for_path

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

_URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_BREAKS = ("softbreak", "hardbreak")
_NO_FACTS = MarkdownFacts((), (), (), (), ())


@functools.lru_cache(maxsize=1)
def markdown_parser() -> MarkdownIt:
    """CommonMark plus tables and footnotes, with destinations kept as written.

    markdown-it-py is imported here, when a document is first parsed (a restarted server's
    first answers read their documents' facts from the parse cache and never parse)."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.footnote import footnote_plugin

    md = MarkdownIt("commonmark").enable("table").use(footnote_plugin)
    md.validateLink = lambda url: True  # type: ignore[method-assign]
    md.normalizeLink = lambda url: url  # type: ignore[method-assign]
    return md


def parse_markdown_reference(doc: Document) -> MarkdownFacts:
    """The reference: markdown-it-py's token stream, read as the format's rules say."""
    body = doc.body if doc.parse_error is None else ""
    if not body:
        return _NO_FACTS
    tokens = markdown_parser().parse(body)
    offset = doc.body_line
    links: list[Link] = []
    refs: list[FootnoteRef] = []
    defs: list[FootnoteDef] = []
    headings: list[tuple[int, int, str]] = []  # (file line, level, text)
    source_dir = posixpath.dirname(doc.path)
    pending_def: tuple[str, int] | None = None
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and tok.map is not None:
            text = _inline_text(tokens[i + 1]) if i + 1 < len(tokens) else ""
            headings.append((tok.map[0] + offset, int(tok.tag[1:]), text))
        elif tok.type == "footnote_open":
            label = sys.intern(str((tok.meta or {}).get("label", "")))
            line = (tok.map[0] + offset) if tok.map else _next_line(tokens, i, offset)
            pending_def = (label, line)
        elif tok.type == "inline" and pending_def is not None:
            defs.append(FootnoteDef(pending_def[0], pending_def[1], tok.content.strip()))
            pending_def = None
        if tok.type == "inline" and tok.children:
            base = (tok.map[0] if tok.map else 0) + offset
            _scan_inline(tok.children, base, source_dir, links, refs)
    sections = build_sections(doc, headings)
    return MarkdownFacts(tuple(links), sections, anchors_of(sections), tuple(refs), tuple(defs))


def _next_line(tokens: list[Token], i: int, offset: int) -> int:
    for tok in tokens[i + 1 :]:
        if tok.map is not None:
            return tok.map[0] + offset
    return offset


def _scan_inline(
    children: list[Token],
    base_line: int,
    source_dir: str,
    links: list[Link],
    refs: list[FootnoteRef],
) -> None:
    line = base_line
    for child in children:
        if child.type in _BREAKS:
            line += 1
        elif child.type == "html_inline":
            line += child.content.count("\n")
        elif child.type == "link_open":
            href = child.attrs.get("href")
            if isinstance(href, str):
                link = resolve_link(href, source_dir, line)
                if link is not None:
                    links.append(link)
        elif child.type == "footnote_ref":
            refs.append(FootnoteRef(sys.intern(str((child.meta or {}).get("label", ""))), line))


def resolve_link(raw: str, source_dir: str, line: int) -> Link | None:
    """Classify a destination; ``None`` for what is not an in-bundle link (docs/DESIGN.md §1).

    Ignored: empty destinations, ``#anchor``-only ones, any URI scheme and ``//host`` forms.
    """
    if outside_bundle(raw):
        return None
    dest = raw.strip()
    path_part, _, fragment = dest.partition("#")
    path_part = path_part.split("?", 1)[0]
    if not path_part:
        return None
    path = unquote(path_part)
    is_directory = path.endswith("/")
    if path.startswith("/"):
        segments = path.split("/")
    else:
        segments = (source_dir.split("/") if source_dir else []) + path.split("/")
    target = normalise_path(segments)
    concept_id = None
    if target is not None:
        # Interned: a bundle's links name the same few thousand files over and over (a hub
        # concept is the target of a tenth of them), and every link's document keeps its links.
        target = sys.intern(target)
        if not is_directory:
            concept_id = sys.intern(concept_id_for_path(target)) or None
    return Link(
        raw=raw,
        line=line,
        target=target,
        concept_id=concept_id,
        # Interned: a bundle's fragments name the same few headings' anchors over and over.
        fragment=sys.intern(unquote(fragment)) if fragment else None,
        is_directory=is_directory or target == "",
    )


def outside_bundle(raw: str) -> bool:
    """Whether a link destination names nothing in the bundle (:func:`resolve_link` ignores
    it): empty, ``#anchor`` only, a URI scheme or a ``//host`` form. Percent escapes never
    change this: neither Markdown parser decodes them, and no character of a scheme, ``#``
    or ``/`` is ever escaped."""
    dest = raw.strip()
    return not dest or dest.startswith("#") or dest.startswith("//") or bool(
        _URI_SCHEME.match(dest))


def normalise_path(segments: list[str]) -> str | None:
    """The bundle-relative path ``segments`` name: ``.`` and empty segments dropped, ``..``
    applied; None when it climbs above the root.

    The one rule for a path inside the bundle, for link destinations here and path-valued
    frontmatter fields (:mod:`.field_paths`).
    """
    out: list[str] = []
    for seg in segments:
        if seg in ("", "."):
            continue
        if seg == "..":
            if not out:
                return None
            out.pop()
            continue
        out.append(seg)
    return "/".join(out)


def _inline_text(tok: Token) -> str:
    if tok.type != "inline":
        return ""
    if not tok.children:
        return tok.content.strip()
    parts = []
    for child in tok.children:
        if child.type in ("text", "code_inline", "html_inline"):
            parts.append(child.content)
        elif child.type in _BREAKS:
            parts.append(" ")
        elif child.type == "image":
            parts.append(child.content)
    return "".join(parts).strip()


def github_slug(text: str) -> str:
    """GitHub's heading anchor: lowercase, punctuation and symbols dropped, spaces to ``-``.

    Letters, marks and numbers of every script are kept (``Straße Café`` → ``straße-café``).
    """
    kept = [
        ch
        for ch in text.lower()
        if ch in "-_ " or unicodedata.category(ch)[0] in "LMN"
    ]
    return "".join(kept).replace(" ", "-")


class SlugCounter:
    """Per-document de-duplication: ``api``, ``api-1``, ``api-2`` (github-slugger's rule)."""

    def __init__(self) -> None:
        self._occurrences: dict[str, int] = {}

    def slug(self, text: str) -> str:
        original = github_slug(text)
        result = original
        while result in self._occurrences:
            self._occurrences[original] += 1
            result = f"{original}-{self._occurrences[original]}"
        self._occurrences[result] = 0
        return result


def build_sections(doc: Document, headings: list[tuple[int, int, str]]) -> tuple[Section, ...]:
    """Sections from ``(file line, level, text)`` headings in document order; both paths use it."""
    last_line = doc.line_count
    sections: list[Section] = []
    first_heading = headings[0][0] if headings else last_line + 1
    lines = doc.lines
    if first_heading > doc.body_line and any(
        lines[n - 1].strip() for n in range(doc.body_line, min(first_heading, last_line + 1))
    ):
        sections.append(Section(0, None, 0, None, doc.body_line, first_heading - 1, ()))
    counter = SlugCounter()
    trail: list[tuple[int, str]] = []
    for n, (line, level, heading) in enumerate(headings):
        end = headings[n + 1][0] - 1 if n + 1 < len(headings) else last_line
        while trail and trail[-1][0] >= level:
            trail.pop()
        # Interned: a bundle's documents repeat the same headings ("Inputs", "Ownership") and
        # so their anchors; each breadcrumb holds the heading objects of its trail, not copies.
        text = sys.intern(heading)
        trail.append((level, text))
        sections.append(
            Section(
                index=len(sections),
                heading=text,
                level=level,
                anchor=sys.intern(counter.slug(text)),
                line_start=line,
                line_end=max(end, line),
                breadcrumb=tuple(t for _, t in trail),
            )
        )
    return tuple(sections)
