"""Every concept's section line spans, kept by revision for the next process on the same files.

A walk that reaches a concept over incoming edges reaches its sections too, and names each
one by its line span (``okf.sections.locator``). A warm server reads the spans from the
concept's document; a restarted one has built no document yet, and building one from its
parse cache row (the file read and hashed, the row decoded) cost about 0.3 ms: a depth-2 walk
from the bench bundle's hub built 523 of them for nothing but their spans, about 160 ms of its
first call.

So the graph's warm-up step keeps all the spans of a snapshot loaded from the files under its
revision (``InboundHint.keep_bytes``), and a later process on the same files reads them back
whole (a few milliseconds) for any concept whose document is not built. They are what the
documents give: a pure function of the revision, and any doubt about the bytes (a foreign
value, sizes that disagree, a span that ends before it starts) means they are not used.

Layout: a magic, the number of concepts and of span values, then one count a concept (its
span values, two a section) in :func:`span_order`, then the values, ``array("I")``'s machine
bytes (the parse cache is this machine's own).
"""

from __future__ import annotations

import itertools
import operator
import struct
from array import array
from collections.abc import Mapping
from dataclasses import dataclass

from ..cancel import CancelToken
from ..model import Concepts, Document

__all__ = ["SPANS_NAME", "KeptSpans", "packed_spans", "span_order", "unpacked_spans"]

SPANS_NAME = "section-spans/1"  # the kept bytes' name under a revision
_MAGIC = b"okf-spans/1\n"
_HEADER = struct.Struct("<II")  # concepts, span values


def span_order(concepts: Mapping[str, Document]) -> tuple[str, ...]:
    """The concept IDs the kept spans follow: every file's that would be a concept if it
    parses (a broken one holds no span), so the order is the revision's and no document is
    built to know it."""
    return tuple(concepts.paths if isinstance(concepts, Concepts) else concepts)


@dataclass(frozen=True, slots=True)
class KeptSpans:
    """The kept spans as read: concept ID → its place, and each place's slice of ``values``
    (``starts[n]:starts[n + 1]``)."""

    places: Mapping[str, int]
    starts: array[int]
    values: array[int]

    def of(self, concept_id: str) -> tuple[int, ...] | None:
        """The concept's spans flat, as ``Document.section_spans`` gives them; ``None`` for an
        ID the revision has no file for."""
        place = self.places.get(concept_id)
        if place is None:
            return None
        return tuple(self.values[self.starts[place]:self.starts[place + 1]])


def packed_spans(concepts: Mapping[str, Document], token: CancelToken) -> bytes:
    """Every concept's spans in :func:`span_order`, as :func:`unpacked_spans` reads them (each
    concept's document is built: the warm-up has built them by then)."""
    counts, values = array("I"), array("I")
    for concept_id in span_order(concepts):
        token.check()
        spans = concepts[concept_id].section_spans if concept_id in concepts else ()
        counts.append(len(spans))
        values.extend(spans)
    return b"".join((_MAGIC, _HEADER.pack(len(counts), len(values)), counts.tobytes(),
                     values.tobytes()))


def unpacked_spans(data: bytes | None, order: tuple[str, ...]) -> KeptSpans | None:
    """What :func:`packed_spans` kept for concepts in ``order``; ``None`` when there is none or
    it does not fit: another number of concepts or values, an odd count, a line number below
    one, or a span ending before it starts."""
    head = len(_MAGIC) + _HEADER.size
    if data is None or len(data) < head or not data.startswith(_MAGIC):
        return None
    concepts, count = _HEADER.unpack_from(data, len(_MAGIC))
    counts, values = array("I"), array("I")
    if concepts != len(order) or len(data) != head + (concepts + count) * counts.itemsize:
        return None
    middle = head + concepts * counts.itemsize
    counts.frombytes(data[head:middle])
    values.frombytes(data[middle:])
    if sum(counts) != count or any(n % 2 for n in counts):
        return None
    if values and (min(values) < 1 or not all(map(operator.le, values[0::2], values[1::2]))):
        return None
    starts = array("I", itertools.accumulate(counts, initial=0))
    return KeptSpans(dict(zip(order, itertools.count())), starts, values)
