"""Structure of the reserved files: ``index.md`` (headed lists of links) and ``log.md``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from markdown_it.token import Token

from ..derived import Slot, of_document
from ..errors import Diagnostic
from ..model import INDEX, Document, Snapshot
from ..okf.markdown import markdown_parser, resolve_link
from ..okf.temporal import parse_date
from .findings import VersionRules, error, warn

INDEX_OUTLINE: Slot[IndexOutline] = Slot(
    "index_outline", "document",
    "an index.md file's headings and top-level list entries (IndexOutline); built by validation",
)
SLOTS = (INDEX_OUTLINE,)

SPEC_INDEX = "OKF v0.2: index.md lists a folder's concepts under headings"
SPEC_LOG = "OKF v0.2: log.md groups list entries under ## YYYY-MM-DD headings, newest first"
SPEC_LOG_FRONTMATTER = ("OKF v0.1: log.md has no frontmatter (OKF v0.2 §9 allows it; declare "
                        "okf_version \"0.2\" in the root index.md, §12)")
_DATE_LIKE = re.compile(r"\d{4}-\d{2}-\d{2}")


def reserved_conformance(doc: Document, rules: VersionRules) -> Iterator[Diagnostic]:
    """§8 and §9 structure of ``index.md`` and ``log.md`` under the bundle's effective version.

    Only the log's frontmatter rule depends on the version: OKF v0.1 (the reference's rule)
    forbids it; v0.2 does not (§9 says nothing of frontmatter, and §8 and §12 forbid it in index
    files only), so under 0.2 a log may carry one, and in a bundle that declares no version it is
    a WARN (:meth:`VersionRules.dropped_in_v02`).
    """
    if doc.parse_error is not None:
        e = doc.parse_error
        yield error(doc.path, e.code, f"unparseable {doc.path.rsplit('/', 1)[-1]}: {e.message}",
                    e.line)
        return
    if doc.kind == INDEX:
        yield from _index_frontmatter(doc)
        # A blank nested index is a folder not catalogued yet: the orphan check reports its
        # concepts. The root index always needs its structure (reference fixtures agree).
        if doc.path == "index.md" or doc.body.strip():
            yield from _index_structure(doc)
    else:
        if doc.frontmatter is not None:
            yield from rules.dropped_in_v02(error(
                doc.path, "log_frontmatter",
                "log.md should not contain frontmatter under OKF v0.1; OKF v0.2 allows it", 1,
                spec_ref=SPEC_LOG_FRONTMATTER))
        yield from _log_structure(doc)


def _index_frontmatter(doc: Document) -> Iterator[Diagnostic]:
    if doc.frontmatter is None:
        return
    if doc.path != "index.md":
        yield error(doc.path, "index_frontmatter", "index.md should not contain frontmatter", 1,
                    spec_ref=SPEC_INDEX)
        return
    fm = doc.fm
    if set(fm) - {"okf_version"}:
        yield error(doc.path, "root_index_frontmatter",
                    "root index.md frontmatter should declare only 'okf_version'", 1,
                    spec_ref=SPEC_INDEX)
    version = fm.get("okf_version")
    if not isinstance(version, str) or not version.strip():
        yield error(doc.path, "root_index_version",
                    "root index.md okf_version should be a non-empty string", 1,
                    field="okf_version", spec_ref=SPEC_INDEX)


IndexEntry = tuple[int, str | None, str | None, str]


@dataclass(frozen=True, slots=True)
class IndexOutline:
    """What the index rules read from an index file: its headings and top-level list entries."""

    headings: tuple[tuple[int, int, str], ...]  # (line, level, text)
    entries: tuple[IndexEntry, ...]  # (line, heading, link destination, description)


def index_entries(doc: Document) -> tuple[IndexEntry, ...]:
    """Top-level list entries of an index: (line, heading, link destination, description)."""
    return index_outline(doc).entries


def index_outline(doc: Document) -> IndexOutline:
    """The index's outline, parsed once per document (an index of a big bundle lists thousands
    of entries, and three rules read it)."""
    outline: IndexOutline = of_document(doc, INDEX_OUTLINE, lambda: _outline(doc))
    return outline


def _outline(doc: Document) -> IndexOutline:
    entries: list[IndexEntry] = []
    headings: list[tuple[int, int, str]] = []
    heading: str | None = None
    tokens = _tokens(doc)
    depth = 0
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and tok.map is not None:
            headings.append((tok.map[0] + doc.body_line, int(tok.tag[1:]),
                             tokens[i + 1].content.strip()))
        if tok.type == "heading_open" and depth == 0:
            heading = tokens[i + 1].content.strip()
        elif tok.type in ("bullet_list_open", "ordered_list_open"):
            depth += 1
        elif tok.type in ("bullet_list_close", "ordered_list_close"):
            depth -= 1
        elif tok.type == "list_item_open" and depth == 1 and tok.map is not None:
            inline = next((t for t in tokens[i:] if t.type == "inline"), None)
            href, text = _first_link(inline)
            entries.append((tok.map[0] + doc.body_line, heading, href, text))
    return IndexOutline(tuple(headings), tuple(entries))


def _index_structure(doc: Document) -> Iterator[Diagnostic]:
    outline = index_outline(doc)
    headings, entries = outline.headings, outline.entries
    linked_by_heading: dict[str, int] = {}
    for line, heading, href, _ in entries:
        if heading is None:
            yield error(doc.path, "index_entry_before_heading",
                        "index.md list entry appears before any heading", line,
                        spec_ref=SPEC_INDEX)
        if href is None:
            yield error(doc.path, "index_entry_without_link",
                        "index.md list entry should contain a Markdown link", line,
                        spec_ref=SPEC_INDEX)
        elif heading is not None:
            linked_by_heading[heading] = linked_by_heading.get(heading, 0) + 1
    if not headings:
        yield error(doc.path, "index_without_heading",
                    "index.md should contain at least one heading", 1, spec_ref=SPEC_INDEX)
        return
    for n, (line, level, text) in enumerate(headings):
        groups_subsections = n + 1 < len(headings) and headings[n + 1][1] > level
        if not linked_by_heading.get(text) and not groups_subsections:
            yield error(doc.path, "index_section_empty",
                        f"index.md section has no entries: \"{text}\"", line, spec_ref=SPEC_INDEX)
    if not any(href for _, _, href, _ in entries):
        yield error(doc.path, "index_without_entries",
                    "index.md should contain at least one linked list entry", 1,
                    spec_ref=SPEC_INDEX)


def _log_structure(doc: Document) -> Iterator[Diagnostic]:
    tokens = _tokens(doc)
    lines = doc.lines  # once: each read decompresses the text (Document.lines)
    previous = None
    group: tuple[int, str] | None = None
    group_entries = 0
    depth = 0
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and tok.map is not None:
            text = tokens[i + 1].content.strip()
            line = tok.map[0] + doc.body_line
            raw_heading = lines[line - 1].strip()
            starts_group = tok.tag == "h2" or _DATE_LIKE.fullmatch(text)
            if starts_group and group is not None and group_entries == 0:
                yield _empty_group(doc, group)
            if tok.tag != "h2":
                if _DATE_LIKE.fullmatch(text):
                    yield error(doc.path, "log_heading_level",
                                f"log date heading should use level 2: \"{raw_heading}\"", line,
                                spec_ref=SPEC_LOG)
                    group = None
                elif group is not None:
                    # A sub-heading inside a date group is a stray entry; the group goes on.
                    yield error(doc.path, "log_non_list_entry",
                                f"log date group contains non-list entry: \"{raw_heading}\"",
                                line, spec_ref=SPEC_LOG)
                continue
            if parse_date(text) is None:
                yield error(doc.path, "log_heading_date",
                            f"log date heading is not ISO-8601 YYYY-MM-DD: \"{text}\"", line,
                            spec_ref=SPEC_LOG)
                group = None
                continue
            if previous is not None and text >= previous:
                yield error(doc.path, "log_order",
                            f"log date headings should be newest first: \"{text}\"", line,
                            spec_ref=SPEC_LOG)
            previous = text
            group = (line, text)
            group_entries = 0
        elif group is None or tok.level != 0 or tok.map is None:
            if tok.type in ("bullet_list_open", "ordered_list_open"):
                depth += 1
            elif tok.type in ("bullet_list_close", "ordered_list_close"):
                depth -= 1
            continue
        elif tok.type == "bullet_list_open":
            for n in range(tok.map[0], tok.map[1]):
                raw = lines[n + doc.body_line - 1]
                stripped = raw.lstrip()
                if raw and raw[0] in "-*+":
                    group_entries += 1
                elif stripped and (stripped[0] in "-*+" or raw[0] not in " \t"):
                    # Entries are top-level bullets; a nested bullet or a lazy continuation
                    # line is prose inside the group, which the log format does not allow.
                    yield error(doc.path, "log_non_list_entry",
                                f"log date group contains non-list entry: \"{raw.strip()}\"",
                                n + doc.body_line, spec_ref=SPEC_LOG)
        elif tok.type.endswith("_open") or tok.type in ("fence", "code_block", "html_block",
                                                         "hr"):
            line = tok.map[0] + doc.body_line
            yield error(doc.path, "log_non_list_entry",
                        f"log date group contains non-list entry: "
                        f"\"{lines[line - 1].strip()}\"", line, spec_ref=SPEC_LOG)
    if group is not None and group_entries == 0:
        yield _empty_group(doc, group)


def _empty_group(doc: Document, group: tuple[int, str]) -> Diagnostic:
    return error(doc.path, "log_group_empty", f"log date heading has no entries: \"{group[1]}\"",
                 group[0], spec_ref=SPEC_LOG)


def index_description_mismatches(doc: Document, snapshot: Snapshot) -> Iterator[Diagnostic]:
    """Strict: an index entry ``[Title](x.md) - description`` repeats the target's description."""
    folder = doc.path.rsplit("/", 1)[0] if "/" in doc.path else ""
    for line, _, href, text in index_entries(doc):
        if href is None or " - " not in f" {text}":
            continue
        link = resolve_link(href, folder, line)
        if link is None or link.concept_id is None:
            continue
        target = snapshot.concepts.get(link.concept_id)
        described = text.split(" - ", 1)[1].strip() if " - " in text else ""
        expected = target.fm.get("description") if target is not None else None
        if isinstance(expected, str) and described and described != expected.strip():
            yield warn(doc.path, "index_description_mismatch",
                       f"index.md description for \"{href}\" does not match target frontmatter",
                       line)


def _tokens(doc: Document) -> list[Token]:
    body = doc.body
    return markdown_parser().parse(body) if body else []


def _first_link(inline: Token | None) -> tuple[str | None, str]:
    if inline is None:
        return None, ""
    href = None
    for child in inline.children or ():
        if child.type == "link_open":
            value = child.attrs.get("href")
            href = value if isinstance(value, str) else None
            break
    return href, inline.content
