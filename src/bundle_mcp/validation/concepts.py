"""Rules for one concept file: conformance (type, frontmatter) and per-file guidance."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import Diagnostic
from ..model import Document, thaw
from ..okf.citations import citations_section, file_lines
from ..okf.markdown import markdown_parser
from ..okf.properties import scalar_text, status_state
from ..okf.temporal import Reference, parse_instant
from .findings import VersionRules, error, info, key_line, warn

SPEC_CONCEPT = "OKF v0.2 §11 (conformance): every concept has frontmatter with a non-empty type"
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[^\s]*")
_CITATION_MARKER = re.compile(r"(?<![\[\\!])\[(\d+)\](?![(\[:])")
_CITATION_ENTRY = re.compile(r"\s*(?:[-*+]\s+)?\[(\d+)\]\s*(.*)")
_CONCRETE_WORDS = re.compile(r"\b(?:for example|for instance|e\.g\.|such as)\b", re.IGNORECASE)


def conformance(doc: Document) -> Iterator[Diagnostic]:
    """OKF §11: the file parses, has a frontmatter block, and declares a non-empty type."""
    if doc.parse_error is not None:
        e = doc.parse_error
        yield error(doc.path, e.code, f"unparseable concept document: {e.message}", e.line)
        return
    if doc.frontmatter is None:
        yield error(doc.path, "missing_frontmatter", "missing YAML frontmatter block", 1,
                    spec_ref=SPEC_CONCEPT)
        return
    value = doc.fm.get("type")
    if not isinstance(value, str) or not value.strip():
        yield error(doc.path, "missing_type", "missing or empty 'type' field",
                    key_line(doc, "type") if "type" in doc.fm else 1, field="type",
                    spec_ref=SPEC_CONCEPT)


def guidance(doc: Document) -> Iterator[Diagnostic]:
    """Warnings that hold in every mode: relations, status, sources, footnotes."""
    if doc.parse_error is not None or doc.frontmatter is None:
        return
    fm = doc.fm
    yield from doc.relation_diagnostics
    state = status_state(fm)
    if not state["valid"]:
        yield warn(doc.path, "invalid_status",
                   f"'status' should be draft, stable or deprecated, not {state['raw']!r}",
                   key_line(doc, "status"), field="status")
    sources = fm.get("sources")
    source_ids: set[str] = set()
    if sources is not None and not isinstance(sources, tuple):
        yield warn(doc.path, "invalid_sources", "'sources' should be a list of mappings",
                   key_line(doc, "sources"), field="sources")
    for i, entry in enumerate(sources if isinstance(sources, tuple) else ()):
        if not isinstance(entry, Mapping):
            yield warn(doc.path, "invalid_source", f"sources[{i}] should be a mapping",
                       key_line(doc, "sources"), field=f"sources[{i}]")
            continue
        resource = entry.get("resource")
        if not isinstance(resource, str) or not resource.strip():
            yield warn(doc.path, "source_without_resource",
                       f"sources[{i}] has no 'resource'", key_line(doc, "sources"),
                       field=f"sources[{i}].resource")
        if isinstance(entry.get("id"), str):
            source_ids.add(entry["id"])
    if isinstance(sources, tuple):
        for footnote in doc.markdown.footnote_refs:
            if footnote.label not in source_ids:
                yield warn(doc.path, "footnote_without_source",
                           f"footnote [^{footnote.label}] matches no sources[].id",
                           footnote.line, field="sources")


@dataclass(frozen=True, slots=True)
class StaleDate:
    """A concept that may be stale: its ``stale_after`` string and the line that sets it.

    That is all :func:`staleness` reads, so a validation walk kept by an earlier process
    decides each call's ``as_of`` without building the concept's document again (a restarted
    server's first validation built the 3,978 such documents of the bench bundle, 1.5 s)."""

    path: str
    value: str
    line: int | None


def stale_date(doc: Document) -> StaleDate | None:
    """What :func:`staleness` needs of ``doc``, when it can find anything at some ``as_of``: the
    file parses and has a string ``stale_after`` (any other is never stale)."""
    if doc.parse_error is not None or doc.frontmatter is None:
        return None
    value = doc.fm.get("stale_after")
    if not isinstance(value, str):
        return None
    return StaleDate(doc.path, value, key_line(doc, "stale_after"))


def staleness(date: StaleDate, ref: Reference) -> Iterator[Diagnostic]:
    """INFO for a concept that is stale at the request's ``as_of`` (never the clock)."""
    if ref.stale(date.value):
        yield info(date.path, "stale_concept",
                   f"concept is stale as of {ref.as_of} (stale_after {date.value})",
                   date.line, field="stale_after")


def strict(doc: Document, rules: VersionRules) -> Iterator[Diagnostic]:
    """Recommended metadata and v0.1 body conventions, checked only with --strict.

    ``timestamp`` is recommended by OKF v0.1 only (v0.2 supersedes it with ``generated.at``,
    §13.1), so it is a rule v0.2 dropped.
    """
    if doc.parse_error is not None or doc.frontmatter is None:
        return
    fm = doc.fm
    for key in ("description", "tags", "timestamp", "title"):
        if key in fm:
            continue
        finding = warn(doc.path, "missing_recommended_field",
                       f"missing recommended frontmatter field '{key}'", 1, field=key)
        if key == "timestamp":
            yield from rules.dropped_in_v02(finding)
        else:
            yield finding
    if "tags" in fm:
        value = fm["tags"]
        if not isinstance(value, tuple) or not all(isinstance(t, str) for t in value):
            yield warn(doc.path, "invalid_tags", "'tags' should be a YAML list of strings",
                       key_line(doc, "tags"), field="tags")
    if "resource" in fm:
        yield from _resource(doc, fm["resource"])
    if "timestamp" in fm:
        value = fm["timestamp"]
        if isinstance(value, (Mapping, tuple)):
            yield warn(doc.path, "invalid_timestamp", "'timestamp' should be an RFC3339 string",
                       key_line(doc, "timestamp"), field="timestamp")
        elif parse_instant(value) is None:
            yield warn(doc.path, "invalid_timestamp",
                       f"'timestamp' is not RFC3339: \"{scalar_text(thaw(value))}\"",
                       key_line(doc, "timestamp"), field="timestamp")
    yield from _body_conventions(doc)


def _resource(doc: Document, value: Any) -> Iterator[Diagnostic]:
    line = key_line(doc, "resource")
    if isinstance(value, (Mapping, tuple)):
        yield warn(doc.path, "invalid_resource", "'resource' should be a URI string", line,
                   field="resource")
    elif not isinstance(value, str) or not _URI.fullmatch(value):
        yield warn(doc.path, "invalid_resource",
                   f"'resource' is not a valid URI: \"{scalar_text(thaw(value))}\"", line,
                   field="resource")


def _body_conventions(doc: Document) -> Iterator[Diagnostic]:
    """``# Examples`` content, the ``# Schema`` section of tables, v0.1 ``# Citations``."""
    sections = doc.sections
    top = [s for s in sections if s.level == 1]
    for s in top:
        if s.heading == "Examples" and not _is_concrete(doc, s.line_start + 1, s.line_end):
            yield warn(doc.path, "examples_not_concrete",
                       "'# Examples' should contain a concrete example", s.line_start)
    if doc.fm.get("type") == "BigQuery Table" and not any(s.heading == "Schema" for s in top):
        yield warn(doc.path, "missing_schema_section",
                   "BigQuery Table concepts should include a '# Schema' section", 1)
    yield from _citations(doc)


def _is_concrete(doc: Document, start: int, end: int) -> bool:
    text = "\n".join(doc.lines[start - 1 : end])
    if not text.strip():
        return False
    for tok in markdown_parser().parse(text):
        if tok.type in ("fence", "code_block", "bullet_list_open", "ordered_list_open",
                        "table_open"):
            return True
        if tok.type == "inline" and any(c.type == "code_inline" for c in tok.children or ()):
            return True
    return bool(_CONCRETE_WORDS.search(text))


def _citations(doc: Document) -> Iterator[Diagnostic]:
    """v0.1 numbered citations: markers need a bottom ``# Citations`` list numbered from 1."""
    section = citations_section(doc)
    heading, first, last_line = file_lines(doc, section) if section else (0, 0, 0)
    body_end = heading - 1 if section else doc.line_count
    markers = _prose_markers(doc, doc.body_line, body_end)
    if not markers:
        return
    sections = doc.sections
    last = sections[-1] if sections else None
    if section is None or last is None or last.line_start != heading:
        yield warn(doc.path, "citations_section_missing",
                   "citation markers require a bottom '# Citations' section", markers[0][1])
        return
    numbers: list[int] = []
    lines = doc.lines  # once: each read decompresses the text (Document.lines)
    for n in range(first, last_line + 1):
        m = _CITATION_ENTRY.fullmatch(lines[n - 1])
        if not m:
            continue
        numbers.append(int(m[1]))
        target = _citation_target(m[2])
        if target is not None and not _valid_citation_target(target):
            yield warn(doc.path, "invalid_citation_target",
                       f"citation entry has invalid target: \"{m[2].strip()}\"", n)
    for want, got in enumerate(numbers, start=1):
        if got != want:
            yield warn(doc.path, "citation_numbering",
                       f"citation numbering should be contiguous starting at 1: got {got}, "
                       f"want {want}", heading)
            break


def _prose_markers(doc: Document, start: int, end: int) -> list[tuple[str, int]]:
    """``[N]`` markers in prose (never in code) between two file lines."""
    text = "\n".join(doc.lines[start - 1 : end])
    found: list[tuple[str, int]] = []
    for tok in markdown_parser().parse(text):
        if tok.type != "inline" or tok.map is None:
            continue
        line = tok.map[0] + start
        for child in tok.children or ():
            if child.type in ("softbreak", "hardbreak"):
                line += 1
            elif child.type == "text":
                found.extend((m[1], line) for m in _CITATION_MARKER.finditer(child.content))
    return found


def _citation_target(rest: str) -> str | None:
    m = re.search(r"\]\(([^)\s]*)\)", rest)
    if m:
        return m[1]
    stripped = rest.strip()
    return stripped or None


def _valid_citation_target(target: str) -> bool:
    if re.match(r"https?://\S+$", target):
        return True
    path = target.split("#", 1)[0]
    return path.endswith(".md") and not re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", path)
