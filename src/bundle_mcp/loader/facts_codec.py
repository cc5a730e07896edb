"""A document's Markdown facts as JSON text, and the holder that keeps them that way.

The facts (links, sections, footnotes: :class:`~bundle_mcp.model.MarkdownFacts`) are what most
whole-bundle structures are built from, once per snapshot, and what a per-concept call reads of
its own document. Kept as objects for the life of the process they were about 30 MiB at 10,000
concepts, more than the texts they came from; kept as their JSON text, compressed
(:func:`packed_facts`), about 7 MiB. :class:`PackedFacts` is a
document's ``FormatRules.markdown``: it parses the body (or takes the parse cache's text) once,
keeps the text, and decodes it on each use (about 30 µs for a page of the bench bundle).

What the holder keeps (:func:`packed_facts`: the text, compressed past a length) is the parse
cache's ``facts`` row as it is, so a save writes it and a restart adopts it without either
compressing or decompressing. Beside it the holder keeps, and the row stores, the sections'
line spans as a few bytes (:func:`spans_bytes`): a walk needs only those of most concepts it
passes (their section locators and count), and a restarted server then decodes no facts text
for them.
"""

from __future__ import annotations

import json
import struct
import sys
from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..model import (
    FootnoteDef,
    FootnoteRef,
    Link,
    MarkdownFacts,
    Section,
    anchors_from,
    anchors_of,
)
from ..okf import mentions
from ..okf.markdown_facts import parse_markdown
from ..packed_text import MIN_PACKED
from ..zstd_frames import packed as packed_frame
from ..zstd_frames import unpacked as unpacked_frame

if TYPE_CHECKING:
    from ..model import Document


def facts_json(facts: MarkdownFacts) -> str:
    """The facts as compact JSON text (the parse cache's ``facts`` row)."""
    return json.dumps({
        "links": [[x.raw, x.line, x.target, x.concept_id, x.fragment, x.is_directory]
                  for x in facts.links],
        "sections": [[s.index, s.heading, s.level, s.anchor, s.line_start, s.line_end,
                      list(s.breadcrumb)] for s in facts.sections],
        "refs": [[r.label, r.line] for r in facts.footnote_refs],
        "defs": [[d.label, d.line, d.text] for d in facts.footnote_defs],
    }, ensure_ascii=False, separators=(",", ":"))


# A span is two unsigned 32-bit little-endian integers: line start, line end. A bundle file
# is far below 2**32 lines (the byte caps), so no span is cut.
_SPAN = struct.Struct("<II")


def spans_bytes(sections: Sequence[Section]) -> bytes:
    """The sections' line spans, (start, end) after (start, end), as the parse cache stores
    them."""
    return b"".join([_SPAN.pack(s.line_start, s.line_end) for s in sections])


def spans_of_bytes(data: bytes) -> tuple[int, ...]:
    """The flat (start, end, start, end, …) line numbers of :func:`spans_bytes`."""
    return struct.unpack(f"<{len(data) // 4}I", data)


def spans_fit(data: object, line_count: int) -> bool:
    """Whether stored spans can be a document's sections: whole spans, each inside the file's
    lines, in order and not overlapping (a damaged row's spans are not used)."""
    if not isinstance(data, bytes) or len(data) % _SPAN.size:
        return False
    previous_end = 0
    for start, end in _SPAN.iter_unpack(data):
        if not previous_end < start <= end <= line_count:
            return False
        previous_end = end
    return True


def facts_of_json(text: str, known_good: bool = False) -> MarkdownFacts:
    """The facts :func:`facts_json` wrote. Raises ``ValueError``, ``TypeError``, ``KeyError``
    or ``IndexError`` for a text that is not such facts (a damaged row). ``known_good``: the
    text decoded before (or was written here), so its values are not checked again; the facts
    are the same either way."""
    value = json.loads(text)
    if known_good:
        return _trusted_facts(value)
    sections = _sections(value["sections"])
    return MarkdownFacts(
        links=tuple(
            Link(as_str(r), as_int(n), interned_or_none(t), interned_or_none(c),
                 interned_or_none(f), bool(d))
            for r, n, t, c, f, d in value["links"]
        ),
        sections=sections,
        anchors=anchors_of(sections),
        footnote_refs=tuple(FootnoteRef(interned_str(a), as_int(n)) for a, n in value["refs"]),
        footnote_defs=tuple(
            FootnoteDef(interned_str(a), as_int(n), as_str(t)) for a, n, t in value["defs"]),
    )


def sections_of_json(text: str, known_good: bool = False) -> tuple[Section, ...]:
    """The sections of the facts :func:`facts_json` wrote, the rest not made (a walk needs a
    concept's sections only). Raises as :func:`facts_of_json` does."""
    value = json.loads(text)
    if not isinstance(value, dict):
        raise TypeError("facts are a JSON object")
    return _trusted_sections(value["sections"]) if known_good else _sections(value["sections"])


def anchors_of_json(text: str) -> Collection[str]:
    """``facts_of_json(text).anchors`` of a known good text, no section made."""
    rows = json.loads(text)["sections"]
    return anchors_from([row[3] for row in rows if row[3] is not None])


def _sections(rows: Any) -> tuple[Section, ...]:
    # Interned as a parse interns them (okf.markdown): a breadcrumb repeats its section's and
    # its parents' headings, and headings, anchors, fragments and footnote labels recur across
    # a bundle; decoded JSON would give each its own copy.
    return tuple(
        Section(as_int(i), interned_or_none(h), as_int(lv), interned_or_none(a), as_int(s),
                as_int(e), tuple([interned_str(b) for b in crumbs]))
        for i, h, lv, a, s, e, crumbs in rows
    )


# The same objects as the checked decoders make, from a text known good: most reads of a
# document's facts are of its own text, and checking each value cost a third of a decode.
def _trusted_facts(value: Any) -> MarkdownFacts:
    intern = sys.intern
    sections = _trusted_sections(value["sections"])
    return MarkdownFacts(
        links=tuple(
            Link(r, n, t if t is None else intern(t), c if c is None else intern(c),
                 f if f is None else intern(f), bool(d))
            for r, n, t, c, f, d in value["links"]
        ),
        sections=sections,
        anchors=anchors_of(sections),
        footnote_refs=tuple(FootnoteRef(intern(a), n) for a, n in value["refs"]),
        footnote_defs=tuple(FootnoteDef(intern(a), n, t) for a, n, t in value["defs"]),
    )


def _trusted_sections(rows: Any) -> tuple[Section, ...]:
    intern = sys.intern
    return tuple(
        Section(i, h if h is None else intern(h), lv, a if a is None else intern(a), s, e,
                tuple([intern(b) for b in crumbs]))
        for i, h, lv, a, s, e, crumbs in rows
    )


# What damaged facts raise: a frame that does not decompress (zstd_frames.DamagedFrame) or
# bytes that are not UTF-8 are ValueErrors too.
DAMAGED = (KeyError, TypeError, ValueError, IndexError)


def packed_facts(text: str) -> str | bytes:
    """The facts' JSON text as a document holds it and the parse cache stores it: a short
    text as it is, a longer one compressed (``zstd_frames``: its length, then one frame)."""
    if len(text) < MIN_PACKED:
        return text
    return packed_frame(text.encode("utf-8", "surrogatepass"))


def facts_text(data: str | bytes) -> str:
    """The text :func:`packed_facts` held (``ValueError`` for bytes that are not such)."""
    if isinstance(data, str):
        return data
    return unpacked_frame(data).decode("utf-8", "surrogatepass")


class PackedFacts:
    """One document's ``FormatRules.markdown``: its facts kept as packed JSON text.

    Given the parse cache's text, it decodes that text on each call; given none, the first
    call parses the body and keeps the facts' text. A text that does not decode (a damaged
    row) is replaced by the parse of the body, which gives the facts the row should have held.
    Two threads calling first at once each parse (equal facts); either text kept is the same.
    """

    __slots__ = ("_packed", "_checked", "_sections_checked", "_spans", "_named", "from_cache",
                 "used")

    def __init__(self, cached: str | bytes | None = None, spans: bytes | None = None) -> None:
        # The parse cache's row is kept as it is read: it is the form held here.
        self._packed = cached
        # A text of our own making decodes; the parse cache's is checked by its first decode.
        self._checked = False
        self._sections_checked = False  # the text's sections decoded here (and so are good)
        # The sections' line spans (spans_bytes): the parse cache's with its text, or made
        # with the facts here. Known, they answer the section count and a walk's locators.
        self._spans = spans if cached is not None else None
        self._named = -1  # the links' concept IDs as bits (_named_bits), once made here
        self.from_cache = cached is not None  # the facts came from the parse cache's row
        self.used = False  # the facts were asked for at least once (the work counters' view)

    def __call__(self, doc: Document) -> MarkdownFacts:
        self.used = True
        packed = self._packed
        if packed is not None:
            if self._checked:
                return facts_of_json(facts_text(packed), known_good=True)
            try:
                facts = facts_of_json(facts_text(packed))
            except DAMAGED:
                pass
            else:
                if self._spans is None or self._spans == spans_bytes(facts.sections):
                    self._remember(facts)
                    return facts
                # The row's spans and text disagree (see sections()): the body is parsed.
        facts = parse_markdown(doc)
        self._packed = packed_facts(facts_json(facts))
        self._remember(facts)
        return facts

    def _remember(self, facts: MarkdownFacts) -> None:
        """What is kept of facts made here besides their text: that the text decodes, and the
        small answers asked of every document (its section count, which IDs its links name)."""
        self._checked = True
        self._sections_checked = True
        self._spans = spans_bytes(facts.sections)
        self._named = _named_bits(link.concept_id for link in facts.links)

    def may_link_to(self, doc: Document, concept_ids: Collection[str]) -> bool:
        """Whether a link of the document may name one of ``concept_ids``: ``False`` is sure,
        ``True`` may not be (the facts then say). A new concept asks it of every document
        (which of them now link to it?); this answers from a few bits kept per document
        instead of decoding every document's facts. Facts never made (a document built but not
        parsed yet) are not made for this: its body's text tells (``okf.mentions``)."""
        if self._named < 0:
            if self._packed is None:
                return bool(mentions.named(doc.text, doc.body_start, None, tuple(concept_ids),
                                            doc.path))
            self(doc)
        named = self._named
        return any(named >> (hash(c) & _NAMED_BITS_MASK) & 1 for c in concept_ids)

    def sections(self, doc: Document) -> tuple[Section, ...]:
        """``self(doc).sections``, decoding the sections only: checked while the text is not
        known good (the parse cache's, never decoded here), which makes none of its links. A
        restarted server's first walk asks hundreds of concepts for their sections and
        section count, and no other fact of theirs."""
        self.used = True
        packed = self._packed
        if packed is not None:
            if self._checked or self._sections_checked:  # the sections decoded here before
                return sections_of_json(facts_text(packed), known_good=True)
            try:
                sections = sections_of_json(facts_text(packed))
            except DAMAGED:
                pass  # the whole facts are parsed again below
            else:
                spans = spans_bytes(sections)
                if self._spans is None or self._spans == spans:
                    self._sections_checked = True
                    self._spans = spans
                    return sections
                # The row's spans and text disagree: one of them is damaged, so neither is
                # trusted and the body is parsed below.
                self._packed, self._spans = None, None
        return self(doc).sections

    def section_spans(self, doc: Document) -> tuple[int, ...]:
        """The sections' (start, end) line numbers, flat: from the spans kept with the facts,
        or from the sections decoded (then kept)."""
        spans = self._spans
        if spans is None:
            self.sections(doc)
            spans = self._spans
            assert spans is not None  # sections() keeps them, whichever way it made them
        return spans_of_bytes(spans)

    def anchors(self, doc: Document) -> Collection[str]:
        """``self(doc).anchors``, no section made once the text is known good."""
        self.used = True
        packed = self._packed
        if packed is not None and self._checked:
            return anchors_of_json(facts_text(packed))
        return self(doc).anchors

    def section_count(self, doc: Document) -> int:
        """``len(self(doc).sections)``, decoding the sections only if they were never made
        here."""
        spans = self._spans
        return len(spans) // _SPAN.size if spans is not None else len(self.sections(doc))

    @property
    def computed(self) -> bool:
        """Whether the facts are known (parsed here or read from the parse cache)."""
        return self._packed is not None

    def text(self, doc: Document) -> str | None:
        """The facts' JSON text, checked, or ``None`` when they were never computed."""
        stored = self.stored(doc)
        return None if stored is None else facts_text(stored[0])

    def stored(self, doc: Document) -> tuple[str | bytes, bytes] | None:
        """What a save stores (``None`` when the facts were never computed): the facts as held
        (:func:`packed_facts`), checked, written as held (no decompressing to store them, no
        compressing to read them back), and their sections' spans, made when unknown."""
        if self._packed is None:
            return None
        if not self._checked:
            self(doc)  # decodes the cached text once, or replaces a damaged one
        if self._spans is None:
            self.sections(doc)
        packed, spans = self._packed, self._spans
        assert packed is not None and spans is not None  # both kept by the decode or parse
        return packed, spans


def packed_section_spans(doc: Document) -> tuple[int, ...]:
    """``FormatRules.section_spans`` of a document whose ``markdown`` is a :class:`PackedFacts`."""
    return _holder(doc).section_spans(doc)


def packed_section_count(doc: Document) -> int:
    """``FormatRules.section_count`` of a document whose ``markdown`` is a :class:`PackedFacts`."""
    return _holder(doc).section_count(doc)


# A document's linked concept IDs, each as one bit of 256 chosen by its hash (a Bloom filter
# of one hash): about 60 bytes a document; a page linking 13 concepts has about 5% of bits set,
# so a new concept decodes about one document in twenty to learn which ones link to it.
_NAMED_BITS_MASK = 255


def _named_bits(concept_ids: Iterable[str | None]) -> int:
    bits = 0
    for concept_id in concept_ids:
        if concept_id is not None:
            bits |= 1 << (hash(concept_id) & _NAMED_BITS_MASK)
    return bits


def packed_may_link_to(doc: Document, concept_ids: Collection[str]) -> bool:
    """``FormatRules.may_link_to`` of a document whose ``markdown`` is a :class:`PackedFacts`."""
    return _holder(doc).may_link_to(doc, concept_ids)


def packed_anchors(doc: Document) -> Collection[str]:
    """``FormatRules.anchors`` of a document whose ``markdown`` is a :class:`PackedFacts`."""
    return _holder(doc).anchors(doc)


def packed_sections(doc: Document) -> tuple[Section, ...]:
    """``FormatRules.sections`` of a document whose ``markdown`` is a :class:`PackedFacts`."""
    return _holder(doc).sections(doc)


def _holder(doc: Document) -> PackedFacts:
    holder = doc.rules.markdown
    if not isinstance(holder, PackedFacts):
        raise TypeError("the document's rules keep no packed facts")
    return holder


def as_str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("expected a string")
    return value


def as_opt_str(value: Any) -> str | None:
    return None if value is None else as_str(value)


def interned_str(value: Any) -> str:
    """A string of the Markdown facts or a relation, interned as a parse interns it
    (``okf.markdown``, ``okf.relations``): read back, each would hold a copy of its own.
    (Not ``model.shared_text``, which interns only identifier-like frontmatter values.)"""
    return sys.intern(as_str(value))


def interned_or_none(value: Any) -> str | None:
    """:func:`interned_str`, or ``None``."""
    return None if value is None else interned_str(value)


def as_int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError("expected an integer")
    return value
