"""Bytes of one file → a frozen :class:`Document`.

Frontmatter and relations are parsed here, in two steps (:func:`check_document` decides
whether the file parses, :meth:`Checked.finish` does the rest); the Markdown body is parsed on
demand, by the rules every document the loader builds is given (:func:`document_rules`).
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ERROR, Diagnostic
from ..model import CONCEPT, RESERVED_NAMES, Document, FileRecord, FormatRules, Relation, freeze
from ..okf.folding import fold
from ..okf.ids import concept_id_for_path, concept_id_problem
from ..okf.markdown_facts import parse_markdown
from ..okf.relations import extract_relations
from ..packed_text import HeldText, PackedText
from .facts_codec import (
    PackedFacts,
    packed_anchors,
    packed_may_link_to,
    packed_section_count,
    packed_section_spans,
    packed_sections,
    spans_bytes,
    spans_of_bytes,
)
from .frontmatter import FrontmatterError, Split, split_frontmatter
from .precheck import Prechecked
from .text import LineView, count_lines

# The rules a document's derived data is computed by (see FormatRules): one set, so every
# document, parsed or read back from the parse cache, agrees on links, folds and line numbers.
# A document that parses is given its own copy whose ``markdown`` keeps its facts
# (:func:`document_rules`); this shared one parses on each use (a broken document's empty body).
OKF_RULES = FormatRules(markdown=parse_markdown, fold=fold, lines=LineView,
                        sections=lambda doc: doc.markdown.sections,
                        anchors=lambda doc: doc.markdown.anchors,
                        section_count=lambda doc: len(doc.markdown.sections),
                        section_spans=lambda doc: spans_of_bytes(
                            spans_bytes(doc.markdown.sections)),
                        may_link_to=lambda doc, concept_ids: True)


def document_rules(cached_facts: str | bytes | None = None, spans: bytes | None = None
                   ) -> FormatRules:
    """:data:`OKF_RULES` for one document, its Markdown facts kept packed once computed, or
    read from ``cached_facts`` (the parse cache's row of them) on each use; ``spans``:
    the sections' line spans stored with that text (``facts_codec.spans_bytes``)."""
    return FormatRules(markdown=PackedFacts(cached_facts, spans), fold=fold, lines=LineView,
                       sections=packed_sections, anchors=packed_anchors,
                       section_count=packed_section_count, section_spans=packed_section_spans,
                       may_link_to=packed_may_link_to)


def document_kind(path: str) -> str:
    # The file name, as posixpath.basename gives it, without its per-call overhead: a load
    # asks this of every file.
    return RESERVED_NAMES.get(path.rpartition("/")[2], CONCEPT)


# How a parsed document holds its text (``Document.held``): given the text, the holder. The
# loader's cells hold a bundle file's text in the file (packed_text.FileText); bytes with no
# file behind them are kept compressed.
Hold = Callable[[str], HeldText]


def parse_document(
    path: str, data: bytes, record: FileRecord | None = None, hold: Hold = PackedText,
) -> Document:
    """Parse one captured file. Never raises for bad content: a broken file keeps its error.
    ``record``: the file's record when the caller has already hashed these bytes."""
    checked = check_document(path, data, record, hold=hold)
    return checked if isinstance(checked, Document) else checked.finish()


@dataclass(frozen=True, slots=True)
class Checked:
    """A file past every check that decides whether it parses (UTF-8, the frontmatter block, its
    YAML), before the rest of its parse (relations, the frozen frontmatter). Whether a bundle
    has a broken file is asked by every call under the parse policy; this is the least work
    that answers it.

    Every file of a cold bundle is checked before the first answer and built later, so this
    keeps what the build needs and not the text: how the document will hold it (``held``: for
    a bundle's file, its length and the way to read it again), where the split fell, and
    whether the frontmatter block spells "relations" (only such a block can declare any)."""

    path: str
    kind: str
    concept_id: str | None
    record: FileRecord
    held: HeldText
    frontmatter_span: tuple[int, int] | None
    body_start: int
    body_line: int
    names_relations: bool
    frontmatter: dict[str, Any] | None
    line_count: int

    def finish(self) -> Document:
        frontmatter, concept_id = self.frontmatter, self.concept_id
        relations: tuple[Relation, ...] = ()
        relation_diagnostics: tuple[Diagnostic, ...] = ()
        if concept_id is not None and frontmatter and self.names_relations:
            relations, relation_diagnostics = extract_relations(concept_id, frontmatter, self.path)
        return Document(
            path=self.path,
            kind=self.kind,
            concept_id=concept_id,
            record=self.record,
            held=self.held,
            frontmatter_span=self.frontmatter_span,
            frontmatter_value=freeze(frontmatter) if frontmatter is not None else None,
            body_start=self.body_start,
            body_line=self.body_line,
            line_count=self.line_count,
            rules=document_rules(),
            relations=relations,
            relation_diagnostics=relation_diagnostics,
        )


def check_document(
    path: str, data: bytes, record: FileRecord | None = None,
    prechecked: Prechecked | None = None, hold: Hold = PackedText,
) -> Document | Checked:
    """The broken :class:`Document` when the file does not parse, else what its parse read so
    far (:class:`Checked`). ``prechecked``: frontmatter another process loaded from the same
    bytes (:mod:`bundle_mcp.loader.precheck`), used instead of loading it here. ``hold``: how
    the document will hold its text (a broken one keeps its replacement text compressed)."""
    if record is None:
        record = FileRecord(path, len(data), hashlib.sha256(data).hexdigest())
    kind = document_kind(path)
    # Interned: links and relations naming the concept hold the interned ID (okf.markdown).
    concept_id = sys.intern(concept_id_for_path(path)) if kind == CONCEPT else None
    if concept_id is not None:
        # A concept no tool could address is not served: it is reported, never listed.
        problem = concept_id_problem(concept_id, allow_reserved_names=True)
        if problem is not None:
            return _broken(path, kind, None, record, "", Diagnostic(
                code="invalid_concept_id", severity=ERROR, file=path,
                message=f"the file name cannot be a concept ID ({problem}); rename the file",
            ))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        return _broken(path, kind, concept_id, record, "", Diagnostic(
            code="invalid_encoding", severity=ERROR, file=path, line=line,
            message=f"invalid UTF-8 at byte {exc.start}",
        ))
    line_count = count_lines(text)
    try:
        split = split_frontmatter(text)
        frontmatter = (_frontmatter(split, record.sha256, prechecked)
                       if split.raw is not None else None)
    except FrontmatterError as exc:
        return _broken(path, kind, concept_id, record, text, Diagnostic(
            code=exc.code, severity=ERROR, file=path, line=exc.line, message=exc.message,
        ), line_count)
    return Checked(
        path, kind, concept_id, record, hold(text),
        None if split.raw is None else (split.raw_start, split.raw_end),
        split.body_start, split.body_line, "relations" in (split.raw or ""),
        frontmatter, line_count,
    )


def _frontmatter(split: Split, sha256: str, prechecked: Prechecked | None) -> dict[str, Any]:
    """The block's data: loaded by the precheck from the same bytes, else loaded here."""
    assert split.raw is not None
    known = prechecked.take(sha256) if prechecked is not None else None
    if known is None:
        # The YAML loaders are imported here, when a block is first loaded: a restarted
        # server's documents come from the parse cache, loaded by none.
        from .yaml_load import load_frontmatter

        return load_frontmatter(split.raw, split.raw_line)
    if isinstance(known, tuple):
        raise FrontmatterError(*known)
    # Its keys are interned as load_frontmatter's are: marshal carries the interning across.
    return known


def _broken(
    path: str,
    kind: str,
    concept_id: str | None,
    record: FileRecord,
    text: str,
    error: Diagnostic,
    line_count: int = 0,
) -> Document:
    return Document(
        path=path,
        kind=kind,
        concept_id=concept_id,
        record=record,
        held=PackedText(text),
        frontmatter_span=None,
        frontmatter_value=None,
        body_start=len(text),
        body_line=1,
        line_count=line_count,
        rules=OKF_RULES,
        parse_error=error,
    )
