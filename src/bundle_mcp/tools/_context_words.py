"""``context``'s words of a document (:class:`DocumentWords`), and of every concept of a
revision at once.

A document's words are its stems by field (title, description, headings, body) and by
section, one character a stem (:mod:`._stem_codes`), with the card an item shows of its page.
Each document keeps them (``_context_index.CONTEXT_WORDS``), and the parse cache keeps a row of
them per file's bytes for the next process.

A restarted server's first question needs the words of most concepts at once (the bundle's
length norms, the holders of each stem), and decoding ten thousand rows one by one costs
seconds (0.3 ms a row at 9,978 concepts). So the words of a whole revision are also kept in
a few packed parts (:func:`packed_words`, under :data:`STORED_NAME`): the stems the codes
stand for, then each group of concepts' fields in UTF-16, its sections' numbers, junk shares
and digests in arrays, its headings and cards as JSON. Read back (:func:`unpacked_words`), a
document's words cost about a tenth of a row's decoding, and are byte for byte the words the
rows give.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import re
import struct
import sys
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, overload

from ..derived import exactly
from ..model import Document
from ..okf.names import concept_name
from ..okf.properties import status_state, text_field, trust
from ._stem_codes import StemCodes, code_of, decoded, distinct, single

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

    def offsets(self) -> tuple[array[int], array[int]]:
        """Each section's start in the body's codes, and its heading's in ``headings``."""
        numbers, step = self._numbers, self._FIELDS
        return numbers[2::step], numbers[5::step]

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


# The names a revision's words are kept under (InboundHint.keep_bytes): the stems, then each
# group of concepts by its number. The packing's version is in the magic, with the byte order.
STORED_NAME = "context-words"
STEMS_PART = "stems"
_MAGIC = b"bcw3" + (b"L" if sys.byteorder == "little" else b"B")
_DIGEST_SIZE = 16  # of the stems' list: the groups of one writer name it
# A group's header: its first concept's position, its concepts, its sections, the stems it may
# use, the names' JSON length in bytes; its text runs to the end.
_HEADER = struct.Struct("<QQQQQ")
_NUMBERS = 8  # SectionTable's numbers a section
_DIGEST = 16  # and its digest's bytes
_FIELDS = 4  # title, description, headings, body
# Codes from here up take four bytes in UTF-16 (numbers from 0xF800: _stem_codes.single).
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
_BMP_NUMBERS = 0xF800
# Concepts a group holds: at least GROUP_CONCEPTS, and no more than MAX_GROUPS groups. A
# group is packed, compressed and written before the next is made (about 1 MB at 1,000
# concepts of the bench bundle): a server's highest memory is its cold warm-up's, and the
# words of the whole bundle in one value (25 MB, 12 compressed) raised it by 30 MiB.
GROUP_CONCEPTS = 1000
MAX_GROUPS = 16
CHECK_EVERY = 128  # documents read back between two checks (unpacked_words)


def group_size(concepts: int) -> int:
    return max(GROUP_CONCEPTS, -(-concepts // MAX_GROUPS))


def packed_words(concept_ids: Sequence[str], every: Sequence[DocumentWords]
                 ) -> dict[str, Iterable[bytes]] | None:
    """The words of every concept (``every``, in ``concept_ids``' order) as parts to keep,
    by name: the stems (:data:`STEMS_PART`), and each group's, in pieces made as they are
    read. ``None`` when one document is wide (its stems are numbered past single characters):
    such a bundle is read back row by row."""
    for words in every:
        # At width 1 a field's length in characters is its number of stems (``lengths``).
        if words.width != 1 or (len(words.title), len(words.description), len(words.headings),
                                len(words.body)) != words.lengths:
            return None
    stems = json.dumps(list(CODES.stems(range(len(CODES)))), ensure_ascii=False,
                       separators=(",", ":")).encode()
    digest = hashlib.sha256(stems).digest()[:_DIGEST_SIZE]
    parts: dict[str, Iterable[bytes]] = {STEMS_PART: (_MAGIC, digest, stems)}
    size = group_size(len(every))
    for number, first in enumerate(range(0, len(every), size)):
        parts[str(number)] = _pieces(first, list(concept_ids[first:first + size]),
                                     every[first:first + size], digest, len(CODES))
    return parts


def _pieces(first: int, concept_ids: list[str], every: Sequence[DocumentWords], digest: bytes,
            stems: int) -> Iterator[bytes]:
    """A group's header, names (JSON) and arrays, then each document's fields in UTF-16."""
    spans, counts = array("I"), array("I")
    numbers, junk = array("i"), array("d")
    digests: list[bytes] = []
    headings: list[str] = []
    cards: list[list[Any]] = []
    astral = stems > _BMP_NUMBERS
    for words in every:
        for field in (words.title, words.description, words.headings, words.body):
            spans.append(2 * len(field) + (2 * len(_ASTRAL.findall(field)) if astral else 0))
        table = words.sections
        counts.append(len(table))
        numbers.extend(table._numbers)
        junk.extend(table._junk)
        digests.append(table._digests)
        headings.extend(table._headings)
        cards.append(words.card.row())
    names = json.dumps({"concepts": concept_ids, "headings": headings, "cards": cards},
                       ensure_ascii=False, separators=(",", ":")).encode()
    yield b"".join((_MAGIC, digest, _HEADER.pack(first, len(counts), len(junk), stems,
                                                 len(names)),
                    names, spans.tobytes(), counts.tobytes(), numbers.tobytes(),
                    junk.tobytes(), b"".join(digests)))
    for words in every:
        # A code is never a surrogate (_stem_codes.single): every field encodes.
        yield "".join((words.title, words.description, words.headings,
                       words.body)).encode("utf-16-le")


def unpacked_words(read: Callable[[str], bytes | None], concept_ids: Sequence[str],
                   check: Callable[[], None] = lambda: None
                   ) -> tuple[DocumentWords, ...] | None:
    """The words :func:`packed_words` packed (``read`` gives each part by name, ``None`` when
    it is not kept), each in this process's numbering of stems; ``None`` unless every part
    reads back whole, from one writer, as the words of exactly ``concept_ids`` (the snapshot's
    concepts, in order): exact lengths, every code a stem's, every section's heading and
    words inside its document's. Each field is decoded from its own bytes. ``check`` is called
    between groups and every :data:`CHECK_EVERY` documents (a cancellation, or the warm-up
    standing aside for a call: reading every group takes a third of a second at 9,978
    concepts)."""
    head = len(_MAGIC) + _DIGEST_SIZE
    kept = read(STEMS_PART)
    if kept is None or not kept.startswith(_MAGIC):
        return None
    digest = kept[len(_MAGIC):head]
    try:
        stems = json.loads(kept[head:])
    except (UnicodeDecodeError, ValueError):
        return None
    if not (isinstance(stems, list) and all(type(s) is str for s in stems)):
        return None
    # Interned: the stems' holders read back name the same stems (``_context_index``), and
    # the process's stem table keeps these: each stem is then one string (2.6 MiB at 9,978
    # concepts).
    stems = list(map(sys.intern, stems))
    renumber = _renumbering(stems)
    if renumber is None:
        return None
    out: list[DocumentWords] = []
    size = group_size(len(concept_ids))
    starts = range(0, len(concept_ids), size)
    # The next group is read (a row read and inflated, both outside the interpreter lock)
    # while this one is decoded: at 50,000 concepts inflating the groups took 1.5 s of 5.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="bundle-mcp-words") as ahead:
        coming = ahead.submit(read, "0") if starts else None
        for number, first in enumerate(starts):
            check()
            assert coming is not None  # submitted for every group
            data = coming.result()
            coming = ahead.submit(read, str(number + 1)) if number + 1 < len(starts) else None
            group = _group(data, digest, first, concept_ids[first:first + size],
                           len(stems), renumber, check)
            if group is None:
                if coming is not None:
                    coming.cancel()
                return None
            out.extend(group)
    return tuple(out)


def _group(data: bytes | None, digest: bytes, first: int, concept_ids: Sequence[str],
           stems: int, renumber: Callable[[str], str], check: Callable[[], None]
           ) -> list[DocumentWords] | None:
    """One group's words, or ``None`` unless it reads back whole as the words of exactly
    ``concept_ids``, from the writer of the stems (``digest``)."""
    start = len(_MAGIC) + _DIGEST_SIZE + _HEADER.size
    if (data is None or len(data) < start or not data.startswith(_MAGIC)
            or data[len(_MAGIC):len(_MAGIC) + _DIGEST_SIZE] != digest):
        return None
    at, count, sections, used, names_length = _HEADER.unpack_from(
        data, len(_MAGIC) + _DIGEST_SIZE)
    sizes = (names_length, 4 * _FIELDS * count, 4 * count, 4 * _NUMBERS * sections,
             8 * sections, _DIGEST * sections)
    if (at, count) != (first, len(concept_ids)) or used > stems or (
            len(data) < start + sum(sizes)):
        return None
    view = memoryview(data)
    pieces = []
    for size in sizes:
        pieces.append(view[start:start + size])
        start += size
    try:
        names = json.loads(bytes(pieces[0]))
    except (UnicodeDecodeError, ValueError):
        return None
    spans, counts, numbers, junk = array("I"), array("I"), array("i"), array("d")
    spans.frombytes(pieces[1])
    counts.frombytes(pieces[2])
    numbers.frombytes(pieces[3])
    junk.frombytes(pieces[4])
    if not (isinstance(names, dict) and names.get("concepts") == list(concept_ids)
            and sum(counts) == sections and sum(spans) == len(data) - start):
        return None
    headings, cards = names.get("headings"), names.get("cards")
    if not (isinstance(headings, list) and isinstance(cards, list)
            and len(headings) == sections and len(cards) == count
            and all(type(h) is str for h in headings)):
        return None
    try:
        return list(_documents(view[start:], renumber, spans, counts, numbers, junk,
                               bytes(pieces[5]), headings, cards, check))
    except (TypeError, ValueError):  # UnicodeDecodeError is a ValueError
        return None


def _renumbering(stems: list[str]) -> Callable[[str], str] | None:
    """How to read a field coded in the numbering ``stems`` lists (the writing process's) in
    this process's: ``ValueError`` for a field holding a code no stem has. ``None`` when this
    process numbers one of the stems past single characters."""
    narrow = CODES.narrow_codes(stems)
    if narrow is None:
        return None
    writer = "".join(map(single, range(len(stems))))
    # A code past the writer's last (single codes grow with their numbers).
    past = re.compile(f"[{re.escape(single(len(stems)))}-\U0010ffff]").search
    if narrow == writer:  # a process that met these stems first numbers them alike

        def same(field: str) -> str:
            if past(field):
                raise ValueError("a code with no stem")
            return field

        return same
    # str.translate indexes this table by code point: each of the writer's codes maps to this
    # process's code of the same stem, any other code point to a surrogate (no code is one).
    table = ["\udfff"] * (ord(writer[-1]) + 1)
    for old, new in zip(writer, narrow, strict=True):
        table[ord(old)] = new
    joined = "".join(table)

    def renumbered(field: str) -> str:
        if past(field):
            raise ValueError("a code with no stem")
        found = field.translate(joined)
        if "\udfff" in found:
            raise ValueError("a code with no stem")
        return found

    return renumbered


def _documents(text: memoryview, renumber: Callable[[str], str], spans: array[int],
               counts: array[int], numbers: array[int], junk: array[float], digests: bytes,
               headings: list[str], cards: list[Any], check: Callable[[], None]
               ) -> Iterator[DocumentWords]:
    at = section = 0
    span = 0
    for n, card in enumerate(cards):
        if n % CHECK_EVERY == 0:
            check()
        fields = []
        for _ in range(_FIELDS):
            size = spans[span]
            span += 1
            fields.append(renumber(codecs.utf_16_le_decode(text[at:at + size], "strict",
                                                           True)[0]))
            at += size
        title, description, heading_text, body = fields
        last = section + counts[n]
        table_numbers = numbers[_NUMBERS * section:_NUMBERS * last]
        # Each heading's codes lie in the headings in order, each section's words in the body.
        if sum(table_numbers[6::_NUMBERS]) != len(heading_text) or (
                table_numbers and max(table_numbers[3::_NUMBERS]) > len(body)):
            raise ValueError("a section outside its document")
        yield DocumentWords(
            title, description, heading_text, body,
            (len(title), len(description), len(heading_text), len(body)),
            SectionTable(tuple(map(sys.intern, headings[section:last])), table_numbers,
                         junk[section:last], digests[_DIGEST * section:_DIGEST * last],
                         heading_text, 1),
            1, Card.from_row(card))
        section = last
