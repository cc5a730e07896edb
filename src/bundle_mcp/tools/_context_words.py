"""``context``'s words of a document (:class:`DocumentWords`), and of every concept of a
revision at once.

A document's words are its stems by field (title, description, headings, body) and by
section, one character a stem (:mod:`._stem_codes`), with the card an item shows of its page.
Each document keeps them (``_context_index.CONTEXT_WORDS``), and the parse cache keeps a row of
them per file's bytes for the next process.

A restarted server's first question needs the words of most concepts at once (the bundle's
length norms, the holders of each stem), and decoding ten thousand rows one by one costs
seconds (0.3 ms a row at 9,978 concepts). So the words of a whole revision are also kept as
one packed value (:func:`packed_words`, under :data:`STORED_NAME`): every field's codes in one
UTF-16 text, the sections' numbers, junk shares and digests in arrays, the headings and cards
as JSON. Read back (:func:`unpacked_words`), each document's words are slices of those, about
a tenth of a row's decoding, and byte for byte the words the rows give.
"""

from __future__ import annotations

import json
import re
import struct
import sys
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

from ..derived import exactly
from ..model import Document
from ..okf.names import concept_name
from ..okf.properties import status_state, text_field, trust
from ._stem_codes import StemCodes, code_of, decoded, distinct, single, single_number

# Every stem this process has met, numbered: a document keeps its words as their codes
# (_stem_codes). The process's, not a snapshot's: a document's words outlive snapshots.
CODES = StemCodes()


@dataclass(frozen=True, slots=True)
class SectionWords:
    """One non-blank section: where it is, where its words are in the body's codes, and how
    much of it is prose."""

    heading: str
    line_start: int
    line_end: int
    start: int  # offsets of its words' codes in DocumentWords.body
    end: int
    length: int  # stems, heading line included
    heading_words: str  # codes of the heading's stems
    heading_length: int  # its stems
    junk: float  # the share of its lines that are links, table rows or code
    digest: str  # of the normalised text; "" when too short to be a copy of anything


class SectionTable(Sequence[SectionWords]):
    """A document's sections, packed: seven numbers a section in one array, the junk shares in
    another, the digests' 16 bytes in one bytes object, and each heading's codes a slice of the
    document's ``headings`` field (which is every section's heading codes in order). An object
    per section with its own digest and heading strings cost about 265 bytes, this about 56
    (60,000 sections in the 9,978-concept bench bundle). Indexing makes a :class:`SectionWords`;
    the scoring reads the heading codes alone (:meth:`heading_words`)."""

    __slots__ = ("_headings", "_numbers", "_junk", "_digests", "_heading_text", "_width")
    _FIELDS = 8  # line_start, line_end, start, end, length, heading start, heading_length, digest?

    def __init__(self, headings: tuple[str, ...], numbers: array[int], junk: array[float],
                 digests: bytes, heading_text: str, width: int) -> None:
        self._headings, self._numbers, self._junk = headings, numbers, junk
        self._digests, self._heading_text, self._width = digests, heading_text, width

    @classmethod
    def of(cls, sections: Sequence[SectionWords], heading_text: str, width: int
           ) -> SectionTable:
        """The table of ``sections``, whose heading codes are ``heading_text`` in order
        (``ValueError`` otherwise: a kept row that does not fit)."""
        numbers, junk, digests = array("i"), array("d"), bytearray()
        at = 0
        for s in sections:
            span = len(s.heading_words)
            if heading_text[at:at + span] != s.heading_words or span != s.heading_length * width:
                raise ValueError("a section's heading is not where the headings say")
            numbers.extend((s.line_start, s.line_end, s.start, s.end, s.length, at,
                            s.heading_length, 1 if s.digest else 0))
            junk.append(s.junk)
            digests += bytes.fromhex(s.digest) if s.digest else bytes(16)
            at += span
        if at != len(heading_text) or len(digests) != 16 * len(junk):
            raise ValueError("the headings hold more than the sections' headings")
        return cls(tuple(s.heading for s in sections), numbers, junk, bytes(digests),
                   heading_text, width)

    def __len__(self) -> int:
        return len(self._headings)

    @overload
    def __getitem__(self, index: int) -> SectionWords: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[SectionWords]: ...

    def __getitem__(self, index: int | slice) -> SectionWords | Sequence[SectionWords]:
        if isinstance(index, slice):
            return [self[k] for k in range(*index.indices(len(self)))]
        k = range(len(self))[index]  # IndexError past the end, negative from the end
        at = self._FIELDS * k
        line_start, line_end, start, end, length, heading_at, heading_length, has_digest = (
            self._numbers[at:at + self._FIELDS])
        return SectionWords(
            self._headings[k], line_start, line_end, start, end, length,
            self._heading_text[heading_at:heading_at + heading_length * self._width],
            heading_length, self._junk[k],
            self._digests[16 * k:16 * k + 16].hex() if has_digest else "")

    def scoring(self) -> Iterator[tuple[int, int, int, float]]:
        """Each section's (start, length, heading_length, junk), read from the arrays: what the
        snapshot's norms need, without making an object per section."""
        numbers, step = self._numbers, self._FIELDS
        return zip(numbers[2::step], numbers[4::step], numbers[6::step], self._junk,
                   strict=True)

    def heading_words(self, k: int) -> str:
        """The codes of section ``k``'s heading (``self[k].heading_words``, nothing else made)."""
        at = self._FIELDS * k
        heading_at = self._numbers[at + 5]
        return self._heading_text[heading_at:heading_at + self._numbers[at + 6] * self._width]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SectionTable):
            return NotImplemented
        return (self._headings == other._headings and self._numbers == other._numbers
                and self._junk == other._junk and self._digests == other._digests
                and self._heading_text == other._heading_text and self._width == other._width)

    __hash__ = None  # type: ignore[assignment]  # equal by value, and mutable arrays inside

    def __repr__(self) -> str:
        return f"SectionTable({list(self)!r})"


@dataclass(frozen=True, slots=True)
class Card:
    """What a context item shows of its page, and what weighs the page's score, from its
    document: kept with its words, so that ranking and pricing an item never builds it."""

    title: str  # okf.names.concept_name
    type: str
    trust: str
    stale_after: str | None  # the raw ``stale_after`` when a string
    status: str | None  # the effective status (``None``: not a valid one)

    @classmethod
    def of(cls, doc: Document) -> Card:
        fm = doc.fm
        after = fm.get("stale_after")
        return cls(concept_name(doc), text_field(fm, "type"), trust(fm),
                   after if isinstance(after, str) else None, status_state(fm)["effective"])

    def row(self) -> list[Any]:
        """Its kept form (JSON)."""
        return [self.title, self.type, self.trust, self.stale_after, self.status]

    @classmethod
    def from_row(cls, row: Any) -> Card:
        """The card :meth:`row` kept; ``TypeError`` or ``ValueError`` when ``row`` is not one.
        The short, repeated strings are interned, as the documents' are."""
        title, kind, trusted, stale_after, status = exactly(list, row)
        return cls(exactly(str, title), exactly(str, kind), sys.intern(exactly(str, trusted)),
                   _maybe(stale_after), _maybe(status))


def _maybe(value: Any) -> str | None:
    return None if value is None else sys.intern(exactly(str, value))


@dataclass(frozen=True, slots=True)
class DocumentWords:
    """A document's stems by field, each field a string of the stems' codes
    (:mod:`._stem_codes`): one character a word, two in a ``width`` 2 document."""

    title: str
    description: str
    headings: str
    body: str
    lengths: tuple[int, int, int, int]  # stems per field, in FIELDS order
    sections: SectionTable
    width: int
    card: Card

    def code(self, stem: str) -> str | None:
        """The stem's code in this document's fields, ``None`` when it cannot be in them."""
        return code_of(CODES, stem, self.width)

    def stems(self, text: str) -> list[str]:
        """The stems of one of its coded fields (or a slice of one at a word's start)."""
        return decoded(CODES, text, self.width)

    def field_stems(self, text: str) -> frozenset[str]:
        """The distinct stems of one of its coded fields (a title, a section's heading)."""
        return frozenset(distinct(CODES, (text,), self.width))

    def vocabulary(self) -> set[str]:
        """Its distinct stems. Read from the fields when the snapshot's holders are built,
        not kept: a tuple per document cost about 22 MiB on a 9,978-concept bundle."""
        return distinct(CODES, (self.title, self.description, self.headings, self.body),
                        self.width)


def narrow_code(stem: str) -> str | None:
    """The stem's code in a narrow document (width 1: every document but one holding a stem
    numbered past a million), ``None`` when no such document can hold it."""
    return code_of(CODES, stem, 1)


# The name a revision's words are kept under (InboundHint.keep_bytes); the packing's version is
# in its magic, with the byte order of the arrays.
STORED_NAME = "context-words"
_MAGIC = b"bcw1" + (b"L" if sys.byteorder == "little" else b"B")
# The names' JSON length in bytes, the number of concepts, of sections, the text's bytes.
_HEADER = struct.Struct("<QQQQ")
_NUMBERS = 8  # SectionTable's numbers a section
_DIGEST = 16  # and its digest's bytes


def packed_words(concept_ids: Sequence[str], every: Sequence[DocumentWords]) -> bytes | None:
    """The words of every concept (``every``, in ``concept_ids``' order) as one value; ``None``
    when one document is wide (its stems are numbered past single characters): such a bundle
    is read back row by row."""
    texts: list[str] = []
    spans, counts = array("I"), array("I")
    numbers, junk = array("i"), array("d")
    digests: list[bytes] = []
    headings: list[str] = []
    cards: list[list[Any]] = []
    for words in every:
        fields = (words.title, words.description, words.headings, words.body)
        # At width 1 a field's length in characters is its number of stems (``lengths``).
        if words.width != 1 or tuple(map(len, fields)) != words.lengths:
            return None
        texts.extend(fields)
        spans.extend(words.lengths)
        table = words.sections
        counts.append(len(table))
        numbers.extend(table._numbers)
        junk.extend(table._junk)
        digests.append(table._digests)
        headings.extend(table._headings)
        cards.append(words.card.row())
    text = "".join(texts)
    highest = single_number(max(text)) if text else -1
    names = json.dumps(
        {"concepts": list(concept_ids), "stems": list(CODES.stems(range(highest + 1))),
         "headings": headings, "cards": cards},
        ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    coded = text.encode("utf-16-le")  # a code is never a surrogate (_stem_codes.single)
    return b"".join((_MAGIC, _HEADER.pack(len(names), len(counts), len(junk), len(coded)),
                     names, spans.tobytes(), counts.tobytes(), numbers.tobytes(),
                     junk.tobytes(), b"".join(digests), coded))


def unpacked_words(data: bytes | None, concept_ids: Sequence[str]
                   ) -> tuple[DocumentWords, ...] | None:
    """The words :func:`packed_words` packed, each in this process's numbering of stems, or
    ``None`` unless ``data`` reads back whole as the words of exactly ``concept_ids`` (the
    snapshot's concepts, in order): exact lengths, every code a stem's, every section's heading
    and words inside its document's."""
    start = len(_MAGIC) + _HEADER.size
    if data is None or len(data) < start or not data.startswith(_MAGIC):
        return None
    names_length, count, sections, text_length = _HEADER.unpack_from(data, len(_MAGIC))
    sizes = (names_length, 4 * 4 * count, 4 * count, 4 * _NUMBERS * sections, 8 * sections,
             _DIGEST * sections, text_length)
    if count != len(concept_ids) or len(data) != start + sum(sizes):
        return None
    pieces = []
    for size in sizes:
        pieces.append(data[start:start + size])
        start += size
    try:
        names = json.loads(pieces[0])
        text = pieces[6].decode("utf-16-le")
    except (UnicodeDecodeError, ValueError):
        return None
    spans, counts, numbers, junk = array("I"), array("I"), array("i"), array("d")
    spans.frombytes(pieces[1])
    counts.frombytes(pieces[2])
    numbers.frombytes(pieces[3])
    junk.frombytes(pieces[4])
    if not (isinstance(names, dict) and names.get("concepts") == list(concept_ids)
            and sum(counts) == sections and sum(spans) == len(text)):
        return None
    stems, headings, cards = names.get("stems"), names.get("headings"), names.get("cards")
    if not (isinstance(stems, list) and isinstance(headings, list) and isinstance(cards, list)
            and len(headings) == sections and len(cards) == count
            and all(type(s) is str for s in stems) and all(type(h) is str for h in headings)):
        return None
    coded = _renumbered(text, stems)
    if coded is None:
        return None
    try:
        return tuple(_documents(coded, spans, counts, numbers, junk, pieces[5], headings, cards))
    except (TypeError, ValueError):
        return None


def _renumbered(text: str, stems: list[str]) -> str | None:
    """``text`` coded in the numbering ``stems`` lists (the writing process's), in this
    process's; ``None`` when it holds a code no stem has, or this process numbers a stem past
    single characters."""
    # Every character is a code below the writer's count (a regular expression finds one past
    # it in C; ``max`` over the text took a quarter of a second).
    if re.search(f"[{re.escape(single(len(stems)))}-\U0010ffff]", text):
        return None
    narrow = CODES.narrow_codes(stems)
    if narrow is None:
        return None
    writer = "".join(map(single, range(len(stems))))
    if narrow == writer:  # a process that met these stems first numbers them alike
        return text
    # str.translate indexes this table by code point: each of the writer's codes maps to this
    # process's code of the same stem (no code point in between is one: _stem_codes.single).
    table = ["\udfff"] * (ord(writer[-1]) + 1)
    for old, new in zip(writer, narrow, strict=True):
        table[ord(old)] = new
    return text.translate("".join(table))


def _documents(text: str, spans: array[int], counts: array[int], numbers: array[int],
               junk: array[float], digests: bytes, headings: list[str], cards: list[Any]
               ) -> Iterator[DocumentWords]:
    at = section = 0
    for n, card in enumerate(cards):
        title_length, description_length, headings_length, body_length = spans[4 * n:4 * n + 4]
        title = text[at:at + title_length]
        at += title_length
        description = text[at:at + description_length]
        at += description_length
        heading_text = text[at:at + headings_length]
        at += headings_length
        body = text[at:at + body_length]
        at += body_length
        last = section + counts[n]
        table_numbers = numbers[_NUMBERS * section:_NUMBERS * last]
        # Each heading's codes lie in the headings in order, each section's words in the body.
        if sum(table_numbers[6::_NUMBERS]) != headings_length or (
                table_numbers and max(table_numbers[3::_NUMBERS]) > body_length):
            raise ValueError("a section outside its document")
        yield DocumentWords(
            title, description, heading_text, body,
            (title_length, description_length, headings_length, body_length),
            SectionTable(tuple(map(sys.intern, headings[section:last])), table_numbers,
                         junk[section:last], digests[_DIGEST * section:_DIGEST * last],
                         heading_text, 1),
            1, Card.from_row(card))
        section = last
